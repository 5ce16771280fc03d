"""Proposals that change strategy during the run: CFO's local search or Smashy's sample-and-filter
first, then a model.

On lcbench the two best single-fidelity designs of the design space are good at different times:
CFO (``cfo_tuned``) leads at 10·d, the random-forest design ``smac_like`` catches up by 30·d
(docs/results/lcbench). ``cfo_then_filter`` runs FLOW² (``components.local_search``) until a
fraction ``switch_at`` of the budget is spent, then proposes from the sampler and surrogate filter the
configuration selects, whose surrogate is fitted on every evaluation so far (CFO's included). The
switch point is a design-space parameter, so the meta-search decides how long the cheap local search
runs; ``switch_at`` = 1 would be CFO, 0 the filter alone.

It never switches back: FLOW²'s incumbent and step size are frozen at the switch. Like CFO it works
on full-fidelity losses only.

``filter_then_rf`` does the same for multi-fidelity designs. Across scenarios the designs of the
space are good at different budgets (docs/results/README.md, ``default_balanced_on_*``): Hyperband-like
designs with a KDE sampler and a GP filter (``metaopt_balanced``) lead at 5·d and 10·d and on the synthetic
families, while the random forest on log losses with log-EI, one full-fidelity point at a time
(``smac_like``, and the second half of ``cfo_then_rf``), converges furthest by 30·d on lcbench,
rbv2_xgboost and nb301. ``filter_then_rf`` runs the configuration's own sample-and-filter under its
own fidelity schedule until a fraction ``switch_at`` of the budget is spent; from the next batch on
the loop leaves the schedule (:attr:`Proposal.leaves_schedule`) and asks for one configuration at a
time at full fidelity, proposed by SMAC's model (:data:`SMAC_MODEL`, fitted on every evaluation so
far, the low fidelities' included: the forest predicts at the full fidelity). A bracket in progress at
the switch is left unfinished; its evaluations stay in the archive.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping

import numpy as np
from ConfigSpace import Float

from metaopt.components.filters import Filter, Scorer
from metaopt.components.local_search import CFO, HYPERPARAMETERS as CFO_HYPERPARAMETERS
from metaopt.components.proposals import INITIAL_DESIGN, Proposal, SampleAndFilter
from metaopt.components.samplers import Sampler
from metaopt.core.context import ProposalContext
from metaopt.core.registry import register

SWITCH_AT = Float("switch_at", (0.05, 0.95), default=0.33)
"""Fraction of the budget after which the proposal switches to its second strategy."""

SMAC_MODEL: Mapping[str, Any] = {
    "proposal": "sample_filter", "sampler": "uniform", "filter_method": "local_random", "surrogate": "rf",
    "acquisition": "logei", "filter_ns0_0": 1.0, "filter_ns0_1": 1.0, "filter_ns1_0": 1.0, "filter_ns1_1": 1.0,
    "filter_rho_0": 0.2, "filter_rho_1": 0.2, "filter_mb": True, "filter_rho_random": True,
    "surrogate_target": "log", "rf_n_trees": 10, "rf_min_samples_leaf": 1, "rf_max_features": 1.0,
    "rf_bootstrap": True, "lrs_random": 2000, "lrs_starts": 10, "lrs_neighbours": 20, "lrs_steps": 10,
    "lrs_step": 0.1,
}
"""SMAC's HPO facade's proposal as a fragment of a configuration γ (the preset ``smac_like`` is this
at full fidelity, one point per batch): uniform samples and a local search from the best
configurations, filtered by a random forest of 10 trees on log losses ranking by log-EI, 20% of
the points random. ``filter_then_rf`` proposes with it after its switch."""


@register("proposals", "cfo_then_filter", hyperparameters=[*CFO_HYPERPARAMETERS, SWITCH_AT],
          description="CFO's local search until a fraction switch_at of the budget is spent, then sample-and-filter")
class CFOThenFilter(Proposal):
    """FLOW² (with the ``cfo_*`` hyperparameters) before ``switch_at``, sample-and-filter after."""

    uses_sampler_and_filter = True
    supports_multi_fidelity = False

    def __init__(self, switch_at: float = SWITCH_AT.default_value, **cfo_hyperparameters: Any) -> None:
        self.switch_at = float(switch_at)
        self.local_search = CFO(**cfo_hyperparameters)
        self.filtered = SampleAndFilter()

    def wired(self, sampler: Sampler, filter: Filter, scorer: Scorer | None) -> "CFOThenFilter":
        self.filtered = replace(self.filtered, sampler=sampler, filter=filter, scorer=scorer)
        return self

    def propose(self, n: int, ctx: ProposalContext) -> np.ndarray:
        if ctx.t < self.switch_at:
            return self.local_search.propose(n, ctx)
        return self.filtered.propose(n, ctx)


@register("proposals", "filter_then_rf", hyperparameters=[INITIAL_DESIGN, SWITCH_AT],
          description="sample-and-filter under the fidelity schedule until a fraction switch_at of the budget, "
                      "then SMAC's random forest one full-fidelity point at a time")
class FilterThenRF(Proposal):
    """The configuration's sample-and-filter (with its initial design) before ``switch_at``; after it,
    the proposal of :data:`SMAC_MODEL`, which :meth:`metaopt.engine.loop.Optimizer.from_config`
    builds and hands over with :meth:`with_late`."""

    uses_sampler_and_filter = True
    leaves_schedule = True
    late_design = SMAC_MODEL

    def __init__(self, switch_at: float = SWITCH_AT.default_value, initial_design_per_dim: int = 0) -> None:
        self.switch_at = float(switch_at)
        self.filtered = SampleAndFilter(initial_design_per_dim=int(initial_design_per_dim))
        self.late: Proposal | None = None

    def wired(self, sampler: Sampler, filter: Filter, scorer: Scorer | None) -> "FilterThenRF":
        self.filtered = replace(self.filtered, sampler=sampler, filter=filter, scorer=scorer)
        return self

    def with_late(self, proposal: Proposal) -> "FilterThenRF":
        self.late = proposal
        return self

    def propose(self, n: int, ctx: ProposalContext) -> np.ndarray:
        if ctx.t < self.switch_at:
            return self.filtered.propose(n, ctx)
        assert self.late is not None, "filter_then_rf is built by Optimizer.from_config, which hands it its model"
        return self.late.propose(n, ctx)
