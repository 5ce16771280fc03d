"""CAHB vs HB and CASH vs SH under an equal cost budget (paper 001's setting: a budget of time).

Per instance, the cost budget is the median (over seeds) of what ``hb`` spends in 30·d full
evaluations; every optimizer then runs until that cost is spent. Reported: mean final normalized
regret (any fidelity, as in the trace) over instances × seeds, with its standard error over
instances, plus the same at the ordinary 30·d full-evaluation budget, and the paired differences
CAHB − HB and CASH − SH (per instance mean over seeds, then mean ± standard error over instances).

    METAOPT_YAHPO_DATA=... python bench/cost_aware_check.py [--benchmark yahpo:lcbench]
        [--instances 5] [--seeds 3]
"""

from __future__ import annotations

import argparse

import numpy as np
import pandas as pd

from metaopt.core.benchmarks import get_benchmark
from metaopt.core.budget import Budget
from metaopt.engine.loop import run
from metaopt.core.references import get_reference
from metaopt.spaces.presets import get_preset

OPTIMIZERS = ("hb", "cahb", "sh", "cash")
PAIRS = (("cahb", "hb"), ("cash", "sh"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--benchmark", default="yahpo:lcbench")
    parser.add_argument("--instances", type=int, default=5, help="the first N test instances")
    parser.add_argument("--seeds", type=int, default=3)
    args = parser.parse_args()

    bench = get_benchmark(args.benchmark)
    rows = []
    for instance in bench.test_instances[: args.instances]:
        problem = bench.problem(instance)
        reference = get_reference(bench, instance)
        configs = {name: get_preset(name).config(problem.fidelity) for name in OPTIMIZERS}
        full = Budget.parse("30d", problem.d)
        by_evals = {(name, seed): run(configs[name], problem, seed, full, reference=reference).summary
                    for name in OPTIMIZERS for seed in range(args.seeds)}
        cost = float(np.median([by_evals[("hb", seed)]["cost_used"] for seed in range(args.seeds)]))
        for name in OPTIMIZERS:
            for seed in range(args.seeds):
                summary = run(configs[name], problem, seed, Budget(cost, "cost", f"{cost:.0f}s"),
                              reference=reference).summary
                rows.append({"instance": instance, "optimizer": name, "seed": seed, "cost_budget": cost,
                             "regret_cost": summary["normalized_regret"], "n_evals_cost": summary["n_evals"],
                             "regret_30d": by_evals[(name, seed)]["normalized_regret"],
                             "cost_30d": by_evals[(name, seed)]["cost_used"]})
        print(f"{instance}: cost budget {cost:.0f}", flush=True)

    df = pd.DataFrame(rows)
    per_instance = df.groupby(["optimizer", "instance"]).mean(numeric_only=True)
    table = per_instance.groupby("optimizer").agg(
        regret_cost=("regret_cost", "mean"), se_cost=("regret_cost", "sem"), evals_cost=("n_evals_cost", "mean"),
        regret_30d=("regret_30d", "mean"), se_30d=("regret_30d", "sem"), cost_30d=("cost_30d", "mean"),
    ).loc[list(OPTIMIZERS)]
    pd.set_option("display.width", 160)
    print(df.pivot_table(index="instance", columns="optimizer", values="regret_cost")[list(OPTIMIZERS)].round(4))
    print(table.round(4))
    for metric in ("regret_cost", "regret_30d"):
        wide = per_instance[metric].unstack("optimizer")
        for a, b in PAIRS:
            diff = wide[a] - wide[b]
            print(f"{metric}: {a} - {b} = {diff.mean():+.4f} ± {diff.sem():.4f} "
                  f"({(diff < 0).sum()} of {len(diff)} instances better)")


if __name__ == "__main__":
    main()
