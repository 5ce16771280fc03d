"""What automatic termination gains and costs: paper 002's RYC and RTC (Eq. 11-12).

Both compare a run stopped by its stopping rule with the same run continued to the full budget:
the same γ with ``stopping: budget``, the same problem and seed. Stopping rules draw from their
own generator (:mod:`metaopt.engine.loop`; the runs themselves: :func:`metaopt.stages.evaluation.termination_metrics`), so the two traces agree row for row up to the stopping point
(except ``stop_statistic``), and the full run only adds evaluations after it.

The paper's y is the *test* error of the reported configuration; our benchmarks have no separate
test loss, so y is the validation incumbent (the paper does the same on NAS-Bench-201), and RYC is
then never positive. The paper's t is the total training time, i.e. our simulated cost
(``cost_used``); ``rtc(..., column="budget_used")`` gives the same ratio in full-evaluation
equivalents.
"""

from __future__ import annotations

import math
import pandas as pd



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
