"""The Python API's cost: ``metaopt.minimize`` on a benchmark problem wrapped as a user's function,
against :func:`metaopt.engine.loop.run` on the same problem, in one process.

``run`` answers each batch with one batched benchmark call; ``minimize`` calls the objective once
per configuration (as a user's function is called), through the same :class:`AskTell` loop. Each is
compared with its own limit: the batched call, and the same evaluations one call per configuration.
What is left, the optimizer's own time through each driver, should be the same: ``own-time ratio``
near 1 means the ask/tell driver adds nothing.

The two traces are compared too (``max_loss_difference``): on the synthetic benchmarks they are
identical; YAHPO's ONNX surrogates compute in float32 with kernels that depend on the batch size,
so one configuration evaluated alone or inside a batch can differ in the last bits (about 1e-6),
and from the first such difference on, the runs may diverge. That is the benchmark, not the driver.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from metaopt.stages.api import minimize
from metaopt.core.benchmarks.base import Problem
from metaopt.bench.overhead import batched_limit, trace_configs
from metaopt.engine.loop import run
from metaopt.spaces.presets import get_preset


def per_config_limit(problem: Problem, result_trace: Any) -> float:
    """Seconds the evaluations of a trace take one benchmark call per configuration."""
    configs = trace_configs(problem, result_trace)
    fidelities = result_trace["fidelity"].to_numpy()
    started = time.perf_counter()
    for config, fidelity in zip(configs, fidelities):
        problem.evaluate([config], [fidelity])
    return time.perf_counter() - started


def measure_api(problem: Problem, optimizer: str, seed: int, budget: str) -> dict[str, Any]:
    """One optimizer on one problem through ``run`` and through ``minimize``; times, limits, trace check."""
    config = get_preset(optimizer).config(problem.fidelity)
    fid = problem.fidelity
    spec = (fid.name, int(fid.r_min), int(fid.r_max)) if fid.is_int else (fid.name, fid.r_min, fid.r_max)

    def objective(cfg: dict[str, Any], fidelity: float | None) -> dict[str, float]:
        assert fidelity is not None  # minimize is given the problem's fidelity range (spec)
        ev = problem.evaluate([cfg], [fidelity])
        return {"loss": float(ev.loss[0]), "cost": float(ev.cost[0])}

    started = time.perf_counter()
    ran = run(config, problem, seed, budget)
    run_s = time.perf_counter() - started
    started = time.perf_counter()
    minimized = minimize(objective, problem.search_space, optimizer=config, budget=budget, fidelity=spec, seed=seed,
                         cheap_end=problem.cheap_end)
    minimize_s = time.perf_counter() - started
    n = min(len(ran.trace), len(minimized.trace))
    difference = np.abs(ran.trace["loss"].to_numpy()[:n] - minimized.trace["loss"].to_numpy()[:n])
    batched = batched_limit(problem, ran.trace)
    single = per_config_limit(problem, ran.trace)
    return {
        "benchmark": problem.benchmark.name, "instance": problem.instance, "optimizer": optimizer, "seed": seed,
        "budget": budget, "evals": len(ran.trace), "run_s": run_s, "minimize_s": minimize_s,
        "batched_limit_s": batched, "per_config_limit_s": single,
        "max_loss_difference": float(np.nanmax(difference)) if n and not np.isnan(difference).all() else 0.0,
        "same_length": len(ran.trace) == len(minimized.trace),
    }
