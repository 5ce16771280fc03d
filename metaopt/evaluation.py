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


def resolve_optimizers(names: list[str], bench: Benchmark, gamma_star: dict[str, Any] | None) -> list[OptimizerEntry]:
    """Preset names, peer names and ``gamma_star`` to entries; unavailable peers are marked skipped."""
    from spaces.presets import PRESETS, get_preset

    entries = []
    for name in names:
        if name == "gamma_star":
            if gamma_star is None:
                raise UsageError("optimizer 'gamma_star' needs a finished meta-optimization "
                                 "(run `metaopt optimize STUDY` first) or evaluation.gamma_star_from")
            entries.append(OptimizerEntry(name, config=gamma_star))
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


def run_dir(output: Path, optimizer: str, instance: str, seed: int) -> Path:
    return output / "eval" / "runs" / optimizer / instance / f"seed-{seed}"


def evaluate(output: Path, bench: Benchmark, entries: list[OptimizerEntry], instances: list[str],
             seeds: list[int], budget: Budget, references: dict[str, Reference], executor: Executor,
             report_budgets: list[Budget], yahpo_data: str | None = None, quiet: bool = False,
             caption_prefix: str = "") -> pd.DataFrame:
    """Run what is not finished yet, then write results, tables and the anytime plot."""
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
    return write_tables(output / "eval", results, budget, report_budgets, caption, n_instances=len(instances))


def write_tables(folder: Path, results: list[tuple[dict, Any]], budget: Budget, report_budgets: list[Budget],
                 caption: str, n_instances: int) -> pd.DataFrame:
    """results.csv, table.csv/.md and the anytime curves of finished runs."""
    from analysis.anytime import anytime_table, budget_grid, mean_se_over_instances, regret_at
    from analysis.plots import plot_anytime

    unit_column = "budget_used" if budget.unit == "full_evals" else "cost_used"
    rows = []
    for keys, res in results:
        row = {**keys, **{k: v for k, v in res.summary.items() if k not in ("config", "reference")}}
        for rb in report_budgets:
            row[f"regret@{rb.spec}"] = float(regret_at(res.trace[unit_column].to_numpy(),
                                                       res.trace["normalized_regret"].to_numpy(),
                                                       np.array([rb.amount]))[0]) if len(res.trace) else np.nan
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
