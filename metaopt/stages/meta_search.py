"""The searches of the optimize stage: what one meta-trial is, and who proposes the trials.

A *meta-trial* is one inner run: a design γ on one training instance with one seed, scored by the
meta-objective computed from the run's trace (:func:`meta_objective`, :func:`run_trial`). Its store
record (``meta/runs/<γ hash>/<instance>/seed-<k>.json``, :func:`store_record`) is also the cache that
makes every search resumable.

A *search* proposes trials one batch at a time and is told each batch's results in the order it
proposed them, so that its trials depend on neither workers nor timing (:func:`run_side_by_side`
runs several searches together on one executor). Four kinds:

- :class:`SmacSearch`: SMAC's algorithm-configuration facade (the study's search, ``meta.optimizer:
  smac``), started from the known designs;
- :class:`MultiFidelitySmacSearch`: SMAC's multi-fidelity facade over the inner budget (the study's
  search with ``meta.fidelity``: Hyperband or successive halving), the known designs first;
- :class:`RandomSearch`: random configurations of the same space, each run on every training
  instance in turn (``meta.optimizer: random``, and the meta-level baseline ``random``);
- :class:`ListSearch`: a fixed list of designs, each on every training instance (the baseline
  ``seeds``: the known designs alone).
"""

from __future__ import annotations

import copy
import json
import time
import warnings
from collections import ChainMap
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping, MutableMapping, cast

import numpy as np
import pandas as pd
from tqdm import tqdm

from metaopt.core.budget import Budget
from metaopt.core.executor import Executor
from metaopt.store.meta_archive import (CRASH_OBJECTIVE, OBJECTIVE_TRANSFORM, Key, record_key,
                                       run_name, trials_log_line)
from metaopt.core.references import Reference
from metaopt.store.run_io import jsonable
from metaopt.core.smac_utils import (bound_forest_leaves, fast_asks, known_designs_first, quiet_smac_logging,
                                     reproducible_model_and_maximizer)
from metaopt.store.store import StudyStore
from metaopt.store.study_spec import objective_tag
from metaopt.core.store_utils import atomic_write_text
from metaopt.engine.tasks import RunSpec, execute

Proposal = tuple[Any, dict[str, Any], str, int, float]
"""A proposed trial: (the search's own info, γ, instance, seed, fraction of the inner budget)."""


def transformed(values: np.ndarray, transform: str, scale: float) -> np.ndarray:
    """Normalized regrets as the meta-objective counts them (``meta.objective_transform``):

    - ``none``: as they are (the mean over instances is the mean regret the evaluation reports);
    - ``asinh``: asinh(r / ``scale``), linear for |r| well below the scale and logarithmic above it,
      keeping the sign (regret below the reference's best loss stays below 0). A run that is off by
      0.3 on one heavy-tailed instance then weighs about 4.6 times, not 30 times, one off by 0.01
      (scale 0.01), so the mean over instances ranks designs by how consistently they are good
      rather than by their luck on the few instances whose regret swings most between seeds, and
      the race's comparisons ask what the evaluation's paired, rank-based test asks.
    """
    if transform == "none":
        return values
    if transform == "asinh":
        return np.arcsinh(values / scale)
    raise ValueError(f"objective_transform: {transform!r} is not one of none, asinh")


def mean_of_reads(values: np.ndarray, transform: str, scale: float) -> float:
    """The meta-objective of the regrets one inner run's trace was read at (by :func:`meta_objective`
    or :func:`clock_objective`): regret 1 where nothing was in yet, each read :func:`transformed`, then the mean."""
    values = np.where(np.isnan(values), 1.0, values)
    return float(np.mean(transformed(values, transform, scale)))


def meta_objective(kind: str, trace: pd.DataFrame, budget: Budget, fractions: list[float],
                   transform: str = "none", scale: float = 0.01) -> float:
    """The meta-objective of one inner run from its trace.

    - ``regret``: normalized regret at the inner budget (the default);
    - ``regret_at``: mean normalized regret at the given fractions of the budget;
    - ``auc``: mean normalized regret over 50 log-spaced budgets from the first evaluation to B
      (the area under the anytime curve on a log budget axis).

    Each regret read is :func:`transformed` (``transform``, ``scale``) before the mean.
    """
    from metaopt.analysis.anytime import budget_grid, regret_at

    if len(trace) == 0:
        return CRASH_OBJECTIVE
    spent = trace[budget.spent_column].to_numpy()
    regret = trace["normalized_regret"].to_numpy()
    if kind == "regret":
        values = regret[-1:]
    elif kind == "regret_at":
        values = regret_at(spent, regret, np.asarray(fractions) * budget.amount)
    else:
        values = regret_at(spent, regret, budget_grid(spent[0], budget.amount, 50))
    return mean_of_reads(values, transform, scale)


def clock_objective(kind: str, trace: pd.DataFrame, reference: Reference, time_limit: float,
                    fractions: list[float], transform: str = "none", scale: float = 0.01) -> float:
    """The meta-objective of one inner run on the simulated clock (``meta.clock``): :func:`meta_objective`
    with simulated time in place of the budget, read as the evaluation's clock curves read a run
    (:func:`metaopt.analysis.clock_curves.regret_by_time`: the regret of the best result in by each time).

    - ``regret``: at the time limit ``time_limit`` (simulated seconds);
    - ``regret_at``: mean at the given fractions of it;
    - ``auc``: mean over 50 log-spaced times from the first result to the time limit.

    Each regret read is :func:`transformed` (``transform``, ``scale``) before the mean.
    """
    from metaopt.analysis.anytime import budget_grid
    from metaopt.analysis.clock_curves import regret_by_time

    if len(trace) == 0:
        return CRASH_OBJECTIVE
    if kind == "regret":
        times = np.array([time_limit])
    elif kind == "regret_at":
        times = np.asarray(fractions) * time_limit
    else:
        times = budget_grid(float(trace["sim_time"].min()), time_limit, 50)
    values = regret_by_time(trace, reference, times)
    return mean_of_reads(values, transform, scale)


@dataclass(frozen=True)
class MetaSetup:
    """Everything an inner trial needs, shipped to the executor's workers."""

    benchmark: str
    yahpo_data: str | None
    budget: Budget
    references: dict[str, Reference]
    restriction: str | None
    objective: str
    objective_fractions: tuple[float, ...]
    workers: int | None = None
    """``meta.clock``: the simulated workers every inner run has (None: runs off the clock)."""
    time_limits: dict[str, float] | None = None
    """``meta.clock``: the simulated time limit of each training instance's runs, in seconds (its
    ``time_limit`` resolved per instance), at which the meta-objective reads the regret."""
    objective_transform: str = "none"
    """``meta.objective_transform``: how each regret read counts (:func:`transformed`)."""
    objective_scale: float = 0.01
    """``meta.objective_scale``: the scale of the ``asinh`` transform."""

    @property
    def objective_tag(self) -> str | None:
        """What each run record stores of the transform (:func:`~metaopt.store.study_spec.objective_tag`)."""
        return objective_tag(self.objective_transform, self.objective_scale)


def complete_gamma(setup: MetaSetup, config: dict[str, Any]) -> dict[str, Any]:
    """The full design-space configuration γ of a configuration of the searched space (completed by
    the restriction, if any)."""
    from metaopt.spaces.design_space import validate
    from metaopt.spaces.restrictions import get_restriction

    return get_restriction(setup.restriction).complete(config) if setup.restriction else validate(config)


def run_trial(setup: MetaSetup, gamma: dict[str, Any], instance: str, seed: int,
              fraction: float = 1.0) -> dict[str, Any]:
    """One inner run (called on a worker) at ``fraction`` of the study's inner budget: its store
    record, status ``ok`` with objective and summary, or ``failed`` with ``CRASH_OBJECTIVE`` and the
    traceback. A run below the full budget (a multi-fidelity search's cheap trial) is stored under
    :func:`run_name` and records its ``inner_budget``; its objective is the meta-objective of that
    shorter run (the same fractions of its own budget).

    On the clock (``setup.workers``) the inner budget is the simulated time limit: a run at
    ``fraction`` stops at that fraction of the instance's time limit, with the study's budget (a
    run stopped at a shorter simulated time is a prefix of the longer run), and its objective is
    :func:`clock_objective` at the fractions of that shorter time."""
    on_clock = setup.workers is not None
    budget = setup.budget if fraction == 1.0 or on_clock else setup.budget.scaled(fraction)
    time_limit = setup.time_limits[instance] * fraction if setup.time_limits is not None else None
    outcome = execute(RunSpec("gamma", setup.benchmark, instance, seed, budget, setup.references[instance],
                              config=gamma, yahpo_data=setup.yahpo_data, workers=setup.workers,
                              time_limit=time_limit))
    record: dict[str, Any] = {"gamma": gamma, "hash": run_name(gamma, fraction), "instance": instance, "seed": seed}
    if fraction != 1.0:
        record["inner_budget"] = fraction
    if outcome.ok:
        assert outcome.result is not None  # ok means the run returned a result
        summary = {k: v for k, v in outcome.result.summary.items() if k not in ("config", "reference")}
        # the budget the run had (setup.budget resolved for its instance: per hyperparameter on a pooled benchmark)
        budget = Budget(summary["budget"], summary["budget_unit"], summary["budget_spec"])
        fractions = list(setup.objective_fractions)
        how = (setup.objective_transform, setup.objective_scale)
        objective = (clock_objective(setup.objective, outcome.result.trace, setup.references[instance], time_limit,
                                     fractions, *how) if time_limit is not None
                     else meta_objective(setup.objective, outcome.result.trace, budget, fractions, *how))
        record.update(status="ok", summary=summary, objective=objective)
        if setup.objective_tag is not None:  # plain regret's records stay as they always were
            record[OBJECTIVE_TRANSFORM] = setup.objective_tag
    else:
        record.update(status="failed", objective=CRASH_OBJECTIVE, traceback=outcome.error)
    return record


def store_record(store: StudyStore, record: dict[str, Any]) -> dict[str, Any]:
    """Write a fresh run's record atomically; returns it as it will read back from the store, so that
    fresh and stored runs give the same archive."""
    text = json.dumps(jsonable(record))
    atomic_write_text(store.meta_run_file(*record_key(record)), text)
    return json.loads(text)


def trial_row(meta_seed: int, trial: int, record: dict[str, Any], cached: bool) -> dict[str, Any]:
    """One trial of a trials log and of the archive (the log leaves out ``summary``); a run below the
    full inner budget keeps its ``inner_budget``."""
    row = {"meta_seed": meta_seed, "trial": trial, "hash": record["hash"], "instance": record["instance"],
           "seed": record["seed"], "objective": record["objective"], "status": record["status"], "cached": cached,
           "gamma": record["gamma"], "summary": record.get("summary", {}), "traceback": record.get("traceback")}
    if "inner_budget" in record:
        row["inner_budget"] = record["inner_budget"]
    return row


def trial_seed(meta_seed: int) -> int:
    """The inner-run seed of a random search's trials (SMAC draws its own from the meta-seed)."""
    return int(np.random.default_rng(meta_seed).integers(2**31 - 1))


class Batch:
    """One batch of a search's trials: the runs it needs, then its results in proposal order."""

    def __init__(self, keys: list[Key], runs: list[Any], cache: Mapping[Key, dict[str, Any]]) -> None:
        self.keys = keys
        self.todo: dict[Key, Any] = {key: run for key, run in zip(keys, runs) if key not in cache}
        """The distinct keys not in ``cache``, in proposal order, with what runs them (γ, or γ and a
        budget fraction): each runs once."""
        self._cache = cache
        self._fresh: dict[Key, dict[str, Any]] = {}

    def deliver(self, key: Key, record: dict[str, Any]) -> None:
        """The (stored) record of one run of :attr:`todo`."""
        self._fresh[key] = record

    @property
    def done(self) -> bool:
        """True when every run of :attr:`todo` has been delivered."""
        return len(self._fresh) == len(self.todo)

    def results(self) -> list[tuple[dict[str, Any], bool]]:
        """(record, taken from the store or an earlier trial of the batch) per trial, in proposal order."""
        out, seen = [], set()
        for key in self.keys:
            if key in self._fresh:  # a repeat of a key in the batch counts as taken from an earlier trial
                out.append((self._fresh[key], key in seen))
                seen.add(key)
            else:
                out.append((self._cache[key], True))
        return out

    def fresh_ok(self) -> dict[Key, dict[str, Any]]:
        """The delivered runs with status ok (a failed run is not cached: the next invocation retries it)."""
        return {key: record for key, record in self._fresh.items() if record["status"] == "ok"}


class Search:
    """One meta-seed's search, asked and told one batch at a time by :func:`run_side_by_side`.

    Subclasses implement :meth:`_propose` (the next trials) and may implement :meth:`_observe` (a
    trial's result, in proposal order). A search sees the runs the store held when the stage started
    and its own, so what other searches run at the same time cannot change its trials.
    """

    label = "trials"

    def __init__(self, store: StudyStore, meta_seed: int, setup: MetaSetup, cache: Mapping[Key, dict[str, Any]],
                 trials: int, batch_size: int, quiet: bool, position: int, log: Path, desc: str) -> None:
        self.store, self.meta_seed, self.setup, self.trials, self.batch_size = store, meta_seed, setup, trials, batch_size
        self.fresh_ok: dict[Key, dict[str, Any]] = {}
        """Runs of this search with status ok, to join the stage's cache when all searches are done."""
        # ChainMap writes to its first map only: the stage's cache is read, never changed, while searches run
        self._cache = ChainMap(self.fresh_ok, cast(MutableMapping[Key, dict[str, Any]], cache))  # the stage's cache is not changed while searches run
        self._log = log
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text("")  # the log is rebuilt by the (replaying) rerun
        self.rows: list[dict[str, Any]] = []
        self._infos: list[Any] = []
        self._batch = Batch([], [], {})
        self._started = time.perf_counter()
        self._desc = desc
        self._bar = tqdm(total=trials, desc=desc, unit="trial", position=position, disable=True if quiet else None)

    def _propose(self, n: int) -> list[Proposal]:
        """The next ``n`` trials (a multi-fidelity search: its next ``n`` configurations, each on every
        training instance) as (info handed back to :meth:`_observe`, γ, instance, seed, fraction of
        the inner budget)."""
        raise NotImplementedError

    def _observe(self, info: Any, objective: float) -> None:
        """Called once per trial, in proposal order, when its batch is complete (default: nothing)."""

    @property
    def finished(self) -> bool:
        """True once all trials are told."""
        return len(self.rows) >= self.trials

    def ask_batch(self) -> list[tuple[Key, dict[str, Any]]]:
        """Proposes the next batch; returns the distinct (key, (γ, budget fraction)) not yet stored, in
        proposal order, each to be run once and handed to :meth:`deliver` (an empty list:
        :meth:`tell_batch` at once)."""
        proposed = self._propose(min(self.batch_size, self.trials - len(self.rows)))
        self._infos = [p[0] for p in proposed]
        keys = [(run_name(gamma, fraction), str(instance), int(seed)) for _, gamma, instance, seed, fraction in proposed]
        self._batch = Batch(keys, [(gamma, fraction) for _, gamma, _, _, fraction in proposed], self._cache)
        self._bar.update(len(proposed) - len(self._batch.todo))
        return list(self._batch.todo.items())

    def deliver(self, key: Key, record: dict[str, Any]) -> None:
        """Stores a finished run of the batch at once (so a kill loses nothing finished)."""
        self._batch.deliver(key, store_record(self.store, record))
        self._bar.update(1)

    @property
    def batch_done(self) -> bool:
        """True when every run of the current batch has been delivered."""
        return self._batch.done

    def tell_batch(self) -> None:
        """Tells the search the batch's results in proposal order and appends the batch to the trials log."""
        batch_rows: list[dict[str, Any]] = []
        for info, (record, cached) in zip(self._infos, self._batch.results()):
            self._observe(info, record["objective"])
            batch_rows.append(trial_row(self.meta_seed, len(self.rows) + len(batch_rows), record, cached))
        self.fresh_ok.update(self._batch.fresh_ok())
        self.rows += batch_rows
        with self._log.open("a") as fh:
            fh.writelines(trials_log_line(row) for row in batch_rows)

    def close(self) -> None:
        """Ends the progress bar and says what the meta-seed did."""
        self._bar.close()
        failed = sum(r["status"] == "failed" for r in self.rows)
        print(f"{self._desc.split(':')[0]}: {len(self.rows)} {self.label} "
              f"({sum(r['cached'] for r in self.rows)} from the store, {failed} failed"
              f"{' and retried by the next run' if failed else ''}) in {time.perf_counter() - self._started:.1f} s")


def _target_function(config: Any, instance: str | None = None, seed: int = 0, budget: float | None = None) -> float:
    """SMAC's facade wants a target function (it checks its signature); trials run through ask and
    tell here (:func:`run_side_by_side`), so SMAC never calls it."""
    raise RuntimeError("meta trials are run by metaopt.stages.meta, not by SMAC's runner")


def _smac_facade(facade: Any, scenario: Any, initial: list, model_options: dict[str, Any],
                 intensifier_options: dict[str, Any], known_first: bool = False,
                 intensifier_class: Any = None) -> Any:
    """The SMAC facade of a search (:class:`SmacSearch`, :class:`MultiFidelitySmacSearch`), built once
    per meta-seed: ``facade``'s reproducible model and maximizer (``model_options`` for
    :func:`reproducible_model_and_maximizer`) with bounded forest leaves and SMAC's asks made
    faster (:func:`fast_asks`: the same asks), its intensifier (``facade``'s, or ``intensifier_class``) with
    ``intensifier_options``, and an initial design holding the known designs ``initial`` (values of
    ``scenario``'s space) as far as SMAC leaves room for them: after SMAC's own share of it, or before it
    if ``known_first`` (:func:`known_designs_first`)."""
    from ConfigSpace import Configuration

    initial = [Configuration(scenario.configspace, values=dict(config)) for config in initial]
    model, maximizer = reproducible_model_and_maximizer(facade, scenario, **model_options)
    bound_forest_leaves(model)  # the same trees, without reserving 2²¹ nodes for each
    # SMAC refuses an initial design larger than its trials; its own share (a private count, the
    # default configuration included) is what the known designs must leave room for.
    room = scenario.n_trials - getattr(facade.get_initial_design(scenario), "_n_configs", 1) - 1
    design = facade.get_initial_design(scenario, additional_configs=initial[: max(room, 0)])
    smac = facade(scenario, _target_function, model=model, acquisition_maximizer=maximizer,
                  initial_design=known_designs_first(design) if known_first else design,
                  intensifier=(intensifier_class(scenario, **intensifier_options) if intensifier_class is not None
                               else facade.get_intensifier(scenario, **intensifier_options)),
                  overwrite=True, logging_level=quiet_smac_logging())
    return fast_asks(smac)  # the same asks, without SMAC's per-configuration loops


class SmacSearch(Search):
    """SMAC's algorithm-configuration facade for one meta-seed, started from the known designs.

    We drive SMAC's ask/tell interface ourselves instead of handing it a Dask client: SMAC 2.4's
    Dask runner returns from optimize() once n_trials are *submitted* and drops the results of
    trials still running, and it tells results in completion order (timing-dependent proposals).
    Several trials are asked before any is told: SMAC marks each asked trial as running, and its
    intensifier does not propose a running trial again (distinct SMAC configurations may still
    complete to the same γ; such a trial runs once). Each search draws its random configurations
    from its own copy of the design space.
    """

    def __init__(self, store: StudyStore, meta_seed: int, setup: MetaSetup, cache: Mapping[Key, dict[str, Any]],
                 space, instances: list[str], instance_features: dict[str, list[float]], trials: int,
                 batch_size: int, quiet: bool, initial: list, position: int, inner_seeds: int = 1) -> None:
        from smac import AlgorithmConfigurationFacade, Scenario

        super().__init__(store, meta_seed, setup, cache, trials, batch_size, quiet, position,
                         store.trials_log(meta_seed), f"meta-seed {meta_seed}: SMAC trials")
        # SMAC seeds the Scenario's ConfigurationSpace and draws its random configurations from it:
        # searches that shared one space would share one generator, drawn from in the order their
        # batches finish (timing), and all seeded by the meta-seed started last.
        space = copy.deepcopy(space)
        # inner_seeds > 1: a non-deterministic scenario, whose intensifier races designs over
        # (instance, seed) pairs, all instances with SMAC's first seed, then with its second, ...
        scenario = Scenario(space, name=f"meta-seed-{meta_seed}", deterministic=inner_seeds == 1, n_trials=trials,
                            instances=instances, instance_features=instance_features, seed=meta_seed,
                            output_directory=store.smac_dir, crash_cost=CRASH_OBJECTIVE)
        # No PCA of the instance features: SMAC 2.4 fits its forest on PCA components once there are
        # 4 or more features (a pooled benchmark's scenario indicators) but predicts marginalized over
        # the raw features, and fails an assertion; the few features here need no reduction.
        self._smac = _smac_facade(AlgorithmConfigurationFacade, scenario, initial, {"pca_components": None},
                                  {"max_config_calls": len(instances) * inner_seeds})

    def _propose(self, n: int) -> list[Proposal]:
        with _smac_warnings_silenced():
            infos = [self._smac.ask() for _ in range(n)]
        return [(info, complete_gamma(self.setup, dict(info.config)), str(info.instance), int(info.seed or 0), 1.0)
                for info in infos]

    def _observe(self, info: Any, objective: float) -> None:
        from smac.runhistory.dataclasses import TrialValue

        with _smac_warnings_silenced():
            self._smac.tell(info, TrialValue(cost=objective), save=False)


class MultiFidelitySmacSearch(Search):
    """SMAC's multi-fidelity facade (Hyperband, ``meta.fidelity``) for one meta-seed, over the inner
    budget: a SMAC trial is a design γ at a fraction b of the study's inner budget, run on every
    training instance (one inner run each, all with one seed); SMAC is told the mean objective over
    the instances. Hyperband runs many designs at the smallest b (cheap: a model-based design's run
    at 30·d/9 costs far less than a ninth of its 30·d run) and promotes the best 1/η of each rung to
    the next budget, so that only promising designs are run at the full budget, where γ* is chosen.
    Its brackets also start some designs at larger budgets; ``brackets="successive_halving"`` starts
    every design at the smallest (SMAC's successive halving: η^k designs per bracket).

    A run at b < 1 is stored under its own name (:func:`run_name`): the meta-objective of that
    shorter run (the study's fractions of *its* budget), a cheap estimate of the full run's. Counted
    in trials like any inner run; its batches are ``batch_size`` SMAC trials (× the instances).
    """

    label = "inner runs (multi-fidelity)"

    def __init__(self, store: StudyStore, meta_seed: int, setup: MetaSetup, cache: Mapping[Key, dict[str, Any]],
                 space, instances: list[str], trials: int, batch_size: int, quiet: bool, initial: list,
                 position: int, min_budget: float, eta: int, brackets: str = "hyperband") -> None:
        from smac import MultiFidelityFacade, Scenario
        from smac.intensifier.successive_halving import SuccessiveHalving

        super().__init__(store, meta_seed, setup, cache, trials, batch_size * len(instances), quiet, position,
                         store.trials_log(meta_seed), f"meta-seed {meta_seed}: SMAC trials (multi-fidelity)")
        space = copy.deepcopy(space)  # a search of its own: see SmacSearch
        scenario = Scenario(space, name=f"meta-seed-{meta_seed}", deterministic=True,
                            n_trials=-(-trials // len(instances)), min_budget=min_budget, max_budget=1.0,
                            seed=meta_seed, output_directory=store.smac_dir, crash_cost=CRASH_OBJECTIVE)
        # The known designs enter the brackets first, as they start the one-fidelity search. With
        # brackets="successive_halving", SMAC's successive halving replaces the facade's Hyperband (the same
        # options): every design starts at min_budget, none at a larger inner budget.
        self._smac = _smac_facade(MultiFidelityFacade, scenario, initial, {}, {"eta": eta}, known_first=True,
                                  intensifier_class=SuccessiveHalving if brackets == "successive_halving" else None)
        self._instances = instances
        self._seed = trial_seed(meta_seed)
        self._pending: dict[int, list[float]] = {}

    def _propose(self, n: int) -> list[Proposal]:
        count = max(1, n // len(self._instances))
        with _smac_warnings_silenced():
            infos = [self._smac.ask() for _ in range(count)]
        out: list[Proposal] = []
        for info in infos:
            gamma = complete_gamma(self.setup, dict(info.config))
            fraction = float(info.budget) if info.budget is not None else 1.0
            fraction = 1.0 if fraction >= 1.0 - 1e-9 else fraction
            out += [((info, k), gamma, instance, self._seed, fraction) for k, instance in enumerate(self._instances)]
        return out

    def _observe(self, info: Any, objective: float) -> None:
        from smac.runhistory.dataclasses import TrialValue

        trial, k = info
        values = self._pending.setdefault(id(trial), [])
        values.append(objective)
        if len(values) == len(self._instances):
            del self._pending[id(trial)]
            with _smac_warnings_silenced():
                self._smac.tell(trial, TrialValue(cost=float(np.mean(values))), save=False)


class RandomSearch(Search):
    """Random search over the searched space: configuration k is drawn from the space seeded with the
    meta-seed and run on every training instance in the study's order (trials k·n … k·n + n − 1),
    all with one inner seed (:func:`trial_seed`, or the seed the search it is compared with used).
    Its incumbent is therefore known after every n-th trial, by the same rule as γ*'s."""

    label = "random-search trials"

    def __init__(self, store: StudyStore, meta_seed: int, setup: MetaSetup, cache: Mapping[Key, dict[str, Any]],
                 space, instances: list[str], trials: int, batch_size: int, quiet: bool, position: int,
                 log: Path, seed: int | None = None) -> None:
        super().__init__(store, meta_seed, setup, cache, trials, batch_size, quiet, position, log,
                         f"meta-seed {meta_seed}: random search")
        self._space = copy.deepcopy(space)
        self._space.seed(meta_seed)
        self._instances = instances
        self._seed = trial_seed(meta_seed) if seed is None else seed
        self._gamma: dict[str, Any] = {}
        self._proposed = 0

    def _propose(self, n: int) -> list[Proposal]:
        out: list[Proposal] = []
        for _ in range(n):
            k, i = divmod(self._proposed, len(self._instances))
            if i == 0:
                self._gamma = complete_gamma(self.setup, dict(self._space.sample_configuration()))
            out.append((k, self._gamma, self._instances[i], self._seed, 1.0))
            self._proposed += 1
        return out


class ListSearch(Search):
    """A fixed list of designs, each run on every training instance in turn with one inner seed: the
    meta-level baseline ``seeds`` (what the known designs alone reach, and at what cost)."""

    label = "known-design trials"

    def __init__(self, store: StudyStore, meta_seed: int, setup: MetaSetup, cache: Mapping[Key, dict[str, Any]],
                 gammas: list[dict[str, Any]], instances: list[str], seed: int, batch_size: int, quiet: bool,
                 position: int, log: Path) -> None:
        super().__init__(store, meta_seed, setup, cache, len(gammas) * len(instances), batch_size, quiet, position,
                         log, f"meta-seed {meta_seed}: known designs")
        self._plan = [(g, instance) for g in gammas for instance in instances]
        self._seed = seed
        self._proposed = 0

    def _propose(self, n: int) -> list[Proposal]:
        out: list[Proposal] = [(None, gamma, instance, self._seed, 1.0) for gamma, instance in
                               self._plan[self._proposed:self._proposed + n]]
        self._proposed += n
        return out


@contextmanager
def _smac_warnings_silenced() -> Iterator[None]:
    """SMAC's local search averages an empty list of timings when it finds no neighbours: harmless."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Mean of empty slice", RuntimeWarning)
        warnings.filterwarnings("ignore", "invalid value encountered in scalar divide", RuntimeWarning)
        yield


class SliceEnded(Exception):
    """Raised by :func:`run_side_by_side` when its ``deadline`` passed: the searches stopped asking
    for new batches, every run already started has finished and is stored."""


def run_side_by_side(searches: list[Search], executor: Executor, deadline: float | None = None) -> None:
    """Runs the searches together on the executor until each has all its trials.

    Each search waits for its own batch only: while one waits for its slowest trial, the other
    searches' trials keep the workers busy. Every search is told its results in its own proposal
    order, so its trials do not depend on the others, on the workers or on timing.

    ``deadline`` (a ``time.monotonic()`` value): past it, no new batch is asked; the runs under way
    finish and are stored, then :class:`SliceEnded` is raised (a later call replays the searches
    and continues where this one stopped, with the same trials as one uninterrupted call).
    """
    owner: dict[int, tuple[Search, Key]] = {}
    stopped: list[Search] = []
    submitted: set[int] = set()

    def advance(search: Search) -> None:
        while not search.finished:
            todo = search.ask_batch()
            if todo:
                # a slice runs at least one batch of each search; replayed batches (all stored) never stop it
                if deadline is not None and id(search) in submitted and time.monotonic() >= deadline:
                    stopped.append(search)
                    return
                submitted.add(id(search))
                for key, (gamma, fraction) in todo:
                    owner[executor.submit(run_trial, (search.setup, gamma, key[1], key[2], fraction))] = (search, key)
                return
            search.tell_batch()  # the whole batch came from the store
        search.close()

    for search in searches:
        advance(search)
    if owner:
        for task_id, record in executor.completed():
            search, key = owner.pop(task_id)
            search.deliver(key, record)
            if search.batch_done:
                search.tell_batch()
                advance(search)
    if stopped:
        # how many came from the store says whether a search continued: a meta-archive made by a search that
        # proposes other trials (another design space or version) gives none, and its runs are not reused
        cached = sum(r["cached"] for s in searches for r in s.rows)
        raise SliceEnded(f"{sum(len(s.rows) for s in searches)} of {sum(s.trials for s in searches)} trials, "
                         f"{cached} of them from the store or the meta-archive")
