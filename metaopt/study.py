"""Declarative studies: a YAML file says what to run; stages run it resumably (schema: studies/README.md).

Stages: ``optimize`` (SMAC over the training instances → γ*, when the study has a ``meta``
section) then ``evaluate`` (γ*, presets and peers on held-out instances × seeds). The study file
is copied to ``<output>/study.yaml``; running a *different* study into the same folder is refused,
running the same one again resumes it.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Literal

import pandas as pd
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from metaopt.errors import UsageError
from metaopt.store_utils import atomic_write_text


def _seed_list(value: int | list[int]) -> list[int]:
    seeds = list(range(1, value + 1)) if isinstance(value, int) else value
    if not seeds or len(set(seeds)) != len(seeds) or (isinstance(value, int) and value < 1):
        raise ValueError("must be a positive count or a list of distinct integers")
    return seeds


class InstanceSelection(BaseModel):
    model_config = ConfigDict(extra="forbid")
    split: Literal["train", "test", "all"] = "test"
    limit: int | None = Field(default=None, ge=1)


def _ids(value: object) -> object:
    return [str(v) for v in value] if isinstance(value, list) else value


class _InstancesAndSeeds(BaseModel):
    """Which instances and seeds a stage runs on (seeds: a count N means 1..N)."""

    model_config = ConfigDict(extra="forbid")
    instances: InstanceSelection | list[str] = InstanceSelection()
    seeds: int | list[int] = 1

    @field_validator("seeds")
    @classmethod
    def _seeds(cls, value: int | list[int]) -> list[int]:
        return _seed_list(value)

    @field_validator("instances", mode="before")
    @classmethod
    def _instance_ids(cls, value: object) -> object:
        return _ids(value)


class MetaSpec(_InstancesAndSeeds):
    """How γ is searched: SMAC over training instances."""

    instances: InstanceSelection | list[str] = InstanceSelection(split="train")
    restriction: str | None = None
    objective: Literal["regret", "regret_at", "auc"] = "regret"
    objective_budgets: list[float] = Field(default=[1.0], min_length=1)
    trials: int = Field(default=100, ge=1)

    @field_validator("objective_budgets")
    @classmethod
    def _fractions(cls, value: list[float]) -> list[float]:
        if any(not 0 < f <= 1 for f in value):
            raise ValueError("fractions of the budget must be in (0, 1]")
        return value


class EvaluationSpec(_InstancesAndSeeds):
    seeds: int | list[int] = 3
    optimizers: list[str] = Field(min_length=1)
    report_budgets: list[str] = Field(default_factory=list)
    gamma_star_from: str | None = None


class StudySpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    description: str = ""
    benchmark: str
    budget: str = "30d"
    workers: int = Field(default=1, ge=1)
    meta: MetaSpec | None = None
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


class StudyContext:
    """A study resolved against its benchmark: instances, budgets, references; checked before any work."""

    def __init__(self, study: Study, yahpo_data: str | None) -> None:
        from metaopt.benchmarks import get_benchmark
        from metaopt.budget import Budget
        from spaces.restrictions import get_restriction

        spec = study.spec
        self.study = study
        self.yahpo_data = yahpo_data
        self.bench = get_benchmark(spec.benchmark, yahpo_data)
        self.budget = Budget.parse(spec.budget, self.bench.d)
        self.eval_instances = self._instances(spec.evaluation.instances, "evaluation.instances")
        self.report_budgets = [Budget.parse(b, self.bench.d) for b in spec.evaluation.report_budgets]
        if not self.report_budgets or self.report_budgets[-1].amount != self.budget.amount:
            self.report_budgets.append(self.budget)
        for rb in self.report_budgets:
            if rb.unit != self.budget.unit or rb.amount > self.budget.amount:
                raise UsageError(f"{study.path}: field 'evaluation.report_budgets': {rb.spec} must be in the "
                                 f"budget's unit and at most {spec.budget}")
        self.meta_instances: list[str] = []
        if spec.meta is not None:
            self.meta_instances = self._instances(spec.meta.instances, "meta.instances")
            if spec.meta.restriction:
                get_restriction(spec.meta.restriction)

    def _instances(self, selection: InstanceSelection | list[str], field: str) -> list[str]:
        if isinstance(selection, list):
            instances = [self.bench.problem(i).instance for i in selection]
        else:
            instances = self.bench.instances_of(selection.split)[: selection.limit]
        if not instances:
            raise UsageError(f"{self.study.path}: field '{field}' selects no instance of {self.bench.name}")
        return instances

    def references(self, instances: list[str], quiet: bool) -> dict[str, Any]:
        from tqdm import tqdm

        from metaopt.references import get_reference

        bar = tqdm(instances, desc="regret references", disable=True if quiet else None)
        return {i: get_reference(self.bench, i) for i in bar}

    @property
    def gamma_star_path(self) -> Path:
        source = self.study.spec.evaluation.gamma_star_from
        return Path(source) if source else self.study.output / "meta" / "gamma_star.json"

    def gamma_star(self) -> dict[str, Any] | None:
        path = self.gamma_star_path
        if not path.exists():
            if self.study.spec.evaluation.gamma_star_from:
                raise UsageError(f"{self.study.path}: field 'evaluation.gamma_star_from': no such file {path}")
            return None
        from spaces.design_space import validate

        return validate(json.loads(path.read_text())["config"])


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


def run_optimize(ctx: StudyContext, executor, quiet: bool = False) -> dict[str, Any]:
    """The optimize stage: SMAC over the training instances; writes meta/ and returns γ*."""
    from metaopt.meta import MetaSetup, optimize
    from spaces.design_space import design_space
    from spaces.restrictions import get_restriction

    meta = ctx.study.spec.meta
    if meta is None:
        raise UsageError(f"{ctx.study.path} has no 'meta' section: nothing to optimize (evaluation only)")
    references = ctx.references(ctx.meta_instances, quiet)
    setup = MetaSetup(ctx.bench.name, ctx.yahpo_data, ctx.budget, references, meta.restriction, meta.objective,
                      tuple(meta.objective_budgets))
    space = get_restriction(meta.restriction).space() if meta.restriction else design_space()
    features = {i: [references[i].y_min, references[i].y_max] for i in ctx.meta_instances}
    print(f"optimize: SMAC (algorithm configuration) over {len(ctx.meta_instances)} training instances of "
          f"{ctx.bench.name}, {meta.trials} trials x {len(meta.seeds)} meta-seeds, design space "
          f"{meta.restriction or 'full'} ({len(space)} parameters), objective {meta.objective}")
    star = optimize(ctx.study.output, setup, space, ctx.meta_instances, features, meta.trials, meta.seeds,
                    executor, quiet)
    print(f"gamma*: mean objective {star['mean_objective']:.4f} on {star['n_instances']} training instances "
          f"({star['n_configurations']} configurations, {star['n_trials']} trials)")
    print(json.dumps(star["config"], indent=1))
    return star


def run_evaluate(ctx: StudyContext, executor, quiet: bool = False):
    """The evaluation stage: every optimizer on the held-out instances × seeds."""
    from metaopt.evaluation import evaluate, resolve_optimizers

    ev = ctx.study.spec.evaluation
    entries = resolve_optimizers(ev.optimizers, ctx.bench, ctx.gamma_star() if "gamma_star" in ev.optimizers else None)
    references = ctx.references(ctx.eval_instances, quiet)
    table = evaluate(ctx.study.output, ctx.bench, entries, ctx.eval_instances, ev.seeds, ctx.budget, references,
                     executor, ctx.report_budgets, ctx.yahpo_data, quiet, caption_prefix=f"study {ctx.study.spec.name}, ")
    with pd.option_context("display.width", 200):
        print(table.to_string(index=False))
    return table


def run_stages(study: Study, stages: list[str], yahpo_data: str | None = None, quiet: bool = False,
               workers: int | None = None, scheduler: str | None = None) -> None:
    """Run the given stages of a study in order, with one executor for all of them."""
    from metaopt.executor import make_executor

    ctx = StudyContext(study, yahpo_data)  # validates everything before anything is written
    _claim_output(study)
    timings = {}
    with make_executor(workers or study.spec.workers, scheduler) as executor:
        for stage in stages:
            started = time.perf_counter()
            if stage == "optimize":
                if study.spec.meta is None:
                    print("optimize: skipped (the study has no 'meta' section)")
                    continue
                run_optimize(ctx, executor, quiet)
            elif stage == "evaluate":
                run_evaluate(ctx, executor, quiet)
            timings[stage] = time.perf_counter() - started
    summary = ", ".join(f"{stage} {seconds:.1f} s" for stage, seconds in timings.items())
    print(f"\nstudy {study.spec.name}: done ({summary}); results in {study.output}/")
    path = study.output / "timings.json"
    previous = json.loads(path.read_text()) if path.exists() else {}
    atomic_write_text(path, json.dumps({**previous, **timings}, indent=1))
