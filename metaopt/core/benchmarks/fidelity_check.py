"""Does a problem's fidelity pay? How its low fidelities rank configurations against its full one.

A multi-fidelity schedule (Hyperband, successive halving) spends part of its budget on evaluations
at low fidelities and keeps the configurations that look best there. That pays when the low
fidelities rank configurations as the full fidelity does; when they do not, the budget they take
buys little, and a design that evaluates at full fidelity only (CFO, a forest-based BO) is ahead.

:func:`check_fidelity` measures that on one problem: it draws random configurations, evaluates each
at every Hyperband rung below ``r_max`` (``r_max / eta^k``, down to ``r_min``) and at ``r_max``, and
returns per rung the rank correlation with the full fidelity and what an evaluation there costs.
``metaopt benchmark fidelity`` prints it for a benchmark's instances.
"""

from __future__ import annotations

import copy
import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from scipy.stats import spearmanr

from metaopt.core.benchmarks.base import Fidelity, Problem
from metaopt.core.errors import UsageError

TOP_FRACTION = 0.1
"""The configurations :attr:`RungCheck.top_recall` looks for: the best 10% at full fidelity."""
KEPT_FRACTION = 1 / 3
"""What a rung keeps for :attr:`RungCheck.top_recall`: its best third (Hyperband's η = 3 promotes a third)."""


@dataclass(frozen=True)
class RungCheck:
    """One rung of one problem, against its full fidelity (one row of :func:`check_fidelity`'s result)."""

    instance: str
    rung: int
    """The rung's place below r_max, highest fidelity first: 1 is ``r_max / eta``, then ``r_max / eta^2`` and so
    on (rungs that snap to the same fidelity, as an integer fidelity's may, count once)."""
    fidelity: float
    """The fidelity evaluated (snapped to the problem's range: an integer fidelity is rounded)."""
    budget_share: float
    """r / r_max: the share of a full evaluation one evaluation here spends of a run's budget."""
    cost_share: float
    """The mean cost of an evaluation here over the mean cost at r_max (the benchmark's own cost)."""
    spearman: float
    """Spearman's rank correlation of the losses here and at r_max (1: the same order)."""
    top_recall: float
    """The share of the best 10% at r_max that are among the best third here (what promotion keeps)."""
    n: int
    """Configurations with a finite loss at both fidelities."""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def rung_fidelities(fidelity: Fidelity, eta: float) -> list[float]:
    """The fidelities of Hyperband's rungs below ``r_max``, highest first: ``r_max / eta^k`` for k = 1, 2, …
    snapped to the range, each once, down to ``r_min`` (included once the geometric ladder reaches it).
    Empty for a problem without a fidelity (``r_min == r_max``)."""
    if not eta > 1:
        raise UsageError(f"eta: must be > 1, got {eta}")
    rungs: list[float] = []
    k = 1
    while True:
        r = fidelity.snap(fidelity.r_max / eta ** k)
        if r >= fidelity.r_max:
            break
        if not rungs or r < rungs[-1]:
            rungs.append(r)
        if r <= fidelity.r_min:
            break
        k += 1
    return rungs


def check_fidelity(problem: Problem, n_configs: int = 200, seed: int = 0, eta: float = 3.0,
                   label: str | None = None) -> list[RungCheck]:
    """Evaluate ``n_configs`` random configurations (drawn from the problem's space with ``seed``) at every
    rung of :func:`rung_fidelities` and at ``r_max``, one batched call per fidelity.

    Returns one :class:`RungCheck` per rung, highest fidelity first. Raises :class:`UsageError` when the
    problem has no fidelity or ``n_configs`` < 10 (too few to rank). Deterministic for a deterministic
    benchmark: the configurations come from a copy of the space seeded with ``seed``. ``label`` names the
    instance in the rows (default: the problem's instance).
    """
    if n_configs < 10:
        raise UsageError(f"n_configs: must be an integer >= 10 (enough to rank), got {n_configs}")
    fidelity = problem.fidelity
    rungs = rung_fidelities(fidelity, eta)
    if not rungs:
        raise UsageError(f"{problem}: has no fidelity to check (r_min = r_max = {fidelity.r_max:g})")
    space = copy.deepcopy(problem.search_space)  # seeding the problem's own space would change its state
    space.seed(seed)
    configs = [dict(c) for c in space.sample_configuration(n_configs)]
    full = problem.evaluate(configs, np.full(n_configs, fidelity.r_max))
    full_loss = np.asarray(full.loss, dtype=float)
    full_cost = float(np.nanmean(full.cost))
    rows = []
    for k, r in enumerate(rungs, start=1):
        low = problem.evaluate(configs, np.full(n_configs, r))
        loss = np.asarray(low.loss, dtype=float)
        ok = np.isfinite(loss) & np.isfinite(full_loss)
        rho = float(spearmanr(loss[ok], full_loss[ok]).statistic) if ok.sum() >= 3 else math.nan
        rows.append(RungCheck(instance=label or str(problem.instance), rung=k, fidelity=r,
                              budget_share=r / fidelity.r_max,
                              cost_share=float(np.nanmean(low.cost)) / full_cost if full_cost > 0 else math.nan,
                              spearman=rho, top_recall=_top_recall(loss[ok], full_loss[ok]), n=int(ok.sum())))
    return rows


def _top_recall(low: np.ndarray, full: np.ndarray) -> float:
    """The share of the best :data:`TOP_FRACTION` by ``full`` that are among the best :data:`KEPT_FRACTION`
    by ``low`` (ties broken by index, as a stable sort does)."""
    n_top, n_kept = max(1, round(TOP_FRACTION * len(full))), max(1, round(KEPT_FRACTION * len(low)))
    best = set(np.argsort(full, kind="stable")[:n_top].tolist())
    kept = set(np.argsort(low, kind="stable")[:n_kept].tolist())
    return len(best & kept) / n_top


def summarize(rows: list[RungCheck]) -> list[dict[str, Any]]:
    """One row per rung k over the instances of ``rows``: the budget share (a range when the instances'
    fidelities differ, as in a pooled benchmark), the median cost share, the median, lowest and highest
    rank correlation and the median top recall, highest fidelity first."""
    out = []
    for k in sorted({row.rung for row in rows}):
        at = [row for row in rows if row.rung == k]
        shares = sorted({round(row.budget_share, 4) for row in at})
        rho = np.array([row.spearman for row in at], dtype=float)
        out.append({"rung": k, "budget_share": (f"{shares[0]:.3g}" if len(shares) == 1
                                                else f"{shares[0]:.3g}-{shares[-1]:.3g}"),
                    "cost_share": float(np.nanmedian([row.cost_share for row in at])),
                    "spearman_median": float(np.nanmedian(rho)), "spearman_min": float(np.nanmin(rho)),
                    "spearman_max": float(np.nanmax(rho)),
                    "top_recall": float(np.nanmedian([row.top_recall for row in at])), "instances": len(at)})
    return out
