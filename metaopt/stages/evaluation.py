"""The evaluation stage: optimizers × held-out instances × seeds, every trace stored, then tables and plots.

Store layout (one folder per run; ``summary.json`` is written last and atomically and records
the digest of ``trace.csv``, so a folder whose summary and trace match is a finished run, see
:mod:`metaopt.store.run_io`; a run that raised leaves ``failed.json`` with its traceback)::

    <output>/eval/runs/<optimizer>/<instance>/seed-<k>/{trace.csv, summary.json | failed.json}
    <output>/eval/results.csv      one row per finished run (final and intermediate regrets)
    <output>/eval/table.csv|.md    mean ± s.e. over instances at each reported budget; runs = finished runs
    <output>/eval/wall_times.csv   mean wall time per run of each optimizer (a measurement, kept apart)
    <output>/eval/anytime.png|.csv mean normalized regret vs. budget

Rerunning skips finished runs; failed runs are tried again, and damaged ones (a truncated or
missing trace, a truncated summary) are redone with a line saying which. Results and tables are
in the order of the runs' specifications, never in completion order, so they do not depend on
the number of workers or on interruptions. ``table.md`` names the runs that failed.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Collection, Mapping

import numpy as np
import pandas as pd
from tqdm import tqdm

from metaopt.analysis.aliases import kept, run_identity, same_configuration_labels
from metaopt.analysis.markdown import markdown_table
from metaopt.analysis.termination import rtc, ryc
from metaopt.core.benchmarks.base import Benchmark, Problem
from metaopt.core.budget import Budget
from metaopt.core.errors import UsageError
from metaopt.core.executor import Executor
from metaopt.engine.simclock import run as run_loop
from metaopt.engine.trace import stopped_early
from metaopt.core.references import Reference
from metaopt.spaces.design_space import validate, without_stopping
from metaopt.spaces.resolve import optimizer_name, resolve_optimizer
from metaopt.store.meta_archive import gamma_hash
from metaopt.store.run_io import (UNFINISHED, DamagedRun, RunResult, check_run, clear_failure, discard_summary,
                                  has_failed, read_run, stored_config, write_failure, write_run)
from metaopt.store.store import EvalFiles, StudyStore
from metaopt.store.study_spec import clock_run_name
from metaopt.core.store_utils import atomic_write_bytes, atomic_write_text
from metaopt.engine.tasks import RunSpec, execute


@dataclass(frozen=True)
class OptimizerEntry:
    """An optimizer to evaluate: a design-space configuration, or an external peer."""

    name: str
    config: dict[str, Any] | None = None
    peer: str | None = None
    skipped: str | None = None
    workers: int | None = None
    """Simulated workers (``evaluation.clock``; None: not on the clock), with the time limit (simulated
    seconds, or a typical-cost budget resolved per instance)."""
    time_limit: float | Budget | None = None


def on_clock(entries: list[OptimizerEntry], workers: list[int], time_limit: float | Budget | None) -> list[OptimizerEntry]:
    """``evaluation.clock``: each entry once per worker count, named ``<name>@w<N>``, in that order."""
    return [replace(e, name=clock_run_name(e.name, w), workers=w, time_limit=time_limit) for w in workers for e in entries]


def check_clock_peers(names: list[Any], field: str = "optimizers") -> None:
    """Called when a study with ``evaluation.clock`` is loaded: UsageError naming ``field[k]`` for a
    peer that runs sequentially (only the syne-tune peers run on the simulated clock)."""
    from metaopt.engine.peers import PEERS

    on_the_clock = [name for name, peer in PEERS.items() if peer.clock_runner]
    for k, entry in enumerate(names):
        if isinstance(entry, str) and entry in PEERS and PEERS[entry].clock_runner is None:
            raise UsageError(f"field '{field}[{k}]': peer {entry} runs sequentially, not on the simulated clock "
                             f"(evaluation.clock); peers on the clock: {', '.join(on_the_clock)}")


def _check_unique(names: list[Any], field: str) -> None:
    """UsageError naming ``field[k]`` for the first optimizer name given twice."""
    seen: dict[str, int] = {}
    for k, entry in enumerate(names):
        name = optimizer_name(entry)
        if name in seen:
            raise UsageError(f"field '{field}[{k}]': optimizer {name!r} is listed twice (also {field}[{seen[name]}]); "
                             "each optimizer is evaluated once")
        seen[name] = k


def check_optimizers(names: list[Any], bench: Benchmark, gamma_star_names: Collection[str],
                     field: str = "optimizers") -> None:
    """Called when a study is loaded, before any work: UsageError naming ``field[k]`` unless every entry
    resolves (as :func:`resolve_optimizers` will) and no name is given twice.

    ``gamma_star_names`` are the γ* names the study will have (its meta-optimizations or
    ``gamma_star_from``); they need not be computed yet. Peers are checked by name only (whether
    their library is installed is reported when the evaluation runs).
    """
    from metaopt.engine.peers import PEERS

    _check_unique(names, field)
    pending = dict.fromkeys(gamma_star_names)
    for k, entry in enumerate(names):
        resolve_optimizer(entry, bench.fidelity, f"field '{field}[{k}]'", gamma_stars=pending, peers=PEERS,
                          files=False, pending=True,
                          gamma_star_hint="" if pending else "the study has no meta section and no "
                                                             "evaluation.gamma_star_from")


def resolve_optimizers(names: list[Any], bench: Benchmark, gamma_stars: Mapping[str, dict[str, Any] | None],
                       field: str = "optimizers") -> list[OptimizerEntry]:
    """Called by the evaluation stage: optimizer names and variants to entries; unavailable peers are
    marked skipped.

    A name is ``gamma_star`` or ``gamma_star:<restriction>`` (a key of ``gamma_stars``, the study's
    γ*'s; None where the meta-optimization has not finished, which is an error here), a preset or a
    peer; a variant is a configuration defined in the study (:func:`metaopt.spaces.resolve.resolve_optimizer`).
    A name given twice is a UsageError.
    """
    from metaopt.engine import peers  # imports the peer libraries' adapters only when needed

    _check_unique(names, field)
    entries = []
    for k, name in enumerate(names):
        hint = "run `metaopt optimize STUDY` first" + ("" if ":" in str(name) else " or set evaluation.gamma_star_from")
        resolved = resolve_optimizer(name, bench.fidelity, f"field '{field}[{k}]'", gamma_stars=gamma_stars,
                                     peers=peers.PEERS, files=False, gamma_star_hint=hint)
        status = peers.peer_status()[resolved.peer] if resolved.peer else "available"
        entries.append(OptimizerEntry(resolved.name, config=resolved.config, peer=resolved.peer,
                                      skipped=None if status == "available" else status))
    return entries


MAX_DAMAGE_LINES = 20
"""Damaged runs named one per line before the rest are counted in one line (e.g. a store from
before trace digests, where every run is redone)."""
STALE = ("was made by another configuration under this name (the preset, the design file or the study changed "
         "since)")
"""Why a finished, intact stored run is redone: its configuration is not the one its optimizer now names."""


def evaluate(output: Path | StudyStore, bench: Benchmark, entries: list[OptimizerEntry], instances: list[str],
             seeds: list[int], budget: Budget, references: dict[str, Reference], executor: Executor,
             report_budgets: list[Budget], yahpo_data: str | None = None, quiet: bool = False,
             caption_prefix: str = "", cost_reference: str | None = None) -> pd.DataFrame:
    """Run what is not finished yet, then write results, tables and the anytime plot.

    An optimizer with a stopping rule is also run without it (its "full" twin: the same γ with
    ``stopping: budget``, reused when the study already evaluates that configuration), and
    ``termination.csv`` gives RYC and RTC (paper 002) of the stopped runs against their twins.
    With a ``cost_reference`` optimizer, ``cost.csv`` compares everyone at its per-instance cost
    (:mod:`metaopt.analysis.cost`). ``output`` is the study's store (or its folder): runs and tables
    go to its ``eval/`` (:class:`metaopt.store.store.StudyStore`).
    """
    store = output if isinstance(output, StudyStore) else StudyStore(output)
    twins = termination_twins(entries)
    for twin in twins.values():
        if twin not in entries:
            entries = entries + [twin]
    runnable = [e for e in entries if e.skipped is None]
    for e in entries:
        if e.skipped:
            print(f"  {e.name}: {e.skipped}")
    specs = [RunSpec(e.name, bench.name, i, s, budget, references[i], config=e.config, peer=e.peer,
                     yahpo_data=yahpo_data, workers=e.workers, time_limit=e.time_limit)
             for e in runnable for i in instances for s in seeds]
    todo = _runs_to_do(store, specs)
    groups = _same_runs(todo)
    shared = len(todo) - len(groups)
    print(f"evaluation: {len(runnable)} optimizers x {len(instances)} instances x {len(seeds)} seeds = "
          f"{len(specs)} runs, {len(specs) - len(todo)} already done"
          + (f", {shared} the same as another optimizer's (same configuration: run once, stored for both)"
             if shared else "") + f"; {executor.describe()}")
    started = time.perf_counter()
    failures = 0
    outcomes = executor.map_unordered((execute, (group[0],)) for group in groups)
    bar: dict[str, Any] = dict(total=len(groups), desc="evaluation runs", unit="run", disable=True if quiet else None)
    for position, outcome in tqdm(outcomes, **bar):
        for spec in groups[position]:
            folder = store.eval_run_dir(spec.optimizer, spec.instance, spec.seed)
            if outcome.ok:
                write_run(folder, RunResult(outcome.result.trace, {**outcome.result.summary, "optimizer": spec.optimizer}))
                clear_failure(folder)
            else:
                failures += 1
                write_failure(folder, outcome.error)
                if not quiet:
                    tqdm.write(f"run failed: {spec.optimizer} {spec.instance} seed {spec.seed}: "
                               f"{outcome.error.strip().splitlines()[-1]}")
    elapsed = time.perf_counter() - started
    print(f"evaluation: {len(todo)} runs in {elapsed:.1f} s" + (f", {failures} failed (see failed.json)" if failures else ""))

    results, failed = [], []
    for s in specs:  # each stored run is read (and its digest checked) once
        folder = store.eval_run_dir(s.optimizer, s.instance, s.seed)
        try:
            results.append((dict(optimizer=s.optimizer, instance=s.instance, seed=s.seed), read_run(folder)))
        except (FileNotFoundError, DamagedRun):
            if has_failed(folder):
                failed.append(f"{s.optimizer} on {s.instance} seed {s.seed}")
    if not results:
        raise UsageError("evaluation: no run finished; nothing to tabulate")
    labels = same_configuration_labels({e.name: run_identity(e.config, e.workers) if e.peer is None else None
                                        for e in runnable},
                                       [e.name for e in entries])
    results = _merge_same(results, labels)
    caption = (f"{caption_prefix}{bench.name}: {len(instances)} instances "
               f"({', '.join(instances[:6])}{' ...' if len(instances) > 6 else ''}) x {len(seeds)} seeds, "
               f"budget {budget}")
    if twins:
        write_termination_table(store.eval_files, results,
                                {labels.get(name, name): labels.get(twin.name, twin.name) for name, twin in twins.items()},
                                caption)
    if cost_reference is not None:
        write_cost_table(store.eval_files, results, labels.get(cost_reference, cost_reference), caption)
    if any(e.workers is not None for e in entries):
        write_clock_curves(store.eval_files, results, caption)
    return write_tables(store, results, budget, report_budgets, caption, failed=failed)


def _merge_same(results: list[tuple[dict, RunResult]], labels: Mapping[str, str]) -> list[tuple[dict, RunResult]]:
    """Called before the tables are written: ``results`` with one configuration under several names
    (:func:`metaopt.analysis.aliases.same_configuration_labels`) once, the first name's runs under the
    label that joins all the names (the others' are the same runs); every other run as it is."""
    merged = []
    for keys, result in results:
        name = keys["optimizer"]
        label = labels.get(name, name)
        if not kept(name, labels):
            continue
        if label != name:
            keys, result = {**keys, "optimizer": label}, RunResult(result.trace, {**result.summary, "optimizer": label})
        merged.append((keys, result))
    return merged


def _same_runs(todo: list[RunSpec]) -> list[list[RunSpec]]:
    """``todo`` in groups of the same run under several optimizers' names, in order of first
    appearance; the first of each group is executed. Called before the runs start.

    A run is a pure function of (configuration or peer, problem, seed, budget), so two optimizers
    with one configuration (γ* found to be a preset, a design shipped under two names) give the same
    trace bit for bit; it is run once and stored under each name (with the one wall time measured).
    """
    groups: dict[str, list[RunSpec]] = {}
    for spec in todo:
        key = json.dumps(spec.config, sort_keys=True) + repr(replace(spec, optimizer="", config=None))
        groups.setdefault(key, []).append(spec)
    return list(groups.values())


def _runs_to_do(store: StudyStore, specs: list[RunSpec]) -> list[RunSpec]:
    """Called before the runs start: the specs without a finished, intact run in the store.

    A damaged run (see :func:`metaopt.store.run_io.check_run`), or a stale one (made by another
    configuration than the optimizer's today, :data:`STALE`), gets one line saying so and loses its
    summary, so that nothing reads it before it is redone.
    """
    todo, damaged = [], 0
    designs: dict[str, str] = {}  # optimizer -> the hash of its configuration
    for spec in specs:
        folder = store.eval_run_dir(spec.optimizer, spec.instance, spec.seed)
        problem = check_run(folder)
        if problem is None and spec.config is not None and not _same_design(stored_config(folder), spec, designs):
            problem = STALE
        if problem is None:
            continue
        if problem != UNFINISHED:
            damaged += 1
            if damaged <= MAX_DAMAGE_LINES:
                why = STALE if problem == STALE else f"is damaged ({problem})"
                print(f"evaluation: run {spec.optimizer} on {spec.instance} seed {spec.seed} {why}; it is redone")
            discard_summary(folder)
        todo.append(spec)
    if damaged > MAX_DAMAGE_LINES:
        print(f"evaluation: ... and {damaged - MAX_DAMAGE_LINES} more damaged or stale runs are redone")
    return todo


def _same_design(stored: Any, spec: RunSpec, designs: dict[str, str]) -> bool:
    """Whether a stored run's configuration (its summary's ``config``) is the design ``spec`` runs: equal
    once both are completed with today's defaults (a hyperparameter added since the run was made, at its
    default, is the same design). ``designs`` caches each optimizer's hash."""
    if spec.optimizer not in designs:
        designs[spec.optimizer] = gamma_hash(validate(spec.config or {}))
    if not isinstance(stored, dict):
        return False
    if gamma_hash(stored) == designs[spec.optimizer]:
        return True
    try:
        return gamma_hash(validate(stored)) == designs[spec.optimizer]
    except UsageError:  # a hyperparameter or value the design space no longer has
        return False


def write_clock_curves(files: EvalFiles, results: list[tuple[dict, Any]], caption: str) -> pd.DataFrame:
    """anytime_clock.csv/.png: mean normalized regret vs simulated wall-clock time, one panel per worker
    count (:mod:`metaopt.analysis.clock_curves`), of this study's runs; the report draws them again from the runs,
    with its companions' (:func:`metaopt.analysis.report.load_evaluation`)."""
    from metaopt.analysis.clock_curves import clock_curves, clock_figure

    curves = clock_curves([(keys, res) for keys, res in results])
    atomic_write_text(files.anytime_clock_csv, curves.to_csv(index=False))
    if len(curves):
        atomic_write_bytes(files.anytime_clock_png, clock_figure(curves, caption).png)
    return curves


def write_cost_table(files: EvalFiles, results: list[tuple[dict, Any]], reference: str, caption: str) -> pd.DataFrame:
    """cost.csv/.md: regret at the reference's equal cost budget and cost to reach its median final loss."""
    from metaopt.analysis.cost import cost_comparison, cost_table

    per_run = cost_comparison([(keys, res.trace, res.summary) for keys, res in results], reference)
    if per_run.empty:
        raise UsageError(f"field 'evaluation.cost_reference': optimizer {reference!r} has no finished run")
    atomic_write_text(files.cost_runs_csv, per_run.to_csv(index=False))
    table = cost_table(per_run)
    atomic_write_text(files.cost_csv, table.to_csv(index=False))
    shown = pd.DataFrame({
        "optimizer": table["optimizer"],
        "regret at equal cost": [f"{m:.4f} ± {e:.4f}" for m, e in zip(table["regret_at_cost"], table["regret_at_cost_se"])],
        f"reached {reference}'s median final loss": [f"{m:.2f} ± {e:.2f}" for m, e in zip(table["reached"], table["reached_se"])],
        "median cost to reach it (× equal cost)": table["median_cost_to_target_rel"],
        "median cost per evaluation": table["median_cost_per_eval"],
        "n_instances": table["n_instances"]})
    md = ["# Cost-aware comparison", "",
          f"Per instance, {reference}'s runs fix the target (the median of its final losses) and, unless the "
          f"budget is a cost budget (then it is that budget), the equal cost budget (the median over its seeds of "
          f"the cost it spent). Regret at equal cost: normalized regret of the incumbent after spending that cost "
          f"(mean ± s.e. over instances, seeds averaged); reached: share of "
          f"runs whose incumbent reaches the target; cost to reach it: median over runs of the cost "
          f"needed, as a multiple of the equal cost budget (runs that never reach it count as ∞).", "",
          markdown_table(shown), "", f"*{caption}*"]
    atomic_write_text(files.cost_md, "\n".join(md) + "\n")
    return table


def termination_twins(entries: list[OptimizerEntry]) -> dict[str, OptimizerEntry]:
    """For each optimizer with a stopping rule, the entry of the same γ run to the full budget."""
    twins: dict[str, OptimizerEntry] = {}
    for entry in entries:
        if entry.config is None or entry.config.get("stopping", "budget") == "budget":
            continue
        full = validate(without_stopping(entry.config))
        known = [e for e in [*entries, *twins.values()] if e.config == full and e.workers == entry.workers]
        twins[entry.name] = known[0] if known else replace(entry, name=f"{entry.name}.full", config=full)
    return twins


def write_termination_table(files: EvalFiles, results: list[tuple[dict, Any]], twin_of: dict[str, str],
                            caption: str) -> pd.DataFrame:
    """termination.csv/.md: per stopped optimizer, mean ± s.e. over instances of RYC, RTC and more;
    termination_runs.csv: the same per run (optimizer, instance, seed), for paired comparisons."""
    from metaopt.analysis.anytime import mean_se_over_instances

    by_key = {(k["optimizer"], k["instance"], k["seed"]): res for k, res in results}
    rows = []
    for (name, instance, seed), stopped in by_key.items():
        full = by_key.get((twin_of.get(name), instance, seed))
        if name not in twin_of or full is None:
            continue
        rows.append({"optimizer": name, "instance": instance, "seed": seed,
                     "ryc": ryc(stopped.trace, full.trace), "rtc": rtc(stopped.trace, full.trace),
                     "rtc_budget": rtc(stopped.trace, full.trace, column="budget_used"),
                     "stopped": float(stopped_early(stopped.summary["stop_reason"])),
                     "regret_stopped": stopped.summary.get("normalized_regret"),
                     "regret_full": full.summary.get("normalized_regret")})
    per_run = pd.DataFrame(rows)
    if per_run.empty:
        return per_run
    atomic_write_text(files.termination_runs_csv, per_run.to_csv(index=False))
    table: Any = None
    for column in ("ryc", "rtc", "rtc_budget", "stopped", "regret_stopped", "regret_full"):
        agg = mean_se_over_instances(per_run, ["optimizer"], column)
        agg = agg.rename(columns={"mean": column, "se": f"{column}_se"})
        table = agg if table is None else table.merge(agg.drop(columns="n_instances"), on="optimizer")
    atomic_write_text(files.termination_csv, table.to_csv(index=False))
    shown = table[["optimizer"]].copy()
    for column in ("ryc", "rtc", "rtc_budget", "stopped", "regret_stopped", "regret_full"):
        shown[column] = [f"{m:.3f} ± {e:.3f}" for m, e in zip(table[column], table[f"{column}_se"])]
    shown["n_instances"] = table["n_instances"]
    md = ["# Automatic termination (paper 002)", "",
          "RYC = (y_full − y_stopped)/max(y_full, y_stopped) of the final incumbent loss (negative: stopping "
          "cost accuracy); RTC = share of the full run's cost saved (rtc_budget: of its budget); stopped = share "
          "of runs the rule ended early; regrets at the end of the stopped and of the full run. Mean ± s.e. "
          "over instances (seeds averaged per instance); each stopped run is compared with the same γ, "
          "instance and seed run to the full budget.", "", markdown_table(shown), "", f"*{caption}*"]
    atomic_write_text(files.termination_md, "\n".join(md) + "\n")
    return table


def write_tables(store: StudyStore, results: list[tuple[dict, Any]], budget: Budget, report_budgets: list[Budget],
                 caption: str, failed: Collection[str] = ()) -> pd.DataFrame:
    """Called once the runs are done: ``eval/`` results.csv, table.csv/.md and the anytime curves of finished runs.

    ``results`` come in a fixed order (the runs' specifications), so the files do not depend on
    completion order; wall times go to wall_times.csv only. Returns the shown table with the wall
    time per run (for printing). ``failed`` names runs that failed ("hb on 3 seed 2"): table.md says they
    are missing, and its ``runs`` column counts only the finished ones.
    """
    from metaopt.analysis.anytime import anytime_table, budget_grid, mean_se_over_instances, regret_at
    from metaopt.analysis.stats import empty_runs, replicates_phrase
    from metaopt.analysis.plots import plot_anytime

    files = store.eval_files
    rows = []
    for keys, res in results:
        row = {**keys, **{k: v for k, v in res.summary.items() if k not in ("config", "reference")}}
        # A typical-cost budget was resolved per instance (summary "budget", in cost units): scale alike.
        scale = res.summary["budget"] / budget.amount if budget.unit == "typical_cost" else 1.0
        for rb in report_budgets:
            row[f"regret@{rb.spec}"] = float(regret_at(res.trace[budget.spent_column].to_numpy(),
                                                       res.trace["normalized_regret"].to_numpy(),
                                                       np.array([rb.amount * scale]))[0]) if len(res.trace) else np.nan
        rows.append(row)
    per_run = pd.DataFrame(rows)
    # Wall times are measurements, not results: they go to wall_times.csv, so that results.csv and
    # the tables are the same bytes however the runs were scheduled or interrupted.
    walls = per_run.groupby("optimizer").agg(runs=("seed", "size"), wall_time_per_run_s=("wall_time_s", "mean"))
    atomic_write_text(files.wall_times_csv, walls.reset_index().to_csv(index=False))
    atomic_write_text(files.results_csv, per_run.drop(columns=["wall_time_s", "cpu_time_s"], errors="ignore")
                      .to_csv(index=False))

    table: Any = None
    for rb in report_budgets:
        agg = mean_se_over_instances(per_run, ["optimizer"], f"regret@{rb.spec}")
        agg[f"regret@{rb.spec}"] = [f"{m:.4f} ± {s:.4f}" for m, s in zip(agg["mean"], agg["se"])]
        agg = agg.rename(columns={"mean": f"mean@{rb.spec}", "se": f"se@{rb.spec}"})
        table = agg if table is None else table.merge(agg.drop(columns="n_instances"), on="optimizer")
    table = table.merge(walls[["runs"]].reset_index(), on="optimizer")
    table = table.sort_values([f"mean@{report_budgets[-1].spec}", "optimizer"]).reset_index(drop=True)
    atomic_write_text(files.table_csv, table.to_csv(index=False))

    shown = ["optimizer"] + [f"regret@{rb.spec}" for rb in report_budgets] + ["n_instances", "runs"]
    md = ["# Held-out evaluation", "",
          f"Mean normalized regret (mean over seeds per instance, then mean ± standard error over "
          f"{replicates_phrase(per_run)}) at budgets {', '.join(rb.spec for rb in report_budgets)}.", "",
          markdown_table(table[shown])]
    empty = empty_runs(per_run)
    if empty:
        md += ["", empty + "."]
    if failed:
        md += ["", f"{len(failed)} run{'s' if len(failed) > 1 else ''} failed and {'are' if len(failed) > 1 else 'is'} "
                   f"not in this table: {', '.join(failed)} (see failed.json; rerun to retry)."]
        caption += f"; {len(failed)} of {len(failed) + len(results)} runs failed"
    if budget.unit == "full_evals":
        first = max(float(res.trace["budget_used"].iloc[0]) for _, res in results if len(res.trace))
        curves = anytime_table(((keys, res.trace) for keys, res in results), budget_grid(first, budget.amount))
        atomic_write_text(files.anytime_csv, curves.to_csv(index=False))
        plot_anytime(curves, files.anytime_png, "Anytime performance (held-out instances)",
                     caption + "; band = ± 1 s.e. over instances")
        md += ["", f"![anytime mean normalized regret]({files.anytime_png.name})", "", f"*{caption}*"]
    atomic_write_text(files.table_md, "\n".join(md) + "\n")
    return table[shown].merge(walls[["wall_time_per_run_s"]].reset_index(), on="optimizer")


def termination_metrics(config: Mapping[str, Any], problem: Problem, seed: int, budget: Budget | str,
                        reference: Any = None) -> dict[str, Any]:
    """Run γ = ``config`` with its stopping rule and without it; RYC, RTC and where the run stopped.

    When the rule never fired (stop reason ``budget``), the stopped run is the full run and is not
    repeated. ``stopped_at_budget`` / ``stopped_at_cost``: budget (full evaluations) and cost spent
    when the run stopped; ``rtc_budget``: RTC measured in budget instead of cost.
    """
    stopped = run_loop(config, problem, seed, budget, reference=reference)
    full = stopped if not stopped_early(stopped.summary["stop_reason"]) else run_loop(
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
