"""Per-run overhead: wall time of a run vs. the same evaluations in one batched benchmark call.

    python -m bench.overhead --benchmark yahpo:lcbench --instance 3945 --optimizer hb --budget 30d --seeds 5

The "limit" is the time the benchmark alone needs for every (configuration, fidelity) the run
evaluated, in a single batched call (the best of ``LIMIT_REPEATS`` calls): no optimizer can be
faster than that. Both are measured in this process, one after the other, so their ratio is
meaningful on a noisy machine. :func:`measure` is the measurement every section of
``metaopt bench`` uses, for metaopt's presets and for the peers alike.
"""

from __future__ import annotations

import argparse
import time
from typing import Any, Mapping

import pandas as pd

from metaopt.core.benchmarks import get_benchmark
from metaopt.core.benchmarks.base import Problem
from metaopt.engine.loop import run
from metaopt.store.run_io import RunResult
from metaopt.engine.trace import REGRET_COLUMNS, TRACE_COLUMNS
from metaopt.spaces.presets import get_preset

LIMIT_REPEATS = 3


def trace_configs(problem: Problem, trace: pd.DataFrame) -> list[dict[str, Any]]:
    """The configurations of a trace's rows, as dicts (inactive hyperparameters absent)."""
    reserved = set(TRACE_COLUMNS) | set(REGRET_COLUMNS)
    columns = [f"hp_{name}" if name in reserved else name for name in problem.benchmark.hyperparameter_names]
    return [{name: value for name, value in zip(problem.benchmark.hyperparameter_names, row)
             if isinstance(value, str) or not pd.isna(value)}
            for row in trace[columns].itertuples(index=False)]


def batched_limit(problem: Problem, trace: pd.DataFrame) -> float:
    """Seconds one batched benchmark call takes for every evaluation in ``trace`` (best of LIMIT_REPEATS)."""
    if len(trace) == 0:
        return 0.0
    configs = trace_configs(problem, trace)
    fidelities = trace["fidelity"].to_numpy()
    times = []
    for _ in range(LIMIT_REPEATS):
        started = time.perf_counter()
        problem.evaluate(configs, fidelities)
        times.append(time.perf_counter() - started)
    return min(times)


def measure(problem: Problem, seed: int, budget: str, config: Mapping[str, Any] | None = None,
            peer: str | None = None, reference: Any = None) -> dict[str, Any]:
    """Run a design-space ``config`` (or the ``peer``) once; its wall time, limit, ratio and final regret."""
    started = time.perf_counter()
    if peer is not None:
        from metaopt.engine.peers import run_peer

        result: RunResult = run_peer(peer, problem, seed, budget, reference=reference)
    else:
        result = run(dict(config or {}), problem, seed, budget, reference=reference)
    run_s = time.perf_counter() - started
    limit_s = batched_limit(problem, result.trace)
    summary = result.summary
    return {
        "benchmark": problem.benchmark.name, "instance": problem.instance, "seed": int(seed), "budget": budget,
        "evals": int(summary["n_evals"]), "batches": int(result.trace["batch"].nunique()) if len(result.trace) else 0,
        "run_s": run_s, "limit_s": limit_s, "ratio": run_s / limit_s if limit_s > 0 else float("nan"),
        "normalized_regret": summary.get("normalized_regret"), "final_loss": summary["final_loss"],
        "stop_reason": summary["stop_reason"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--benchmark", default="yahpo:lcbench")
    parser.add_argument("--instance", default="3945")
    parser.add_argument("--optimizer", nargs="+", default=["hb"])
    parser.add_argument("--budget", default="30d")
    parser.add_argument("--seeds", type=int, default=3)
    args = parser.parse_args()
    problem = get_benchmark(args.benchmark).problem(args.instance)
    print(f"{'optimizer':>17} {'seed':>4} {'evals':>6} {'batches':>7} {'run [s]':>8} {'limit [s]':>9} {'ratio':>7}")
    for optimizer in args.optimizer:
        config = get_preset(optimizer).config(problem.fidelity)
        for seed in range(1, args.seeds + 1):
            m = measure(problem, seed, args.budget, config=config)
            print(f"{optimizer:>17} {seed:>4} {m['evals']:>6} {m['batches']:>7} {m['run_s']:>8.3f} "
                  f"{m['limit_s']:>9.4f} {m['ratio']:>7.1f}")


if __name__ == "__main__":
    main()
