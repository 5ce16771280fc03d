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
    """Ridge regression (α = 1, with an intercept): few effective parameters, low variance.

    Exactly scikit-learn's ``Ridge(alpha=1.0).fit(F, y)`` and its ``predict`` (the same numbers, bit
    for bit: tests/test_exact_speedups.py), computed by the steps its Cholesky solver takes for dense
    inputs without its input validation and dispatch, which were most of a fit and predict (about
    1.1 ms against 0.06 ms on 150 points): cost-aware promotion refits the model before every decision,
    some 190 times in a 30·d run. The steps: centre the features and the target on their means; solve
    (XᵀX + αI) w = Xᵀy by Cholesky (the primal), or, with more features than points, (XXᵀ + αI) c = y
    and w = Xᵀc (the dual); the intercept is mean(y) − mean(X)·w.
    """

    min_points = 3
    alpha = 1.0

    def _fit(self, F: np.ndarray, y: np.ndarray, rng: np.random.Generator) -> None:
        from scipy import linalg

        X = np.array(F, dtype=np.float64)  # a copy, centred in place as scikit-learn's _preprocess_data does
        target = np.array(y, dtype=np.float64)
        X_offset = np.average(X, axis=0)
        X -= X_offset
        y_offset = np.average(target, axis=0)
        target -= y_offset
        n, p = X.shape
        column = target.reshape(-1, 1)
        if p > n:  # scikit-learn's _solve_cholesky_kernel
            K = X @ X.T
            K.flat[:: n + 1] += self.alpha
            coef = (X.T @ linalg.solve(K, column, assume_a="pos", overwrite_a=False)).T
        else:  # scikit-learn's _solve_cholesky
            A = X.T @ X
            Xy = X.T @ column
            A.flat[:: p + 1] += self.alpha
            coef = linalg.solve(A, Xy, assume_a="pos", overwrite_a=True).T
        self._coef = coef.ravel()
        self._intercept = y_offset - X_offset @ self._coef
        residual = y - self._predict_mean(F)
        self._residual_std = float(residual.std())

    def _predict_mean(self, F: np.ndarray) -> np.ndarray:
        X = np.asarray(F, dtype=np.float64)
        if not np.isfinite(X).all():  # scikit-learn's predict refuses them; the surrogate falls back
            raise ValueError("features must be finite")
        return X @ self._coef + self._intercept

    def _predict(self, F: np.ndarray) -> Prediction:
        return self._predict_mean(F), np.full(len(F), self._residual_std)


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
