"""Stage and bracket sizes of the Smashy fidelity schedules (paper 004 Alg. 2, docs/design.md §5)."""

import math

import pytest

from metaopt.components.fidelity_schedules import (
    EqualBatches,
    HyperbandBatches,
    SingleFidelity,
    SuccessiveHalving,
    bracket_cost,
    hyperband_bracket_sizes,
    n_stages,
    stage_fidelity,
    survivor_counts,
)
from metaopt.core.benchmarks.base import Fidelity

LCBENCH = Fidelity("epoch", 1, 52, is_int=True)
LOG3 = math.log(3)


def first_cycle(schedule, fidelity, mu):
    plans = []
    for plan in schedule.brackets(fidelity, mu):
        if plans and plan.bracket == plans[0].bracket:
            break
        plans.append(plan)
        if len(plans) > 20:
            break
    return plans


def test_stage_count_and_fidelities_on_lcbench():
    assert n_stages(LCBENCH, 3) == 4  # floor(log 52 / log 3) + 1
    assert [stage_fidelity(LCBENCH, j, 4, 3) for j in range(1, 5)] == [2.0, 6.0, 17.0, 52.0]


def test_exact_powers_are_not_lost_to_rounding():
    assert n_stages(Fidelity("epoch", 1, 81, True), 3) == 5
    assert n_stages(Fidelity("trainsize", 0.03, 1.0), 3) == 4
    assert n_stages(LCBENCH, 1000) == 1


def test_hyperband_bracket_sizes_on_lcbench_budget_matching_rule():
    """docs/design.md §5 check: mu = 27, eta = 3 gives 27/9/3/1, 13/4/1, 6/2, 4 (plain HB: 12/4/1)."""
    plans = first_cycle(HyperbandBatches(LOG3, 1 / 3), LCBENCH, 27)
    sizes = [[st.n_total for st in plan.stages] for plan in plans]
    assert sizes == [[27, 9, 3, 1], [13, 4, 1], [6, 2], [4]]
    assert [plan.stages[0].stage for plan in plans] == [1, 2, 3, 4]
    assert [[st.fidelity for st in p.stages] for p in plans] == [[2, 6, 17, 52], [6, 17, 52], [17, 52], [52]]
    # every bracket costs about the same (in full evaluations)
    costs = [bracket_cost(m, b, 4, 3, 1 / 3) for b, m in enumerate([27, 13, 6, 4], start=1)]
    assert costs[0] == pytest.approx(4.0)
    assert all(abs(c - 4.0) <= 0.34 for c in costs)


def test_bracket_sizes_are_the_closest_in_cost():
    sizes = hyperband_bracket_sizes(27, 4, 3.0, 1 / 3)
    target = bracket_cost(27, 1, 4, 3.0, 1 / 3)
    for b, m in enumerate(sizes[1:], start=2):
        upper = math.ceil(27 * 4 / (4 - b + 1))
        best = min(abs(bracket_cost(k, b, 4, 3.0, 1 / 3) - target) for k in range(1, upper + 1))
        assert abs(bracket_cost(m, b, 4, 3.0, 1 / 3) - target) == best


def test_eta_surv_independent_of_eta_fid():
    # eta_fid = 3 (4 stages), eta_surv = 2: survivors halve
    assert survivor_counts(16, 1, 4, 0.5) == [(1, 16), (2, 8), (3, 4), (4, 2)]


def test_stage_without_discards_is_skipped():
    # f = 0.9, m = 3: n = 3, round(2.7) = 3, round(2.43) = 2, round(2.19) = 2 -> stages 1 and 3
    # would discard nobody; the configurations start at stage 2 and jump from stage 2 to 4
    assert survivor_counts(3, 1, 4, 0.9) == [(2, 3), (4, 2)]


def test_successive_halving_repeats_bracket_one():
    plans = [p for _, p in zip(range(3), SuccessiveHalving(LOG3, 1 / 3).brackets(LCBENCH, 27))]
    assert all([st.n_total for st in p.stages] == [27, 9, 3, 1] for p in plans)
    assert all(p.bracket == 1 for p in plans)


def test_equal_batches_keep_refill_and_restart():
    plan = next(EqualBatches(LOG3, 1 / 3).brackets(LCBENCH, 10))
    assert [(st.stage, st.n_total, st.n_survivors) for st in plan.stages] == [(1, 10, 0), (2, 10, 3), (3, 10, 3), (4, 10, 3)]


def test_equal_batches_without_discards_are_single_fidelity():
    plan = next(EqualBatches(LOG3, 0.99).brackets(LCBENCH, 10))
    assert [(st.stage, st.fidelity, st.n_total) for st in plan.stages] == [(4, 52.0, 10)]


def test_single_fidelity():
    plan = next(SingleFidelity().brackets(LCBENCH, 5))
    assert [(st.fidelity, st.n_total, st.n_survivors) for st in plan.stages] == [(52.0, 5, 0)]


def test_fidelity_floor_raises_the_lowest_stage_and_keeps_r_max():
    """fidelity_floor x raises r_min to r_min^(1-x)·r_max^x: the brackets start there, fewer stages span
    the range, r_max stays the last stage; x = 0 is the benchmark's own range, the same plans."""
    from metaopt.components.async_schedules import AsyncSuccessiveHalving
    from metaopt.components.fidelity_schedules import CostAwareHyperband, floored

    assert floored(LCBENCH, 0.0) is LCBENCH
    raised = floored(LCBENCH, 0.3)
    assert raised.r_min == pytest.approx(52 ** 0.3) and raised.r_max == 52 and raised.is_int
    for cls in (HyperbandBatches, SuccessiveHalving, EqualBatches, CostAwareHyperband):
        plain, zero = cls(LOG3, 1 / 3), cls(LOG3, 1 / 3, fidelity_floor=0.0)
        assert [p.stages for p in first_cycle(zero, LCBENCH, 27)] == [p.stages for p in first_cycle(plain, LCBENCH, 27)]
        floor = cls(LOG3, 1 / 3, fidelity_floor=0.3)
        plans = first_cycle(floor, LCBENCH, 27)
        fidelities = [stage.fidelity for plan in plans for stage in plan.stages]
        assert min(fidelities) == 6.0 and max(fidelities) == 52.0  # 52 / 3^2 = 5.8 >= 52^0.3 = 3.3: snapped to 6
        assert floor.stages(LCBENCH) == n_stages(raised, 3) == 3 < plain.stages(LCBENCH) == 4
    hb = HyperbandBatches(LOG3, 1 / 3, fidelity_floor=0.3)
    assert [plan.stages[0].n_total for plan in first_cycle(hb, LCBENCH, 27)] == hyperband_bracket_sizes(27, 3, math.exp(LOG3), 1 / 3)
    asha = AsyncSuccessiveHalving(LOG3, 1 / 3, fidelity_floor=0.3)
    assert asha.rung_fidelities(LCBENCH) == [6.0, 17.0, 52.0]
    assert AsyncSuccessiveHalving(LOG3, 1 / 3).rung_fidelities(LCBENCH) == [2.0, 6.0, 17.0, 52.0]
    # a floor below the ladder's first rung changes nothing; on a fidelity of one level nothing either
    assert first_cycle(HyperbandBatches(LOG3, 1 / 3, fidelity_floor=0.1), LCBENCH, 27) == \
        first_cycle(HyperbandBatches(LOG3, 1 / 3), LCBENCH, 27)
    one = Fidelity("epoch", 52, 52, is_int=True)
    assert floored(one, 0.5) is one
