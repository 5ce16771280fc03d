"""Cost penalties on EI (paper 003): semantics on hand-made (EI, cost), the Scorer, the space, presets."""

import numpy as np
import pytest
from scipy.stats import rankdata

from metaopt.components.acquisition import ExpectedImprovement, expected_improvement
from metaopt.components.cost_models import LogLinearCostModel
from metaopt.components.cost_penalties import ContextualEI, EIAlpha, EICool, EIPerUnitCost, NoPenalty
from metaopt.components.filters import Scorer
from metaopt.components.surrogates import GaussianProcess
from metaopt.core.archive import Archive
from metaopt.core.benchmarks import get_benchmark
from metaopt.core.budget import Budget
from metaopt.core.context import ProposalContext, RunState
from metaopt.core.features import FeatureEncoder
from metaopt.engine.loop import run
from metaopt.core.space_codec import SpaceCodec
from metaopt.spaces.design_space import design_space
from metaopt.spaces.presets import get_preset

EI = np.array([0.5, 0.1, 0.45, 0.2, 0.0, 0.3])
COST = np.array([10.0, 1.0, 2.0, 0.5, 0.1, 3.0])
FALLBACK = np.array([3.0, 1.0, 2.0, 5.0, 4.0, 0.0])
BENCH = get_benchmark("synthetic:boosting")
PROBLEM = BENCH.problem(BENCH.test_instances[0])


def best(penalty, ei=EI, cost=COST, t=0.0):
    return int(np.argmin(penalty.score(ei, cost, t, FALLBACK)))


def order(scores):
    return list(np.argsort(scores, kind="stable"))


def test_eipu_ranks_by_ei_per_cost():
    scores = EIPerUnitCost().score(EI, COST, 0.3, FALLBACK)
    assert np.allclose(scores, -EI / COST)
    assert order(scores) == order(-EI / COST)
    assert best(EIPerUnitCost()) == 3  # 0.2 / 0.5 is the largest ratio


def test_ei_alpha_interpolates_between_ei_and_eipu():
    assert order(EIAlpha(1e-12).score(EI, COST, 0.0, FALLBACK)) == order(-EI)
    assert np.allclose(EIAlpha(1.0).score(EI, COST, 0.0, FALLBACK), EIPerUnitCost().score(EI, COST, 0.0, FALLBACK))
    assert np.allclose(EIAlpha(0.5).score(EI, COST, 0.0, FALLBACK), -EI / np.sqrt(COST))
    assert best(EIAlpha(1e-12)) == 0 and best(EIAlpha(1.0)) == 3 and best(EIAlpha(0.2)) == 2


def test_ei_cool_goes_from_eipu_to_ei():
    cool = EICool()
    assert np.allclose(cool.score(EI, COST, 0.0, FALLBACK), -EI / COST)
    assert np.allclose(cool.score(EI, COST, 1.0, FALLBACK), -EI)
    assert np.allclose(cool.score(EI, COST, 0.75, FALLBACK), -EI / COST**0.25)
    assert best(cool, t=0.0) == 3 and best(cool, t=1.0) == 0


def test_cei_picks_the_cheapest_good_enough_candidate():
    # lambda = 0.1: eligible EI >= 0.45 -> {0 (cost 10), 2 (cost 2)}; then the rest by decreasing EI
    assert order(ContextualEI(0.1).score(EI, COST, 0.0, FALLBACK)) == [2, 0, 5, 3, 1, 4]
    assert best(ContextualEI(0.0)) == 0  # lambda = 0: EI's argmax
    assert best(ContextualEI(0.5)) == 2  # EI >= 0.25: {0, 2, 5}
    assert best(ContextualEI(0.7)) == 3  # EI >= 0.15: {0, 2, 3, 5}
    assert best(ContextualEI(1.0)) == 4  # every candidate: the cheapest overall


def test_cei_in_a_tournament_uses_the_global_threshold():
    scores = ContextualEI(0.1).score(EI, COST, 0.0, FALLBACK)
    # a tournament over {0, 1, 2}: both 0 and 2 are eligible, 2 is cheaper
    assert [0, 1, 2][int(np.argmin(scores[[0, 1, 2]]))] == 2
    # a tournament over {1, 3, 5}: none is eligible w.r.t. all candidates -> its highest EI (5)
    assert [1, 3, 5][int(np.argmin(scores[[1, 3, 5]]))] == 5
    # ties keep positions: equal EI and cost -> the first
    tied = ContextualEI(0.1).score(np.array([1.0, 1.0]), np.array([2.0, 2.0]), 0.0, np.zeros(2))
    assert order(tied) == [0, 1]


@pytest.mark.parametrize("penalty", [EIPerUnitCost(), EIAlpha(0.5), EICool(), ContextualEI(0.1)])
def test_no_positive_ei_falls_back_to_the_acquisition(penalty):
    assert np.array_equal(penalty.score(np.zeros(6), COST, 0.5, FALLBACK), FALLBACK)
    # a zero-EI candidate ranks after every positive one
    assert order(penalty.score(EI, COST, 0.5, FALLBACK))[-1] == 4


def test_none_is_the_acquisition_alone():
    assert not NoPenalty.uses_cost
    assert np.array_equal(NoPenalty().score(EI, COST, 0.5, FALLBACK), FALLBACK)


def test_unfitted_or_tiny_costs_are_safe():
    # cost 1 everywhere (no cost data yet): every penalty orders by EI
    for penalty in (EIPerUnitCost(), EIAlpha(0.3), EICool()):
        assert order(penalty.score(EI, np.ones(6), 0.2, FALLBACK)) == order(-EI)
    assert np.isfinite(EIPerUnitCost().score(EI, np.zeros(6), 0.0, FALLBACK)).all()


def _context(n_evals: int, seed: int = 0) -> ProposalContext:
    codec = SpaceCodec(PROBLEM.search_space)
    rng = np.random.default_rng(seed)
    X = codec.sample_uniform(n_evals, rng)
    r = np.full(n_evals, PROBLEM.fidelity.r_max)
    result = PROBLEM.evaluate(codec.to_dicts(X), r)
    archive = Archive(codec.dim)
    archive.add(X, config_id=np.arange(n_evals), batch=np.arange(n_evals), stage=np.zeros(n_evals),
                bracket=np.zeros(n_evals), fidelity=r, loss=result.loss, cost=result.cost)
    state = RunState(PROBLEM, Budget(100.0), archive, budget_used=25.0, codec=codec)
    return ProposalContext(state, codec, np.random.default_rng(seed + 1), PROBLEM.fidelity.r_max)


def test_scorer_without_penalty_is_unchanged_and_draws_nothing_more():
    ctx_a, ctx_b = _context(12), _context(12)
    candidates = ctx_a.codec.sample_uniform(50, np.random.default_rng(5))
    plain = Scorer(GaussianProcess(), ExpectedImprovement(), True).fit_and_score(ctx_a, candidates)
    none = Scorer(GaussianProcess(), ExpectedImprovement(), True, cost_penalty=NoPenalty(), cost_model=LogLinearCostModel())
    assert np.array_equal(none.fit_and_score(ctx_b, candidates), plain)
    assert ctx_a.rng.bit_generator.state == ctx_b.rng.bit_generator.state


def test_scorer_applies_the_penalty_to_ei_and_predicted_cost():
    ctx = _context(12)
    candidates = ctx.codec.sample_uniform(50, np.random.default_rng(5))
    scorer = Scorer(GaussianProcess(), ExpectedImprovement(), True,
                    cost_penalty=EIPerUnitCost(), cost_model=LogLinearCostModel())
    scores = scorer.fit_and_score(ctx, candidates)
    # recompute by hand from the fitted models (at the largest fidelity, as filter_mb asks)
    F = FeatureEncoder(ctx.codec, PROBLEM.fidelity).encode(candidates, PROBLEM.fidelity.r_max)
    mean, std = scorer.surrogate.predict(F)
    ei = expected_improvement(mean, std, float(np.min(ctx.archive.loss)))
    assert np.allclose(scores, -ei / scorer.cost_model.predict(F))
    # the log-linear cost model ranks the candidates like their true costs
    true_cost = PROBLEM.evaluate(ctx.codec.to_dicts(candidates), np.full(50, PROBLEM.fidelity.r_max)).cost
    assert np.corrcoef(rankdata(scorer.cost_model.predict(F)), rankdata(true_cost))[0, 1] > 0.7


def test_design_space_never_pairs_a_penalty_with_a_std_free_surrogate():
    space = design_space()
    space.seed(0)
    seen = set()
    for config in space.sample_configuration(200):
        penalty = config.get("cost_penalty")
        if penalty not in (None, "none"):
            seen.add(penalty)
            assert config["surrogate"] not in ("knn1", "kknn7", "tpe")
    assert seen  # the check is not vacuous


@pytest.mark.parametrize("name", ["bo_eipu", "bo_ei_alpha", "bo_eicool", "bo_cei"])
def test_cost_aware_presets_run(name):
    result = run(get_preset(name).config(PROBLEM.fidelity), PROBLEM, seed=0, budget="5d")
    assert result.summary["n_evals"] == 5 * PROBLEM.d
    assert result.trace["loss"].notna().all()


def test_eipu_spends_less_per_evaluation_than_ei():
    def mean_cost(config: dict) -> float:
        return float(np.mean([run(config, PROBLEM, seed=s, budget="5d").trace["cost"].mean() for s in range(4)]))

    eipu = get_preset("bo_eipu").config(PROBLEM.fidelity)
    ei = {k: v for k, v in eipu.items() if k not in ("cost_penalty", "cost_model")}  # the same GP-EI BO, no penalty
    assert mean_cost(eipu) < 0.8 * mean_cost(ei)
