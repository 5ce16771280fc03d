"""Pending policies: what an asynchronous run's proposals assume about evaluations still running.

In an asynchronous run (``fidelity_schedule: asha``) a new configuration is proposed while others
are being evaluated. ``ignore`` proposes from the completed results alone, so a model-based proposal
may propose the same region again for every free worker. ``constant_liar`` (Ginsbourger, Le Riche &
Carraro 2010) adds each pending evaluation to the archive the proposal sees, with a fake loss: the
minimum (``liar: min``), mean or maximum of the finite losses observed at the pending evaluation's
fidelity (at any fidelity while there are none there) and, for cost-aware parts, the mean observed
cost. The surrogate, sampler and filter then treat a pending point as evaluated and look elsewhere.
With no finite loss yet there is nothing to lie with and the pending points are left out.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np
from ConfigSpace import Categorical

from metaopt.core.archive import Archive
from metaopt.core.registry import category_base, register


@category_base("pending_policies")
class PendingPolicy(ABC):
    """Turns the archive and the pending evaluations into the archive a proposal sees."""

    @abstractmethod
    def archive_for_proposal(self, archive: Archive, X: np.ndarray, fidelity: np.ndarray) -> Archive:
        """Called by the asynchronous loop before each new configuration is proposed.

        Args:
            archive: Every completed evaluation, in the order the results arrived.
            X: Encoded configurations being evaluated (shape ``(m, dim)``, m >= 0).
            fidelity: Their fidelities, shape ``(m,)``.

        Returns:
            The archive the proposal strategy is to see (``archive`` itself, or a new one: the
            run's archive is never changed). Deterministic: draws no random numbers.
        """


@register("pending_policies", "ignore", description="propose from the completed results only")
class IgnorePending(PendingPolicy):
    def archive_for_proposal(self, archive: Archive, X: np.ndarray, fidelity: np.ndarray) -> Archive:
        return archive


LIARS = {"min": np.min, "mean": np.mean, "max": np.max}


@register("pending_policies", "constant_liar", [Categorical("liar", list(LIARS), default="mean")],
          "constant liar: pending evaluations enter the archive with the min/mean/max observed loss as their loss")
class ConstantLiar(PendingPolicy):
    def __init__(self, liar: str = "mean") -> None:
        self.liar = LIARS[liar]

    def archive_for_proposal(self, archive: Archive, X: np.ndarray, fidelity: np.ndarray) -> Archive:
        loss = archive.loss
        finite = np.isfinite(loss)
        if len(X) == 0 or not finite.any():
            return archive
        lies = np.empty(len(X))
        for i, r in enumerate(fidelity):
            here = finite & (archive.fidelity == r)
            lies[i] = self.liar(loss[here if here.any() else finite])
        fantasy = Archive(archive.dim)
        columns = {name: archive.column(name) for name in Archive._FIELDS}
        fantasy.add(archive.X, **columns)
        m = len(X)
        fantasy.add(X, config_id=np.full(m, -1), batch=np.full(m, -1), stage=np.zeros(m), bracket=np.zeros(m),
                    fidelity=fidelity, loss=lies, cost=np.full(m, float(np.mean(archive.cost))))
        return fantasy
