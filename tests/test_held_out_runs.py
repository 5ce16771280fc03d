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
