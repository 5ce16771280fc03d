"""The GP surrogate's model: its kernel, ConstantKernel × Matern(ν = 5/2, ARD) + WhiteKernel, and a
GaussianProcessRegressor whose likelihood gradient needs no (n, n, p) array.

Fitting the GP's hyperparameters evaluates the log marginal likelihood and its gradient on the
archive at every L-BFGS step. scikit-learn computes the gradient as ½ tr((ααᵀ − K⁻¹) ∂K/∂θ_k) from
the kernel's full gradient, an (n, n, p + 2) array, contracted with an ``einsum`` that does not use
BLAS: at a few hundred points that was nearly all of a BO run (docs/benchmarks.md). For this kernel
the contraction has a closed form in (n, n) and (n, p) arrays. With W = ααᵀ − K⁻¹, c the constant,
G = 5/3 (1 + √5 r) e^{−√5 r} (r the scaled distances, so that ∂K/∂ln ℓ_k = c G ∘ D_k with
D_k,ij = (z_ik − z_jk)², z = x / ℓ), and M = c W ∘ G:

    ∂/∂ln c   = ½ Σ_ij W_ij c Matern_ij
    ∂/∂ln ℓ_k = ½ Σ_ij M_ij (z_ik − z_jk)² = Σ_i z_ik² (M1)_i − Σ_i z_ik (MZ)_ik
    ∂/∂ln σ²  = ½ σ² tr W

(the middle line expands the square and uses M's symmetry; Z is centred per column first, which
changes no difference and keeps the two terms small). Same numbers as scikit-learn's up to
floating-point rounding (tests/test_surrogates.py checks the value bit for bit and the gradient to
1e-9), in O(n²p + n³) time without the (n, n, p) temporaries, so L-BFGS takes steps that differ from
scikit-learn's in the last bits: the speed-up is not bit-exact, and its regret effect is measured
(docs/benchmarks.md). A library doing this does not exist for scikit-learn's GP; GPyTorch and
GPflow would compute it by automatic differentiation but bring a deep-learning framework along.

Imported by :class:`metaopt.components.surrogates.GaussianProcess` when it is first fitted (importing
scikit-learn is slow and most runs use no GP).
"""

from __future__ import annotations

import functools
import math
from typing import Callable

import numpy as np
from scipy.linalg import cho_solve, cholesky
from scipy.linalg.lapack import dpotri
from scipy.optimize import minimize
from scipy.spatial.distance import pdist, squareform
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import ConstantKernel, Kernel, Matern, WhiteKernel


def default_kernel(p: int) -> Kernel:
    """The starting kernel for p features: c = 1, ℓ = 0.5 per feature, σ² = 0.01, with their bounds.

    Its hyperparameter vector θ (log scale) is ``[ln c, ln ℓ_1, …, ln ℓ_p, ln σ²]``.
    """
    return (ConstantKernel(1.0, (1e-3, 1e3)) * Matern(length_scale=np.full(p, 0.5), length_scale_bounds=(1e-2, 1e2),
                                                       nu=2.5)
            + WhiteKernel(1e-2, (1e-6, 1.0)))


def capped_lbfgs(iterations: int) -> Callable:
    """An ``optimizer`` for scikit-learn's GaussianProcessRegressor: its own L-BFGS-B call (scipy's
    ``minimize`` with the likelihood's gradient, within the kernel's bounds), stopped after at most
    ``iterations`` iterations (each takes one or a few likelihood evaluations, for its line search).

    Called by the regressor's ``fit`` as ``optimizer(obj_func, initial_theta, bounds=bounds)``; returns
    (θ, objective at θ). scikit-learn's own ``"fmin_l_bfgs_b"`` is the same call without the limit
    (and a warning when scipy's default limit of 15,000 iterations is reached).
    """
    if iterations < 1:
        raise ValueError(f"iterations must be at least 1, got {iterations}")
    return functools.partial(_lbfgs, iterations=int(iterations))


def _lbfgs(obj_func: Callable, initial_theta: np.ndarray, bounds: np.ndarray,
           iterations: int) -> tuple[np.ndarray, float]:
    """:func:`capped_lbfgs`'s optimizer: scikit-learn's L-BFGS-B call with ``maxiter`` = ``iterations``."""
    result = minimize(obj_func, initial_theta, method="L-BFGS-B", jac=True, bounds=bounds,
                      options={"maxiter": iterations})
    return result.x, result.fun


class MaternGPRegressor(GaussianProcessRegressor):
    """scikit-learn's GaussianProcessRegressor for :func:`default_kernel`, with the closed-form gradient.

    Only :meth:`log_marginal_likelihood` with ``eval_gradient=True`` differs (L-BFGS calls it at
    every step of a fit); everything else, the likelihood's value included, is scikit-learn's.
    """

    def log_marginal_likelihood(self, theta=None, eval_gradient=False, clone_kernel=True):
        """Called by ``fit``'s optimizer with ``eval_gradient=True``; returns (value, gradient over θ)."""
        if not eval_gradient or theta is None or len(theta) != self.X_train_.shape[1] + 2:
            return super().log_marginal_likelihood(theta, eval_gradient, clone_kernel)
        # θ = [ln c, ln ℓ_1..ℓ_p, ln σ²] (default_kernel); the kernel object is not touched (scikit-learn's
        # fit sets the optimum on it), which spares its slow hyperparameter bookkeeping at every step.
        X, y = self.X_train_, self.y_train_
        if y.ndim != 1:
            raise ValueError("MaternGPRegressor fits one output")
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
        # The value: scikit-learn's lines (Alg. 2.1 of Rasmussen & Williams), so it is bit for bit theirs.
        K[diagonal] += self.alpha
        try:
            L = cholesky(K, lower=True, check_finite=False)
        except np.linalg.LinAlgError:
            return -np.inf, np.zeros_like(theta)
        alpha = cho_solve((L, True), y[:, np.newaxis], check_finite=False)
        log_likelihood_dims = -0.5 * np.einsum("ik,ik->k", y[:, np.newaxis], alpha)
        log_likelihood_dims -= np.log(np.diag(L)).sum()
        log_likelihood_dims -= K.shape[0] / 2 * np.log(2 * np.pi)
        log_likelihood = log_likelihood_dims.sum(axis=-1)

        # The gradient in closed form (module docstring).
        K_inv, info = dpotri(L, lower=1, overwrite_c=1)  # the lower triangle of K⁻¹; L's upper triangle is 0
        if info != 0:
            return -np.inf, np.zeros_like(theta)
        K_inv += K_inv.T
        K_inv[diagonal] /= 2
        a = alpha[:, 0]
        W = np.outer(a, a)
        W -= K_inv
        M = squareform(5.0 / 3.0 * (1.0 + t) * e)  # squareform leaves the diagonal 0: D_k,ii = 0
        M *= W
        M *= c
        Z = Z - Z.mean(axis=0)
        gradient = np.empty(len(theta))
        gradient[0] = 0.5 * c * np.sum(W * matern)
        gradient[1:-1] = (Z ** 2).T @ M.sum(axis=1) - np.einsum("ik,ik->k", Z, M @ Z)
        gradient[-1] = 0.5 * noise * np.trace(W)
        return log_likelihood, gradient
