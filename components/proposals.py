"""Proposal strategies: where a batch's new configurations come from.

``sample_filter`` is Smashy's proposal (paper 004 Alg. 3/4): draw from the generating distribution
(``sampler``) and keep what the surrogate filter likes. ``cfo`` (``components.local_search``) is
CFO's FLOW2 local search (paper 000). A strategy reads what it needs about earlier evaluations
from the archive in the :class:`ProposalContext`; it must draw only from ``ctx.rng``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, replace

import numpy as np

from metaopt.components.filters import Filter, NoFilter, Scorer
from metaopt.components.samplers import Sampler, UniformSampler
from metaopt.core.context import ProposalContext
from metaopt.core.registry import category_base, register


@category_base("proposals")
class Proposal(ABC):
    """A proposal strategy: where a batch's new configurations come from.

    One instance serves one run, so a strategy may keep state between calls (CFO keeps its
    incumbent and step size); it is built with its hyperparameters as keyword arguments.
    """

    uses_sampler_and_filter: bool = False
    """Whether the strategy draws from a sampler and filters with a filter: the sampler and filter
    categories (and, below them, surrogate and acquisition) exist in the design space only then."""
    supports_multi_fidelity: bool = True
    """Whether the strategy works with a multi-fidelity schedule; the design space forbids the
    combination otherwise (CFO is a sequential local search on full-fidelity losses)."""

    @abstractmethod
    def propose(self, n: int, ctx: ProposalContext) -> np.ndarray:
        """Propose ``n`` new configurations for one stage.

        Called by the loop (:mod:`metaopt.engine.loop`) whenever a stage needs new configurations: the
        first stage of a bracket, the refills of ``equal`` brackets, and, for a bracket filled by
        cost (CAHB), repeatedly in chunks of the bracket size until the chunks' estimated cost
        fills the stage (proposals beyond the fill are dropped unevaluated). Survivors of earlier
        stages are not proposed again.

        Args:
            n: How many configurations (at least 1).
            ctx: The run so far: ``ctx.archive`` (every evaluation, in order), ``ctx.codec``,
                ``ctx.fidelity`` (the stage the points will be evaluated at), ``ctx.t`` (spent budget
                fraction in [0, 1]) and ``ctx.rng``.

        Returns:
            An array of shape ``(n, ctx.codec.dim)`` of encoded configurations (ConfigSpace's
            vector form, values in [0, 1], NaN exactly at inactive hyperparameters), each legal
            under the search space's conditions and forbidden clauses.

        Every random draw must come from ``ctx.rng``, the run's one generator.
        """

    def wired(self, sampler: Sampler, filter: Filter, scorer: Scorer | None) -> "Proposal":
        """The strategy drawing from ``sampler`` and filtering with ``filter`` (and ``scorer``, for a
        filter with a surrogate).

        Called once, by :meth:`metaopt.engine.loop.Optimizer.from_config`, for strategies that declare
        ``uses_sampler_and_filter``, with the components the configuration selects. Returns the
        strategy to run (a new object or this one).
        """
        raise NotImplementedError(f"{type(self).__name__} does not use a sampler and filter")


@register("proposals", "sample_filter",
          description="sample from the generating distribution, keep what the surrogate filter ranks best")
@dataclass
class SampleAndFilter(Proposal):
    """The sampler, filter and scorer the configuration selects (the loop fills them in)."""

    uses_sampler_and_filter = True

    sampler: Sampler | None = None
    filter: Filter | None = None
    scorer: Scorer | None = None

    def wired(self, sampler: Sampler, filter: Filter, scorer: Scorer | None) -> "SampleAndFilter":
        return replace(self, sampler=sampler, filter=filter, scorer=scorer)

    def propose(self, n: int, ctx: ProposalContext) -> np.ndarray:
        sampler = self.sampler or UniformSampler()
        return (self.filter or NoFilter()).propose(n, ctx, sampler, self.scorer)
