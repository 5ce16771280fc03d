"""One peer run's accounting (:class:`PeerRun`) and the value helpers every peer's translation uses.

Kept apart from :mod:`metaopt.engine.peers` (the registry, which loads each library's runner) so that
a runner in its own module (:mod:`metaopt.engine.syne_peers`) imports it without a cycle.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np
from ConfigSpace import ConfigurationSpace
from ConfigSpace.hyperparameters import UniformFloatHyperparameter, UniformIntegerHyperparameter

from metaopt.core.archive import Archive
from metaopt.core.benchmarks.base import Problem
from metaopt.core.budget import Budget, BudgetMeter
from metaopt.core.space_codec import SpaceCodec
from metaopt.engine.loop import ProgressFn


# -- one run's accounting ---------------------------------------------------------------------
class PeerRun:
    """Budget account (:attr:`meter`) and archive of one peer run.

    A peer's runner asks its library for one configuration at a time and calls :meth:`evaluate`,
    until :attr:`done`. ``settings`` collects what the runner wants in ``summary["config"]``.
    """

    def __init__(self, problem: Problem, budget: Budget, progress: ProgressFn | None = None) -> None:
        self.problem = problem
        self.budget = budget
        self.progress = progress
        self.codec = SpaceCodec(problem.search_space)
        self.archive = Archive(self.codec.dim)
        self.meter = BudgetMeter(budget, problem.fidelity.r_max)
        self.stop_reason: str | None = None
        self.settings: dict[str, Any] = {}
        self.spent: list[float] = []
        """The fidelity each recorded result charged (see :meth:`record`)."""
        self._config_ids: dict[bytes, int] = {}

    @property
    def done(self) -> bool:
        return self.stop_reason is not None

    def evaluate(self, config: Mapping[str, Any], fidelity: float | None = None,
                 stage: int = 0, bracket: int = 0) -> float | None:
        """Evaluate one configuration at ``fidelity`` (default: r_max); its loss.

        None when the budget does not allow it: then nothing is recorded and the run is done.
        The configuration (active hyperparameters only) is validated against the search space.
        """
        if self.done:
            return None
        r = self.problem.fidelity.r_max if fidelity is None else fidelity
        if self.meter.how_many_fit(1, r) == 0:
            self.stop_reason = self.meter.limit
            return None
        vector = self.codec.to_vector(dict(config))
        # Evaluate the configuration as the trace will show it (decoded from its vector), so the
        # trace's hyperparameter columns are exactly what was evaluated.
        evaluated = self.codec.to_dicts(vector[None, :])[0]
        result = self.problem.evaluate([evaluated], [r])
        loss = float(result.loss[0])
        return loss if self.record(vector, r, loss, float(result.cost[0]), stage=stage, bracket=bracket) else None

    def record(self, vector: np.ndarray, fidelity: float, loss: float, cost: float, spent: float | None = None,
               stage: int = 0, bracket: int = 0) -> bool:
        """Record one result (a configuration's codec ``vector``, evaluated at ``fidelity``), if the budget allows.

        Called by :meth:`evaluate`, and by the syne-tune peers for each result their simulator
        reports. ``spent``: the fidelity it charges (default ``fidelity``; a trial continued from
        its previous result charges the difference). False, with nothing recorded and the run
        done, when it does not fit into the budget (a cost budget: it finished after the budget
        was spent, and is discarded unseen).
        """
        charge = fidelity if spent is None else spent
        if self.done or self.meter.how_many_fit(1, charge) == 0 or self.meter.affordable([cost]) == 0:
            self.stop_reason = self.meter.limit
            return False
        key = np.nan_to_num(vector, nan=-1.0).tobytes()
        config_id = self._config_ids.setdefault(key, len(self._config_ids))
        self.archive.add(vector[None, :], config_id=[config_id], batch=[len(self.archive)], stage=[stage],
                         bracket=[bracket], fidelity=[fidelity], loss=[loss], cost=[cost])
        self.spent.append(charge)
        self.meter.charge(charge, [cost])
        if self.meter.exhausted:  # its budget spent, or its evaluation cap reached with budget left
            self.stop_reason = self.meter.exhausted_by
        if self.progress is not None:
            self.progress(min(self.meter.fraction_spent, 1.0))
        return True


def _native(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


def _clip(space: ConfigurationSpace, config: Mapping[str, Any]) -> dict[str, Any]:
    """Numeric values inside their bounds (log-scale round trips can land an ulp outside), integers as int."""
    out = {}
    for name, value in config.items():
        hp = space[name]
        value = _native(value)
        if isinstance(hp, UniformIntegerHyperparameter):
            value = int(min(max(round(value), hp.lower), hp.upper))
        elif isinstance(hp, UniformFloatHyperparameter):
            value = float(min(max(value, hp.lower), hp.upper))
        out[name] = value
    return out
