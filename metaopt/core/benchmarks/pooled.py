"""Several scenarios as one benchmark: ``pooled:<benchmark>+<benchmark>+...`` (e.g.
``pooled:yahpo:lcbench+yahpo:rbv2_xgboost+yahpo:rbv2_rpart``), for a meta-optimization whose
training instances come from several scenarios (one design for all of them).

An instance is named ``<scenario>:<instance of that scenario>`` (``lcbench:3945``); its problem is
the member scenario's own, with that scenario's search space, fidelity, d, loss and cost, so an
inner run on it is exactly a run on the member. The train/test split is each member's own. What
differs between the members has no single value here: :attr:`PooledBenchmark.search_space` and
:attr:`PooledBenchmark.fidelity` fail with a message, :attr:`PooledBenchmark.d` is None (a budget
in ``d`` is resolved per instance, :meth:`metaopt.core.budget.Budget.parse`). SMAC tells the scenarios
apart by the instance features (:meth:`PooledBenchmark.instance_features`: one indicator per
member, after the regret references).
"""

from __future__ import annotations

from typing import Any, Literal, Mapping, NoReturn, Sequence

import numpy as np

from metaopt.core.benchmarks.base import Benchmark, Evaluation, Problem
from metaopt.core.errors import UsageError


class PooledBenchmark(Benchmark):
    """The instances of several member benchmarks under one name; see the module docstring."""

    def __init__(self, members: Sequence[Benchmark]) -> None:
        if len(members) < 2:
            raise UsageError("a pooled benchmark needs at least two members, e.g. "
                             "pooled:yahpo:lcbench+yahpo:rbv2_xgboost")
        self.members: dict[str, Benchmark] = {}
        for member in members:
            if isinstance(member, PooledBenchmark):
                raise UsageError(f"a pooled benchmark's member cannot itself be pooled ({member.name})")
            scenario = member.name.partition(":")[2] or member.name
            if scenario in self.members:
                raise UsageError(f"pooled benchmark: two members are named {scenario!r} "
                                 f"({self.members[scenario].name} and {member.name}); pool distinct scenarios")
            self.members[scenario] = member
        self.name = "pooled:" + "+".join(m.name for m in members)
        self.instances = self._named("all")
        self.train_instances = self._named("train")
        self.test_instances = self._named("test")
        self.split_rule = "each member's own split (" + "; ".join(
            f"{s}: {m.split_rule}" for s, m in self.members.items()) + ")"
        self.loss_name = "/".join(dict.fromkeys(m.loss_name for m in members))
        self.cost_name = "/".join(dict.fromkeys(m.cost_name for m in members))
        self.cheap_end = {}

    def _named(self, split: Literal["train", "test", "all"]) -> list[str]:
        return [f"{s}:{i}" for s, m in self.members.items() for i in m.instances_of(split)]

    def owner(self, instance: str) -> tuple[Benchmark, str]:
        """The single-scenario benchmark that defines ``instance`` (for its regret reference) and the
        instance's name there: the member's own owner (``full:`` members defer to their scenario)."""
        member, inner = self._member(instance)
        return member.owner(inner)

    def _member(self, instance: str) -> tuple[Benchmark, str]:
        """The member benchmark of ``instance`` and the instance's name there."""
        if str(instance) not in self.instances:
            self._unknown(instance)
        # the member whose scenario name prefixes the instance (a scenario may itself hold a colon: full:synthetic:mlp)
        scenario = max((s for s in self.members if str(instance).startswith(s + ":")), key=len)
        return self.members[scenario], str(instance)[len(scenario) + 1:]

    def _unknown(self, instance: str) -> NoReturn:
        shown = ", ".join(self.instances[:20]) + (" ..." if len(self.instances) > 20 else "")
        raise UsageError(f"unknown instance {instance!r} for benchmark {self.name}; instances are "
                         f"<scenario>:<instance>, e.g. {shown}")

    def problem(self, instance: str | int) -> Problem:
        """The member scenario's problem of ``instance`` (its search space, fidelity and d)."""
        member, inner = self._member(str(instance))
        return member.problem(inner)

    def evaluate(self, instance: str, configs: Sequence[Mapping[str, Any]], fidelities: Sequence[float] | np.ndarray) -> Evaluation:
        member, inner = self._member(instance)
        return member.evaluate(inner, configs, fidelities)

    def instance_features(self, instance: str) -> list[float]:
        """One indicator per member (1.0 for the member ``instance`` belongs to), in member order."""
        member, _ = self._member(instance)
        return [1.0 if m is member else 0.0 for m in self.members.values()]

    @property
    def d(self) -> int | None:  # type: ignore[override]
        """None: the members' dimensions differ (budgets in ``d`` are resolved per instance)."""
        return None

    @property
    def search_space(self):
        raise UsageError(f"{self.name} has no single search space (each member has its own); "
                         "use the problem of an instance")

    @property
    def fidelity(self):
        raise UsageError(f"{self.name} has no single fidelity (each member has its own); "
                         "use the problem of an instance")

    def fingerprint(self) -> str:
        return "pooled:" + "+".join(m.fingerprint() for m in self.members.values())

    def describe(self) -> dict[str, Any]:
        return {"benchmark": self.name, "instances": len(self.instances), "train": len(self.train_instances),
                "test": len(self.test_instances), "d": "/".join(str(m.d) for m in self.members.values()),
                "fidelity": "per member", "loss": self.loss_name, "cost": self.cost_name}
