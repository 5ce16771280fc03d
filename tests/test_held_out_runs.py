"""Runs files (analysis/held_out_runs.py): the reduced trace keeps every regret the report reads."""

import numpy as np
import pandas as pd
import pytest

from metaopt.analysis.anytime import regret_at
from metaopt.analysis.held_out_runs import TRACE_COLUMNS, reduced_trace


def _trace(rng: np.random.Generator, n: int) -> pd.DataFrame:
    spent = np.cumsum(rng.choice([0.0, 0.25, 1.0], size=n))  # repeated values: several evaluations at once
    incumbent = np.minimum.accumulate(rng.random(n))
    regret = np.where(np.arange(n) < 2, np.nan, incumbent)  # NaN before the first finished evaluation
    return pd.DataFrame({"budget_used": spent, "cost_used": spent * 7.0, "normalized_regret": regret,
                         "loss": rng.random(n)})


@pytest.mark.parametrize("seed", range(20))
def test_the_reduced_trace_gives_the_same_regret_at_every_budget(seed):
    rng = np.random.default_rng(seed)
    trace = _trace(rng, int(rng.integers(1, 60)))
    small = reduced_trace(trace)
    assert list(small.columns) == list(TRACE_COLUMNS) and len(small) <= len(trace)
    grid = np.concatenate([trace["budget_used"].to_numpy(), np.linspace(-1, trace["budget_used"].max() + 1, 200)])
    for column in ("budget_used", "cost_used"):
        whole = regret_at(trace[column].to_numpy(), trace["normalized_regret"].to_numpy(), grid)
        reduced = regret_at(small[column].to_numpy(), small["normalized_regret"].to_numpy(), grid)
        np.testing.assert_array_equal(whole, reduced)
    assert small.iloc[0].equals(trace[list(TRACE_COLUMNS)].iloc[0])  # the first evaluation's spend
    assert small.iloc[-1].equals(trace[list(TRACE_COLUMNS)].iloc[-1])  # the whole run's spend


def test_a_trace_without_rows_stays_empty():
    empty = pd.DataFrame({c: pd.Series(dtype=float) for c in TRACE_COLUMNS})
    assert reduced_trace(empty).empty


@pytest.mark.parametrize("seed", range(20))
def test_a_clock_runs_reduced_trace_gives_the_same_curve_against_simulated_time(seed):
    """A run on the simulated clock keeps sim_time and loss on the rows its curve against simulated
    time reads: the best loss in by each time, from rows whose arrival order is not the trace order
    (a synchronous batch's rows come in batch order) and with ties in time and failed (NaN) losses."""
    from metaopt.analysis.clock_curves import regret_by_time
    from metaopt.analysis.held_out_runs import CLOCK_COLUMNS
    from metaopt.core.references import Reference

    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 80))
    trace = _trace(rng, n).assign(sim_time=rng.choice([1.0, 2.0, 3.5, 7.0, 9.0], size=n) + rng.integers(0, 4, n))
    trace.loc[rng.random(n) < 0.2, "loss"] = np.nan
    small = reduced_trace(trace)
    assert list(small.columns) == [*TRACE_COLUMNS, *CLOCK_COLUMNS] and len(small) <= len(trace)
    reference = Reference(y_min=0.0, y_max=1.0)
    times = np.concatenate([trace["sim_time"].to_numpy(), np.linspace(0, trace["sim_time"].max() + 1, 100)])
    np.testing.assert_array_equal(regret_by_time(trace, reference, times), regret_by_time(small, reference, times))
    assert small["sim_time"].min() == trace["sim_time"].min()  # where the curves start
    grid = np.linspace(-1, trace["budget_used"].max() + 1, 200)
    np.testing.assert_array_equal(regret_at(trace["budget_used"].to_numpy(), trace["normalized_regret"].to_numpy(), grid),
                                  regret_at(small["budget_used"].to_numpy(), small["normalized_regret"].to_numpy(), grid))
