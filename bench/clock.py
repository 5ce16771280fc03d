"""The simulated clock (:mod:`metaopt.engine.simclock`): its cost per evaluation, and designs against simulated time.

Two measurements, in one process:

- ``overhead``: each synchronous design of ``clock_overhead_optimizers`` runs once as today
  (:func:`metaopt.engine.loop.run`) and once on the clock with ``clock_workers`` workers, back to back; the
  two runs evaluate the same configurations (the trace is the same), so the ratio of their wall
  times is what the clock adds. An asynchronous design cannot run without the clock; its cost per
  evaluation is set against that of the synchronous runs (rs, which also proposes and evaluates
  one configuration at a time, is the like-for-like one), and against its own limit, the same
  evaluations one benchmark call per configuration.
- ``anytime``: every design of ``clock_optimizers`` on the clock with ``clock_workers`` workers on
  the first ``clock_instances`` test instances of the configuration's first benchmark × ``clock_seeds`` seeds at the configuration's
  budget: normalized regret (any fidelity) of the best result in by simulated time T, for T at
  fixed fractions of the time the slowest design needed, plus each design's simulated time to
  spend the budget and its worker utilization.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from metaopt.bench.api_overhead import per_config_limit
from metaopt.bench.config import BenchConfig
from metaopt.core.benchmarks import get_benchmark
from metaopt.engine.loop import run as run_loop
from metaopt.analysis.clock_curves import regret_by_time
from metaopt.core.references import get_reference
from metaopt.engine.simclock import run as run_clock
from metaopt.spaces.presets import get_preset

TIME_FRACTIONS = (0.05, 0.1, 0.25, 0.5, 1.0)
"""Where the anytime curves are read: fractions of the longest simulated time of the instance and seed."""


def clock_section(config: BenchConfig, yahpo_data: str | None) -> dict[str, Any]:
    """The section's data: ``overhead`` and ``anytime`` rows (module docstring)."""
    bench = get_benchmark(config.benchmarks[0], yahpo_data)
    instances = bench.instances_of("test")[:config.clock_instances]
    workers, budget = config.clock_workers, config.budget
    overhead, anytime = [], []
    for instance in instances:
        problem = bench.problem(instance)
        reference = get_reference(bench, problem.instance)
        for name in (*config.clock_overhead_optimizers, *config.clock_optimizers):  # warm-up, untimed
            run_clock(get_preset(name).config(problem.fidelity), problem, 0, "1d", workers=workers)
        for seed in range(1, config.clock_seeds + 1):
            for name in config.clock_overhead_optimizers:
                gamma = get_preset(name).config(problem.fidelity)
                started = time.perf_counter()
                today = run_loop(gamma, problem, seed, budget)
                today_s = time.perf_counter() - started
                started = time.perf_counter()
                on_clock = run_clock(gamma, problem, seed, budget, workers=workers)
                clock_s = time.perf_counter() - started
                overhead.append({"optimizer": name, "instance": instance, "seed": seed, "evals": len(today.trace),
                                 "today_s": today_s, "clock_s": clock_s,
                                 "same_trace": bool(today.trace.equals(on_clock.trace.drop(
                                     columns=["worker", "sim_start", "sim_time"])))})
            results = {}
            for name in config.clock_optimizers:
                started = time.perf_counter()
                results[name] = run_clock(get_preset(name).config(problem.fidelity), problem, seed, budget,
                                          workers=workers)
                run_s = time.perf_counter() - started
                if name not in config.clock_overhead_optimizers:
                    overhead.append({"optimizer": name, "instance": instance, "seed": seed,
                                     "evals": len(results[name].trace), "clock_s": run_s,
                                     "per_config_limit_s": per_config_limit(problem, results[name].trace)})
            longest = max(r.summary["sim_time"] for r in results.values())
            times = np.array(TIME_FRACTIONS) * longest
            for name, result in results.items():
                anytime.append({"optimizer": name, "instance": instance, "seed": seed,
                                "sim_time": result.summary["sim_time"], "utilization": result.summary["utilization"],
                                "evals": len(result.trace), "times": times.tolist(),
                                "regret": [None if np.isnan(v) else float(v)
                                           for v in regret_by_time(result.trace, reference, times)]})
    return {"benchmark": bench.name, "budget": budget, "workers": workers,
            "time_fractions": list(TIME_FRACTIONS), "overhead": overhead, "anytime": anytime}
