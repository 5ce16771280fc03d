"""Anytime curves: normalized regret as a function of the budget spent, and their aggregates."""

from __future__ import annotations

from typing import Iterable

import numpy as np
import pandas as pd

from metaopt.analysis.stats import replicate_columns


def regret_at(budget_used: np.ndarray, regret: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """The incumbent's regret after spending each budget in ``grid`` (NaN before the first evaluation)."""
    idx = np.searchsorted(budget_used, grid * (1 + 1e-12), side="right") - 1
    out = np.full(len(grid), np.nan)
    ok = idx >= 0
    out[ok] = regret[idx[ok]]
    return out


def budget_grid(b_min: float, b_max: float, points: int = 60) -> np.ndarray:
    """A log-spaced budget grid from ``b_min`` to ``b_max``."""
    return np.geomspace(max(b_min, 1e-9), b_max, points)


def anytime_table(runs: Iterable[tuple[dict, pd.DataFrame]], grid: np.ndarray,
                  column: str = "normalized_regret") -> pd.DataFrame:
    """Long table (optimizer, instance, seed, budget, regret) from (keys, trace) pairs."""
    frames = []
    for keys, trace in runs:
        values = regret_at(trace["budget_used"].to_numpy(), trace[column].to_numpy(), grid)
        frames.append(pd.DataFrame({**keys, "budget": grid, "regret": values}))
    return pd.concat(frames, ignore_index=True)


def mean_se_over_instances(df: pd.DataFrame, by: list[str], value: str) -> pd.DataFrame:
    """Mean over seeds per instance first, then mean and standard error over instances; when every run is
    on one instance, mean and standard error over its seeds (``n_instances`` then counts the seeds;
    :func:`metaopt.analysis.stats.replicate_columns`)."""
    per_instance = df.groupby(by + replicate_columns(df), as_index=False)[value].mean()
    grouped = per_instance.groupby(by)[value]
    out = grouped.agg(mean="mean", sd="std", n_instances="count").reset_index()
    out["se"] = out["sd"] / np.sqrt(out["n_instances"])
    return out.drop(columns="sd")
