"""Property: every configuration of the full design space runs (issue #4: 500 random configurations).

The space has conditions and forbiddens so that any sampled configuration is runnable; this runs
500 of them, drawn by ConfigSpace's sampler, on a synthetic instance with categorical, integer,
log-scaled and conditional hyperparameters, at a small budget, and checks each run's invariants.
Asynchronous designs run on a clock with one worker (:func:`metaopt.engine.simclock.run` runs every design).
"""

import numpy as np

from metaopt.core.benchmarks import get_benchmark
from metaopt.core.budget import Budget
from metaopt.engine.simclock import run
from metaopt.spaces.design_space import design_space

N_CONFIGS = 500
BUDGET = "1d"


def test_500_random_configurations_of_the_full_space_run():
    bench = get_benchmark("synthetic:mlp")
    problem = bench.problem(bench.test_instances[0])
    budget = Budget.parse(BUDGET, problem.d)
    space = design_space()
    space.seed(2026)
    seen = set()
    for k, sample in enumerate(space.sample_configuration(N_CONFIGS)):
        config = dict(sample)
        result = run(config, problem, seed=k, budget=budget)
        trace, summary = result.trace, result.summary
        assert len(trace) > 0, config
        assert summary["budget_used"] <= budget.amount + 1e-9, config
        assert np.all(np.diff(trace["budget_used"]) > 0), config
        assert np.all(np.isfinite(trace["loss"])), config
        assert summary["stop_reason"] in ("budget", config.get("stopping")), config
        seen.update(f"{key}={config[key]}" for key in ("proposal", "fidelity_schedule", "cost_penalty",
                                                         "promotion", "surrogate", "stopping") if key in config)
    # the sample reaches every proposal strategy, schedule, promotion rule and cost penalty
    for expected in ("proposal=cfo", "fidelity_schedule=cahb", "fidelity_schedule=asha", "promotion=cost_aware",
                     "cost_penalty=cei", "cost_penalty=ei_cool", "surrogate=gp"):
        assert expected in seen, expected
