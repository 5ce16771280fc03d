"""Budgets: parsing specs, and the budget meter that keeps a run's account (loop and peers alike)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metaopt.core.budget import BUDGET_TOLERANCE, Budget, BudgetMeter, is_time_limit, parse_time_limit, split_spec
from metaopt.core.errors import UsageError

ROUNDING = 1e-12
"""Room for the rounding of the checks below themselves (far below the tolerance)."""


# -- parsing ----------------------------------------------------------------------------------
def test_budget_parsing():
    assert Budget.parse("30d", 7).amount == 210 and Budget.parse("30d", 7).unit == "full_evals"
    assert Budget.parse("100", 7).amount == 100
    assert Budget.parse("3600s", 7) == Budget(3600, "cost", "3600s")
    assert Budget.parse(" 30dc ", 7) == Budget(210, "typical_cost", "30dc")
    assert Budget.parse("100c", 7) == Budget(100, "typical_cost", "100c")
    for bad in ["abc", "30x", "-5", "0", "10xc", "30D"]:
        with pytest.raises(UsageError, match="budget"):
            Budget.parse(bad, 7)


def test_split_spec_gives_number_and_suffix():
    assert split_spec("30dc") == (30.0, "dc")
    assert split_spec(" 1.5d") == (1.5, "d")
    assert split_spec("100") == (100.0, "")
    assert split_spec(70) == (70.0, "")
    assert split_spec(".5s") == (0.5, "s")
    with pytest.raises(UsageError, match="not understood"):
        split_spec("ten")


def test_a_time_limit_is_a_duration_or_a_typical_cost():
    """The one reading of a simulated-clock time limit (a study's clock and `metaopt run --sim-time`):
    durations in seconds, typical costs as budgets resolved per instance later; nothing else."""
    assert parse_time_limit("90m", 7) == 5400.0 and parse_time_limit("600", 7) == 600.0
    assert parse_time_limit("3.75dc", 8) == Budget(30.0, "typical_cost", "3.75dc")
    assert parse_time_limit("100c", None) == Budget(100.0, "typical_cost", "100c")
    assert all(map(is_time_limit, ["2.5h", "600s", "600", "30dc", "100c", "0.5dc"]))
    assert not any(map(is_time_limit, ["0s", "0", "0dc", "30d", "-5m", "soon", "30dcs", ""]))
    with pytest.raises(UsageError, match="needs one benchmark's d"):
        parse_time_limit("30dc", None)


def test_typical_cost_budgets_are_resolved_before_a_run():
    budget = Budget.parse("10c", 3)
    with pytest.raises(ValueError, match="resolve it per instance"):
        BudgetMeter(budget, r_max=1.0)
    meter = BudgetMeter(budget.in_cost_units(typical_cost=2.5), r_max=1.0)
    assert meter.budget == Budget(25.0, "cost", "10c")


# -- the meter --------------------------------------------------------------------------------
def test_full_evaluation_budget_counts_fidelity_not_cost():
    meter = BudgetMeter(Budget(10.0), r_max=4)
    assert meter.how_many_fit(3, fidelity=4) == 3 and meter.affordable([1e6, 1e6, 1e6]) == 3
    meter.charge(4, [1e6, 1e6, 1e6])
    assert meter.budget_used == 3.0 and meter.cost_used == 3e6  # both accounts are kept
    assert meter.left() == 7.0 and meter.fraction_spent == pytest.approx(0.3) and not meter.exhausted
    assert meter.step(1) == 0.25 and meter.how_many_fit(100, fidelity=1) == 28


def test_cost_budget_counts_cost_not_fidelity():
    meter = BudgetMeter(Budget(100.0, "cost"), r_max=4)
    assert meter.how_many_fit(1000, fidelity=4) == 1000  # costs are not known before evaluation
    meter.charge(4, [30.0, 30.0])
    assert meter.cost_used == 60.0 and meter.budget_used == 2.0
    assert meter.left() == 40.0 and meter.fraction_spent == pytest.approx(0.6)
    assert meter.affordable([10.0, 25.0, 10.0, 1.0]) == 2  # the third would finish after the budget


def test_the_last_partial_batch():
    meter = BudgetMeter(Budget(10.0), r_max=4)
    meter.charge(4, np.ones(8))
    assert meter.how_many_fit(5, fidelity=4) == 2  # 2 of 5 full evaluations fit into 2 left
    meter.charge(4, np.ones(1))
    assert meter.how_many_fit(5, fidelity=4) == 1 and meter.how_many_fit(5, fidelity=1) == 4
    meter.charge(4, np.ones(1))
    assert meter.exhausted and meter.how_many_fit(5, fidelity=1) == 0

    cost = BudgetMeter(Budget(10.0, "cost"), r_max=1)
    assert cost.affordable([5.0, 5.0, 0.1]) == 2  # exactly B fits
    assert cost.affordable([10.5]) == 0


def test_an_evaluation_cap_cuts_batches_and_names_itself_as_the_stop_reason():
    """``max_evals`` is a second limit of the account: a batch's prefix within it is evaluated; a run
    that reaches it with budget left stops for ``eval_cap``, one whose budget runs out with it for ``budget``."""
    meter = BudgetMeter(Budget(10.0, max_evals=5), r_max=4)
    assert meter.how_many_fit(8, fidelity=1) == 5 and meter.affordable([1.0] * 8) == 5
    meter.charge(1, [1.0] * 3)
    assert meter.evals_left() == 2 and meter.how_many_fit(8, fidelity=1) == 2 and not meter.exhausted
    meter.charge(1, [1.0] * 2)
    assert meter.how_many_fit(1, fidelity=1) == 0 and meter.exhausted and meter.limit == "eval_cap"
    cost = BudgetMeter(Budget(100.0, "cost", max_evals=3), r_max=1)
    assert cost.how_many_fit(10, fidelity=1) == 3 and cost.affordable([1.0, 1.0, 1.0, 1.0]) == 3
    spent = BudgetMeter(Budget(2.0, max_evals=2), r_max=1)
    spent.charge(1, [1.0, 1.0])  # budget and cap reached together: the budget is the reason
    assert spent.how_many_fit(1, fidelity=1) == 0 and spent.limit == "budget"
    assert BudgetMeter(Budget(2.0), r_max=1).evals_left() > 10**9
    capped = Budget.parse("30d", None)
    capped = Budget(capped.amount, capped.unit, capped.spec, max_evals=7)
    assert capped.for_dimension(3).max_evals == 7 and capped.scaled(1 / 3).max_evals == 7
    assert Budget(5.0, "typical_cost", "5c", 7).in_cost_units(2.0) == Budget(10.0, "cost", "5c", 7)
    for bad in (0, -1, 2.5, True):
        with pytest.raises(UsageError, match="max_evals: must be an integer >= 1"):
            Budget(10.0, max_evals=bad)


def test_sums_that_miss_the_budget_by_rounding_still_fit():
    meter = BudgetMeter(Budget(1.0), r_max=10)
    for _ in range(10):  # 0.1 + 0.1 + ... = 0.9999999999999999
        assert meter.how_many_fit(1, fidelity=1) == 1
        meter.charge(1, [1.0])
    assert meter.exhausted and meter.how_many_fit(1, fidelity=1) == 0
    assert meter.how_many_fit(10, fidelity=1) == 0
    assert BudgetMeter(Budget(1.0), r_max=10).how_many_fit(20, fidelity=1) == 10


def test_charging_one_by_one_or_as_a_batch_books_the_same_kind_of_account():
    one, batch = BudgetMeter(Budget(5.0), r_max=3), BudgetMeter(Budget(5.0), r_max=3)
    for c in (1.0, 2.0, 3.0):
        one.charge(3, [c])
    batch.charge(3, [1.0, 2.0, 3.0])
    assert one.budget_used == batch.budget_used == 3.0 and one.cost_used == batch.cost_used == 6.0


batches = st.lists(st.tuples(st.integers(1, 9), st.integers(0, 12),
                             st.lists(st.floats(0.01, 50.0), min_size=12, max_size=12)),
                   min_size=1, max_size=40)


@settings(max_examples=200, deadline=None)
@given(unit=st.sampled_from(["full_evals", "cost"]), amount=st.floats(0.5, 60.0), r_max=st.integers(1, 9),
       batches=batches)
def test_a_run_never_overspends_and_stops_only_when_nothing_fits(unit, amount, r_max, batches):
    """Property: following the loop's protocol (how_many_fit -> evaluate -> affordable -> charge), the
    spending never exceeds B + tolerance, and a batch is cut only where its next evaluation would."""
    meter = BudgetMeter(Budget(amount, unit), r_max=r_max)
    for rung, n, costs in batches:
        fidelity = min(rung, r_max)
        step = fidelity / r_max
        fits = meter.how_many_fit(n, fidelity)
        assert 0 <= fits <= n
        if unit == "full_evals" and fits < n:  # the next one would not have fitted
            assert meter.budget_used + (fits + 1) * step > amount + BUDGET_TOLERANCE - ROUNDING
        costs = np.array(costs[:fits])
        keep = meter.affordable(costs)
        assert 0 <= keep <= fits
        if unit == "cost" and keep < fits:
            assert meter.cost_used + costs[: keep + 1].sum() > amount + BUDGET_TOLERANCE - ROUNDING
        before = meter.budget_used
        meter.charge(fidelity, costs[:keep])
        assert meter.budget_used == pytest.approx(before + keep * step)
        spent = meter.budget_used if unit == "full_evals" else meter.cost_used
        assert spent <= amount + BUDGET_TOLERANCE + ROUNDING
        assert meter.left() == amount - spent
        assert meter.fraction_spent == pytest.approx(spent / amount)
        assert meter.fraction_spent <= 1 + (BUDGET_TOLERANCE + ROUNDING) / amount
        if meter.exhausted:  # nothing fits any more
            assert meter.how_many_fit(n, fidelity) == 0 or unit == "cost"


def test_one_owner_of_the_spent_column_and_of_r_over_r_max():
    """Budget.spent_column names the trace column a budget is measured in; full_evaluations is r/r_max,
    as the meter charges it and the trace accumulates it."""
    from metaopt.core.budget import full_evaluations

    assert Budget.parse("30d", 3).spent_column == "budget_used"
    assert Budget.parse("100s", 3).spent_column == "cost_used"
    assert Budget.parse("30dc", 3).spent_column == "cost_used"
    assert Budget.parse("10", 3).spent(4.0, 7.0) == 4.0 and Budget.parse("10s", 3).spent(4.0, 7.0) == 7.0
    meter = BudgetMeter(Budget.parse("10", 3), r_max=27)
    meter.charge(9, [0.5, 0.5])
    assert meter.budget_used == 2 * full_evaluations(9, 27) == 2 / 3
    fidelities = np.array([1.0, 3.0, 27.0])
    assert np.array_equal(full_evaluations(fidelities, 27.0), fidelities / 27.0)
