"""Budgets: in full-evaluation equivalents (Σ r/r_max, default), in cost units (simulated seconds),
or in typical costs of the instance (for comparisons under equal cost across instances whose costs
differ by orders of magnitude; resolved per instance into cost units, see
:func:`metaopt.references.resolve_budget`)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from metaopt.errors import UsageError

BudgetUnit = Literal["full_evals", "cost", "typical_cost"]

_PATTERN = re.compile(r"^\s*(?P<num>\d+(\.\d*)?|\.\d+)\s*(?P<unit>dc|d|s|c)?\s*$")


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
        """Parse ``30d`` (30 × d full evaluations), ``100`` (full evaluations), ``3600s`` (cost units),
        ``100c`` (the cost of 100 typical full evaluations of the instance) or ``30dc`` (of 30 × d)."""
        if isinstance(spec, Budget):
            return spec
        text = str(spec)
        match = _PATTERN.match(text)
        if not match:
            raise UsageError(
                f"budget {text!r} is not understood; use e.g. '30d' (30 x d full evaluations), "
                "'100' (full evaluations), '3600s' (cost units, i.e. simulated seconds), '30dc' or '100c' (the cost "
                "of 30 x d or 100 typical full evaluations of the instance)"
            )
        num = float(match["num"])
        unit = match["unit"]
        if unit == "d":
            return cls(num * d, "full_evals", text.strip())
        if unit == "s":
            return cls(num, "cost", text.strip())
        if unit in ("c", "dc"):
            return cls(num * (d if unit == "dc" else 1), "typical_cost", text.strip())
        return cls(num, "full_evals", text.strip())

    def in_cost_units(self, typical_cost: float) -> "Budget":
        """A typical-cost budget as a cost budget, given the instance's typical full-evaluation cost."""
        if self.unit != "typical_cost":
            return self
        return Budget(self.amount * typical_cost, "cost", self.spec)

    def fraction(self, budget_used: float, cost_used: float) -> float:
        """Progress t = spent / B in the budget's own unit."""
        if self.unit == "typical_cost":
            raise ValueError(f"budget {self.spec}: resolve it per instance first (Budget.in_cost_units)")
        spent = budget_used if self.unit == "full_evals" else cost_used
        return spent / self.amount

    def __str__(self) -> str:
        unit = {"full_evals": "full evaluations", "cost": "cost units", "typical_cost": "typical evaluation costs"}[self.unit]
        return f"{self.amount:g} {unit}" + (f" ({self.spec})" if self.spec else "")
