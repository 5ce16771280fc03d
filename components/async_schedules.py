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

import bisect
import heapq
import math
from dataclasses import dataclass, field
from typing import Iterator

from metaopt.core.benchmarks.base import Fidelity
from metaopt.components.fidelity_schedules import MULTI_FIDELITY_HPS, BracketPlan, _MultiFidelity, stage_fidelity
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
    _waiting: list[tuple[float, int]] = field(default_factory=list, init=False, repr=False)
    """A heap of the ranking keys of the results not promoted: (loss, NaN as inf; arrival position)."""
    _promoted_keys: list[tuple[float, int]] = field(default_factory=list, init=False, repr=False)
    """The ranking keys of the promoted results, sorted."""
    _seen: int = field(default=0, init=False, repr=False)
    """How many of the results are in the two above."""

    def first_waiting(self) -> tuple[int, int] | None:
        """(position of the best result not promoted yet, its place in the rung's ranking) or None:
        the ranking sorts by loss, NaN last, ties in arrival order (``promotion.by_loss``), and every
        result ranked before the first one not promoted is a promoted one. Takes in the results
        appended since the last call first."""
        for position in range(self._seen, len(self.losses)):
            loss = self.losses[position]
            key = (math.inf if math.isnan(loss) else loss, position)
            if self.config_ids[position] in self.promoted:
                bisect.insort(self._promoted_keys, key)
            else:
                heapq.heappush(self._waiting, key)
        self._seen = len(self.losses)
        if not self._waiting:
            return None
        key = self._waiting[0]
        return key[1], bisect.bisect_left(self._promoted_keys, key)

    def promote(self) -> int:
        """Marks the result :meth:`first_waiting` named promoted; returns its configuration ID."""
        key = heapq.heappop(self._waiting)
        bisect.insort(self._promoted_keys, key)
        config_id = self.config_ids[key[1]]
        self.promoted.add(config_id)
        return config_id


@register("fidelity_schedules", "asha", MULTI_FIDELITY_HPS,
          "asynchronous successive halving (ASHA): promote as soon as a result is in its rung's top 1/η_surv, "
          "else start a new configuration at r_1")
class AsyncSuccessiveHalving(_MultiFidelity):
    uses_promotion_rule = False
    asynchronous = True

    def rung_fidelities(self, fidelity: Fidelity) -> list[float]:
        """r_1..r_s, the fidelities of the rungs (those of the synchronous schedules' stages)."""
        s, floored = self.stages(fidelity), self.floored(fidelity)
        return [stage_fidelity(floored, j, s, self.eta_fid) for j in range(1, s + 1)]

    def next_job(self, rungs: list[RungResults]) -> tuple[int | None, int]:
        """Called whenever a worker is free: (configuration ID to promote, or None for a new one; rung index).

        ``rungs`` holds the completed results of every rung (index 0 = r_1). The chosen
        configuration is marked promoted in its rung. Deterministic: draws no random numbers.
        """
        for j in range(len(rungs) - 2, -1, -1):
            rung = rungs[j]
            n_top = int(math.floor(len(rung.losses) * self.survival_fraction + RANK_TOLERANCE))
            # the first result not promoted in the rung's ranking (those before it are promoted): the
            # promotable one if it is among the top n_top and did not fail (failures sort last)
            first = rung.first_waiting()
            if first is not None and first[1] < n_top and not math.isnan(rung.losses[first[0]]):
                return rung.promote(), j + 1
        return None, 0

    def brackets(self, fidelity: Fidelity, mu: int) -> Iterator[BracketPlan]:
        raise UsageError("fidelity_schedule asha is asynchronous: it has no batches; run it with metaopt run "
                         "or metaopt.engine.simclock.run, not through the batch loop (metaopt.engine.loop.run, AskTell)")
