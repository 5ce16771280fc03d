"""Surrogate features, surrogate models (with their fallbacks) and acquisition functions."""

import math

import numpy as np
import pytest
from ConfigSpace import Categorical, ConfigurationSpace, Constant, EqualsCondition, Float, Integer
from ConfigSpace.hyperparameters import OrdinalHyperparameter
from scipy.stats import spearmanr

from metaopt.components.acquisition import (
    ExpectedImprovement,
    LowerConfidenceBound,
    MeanAcquisition,
    ProbabilityOfImprovement,
)
from metaopt.components.surrogates import (KKNN7, KNN1, TPE, Featureless, GaussianProcess, Surrogate, nearest_indices,
                                         samworth_weights, squared_distances)
from metaopt.core.benchmarks.base import Fidelity
from metaopt.core.features import INACTIVE, ONE_HOT, FeatureEncoder
from metaopt.core.registry import get_component
from metaopt.core.space_codec import SpaceCodec

SURROGATES = ["knn1", "kknn7", "tpe", "rf", "gp"]
FIDELITY = Fidelity("epoch", 1, 81, is_int=True)


def make_space() -> ConfigurationSpace:
    cs = ConfigurationSpace()
    cs.add([
        Float("lr", (-5.0, 5.0)),
        Integer("units", (1, 1024), log=True),
        Categorical("opt", ["sgd", "adam", "rms"]),
        Float("momentum", (1e-3, 1.0), log=True),
    ])
    cs.add(EqualsCondition(cs["momentum"], cs["opt"], "sgd"))
    return cs


@pytest.fixture(scope="module")
def codec() -> SpaceCodec:
    codec = SpaceCodec(make_space())
    assert codec.names == ["lr", "opt", "units", "momentum"]
    return codec


@pytest.fixture(scope="module")
def encoder(codec: SpaceCodec) -> FeatureEncoder:
    return FeatureEncoder(codec, FIDELITY)


def smooth_loss(X: np.ndarray, r: np.ndarray) -> np.ndarray:
    """A smooth function of the vectors: quadratic in the numerics, a category offset, a fidelity trend."""
    lr, opt, units, momentum = X.T  # the codec's column order
    momentum = np.where(np.isnan(momentum), 0.3, (momentum - 0.2) ** 2)
    fid = np.log(r) / math.log(81)
    return (lr - 0.3) ** 2 + (units - 0.6) ** 2 + 0.25 * opt + momentum + 0.3 * (1 - fid)


@pytest.fixture(scope="module")
def problem(codec: SpaceCodec, encoder: FeatureEncoder):
    """(train features, train losses, candidate features, candidate true losses)."""
    rng = np.random.default_rng(0)
    X = codec.sample_uniform(200, rng)
    r = rng.choice([1.0, 3.0, 9.0, 27.0, 81.0], size=200)
    Xc = codec.sample_uniform(300, rng)
    rc = np.full(300, 81.0)
    return encoder.encode(X, r), smooth_loss(X, r), encoder.encode(Xc, rc), smooth_loss(Xc, rc)


def build(name: str) -> Surrogate:
    return get_component("surrogates", name).build({})


# --- features -------------------------------------------------------------------------------------


def test_features_layout(codec: SpaceCodec, encoder: FeatureEncoder) -> None:
    # numerics in space order (lr, units, momentum), then 3 one-hot columns, then the fidelity
    assert encoder.n_features == 3 + 3 + 1
    assert encoder.feature_names[-1] == "epoch"
    assert encoder.feature_names[encoder.categorical_slice] == ["opt=sgd", "opt=adam", "opt=rms"]
    X = codec.sample_uniform(50, np.random.default_rng(1))
    F = encoder.encode(X, np.full(50, 9.0))
    assert F.shape == (50, 7) and np.isfinite(F).all()


def test_features_values(codec: SpaceCodec, encoder: FeatureEncoder) -> None:
    sgd = codec.to_vector({"lr": 0.0, "units": 32, "opt": "sgd", "momentum": 0.1})
    adam = codec.to_vector({"lr": 0.0, "units": 32, "opt": "adam"})
    F = encoder.encode(np.stack([sgd, adam]), np.array([1.0, 81.0]))
    momentum = encoder.feature_names.index("momentum")
    lr = encoder.feature_names.index("lr")
    assert F[0, lr] == pytest.approx(0.5)
    assert F[0, momentum] == pytest.approx(2 / 3)  # log scale: log(0.1/1e-3) / log(1/1e-3)
    assert F[1, momentum] == INACTIVE  # inactive numeric
    assert F[:, encoder.categorical_slice].tolist() == [[ONE_HOT, 0, 0], [0, ONE_HOT, 0]]
    assert F[:, -1].tolist() == [0.0, 1.0]
    # a change of category alone moves a point by distance 1
    cats = encoder.categorical_slice
    assert np.linalg.norm(F[0, cats] - F[1, cats]) == pytest.approx(1.0)
    # scalar fidelity, geometric midpoint -> 0.5
    assert encoder.encode(sgd[None], 9.0)[0, -1] == pytest.approx(0.5)


def test_features_inactive_categorical_ordinal_constant_and_fixed_fidelity() -> None:
    cs = ConfigurationSpace()
    cs.add([
        Categorical("kind", ["a", "b"]),
        Categorical("sub", ["x", "y"]),
        OrdinalHyperparameter("size", ["s", "m", "l"]),
        Constant("const", "c"),
    ])
    cs.add(EqualsCondition(cs["sub"], cs["kind"], "b"))
    codec = SpaceCodec(cs)
    enc = FeatureEncoder(codec, Fidelity("r", 5, 5))
    X = np.stack([codec.to_vector({"kind": "a", "size": "m", "const": "c"}),
                  codec.to_vector({"kind": "b", "sub": "y", "size": "l", "const": "c"})])
    F = enc.encode(X, np.array([5.0, 5.0]))
    named = dict(zip(enc.feature_names, F.T))
    assert named["size"].tolist() == [0.5, 1.0]
    assert named["const"].tolist() == [0.0, 0.0]
    assert named["sub=x"].tolist() == [0.0, 0.0] and named["sub=y"].tolist() == [0.0, ONE_HOT]  # inactive: zeros
    assert named["r"].tolist() == [0.0, 0.0]  # r_min == r_max


# --- surrogates -----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", SURROGATES)
def test_surrogate_learns_a_smooth_function(name: str, problem) -> None:
    F, y, Fc, yc = problem
    s = build(name).fit(F, y, np.random.default_rng(0))
    assert s.fallback_reason is None
    mean, std = s.predict(Fc)
    assert mean.shape == (len(Fc),) and np.isfinite(mean).all()
    if s.has_std:
        assert std.shape == (len(Fc),) and (std >= 0).all()
    else:
        assert std is None
    rho = spearmanr(mean, yc)[0]
    assert rho > (0.8 if name in ("rf", "gp", "kknn7", "knn1") else 0.4), rho  # constant: 0


@pytest.mark.parametrize("name", SURROGATES)
def test_surrogate_deterministic(name: str, problem) -> None:
    F, y, Fc, _ = problem
    a = build(name).fit(F[:80], y[:80], np.random.default_rng(5)).predict(Fc)
    b = build(name).fit(F[:80], y[:80], np.random.default_rng(5)).predict(Fc)
    np.testing.assert_array_equal(a[0], b[0])
    if a[1] is not None:
        np.testing.assert_array_equal(a[1], b[1])


@pytest.mark.parametrize("name", SURROGATES)
@pytest.mark.parametrize("n", [0, 1, 2])
def test_surrogate_few_points(name: str, n: int, problem) -> None:
    F, y, Fc, _ = problem
    s = build(name).fit(F[:n], y[:n], np.random.default_rng(0))
    mean, std = s.predict(Fc[:10])
    assert mean.shape == (10,) and np.isfinite(mean).all()
    if n < 2:
        assert s.fallback_reason is not None
        assert mean.tolist() == ([float(y[0])] * 10 if n == 1 else [0.0] * 10)
    else:
        assert s.fallback_reason is None
    assert s.predict(Fc[:0])[0].shape == (0,)


@pytest.mark.parametrize("name", SURROGATES)
def test_surrogate_constant_loss_and_single_configuration(name: str, problem) -> None:
    F, _, Fc, _ = problem
    s = build(name).fit(F[:30], np.full(30, 0.25), np.random.default_rng(0))
    assert s.fallback_reason == "constant loss"
    mean, std = s.predict(Fc[:5])
    assert mean.tolist() == [0.25] * 5
    if s.has_std:
        assert std.tolist() == [0.0] * 5
    same = s.fit(np.repeat(F[:1], 6, axis=0), np.arange(6.0), np.random.default_rng(0))
    assert same.fallback_reason == "a single distinct configuration"
    assert same.predict(Fc[:2])[0].tolist() == [2.5, 2.5]


@pytest.mark.parametrize("name", SURROGATES)
def test_surrogate_drops_nan_losses(name: str, problem) -> None:
    F, y, Fc, _ = problem
    y_bad = y[:60].copy()
    y_bad[::4] = np.nan
    y_bad[1] = np.inf
    keep = np.isfinite(y_bad)
    a = build(name).fit(F[:60], y_bad, np.random.default_rng(3)).predict(Fc)
    b = build(name).fit(F[:60][keep], y_bad[keep], np.random.default_rng(3)).predict(Fc)
    np.testing.assert_array_equal(a[0], b[0])
    assert np.isfinite(a[0]).all()


def test_surrogate_failures_fall_back(problem, monkeypatch: pytest.MonkeyPatch) -> None:
    F, y, Fc, _ = problem

    def boom(*args, **kwargs):
        raise np.linalg.LinAlgError("not positive definite")

    s = GaussianProcess()
    monkeypatch.setattr(s, "_fit", boom)
    s.fit(F[:20], y[:20], np.random.default_rng(0))
    assert "fit failed" in s.fallback_reason
    mean, std = s.predict(Fc[:3])
    assert np.allclose(mean, y[:20].mean()) and np.allclose(std, y[:20].std())

    s = GaussianProcess().fit(F[:20], y[:20], np.random.default_rng(0))
    monkeypatch.setattr(s, "_predict", boom)
    assert np.allclose(s.predict(Fc[:3])[0], y[:20].mean())


def test_featureless() -> None:
    mean, std = Featureless().fit(np.zeros((3, 2)), np.array([1.0, 2.0, np.nan]), None).predict(np.zeros((4, 2)))
    assert mean.tolist() == [1.5] * 4 and std.tolist() == [0.5] * 4


def test_samworth_weights_pinned() -> None:
    # q = 2: w_i = (1/k)[2 - (2i - 1)/k]
    np.testing.assert_allclose(samworth_weights(2, 2), [0.75, 0.25])
    np.testing.assert_allclose(samworth_weights(3, 2), [5 / 9, 3 / 9, 1 / 9])
    # q = 1, k = 2: w_i = (1/2)[1.5 - (i^3 - (i-1)^3)/8] -> [11/16, 5/16]
    np.testing.assert_allclose(samworth_weights(2, 1), [11 / 16, 5 / 16])
    for q in (1, 2, 7, 30):
        w = samworth_weights(7, q)
        assert w.sum() == pytest.approx(1.0) and (w > 0).all() and (np.diff(w) < 0).all()
    assert samworth_weights(1, 5).tolist() == [1.0]


def test_kknn_uses_rank_weights_with_fewer_points_than_k() -> None:
    F = np.array([[0.0, 0.0], [1.0, 0.0], [3.0, 0.0]])
    y = np.array([1.0, 2.0, 4.0])
    s = KKNN7().fit(F, y, np.random.default_rng(0))
    mean, std = s.predict(np.array([[0.1, 0.0], [2.9, 0.0]]))
    assert std is None
    np.testing.assert_allclose(mean, [5 / 9 * 1 + 3 / 9 * 2 + 1 / 9 * 4, 5 / 9 * 4 + 3 / 9 * 2 + 1 / 9 * 1])


def test_tpe_prefers_good_region_and_uses_top_fidelity_stratum() -> None:
    rng = np.random.default_rng(0)
    x = rng.uniform(size=(60, 1))
    top = np.column_stack([x, np.ones(60)])
    # at the top fidelity, low x is good; at the low fidelity the opposite -- must be ignored
    low = np.column_stack([x, np.zeros(60)])
    F = np.vstack([top, low])
    y = np.concatenate([x[:, 0], 1 - x[:, 0]])
    s = TPE().fit(F, y, rng)
    grid = np.column_stack([np.linspace(0, 1, 11), np.ones(11)])
    mean, std = s.predict(grid)
    assert std is None and np.isfinite(mean).all()
    assert mean[0] < mean[5] < mean[10]


def test_gp_caps_training_points(problem) -> None:
    F, y, Fc, yc = problem
    s = GaussianProcess()
    s.max_points = 60
    s.fit(F, y, np.random.default_rng(0))
    assert s.fallback_reason is None and len(s._model.X) == 60
    assert spearmanr(s.predict(Fc)[0], yc)[0] > 0.5


def _sklearn_gp(p: int, optimizer: str | None):
    """scikit-learn's regressor with the kernel our GP implements (components/_gp.py)."""
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import ConstantKernel, Matern, WhiteKernel

    kernel = (ConstantKernel(1.0, (1e-3, 1e3)) * Matern(np.full(p, 0.5), (1e-2, 1e2), nu=2.5)
              + WhiteKernel(1e-2, (1e-6, 1.0)))
    return GaussianProcessRegressor(kernel, normalize_y=True, optimizer=optimizer, random_state=0)


@pytest.mark.parametrize("n, p", [(1, 1), (2, 3), (60, 8), (333, 22)])
def test_gp_likelihood_is_scikit_learns_and_its_gradient_the_same_up_to_rounding(n, p) -> None:
    """The closed-form gradient (components/_gp.py) against scikit-learn's (n, n, p) contraction, and
    the likelihood's value, which the optimizer compares between steps, bit for bit."""
    from metaopt.components._gp import MaternGP, default_theta, log_marginal_likelihood

    data = np.random.default_rng(n)
    X, y = data.random((n, p)) * data.uniform(0.1, 10.0, p), data.normal(size=n)
    normalized = MaternGP(X, y, default_theta(p), None).y
    reference = _sklearn_gp(p, None).fit(X, y)
    for seed in range(4):
        theta = np.random.default_rng(seed).uniform(-2.0, 2.0, p + 2)
        value, gradient, _ = log_marginal_likelihood(theta, X, normalized)
        expected_value, expected_gradient = reference.log_marginal_likelihood(theta, eval_gradient=True)
        assert value == expected_value
        np.testing.assert_allclose(gradient, expected_gradient, rtol=1e-9, atol=1e-9 * np.abs(expected_gradient).max())


def test_gp_gradient_matches_finite_differences() -> None:
    """Independent of scikit-learn's gradient: central differences of the likelihood in θ."""
    from metaopt.components._gp import log_marginal_likelihood

    data = np.random.default_rng(3)
    X, y = data.random((40, 5)), data.normal(size=40)
    theta, h = np.array([0.3, -0.5, 0.1, 0.7, -1.0, 0.2, -3.0]), 1e-6
    _, gradient, _ = log_marginal_likelihood(theta, X, y)
    numeric = [(log_marginal_likelihood(theta + h * e, X, y, gradient=False)[0]
                - log_marginal_likelihood(theta - h * e, X, y, gradient=False)[0]) / (2 * h)
               for e in np.eye(len(theta))]
    np.testing.assert_allclose(gradient, numeric, rtol=1e-5, atol=1e-6)


def test_gp_fit_and_predictions_are_scikit_learns(problem) -> None:
    """The same optimum as scikit-learn's fit from the same start (rounding may move its last digits),
    and at a given θ the same predictions up to rounding."""
    from metaopt.components._gp import MaternGP, default_theta

    F, y, Fc, _ = problem
    F, y = F[:30], y[:30]
    p = F.shape[1]
    ours = MaternGP(F, y, default_theta(p), 0)
    reference = _sklearn_gp(p, "fmin_l_bfgs_b").fit(F, y)
    # An irrelevant feature's length scale sits on a flat ridge of the likelihood:
    # compare θ loosely, the optimum tightly.
    np.testing.assert_allclose(ours.theta, reference.kernel_.theta, atol=1e-3)
    assert ours.log_marginal_likelihood_value_ == pytest.approx(reference.log_marginal_likelihood_value_, rel=1e-6)
    fixed, reference = MaternGP(F, y, default_theta(p), None), _sklearn_gp(p, None).fit(F, y)
    for a, b in zip(fixed.predict(Fc), reference.predict(Fc, return_std=True), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)
    assert fixed.log_marginal_likelihood_value_ == reference.log_marginal_likelihood_value_


def test_gp_extends_its_factorization_when_points_are_added(problem) -> None:
    """θ kept and rows added: the block update of the Cholesky factor gives the factorization, the
    likelihood and the predictions of a fit from scratch, up to rounding; rows that do not extend
    the previous ones are factorized anew."""
    from metaopt.components._gp import MaternGP, default_theta

    F, y, Fc, _ = problem
    theta = MaternGP(F[:40], y[:40], default_theta(F.shape[1]), 1).theta
    previous = MaternGP(F[:40], y[:40], theta, None)
    assert previous._extended(F[1:45], y[1:45]) is None
    extended = MaternGP(F[:45], y[:45], theta, None, previous=previous)
    scratch = MaternGP(F[:45], y[:45], theta, None)
    np.testing.assert_array_equal(extended.L[:40, :40], previous.L)  # the old block is kept as it was
    np.testing.assert_allclose(extended.L, scratch.L, rtol=1e-10, atol=1e-12)
    assert extended.log_marginal_likelihood_value_ == pytest.approx(scratch.log_marginal_likelihood_value_, rel=1e-10)
    for a, b in zip(extended.predict(Fc), scratch.predict(Fc), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)


# --- acquisition ----------------------------------------------------------------------------------

MEAN = np.array([0.5, 0.5, 2.0, 0.9])
STD = np.array([1.0, 0.1, 1.0, 0.0])


def test_acquisition_registry() -> None:
    assert not get_component("acquisitions", "mean").build({}).needs_std
    for name in ("ei", "pi", "lcb"):
        assert get_component("acquisitions", name).build({}).needs_std
    lcb = get_component("acquisitions", "lcb")
    assert lcb.hyperparameter_names == ["lcb_kappa"]
    assert lcb.build({"lcb_kappa": 2.0}).kappa == 2.0


def test_expected_improvement() -> None:
    score = ExpectedImprovement().score(MEAN, STD, 1.0)
    # z = 0.5: EI = 0.5 Φ(0.5) + φ(0.5)
    assert -score[0] == pytest.approx(0.5 * 0.6914624612740131 + 0.3520653267642995, rel=1e-12)
    assert -score[3] == pytest.approx(0.1)  # std 0: max(y_best − μ, 0)
    assert (score <= 0).all()
    # same mean: more uncertainty is better; among equal std: lower mean better
    assert score[0] < score[1] and score[0] < score[2]


def test_probability_of_improvement() -> None:
    score = ProbabilityOfImprovement().score(MEAN, STD, 1.0)
    np.testing.assert_allclose(-score, [0.6914624612740131, 0.9999997133484281, 0.15865525393145707, 1.0])
    assert np.argmin(score) == 3


def test_lcb_and_mean() -> None:
    np.testing.assert_allclose(LowerConfidenceBound(2.0).score(MEAN, STD, 1.0), [-1.5, 0.3, 0.0, 0.9])
    np.testing.assert_array_equal(MeanAcquisition().score(MEAN, STD, 1.0), MEAN)


@pytest.mark.parametrize("acq", [ExpectedImprovement(), ProbabilityOfImprovement(), LowerConfidenceBound(1.0)])
def test_acquisition_without_std_orders_by_mean(acq) -> None:
    np.testing.assert_array_equal(acq.score(MEAN, None, 1.0), MEAN)
    np.testing.assert_array_equal(np.argsort(acq.score(MEAN, np.zeros(4), 1.0), kind="stable"),
                                  np.argsort(MEAN, kind="stable"))
    if not isinstance(acq, LowerConfidenceBound):
        np.testing.assert_array_equal(acq.score(MEAN, STD, float("nan")), MEAN)  # no incumbent yet


def _mixed_features(rows: int, data: np.random.Generator) -> np.ndarray:
    """Numeric columns on a coarse grid (exact squares and sums, many exact ties) and two one-hot
    categoricals as the feature encoder writes them."""
    numeric = data.integers(0, 3, (rows, 3)) / 4.0
    hot = [np.eye(k)[data.integers(0, k, rows)] * ONE_HOT for k in (3, 2)]
    return np.hstack([numeric, *hot])


def _nearest_by_sorting(archive: np.ndarray, queries: np.ndarray, k: int) -> list[list[int]]:
    """The definition: order archive rows by (squared distance, index), keep the first k; a differing
    categorical counts ONE_HOT² per differing one-hot column."""
    numeric = ((queries[:, None, :3] - archive[None, :, :3]) ** 2).sum(axis=2)
    differing = (queries[:, None, 3:] != archive[None, :, 3:]).sum(axis=2)
    d = numeric + ONE_HOT**2 * differing
    return [sorted(range(len(archive)), key=lambda j: (row[j], j))[:k] for row in d]


@pytest.mark.parametrize("n, m, k", [(1, 4, 1), (7, 30, 7), (50, 200, 7), (300, 40, 1)])
def test_nearest_indices_orders_by_distance_then_index(monkeypatch, n, m, k) -> None:
    data = np.random.default_rng(n)
    archive, queries = _mixed_features(n, data), _mixed_features(m, data)
    expected = _nearest_by_sorting(archive, queries, k)
    assert nearest_indices(archive, queries, k).tolist() == expected
    monkeypatch.setattr("metaopt.components.surrogates._NEIGHBOUR_BLOCK", n * 3)  # blocks of 3 queries
    assert nearest_indices(archive, queries, k).tolist() == expected


def test_squared_distances_are_euclidean_and_exact_in_the_one_hot_columns() -> None:
    data = np.random.default_rng(3)
    archive, queries = data.random((40, 9)), data.random((25, 9))
    hot = [np.eye(k)[data.integers(0, k, 65)] * ONE_HOT for k in (4, 5, 2)]
    archive = np.hstack([archive, *(h[:40] for h in hot)])
    queries = np.hstack([queries, *(h[40:] for h in hot)])
    d = squared_distances(queries, archive)
    np.testing.assert_allclose(d, ((queries[:, None] - archive[None]) ** 2).sum(axis=2), rtol=1e-13)
    # the one-hot part is counted, not summed: any order of its columns gives the same bits
    order = np.r_[np.arange(9), 9 + data.permutation(11)]
    np.testing.assert_array_equal(squared_distances(queries[:, order], archive[:, order]), d)

def test_nearest_indices_rejects_k_outside_the_archive() -> None:
    with pytest.raises(ValueError, match="k must be between 1 and the archive size 2"):
        nearest_indices(np.zeros((2, 1)), np.zeros((1, 1)), 3)


def test_knn1_predicts_the_earliest_of_equally_near_points() -> None:
    F = np.array([[0.0], [2.0], [2.0], [4.0]])
    y = np.array([1.0, 5.0, 6.0, 9.0])
    mean, std = KNN1().fit(F, y, np.random.default_rng(0)).predict(np.array([[1.0], [2.1], [3.0], [9.0]]))
    assert std is None
    assert mean.tolist() == [1.0, 5.0, 5.0, 9.0]
