"""Acquisition functions: rank candidates from a surrogate's (mean, std); LOWER score is better.

The filters keep the candidates with the lowest scores, so improvement-type criteria are negated
(score = −EI, −PI). Losses are minimized; ``y_best`` is the best observed loss.

Without uncertainty (``std`` None, every std 0, or no finite ``y_best``) EI, PI and LCB fall back to
the mean (score = mean): the ordering the no-uncertainty limit gives for the best candidates, and
still a full ordering (EI/PI themselves would be 0 for every candidate worse than ``y_best``). Where
only some stds are 0, EI and PI use their exact σ → 0 limits, max(y_best − μ, 0) and [μ < y_best].
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod

import numpy as np
from ConfigSpace import Float
from scipy.special import log_ndtr, ndtr

from metaopt.core.libm import exp as libm_exp
from metaopt.core.registry import category_base, register


@category_base("acquisitions")
class Acquisition(ABC):
    """Scores candidates from the surrogate's prediction; lower is better."""

    needs_std: bool = False
    """Whether the score uses the predicted std (without one it falls back to the mean)."""
    supports_cost_penalty: bool = False
    """Whether a cost penalty may re-rank this acquisition's candidates: the penalties trade
    expected improvement against cost, so the cost-penalty category exists only under EI."""

    @abstractmethod
    def score(self, mean: np.ndarray, std: np.ndarray | None, y_best: float | None) -> np.ndarray:
        """Score candidates; lower is better (the filters keep the lowest).

        Called by :meth:`metaopt.components.filters.Scorer.fit_and_score` once per filtered batch,
        after the surrogate was fitted on the archive and predicted the candidates.

        Args:
            mean: Predicted losses, shape ``(m,)``.
            std: Predicted standard deviations, shape ``(m,)``, or None for a surrogate without
                ``has_std``.
            y_best: The best observed loss at the fidelity predicted at (or overall); may be
                non-finite.

        Returns:
            Scores, shape ``(m,)``. Deterministic: an acquisition draws no random numbers.
        """


def has_uncertainty(std: np.ndarray | None, y_best: float | None) -> bool:
    """Whether a std-based score is defined: some positive std and a finite incumbent."""
    return std is not None and bool(np.any(np.asarray(std) > 0)) and y_best is not None and bool(np.isfinite(y_best))


_SQRT_2PI = math.sqrt(2 * math.pi)


_LOG_DOUBLE_MAX = math.log(np.finfo(float).max)
"""≈ 709.78: e^x overflows a double above it."""


def normal_cdf(z: np.ndarray) -> np.ndarray:
    """Φ(z): ``scipy.special.ndtr``, which is what scipy's ``norm.cdf`` computes (the same bits)
    without the distribution's per-call argument handling; a scalar C loop, the same on every CPU."""
    return ndtr(z)


def normal_pdf(z: np.ndarray) -> np.ndarray:
    """φ(z) = exp(−z²/2) / √(2π), scipy's formula for ``norm.pdf`` with the C library's exp: scipy's
    goes through numpy's, whose AVX-512 kernel differs in the last bit (:mod:`metaopt.core.libm`), and a
    last bit of EI can reorder near-equal candidates, i.e. change the run."""
    return libm_exp(-np.asarray(z, dtype=float) ** 2 / 2.0) / _SQRT_2PI


def expected_improvement(mean: np.ndarray, std: np.ndarray, y_best: float) -> np.ndarray:
    """EI for minimization: E[max(y_best − Y, 0)], Y ~ N(mean, std²); std 0 gives max(y_best − mean, 0)."""
    mean, std = np.asarray(mean, dtype=float), np.asarray(std, dtype=float)
    gain = y_best - mean
    safe = np.where(std > 0, std, 1.0)
    z = gain / safe
    ei = gain * normal_cdf(z) + safe * normal_pdf(z)
    return np.where(std > 0, np.maximum(ei, 0.0), np.maximum(gain, 0.0))


def probability_of_improvement(mean: np.ndarray, std: np.ndarray, y_best: float) -> np.ndarray:
    """PI for minimization: P(Y < y_best); std 0 gives [mean < y_best]."""
    mean, std = np.asarray(mean, dtype=float), np.asarray(std, dtype=float)
    gain = y_best - mean
    safe = np.where(std > 0, std, 1.0)
    return np.where(std > 0, normal_cdf(gain / safe), (gain > 0).astype(float))


def log_expected_improvement(mean: np.ndarray, std: np.ndarray, y_best: float) -> np.ndarray:
    """EI in the original space of a model of *log* losses (SMAC's ``EI(log=True)``).

    With Y ~ N(mean, std²) the predicted log loss and y_best the best log loss:
    E[max(e^y_best − e^Y, 0)] = e^y_best Φ(v) − e^(mean + std²/2) Φ(v − std), v = (y_best − mean)/std;
    std 0 gives max(e^y_best − e^mean, 0).

    Where e^y_best itself overflows a double (y_best > 709.78: a model of raw losses, surrogate_target
    ``none``, on an objective whose losses are that large), the result is that EI divided by
    e^y_best, i.e. the same formula with every log loss shifted by −y_best: the same order of the
    candidates (the filters only rank by it; log-EI takes no cost penalty), where it raised
    OverflowError before. Below the overflow nothing changes, bit for bit.
    """
    mean, std = np.asarray(mean, dtype=float), np.asarray(std, dtype=float)
    if y_best > _LOG_DOUBLE_MAX:
        return log_expected_improvement(mean - y_best, std, 0.0)
    safe = np.where(std > 0, std, 1.0)
    v = (y_best - mean) / safe
    # exp from the C library (metaopt.core.libm): numpy's AVX-512 exp differs in the last bit, and a last
    # bit here can reorder near-equal candidates, i.e. change the run.
    best = math.exp(y_best)
    growth = mean + 0.5 * safe**2
    huge = growth > _LOG_DOUBLE_MAX
    second = libm_exp(np.where(huge, 0.0, growth)) * normal_cdf(v - safe)
    # e^(mean + std²/2) overflows where a model of log losses is very unsure (std ≳ 37.7), while Φ(v − std)
    # underflows towards 0; their product is at most e^y_best Φ(v), so it is formed in log space there
    # (it raised before). Only there: the direct form is kept wherever it was finite, so every run that
    # finished before stays bit for bit (it loses digits only in a narrow band just below the overflow,
    # where Φ(v − std) is subnormal).
    second[huge] = libm_exp(growth[huge] + log_ndtr(v[huge] - safe[huge]))
    ei = np.maximum(best * normal_cdf(v) - second, 0.0)
    certain = ~(std > 0)  # the σ → 0 limit, e^mean taken only where it is used
    ei[certain] = np.maximum(best - libm_exp(mean[certain]), 0.0)
    return ei


@register("acquisitions", "mean", description="the predicted loss itself (Smashy's filtering)")
class MeanAcquisition(Acquisition):
    def score(self, mean: np.ndarray, std: np.ndarray | None, y_best: float | None) -> np.ndarray:
        return np.asarray(mean, dtype=float)


@register("acquisitions", "ei", description="expected improvement over the best loss (score −EI)")
class ExpectedImprovement(Acquisition):
    needs_std = True
    supports_cost_penalty = True

    def score(self, mean: np.ndarray, std: np.ndarray | None, y_best: float | None) -> np.ndarray:
        if not has_uncertainty(std, y_best):
            return np.asarray(mean, dtype=float)
        return -expected_improvement(mean, std, float(y_best))


@register("acquisitions", "logei", description="EI in the original space of a model of log losses (score −EI; "
                                                "SMAC's log-EI, meant for surrogate_target log)")
class LogExpectedImprovement(Acquisition):
    needs_std = True

    def score(self, mean: np.ndarray, std: np.ndarray | None, y_best: float | None) -> np.ndarray:
        if not has_uncertainty(std, y_best):
            return np.asarray(mean, dtype=float)
        return -log_expected_improvement(mean, std, float(y_best))


@register("acquisitions", "pi", description="probability of improving on the best loss (score −PI)")
class ProbabilityOfImprovement(Acquisition):
    needs_std = True

    def score(self, mean: np.ndarray, std: np.ndarray | None, y_best: float | None) -> np.ndarray:
        if not has_uncertainty(std, y_best):
            return np.asarray(mean, dtype=float)
        return -probability_of_improvement(mean, std, float(y_best))


@register("acquisitions", "lcb", hyperparameters=[Float("lcb_kappa", (0.1, 5.0), default=1.0, log=True)],
          description="lower confidence bound mean − κ·std")
class LowerConfidenceBound(Acquisition):
    needs_std = True

    def __init__(self, lcb_kappa: float = 1.0) -> None:
        self.kappa = float(lcb_kappa)

    def score(self, mean: np.ndarray, std: np.ndarray | None, y_best: float | None) -> np.ndarray:
        mean = np.asarray(mean, dtype=float)
        if std is None:
            return mean
        return mean - self.kappa * np.asarray(std, dtype=float)
