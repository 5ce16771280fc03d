"""Cost-aware comparisons (paper 000 Fig. 2 / paper 003 Fig. 3 style), computed from stored traces.

Per instance, a *reference* optimizer (e.g. random search) fixes the target loss y_tgt = median over
its seeds of its final incumbent loss. The equal cost budget c_eq is the runs' own budget when it is
a cost budget (``3600s``, or ``30dc`` resolved per instance: every optimizer had the same), else
the median over the reference's seeds of the cost it spent in the whole run.

For every optimizer and run: ``regret_at_cost`` = normalized regret of the incumbent after spending
c_eq (the run's trace truncated there, i.e. what a run with cost budget c_eq would have reported:
exact for optimizers whose proposals do not depend on the budget's size, such as RS, BO with EI,
EIpu or CEI, CFO, HB and CAHB; EI-cool's schedule does, so compare it with real cost budgets);
``cost_to_target`` = cumulative cost when the incumbent first reaches y_tgt (∞ if it never does),
reported relative to c_eq (``cost_to_target_rel``; 0.2 = reached the reference's median final loss
with a fifth of the equal cost budget). Its median over runs counts runs that never reach the
target as ∞ (paper 000's "time to reach"), so it is finite only when more than half the runs get there.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from metaopt.analysis.anytime import mean_se_over_instances, regret_at


def first_cost_reaching(cost_used: np.ndarray, incumbent: np.ndarray, target: float) -> float:
    """Cumulative cost at the first evaluation whose incumbent loss is ≤ ``target`` (∞ if none)."""
    hit = np.flatnonzero(incumbent <= target)
    return float(cost_used[hit[0]]) if len(hit) else np.inf


def cost_comparison(runs: list[tuple[dict, pd.DataFrame, dict]], reference: str) -> pd.DataFrame:
    """One row per run: regret at the equal cost budget and cost to reach the reference's target.

    ``runs``: (keys with optimizer/instance/seed, trace, summary) triples; traces need ``cost_used``,
    ``incumbent_loss`` and ``normalized_regret``, summaries ``budget`` and ``budget_unit``.
    Instances where the reference has no run are left out.
    """
    yardsticks: dict[str, list[tuple[float, float]]] = {}
    for keys, trace, _ in runs:
        if keys["optimizer"] == reference and len(trace):
            yardsticks.setdefault(keys["instance"], []).append(
                (float(trace["cost_used"].iloc[-1]), float(trace["incumbent_loss"].iloc[-1])))
    rows = []
    for keys, trace, summary in runs:
        ref = yardsticks.get(keys["instance"])
        if not ref or not len(trace):
            continue
        cost_budget = summary.get("budget_unit") == "cost"
        c_eq = float(summary["budget"]) if cost_budget else float(np.median([c for c, _ in ref]))
        target = float(np.median([y for _, y in ref]))
        cost = trace["cost_used"].to_numpy()
        reach = first_cost_reaching(cost, trace["incumbent_loss"].to_numpy(), target)
        rows.append({**keys, "equal_cost": c_eq, "target_loss": target,
                     "regret_at_cost": float(regret_at(cost, trace["normalized_regret"].to_numpy(),
                                                       np.array([c_eq]))[0]),
                     "cost_to_target": reach, "cost_to_target_rel": reach / c_eq if c_eq > 0 else np.nan,
                     "reached": float(np.isfinite(reach)), "cost_per_eval": float(cost[-1] / len(cost))})
    return pd.DataFrame(rows)


def cost_table(per_run: pd.DataFrame) -> pd.DataFrame:
    """Per optimizer: mean ± s.e. over instances of regret at equal cost and of reaching the target;
    the median over runs of the relative cost to the target (∞ for runs that never reach it)."""
    table: Any = None
    for column in ("regret_at_cost", "reached"):
        agg = mean_se_over_instances(per_run, ["optimizer"], column).rename(
            columns={"mean": column, "se": f"{column}_se"})
        table = agg if table is None else table.merge(agg.drop(columns="n_instances"), on="optimizer")
    to_target = per_run.groupby("optimizer")["cost_to_target_rel"].median()
    table["median_cost_to_target_rel"] = table["optimizer"].map(to_target)
    per_eval = per_run.groupby("optimizer")["cost_per_eval"].median()
    table["median_cost_per_eval"] = table["optimizer"].map(per_eval)
    return table.sort_values("regret_at_cost").reset_index(drop=True)
