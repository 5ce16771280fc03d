"""Budgets and their accounting.

A budget is given in full-evaluation equivalents (Σ r/r_max, default), in cost units (simulated
seconds), or in typical costs of the instance (for comparisons under equal cost across instances
whose costs differ by orders of magnitude; resolved per instance into cost units, see
:func:`metaopt.core.references.resolve_budget`). :class:`Budget` is what was asked for;
:class:`BudgetMeter` is the account of one run against it (docs/design.md §4), kept by the optimizer
loop and by the peer runs alike.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike

from metaopt.core.errors import UsageError

BudgetUnit = Literal["full_evals", "cost", "typical_cost", "full_evals_per_d"]

DURATION_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str) -> float:
    """A duration such as ``90m``, ``2.5h`` or ``600s`` (a bare number: seconds) in seconds; NaN unless
    it is one, finite and >= 0. Read for ``--stop-after``, ``--sim-time`` and ``evaluation.clock.time_limit``."""
    unit = DURATION_UNITS.get(text[-1:], None)
    try:
        seconds = float(text[:-1] if unit else text) * (unit or 1.0)
    except ValueError:
        return math.nan
    return seconds if math.isfinite(seconds) and seconds >= 0 else math.nan


BUDGET_TOLERANCE = 1e-9
"""Slack for floating-point sums in budget checks: an evaluation fits if the spending stays within
B + BUDGET_TOLERANCE, and a run whose spent fraction reaches 1 - BUDGET_TOLERANCE has spent its budget."""

def full_evaluations(fidelity: Any, r_max: float) -> Any:
    """What evaluations at ``fidelity`` (a number or an array) spend in full-evaluation equivalents: r/r_max.

    The one place the share is computed: the budget account (:meth:`BudgetMeter.step`), the trace's
    ``budget_used`` column and the default cost of an evaluation told without one all call it.
    """
    return fidelity / r_max


_PATTERN = re.compile(r"^\s*(?P<num>\d+(\.\d*)?|\.\d+)\s*(?P<unit>dc|d|s|c)?\s*$")


def split_spec(spec: str | float | int) -> tuple[float, str]:
    """A budget spec's number and unit suffix: ``30dc`` -> (30.0, "dc"), ``100`` -> (100.0, "").

    The suffix is one of ``d``, ``s``, ``c``, ``dc`` or empty (see :meth:`Budget.parse`);
    UsageError when ``spec`` is not a budget.
    """
    text = str(spec)
    match = _PATTERN.match(text)
    if not match:
        raise UsageError(
            f"budget {text!r} is not understood; use e.g. '30d' (30 x d full evaluations), "
            "'100' (full evaluations), '3600s' (cost units, i.e. simulated seconds), '30dc' or '100c' (the cost "
            "of 30 x d or 100 typical full evaluations of the instance)"
        )
    return float(match["num"]), match["unit"] or ""


@dataclass(frozen=True)
class Budget:
    """A resolved budget: ``amount`` of ``unit``; ``spec`` keeps what the user wrote (e.g. ``30d``).

    ``max_evals`` (None: no cap) is a second limit: the run makes at most this many evaluations,
    whatever is left of ``amount`` (stop reason ``eval_cap``). A meta-search sets it (``meta.max_evals``)
    so that a design drawing tens of thousands of cheap low-fidelity evaluations, whose proposal work
    grows with each one, cannot hold up a batch of trials for hours; a run that stays under the cap is
    the same run with or without it."""

    amount: float
    unit: BudgetUnit = "full_evals"
    spec: str = ""
    max_evals: int | None = None

    def __post_init__(self) -> None:
        if not (self.amount > 0 and math.isfinite(self.amount)):
            raise UsageError(f"budget must be a positive, finite amount, got {self.spec or self.amount}")
        if self.max_evals is not None and (isinstance(self.max_evals, bool) or not isinstance(self.max_evals, int)
                                           or self.max_evals < 1):
            raise UsageError(f"max_evals: must be an integer >= 1, got {self.max_evals!r}")

    @classmethod
    def parse(cls, spec: Budget | str | float, d: float | None) -> Budget:
        """Parse ``30d`` (30 × d full evaluations), ``100`` (full evaluations), ``3600s`` (cost units),
        ``100c`` (the cost of 100 typical full evaluations of the instance) or ``30dc`` (of 30 × d).

        ``d`` None (a pooled benchmark, whose instances' dimensions differ): ``30d`` stays 30 full
        evaluations per hyperparameter (unit ``full_evals_per_d``), resolved per instance by
        :meth:`for_dimension` before a run starts; ``30dc`` is not allowed."""
        if isinstance(spec, Budget):
            return spec if d is None else spec.for_dimension(d)
        num, unit = split_spec(spec)
        text = str(spec).strip()
        if d is None and unit == "dc":
            raise UsageError(f"budget {text}: a budget in typical costs per hyperparameter needs one benchmark's d")
        if unit == "d":
            budget = cls(num, "full_evals_per_d", text) if d is None else cls(num * d, "full_evals", text)
        elif unit == "s":
            budget = cls(num, "cost", text)
        elif unit in ("c", "dc"):
            budget = cls(num * (d if unit == "dc" and d is not None else 1), "typical_cost", text)
        else:
            budget = cls(num, "full_evals", text)
        if budget.unit == "full_evals" and budget.amount < 1:
            raise UsageError(f"budget {text} is {budget.amount:g} full evaluations; a run needs at least one")
        return budget

    def for_dimension(self, d: float) -> "Budget":
        """A per-hyperparameter budget (``full_evals_per_d``) for an instance with ``d`` hyperparameters;
        any other budget as it is."""
        return (Budget(self.amount * d, "full_evals", self.spec, self.max_evals) if self.unit == "full_evals_per_d"
                else self)

    def scaled(self, factor: float) -> "Budget":
        """This budget times ``factor`` (0 < factor <= 1: a multi-fidelity meta-search's shorter inner
        runs), its spec rewritten to match (``30d`` × 1/3 -> ``10d``); the evaluation cap stays as it is."""
        number, unit = split_spec(self.spec) if self.spec else (self.amount, "")
        return Budget(self.amount * factor, self.unit, f"{number * factor:.6g}{unit}", self.max_evals)

    def in_cost_units(self, typical_cost: float) -> "Budget":
        """A typical-cost budget as a cost budget, given the instance's typical full-evaluation cost."""
        if self.unit != "typical_cost":
            return self
        return Budget(self.amount * typical_cost, "cost", self.spec, self.max_evals)

    @property
    def spent_column(self) -> str:
        """The trace column (and summary field) that measures what a run spent of this budget:
        ``budget_used`` (full-evaluation equivalents) for a full-evaluation budget, ``cost_used`` for a
        cost or typical-cost budget. The one owner of that choice: the budget account, the meta-objective,
        the evaluation's tables and the report read the column it names."""
        return "budget_used" if self.unit == "full_evals" else "cost_used"

    def spent(self, budget_used: float, cost_used: float) -> float:
        """What a run that spent ``budget_used`` full-evaluation equivalents and ``cost_used`` cost units
        spent of this budget, in its own unit (:attr:`spent_column`)."""
        return budget_used if self.spent_column == "budget_used" else cost_used

    def fraction(self, budget_used: float, cost_used: float) -> float:
        """Progress t = spent / B in the budget's own unit."""
        if self.unit in ("typical_cost", "full_evals_per_d"):
            raise ValueError(f"budget {self.spec}: resolve it per instance first (metaopt.core.references.resolve_budget)")
        return self.spent(budget_used, cost_used) / self.amount

    def __str__(self) -> str:
        unit = {"full_evals": "full evaluations", "cost": "cost units", "typical_cost": "typical evaluation costs",
                "full_evals_per_d": "full evaluations per hyperparameter"}[self.unit]
        cap = f", at most {self.max_evals} evaluations" if self.max_evals is not None else ""
        return f"{self.amount:g} {unit}" + (f" ({self.spec})" if self.spec else "") + cap


TIME_LIMIT_FORMS = ("a simulated duration > 0 such as 90m, 2.5h or 600s (a bare number: seconds), or the time of "
                    "typical full evaluations of each instance: 30dc (30 x d) or 100c")
"""What a simulated-clock time limit may be: the end of the one error line for any other text."""


def is_time_limit(text: str) -> bool:
    """Whether ``text`` is a simulated-clock time limit (:data:`TIME_LIMIT_FORMS`): a duration > 0 or a
    typical-cost budget > 0 (``30dc``, ``100c``). Checked by the study fields ``evaluation.clock`` and
    ``meta.clock`` ``time_limit`` and by ``metaopt run --sim-time`` before anything runs."""
    if parse_duration(text) > 0:
        return True
    try:
        amount, unit = split_spec(text)
    except UsageError:
        return False
    return unit in ("c", "dc") and amount > 0


def parse_time_limit(text: str, d: float | None) -> float | Budget:
    """A time limit that :func:`is_time_limit` accepts: simulated seconds, or a typical-cost budget that
    :func:`metaopt.core.references.resolve_time_limit` resolves to seconds on each instance. Called
    when a study's clock is read and by ``metaopt run --sim-time``; UsageError for ``30dc`` when ``d``
    is None (a pooled benchmark)."""
    seconds = parse_duration(text)
    return seconds if seconds > 0 else Budget.parse(text, d)


class BudgetMeter:
    """The budget account of one run: what it has spent, what is left, what still fits.

    Created at the start of a run (by the optimizer loop and by a peer run) from the run's resolved
    budget (full evaluations or cost units; typical-cost budgets are resolved per instance first,
    :func:`metaopt.core.references.resolve_budget`) and the problem's largest fidelity ``r_max``.
    An evaluation at fidelity r spends r/r_max full-evaluation equivalents (a promoted configuration
    pays its full r again) and its cost. A run never spends more than B + :data:`BUDGET_TOLERANCE`:

    - full-evaluation budget: before a batch is evaluated, :meth:`how_many_fit` says how long a
      prefix of it fits into what is left; the rest is not evaluated;
    - cost budget: a cost is known only once evaluated, so the whole batch is evaluated and
      :meth:`affordable` says how long a prefix of it finished within the budget; the rest finished
      after the budget was spent and is discarded unseen.

    After the kept evaluations are recorded, :meth:`charge` books them. A budget with ``max_evals``
    also caps the count: both methods keep a batch's prefix within what is left of it.
    """

    def __init__(self, budget: Budget, r_max: float) -> None:
        if budget.unit == "typical_cost":
            raise ValueError(f"budget {budget.spec}: resolve it per instance first (Budget.in_cost_units)")
        self.budget = budget
        self.r_max = r_max
        self.budget_used = 0.0
        """Full-evaluation equivalents spent so far (Σ r/r_max), whatever the budget's unit."""
        self.cost_used = 0.0
        """Cost units spent so far (Σ cost), whatever the budget's unit."""
        self.n_evals = 0
        """Evaluations booked so far."""
        self.limit = "budget"
        """The limit that cut the last batch cut short (:meth:`within_cap`): ``budget``, or ``eval_cap``
        when the budget alone would have allowed more. A run that ends because nothing more fits takes it
        as its stop reason."""

    def step(self, fidelity: float) -> float:
        """Full-evaluation equivalents one evaluation at ``fidelity`` spends: r/r_max."""
        return full_evaluations(fidelity, self.r_max)

    def left(self) -> float:
        """What is left of the budget, in its own unit (at least -BUDGET_TOLERANCE)."""
        return self.budget.amount - self.budget.spent(self.budget_used, self.cost_used)

    def how_many_fit(self, n: int, fidelity: float) -> int:
        """Called before a batch of ``n`` evaluations at ``fidelity`` is evaluated.

        Returns how many of them (a prefix of the batch, 0..n) to evaluate: for a full-evaluation
        budget, as many as fit into what is left; for a cost budget all ``n`` (their costs are not
        known yet: :meth:`affordable` decides once they are).
        """
        fits = n
        if self.budget.unit == "full_evals":
            left = self.left()
            fits = max(min(int(np.floor((left + BUDGET_TOLERANCE) / self.step(fidelity))) if left > 0 else 0, n), 0)
        return self.within_cap(n, fits)

    def within_cap(self, n: int, fits: int) -> int:
        """How many of a batch of ``n`` evaluations, of which the budget allows ``fits``, the evaluation
        cap allows too; records which limit cut the batch, if one did (:attr:`limit`). Called by
        :meth:`how_many_fit` and :meth:`affordable`, and by the asynchronous loop, which decides itself
        what its budget allows (counting the trials running)."""
        kept = min(fits, self.evals_left())
        if kept < n:
            self.limit = "eval_cap" if kept < fits else "budget"
        return kept

    def evals_left(self) -> int:
        """How many more evaluations the budget's ``max_evals`` allows (a very large number without one)."""
        return 2**62 if self.budget.max_evals is None else max(self.budget.max_evals - self.n_evals, 0)

    def affordable(self, costs: ArrayLike) -> int:
        """Called after a batch was evaluated, with the costs of its evaluations in batch order.

        Returns how many of them (a prefix, 0..len(costs)) finished within the budget: for a cost
        budget, the evaluations whose cumulative cost stays within what is left; for a
        full-evaluation budget all of them (:meth:`how_many_fit` has already decided).
        """
        costs = np.asarray(costs, dtype=float)
        fits = len(costs)
        if self.budget.unit == "cost":
            fits = int(np.searchsorted(np.cumsum(costs), self.left() + BUDGET_TOLERANCE, side="right"))
        return self.within_cap(len(costs), fits)

    def charge(self, fidelity: float, costs: ArrayLike) -> None:
        """Book a batch of evaluations at one ``fidelity`` with their ``costs`` (the kept ones only).

        Called once per batch, after the evaluations are recorded: adds len(costs)·r/r_max to
        :attr:`budget_used` and Σ costs to :attr:`cost_used`.
        """
        costs = np.asarray(costs, dtype=float)
        self.budget_used += len(costs) * self.step(fidelity)
        self.cost_used += float(costs.sum())
        self.n_evals += len(costs)

    @property
    def fraction_spent(self) -> float:
        """Progress t = spent / B in the budget's own unit (may exceed 1 by the tolerance)."""
        return self.budget.fraction(self.budget_used, self.cost_used)

    @property
    def exhausted_by(self) -> str | None:
        """``budget`` once the run has spent its budget, up to :data:`BUDGET_TOLERANCE` of it; else
        ``eval_cap`` once it has made its ``max_evals`` evaluations; else None."""
        if self.fraction_spent >= 1 - BUDGET_TOLERANCE:
            return "budget"
        return "eval_cap" if self.evals_left() == 0 else None

    @property
    def exhausted(self) -> bool:
        """True once the run may evaluate nothing more (:attr:`exhausted_by`)."""
        return self.exhausted_by is not None
