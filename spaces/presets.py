"""Presets: known HPO algorithms as named points of the design space (paper 004, Table 1).

A preset is a plain configuration γ. Where Table 1 ties a value to the problem's fidelity range
(Hyperband's first bracket μ(1) = η^(s−1)), the preset is a function of the benchmark's fidelity,
so ``hb`` is Hyperband on every benchmark; it is still an ordinary point of the space.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from metaopt.components.fidelity_schedules import n_stages
from metaopt.components.hybrid_proposals import SMAC_MODEL
from metaopt.core.benchmarks.base import Fidelity
from metaopt.core.errors import UsageError
from metaopt.spaces.design_space import MU, validate

ConfigFn = Callable[[Fidelity], dict[str, Any]]


@dataclass(frozen=True)
class Preset:
    name: str
    description: str
    reference: str
    make: ConfigFn
    found_by: str | None = None
    """The study whose meta-optimization found this design (a design shipped from ``designs/``), else None."""
    found_without_fidelity_by: str | None = None
    """For a shipped design with a second design for problems without a fidelity (``metaopt_default``),
    the study that found the second one."""
    built_on: tuple[str, ...] = ()
    """Earlier searches whose results the design's searches started from (a design file's ``built_on``)."""
    left_out_by: tuple[str, ...] = ()
    """Searches made before the design shipped whose space holds it and that run every known design before
    their selection (the ``seeds`` baseline), or that the harness runs beside those (a design file's
    ``left_out_by``): restored from their archives, they select what they selected before."""

    @property
    def found_by_studies(self) -> tuple[str, ...]:
        """Every study whose γ* this preset is, at some fidelity, that its searches built on, or that it
        names as made before it: a study leaves such a preset out of its own initial design
        (:func:`metaopt.stages.meta.known_designs`), so that it proposes what it proposed before the design
        shipped, and finds it again the same way."""
        return tuple(s for s in (self.found_by, self.found_without_fidelity_by, *self.built_on, *self.left_out_by)
                     if s)

    def config(self, fidelity: Fidelity) -> dict[str, Any]:
        """The validated, complete configuration for a problem with this fidelity range."""
        return validate(self.make(fidelity))


def _hyperband_like(schedule: str, eta: float = 3.0) -> ConfigFn:
    def make(fidelity: Fidelity) -> dict[str, Any]:
        s = n_stages(fidelity, eta)
        mu = min(max(round(eta ** (s - 1)), MU.lower), MU.upper)
        return {
            "fidelity_schedule": schedule,
            "mu": mu,
            "log_eta_fid": math.log(eta),
            "survival_fraction": 1 / eta,
            "sampler": "uniform",
            "promotion": "top",
        }

    return make


def _filter(method: str, surrogate: str, acquisition: str, ns0: tuple[float, float], ns1: tuple[float, float],
            rho: tuple[float, float], mb: bool, rho_random: bool, n_trn: tuple[int, int] | None = None) -> dict[str, Any]:
    """The filter part of a configuration (ρ, N_s⁰, N_s¹, n_trn at t = 0 and t = 1)."""
    config: dict[str, Any] = {
        "filter_method": method, "surrogate": surrogate, "acquisition": acquisition,
        "filter_ns0_0": ns0[0], "filter_ns0_1": ns0[1], "filter_ns1_0": ns1[0], "filter_ns1_1": ns1[1],
        "filter_rho_0": rho[0], "filter_rho_1": rho[1], "filter_mb": mb, "filter_rho_random": rho_random,
    }
    if n_trn is not None:
        config.update(filter_n_trn_0=n_trn[0], filter_n_trn_1=n_trn[1])
    return config


def _bo(surrogate: str, rho: float, candidates: float = 500.0) -> ConfigFn:
    """Sequential BO: one point per batch at full fidelity, the best of ``candidates`` random
    candidates by expected improvement (a random-search acquisition optimizer), a fraction ρ of
    the points random."""
    def make(fidelity: Fidelity) -> dict[str, Any]:
        return {"fidelity_schedule": "single", "mu": 1, "sampler": "uniform",
                **_filter("tournament", surrogate, "ei", (candidates, candidates), (candidates, candidates),
                          (rho, rho), True, True, n_trn=(1, 1))}
    return make


def _gp_bo(fidelity: Fidelity) -> dict[str, Any]:
    """GP-EI BO one point at a time (every GP preset starts from it; ``bo_gp_ei`` proposes 8 points per fit
    and keeps its kernel while the archive grows by less than 10%): :func:`_bo` with a GP whose kernel
    hyperparameters take one L-BFGS step per batch from the previous fit's kernel (``gp_lbfgs_iterations`` 1). Against
    optimizing them to convergence at every batch it is twice as fast and not worse on the held-out
    lcbench instances (better at 10·d and 30·d; rbv2_xgboost: studies/gp_iterations_*.yaml)."""
    return {**_bo("gp", rho=0.0)(fidelity), "gp_lbfgs_iterations": 1}


def _smac_like(fidelity: Fidelity) -> dict[str, Any]:
    """The point of the design space closest to SMAC's HPO facade (SMAC 2.4): full fidelity, one point
    per batch; a random forest of 10 trees on all features with leaves of 1 and bootstrap, fitted on
    log-scaled losses; log-EI maximized by random candidates plus a local search from the best
    configurations (SMAC: 10,000 random challengers, here 2,000 for speed; 10 starts, up to 10 steps);
    20% of the points random. Still different: SMAC starts with a Sobol design of 10·d points (at most
    a quarter of the budget), our run with one random point; the design is in the space
    (``initial_design_per_dim`` 10), but with it, alone or with SMAC's retraining every 8
    configurations (``lrs_retrain_after`` 8), smac_like ended worse at 10·d on the held-out lcbench
    instances and no better at 30·d (studies/initial_design_*.yaml), so the preset leaves it out.
    SMAC's forest splits also on instance features and imputes inactive values differently. The proposal
    (:data:`~metaopt.components.hybrid_proposals.SMAC_MODEL`) is also ``filter_then_rf``'s after its switch.
    Unlike SMAC's, its trees are grown on bootstrap samples of at most 30 draws per feature column
    (``rf_max_samples_per_feature`` 30): the same runs as with SMAC's whole-archive bootstrap up to 30·d
    on every benchmark, and past it fits that no longer grow with the archive
    (studies/rf_samples_per_feature_*.yaml). A fixed 500 draws (``rf_max_samples``) acts within 30·d
    where d is large, and ended worse on nb301, where smac_like is the best design
    (studies/rf_max_samples_*.yaml)."""
    return {"fidelity_schedule": "single", "mu": 1, **SMAC_MODEL, "rf_max_samples_per_feature": 30}


def _cfo_tuned(fidelity: Fidelity) -> dict[str, Any]:
    """CFO with the paper's step unit (c = 1) and a random start where there is no cheap end."""
    return {"fidelity_schedule": "single", "mu": 1, "proposal": "cfo", "cfo_step_init": 1.0, "cfo_start": "random"}


def _cfo_then_rf(fidelity: Fidelity) -> dict[str, Any]:
    """``cfo_then_filter``: the CFO of ``cfo_tuned`` until half the budget is spent, then the filter of
    ``smac_like``."""
    filtered = {k: v for k, v in SMAC_MODEL.items() if k != "proposal"}
    return {**_cfo_tuned(fidelity), "proposal": "cfo_then_filter", "switch_at": 0.5, **filtered}


def _bohb(fidelity: Fidelity) -> dict[str, Any]:
    """Table 1: Hyperband brackets, KDE sampling, TPE density-ratio filter over 64 samples, ρ = 1/3."""
    return {**_hyperband_like("hb")(fidelity), "sampler": "kde",
            **_filter("tournament", "tpe", "mean", (64, 64), (64, 64), (1 / 3, 1 / 3), True, True, n_trn=(1, 1))}


def _asha(fidelity: Fidelity) -> dict[str, Any]:
    """ASHA with η = 3 (rungs on the η_fid = 3 grid, the top third promoted), random proposals."""
    return {"fidelity_schedule": "asha", "mu": 1, "log_eta_fid": math.log(3), "survival_fraction": 1 / 3,
            "sampler": "uniform"}


def _async_bohb(fidelity: Fidelity) -> dict[str, Any]:
    """``asha`` with BOHB's proposals (KDE sampler, TPE filter over 64 samples, ρ = 1/3), the running
    evaluations entering the models with the mean observed loss (constant liar)."""
    bohb = {k: v for k, v in _bohb(fidelity).items() if k not in ("fidelity_schedule", "mu", "promotion")}
    return {**bohb, **_asha(fidelity), "sampler": "kde", "pending": "constant_liar", "liar": "mean"}


def _smashy(schedule: str, mu: int, eta_fid: float, eta_surv: float, sampler: str, **filter_args: Any) -> ConfigFn:
    """An optimized configuration of paper 004 Table 5 (aggregated γ* values)."""
    def make(fidelity: Fidelity) -> dict[str, Any]:
        return {"fidelity_schedule": schedule, "mu": mu, "log_eta_fid": math.log(eta_fid),
                "survival_fraction": 1 / eta_surv, "sampler": sampler, "promotion": "top",
                **_filter(acquisition="mean", **filter_args)}
    return make


PRESETS: dict[str, Preset] = {
    p.name: p
    for p in [
        Preset("rs", "random search: uniform samples at full fidelity, one at a time",
               "Bergstra & Bengio 2012; paper 004 Table 1",
               lambda fidelity: {"fidelity_schedule": "single", "mu": 1, "sampler": "uniform"}),
        Preset("sh", "successive halving, η = 3, μ = η^(s−1) (Hyperband's largest bracket, repeated)",
               "Jamieson & Talwalkar 2016; paper 004 §3.3.4", _hyperband_like("sh")),
        Preset("hb", "Hyperband, η = 3, μ(1) = η^(s−1), budget-matched brackets",
               "Li et al. 2018; paper 004 Table 1", _hyperband_like("hb")),
        Preset("cash", "cost-aware successive halving (CASH): sh, η = 3, μ = η^(s−1); a rung keeps its best "
               "while their next-stage cost is at most 1/η of the rung's (log-linear cost model)",
               "Ivkin, Karnin, Perrone & Zappella, Cost-Aware Adversarial Best Arm Identification (paper 001, Alg. 1)",
               lambda fidelity: {**_hyperband_like("sh")(fidelity), "promotion": "cost_aware"}),
        Preset("cahb", "cost-aware Hyperband (CAHB): hb brackets (η = 3, μ(1) = η^(s−1)) filled by estimated "
               "cost instead of count, CASH promotion (log-linear cost model)",
               "Ivkin, Karnin, Perrone & Zappella, Cost-Aware Adversarial Best Arm Identification (paper 001, Alg. 2)",
               lambda fidelity: {**_hyperband_like("cahb")(fidelity), "promotion": "cost_aware"}),
        Preset("bohb", "BOHB: Hyperband + KDE sampling + TPE filter (64 samples), ρ = 1/3, η = 3",
               "Falkner et al. 2018; paper 004 Table 1", _bohb),
        Preset("asha", "asynchronous successive halving: a worker that frees promotes a configuration in the top "
               "1/3 of its rung's results, else starts a random one at r_1; η = 3 (docs/design.md, 'Parallel "
               "runs')", "Li et al. 2020 (ASHA)", _asha),
        Preset("async_bohb", "asha with BOHB's KDE sampler and TPE filter; running evaluations enter the models "
               "with the mean observed loss (constant liar)",
               "Falkner et al. 2018; Li et al. 2020; Ginsbourger et al. 2010 (constant liar)", _async_bohb),
        Preset("bo_gp_ei", "BO with a GP and expected improvement, full fidelity, batches of 8 points (each the "
               "best of 500 random candidates by EI) from one fit; one L-BFGS step on the kernel hyperparameters "
               "per fit (gp_lbfgs_iterations 1: twice as fast as optimizing them to convergence, and better, "
               "studies/gp_iterations_lcbench.yaml), the kernel re-optimized only when the archive grew by 10% "
               "(gp_refit_growth 0.1). The batches and the kept kernel make it 2.4x (lcbench) to 3.3x "
               "(rbv2_xgboost) faster than one point and one optimization per fit, and not worse "
               "(studies/model_speed_*.yaml); the other GP presets keep one point per batch",
               "paper 004 §3.3.2 (GP-BO)",
               lambda fidelity: {**_gp_bo(fidelity), "mu": 8, "gp_refit_growth": 0.1}),
        Preset("bo_autostop", "GP-EI BO that stops itself when the GP bound on the simple regret falls below "
               "ε = 0.05 × the observed loss range (warm-up 20 evaluations)",
               "Makarova et al. 2022 (paper 002, Eq. 8)",
               lambda fidelity: {**_gp_bo(fidelity), "stopping": "regret_bound"}),
        Preset("bo_rf_ei", "SMAC-like BO: random forest + EI, 20% random interleave, full fidelity; the trees are "
               "regrown when the archive grew by 25% and their leaf values refreshed after every evaluation "
               "(rf_refit_growth 0.25: 4x faster than regrowing every time, and not worse, "
               "studies/rf_refit_lcbench.yaml)",
               "Hutter et al. 2011 (SMAC); paper 004 §3.3.2",
               lambda fidelity: {**_bo("rf", rho=0.2)(fidelity), "rf_refit_growth": 0.25}),
        Preset("smac_like", "SMAC's HPO facade as a point of the design space: RF (10 trees) on log losses, log-EI "
               "maximized by random candidates plus local search from the best, 20% random points",
               "Lindauer et al. 2022 (SMAC3); the smac_hpo peer", _smac_like),
        Preset("cfo", "CFO: FLOW² local search from the low-cost start, one point at a time at full fidelity, "
               "δ_init = 0.1·√d in the normalized space, step shrinking and restarts",
               "Wu, Wang & Huang 2021 (paper 000)",
               lambda fidelity: {"fidelity_schedule": "single", "mu": 1, "proposal": "cfo", "cfo_step_init": 0.1}),
        Preset("cfo_tuned", "CFO with the paper's step constants (δ_init = √d, c = 1) and FLAML's start: "
               "hyperparameters without a cheap end start at a random value; chosen on training instances "
               "of lcbench and rbv2_xgboost among step units 0.1-1 and FLAML's step rules "
               "(docs/design.md, 'Local search')",
               "Wu, Wang & Huang 2021 (paper 000); FLAML's flow2.py", _cfo_tuned),
        Preset("cfo_then_rf", "cfo_tuned's FLOW² local search for the first half of the budget, then "
               "smac_like's random forest and log-EI on every evaluation so far; the switch point 0.5 was chosen "
               "among 0.15, 0.33 and 0.5 on the 8 lcbench training instances x 3 seeds "
               "(studies/cfo_then_rf_switch.yaml)",
               "Wu, Wang & Huang 2021 (paper 000) then Lindauer et al. 2022 (SMAC3)", _cfo_then_rf),
        Preset("cfo_flaml", "CFO with FLAML's choices where the paper leaves them open: random start of "
               "hyperparameters without a cheap end, repeated telescoping shrinks, re-expansion on improvement, "
               "a 10x larger step lower bound",
               "FLAML's flow2.py (paper 000's implementation)",
               lambda fidelity: {"fidelity_schedule": "single", "mu": 1, "proposal": "cfo", "cfo_step_init": 0.1,
                                 "cfo_start": "random", "cfo_repeat_shrink": True, "cfo_expand": True,
                                 "cfo_lower_scale": 10.0}),
        Preset("bo_eipu", "GP-EI BO ranking by EI per unit predicted cost, EI/c(x) (log-linear cost model)",
               "Snoek et al. 2012; paper 003 §2",
               lambda fidelity: {**_gp_bo(fidelity), "cost_penalty": "eipu", "cost_model": "loglinear"}),
        Preset("bo_ei_alpha", "GP-EI BO ranking by EI/c(x)^α, α = 0.2 (log-linear cost model)",
               "paper 003 §3.1 Eq. 1, §4 (α ≈ 0.2 best under a time budget)",
               lambda fidelity: {**_gp_bo(fidelity), "cost_penalty": "ei_alpha", "cost_alpha": 0.2,
                                 "cost_model": "loglinear"}),
        Preset("bo_eicool", "GP-EI BO with EI-cool: EI/c(x)^α, α = 1 − spent/B decays from EIpu to EI "
               "(log-linear cost model)", "Lee et al. 2020; paper 003 §2",
               lambda fidelity: {**_gp_bo(fidelity), "cost_penalty": "ei_cool", "cost_model": "loglinear"}),
        Preset("bo_cei", "GP-EI BO with CEI_λ, λ = 0.1: the cheapest candidate with EI ≥ 0.9·max EI "
               "(log-linear cost model)", "paper 003 §3.1 Eq. 2",
               lambda fidelity: {**_gp_bo(fidelity), "cost_penalty": "cei", "cei_lambda": 0.1,
                                 "cost_model": "loglinear"}),
        Preset("smashy_lcbench_hb", "paper 004 Table 5, γ* lcbench, batch_method HB", "paper 004 Table 5",
               _smashy("hb", 5, 3.11, 2.22, "kde", method="progressive", surrogate="kknn7", ns0=(101, 312),
                       ns1=(28.9, 8), rho=(0.21, 0.08), mb=True, rho_random=False)),
        Preset("smashy_lcbench_equal", "paper 004 Table 5, γ* lcbench, batch_method equal", "paper 004 Table 5",
               _smashy("equal", 3, 2.71, 2.5, "kde", method="tournament", surrogate="kknn7", ns0=(21.5, 941),
                       ns1=(35.4, 264), rho=(0.32, 0.16), mb=True, rho_random=True, n_trn=(1, 2))),
        Preset("smashy_rbv2_hb", "paper 004 Table 5, γ* rbv2_super, batch_method HB", "paper 004 Table 5",
               _smashy("hb", 2, 1.97, 6.09, "uniform", method="progressive", surrogate="knn1", ns0=(226, 495),
                       ns1=(256, 99.7), rho=(0.86, 0.06), mb=False, rho_random=True)),
        Preset("smashy_rbv2_equal", "paper 004 Table 5, γ* rbv2_super, batch_method equal", "paper 004 Table 5",
               _smashy("equal", 15, 1.25, 18.8, "kde", method="progressive", surrogate="knn1", ns0=(39.5, 18.1),
                       ns1=(6.65, 925), rho=(0.83, 0.03), mb=True, rho_random=False)),
    ]
}


DESIGNS_DIR = Path(__file__).parent / "designs"
"""Designs found by the shipped studies' meta-optimizations, one JSON file each (see designs/README.md)."""


def _found_design(path: Path) -> Preset:
    """A preset from a design file: ``name``, ``description``, ``found_by`` (the study), ``regenerate``
    (the command that finds it again), ``gamma`` (a configuration of the full design space) and, optionally,
    ``left_out_by`` (:attr:`Preset.left_out_by`); or the
    default optimizer, a design for problems with a fidelity and one for problems without (a fidelity of
    one level, ``r_min == r_max``): ``name``, ``description``, ``with_fidelity`` and ``without_fidelity``,
    each ``found_by``, ``regenerate``, ``gamma`` (the study's γ*) and ``built_on`` (the earlier searches it
    started from, which leave it out of their initial designs too)."""
    entry = json.loads(path.read_text())
    if "with_fidelity" not in entry:
        gamma = validate(entry["gamma"])
        return Preset(entry["name"], entry["description"], f"found by studies/{entry['found_by']}.yaml "
                      f"({entry['regenerate']})", lambda fidelity: dict(gamma), found_by=entry["found_by"],
                      left_out_by=tuple(entry.get("left_out_by", ())))
    parts = [entry["with_fidelity"], entry["without_fidelity"]]
    with_fidelity, without_fidelity = (validate(part["gamma"]) for part in parts)

    def make(fidelity: Fidelity) -> dict[str, Any]:
        return dict(with_fidelity if fidelity.r_min < fidelity.r_max else without_fidelity)

    with_where, without_where = (f"the γ* of studies/{part['found_by']}.yaml ({part['regenerate']})"
                                 for part in parts)
    return Preset(entry["name"], entry["description"],
                  f"with a fidelity {with_where}; without one {without_where}", make,
                  found_by=entry["with_fidelity"]["found_by"],
                  found_without_fidelity_by=entry["without_fidelity"]["found_by"],
                  built_on=tuple(study for part in parts for study in part.get("built_on", [])))


for _path in sorted(DESIGNS_DIR.glob("*.json")):
    _preset = _found_design(_path)
    if _preset.name in PRESETS:
        raise RuntimeError(f"{_path}: name {_preset.name!r} is already a preset")
    PRESETS[_preset.name] = _preset


DEFAULT_OPTIMIZER = "metaopt_default"
"""The optimizer of ``metaopt run`` without ``--optimizer`` and of :func:`metaopt.minimize` /
:func:`metaopt.ask_tell` without ``optimizer`` (``designs/metaopt_default.json``): on a problem with a
fidelity, the γ* of studies/default_switch_race.yaml; without one, the γ* of
studies/no_fidelity_switch_race.yaml. Both are held out per scenario in docs/results/README.md."""


def get_preset(name: str) -> Preset:
    try:
        return PRESETS[name]
    except KeyError:
        raise UsageError(f"unknown optimizer {name!r}; known presets: {', '.join(PRESETS)}") from None
