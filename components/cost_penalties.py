"""Cost penalties on expected improvement (paper 003; docs/design.md §5): trade EI against predicted cost.

Each penalty maps, per candidate, EI(x) ≥ 0, the predicted cost c(x) > 0 and the spent budget
fraction t ∈ [0, 1] to a score; LOWER is better, as for every acquisition (the filters keep the
lowest scores).

- ``none``: the acquisition's own score (−EI), no cost model.
- ``eipu``: EIpu(x) = EI(x) / c(x), EI per unit cost (paper 003 §2; Snoek et al. 2012).
- ``ei_alpha``: EI_α(x) = EI(x) / c(x)^α (paper 003 §3.1, Eq. 1); α = 0 is EI, α = 1 is EIpu.
  Paper 003 §4: α ≈ 0.2 was best under a time budget (0.1 / 0.01 traded 50% / 20% of the time
  for ≤ 1% accuracy), α = 1 degrades accuracy severely; hence α ∈ [0.01, 1] (log), default 0.2.
- ``ei_cool``: EI-cool (paper 003 §2, after Lee et al. 2020): EI / c(x)^α with
  α = (τ − τ_k)/(τ − τ_init), decaying from 1 (EIpu) to 0 (EI) as the budget τ is spent. Here
  α = 1 − t with t = spent/B from the run (τ_init = 0: the runs have no separate initial design).
- ``cei``: CEI_λ (paper 003 §3.1, Eq. 2): among candidates with EI ≥ (1 − λ)·max EI, the cheapest.
  λ ∈ [0, 1]; the paper gives no single default, 0.1 keeps near-greedy EI (λ = 0 is EI's argmax).

Scores of the EI-ratio penalties are −EI/c^α. CEI is set-based, so its score is the candidate's
rank in the CEI order of all candidates scored together: the eligible (EI ≥ (1 − λ)·max EI, the
maximum over all of them) by increasing cost, then the others by decreasing EI (ties by position).
A tournament that keeps the lowest scores of a subset therefore picks the cheapest candidate of
the subset that is eligible with respect to the whole candidate set, or, if it holds none, the
subset's best by EI; over the whole set it picks exactly CEI's choice.

If no candidate has positive EI (no uncertainty, or nothing predicted to improve), a ratio would
tie every candidate at 0: every penalty then returns the acquisition's own scores (``fallback``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np
from ConfigSpace import Float

from metaopt.core.libm import power as libm_power
from metaopt.components.cost_models import MIN_COST
from metaopt.core.registry import category_base, register


@category_base("cost_penalties")
class CostPenalty(ABC):
    """Scores candidates from (EI, predicted cost, t); lower is better."""

    uses_cost: bool = True
    """Whether the penalty needs the cost model: the cost-model category exists in the design space
    only under such a penalty, and the design space forbids it with a surrogate without a std."""

    @abstractmethod
    def score(self, ei: np.ndarray, cost: np.ndarray, t: float, fallback: np.ndarray) -> np.ndarray:
        """Score candidates; lower is better.

        Called by :meth:`metaopt.components.filters.Scorer.fit_and_score` once per filtered batch,
        after the acquisition scored the candidates (only for penalties with ``uses_cost``: for
        the others the acquisition's scores are used as they are).

        Args:
            ei: Expected improvement of each candidate, shape ``(m,)``, ≥ 0 (all 0 when the
                surrogate gave no usable std).
            cost: Predicted cost of each candidate at the fidelity predicted at, shape ``(m,)``, > 0.
            t: Spent budget fraction in [0, 1].
            fallback: The acquisition's scores, shape ``(m,)``.

        Returns:
            Scores, shape ``(m,)``. Deterministic: a penalty draws no random numbers.
        """


class _EIOverCost(CostPenalty):
    """A penalty on positive EI; every candidate's EI 0 falls back to the acquisition's scores."""

    def score(self, ei: np.ndarray, cost: np.ndarray, t: float, fallback: np.ndarray) -> np.ndarray:
        ei = np.asarray(ei, dtype=float)
        if not np.any(ei > 0):
            return np.asarray(fallback, dtype=float)
        return self._score(ei, np.maximum(np.asarray(cost, dtype=float), MIN_COST), float(t))

    @abstractmethod
    def _score(self, ei: np.ndarray, cost: np.ndarray, t: float) -> np.ndarray:
        """Scores when some EI is positive."""


def ei_per_cost(ei: np.ndarray, cost: np.ndarray, alpha: float) -> np.ndarray:
    """The score −EI / c^α."""
    return -ei / libm_power(cost, alpha)  # the C library's pow: the same bits on every CPU


@register("cost_penalties", "none", description="no cost penalty: rank by the acquisition alone")
class NoPenalty(CostPenalty):
    """The acquisition's own scores; needs no cost model."""

    uses_cost = False

    def score(self, ei: np.ndarray, cost: np.ndarray, t: float, fallback: np.ndarray) -> np.ndarray:
        return np.asarray(fallback, dtype=float)


@register("cost_penalties", "eipu", description="EI per unit cost, EI/c(x) (Snoek et al. 2012)")
class EIPerUnitCost(_EIOverCost):
    def _score(self, ei: np.ndarray, cost: np.ndarray, t: float) -> np.ndarray:
        return ei_per_cost(ei, cost, 1.0)


@register("cost_penalties", "ei_alpha",
          hyperparameters=[Float("cost_alpha", (0.01, 1.0), default=0.2, log=True)],
          description="EI/c(x)^α (paper 003 Eq. 1)")
class EIAlpha(_EIOverCost):
    def __init__(self, cost_alpha: float = 0.2) -> None:
        self.alpha = float(cost_alpha)

    def _score(self, ei: np.ndarray, cost: np.ndarray, t: float) -> np.ndarray:
        return ei_per_cost(ei, cost, self.alpha)


@register("cost_penalties", "ei_cool", description="EI-cool: EI/c(x)^α, α = 1 − t decays from EIpu to EI "
          "(Lee et al. 2020)")
class EICool(_EIOverCost):
    def _score(self, ei: np.ndarray, cost: np.ndarray, t: float) -> np.ndarray:
        return ei_per_cost(ei, cost, min(max(1.0 - t, 0.0), 1.0))


@register("cost_penalties", "cei", hyperparameters=[Float("cei_lambda", (0.0, 1.0), default=0.1)],
          description="CEI_λ: the cheapest candidate with EI ≥ (1 − λ)·max EI (paper 003 Eq. 2)")
class ContextualEI(_EIOverCost):
    def __init__(self, cei_lambda: float = 0.1) -> None:
        self.lam = float(cei_lambda)

    def _score(self, ei: np.ndarray, cost: np.ndarray, t: float) -> np.ndarray:
        eligible = ei >= (1.0 - self.lam) * ei.max()
        # lexsort: last key is primary. Eligible first, by cost; then the others by −EI; ties by position.
        order = np.lexsort((np.where(eligible, cost, -ei), ~eligible))
        ranks = np.empty(len(ei))
        ranks[order] = np.arange(len(ei))
        return ranks
