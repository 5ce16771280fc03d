"""Cost models: predict the cost (e.g. training seconds) of configurations not yet evaluated.

Paper 003 (CEI) penalizes expected improvement by predicted cost; paper 001 (CASH/CAHB) needs the
cost of configurations before they run. Every model is fitted on log cost against the surrogate
features (:class:`metaopt.core.features.FeatureEncoder`: hyperparameters on their own, log where the
parameter is log, scale in [0, 1], plus log fidelity as the last column) and predicts cost = exp(·).
Costs span orders of magnitude and are roughly multiplicative in their causes, so log cost is the
scale on which a linear model is reasonable (paper 003 §4 recommends such a low-variance model).

The surrogates' robustness carries over: with too few points (or a fit that fails) a model predicts
the geometric mean of the observed costs everywhere; with no points at all, 1.
"""

from __future__ import annotations

import numpy as np

from metaopt.core.libm import exp as libm_exp, log as libm_log
from metaopt.components.surrogates import GaussianProcess, RandomForest, Surrogate, Prediction
from metaopt.core.registry import category_base, register

MIN_COST = 1e-9
"""Costs are floored here before the log (some benchmarks report 0 for tiny runs)."""


class _RidgeLogLinear(Surrogate):
    """Ridge regression (α = 1 on the standardized features): few effective parameters, low variance."""

    min_points = 3

    def _fit(self, F: np.ndarray, y: np.ndarray, rng: np.random.Generator) -> None:
        from sklearn.linear_model import Ridge

        self._model = Ridge(alpha=1.0).fit(F, y)
        residual = y - self._model.predict(F)
        self._residual_std = float(residual.std())

    def _predict(self, F: np.ndarray) -> Prediction:
        return self._model.predict(F), np.full(len(F), self._residual_std)


@category_base("cost_models")
class CostModel:
    """A regressor of log cost; ``predict`` returns costs (> 0).

    A cost model is a surrogate (:class:`metaopt.components.surrogates.Surrogate`) fitted on log
    cost: a new model is a subclass that passes its regressor to ``__init__``. One instance serves
    one run. It is fitted and asked for predictions by the filter's
    :class:`metaopt.components.filters.Scorer` (under a cost penalty, once per filtered batch) and by
    the loop (cost-aware promotion and CAHB's cost-filled brackets, before each decision).
    """

    def __init__(self, regressor: Surrogate) -> None:
        self.regressor = regressor
        self._fitted = False

    def fit(self, F: np.ndarray, cost: np.ndarray, rng: np.random.Generator) -> "CostModel":
        """Fit on features ``F`` (n, p) and observed costs (n,) of every evaluation so far; returns self.

        ``F`` are :class:`metaopt.core.features.FeatureEncoder` features (fidelity last); costs are floored
        at ``MIN_COST`` before the log. Every random draw comes from ``rng``, the run's generator.
        """
        cost = np.asarray(cost, dtype=float)
        self.regressor.fit(F, libm_log(np.maximum(cost, MIN_COST)), rng)
        self._fitted = len(cost) > 0
        return self

    def predict(self, F: np.ndarray) -> np.ndarray:
        """Predicted costs for the features ``F`` (m, p); 1 everywhere before any data."""
        F = np.asarray(F, dtype=float)
        if not self._fitted:
            return np.ones(len(F))
        mean, _ = self.regressor.predict(F)
        return libm_exp(mean)


@register("cost_models", "loglinear", description="ridge regression of log cost on the features (paper 003's choice)")
class LogLinearCostModel(CostModel):
    def __init__(self) -> None:
        super().__init__(_RidgeLogLinear())


@register("cost_models", "gp", description="Gaussian process on log cost (Matern 5/2 ARD)")
class GPCostModel(CostModel):
    def __init__(self) -> None:
        super().__init__(GaussianProcess())


@register("cost_models", "rf", description="random forest on log cost")
class RFCostModel(CostModel):
    def __init__(self) -> None:
        super().__init__(RandomForest())
