"""Budgets: in full-evaluation equivalents (Σ r/r_max, default) or in cost units (simulated seconds)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from metaopt.errors import UsageError

BudgetUnit = Literal["full_evals", "cost"]

_PATTERN = re.compile(r"^\s*(?P<num>\d+(\.\d*)?|\.\d+)\s*(?P<unit>d|s)?\s*$")


@dataclass(frozen=True)
class Budget:
    """A resolved budget: ``amount`` of ``unit``; ``spec`` keeps what the user wrote (e.g. ``30d``)."""

    amount: float
    unit: BudgetUnit = "full_evals"
    spec: str = ""

    def __post_init__(self) -> None:
        if not self.amount > 0:
            raise UsageError(f"budget must be positive, got {self.spec or self.amount}")

    @classmethod
    def parse(cls, spec: str | float | int, d: int) -> "Budget":
        """Parse ``30d`` (30 × d full evaluations), ``100`` (full evaluations) or ``3600s`` (cost units)."""
        if isinstance(spec, Budget):
            return spec
        text = str(spec)
        match = _PATTERN.match(text)
        if not match:
            raise UsageError(
                f"budget {text!r} is not understood; use e.g. '30d' (30 x d full evaluations), "
                "'100' (full evaluations) or '3600s' (cost units, i.e. simulated seconds)"
            )
        num = float(match["num"])
        unit = match["unit"]
        if unit == "d":
            return cls(num * d, "full_evals", text.strip())
        if unit == "s":
            return cls(num, "cost", text.strip())
        return cls(num, "full_evals", text.strip())

    def fraction(self, budget_used: float, cost_used: float) -> float:
        """Progress t = spent / B in the budget's own unit."""
        spent = budget_used if self.unit == "full_evals" else cost_used
        return spent / self.amount

    def __str__(self) -> str:
        unit = "full evaluations" if self.unit == "full_evals" else "cost units"
        return f"{self.amount:g} {unit}" + (f" ({self.spec})" if self.spec else "")
