"""Promotion rules: which configurations of a batch survive to the next fidelity stage."""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np

from metaopt.registry import register


class PromotionRule(ABC):
    """Chooses ``n_keep`` of a batch from their last observed losses (and costs)."""

    @abstractmethod
    def select(self, losses: np.ndarray, costs: np.ndarray, n_keep: int) -> np.ndarray:
        """Indices into the batch of the survivors, best first."""


@register("promotion_rules", "top", description="top fraction by last observed loss (successive halving)")
class TopFraction(PromotionRule):
    def select(self, losses: np.ndarray, costs: np.ndarray, n_keep: int) -> np.ndarray:
        # A stable sort keeps batch order among ties, so selection is deterministic; NaN losses sort last.
        order = np.argsort(np.where(np.isnan(losses), np.inf, losses), kind="stable")
        return order[:n_keep]
