"""Proposal strategies: where a batch's new configurations come from.

``sample_filter`` is Smashy's proposal (paper 004 Alg. 3/4): draw from the generating distribution
(``sampler``) and keep what the surrogate filter likes. ``cfo`` (``components.local_search``) is
CFO's FLOW2 local search (paper 000). A strategy reads what it needs about earlier evaluations
from the archive in the :class:`ProposalContext`; it must draw only from ``ctx.rng``.

``sample_filter`` may start with an initial design (``initial_design_per_dim`` n, SMAC's
``n_configs_per_hyperparameter``): its first min(n·d, max(1, floor(B/4))) new configurations
(d hyperparameters, B the budget in full evaluations; SMAC's HPO facade caps its Sobol design at a
quarter of the trials, its ``max_ratio``) are the first points of a scrambled Sobol sequence
(:func:`sobol_design`), handed out while less than a quarter of the budget is spent (the cap under a
cost budget, whose B in evaluations is not known), before the sampler and filter propose anything.
n = 0, the default, is no design: the run starts with the filter, which draws its first points at
random since it has nothing to learn from.
"""

from __future__ import annotations

import math
import warnings
from abc import ABC, abstractmethod
from dataclasses import dataclass, field, replace
from typing import Any, Mapping

import numpy as np
from ConfigSpace import Integer
from scipy.stats import qmc

from metaopt.components.filters import Filter, NoFilter, Scorer
from metaopt.components.samplers import Sampler, UniformSampler
from metaopt.core.budget import Budget
from metaopt.core.context import ProposalContext
from metaopt.core.registry import category_base, register
from metaopt.core.space_codec import SpaceCodec

INITIAL_DESIGN = Integer("initial_design_per_dim", (0, 20), default=0)
"""Configurations of the initial design per hyperparameter (SMAC's HPO facade: 10); 0: none."""
INITIAL_DESIGN_MAX_RATIO = 0.25
"""The initial design's share of the budget at most (SMAC's ``max_ratio``)."""


def initial_design_size(per_dim: int, d: int, budget: Budget) -> int:
    """How many configurations the initial design of ``per_dim`` per hyperparameter has on a problem
    with ``d`` hyperparameters and ``budget``: per_dim·d, at most a quarter of a budget in full
    evaluations (at least one); 0 when ``per_dim`` is 0."""
    if per_dim <= 0:
        return 0
    size = per_dim * d
    if budget.unit == "full_evals":
        size = min(size, max(1, math.floor(INITIAL_DESIGN_MAX_RATIO * budget.amount)))
    return size


def sobol_design(n: int, codec: SpaceCodec, rng: np.random.Generator) -> np.ndarray:
    """The first ``n`` points of a scrambled Sobol sequence over the search space, as vectors.

    The scrambling is seeded with one integer drawn from ``rng`` (the run's generator), so the design
    is a function of the run's seed and the rest of the run's stream does not depend on how many
    numbers scipy's scrambling takes; the unit-cube points become configurations through
    :meth:`SpaceCodec.from_unit_cube`.
    """
    engine = qmc.Sobol(codec.dim, scramble=True, seed=int(rng.integers(2**31 - 1)))
    with warnings.catch_warnings():
        # scipy warns that Sobol's balance needs n a power of 2; the design takes the budget's share
        # instead (SMAC silences the same warning).
        warnings.filterwarnings("ignore", message="The balance properties of Sobol", category=UserWarning)
        unit = engine.random(n)
    return codec.from_unit_cube(unit, rng)


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
    leaves_schedule: bool = False
    """Whether the run leaves its fidelity schedule once the fraction :attr:`switch_at` of the budget
    is spent: from the first stage boundary after it, the loop asks for one configuration at a time
    at full fidelity until the run ends (``filter_then_rf``). Only the batch loop does this; the
    design space forbids such a strategy with an asynchronous schedule."""
    switch_at: float = 1.0
    """For a strategy that changes strategy during the run (``cfo_then_filter``, ``filter_then_rf``):
    the fraction of the budget after which it does (its hyperparameter ``switch_at``)."""
    late_design: Mapping[str, Any] | None = None
    """A fragment of a configuration γ whose proposal this strategy hands over to during the run:
    :meth:`metaopt.engine.loop.Optimizer.from_config` builds that proposal and passes it to
    :meth:`with_late`. None: the strategy needs no other."""

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

    def with_late(self, proposal: "Proposal") -> "Proposal":
        """The strategy handing over to ``proposal`` during the run.

        Called once, by :meth:`metaopt.engine.loop.Optimizer.from_config`, for strategies with a
        :attr:`late_design`, with that design's proposal (wired like any other). Returns the strategy
        to run (a new object or this one).
        """
        raise NotImplementedError(f"{type(self).__name__} hands over to no other strategy")


@register("proposals", "sample_filter", hyperparameters=[INITIAL_DESIGN],
          description="sample from the generating distribution, keep what the surrogate filter ranks best")
@dataclass
class SampleAndFilter(Proposal):
    """The sampler, filter and scorer the configuration selects (the loop fills them in), after the
    initial design of ``initial_design_per_dim`` configurations per hyperparameter (module docstring)."""

    uses_sampler_and_filter = True

    sampler: Sampler | None = None
    filter: Filter | None = None
    scorer: Scorer | None = None
    initial_design_per_dim: int = 0
    _design: np.ndarray | None = field(default=None, init=False, repr=False)
    """The run's initial design, drawn at the first call (with n > 0)."""
    _handed_out: int = field(default=0, init=False, repr=False)
    """How many of its points were proposed so far."""

    def wired(self, sampler: Sampler, filter: Filter, scorer: Scorer | None) -> "SampleAndFilter":
        return replace(self, sampler=sampler, filter=filter, scorer=scorer)

    def propose(self, n: int, ctx: ProposalContext) -> np.ndarray:
        design = self.initial_design(n, ctx)
        if len(design) == n:
            return design
        sampler = self.sampler or UniformSampler()
        filtered = (self.filter or NoFilter()).propose(n - len(design), ctx, sampler, self.scorer)
        return np.concatenate([design, filtered]) if len(design) else filtered

    def initial_design(self, n: int, ctx: ProposalContext) -> np.ndarray:
        """The initial design's next (at most ``n``) points: called by :meth:`propose` before the
        filter; empty once the design is used up or a quarter of the budget is spent. The design is
        drawn at the first call (:func:`sobol_design`), the only draws it makes."""
        if self.initial_design_per_dim <= 0 or ctx.t >= INITIAL_DESIGN_MAX_RATIO:
            return np.empty((0, ctx.codec.dim))
        if self._design is None:
            size = initial_design_size(int(self.initial_design_per_dim), ctx.state.problem.d, ctx.state.budget)
            self._design = sobol_design(size, ctx.codec, ctx.rng)
        points = self._design[self._handed_out:self._handed_out + n]
        self._handed_out += len(points)
        return points
