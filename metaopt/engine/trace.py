"""Traces (one row per evaluation) and run summaries."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from metaopt.core.archive import Archive
from metaopt.core.benchmarks.base import Problem
from metaopt.core.budget import Budget, full_evaluations
from metaopt.core.space_codec import SpaceCodec

TRACE_COLUMNS = [
    "eval_id", "config_id", "batch", "stage", "bracket", "fidelity", "loss", "cost",
    "budget_used", "cost_used", "incumbent_loss", "incumbent_loss_full", "stop_statistic",
]
REGRET_COLUMNS = ["normalized_regret", "normalized_regret_full"]


def build_trace(archive: Archive, codec: SpaceCodec, problem: Problem, budget: Budget,
                reference: Any = None, spent: np.ndarray | None = None) -> pd.DataFrame:
    """The trace table of a finished run.

    ``incumbent_loss`` is the best loss seen so far at any fidelity (as in the paper);
    ``incumbent_loss_full`` only counts full-fidelity evaluations (NaN until there is one).
    ``stop_statistic`` is the stopping rule's statistic after the row's batch (NaN if the rule has
    none or did not compute it, e.g. during its warm-up or after the batch that spent the budget).
    With a ``reference``, ``normalized_regret(_full)`` are the incumbents normalized by it.
    ``budget_used`` adds r/r_max per row, or ``spent``/r_max where given (the fidelity each row
    charges: a syne-tune trial continued from its previous result charges only the difference).
    """
    n = len(archive)
    loss = archive.loss
    fidelity = archive.fidelity
    full = np.isclose(fidelity, problem.fidelity.r_max)
    trace = pd.DataFrame({
        "eval_id": np.arange(n),
        "config_id": archive.column("config_id").astype(int),
        "batch": archive.column("batch").astype(int),
        "stage": archive.column("stage").astype(int),
        "bracket": archive.column("bracket").astype(int),
        "fidelity": fidelity,
        "loss": loss,
        "cost": archive.cost,
        "budget_used": np.cumsum(full_evaluations(fidelity if spent is None else spent, problem.fidelity.r_max)),
        "cost_used": np.cumsum(archive.cost),
        "incumbent_loss": np.fmin.accumulate(np.where(np.isnan(loss), np.inf, loss)) if n else loss,
        "incumbent_loss_full": (np.fmin.accumulate(np.where(full & ~np.isnan(loss), loss, np.inf)) if n else loss),
        "stop_statistic": archive.column("stop_statistic"),
    })
    for col in ("incumbent_loss", "incumbent_loss_full"):
        trace[col] = trace[col].replace(np.inf, np.nan)
    if reference is not None:
        trace["normalized_regret"] = reference.normalize(trace["incumbent_loss"].to_numpy())
        trace["normalized_regret_full"] = reference.normalize(trace["incumbent_loss_full"].to_numpy())
    configs = pd.DataFrame(codec.to_dicts(archive.X), columns=codec.names) if n else pd.DataFrame(columns=codec.names)
    clash = set(configs.columns) & set(trace.columns)
    configs = configs.rename(columns={c: f"hp_{c}" for c in clash})
    return pd.concat([trace, configs.reset_index(drop=True)], axis=1)


def _last(trace: pd.DataFrame, column: str) -> float | None:
    """The column's value after the last evaluation; None when the run has no such column or no rows."""
    return float(trace[column].iloc[-1]) if len(trace) and column in trace else None


LIMIT_STOP_REASONS = ("budget", "time", "eval_cap")
"""Stop reasons of a run that went as far as it was allowed: its budget, the simulated clock's time
limit (:mod:`metaopt.engine.simclock`), or its budget's evaluation cap (``Budget.max_evals``). Any
other (a stopping rule's name, a peer that stopped itself) ended the run early."""


def stopped_early(stop_reason: str) -> bool:
    """Whether a run whose summary has this ``stop_reason`` was ended early (by a stopping rule or a peer)
    rather than by its budget or its time limit. Called by the evaluation's termination table (the share
    of runs stopped early) and by :func:`metaopt.stages.evaluation.termination_metrics`."""
    return stop_reason not in LIMIT_STOP_REASONS


def summarize(trace: pd.DataFrame, problem: Problem, budget: Budget, stop_reason: str, seed: int,
              config: dict[str, Any], reference: Any = None) -> dict[str, Any]:
    """The summary of a run: final losses and regrets, budget and cost spent, why it stopped."""
    summary: dict[str, Any] = {
        "benchmark": problem.benchmark.name,
        "instance": problem.instance,
        "seed": int(seed),
        "budget": budget.amount,
        "budget_unit": budget.unit,
        "budget_spec": budget.spec,
        **({"max_evals": budget.max_evals} if budget.max_evals is not None else {}),
        "final_loss": _last(trace, "incumbent_loss"),
        "final_loss_full": _last(trace, "incumbent_loss_full"),
        "normalized_regret": _last(trace, "normalized_regret"),
        "normalized_regret_full": _last(trace, "normalized_regret_full"),
        "budget_used": _last(trace, "budget_used") if len(trace) else 0.0,
        "cost_used": _last(trace, "cost_used") if len(trace) else 0.0,
        "n_evals": int(len(trace)),
        "n_configs": int(trace["config_id"].nunique()) if len(trace) else 0,
        "stop_reason": stop_reason,
        "config": config,
    }
    if reference is not None:
        summary["reference"] = {"y_min": reference.y_min, "y_max": reference.y_max}
    return summary
