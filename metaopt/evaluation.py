"""The evaluation stage: optimizers × held-out instances × seeds, every trace stored, then tables and plots.

Store layout (one folder per run; ``summary.json`` is written last and atomically, so a folder
with a summary is a finished run; a run that raised leaves ``failed.json`` with its traceback)::

    <output>/eval/runs/<optimizer>/<instance>/seed-<k>/{trace.csv, summary.json | failed.json}
    <output>/eval/results.csv      one row per finished run (final and intermediate regrets)
    <output>/eval/table.csv|.md    mean ± s.e. over instances at each reported budget
    <output>/eval/anytime.png|.csv mean normalized regret vs. budget

Rerunning skips finished runs; failed runs are tried again.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from tqdm import tqdm

from metaopt.benchmarks.base import Benchmark
from metaopt.budget import Budget
from metaopt.errors import UsageError
from metaopt.executor import Executor
from metaopt.references import Reference
from metaopt.run_io import is_complete, read_run, write_run
from metaopt.store_utils import atomic_write_text
from metaopt.tasks import RunSpec, execute


@dataclass(frozen=True)
class OptimizerEntry:
    """An optimizer to evaluate: a design-space configuration, or an external peer."""

    name: str
    config: dict[str, Any] | None = None
    peer: str | None = None
    skipped: str | None = None


def resolve_optimizers(names: list[Any], bench: Benchmark, gamma_stars: dict[str, dict[str, Any]],
                       field: str = "optimizers") -> list[OptimizerEntry]:
    """Optimizer names and variants to entries; unavailable peers are marked skipped.

    A name is ``gamma_star`` (or ``gamma_star:<restriction>``: a key of ``gamma_stars``), a preset
    or a peer. A variant (an object with ``name`` and ``preset``
    or ``config``, plus ``set`` overrides; see :class:`metaopt.study.OptimizerVariant`) is a
    configuration defined in the study, e.g. a preset with another stopping rule.
    """
    from spaces.presets import PRESETS, get_preset

    entries = []
    for k, name in enumerate(names):
        if not isinstance(name, str):
            base = get_preset(name.preset).config(bench.fidelity) if name.preset else dict(name.config)
            try:
                config = _override(base, name.set)
            except UsageError as err:
                raise UsageError(f"field '{field}[{k}]' ({name.name}): {err}") from None
            entries.append(OptimizerEntry(name.name, config=config))
            continue
        if name.startswith("gamma_star"):
            if name not in gamma_stars:
                raise UsageError(f"field '{field}[{k}]': optimizer {name!r} needs a finished meta-optimization "
                                 f"(run `metaopt optimize STUDY` first){'' if ':' in name else ' or evaluation.gamma_star_from'}")
            entries.append(OptimizerEntry(name, config=gamma_stars[name]))
            continue
        if name in PRESETS:
            entries.append(OptimizerEntry(name, config=get_preset(name).config(bench.fidelity)))
            continue
        from metaopt.peers import PEERS, peer_status  # imports the peer libraries' adapters only when needed

        if name not in PEERS:
            raise UsageError(f"unknown optimizer {name!r}; known: gamma_star, presets {', '.join(PRESETS)}, "
                             f"peers {', '.join(PEERS)}")
        status = peer_status()[name]
        entries.append(OptimizerEntry(name, peer=name, skipped=None if status == "available" else status))
    return entries


def _override(config: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    """A complete configuration with ``changes`` applied; parameters that become inactive are dropped."""
    from spaces.design_space import validate

    merged = validate({**config, **changes}, drop_inactive=True)
    inactive = [name for name in changes if name not in merged]
    if inactive:
        raise UsageError(f"parameter {inactive[0]} is inactive in this configuration")
    return merged


def run_dir(output: Path, optimizer: str, instance: str, seed: int) -> Path:
    return output / "eval" / "runs" / optimizer / instance / f"seed-{seed}"


def evaluate(output: Path, bench: Benchmark, entries: list[OptimizerEntry], instances: list[str],
             seeds: list[int], budget: Budget, references: dict[str, Reference], executor: Executor,
             report_budgets: list[Budget], yahpo_data: str | None = None, quiet: bool = False,
             caption_prefix: str = "", cost_reference: str | None = None) -> pd.DataFrame:
    """Run what is not finished yet, then write results, tables and the anytime plot.

    An optimizer with a stopping rule is also run without it (its "full" twin: the same γ with
    ``stopping: budget``, reused when the study already evaluates that configuration), and
    ``termination.csv`` gives RYC and RTC (paper 002) of the stopped runs against their twins.
    With a ``cost_reference`` optimizer, ``cost.csv`` compares everyone at its per-instance cost
    (:mod:`analysis.cost`).
    """
    twins = termination_twins(entries)
    for twin in twins.values():
        if twin not in entries:
            entries = entries + [twin]
    runnable = [e for e in entries if e.skipped is None]
    for e in entries:
        if e.skipped:
            print(f"  {e.name}: {e.skipped}")
    specs = [RunSpec(e.name, bench.name, i, s, budget, references[i], config=e.config, peer=e.peer,
                     yahpo_data=yahpo_data)
             for e in runnable for i in instances for s in seeds]
    todo = [spec for spec in specs if not is_complete(run_dir(output, spec.optimizer, spec.instance, spec.seed))]
    print(f"evaluation: {len(runnable)} optimizers x {len(instances)} instances x {len(seeds)} seeds = "
          f"{len(specs)} runs, {len(specs) - len(todo)} already done; {executor.describe()}")
    started = time.perf_counter()
    failures = 0
    outcomes = executor.map_unordered((execute, (spec,)) for spec in todo)
    bar = dict(total=len(todo), desc="evaluation runs", unit="run", disable=True if quiet else None)
    for _, outcome in tqdm(outcomes, **bar):
        folder = run_dir(output, outcome.spec.optimizer, outcome.spec.instance, outcome.spec.seed)
        if outcome.ok:
            write_run(folder, outcome.result)
            (folder / "failed.json").unlink(missing_ok=True)
        else:
            failures += 1
            atomic_write_text(folder / "failed.json", json.dumps({"traceback": outcome.error}, indent=1))
            if not quiet:
                tqdm.write(f"run failed: {outcome.spec.optimizer} {outcome.spec.instance} seed {outcome.spec.seed}: "
                           f"{outcome.error.strip().splitlines()[-1]}")
    elapsed = time.perf_counter() - started
    print(f"evaluation: {len(todo)} runs in {elapsed:.1f} s" + (f", {failures} failed (see failed.json)" if failures else ""))

    done = [(spec, run_dir(output, spec.optimizer, spec.instance, spec.seed)) for spec in specs]
    results = [(dict(optimizer=s.optimizer, instance=s.instance, seed=s.seed), read_run(d))
               for s, d in done if is_complete(d)]
    if not results:
        raise UsageError("evaluation: no run finished; nothing to tabulate")
    caption = (f"{caption_prefix}{bench.name}: {len(instances)} instances "
               f"({', '.join(instances[:6])}{' ...' if len(instances) > 6 else ''}) x {len(seeds)} seeds, "
               f"budget {budget}")
    if twins:
        write_termination_table(output / "eval", results, {name: twin.name for name, twin in twins.items()},
                                caption)
    if cost_reference is not None:
        write_cost_table(output / "eval", results, cost_reference, caption)
    return write_tables(output / "eval", results, budget, report_budgets, caption, n_instances=len(instances))


def write_cost_table(folder: Path, results: list[tuple[dict, Any]], reference: str, caption: str) -> pd.DataFrame:
    """cost.csv/.md: regret at the reference's equal cost budget and cost to reach its median final loss."""
    from analysis.cost import cost_comparison, cost_table

    per_run = cost_comparison([(keys, res.trace, res.summary) for keys, res in results], reference)
    if per_run.empty:
        raise UsageError(f"field 'evaluation.cost_reference': optimizer {reference!r} has no finished run")
    atomic_write_text(folder / "cost_runs.csv", per_run.to_csv(index=False))
    table = cost_table(per_run)
    atomic_write_text(folder / "cost.csv", table.to_csv(index=False))
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
    atomic_write_text(folder / "cost.md", "\n".join(md) + "\n")
    return table


def termination_twins(entries: list[OptimizerEntry]) -> dict[str, OptimizerEntry]:
    """For each optimizer with a stopping rule, the entry of the same γ run to the full budget."""
    from analysis.termination import without_stopping
    from spaces.design_space import validate

    twins: dict[str, OptimizerEntry] = {}
    for entry in entries:
        if entry.config is None or entry.config.get("stopping", "budget") == "budget":
            continue
        full = validate(without_stopping(entry.config))
        known = [e for e in [*entries, *twins.values()] if e.config == full]
        twins[entry.name] = known[0] if known else OptimizerEntry(f"{entry.name}.full", config=full)
    return twins


def write_termination_table(folder: Path, results: list[tuple[dict, Any]], twin_of: dict[str, str],
                            caption: str) -> pd.DataFrame:
    """termination.csv/.md: per stopped optimizer, mean ± s.e. over instances of RYC, RTC and more."""
    from analysis.anytime import mean_se_over_instances
    from analysis.termination import ryc, rtc

    by_key = {(k["optimizer"], k["instance"], k["seed"]): res for k, res in results}
    rows = []
    for (name, instance, seed), stopped in by_key.items():
        full = by_key.get((twin_of.get(name), instance, seed))
        if name not in twin_of or full is None:
            continue
        rows.append({"optimizer": name, "instance": instance, "seed": seed,
                     "ryc": ryc(stopped.trace, full.trace), "rtc": rtc(stopped.trace, full.trace),
                     "rtc_budget": rtc(stopped.trace, full.trace, column="budget_used"),
                     "stopped": float(stopped.summary["stop_reason"] != "budget"),
                     "regret_stopped": stopped.summary.get("normalized_regret"),
                     "regret_full": full.summary.get("normalized_regret")})
    per_run = pd.DataFrame(rows)
    if per_run.empty:
        return per_run
    table = None
    for column in ("ryc", "rtc", "rtc_budget", "stopped", "regret_stopped", "regret_full"):
        agg = mean_se_over_instances(per_run, ["optimizer"], column)
        agg = agg.rename(columns={"mean": column, "se": f"{column}_se"})
        table = agg if table is None else table.merge(agg.drop(columns="n_instances"), on="optimizer")
    atomic_write_text(folder / "termination.csv", table.to_csv(index=False))
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
    atomic_write_text(folder / "termination.md", "\n".join(md) + "\n")
    return table


def write_tables(folder: Path, results: list[tuple[dict, Any]], budget: Budget, report_budgets: list[Budget],
                 caption: str, n_instances: int) -> pd.DataFrame:
    """results.csv, table.csv/.md and the anytime curves of finished runs."""
    from analysis.anytime import anytime_table, budget_grid, mean_se_over_instances, regret_at
    from analysis.plots import plot_anytime

    unit_column = "budget_used" if budget.unit == "full_evals" else "cost_used"
    rows = []
    for keys, res in results:
        row = {**keys, **{k: v for k, v in res.summary.items() if k not in ("config", "reference")}}
        # A typical-cost budget was resolved per instance (summary "budget", in cost units): scale alike.
        scale = res.summary["budget"] / budget.amount if budget.unit == "typical_cost" else 1.0
        for rb in report_budgets:
            row[f"regret@{rb.spec}"] = float(regret_at(res.trace[unit_column].to_numpy(),
                                                       res.trace["normalized_regret"].to_numpy(),
                                                       np.array([rb.amount * scale]))[0]) if len(res.trace) else np.nan
        rows.append(row)
    per_run = pd.DataFrame(rows)
    atomic_write_text(folder / "results.csv", per_run.to_csv(index=False))

    table = None
    for rb in report_budgets:
        agg = mean_se_over_instances(per_run, ["optimizer"], f"regret@{rb.spec}")
        agg[f"regret@{rb.spec}"] = [f"{m:.4f} ± {s:.4f}" for m, s in zip(agg["mean"], agg["se"])]
        agg = agg.rename(columns={"mean": f"mean@{rb.spec}", "se": f"se@{rb.spec}"})
        table = agg if table is None else table.merge(agg.drop(columns="n_instances"), on="optimizer")
    walls = per_run.groupby("optimizer").agg(runs=("seed", "size"), wall_time_per_run_s=("wall_time_s", "mean"))
    table = table.merge(walls.reset_index(), on="optimizer")
    table = table.sort_values(f"mean@{report_budgets[-1].spec}").reset_index(drop=True)
    atomic_write_text(folder / "table.csv", table.to_csv(index=False))

    shown = ["optimizer"] + [f"regret@{rb.spec}" for rb in report_budgets] + ["n_instances", "runs", "wall_time_per_run_s"]
    md = ["# Held-out evaluation", "",
          f"Mean normalized regret (mean over seeds per instance, then mean ± standard error over "
          f"{n_instances} instances) at budgets {', '.join(rb.spec for rb in report_budgets)}.", "",
          markdown_table(table[shown])]
    if budget.unit == "full_evals":
        first = max(float(res.trace["budget_used"].iloc[0]) for _, res in results if len(res.trace))
        curves = anytime_table(((keys, res.trace) for keys, res in results), budget_grid(first, budget.amount))
        atomic_write_text(folder / "anytime.csv", curves.to_csv(index=False))
        plot_anytime(curves, folder / "anytime.png", "Anytime performance (held-out instances)",
                     caption + "; band = ± 1 s.e. over instances")
        md += ["", "![anytime mean normalized regret](anytime.png)", "", f"*{caption}*"]
    atomic_write_text(folder / "table.md", "\n".join(md) + "\n")
    return table[shown]


def markdown_table(df: pd.DataFrame) -> str:
    def fmt(v: object) -> str:
        return f"{v:.3g}" if isinstance(v, (float, np.floating)) else str(v)

    lines = ["| " + " | ".join(map(str, df.columns)) + " |", "|" + "---|" * len(df.columns)]
    lines += ["| " + " | ".join(fmt(v) for v in row) + " |" for row in df.itertuples(index=False)]
    return "\n".join(lines)
