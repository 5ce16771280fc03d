"""Presets: known HPO algorithms as named points of the design space (paper 004, Table 1).

A preset is a plain configuration γ. Where Table 1 ties a value to the problem's fidelity range
(Hyperband's first bracket μ(1) = η^(s−1)), the preset is a function of the benchmark's fidelity,
so ``hb`` is Hyperband on every benchmark; it is still an ordinary point of the space.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

from components.fidelity_schedules import n_stages
from metaopt.benchmarks.base import Fidelity
from metaopt.errors import UsageError
from spaces.design_space import MU, validate

ConfigFn = Callable[[Fidelity], dict[str, Any]]


@dataclass(frozen=True)
class Preset:
    name: str
    description: str
    reference: str
    make: ConfigFn

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
    ]
}


def preset_names() -> list[str]:
    return list(PRESETS)


def get_preset(name: str) -> Preset:
    try:
        return PRESETS[name]
    except KeyError:
        raise UsageError(f"unknown optimizer {name!r}; known presets: {', '.join(PRESETS)}") from None
