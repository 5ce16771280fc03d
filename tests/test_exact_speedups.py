"""The speed-ups of the performance work change no number: each fast path equals the library code it replaces."""

import numpy as np
import pytest
from ConfigSpace import (Categorical, ConfigurationSpace, Constant, EqualsCondition, Float, ForbiddenAndConjunction,
                         ForbiddenEqualsClause, ForbiddenInClause, InCondition, Integer, OrdinalHyperparameter)

from metaopt.components.surrogates import RandomForest, nearest_indices
from metaopt.core.benchmarks import get_benchmark
from metaopt.core.space_codec import SpaceCodec
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


def _nested_space() -> ConfigurationSpace:
    """Conditions on conditions and no forbidden clauses, every draw a uniform or a bounded integer:
    the sampler that decodes all rounds from one block of the stream."""
    space = ConfigurationSpace()
    kind = Categorical("kind", ["a", "b", "c"])
    space.add([kind, Float("x", (1e-4, 1.0), log=True), Integer("n", (1, 512), log=True), Integer("m", (0, 7)),
               OrdinalHyperparameter("o", ["low", "mid", "high"]), Categorical("sub", ["p", "q"]),
               Integer("depth", (2, 9)), Float("rate", (0.0, 1.0))])
    space.add([InCondition(space["sub"], kind, ["a", "b"]), EqualsCondition(space["depth"], space["sub"], "q"),
               EqualsCondition(space["rate"], space["depth"], 9)])
    return space


def _spaces(yahpo_data) -> dict[str, ConfigurationSpace]:
    flat = ConfigurationSpace()  # no conditions or forbiddens: the round-by-round sampler
    flat.add([Categorical("c", ["a", "b", "c", "d"]), Integer("small", (1, 5)), Float("f", (0.0, 1.0)),
              OrdinalHyperparameter("o", ["low", "mid", "high"]), Integer("wide", (1, 10_000), log=True),
              Categorical("bit", [True, False]), Float("g", (1e-3, 1.0), log=True)])
    spaces = {"mixed": _mixed_space(), "nested": _nested_space(), "flat": flat, "design space": design_space()}
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
            # the codec's generator is left where ConfigSpace's draws leave the space's
            after, reference_after = codec._state.get_state(), reference.random.get_state()
            np.testing.assert_array_equal(after[1], reference_after[1])
            assert after[2:] == reference_after[2:], name


def test_the_stream_sampler_reads_the_same_draws_as_the_round_by_round_calls(yahpo_data, monkeypatch):
    from metaopt.core.space_codec import _decode_rounds

    spaces = _spaces(yahpo_data)
    for name in ("flat", "yahpo:lcbench", "synthetic:mlp"):
        assert SpaceCodec(spaces[name])._stream_groups is not None, name
    codec = SpaceCodec(spaces["flat"])
    words = np.random.RandomState(0).randint(0, 2**32, size=400, dtype=np.uint32)
    assert _decode_rounds(words, codec._stream_groups, np.full(40, 5)) is None  # 40 rounds need more than 400 words
    for short_blocks in (False, True):
        if short_blocks:  # every first read too short: the block is read again, twice as long, until it suffices
            monkeypatch.setattr(SpaceCodec, "_block_length", lambda self, rows: 50)
        for seed, n in ((1, 3), (2, 500), (3, 4001)):
            state, reference = np.random.RandomState(seed), np.random.RandomState(seed)
            np.testing.assert_array_equal(codec._sample_from_stream(n, state),
                                          codec._sample_round_by_round(n, reference))
            assert state.randint(2**31) == reference.randint(2**31)  # both states at the same place
        # Conditions without forbidden clauses: rounds of shrinking sizes from one block, then the
        # conditions on all rows; the same rows and state as ConfigSpace's loop of rounds.
        for name in ("nested", "yahpo:rbv2_xgboost", "yahpo:nb301", "synthetic:mlp"):
            conditional = SpaceCodec(spaces[name])
            assert conditional._stream_groups is not None, name
            for seed, n in ((4, 50), (5, 999)):
                state, reference = np.random.RandomState(seed), spaces[name]
                reference.seed(seed)
                expected = np.array([c.get_array() for c in reference.sample_configuration(size=n)])
                np.testing.assert_array_equal(conditional._sample(n, state), expected, err_msg=name)
                assert state.randint(2**31) == reference.random.randint(2**31), name


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


@pytest.mark.parametrize("n, max_samples", [(40, 25), (300, 100), (30, 500)])
def test_random_forest_with_max_samples_equals_scikit_learn_forest(n, max_samples):
    """rf_max_samples M is scikit-learn's max_samples (min(n, M) bootstrap draws per tree); at or below
    n = M the forest is the one without it."""
    from sklearn.ensemble import RandomForestRegressor

    data = np.random.default_rng(n)
    F, y, query = data.random((n, 6)), data.normal(size=n), data.random((200, 6))
    model = RandomForest(rf_n_trees=10, rf_max_features=1.0, rf_max_samples=max_samples)
    mean, std = model.fit(F, y, np.random.default_rng(3)).predict(query)
    seed = int(np.random.default_rng(3).integers(2**31 - 1))
    forest = RandomForestRegressor(n_estimators=10, max_features=1.0, max_samples=min(n, max_samples),
                                   random_state=seed, n_jobs=1).fit(F, y)
    per_tree = np.stack([tree.predict(query.astype(np.float32)) for tree in forest.estimators_])
    np.testing.assert_array_equal(mean, per_tree.mean(axis=0))
    np.testing.assert_array_equal(std, per_tree.std(axis=0))
    unbounded = RandomForest(rf_n_trees=10, rf_max_features=1.0).fit(F, y, np.random.default_rng(3)).predict(query)
    assert (np.array_equal(mean, unbounded[0]) and np.array_equal(std, unbounded[1])) == (n <= max_samples)


@pytest.mark.parametrize("n, per_feature, max_samples", [(100, 5, 0), (100, 5, 20), (100, 20, 0), (20, 5, 0)])
def test_random_forest_samples_per_feature_is_max_samples_of_that_many(n, per_feature, max_samples):
    """rf_max_samples_per_feature k caps each tree's bootstrap at k·p draws (p features), the smaller of
    the two caps when rf_max_samples is set too: the forest with rf_max_samples = min(n, M, k·p)."""
    p = 6
    data = np.random.default_rng(n)
    F, y, query = data.random((n, p)), data.normal(size=n), data.random((200, p))
    capped = RandomForest(rf_n_trees=10, rf_max_features=1.0, rf_max_samples=max_samples,
                          rf_max_samples_per_feature=per_feature)
    draws = min([n, per_feature * p, *([max_samples] if max_samples else [])])
    same = RandomForest(rf_n_trees=10, rf_max_features=1.0, rf_max_samples=draws)
    mean, std = capped.fit(F, y, np.random.default_rng(3)).predict(query)
    expected = same.fit(F, y, np.random.default_rng(3)).predict(query)
    np.testing.assert_array_equal(mean, expected[0])
    np.testing.assert_array_equal(std, expected[1])
    whole = RandomForest(rf_n_trees=10, rf_max_features=1.0).fit(F, y, np.random.default_rng(3)).predict(query)
    assert np.array_equal(mean, whole[0]) == (draws == n)


def test_gp_cross_kernel_is_scikit_learns_bit_for_bit():
    """The GP's cross-kernel, computed in place, is scikit-learn's Matern 5/2 times the constant to the
    last bit; the predictions through L⁻¹ are its triangular solve's up to rounding."""
    from scipy.linalg import solve_triangular
    from sklearn.gaussian_process.kernels import ConstantKernel, Matern

    from metaopt.components._gp import MaternGP, default_theta

    data = np.random.default_rng(5)
    X, y, candidates = data.random((60, 7)), data.normal(size=60), data.random((300, 7))
    gp = MaternGP(X, y, default_theta(7), 1)
    c, length_scale = np.exp(gp.theta[0]), np.exp(gp.theta[1:-1])
    reference = (ConstantKernel(c) * Matern(length_scale=length_scale, nu=2.5))(candidates, X)
    np.testing.assert_array_equal(gp.kernel(candidates, X), reference)
    V = solve_triangular(gp.L, reference.T, lower=True)
    variance = c + np.exp(gp.theta[-1]) - np.einsum("ij,ij->j", V, V)
    np.testing.assert_allclose(gp.predict(candidates)[1], np.sqrt(np.maximum(variance, 0.0)) * gp.y_std,
                               rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("n, p", [(3, 9), (8, 20), (40, 9), (150, 9), (300, 24)])
@pytest.mark.parametrize("order", ["C", "F"])
def test_log_linear_cost_model_is_scikit_learns_ridge_bit_for_bit(n, p, order):
    """The cost model's ridge regression (the primal solve, and the dual one with more features than
    points) predicts what ``Ridge(alpha=1.0)`` predicts, bit for bit, with a constant column and
    columns of very different scales, and has the same residual spread."""
    from sklearn.linear_model import Ridge

    from metaopt.components.cost_models import _RidgeLogLinear

    rng = np.random.default_rng(n * 100 + p)
    X = np.asarray(rng.random((n, p)) * rng.choice([0.01, 1.0, 30.0], p), order=order)
    X[:, 1] = 0.5
    y = rng.normal(size=n) * 2.0
    candidates = rng.random((257, p))
    theirs = Ridge(alpha=1.0).fit(X, y)
    ours = _RidgeLogLinear()
    ours._fit(X, y, rng)  # what the surrogate's fit hands the regressor (and scikit-learn's Ridge before)
    mean, spread = ours._predict(candidates)
    assert np.array_equal(mean, theirs.predict(candidates))
    assert np.all(spread == float((y - theirs.predict(X)).std()))


def test_tree_grower_falls_back_to_the_estimator_with_the_same_trees(monkeypatch):
    """Without scikit-learn's private builder (another version) the estimator grows each tree: the
    same forest, and it is not the private path that answered."""
    from metaopt.components import surrogates

    data = np.random.default_rng(4)
    F, y, query = data.random((60, 5)), data.normal(size=60), data.random((100, 5))
    expected = RandomForest(rf_n_trees=6, rf_max_features=0.5).fit(F, y, np.random.default_rng(2)).predict(query)
    built = []

    def unavailable(self, *args):
        built.append(1)
        raise ImportError("no private builder")

    monkeypatch.setattr(surrogates._TreeGrower, "_build", unavailable)
    fallback = RandomForest(rf_n_trees=6, rf_max_features=0.5).fit(F, y, np.random.default_rng(2))
    assert fallback.fallback_reason is None and built == [1]  # tried once, then the estimator for every tree
    for a, b in zip(fallback.predict(query), expected, strict=True):
        np.testing.assert_array_equal(a, b)


def _recounted_leaf_values(forest: RandomForest, F: np.ndarray, y: np.ndarray) -> list[np.ndarray]:
    """Every tree's leaf values counted from all rows at once: the weighted mean loss per leaf, the grown
    rows with their weights and each later row with weight 1 (one ``bincount`` over all rows)."""
    X = np.ascontiguousarray(F, dtype=np.float32)
    values = []
    for tree, grown_weight in zip(forest._trees, forest._grown_weights, strict=True):
        weight = np.concatenate([grown_weight, np.ones(len(X) - len(grown_weight))])
        leaf = tree.apply(X)
        total = np.bincount(leaf, weights=weight * y, minlength=tree.node_count)
        count = np.bincount(leaf, weights=weight, minlength=tree.node_count)
        values.append(total / np.where(count > 0, count, 1.0))
    return values


@pytest.mark.parametrize("bootstrap", [True, False])
def test_forest_leaf_sums_added_on_equal_a_recount(bootstrap):
    """Under a refit schedule the leaf sums are kept and each fit adds only the new rows: the leaf
    values equal a recount of every row by the same trees, bit for bit; a changed loss among the old
    rows makes the forest count anew."""
    data = np.random.default_rng(3)
    F, y = data.random((80, 5)), data.normal(size=80)
    forest = RandomForest(rf_n_trees=8, rf_refit_growth=1.0, rf_bootstrap=bootstrap)
    forest.fit(F[:40], y[:40], np.random.default_rng(11))  # grown here, kept below 80 rows
    trees = list(forest._trees)
    for n in (41, 43, 43, 50, 62, 79):  # one row, two, none, then more
        forest.fit(F[:n], y[:n], np.random.default_rng(0))
    assert forest._trees == trees and forest._grown_rows == 40  # kept, not grown again
    for kept, recounted in zip(forest._leaf_values, _recounted_leaf_values(forest, F[:79], y[:79]), strict=True):
        np.testing.assert_array_equal(kept, recounted)
    changed = y.copy()
    changed[3] += 1.0
    forest.fit(F[:79], changed[:79], np.random.default_rng(0))
    assert forest._trees == trees
    for kept, recounted in zip(forest._leaf_values, _recounted_leaf_values(forest, F[:79], changed[:79]),
                               strict=True):
        np.testing.assert_array_equal(kept, recounted)


@pytest.mark.parametrize("n, p, k, categoricals", [(5, 3, 1, 0), (120, 8, 7, 0), (700, 13, 7, 2), (700, 29, 1, 0),
                                                   (700, 1, 7, 34)])
def test_nearest_indices_equal_scikit_learn_neighbours(n, p, k, categoricals):
    """Where no two distances tie (continuous features besides the one-hot columns), the neighbour
    surrogates' search finds what scikit-learn's NearestNeighbors (KD-tree below 16 features, brute
    force above) finds."""
    from sklearn.neighbors import NearestNeighbors

    from metaopt.core.features import ONE_HOT

    data = np.random.default_rng(n + p)

    def features(rows: int) -> np.ndarray:
        hot = [np.eye(5)[data.integers(0, 5, rows)] * ONE_HOT for _ in range(categoricals)]
        return np.hstack([data.random((rows, p)), *hot])

    archive, queries = features(n), features(500)
    expected = NearestNeighbors(n_neighbors=k).fit(archive).kneighbors(queries, return_distance=False)
    np.testing.assert_array_equal(nearest_indices(archive, queries, k), expected)


def _tied_features(rows: int, data: np.random.Generator, p: int = 4) -> np.ndarray:
    """Numeric columns on a coarse grid (many exact ties and duplicate rows) and two one-hot categoricals."""
    from metaopt.core.features import ONE_HOT

    hot = [np.eye(c)[data.integers(0, c, rows)] * ONE_HOT for c in (3, 2)]
    return np.hstack([data.integers(0, 4, (rows, p)) / 3.0, *hot])


@pytest.mark.parametrize("n, k, tied", [(130, 1, True), (500, 7, True), (2000, 7, True), (700, 7, False),
                                        (3000, 1, False)])
def test_neighbour_tree_answers_as_the_scan(monkeypatch, n, k, tied):
    """The KD-tree search returns the scan's indices, ties ordered by index, and the scan takes over
    exactly the queries whose k-th neighbour the tree cannot separate from the next."""
    from metaopt.components import surrogates

    data = np.random.default_rng(n + k)
    if tied:
        archive, queries = _tied_features(n, data), _tied_features(400, data)
    else:
        archive, queries = data.random((n, 9)), data.random((400, 9))
    hot = surrogates._hot_columns(queries, archive)
    scanned = []
    scan = surrogates._nearest_by_scan
    monkeypatch.setattr(surrogates, "_nearest_by_scan", lambda *args: scanned.append(len(args[1])) or scan(*args))
    by_tree = surrogates.nearest_indices(archive, queries, k)
    assert scanned and scanned[0] < len(queries) if tied else not scanned  # the tree answered, the scan only ties
    np.testing.assert_array_equal(by_tree, scan(surrogates._DistancesTo(archive, hot), queries, k))


def test_squared_distances_sum_the_columns_in_order():
    """Every distance is the sequential sum of the numeric columns' squared differences plus ONE_HOT²
    per differing one-hot column, bit for bit (so the scan and the tree's re-ranking agree)."""
    from metaopt.components.surrogates import _DistancesTo, _hot_columns, squared_distances
    from metaopt.core.features import ONE_HOT

    data = np.random.default_rng(5)
    archive = np.hstack([data.random((60, 8)), _tied_features(60, data)[:, 4:]])  # 8 numeric, 5 one-hot
    queries = np.hstack([data.random((30, 8)), _tied_features(30, data)[:, 4:]])
    d = squared_distances(queries, archive)
    for i in range(len(queries)):
        for j in range(len(archive)):
            total = 0.0
            for c in range(8):
                total += (queries[i, c] - archive[j, c]) ** 2
            total += float((queries[i, 8:] != archive[j, 8:]).sum()) * ONE_HOT**2
            assert d[i, j] == total
    index = data.integers(0, 60, (30, 5))
    pairs = _DistancesTo(archive, _hot_columns(queries, archive)).of_pairs(queries, index)
    np.testing.assert_array_equal(pairs, np.take_along_axis(d, index, axis=1))


def test_smac_forest_with_bounded_leaves_grows_the_same_trees(tmp_path):
    """The meta-optimizer's SMAC forest with max_leaf_nodes bounded by the rows (no room reserved for
    2²¹ nodes per tree) predicts what SMAC's own forest predicts, bit for bit, on every fit."""
    from smac import AlgorithmConfigurationFacade, Scenario

    from metaopt.core.smac_utils import bound_forest_leaves, reproducible_model_and_maximizer

    space = ConfigurationSpace(seed=0)
    space.add([Float("x", (0.0, 1.0)), Integer("n", (1, 64), log=True), Categorical("kind", ["a", "b", "c"])])
    instances = ["i1", "i2"]
    scenario = Scenario(space, deterministic=True, n_trials=50, instances=instances,
                        instance_features={"i1": [0.0, 1.0], "i2": [1.0, 0.0]}, output_directory=tmp_path)
    plain, _ = reproducible_model_and_maximizer(AlgorithmConfigurationFacade, scenario, pca_components=None)
    bounded, _ = reproducible_model_and_maximizer(AlgorithmConfigurationFacade, scenario, pca_components=None)
    assert bound_forest_leaves(bounded) is bounded
    data = np.random.default_rng(0)
    for rows in (5, 40, 300):
        configs = np.array([c.get_array() for c in space.sample_configuration(rows)])
        X = np.hstack([configs, data.integers(0, 2, (rows, 1)) * np.array([[1.0, -1.0]]) + np.array([[0.0, 1.0]])])
        y = data.normal(size=rows)
        plain.train(X, y)
        bounded.train(X, y)
        assert bounded._rf_opts["max_leaf_nodes"] == rows + 1 and plain._rf_opts["max_leaf_nodes"] == 2**20
        query = np.hstack([np.array([c.get_array() for c in space.sample_configuration(50)]), np.tile([[0.0, 1.0]], (50, 1))])
        for a, b in zip(plain.predict(query), bounded.predict(query)):
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("facade_name", ["AlgorithmConfigurationFacade", "MultiFidelityFacade"])
def test_smac_predicted_best_in_one_batch_equals_smacs_per_configuration_loop(tmp_path, facade_name):
    """The meta-optimizer's facade finds the predicted best configuration (the acquisition function's
    incumbent) with one batched forest prediction; SMAC's own method predicts one configuration at a
    time. Both give the same row and the same value, bit for bit, after every retraining of a short
    search on a space with conditions and forbiddens: with instance features (the race) and without
    (the multi-fidelity search), ties included (early forests predict many rows alike)."""
    import smac
    from smac.main.config_selector import ConfigSelector
    from smac.runhistory.dataclasses import TrialValue

    from metaopt.stages.meta_search import _smac_facade

    facade = getattr(smac, facade_name)
    racing = facade_name == "AlgorithmConfigurationFacade"
    space = _mixed_space()
    space.seed(3)
    options = (dict(instances=["i1", "i2", "i3"], instance_features={"i1": [0.0], "i2": [0.5], "i3": [1.0]},
                    deterministic=False) if racing else dict(min_budget=1 / 9, max_budget=1.0, deterministic=True))
    scenario = smac.Scenario(space, n_trials=120, seed=3, output_directory=tmp_path, **options)
    search = _smac_facade(facade, scenario, [], {"pca_components": None} if racing else {}, {})
    selector = search._config_selector
    assert selector._get_x_best is not ConfigSelector._get_x_best.__get__(selector)
    data = np.random.default_rng(3)
    compared = 0
    for trial in range(90):
        info = search.ask()
        search.tell(info, TrialValue(cost=float(data.normal() + info.config["y"])), save=False)
        if trial % 10 == 9 and trial >= 19:
            X, Y, configurations = selector._collect_data()
            selector._model.train(X, Y)
            row, value = selector._get_x_best(configurations)
            smac_row, smac_value = ConfigSelector._get_x_best(selector, configurations)
            assert type(value) is type(smac_value) and value == smac_value
            np.testing.assert_array_equal(row, smac_row)
            compared += 1
    assert compared == 8


def test_indexed_configs_answer_in_as_a_list_does():
    """IndexedConfigs' ``in`` (an index of the configurations' vectors, confirmed by ``==``) answers what
    the list's linear scan answers: equal configurations built anew, configurations of an equal
    space built separately, inactive values, other objects; after appends and other mutations."""
    from ConfigSpace import Configuration

    from metaopt.core.smac_utils import IndexedConfigs

    space = _mixed_space()
    space.seed(5)
    configs = space.sample_configuration(40)
    indexed, plain = IndexedConfigs(configs[:20]), list(configs[:20])
    twin = _mixed_space()  # equal to `space`, another object
    probes = [*configs, *(Configuration(space, values=dict(c)) for c in configs),
              *(Configuration(twin, values=dict(c)) for c in configs), None, 3, "kind"]
    for step in range(4):
        assert [p in indexed for p in probes] == [p in plain for p in probes]
        if step == 0:
            for c in configs[20:30]:
                indexed.append(c)
                plain.append(c)
        elif step == 1:
            indexed.remove(configs[3])
            plain.remove(configs[3])
            indexed += configs[30:33]
            plain += configs[30:33]
        else:
            del indexed[:5]
            del plain[:5]
        assert list(indexed) == plain


def test_a_race_asks_the_same_trials_with_fast_asks_as_with_smac_as_shipped(tmp_path):
    """A short race (SMAC's algorithm-configuration facade over instances and seeds, a space with
    conditions and forbiddens, batches of 4 asked before they are told) asks for the same trials,
    configuration, instance and seed, with fast_asks as with SMAC 2.4 as shipped."""
    from unittest import mock

    import smac
    from smac.runhistory.dataclasses import TrialValue

    from metaopt.stages import meta_search

    def race(folder, patch):
        space = _mixed_space()
        space.seed(7)
        scenario = smac.Scenario(space, n_trials=160, seed=7, output_directory=folder, deterministic=False,
                                 instances=["i1", "i2", "i3"],
                                 instance_features={"i1": [0.0], "i2": [0.5], "i3": [1.0]})
        with mock.patch.object(meta_search, "fast_asks", patch):
            search = meta_search._smac_facade(smac.AlgorithmConfigurationFacade, scenario, [],
                                              {"pca_components": None}, {"max_config_calls": 6})
        data, asked = np.random.default_rng(7), []
        for _ in range(40):
            infos = [search.ask() for _ in range(4)]
            for info in infos:
                asked.append((tuple(sorted(dict(info.config).items())), info.instance, info.seed))
                search.tell(info, TrialValue(cost=float(data.normal() + info.config["y"])), save=False)
        return asked

    fast = race(tmp_path / "fast", meta_search.fast_asks)
    assert fast == race(tmp_path / "shipped", lambda facade: facade)
    assert len({config for config, _, _ in fast}) > 40  # the race moved on to many challengers


def _repair_as_before(codec: SpaceCodec, X: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """``SpaceCodec.repair`` as it was written before its per-column plan: every column through
    ConfigSpace's own calls, conditions by ``satisfied_by_vector_array``, fresh values by
    ``sample_vector`` from a new RandomState."""
    from ConfigSpace.hyperparameters import FloatHyperparameter

    X = np.array(X, dtype=float, copy=True).reshape(-1, codec.dim)
    n = len(X)
    for j, name in enumerate(codec.names):
        hp = codec.space[name]
        col = X[:, j]
        set_ = ~np.isnan(col)
        if not set_.any():
            continue
        v = np.clip(col[set_], hp.lower_vectorized, hp.upper_vectorized)
        if codec.layout.categorical[j]:
            v = np.rint(v)
        elif not isinstance(hp, FloatHyperparameter):
            snapped = np.asarray(hp.to_vector(hp.to_value(v)), dtype=float)
            v = np.where(hp.legal_vector(v), v, snapped)
        col[set_] = v
    state: list[np.random.RandomState] = []

    def fill(j: int, rows: np.ndarray) -> None:
        if rows.any():
            if not state:
                state.append(np.random.RandomState(int(rng.integers(2**31 - 1))))
            X[rows, j] = codec.space[codec.names[j]].sample_vector(int(rows.sum()), seed=state[0])

    conditional = {j for j, _ in codec._conditions_in_order}
    for j in range(codec.dim):
        if j not in conditional:
            fill(j, np.isnan(X[:, j]))
    for j, conds in codec._conditions_in_order:  # every condition of a child holds (booleans: any order)
        active = np.logical_and.reduce([cond.satisfied_by_vector_array(X.T) for cond in conds])
        X[~active, j] = np.nan
        fill(j, active & np.isnan(X[:, j]))
    clauses = codec.space.forbidden_clauses
    forbidden = (np.logical_or.reduce([c.is_forbidden_vector_array(X.T) for c in clauses]) if clauses
                 else np.zeros(n, bool))
    if forbidden.any():
        X[forbidden] = codec.sample_uniform(int(forbidden.sum()), rng)
    return X


def test_repair_equals_the_column_by_column_repair(yahpo_data):
    """The repair with its per-column plan (all columns clipped at once, InConditions tested by
    equality, fresh values from the codec's samplers and a re-seeded RandomState) gives the rows and
    leaves the run's generator where the column-by-column calls did: perturbed rows as the local
    search makes them, rows with NaN in active places, values far outside the range."""
    for name, space in _spaces(yahpo_data).items():
        codec = SpaceCodec(space)
        for seed in range(4):
            data = np.random.default_rng(seed)
            X = codec.sample_uniform(300, data)
            moved = data.random(X.shape) < 0.3
            X = np.where(moved, X + data.normal(0.0, 0.3, X.shape), X)
            X[data.random(X.shape) < 0.05] = np.nan  # active or not: repair decides
            X[data.random(X.shape) < 0.05] = 2.5  # a category index or value out of range
            new, old = np.random.default_rng(seed + 10), np.random.default_rng(seed + 10)
            repaired = codec.repair(X, new)
            np.testing.assert_array_equal(repaired, _repair_as_before(SpaceCodec(space), X, old),
                                          err_msg=f"{name}, seed {seed}")
            assert new.integers(2**31) == old.integers(2**31), name


def test_features_of_one_fidelity_equal_the_per_level_encoding(yahpo_data):
    """Rows at one fidelity (a scalar, or the same value in every row) skip ``np.unique`` and give the
    features the per-level lookup gives; rows at several fidelities still go through it."""
    from metaopt.core.features import FeatureEncoder
    from metaopt.core.libm import log as libm_log

    bench = get_benchmark("yahpo:lcbench", yahpo_data)
    codec, fidelity = SpaceCodec(bench.search_space), bench.problem(bench.test_instances[0]).fidelity
    encoder = FeatureEncoder(codec, fidelity)
    X = codec.sample_uniform(50, np.random.default_rng(0))

    def per_level(r: np.ndarray) -> np.ndarray:  # the fidelity column as it was computed before
        levels, where = np.unique(np.asarray(r, dtype=float).reshape(-1), return_inverse=True)
        return np.broadcast_to((libm_log(levels)[where.reshape(-1)] - encoder._log_r_min) / encoder._log_r_range,
                               (len(X),))

    mixed = np.random.default_rng(1).choice([fidelity.r_min, 7.0, fidelity.r_max], size=len(X))
    for r in (fidelity.r_max, 7.0, np.full(len(X), 13.0), np.full(len(X), fidelity.r_min), mixed):
        features = encoder.encode(X, r)
        np.testing.assert_array_equal(features[:, -1], per_level(r))
        np.testing.assert_array_equal(features[:, :-1], encoder.encode(X, mixed)[:, :-1])


@pytest.mark.parametrize("categorical", [True, False])
def test_tpe_scores_each_distinct_candidate_once_with_the_numbers_of_scoring_every_row(categorical):
    """TPE's prediction scores the distinct rows of its candidates and spreads the scores back: the same
    bits as scoring every row (a one-hot space repeats candidates; a continuous one hardly does)."""
    from metaopt.components.surrogates import TPE, distinct_rows

    rng = np.random.default_rng(4)
    def draw(n):
        Z = (rng.integers(0, 2, size=(n, 12)) / np.sqrt(2)) if categorical else rng.random((n, 12))
        return np.column_stack([Z, rng.choice([1.0, 3.0, 9.0], size=n)])
    F = draw(300)
    tpe = TPE()
    tpe._fit(F, rng.random(300), rng)
    candidates = draw(400)
    candidates = np.vstack([candidates, candidates[rng.integers(0, 400, size=600)]])  # repeats, in any order
    candidates[5, 0], candidates[6, 0] = 0.0, -0.0  # equal, but not the same bits: scored apart
    got, _ = tpe._predict(candidates)
    Z = candidates[:, :-1]
    expected = tpe._bad.log_density(Z) - tpe._good.log_density(Z)
    assert got.tobytes() == expected.tobytes()
    distinct, inverse = distinct_rows(Z)
    assert distinct[inverse].tobytes() == Z.tobytes() and len(distinct) < len(Z)
    assert [row.tobytes() for row in distinct] == list(dict.fromkeys(row.tobytes() for row in Z))


def test_vector_dropping_inactive_equals_configspace_deactivation(yahpo_data):
    """What the syne-tune peers make of a flat configuration (a value for every hyperparameter, active
    or not) equals ConfigSpace's deactivate_inactive_hyperparameters followed by to_vector, bit for
    bit, on spaces with conditions on conditions; an illegal value is refused naming the hyperparameter."""
    from ConfigSpace.util import deactivate_inactive_hyperparameters

    for name, space in _spaces(yahpo_data).items():
        if space.forbidden_clauses:
            continue  # the peers refuse forbidden clauses
        codec, rs = SpaceCodec(space), np.random.RandomState(7)
        for _ in range(100):
            flat = {hp.name: hp.sample_value(seed=rs) for hp in space.values()}
            flat = {k: v.item() if isinstance(v, np.generic) else v for k, v in flat.items()}
            expected = codec.to_vector(dict(deactivate_inactive_hyperparameters(flat, space)))
            assert codec.to_vector_dropping_inactive(flat).tobytes() == expected.tobytes(), name
    codec = SpaceCodec(_nested_space())
    flat = {hp.name: hp.default_value for hp in codec.space.values()}
    with pytest.raises(ValueError, match="hyperparameter n: 9999"):
        codec.to_vector_dropping_inactive({**flat, "n": 9999})


def test_the_c_library_functions_answer_as_numpy_at_poles_domain_edges_and_overflow():
    """Python's math functions raise where the C library (and numpy) return ±inf or nan; metaopt.core.libm
    returns what numpy does, so a run that reaches such an argument goes on instead of failing."""
    from metaopt.core import libm

    x = np.array([-1e308, -800.0, -1.0, -0.0, 0.0, 1e-300, 0.5, 709.7, 709.8, 800.0, 1e308, np.inf, -np.inf, np.nan])
    with np.errstate(all="ignore"):
        for ours, numpys in [(libm.exp, np.exp), (libm.log, np.log), (libm.expm1, np.expm1), (libm.log1p, np.log1p)]:
            edge = ~np.isfinite(numpys(x)) | (numpys(x) == 0)
            np.testing.assert_array_equal(ours(x)[edge], numpys(x)[edge])
            assert np.allclose(ours(x), numpys(x), rtol=1e-15, equal_nan=True)
        base, power = np.meshgrid([-1e300, -2.0, -1.0, -0.0, 0.0, 0.5, 2.0, 1e300, np.inf, -np.inf, np.nan],
                                  [-3.0, -2.0, -0.5, 0.0, 0.5, 3.0, 1e5, -1e5, np.inf, np.nan])
        np.testing.assert_array_equal(libm.power(base, power), np.power(base, power))


def test_the_c_library_functions_are_maths_bit_for_bit():
    """libm's exp, log, expm1 and log1p (scipy's compiled Box-Cox loops at λ = 0) give the bits of Python's
    math module, the C library's, on random arguments over their whole range and at the edges, including
    where numpy's AVX-512 exp differs in the last bit; power is math.pow's by construction."""
    import math

    from metaopt.core import libm

    def maths(f, x):
        out = []
        for v in x.tolist():
            try:
                out.append(f(v))
            except (OverflowError, ValueError):
                out.append(None)
        return out

    rng = np.random.default_rng(7)
    edges = [0.0, -0.0, 1e-320, -1e-320, 1.0, -1.0, 709.78, 709.79, -745.2, -745.1, np.inf, -np.inf, np.nan]
    arguments = {
        "exp": np.r_[rng.uniform(-750, 720, 20_000), rng.normal(0, 3, 20_000), edges],
        "expm1": np.r_[rng.uniform(-40, 720, 20_000), rng.normal(0, 1e-3, 20_000), edges],
        "log": np.r_[np.exp(rng.uniform(-700, 700, 20_000)), rng.uniform(0, 2, 20_000), edges],
        "log1p": np.r_[rng.uniform(-1, 5, 20_000), rng.normal(0, 1e-3, 20_000), edges],
    }
    for name, x in arguments.items():
        ours = getattr(libm, name)(x)
        assert ours.dtype == np.float64 and ours.shape == x.shape
        for got, want, arg in zip(ours.tolist(), maths(getattr(math, name), x), x.tolist()):
            if want is None or math.isnan(want):  # math raised or gave nan: checked against numpy above
                continue
            assert math.copysign(1.0, got) == math.copysign(1.0, want) and got == want, (name, arg, got, want)
    assert libm.exp(np.float64(1.5)).shape == () and libm.log([[1.0, 2.0]]).shape == (1, 2)
