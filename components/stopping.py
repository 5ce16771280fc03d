"""Stopping rules: when a run ends. The budget rule always applies; others may end a run earlier."""

from __future__ import annotations

from abc import ABC, abstractmethod

from metaopt.context import RunState
from metaopt.registry import register

BUDGET_TOLERANCE = 1e-9


class StoppingRule(ABC):
    """Checked after every batch; returns the stop reason, or None to go on."""

    @abstractmethod
    def check(self, state: RunState) -> str | None:
        ...


@register("stopping_rules", "budget", description="stop when the budget is spent (and only then)")
class BudgetRule(StoppingRule):
    def check(self, state: RunState) -> str | None:
        return "budget" if state.t >= 1 - BUDGET_TOLERANCE else None
