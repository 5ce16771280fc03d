"""The C library's exp, log, expm1, log1p and pow on numpy arrays, element by element: the same bits on
every CPU.

numpy computes these float64 functions with its own AVX-512 kernels where the CPU has them and with
the C library's elsewhere; the two differ in the last bit for a few percent of arguments (about 5%
for exp). Wherever such a value reaches a result, a one-bit difference can become another run (a
hashed value, a flipped comparison). Python's math module calls the C library on every machine, so
these give the same bits everywhere, and the same as numpy without AVX-512. numpy has no switch for
this short of the process-wide ``NPY_DISABLE_CPU_FEATURES``, read once at import, which a library
cannot set for its users.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np


def _elementwise(f: Callable[..., Any]) -> Callable[..., np.ndarray]:
    """``f`` applied element by element to its broadcast arguments, as a float64 array of their shape."""
    def apply(*args: Any) -> np.ndarray:
        arrays = np.broadcast_arrays(*(np.asarray(a, dtype=np.float64) for a in args))
        flat = [a.ravel().tolist() for a in arrays]
        return np.fromiter(map(f, *flat), dtype=np.float64, count=arrays[0].size).reshape(arrays[0].shape)
    apply.__name__ = f.__name__
    apply.__doc__ = f"math.{f.__name__} element by element (the C library's, on every CPU)."
    return apply


exp, log, expm1, log1p, power = (_elementwise(f) for f in (math.exp, math.log, math.expm1, math.log1p, math.pow))
