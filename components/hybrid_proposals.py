"""A proposal that changes strategy during the run: CFO's local search first, then sample-and-filter.

On lcbench the two best single-fidelity designs of the design space are good at different times:
CFO (``cfo_tuned``) leads at 10·d, the random-forest design ``smac_like`` catches up by 30·d
(docs/results/lcbench). ``cfo_then_filter`` runs FLOW² (``components.local_search``) until a
fraction ``switch_at`` of the budget is spent, then proposes from the sampler and surrogate filter the
configuration selects, whose surrogate is fitted on every evaluation so far (CFO's included). The
switch point is a design-space parameter, so the meta-search decides how long the cheap local search
runs; ``switch_at`` = 1 would be CFO, 0 the filter alone.

It never switches back: FLOW²'s incumbent and step size are frozen at the switch. Like CFO it works
on full-fidelity losses only.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
from ConfigSpace import Float

from metaopt.components.filters import Filter, Scorer
from metaopt.components.local_search import CFO, HYPERPARAMETERS as CFO_HYPERPARAMETERS
from metaopt.components.proposals import Proposal, SampleAndFilter
from metaopt.components.samplers import Sampler
from metaopt.core.context import ProposalContext
from metaopt.core.registry import register

SWITCH_AT = Float("switch_at", (0.05, 0.95), default=0.33)
"""Fraction of the budget after which the proposal switches from CFO to sample-and-filter."""


@register("proposals", "cfo_then_filter", hyperparameters=[*CFO_HYPERPARAMETERS, SWITCH_AT],
          description="CFO's local search until a fraction switch_at of the budget is spent, then sample-and-filter")
class CFOThenFilter(Proposal):
    """FLOW² (with the ``cfo_*`` hyperparameters) before ``switch_at``, sample-and-filter after."""

    uses_sampler_and_filter = True
    supports_multi_fidelity = False

    def __init__(self, switch_at: float = SWITCH_AT.default_value, **cfo_hyperparameters: Any) -> None:
        self.switch_at = float(switch_at)
        self.local_search = CFO(**cfo_hyperparameters)
        self.filtered = SampleAndFilter()

    def wired(self, sampler: Sampler, filter: Filter, scorer: Scorer | None) -> "CFOThenFilter":
        self.filtered = replace(self.filtered, sampler=sampler, filter=filter, scorer=scorer)
        return self

    def propose(self, n: int, ctx: ProposalContext) -> np.ndarray:
        if ctx.t < self.switch_at:
            return self.local_search.propose(n, ctx)
        return self.filtered.propose(n, ctx)
