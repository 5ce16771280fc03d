"""Declarative studies: a YAML file says what to run; stages run it resumably (schema: studies/README.md).

Stages: ``optimize`` (SMAC over the training instances → γ*, once per restriction, when the study
has a ``meta`` section), ``evaluate`` (γ*, presets, variants and peers on held-out instances ×
seeds), ``ablate`` (the study's ``ablation`` entries), ``importance`` (fANOVA and local importance
on the meta-archive; ``importance: false`` skips it) and ``report`` (HTML + Markdown from
everything stored). The whole study is checked (:class:`StudyContext`: benchmark, budgets,
instances, seeds, restrictions, optimizers and variants, ``gamma_star_from``, ``cost_reference``,
ablation entries, ``output``) before the first file is written. The study file is then copied to
``<output>/study.yaml``; running a *different* study into the same folder is refused, running the
same one again resumes it (one that only edits free fields or adds evaluated optimizers is the same:
:func:`keeps_stored_results`).
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable

import pandas as pd
import yaml

from metaopt.core.errors import UsageError
from metaopt.store.store import StudyStore, read_gamma_star
from metaopt.core.store_utils import atomic_write_text, check_writable, output_lock
from metaopt.store.study_spec import InstanceSelection, Study, StudySpec, companion_studies


class StudyContext:
    """A study resolved against its benchmark: instances, budgets, references; checked before any work."""

    def __init__(self, study: Study, yahpo_data: str | None) -> None:
        from metaopt.core.benchmarks import get_benchmark
        from metaopt.core.budget import Budget
        from metaopt.spaces.restrictions import get_restriction

        spec = study.spec
        self.study = study
        self.store = StudyStore(study.output)
        self.yahpo_data = yahpo_data
        self.bench = get_benchmark(spec.benchmark, yahpo_data)
        self.budget = Budget.parse(spec.budget, self.bench.d)  # per hyperparameter for a pooled benchmark
        if self.bench.d is None and (spec.evaluation is not None or spec.ablation):
            raise self._error("evaluation" if spec.evaluation is not None else "ablation",
                              f"{self.bench.name} pools scenarios with different search spaces: a study of it only "
                              "meta-optimizes; evaluate its gamma* per scenario, in a study of that scenario with "
                              "evaluation.gamma_star_from (as studies/rq12_*.yaml do)")
        ev = spec.evaluation
        self.eval_instances = self.select_instances(ev.instances, "evaluation.instances") if ev else []
        self.report_budgets = [Budget.parse(b, self.bench.d) for b in (ev.report_budgets if ev else [])]
        if not self.report_budgets or self.report_budgets[-1].amount != self.budget.amount:
            self.report_budgets.append(self.budget)
        for rb in self.report_budgets:
            if rb.unit != self.budget.unit or rb.amount > self.budget.amount:
                raise UsageError(f"{study.path}: field 'evaluation.report_budgets': {rb.spec} must be in the "
                                 f"budget's unit and at most {spec.budget}")
        if spec.meta is not None and self.budget.unit == "typical_cost":
            raise UsageError(f"{study.path}: field 'budget': typical-cost budgets ({spec.budget}) are for evaluation "
                             "studies; a meta-optimization needs 'Nd', 'N' or 'Ns'")
        self.meta_instances: list[str] = []
        self.selection_instances: list[str] = []
        """``meta.select_instances``: where γ*'s selection runs its candidates (empty: the meta instances)."""
        self.arms: dict[str | None, StudyStore] = {}
        """Meta-optimizations to run: restriction (None: the full space) -> the store holding its meta/."""
        if spec.meta is not None:
            self.meta_instances = self.select_instances(spec.meta.instances, "meta.instances")
            if spec.meta.select_instances is not None:
                self.selection_instances = self.select_instances(spec.meta.select_instances, "meta.select_instances")
                test = set(self.bench.instances_of("test"))
                held_out = [i for i in self.selection_instances if i in test]
                if held_out:
                    raise self._error("meta.select_instances", f"{', '.join(held_out[:5])} are test instances of "
                                      f"{self.bench.name}: they stay held out; the selection runs on training instances")
            restriction = spec.meta.restriction
            if isinstance(restriction, list):
                if not restriction or len(set(restriction)) != len(restriction):
                    raise UsageError(f"{study.path}: field 'meta.restriction': a list must name distinct restrictions")
            self.arms = self.store.meta_stores(restriction)
            for name in self.arms:
                if name is not None:
                    try:
                        get_restriction(name)
                    except UsageError as err:
                        raise self._error("meta.restriction", str(err)) from None
        self.initial_configs: dict[str, dict] = {}
        """γ files the study names for SMAC's initial design, by file name (validated here)."""
        if spec.meta is not None:
            from metaopt.spaces.resolve import read_config_file

            for k, path in enumerate(spec.meta.initial_configs):
                config = read_config_file(path, f"{study.path}: field 'meta.initial_configs[{k}]'")
                self.initial_configs[str(path)] = config
            self.initial_configs.update(self._warm_start_designs())
            self._check_meta_clock()
        self._check_evaluation()
        companion_studies(spec, study.path, study.output)  # refuses a bad report_with list before any work
        self._check_ablations()
        self._check_output()
        self._warn_train_test_overlap()

    def _warm_start_designs(self) -> dict[str, dict]:
        """Called by ``__init__``: the designs of ``meta.warm_start`` by name (``<archive>#<rank>``),
        each validated; a missing or damaged archive is one error line naming the field."""
        from metaopt.store.meta_archive import best_designs, read_meta_runs
        from metaopt.spaces.design_space import validate

        meta = self.study.spec.meta
        assert meta is not None  # called only for a study with a meta section
        designs: dict[str, dict] = {}
        for k, entry in enumerate(meta.warm_start):
            field = f"meta.warm_start[{k}].archive"
            try:
                best = best_designs(read_meta_runs(Path(entry.archive)), entry.top)
                for rank, (_, gamma, _) in enumerate(best, 1):
                    designs[f"{entry.archive}#{rank}"] = validate(gamma)
            except UsageError as err:
                raise self._error(field, str(err)) from None
            if not best:
                raise self._error(field, f"{entry.archive} holds no run at the full inner budget")
        return designs

    def _check_meta_clock(self) -> None:
        """Called by ``__init__`` for a study with a ``meta`` section: ``meta.clock``'s time limit can be
        resolved on the benchmark, each compact meta-archive (``meta.archive``; one per arm of a list of
        restrictions) holds runs made with the same clock settings (or off the clock, as the study) and
        no other arm's search, and the held-out evaluation of a γ* searched on the clock runs on the
        clock with the same number of workers."""
        from metaopt.store.meta_archive import check_archived_arm, check_archived_clock

        meta = self.study.spec.meta
        assert meta is not None  # called only for a study with a meta section
        clock = meta.clock
        if clock is not None:
            try:
                clock.limit(self.bench.d)
            except UsageError as err:
                raise self._error("meta.clock.time_limit", f"{err} (give it in simulated seconds or 'Nc')") from None
            ev = self.study.spec.evaluation
            if ev is not None and (ev.clock is None or clock.workers not in ev.clock.workers):
                raise self._error("evaluation.clock", f"gamma* is searched for {clock.workers} simulated workers "
                                                      f"(meta.clock): evaluate on the clock with them too, e.g. "
                                                      f"clock: {{workers: [{clock.workers}], time_limit: "
                                                      f"{clock.time_limit}}}")
        for restriction, archive in meta.archive_files().items():
            try:
                check_archived_clock(archive, clock.settings() if clock is not None else None)
            except UsageError as err:
                raise self._error("meta.clock", str(err)) from None
            try:
                check_archived_arm(archive, restriction)
            except UsageError as err:
                raise self._error("meta.archive", str(err)) from None

    def meta_time_limits(self) -> dict[str, float] | None:
        """``meta.clock``'s time limit in simulated seconds per training instance (a typical-cost limit
        such as ``10dc`` resolved on each, :func:`metaopt.core.references.resolve_budget`); None off
        the clock. Called by the optimize stage."""
        from metaopt.core.references import resolve_time_limit

        meta = self.study.spec.meta
        if meta is None or meta.clock is None:
            return None
        limit = meta.clock.limit(self.bench.d)
        assert limit is not None  # meta.clock's time limit is required
        return {i: resolve_time_limit(limit, self.bench.problem(i)) for i in self.search_and_selection_instances}

    @property
    def search_and_selection_instances(self) -> list[str]:
        """The instances the optimize stage runs on: the search's, then the selection's others."""
        searched = set(self.meta_instances)
        return self.meta_instances + [i for i in self.selection_instances if i not in searched]

    def _error(self, field: str, message: str) -> UsageError:
        """A UsageError naming the study file and ``field``."""
        return UsageError(f"{self.study.path}: field '{field}': {message}")

    @property
    def gamma_star_names(self) -> list[str]:
        """The names under which :meth:`gamma_stars` will hold γ*'s once the optimize stage is done:
        ``gamma_star:<restriction>`` per restriction of a list, else ``gamma_star`` for a meta
        section or a ``gamma_star_from`` file; none otherwise."""
        if len(self.arms) > 1 or (self.arms and next(iter(self.arms.values())) != self.store):
            return [f"gamma_star:{name}" for name in self.arms]
        return ["gamma_star"] if self.arms or self.gamma_star_from else []

    def _check_evaluation(self) -> None:
        """Called by ``__init__``: optimizers and variants, ``gamma_star_from``, ``cost_reference``."""
        from metaopt.stages.evaluation import check_clock_peers, check_optimizers, optimizer_name
        from metaopt.spaces.design_space import validate

        ev = self.study.spec.evaluation
        if ev is None:
            return
        try:
            check_optimizers(ev.optimizers, self.bench, self.gamma_star_names, field="evaluation.optimizers")
            if ev.clock is not None:
                check_clock_peers(ev.optimizers, field="evaluation.optimizers")
        except UsageError as err:
            raise UsageError(f"{self.study.path}: {err}") from None
        if ev.clock is not None and ev.cost_reference is not None:
            raise self._error("evaluation.cost_reference", "not with evaluation.clock (the runs of each worker "
                                                           "count are compared on the clock's curves instead)")
        if ev.gamma_star_from is not None:
            field = "evaluation.gamma_star_from"
            data = read_gamma_star(Path(ev.gamma_star_from), f"{self.study.path}: field '{field}'")
            try:
                validate(data["config"])
            except UsageError as err:
                raise self._error(field, f"{ev.gamma_star_from}: {err}") from None
        names = [optimizer_name(o) for o in ev.optimizers]
        if ev.cost_reference is not None and ev.cost_reference not in names:
            raise self._error("evaluation.cost_reference", f"{ev.cost_reference!r} is not one of the evaluated "
                                                           f"optimizers ({', '.join(names)})")

    def _check_ablations(self) -> None:
        """Called by ``__init__``: every ablation entry's endpoints, estimator and instances."""
        from metaopt.stages.ablation import resolve_endpoint

        pending = dict.fromkeys(self.gamma_star_names)
        for k, entry in enumerate(self.study.spec.ablation):
            field = f"ablation[{k}]"
            for text, end in ((entry.source, "from"), (entry.to, "to")):
                resolve_endpoint(text, f"{self.study.path}: field '{field}.{end}'", self.bench.fidelity, pending,
                                 pending=True, gamma_star_hint="" if pending else "add a meta section")
            if entry.estimator == "surrogate" and self.study.spec.meta is None:
                raise self._error(f"{field}.estimator", "surrogate predicts from the meta-archive: it needs a "
                                                        "meta section (or use estimator: evaluated)")
            self.select_instances(entry.instances, f"{field}.instances")

    def _check_output(self) -> None:
        """Called by ``__init__``: the output folder can be created (and is not a file)."""
        check_writable(self.study.output, f"{self.study.path}: field 'output'", folder=True)

    def _warn_train_test_overlap(self) -> None:
        """Called by ``__init__``: one warning line (stderr) if instances are both meta-trained and evaluated."""
        both = [i for i in self.eval_instances if i in set(self.meta_instances)]
        if both:
            print(f"metaopt: warning: {self.study.path}: {len(both)} instance(s) ({', '.join(both[:10])}"
                  f"{' ...' if len(both) > 10 else ''}) are in both meta.instances (training) and "
                  "evaluation.instances (test): their results are not held-out", file=sys.stderr)

    def select_instances(self, selection: InstanceSelection | list[str], field: str) -> list[str]:
        """The instances a stage runs on; UsageError naming ``field`` for unknown, repeated or no instances."""
        if isinstance(selection, list):
            try:
                instances = self.bench.named_instances(selection)
            except UsageError as err:
                raise self._error(field, str(err)) from None
        else:
            instances = self.bench.instances_of(selection.split)[: selection.limit]
        if not instances:
            raise UsageError(f"{self.study.path}: field '{field}' selects no instance of {self.bench.name}")
        return instances

    def references(self, instances: list[str], quiet: bool) -> dict[str, Any]:
        from tqdm import tqdm

        from metaopt.core.references import get_reference

        bar = tqdm(instances, desc="regret references", disable=True if quiet else None)
        return {i: get_reference(self.bench, i) for i in bar}

    @property
    def gamma_star_from(self) -> str | None:
        """The study's ``evaluation.gamma_star_from`` (another study's γ* file), None without one."""
        ev = self.study.spec.evaluation
        return ev.gamma_star_from if ev else None

    @property
    def gamma_star_path(self) -> Path:
        return Path(self.gamma_star_from) if self.gamma_star_from else self.store.gamma_star_json

    def gamma_stars(self) -> dict[str, dict[str, Any] | None]:
        """Called by the evaluate and ablate stages: γ* of every meta-optimization by optimizer name
        (``gamma_star`` or ``gamma_star:<restriction>``, as :attr:`gamma_star_names`), None for one
        that has not finished; the map :func:`metaopt.spaces.resolve.resolve_optimizer` resolves γ*'s in.

        A study with one restriction (or a ``gamma_star_from`` file) has ``gamma_star``; one with a
        list of restrictions has a ``gamma_star:<restriction>`` per restriction.
        """
        from metaopt.spaces.design_space import validate

        if len(self.arms) > 1 or (self.arms and next(iter(self.arms.values())) != self.store):
            paths = {f"gamma_star:{name}": arm.gamma_star_json for name, arm in self.arms.items()}
        else:
            paths = {"gamma_star": self.gamma_star_path}
            if self.gamma_star_from and not paths["gamma_star"].exists():
                raise UsageError(f"{self.study.path}: field 'evaluation.gamma_star_from': no such file "
                                 f"{paths['gamma_star']}")
        return {name: validate(read_gamma_star(path)["config"]) if path.exists() else None
                for name, path in paths.items()}


FREE_FIELDS = ("description", "question", "answer", "workers", "ablation", "importance", "output", "report_with")
"""Study fields that do not change stored optimize/evaluate results: editing them keeps the output
folder valid (ablation folders guard their own identity; importance is recomputed when its archive changed,
the report always; ``report_with`` only adds other studies' runs to the report)."""


FREE_META_FIELDS = ("archive", "baselines", "noise_seeds")
"""Fields of the ``meta`` section that keep stored results valid: a compact meta-archive only supplies
runs the search would compute, and the baselines and noise re-runs add runs beside the search's."""


def _results_fields(text: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """Called by :func:`keeps_stored_results`: the fields of the study file ``text`` that stored results
    depend on (all but :data:`FREE_FIELDS` and :data:`FREE_META_FIELDS`), without ``evaluation.optimizers``,
    and those optimizers by name (a variant by its ``name``; none without an evaluation)."""
    fields = {k: v for k, v in (yaml.safe_load(text) or {}).items() if k not in FREE_FIELDS}
    if isinstance(fields.get("meta"), dict):
        fields["meta"] = {k: v for k, v in fields["meta"].items() if k not in FREE_META_FIELDS}
    optimizers: dict[str, Any] = {}
    evaluation = fields.get("evaluation")
    if isinstance(evaluation, dict) and isinstance(evaluation.get("optimizers"), list):
        fields["evaluation"] = {k: v for k, v in evaluation.items() if k != "optimizers"}
        optimizers = {str(o.get("name") if isinstance(o, dict) else o): o for o in evaluation["optimizers"]}
    return fields, optimizers


def keeps_stored_results(stored: str, new: str) -> bool:
    """Whether the study file text ``new`` may run into an output folder that holds the results of the
    study file text ``stored`` (its ``study.yaml``); called by :func:`_claim_output` before any work.

    The fields that stored results depend on must be equal (not :data:`FREE_FIELDS` nor
    :data:`FREE_META_FIELDS`), except that ``evaluation.optimizers`` may gain optimizers, in any order:
    every stored one must still be there with the same definition (the same name, or the same
    variant). Evaluation runs are stored per optimizer, instance and seed
    (``eval/runs/<optimizer>/<instance>/seed-<k>/``) and the references per instance, so adding an
    optimizer leaves every stored run and γ* as they were (the tables are written anew from the
    runs); removing or redefining one would leave runs that are not the study's.
    """
    stored_fields, stored_optimizers = _results_fields(stored)
    new_fields, new_optimizers = _results_fields(new)
    return stored_fields == new_fields and all(
        name in new_optimizers and new_optimizers[name] == definition for name, definition in stored_optimizers.items())


def _claim_output(study: Study) -> None:
    """Create the output folder for this study, or refuse if it holds another study's results.

    Only fields that change stored results count (:func:`keeps_stored_results`): e.g. adding an
    ablation or an evaluated optimizer, or editing the description, is fine (the stored copy is updated).
    """
    marker = StudyStore(study.output).study_file
    if marker.exists():
        stored = marker.read_text()
        if not keeps_stored_results(stored, study.source):
            raise UsageError(
                f"{study.output} holds results of a different study file ({marker}); "
                "use another output folder or remove that one"
            )
        if stored == study.source:
            return
    atomic_write_text(marker, study.source)


def search_inputs(ctx: StudyContext, restriction: str | None, references: dict[str, Any],
                  time_limits: dict[str, float] | None) -> tuple[Any, Any, dict[str, list[float]]]:
    """What one arm of the study's search (``restriction``, None: the whole space) is built from: the
    inner runs' :class:`metaopt.stages.meta.MetaSetup`, the design space and the training instances'
    features for SMAC (reference range, then the benchmark's own). ``references`` and ``time_limits``
    are the training instances' (:meth:`StudyContext.references`, :meth:`StudyContext.meta_time_limits`).
    Called by :func:`run_optimize` for each arm (and by the benchmark harness, which replays a search)."""
    from metaopt.stages.meta import MetaSetup
    from metaopt.spaces.design_space import design_space
    from metaopt.spaces.restrictions import get_restriction

    meta = ctx.study.spec.meta
    assert meta is not None  # only studies with a search have arms
    setup = MetaSetup(ctx.bench.name, ctx.yahpo_data, replace(ctx.budget, max_evals=meta.max_evals), references,
                      restriction, meta.objective, tuple(meta.objective_budgets),
                      meta.clock.workers if meta.clock else None, time_limits,
                      meta.objective_transform, meta.objective_scale)
    space = get_restriction(restriction).space() if restriction else design_space()
    features = {i: [references[i].y_min, references[i].y_max] + ctx.bench.instance_features(i)
                for i in ctx.meta_instances}
    return setup, space, features


def run_optimize(ctx: StudyContext, executor, quiet: bool = False,
                 deadline: float | None = None) -> dict[str | None, dict[str, Any]]:
    """The optimize stage: the search over the training instances, once per restriction; returns the γ*'s.

    ``deadline`` (``time.monotonic()``): a slice of a long search (``--stop-after``); past it no new
    batch starts and :class:`metaopt.stages.meta.SliceEnded` is raised once the runs under way are stored."""
    from metaopt.stages.meta import known_designs, optimize

    meta = ctx.study.spec.meta
    if meta is None:
        raise UsageError(f"{ctx.study.path} has no 'meta' section: nothing to optimize (evaluation only)")
    assert isinstance(meta.seeds, list)  # the schema turns a count into its list
    references = ctx.references(ctx.search_and_selection_instances, quiet)
    time_limits = ctx.meta_time_limits()
    if meta.clock is not None and time_limits:
        print(f"optimize: every inner run on the simulated clock with {meta.clock.workers} workers, the objective "
              f"read at the time limit {meta.clock.time_limit} ({min(time_limits.values()):.6g} to "
              f"{max(time_limits.values()):.6g} simulated seconds per instance)")
    archives = meta.archive_files()
    stars = {}
    for restriction, arm in ctx.arms.items():
        setup, space, features = search_inputs(ctx, restriction, references, time_limits)
        search = ("random search" if meta.optimizer == "random" else "SMAC (algorithm configuration)"
                  if meta.fidelity is None else f"SMAC ({meta.fidelity.text()})")
        print(f"optimize: {search} over {len(ctx.meta_instances)} training instances of "
              f"{ctx.bench.name}, {meta.trials} trials x {len(meta.seeds)} meta-seeds in batches of {meta.batch_size}, "
              f"design space "
              f"{restriction or 'full'} ({len(space)} parameters), objective {meta.objective_text()}")
        initial = known_designs(setup, space, ctx.initial_configs, presets=meta.initial_presets,
                                found_by=ctx.study.spec.name)
        if initial:
            print(f"optimize: {len(initial)} known designs for SMAC's initial design (as many as its trials leave "
                  f"room for, in this order): {', '.join(initial)}")
        outside = [path for path in ctx.initial_configs if path not in initial]
        if outside:
            print(f"optimize: not in the initial design (not points of the {restriction or 'full'} design space, or "
                  f"the same as a design listed before them): {', '.join(outside)}")
        star = optimize(arm, setup, space, ctx.meta_instances, features, meta.trials, meta.seeds, executor, quiet,
                        batch_size=meta.batch_size, initial=initial, select_top=meta.select_top,
                        select_seeds=meta.select_seeds, select_min_instance_fraction=meta.select_min_instance_fraction,
                        select_instances=ctx.selection_instances or None, optimizer=meta.optimizer, baselines=tuple(meta.baselines), noise_seeds=meta.noise_seeds,
                        archive_file=archives.get(restriction), deadline=deadline,
                        fidelity=meta.fidelity, inner_seeds=meta.inner_seeds,
                        clock=meta.clock.settings() if meta.clock else None)
        print(f"gamma* ({restriction or 'full space'}): mean objective {star['mean_objective']:.4f} on "
              f"{star['n_instances']} training instances ({star['n_configurations']} configurations, "
              f"{star['n_trials']} trials)")
        print(json.dumps(star["config"], indent=1))
        stars[restriction] = star
    return stars


def run_evaluate(ctx: StudyContext, executor, quiet: bool = False):
    """The evaluation stage: every optimizer on the held-out instances × seeds."""
    from metaopt.stages.evaluation import evaluate, on_clock, resolve_optimizers

    ev = ctx.study.spec.evaluation
    assert ev is not None and isinstance(ev.seeds, list)  # run only with an evaluation section; seeds validated
    entries = resolve_optimizers(ev.optimizers, ctx.bench, ctx.gamma_stars(), field="evaluation.optimizers")
    if ev.clock is not None:
        entries = on_clock(entries, ev.clock.workers, ev.clock.limit(ctx.bench.d))
    references = ctx.references(ctx.eval_instances, quiet)
    table = evaluate(ctx.store, ctx.bench, entries, ctx.eval_instances, ev.seeds, ctx.budget, references,
                     executor, ctx.report_budgets, ctx.yahpo_data, quiet, caption_prefix=f"study {ctx.study.spec.name}, ",
                     cost_reference=ev.cost_reference)
    with pd.option_context("display.width", 200):
        print(table.to_string(index=False))
    return table


def run_ablations(ctx: StudyContext, executor, quiet: bool = False) -> None:
    """The ablate stage: every ``ablation`` entry of the study (``metaopt ablate``), under <output>/ablation/."""
    from metaopt.stages.ablation import AblationSpec, Endpoint, resolve_endpoint, run_ablation
    from metaopt.spaces.resolve import is_gamma_star

    stars = ctx.gamma_stars()

    def endpoint(text: str, field: str) -> Endpoint:
        return resolve_endpoint(text, f"{ctx.study.path}: field '{field}'", ctx.bench.fidelity, stars,
                                gamma_star_hint="run `metaopt optimize STUDY` first")

    for k, entry in enumerate(ctx.study.spec.ablation):
        field = f"ablation[{k}]"
        arm = entry.to if is_gamma_star(entry.to) else entry.source
        assert isinstance(entry.seeds, list)  # the schema turns a count into its list
        archive = None
        if entry.estimator == "surrogate":
            restriction = arm.split(":", 1)[1] if ":" in arm else next(iter(ctx.arms), None)
            archive = ctx.arms.get(restriction, ctx.store).archive_csv
        spec = AblationSpec(ctx.bench.name, endpoint(entry.source, f"{field}.from"), endpoint(entry.to, f"{field}.to"),
                            entry.estimator, tuple(entry.variants),
                            tuple(ctx.select_instances(entry.instances, f"{field}.instances")),
                            tuple(entry.seeds), ctx.budget, entry.race, archive, ctx.yahpo_data)
        print(f"ablate: {spec.source.name} -> {spec.target.name} ({entry.estimator}; {', '.join(entry.variants)})")
        run_ablation(spec, ctx.study.output, executor, quiet)


def run_importance(ctx: StudyContext) -> None:
    """The importance stage: fANOVA and local importance on each meta-archive (``metaopt importance``)."""
    from metaopt.analysis.importance import importance_of_meta

    for restriction, arm in ctx.arms.items():
        if not arm.gamma_star_json.exists():
            print(f"importance: skipped for {restriction or 'the full space'} (no finished meta-optimization)")
            continue
        assert ctx.study.spec.meta is not None  # arms exist only with a meta section
        result, written, reused = importance_of_meta(arm.root, restriction, ctx.study.spec.meta.objective)
        kept = " (unchanged meta-archive: stored result kept)" if reused else ""
        print(f"importance: {written}/{kept} (fANOVA main effects: "
              + ", ".join(f"{r.parameter} {r.importance:.2f}" for r in result.fanova.head(3).itertuples()) + ")")


def run_report(ctx: StudyContext) -> None:
    """The report stage: the study's HTML and Markdown report (``metaopt report``)."""
    from metaopt.analysis.report import write_report

    print(f"report: {write_report(ctx.study.output)}")


def _optimize_stage(ctx: StudyContext, executor: Any, quiet: bool, deadline: float | None) -> bool:
    """:func:`run_optimize`; True (skip the stages after it) when the search stopped at its deadline."""
    from metaopt.stages.meta import SliceEnded

    try:
        run_optimize(ctx, executor, quiet, deadline)
    except SliceEnded as ended:
        print(f"optimize: stopped at the --stop-after limit ({ended}); every finished run is stored. "
              f"Run the same command again to continue the search (`metaopt study export-meta "
              f"{ctx.study.output}` keeps its runs for another machine); the stages after it are skipped")
        return True
    return False


def _evaluate_stage(ctx: StudyContext, executor: Any, quiet: bool, deadline: float | None) -> bool:
    run_evaluate(ctx, executor, quiet)
    return False


def _ablate_stage(ctx: StudyContext, executor: Any, quiet: bool, deadline: float | None) -> bool:
    run_ablations(ctx, executor, quiet)
    return False


def _importance_stage(ctx: StudyContext, executor: Any, quiet: bool, deadline: float | None) -> bool:
    run_importance(ctx)
    return False


def _report_stage(ctx: StudyContext, executor: Any, quiet: bool, deadline: float | None) -> bool:
    run_report(ctx)
    return False


@dataclass(frozen=True)
class Stage:
    """One stage of a study: when it has no work, and how it runs."""

    skip: Callable[[StudySpec], str | None]
    """Why the study gives this stage no work (printed as ``<stage>: skipped (<why>)``), else None."""
    run: Callable[[StudyContext, Any, bool, float | None], bool]
    """Called with (context, executor, quiet, deadline) while the output folder is locked; returns
    True when the stages after it must be skipped (a search stopped at its deadline)."""


def _no_meta(spec: StudySpec) -> str | None:
    return "the study has no 'meta' section" if spec.meta is None else None


def _no_importance(spec: StudySpec) -> str | None:
    return _no_meta(spec) or ("the study sets 'importance: false'" if not spec.importance else None)


STAGES: dict[str, Stage] = {
    "optimize": Stage(_no_meta, _optimize_stage),
    "evaluate": Stage(lambda spec: "the study has no 'evaluation' section" if spec.evaluation is None else None,
                      _evaluate_stage),
    "ablate": Stage(lambda spec: "the study has no 'ablation' entries" if not spec.ablation else None, _ablate_stage),
    "importance": Stage(_no_importance, _importance_stage),
    "report": Stage(lambda spec: None, _report_stage),
}
"""The stages of a study, in the order ``metaopt study run`` runs them: the one list of them."""


def run_stages(study: Study, stages: list[str], yahpo_data: str | None = None, quiet: bool = False,
               workers: int | None = None, scheduler: str | None = None, stop_after: float | None = None) -> None:
    """Run the given stages of a study in order, with one executor for all of them.

    ``stop_after`` (seconds): the optimize stage starts no new batch after that long; the runs under
    way are stored, the stages after it are skipped, and the next invocation continues the search
    (a search longer than a session, in slices: ``metaopt study export-meta`` keeps its runs).

    Stages without work are skipped with a line saying so: optimize and importance without a
    ``meta`` section, evaluate without an ``evaluation`` section, ablate without ``ablation`` entries, importance with ``importance: false``. The output folder is locked for the
    whole run: a second process on it is refused at once (:func:`metaopt.core.store_utils.output_lock`).
    """
    from metaopt.core.executor import check_executor

    ctx = StudyContext(study, yahpo_data)  # validates everything before anything is written
    check_executor(workers or study.spec.workers, scheduler,
                   "--workers" if workers else f"{study.path}: field 'workers'")
    with output_lock(study.output):  # one process per output folder; released when this one ends
        deadline = None if stop_after is None else time.monotonic() + stop_after
        _run_stages_locked(ctx, stages, quiet, workers, scheduler, deadline)


def _run_stages_locked(ctx: StudyContext, stages: list[str], quiet: bool, workers: int | None,
                       scheduler: str | None, deadline: float | None = None) -> None:
    """The body of :func:`run_stages`, called while it holds the output folder's lock."""
    from metaopt.core.executor import make_executor

    study = ctx.study
    timings = {}
    with make_executor(workers or study.spec.workers, scheduler) as executor:
        _claim_output(study)  # once the executor runs: a scheduler that cannot be reached leaves no study.yaml
        for stage in stages:
            started = time.perf_counter()
            reason = STAGES[stage].skip(study.spec)
            if reason is not None:
                print(f"{stage}: skipped ({reason})")
                continue
            if STAGES[stage].run(ctx, executor, quiet, deadline):
                return
            timings[stage] = time.perf_counter() - started
    summary = ", ".join(f"{stage} {seconds:.1f} s" for stage, seconds in timings.items())
    print(f"\nstudy {study.spec.name}: done ({summary}); results in {study.output}/")
    path = ctx.store.timings_file
    previous = json.loads(path.read_text()) if path.exists() else {}
    atomic_write_text(path, json.dumps({**previous, **timings}, indent=1))
