"""A benchmark family of your own, used in a study without editing metaopt.

Twelve instances of a multi-fidelity Branin-Hoo problem: instance k rotates and shifts the
optimum and changes how misleading low fidelities are. The study ``examples/branin_study.yaml``
names it ``benchmark: python:branin_family:make_benchmark`` (run it from this folder, where Python
finds the module, or put the module on PYTHONPATH); an installed package would instead declare it
in the entry-point group ``metaopt.benchmarks`` (docs/python_api.md).

The protocol: a ``metaopt.core.benchmarks.Benchmark`` with instances (and a train/test split), a
ConfigSpace search space, a fidelity, the names of loss and cost, and a batched, deterministic
``evaluate(instance, configs, fidelities) -> Evaluation(loss, cost)``. Normalized regret needs
per-instance references: metaopt computes them from random evaluations and caches them on disk,
as for every benchmark (``reference_samples``; override ``best_known`` when the optimum is known).
"""

from __future__ import annotations

import math

import numpy as np
from ConfigSpace import ConfigurationSpace, Float

from metaopt.core.benchmarks import Benchmark, Evaluation, Fidelity

N_INSTANCES = 12


class BraninFamily(Benchmark):
    """Multi-fidelity Branin: instance k shifts the function by (s1_k, s2_k) (|s| ≤ 1, so a global
    minimum stays inside the box), and at fidelity r (epochs, 1..27) evaluates it at a point pulled
    towards a decoy by (1 − r/27)·bias_k; the loss is log(1 + Branin), the cost 0.1 + r."""

    reference_samples = 2000
    reference_refine_rounds = 10

    def __init__(self) -> None:
        self.name = "python:branin_family:make_benchmark"
        self.instances = [str(k) for k in range(N_INSTANCES)]
        self.train_instances, self.test_instances = self.instances[:4], self.instances[4:]
        self.split_rule = "instances 0-3 train, 4-11 test"
        space = ConfigurationSpace(seed=0)
        space.add([Float("x1", (-5.0, 10.0)), Float("x2", (0.0, 15.0))])
        self.search_space = space
        self.fidelity = Fidelity("epochs", 1, 27, is_int=True)
        self.loss_name, self.cost_name = "loss", "seconds"
        self.cheap_end = {}

    def _shape(self, instance: str) -> tuple[float, ...]:
        """(s1, s2, dx, dy, bias) of an instance, from its own seed."""
        rng = np.random.default_rng(int(instance))
        return (*rng.uniform(-1, 1, 2), *rng.uniform(-2, 2, 2), float(rng.uniform(0.5, 4.0)))

    def evaluate(self, instance, configs, fidelities) -> Evaluation:
        r = self._check_fidelities(fidelities, len(configs))
        s1, s2, dx, dy, bias = self._shape(instance)
        x1 = np.array([c["x1"] for c in configs]) + s1 + dx * (1 - r / 27) * bias
        x2 = np.array([c["x2"] for c in configs]) + s2 + dy * (1 - r / 27) * bias
        b, c, t = 5.1 / (4 * math.pi ** 2), 5 / math.pi, 1 / (8 * math.pi)
        loss = (x2 - b * x1 ** 2 + c * x1 - 6) ** 2 + 10 * (1 - t) * np.cos(x1) + 10
        return Evaluation(np.log1p(loss), 0.1 + r)

    def best_known(self, instance: str) -> float:
        return math.log1p(0.397887)


def make_benchmark() -> BraninFamily:
    """The factory metaopt calls for ``python:branin_family:make_benchmark``."""
    return BraninFamily()
