"""Named restrictions of the design space (paper 004 Table 3) — each yields a restricted space.

A restriction limits selectors to some components, fixes hyperparameters to constants, and ties
hyperparameters to others (a tied one is removed from the space and copies its source's value).
``space()`` is what a meta-optimizer searches; ``complete(γ)`` turns a configuration of the
restricted space into a full configuration of the design space.

ρ convention: here ρ is the *random-interleave* fraction (the share of points that skip the
filter). Table 3 writes γ5 as "ρ → 0" in the R implementation's inverse convention; its text
(RQ6) says "ρ set to 1 (all points are randomly sampled, independent of the filtering model)",
which is our ``filter_rho = 1``. ``rho0`` is the opposite extreme (every point filtered).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from ConfigSpace import ConfigurationSpace

from metaopt.core.errors import UsageError
from metaopt.spaces.design_space import build_space, validate

TIME_VARYING = {  # parameter at t = 1  ->  its value at t = 0
    "filter_rho_1": "filter_rho_0",
    "filter_ns0_1": "filter_ns0_0",
    "filter_ns1_1": "filter_ns1_0",
    "filter_n_trn_1": "filter_n_trn_0",
}
SURROGATES = ("knn1", "kknn7", "tpe", "rf", "gp")


@dataclass(frozen=True)
class Restriction:
    name: str
    rq: str
    description: str
    allowed: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    fixed: Mapping[str, Any] = field(default_factory=dict)
    tied: Mapping[str, str] = field(default_factory=dict)
    defaults: tuple[str, ...] = ()
    """Hyperparameters left out of the space: they take their design-space default (used to keep a
    paper's space as it was when components gain hyperparameters)."""

    def space(self) -> ConfigurationSpace:
        """The restricted design space."""
        return build_space(allowed=self.allowed, fixed=self.fixed, dropped=tuple(self.tied) + self.defaults)

    def complete(self, config: Mapping[str, Any]) -> dict[str, Any]:
        """A full design-space configuration from a configuration of the restricted space."""
        full = validate(config, self.space())  # fills in constants and defaults, checks the restriction
        for target, source in self.tied.items():
            if source in full:
                full[target] = full[source]
        return validate(full)


# The paper's Table 4 space: Smashy's sample-and-filter with a surrogate ranking by its mean, equal
# or HB batches, top-fraction promotion, no early stopping. Table 3's restrictions (γ1..γ7) are
# restrictions of this space, so they are built on top of it.
TABLE4_ALLOWED = {"fidelity_schedule": ("equal", "hb"), "proposal": ("sample_filter",),
                  "filter_method": ("tournament", "progressive"), "surrogate": ("knn1", "kknn7", "tpe", "rf"),
                  "promotion": ("top",), "stopping": ("budget",)}
TABLE4_FIXED = {"acquisition": "mean"}
TABLE4_DEFAULTS = ("surrogate_target", "rf_n_trees", "rf_min_samples_leaf", "rf_max_features", "rf_bootstrap",
                   "rf_refit_growth", "rf_max_samples", "rf_max_samples_per_feature", "initial_design_per_dim",
                   "fidelity_floor")
"""Hyperparameters added after the paper's Table 4: its space leaves them at their defaults (the
surrogate fitted on the losses, the 50-tree forest, no initial design), so it stays the space the
paper searched."""


def _table4(name: str, rq: str, description: str, allowed: Mapping[str, tuple[str, ...]] | None = None,
            fixed: Mapping[str, Any] | None = None, tied: Mapping[str, str] | None = None) -> Restriction:
    """A restriction of the Table 4 space: its own choices on top of Table 4's."""
    allowed = {**TABLE4_ALLOWED, **(allowed or {})}
    fixed = {**TABLE4_FIXED, **(fixed or {})}
    # A fixed selector needs no allowed list (and a fixed "single" schedule is outside Table 4's list).
    allowed = {k: v for k, v in allowed.items() if k not in fixed}
    return Restriction(name, rq, description, allowed=allowed, fixed=fixed, tied=dict(tied or {}),
                       defaults=TABLE4_DEFAULTS)


def _restrictions() -> dict[str, Restriction]:
    equal = {"fidelity_schedule": "equal"}
    one_level = {"fidelity_schedule": ("single", "hb")}  # without a fidelity hb has one level
    nothing_to_act_on = {"stopping": "budget", "cost_penalty": "none", "pending": "ignore"}  # without a fidelity
    # Added after these searches ran: their spaces leave it at its default (no floor), as they searched them.
    later = ("fidelity_floor",)
    items = [
        _table4("gamma1", "RQ4", "no multi-fidelity: every evaluation at r_max (η_fid → ∞, s = 1)",
                    fixed={"fidelity_schedule": "single"}),
        _table4("gamma2", "RQ5a", "constant in time: ρ, N_s⁰, N_s¹ and n_trn equal at t = 0 and t = 1",
                    tied=dict(TIME_VARYING)),
        _table4("gamma3", "RQ5b", "simple filtering: tournament only, n_trn = 1, one constant N_s, constant ρ",
                    fixed={"filter_method": "tournament", "filter_n_trn_0": 1},
                    tied={"filter_n_trn_1": "filter_n_trn_0", "filter_rho_1": "filter_rho_0",
                          "filter_ns0_1": "filter_ns0_0", "filter_ns1_0": "filter_ns0_0",
                          "filter_ns1_1": "filter_ns0_0"}),
        *[_table4(f"gamma4_{s}", "RQ6", f"equal batches, surrogate fixed to {s}",
                      fixed={**equal, "surrogate": s}) for s in SURROGATES if s != "gp"],
        _table4("gamma5", "RQ6", "equal batches, no filtering: every point from the generating distribution "
                    "(ρ = 1 here; Table 3's 'ρ → 0' in the R code's convention)",
                    fixed={**equal, "filter_rho_0": 1.0, "filter_rho_1": 1.0}),
        _table4("gamma6", "RQ6", "equal batches, model-free: ρ = 1 and uniform sampling",
                    fixed={**equal, "filter_rho_0": 1.0, "filter_rho_1": 1.0, "sampler": "uniform"}),
        _table4("gamma7", "RQ7", "equal batches with μ = 32 (synchronous parallel); the paper gives it a "
                "quadruple budget: set the study's budget accordingly (studies/rq7_parallel.yaml)",
                fixed={**equal, "mu": 32}),
        _table4("rho0", "RQ6", "every point filtered by the surrogate (no random interleave, ρ = 0)",
                    fixed={"filter_rho_0": 0.0, "filter_rho_1": 0.0}),
        _table4("table4", "RQ1", "the paper's meta-optimization space (Table 4): Smashy's sample-and-filter "
                "with a KNN1/KKNN7/TPE/RF surrogate ranking by its mean, equal or HB batches, no early stopping"),
        _table4("hb_only", "RQ3", "batch_method HB (paper Table 5, top half)", fixed={"fidelity_schedule": "hb"}),
        _table4("equal_only", "RQ3", "batch_method equal (paper Table 5, bottom half)", fixed=equal),
        # Not a paper's space: the family of the hand-made lcbench design (cfo_then_rf), for a search
        # that tunes within it after the whole space's search could not tell its proposals from noise.
        Restriction("cfo_then_model", "search",
                    "CFO, then a surrogate with a local-and-random acquisition search, one evaluation at a time "
                    "at full fidelity (the family of cfo_then_rf and metaopt_lcbench): when to switch, CFO's "
                    "rules, the surrogate, its target and acquisition, and the local search are searched",
                    fixed={"proposal": "cfo_then_filter", "fidelity_schedule": "single", "mu": 1,
                           "stopping": "budget", "filter_method": "local_random"}),
        # Not a paper's space either: the family of metaopt_balanced (the balanced pooled search's γ*) with
        # SMAC's forest after a switch, which the pooled searches could propose but never reached
        # (studies/filter_then_rf_on_*.yaml probed it by hand: better at 30·d on five of six scenarios).
        Restriction("default_then_rf", "search",
                    "metaopt_balanced's family: Hyperband with KDE samples filtered by a GP under a "
                    "local-and-random acquisition search, then SMAC's random forest one full-fidelity point at "
                    "a time from switch_at on (proposal filter_then_rf): when to switch, the schedule, "
                    "promotion, the filter, the KDE, the GP, its target and acquisition are searched",
                    allowed={"acquisition": ("lcb", "ei", "logei"), "promotion": ("top", "cost_aware")},
                    fixed={"proposal": "filter_then_rf", "fidelity_schedule": "hb", "stopping": "budget",
                           "sampler": "kde", "filter_method": "local_random", "surrogate": "gp",
                           "cost_penalty": "none"}, defaults=later),
        # Not a paper's space: designs for problems without a fidelity (metaopt.minimize without
        # fidelity=, benchmarks full:<scenario>), where every evaluation is at full fidelity: a schedule
        # is a batch size (hb is single on one level, but keeps the presets written for it as points),
        # and cost penalties, stopping rules and pending evaluations have nothing to act on.
        Restriction("no_fidelity", "search",
                    "every design for a problem without a fidelity: batches of mu configurations at full "
                    "fidelity (schedule single or hb, which has one level there), any proposal, sampler, "
                    "filter, surrogate, target and acquisition; no cost penalty, stopping rule or pending",
                    allowed=one_level, fixed=nothing_to_act_on, defaults=later),
        Restriction("no_fidelity_then_rf", "search",
                    "no_fidelity with SMAC's forest after a switch (proposal filter_then_rf): any sampler, filter "
                    "and surrogate up to switch_at, then one configuration at a time from SMAC's random forest",
                    allowed=one_level, fixed={**nothing_to_act_on, "proposal": "filter_then_rf"}, defaults=later),
    ]
    return {r.name: r for r in items}


RESTRICTIONS = _restrictions()


def get_restriction(name: str) -> Restriction:
    try:
        return RESTRICTIONS[name]
    except KeyError:
        raise UsageError(f"unknown restriction {name!r}; known: {', '.join(RESTRICTIONS)}") from None
