"""The C library's exp, log, expm1, log1p and pow on numpy arrays, element by element: the same bits on
every CPU.

numpy computes these float64 functions with its own AVX-512 kernels where the CPU has them and with
the C library's elsewhere; the two differ in the last bit for a few percent of arguments (about 5%
for exp). Wherever such a value reaches a result, a one-bit difference can become another run (a
hashed value, a flipped comparison). Python's math module calls the C library on every machine, so
these give the same bits everywhere, and the same as numpy without AVX-512. numpy has no switch for
this short of the process-wide ``NPY_DISABLE_CPU_FEATURES``, read once at import, which a library
cannot set for its users.

exp, log, expm1 and log1p run as scipy.special's Box-Cox ufuncs at λ = 0 (``inv_boxcox``, ``boxcox``,
``inv_boxcox1p``, ``boxcox1p``), whose compiled scalar loops call the C library's exp, log, expm1 and log1p
(libc.math) for λ = 0: the same bits as Python's math module, without a Python call per element (tens of
times faster on arrays; tests/test_exact_speedups.py compares them with math on random and edge values).
scipy has no such ufunc for pow, so power calls math.pow element by element.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np
import scipy.special


def _elementwise(f: Callable[..., Any]) -> Callable[..., np.ndarray]:
    """``f`` applied element by element to its broadcast arguments, as a float64 array of their shape."""
    def apply(*args: Any) -> np.ndarray:
        arrays = np.broadcast_arrays(*(np.asarray(a, dtype=np.float64) for a in args))
        flat = [a.ravel().tolist() for a in arrays]
        return np.fromiter(map(f, *flat), dtype=np.float64, count=arrays[0].size).reshape(arrays[0].shape)
    apply.__name__ = f.__name__
    apply.__doc__ = f"math.{f.__name__} element by element (the C library's, on every CPU)."
    return apply


# math.pow raises where the C library returns a value: OverflowError for a result beyond the largest
# double (C: ±HUGE_VAL, i.e. ±inf) and ValueError at a pole or outside the domain (C: ±inf or nan).
# numpy returns those values (with a warning), so power does too: an acquisition or a benchmark that
# reaches such an argument gets numpy's answer instead of ending the run.


def _odd_integer(y: float) -> bool:
    return math.isfinite(y) and y.is_integer() and int(y) % 2 == 1


def _pow(x: float, y: float) -> float:
    try:
        return math.pow(x, y)
    except OverflowError:  # |x^y| above DBL_MAX: signed as x^y is (negative only for x < 0 and an odd integer y)
        return -math.inf if x < 0 and _odd_integer(y) else math.inf
    except ValueError:  # 0 to a negative power (C: +inf, −inf for −0 and an odd integer y), or x < 0 to a fraction (nan)
        if x == 0.0:
            return math.copysign(math.inf, x) if _odd_integer(y) else math.inf
        return math.nan


_pow.__name__ = "pow"
power = _elementwise(_pow)


def _at_lambda_zero(ufunc: np.ufunc, name: str) -> Callable[[Any], np.ndarray]:
    """The C library's ``name`` on every element: scipy's Box-Cox ``ufunc`` at λ = 0 (see the module's
    docstring), as a new float64 array of the argument's shape. The C library returns ±inf and nan where
    math raises (overflow, poles, outside the domain), as numpy does, and scipy's loops raise no warning."""
    def apply(x: Any) -> np.ndarray:
        return np.asarray(ufunc(np.asarray(x, dtype=np.float64), 0.0), dtype=np.float64)
    apply.__name__ = name
    apply.__doc__ = f"The C library's {name} element by element (math.{name}'s bits, on every CPU)."
    return apply


exp = _at_lambda_zero(scipy.special.inv_boxcox, "exp")
log = _at_lambda_zero(scipy.special.boxcox, "log")
expm1 = _at_lambda_zero(scipy.special.inv_boxcox1p, "expm1")
log1p = _at_lambda_zero(scipy.special.boxcox1p, "log1p")
