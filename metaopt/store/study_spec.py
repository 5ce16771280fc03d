"""The study file's schema and loader: what a study YAML may say, validated (schema: studies/README.md).

Called by every stage and by the report (through :func:`load_study`), so that each of them reads the
validated spec, never the YAML as a plain dict. Checks that need the benchmark (instances,
optimizers, budgets) are made by :class:`metaopt.stages.study.StudyContext` before any work starts.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from metaopt.core.budget import TIME_LIMIT_FORMS, Budget, is_time_limit, parse_time_limit
from metaopt.core.errors import UsageError
from metaopt.core.store_utils import read_text_file


def _seed_list(value: int | list[int]) -> list[int]:
    """The seeds of a ``seeds`` field: a count N (1 <= N <= :data:`MAX_SEEDS`) means 1..N; a list must hold
    at most MAX_SEEDS distinct integers in [0, :data:`SEED_LIMIT`) (what numpy and SMAC accept)."""
    allowed = (f"must be a count 1..{MAX_SEEDS} or a list of at most {MAX_SEEDS} distinct integers "
               f"0 <= seed < 2**31")
    if isinstance(value, int) and not 1 <= value <= MAX_SEEDS:
        raise ValueError(allowed)
    seeds = list(range(1, value + 1)) if isinstance(value, int) else value
    if (not seeds or len(seeds) > MAX_SEEDS or len(set(seeds)) != len(seeds) or min(seeds) < 0
            or max(seeds) >= SEED_LIMIT):
        raise ValueError(allowed)
    return seeds


SEED_LIMIT = 2**31
"""Seeds are integers 0 <= seed < 2**31: numpy takes any, SMAC's seeds must fit a C int."""
MAX_SEEDS = 10_000
"""The most seeds a ``seeds`` field may give (each is a run per instance and optimizer)."""


class InstanceSelection(BaseModel):
    model_config = ConfigDict(extra="forbid")
    split: Literal["train", "test", "all"] = "test"
    limit: int | None = Field(default=None, ge=1)


def _ids(value: object) -> object:
    return [str(v) for v in value] if isinstance(value, list) else value


class _InstancesAndSeeds(BaseModel):
    """Which instances and seeds a stage runs on (seeds: a count N means 1..N)."""

    model_config = ConfigDict(extra="forbid", validate_default=True)
    instances: InstanceSelection | list[str] = InstanceSelection()
    seeds: int | list[int] = 1

    @field_validator("seeds", mode="before")
    @classmethod
    def _no_bool_seeds(cls, value: object) -> object:
        if isinstance(value, bool) or (isinstance(value, list) and any(isinstance(v, bool) for v in value)):
            raise ValueError("must be a positive count or a list of distinct integers >= 0, not true/false")
        return value

    @field_validator("seeds")
    @classmethod
    def _seeds(cls, value: int | list[int]) -> list[int]:
        return _seed_list(value)

    @field_validator("instances", mode="before")
    @classmethod
    def _instance_ids(cls, value: object) -> object:
        return _ids(value)


def clock_run_name(optimizer: str, workers: int) -> str:
    """The stored name of ``optimizer``'s held-out runs with ``workers`` simulated workers (``evaluation.clock``)."""
    return f"{optimizer}@w{workers}"


class _TimeLimit(BaseModel):
    """A simulated time limit (``time_limit``) of runs on the simulated clock: the field and its reading,
    shared by ``evaluation.clock`` and ``meta.clock``."""

    model_config = ConfigDict(extra="forbid")
    time_limit: str | None = None

    @field_validator("time_limit", mode="before")
    @classmethod
    def _duration(cls, value: object) -> object:
        text = str(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else value
        if not isinstance(text, str) or not is_time_limit(text):
            raise ValueError(f"must be {TIME_LIMIT_FORMS}")
        return text

    def limit(self, d: int | None) -> float | Budget | None:
        """The time limit: simulated seconds, or a typical-cost budget (``30dc``, ``100c``) that each run
        resolves to seconds on its instance (:func:`metaopt.core.references.resolve_budget`); None: none.
        UsageError for ``30dc`` when ``d`` is None (a pooled benchmark)."""
        return None if self.time_limit is None else parse_time_limit(self.time_limit, d)


class ClockSpec(_TimeLimit):
    """``evaluation.clock``: every optimizer runs on the simulated clock (:mod:`metaopt.engine.simclock`)
    once per worker count, within the study's budget and, if given, the simulated time limit."""

    workers: list[int] = Field(min_length=1)

    @field_validator("workers", mode="before")
    @classmethod
    def _worker_counts(cls, value: object) -> object:
        if not isinstance(value, list) or any(isinstance(w, bool) or not isinstance(w, int) or w < 1 for w in value) \
                or len(set(value)) != len(value):
            raise ValueError("must be a list of distinct integers >= 1 (simulated workers), e.g. [1, 8, 32]")
        return value


class MetaClock(_TimeLimit):
    """``meta.clock``: every inner run of the meta-search runs on the simulated clock with ``workers``
    simulated workers, within the study's budget and the simulated ``time_limit``; the meta-objective
    is read against simulated time (the regret of the best result in by the time limit, or by the
    ``objective_budgets`` fractions of it: :func:`metaopt.stages.meta_search.clock_objective`)."""

    workers: int
    time_limit: str  # required: the simulated time at which the meta-objective reads a run's regret

    @field_validator("workers", mode="before")
    @classmethod
    def _worker_count(cls, value: object) -> object:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError("must be one integer >= 1 (the simulated workers the design is searched for), e.g. 8")
        return value

    def settings(self) -> dict[str, Any]:
        """What a compact meta-archive records of it (``{"workers": 8, "time_limit": "10dc"}``), so that
        runs made with other settings are not taken as this study's (:func:`metaopt.stages.meta.export_meta_runs`)."""
        return {"workers": self.workers, "time_limit": self.time_limit}


class MetaFidelity(BaseModel):
    """Multi-fidelity meta-optimization over the inner budget (``meta.fidelity``)."""

    model_config = ConfigDict(extra="forbid")
    min_budget: float = Field(gt=0, lt=1)
    """The smallest inner budget, as a fraction of the study's (e.g. 0.111: 30·d → 3.3·d)."""
    eta: int = Field(default=3, ge=2)
    """Hyperband's η: each rung keeps the best 1/η of its designs for an η times larger inner budget."""
    brackets: Literal["hyperband", "successive_halving"] = "hyperband"
    """Which designs start where: ``hyperband`` (SMAC's multi-fidelity facade: brackets that start designs
    at min_budget, at η·min_budget, …, and at the full budget, in turn) or ``successive_halving`` (every
    design starts at min_budget: the most designs per CPU-hour, each reaching the full budget only by
    promotion)."""

    def text(self) -> str:
        """How a report names the search's schedule: ``Hyperband over the inner budget, from 0.111 of it, eta 3``."""
        kind = "Hyperband" if self.brackets == "hyperband" else "successive halving"
        return f"{kind} over the inner budget, from {self.min_budget:g} of it, eta {self.eta}"


def objective_tag(transform: str, scale: float) -> str | None:
    """How a run's objective counts each regret (``meta.objective_transform`` and ``objective_scale``),
    as its run record stores it (under :data:`metaopt.store.meta_archive.OBJECTIVE_TRANSFORM`): None for
    plain regret, else ``<transform>/<scale>`` (e.g. ``asinh/0.01``). A stored run counted another way
    is not the run a study needs (:func:`metaopt.store.meta_archive.load_cache`)."""
    return None if transform == "none" else f"{transform}/{scale!r}"


def arm_archive(path: str | Path, restriction: str) -> Path:
    """The compact meta-archive of the arm ``restriction`` of a study that meta-optimizes a list of
    restrictions: ``path`` (its ``meta.archive``, or ``export-meta --out``) with the arm's name inserted
    before the extensions, ``meta_runs.jsonl.gz`` -> ``meta_runs.<restriction>.jsonl.gz``. Each arm
    is a search of its own (its trials logs, its runs), so each has a file of its own."""
    path = Path(path)
    stem, dot, extensions = path.name.partition(".")
    return path.with_name(f"{stem}.{restriction}{dot}{extensions}")


class WarmStart(BaseModel):
    """Designs another study's search found, for this search's initial design (``meta.warm_start``)."""

    model_config = ConfigDict(extra="forbid")
    archive: str
    """That study's compact meta-archive (``metaopt study export-meta``)."""
    top: int = Field(default=5, ge=1, le=100)
    """How many of its best designs (its mean objective over the instances its best-covered design ran on)."""


class MetaSpec(_InstancesAndSeeds):
    """How γ is searched: SMAC over training instances."""

    instances: InstanceSelection | list[str] = InstanceSelection(split="train")
    restriction: str | list[str] | None = None
    objective: Literal["regret", "regret_at", "auc"] = "regret"
    objective_budgets: list[float] = Field(default=[1.0], min_length=1)
    objective_transform: Literal["none", "asinh"] = "none"
    """How each regret the meta-objective reads counts (:func:`metaopt.stages.meta_search.transformed`):
    as it is, or asinh(regret / ``objective_scale``), logarithmic above the scale, so that a few
    instances whose regret swings by tenths between seeds do not decide the mean over instances."""
    objective_scale: float = Field(default=0.01, gt=0)
    """The regret below which ``asinh`` counts regret linearly (about as it is, in units of the scale)."""
    trials: int = Field(default=100, ge=1)
    batch_size: int = Field(default=4, ge=1)
    """SMAC trials proposed together and run in parallel (independent of the worker count: see metaopt/stages/meta.py)."""
    initial_presets: bool = True
    """Whether every preset that is a point of the searched space joins SMAC's initial design."""
    initial_configs: list[str] = Field(default_factory=list)
    """γ files (a configuration, or a study's gamma_star.json) that join SMAC's initial design."""
    warm_start: list[WarmStart] = Field(default_factory=list)
    """Transfer between scenarios: the best designs of other studies' meta-archives join SMAC's initial
    design after the presets and ``initial_configs`` (their runs are not reused: other instances)."""
    select_top: int = Field(default=0, ge=0)
    """γ* is chosen among this many best configurations after re-running them (0: the archive's best)."""
    select_seeds: int = Field(default=3, ge=1)
    """Further seeds per training instance for each of the ``select_top`` candidates."""
    select_instances: InstanceSelection | list[str] | None = None
    """Where the selection re-runs its ``select_top`` candidates (default: the search's training
    instances): training instances the search did not run, so that γ* is the candidate that does best
    on instances it was not chosen on (a search over few instances per scenario favours designs that
    suit those). Test instances are refused: they stay held out."""
    select_min_instance_fraction: float = Field(default=1.0, gt=0, le=1)
    """Which configurations may be candidates: those run on at least this fraction of the training
    instances, ranked by their paired difference to the best run on all (1: only those run on all)."""
    fidelity: MetaFidelity | None = None
    """SMAC's multi-fidelity facade over the inner budget instead of its algorithm-configuration facade:
    a trial is a design at a fraction of the inner budget on every training instance (metaopt.stages.meta_search)."""
    inner_seeds: int = Field(default=1, ge=1, le=10)
    """Seeds per training instance over which SMAC's algorithm-configuration search races a design: its
    intensifier runs a challenger on more and more of the incumbent's (instance, seed) pairs and
    compares them on the pairs both ran, so a lucky inner run alone cannot make an incumbent (1: one
    seed, SMAC's deterministic scenario)."""
    optimizer: Literal["smac", "random"] = "smac"
    """The search: SMAC's algorithm-configuration facade, or random search over the same space (each
    configuration on every training instance)."""
    baselines: list[Literal["random", "seeds"]] = Field(default_factory=list)
    """Meta-level baselines run after the search for the report's picture of it: ``random`` (the same
    trials spent by random search) and ``seeds`` (every known design on every training instance)."""
    noise_seeds: int = Field(default=0, ge=0, le=100)
    """γ* and the best known design re-run on this many seeds of every training instance (0: not):
    the meta-objective's noise, drawn as a band by the report (5 or more to see it)."""
    archive: str | None = None
    """A compact meta-archive (``metaopt study export-meta``): its runs count as stored, so that a
    search continues from a committed archive on another machine."""
    clock: MetaClock | None = None
    """Every inner run on the simulated clock with N workers; the meta-objective against simulated time
    (a γ* for parallel use)."""
    max_evals: int | None = Field(default=None, ge=1)
    """Every inner run of the search (and of its selection, baselines and noise re-runs) stops after
    this many evaluations even with budget left (stop reason ``eval_cap``; None: no cap). A guard for
    the search's wall time: a design that spends its budget in tens of thousands of low-fidelity
    evaluations, with proposal work that grows with each, could otherwise hold up a batch for hours.
    Stored runs the cap would have changed are run again (:func:`metaopt.store.meta_archive.same_under_cap`)."""

    @property
    def objective_tag(self) -> str | None:
        """What each run record of this search stores of its transform (:func:`objective_tag`)."""
        return objective_tag(self.objective_transform, self.objective_scale)

    def objective_text(self) -> str:
        """The meta-objective in words, for the optimize stage's log and the report: its kind, the
        budget fractions it reads (``regret_at``) and its transform, if any."""
        text: str = self.objective
        if self.objective == "regret_at":
            text += " " + ", ".join(f"{fraction:.3g}" for fraction in self.objective_budgets) + " of the budget"
        if self.objective_transform == "asinh":
            text += f", each regret counted as asinh(regret / {self.objective_scale:g})"
        return text

    def archive_files(self, archive: str | None = None) -> dict[str | None, Path]:
        """The compact meta-archive of each meta-optimization, by restriction (as
        :meth:`metaopt.store.store.StudyStore.meta_stores`): ``archive`` (default: ``meta.archive``;
        none without one) for a study of one design space, one file per arm (:func:`arm_archive`) for a
        list of restrictions. Called by the optimize stage (which reads them) and ``study export-meta``
        (which writes them)."""
        archive = archive or self.archive
        if archive is None:
            return {}
        if isinstance(self.restriction, list):
            return {name: arm_archive(archive, name) for name in self.restriction}
        return {self.restriction: Path(archive)}

    @field_validator("select_instances", mode="before")
    @classmethod
    def _select_instance_ids(cls, value: object) -> object:
        return _ids(value)

    @model_validator(mode="after")
    def _fidelity_needs_smac(self) -> "MetaSpec":
        if self.fidelity is not None and self.optimizer != "smac":
            raise ValueError("fidelity (multi-fidelity meta-optimization) is SMAC's: it needs optimizer smac")
        if self.inner_seeds > 1 and (self.fidelity is not None or self.optimizer != "smac"):
            raise ValueError("inner_seeds > 1 races designs in SMAC's algorithm-configuration search: it needs "
                             "optimizer smac without fidelity")
        if self.max_evals is not None and self.clock is not None:
            # on several simulated workers the results that arrive past the time limit are discarded, so a
            # stored run's length does not tell whether the cap would have changed it (same_under_cap)
            raise ValueError("max_evals (an evaluation cap on the inner runs) is for runs off the clock: drop it "
                             "or clock")
        if self.select_instances is not None and self.select_top == 0:
            raise ValueError("select_instances: the instances of the selection need a selection (select_top > 0)")
        return self

    @field_validator("baselines")
    @classmethod
    def _distinct_baselines(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise ValueError("must name each baseline (random, seeds) at most once")
        return value

    @field_validator("batch_size", mode="before")
    @classmethod
    def _integer_batch_size(cls, value: object) -> object:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError("must be an integer >= 1 (the number of SMAC trials proposed and run together)")
        return value

    @field_validator("objective_budgets")
    @classmethod
    def _fractions(cls, value: list[float]) -> list[float]:
        if any(not 0 < f <= 1 for f in value):
            raise ValueError("fractions of the budget must be in (0, 1]")
        return value


class OptimizerVariant(BaseModel):
    """A named optimizer defined in the study: a preset or a configuration, with parameters overridden."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field(pattern=r"^[A-Za-z0-9_-]+$")
    preset: str | None = None
    config: dict[str, Any] | None = None
    set: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _one_source(self) -> "OptimizerVariant":
        if (self.preset is None) == (self.config is None):
            raise ValueError("give exactly one of 'preset' (a preset name) or 'config' (a configuration)")
        return self


class EvaluationSpec(_InstancesAndSeeds):
    seeds: int | list[int] = 3
    optimizers: list[str | OptimizerVariant] = Field(min_length=1)
    report_budgets: list[str] = Field(default_factory=list)
    gamma_star_from: str | None = None
    cost_reference: str | None = None
    clock: ClockSpec | None = None

    def optimizer_names(self) -> list[str]:
        """The names of the evaluated optimizers (a variant by its ``name``), in the file's order; with
        ``clock``, the names of their runs (:func:`clock_run_name`), worker count by worker count."""
        names = [item if isinstance(item, str) else item.name for item in self.optimizers]
        return names if self.clock is None else [clock_run_name(n, w) for w in self.clock.workers for n in names]


class AblationEntry(_InstancesAndSeeds):
    """An ablation between two optimizers (``metaopt ablate``), run after the evaluation."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, validate_default=True)
    source: str = Field(alias="from")
    to: str
    estimator: Literal["evaluated", "surrogate"] = "evaluated"
    variants: list[Literal["path", "ofat", "loco"]] = Field(default=["path"], min_length=1)
    race: bool = False


class CompanionStudy(BaseModel):
    """An entry of ``report_with``: a study file, and which of its optimizers join the report (all those
    this study does not evaluate itself when not given); a plain path is short for ``{study: PATH}``."""

    model_config = ConfigDict(extra="forbid")
    study: str
    optimizers: list[str] | None = Field(default=None, min_length=1)
    runs: str | None = None
    """A runs file of the companion (``metaopt study export-runs``, e.g. committed beside its report):
    read when the companion's store holds none of the runs it adds, so that the two studies can run
    in different sessions (:mod:`metaopt.analysis.held_out_runs`)."""

    @model_validator(mode="before")
    @classmethod
    def _path_alone(cls, value: object) -> object:
        return {"study": value} if isinstance(value, str) else value


class StudySpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    description: str = ""
    question: str = ""
    answer: str = ""
    benchmark: str
    budget: str = "30d"
    workers: int = Field(default=1, ge=1)
    meta: MetaSpec | None = None
    evaluation: EvaluationSpec | None = None
    """The held-out evaluation; a study without one only meta-optimizes (e.g. on a pooled benchmark,
    whose γ* is evaluated per scenario by studies naming it in ``evaluation.gamma_star_from``)."""
    ablation: list[AblationEntry] = Field(default_factory=list)
    importance: bool = True
    output: str | None = None
    report_with: list[CompanionStudy] = Field(default_factory=list)
    """Studies whose held-out runs join this study's report tables (:func:`companion_studies`)."""

    @field_validator("budget", mode="before")
    @classmethod
    def _budget_text(cls, value: object) -> object:
        return str(value) if isinstance(value, (int, float)) else value

    @field_validator("name")
    @classmethod
    def _one_path_component(cls, value: str) -> str:
        if value in (".", ".."):
            raise ValueError("must be a folder name (letters, digits, '_', '-', '.'), not '.' or '..': "
                             "the default output folder is results/<name>")
        return value

    @model_validator(mode="after")
    def _something_to_do(self) -> "StudySpec":
        if self.meta is None and self.evaluation is None:
            raise ValueError("a study needs a 'meta' section, an 'evaluation' section or both")
        return self


class Study:
    """A loaded study: its spec, its source text and where its results go."""

    def __init__(self, spec: StudySpec, source: str, path: Path) -> None:
        self.spec = spec
        self.source = source
        self.path = path
        self.output = Path(spec.output or f"results/{spec.name}")


def _format_error(err: ValidationError, path: Path) -> str:
    # Of a union's alternatives (e.g. an optimizer given as a name or as a variant), report the one
    # that got furthest (the longest location), and leave pydantic's alternative tags out of the name.
    errors = err.errors()
    first = max(errors, key=lambda e: len(e["loc"]))
    tags = {"str", "int", "list[str]", "list[int]", "InstanceSelection", "OptimizerVariant"}
    field = ".".join(str(p) for p in first["loc"] if p not in tags and "[" not in str(p)) or "(top level)"
    more = f" (and {len(errors) - 1} more problems)" if len(errors) > 1 else ""
    message = first["msg"].removeprefix("Value error, ")  # our validators' ValueErrors: the message alone
    return f"{path}: field '{field}': {message}{more}"


class _UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML's SafeLoader refusing a mapping that repeats a key (PyYAML keeps the last one silently;
    YAML 1.2 says keys are unique)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: set[object] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r} (line {key_node.start_mark.line + 1})", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep)


def load_yaml(text: str) -> Any:
    """``yaml.safe_load`` that refuses duplicate keys (yaml.YAMLError); the reader of study files."""
    return yaml.load(text, Loader=_UniqueKeyLoader)


def load_study(path: Path) -> Study:
    """Read and validate a study file; every problem is reported with its field name."""
    source = read_text_file(path, "study file", "a study file (YAML)")
    try:
        data = load_yaml(source)
    except yaml.YAMLError as err:
        raise UsageError(f"{path}: not valid YAML ({str(err).splitlines()[0]})") from None
    if not isinstance(data, dict):
        raise UsageError(f"{path}: a study file must be a YAML mapping (name, benchmark, evaluation, ...)")
    try:
        spec = StudySpec.model_validate(data)
    except ValidationError as err:
        raise UsageError(_format_error(err, path)) from None
    return Study(spec, source, path)


COMPANION_FIELDS = ("benchmark", "budget")
"""Fields a study named in ``report_with`` must share with the study that names it (with the
evaluation's instances and seeds), so that their runs pair by (instance, seed)."""


@dataclass(frozen=True)
class Companion:
    """A study named in ``report_with``, checked (:func:`companion_studies`): the optimizers whose
    held-out runs it adds and the runs file to read them from when its store holds none."""

    study: Study
    optimizers: list[str]
    runs_file: Path | None
    seeds: list[int]
    """The companion's evaluation seeds: all of the study's, or some of them (a slow companion split
    by seeds over several sessions, each slice a study of its own adding the same optimizers)."""


def _clock_text(clock: ClockSpec | None) -> str:
    """``evaluation.clock`` as a phrase for messages."""
    if clock is None:
        return "no clock"
    return f"workers {clock.workers}, time limit {clock.time_limit or 'none'}"


def companion_studies(spec: StudySpec, source: Path, output: Path) -> list[Companion]:
    """The studies named in ``report_with``, checked; called when the study is run (to refuse a bad
    list before any work) and when its report is built.

    A companion runs optimizers too slow to share the main study's session (e.g. SMAC's facades):
    its runs join the report's tables, tests and curves as if the main study had run them. It must
    have the same benchmark, budget and evaluation instances, seeds among the study's, the same
    simulated clock (its worker counts among the study's, the same time limit), and the optimizers it
    adds must be its own and not this study's. Several companions may add one optimizer on disjoint
    seeds (a companion too slow for one session, split by seeds). ``source``: the study file that
    names them (for messages); ``output``: its output folder. Raises UsageError naming the field
    otherwise.
    """
    out = []
    own = spec.evaluation.optimizer_names() if spec.evaluation else []
    taken: dict[str, set[int]] = {}  # the seeds each added optimizer has from the entries so far
    for k, entry in enumerate(spec.report_with):
        field, name = f"{source}: field 'report_with[{k}]'", entry.study
        if not Path(name).is_file():
            raise UsageError(f"{field}: no such study file: {name}")
        other = load_study(Path(name))
        theirs = other.spec
        if theirs.evaluation is None or spec.evaluation is None:
            raise UsageError(f"{field}: {name} and this study must both have an 'evaluation' section")
        for key in COMPANION_FIELDS:
            if getattr(theirs, key) != getattr(spec, key):
                raise UsageError(f"{field}: {name} has {key} {getattr(theirs, key)!r}, this study "
                                 f"{getattr(spec, key)!r}; their runs would not pair")
        if theirs.evaluation.instances != spec.evaluation.instances:
            raise UsageError(f"{field}: {name} evaluates other instances ({theirs.evaluation.instances!r}, "
                             f"here {spec.evaluation.instances!r}); their runs would not pair")
        seeds, ours = _seed_list(theirs.evaluation.seeds), _seed_list(spec.evaluation.seeds)
        if not set(seeds) <= set(ours):
            raise UsageError(f"{field}: {name} evaluates seeds {seeds} that are not all among this study's "
                             f"{ours}; their runs would not pair")
        mine, clock = spec.evaluation.clock, theirs.evaluation.clock
        if (mine is None) != (clock is None) or (
                mine is not None and clock is not None and (clock.time_limit != mine.time_limit
                                                            or not set(clock.workers) <= set(mine.workers))):
            raise UsageError(f"{field}: {name} evaluates on another clock ({_clock_text(clock)}, here "
                             f"{_clock_text(mine)}; its worker counts must be among these, the time limit the "
                             "same); their runs would not pair")
        if other.output.resolve() == Path(output).resolve():
            raise UsageError(f"{field}: {name} writes to this study's output folder ({output})")
        theirs_names = theirs.evaluation.optimizer_names()
        added = entry.optimizers or [n for n in theirs_names if n not in own]
        for optimizer in added:
            if optimizer not in theirs_names:
                raise UsageError(f"{field}: {name} does not evaluate {optimizer!r} (it evaluates "
                                 f"{', '.join(theirs_names)})")
            if optimizer in own:
                raise UsageError(f"{field}: {optimizer!r} is evaluated by this study itself")
            twice = sorted(set(seeds) & taken.setdefault(optimizer, set()))
            if twice:
                raise UsageError(f"{field}: {name} adds {optimizer!r} on seeds {twice}, which an earlier entry "
                                 "adds too; companions adding one optimizer must hold disjoint seeds")
            taken[optimizer] |= set(seeds)
        out.append(Companion(other, added, Path(entry.runs) if entry.runs else None, seeds))
    return out
