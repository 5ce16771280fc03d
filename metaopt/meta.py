"""The optimize stage: SMAC's AlgorithmConfigurationFacade searches the design space over training instances.

Each SMAC trial is one inner run: a configuration γ of the (restricted) design space on one
training instance with one seed; its cost is the meta-objective computed from the run's trace.
Several meta-seeds run SMAC independently; γ* is chosen from their pooled results.

γ* rule: pool every trial of every meta-seed; per configuration, average the objective over seeds
per instance, then over instances; among configurations evaluated on *all* training instances,
γ* is the one with the lowest mean (ties: the one found first). SMAC's intensification evaluates
its incumbents on every instance, so such configurations exist once a meta-seed has run a few
dozen trials.

Batches (``meta.batch_size``, default 4): SMAC is asked for a batch of trials, the batch runs on
the executor (Dask workers, or this process with one worker; trials found in the store are not
rerun), SMAC is told the results in the order it proposed them, and then the next batch is asked.
The batch size is part of the study, not of the machine, so SMAC's proposals, the archive and γ*
are the same with 1, 2 or N workers and after an interruption and resume. The meta-seeds run side
by side on the same executor, each waiting only for its own batch: while one waits for its
slowest trial, the others' trials keep the workers busy (with one meta-seed, workers idle at the
end of each batch). A proposal sees up to ``batch_size - 1`` fewer results than it could (batch
size 1 is sequential SMAC).

Store (under ``<output>/meta``):
- ``runs/<γ hash>/<instance>/seed-<k>.json``: each finished inner run's objective and summary
  (or traceback), written atomically the moment it finishes. This is also the cache that makes a
  rerun resume: SMAC is started again with the same seed and the same batches, replays the same
  proposals, and finished runs are looked up instead of recomputed, so a resumed meta-seed ends
  with exactly the uninterrupted run's trials. A failed run (status ``failed``) and a damaged
  record are not cache entries: they are recomputed (and rewritten) by the next invocation.
- ``trials-seed-<m>.jsonl``: meta-seed m's trials in the order SMAC proposed them. A meta-seed
  whose log holds all its trials, each ``ok`` and stored, is finished and not replayed; a log
  that is short, damaged or holds failed trials makes the next invocation replay the meta-seed.
- ``archive.csv``: the meta-archive (meta-seed, trial, γ, instance, seed, objective, inner summary),
  in proposal order; nothing in it depends on timing or on which runs came from the store.
- ``gamma_star.json``: γ*, its mean objective and how it was chosen (rewritten by every invocation);
  ``known_design`` names the preset or γ file of SMAC's initial design that γ* is, if it is one
  (null: a configuration the search found).
- ``.smac/``: SMAC's own files for the running meta-seeds (not needed; cleared when the stage
  starts and removed when it ends).

Failure isolation: an inner run that raises gets the objective ``CRASH_OBJECTIVE`` and its
traceback is kept in the store and the archive; the meta-optimization goes on. If every trial
failed, no archive and no γ* are written and the stage ends with a one-line error.
"""

from __future__ import annotations

import copy
import json
import shutil
import time
import warnings
from collections import ChainMap
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping

import numpy as np
import pandas as pd
from tqdm import tqdm

from metaopt.budget import Budget
from metaopt.errors import UsageError
from metaopt.executor import Executor
from metaopt.meta_archive import CRASH_OBJECTIVE, choose_gamma_star, gamma_hash, meta_archive, selection_pool
from metaopt.references import Reference
from metaopt.run_io import jsonable
from metaopt.smac_utils import bound_forest_leaves, reproducible_model_and_maximizer
from metaopt.store import RUN_RECORD_GLOB, StudyStore
from metaopt.store_utils import atomic_write_text
from metaopt.tasks import RunSpec, execute

Key = tuple[str, str, int]
"""A trial's identity in the store: (γ hash, instance, seed)."""


def meta_objective(kind: str, trace: pd.DataFrame, budget: Budget, fractions: list[float]) -> float:
    """The meta-objective of one inner run from its trace.

    - ``regret``: normalized regret at the inner budget (the default);
    - ``regret_at``: mean normalized regret at the given fractions of the budget;
    - ``auc``: mean normalized regret over 50 log-spaced budgets from the first evaluation to B
      (the area under the anytime curve on a log budget axis).
    """
    from metaopt.analysis.anytime import budget_grid, regret_at

    if len(trace) == 0:
        return CRASH_OBJECTIVE
    spent = trace["budget_used" if budget.unit == "full_evals" else "cost_used"].to_numpy()
    regret = trace["normalized_regret"].to_numpy()
    if kind == "regret":
        return float(regret[-1])
    if kind == "regret_at":
        values = regret_at(spent, regret, np.asarray(fractions) * budget.amount)
    else:
        values = regret_at(spent, regret, budget_grid(spent[0], budget.amount, 50))
    return float(np.mean(np.where(np.isnan(values), 1.0, values)))  # before the first evaluation: regret 1


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


def complete_gamma(setup: MetaSetup, config: dict[str, Any]) -> dict[str, Any]:
    """The full design-space configuration γ of a SMAC configuration (completed by the restriction, if any)."""
    from metaopt.spaces.design_space import validate
    from metaopt.spaces.restrictions import get_restriction

    return get_restriction(setup.restriction).complete(config) if setup.restriction else validate(config)


def run_trial(setup: MetaSetup, gamma: dict[str, Any], instance: str, seed: int) -> dict[str, Any]:
    """One inner run (called on a worker): its store record, status ``ok`` with objective and summary,
    or ``failed`` with ``CRASH_OBJECTIVE`` and the traceback."""
    outcome = execute(RunSpec("gamma", setup.benchmark, instance, seed, setup.budget, setup.references[instance],
                              config=gamma, yahpo_data=setup.yahpo_data))
    record: dict[str, Any] = {"gamma": gamma, "hash": gamma_hash(gamma), "instance": instance, "seed": seed}
    if outcome.ok:
        summary = {k: v for k, v in outcome.result.summary.items() if k not in ("config", "reference")}
        # the budget the run had (setup.budget resolved for its instance: per hyperparameter on a pooled benchmark)
        budget = Budget(summary["budget"], summary["budget_unit"], summary["budget_spec"])
        record.update(status="ok", summary=summary,
                      objective=meta_objective(setup.objective, outcome.result.trace, budget,
                                               list(setup.objective_fractions)))
    else:
        record.update(status="failed", objective=CRASH_OBJECTIVE, traceback=outcome.error)
    return record


def known_designs(setup: MetaSetup, space, extra: dict[str, dict[str, Any]] | None = None,
                  presets: bool = True, found_by: str | None = None) -> dict[str, Any]:
    """The known designs that are points of ``space`` (the searched, possibly restricted, design space),
    as SMAC configurations by name: every preset valid there (unless not ``presets``; a design shipped
    from the study ``found_by`` is left out, so that the study finds it again the same way), then the
    named ``extra`` configurations (e.g. γ files a study names). Called before SMAC starts: they join its initial design, so the
    meta-search starts from what is already known and γ* on training is measured against them.

    A design is a point of the space when the space's parameters, completed as the trials' are
    (:func:`complete_gamma`), give back exactly the design; presets outside it are left out, and a
    design equal to an earlier one is listed once, under the earlier name.
    """
    from ConfigSpace import Configuration

    from metaopt.benchmarks import get_benchmark
    from metaopt.spaces.design_space import validate
    from metaopt.spaces.presets import PRESETS

    bench = get_benchmark(setup.benchmark, setup.yahpo_data)
    # The fidelity range presets are configured for (only Hyperband-like presets depend on it); for a
    # pooled benchmark, whose members differ, its first member's.
    fidelity = bench.problem(bench.instances[0]).fidelity
    designs = {name: preset.config(fidelity) for name, preset in PRESETS.items()
               if presets and (found_by is None or preset.found_by != found_by)}
    designs.update(extra or {})
    found: dict[str, Any] = {}
    seen: set[str] = set()
    for name, design in designs.items():
        try:
            gamma = validate(design)
            digest = gamma_hash(gamma)
            if digest in seen:
                continue  # the same design under a second name (e.g. a shipped γ* that is a preset): tried once
            values = {key: value for key, value in gamma.items() if key in space}
            configuration = Configuration(space, values=values)
            if complete_gamma(setup, dict(configuration)) != gamma:
                continue
        except (UsageError, ValueError, KeyError, TypeError):
            continue  # not a point of this space (a component or value the restriction excludes)
        configuration.origin = f"known design: {name}"
        found[name] = configuration
        seen.add(digest)
    return found


def _target_function(config: Any, instance: str, seed: int = 0) -> float:
    """SMAC's facade wants a target function (it checks its signature); trials run through ask and
    tell here (:func:`_run_batch`), so SMAC never calls it."""
    raise RuntimeError("meta trials are run by metaopt.meta, not by SMAC's runner")


def _store_path(store: StudyStore, key: Key) -> Path:
    return store.meta_run_file(*key)


def _key(record: dict[str, Any]) -> Key:
    return record["hash"], str(record["instance"]), int(record["seed"])


def load_cache(store: StudyStore) -> dict[Key, dict[str, Any]]:
    """The finished (status ``ok``) runs in the store, by key; called once per optimize stage.

    Failed runs are not cache entries (they are retried), nor is a damaged or foreign file.
    """
    cache = {}
    for path in sorted(store.meta_runs_dir.glob(RUN_RECORD_GLOB)):
        try:
            record = json.loads(path.read_text())
            key = _key(record)
            valid = (record["status"] == "ok" and isinstance(record["objective"], (int, float))
                     and isinstance(record["gamma"], dict) and path == _store_path(store, key))
        except (ValueError, KeyError, TypeError):  # e.g. truncated by a full disk: recomputed
            continue
        if valid:
            cache[key] = record
    return cache


def _store_record(store: StudyStore, record: dict[str, Any]) -> dict[str, Any]:
    """Write a fresh run's record atomically; returns it as it will read back from the store, so that
    fresh and stored runs give the same archive."""
    text = json.dumps(jsonable(record))
    atomic_write_text(_store_path(store, _key(record)), text)
    return json.loads(text)


def optimize(output: Path | StudyStore, setup: MetaSetup, space, instances: list[str],
             instance_features: dict[str, list[float]],
             trials: int, meta_seeds: list[int], executor: Executor, quiet: bool = False, *,
             batch_size: int, initial: dict[str, Any] | None = None, select_top: int = 0,
             select_seeds: int = 0, select_min_instance_fraction: float = 1.0) -> dict[str, Any]:
    """The optimize stage of one design space: SMAC once per meta-seed in batches of ``batch_size``
    trials; stores every trial, writes the archive and γ* and returns γ*.

    ``output`` is the store (or its folder) whose ``meta/`` receives the results (:class:`StudyStore`).
    ``initial``: known designs by name (SMAC configurations of ``space``, :func:`known_designs`) that
    join SMAC's initial design, in their order, as many as SMAC leaves room for (its initial design
    may not exceed the trials). ``select_top`` > 0: γ* is chosen among
    that many best configurations after re-running them on ``select_seeds`` more seeds
    (:func:`select_gamma_star`; ``select_min_instance_fraction``: which configurations may be candidates).
    Raises UsageError (and writes neither archive nor γ*) if every trial failed.
    """
    store = output if isinstance(output, StudyStore) else StudyStore(output)
    store.meta_dir.mkdir(parents=True, exist_ok=True)
    cache = load_cache(store)
    finished: dict[int, list[dict[str, Any]]] = {}
    searches: list[_MetaSeedSearch] = []
    for meta_seed in meta_seeds:
        trial_rows = _finished_trials(store, meta_seed, trials, cache)
        if trial_rows is not None:
            print(f"meta-seed {meta_seed}: finished earlier ({trials} trials in the store); SMAC is not rerun")
            finished[meta_seed] = trial_rows
    shutil.rmtree(store.smac_dir, ignore_errors=True)  # SMAC's own files: not needed (see the module doc)
    for meta_seed in meta_seeds:
        if meta_seed not in finished:
            searches.append(_MetaSeedSearch(store, meta_seed, setup, cache, space, instances, instance_features,
                                            trials, batch_size, quiet, list((initial or {}).values()),
                                            position=len(searches)))
    _run_side_by_side(searches, executor)
    shutil.rmtree(store.smac_dir, ignore_errors=True)
    for search in searches:
        cache.update(search.fresh_ok)
        finished[search.meta_seed] = search.rows
    rows = [row for meta_seed in meta_seeds for row in finished[meta_seed]]

    if all(r["status"] == "failed" for r in rows):
        last = (rows[-1].get("traceback") or "").strip().splitlines() if rows else []
        raise UsageError(f"all {len(rows)} trials of the meta-optimization failed, so there is no gamma* "
                         f"(last error: {last[-1] if last else 'unknown'}); tracebacks are in {store.meta_runs_dir}/, "
                         "and failed trials are retried when the optimize stage runs again")
    archive = meta_archive(rows)
    atomic_write_text(store.archive_csv, archive.to_csv(index=False))
    known = {gamma_hash(complete_gamma(setup, dict(configuration))): name
             for name, configuration in (initial or {}).items()}  # one name per design (known_designs)
    star = choose_gamma_star(archive, instances, rows)
    if select_top > 0 and select_seeds > 0:
        star = select_gamma_star(store, setup, archive, rows, instances, select_top, select_seeds, cache, executor,
                                 quiet, known, select_min_instance_fraction)
    star["known_design"] = known.get(star["hash"])
    atomic_write_text(store.gamma_star_json, json.dumps(jsonable(star), indent=1) + "\n")
    return star


SELECTION_SEED_BASE = 1000
"""Selection re-runs use the first seeds above this one that no trial of the archive used (SMAC's
algorithm-configuration trials all use one seed drawn from the meta-seed)."""


def select_gamma_star(store: StudyStore, setup: MetaSetup, archive: pd.DataFrame, rows: list[dict[str, Any]],
                      instances: list[str], top: int, seeds: int, cache: dict[Key, dict[str, Any]],
                      executor: Executor, quiet: bool = False,
                      known: dict[str, str] | None = None, min_instance_fraction: float = 1.0) -> dict[str, Any]:
    """γ* chosen among the ``top`` best configurations of the archive after re-running each on ``seeds``
    more seeds of every training instance; called once all meta-seeds have finished.

    The meta-objective is noisy (one inner run per trial), so the archive's best may be a lucky seed.
    Candidates: :func:`~metaopt.meta_archive.selection_pool` (the ``top`` best configurations run on all
    training instances or, with ``min_instance_fraction`` < 1, on that fraction of them, ranked by their
    paired difference to the best run on all). Each is run on every (instance, selection seed); its score is the mean over
    instances of the mean over those seeds. γ* is the candidate with the lowest score (ties: the
    archive's order). Runs go through the store and the executor like trials (resumable, the same
    with any number of workers); ``meta/selection.csv`` records each candidate's score ± s.e. over
    instances, its paired difference to γ* ± s.e., and which known design it is (``known``: γ hash →
    name of a design of SMAC's initial design; empty for a configuration SMAC found).
    """
    pool = selection_pool(archive, instances, top, min_instance_fraction)
    if pool.empty:
        return choose_gamma_star(archive, instances, rows)
    gammas = {h: next(r["gamma"] for r in rows if r["hash"] == h) for h in pool.index}
    used = set(archive["seed"].astype(int))
    chosen_seeds = [s for s in range(SELECTION_SEED_BASE + 1, SELECTION_SEED_BASE + 2 + seeds + len(used))
                    if s not in used][:seeds]
    plan = [(h, instance, seed) for h in pool.index for instance in instances for seed in chosen_seeds]
    todo = [key for key in plan if key not in cache]
    bar = tqdm(total=len(plan), initial=len(plan) - len(todo), desc="selection: re-runs of the top candidates",
               unit="run", disable=True if quiet else None)
    tasks = [(run_trial, (setup, gammas[h], instance, seed)) for h, instance, seed in todo]
    for index, record in executor.map_unordered(tasks):
        record = _store_record(store, record)
        if record["status"] == "ok":
            cache[todo[index]] = record
        bar.update(1)
    bar.close()
    scores = pd.DataFrame([{"hash": h, "instance": instance, "seed": seed,
                            "objective": cache[(h, instance, seed)]["objective"] if (h, instance, seed) in cache
                            else CRASH_OBJECTIVE} for h, instance, seed in plan])
    by_instance = scores.groupby(["hash", "instance"], sort=False)["objective"].mean().unstack("instance")
    by_instance = by_instance.loc[list(pool.index), instances]
    score = by_instance.mean(axis=1)
    best = str(score.idxmin())
    difference = by_instance.sub(by_instance.loc[best], axis=1)
    n = len(instances)
    table = pd.DataFrame({
        "hash": pool.index, "search_mean": pool["mean"].to_numpy(), "search_instances": pool["n_instances"].to_numpy(),
        "search_difference": pool["difference"].to_numpy(), "selection_mean": score.to_numpy(),
        "selection_se": (by_instance.std(axis=1, ddof=1) / np.sqrt(n)).fillna(0.0).to_numpy() if n > 1 else 0.0,
        "difference_to_gamma_star": difference.mean(axis=1).to_numpy(),
        "difference_se": (difference.std(axis=1, ddof=1) / np.sqrt(n)).fillna(0.0).to_numpy() if n > 1 else 0.0,
        "chosen": [h == best for h in pool.index],
        "known_design": [(known or {}).get(h, "") for h in pool.index],
    })
    atomic_write_text(store.selection_csv, table.to_csv(index=False))
    first = archive[archive["hash"] == best].iloc[0]
    return {"config": gammas[best], "hash": best, "mean_objective": float(score[best]),
            "search_mean_objective": float(pool.loc[best, "mean"]), "n_instances": n, "all_instances": True,
            "found_by_meta_seed": int(first["meta_seed"]), "found_at_trial": int(first["trial"]),
            "n_configurations": int(archive["hash"].nunique()), "n_trials": int(len(archive)),
            "selection": {"candidates": int(len(pool)), "seeds": chosen_seeds,
                          "table": "meta/selection.csv"},
            "rule": f"among the {len(pool)} {_pool_rule(min_instance_fraction)} (pooled over meta-seeds), "
                    f"the lowest mean objective over {seeds} further seeds per instance"}


def _pool_rule(min_instance_fraction: float) -> str:
    """How :func:`select_gamma_star`'s candidates were chosen, for gamma_star.json's ``rule``."""
    if min_instance_fraction >= 1.0:
        return "configurations with the lowest mean objective on all training instances"
    return (f"configurations run on at least {min_instance_fraction:g} of the training instances with the lowest "
            "paired difference to the best run on all of them, that one included,")


def _finished_trials(store: StudyStore, meta_seed: int, trials: int, cache: dict) -> list[dict[str, Any]] | None:
    """The rows of a meta-seed that finished all its ``trials`` earlier, else None (it is then replayed).

    Finished means: its log is complete and readable, and every logged trial is ``ok`` and stored.
    A finished meta-seed is not replayed: its trials are final even if the design space has since
    grown (a replay would then propose differently).
    """
    log_path = store.trials_log(meta_seed)
    if not log_path.exists():
        return None
    try:
        rows = [json.loads(line) for line in log_path.read_text().splitlines() if line.strip()]
        keys = [_key(row) for row in rows]
    except (ValueError, KeyError, TypeError):  # e.g. a line cut short by a kill or a full disk
        return None
    if len(rows) != trials or any(key not in cache for key in keys):  # failed runs are not in the cache
        return None
    for row, key in zip(rows, keys):
        row["summary"] = cache[key].get("summary", {})
    return rows


class _Batch:
    """One batch of a meta-seed's SMAC trials: the runs it needs, then its results in ask order."""

    def __init__(self, infos: list, gammas: list[dict[str, Any]], cache: Mapping[Key, dict[str, Any]]) -> None:
        self.infos = infos
        self.keys: list[Key] = [(gamma_hash(g), str(info.instance), int(info.seed or 0))
                                for g, info in zip(gammas, infos)]
        self.todo: dict[Key, dict[str, Any]] = {key: gamma for key, gamma in zip(self.keys, gammas)
                                                if key not in cache}
        """The distinct keys not in ``cache``, in ask order, with their γ: each runs once."""
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
        """(record, taken from the store or an earlier trial of the batch) per trial, in ask order."""
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


class _MetaSeedSearch:
    """One meta-seed's SMAC, asked and told one batch at a time by :func:`_run_side_by_side`.

    We drive SMAC's ask/tell interface ourselves instead of handing it a Dask client: SMAC 2.4's
    Dask runner returns from optimize() once n_trials are *submitted* and drops the results of
    trials still running, and it tells results in completion order (timing-dependent proposals).
    A search sees the runs the store held when the stage started and its own, and draws its random
    configurations from its own copy of the design space: what other meta-seeds run at the same
    time cannot change its trials or their ``cached`` flags.
    """

    def __init__(self, store: StudyStore, meta_seed: int, setup: MetaSetup, cache: dict[Key, dict[str, Any]],
                 space, instances: list[str], instance_features: dict[str, list[float]], trials: int,
                 batch_size: int, quiet: bool, initial: list, position: int) -> None:
        from ConfigSpace import Configuration
        from smac import AlgorithmConfigurationFacade, Scenario

        # SMAC seeds the Scenario's ConfigurationSpace and draws its random configurations from it:
        # searches that shared one space would share one generator, drawn from in the order their
        # batches finish (timing), and all seeded by the meta-seed started last.
        space = copy.deepcopy(space)
        initial = [Configuration(space, values=dict(config)) for config in initial]
        self.store, self.meta_seed, self.setup, self.trials, self.batch_size = store, meta_seed, setup, trials, batch_size
        self.fresh_ok: dict[Key, dict[str, Any]] = {}
        """Runs of this search with status ok, to join the stage's cache when all searches are done."""
        self._cache = ChainMap(self.fresh_ok, cache)  # the stage's cache is not changed while searches run
        scenario = Scenario(space, name=f"meta-seed-{meta_seed}", deterministic=True, n_trials=trials,
                            instances=instances, instance_features=instance_features, seed=meta_seed,
                            output_directory=store.smac_dir, crash_cost=CRASH_OBJECTIVE)
        # No PCA of the instance features: SMAC 2.4 fits its forest on PCA components once there are
        # 4 or more features (a pooled benchmark's scenario indicators) but predicts marginalized over
        # the raw features, and fails an assertion; the few features here need no reduction.
        model, maximizer = reproducible_model_and_maximizer(AlgorithmConfigurationFacade, scenario,
                                                            pca_components=None)
        bound_forest_leaves(model)  # the same trees, without reserving 2²¹ nodes for each
        # SMAC refuses an initial design larger than its trials; its own share (a private count, the
        # default configuration included) is what the known designs must leave room for.
        room = trials - getattr(AlgorithmConfigurationFacade.get_initial_design(scenario), "_n_configs", 1) - 1
        self._smac = AlgorithmConfigurationFacade(
            scenario, _target_function, model=model, acquisition_maximizer=maximizer,
            initial_design=AlgorithmConfigurationFacade.get_initial_design(
                scenario, additional_configs=list(initial)[: max(room, 0)]),
            intensifier=AlgorithmConfigurationFacade.get_intensifier(scenario,
                                                                     max_config_calls=len(scenario.instances)),
            overwrite=True, logging_level=40,
        )
        self._log = store.trials_log(meta_seed)
        self._log.write_text("")  # the log of this meta-seed is rebuilt by the (replaying) rerun
        self.rows: list[dict[str, Any]] = []
        self._batch = _Batch([], [], {})
        self._started = time.perf_counter()
        self._bar = tqdm(total=trials, desc=f"meta-seed {meta_seed}: SMAC trials", unit="trial", position=position,
                         disable=True if quiet else None)

    @property
    def finished(self) -> bool:
        """True once all trials are told."""
        return len(self.rows) >= self.trials

    def ask_batch(self) -> list[tuple[Key, dict[str, Any]]]:
        """Asks SMAC for the next batch; returns the distinct (key, γ) not yet stored, in ask order,
        each to be run once and handed to :meth:`deliver` (an empty list: :meth:`tell_batch` at once).

        Several trials are asked before any is told: SMAC marks each asked trial as running, and its
        intensifier does not propose a running trial again (distinct SMAC configurations may still
        complete to the same γ; such a trial runs once).
        """
        with _smac_warnings_silenced():
            infos = [self._smac.ask() for _ in range(min(self.batch_size, self.trials - len(self.rows)))]
        self._batch = _Batch(infos, [complete_gamma(self.setup, dict(info.config)) for info in infos], self._cache)
        self._bar.update(len(infos) - len(self._batch.todo))
        return list(self._batch.todo.items())

    def deliver(self, key: Key, record: dict[str, Any]) -> None:
        """Stores a finished run of the batch at once (so a kill loses nothing finished)."""
        self._batch.deliver(key, _store_record(self.store, record))
        self._bar.update(1)

    @property
    def batch_done(self) -> bool:
        """True when every run of the current batch has been delivered."""
        return self._batch.done

    def tell_batch(self) -> None:
        """Tells SMAC the batch's results in ask order and appends the batch to the trials log."""
        from smac.runhistory.dataclasses import TrialValue

        batch_rows = []
        for info, (record, cached) in zip(self._batch.infos, self._batch.results()):
            with _smac_warnings_silenced():
                self._smac.tell(info, TrialValue(cost=record["objective"]), save=False)
            batch_rows.append(_trial_row(self.meta_seed, len(self.rows) + len(batch_rows), record, cached))
        self.fresh_ok.update(self._batch.fresh_ok())
        self.rows += batch_rows
        with self._log.open("a") as fh:
            fh.writelines(json.dumps({k: v for k, v in row.items() if k != "summary"}) + "\n" for row in batch_rows)

    def close(self) -> None:
        """Ends the progress bar and says what the meta-seed did."""
        self._bar.close()
        failed = sum(r["status"] == "failed" for r in self.rows)
        print(f"meta-seed {self.meta_seed}: {len(self.rows)} trials "
              f"({sum(r['cached'] for r in self.rows)} from the store, {failed} failed"
              f"{' and retried by the next run' if failed else ''}) in {time.perf_counter() - self._started:.1f} s")


@contextmanager
def _smac_warnings_silenced() -> Iterator[None]:
    """SMAC's local search averages an empty list of timings when it finds no neighbours: harmless."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Mean of empty slice", RuntimeWarning)
        warnings.filterwarnings("ignore", "invalid value encountered in scalar divide", RuntimeWarning)
        yield


def _run_side_by_side(searches: list[_MetaSeedSearch], executor: Executor) -> None:
    """Runs the meta-seeds' searches together on the executor until each has all its trials.

    Each search waits for its own batch only: while one waits for its slowest trial, the other
    searches' trials keep the workers busy. Every search is told its results in its own ask
    order, so its trials do not depend on the others, on the workers or on timing.
    """
    owner: dict[int, tuple[_MetaSeedSearch, Key]] = {}

    def advance(search: _MetaSeedSearch) -> None:
        while not search.finished:
            todo = search.ask_batch()
            if todo:
                for key, gamma in todo:
                    owner[executor.submit(run_trial, (search.setup, gamma, key[1], key[2]))] = (search, key)
                return
            search.tell_batch()  # the whole batch came from the store
        search.close()

    for search in searches:
        advance(search)
    for task_id, record in executor.completed():
        search, key = owner.pop(task_id)
        search.deliver(key, record)
        if search.batch_done:
            search.tell_batch()
            advance(search)


def _trial_row(meta_seed: int, trial: int, record: dict[str, Any], cached: bool) -> dict[str, Any]:
    """One trial of the log and the archive (the log leaves out ``summary``)."""
    return {"meta_seed": meta_seed, "trial": trial, "hash": record["hash"], "instance": record["instance"],
            "seed": record["seed"], "objective": record["objective"], "status": record["status"], "cached": cached,
            "gamma": record["gamma"], "summary": record.get("summary", {}), "traceback": record.get("traceback")}
