"""Proposal strategies: where a batch's new configurations come from.

``sample_filter`` is Smashy's proposal (paper 004 Alg. 3/4): draw from the generating distribution
(``sampler``) and keep what the surrogate filter likes. ``cfo`` (``components.local_search``) is
CFO's FLOW2 local search (paper 000). A strategy reads what it needs about earlier evaluations
from the archive in the :class:`ProposalContext`; it must draw only from ``ctx.rng``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np

from metaopt.components.filters import Filter, NoFilter, Scorer
from metaopt.components.samplers import Sampler, UniformSampler
from metaopt.context import ProposalContext
from metaopt.registry import register


class Proposal(ABC):
    """Proposes ``n`` new configurations (rows of the encoded space) for one stage."""

    @abstractmethod
    def propose(self, n: int, ctx: ProposalContext) -> np.ndarray:
        ...


@register("proposals", "sample_filter",
          description="sample from the generating distribution, keep what the surrogate filter ranks best")
@dataclass
class SampleAndFilter(Proposal):
    """The sampler, filter and scorer the configuration selects (the loop fills them in)."""

    sampler: Sampler | None = None
    filter: Filter | None = None
    scorer: Scorer | None = None

    def propose(self, n: int, ctx: ProposalContext) -> np.ndarray:
        sampler = self.sampler or UniformSampler()
        return (self.filter or NoFilter()).propose(n, ctx, sampler, self.scorer)
