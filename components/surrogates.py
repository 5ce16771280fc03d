"""Surrogate models: predict the loss of candidate configurations (paper 004, f_surr; docs/design.md §5).

A surrogate is fitted on the features of the whole archive (:class:`metaopt.core.features.FeatureEncoder`;
the fidelity is the last feature column) and refitted every batch, so fitting must be cheap.
``predict`` returns ``(mean, std)``; ``std`` is None for models without an uncertainty estimate
(``has_std`` False). Lower predictions are better (losses are minimized).

Robustness, shared by all models (:meth:`Surrogate.fit`): rows whose loss or features are not finite
(NaN, ±inf) are dropped; with fewer than ``min_points`` rows, a constant loss, a single distinct
feature row, or when the model's own fit (or predict) raises, the surrogate silently becomes a
:class:`Featureless` model (mean and std of the losses) -- a run never crashes because of its surrogate.
"""

from __future__ import annotations

import functools
import logging
import math
from abc import ABC, abstractmethod

import numpy as np
from threadpoolctl import ThreadpoolController
from scipy.spatial import cKDTree
from scipy.spatial.distance import cdist
from ConfigSpace import Categorical, Float, Integer

from metaopt.core.libm import exp as libm_exp, log as libm_log, power as libm_power
from metaopt.core.features import ONE_HOT
from metaopt.core.registry import category_base, register

logger = logging.getLogger(__name__)

# scikit-learn is imported inside the models' methods: importing it costs about a second, and every
# command loads this module (the registry imports all components) whether or not a surrogate is used.

Prediction = tuple[np.ndarray, np.ndarray | None]


def _seed(rng: np.random.Generator) -> int:
    """A seed for libraries that take an int (scikit-learn), drawn from the run's generator."""
    return int(rng.integers(2**31 - 1))


@functools.cache
def _threadpools() -> ThreadpoolController:
    """The process's BLAS/OpenMP thread pools, inspected once: ``threadpool_limits(1)`` inspects
    every loaded library on each call, which cost more than a small GP fit. Created on first use,
    after scikit-learn has loaded its libraries."""
    return ThreadpoolController()


@category_base("surrogates")
class Surrogate(ABC):
    """Base class: cleaning, featureless fallback, error containment. Subclasses implement ``_fit``/``_predict``.

    The loop's :class:`metaopt.components.filters.Scorer` calls :meth:`fit` on the whole archive and
    then :meth:`predict` on the candidates, once per filtered batch; the cost models and the
    model-based stopping rules use the same two calls. One instance serves one run (a model may
    warm-start from its previous fit).
    """

    has_std: bool = False
    """Whether ``predict`` returns a standard deviation (needed by EI, PI, LCB). The design space
    forbids the cost penalties (which need EI) with a surrogate without one."""
    min_points: int = 2
    """Fewer (clean) training rows than this -> featureless fallback."""

    fallback_reason: str | None = None
    """Why the last fit fell back to the featureless model (None if the model itself was fitted)."""

    def fit(self, F: np.ndarray, y: np.ndarray, rng: np.random.Generator) -> Surrogate:
        """Fit on features ``F`` (n, p) and losses ``y`` (n,); returns self."""
        F = np.asarray(F, dtype=float)
        y = np.asarray(y, dtype=float).ravel()
        if F.ndim != 2:
            F = F.reshape(len(y), -1)
        keep = np.isfinite(y) & np.isfinite(F).all(axis=1)
        F, y = F[keep], y[keep]
        self._featureless = Featureless().fit(F, y, rng)
        self._n_features = F.shape[1]
        reason = None
        if len(y) < max(self.min_points, 1):
            reason = f"{len(y)} usable points (< {self.min_points})"
        elif np.ptp(y) == 0:
            reason = "constant loss"
        elif np.ptp(F, axis=0).max(initial=0.0) == 0:
            reason = "a single distinct configuration"
        else:
            try:
                self._fit(F, y, rng)
            except Exception as e:  # never crash a run: fall back and say why
                reason = f"fit failed: {e!r}"
                logger.warning("%s surrogate: %s; using the featureless fallback", type(self).__name__, reason)
        self.fallback_reason = reason
        self._fitted = True
        return self

    def predict(self, F: np.ndarray) -> Prediction:
        """``(mean, std)`` for the features ``F`` (m, p); std is None unless ``has_std``."""
        if not getattr(self, "_fitted", False):
            raise RuntimeError(f"{type(self).__name__}.predict called before fit")
        F = np.asarray(F, dtype=float).reshape(-1, self._n_features)
        base_mean, base_std = self._featureless.predict(F)
        if self.fallback_reason is not None or len(F) == 0:
            mean, std = base_mean, base_std
        else:
            try:
                mean, std = self._predict(F)
                # Repair non-finite outputs (e.g. a numerically broken GP) rather than pass them on.
                mean = np.where(np.isfinite(mean), mean, base_mean)
                if std is not None:
                    std = np.where(np.isfinite(std), np.maximum(std, 0.0), base_std)
            except Exception as e:
                logger.warning("%s surrogate: predict failed (%r); using the featureless fallback",
                               type(self).__name__, e)
                mean, std = base_mean, base_std
        return np.asarray(mean, dtype=float), (np.asarray(std, dtype=float) if self.has_std else None)

    @abstractmethod
    def _fit(self, F: np.ndarray, y: np.ndarray, rng: np.random.Generator) -> None:
        """Fit the model; called by :meth:`fit` only on clean data.

        Args:
            F: Features, shape ``(n, p)``: finite, at least ``min_points`` rows, not all rows equal.
                Columns are :class:`metaopt.core.features.FeatureEncoder`'s (an inactive hyperparameter
                is a fixed out-of-range value, never NaN), the fidelity last.
            y: Losses, shape ``(n,)``: finite and not constant (lower is better).
            rng: The run's generator; every random draw (e.g. a seed for scikit-learn) comes from it.

        May raise: :meth:`fit` then falls back to the featureless model and logs why.
        """

    @abstractmethod
    def _predict(self, F: np.ndarray) -> Prediction:
        """Predict for features ``F`` of shape ``(m, p)``, ``m ≥ 1``; called by :meth:`predict` after a
        successful :meth:`_fit`.

        Returns:
            ``(mean, std)``: arrays of shape ``(m,)``; ``std`` None when the class has no
            ``has_std``. Non-finite values are replaced by the featureless prediction; raising
            falls back to it.
        """


class Featureless(Surrogate):
    """Ignores the features: predicts the mean loss everywhere, with the losses' std (0 with < 2 points)."""

    has_std = True
    min_points = 0

    # fit/predict are overridden: this is the fallback itself, so it skips the base class's
    # cleaning-and-fallback wrapper and only drops non-finite losses.
    def fit(self, F: np.ndarray, y: np.ndarray, rng: np.random.Generator) -> Featureless:
        y = np.asarray(y, dtype=float).ravel()
        self._fit(F, y[np.isfinite(y)], rng)
        self._fitted = True
        return self

    def predict(self, F: np.ndarray) -> Prediction:
        return self._predict(F)

    def _fit(self, F: np.ndarray, y: np.ndarray, rng: np.random.Generator) -> None:
        self._mean = float(y.mean()) if len(y) else 0.0
        self._std = float(y.std()) if len(y) >= 2 else 0.0

    def _predict(self, F: np.ndarray) -> Prediction:
        m = len(F)
        return np.full(m, self._mean), np.full(m, self._std)


def nearest_indices(archive: np.ndarray, queries: np.ndarray, k: int) -> np.ndarray:
    """The ``k`` nearest archive rows of each query (Euclidean distance), nearest first.

    Called by the neighbour surrogates' ``_predict`` on every filtered batch. Returns an int array of
    shape ``(len(queries), k)`` (``k ≤ len(archive)``); of rows at equal distance the one with the
    lower archive index comes first, so the answer depends on the data alone. Distances are those of
    :func:`squared_distances`, bit for bit, whichever of the two searches below answers.

    Written here rather than asking scikit-learn's ``NearestNeighbors``: its brute-force path (used
    above 15 features, e.g. rbv2_xgboost's one-hot columns) spent 50-100 ms a call starting its
    parallel reduction, its distances (expanded into a matrix product) round with the machine's BLAS
    kernel, and neither it nor scipy's KD-tree orders equally distant rows by index. Large archives
    of few features go through a KD-tree (:func:`_nearest_by_tree`), the rest through a scan of all
    distances (:func:`_nearest_by_scan`); both return the same indices.
    """
    n = len(archive)
    if not 1 <= k <= n:
        raise ValueError(f"k must be between 1 and the archive size {n}, got {k}")
    distances_to = _DistancesTo(archive, _hot_columns(queries, archive))
    if (n >= _TREE_MIN_ROWS and archive.shape[1] <= _TREE_MAX_FEATURES and k + _TREE_MARGIN < n
            and np.isfinite(archive).all() and np.isfinite(queries).all()):
        return _nearest_by_tree(archive, distances_to, queries, k)
    return _nearest_by_scan(distances_to, queries, k)


_TREE_MIN_ROWS = 128
"""Archives smaller than this are scanned: building a tree costs more than it saves."""
_TREE_MAX_FEATURES = 32
"""Above this many feature columns a KD-tree prunes little and the scan is faster (nb301's hundreds of
one-hot columns)."""
_TREE_MARGIN = 4
"""Neighbours the tree returns beyond ``k``, so that the ``k``-th can be told apart from the next."""


def _nearest_by_scan(distances_to: _DistancesTo, queries: np.ndarray, k: int) -> np.ndarray:
    """:func:`nearest_indices` by computing every distance to the archive (``distances_to``), then
    ``k`` passes of ``argmin``, which returns the first of equal minima; queries go in blocks so that
    memory stays bounded."""
    n = distances_to.rows
    out = np.empty((len(queries), k), dtype=np.intp)
    block = max(1, _NEIGHBOUR_BLOCK // n)
    for start in range(0, len(queries), block):
        d = distances_to(queries[start:start + block])
        rows = np.arange(len(d))
        for j in range(k):
            nearest = d.argmin(axis=1)
            out[start:start + len(d), j] = nearest
            d[rows, nearest] = np.inf
    return out


_NEIGHBOUR_BLOCK = 1 << 17
"""Distance-matrix entries per block of queries in :func:`_nearest_by_scan` (1 MiB of float64, small
enough for the column-by-column sums to stay in the processor's cache)."""


def _nearest_by_tree(archive: np.ndarray, distances_to: _DistancesTo, queries: np.ndarray, k: int) -> np.ndarray:
    """:func:`nearest_indices` through scipy's KD-tree, with exact distances and the index order of ties.

    The tree returns ``k + _TREE_MARGIN`` neighbours per query under its own arithmetic; they are
    re-ranked by their exact distances (:meth:`_DistancesTo.of_pairs`, recomputed for those pairs
    alone) and then by index. The answer is the scan's whenever every row the tree left out is
    farther than the ``k``-th kept one: the left-out rows are at least as far as the last returned
    row by the tree's distance, and the two distances agree to far better than the relative margin
    1e-9 used here. Queries where that cannot be shown (ties around the ``k``-th neighbour,
    duplicates) are scanned.
    """
    m = len(queries)
    found = k + _TREE_MARGIN
    tree_distance, index = cKDTree(archive, leafsize=32).query(queries, k=found)
    tree_distance, index = tree_distance.reshape(m, found), index.reshape(m, found)
    exact = distances_to.of_pairs(queries, index)
    order = np.lexsort((index, exact), axis=1)  # by distance, then index
    index, exact = np.take_along_axis(index, order, axis=1), np.take_along_axis(exact, order, axis=1)
    out = index[:, :k].astype(np.intp)
    unproven = ~(tree_distance[:, -1] ** 2 > exact[:, k - 1] * (1.0 + 1e-9))
    if unproven.any():
        out[unproven] = _nearest_by_scan(distances_to, queries[unproven], k)
    return out


def squared_distances(queries: np.ndarray, archive: np.ndarray) -> np.ndarray:
    """Squared Euclidean distances, shape ``(len(queries), len(archive))``, the same on every machine.

    One-hot columns (every value 0 or :data:`~metaopt.core.features.ONE_HOT` in both arrays, as the feature
    encoder writes categoricals) contribute ``ONE_HOT² × (number of differing columns)``; the count
    is a matrix product of 0/1 matrices, whose sums are exact integers in any order of summation, so
    no BLAS kernel can change it, and it costs a fraction of a distance loop over hundreds of one-hot
    columns (nb301). The other columns' squared differences are summed column after column in
    numpy's elementwise arithmetic: what scipy's ``cdist`` computes, bit for bit, but without
    depending on how a compiler contracted its loop, and repeatable for chosen pairs
    (:meth:`_DistancesTo.of_pairs`).
    """
    return _DistancesTo(archive, _hot_columns(queries, archive))(queries)


class _DistancesTo:
    """The squared distances of :func:`squared_distances` to one archive, its side prepared once for
    every block of queries. ``hot`` is the one-hot mask of all the queries and the archive, so that
    every block, and every pair, sums the same columns in the same order."""

    def __init__(self, archive: np.ndarray, hot: np.ndarray) -> None:
        self.rows = len(archive)
        self.hot = hot
        self.numeric = archive[:, ~hot]
        self.is_hot = archive[:, hot] != 0
        self.indicators = self.is_hot.astype(float)
        self.counts = self.indicators.sum(axis=1)

    def __call__(self, queries: np.ndarray) -> np.ndarray:
        """Distances of every query to every archive row, shape ``(len(queries), len(archive))``."""
        numeric = queries[:, ~self.hot]
        d = np.zeros((len(queries), self.rows))
        diff = np.empty_like(d)
        for j in range(numeric.shape[1]):
            np.subtract(numeric[:, j, None], self.numeric[None, :, j], out=diff)
            diff *= diff
            d += diff
        if self.hot.any():
            q = (queries[:, self.hot] != 0).astype(float)
            with _threadpools().limit(limits=1):
                differing = q @ self.indicators.T  # hot columns in common, turned in place into differing ones:
            differing *= -2.0
            differing += q.sum(axis=1)[:, None]
            differing += self.counts[None, :]
            differing *= ONE_HOT**2
            d += differing
        return d

    def of_pairs(self, queries: np.ndarray, index: np.ndarray) -> np.ndarray:
        """``self(queries)[i, index[i, j]]`` for every ``i, j``, bit for bit, computed for those pairs alone."""
        numeric = queries[:, ~self.hot]
        d = np.zeros(index.shape)
        for j in range(numeric.shape[1]):
            diff = numeric[:, j, None] - self.numeric[:, j][index]
            diff *= diff
            d += diff
        if self.hot.any():
            q = queries[:, self.hot] != 0
            differing = (q[:, None, :] != self.is_hot[index]).sum(axis=2)
            d += differing * ONE_HOT**2
        return d


def _hot_columns(queries: np.ndarray, archive: np.ndarray) -> np.ndarray:
    """The columns counted as one-hot by :func:`squared_distances`: all 0 or ONE_HOT in both arrays."""
    return _one_hot_columns(queries) & _one_hot_columns(archive)


def _one_hot_columns(F: np.ndarray) -> np.ndarray:
    """Boolean mask of the columns of ``F`` whose values are all 0 or ONE_HOT."""
    return ((F == 0.0) | (F == ONE_HOT)).all(axis=0)


@register("surrogates", "knn1", description="1-nearest neighbour (Euclidean on the features)")
class KNN1(Surrogate):
    """Predicts the loss of the nearest archive point (of equally near points, the earliest)."""

    def _fit(self, F: np.ndarray, y: np.ndarray, rng: np.random.Generator) -> None:
        self._F, self._y = F, y

    def _predict(self, F: np.ndarray) -> Prediction:
        return self._y[nearest_indices(self._F, F, 1)[:, 0]], None


def samworth_weights(k: int, q: int) -> np.ndarray:
    """Samworth's (2012) optimal rank weights of the k nearest neighbours in q dimensions (sum to 1).

    w_i = (1/k) [1 + q/2 − q/(2 k^(2/q)) (i^(1+2/q) − (i−1)^(1+2/q))], i = 1 (nearest) .. k; as the
    ``optimal`` kernel of R's kknn. They are non-negative and decreasing in i.
    """
    i = np.arange(1, k + 1, dtype=float)
    a = 1.0 + 2.0 / q
    w = (1.0 + q / 2.0 - q / (2.0 * k ** (2.0 / q)) * (libm_power(i, a) - libm_power(i - 1.0, a))) / k
    return w / w.sum()  # already sums to 1 analytically; renormalize against rounding


@register("surrogates", "kknn7", description="7-nearest neighbours with Samworth's optimal rank weights")
class KKNN7(Surrogate):
    """Weighted mean of the k = 7 nearest losses (k = n when fewer points), weights by rank."""

    k = 7

    def _fit(self, F: np.ndarray, y: np.ndarray, rng: np.random.Generator) -> None:
        self._k = min(self.k, len(y))
        self._weights = samworth_weights(self._k, F.shape[1])
        self._F, self._y = F, y

    def _predict(self, F: np.ndarray) -> Prediction:
        idx = nearest_indices(self._F, F, self._k)  # (m, k), nearest first
        return self._y[idx] @ self._weights, None


def _logsumexp_rows(a: np.ndarray) -> np.ndarray:
    """log Σ_j exp(a_ij) per row, as scipy's ``logsumexp(a, axis=1)`` (shift by the row maximum) but with
    the C library's exp and log (:mod:`metaopt.core.libm`): scipy's go through numpy's, whose AVX-512
    kernels differ in the last bit, which can reorder near-equal candidates."""
    top = a.max(axis=1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    total = libm_exp(a - top).sum(axis=1)
    out = np.full(len(a), -np.inf)
    positive = total > 0
    out[positive] = libm_log(total[positive]) + top[positive, 0]
    return out


class _ProductGaussianKDE:
    """Product-Gaussian kernel density with normal-reference bandwidths, evaluated in log space.

    h_j = max(1.06 σ_j n^(−1/(q+4)), 1e-3) per column (statsmodels' ``normal_reference`` as used by
    BOHB, with BOHB's minimum bandwidth).
    """

    MIN_BANDWIDTH = 1e-3

    def __init__(self, Z: np.ndarray) -> None:
        n, q = Z.shape
        self.h = np.maximum(1.06 * Z.std(axis=0) * n ** (-1.0 / (q + 4)), self.MIN_BANDWIDTH)
        self.centers = Z / self.h
        self.log_norm = -math.log(n) - libm_log(self.h).sum() - 0.5 * q * math.log(2 * math.pi)

    def log_density(self, Z: np.ndarray) -> np.ndarray:
        # cdist computes differences directly (no |a|^2 + |b|^2 - 2ab cancellation at tiny bandwidths).
        d2 = cdist(Z / self.h, self.centers, "sqeuclidean")
        return _logsumexp_rows(-0.5 * d2) + self.log_norm


@register("surrogates", "tpe", description="TPE/BOHB density ratio: -log(l(x)/g(x)) of good vs bad KDEs")
class TPE(Surrogate):
    """BOHB-style density ratio of good and bad points (paper 004's TPE surrogate), lower is better.

    Rules (q = number of features besides the fidelity, which is not a density dimension):

    * stratum (as BOHB): the points of the largest fidelity with at least q + 2 points; if no
      fidelity has that many, all points pooled across fidelities;
    * good = the best floor(γ·n) points, γ = 0.15, at least 1 and at most n − 1; bad = the rest.
      BOHB asks for at least d + 1 good points because its multivariate KDE needs them; the product
      kernel below is well defined with one point, so we only ask for one on each side;
    * densities: :class:`_ProductGaussianKDE` on all non-fidelity features. Categoricals are not given
      an Aitchison–Aitken kernel: their one-hot columns (values 0 or 1/√2) get the same Gaussian
      kernel, which behaves like one (same category: factor 1; other category: exp(−1/(2h²)) when
      both one-hot columns share bandwidth h);
    * prediction ("mean") = log g(x) − log l(x) = −log(l(x)/g(x)); std None.
    """

    gamma = 0.15

    def _fit(self, F: np.ndarray, y: np.ndarray, rng: np.random.Generator) -> None:
        Z, r = F[:, :-1], F[:, -1]
        levels, counts = np.unique(r, return_counts=True)
        eligible = levels[counts >= Z.shape[1] + 2]
        if eligible.size:
            in_stratum = r == eligible.max()
            Z, y = Z[in_stratum], y[in_stratum]
        n = len(y)
        n_good = min(max(int(self.gamma * n), 1), n - 1)
        order = np.argsort(y, kind="stable")
        self._good = _ProductGaussianKDE(Z[order[:n_good]])
        self._bad = _ProductGaussianKDE(Z[order[n_good:]])

    def _predict(self, F: np.ndarray) -> Prediction:
        # Each distinct row is scored once: a KDE sampler on a categorical space draws the same
        # configuration again and again (87% of a filter's candidates on synthetic:cells repeat one), and
        # a row's densities depend on that row alone (cdist per pair, exp and sum per row), so these are
        # the numbers of scoring every row (tests/test_exact_speedups.py).
        distinct, inverse = distinct_rows(F[:, :-1])
        scores = self._bad.log_density(distinct) - self._good.log_density(distinct)
        return scores[inverse], None


def distinct_rows(Z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The rows of ``Z`` with the same bits once each, in order of first occurrence, and for each row of
    ``Z`` the index of its distinct row. By a dict of the rows' bytes, not ``np.unique(axis=0)``, whose
    sort of rows as opaque records cost more than the densities it saved, and which takes -0.0 for 0.0."""
    index: dict[bytes, int] = {}
    first: list[int] = []
    inverse = np.empty(len(Z), dtype=np.intp)
    for i, row in enumerate(np.ascontiguousarray(Z)):
        j = index.setdefault(row.tobytes(), len(first))
        if j == len(first):
            first.append(i)
        inverse[i] = j
    return Z[first], inverse


class _TreeGrower:
    """Grows one of scikit-learn's regression trees (``sklearn.tree._tree.Tree``) as
    ``DecisionTreeRegressor(max_features=…, min_samples_leaf=…, random_state=state)._fit(X, y,
    sample_weight, check_input=False)`` grows it: the same splitter, criterion and builder with the
    same arguments, so the same tree bit for bit (tests/test_exact_speedups.py).

    Why not the estimator: at the forest's sizes (ten trees of a few hundred rows, regrown after every
    evaluation) its ``_fit`` spent more time checking and converting the bootstrap weights
    (``_check_sample_weight``) and resolving its parameters than building the tree. The builder,
    splitter and criterion are scikit-learn's Cython classes; they are private, so if they cannot
    be built with these arguments (another scikit-learn version) the estimator's ``_fit`` grows the
    tree instead, with the same result.

    Called by :meth:`RandomForest._grow` once per tree; returns the fitted ``Tree``.
    """

    def __init__(self, n: int, p: int, max_features: float, min_samples_leaf: int) -> None:
        self.n, self.p, self.fraction, self.min_samples_leaf = n, p, max_features, min_samples_leaf
        self.max_features = max(1, int(max_features * p))  # the estimator's count for a float max_features
        self._private = True

    def __call__(self, X: np.ndarray, y: np.ndarray, weight: np.ndarray | None,
                 state: np.random.RandomState) -> object:
        """A tree on float32 ``X`` (n, p) C-contiguous, float64 ``y`` (n, 1), float64 weights or None;
        its random draws (feature order at each split) come from ``state``."""
        if self._private:
            try:
                return self._build(X, y, weight, state)
            except (ImportError, TypeError, AttributeError):
                self._private = False
        from sklearn.tree import DecisionTreeRegressor

        tree = DecisionTreeRegressor(max_features=self.fraction, min_samples_leaf=self.min_samples_leaf,
                                     random_state=state)
        return tree._fit(X, y, sample_weight=weight, check_input=False).tree_

    def _build(self, X: np.ndarray, y: np.ndarray, weight: np.ndarray | None,
               state: np.random.RandomState) -> object:
        # DecisionTreeBaseRegressor._fit's steps for dense input without missing values, monotonic
        # constraints, max_depth, max_leaf_nodes or pruning (scikit-learn 1.9, sklearn/tree/_classes.py).
        from sklearn.tree._criterion import MSE
        from sklearn.tree._splitter import BestSplitter
        from sklearn.tree._tree import DepthFirstTreeBuilder, Tree

        leaf = self.min_samples_leaf
        splitter = BestSplitter(MSE(1, self.n), self.max_features, leaf, 0.0, state, None)
        tree = Tree(self.p, np.array([1], dtype=np.intp), 1)
        builder = DepthFirstTreeBuilder(splitter, max(2, 2 * leaf), leaf, 0.0, np.iinfo(np.int32).max, 0.0)
        builder.build(tree, X, y, weight, None)
        return tree


RF_HPS = (
    Integer("rf_n_trees", (5, 100), default=50, log=True),
    Integer("rf_min_samples_leaf", (1, 10), default=1),
    Float("rf_max_features", (0.1, 1.0), default=1 / 3),
    Categorical("rf_bootstrap", [True, False], default=True),
    Float("rf_refit_growth", (0.0, 1.0), default=0.0),
    Integer("rf_max_samples", (0, 5000), default=0),
    Integer("rf_max_samples_per_feature", (0, 200), default=0),
)


@register("surrogates", "rf", hyperparameters=list(RF_HPS),
          description="random forest (50 trees, optionally regrown only as the archive grows); std = spread "
                      "of the tree predictions")
class RandomForest(Surrogate):
    """Random forest: 50 full-depth bootstrap trees, 1/3 of the features per split (R's default).

    Exactly scikit-learn's ``RandomForestRegressor(n_estimators=50, max_features=1/3,
    random_state=seed).fit(F, y)`` (the same trees), built without its per-tree overhead: the
    forest clones a template tree for each of its trees (parameter introspection) and dispatches
    each through joblib, which took about a third of a fit on archives of a few hundred points.
    Each tree gets ``RandomState(seed).randint(2³¹ − 1)`` in turn as its seed, draws its bootstrap
    sample from it, and is fitted with the bootstrap counts as sample weights, as in the forest.
    tests/test_exact_speedups.py checks the trees against scikit-learn's forest.

    Hyperparameters (defaults: the above): ``rf_n_trees``, ``rf_min_samples_leaf``,
    ``rf_max_features`` (fraction of the features tried per split) and ``rf_bootstrap`` (False:
    every tree sees every point once; the trees then differ by their feature draws only). SMAC's
    HPO facade uses 10 trees, all features per split, leaves of 1, bootstrap.

    Refit schedule (``rf_refit_growth`` g): growing the trees is most of a model-based run
    (docs/benchmarks.md). With g > 0 the trees are grown anew only when the training set has grown
    by at least the fraction g since they were grown (or when it is not the old rows plus new ones);
    in between each tree keeps its splits and its leaf values are recomputed from every point: the
    mean loss of the points in the leaf, the rows it was grown on with their bootstrap weights and
    each row added since with weight 1. g = 0 (the default) grows every fit, as above.

    Bootstrap size (``rf_max_samples`` M, with ``rf_bootstrap``): each tree's bootstrap sample takes
    min(n, M) draws from the n points, scikit-learn's ``max_samples`` (and SMAC's forest's); 0 (the
    default): n draws. The forest still sees every point (each tree a different subset), but no tree
    is grown on more than M draws, so past n = M a fit costs the same however large the archive
    grows: without it, regrowing the trees on the whole archive after every evaluation makes a
    run's time grow with the square of its budget (docs/benchmarks.md, the scaling section). Up to
    n = M the trees are the same as without it.

    Bootstrap size per feature (``rf_max_samples_per_feature`` k, with ``rf_bootstrap``): the same
    cap as a multiple of the number of feature columns p, min(n, k·p) draws (with ``rf_max_samples``
    too: the smaller cap). A run's budget is counted in multiples of the number of hyperparameters d
    (30·d full evaluations), and every hyperparameter has at least one column (p > d: one per
    numeric, one per category, one for the fidelity), so k = 30 leaves every run of up to 30·d
    full evaluations the same on every benchmark (nb301's 1,020 evaluations at 30·d against
    30 × 235 columns), where a fixed M acts earlier the more hyperparameters a problem has.
    """

    has_std = True

    def __init__(self, rf_n_trees: int = 50, rf_min_samples_leaf: int = 1, rf_max_features: float = 1 / 3,
                 rf_bootstrap: bool = True, rf_refit_growth: float = 0.0, rf_max_samples: int = 0,
                 rf_max_samples_per_feature: int = 0) -> None:
        super().__init__()
        self.n_estimators = int(rf_n_trees)
        self.min_samples_leaf = int(rf_min_samples_leaf)
        self.max_features = float(rf_max_features)
        self.bootstrap = bool(rf_bootstrap)
        self.refit_growth = float(rf_refit_growth)
        self.max_samples = int(rf_max_samples)
        self.max_samples_per_feature = int(rf_max_samples_per_feature)
        self._grown_rows = 0
        """How many rows the trees were grown on (g > 0): the first rows of ``_summed``."""
        self._grown_weights: list[np.ndarray] = []
        """Per tree: the weight of each row it was grown on (bootstrap counts, or ones; g > 0 only)."""
        self._leaf_sums: tuple[np.ndarray, np.ndarray] | None = None
        """(g > 0) Every tree's nodes one after the other (tree t's from ``_node_offsets[t]`` on): each
        node's weighted loss sum and weight sum over the rows ``_summed``."""
        self._node_offsets: np.ndarray = np.zeros(0, dtype=np.intp)
        self._all_leaf_values: np.ndarray = np.zeros(0)
        """(g > 0) The leaf values of every tree in that layout; ``_leaf_values`` are views of it."""
        self._summed: tuple[np.ndarray, np.ndarray] | None = None
        """The rows ``(X, y)`` the leaf sums were taken over (g > 0); rows after them are added on."""
        self._leaf_values: list[np.ndarray] = []
        """Per tree: each node's predicted loss, read at the leaves: the tree's own node values right
        after growing it (what scikit-learn's ``predict`` returns), or refreshed ones (g > 0)."""

    def _fit(self, F: np.ndarray, y: np.ndarray, rng: np.random.Generator) -> None:
        X = np.ascontiguousarray(F, dtype=np.float32)  # the forest's input conversion
        if self.refit_growth > 0 and self._extends_grown(X):
            self._refresh_leaves(X, y)
            return
        self._grow(X, y, rng)
        if self.refit_growth > 0:
            self._grown_rows, self._summed = len(X), None
            self._refresh_leaves(X, y)
        else:
            self._leaf_values = [tree.value[:, 0, 0] for tree in self._trees]

    def _extends_grown(self, X: np.ndarray) -> bool:
        """Whether the trees can be kept: ``X`` starts with the rows they were grown on and has grown by
        less than the fraction ``refit_growth`` since."""
        if self._summed is None:
            return False
        seen, grown = self._summed[0], self._grown_rows
        if seen.shape[1] != X.shape[1] or len(X) < grown:
            return False
        return len(X) < grown * (1.0 + self.refit_growth) and np.array_equal(X[:grown], seen[:grown])

    def _grow(self, X: np.ndarray, y: np.ndarray, rng: np.random.Generator) -> None:
        target = np.ascontiguousarray(y.reshape(-1, 1), dtype=np.float64)
        n, p = X.shape
        grow = _TreeGrower(n, p, self.max_features, self.min_samples_leaf)
        draws = self._draws(n, p)
        seeds = np.random.RandomState(_seed(rng))
        # Each tree's seed starts two streams, its bootstrap draw's and the tree's own. Both come from
        # one RandomState re-seeded in place, which is the state a new RandomState(seed) has: building
        # two per tree took a fifth of a forest's growth on small archives.
        state = np.random.RandomState(0)
        self._trees, self._grown_weights = [], []
        for _ in range(self.n_estimators):
            seed = seeds.randint(np.iinfo(np.int32).max)
            weight = None
            if self.bootstrap:
                state.seed(seed)
                weight = np.bincount(state.randint(0, n, draws), minlength=n).astype(np.float64)
            state.seed(seed)
            self._trees.append(grow(X, target, weight, state))
            if self.refit_growth > 0:  # kept for refreshing the leaf values
                self._grown_weights.append(np.ones(n) if weight is None else weight)

    def _draws(self, n: int, p: int) -> int:
        """Bootstrap draws a tree for n rows of p features: n, capped by ``rf_max_samples`` and
        ``rf_max_samples_per_feature`` · p where set (scikit-learn's ``max_samples``)."""
        caps = [cap for cap in (self.max_samples, self.max_samples_per_feature * p) if cap > 0]
        return min([n, *caps])

    def _refresh_leaves(self, X: np.ndarray, y: np.ndarray) -> None:
        """Each tree's leaf values from all rows ``X``: the weighted mean loss of the rows in the leaf,
        the rows the tree was grown on with their weights and every row added since with weight 1.
        A leaf keeps at least the grown rows that shaped it, so no leaf is left empty.

        The sums are kept between calls: when ``(X, y)`` starts with the rows summed last time (the
        usual case, an archive that only grew), only the new rows are added on, in row order, which
        gives the very sums a recount would (``np.bincount`` and ``np.add.at`` both add one row
        after the other); otherwise every row is counted anew.
        """
        start = 0
        if self._summed is not None:
            old_X, old_y = self._summed
            m = len(old_y)
            if m <= len(y) and np.array_equal(y[:m], old_y) and np.array_equal(X[:m], old_X):
                start = m
        if start == 0:
            counts = [tree.node_count for tree in self._trees]
            bounds = np.concatenate([[0], np.cumsum(counts)]).astype(np.intp)
            total, count = np.empty(bounds[-1]), np.empty(bounds[-1])
            for tree, grown_weight, a, b in zip(self._trees, self._grown_weights, bounds[:-1], bounds[1:]):
                weight = np.concatenate([grown_weight, np.ones(len(X) - len(grown_weight))])
                leaf = tree.apply(X)  # the fitted tree's own leaf lookup, without the estimator's checks
                total[a:b] = np.bincount(leaf, weights=weight * y, minlength=b - a)
                count[a:b] = np.bincount(leaf, weights=weight, minlength=b - a)
            self._leaf_sums, self._node_offsets = (total, count), bounds[:-1]
            self._all_leaf_values = total / np.where(count > 0, count, 1.0)
            self._leaf_values = [self._all_leaf_values[a:b] for a, b in zip(bounds[:-1], bounds[1:])]
        elif start < len(y):
            # Rows added since the last sums (after the grown ones), weight 1, all trees in one call: tree
            # after tree, each tree's rows in order, so every node adds its rows in row order.
            new_X, new_y = X[start:], y[start:]
            leaf = np.concatenate([tree.apply(new_X) for tree in self._trees])
            leaf += np.repeat(self._node_offsets, len(new_X))
            total, count = self._leaf_sums
            np.add.at(total, leaf, np.tile(new_y, len(self._trees)))
            np.add.at(count, leaf, 1.0)
            self._all_leaf_values[leaf] = total[leaf] / count[leaf]  # only these leaves changed (and hold a row)
        self._summed = (X.copy(), y.copy())

    def _predict(self, F: np.ndarray) -> Prediction:
        # A tree predicts the value of the leaf each row falls in (float32 input, as scikit-learn's
        # predict); looking the leaves up directly skips the estimator's per-call validation.
        F32 = np.ascontiguousarray(F, dtype=np.float32)
        per_tree = np.stack([values[tree.apply(F32)] for tree, values in zip(self._trees, self._leaf_values)])
        return per_tree.mean(axis=0), per_tree.std(axis=0)


GP_REFIT_GROWTH = Float("gp_refit_growth", (0.0, 1.0), default=0.0)
GP_LBFGS_ITERATIONS = Integer("gp_lbfgs_iterations", (0, 10), default=0)


@register("surrogates", "gp", hyperparameters=[GP_REFIT_GROWTH, GP_LBFGS_ITERATIONS],
          description="Gaussian process (Matern 5/2 ARD + noise) with mean and std")
class GaussianProcess(Surrogate):
    """GP: c × Matern(ν = 5/2, one length scale per feature) + noise σ², on standardized losses
    (:class:`metaopt.components._gp.MaternGP`, our own regressor on the closed-form likelihood; it
    computes what scikit-learn's GaussianProcessRegressor with that kernel and ``normalize_y``
    computes, up to rounding).

    Hyperparameters by maximum likelihood from one start (no restarts, for speed): the previous fit's
    θ when this surrogate was fitted before in the run (a warm start; the archive grows by a few
    points per batch, so the optimum moves little), else a neutral default. At most ``max_points`` =
    500 points are used (a GP fit is cubic in n): above that, the best 250 plus 250 drawn at random
    from the rest. Linear algebra runs on one thread: runs are parallelized across processes, and
    for these small matrices one BLAS thread is faster than two competing ones.

    Refit schedule (``gp_refit_growth`` g): the kernel hyperparameters are optimized only when the
    training set has grown by at least the fraction g since they were last optimized (g = 0: at
    every fit, as in the paper's GP-BO); in between the GP is refitted on all points with the
    kernel kept, its Cholesky factorization extended by the new rows (no likelihood optimization).
    The likelihood is what makes BO slow (docs/benchmarks.md), and with a few new points per
    batch its optimum moves little.

    Iterations (``gp_lbfgs_iterations`` k): each optimization of the kernel hyperparameters stops
    after at most k L-BFGS iterations from the warm start (k = 0, the default: until L-BFGS
    converges, about 11 iterations a fit on lcbench). With a warm start, a few steps per batch
    follow the optimum as the archive grows (``studies/gp_iterations_lcbench.yaml``).
    """

    has_std = True
    max_points = 500

    def __init__(self, gp_refit_growth: float = GP_REFIT_GROWTH.default_value,
                 gp_lbfgs_iterations: int = GP_LBFGS_ITERATIONS.default_value) -> None:
        super().__init__()
        self.refit_growth = float(gp_refit_growth)
        self.lbfgs_iterations = int(gp_lbfgs_iterations)
        self._model = None
        """The last fit's :class:`metaopt.components._gp.MaternGP` (its θ warm-starts the next)."""
        self._optimized_at = 0
        """Training points when the kernel hyperparameters were last optimized (0: never)."""

    def _fit(self, F: np.ndarray, y: np.ndarray, rng: np.random.Generator) -> None:
        from metaopt.components._gp import MaternGP, default_theta

        if len(y) > self.max_points:
            order = np.argsort(y, kind="stable")
            half = self.max_points // 2
            rest = rng.choice(order[half:], size=self.max_points - half, replace=False)
            keep = np.concatenate([order[:half], rest])
            F, y = F[keep], y[keep]
        _seed(rng)  # the draw scikit-learn's regressor took for its restarts: the run's stream stays where it was
        p = F.shape[1]
        previous = self._model
        if previous is None or len(previous.theta) != p + 2:
            previous, self._optimized_at = None, 0
        theta = default_theta(p) if previous is None else previous.theta
        optimize = self._optimized_at == 0 or len(y) >= self._optimized_at * (1.0 + self.refit_growth)
        with _threadpools().limit(limits=1):
            self._model = MaternGP(F, y, theta, self.lbfgs_iterations if optimize else None, previous=previous)
        if optimize:
            self._optimized_at = len(y)

    def _predict(self, F: np.ndarray) -> Prediction:
        with _threadpools().limit(limits=1):
            return self._model.predict(F)
