"""The GP surrogate's model: a Gaussian process regressor on the closed-form likelihood of the kernel
c · Matern(ν = 5/2, one length scale per feature) + σ² · I, with normalized targets.

It computes what scikit-learn's ``GaussianProcessRegressor(ConstantKernel × Matern(ν = 2.5) +
WhiteKernel, normalize_y=True)`` computes (Rasmussen & Williams, Alg. 2.1; the same jitter 1e-10 on
the diagonal, the same bounds, the same L-BFGS-B call), without its kernel objects (their
hyperparameter and bounds bookkeeping at every likelihood evaluation), its input checks, and the
kernel matrix and Cholesky factorization it recomputes after the optimization: the factorization
at the optimum is the one the optimizer's last likelihood evaluation made. Predictions are one
cross-kernel, one matrix-vector product and one triangular matrix product with L⁻¹ (formed once per
fit), where scikit-learn solves a triangular system per call. Those were two thirds of a BO run's
GP time (docs/benchmarks.md). The results equal scikit-learn's up to floating-point rounding
(tests/test_surrogates.py), not bit for bit.

Fitting the hyperparameters evaluates the log marginal likelihood and its gradient on the archive at
every L-BFGS step. scikit-learn computes the gradient as ½ tr((ααᵀ − K⁻¹) ∂K/∂θ_k) from the kernel's
full gradient, an (n, n, p + 2) array. For this kernel the contraction has a closed form in (n, n)
and (n, p) arrays. With W = ααᵀ − K⁻¹, c the constant,
G = 5/3 (1 + √5 r) e^{−√5 r} (r the scaled distances, so that ∂K/∂ln ℓ_k = c G ∘ D_k with
D_k,ij = (z_ik − z_jk)², z = x / ℓ), and M = c W ∘ G:

    ∂/∂ln c   = ½ Σ_ij W_ij c Matern_ij
    ∂/∂ln ℓ_k = ½ Σ_ij M_ij (z_ik − z_jk)² = Σ_i z_ik² (M1)_i − Σ_i z_ik (MZ)_ik
    ∂/∂ln σ²  = ½ σ² tr W

(the middle line expands the square and uses M's symmetry; Z is centred per column first, which
changes no difference and keeps the two terms small). Same numbers as scikit-learn's up to
floating-point rounding (tests/test_surrogates.py checks the value bit for bit and the gradient to
1e-9), in O(n²p + n³) time without the (n, n, p) temporaries. A library doing this does not exist
for scikit-learn's GP; GPyTorch and GPflow would compute it by automatic differentiation but bring
a deep-learning framework along.

When points are added and the kernel is kept (a refit schedule, ``gp_refit_growth`` > 0), the
factorization is extended by the new rows (a block update: one triangular solve and a small
Cholesky factorization) instead of being recomputed.

Linear algebra is LAPACK's and BLAS's (through scipy), on one thread (the surrogate's caller limits
the pools): the same bits run after run and serial or parallel, but not guaranteed on another CPU,
whose BLAS kernels may round differently (scikit-learn's regressor had the same property).

Imported by :class:`metaopt.components.surrogates.GaussianProcess` when it is first fitted.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.linalg import cho_solve, cholesky, solve_triangular
from scipy.linalg.blas import dtrmm
from scipy.linalg.lapack import dpotri, dtrtri
from scipy.optimize import minimize
from scipy.spatial.distance import cdist, pdist, squareform

JITTER = 1e-10
"""Added to the kernel matrix's diagonal (scikit-learn's ``alpha`` default)."""
BOUNDS = {"constant": (1e-3, 1e3), "length_scale": (1e-2, 1e2), "noise": (1e-6, 1.0)}
"""The hyperparameters' bounds (scikit-learn's ``default_kernel`` of earlier versions of this module)."""


def default_theta(p: int) -> np.ndarray:
    """The starting hyperparameters for p features, θ = ``[ln c, ln ℓ_1, …, ln ℓ_p, ln σ²]``:
    c = 1, ℓ = 0.5 per feature, σ² = 0.01."""
    return np.log(np.concatenate([[1.0], np.full(p, 0.5), [1e-2]]))


def theta_bounds(p: int) -> np.ndarray:
    """(p + 2, 2): the bounds of θ (log scale), in θ's order."""
    rows = [BOUNDS["constant"], *[BOUNDS["length_scale"]] * p, BOUNDS["noise"]]
    return np.log(np.array(rows, dtype=float))


def log_marginal_likelihood(theta: np.ndarray, X: np.ndarray, y: np.ndarray,
                            gradient: bool = True) -> tuple[float, np.ndarray | None, tuple | None]:
    """The log marginal likelihood of normalized targets ``y`` (n,) at features ``X`` (n, p) under θ.

    Called by :class:`MaternGP` at every L-BFGS step. Returns (value, gradient over θ or None,
    (L, α) the Cholesky factor of K + jitter · I and K⁻¹y, or None). A matrix that is not positive
    definite gives (−inf, zeros, None), as scikit-learn's. The value is bit for bit scikit-learn's.
    """
    n = X.shape[0]
    c, length_scale, noise = np.exp(theta[0]), np.exp(theta[1:-1]), np.exp(theta[-1])
    Z = X / length_scale
    # K as scikit-learn's kernel computes it (Matern.__call__, then the Product and the Sum), same operations:
    t = pdist(Z, metric="euclidean") * math.sqrt(5)
    e = np.exp(-t)
    matern = squareform((1.0 + t + t ** 2 / 3.0) * e)
    np.fill_diagonal(matern, 1)
    K = c * matern
    diagonal = np.diag_indices(n)
    K[diagonal] += noise  # = c · matern + noise · I, element for element, without the identity matrix
    K[diagonal] += JITTER
    try:
        L = cholesky(K, lower=True, check_finite=False)
    except np.linalg.LinAlgError:
        return -np.inf, np.zeros_like(theta), None
    alpha = cho_solve((L, True), y[:, np.newaxis], check_finite=False)
    # scikit-learn's lines for the value, so that it is bit for bit theirs
    log_likelihood_dims = -0.5 * np.einsum("ik,ik->k", y[:, np.newaxis], alpha)
    log_likelihood_dims -= np.log(np.diag(L)).sum()
    log_likelihood_dims -= K.shape[0] / 2 * np.log(2 * np.pi)
    log_likelihood = float(log_likelihood_dims.sum(axis=-1))
    if not gradient:
        return log_likelihood, None, (L, alpha[:, 0])

    # The gradient in closed form (module docstring).
    K_inv, info = dpotri(L, lower=1, overwrite_c=0)  # the lower triangle of K⁻¹; L's upper triangle is 0
    if info != 0:
        return -np.inf, np.zeros_like(theta), None
    K_inv += K_inv.T
    K_inv[diagonal] /= 2
    a = alpha[:, 0]
    W = np.outer(a, a)
    W -= K_inv
    M = squareform(5.0 / 3.0 * (1.0 + t) * e)  # squareform leaves the diagonal 0: D_k,ii = 0
    M *= W
    M *= c
    Z = Z - Z.mean(axis=0)
    grad = np.empty(len(theta))
    grad[0] = 0.5 * c * np.sum(W * matern)
    grad[1:-1] = (Z ** 2).T @ M.sum(axis=1) - np.einsum("ik,ik->k", Z, M @ Z)
    grad[-1] = 0.5 * noise * np.trace(W)
    return log_likelihood, grad, (L, a)


class MaternGP:
    """A fitted GP: normalized targets, hyperparameters θ, the Cholesky factor L of K + jitter · I
    and α = K⁻¹y at θ.

    Built by :meth:`metaopt.components.surrogates.GaussianProcess._fit` once per fit; its
    :meth:`predict` serves the candidates of that batch.

    Args:
        X: Features (n, p), finite.
        y: Losses (n,), finite and not constant.
        theta: The starting hyperparameters (log scale, :func:`default_theta`'s layout).
        iterations: None keeps θ (no optimization); 0 optimizes it by L-BFGS-B until it converges
            (scikit-learn's ``fmin_l_bfgs_b``); k > 0 stops after at most k L-BFGS iterations.
        previous: The GP of the previous fit; when θ is kept and ``X`` starts with its rows, its
            factorization is extended by the new rows instead of recomputed.
    """

    def __init__(self, X: np.ndarray, y: np.ndarray, theta: np.ndarray, iterations: int | None,
                 previous: MaternGP | None = None) -> None:
        self.X = np.asarray(X, dtype=float)
        y = np.asarray(y, dtype=float)
        # normalize_y: scikit-learn's standardization (a zero std is left at 1)
        self.y_mean = float(np.mean(y))
        std = float(np.std(y))
        self.y_std = std if std != 0.0 else 1.0
        self.y = (y - self.y_mean) / self.y_std
        self.theta = np.array(theta, dtype=float)
        self.iterations_run = 0
        """L-BFGS iterations of this fit's optimization (0 when θ was kept)."""
        factor = None
        if iterations is not None:
            self.theta, value, factor = self._optimize(self.theta, iterations)
        elif previous is not None and np.array_equal(previous.theta, self.theta):
            factor = previous._extended(self.X, self.y)
        if factor is None:
            value, _, factor = log_marginal_likelihood(self.theta, self.X, self.y, gradient=False)
            if factor is None:
                raise np.linalg.LinAlgError("the kernel matrix is not positive definite at the fitted θ")
        elif iterations is None:
            value = float(-0.5 * self.y @ factor[1] - np.log(np.diag(factor[0])).sum()
                          - len(self.y) / 2 * np.log(2 * np.pi))
        self.log_marginal_likelihood_value_ = value
        self.L, self.alpha = factor
        self._L_inv: np.ndarray | None = None
        """L⁻¹, formed by the first :meth:`predict` call."""

    def _optimize(self, theta: np.ndarray, iterations: int) -> tuple[np.ndarray, float, tuple | None]:
        """L-BFGS-B on −log likelihood within the bounds, from θ; (θ*, likelihood at θ*, its factorization)."""
        evaluated: dict[bytes, tuple] = {}  # the last evaluations' factorizations, by θ

        def objective(point: np.ndarray) -> tuple[float, np.ndarray]:
            value, grad, factor = log_marginal_likelihood(point, self.X, self.y)
            if len(evaluated) >= 2:
                evaluated.pop(next(iter(evaluated)))
            evaluated[point.tobytes()] = (value, factor)
            return -value, -grad

        options = {"maxiter": iterations} if iterations > 0 else {}
        result = minimize(objective, theta, method="L-BFGS-B", jac=True, bounds=theta_bounds(len(theta) - 2),
                          options=options)
        self.iterations_run = int(result.nit)
        best = np.asarray(result.x, dtype=float)
        value, factor = evaluated.get(best.tobytes(), (-float(result.fun), None))
        return best, value, factor

    def _extended(self, X: np.ndarray, y: np.ndarray) -> tuple | None:
        """(L, α) for the rows ``X`` that start with this GP's rows, by a block update of L; None when
        ``X`` does not extend them or the update is not positive definite."""
        n = len(self.X)
        if len(X) < n or X.shape[1] != self.X.shape[1] or not np.array_equal(X[:n], self.X):
            return None
        L = self.L
        if len(X) > n:
            new = X[n:]
            cross = self.kernel(self.X, new)  # (n, m)
            corner = self.kernel(new, new)
            corner[np.diag_indices(len(new))] += np.exp(self.theta[-1]) + JITTER
            below = solve_triangular(L, cross, lower=True, check_finite=False).T  # (m, n)
            try:
                tail = cholesky(corner - below @ below.T, lower=True, check_finite=False)
            except np.linalg.LinAlgError:
                return None
            L = np.block([[L, np.zeros((n, len(new)))], [below, tail]])
        return L, cho_solve((L, True), y, check_finite=False)

    def kernel(self, A: np.ndarray, B: np.ndarray) -> np.ndarray:
        """c · Matern(A, B) at θ (no noise term: the rows of A and B are taken as distinct points).

        scikit-learn's ``Matern.__call__`` computes ``(1 + t + t² / 3) · e^{−t}`` of t = √5 · the scaled
        distances, then the product with c: the same operations in the same order here, so the same
        bits (tests/test_exact_speedups.py), but in place in two (len(A), len(B)) arrays instead of
        seven: at a few thousand candidates against a few hundred points the temporaries cost as much
        as the arithmetic."""
        length_scale = np.exp(self.theta[1:-1])
        t = cdist(A / length_scale, B / length_scale, metric="euclidean")
        t *= math.sqrt(5)
        out = np.negative(t)
        np.exp(out, out=out)  # e^{-t}
        square = np.square(t)  # t ** 2 (numpy computes a float array's square for it)
        square /= 3.0
        t += 1.0  # 1 + t
        t += square  # (1 + t) + t² / 3
        out *= t  # e^{-t} · poly: the product scikit-learn forms, with its factors swapped (same bits)
        out *= np.exp(self.theta[0])
        return out

    def predict(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(mean, std) of the losses at features ``X`` (m, p): scikit-learn's ``predict(X, return_std=True)``
        up to rounding.

        The variance's V = L⁻¹ K*ᵀ is one triangular matrix product (BLAS's trmm) with L⁻¹, formed
        once per fit on the first call (LAPACK's trtri), instead of a triangular solve per call
        (scikit-learn's): at a few thousand candidates against a few hundred points it is 1.5 to 2
        times faster than the solve, which was a third of a GP design's run (docs/benchmarks.md).
        Same quantity, other rounding."""
        K_trans = self.kernel(np.asarray(X, dtype=float), self.X)
        mean = K_trans @ self.alpha
        if self._L_inv is None:  # LAPACK's triangular inverse: half the work of solving L X = I
            self._L_inv, info = dtrtri(np.asfortranarray(self.L), lower=1)
            if info != 0:
                raise np.linalg.LinAlgError(f"the Cholesky factor is singular (dtrtri info {info})")
        # (n, m), column i is L⁻¹ k*_i; Kᵀ is already in the column order BLAS wants, so only the result is new
        V = dtrmm(1.0, self._L_inv, K_trans.T, side=0, lower=1)
        variance = np.exp(self.theta[0]) + np.exp(self.theta[-1]) - np.einsum("ij,ij->j", V, V)
        variance = np.maximum(variance, 0.0) * self.y_std ** 2
        return self.y_std * mean + self.y_mean, np.sqrt(variance)
