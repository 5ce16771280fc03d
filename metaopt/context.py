"""What components see of a running optimization: progress, the archive, the run's generator."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from metaopt.archive import Archive
from metaopt.benchmarks.base import Problem
from metaopt.budget import Budget
from metaopt.space_codec import SpaceCodec


@dataclass
class RunState:
    """Progress of a run; ``t`` = spent/B in [0, 1] drives time-varying components."""

    problem: Problem
    budget: Budget
    archive: Archive
    budget_used: float = 0.0
    cost_used: float = 0.0
    n_batches: int = 0

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
