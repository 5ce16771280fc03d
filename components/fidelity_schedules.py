"""Fidelity schedules: how batches move through fidelity stages (Smashy, paper 004 Alg. 2).

Stages are geometric (docs/design.md §4): with η = η_fid,
``s = floor(log(r_max/r_min)/log η) + 1`` and ``r_j = r_max · η^-(s-j)`` for j = 1..s.

A schedule yields :class:`BracketPlan` objects forever; the loop runs them until the budget is
spent. Each stage of a plan says how many configurations are evaluated there (``n_total``) and
how many of them are survivors of the previous stage (``n_survivors``); the rest are new samples.

- ``single``: one stage at r_max with μ new configurations (RS, BO: s = 1).
- ``equal``: every stage evaluates μ points; the best ``max(round(μ·f), 1)`` survive
  (f = survival_fraction = 1/η_surv) and the batch is refilled with new samples; after stage s
  it starts over at stage 1.
- ``sh``: successive halving — bracket 1 of ``hb`` repeated.
- ``hb``: brackets b = 1..s in turn; bracket b starts at stage b with μ(b) points and keeps
  ``n_j = max(round(m·f^(j-b)), 1)`` alive at stage j.
- ``cahb``: cost-aware Hyperband (paper 001 Alg. 2), the ``hb`` brackets filled by cost (below).

Only ``equal`` refills a stage with new configurations (``BracketPlan.refill``); in the other
schedules new configurations enter at a bracket's first stage only, and later stages hold survivors.

Bracket sizes (``hb``): μ(1) = μ; for b ≥ 2, μ(b) is the integer m in [1, ceil(μ·s/(s−b+1))]
whose bracket cost Σ_j n_j·r_j/r_max is closest to bracket 1's (ties go to the smaller m). This is
the budget-matching rule of the Smashy reference implementation (which bisects; we search the
whole small range exhaustively, which finds the same or a closer m). It differs from plain
Hyperband's ceil(s·η^(s−b)/(s−b+1)): on lcbench (r in [1, 52]) with μ = 27 and η_fid = η_surv = 3
it gives 27/9/3/1, 13/4/1, 6/2, 4 where plain Hyperband gives 27/9/3/1, 12/4/1, 6/2, 4.

A stage at which nobody would be discarded (n_{j+1} = n_j) is skipped: its evaluations could not
change anything, so those configurations start at the next stage instead. The same rule makes
``equal`` single-fidelity when ``round(μ·f) >= μ``.

CAHB (paper 001 Alg. 2) maps onto these brackets as follows. Its band k = 0..S−1 (S = ⌈log_η R⌉ + 1
bands, our s stages) is bracket b = k + 1: it starts at resource r_b and runs CASH (Alg. 1, the
``cost_aware`` promotion rule) over the stages b..s. Every band gets the same budget B/S, split
equally over its S − k rungs, and the band's configurations are drawn until their summed cost C
fills its first rung, r_b·C ≤ B/(S(S − k)) (line 4, resources in units of r_1).
Hyperband's budget-matched bracket sizes μ(b) express the same split in counts, so the cost budget
of bracket b's first stage is the cost of μ(b) configurations of average cost at r_b. The loop fills
it (``BracketPlan.resize`` is set) by :func:`fill_by_cost`: it draws new configurations in chunks of
μ(b) and keeps the longest prefix of the draws whose estimated costs at r_b sum to at most that
budget (at least one, at most ``MAX_FILL``·μ(b) configurations). Costs are estimated
by the run's cost model fitted on the archive; "average cost" is the model's mean prediction at r_b
over the configurations evaluated so far (the generator's past draws), on the same scale as the
estimates of the new draws. The first bracket of a run, before any cost is known, has μ(1)
configurations (the count rule); so does every bracket while the cost model cannot tell
configurations apart. The bracket's stages are then those of an ``hb`` bracket with the number of
configurations actually drawn (``resize``), so the count rule of ``top`` and the skipping of stages
without discards apply to the real size.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass, replace
from functools import partial
from typing import Callable, Iterator

import numpy as np
from ConfigSpace import Float

from metaopt.core.benchmarks.base import Fidelity
from metaopt.core.registry import category_base, register

# η_fid is searched on a log-log scale (paper Table 4: η_fid in [2^(1/4), 2^4], scale log log η):
# the design-space parameter is log_eta_fid = ln η_fid, itself on a log scale.
LOG_ETA_FID = Float("log_eta_fid", (math.log(2) / 4, math.log(16)), default=math.log(3), log=True)
# η_surv in [1, ∞) is searched through its reciprocal, the survival fraction 1/η_surv in [0, 1].
SURVIVAL_FRACTION = Float("survival_fraction", (0.0, 1.0), default=1 / 3)
# The lowest fidelity the schedule uses, as a point on the log scale from r_min (0) to r_max (1):
# r_floor = r_min^(1-x) · r_max^x. Where the lowest fidelities rank configurations unlike the full one
# (yahpo lcbench's first epoch: median Spearman −0.26 against the 52nd, `metaopt benchmark fidelity`),
# a floor keeps Hyperband's brackets off them; 0 (the default) is the benchmark's own r_min.
FIDELITY_FLOOR = Float("fidelity_floor", (0.0, 0.8), default=0.0)
MULTI_FIDELITY_HPS = (LOG_ETA_FID, SURVIVAL_FRACTION, FIDELITY_FLOOR)

COST_TOLERANCE = 1e-9
"""Relative slack of cost comparisons, so that rounding in sums of equal costs never drops a configuration."""
MAX_FILL = 4
"""A CAHB bracket holds at most MAX_FILL·μ(b) configurations, however cheap the draws are estimated to be."""


@dataclass(frozen=True)
class Stage:
    """One step of a bracket: ``n_total`` configurations at stage ``stage`` (fidelity ``fidelity``).

    ``n_survivors`` of them are survivors of the previous stage by the count rule (the ``n_keep`` of
    the ``top`` promotion rule); a cost-aware promotion rule decides the number itself.
    """

    stage: int
    fidelity: float
    n_total: int
    n_survivors: int


@dataclass(frozen=True)
class BracketPlan:
    """The stages of one bracket.

    ``refill``: every stage is topped up to ``n_total`` with new configurations (``equal``);
    otherwise only the first stage gets new ones. ``resize`` (CAHB) marks a bracket whose first
    stage is filled by cost: it gives the plan for the number of configurations actually drawn.
    """

    bracket: int
    stages: tuple[Stage, ...]
    refill: bool = False
    resize: Callable[[int], BracketPlan] | None = None


def floored(fidelity: Fidelity, floor: float) -> Fidelity:
    """The fidelity range a schedule with ``fidelity_floor`` = ``floor`` works on: r_min raised to
    r_min^(1-floor) · r_max^floor (the same object for floor 0, so nothing changes there)."""
    if floor <= 0 or fidelity.r_min >= fidelity.r_max:
        return fidelity
    r_floor = math.exp((1 - floor) * math.log(fidelity.r_min) + floor * math.log(fidelity.r_max))
    return replace(fidelity, r_min=min(max(fidelity.r_min, r_floor), fidelity.r_max))


def n_stages(fidelity: Fidelity, eta_fid: float) -> int:
    """s = floor(log(r_max/r_min)/log η_fid) + 1 (with a small tolerance for exact powers)."""
    ratio = fidelity.r_max / fidelity.r_min
    if ratio <= 1:
        return 1
    return int(math.floor(math.log(ratio) / math.log(eta_fid) + 1e-9)) + 1


def stage_fraction(j: int, s: int, eta_fid: float) -> float:
    """r_j / r_max = η^-(s-j): the budget share of one evaluation at stage j."""
    return eta_fid ** -(s - j)


def stage_fidelity(fidelity: Fidelity, j: int, s: int, eta_fid: float) -> float:
    """r_j = r_max·η^-(s-j), clipped to [r_min, r_max] and rounded for integer fidelities."""
    return fidelity.snap(fidelity.r_max * stage_fraction(j, s, eta_fid))


def survivor_counts(m: int, first_stage: int, s: int, survival_fraction: float) -> list[tuple[int, int]]:
    """(stage j, n_j) for a bracket starting at ``first_stage`` with m points, dead stages skipped.

    n_j = max(round(m·f^(j-b)), 1); stage j < s is dropped when n_{j+1} == n_j (nobody discarded).
    """
    counts = [(j, max(round(m * survival_fraction ** (j - first_stage)), 1)) for j in range(first_stage, s + 1)]
    return [(j, n) for i, (j, n) in enumerate(counts) if i == len(counts) - 1 or counts[i + 1][1] != n]


def bracket_cost(m: int, first_stage: int, s: int, eta_fid: float, survival_fraction: float) -> float:
    """Σ n_j · r_j/r_max of a bracket, in full-evaluation equivalents."""
    return sum(n * stage_fraction(j, s, eta_fid) for j, n in survivor_counts(m, first_stage, s, survival_fraction))


def hyperband_bracket_sizes(mu: int, s: int, eta_fid: float, survival_fraction: float) -> list[int]:
    """μ(b) for b = 1..s by the budget-matching rule (see module docstring)."""
    target = bracket_cost(mu, 1, s, eta_fid, survival_fraction)
    sizes = [mu]
    for b in range(2, s + 1):
        upper = math.ceil(mu * s / (s - b + 1))
        sizes.append(min(range(1, upper + 1),
                         key=lambda m: (abs(bracket_cost(m, b, s, eta_fid, survival_fraction) - target), m)))
    return sizes


def cost_prefix(costs: np.ndarray, bound: float) -> int:
    """Length of the longest prefix of ``costs`` (non-negative) whose sum is at most ``bound``."""
    limit = bound + COST_TOLERANCE * abs(bound)
    return int(np.searchsorted(np.cumsum(costs), limit, side="right"))


def fill_by_cost(draw: Callable[[int], np.ndarray], cost: Callable[[np.ndarray], np.ndarray], m: int,
                 budget: float) -> np.ndarray:
    """CAHB's first stage (paper 001 Alg. 2 line 4): draw configurations until their costs fill ``budget``.

    ``draw(n)`` gives n new configuration vectors, ``cost(X)`` their estimated costs. Draws come in
    chunks of ``m`` while their summed cost is below ``budget``; the result is the longest prefix of
    all draws whose costs sum to at most ``budget``, but at least one and at most ``MAX_FILL``·m
    configurations. When every draw costs budget/m, that is one chunk of m: the count rule.
    """
    X = draw(m)
    costs = cost(X)
    while costs.sum() < budget * (1 - COST_TOLERANCE) and len(X) < MAX_FILL * m:
        chunk = draw(m)
        X = np.concatenate([X, chunk])
        costs = np.concatenate([costs, cost(chunk)])
    return X[: max(cost_prefix(costs, budget), 1)]


def shrinking_plan(bracket: int, m: int, s: int, fidelity: Fidelity, eta_fid: float, f: float) -> BracketPlan:
    """A successive-halving bracket: no refill, survivors shrink stage by stage."""
    stages = []
    previous = 0
    for j, n in survivor_counts(m, bracket, s, f):
        stages.append(Stage(j, stage_fidelity(fidelity, j, s, eta_fid), n, min(previous, n)))
        previous = n
    return BracketPlan(bracket, tuple(stages))


@category_base("fidelity_schedules")
class FidelitySchedule(ABC):
    """Yields bracket plans forever for a given fidelity range and batch size μ."""

    multi_fidelity: bool = False
    """Whether the schedule evaluates at fidelities below r_max: the promotion-rule category exists
    in the design space only under such a schedule, and proposals without
    ``supports_multi_fidelity`` (CFO) are forbidden with it."""
    uses_promotion_rule: bool = False
    """Whether the loop asks a promotion rule for a finished stage's survivors: the promotion-rule
    category exists in the design space only under such a schedule (an asynchronous schedule
    promotes by its own rule)."""
    asynchronous: bool = False
    """Whether the schedule proposes one trial whenever a worker is free instead of batches
    (:mod:`metaopt.components.async_schedules`; such designs run on :mod:`metaopt.engine.simclock`)."""

    @abstractmethod
    def brackets(self, fidelity: Fidelity, mu: int) -> Iterator[BracketPlan]:
        """The run's bracket plans, in order, without end.

        Called once per run by the loop (:mod:`metaopt.engine.loop`), which takes plans from the iterator
        and runs each (its stages in order) until the budget is spent or a stopping rule ends
        the run; an iterator must therefore never be exhausted.

        Args:
            fidelity: The problem's fidelity range (stage fidelities are snapped to it).
            mu: The batch size μ (the first bracket's size for Hyperband-like schedules).

        Returns:
            An iterator of :class:`BracketPlan`. Deterministic: a schedule draws no random numbers
            (a plan with ``resize`` lets the loop size a bracket by the configurations it drew).
        """

    def stages(self, fidelity: Fidelity) -> int:
        """Number of fidelity stages s this schedule uses on ``fidelity``."""
        return 1


@register("fidelity_schedules", "single", description="single fidelity: batches of μ new points at r_max (RS, BO)")
class SingleFidelity(FidelitySchedule):
    def brackets(self, fidelity: Fidelity, mu: int) -> Iterator[BracketPlan]:
        plan = BracketPlan(1, (Stage(1, fidelity.r_max, mu, 0),))
        while True:
            yield plan


class _MultiFidelity(FidelitySchedule):
    multi_fidelity = True
    uses_promotion_rule = True

    def __init__(self, log_eta_fid: float, survival_fraction: float, fidelity_floor: float = 0.0) -> None:
        self.eta_fid = math.exp(log_eta_fid)
        self.survival_fraction = float(survival_fraction)
        self.fidelity_floor = float(fidelity_floor)

    def floored(self, fidelity: Fidelity) -> Fidelity:
        """The range the stages span: ``fidelity`` with r_min raised by ``fidelity_floor`` (:func:`floored`)."""
        return floored(fidelity, self.fidelity_floor)

    def stages(self, fidelity: Fidelity) -> int:
        return n_stages(self.floored(fidelity), self.eta_fid)


@register("fidelity_schedules", "equal", MULTI_FIDELITY_HPS,
          "equal batches: μ points per stage, survivors refilled with new samples")
class EqualBatches(_MultiFidelity):
    def brackets(self, fidelity: Fidelity, mu: int) -> Iterator[BracketPlan]:
        s, fidelity = self.stages(fidelity), self.floored(fidelity)
        keep = min(max(round(mu * self.survival_fraction), 1), mu)
        if keep >= mu:  # nobody is ever discarded: only the last stage matters
            plan = BracketPlan(1, (Stage(s, fidelity.r_max, mu, 0),), refill=True)
        else:
            plan = BracketPlan(1, tuple(
                Stage(j, stage_fidelity(fidelity, j, s, self.eta_fid), mu, 0 if j == 1 else keep)
                for j in range(1, s + 1)
            ), refill=True)
        while True:
            yield plan


@register("fidelity_schedules", "sh", MULTI_FIDELITY_HPS, "successive halving: bracket 1 of Hyperband, repeated")
class SuccessiveHalving(_MultiFidelity):
    def brackets(self, fidelity: Fidelity, mu: int) -> Iterator[BracketPlan]:
        plan = shrinking_plan(1, mu, self.stages(fidelity), self.floored(fidelity), self.eta_fid, self.survival_fraction)
        while True:
            yield plan


@register("fidelity_schedules", "hb", MULTI_FIDELITY_HPS, "Hyperband batches: brackets b = 1..s in turn")
class HyperbandBatches(_MultiFidelity):
    def bracket_sizes(self, fidelity: Fidelity, mu: int) -> list[int]:
        return hyperband_bracket_sizes(mu, self.stages(fidelity), self.eta_fid, self.survival_fraction)

    def brackets(self, fidelity: Fidelity, mu: int) -> Iterator[BracketPlan]:
        s, sizes = self.stages(fidelity), self.bracket_sizes(fidelity, mu)
        fidelity = self.floored(fidelity)
        plans = [shrinking_plan(b, m, s, fidelity, self.eta_fid, self.survival_fraction)
                 for b, m in enumerate(sizes, start=1)]
        while True:
            yield from plans


@register("fidelity_schedules", "cahb", MULTI_FIDELITY_HPS,
          "cost-aware Hyperband (paper 001 Alg. 2): hb brackets filled by estimated cost, not count")
class CostAwareHyperband(HyperbandBatches):
    def brackets(self, fidelity: Fidelity, mu: int) -> Iterator[BracketPlan]:
        s, sizes = self.stages(fidelity), self.bracket_sizes(fidelity, mu)
        fidelity = self.floored(fidelity)
        plans = []
        for b, m in enumerate(sizes, start=1):
            resize = partial(shrinking_plan, b, s=s, fidelity=fidelity, eta_fid=self.eta_fid, f=self.survival_fraction)
            plans.append(BracketPlan(b, resize(m).stages, resize=resize))
        while True:
            yield from plans
