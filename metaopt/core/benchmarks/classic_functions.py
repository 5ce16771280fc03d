"""Classic optimization test functions in 4 dimensions: ``functions:classic4``, a scenario of cheap
problems without a fidelity, as a user brings to :func:`metaopt.minimize` (a few dozen evaluations of
a function of a few floats).

Its six instances are the functions, each on its usual box, every variable a float x0..x3:

- ``rosenbrock`` on [-5, 10]⁴: Σ 100 (x_{i+1} − x_i²)² + (1 − x_i)², minimum 0 at (1, 1, 1, 1); losses
  up to about 10⁶, left unscaled as a user's are;
- ``ackley`` on [-32.768, 32.768]⁴: −20 exp(−0.2 √(mean x²)) − exp(mean cos 2πx) + 20 + e, minimum 0 at 0;
- ``levy`` on [-10, 10]⁴, minimum 0 at (1, 1, 1, 1);
- ``styblinski_tang`` on [-5, 5]⁴: ½ Σ (x⁴ − 16 x² + 5 x), minimum −39.16617 · 4 at x_i = −2.903534;
- ``hartmann4`` on [0, 1]⁴: the 4-d Hartmann function of Picheny et al. (2013), (1.1 − Σ α_i exp(−Σ_j
  A_ij (x_j − P_ij)²)) / 0.839, with the first four columns of the 6-d function's A and P;
- ``michalewicz`` on [0, π]⁴ (m = 10): −Σ sin(x_i) sin(i x_i² / π)^20, steep ridges, minimum about −3.6989.

Definitions as in the Virtual Library of Simulation Experiments (Surjanovic & Bingham). Every
instance is a test instance (the scenario is for held-out checks of designs searched elsewhere). No
fidelity (one level); each evaluation costs 1. Values come from Python's ``math`` (the C library),
one configuration at a time, so they are the same bits on every machine; a few dozen microseconds each.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping, Sequence

import numpy as np
from ConfigSpace import ConfigurationSpace, Float

from metaopt.core.benchmarks.base import Benchmark, Evaluation, code_digest
from metaopt.core.benchmarks.function import NO_FIDELITY
from metaopt.core.errors import UsageError

D = 4


def _rosenbrock(x: Sequence[float]) -> float:
    return sum(100.0 * (x[i + 1] - x[i] ** 2) ** 2 + (1.0 - x[i]) ** 2 for i in range(D - 1))


def _ackley(x: Sequence[float]) -> float:
    mean_square = sum(v * v for v in x) / D
    mean_cos = sum(math.cos(2.0 * math.pi * v) for v in x) / D
    return -20.0 * math.exp(-0.2 * math.sqrt(mean_square)) - math.exp(mean_cos) + 20.0 + math.e


def _levy(x: Sequence[float]) -> float:
    w = [1.0 + (v - 1.0) / 4.0 for v in x]
    middle = sum((w[i] - 1.0) ** 2 * (1.0 + 10.0 * math.sin(math.pi * w[i] + 1.0) ** 2) for i in range(D - 1))
    last = (w[-1] - 1.0) ** 2 * (1.0 + math.sin(2.0 * math.pi * w[-1]) ** 2)
    return math.sin(math.pi * w[0]) ** 2 + middle + last


def _styblinski_tang(x: Sequence[float]) -> float:
    return sum(v ** 4 - 16.0 * v ** 2 + 5.0 * v for v in x) / 2.0


_HARTMANN_ALPHA = (1.0, 1.2, 3.0, 3.2)
_HARTMANN_A = ((10.0, 3.0, 17.0, 3.5), (0.05, 10.0, 17.0, 0.1), (3.0, 3.5, 1.7, 10.0), (17.0, 8.0, 0.05, 10.0))
_HARTMANN_P = ((0.1312, 0.1696, 0.5569, 0.0124), (0.2329, 0.4135, 0.8307, 0.3736),
               (0.2348, 0.1451, 0.3522, 0.2883), (0.4047, 0.8828, 0.8732, 0.5743))


def _hartmann4(x: Sequence[float]) -> float:
    total = sum(alpha * math.exp(-sum(a * (v - p) ** 2 for a, v, p in zip(row, x, centre)))
                for alpha, row, centre in zip(_HARTMANN_ALPHA, _HARTMANN_A, _HARTMANN_P))
    return (1.1 - total) / 0.839


def _michalewicz(x: Sequence[float]) -> float:
    return -sum(math.sin(v) * math.sin((i + 1) * v * v / math.pi) ** 20 for i, v in enumerate(x))


FUNCTIONS: dict[str, tuple[Callable[[Sequence[float]], float], float, float, float | None]] = {
    "rosenbrock": (_rosenbrock, -5.0, 10.0, 0.0),
    "ackley": (_ackley, -32.768, 32.768, 0.0),
    "levy": (_levy, -10.0, 10.0, 0.0),
    "styblinski_tang": (_styblinski_tang, -5.0, 5.0, None),
    "hartmann4": (_hartmann4, 0.0, 1.0, None),
    "michalewicz": (_michalewicz, 0.0, math.pi, None),
}
"""Instance name -> (function, lower, upper, exact minimum where it is a round number, else None: the
regret reference's local refinement finds it)."""


class ClassicFunctionsBenchmark(Benchmark):
    """``functions:classic4``; see the module docstring. One search space, the unit box [0, 1]⁴, which
    each instance maps onto its own box."""

    def __init__(self) -> None:
        self.name = "functions:classic4"
        self.instances = list(FUNCTIONS)
        self.train_instances = []
        self.test_instances = list(FUNCTIONS)
        self.split_rule = "every function is a test instance (held-out checks of designs searched on other scenarios)"
        self.fidelity = NO_FIDELITY
        self.loss_name = "f"
        self.cost_name = "evaluations"
        self.cheap_end = {}
        # The scaled box [0, 1]^4; each instance maps it onto its own box (a benchmark has one space).
        self.search_space = ConfigurationSpace(name=self.name)
        self.search_space.add([Float(f"x{i}", (0.0, 1.0)) for i in range(D)])

    def _function(self, instance: str) -> tuple[Callable[[Sequence[float]], float], float, float, float | None]:
        if str(instance) not in FUNCTIONS:
            raise UsageError(f"unknown instance {instance!r} for benchmark {self.name}; known instances: "
                             f"{', '.join(FUNCTIONS)}")
        return FUNCTIONS[str(instance)]

    def fingerprint(self) -> str:
        """The name and the digest of this module, where the functions are defined: editing one gives new
        cached regret references instead of stale ones."""
        return f"{self.name}+code:{code_digest(ClassicFunctionsBenchmark)}"

    def best_known(self, instance: str) -> float | None:
        return self._function(instance)[3]

    def evaluate(self, instance: str, configs: Sequence[Mapping[str, Any]],
                 fidelities: Sequence[float] | np.ndarray) -> Evaluation:
        """f at each configuration, its unit coordinates mapped onto the instance's box; cost 1 each."""
        f, lower, upper, _ = self._function(instance)
        self._check_fidelities(fidelities, len(configs))
        loss = np.empty(len(configs))
        for k, config in enumerate(configs):
            try:
                unit = [float(config[f"x{i}"]) for i in range(D)]
            except KeyError as err:
                raise UsageError(f"{self.name}: configuration {dict(config)} lacks {err.args[0]!r}") from None
            loss[k] = f([lower + u * (upper - lower) for u in unit])
        cost = np.ones(len(configs))
        return Evaluation(loss=loss, cost=cost, targets={self.loss_name: loss, self.cost_name: cost})
