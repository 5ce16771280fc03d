"""Cost-aware successive halving (CASH) and cost-aware Hyperband (CAHB), paper 001."""

import functools
import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from metaopt.components.fidelity_schedules import MAX_FILL, CostAwareHyperband, HyperbandBatches, fill_by_cost, n_stages
from metaopt.components.promotion import CostAware, Rung, TopFraction
from metaopt.core.benchmarks import get_benchmark
from metaopt.core.benchmarks.base import Evaluation, Fidelity, Problem
from metaopt.core.budget import Budget
from metaopt.engine.loop import run
from metaopt.spaces.design_space import build_space
from metaopt.spaces.presets import get_preset

BENCH = get_benchmark("synthetic:mlp")
PROBLEM = BENCH.problem(BENCH.test_instances[0])
BOOSTING = get_benchmark("synthetic:boosting")


def rung(losses, costs, f, n_keep=1):
    return Rung(np.asarray(losses, dtype=float), n_keep, f, lambda: np.asarray(costs, dtype=float))


def cash(losses, costs, f):
    return CostAware().select(rung(losses, costs, f)).tolist()


def preset(name, problem=PROBLEM):
    return get_preset(name).config(problem.fidelity)


@dataclass(frozen=True)
class FlatCost(Problem):
    """The problem's losses with a cost that does not depend on the configuration: 0.5·r, or 1 (not ``per_unit``)."""

    per_unit: bool = True

    def evaluate(self, configs, fidelities):
        result = super().evaluate(configs, fidelities)
        r = np.asarray(fidelities, dtype=float)
        return Evaluation(result.loss, 0.5 * r if self.per_unit else np.ones(len(r)))


# -- the promotion rule -----------------------------------------------------------------------

def test_longest_prefix_by_loss_within_a_fraction_of_the_cost():
    # by loss: 1, 2, 0, 3 with costs 1, 1, 1, 5 -> cumulative 1, 2, 3, 8; 1/2 of 8 is 4: three survive
    assert cash([0.3, 0.1, 0.2, 0.4], [1, 1, 1, 5], 0.5) == [1, 2, 0]
    # top would keep the best two; an expensive best configuration uses up the whole share
    assert cash([0.3, 0.1, 0.2, 0.4], [1, 4, 1, 3], 0.5) == [1]
    # the prefix stops at the first configuration that does not fit, even if a later one would
    assert cash([0.1, 0.2, 0.3], [1, 9, 1], 0.5) == [0]


def test_at_least_one_survives():
    assert cash([0.3, 0.1, 0.2], [1, 10, 1], 1 / 3) == [1]  # the best alone costs more than 1/3
    assert cash([0.3, 0.1, 0.2], [1, 1, 1], 0.0) == [1]
    assert cash([0.5], [2.0], 1 / 3) == [0]


def test_ties_keep_batch_order_and_nan_losses_come_last():
    assert cash([0.2, 0.1, 0.1, 0.1, 0.3], [1, 1, 1, 1, 1], 0.4) == [1, 2]
    assert cash([np.nan, 0.5, 0.1, np.nan], [1, 1, 1, 1], 0.75) == [2, 1, 0]
    assert cash([np.nan, np.nan], [1, 1], 0.5) == [0]


def test_zero_costs_count_configurations_and_full_fraction_keeps_all():
    assert cash([0.3, 0.1, 0.2, 0.4], [0, 0, 0, 0], 0.5) == [1, 2]
    assert cash([0.3, 0.1, 0.2, 0.4], [3, 1, 2, 7], 1.0) == [1, 2, 0, 3]


@pytest.mark.parametrize("f", [Fraction(1, 2), Fraction(1, 3), Fraction(1, 4), Fraction(2, 5), Fraction(3, 10)])
@pytest.mark.parametrize("cost", [1.0, 0.1, 37.3])
def test_with_equal_costs_cash_is_top_with_floor_n_over_eta(f, cost):
    """Equal costs: CASH keeps max(floor(n/η), 1) of n, the same configurations as ``top`` with that n_keep."""
    rng = np.random.default_rng(0)
    for n in range(1, 60):
        losses = rng.choice([0.1, 0.2, 0.3, np.nan], size=n) if n % 2 else rng.random(n)
        n_keep = max(math.floor(n * f), 1)
        expected = TopFraction().select(rung(losses, None, float(f), n_keep)).tolist()
        assert cash(losses, np.full(n, cost), float(f)) == expected


def test_preset_survival_fraction_keeps_a_third():
    """The validator rounds 1/3 to 0.3333333333333; 27 configurations of equal cost still leave 9."""
    f = preset("cash")["survival_fraction"]
    assert f < 1 / 3
    assert len(cash(np.arange(27.0), np.full(27, 0.7), f)) == 9


def test_top_never_asks_for_costs():
    def no_costs():
        raise AssertionError("top must not estimate costs")

    assert TopFraction().select(Rung(np.array([0.3, 0.1, 0.2]), 2, 0.5, no_costs)).tolist() == [1, 2]


# -- the CAHB fill ----------------------------------------------------------------------------

def filled(costs, m, budget):
    """Fill with draws whose estimated costs are ``costs`` in order (vectors carry their index)."""
    drawn = []

    def draw(n):
        X = np.arange(len(drawn), len(drawn) + n, dtype=float)[:, None]
        drawn.extend(X[:, 0])
        return X

    X = fill_by_cost(draw, lambda X: np.asarray(costs, dtype=float)[X[:, 0].astype(int)], m, budget)
    return X[:, 0].astype(int).tolist(), len(drawn)


def test_fill_keeps_the_longest_prefix_within_the_budget():
    costs = [2, 3, 1, 4, 1, 1, 5, 1, 1, 1, 1, 1]
    kept, drawn = filled(costs, 3, 10.0)
    assert kept == [0, 1, 2, 3] and sum(costs[i] for i in kept) <= 10 and drawn == 6
    # equal costs filling the budget exactly: one chunk of m, the count rule
    assert filled([2.5] * 40, 4, 10.0) == ([0, 1, 2, 3], 4)
    # the first draw alone is too expensive: it is kept anyway
    assert filled([50, 1, 1], 3, 10.0)[0] == [0]


def test_cheap_configurations_fill_a_bracket_with_more_of_them():
    rng = np.random.default_rng(1)
    costs = rng.lognormal(0, 1, 200)
    budget = 9 * float(np.mean(costs))
    base, _ = filled(costs, 9, budget)
    cheap, _ = filled(costs / 2, 9, budget)
    dear, _ = filled(costs * 2, 9, budget)
    assert len(dear) < len(base) < len(cheap)
    for kept, scale in [(base, 1), (cheap, 0.5), (dear, 2)]:
        assert sum(costs[kept]) * scale <= budget + 1e-9
    assert len(filled(np.full(1000, 1e-6), 5, 10.0)[0]) == MAX_FILL * 5


def test_cahb_brackets_are_hyperband_brackets_resized():
    lcbench = Fidelity("epoch", 1, 52, is_int=True)
    log3 = math.log(3)
    cahb = CostAwareHyperband(log3, 1 / 3).brackets(lcbench, 27)
    hb = HyperbandBatches(log3, 1 / 3).brackets(lcbench, 27)
    for _ in range(4):
        a, b = next(cahb), next(hb)
        assert a.stages == b.stages and a.resize is not None and b.resize is None
    plan = next(cahb).resize(40)  # bracket 1 with 40 configurations: 40/13/4/1
    assert [(s.stage, s.n_total, s.n_survivors) for s in plan.stages] == [(1, 40, 0), (2, 13, 13), (3, 4, 4), (4, 1, 1)]
    assert [s.stage for s in next(cahb).resize(1).stages] == [4]  # a single configuration starts at r_max


# -- runs -------------------------------------------------------------------------------------

def test_with_configuration_independent_costs_cash_is_sh_and_cahb_with_top_is_hb():
    """The cost-aware components reduce to their counting versions when costs cannot tell configurations apart.

    CASH keeps floor(n/3) = round(n/3) of 81/27/9/3 (synthetic:mlp, s = 5). CAHB's fill is the count
    rule when the cost model predicts one cost for all (a constant cost: the featureless fallback).
    """
    per_unit, constant = FlatCost(BENCH, PROBLEM.instance), FlatCost(BENCH, PROBLEM.instance, per_unit=False)
    cahb_top = {**preset("hb"), "fidelity_schedule": "cahb"}
    for cost_aware, counting, problem in [(preset("cash"), preset("sh"), per_unit),
                                          (preset("cash"), preset("sh"), constant),
                                          (cahb_top, preset("hb"), constant)]:
        a = run(cost_aware, problem, seed=4, budget="12d").trace
        b = run(counting, problem, seed=4, budget="12d").trace
        pd.testing.assert_frame_equal(a, b, check_exact=True)


@pytest.mark.parametrize("scenario", ["synthetic:mlp", "yahpo:lcbench"])
def test_cash_trace_follows_the_rule(scenario, yahpo_data):
    """Every rung of a CASH run is cut by the rule on its observed losses and costs (the log-linear cost
    model scales all costs to the next fidelity by one factor); no refill; a lone survivor jumps to r_max."""
    problem = get_benchmark(scenario, yahpo_data).problem(PROBLEM.instance if scenario == "synthetic:mlp" else "3945")
    config = preset("cash", problem)
    s = n_stages(problem.fidelity, 3)
    trace = run(config, problem, seed=2, budget="30d").trace
    batches = [rows for _, rows in trace.groupby("batch")]
    brackets = np.cumsum([rows["stage"].iloc[0] == 1 for rows in batches])
    jumps = 0
    for k in range(1, brackets[-1]):  # the last bracket may be cut short by the budget
        rungs = [rows for rows, b in zip(batches, brackets) if b == k]
        stages = [rows["stage"].iloc[0] for rows in rungs]
        assert len(rungs[0]) == config["mu"] and stages[0] == 1 and stages[-1] == s
        assert stages == sorted(set(stages))
        for this, following in zip(rungs, rungs[1:]):
            kept = this["config_id"].to_numpy()[cash(this["loss"], this["cost"], config["survival_fraction"])]
            assert following["config_id"].tolist() == kept.tolist()
            assert len(this) > 1
        jumps += stages != list(range(1, s + 1))
    assert brackets[-1] > 3
    if scenario == "yahpo:lcbench":
        assert jumps > 0


@pytest.mark.parametrize("name", ["cash", "cahb"])
def test_same_seed_same_trace(name):
    a = run(preset(name), PROBLEM, seed=5, budget="8d")
    b = run(preset(name), PROBLEM, seed=5, budget="8d")
    pd.testing.assert_frame_equal(a.trace, b.trace, check_exact=True)
    assert not a.trace["loss"].equals(run(preset(name), PROBLEM, seed=6, budget="8d").trace["loss"])


@functools.cache
def cost_aware_space(schedule, promotion):
    """The design space restricted to one schedule and promotion rule, random sampling, budget stopping
    (cost models: the GP is left out only because it is slow)."""
    return build_space(allowed={
        "fidelity_schedule": [schedule], "promotion": [promotion], "cost_model": ["loglinear", "rf"],
        "proposal": ["sample_filter"], "sampler": ["uniform", "kde"], "filter_method": ["none"], "stopping": ["budget"],
    })


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schedule=st.sampled_from(["equal", "sh", "hb", "cahb"]), promotion=st.sampled_from(["top", "cost_aware"]),
       seed=st.integers(0, 2**31 - 2), amount=st.floats(1.0, 12.0), cost_budget=st.booleans())
def test_cost_aware_runs_respect_their_budget(schedule, promotion, seed, amount, cost_budget):
    """Property: any point of the space with these components never spends more than its budget, in either unit."""
    space = cost_aware_space(schedule, promotion)
    space.seed(seed)
    config = dict(space.sample_configuration())
    problem = BOOSTING.problem(BOOSTING.test_instances[seed % 3])
    budget = Budget(amount * 40, "cost") if cost_budget else Budget(amount, "full_evals")
    result = run(config, problem, seed=seed, budget=budget)
    trace = result.trace
    spent = float((trace["fidelity"] / problem.fidelity.r_max).sum())
    if cost_budget:
        assert trace["cost"].sum() <= budget.amount + 1e-6
    else:
        assert spent <= budget.amount + 1e-9
        assert budget.amount - spent < 1.0 + 1e-9  # what is left is less than one full evaluation
    assert result.summary["stop_reason"] == "budget"
    if len(trace):
        assert trace["budget_used"].iloc[-1] == pytest.approx(spent)
        assert trace["cost_used"].iloc[-1] == pytest.approx(trace["cost"].sum())


@pytest.mark.parametrize("name", ["cash", "cahb"])
def test_runs_on_boosting(name):
    problem = BOOSTING.problem(BOOSTING.test_instances[0])
    result = run(preset(name, problem), problem, seed=1, budget="20d")
    assert result.summary["stop_reason"] == "budget" and result.summary["n_evals"] > 0
    assert result.summary["budget_used"] <= 20 * problem.d + 1e-9


@pytest.mark.parametrize("name", ["cash", "cahb"])
def test_runs_on_lcbench_with_a_cost_budget(name, yahpo_data):
    """A cost budget of 20000 s: about a third of what hb spends at 30d on this instance (~60000 s)."""
    lcbench = get_benchmark("yahpo:lcbench", yahpo_data)
    problem = lcbench.problem("3945")
    budget = Budget.parse("20000s", problem.d)
    result = run(preset(name, problem), problem, seed=1, budget=budget)
    assert result.summary["stop_reason"] == "budget" and result.summary["budget_unit"] == "cost"
    assert 0.8 * 20000 < result.trace["cost"].sum() <= 20000 + 1e-6
    assert result.summary["final_loss"] < np.median(result.trace["loss"])
