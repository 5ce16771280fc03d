"""Per-run overhead: wall time of a run vs. the same evaluations in one batched benchmark call.

    python bench/overhead.py --benchmark yahpo:lcbench --instance 3945 --optimizer hb --budget 30d --seeds 5

The "limit" is the time the benchmark alone needs for every (configuration, fidelity) the run
evaluated, in a single batched call: no optimizer can be faster than that. Both are measured in
this process, one after the other, so their ratio is meaningful on a noisy machine.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from metaopt.benchmarks import get_benchmark
from metaopt.loop import run
from spaces.presets import get_preset


def measure(benchmark: str, instance: str, optimizer: str, budget: str, seed: int) -> dict:
    bench = get_benchmark(benchmark)
    problem = bench.problem(instance)
    config = get_preset(optimizer).config(problem.fidelity)
    started = time.perf_counter()
    result = run(config, problem, seed, budget)
    run_time = time.perf_counter() - started
    trace = result.trace
    configs = [{k: v for k, v in row.items() if isinstance(v, str) or not np.isnan(v)}
               for row in trace[bench.hyperparameter_names].to_dict("records")]
    started = time.perf_counter()
    problem.evaluate(configs, trace["fidelity"].to_numpy())
    limit = time.perf_counter() - started
    return {"optimizer": optimizer, "seed": seed, "evals": len(trace), "batches": int(trace["batch"].nunique()),
            "run_s": run_time, "limit_s": limit, "ratio": run_time / limit}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--benchmark", default="yahpo:lcbench")
    parser.add_argument("--instance", default="3945")
    parser.add_argument("--optimizer", nargs="+", default=["hb"])
    parser.add_argument("--budget", default="30d")
    parser.add_argument("--seeds", type=int, default=3)
    args = parser.parse_args()
    print(f"{'optimizer':>10} {'seed':>4} {'evals':>6} {'batches':>7} {'run [s]':>8} {'limit [s]':>9} {'ratio':>6}")
    for optimizer in args.optimizer:
        for seed in range(1, args.seeds + 1):
            m = measure(args.benchmark, args.instance, optimizer, args.budget, seed)
            print(f"{m['optimizer']:>10} {m['seed']:>4} {m['evals']:>6} {m['batches']:>7} {m['run_s']:>8.3f} "
                  f"{m['limit_s']:>9.4f} {m['ratio']:>6.1f}")


if __name__ == "__main__":
    main()
