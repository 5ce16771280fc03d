"""Surrogate features: configuration vectors plus their fidelity as a numeric matrix.

Surrogates see configurations through :class:`FeatureEncoder`, which turns ConfigSpace vectors
(see :mod:`metaopt.core.space_codec`) into plain real features that distance- and tree-based models
can use directly:

* numeric hyperparameters (float, int, ordinal, constant) keep their vector value, mapped to
  [0, 1] on their own (log) scale (ordinals: choice index / (k - 1));
* an inactive numeric hyperparameter (NaN in the vector) becomes ``INACTIVE = -0.5``. It lies
  outside [0, 1], so a tree can split inactive rows off with one threshold, and a distance sees
  "inactive" as different from every active value (by at least 0.5, like half the range) rather
  than as some arbitrary active value, as imputation would;
* a categorical with k choices becomes k one-hot columns scaled by 1/sqrt(2), so that changing
  the category moves a point by Euclidean distance exactly 1, like traversing a full numeric
  range. An inactive categorical is all zeros (distance 1/sqrt(2) to any active choice);
* the last column is the fidelity r as log(r / r_min) / log(r_max / r_min), in [0, 1]
  (0 when r_min == r_max).
"""

from __future__ import annotations

import math

import numpy as np
from ConfigSpace.hyperparameters import CategoricalHyperparameter

from metaopt.core.libm import log as libm_log
from metaopt.core.benchmarks.base import Fidelity
from metaopt.core.space_codec import SpaceCodec

INACTIVE = -0.5
"""Feature value of an inactive numeric hyperparameter (outside the active range [0, 1])."""

ONE_HOT = 1.0 / math.sqrt(2.0)
"""Value of the hot column of a categorical: two differing one-hot rows are at distance 1."""


class FeatureEncoder:
    """Vectors of one search space (plus fidelity) to surrogate features; see the module docstring."""

    def __init__(self, codec: SpaceCodec, fidelity: Fidelity) -> None:
        self.fidelity = fidelity
        num_cols, num_lo, num_span, num_names = [], [], [], []
        cat_cols, cat_codes, cat_names = [], [], []
        for j, name in enumerate(codec.names):
            hp = codec.space[name]
            if isinstance(hp, CategoricalHyperparameter):
                for code, choice in enumerate(hp.choices):
                    cat_cols.append(j)
                    cat_codes.append(float(code))
                    cat_names.append(f"{name}={choice}")
            else:
                # Numeric vectors live in [lower_vectorized, upper_vectorized]: [0, 1] for floats and
                # ints, choice indices for ordinals, a single point for constants (span 0 -> 0).
                lo, hi = float(hp.lower_vectorized), float(hp.upper_vectorized)
                num_cols.append(j)
                num_lo.append(lo)
                num_span.append(hi - lo if hi > lo else math.inf)
                num_names.append(name)
        self._num_cols = np.array(num_cols, dtype=int)
        self._num_lo = np.array(num_lo, dtype=float)
        self._num_span = np.array(num_span, dtype=float)
        self._cat_cols = np.array(cat_cols, dtype=int)
        self._cat_codes = np.array(cat_codes, dtype=float)
        self._log_r_min = math.log(fidelity.r_min)
        log_range = math.log(fidelity.r_max / fidelity.r_min)
        self._log_r_range = log_range if log_range > 0 else math.inf  # r_min == r_max -> column of 0
        self.feature_names: list[str] = num_names + cat_names + [fidelity.name]
        self.dim = codec.dim

    @property
    def n_features(self) -> int:
        return len(self.feature_names)

    @property
    def categorical_slice(self) -> slice:
        """Columns of the one-hot encoded categoricals."""
        return slice(len(self._num_cols), len(self._num_cols) + len(self._cat_cols))

    def encode(self, X: np.ndarray, fidelity: np.ndarray | float) -> np.ndarray:
        """Features of the vectors ``X`` (n, d) evaluated at ``fidelity`` (n,) or a scalar: (n, p)."""
        X = np.asarray(X, dtype=float).reshape(-1, self.dim)
        n = len(X)
        numeric = (X[:, self._num_cols] - self._num_lo) / self._num_span
        numeric[np.isnan(numeric)] = INACTIVE
        # NaN (inactive) never equals a code, so an inactive categorical is all zeros.
        one_hot = (X[:, self._cat_cols] == self._cat_codes) * ONE_HOT
        # log r from the C library (numpy's AVX-512 log differs in the last bit), once per distinct
        # fidelity given (a scalar fidelity: once), then broadcast to the n rows. One fidelity for
        # every row (the candidates a surrogate scores) skips np.unique's sort.
        fidelity = np.asarray(fidelity, dtype=float).reshape(-1)
        if len(fidelity) and (fidelity == fidelity[0]).all():
            levels, where = fidelity[:1], np.zeros(len(fidelity), dtype=np.intp)
        else:
            levels, where = np.unique(fidelity, return_inverse=True)
        fid = np.broadcast_to((libm_log(levels)[where.reshape(-1)] - self._log_r_min) / self._log_r_range, (n,))
        return np.concatenate([numeric, one_hot, fid[:, None]], axis=1)
