"""The optimize stage: a search over the design space on the training instances, γ* and the meta-level picture.

The search (``meta.optimizer``) is SMAC's AlgorithmConfigurationFacade (``smac``, the default) or
random search over the same space (``random``); what one trial is and how each search proposes
trials is in :mod:`metaopt.stages.meta_search`. Each trial is one inner run: a configuration γ of the
(restricted) design space on one training instance with one seed; its cost is the meta-objective
computed from the run's trace. Several meta-seeds search independently; γ* is chosen from their
pooled results.

γ* rule: pool every trial of every meta-seed; per configuration, average the objective over seeds
per instance, then over instances; among configurations evaluated on *all* training instances,
γ* is the one with the lowest mean (ties: the one found first). SMAC's intensification evaluates
its incumbents on every instance, so such configurations exist once a meta-seed has run a few
dozen trials.

Batches (``meta.batch_size``, default 4): the search is asked for a batch of trials, the batch runs
on the executor (Dask workers, or this process with one worker; trials found in the store are not
rerun), the search is told the results in the order it proposed them, and then the next batch is
asked. The batch size is part of the study, not of the machine, so the proposals, the archive and
γ* are the same with 1, 2 or N workers and after an interruption and resume. The meta-seeds run side
by side on the same executor, each waiting only for its own batch.

The meta-level picture (``meta.baselines``, ``meta.noise_seeds``; drawn by the report): after the
search, the same trial budget spent by random search (``random``) and the known designs alone, each
run on every training instance (``seeds``), with the search's inner seed, so that a reader sees
whether the search beats what it started from and what chance finds; and γ* and the best known
design re-run on ``noise_seeds`` seeds of every training instance: the spread of the meta-objective.
The ``seeds`` baseline runs before γ*'s selection, so that the best known design the selection
compares the search's best with is the best of *all* known designs at the full inner budget, not
only of those the search itself ran on every instance (a multi-fidelity search drops most of them at
its lowest budget, and SMAC's racing after one instance).

Store (under ``<output>/meta``):
- ``runs/<γ hash>/<instance>/seed-<k>.json``: each finished inner run's objective and summary
  (or traceback), written atomically the moment it finishes. This is also the cache that makes a
  rerun resume: the search is started again with the same seed and the same batches, replays the
  same proposals, and finished runs are looked up instead of recomputed, so a resumed meta-seed
  ends with exactly the uninterrupted run's trials. A failed run (status ``failed``) and a damaged
  record are not cache entries: they are recomputed (and rewritten) by the next invocation.
  ``meta.archive`` names a compact meta-archive (:func:`export_meta_runs`, committed beside a
  study's report) whose runs count as stored: a search longer than a session continues from it
  on another machine, with the trials of one uninterrupted search.
- ``trials-seed-<m>.jsonl``: meta-seed m's trials in proposal order. A meta-seed whose log holds all
  its trials, each ``ok`` and stored, is finished and not replayed; a log that is short, damaged or
  holds failed trials makes the next invocation replay the meta-seed.
- ``baselines/<name>/trials-seed-<m>.jsonl``: the baselines' trials, likewise.
- ``archive.csv``: the meta-archive (meta-seed, trial, γ, instance, seed, objective, inner summary),
  in proposal order; nothing in it depends on timing or on which runs came from the store.
- ``gamma_star.json``: γ*, its mean objective and how it was chosen (rewritten by every invocation);
  ``known_design`` names the preset or γ file of SMAC's initial design that γ* is, if it is one
  (null: a configuration the search found).
- ``noise.csv``: per re-run design and seed, the mean objective over the training instances.
- ``.smac/``: SMAC's own files for the running meta-seeds (not needed; cleared when the stage
  starts and removed when it ends).

Failure isolation: an inner run that raises gets the objective ``CRASH_OBJECTIVE`` and its
traceback is kept in the store and the archive; the meta-optimization goes on. If every trial
failed, no archive and no γ* are written and the stage ends with a one-line error.
"""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path
from typing import Any
from collections.abc import Mapping

import numpy as np
import pandas as pd
from tqdm import tqdm

from metaopt.core.errors import UsageError
from metaopt.core.executor import Executor
from metaopt.store.meta_archive import (CRASH_OBJECTIVE, INNER_SUMMARY_FIELDS, META_ARM, META_CLOCK, OBJECTIVE_TRANSFORM, TRIALS_LOG, LogId, choose_gamma_star, gamma_hash,
                                        load_cache, meta_archive, read_archived_trials, read_trials_log, search_means,
                                        selection_pool, trials_log_line)
from metaopt.stages.meta_search import (Batch, Key, ListSearch, MetaSetup, MultiFidelitySmacSearch, RandomSearch, Search,
                                 SliceEnded,
                                 SmacSearch, complete_gamma, meta_objective, record_key, run_side_by_side,
                                 run_trial, store_record, trial_row)
from metaopt.store.run_io import jsonable
from metaopt.store.store import StudyStore
from metaopt.core.store_utils import atomic_write_bytes, atomic_write_text
from metaopt.store.study_spec import MetaFidelity

__all__ = ["Batch", "MetaSetup", "SliceEnded", "complete_gamma", "export_meta_runs", "known_designs", "load_cache",
           "meta_objective", "optimize", "run_trial"]

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

    from metaopt.core.benchmarks import get_benchmark
    from metaopt.spaces.design_space import validate
    from metaopt.spaces.presets import PRESETS

    bench = get_benchmark(setup.benchmark, setup.yahpo_data)
    # The fidelity range presets are configured for (only Hyperband-like presets depend on it); for a
    # pooled benchmark, whose members differ, its first member's.
    fidelity = bench.problem(bench.instances[0]).fidelity
    designs = {name: preset.config(fidelity) for name, preset in PRESETS.items()
               if presets and found_by not in preset.found_by_studies}
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


ARCHIVE_SUMMARY_FIELDS = (*INNER_SUMMARY_FIELDS, "wall_time_s", "cpu_time_s")
"""The inner summary's fields a compact meta-archive keeps: those of ``archive.csv``
(:data:`metaopt.store.meta_archive.INNER_SUMMARY_FIELDS`) and the run's wall and CPU times (the report's CPU-hours axis)."""


def export_meta_runs(store: StudyStore, out: Path, archive_file: Path | None = None,
                     clock: dict[str, Any] | None = None, arm: str | None = None, *, max_evals: int | None,
                     objective: str | None) -> int:
    """Write every finished inner run of ``store``'s meta-optimization to ``out`` (gzipped JSON lines,
    one record each, in key order: γ, instance, seed, objective and the summary fields of
    :data:`ARCHIVE_SUMMARY_FIELDS`), with those of the meta-archive the search continued from
    (``archive_file``), then one line per trials log of the search (its trials' keys in order, read
    back by :func:`~metaopt.store.meta_archive.read_archived_trials`); returns the number of runs (0:
    there are none, and nothing is written). Called by ``metaopt study
    export-meta``. The file is what ``meta.archive`` reads: committed, it carries a search across
    sessions and machines. ``clock``: the study's ``meta.clock`` settings (workers, time limit), written
    as the first line (:data:`~metaopt.store.meta_archive.META_CLOCK`) so that a study with other
    settings refuses the archive (:func:`~metaopt.store.meta_archive.check_archived_clock`); none for
    a search off the clock. ``arm``: the restriction of an arm of a study that meta-optimizes a list of
    restrictions (``store`` is that arm's), written next (:data:`~metaopt.store.meta_archive.META_ARM`)
    so that only that arm's search reads the archive (:func:`~metaopt.store.meta_archive.check_archived_arm`).
    ``max_evals``: the study's ``meta.max_evals``, so that the runs it stopped are exported with the rest;
    ``objective``: the study's :func:`~metaopt.store.meta_archive.objective_tag`, the runs it counts."""
    cache = load_cache(store, archive_file, max_evals=max_evals, objective=objective)
    if not cache:
        return 0
    lines = []
    for key in sorted(cache):
        record = cache[key]
        compact: dict[str, Any] = {k: record[k] for k in ("hash", "gamma", "instance", "seed", "status", "objective",
                                                       OBJECTIVE_TRANSFORM, "inner_budget")
                   if k in record}
        compact["summary"] = {k: v for k, v in record.get("summary", {}).items() if k in ARCHIVE_SUMMARY_FIELDS}
        lines.append(json.dumps(jsonable(compact)))  # γ's key order as stored: it is the archive's column order
    runs = len(lines)
    if arm is not None:  # after the clock line: read_archived_arm reads lines 1 and 2
        lines.insert(0, json.dumps({META_ARM: arm}))
    if clock is not None:  # the settings go first: read_archived_clock reads line 1
        lines.insert(0, json.dumps({META_CLOCK: clock}))
    # the trials of the search and of its baselines in order: a finished search is restored, not replayed
    logs: list[tuple[str | None, Path]] = [(None, log) for log in store.trials_logs()]
    logs += [(name, log) for name, paths in sorted(store.baseline_trials_logs().items()) for log in paths]
    for baseline, log in logs:
        try:
            rows = read_trials_log(log)
        except ValueError:  # a line cut short by a kill: the next slice replays this meta-seed anyway
            continue
        if rows:
            trials = [[*record_key(row), bool(row.get("cached", False))] for row in rows]
            lines.append(json.dumps({TRIALS_LOG: {"baseline": baseline, "meta_seed": int(rows[0]["meta_seed"]),
                                                  "trials": trials}}))
    # mtime 0: the same runs give the same bytes (the file is committed)
    atomic_write_bytes(out, gzip.compress(("\n".join(lines) + "\n").encode(), mtime=0))
    return runs


def optimize(output: Path | StudyStore, setup: MetaSetup, space, instances: list[str],
             instance_features: dict[str, list[float]],
             trials: int, meta_seeds: list[int], executor: Executor, quiet: bool = False, *,
             batch_size: int, initial: dict[str, Any] | None = None, select_top: int = 0,
             select_seeds: int = 0, select_min_instance_fraction: float = 1.0,
             select_instances: list[str] | None = None, optimizer: str = "smac",
             baselines: tuple[str, ...] = (), noise_seeds: int = 0, archive_file: Path | None = None,
             deadline: float | None = None, fidelity: MetaFidelity | None = None,
             inner_seeds: int = 1, clock: dict[str, Any] | None = None) -> dict[str, Any]:
    """The optimize stage of one design space: the search (``optimizer``: ``smac`` or ``random``) once
    per meta-seed in batches of ``batch_size`` trials; stores every trial, writes the archive and γ*
    and returns γ*; then the meta-level baselines and noise re-runs (module docstring).

    ``output`` is the store (or its folder) whose ``meta/`` receives the results (:class:`StudyStore`).
    ``initial``: known designs by name (SMAC configurations of ``space``, :func:`known_designs`) that
    join SMAC's initial design, in their order, as many as SMAC leaves room for (its initial design
    may not exceed the trials); random search ignores them. ``select_top`` > 0: γ* is chosen among
    that many best configurations after re-running them on ``select_seeds`` more seeds
    (:func:`select_gamma_star`; ``select_min_instance_fraction``: which configurations may be candidates;
    ``select_instances``: where the candidates are re-run, default ``instances``).
    ``inner_seeds``: seeds per training instance SMAC's algorithm-configuration search races designs
    over (``meta.inner_seeds``). ``fidelity``: SMAC's multi-fidelity search over the inner budget (``meta.fidelity``); its trials
    below the full budget go to ``meta/archive_lower_budgets.csv``, and γ* is chosen among those at
    the full budget. ``archive_file``: a compact meta-archive whose runs count as stored. ``deadline`` (a
    ``time.monotonic()`` value): past it no new batch starts, and :class:`SliceEnded` is raised once
    the runs under way are stored (nothing else is written; the next call continues). ``clock``:
    ``meta.clock``'s settings (the inner runs are on the clock through ``setup``), recorded in
    ``gamma_star.json`` as the settings γ* was searched for.
    Raises UsageError (and writes neither archive nor γ*) if every trial failed.
    """
    store = output if isinstance(output, StudyStore) else StudyStore(output)
    store.meta_dir.mkdir(parents=True, exist_ok=True)
    cache = load_cache(store, archive_file, max_evals=setup.budget.max_evals, objective=setup.objective_tag)
    finished: dict[int, list[dict[str, Any]]] = {}
    searches: list[Search] = []
    restored = _restore_trials_logs(store, archive_file, cache)
    for meta_seed in meta_seeds:
        trial_rows = _finished_trials(store.trials_log(meta_seed), trials, cache)
        if trial_rows is not None:
            where = f"restored from {archive_file}" if (None, meta_seed) in restored else "in the store"
            print(f"meta-seed {meta_seed}: finished earlier ({trials} trials {where}); the search is not rerun")
            finished[meta_seed] = trial_rows
    shutil.rmtree(store.smac_dir, ignore_errors=True)  # SMAC's own files: not needed (see the module doc)
    for meta_seed in meta_seeds:
        if meta_seed in finished:
            continue
        if optimizer == "random":
            searches.append(RandomSearch(store, meta_seed, setup, cache, space, instances, trials, batch_size,
                                         quiet, len(searches), store.trials_log(meta_seed)))
        elif fidelity is not None:
            searches.append(MultiFidelitySmacSearch(store, meta_seed, setup, cache, space, instances, trials,
                                                    batch_size, quiet, list((initial or {}).values()), len(searches),
                                                    fidelity.min_budget, fidelity.eta, fidelity.brackets))
        else:
            searches.append(SmacSearch(store, meta_seed, setup, cache, space, instances, instance_features,
                                       trials, batch_size, quiet, list((initial or {}).values()),
                                       position=len(searches), inner_seeds=inner_seeds))
    try:
        run_side_by_side(searches, executor, deadline)
    finally:
        shutil.rmtree(store.smac_dir, ignore_errors=True)
    for search in searches:
        cache.update(search.fresh_ok)
        finished[search.meta_seed] = search.rows
    every = [row for meta_seed in meta_seeds for row in finished[meta_seed]]
    rows = [row for row in every if "inner_budget" not in row]  # the full-budget trials: γ* is chosen among them
    if len(rows) < len(every):
        atomic_write_text(store.lower_budget_archive_csv,
                          meta_archive([row for row in every if "inner_budget" in row]).to_csv(index=False))

    if all(r["status"] == "failed" for r in rows):
        last = (rows[-1].get("traceback") or "").strip().splitlines() if rows else []
        raise UsageError(f"all {len(rows)} trials of the meta-optimization failed, so there is no gamma* "
                         f"(last error: {last[-1] if last else 'unknown'}); tracebacks are in {store.meta_runs_dir}/, "
                         "and failed trials are retried when the optimize stage runs again")
    archive = meta_archive(rows)
    atomic_write_text(store.archive_csv, archive.to_csv(index=False))
    known: dict[str, str] = {}  # γ hash -> name: one name per design (known_designs)
    known_gammas: dict[str, dict[str, Any]] = {}  # γ hash -> γ
    for name, configuration in (initial or {}).items():
        gamma = complete_gamma(setup, dict(configuration))
        known[gamma_hash(gamma)], known_gammas[gamma_hash(gamma)] = name, gamma
    seeds = {meta_seed: int(finished[meta_seed][0]["seed"]) for meta_seed in meta_seeds if finished[meta_seed]}
    if "seeds" in baselines:  # first: the known designs' full runs make every one a selection candidate
        run_baselines(store, setup, space, instances, trials, seeds, batch_size, executor, quiet, ("seeds",),
                      initial or {}, cache, deadline)
    known_runs = _known_design_runs(archive, cache, known, instances, list(seeds.values()))
    star = choose_gamma_star(archive, instances, rows)
    if select_top > 0 and select_seeds > 0:
        star = select_gamma_star(store, setup, archive, rows, instances, select_top, select_seeds, cache, executor,
                                 quiet, known, select_min_instance_fraction, known_runs, known_gammas,
                                 select_instances)
    star["known_design"] = known.get(star["hash"])
    if clock is not None:
        star["clock"] = clock
    atomic_write_text(store.gamma_star_json, json.dumps(jsonable(star), indent=1) + "\n")
    if "random" in baselines:
        run_baselines(store, setup, space, instances, trials, seeds, batch_size, executor, quiet, ("random",),
                      initial or {}, cache, deadline)
    if noise_seeds > 0:
        run_noise(store, setup, archive, rows, instances, star, known, noise_seeds, cache, executor, quiet,
                  known_runs, known_gammas)
    return star


def _known_design_runs(archive: pd.DataFrame, cache: Mapping[Key, dict[str, Any]], known: dict[str, str],
                       instances: list[str], seeds: list[int]) -> pd.DataFrame:
    """The full-budget runs of the known designs (hash, instance, seed, objective): those of the archive
    and, for each search's inner seed in ``seeds``, those of the ``seeds`` baseline found in ``cache``
    (none without it). Called by :func:`optimize` before γ*'s selection; read by
    :func:`_best_known_design`."""
    columns = ["hash", "instance", "seed", "objective"]
    ours = archive.loc[archive["hash"].isin(list(known)), columns]
    extra = [{"hash": h, "instance": instance, "seed": seed, "objective": cache[(h, instance, seed)]["objective"]}
             for h in known for instance in instances for seed in seeds if (h, instance, seed) in cache]
    both = pd.concat([ours, pd.DataFrame(extra, columns=columns)], ignore_index=True)
    return both.drop_duplicates(["hash", "instance", "seed"], keep="first")


def _best_known_design(known_runs: pd.DataFrame, instances: list[str]) -> tuple[str, float] | None:
    """The known design with the lowest mean objective (seeds averaged per instance, then instances)
    among those run on every training instance, and that mean; None if there is none. Ties: the
    first in ``known_runs``' order."""
    _, per_config = search_means(known_runs)
    complete = per_config[per_config["n_instances"] == len(instances)]
    if complete.empty:
        return None
    best = str(complete["mean"].idxmin())
    return best, float(complete.loc[best, "mean"])


def run_baselines(store: StudyStore, setup: MetaSetup, space, instances: list[str], trials: int,
                  seeds: dict[int, int], batch_size: int, executor: Executor, quiet: bool, baselines: tuple[str, ...],
                  initial: dict[str, Any], cache: dict[Key, dict[str, Any]], deadline: float | None) -> None:
    """The meta-level baselines of the search, per meta-seed with the search's inner seed ``seeds[m]``
    (module docstring): ``random`` spends the search's ``trials`` on random configurations, ``seeds``
    runs every known design of ``initial`` on every training instance. Called after γ* is written;
    their trials go to ``meta/baselines/<name>/`` and their runs through the same cache and store."""
    gammas = [complete_gamma(setup, dict(configuration)) for configuration in initial.values()]
    searches: list[Search] = []
    for name in baselines:
        for meta_seed, seed in seeds.items():
            log = store.baseline_trials_log(name, meta_seed)
            total = trials if name == "random" else len(gammas) * len(instances)
            if total == 0 or _finished_trials(log, total, cache) is not None:
                continue
            if name == "random":
                searches.append(RandomSearch(store, meta_seed, setup, cache, space, instances, trials, batch_size,
                                             quiet, len(searches), log, seed=seed))
            else:
                searches.append(ListSearch(store, meta_seed, setup, cache, gammas, instances, seed, batch_size, quiet,
                                           len(searches), log))
    run_side_by_side(searches, executor, deadline)
    for search in searches:
        cache.update(search.fresh_ok)


def _seeds_above_archive(archive: pd.DataFrame, count: int) -> list[int]:
    """The first ``count`` seeds above :data:`SELECTION_SEED_BASE` that no trial of the archive used:
    the seeds of the selection re-runs and of the noise re-runs (which so share their runs)."""
    used = set(archive["seed"].astype(int))
    return [s for s in range(SELECTION_SEED_BASE + 1, SELECTION_SEED_BASE + 2 + count + len(used))
            if s not in used][:count]


def run_noise(store: StudyStore, setup: MetaSetup, archive: pd.DataFrame, rows: list[dict[str, Any]],
              instances: list[str], star: dict[str, Any], known: dict[str, str], count: int,
              cache: dict[Key, dict[str, Any]], executor: Executor, quiet: bool,
              known_runs: pd.DataFrame, known_gammas: dict[str, dict[str, Any]]) -> pd.DataFrame:
    """The meta-objective's noise: γ* and the best known design (:func:`_best_known_design` of
    ``known_runs``) re-run on ``count`` seeds of every training instance.
    Writes ``meta/noise.csv`` (design, hash, seed, mean objective over the instances) and returns it."""
    designs = {"gamma*": star["hash"]}
    best_known = _best_known_design(known_runs, instances)
    if best_known is not None and best_known[0] != star["hash"]:
        designs[f"best known design ({known[best_known[0]]})"] = best_known[0]
    gammas = {h: _gamma_of(h, rows, known_gammas) for h in designs.values()}
    gammas[star["hash"]] = star["config"]
    seeds = _seeds_above_archive(archive, count)
    plan = [(h, instance, seed) for h in designs.values() for instance in instances for seed in seeds]
    _run_plan(store, setup, plan, gammas, cache, executor, quiet, "noise: re-runs on more seeds")
    table = pd.DataFrame([{"design": name, "hash": h, "seed": seed,
                           "objective": float(np.mean([cache[(h, i, seed)]["objective"] if (h, i, seed) in cache
                                                       else CRASH_OBJECTIVE for i in instances]))}
                          for name, h in designs.items() for seed in seeds])
    atomic_write_text(store.noise_csv, table.to_csv(index=False))
    return table


def _run_plan(store: StudyStore, setup: MetaSetup, plan: list[Key], gammas: dict[str, dict[str, Any]],
              cache: dict[Key, dict[str, Any]], executor: Executor, quiet: bool, desc: str) -> None:
    """Runs the keys of ``plan`` the cache lacks on the executor; stores each and adds it to ``cache``."""
    todo = [key for key in dict.fromkeys(plan) if key not in cache]
    bar = tqdm(total=len(plan), initial=len(plan) - len(todo), desc=desc, unit="run", disable=True if quiet else None)
    tasks = [(run_trial, (setup, gammas[h], instance, seed)) for h, instance, seed in todo]
    for index, record in executor.map_unordered(tasks):
        record = store_record(store, record)
        if record["status"] == "ok":
            cache[todo[index]] = record
        bar.update(1)
    bar.close()


SELECTION_SEED_BASE = 1000
"""Selection re-runs use the first seeds above this one that no trial of the archive used (SMAC's
algorithm-configuration trials all use one seed drawn from the meta-seed)."""


def select_gamma_star(store: StudyStore, setup: MetaSetup, archive: pd.DataFrame, rows: list[dict[str, Any]],
                      instances: list[str], top: int, seeds: int, cache: dict[Key, dict[str, Any]],
                      executor: Executor, quiet: bool,
                      known: dict[str, str], min_instance_fraction: float, known_runs: pd.DataFrame,
                      known_gammas: dict[str, dict[str, Any]],
                      select_instances: list[str] | None = None) -> dict[str, Any]:
    """γ* chosen among the ``top`` best configurations of the archive after re-running each on ``seeds``
    more seeds of every training instance (or of every instance of ``select_instances``, instances the
    search did not run: ``meta.select_instances``); called once all meta-seeds have finished.

    The meta-objective is noisy (one inner run per trial), so the archive's best may be a lucky seed.
    Candidates: :func:`~metaopt.store.meta_archive.selection_pool` (the ``top`` best configurations run on all
    training instances or, with ``min_instance_fraction`` < 1, on that fraction of them, ranked by their
    paired difference to the best run on all), and the best known design if it is not one of them
    (:func:`_with_best_known_design`). Each is run on every (instance, selection seed); its score is the mean over
    instances of the mean over those seeds. γ* is the candidate with the lowest score (ties: the
    archive's order). Runs go through the store and the executor like trials (resumable, the same
    with any number of workers); ``meta/selection.csv`` records each candidate's score ± s.e. over
    instances, its paired difference to γ* ± s.e., and which known design it is (``known``: γ hash →
    name of a design of SMAC's initial design; empty for a configuration SMAC found).
    """
    pool = selection_pool(archive, instances, top, min_instance_fraction)
    if pool.empty:
        return choose_gamma_star(archive, instances, rows)
    searched = len(pool)
    pool = _with_best_known_design(pool, known_runs, instances)
    gammas = {h: _gamma_of(h, rows, known_gammas) for h in pool.index}
    chosen_seeds = _seeds_above_archive(archive, seeds)
    scored_on = list(select_instances or instances)  # meta.select_instances, else the search's
    plan = [(h, instance, seed) for h in pool.index for instance in scored_on for seed in chosen_seeds]
    _run_plan(store, setup, plan, gammas, cache, executor, quiet, "selection: re-runs of the top candidates")
    scores = pd.DataFrame([{"hash": h, "instance": instance, "seed": seed,
                            "objective": cache[(h, instance, seed)]["objective"] if (h, instance, seed) in cache
                            else CRASH_OBJECTIVE} for h, instance, seed in plan])
    by_instance = scores.groupby(["hash", "instance"], sort=False)["objective"].mean().unstack("instance")
    by_instance = by_instance.loc[list(pool.index), scored_on]
    score = by_instance.mean(axis=1)
    best = str(score.idxmin())
    difference = by_instance.sub(by_instance.loc[best], axis=1)
    n = len(scored_on)
    table = pd.DataFrame({
        "hash": pool.index, "search_mean": pool["mean"].to_numpy(), "search_instances": pool["n_instances"].to_numpy(),
        "search_difference": pool["difference"].to_numpy(), "selection_mean": score.to_numpy(),
        "selection_se": (by_instance.std(axis=1, ddof=1) / np.sqrt(n)).fillna(0.0).to_numpy() if n > 1 else 0.0,
        "difference_to_gamma_star": difference.mean(axis=1).to_numpy(),
        "difference_se": (difference.std(axis=1, ddof=1) / np.sqrt(n)).fillna(0.0).to_numpy() if n > 1 else 0.0,
        "chosen": [h == best for h in pool.index],
        "known_design": [known.get(h, "") for h in pool.index],
    })
    atomic_write_text(store.selection_csv, table.to_csv(index=False))
    found = archive[archive["hash"] == best]  # empty for a known design only the seeds baseline ran in full
    return {"config": gammas[best], "hash": best, "mean_objective": float(score[best]),
            "search_mean_objective": float(pool.loc[best, "mean"]), "n_instances": n, "all_instances": True,
            "found_by_meta_seed": int(found["meta_seed"].iloc[0]) if len(found) else None,
            "found_at_trial": int(found["trial"].iloc[0]) if len(found) else None,
            "n_configurations": int(archive["hash"].nunique()), "n_trials": int(len(archive)),
            "selection": {"candidates": int(len(pool)), "seeds": chosen_seeds,
                          "table": store.selection_csv.relative_to(store.root).as_posix(),
                          **({"instances": scored_on} if select_instances else {})},
            "rule": f"among the {searched} {_pool_rule(min_instance_fraction)} (pooled over meta-seeds)"
                    f"{' and the best known design' if len(pool) > searched else ''}, "
                    f"the lowest mean objective over {seeds} further seeds per instance"
                    + (f" of {n} instances the search did not run" if select_instances else "")}


def _with_best_known_design(pool: pd.DataFrame, known_runs: pd.DataFrame, instances: list[str]) -> pd.DataFrame:
    """``pool`` with the best known design (:func:`_best_known_design` of ``known_runs``) appended
    when it is not a candidate yet: the search's best are its luckiest runs too, so a design the search
    proposed becomes γ* only by beating the best known design on the selection's fresh seeds."""
    best_known = _best_known_design(known_runs, instances)
    if best_known is None or best_known[0] in pool.index:
        return pool
    best, mean = best_known
    reference = pool.index[0]  # selection_pool's reference: the difference is to it
    row = pd.DataFrame({"mean": [mean], "n_instances": [len(instances)],
                        "difference": [mean - pool.loc[reference, "mean"]]}, index=[best])
    return pd.concat([pool, row])


def _gamma_of(h: str, rows: list[dict[str, Any]], known_gammas: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The γ with hash ``h``: a known design's, or the first trial's of ``rows`` that ran it."""
    if h in known_gammas:
        return known_gammas[h]
    return next(r["gamma"] for r in rows if r["hash"] == h)


def _pool_rule(min_instance_fraction: float) -> str:
    """How :func:`select_gamma_star`'s candidates were chosen, for gamma_star.json's ``rule``."""
    if min_instance_fraction >= 1.0:
        return "configurations with the lowest mean objective on all training instances"
    return (f"configurations run on at least {min_instance_fraction:g} of the training instances with the lowest "
            "paired difference to the best run on all of them, that one included,")


def _restore_trials_logs(store: StudyStore, archive_file: Path | None, cache: dict) -> set[LogId]:
    """Called first by :func:`optimize`: writes each trials log the compact meta-archive carries (the
    search's and its baselines') to the store when the store has none and every run it names is in
    ``cache``; returns those it wrote. :func:`_finished_trials` then decides, as for any log, whether
    that search is finished (a finished search is not replayed: the same trials, γ* and report
    without SMAC's or random search's proposals computed again, even after the design space grew)."""
    if archive_file is None or not archive_file.exists():
        return set()
    restored = set()
    for (baseline, meta_seed), trials in read_archived_trials(archive_file).items():
        path = store.trials_log(meta_seed) if baseline is None else store.baseline_trials_log(baseline, meta_seed)
        if path.exists() or any(key not in cache for key, _ in trials):
            continue
        rows = [trial_row(meta_seed, t, cache[key], cached) for t, (key, cached) in enumerate(trials)]
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, "".join(trials_log_line(row) for row in rows))
        restored.add((baseline, meta_seed))
    return restored


def _finished_trials(log_path: Path, trials: int, cache: dict) -> list[dict[str, Any]] | None:
    """The rows of a search's trials log (``log_path``) that finished all its ``trials`` earlier, else
    None (the search is then replayed).

    Finished means: its log is complete and readable, and every logged trial is ``ok`` and stored.
    A finished meta-seed is not replayed: its trials are final even if the design space has since
    grown (a replay would then propose differently).
    """
    if not log_path.exists():
        return None
    try:
        rows = read_trials_log(log_path)
        keys = [record_key(row) for row in rows]
    except (ValueError, KeyError, TypeError):  # e.g. a line cut short by a kill or a full disk
        return None
    # (a multi-fidelity search may end a few runs past its trials: its last SMAC trial runs on every instance)
    if len(rows) < trials or any(key not in cache for key in keys):  # failed runs are not in the cache
        return None
    for row, key in zip(rows, keys):
        row["summary"] = cache[key].get("summary", {})
    return rows
