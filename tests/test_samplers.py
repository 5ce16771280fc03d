"""Generating distributions: SpaceCodec.repair and the uniform / kde samplers."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
from ConfigSpace import (
    Categorical,
    Configuration,
    ConfigurationSpace,
    EqualsCondition,
    Float,
    ForbiddenAndConjunction,
    ForbiddenEqualsClause,
    InCondition,
    Integer,
)

from metaopt.components.samplers import KDESampler, UniformSampler
from metaopt.core.archive import Archive
from metaopt.core.benchmarks import get_benchmark
from metaopt.core.budget import Budget
from metaopt.core.context import ProposalContext, RunState
from metaopt.core.registry import get_component
from metaopt.core.space_codec import SpaceCodec

MLP = get_benchmark("synthetic:mlp").problem("0")  # int, log int, log float, categorical, conditional
R_MAX = float(MLP.fidelity.r_max)


# -- helpers ---------------------------------------------------------------------------------
def assert_valid(codec: SpaceCodec, X: np.ndarray) -> None:
    """Every row passes ConfigSpace's own validation, and every active entry is a legal vector."""
    for row in X:
        Configuration(codec.space, vector=row).check_valid_configuration()
    for j, name in enumerate(codec.names):
        active = ~np.isnan(X[:, j])
        assert codec.space[name].legal_vector(X[active, j]).all(), name


def make_ctx(codec: SpaceCodec, X: np.ndarray, loss: np.ndarray, fidelity: np.ndarray | float = R_MAX,
             seed: int = 0) -> ProposalContext:
    """A proposal context whose archive holds (X, fidelity, loss). The sampler only reads the
    archive, codec and rng, so the mlp problem stands in for toy spaces' problems."""
    n = len(X)
    archive = Archive(codec.dim)
    if n:
        archive.add(X, config_id=np.arange(n), batch=np.zeros(n), stage=np.zeros(n), bracket=np.zeros(n),
                    fidelity=np.broadcast_to(np.asarray(fidelity, float), (n,)).copy(), loss=np.asarray(loss, float),
                    cost=np.ones(n))
    state = RunState(MLP, Budget.parse("30d", codec.dim), archive)
    return ProposalContext(state, codec, np.random.default_rng(seed), R_MAX)


def mlp_ctx(n: int, seed: int = 0, fidelity: float = R_MAX) -> ProposalContext:
    """n uniform mlp configurations evaluated by the benchmark at ``fidelity``."""
    codec = SpaceCodec(MLP.search_space)
    X = codec.sample_uniform(n, np.random.default_rng(1000 + seed))
    loss = MLP.evaluate(codec.to_dicts(X), np.full(n, fidelity)).loss if n else np.empty(0)
    return make_ctx(codec, X, loss, fidelity, seed)


def load_yahpo_space(data: Path, scenario: str) -> ConfigurationSpace:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ConfigurationSpace.from_json(data / scenario / "config_space.json")


def toy_space() -> ConfigurationSpace:
    """A forbidden clause and a nested (two-level) condition, plus a log integer."""
    cs = ConfigurationSpace(seed=0)
    kind = Categorical("kind", ["a", "b", "c"])
    depth = Integer("depth", (1, 10))
    width = Integer("width", (2, 512), log=True)
    gate = Categorical("gate", ["on", "off"])
    leaf = Float("leaf", (1e-4, 1.0), log=True)
    cs.add([kind, depth, width, gate, leaf])
    cs.add([InCondition(depth, kind, ["a", "b"]), EqualsCondition(gate, depth, 3), EqualsCondition(leaf, gate, "on")])
    cs.add(ForbiddenAndConjunction(ForbiddenEqualsClause(kind, "c"), ForbiddenEqualsClause(width, 2)))
    return cs


def perturbed(codec: SpaceCodec, n: int, rng: np.random.Generator) -> np.ndarray:
    """Valid rows pushed out of shape: noise, out-of-range values, random NaNs and set inactives."""
    X = codec.sample_uniform(n, rng)
    X = np.where(np.isnan(X), rng.random(X.shape), X)  # inactive entries given values
    X = X + rng.normal(0.0, 0.3, X.shape) * np.where(codec.layout.categorical, 3.0, 1.0)
    X[rng.random(X.shape) < 0.1] = np.nan
    return X


# -- repair ----------------------------------------------------------------------------------
@pytest.mark.parametrize("scenario", ["lcbench", "rbv2_xgboost", "nb301"])
def test_repair_makes_valid_configurations_on_yahpo_spaces(yahpo_data, scenario):
    codec = SpaceCodec(load_yahpo_space(yahpo_data, scenario))
    rng = np.random.default_rng(0)
    R = codec.repair(perturbed(codec, 300, rng), rng)
    assert R.shape == (300, codec.dim)
    assert_valid(codec, R)


def test_repair_handles_forbiddens_and_nested_conditions():
    codec = SpaceCodec(toy_space())
    rng = np.random.default_rng(1)
    X = perturbed(codec, 2000, rng)
    X[:200, codec.names.index("kind")] = 2.2  # -> "c"
    X[:200, codec.names.index("width")] = -0.3  # -> 2: forbidden together with "c"
    R = codec.repair(X, rng)
    assert_valid(codec, R)
    # all three levels of the nested condition occur both active and inactive
    for name in ("depth", "gate", "leaf"):
        col = R[:, codec.names.index(name)]
        assert np.isnan(col).any() and (~np.isnan(col)).any(), name


def test_repair_snaps_integers_and_categoricals_and_fixes_activity():
    codec = SpaceCodec(toy_space())
    kind, depth, width, gate, leaf = (codec.names.index(n) for n in ("kind", "depth", "width", "gate", "leaf"))
    rng = np.random.default_rng(2)
    X = np.full((3, codec.dim), np.nan)
    X[:, kind] = [0.2, 1.6, 0.0]  # -> a, c, a
    X[:, depth] = [0.23, 0.5, 1.7]  # 0.23 -> 1 + 0.23 * 9 = 3.07 -> 3; row 1 inactive (c); row 2 -> 10
    X[:, width] = [0.5, 0.5, 0.5]
    X[0, gate] = 0.0  # on, and leaf is NaN although active
    X[2, gate] = 1.0  # depth = 10, so gate must become inactive
    R = codec.repair(X, rng)
    assert_valid(codec, R)
    values = codec.to_dicts(R)
    assert [v["kind"] for v in values] == ["a", "c", "a"]
    assert values[0]["depth"] == 3 and "depth" not in values[1] and values[2]["depth"] == 10
    assert values[0]["gate"] == "on" and 1e-4 <= values[0]["leaf"] <= 1  # the active NaN got a value
    assert "gate" not in values[2] and "leaf" not in values[2]
    assert R[0, depth] == codec.space["depth"].to_vector(3)


def test_repair_leaves_valid_configurations_unchanged(yahpo_data):
    for space in (toy_space(), MLP.search_space, load_yahpo_space(yahpo_data, "rbv2_xgboost")):
        codec = SpaceCodec(space)
        rng = np.random.default_rng(3)
        X = codec.sample_uniform(500, rng)
        np.testing.assert_array_equal(codec.repair(X, rng), X)


def test_repair_replaces_forbidden_rows():
    codec = SpaceCodec(toy_space())
    x = np.full(codec.dim, np.nan)
    x[codec.names.index("kind")], x[codec.names.index("width")] = 2.0, 0.0  # kind = c, width = 2
    rng = np.random.default_rng(4)
    R = codec.repair(np.tile(x, (50, 1)), rng)
    assert_valid(codec, R)
    assert not any(v["kind"] == "c" and v["width"] == 2 for v in codec.to_dicts(R))


# -- kde: model ------------------------------------------------------------------------------
def test_kde_is_registered_with_its_hyperparameters():
    comp = get_component("samplers", "kde")
    assert comp.hyperparameter_names == ["kde_bandwidth_factor", "kde_top_fraction"]
    sampler = comp.build({"kde_bandwidth_factor": 2.0, "kde_top_fraction": 0.3})
    assert isinstance(sampler, KDESampler)
    assert (sampler.bandwidth_factor, sampler.top_fraction) == (2.0, 0.3)


def test_kde_falls_back_to_uniform_with_too_few_points():
    d = SpaceCodec(MLP.search_space).dim
    for n in (0, d + 3):
        ctx, ref = mlp_ctx(n, seed=5), mlp_ctx(n, seed=5)
        assert KDESampler().good_points(ctx) is None
        np.testing.assert_array_equal(KDESampler().sample(100, ctx), UniformSampler().sample(100, ref))


def test_kde_uses_the_largest_fidelity_with_enough_points():
    codec = SpaceCodec(MLP.search_space)
    d = codec.dim
    rng = np.random.default_rng(6)
    n_low, n_mid, n_high = 60, d + 4, d + 3  # the top fidelity has one point too few
    X = codec.sample_uniform(n_low + n_mid + n_high, rng)
    fid = np.repeat([3.0, 9.0, 27.0], [n_low, n_mid, n_high])
    loss = rng.random(len(X))
    good = KDESampler().good_points(make_ctx(codec, X, loss, fid))
    mid = slice(n_low, n_low + n_mid)
    assert len(good) == d + 2  # 15% of d + 4 is less than d + 2
    expected = X[mid][np.argsort(loss[mid])[: d + 2]]
    np.testing.assert_array_equal(good, expected)
    # with many points, the top 15%
    good = KDESampler().good_points(make_ctx(codec, X[:n_low], loss[:n_low], 3.0))
    assert len(good) == max(d + 2, int(0.15 * n_low))


# -- kde: samples ----------------------------------------------------------------------------
def test_kde_samples_are_valid_and_conditionals_correct():
    ctx = mlp_ctx(120)
    codec = ctx.codec
    S = KDESampler().sample(1000, ctx)
    assert S.shape == (1000, codec.dim)
    assert_valid(codec, S[:300])
    optimizer = codec.to_dicts(S)
    sgd = np.array([v["optimizer"] == "sgd" for v in optimizer])
    momentum = S[:, codec.names.index("momentum")]
    assert sgd.any() and (~sgd).any()
    assert np.array_equal(np.isnan(momentum), ~sgd)
    assert ((momentum[sgd] >= 0) & (momentum[sgd] <= 1)).all()


def test_kde_categorical_follows_good_points():
    """Good points all with optimizer = adam: samples keep adam (λ at its floor); with a mix both occur."""
    codec = SpaceCodec(MLP.search_space)
    rng = np.random.default_rng(7)
    X = codec.sample_uniform(200, rng)
    adam = np.array([v["optimizer"] == "adam" for v in codec.to_dicts(X)])
    ctx = make_ctx(codec, X, np.where(adam, rng.random(200), 10 + rng.random(200)))
    S = KDESampler().sample(2000, ctx)
    share_adam = np.mean([v["optimizer"] == "adam" for v in codec.to_dicts(S)])
    assert share_adam > 0.99
    assert np.isnan(S[:, codec.names.index("momentum")]).mean() > 0.99  # momentum only with sgd

    S = KDESampler().sample(2000, make_ctx(codec, X, rng.random(200)))
    share_adam = np.mean([v["optimizer"] == "adam" for v in codec.to_dicts(S)])
    assert 0.2 < share_adam < 0.8


def test_kde_concentrates_around_good_points():
    ctx = mlp_ctx(300)
    codec = ctx.codec
    kde = KDESampler()
    S, U = kde.sample(2000, ctx), codec.sample_uniform(2000, np.random.default_rng(8))
    num = codec.layout.numeric
    G = np.nan_to_num(kde.good_points(ctx)[:, num], nan=0.5)

    def distance_to_good(A: np.ndarray) -> float:
        A = np.nan_to_num(A[:, num], nan=0.5)
        return float(np.sqrt(((A[:, None] - G[None]) ** 2).sum(-1)).min(axis=1).mean())

    assert distance_to_good(S) < 0.92 * distance_to_good(U)
    full = np.full(2000, R_MAX)
    loss_kde = MLP.evaluate(codec.to_dicts(S), full).loss.mean()
    loss_uniform = MLP.evaluate(codec.to_dicts(U), full).loss.mean()
    assert loss_kde < loss_uniform


def test_kde_concentrates_tightly_when_good_points_agree():
    space = ConfigurationSpace({"x": (0.0, 1.0), "y": (0.0, 1.0)})
    codec = SpaceCodec(space)
    rng = np.random.default_rng(9)
    X = codec.sample_uniform(400, rng)
    center = np.array([0.3, 0.7])
    ctx = make_ctx(codec, X, np.linalg.norm(X - center, axis=1))
    S = KDESampler().sample(2000, ctx)
    distance = np.linalg.norm(S - center, axis=1)
    assert np.median(distance) < 0.5 * np.median(np.linalg.norm(codec.sample_uniform(2000, rng) - center, axis=1))


def test_kde_integers_spread_near_good_points_not_clamped_to_the_bound():
    """The R reference clamps every KDE-sampled integer to its upper bound; ours must not."""
    codec = SpaceCodec(MLP.search_space)
    rng = np.random.default_rng(10)
    X = codec.sample_uniform(400, rng)
    values = codec.to_dicts(X)
    units = np.array([v["units"] for v in values], float)
    layers = np.array([v["num_layers"] for v in values], float)
    loss = np.abs(np.log(units / 128)) + np.abs(layers - 3)  # good: ~128 units, 3 layers
    S = codec.to_dicts(KDESampler().sample(2000, make_ctx(codec, X, loss)))
    s_units = np.array([v["units"] for v in S])
    s_layers = np.array([v["num_layers"] for v in S])
    assert np.issubdtype(s_units.dtype, np.integer)
    assert len(np.unique(s_units)) >= 20
    assert 64 <= np.median(s_units) <= 256
    # the bound is reached only through the (3x widened) kernel's tail, and no more than the lower one
    assert np.mean(s_units == 1024) < 0.01 and np.mean(s_units > 512) < 0.2
    assert np.mean(s_units >= 512) < 2 * np.mean(s_units <= 32)
    assert set(np.unique(s_layers)) >= {2, 3, 4}
    counts = np.bincount(s_layers, minlength=6)
    assert counts.argmax() == 3 and counts[5] < 0.5 * counts[3]


def test_kde_is_deterministic_per_seed():
    a = KDESampler().sample(500, mlp_ctx(100, seed=11))
    b = KDESampler().sample(500, mlp_ctx(100, seed=11))
    np.testing.assert_array_equal(a, b)
    ctx = mlp_ctx(100, seed=11)
    ctx.rng = np.random.default_rng(12)  # same archive, another seed
    c = KDESampler().sample(500, ctx)
    assert not np.array_equal(np.nan_to_num(a), np.nan_to_num(c))


def test_kde_keeps_no_state_between_calls():
    ctx = mlp_ctx(100, seed=13)
    kde = KDESampler()
    kde.sample(50, mlp_ctx(40, seed=14))  # an earlier call on another archive leaves no trace
    ctx.rng = np.random.default_rng(13)
    used = kde.sample(200, ctx)
    ctx.rng = np.random.default_rng(13)
    np.testing.assert_array_equal(used, KDESampler().sample(200, ctx))
