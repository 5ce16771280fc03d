"""A scenario without its fidelity: ``full:<benchmark>`` (e.g. ``full:synthetic:mlp``) evaluates every
configuration at the member's full fidelity only, as a user's objective without a fidelity
(:func:`metaopt.minimize` without ``fidelity=``) is evaluated.

It is the same benchmark with a fidelity of a single level (r_min = r_max = the member's r_max): the
same instances and split, search space, loss and cost, and the same regret references (an
instance's reference is made of full-fidelity evaluations, so it is the member's own:
:meth:`FullFidelityBenchmark.owner`). A multi-fidelity design's schedule has one level on it, and a
preset that depends on the fidelity takes the form it has for a problem without one (``bohb``
proposes one configuration at a time). Meta-optimizations over such scenarios design the optimizer
for problems without a fidelity.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from metaopt.core.benchmarks.base import Benchmark, Evaluation, Fidelity
from metaopt.core.errors import UsageError


class FullFidelityBenchmark(Benchmark):
    """``member`` evaluated at its full fidelity only; see the module docstring."""

    def __init__(self, member: Benchmark) -> None:
        if not isinstance(member.fidelity, Fidelity):  # a pooled benchmark has no single fidelity
            raise UsageError(f"full:{member.name}: the member must be a single scenario")
        self.member = member
        self.name = f"full:{member.name}"
        self.instances = list(member.instances)
        self.train_instances = list(member.train_instances)
        self.test_instances = list(member.test_instances)
        self.split_rule = member.split_rule
        self.search_space = member.search_space
        top = member.fidelity
        self.fidelity = Fidelity(top.name, top.r_max, top.r_max, top.is_int)
        self.loss_name = member.loss_name
        self.cost_name = member.cost_name
        self.cheap_end = dict(member.cheap_end)
        self.reference_samples = member.reference_samples
        self.reference_refine_rounds = member.reference_refine_rounds

    def evaluate(self, instance: str, configs: Sequence[Mapping[str, Any]],
                 fidelities: Sequence[float] | np.ndarray) -> Evaluation:
        """The member's evaluation; every fidelity must be the full one."""
        r = self._check_fidelities(fidelities, len(configs))
        return self.member.evaluate(instance, configs, r)

    def owner(self, instance: str) -> tuple[Benchmark, str]:
        """The member (its regret references are made of full-fidelity evaluations, the only ones here)."""
        return self.member.owner(instance)

    def instance_features(self, instance: str) -> list[float]:
        return self.member.instance_features(instance)

    def best_known(self, instance: str) -> float | None:
        return self.member.best_known(instance)

    def fingerprint(self) -> str:
        return "full:" + self.member.fingerprint()
