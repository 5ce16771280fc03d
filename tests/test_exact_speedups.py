"""The speed-ups of the performance work change no number: each fast path equals the library code it replaces."""

import numpy as np
import pytest
from ConfigSpace import (Categorical, ConfigurationSpace, Constant, EqualsCondition, Float, ForbiddenAndConjunction,
                         ForbiddenEqualsClause, ForbiddenInClause, InCondition, Integer, OrdinalHyperparameter)

from metaopt.components.surrogates import RandomForest, nearest_indices
from metaopt.benchmarks import get_benchmark
from metaopt.space_codec import SpaceCodec
from metaopt.spaces.design_space import design_space


def _mixed_space() -> ConfigurationSpace:
    """Every hyperparameter kind, conditions on conditions, unconditional and conditional forbiddens."""
    space = ConfigurationSpace()
    kind = Categorical("kind", ["a", "b", "c"])
    space.add([kind, Float("x", (1e-4, 1.0), log=True), Integer("n", (1, 512), log=True), Integer("m", (0, 7)),
               Float("y", (-2.0, 3.0)), OrdinalHyperparameter("o", ["low", "mid", "high"]), Constant("k", 4),
               Categorical("sub", ["p", "q"]), Integer("depth", (2, 9))])
    space.add([InCondition(space["sub"], kind, ["a", "b"]), EqualsCondition(space["depth"], space["sub"], "q")])
    space.add([ForbiddenAndConjunction(ForbiddenEqualsClause(kind, "c"), ForbiddenInClause(space["m"], [0, 1])),
               ForbiddenAndConjunction(ForbiddenEqualsClause(space["sub"], "q"),
                                       ForbiddenEqualsClause(space["o"], "high"))])
    return space


def _spaces(yahpo_data) -> dict[str, ConfigurationSpace]:
    spaces = {"mixed": _mixed_space(), "design space": design_space()}
    for name in ("synthetic:mlp", "synthetic:boosting", "yahpo:lcbench", "yahpo:rbv2_xgboost", "yahpo:nb301"):
        spaces[name] = get_benchmark(name, yahpo_data).search_space
    return spaces


@pytest.mark.parametrize("n", [1, 2, 7, 500])
def test_sample_uniform_equals_configspace(yahpo_data, n):
    for name, space in _spaces(yahpo_data).items():
        codec = SpaceCodec(space)
        for seed in range(3):
            X = codec.sample_uniform(n, np.random.default_rng(seed))
            reference = SpaceCodec(space).space  # a private copy, seeded as sample_uniform seeds its own
            reference.seed(int(np.random.default_rng(seed).integers(2**31 - 1)))
            configs = reference.sample_configuration(size=n) if n > 1 else [reference.sample_configuration()]
            expected = np.array([c.get_array() for c in configs], dtype=float)
            assert X.shape == (n, codec.dim), name
            np.testing.assert_array_equal(X, expected, err_msg=f"{name}, n={n}, seed={seed}")


@pytest.mark.parametrize("n, p", [(2, 3), (40, 8), (300, 22)])
def test_random_forest_equals_scikit_learn_forest(n, p):
    from sklearn.ensemble import RandomForestRegressor

    data = np.random.default_rng(n)
    F, y, query = data.random((n, p)), data.normal(size=n), data.random((200, p))
    model = RandomForest().fit(F, y, np.random.default_rng(7))
    seed = int(np.random.default_rng(7).integers(2**31 - 1))  # what the surrogate draws first
    forest = RandomForestRegressor(n_estimators=50, max_features=1 / 3, min_samples_leaf=1, random_state=seed,
                                   n_jobs=1).fit(F, y)
    per_tree = np.stack([tree.predict(query.astype(np.float32)) for tree in forest.estimators_])
    mean, std = model.predict(query)
    np.testing.assert_array_equal(mean, per_tree.mean(axis=0))
    np.testing.assert_array_equal(std, per_tree.std(axis=0))


@pytest.mark.parametrize("n, p, k, categoricals", [(5, 3, 1, 0), (120, 8, 7, 0), (700, 13, 7, 2), (700, 29, 1, 0),
                                                   (700, 1, 7, 34)])
def test_nearest_indices_equal_scikit_learn_neighbours(n, p, k, categoricals):
    """Where no two distances tie (continuous features besides the one-hot columns), the neighbour
    surrogates' search finds what scikit-learn's NearestNeighbors (KD-tree below 16 features, brute
    force above) finds."""
    from sklearn.neighbors import NearestNeighbors

    from metaopt.features import ONE_HOT

    data = np.random.default_rng(n + p)

    def features(rows: int) -> np.ndarray:
        hot = [np.eye(5)[data.integers(0, 5, rows)] * ONE_HOT for _ in range(categoricals)]
        return np.hstack([data.random((rows, p)), *hot])

    archive, queries = features(n), features(500)
    expected = NearestNeighbors(n_neighbors=k).fit(archive).kneighbors(queries, return_distance=False)
    np.testing.assert_array_equal(nearest_indices(archive, queries, k), expected)
