"""functions:classic4: six classic 4-d test functions as a benchmark without a fidelity."""

import math

import numpy as np
import pytest

from metaopt.core.benchmarks import get_benchmark
from metaopt.core.benchmarks.classic_functions import FUNCTIONS
from metaopt.core.errors import UsageError


def _unit(instance: str, x: list[float]) -> dict[str, float]:
    """The configuration (unit coordinates) of the point x of the instance's box."""
    _, lower, upper, _ = FUNCTIONS[instance]
    return {f"x{i}": (v - lower) / (upper - lower) for i, v in enumerate(x)}


@pytest.mark.parametrize("instance,x,value", [
    ("rosenbrock", [1.0, 1.0, 1.0, 1.0], 0.0), ("rosenbrock", [0.0, 0.0, 0.0, 0.0], 3.0),
    ("ackley", [0.0, 0.0, 0.0, 0.0], 0.0), ("levy", [1.0, 1.0, 1.0, 1.0], 0.0),
    ("styblinski_tang", [-2.903534] * 4, -39.16616570377142 * 4),
    ("hartmann4", [0.1873, 0.1906, 0.5566, 0.2647], -3.1344),  # Picheny et al.'s minimizer, to their digits
    ("michalewicz", [2.20290552, 1.57079633, 1.28499157, 1.92305846], -3.6988),
])
def test_the_functions_take_their_known_values(instance, x, value):
    bench = get_benchmark("functions:classic4")
    loss = bench.evaluate(instance, [_unit(instance, x)], [1.0]).loss[0]
    assert loss == pytest.approx(value, abs=2e-4 * max(1.0, abs(value)))


def test_the_scenario_is_six_held_out_problems_without_a_fidelity():
    bench = get_benchmark("functions:classic4")
    assert bench.test_instances == bench.instances == list(FUNCTIONS) and bench.train_instances == []
    assert bench.d == 4 and bench.fidelity.r_min == bench.fidelity.r_max
    configs = [dict(c) for c in bench.search_space.sample_configuration(20)]
    first = bench.evaluate("michalewicz", configs, [1.0] * 20)
    again = bench.evaluate("michalewicz", configs[::-1], [1.0] * 20)
    assert np.array_equal(first.loss, again.loss[::-1]) and np.all(first.cost == 1.0)
    assert bench.best_known("ackley") == 0.0 and bench.best_known("hartmann4") is None
    assert bench.fingerprint().startswith("functions:classic4+code:")  # an edit of the functions: new references
    with pytest.raises(UsageError, match="unknown instance 'sphere'.*rosenbrock"):
        bench.evaluate("sphere", configs[:1], [1.0])
    with pytest.raises(UsageError, match="fidelity"):
        bench.evaluate("ackley", configs[:1], [0.5])
    assert math.isfinite(bench.evaluate("rosenbrock", [{"x0": 1.0, "x1": 0.0, "x2": 1.0, "x3": 0.0}], [1.0]).loss[0])
