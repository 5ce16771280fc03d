"""Calibration of the low-fidelity gap constants G of the synthetic instances.

The synthetic benchmarks (:mod:`metaopt.core.benchmarks.synthetic`) do not calibrate at run time:
they read G from the generated module :mod:`metaopt.core.benchmarks.synthetic_gaps`, so that an
instance is bitwise the same on every machine. This module computes those constants and
rewrites that file::

    python -m metaopt.core.benchmarks.synthetic_calibration

Run it after any change to the synthetic model (families, instance draws, calibration); the
test suite checks that the shipped constants are what this calibration gives.

Per instance, the calibration continues drawing from the instance's generator (after the
draws of :func:`metaopt.core.benchmarks.synthetic._draw`): a target Spearman correlation from
[0.55, 0.75] ([0.25, 0.45] for ``cells``), then 1000 random configurations x and their noise draws eps (uniform in
[0, 1)). G is found by bisection such that the Spearman correlation between the full-fidelity
excess F and the r_min surrogate F + G (w(x) + 0.1 eps) equals the target.

The noise is drawn from the generator rather than hashed from the configurations' values as
at evaluation time (both are uniform in [0, 1) and independent of everything else): the
hash of a value changes completely when the value's last bit does, and log-scaled values are
made by ``numpy.power``, whose last bit depends on the CPU's vector instructions. With drawn
noise, G is a continuous function of its inputs, so a different CPU moves it only at the
level of rounding errors (see ``GAP_RTOL``).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from metaopt.core.benchmarks.synthetic import _MODELS, FAMILIES, N_INSTANCES, _draw
from metaopt.core.store_utils import atomic_write_text

RHO_TARGET = (0.55, 0.75)
"""Range of the per-instance Spearman correlation between r_min and r_max losses."""
RHO_TARGET_CELLS = (0.25, 0.45)
"""The same for the family ``cells``, whose low fidelities mislead more (as NAS-Bench-301's do)."""
N_CALIBRATION = 1000
"""Number of random configurations the calibration of one instance uses."""
SIGNIFICANT_DIGITS = 10
"""The shipped constants are rounded to this many significant digits."""
GAP_RTOL = 1e-9
"""Relative tolerance between the shipped constants and a fresh calibration.

The shipped value is rounded to 10 significant digits (relative error <= 5e-11). A fresh
calibration on another CPU differs only through last-bit differences of the vectorized
exp/log/cos/power, and G is continuous in its inputs: random relative errors of 1e-15 on every
input moved G by at most 1e-15, errors of 1e-12 (a thousand times more than last bits) by at most
9e-11. A real change of the model moves G by far more: shifting the target correlations by 0.0005
moves G by more than 8e-4 for 90% of the instances.
"""
_DATA_FILE = Path(__file__).with_name("synthetic_gaps.py")


def _ranks(v: np.ndarray) -> np.ndarray:
    ranks = np.empty(len(v))
    ranks[np.argsort(v, kind="stable")] = np.arange(len(v))
    return ranks


def _calibrate_gap(excess: np.ndarray, gap: np.ndarray, target: float) -> float:
    """G such that Spearman(excess + G * gap, excess) = target (bisection on log G).

    G is searched in [1e-3, 3] * std(excess) / std(gap): where the gap agrees so much with the
    excess that even the upper end keeps the correlation above the target, the upper end is used
    (a larger gap would dwarf the loss it is a bias of).
    """
    ranks = _ranks(excess)
    ranks -= ranks.mean()

    def rho(g: float) -> float:
        other = _ranks(excess + g * gap)
        other -= other.mean()
        return float(ranks @ other / (ranks @ ranks))

    unit = excess.std() / gap.std()
    lo, hi = np.log(1e-3 * unit), np.log(3 * unit)
    if rho(np.exp(hi)) >= target:
        return float(np.exp(hi))
    for _ in range(40):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if rho(np.exp(mid)) > target else (lo, mid)
    return float(np.exp((lo + hi) / 2))


def calibrate(family: str, index: int) -> float:
    """The gap constant G of instance ``index`` of ``family``, unrounded (see the module docstring)."""
    model = _MODELS[family]
    inst, rng = _draw(family, index)
    target = float(rng.uniform(*(RHO_TARGET_CELLS if family == "cells" else RHO_TARGET)))
    x = model.random_batch(rng, N_CALIBRATION)
    eps = rng.uniform(size=N_CALIBRATION)
    w, _ = model.curve(x)
    return _calibrate_gap(model.excess(inst.tables, x), w + 0.1 * eps, target)


def calibrate_all() -> dict[str, tuple[float, ...]]:
    """G of every instance of every family, rounded to ``SIGNIFICANT_DIGITS`` (what is shipped)."""
    return {
        family: tuple(float(f"{calibrate(family, i):.{SIGNIFICANT_DIGITS}g}") for i in range(N_INSTANCES))
        for family in FAMILIES
    }


def render(gaps: dict[str, tuple[float, ...]]) -> str:
    """The text of the generated module ``synthetic_gaps.py`` holding ``gaps``."""
    lines = [
        '"""Gap constants G of the synthetic instances, per family and instance index.',
        "",
        "Generated by ``python -m metaopt.core.benchmarks.synthetic_calibration``: do not edit by hand.",
        '"""',
        "",
        "GAPS: dict[str, tuple[float, ...]] = {",
    ]
    for family, values in gaps.items():
        lines.append(f'    "{family}": (')
        lines += [f"        {v!r},  # {i}" for i, v in enumerate(values)]
        lines.append("    ),")
    lines.append("}")
    return "\n".join(lines) + "\n"


def main() -> None:
    """Recalibrate every instance and rewrite ``synthetic_gaps.py`` (the ``python -m`` entry)."""
    atomic_write_text(_DATA_FILE, render(calibrate_all()))  # all or nothing
    print(f"wrote {_DATA_FILE}", file=sys.stderr)


if __name__ == "__main__":
    main()
