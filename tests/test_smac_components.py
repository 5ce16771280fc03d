"""SMAC's strengths as components: log-EI, surrogate targets, the local-and-random acquisition search,
random-forest settings, the GP refit schedule, and the smac_like preset."""

import numpy as np
import pytest
from scipy import integrate
from scipy.stats import norm

from metaopt.core.archive import Archive
from metaopt.core.benchmarks import get_benchmark
from metaopt.core.budget import Budget
from metaopt.components.acquisition import log_expected_improvement
from metaopt.components.filters import LocalAndRandomFilter, Scorer, target_transform
from metaopt.components.samplers import UniformSampler
from metaopt.components.surrogates import GaussianProcess, RandomForest
from metaopt.core.context import ProposalContext, RunState
from metaopt.engine.loop import Optimizer, run
from metaopt.core.registry import components
from metaopt.core.space_codec import SpaceCodec
from metaopt.spaces.design_space import design_space
from metaopt.spaces.presets import get_preset
from metaopt.spaces.restrictions import TABLE4_DEFAULTS, get_restriction


@pytest.mark.parametrize("mean,std,best", [(0.0, 1.0, 0.5), (-1.0, 0.3, -1.2), (2.0, 0.01, 1.0), (0.3, 2.0, 0.0),
                                            (1.0, 40.0, -0.5), (5.0, 60.0, 0.0), (-3.0, 150.0, -2.0)])
def test_log_ei_is_the_expected_improvement_of_exp_y(mean, std, best):
    """E[max(e^best − e^Y, 0)] for Y ~ N(mean, std²), by numerical integration; also where a very unsure
    model's e^(mean + std²/2) overflows a double (std ≥ 40 here), which once ended a run."""
    integrand = lambda y: max(np.exp(best) - np.exp(y), 0.0) * norm.pdf(y, mean, std)  # noqa: E731
    expected, _ = integrate.quad(integrand, mean - 12 * std, best, points=[best - 1.0], limit=200)
    got = log_expected_improvement(np.array([mean]), np.array([std]), best)[0]
    assert got == pytest.approx(expected, rel=1e-6, abs=1e-12)
    assert log_expected_improvement(np.array([mean]), np.array([0.0]), best)[0] == max(np.exp(best) - np.exp(mean), 0)


def test_log_ei_ranks_candidates_when_the_best_loss_overflows_exp():
    """A model of raw losses (surrogate_target none) under log-EI on an objective with losses above
    709.78, e.g. Rosenbrock's 10^5: e^y_best overflows, which raised OverflowError and ended the run.
    The candidates' scores are then EI / e^y_best, so their order is that of the shifted problem."""
    mean, std = np.array([1000.0, 1001.0, 999.0, 1000.0, 990.0]), np.array([1.0, 3.0, 0.5, 0.0, 0.0])
    big = log_expected_improvement(mean, std, 1000.5)
    shifted = log_expected_improvement(mean - 1000.5, std, 0.0)
    assert np.array_equal(big, shifted) and np.all(np.isfinite(big))
    assert big[4] == pytest.approx(1 - np.exp(-10.5)) and big[3] == pytest.approx(1 - np.exp(-0.5))
    # the same order as at a scale where nothing overflows (every loss shifted down by 1000)
    small = log_expected_improvement(mean - 1000.0, std, 0.5)
    assert list(np.argsort(-big, kind="stable")) == list(np.argsort(-small, kind="stable"))


def test_a_log_ei_design_on_raw_losses_runs_on_an_objective_with_huge_losses():
    """metaopt.minimize with smac_like's log-EI on raw losses (surrogate_target none) over a 2-d
    Rosenbrock shifted by 1000, so that every loss is above e^x's overflow at 709.78: the run finishes
    (it raised OverflowError at the first model-based proposal) and improves on its initial design."""
    import metaopt
    from ConfigSpace import ConfigurationSpace, Float
    from metaopt.core.benchmarks.function import NO_FIDELITY

    space = ConfigurationSpace(seed=0)
    space.add([Float("x0", (-5.0, 10.0)), Float("x1", (-5.0, 10.0))])
    config = {**get_preset("smac_like").config(NO_FIDELITY), "surrogate_target": "none"}
    rosenbrock = lambda c, _: 1000 + 100 * (c["x1"] - c["x0"] ** 2) ** 2 + (1 - c["x0"]) ** 2  # noqa: E731
    result = metaopt.minimize(rosenbrock, space, optimizer=config, budget="30", seed=0)
    loss = result.trace["loss"].to_numpy()
    assert len(loss) == 30 and loss.max() > 1e4 and result.loss < loss[:10].min()


def test_surrogate_targets_are_monotone_and_map_the_incumbent_alike():
    loss = np.array([3.0, 1.0, np.nan, 2.0, 10.0])
    same, f = target_transform(loss, "none")
    assert same is loss and f(1.0) == 1.0
    for kind in ("log", "rank"):
        target, f = target_transform(loss, kind)
        finite = np.isfinite(loss)
        assert np.isnan(target[~finite]).all()
        order = np.argsort(loss[finite])
        assert np.all(np.diff(target[finite][order]) > 0)  # the order of the losses is kept
        assert np.isfinite(f(1.0)) and f(1.0) <= target[finite].min() + 1e-12  # the best maps to the lowest
    log_target, _ = target_transform(loss, "log")
    assert np.isfinite(log_target[1])  # the best loss stays finite under the shift


def _context(space_name="synthetic:mlp", n_evaluated=12, seed=0):
    bench = get_benchmark(space_name)
    problem = bench.problem("0")
    codec = SpaceCodec(problem.search_space)
    state = RunState(problem, Budget.parse("100", problem.d), Archive(codec.dim), codec=codec)
    rng = np.random.default_rng(seed)
    X = codec.sample_uniform(n_evaluated, rng)
    result = problem.evaluate(codec.to_dicts(X), np.full(n_evaluated, problem.fidelity.r_max))
    state.archive.add(X, config_id=np.arange(n_evaluated), batch=np.arange(n_evaluated), stage=np.zeros(n_evaluated),
                      bracket=np.zeros(n_evaluated), fidelity=np.full(n_evaluated, problem.fidelity.r_max),
                      loss=result.loss, cost=result.cost)
    return ProposalContext(state, codec, rng, problem.fidelity.r_max), codec


def _filter(**changes):
    args = dict(lrs_random=200, lrs_starts=5, lrs_neighbours=10, lrs_steps=5, lrs_step=0.1, filter_rho_0=0.0,
                filter_rho_1=0.0, filter_ns0_0=1.0, filter_ns0_1=1.0, filter_ns1_0=1.0, filter_ns1_1=1.0,
                filter_mb=True, filter_rho_random=False, surrogate_target="none")
    args.update(changes)
    return LocalAndRandomFilter(**args)


def _scorer():
    from metaopt.components.acquisition import ExpectedImprovement

    return Scorer(RandomForest(rf_n_trees=10), ExpectedImprovement(), True)


def test_local_and_random_search_returns_legal_new_distinct_points_deterministically():
    runs = []
    for _ in range(2):
        ctx, codec = _context()
        X = _filter().propose(6, ctx, UniformSampler(), _scorer())
        runs.append(X)
        assert X.shape == (6, codec.dim)
        for row in X:  # a legal configuration: decoding and encoding give the row back
            assert codec.to_vector(codec.to_dicts(row[None])[0]) == pytest.approx(row, nan_ok=True)
        keys = {np.nan_to_num(r, nan=-1).tobytes() for r in X}
        assert len(keys) == 6  # distinct
        assert not keys & {np.nan_to_num(r, nan=-1).tobytes() for r in ctx.archive.X}  # never re-proposed
    np.testing.assert_array_equal(runs[0], runs[1])


def _add_evaluated(ctx, X):
    """Evaluate the rows ``X`` on the context's problem and append them to its archive."""
    problem, archive = ctx.state.problem, ctx.state.archive
    n, start = len(X), len(archive)
    result = problem.evaluate(ctx.codec.to_dicts(X), np.full(n, problem.fidelity.r_max))
    archive.add(X, config_id=start + np.arange(n), batch=start + np.arange(n), stage=np.zeros(n),
                bracket=np.zeros(n), fidelity=np.full(n, problem.fidelity.r_max), loss=result.loss, cost=result.cost)


def test_retrain_after_k_evaluates_the_next_candidates_of_one_maximization_without_drawing():
    """lrs_retrain_after k = 4: four calls of one point each, evaluated in between, propose what one
    call for four points proposes (one maximization's first four), the three later calls draw no
    random numbers; the fifth call (four new evaluations) maximizes anew."""
    ctx, _ = _context(seed=5)
    batch = _filter(lrs_retrain_after=4).propose(4, ctx, UniformSampler(), _scorer())
    ctx, _ = _context(seed=5)
    f, scorer = _filter(lrs_retrain_after=4), _scorer()
    proposed = []
    for call in range(4):
        before = ctx.rng.bit_generator.state
        X = f.propose(1, ctx, UniformSampler(), scorer)
        if call > 0:
            assert ctx.rng.bit_generator.state == before  # no new maximization
        proposed.append(X[0])
        _add_evaluated(ctx, X)
    np.testing.assert_array_equal(np.array(proposed), batch)
    before = ctx.rng.bit_generator.state
    f.propose(1, ctx, UniformSampler(), scorer)
    assert ctx.rng.bit_generator.state != before  # retrained after four evaluations


def test_retrain_after_k_offers_the_local_searches_end_points_first():
    """With k > 1 a maximization's proposals are its local searches' end points by score (SMAC's
    challengers), not the best-scored neighbours, which crowd around one search's end."""
    from metaopt.components.filters import _row_keys

    ctx, _ = _context(n_evaluated=20, seed=7)
    f, scorer = _filter(lrs_retrain_after=4, lrs_starts=8), _scorer()
    evaluated = np.unique(ctx.archive.X, axis=0)
    pool, pool_scores, ends, end_scores = f.maximize(4, ctx, UniformSampler(), scorer, evaluated)
    assert len(ends) == 8
    new_ends = [i for i in np.argsort(end_scores, kind="stable") if _row_keys(ends[i:i + 1])[0]
                not in set(_row_keys(evaluated))]
    unique_new = list(dict.fromkeys(_row_keys(ends[new_ends])))
    assert len(unique_new) >= 4  # the seed gives four distinct new end points
    ctx, _ = _context(n_evaluated=20, seed=7)
    X = _filter(lrs_retrain_after=4, lrs_starts=8).propose(4, ctx, UniformSampler(), _scorer())
    assert _row_keys(X) == unique_new[:4]


def test_retrain_after_one_is_a_maximization_per_call():
    ctx, _ = _context(seed=6)
    f, scorer = _filter(lrs_retrain_after=1), _scorer()
    for _ in range(3):
        before = ctx.rng.bit_generator.state
        _add_evaluated(ctx, f.propose(1, ctx, UniformSampler(), scorer))
        assert ctx.rng.bit_generator.state != before


def test_local_search_improves_on_the_random_candidates():
    ctx, _ = _context(n_evaluated=20, seed=3)
    scorer = _scorer()
    only_random = _filter(lrs_steps=1, lrs_starts=1, lrs_neighbours=2).propose(1, ctx, UniformSampler(), scorer)
    ctx2, _ = _context(n_evaluated=20, seed=3)
    searched = _filter(lrs_steps=20, lrs_starts=10, lrs_neighbours=30).propose(1, ctx2, UniformSampler(), scorer)
    score = scorer.fitted(ctx2)
    assert score(searched)[0] <= score(only_random)[0]


def test_neighbours_change_one_active_coordinate_and_categoricals_to_another_choice():
    ctx, codec = _context()
    f = _filter(lrs_neighbours=50)
    start = ctx.archive.X[:1]
    N = f.neighbours(start, ctx)
    cat = codec.layout.categorical
    n_conditional = len(codec.space.conditional_hyperparameters)
    changes = [int((~np.isclose(np.nan_to_num(row, nan=-9), np.nan_to_num(start[0], nan=-9))).sum()) for row in N]
    # one coordinate moves (plus conditional children switching with their parent); a step that an
    # integer's rounding or the box's edge takes back leaves a neighbour equal to its start
    assert max(changes) <= 1 + n_conditional and np.mean([c >= 1 for c in changes]) >= 0.8
    moved_cats = [row for row in N if (~np.isclose(row[cat], start[0][cat])).any()]
    assert all(set(np.unique(r[cat])) <= set(range(10)) for r in moved_cats)


def test_random_forest_settings_reach_the_trees():
    rng = np.random.default_rng(0)
    F, y = rng.random((40, 3)), rng.random(40)
    forest = RandomForest(rf_n_trees=7, rf_min_samples_leaf=4, rf_max_features=1.0, rf_bootstrap=False)
    forest.fit(F, y, rng)
    assert len(forest._trees) == 7
    leaves = [t.children_left == -1 for t in forest._trees]
    assert all((t.n_node_samples[leaf] >= 4).all() for t, leaf in zip(forest._trees, leaves))  # leaves of 4 or more
    # without bootstrap and with all features, trees differ only by tie-breaking: predictions agree
    mean, std = forest.predict(F)
    assert np.allclose(std, 0.0, atol=1e-12)
    assert np.all(np.array([t.n_leaves for t in forest._trees]) <= 10)


def _recorded_lbfgs(monkeypatch) -> list[int]:
    """The iterations of every L-BFGS run of the GP's kernel optimizations, appended as they end."""
    import metaopt.components._gp as gp_model

    iterations = []
    original = gp_model.minimize

    def recording(*args, **kwargs):
        result = original(*args, **kwargs)
        iterations.append(result.nit)
        return result

    monkeypatch.setattr(gp_model, "minimize", recording)
    return iterations


def test_gp_refits_its_kernel_only_when_the_archive_grew_enough(monkeypatch):
    calls = _recorded_lbfgs(monkeypatch)
    rng = np.random.default_rng(0)
    F, y = rng.random((60, 2)), rng.random(60)
    for growth, expected in ((0.0, 11), (0.5, 2)):
        calls.clear()
        gp = GaussianProcess(gp_refit_growth=growth)
        for n in range(10, 21):  # 11 fits on 10, 11, ..., 20 points
            gp.fit(F[:n], y[:n], rng)
        assert len(calls) == expected  # 0.5: at 10 and 15 points (the next at 23)
        mean, std = gp.predict(F[:5])
        assert np.all(np.isfinite(mean)) and np.all(std >= 0)


def test_gp_stops_lbfgs_after_the_given_iterations(monkeypatch):
    from metaopt.components._gp import default_theta, log_marginal_likelihood

    iterations = _recorded_lbfgs(monkeypatch)
    rng = np.random.default_rng(3)
    F = rng.random((40, 3))
    y = np.sin(6 * F[:, 0]) + F[:, 1] ** 2 + 0.05 * rng.random(40)
    likelihood = {}
    for k in (0, 1, 2):
        iterations.clear()
        gp = GaussianProcess(gp_lbfgs_iterations=k)
        gp.fit(F, y, np.random.default_rng(0))
        assert iterations == [k] if k else (len(iterations) == 1 and iterations[0] > 2)  # k = 0: until it converges
        likelihood[k] = gp._model.log_marginal_likelihood_value_
    start = log_marginal_likelihood(default_theta(3), gp._model.X, gp._model.y, gradient=False)[0]  # same data
    # The same path from the same start, stopped earlier: each iteration raises the likelihood.
    assert start < likelihood[1] <= likelihood[2] <= likelihood[0]
    assert likelihood[1] < likelihood[0]


def test_forest_grows_its_trees_only_when_the_archive_grew_enough():
    rng = np.random.default_rng(0)
    F, y = rng.random((60, 3)), rng.random(60)
    forest = RandomForest(rf_n_trees=5, rf_refit_growth=0.5)
    grown = []
    for n in range(10, 21):  # 11 fits on 10, 11, ..., 20 points
        forest.fit(F[:n], y[:n], rng)
        grown.append(forest._trees[0])
    assert len({id(tree) for tree in grown}) == 2  # grown at 10 and 15 points (the next at 23)
    # A fit on rows that do not extend the grown ones grows anew, whatever the size.
    forest.fit(F[1:21], y[1:21], rng)
    assert forest._trees[0] is not grown[-1]


def test_forest_leaf_values_between_growths_are_the_mean_loss_of_every_point_in_the_leaf():
    rng = np.random.default_rng(1)
    F, y = rng.random((40, 2)), rng.random(40)
    forest = RandomForest(rf_n_trees=4, rf_refit_growth=0.5, rf_bootstrap=False)
    forest.fit(F[:30], y[:30], rng)
    # Right after growing, the leaf values are the trees' own (each leaf's mean loss).
    mean, _ = forest.predict(F[30:])
    assert np.allclose(mean, np.mean([t.predict(F[30:].astype(np.float32))[:, 0] for t in forest._trees], axis=0))
    # A new point where an old one lies: its leaf now averages both losses, in every tree.
    F_new = np.vstack([F[:30], F[:1]])
    y_new = np.append(y[:30], y[0] + 10.0)
    trees = list(forest._trees)
    forest.fit(F_new, y_new, rng)
    assert forest._trees == trees  # kept, not grown
    mean, std = forest.predict(F[:1])
    for tree in forest._trees:
        in_leaf = tree.apply(F_new.astype(np.float32)) == tree.apply(F[:1].astype(np.float32))[0]
        assert in_leaf.sum() >= 2
    expected = np.mean([y_new[tree.apply(F_new.astype(np.float32)) == tree.apply(F[:1].astype(np.float32))[0]].mean()
                        for tree in forest._trees])
    assert mean[0] == pytest.approx(expected)


def test_forest_refit_schedule_zero_is_the_plain_forest():
    rng_data = np.random.default_rng(2)
    F, y = rng_data.random((50, 3)), rng_data.random(50)
    plain = RandomForest(rf_n_trees=6).fit(F, y, np.random.default_rng(5)).predict(F[:10])
    scheduled = RandomForest(rf_n_trees=6, rf_refit_growth=0.3).fit(F, y, np.random.default_rng(5)).predict(F[:10])
    assert np.allclose(plain[0], scheduled[0]) and np.allclose(plain[1], scheduled[1])


def test_the_papers_table4_space_is_unchanged_by_the_new_hyperparameters():
    table4 = get_restriction("table4").space()
    full = design_space()
    assert all(name in full for name in TABLE4_DEFAULTS)
    assert not any(name in table4 for name in TABLE4_DEFAULTS)
    assert len(table4) == 23
    config = get_restriction("table4").complete(dict(table4.get_default_configuration()))
    if config.get("surrogate") == "rf":
        assert config["rf_n_trees"] == 50


def test_smac_like_is_a_point_of_the_space_and_runs():
    assert "local_random" in [c.name for c in components("filters")]
    problem = get_benchmark("synthetic:mlp").problem("0")
    config = get_preset("smac_like").config(problem.fidelity)
    optimizer = Optimizer.from_config(config)
    assert isinstance(optimizer.proposal.filter, LocalAndRandomFilter)
    assert optimizer.proposal.scorer.target == "log" and optimizer.proposal.scorer.surrogate.n_estimators == 10
    result = run(config, problem, 1, "5d")
    assert len(result.trace) == 5 * problem.d and result.trace["config_id"].is_unique


def test_best_distinct_skips_repeats_and_excluded_rows_inactive_values_included():
    """The filter's pick: lowest scores first (ties in candidate order), each row once, none of the
    excluded rows (those evaluated at the maximization and those passed in later); rows that differ
    only where one is inactive (NaN) are distinct."""
    from metaopt.components.filters import _Maximized, _row_keys

    nan = np.nan
    candidates = np.array([[0.1, nan], [0.2, 0.5], [0.1, nan], [0.3, 0.0], [0.1, 0.0], [0.9, 0.9]])
    scores = np.array([0.0, 0.5, 0.0, 0.1, 0.2, 0.1])
    maximized = _Maximized(candidates, np.argsort(scores, kind="stable"),
                           set(_row_keys(np.array([[0.3, 0.0]]))), 0)
    np.testing.assert_array_equal(maximized.best(4), candidates[[0, 5, 4, 1]])  # row 2 repeats row 0, row 3 is excluded
    np.testing.assert_array_equal(maximized.best(4, _row_keys(candidates[[5]])), candidates[[0, 4, 1]])
    assert len(maximized.best(2)) == 2  # a pick leaves the maximization as it was
    assert len(_Maximized(candidates, np.arange(6), set(), 0).best(10)) == 5  # only 5 distinct rows
