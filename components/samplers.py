"""Generating distributions: where new configurations come from (paper 004, P_λ(A))."""

from __future__ import annotations

import math
from abc import ABC, abstractmethod

import numpy as np
from ConfigSpace import Float
from scipy import special

from metaopt.core.context import ProposalContext
from metaopt.core.registry import category_base, register


@category_base("samplers")
class Sampler(ABC):
    """The generating distribution: draws new configurations of the problem's search space.

    One instance serves one run (the loop builds the optimizer per run), so a sampler may keep
    state between calls; it is built with its hyperparameters as keyword arguments.
    """

    @abstractmethod
    def sample(self, n: int, ctx: ProposalContext) -> np.ndarray:
        """Draw ``n`` new configurations.

        Called by the filter of ``sample_filter`` whenever it needs points: for the randomly
        interleaved share of a batch and for the candidates the surrogate ranks (so possibly many
        times per batch, with ``n`` larger than the batch). ``n`` may be 0.

        Args:
            n: How many configurations to draw.
            ctx: The run so far: ``ctx.archive`` (every evaluation), ``ctx.codec`` (the encoding),
                ``ctx.fidelity`` (the stage the points are proposed for), ``ctx.t`` (spent budget
                fraction in [0, 1]) and ``ctx.rng``.

        Returns:
            An array of shape ``(n, ctx.codec.dim)``: configurations encoded by ``ctx.codec``
            (ConfigSpace's vector form, every value in [0, 1]) with NaN exactly at the
            hyperparameters that are inactive under the configuration's conditions; every row
            must satisfy the search space's forbidden clauses.

        Every random draw must come from ``ctx.rng``, the run's one generator: no other source of
        randomness, so that a run is a pure function of its seed.
        """


@register("samplers", "uniform", description="uniform over the search space (conditions and forbiddens respected)")
class UniformSampler(Sampler):
    def sample(self, n: int, ctx: ProposalContext) -> np.ndarray:
        return ctx.codec.sample_uniform(n, ctx.rng)


# BOHB's defaults (Falkner et al. 2018): top 15% of the evaluations form the "good" density,
# Scott/normal-reference bandwidths are widened by a factor 3 when sampling, floored at 1e-3.
KDE_BANDWIDTH_FACTOR = Float("kde_bandwidth_factor", (1.0, 10.0), default=3.0, log=True)
KDE_TOP_FRACTION = Float("kde_top_fraction", (0.05, 0.5), default=0.15)
MIN_BANDWIDTH = 1e-3
_UNIFORM_STD = math.sqrt(1 / 12)


@register("samplers", "kde", (KDE_BANDWIDTH_FACTOR, KDE_TOP_FRACTION),
          description="BOHB-style KDE of the best evaluations at the largest fidelity with enough points")
class KDESampler(Sampler):
    """Sample from a kernel density estimate of the good configurations (BOHB, paper 004 "KDE").

    Good points: the best ``max(d + 2, floor(top_fraction * n))`` of the ``n`` evaluations at the
    largest fidelity that has at least ``d + 4`` (finite-loss) evaluations; uniform sampling while
    no fidelity has that many. A sample picks a prototype uniformly among the good points and
    perturbs it in the vector representation:

    - numeric (float and integer) dimensions: a normal truncated to [0, 1] around the prototype,
      with bandwidth ``bandwidth_factor * max(1.06 * std * n_good^(-1/(d+4)), 1e-3)`` (statsmodels'
      normal reference rule over all d dimensions, as BOHB; std over the good points where the
      hyperparameter is active, that of a uniform when fewer than two are). Integers are sampled
      on the continuous vector scale and snapped to the nearest legal integer by ``repair``.
    - categorical (and ordinal) dimensions: Aitchison-Aitken kernel, i.e. keep the prototype's
      choice with probability 1 - λ, else take one of the other choices uniformly. BOHB applies
      the normal reference rule to the choice index, which means nothing for unordered choices;
      we use λ = the fraction of the good points (where active) not in the modal choice — the
      disagreement among good points — clipped to [1e-3, (c-1)/c] (at (c-1)/c the kernel is
      uniform). As in BOHB, the bandwidth factor is not applied to categoricals.
    - dimensions inactive in the prototype stay NaN; ``SpaceCodec.repair`` then deactivates
      children whose condition fails and draws fresh values for newly activated ones. (BOHB
      imputes inactive values before fitting; the result after repair is the same in kind.)

    Stateless: every call derives the model from ``ctx.archive`` alone.
    """

    def __init__(self, kde_bandwidth_factor: float = 3.0, kde_top_fraction: float = 0.15) -> None:
        self.bandwidth_factor = float(kde_bandwidth_factor)
        self.top_fraction = float(kde_top_fraction)

    def good_points(self, ctx: ProposalContext) -> np.ndarray | None:
        """Vectors of the good points, best first; None when no fidelity has enough evaluations."""
        d = ctx.codec.dim
        archive = ctx.archive
        loss, fidelity = archive.loss, archive.fidelity
        ok = np.isfinite(loss)
        levels, counts = np.unique(fidelity[ok], return_counts=True)
        enough = levels[counts >= d + 4]
        if len(enough) == 0:
            return None
        rows = np.flatnonzero(ok & (fidelity == enough.max()))
        n_good = min(len(rows), max(d + 2, int(self.top_fraction * len(rows))))
        best = rows[np.argsort(loss[rows], kind="stable")[:n_good]]
        return archive.X[best]

    def bandwidths(self, good: np.ndarray, ctx: ProposalContext) -> np.ndarray:
        """Per column: the sampling bandwidth (numeric) or λ (categorical); 0 for other columns."""
        layout = ctx.codec.layout
        n_good, d = good.shape
        active = ~np.isnan(good)
        n_active = active.sum(axis=0)
        bw = np.zeros(d)

        num = layout.numeric
        values, mask, count = np.nan_to_num(good[:, num]), active[:, num], np.maximum(n_active[num], 1)
        mean = values.sum(axis=0) / count
        std = np.sqrt((mask * (values - mean) ** 2).sum(axis=0) / count)
        std = np.where(n_active[num] >= 2, std, _UNIFORM_STD)
        scott = 1.06 * std * n_good ** (-1.0 / (d + 4))
        bw[num] = self.bandwidth_factor * np.maximum(scott, MIN_BANDWIDTH)

        for j in np.flatnonzero(layout.categorical):
            c = int(layout.n_choices[j])
            values = good[active[:, j], j].astype(int)
            uniform = (c - 1) / c
            if len(values) == 0:
                bw[j] = uniform
                continue
            disagreement = 1.0 - np.bincount(values, minlength=c).max() / len(values)
            bw[j] = min(max(disagreement, MIN_BANDWIDTH), uniform)
        return bw

    def sample(self, n: int, ctx: ProposalContext) -> np.ndarray:
        good = self.good_points(ctx)
        if good is None or n <= 0:
            return ctx.codec.sample_uniform(n, ctx.rng)
        rng = ctx.rng
        layout = ctx.codec.layout
        bw = self.bandwidths(good, ctx)
        X = good[rng.integers(len(good), size=n)]  # prototypes (a fresh array)

        # Numeric: truncated normal on [0, 1] by inverting the CDF between the bounds' quantiles.
        num = np.flatnonzero(layout.numeric)
        m = np.clip(X[:, num], 0.0, 1.0)
        h = bw[num]
        lo, hi = special.ndtr(-m / h), special.ndtr((1.0 - m) / h)
        u = lo + rng.random(m.shape) * (hi - lo)
        X[:, num] = np.clip(m + h * special.ndtri(u), 0.0, 1.0)  # NaN (inactive) stays NaN

        # Categorical: Aitchison-Aitken, switching to one of the c - 1 other choices with prob. λ.
        cat = np.flatnonzero(layout.categorical)
        c = layout.n_choices[cat]
        switch = rng.random((n, len(cat))) < bw[cat]
        offset = 1 + np.floor(rng.random((n, len(cat))) * np.maximum(c - 1, 1))
        X[:, cat] = np.where(switch, (X[:, cat] + offset) % c, X[:, cat])

        return ctx.codec.repair(X, rng)
