"""Filters: propose configurations by sampling candidates and keeping those a surrogate likes best.

Paper 004 Alg. 3 (SampleTournament) and Alg. 4 (SampleProgressive), docs/design.md §5:

- Random interleave: of ``n`` requested points, ``round(n·ρ)`` (or ``Binomial(n, ρ)`` when
  ``filter_rho_random``) skip the filter; they are drawn from the same generating distribution.
- ``tournament``: T = ceil(n'/n_trn) tournaments (n' = points left to filter); tournament i draws
  ``round(n_trn · N0^((T−i)/(T−1)) · N1^((i−1)/(T−1)))`` candidates (N0 = N_s⁰, N1 = N_s¹; N0 when
  T = 1) and keeps its ``min(n_trn, still needed)`` best.
- ``progressive``: one pool of ``round(n'·max(N0, N1))`` candidates; point i is the best of the
  first ``round(n'·N0^((n'−i)/(n'−1))·N1^((i−1)/(n'−1)))`` pool entries not yet taken.
- Time-varying parameters: ρ(t) interpolates linearly between ρ(0) and ρ(1); N_s⁰(t), N_s¹(t) and
  n_trn(t) geometrically (n_trn rounded), with t = spent/B.
- ``filter_mb``: the surrogate predicts as if at the largest fidelity in the archive, else at the
  fidelity of the stage being proposed.
- ``surrogate_target``: what the surrogate is fitted on: the losses (``none``), their logarithm
  after a shift below the smallest (``log``, as SMAC's HPO facade; pair it with the ``logei``
  acquisition), or their ranks scaled to (0, 1] (``rank``); the incumbent's loss goes through the
  same transform.
- ``local_random``: SMAC's local-and-random search of the acquisition (see :class:`LocalAndRandomFilter`).

The surrogate is fitted on the whole archive (fidelity as a feature) once per call, i.e. once per
batch. Candidates are ranked by the acquisition's score (lower is better).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
from ConfigSpace import Categorical, Float, Integer
from scipy.stats import rankdata

from metaopt.core.libm import log as libm_log
from metaopt.components.acquisition import Acquisition, expected_improvement, has_uncertainty
from metaopt.components.cost_models import CostModel
from metaopt.components.cost_penalties import CostPenalty
from metaopt.components.samplers import Sampler
from metaopt.components.surrogates import Surrogate
from metaopt.core.context import ProposalContext
from metaopt.core.features import FeatureEncoder
from metaopt.core.registry import category_base, register

RHO = (Float("filter_rho_0", (0.0, 1.0), default=0.0), Float("filter_rho_1", (0.0, 1.0), default=0.0))
N_SAMPLES = tuple(Float(f"filter_ns{k}_{t}", (1.0, 1000.0), default=64.0, log=True) for k in (0, 1) for t in (0, 1))
SHARED_HPS = (
    *RHO,
    *N_SAMPLES,
    Categorical("filter_mb", [True, False], default=True),
    Categorical("filter_rho_random", [True, False], default=False),
    Categorical("surrogate_target", ["none", "log", "rank"], default="none"),
)
N_TRN = (Integer("filter_n_trn_0", (1, 10), default=1, log=True),
         Integer("filter_n_trn_1", (1, 10), default=1, log=True))


def linear(a: float, b: float, t: float) -> float:
    return a + (b - a) * t


def geometric(a: float, b: float, t: float) -> float:
    return a ** (1 - t) * b ** t


def geometric_sizes(first: float, last: float, count: int) -> np.ndarray:
    """``count`` values from ``first`` to ``last`` on a geometric scale (``first`` when count = 1)."""
    if count == 1:
        return np.array([first])
    w = np.arange(count) / (count - 1)
    return first ** (1 - w) * last ** w


def target_transform(loss: np.ndarray, kind: str) -> tuple[np.ndarray, Callable[[float], float]]:
    """(the surrogate's training target for ``loss``, the same map for a single loss such as y_best).

    ``none``: the losses; ``log``: log(y − lo) with lo = min − 1% of the range (so the best point is
    finite); ``rank``: the average rank among the losses divided by their count. Non-finite losses
    stay NaN (the surrogate drops them).
    """
    if kind == "none":
        return loss, lambda value: value
    finite = np.isfinite(loss)
    if not finite.any():
        return loss, lambda value: value
    y = loss[finite]
    out = np.full(len(loss), np.nan)
    if kind == "log":
        lo = float(y.min()) - 0.01 * (float(np.ptp(y)) or max(abs(float(y.min())), 1.0))
        out[finite] = libm_log(y - lo)  # the C library's log: the same bits on every CPU
        return out, lambda value: math.log(max(value - lo, 1e-300))
    if kind == "rank":
        out[finite] = rankdata(y) / len(y)
        # a value's average rank among the losses (for a loss of the archive: exactly its target)
        return out, lambda value: float((np.sum(y < value) + (np.sum(y == value) + 1) / 2) / len(y))
    raise ValueError(f"unknown surrogate target {kind!r}")


@dataclass
class Scorer:
    """A surrogate plus an acquisition, fitted on the archive: scores candidates (lower is better).

    With a cost penalty other than ``none`` (acquisition EI), the cost model is fitted on the
    archive's costs too, predicts the candidates' costs at the fidelity the surrogate predicts at,
    and the penalty turns (EI, cost, t) into the scores (:mod:`metaopt.components.cost_penalties`).
    """

    surrogate: Surrogate
    acquisition: Acquisition
    predict_at_max_fidelity: bool
    cost_penalty: CostPenalty | None = None
    cost_model: CostModel | None = None

    target: str = "none"
    """The surrogate's training target (:func:`target_transform`)."""

    def fitted(self, ctx: ProposalContext) -> Callable[[np.ndarray], np.ndarray]:
        """Fit the surrogate (and the cost model, under a cost penalty) on the archive; return the
        scoring function of candidate vectors (lower is better). Called once per filtered batch; the
        function may then be called many times (local search) and draws no random numbers."""
        archive = ctx.archive
        if len(archive) == 0:  # nothing to learn from: keep the sampling order
            return lambda candidates: np.zeros(len(candidates))
        encoder = FeatureEncoder(ctx.codec, ctx.state.problem.fidelity)
        loss = archive.loss
        fid = archive.fidelity
        seen = encoder.encode(archive.X, fid)
        target, to_target = target_transform(loss, self.target)
        self.surrogate.fit(seen, target, ctx.rng)
        r = float(np.nanmax(fid)) if self.predict_at_max_fidelity else float(ctx.fidelity)
        at_r = np.isclose(fid, r) & ~np.isnan(loss)
        y_best = to_target(float(np.min(loss[at_r])) if at_r.any() else float(np.nanmin(loss)))
        uses_cost = self.cost_penalty is not None and self.cost_penalty.uses_cost
        if uses_cost:
            self.cost_model.fit(seen, archive.cost, ctx.rng)

        def score(candidates: np.ndarray) -> np.ndarray:
            features = encoder.encode(candidates, np.full(len(candidates), r))
            mean, std = self.surrogate.predict(features)
            scores = self.acquisition.score(mean, std, y_best)
            if not uses_cost:
                return scores
            ei = expected_improvement(mean, std, y_best) if has_uncertainty(std, y_best) else np.zeros(len(mean))
            return self.cost_penalty.score(ei, self.cost_model.predict(features), ctx.t, fallback=scores)

        return score

    def fit_and_score(self, ctx: ProposalContext, candidates: np.ndarray) -> np.ndarray:
        """Fit on the archive and score ``candidates`` (lower is better): :meth:`fitted` applied once."""
        return self.fitted(ctx)(candidates)


@category_base("filters")
class Filter(ABC):
    """Proposes configurations for ``sample_filter``: draws from the sampler and keeps the candidates
    the scorer (surrogate + acquisition) ranks best. One instance serves one run."""

    uses_surrogate: bool = False
    """Whether the filter ranks candidates with a surrogate: the surrogate and acquisition
    categories exist in the design space only under such a filter, and only then does the
    loop build a :class:`Scorer` for it."""
    predict_at_max_fidelity: bool = False
    """Whether the scorer predicts at the largest fidelity evaluated so far (else at the stage's)."""

    @abstractmethod
    def propose(self, n: int, ctx: ProposalContext, sampler: Sampler, scorer: Scorer | None) -> np.ndarray:
        """Propose ``n`` configurations for one stage.

        Called by :meth:`metaopt.components.proposals.SampleAndFilter.propose` each time the loop
        asks the proposal for new configurations (see :meth:`metaopt.components.proposals.Proposal.propose`).

        Args:
            n: How many configurations (may be 0).
            ctx: The run so far (archive, codec, stage fidelity, ``t``, ``rng``).
            sampler: The generating distribution to draw candidates from (:meth:`Sampler.sample`).
            scorer: The fitted-on-demand surrogate and acquisition; None for filters without
                ``uses_surrogate``. :meth:`Scorer.fit_and_score` refits it on the archive.

        Returns:
            An array of shape ``(n, ctx.codec.dim)`` of encoded configurations (values in [0, 1],
            NaN exactly at inactive hyperparameters), rows the sampler drew.

        Every random draw must come from ``ctx.rng`` (directly or through the sampler).
        """


@register("filters", "none", description="no filtering: every proposed point comes straight from the sampler")
class NoFilter(Filter):
    def propose(self, n: int, ctx: ProposalContext, sampler: Sampler, scorer: Scorer | None) -> np.ndarray:
        return sampler.sample(n, ctx)


class _SurrogateFilter(Filter):
    uses_surrogate = True

    def __init__(self, filter_rho_0: float, filter_rho_1: float, filter_ns0_0: float, filter_ns0_1: float,
                 filter_ns1_0: float, filter_ns1_1: float, filter_mb: bool, filter_rho_random: bool,
                 surrogate_target: str = "none") -> None:
        self.target = str(surrogate_target)
        self.rho = (float(filter_rho_0), float(filter_rho_1))
        self.ns0 = (float(filter_ns0_0), float(filter_ns0_1))
        self.ns1 = (float(filter_ns1_0), float(filter_ns1_1))
        self.predict_at_max_fidelity = bool(filter_mb)
        self.rho_random = bool(filter_rho_random)

    def n_interleaved(self, n: int, t: float, rng: np.random.Generator) -> int:
        """How many of ``n`` points skip the filter at progress t."""
        rho = linear(*self.rho, t)
        return int(rng.binomial(n, rho)) if self.rho_random else int(round(n * rho))

    def sample_rates(self, t: float) -> tuple[float, float]:
        """(N_s⁰(t), N_s¹(t))."""
        return geometric(*self.ns0, t), geometric(*self.ns1, t)

    def propose(self, n: int, ctx: ProposalContext, sampler: Sampler, scorer: Scorer | None) -> np.ndarray:
        if n <= 0:
            return np.empty((0, ctx.codec.dim))
        n_random = self.n_interleaved(n, ctx.t, ctx.rng)
        random_part = sampler.sample(n_random, ctx) if n_random else np.empty((0, ctx.codec.dim))
        filtered = self.filtered(n - n_random, ctx, sampler, scorer) if n > n_random else np.empty((0, ctx.codec.dim))
        return np.concatenate([random_part, filtered])

    @abstractmethod
    def filtered(self, n: int, ctx: ProposalContext, sampler: Sampler, scorer: Scorer) -> np.ndarray:
        ...


@register("filters", "tournament", SHARED_HPS + N_TRN, "SampleTournament (Alg. 3): tournaments of growing size")
class TournamentFilter(_SurrogateFilter):
    def __init__(self, filter_n_trn_0: int, filter_n_trn_1: int, **shared: float) -> None:
        super().__init__(**shared)
        self.n_trn = (int(filter_n_trn_0), int(filter_n_trn_1))

    def tournament_sizes(self, n: int, t: float) -> tuple[int, list[int]]:
        """(n_trn(t), the candidate counts of the ceil(n/n_trn) tournaments)."""
        n_trn = max(int(round(geometric(*self.n_trn, t))), 1)
        rounds = math.ceil(n / n_trn)
        ns0, ns1 = self.sample_rates(t)
        sizes = np.rint(n_trn * geometric_sizes(ns0, ns1, rounds)).astype(int)
        return n_trn, [max(int(s), n_trn) for s in sizes]

    def filtered(self, n: int, ctx: ProposalContext, sampler: Sampler, scorer: Scorer) -> np.ndarray:
        n_trn, sizes = self.tournament_sizes(n, ctx.t)
        candidates = sampler.sample(int(sum(sizes)), ctx)
        scores = scorer.fit_and_score(ctx, candidates)
        chosen = []
        start = 0
        for size in sizes:
            keep = min(n_trn, n - len(chosen))
            order = np.argsort(scores[start:start + size], kind="stable")[:keep]
            chosen.extend(start + order)
            start += size
        return candidates[np.array(chosen, dtype=int)]


@register("filters", "progressive", SHARED_HPS, "SampleProgressive (Alg. 4): one pool, shrinking or growing windows")
class ProgressiveFilter(_SurrogateFilter):
    def pool_sizes(self, n: int, t: float) -> tuple[int, list[int]]:
        """(size of the pool, the window size for each of the n points)."""
        ns0, ns1 = self.sample_rates(t)
        pool = max(int(round(n * max(ns0, ns1))), n)
        windows = np.rint(n * geometric_sizes(ns0, ns1, n)).astype(int)
        return pool, [max(int(w), 1) for w in windows]

    def filtered(self, n: int, ctx: ProposalContext, sampler: Sampler, scorer: Scorer) -> np.ndarray:
        pool_size, windows = self.pool_sizes(n, ctx.t)
        pool = sampler.sample(pool_size, ctx)
        scores = scorer.fit_and_score(ctx, pool)
        remaining = np.arange(pool_size)
        chosen = []
        for window in windows:
            options = remaining[:window]
            best = options[np.argmin(scores[options])]
            chosen.append(best)
            remaining = remaining[remaining != best]
        return pool[np.array(chosen, dtype=int)]


LRS_HPS = (
    Integer("lrs_random", (10, 10000), default=1000, log=True),
    Integer("lrs_starts", (1, 20), default=10, log=True),
    Integer("lrs_neighbours", (2, 50), default=20, log=True),
    Integer("lrs_steps", (1, 30), default=10, log=True),
    Float("lrs_step", (0.01, 0.5), default=0.1, log=True),
    Integer("lrs_retrain_after", (1, 16), default=1, log=True),
)


@register("filters", "local_random", SHARED_HPS + LRS_HPS,
          "SMAC's local-and-random search of the acquisition: random candidates plus local search from the best")
class LocalAndRandomFilter(_SurrogateFilter):
    """Maximizes the acquisition as SMAC's ``LocalAndSortedRandomSearch`` does, in our vector space.

    ``lrs_random`` candidates come from the sampler; the ``lrs_starts`` best of them and of the
    evaluated configurations (by the acquisition) start a local search: each step draws
    ``lrs_neighbours`` one-exchange neighbours per start (one active coordinate changed: a
    Gaussian step of sd ``lrs_step`` in the unit cube for a numeric hyperparameter, another choice
    for a categorical one; repaired onto the space's conditions and forbiddens), scored in one
    call; a start moves to its best neighbour while that improves, for at most ``lrs_steps`` steps.
    The ``n`` best distinct candidates not evaluated before are returned. The N_s parameters of
    the other filters do not apply; ρ (random interleave) does, as SMAC's random configurations.

    Retraining (``lrs_retrain_after`` k): the surrogate is fitted and the acquisition maximized
    anew only once at least k evaluations have entered the archive since the last maximization;
    until then each call returns the next distinct candidates of that maximization not evaluated
    since, and draws no random numbers. A maximization offers SMAC's challengers: the local
    searches' end points (one per start) by score, then the rest of its candidates by score (the
    best-scored candidates are mostly one search's last neighbours, nearly one configuration).
    k = 1 (the default) maximizes at every call and proposes the best distinct candidates of all.
    SMAC's HPO facade retrains its forest after every 8 configurations (its ``ConfigSelector``'s
    ``retrain_after`` = 8; the black-box facade's is 1) and yields the next challengers of one
    maximization in between, while evaluating them one at a time; so does this filter with k = 8
    and μ = 1.
    """

    def __init__(self, lrs_random: int, lrs_starts: int, lrs_neighbours: int, lrs_steps: int, lrs_step: float,
                 lrs_retrain_after: int = 1, **shared: float) -> None:
        super().__init__(**shared)
        self.n_random, self.n_starts = int(lrs_random), int(lrs_starts)
        self.n_neighbours, self.n_steps, self.step = int(lrs_neighbours), int(lrs_steps), float(lrs_step)
        self.retrain_after = int(lrs_retrain_after)
        self._last: _Maximized | None = None
        """(k > 1) The last maximization (its ranked pool) and the archive's length then."""

    def neighbours(self, X: np.ndarray, ctx: ProposalContext) -> np.ndarray:
        """``n_neighbours`` one-exchange neighbours of each row of ``X`` (rows grouped by start), repaired."""
        layout, rng = ctx.codec.layout, ctx.rng
        N = np.repeat(X, self.n_neighbours, axis=0)
        movable = ((layout.numeric | (layout.categorical & (layout.n_choices > 1)))[None, :]) & ~np.isnan(N)
        pick = np.argmax(np.where(movable, rng.random(N.shape), -1.0), axis=1)
        rows = np.flatnonzero(movable.any(axis=1))
        pick = pick[rows]
        numeric = layout.numeric[pick]
        N[rows[numeric], pick[numeric]] += rng.normal(0.0, self.step, int(numeric.sum()))
        cat_rows, cat_cols = rows[~numeric], pick[~numeric]
        if len(cat_rows):
            m = layout.n_choices[cat_cols].astype(int)
            shift = 1 + rng.integers(0, m - 1)  # another choice, uniformly
            N[cat_rows, cat_cols] = (N[cat_rows, cat_cols] + shift) % m
        return ctx.codec.repair(N, rng)

    def filtered(self, n: int, ctx: ProposalContext, sampler: Sampler, scorer: Scorer) -> np.ndarray:
        last = self._last
        if last is not None and len(ctx.archive) - last.archive_size < self.retrain_after:
            # the rows evaluated since the maximization are the only ones it did not exclude yet
            chosen = last.best(n, _row_keys(ctx.archive.X[last.archive_size:]))
            if len(chosen) == n:
                return chosen
        evaluated = np.unique(ctx.archive.X, axis=0) if len(ctx.archive) else np.empty((0, ctx.codec.dim))
        pool, pool_scores, ends, end_scores = self.maximize(n, ctx, sampler, scorer, evaluated)
        excluded = set(_row_keys(evaluated))
        if self.retrain_after == 1:
            return _Maximized(pool, np.argsort(pool_scores, kind="stable"), excluded, 0).best(n)
        # SMAC's challengers: the local searches' end points by score, then the rest of the pool
        order = np.concatenate([np.argsort(end_scores, kind="stable"),
                                len(ends) + np.argsort(pool_scores, kind="stable")])
        self._last = _Maximized(np.concatenate([ends, pool]), order, excluded, len(ctx.archive))
        return self._last.best(n)

    def maximize(self, n: int, ctx: ProposalContext, sampler: Sampler, scorer: Scorer,
                 evaluated: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Fit the scorer on the archive and search the acquisition (called by :meth:`filtered` when it
        retrains; ``evaluated``: the archive's distinct configurations, local-search starts). Returns
        every candidate it scored (the random ones, then each step's neighbours) with their scores,
        and each local search's end point (where its start stopped improving) with its score."""
        score = scorer.fitted(ctx)
        random_part = sampler.sample(max(self.n_random, n), ctx)
        pool, pool_scores = [random_part], [score(random_part)]
        starts = np.concatenate([evaluated, random_part])
        start_scores = np.concatenate([score(evaluated) if len(evaluated) else np.empty(0), pool_scores[0]])
        best = np.argsort(start_scores, kind="stable")[: self.n_starts]
        x, sx = starts[best], start_scores[best]
        ends, end_scores, moving = x.copy(), sx.copy(), np.arange(len(x))
        for _ in range(self.n_steps):
            if len(x) == 0:
                break
            nb = self.neighbours(x, ctx)
            snb = score(nb)
            pool.append(nb)
            pool_scores.append(snb)
            grouped = snb.reshape(len(x), self.n_neighbours)
            arg = np.argmin(grouped, axis=1)
            better = grouped[np.arange(len(x)), arg] < sx
            x = nb.reshape(len(x), self.n_neighbours, -1)[np.arange(len(x)), arg][better]
            sx = grouped[np.arange(len(sx)), arg][better]
            moving = moving[better]
            ends[moving], end_scores[moving] = x, sx
        return np.concatenate(pool), np.concatenate(pool_scores), ends, end_scores


def _keyable(X: np.ndarray) -> np.ndarray:
    """Encoded configurations with NaN (inactive) as −1, whose rows' bytes are their keys (equal keys:
    the same configuration); converted once for all rows, not row by row."""
    return np.nan_to_num(X, nan=-1.0)


def _row_keys(X: np.ndarray) -> list[bytes]:
    """The key of every row of ``X`` (:func:`_keyable`)."""
    return [row.tobytes() for row in _keyable(X)]


@dataclass
class _Maximized:
    """One maximization of the acquisition by :class:`LocalAndRandomFilter`: the candidates it offers,
    the order it offers them in (indices, by score), the keys of the configurations evaluated then,
    and the archive's length then."""

    candidates: np.ndarray
    order: np.ndarray
    excluded: set[bytes]
    archive_size: int

    def __post_init__(self) -> None:
        self._keys = _keyable(self.candidates)  # a row's key is taken only when the row is reached

    def best(self, n: int, also_excluded: Sequence[bytes] = ()) -> np.ndarray:
        """The first ``n`` distinct candidates in ``order`` that are neither excluded nor in
        ``also_excluded``; fewer only if there are not enough."""
        taken = self.excluded | set(also_excluded)
        chosen = []
        for index in self.order:
            k = self._keys[index].tobytes()
            if k not in taken:
                taken.add(k)
                chosen.append(index)
                if len(chosen) == n:
                    break
        return self.candidates[np.array(chosen, dtype=int)]
