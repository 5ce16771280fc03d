"""Cheaper meta-trials, side by side: a search at one inner budget against multi-fidelity searches, on one CPU budget.

The study files of the configuration (``meta_fidelity_studies``: first ``studies/lcbench_search.yaml``,
SMAC's algorithm-configuration facade with every inner run at the full inner budget, then
``studies/lcbench_search_mf.yaml`` and ``studies/lcbench_search_sh.yaml``, the same search space,
instances, known designs, meta-objective and selection of γ* run over the inner budget by SMAC's
Hyperband and by its successive halving) run in this process, one after the other, each into an empty
temporary store, on the same executor:

1. the one-fidelity search runs all its trials (``meta_fidelity_trials`` per meta-seed, default the
   study's own), then its selection of γ*;
2. each multi-fidelity search runs for as long as the first one's search took (wall time, the same
   workers: the same CPU budget; the CPU each arm's inner runs used is recorded and reported), is stopped
   there (the runs under way finish), and its γ* is selected from the trials it finished, by the same
   rule (:func:`metaopt.stages.meta.optimize`, which a study's slices use too);
3. every γ* is re-run on ``meta_fidelity_judge_seeds`` seeds of every training instance that no search
   or selection used, so that their quality is compared on the same runs (paired by instance).

*Meta-trials* are inner runs (a design on one training instance with one seed), at any inner budget;
``full_equivalents`` weighs each by its fraction of the inner budget.
"""

from __future__ import annotations

import contextlib
import io
import json
from collections import Counter
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from metaopt.bench.config import BenchConfig
from metaopt.bench.machine import REPO, busy_cores

JUDGE_SEED_BASE = 5000
"""The judge's seeds are JUDGE_SEED_BASE + 1, + 2, …: above the selection's (from 1001 on) and the
searches' (one seed per meta-seed, drawn from it)."""


def _usage(store: Any) -> dict[str, Any]:
    """What the inner runs stored in ``store``'s meta folder cost: how many (by fraction of the inner budget,
    largest first), their full-run equivalents, their CPU seconds and how many failed."""
    from metaopt.analysis.search_curves import run_cpu_seconds
    from metaopt.store.store import stored_run_records

    records = [json.loads(path.read_text()) for path in stored_run_records(store.meta_runs_dir)]
    fractions = Counter(float(record.get("inner_budget", 1.0)) for record in records)
    return {"inner_runs": len(records), "full_equivalents": sum(f * n for f, n in fractions.items()),
            "by_inner_budget": {f"{f:.4g}": fractions[f] for f in sorted(fractions, reverse=True)},
            "inner_cpu_s": sum(run_cpu_seconds(record) for record in records),
            "failed": sum(record.get("status") != "ok" for record in records)}


def _restriction(ctx: Any) -> str | None:
    """The design space of a study with one search (checked by :func:`meta_fidelity_section`)."""
    meta = ctx.study.spec.meta
    assert meta is not None and not isinstance(meta.restriction, list)
    return meta.restriction


def meta_fidelity_section(config: BenchConfig, yahpo_data: str | None) -> dict[str, Any]:
    from metaopt.core.executor import make_executor
    from metaopt.stages.meta import SliceEnded, known_designs, optimize
    from metaopt.stages.study import StudyContext, search_inputs
    from metaopt.store.meta_archive import read_trials_log
    from metaopt.store.store import StudyStore
    from metaopt.store.study_spec import load_study

    paths = config.meta_fidelity_studies
    if len(paths) < 2:
        raise ValueError("meta_fidelity_studies: a one-fidelity study, then one or more multi-fidelity studies")
    contexts = [StudyContext(load_study(REPO / path), yahpo_data) for path in paths]
    for k, (path, ctx) in enumerate(zip(paths, contexts)):
        meta, want_fidelity = ctx.study.spec.meta, k > 0
        if meta is None or isinstance(meta.restriction, list) or (meta.fidelity is not None) != want_fidelity:
            raise ValueError(f"{path}: the meta_fidelity section needs a study with one search "
                             f"{'over the inner budget (meta.fidelity)' if want_fidelity else 'at one inner budget'}")
        if ctx.meta_instances != contexts[0].meta_instances:
            raise ValueError(f"{paths[0]} and {path} must search over the same training instances")
    instances = contexts[0].meta_instances
    references = contexts[0].references(instances, quiet=True)
    inputs = [search_inputs(ctx, _restriction(ctx), references, ctx.meta_time_limits()) for ctx in contexts]
    for path, (setup, _, _) in zip(paths[1:], inputs[1:]):
        if setup.objective_tag != inputs[0][0].objective_tag:
            raise ValueError(f"{paths[0]} and {path} must have the same meta-objective")
    arms: list[dict[str, Any]] = []
    stars: list[dict[str, Any]] = []
    with make_executor(config.meta_fidelity_workers) as executor, \
            tempfile.TemporaryDirectory(prefix="metaopt-bench-meta-fidelity-") as folder:
        search_wall_s: float | None = None
        for k, (path, ctx, (setup, space, features)) in enumerate(zip(paths, contexts, inputs)):
            meta = ctx.study.spec.meta
            assert meta is not None and isinstance(meta.seeds, list)  # checked above; the schema makes the list
            initial = known_designs(setup, space, ctx.initial_configs, presets=meta.initial_presets,
                                    found_by=ctx.study.spec.name)
            seeds = list(config.meta_fidelity_meta_seeds or meta.seeds)
            # the one-fidelity arm's trials may be fewer than its study's; the other arm stops at its time
            trials = (config.meta_fidelity_trials or meta.trials) if k == 0 else meta.trials
            store = StudyStore(Path(folder) / f"arm-{k}")
            common: dict[str, Any] = dict(batch_size=meta.batch_size, initial=initial, fidelity=meta.fidelity,
                                          inner_seeds=meta.inner_seeds)
            busy_before = busy_cores()
            started, deadline = time.perf_counter(), None
            if search_wall_s is not None:  # a multi-fidelity arm: the one-fidelity search's time
                deadline = time.monotonic() + search_wall_s
            stopped = False
            with contextlib.redirect_stdout(io.StringIO()):
                try:
                    optimize(store, setup, space, instances, features, trials, seeds, executor, True,
                             deadline=deadline, **common)
                except SliceEnded:
                    stopped = True
            wall_s = time.perf_counter() - started
            search = _usage(store)
            finished = [len(read_trials_log(store.trials_log(s))) for s in seeds]
            if k == 0:
                search_wall_s = wall_s
            selected_trials = min(finished) if stopped else trials
            if search["by_inner_budget"].get("1", 0) == 0:
                raise ValueError(f"meta_fidelity: {path}'s search ran no design at the full inner budget in "
                                 f"{search_wall_s:.0f} s, the time the other search took ({search['inner_runs']} "
                                 f"inner runs by inner budget: {search['by_inner_budget']}), so it has no gamma*: "
                                 "give the one-fidelity search more trials (meta_fidelity_trials)")
            selection_started = time.perf_counter()
            with contextlib.redirect_stdout(io.StringIO()):  # every meta-seed is finished now: γ* is selected
                star = optimize(store, setup, space, instances, features, selected_trials, seeds, executor, True,
                                select_top=meta.select_top, select_seeds=meta.select_seeds,
                                select_min_instance_fraction=meta.select_min_instance_fraction, **common)
            selection = _usage(store)
            candidates = (pd.read_csv(store.selection_csv, keep_default_na=False) if store.selection_csv.exists()
                          else pd.DataFrame(columns=["hash", "known_design", "search_mean", "selection_mean"]))
            stars.append(star)
            arms.append({
                "study": path, "search": (f"SMAC ({meta.fidelity.text()})" if meta.fidelity
                                          else "SMAC (algorithm configuration)"),
                "meta_seeds": seeds, "trials_asked": trials, "stopped_at_time": stopped, "trials_finished": finished,
                "wall_s": wall_s, "busy_cores_before": busy_before, **search,
                "runs_per_cpu_hour": search["inner_runs"] / (search["inner_cpu_s"] / 3600),
                "full_equivalents_per_cpu_hour": search["full_equivalents"] / (search["inner_cpu_s"] / 3600),
                "selection_runs": selection["inner_runs"] - search["inner_runs"],
                "selection_cpu_s": selection["inner_cpu_s"] - search["inner_cpu_s"],
                "selection_wall_s": time.perf_counter() - selection_started,
                "gamma_star": star["hash"], "gamma_star_known_design": star.get("known_design"),
                "gamma_star_selection_mean": star["mean_objective"],
                # the selection's candidates: which designs the search had run at the full budget on every instance
                "candidates": [{"hash": str(c.hash), "known_design": str(c.known_design) or None,
                                "search_mean": float(c.search_mean), "selection_mean": float(c.selection_mean)}
                               for c in candidates.itertuples()],
            })
        judge = _judge(stars, inputs[0][0], instances, config.meta_fidelity_judge_seeds, executor)
    for arm, scores in zip(arms, judge["scores"]):
        arm["judged"] = scores
    for arm, star in zip(arms, stars):
        arm["same_gamma_star"] = star["hash"] == stars[0]["hash"]  # as the one-fidelity search's
    return {"studies": list(paths), "benchmark": contexts[0].bench.name,
            "budget": contexts[0].study.spec.budget, "instances": instances, "workers": config.meta_fidelity_workers,
            "judge_seeds": judge["seeds"], "arms": arms}


def _judge(stars: list[dict[str, Any]], setup: Any, instances: list[str], n_seeds: int,
           executor: Any) -> dict[str, Any]:
    """Each arm's γ* (``setup``: the one-fidelity arm's inner runs and meta-objective) on ``n_seeds`` fresh
    seeds of every instance; per arm, the mean objective per instance over those seeds (instance order). A
    γ* several arms chose runs once (a run is a pure function of design, instance and seed)."""
    from metaopt.stages.meta_search import run_trial

    seeds = [JUDGE_SEED_BASE + s for s in range(1, n_seeds + 1)]
    first = {star["hash"]: k for k, star in reversed(list(enumerate(stars)))}  # hash -> the first arm with it
    plan = [(k, instance, seed) for k in sorted(first.values()) for instance in instances for seed in seeds]
    tasks = ((run_trial, (setup, stars[k]["config"], instance, seed, 1.0)) for k, instance, seed in plan)
    objective = {plan[i]: record["objective"] for i, record in executor.map_unordered(tasks)}
    scores = [[float(np.mean([objective[(first[star["hash"]], i, s)] for s in seeds])) for i in instances]
              for star in stars]
    return {"seeds": seeds, "scores": scores}
