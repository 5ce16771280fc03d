"""A benchmark made of a user's objective function and ConfigSpace search space (``metaopt.minimize``).

The objective is called once per configuration: ``objective(config, fidelity)`` with ``config`` a
dict of the searched hyperparameters (inactive ones absent) and ``fidelity`` the value of the
multi-fidelity parameter (None when the problem has none). It returns the loss (a number; lower is
better) or a dict ``{"loss": ..., "cost": ...}``. Without a cost, an evaluation costs the
fidelity's share of a full one, r / r_max — deterministic, unlike a measured time, so a run stays a
pure function of its inputs; return a cost (e.g. the fit time) for cost budgets and cost-aware
components.

Failures follow Optuna's rule: an exception in the objective propagates, unless its type is one
the caller lists in ``catch``; a listed exception, or a NaN or ±inf loss, gives a *failed
evaluation* (loss NaN, nominal cost), which is archived and charged to the budget but never becomes
the incumbent. A loss that is not a real number (a bool, a string, None) is a programming error and
raises :class:`UsageError` naming the value.
"""

from __future__ import annotations

import logging
import math
import numbers
from typing import Any, Callable, Mapping, Sequence

import numpy as np
from ConfigSpace import ConfigurationSpace
from ConfigSpace.hyperparameters import (
    CategoricalHyperparameter,
    Constant,
    OrdinalHyperparameter,
    UniformFloatHyperparameter,
    UniformIntegerHyperparameter,
)

from metaopt.core.benchmarks.base import Benchmark, Evaluation, Fidelity
from metaopt.core.budget import full_evaluations
from metaopt.core.errors import UsageError

logger = logging.getLogger(__name__)

Objective = Callable[[dict[str, Any], float | None], Any]
SUPPORTED = (UniformFloatHyperparameter, UniformIntegerHyperparameter, CategoricalHyperparameter,
             OrdinalHyperparameter, Constant)
NO_FIDELITY = Fidelity("fidelity", 1.0, 1.0)
"""The fidelity of a problem without one: a single level, never passed to the objective."""
INSTANCE = "0"


def make_fidelity(spec: Fidelity | tuple | None, space: ConfigurationSpace) -> Fidelity | None:
    """``(name, r_min, r_max)`` (integers give an integer fidelity), a :class:`Fidelity` or None, checked
    against ``space``; UsageError naming the field otherwise."""
    if spec is None or isinstance(spec, Fidelity):
        fidelity = spec
    else:
        try:
            name, r_min, r_max = spec
        except (TypeError, ValueError):
            raise UsageError(f"fidelity: expected (name, r_min, r_max), got {spec!r}") from None
        if not isinstance(name, str) or not all(isinstance(r, (int, float)) and not isinstance(r, bool)
                                                for r in (r_min, r_max)):
            raise UsageError(f"fidelity: expected (name: str, r_min: number, r_max: number), got {spec!r}")
        if not (0 < r_min <= r_max) or not math.isfinite(r_max):
            raise UsageError(f"fidelity {name}: need 0 < r_min <= r_max, got r_min={r_min}, r_max={r_max}")
        is_int = isinstance(r_min, int) and isinstance(r_max, int)
        fidelity = Fidelity(name, r_min, r_max, is_int=True) if is_int else Fidelity(name, float(r_min), float(r_max))
    if fidelity is not None and fidelity.name in space:
        raise UsageError(f"fidelity {fidelity.name}: it is also a hyperparameter of the search space; "
                         "the fidelity must not be searched")
    return fidelity


def check_space(space: Any) -> ConfigurationSpace:
    """``space`` if it is a ConfigurationSpace of supported hyperparameters; UsageError naming the first other one."""
    if not isinstance(space, ConfigurationSpace):
        raise UsageError(f"space: expected a ConfigSpace ConfigurationSpace, got {type(space).__name__}")
    if len(space) == 0:
        raise UsageError("space: the search space has no hyperparameters")
    for hp in space.values():
        if not isinstance(hp, SUPPORTED):
            raise UsageError(f"space: hyperparameter {hp.name!r} is a {type(hp).__name__}; supported: uniform "
                             "floats and integers (log or not), categoricals, ordinals and constants")
    return space


def check_cheap_end(cheap_end: Mapping[str, str] | None, space: ConfigurationSpace) -> dict[str, str]:
    """``cheap_end`` as a dict, each key a numeric hyperparameter of ``space`` and each value "lower"/"upper"."""
    checked = dict(cheap_end or {})
    for name, end in checked.items():
        if name not in space or not isinstance(space[name], (UniformFloatHyperparameter, UniformIntegerHyperparameter)):
            raise UsageError(f"cheap_end: {name!r} is not a numeric hyperparameter of the space")
        if end not in ("lower", "upper"):
            raise UsageError(f"cheap_end: {name}={end!r}; allowed: 'lower' or 'upper'")
    return checked


def as_loss(value: Any, field: str) -> float:
    """``value`` as a float if it is a real number (NaN and ±inf included: a failed evaluation);
    UsageError naming ``field`` and the value otherwise (a bool, a string, None, ...)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise UsageError(f"{field} must be a real number, got {value!r}")
    return float(value)


def as_losses(values: Any, field: str) -> np.ndarray:
    """A sequence of losses as a float array, each checked by :func:`as_loss` (a numeric array as it is)."""
    if isinstance(values, np.ndarray) and values.dtype.kind in "fiu":
        return values.astype(float).reshape(-1)
    if isinstance(values, (str, bytes)) or not isinstance(values, (Sequence, np.ndarray)):
        raise UsageError(f"{field}: expected a sequence of numbers, got {values!r}")
    return np.array([as_loss(v, field) for v in values], dtype=float)


def objective_result(value: Any, default_cost: float) -> tuple[float, float]:
    """(loss, cost) of what the objective returned; NaN/inf losses stay (a failed evaluation)."""
    if isinstance(value, Mapping):
        if "loss" not in value:
            raise UsageError(f"objective: a returned dict needs a 'loss' key, got keys {sorted(value)}")
        loss, cost = value["loss"], value.get("cost", default_cost)
    else:
        loss, cost = value, default_cost
    loss, cost = as_loss(loss, "objective: the loss"), as_loss(cost, "objective: the cost")
    if not (math.isfinite(cost) and cost >= 0):
        raise UsageError(f"objective: cost must be a finite number >= 0, got {cost!r}")
    return loss, cost


def call_objective(objective: Objective, config: dict[str, Any], fidelity: float | None, default_cost: float,
                   catch: tuple[type[BaseException], ...] = ()) -> tuple[float, float, str | None]:
    """One evaluation: (loss, cost, error).

    An exception of a type in ``catch`` is a failed evaluation (NaN loss, ``default_cost``, the
    error's text); any other exception propagates (as in Optuna). A return value that is not a
    real number (or a dict with one as ``loss``) raises UsageError. A module-level function so that
    Dask workers can run it (``metaopt.minimize(workers=N)``).
    """
    try:
        value = objective(config, fidelity)
    except catch as err:  # a failure the user declared expected: recorded, the run goes on
        return math.nan, default_cost, f"{type(err).__name__}: {err}"
    loss, cost = objective_result(value, default_cost)
    return loss, cost, None


class FunctionBenchmark(Benchmark):
    """One problem (instance ``"0"``): a user's objective over a user's search space.

    It has no known optimum, so runs on it carry no normalized regret. :meth:`evaluate` calls the
    objective one configuration at a time, in order; ``metaopt.minimize`` may instead spread a
    batch over Dask workers with :func:`call_objective`.
    """

    def __init__(self, objective: Objective, space: ConfigurationSpace, fidelity: Fidelity | tuple | None = None,
                 name: str | None = None, cheap_end: Mapping[str, str] | None = None,
                 catch: tuple[type[BaseException], ...] = ()) -> None:
        if not callable(objective):
            raise UsageError(f"objective: expected a callable objective(config, fidelity), got {type(objective).__name__}")
        self.objective = objective
        self.search_space = check_space(space)
        declared = make_fidelity(fidelity, self.search_space)
        self.has_fidelity = declared is not None
        self.fidelity = declared or NO_FIDELITY
        self.name = f"function:{name or getattr(objective, '__name__', 'objective')}"
        self.instances, self.train_instances, self.test_instances = [INSTANCE], [INSTANCE], []
        self.split_rule = "one problem: the user's function"
        self.loss_name, self.cost_name = "loss", "cost"
        self.cheap_end = check_cheap_end(cheap_end, self.search_space)
        self.catch = catch
        """The exception types that make a failed evaluation instead of propagating."""
        self.errors: list[str] = []
        """The error text of each failed evaluation so far, in order."""

    def default_cost(self, fidelity: float) -> float:
        """The cost of an evaluation whose objective returns none: r / r_max."""
        return full_evaluations(fidelity, self.fidelity.r_max)

    def objective_fidelity(self, fidelity: float) -> float | None:
        """What the objective receives: the fidelity (an int for an integer one), or None without one."""
        if not self.has_fidelity:
            return None
        return int(fidelity) if self.fidelity.is_int else float(fidelity)

    def record(self, outcomes: Sequence[tuple[float, float, str | None]]) -> Evaluation:
        """The batch's Evaluation from per-configuration outcomes (:meth:`record_one` each)."""
        pairs = [self.record_one(outcome) for outcome in outcomes]
        return Evaluation(np.array([p[0] for p in pairs], dtype=float), np.array([p[1] for p in pairs], dtype=float))

    def record_one(self, outcome: tuple[float, float, str | None]) -> tuple[float, float]:
        """(loss, cost) of one outcome of :func:`call_objective`, a failure's loss NaN; called once per
        evaluation as it is told. A failure is logged as a warning and kept in :attr:`errors`."""
        loss, cost, error = outcome
        if error is not None or not math.isfinite(loss):
            text = error or f"objective returned loss {loss}"
            self.errors.append(text)
            logger.warning("failed evaluation (recorded with loss NaN): %s", text)
        return (loss if math.isfinite(loss) else math.nan), cost

    def evaluate(self, instance: str, configs: Sequence[Mapping[str, Any]], fidelities: Sequence[float] | np.ndarray) -> Evaluation:
        r = self._check_fidelities(fidelities, len(configs))
        return self.record([call_objective(self.objective, dict(c), self.objective_fidelity(f), self.default_cost(f),
                                           self.catch) for c, f in zip(configs, r)])
