"""Asynchronous fidelity schedules: one trial whenever a worker is free, no batches to wait for.

``asha`` is asynchronous successive halving (Li et al. 2020, "A System for Massively Parallel
Hyperparameter Tuning", Alg. 2). Its rungs are the stages of the synchronous schedules
(docs/design.md §4): r_j = r_max·η_fid^-(s-j), j = 1..s. Whenever a worker asks for a job, the
schedule looks at the rungs from the second-highest down to the lowest: a configuration of rung j is
promotable when its completed result at r_j is among the best ``floor(n_j·f)`` of the n_j completed
results of rung j (f = ``survival_fraction`` = 1/η_surv; failed evaluations never count as best)
and it has not been promoted before; the best promotable configuration of the highest such rung is
evaluated next at r_{j+1}. If none is promotable, a new configuration starts at r_1. Ties are broken
by the order the results arrived, so the rule is deterministic.

A promoted configuration pays its full r_{j+1} again, as in the synchronous schedules. μ is not
used: the number of configurations grows as long as the budget lasts. The run is driven by
:mod:`metaopt.engine.async_loop`; the synchronous loop refuses an asynchronous schedule.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterator

import numpy as np

from metaopt.core.benchmarks.base import Fidelity
from metaopt.components.fidelity_schedules import MULTI_FIDELITY_HPS, BracketPlan, _MultiFidelity, stage_fidelity
from metaopt.components.promotion import by_loss
from metaopt.core.errors import UsageError
from metaopt.core.registry import register

RANK_TOLERANCE = 1e-9
"""Slack for floor(n·f), so that f = 1/3 of 3 results keeps one despite rounding."""


@dataclass
class RungResults:
    """The completed results of one rung, in the order they arrived, and who was promoted from it."""

    config_ids: list[int] = field(default_factory=list)
    losses: list[float] = field(default_factory=list)
    promoted: set[int] = field(default_factory=set)
    _ranked: tuple[int, np.ndarray] = field(default=(0, np.empty(0, dtype=int)), init=False, repr=False)

    def ranking(self) -> np.ndarray:
        """Positions of the results sorted by loss (NaN last, ties in arrival order); recomputed
        only when a result came in since the last call."""
        if self._ranked[0] != len(self.losses):
            self._ranked = (len(self.losses), by_loss(np.asarray(self.losses, dtype=float)))
        return self._ranked[1]


@register("fidelity_schedules", "asha", MULTI_FIDELITY_HPS,
          "asynchronous successive halving (ASHA): promote as soon as a result is in its rung's top 1/η_surv, "
          "else start a new configuration at r_1")
class AsyncSuccessiveHalving(_MultiFidelity):
    uses_promotion_rule = False
    asynchronous = True

    def rung_fidelities(self, fidelity: Fidelity) -> list[float]:
        """r_1..r_s, the fidelities of the rungs (those of the synchronous schedules' stages)."""
        s = self.stages(fidelity)
        return [stage_fidelity(fidelity, j, s, self.eta_fid) for j in range(1, s + 1)]

    def next_job(self, rungs: list[RungResults]) -> tuple[int | None, int]:
        """Called whenever a worker is free: (configuration ID to promote, or None for a new one; rung index).

        ``rungs`` holds the completed results of every rung (index 0 = r_1). The chosen
        configuration is marked promoted in its rung. Deterministic: draws no random numbers.
        """
        for j in range(len(rungs) - 2, -1, -1):
            rung = rungs[j]
            n_top = int(math.floor(len(rung.losses) * self.survival_fraction + RANK_TOLERANCE))
            for i in rung.ranking()[:n_top]:
                config_id = rung.config_ids[i]
                if math.isnan(rung.losses[i]):
                    break  # failures sort last: nothing further is promotable
                if config_id not in rung.promoted:
                    rung.promoted.add(config_id)
                    return config_id, j + 1
        return None, 0

    def brackets(self, fidelity: Fidelity, mu: int) -> Iterator[BracketPlan]:
        raise UsageError("fidelity_schedule asha is asynchronous: it has no batches; run it with metaopt run "
                         "or metaopt.engine.simclock.run, not through the batch loop (metaopt.engine.loop.run, AskTell)")
