"""What components see of a running optimization: progress, the archive, the run's generator."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from metaopt.core.archive import Archive
from metaopt.core.benchmarks.base import Problem
from metaopt.core.budget import Budget
from metaopt.core.space_codec import SpaceCodec


@dataclass
class RunState:
    """Progress of a run; ``t`` = spent/B in [0, 1] drives time-varying components.

    ``stopping_rng`` is for stopping rules only: it is not the generator proposals are drawn from,
    so a rule's draws never change what the run proposes.
    """

    problem: Problem
    budget: Budget
    archive: Archive
    budget_used: float = 0.0
    cost_used: float = 0.0
    n_batches: int = 0
    codec: SpaceCodec | None = None
    """The run's codec (the loop passes its own); built from the problem when not given."""
    stopping_rng: np.random.Generator = field(default_factory=lambda: np.random.default_rng(0))

    def __post_init__(self) -> None:
        if self.codec is None:
            self.codec = SpaceCodec(self.problem.search_space)

    @property
    def t(self) -> float:
        return self.budget.fraction(self.budget_used, self.cost_used)


@dataclass
class ProposalContext:
    """Everything a sampler (or filter) may use to propose configurations for one stage."""

    state: RunState
    codec: SpaceCodec
    rng: np.random.Generator
    fidelity: float

    @property
    def archive(self) -> Archive:
        return self.state.archive

    @property
    def t(self) -> float:
        return min(self.state.t, 1.0)
