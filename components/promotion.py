"""Promotion rules: which configurations of a finished stage (a rung) go on to the next stage.

``top`` (successive halving): the ``n_keep`` best by last observed loss, where ``n_keep`` is the
fidelity schedule's count rule.

``cost_aware`` (CASH, paper 001 Alg. 1, lines 7–10): sort the rung by estimated value (last observed
loss, NaN last, ties in batch order) and keep the longest prefix whose summed cost is at most 1/η of
the whole rung's summed cost, η = η_surv = 1/survival_fraction; at least one configuration always
survives. The costs compared are the configurations' costs at the next stage, where the survivors
spend them. With equal costs the rule keeps max(floor(n/η), 1) of n: the configurations ``top``
keeps with that ``n_keep`` (the count rule rounds n·f instead, relative to the bracket's first size).

How the rest of Alg. 1 maps onto the synchronous loop (:mod:`metaopt.engine.loop`):

- Costs c_i. The paper's c_i is the cost of one fidelity unit of configuration i, known or estimated
  "by first running each config at the minimum fidelity" or by a cost model (§2). Here every member
  of a rung has just been evaluated at the rung's fidelity r, so its cost there is observed; the loop
  scales it to the next fidelity r' with the run's cost model, ĉ_i(r') = c_i(r)·m(x_i, r')/m(x_i, r).
  For the log-linear model the factor m(x, r')/m(x, r) is the same for every configuration, so the
  rule compares the observed costs, exactly as the paper compares the c_i.
- Rung budget B_s = ⌊B/S⌋ spent round-robin (lines 5–6). Round-robin gives every configuration of
  a rung the same resource; a stage evaluates all its configurations at the same fidelity r_j. The
  paper fixes the rung budgets and lets them set the resource; the loop fixes the resources on the
  geometric grid r_j = r_max·η_fid^−(s−j) and the rule makes the budgets follow: with costs
  proportional to r, stage j + 1 costs at most η_fid/η_surv times stage j, so with η_fid = η_surv
  (the paper has a single η) no stage costs more than the bracket's first, the paper's B/S.
- Information kept across rungs (line 7: μ̂ is updated with the rung's queries, not re-estimated
  from them alone, unlike Karnin et al.'s SH). A configuration's estimated value is its last
  observed loss, at the highest fidelity it has reached: the loss after all the resource it has
  been given, so every promotion decision rests on everything queried so far.
- Number of rungs S = ⌈min(log_η(Σc/min c), log_η R)⌉ (line 2). log_η R is the schedule's number of
  stages; the cost term ends the elimination early once a single configuration is left, and the
  loop sends that configuration straight to the bracket's last stage (r_max).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Callable

import numpy as np

from metaopt.components.fidelity_schedules import cost_prefix
from metaopt.core.registry import category_base, register


@dataclass(frozen=True)
class Rung:
    """A finished stage, as promotion rules see it (arrays in batch order)."""

    losses: np.ndarray
    """Last observed loss of each configuration (NaN for failed evaluations)."""
    n_keep: int
    """Survivors by the schedule's count rule."""
    survival_fraction: float
    """f = 1/η_surv."""
    next_costs: Callable[[], np.ndarray]
    """Estimated cost of each configuration at the next stage (computed on demand)."""


@category_base("promotion_rules")
class PromotionRule(ABC):
    """Chooses the survivors of a rung (only under a fidelity schedule with ``multi_fidelity``)."""

    @abstractmethod
    def select(self, rung: Rung) -> np.ndarray:
        """Choose which configurations of a finished stage go on to the next stage.

        Called by the loop after every stage of a bracket except its last, once all of the
        stage's evaluations are in.

        Args:
            rung: The finished stage: last observed losses (NaN for failures), the schedule's
                survivor count, the survival fraction, and the next-stage costs on demand
                (calling ``rung.next_costs()`` fits the run's cost model; rules that do not need
                costs should not call it).

        Returns:
            Integer indices into the rung (into ``rung.losses``) of the survivors, best first, no
            duplicates, at least one. Deterministic: a rule draws no random numbers.
        """


def by_loss(losses: np.ndarray) -> np.ndarray:
    """Indices sorted by loss, NaN last; a stable sort keeps batch order among ties (deterministic)."""
    return np.argsort(np.where(np.isnan(losses), np.inf, losses), kind="stable")


@register("promotion_rules", "top", description="top fraction by last observed loss (successive halving)")
class TopFraction(PromotionRule):
    def select(self, rung: Rung) -> np.ndarray:
        return by_loss(rung.losses)[: rung.n_keep]


@register("promotion_rules", "cost_aware",
          description="CASH (paper 001): best by loss while their next-stage cost is at most 1/η of the rung's")
class CostAware(PromotionRule):
    def select(self, rung: Rung) -> np.ndarray:
        order = by_loss(rung.losses)
        costs = np.asarray(rung.next_costs(), dtype=float)[order]
        if costs.sum() <= 0:  # costs say nothing: count configurations instead
            costs = np.ones(len(costs))
        return order[: max(cost_prefix(costs, rung.survival_fraction * costs.sum()), 1)]
