"""Anytime curves against simulated wall-clock time, one panel per worker count (``evaluation.clock``).

A study with ``evaluation.clock`` runs every optimizer on the simulated clock once per worker count N;
such a run is stored under the name ``<optimizer>@w<N>`` (:func:`metaopt.store.study_spec.clock_run_name`) and its summary
records ``workers``. The curves read each run's trace by simulated time: the regret at time t is the
normalized regret of the best loss (any fidelity) among the results in by t (a synchronous batch's
rows are in batch order, not in arrival order, so the trace's running incumbent is not used).
"""

from __future__ import annotations

from typing import Any, Iterable

import numpy as np
import pandas as pd

from metaopt.analysis.anytime import budget_grid
from metaopt.core.references import Reference
from metaopt.store.study_spec import clock_run_name

CLOCK_CURVES = "anytime_clock"
"""The figure's name (the report's ``figures/anytime_clock.png``); the evaluation's files of these curves
are named by the store (:class:`metaopt.store.store.EvalFiles`)."""


def _base_name(run_name: str, workers: int) -> str:
    """The optimizer of a run stored as :func:`metaopt.store.study_spec.clock_run_name` names it."""
    suffix = clock_run_name("", workers)
    return run_name[:-len(suffix)] if run_name.endswith(suffix) else run_name


def panel_label(workers: int) -> str:
    """A worker count's panel title; padded so that panels sort by worker count."""
    return f"{workers:>4} worker" + ("" if workers == 1 else "s")


def best_by_arrival(trace: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """A run on the clock's rows in arrival order (by ``sim_time``, ties in trace order), and the lowest
    loss (any fidelity; a failed evaluation's NaN as inf) among the rows in by each of them. Read by
    :func:`regret_by_time` and by the runs file's reduced trace
    (:func:`metaopt.analysis.held_out_runs.reduced_trace`), which keeps the rows where it falls."""
    order = np.argsort(trace["sim_time"].to_numpy(), kind="stable")
    loss = trace["loss"].to_numpy()
    best = np.fmin.accumulate(np.where(np.isnan(loss), np.inf, loss)[order]) if len(loss) else loss
    return order, best


def regret_by_time(trace: pd.DataFrame, reference: Any, times: np.ndarray) -> np.ndarray:
    """Normalized regret of the best loss (any fidelity) among the results in by each simulated time
    (NaN before the first finite one)."""
    order, best = best_by_arrival(trace)
    arrived = trace["sim_time"].to_numpy()[order]
    seen = np.searchsorted(arrived, times, side="right")
    values = np.where(seen > 0, best[np.maximum(seen - 1, 0)] if len(best) else np.nan, np.nan)
    return np.asarray(reference.normalize(np.where(np.isinf(values), np.nan, values)), dtype=float)


def clock_curves(runs: Iterable[tuple[dict[str, Any], Any]], points: int = 60) -> pd.DataFrame:
    """Seed-averaged regret vs simulated time: columns workers, optimizer (without the ``@w<N>``),
    instance, time, regret.

    ``runs``: (keys with optimizer, instance, seed; a run result) for finished runs; those without
    ``workers`` in their summary (not on the clock) are left out. Per worker count the time grid is
    log-spaced from the median time of the first result to the latest end of a run. An optimizer's
    regret at a time is NaN on every instance until every one of its runs at that worker count has a
    result in (an instance's value is the mean over all its seeds, and the figure's and the table's
    means are over all its instances): earlier, a mean over the runs with a result would be a mean over
    a subset that changes with time (the first results of a 32-worker run arrive at different times on
    different instances). The figure leaves those times out, the table shows a dash.
    """
    by_workers: dict[int, list[tuple[dict[str, Any], Any]]] = {}
    for keys, result in runs:
        if "workers" in result.summary and len(result.trace):
            by_workers.setdefault(int(result.summary["workers"]), []).append((keys, result))
    frames = []
    for workers, group in sorted(by_workers.items()):
        first = float(np.median([r.trace["sim_time"].min() for _, r in group]))
        grid = budget_grid(first, max(float(r.summary["sim_time"]) for _, r in group), points)
        for keys, result in group:
            reference = Reference(**{k: result.summary["reference"][k] for k in ("y_min", "y_max")})
            frames.append(pd.DataFrame({
                "workers": workers, "optimizer": _base_name(keys["optimizer"], workers),
                "instance": keys["instance"], "seed": keys["seed"], "time": grid,
                "regret": regret_by_time(result.trace, reference, grid)}))
    if not frames:
        return pd.DataFrame(columns=["workers", "optimizer", "instance", "time", "regret"])
    curves = pd.concat(frames, ignore_index=True)
    by = ["workers", "optimizer", "instance", "time"]
    seed_means = curves.groupby(by)["regret"].agg(["mean", "count", "size"]).reset_index()
    seed_means["regret"] = seed_means["mean"].where(seed_means["count"] == seed_means["size"])
    regret = seed_means["regret"]
    incomplete = regret.isna().groupby([seed_means["workers"], seed_means["optimizer"], seed_means["time"]])
    seed_means.loc[incomplete.transform("any").to_numpy(), "regret"] = np.nan
    return seed_means[[*by, "regret"]]


TABLE_POSITIONS = (1 / 3, 2 / 3, 1.0)
"""Where :func:`clock_table` reads the curves: these positions along each worker count's log time grid
(from its first to its last time), the figure's early, middle and end."""


def clock_table(curves: pd.DataFrame) -> pd.DataFrame:
    """The curves of :func:`clock_curves` at a few simulated times, for the report's table: one row
    per optimizer, one column per worker count N and time t (the grid times at
    :data:`TABLE_POSITIONS` of N's log grid), cells "mean ± s.e." over instances (text;
    the mean alone for one instance, "—" for an optimizer without runs at N). Rows sorted by the last
    column's mean; "—" also where the optimizer's curve has no value yet."""
    columns: dict[str, pd.Series] = {}
    last_means = pd.Series(dtype=float)
    for workers, group in curves.groupby("workers", sort=True):
        grid = np.sort(group["time"].unique())
        for position in TABLE_POSITIONS:
            time = grid[int(round(position * (len(grid) - 1)))]
            at = group[group["time"] == time].groupby("optimizer")["regret"].agg(["mean", "sem"])
            columns[f"{panel_label(int(workers)).strip()}, {time:.3g} s"] = pd.Series(
                ["—" if np.isnan(m) else f"{m:.3f}" + ("" if np.isnan(e) else f" ± {e:.3f}")
                 for m, e in zip(at["mean"], at["sem"])], index=at.index)  # one instance: no s.e.
            last_means = at["mean"]
    table = pd.DataFrame(columns).fillna("—")
    order = last_means.reindex(table.index).sort_values(kind="stable", na_position="last").index
    return table.loc[order].reset_index(names="optimizer")


def clock_figure(curves: pd.DataFrame, caption: str) -> Any:
    """The curves of :func:`clock_curves` as a :class:`metaopt.analysis.figures.Figure` named
    :data:`CLOCK_CURVES`: one panel per worker count, every optimizer (ours and the peers) in each."""
    from dataclasses import replace

    from metaopt.analysis.figures import anytime, optimizer_palette

    shown = curves.dropna(subset=["regret"])  # before every run has a result in
    shown = shown.assign(scenario=shown["workers"].map(panel_label), budget=shown["time"])
    figure = anytime(shown, optimizer_palette(curves["optimizer"].unique()), "simulated wall-clock time (s)",
                     "Mean normalized regret of the best result in by each simulated time (log axis), one panel "
                     "per number of simulated workers: mean over seeds per instance, then mean ± 1 s.e. over "
                     "instances; an optimizer's curve starts when every one of its runs has a result in. "
                     f"{caption}")
    return replace(figure, name=CLOCK_CURVES, title="Anytime performance against simulated wall-clock time")
