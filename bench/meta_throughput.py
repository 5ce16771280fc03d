"""Meta-optimization throughput: inner runs per second of a study's optimize stage, per worker count.

The study file of the configuration (``studies/lcbench.yaml``) fixes the benchmark, the inner
budget, the design-space restriction, the objective and the training instances; its meta-seeds
run ``meta_trials`` SMAC trials each (default: the study's own), side by side, into a temporary
folder (nothing is cached between measurements), once per worker count. The projected wall time of
the whole study is its meta-seeds × trials divided by the measured throughput. Worker processes load the benchmark and
make one small run before the clock starts (``cluster start`` in the report includes that).

The evaluate stage is measured the same way: a fixed list of runs (``eval_optimizers`` × the first
``eval_instances`` test instances × ``eval_seeds`` seeds of the study), nothing stored, once per
worker count (:func:`evaluate_rows`).
"""

from __future__ import annotations

import contextlib
import io
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import pandas as pd

from metaopt.bench.config import BenchConfig
from metaopt.bench.machine import REPO, busy_cores, measured_idle


def warm_up(benchmark: str, yahpo_data: str | None, instance: str) -> None:
    """One-time costs of a worker process (imports, the benchmark's ONNX session): paid before timing,
    as the harness's own process has paid them before its serial measurement."""
    from metaopt.core.benchmarks import get_benchmark
    from metaopt.engine.loop import run
    from metaopt.spaces.presets import get_preset

    problem = get_benchmark(benchmark, yahpo_data).problem(instance)
    run(get_preset("smashy_lcbench_hb").config(problem.fidelity), problem, 0, "1d")


def meta_section(config: BenchConfig, yahpo_data: str | None) -> dict[str, Any]:
    from metaopt.core.executor import make_executor
    from metaopt.stages.meta import optimize
    from metaopt.stages.study import StudyContext, search_inputs
    from metaopt.store.store import StudyStore, stored_run_records
    from metaopt.store.study_spec import load_study

    study = load_study(REPO / config.meta_study)
    ctx = StudyContext(study, yahpo_data)
    meta = study.spec.meta
    if meta is None:
        raise ValueError(f"{config.meta_study} has no 'meta' section")
    if isinstance(meta.restriction, list):
        raise ValueError(f"{config.meta_study} meta-optimizes a list of restrictions; the benchmark times one")
    assert isinstance(meta.seeds, list)  # the study schema turns a count N into 1..N
    references = ctx.references(ctx.meta_instances, quiet=True)
    warm_up(ctx.bench.name, yahpo_data, ctx.meta_instances[0])
    setup, space, features = search_inputs(ctx, meta.restriction, references, ctx.meta_time_limits())
    study_runs = meta.trials * len(meta.seeds)
    trials = config.meta_trials or meta.trials
    rows = []
    for workers in config.meta_workers:
        busy_before = busy_cores()
        with tempfile.TemporaryDirectory(prefix="metaopt-bench-meta-") as folder:
            started = time.perf_counter()
            with make_executor(workers) as executor:
                if executor.dask_client is not None:  # workers load the benchmark before the clock starts
                    executor.dask_client.run(warm_up, ctx.bench.name, yahpo_data, ctx.meta_instances[0])
                startup_s = time.perf_counter() - started
                started, cpu_before = time.perf_counter(), time.process_time()  # this process's CPU, all threads
                with contextlib.redirect_stdout(io.StringIO()):  # optimize() reports per meta-seed
                    optimize(Path(folder), setup, space, ctx.meta_instances, features, trials,
                             meta.seeds, executor, quiet=True, batch_size=meta.batch_size)
                wall_s, own_cpu_s = time.perf_counter() - started, time.process_time() - cpu_before
            store = StudyStore(folder)
            archive = pd.read_csv(store.archive_csv)
            # inner wall times are in the run store (the archive holds only what a run computes)
            inner = pd.Series([json.loads(p.read_text()).get("summary", {}).get("wall_time_s")
                               for p in stored_run_records(store.meta_runs_dir)], dtype=float).dropna()
        runs_per_s = len(archive) / wall_s
        rows.append({
            "workers": workers, "busy_cores_before": busy_before, "trials": len(archive), "failed": int((archive["status"] != "ok").sum()),
            "wall_s": wall_s, "startup_s": startup_s, "runs_per_s": runs_per_s,
            "inner_run_s_mean": float(inner.mean()), "inner_run_s_median": float(inner.median()),
            "outside_inner_share": 1.0 - float(inner.sum()) / (workers * wall_s),
            # with Dask workers: SMAC's asks and tells, the scheduler and storing, which share the cores with
            # the workers; with one worker this process also runs the inner runs
            "own_cpu_s": own_cpu_s,
            "projected_study_h": study_runs / runs_per_s / 3600,
        })
    _speedups(rows)
    return {"study": config.meta_study, "benchmark": ctx.bench.name, "budget": study.spec.budget,
            "restriction": meta.restriction, "instances": ctx.meta_instances, "meta_seeds": list(meta.seeds),
            "study_meta_seeds": len(meta.seeds), "study_trials": meta.trials, "study_runs": study_runs,
            "rows": rows, "evaluate_rows": evaluate_rows(config, ctx, yahpo_data)}


def _speedups(rows: list[dict[str, Any]]) -> None:
    """Adds each row's throughput relative to the first (one worker), and whether it may be reported."""
    base = rows[0]["runs_per_s"]
    for row in rows:
        row["speedup"] = row["runs_per_s"] / base
        # a speed-up measured while other work held cores says how many were free, not what the executor does
        row["speedup_valid"] = measured_idle([rows[0], row])


def evaluate_rows(config: BenchConfig, ctx: Any, yahpo_data: str | None) -> list[dict[str, Any]]:
    """Throughput of the evaluate stage's runs per worker count: the same run list each time,
    executed as the stage executes it (results are not stored)."""
    from metaopt.core.executor import make_executor
    from metaopt.spaces.presets import get_preset
    from metaopt.engine.tasks import RunSpec, execute

    instances = ctx.bench.instances_of("test")[: config.eval_instances]
    references = ctx.references(instances, quiet=True)
    specs = [RunSpec(name, ctx.bench.name, i, seed, ctx.budget, references[i],
                     config=get_preset(name).config(ctx.bench.fidelity), yahpo_data=yahpo_data)
             for name in config.eval_optimizers for i in instances for seed in range(1, config.eval_seeds + 1)]
    rows = []
    for workers in config.meta_workers:
        busy_before = busy_cores()
        with make_executor(workers) as executor:
            if executor.dask_client is not None:
                executor.dask_client.run(warm_up, ctx.bench.name, yahpo_data, instances[0])
            started = time.perf_counter()
            outcomes = [outcome for _, outcome in executor.map_unordered((execute, (spec,)) for spec in specs)]
            wall_s = time.perf_counter() - started
        rows.append({"workers": workers, "busy_cores_before": busy_before, "runs": len(specs),
                     "failed": sum(not o.ok for o in outcomes), "wall_s": wall_s, "runs_per_s": len(specs) / wall_s})
    _speedups(rows)
    return rows
