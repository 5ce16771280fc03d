"""The GP surrogate's kernel, ConstantKernel × Matern(ν = 5/2, ARD) + WhiteKernel, with a faster gradient.

Fitting the GP's hyperparameters evaluates the kernel and its gradient on the archive at every
L-BFGS step. scikit-learn builds that gradient, an (n, n, p + 2) array, from several full-size
temporaries per kernel (the Matern's squared differences, its factors, the Product's and the
Sum's ``np.dstack`` copies); at a few hundred points that was most of a GP fit. :class:`GPKernel`
computes the same numbers, element by element the same floating-point operations in the same
order, block of rows by block of rows straight into the output array, so the temporaries stay
small. Everything else (values without gradient, prediction, hyperparameter handling, cloning)
is scikit-learn's ``Sum``. tests/test_exact_speedups.py checks the result against scikit-learn.

Imported by :class:`metaopt.components.surrogates.GaussianProcess` when it is first fitted (importing
scikit-learn is slow and most runs use no GP).
"""

from __future__ import annotations

import numpy as np
from sklearn.gaussian_process.kernels import ConstantKernel, Matern, Sum, WhiteKernel

BLOCK = 1 << 17
"""Elements of the (rows, n, p) temporaries per block of rows (1 MiB of float64)."""


class GPKernel(Sum):
    """``ConstantKernel(c) * Matern(ℓ, ν = 5/2) + WhiteKernel(σ²)``; see the module docstring."""

    @classmethod
    def default(cls, p: int) -> "GPKernel":
        """The starting kernel for p features: c = 1, ℓ = 0.5 per feature, σ² = 0.01, with their bounds."""
        return cls(ConstantKernel(1.0, (1e-3, 1e3))
                   * Matern(length_scale=np.full(p, 0.5), length_scale_bounds=(1e-2, 1e2), nu=2.5),
                   WhiteKernel(1e-2, (1e-6, 1.0)))

    def __call__(self, X: np.ndarray, Y: np.ndarray | None = None, eval_gradient: bool = False):
        constant, matern = self.k1.k1, self.k1.k2
        fixed = (constant.hyperparameter_constant_value.fixed or matern.hyperparameter_length_scale.fixed
                 or self.k2.hyperparameter_noise_level.fixed)
        if not eval_gradient or Y is not None or not matern.anisotropic or fixed:
            return super().__call__(X, Y, eval_gradient)
        X = np.atleast_2d(X)
        n, p = X.shape
        c, noise = constant.constant_value, self.k2.noise_level
        K = matern(X)
        squared_scale = np.asarray(matern.length_scale, dtype=float) ** 2
        gradient = np.empty((n, n, p + 2))
        gradient[:, :, 0] = K * c  # the ConstantKernel's gradient (c everywhere) times the Matern
        rows = max(1, BLOCK // (n * p))
        for i in range(0, n, rows):
            # Matern.__call__'s anisotropic ν = 5/2 gradient, then Product's multiplication by c
            D = (X[i:i + rows, np.newaxis, :] - X[np.newaxis, :, :]) ** 2 / squared_scale
            tmp = np.sqrt(5 * D.sum(-1))[..., np.newaxis]
            gradient[i:i + rows, :, 1:p + 1] = 5.0 / 3.0 * D * (tmp + 1) * np.exp(-tmp) * c
        gradient[:, :, p + 1] = noise * np.eye(n)  # the WhiteKernel's gradient
        return K * c + noise * np.eye(n), gradient
