"""Declarative studies: a YAML file says what to run; ``run_study`` runs it, resumably.

Schema (validated on load, errors name the field; see ``studies/README.md``)::

    name: quickstart                # also the default output folder: results/<name>
    description: ...
    benchmark: synthetic:mlp        # or yahpo:<scenario>
    budget: 30d                     # 30d = 30 x d full evaluations; 100; 3600s (cost units)
    evaluation:
      instances: {split: test, limit: 6}   # or a list of instance ids
      seeds: 3                      # 3 means seeds 1..3; or a list
      optimizers: [rs, sh, hb]      # preset names
    output: results/quickstart      # relative to the current directory

Every finished run is written at once to ``<output>/runs/<optimizer>/<instance>/seed-<k>/``
(``summary.json`` last, atomically), so an interrupted study resumes where it stopped when the
same command is run again. The study file is copied to ``<output>/study.yaml``; running a
different study into the same folder is refused.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Literal

import numpy as np
import pandas as pd
import yaml
from joblib import Parallel, delayed
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from tqdm import tqdm

from metaopt.errors import UsageError
from metaopt.store_utils import atomic_write_text


class InstanceSelection(BaseModel):
    model_config = ConfigDict(extra="forbid")
    split: Literal["train", "test", "all"] = "test"
    limit: int | None = Field(default=None, ge=1)


class EvaluationSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    instances: InstanceSelection | list[str] = InstanceSelection()
    seeds: int | list[int] = Field(default=3)
    optimizers: list[str] = Field(min_length=1)

    @field_validator("seeds")
    @classmethod
    def _seeds(cls, value: int | list[int]) -> list[int]:
        seeds = list(range(1, value + 1)) if isinstance(value, int) else value
        if not seeds or len(set(seeds)) != len(seeds):
            raise ValueError("seeds must be a positive count or a list of distinct integers")
        return seeds

    @field_validator("instances", mode="before")
    @classmethod
    def _instance_ids(cls, value: object) -> object:
        return [str(v) for v in value] if isinstance(value, list) else value


class StudySpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    description: str = ""
    benchmark: str
    budget: str = "30d"
    evaluation: EvaluationSpec
    output: str | None = None

    @field_validator("budget", mode="before")
    @classmethod
    def _budget_text(cls, value: object) -> object:
        return str(value) if isinstance(value, (int, float)) else value


class Study:
    """A loaded study: its spec, its source text and where its results go."""

    def __init__(self, spec: StudySpec, source: str, path: Path) -> None:
        self.spec = spec
        self.source = source
        self.path = path
        self.output = Path(spec.output or f"results/{spec.name}")


def _format_error(err: ValidationError, path: Path) -> str:
    first = err.errors()[0]
    field = ".".join(str(p) for p in first["loc"]) or "(top level)"
    more = f" (and {err.error_count() - 1} more problems)" if err.error_count() > 1 else ""
    return f"{path}: field '{field}': {first['msg']}{more}"


def load_study(path: Path) -> Study:
    """Read and validate a study file; every problem is reported with its field name."""
    try:
        source = path.read_text()
    except FileNotFoundError:
        raise UsageError(f"study file not found: {path}") from None
    try:
        data = yaml.safe_load(source)
    except yaml.YAMLError as err:
        raise UsageError(f"{path}: not valid YAML ({str(err).splitlines()[0]})") from None
    if not isinstance(data, dict):
        raise UsageError(f"{path}: a study file must be a YAML mapping (name, benchmark, evaluation, ...)")
    try:
        spec = StudySpec.model_validate(data)
    except ValidationError as err:
        raise UsageError(_format_error(err, path)) from None
    return Study(spec, source, path)


def _claim_output(study: Study) -> None:
    """Create the output folder for this study, or refuse if it holds another study's results."""
    marker = study.output / "study.yaml"
    if marker.exists():
        if yaml.safe_load(marker.read_text()) != yaml.safe_load(study.source):
            raise UsageError(
                f"{study.output} holds results of a different study file ({marker}); "
                "use another output folder or remove that one"
            )
        return
    atomic_write_text(marker, study.source)


def _run_one(benchmark_name: str, yahpo_data: str | None, config: dict, instance: str, seed: int, budget,
             reference, optimizer: str, directory: Path) -> None:
    """One run, written to ``directory`` as soon as it finishes (a task for a worker process)."""
    from metaopt.benchmarks import get_benchmark
    from metaopt.loop import run
    from metaopt.run_io import write_run

    problem = get_benchmark(benchmark_name, yahpo_data).problem(instance)
    result = run(config, problem, seed, budget, reference=reference)
    result.summary["optimizer"] = optimizer
    write_run(directory, result)


def run_study(study: Study, yahpo_data: str | None = None, quiet: bool = False, workers: int = 1) -> pd.DataFrame:
    """Run every (optimizer, instance, seed) of the study not yet finished; write tables and plots.

    With ``workers`` > 1 the runs go to that many worker processes (joblib); every run is a pure
    function of its inputs, so the results are the same as in a serial run.
    """
    from metaopt.benchmarks import get_benchmark
    from metaopt.budget import Budget
    from metaopt.references import get_reference
    from metaopt.run_io import is_complete, read_run
    from spaces.presets import get_preset

    spec = study.spec
    bench = get_benchmark(spec.benchmark, yahpo_data)
    ev = spec.evaluation
    if isinstance(ev.instances, list):
        instances = [bench.problem(i).instance for i in ev.instances]
    else:
        instances = bench.instances_of(ev.instances.split)[: ev.instances.limit]
    if not instances:
        raise UsageError(f"{study.path}: field 'evaluation.instances' selects no instance of {bench.name}")
    presets = {name: get_preset(name) for name in ev.optimizers}
    budget = Budget.parse(spec.budget, bench.d)
    _claim_output(study)

    tasks = [(o, i, s) for o in presets for i in instances for s in ev.seeds]
    run_dir = lambda o, i, s: study.output / "runs" / o / i / f"seed-{s}"  # noqa: E731
    todo = [t for t in tasks if not is_complete(run_dir(*t))]
    print(f"study {spec.name}: {len(presets)} optimizers x {len(instances)} instances of {bench.name} x "
          f"{len(ev.seeds)} seeds at budget {budget}; {len(tasks) - len(todo)} of {len(tasks)} runs already done")
    references = {i: get_reference(bench, i) for i in tqdm(instances, desc="regret references", disable=quiet)}
    started = time.perf_counter()
    jobs = (delayed(_run_one)(bench.name, yahpo_data, presets[o].config(bench.fidelity), i, s, budget, references[i],
                              o, run_dir(o, i, s)) for o, i, s in todo)
    for _ in tqdm(Parallel(n_jobs=workers, return_as="generator_unordered")(jobs), total=len(todo), desc="runs",
                  unit="run", disable=quiet):
        pass
    elapsed = time.perf_counter() - started

    results = [(dict(optimizer=o, instance=i, seed=s), read_run(run_dir(o, i, s))) for o, i, s in tasks]
    table = _write_results(study, bench, budget, results, instances)
    print(f"\nran {len(todo)} runs in {elapsed:.1f} s; results in {study.output}/")
    with pd.option_context("display.width", 200):
        print(table.to_string(index=False))
    return table


def _write_results(study, bench, budget, results, instances) -> pd.DataFrame:
    """results.csv (one row per run), table.csv/.md (aggregates) and anytime.png/.csv."""
    from analysis.anytime import anytime_table, budget_grid, mean_se_over_instances
    from analysis.plots import plot_anytime

    spec = study.spec
    rows = [{**keys, **{k: v for k, v in res.summary.items() if k not in ("config", "reference")}}
            for keys, res in results]
    per_run = pd.DataFrame(rows)
    atomic_write_text(study.output / "results.csv", per_run.to_csv(index=False))

    final = mean_se_over_instances(per_run, ["optimizer"], "normalized_regret")
    walls = per_run.groupby("optimizer")["wall_time_s"].mean().rename("wall_time_per_run_s")
    table = final.merge(walls, on="optimizer")
    table["mean_normalized_regret"] = table.apply(lambda r: f"{r['mean']:.4f} ± {r['se']:.4f}", axis=1)
    table = table[["optimizer", "mean_normalized_regret", "mean", "se", "n_instances", "wall_time_per_run_s"]]
    table = table.sort_values("mean").reset_index(drop=True)
    atomic_write_text(study.output / "table.csv", table.to_csv(index=False))

    first = max(float(res.trace["budget_used"].iloc[0]) for _, res in results if len(res.trace))
    grid = budget_grid(first, budget.amount) if budget.unit == "full_evals" else None
    caption = (f"{bench.name}: {len(instances)} instances ({', '.join(instances[:8])}{' ...' if len(instances) > 8 else ''})"
               f" x {len(spec.evaluation.seeds)} seeds, budget {budget}; band = ± 1 s.e. over instances")
    md = [f"# Study {spec.name}", "", spec.description.strip(), "",
          f"Mean normalized regret at the full budget ({budget}), mean over seeds then mean ± standard error "
          f"over {len(instances)} instances of {bench.name}.", "",
          _markdown_table(table.drop(columns=["mean", "se"]))]
    if grid is not None:
        curves = anytime_table(((keys, res.trace) for keys, res in results), grid)
        atomic_write_text(study.output / "anytime.csv", curves.to_csv(index=False))
        plot_anytime(curves, study.output / "anytime.png", f"Study {spec.name}: anytime performance", caption)
        md += ["", "![anytime mean normalized regret](anytime.png)", "", f"*{caption}*"]
    atomic_write_text(study.output / "table.md", "\n".join(md) + "\n")
    return table


def _markdown_table(df: pd.DataFrame) -> str:
    def fmt(v: object) -> str:
        return f"{v:.3g}" if isinstance(v, (float, np.floating)) else str(v)

    lines = ["| " + " | ".join(df.columns) + " |", "|" + "---|" * len(df.columns)]
    lines += ["| " + " | ".join(fmt(v) for v in row) + " |" for row in df.itertuples(index=False)]
    return "\n".join(lines)
