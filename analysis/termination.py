"""What automatic termination gains and costs: paper 002's RYC and RTC (Eq. 11-12).

Both compare a run stopped by its stopping rule with the same run continued to the full budget:
the same γ with ``stopping: budget``, the same problem and seed. Stopping rules draw from their
own generator (:mod:`metaopt.loop`), so the two traces agree row for row up to the stopping point
(except ``stop_statistic``), and the full run only adds evaluations after it.

The paper's y is the *test* error of the reported configuration; our benchmarks have no separate
test loss, so y is the validation incumbent (the paper does the same on NAS-Bench-201), and RYC is
then never positive. The paper's t is the total training time, i.e. our simulated cost
(``cost_used``); ``rtc(..., column="budget_used")`` gives the same ratio in full-evaluation
equivalents.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

import pandas as pd

from metaopt.benchmarks.base import Problem
from metaopt.budget import Budget
from metaopt.loop import run
from metaopt.registry import get_component


def _final(trace: pd.DataFrame, column: str) -> float:
    """The column's value after the last evaluation (NaN for an empty trace)."""
    return float(trace[column].iloc[-1]) if len(trace) else math.nan


def ryc(stopped_trace: pd.DataFrame, full_trace: pd.DataFrame, column: str = "incumbent_loss") -> float:
    """Relative change of the final loss, Eq. 11: RYC = (y_T − y_es) / max(y_T, y_es).

    y_es / y_T: ``column`` after the last evaluation of the stopped / full run. In [−1, 1] for
    positive losses (negative: stopping early made the result worse); 0 when y_T = y_es, NaN when
    max(y_T, y_es) ≤ 0 otherwise (the ratio is meant for errors, which are positive).
    """
    y_es, y_t = _final(stopped_trace, column), _final(full_trace, column)
    if y_t == y_es:
        return 0.0
    scale = max(y_t, y_es)
    return (y_t - y_es) / scale if scale > 0 else math.nan


def rtc(stopped_trace: pd.DataFrame, full_trace: pd.DataFrame, column: str = "cost_used") -> float:
    """Relative time change, Eq. 12: RTC = (t_T − t_es) / t_T, the share of the full run's time saved.

    t_es / t_T: ``column`` (cumulative cost by default) after the last evaluation of the stopped /
    full run; NaN when t_T = 0.
    """
    t_es, t_t = _final(stopped_trace, column), _final(full_trace, column)
    return (t_t - t_es) / t_t if t_t > 0 else math.nan


def without_stopping(config: Mapping[str, Any]) -> dict[str, Any]:
    """γ with ``stopping: budget``: the stopping rule and its hyperparameters removed."""
    rule = get_component("stopping_rules", str(config.get("stopping", "budget")))
    full = {k: v for k, v in config.items() if k not in rule.hyperparameter_names}
    full["stopping"] = "budget"
    return full


def termination_metrics(config: Mapping[str, Any], problem: Problem, seed: int, budget: Budget | str,
                        reference: Any = None) -> dict[str, Any]:
    """Run γ = ``config`` with its stopping rule and without it; RYC, RTC and where the run stopped.

    When the rule never fired (stop reason ``budget``), the stopped run is the full run and is not
    repeated. ``stopped_at_budget`` / ``stopped_at_cost``: budget (full evaluations) and cost spent
    when the run stopped; ``rtc_budget``: RTC measured in budget instead of cost.
    """
    stopped = run(config, problem, seed, budget, reference=reference)
    full = stopped if stopped.summary["stop_reason"] == "budget" else run(
        without_stopping(config), problem, seed, budget, reference=reference)
    s, f = stopped.summary, full.summary
    return {
        "ryc": ryc(stopped.trace, full.trace),
        "rtc": rtc(stopped.trace, full.trace),
        "rtc_budget": rtc(stopped.trace, full.trace, column="budget_used"),
        "stop_reason": s["stop_reason"],
        "stopped_at_budget": s["budget_used"],
        "stopped_at_cost": s["cost_used"],
        "full_budget_used": f["budget_used"],
        "full_cost_used": f["cost_used"],
        "n_evals_stopped": s["n_evals"],
        "n_evals_full": f["n_evals"],
        "final_loss_stopped": s["final_loss"],
        "final_loss_full": f["final_loss"],
        "normalized_regret_stopped": s["normalized_regret"],
        "normalized_regret_full": f["normalized_regret"],
    }
