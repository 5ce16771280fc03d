"""CFO (paper 000, Alg. 1-3): FLOW² randomized direct search with step-size rules and restarts.

One *round* of FLOW² (Alg. 2) starts at a point x (round 0: the low-cost start x0; round r ≥ 1:
x0 plus Gaussian noise), evaluated first. Each *iteration* draws u uniformly from the unit sphere
and proposes Proj(x + δu); if that is not strictly better than f(x), it proposes Proj(x − δu);
x moves to a strictly better proposal. With k the iterations of the round and k' the iteration that
found the round's best, after 2^(d−1) consecutive non-improving iterations δ ← δ / √(k/k'); if then
δ ≤ δ_lower, the search restarts (r ← r + 1, δ ← r + δ_init in units of c, see below).

Choices (the paper leaves them open, or its scale does not fit a [0, 1] space):

- Space: FLOW² moves the codec's vector coordinates (floats and integers in [0, 1] on their own,
  possibly log, scale; d = number of numeric and categorical hyperparameters). Proj clips to [0, 1]
  and snaps integers to the nearest integer (``SpaceCodec.repair``, which also sets inactive
  conditional hyperparameters to NaN and resamples rows that hit a forbidden clause).
- Step unit c = ``cfo_step_init``: the paper's step constants (δ_init = √d, +1 per restart round,
  restart noise N(0, I), δ_lower = 0.01 without discrete hyperparameters) are taken in units of c,
  so c = 1 is the paper exactly. In [0, 1]^d a step of √d spans the whole cube (its diagonal), so
  the default is c = 0.1, i.e. δ_init = 0.1 √d, the value the paper's authors use for normalized
  spaces in their FLAML implementation (on the synthetic families at 30d it also reached a lower
  regret than c = 1, at a fraction of the cost). A restart adds N(0, c²) noise to every moved
  coordinate of x0.
- δ_lower (Alg. 3): δ_init × the smallest normalized unit step of a discrete coordinate, at the
  incumbent: 1/(upper − lower) for integers, log(1 + 1/x)/log(upper/lower) for log integers at
  their value x, 1/m for a categorical with m choices (its surrogate bucket width); 0.01 c if no
  coordinate is discrete.
- k' counts iterations from 1 (the round's first iteration always sets its best, Alg. 2 line 9),
  so η = k/k' ≥ 1 is defined; the non-improvement counter restarts at every improvement, as the
  paper's text says ("consecutively").
- Low-cost start x0: per numeric hyperparameter the cheap end the problem declares
  (``Problem.cheap_end``: "lower" → 0, "upper" → 1); every other hyperparameter starts at its
  ConfigSpace default (the centre of the range for numeric ones without an explicit default).
- Categoricals (paper 000's "Discussions" (4), docs/design.md §5): each has a surrogate coordinate in
  [0, 1] that FLOW² moves like a numeric one; [0, 1] is cut into m equal buckets. The category
  stays while the surrogate stays in its bucket; when the bucket changes the category is re-drawn
  uniformly among the other m − 1 choices. A start has its surrogate at the middle of the bucket
  of its category index.
- Batches (n > 1 per call): after the round's start (while it is unevaluated) come the pending
  x − δu of directions whose x + δu did not improve, then pairs x ± δu_i for fresh directions;
  with odd n the last direction only gets x + δu (its x − δu comes next call if needed). After
  the batch, x moves to the best strictly improving point, if any; each direction whose two sides
  are evaluated (or any, if x moved) counts as one iteration. With n = 1 this is exactly Alg. 2.
- Feedback: the rows the archive gained since the last call are this component's previous
  proposals, in order (a budget cut may drop a tail; those proposals are forgotten). NaN losses
  count as +inf (never an improvement).

Where the paper leaves a rule open, FLAML's implementation (``flaml/tune/searcher/flow2.py``) made
other choices than the defaults above. Each is a hyperparameter, so the meta-search can pick; the
defaults are the paper's rules (the ``cfo`` preset), and ``cfo_flaml`` sets all of them FLAML's way:

- ``cfo_patience_base`` b: the step shrinks after ceil(b^(d−1)) consecutive non-improving
  iterations (paper: b = 2). At d = 7 the paper's 64 iterations (128 evaluations) leave a 30·d run
  at most one shrink; a smaller base makes the step rules act within such budgets.
- ``cfo_repeat_shrink``: after the first shrink of an incumbent, every further non-improving
  iteration shrinks again (FLAML: its counter steps back by one direction instead of restarting),
  with FLAML's telescoping factor δ ← δ·√(k_prev/k) (k_prev: the iteration of the previous shrink,
  k' at the first), so the total shrink since the best is √(k'/k) whatever the count of shrinks.
  Off (paper): the counter restarts and each shrink divides by √(k/k').
- ``cfo_expand``: a strictly better point undoes the last shrink, δ ← δ·√(k/k_prev), capped at √d
  (FLAML's step upper bound; the diagonal of the unit cube). Off: δ stays.
- ``cfo_start``: ``default`` starts hyperparameters without a declared cheap end at their
  ConfigSpace default; ``random`` draws them uniformly (FLAML completes its low-cost partial
  configuration with a random sample).
- ``cfo_lower_scale`` multiplies δ_lower (FLAML's bound for integers is √d / (upper − lower), ten
  times ours at c = 0.1, and 1e-4 without discrete coordinates).
- ``cfo_restart_noise`` multiplies the restart noise's standard deviation c.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from ConfigSpace import Categorical, Float

from metaopt.components.proposals import Proposal
from metaopt.core.context import ProposalContext
from metaopt.core.registry import register
from metaopt.core.space_codec import SpaceCodec

STEP_INIT = Float("cfo_step_init", (0.01, 1.0), default=0.1, log=True)
PATIENCE_BASE = Float("cfo_patience_base", (1.05, 2.0), default=2.0)
REPEAT_SHRINK = Categorical("cfo_repeat_shrink", [False, True], default=False)
EXPAND = Categorical("cfo_expand", [False, True], default=False)
START = Categorical("cfo_start", ["default", "random"], default="default")
LOWER_SCALE = Float("cfo_lower_scale", (0.1, 10.0), default=1.0, log=True)
RESTART_NOISE = Float("cfo_restart_noise", (0.1, 10.0), default=1.0, log=True)
HYPERPARAMETERS = [STEP_INIT, PATIENCE_BASE, REPEAT_SHRINK, EXPAND, START, LOWER_SCALE, RESTART_NOISE]


def bucket(z: float, n_choices: int) -> int:
    """The bucket (0 .. n_choices − 1) of a categorical surrogate coordinate z in [0, 1]."""
    return min(int(z * n_choices), n_choices - 1)


def categorical_move(z_old: float, z_new: float, choice: int, n_choices: int, rng: np.random.Generator) -> int:
    """The category after the surrogate moved from z_old to z_new: kept within a bucket, else a
    uniform draw among the other choices."""
    if bucket(z_new, n_choices) == bucket(z_old, n_choices):
        return choice
    other = int(rng.integers(n_choices - 1))
    return other + (other >= choice)


@dataclass(frozen=True)
class Point:
    """A FLOW² point: coordinates ``z`` (categoricals: surrogate positions), the category index
    of every categorical column (also while inactive), and the valid configuration vector."""

    z: np.ndarray
    choice: np.ndarray
    vector: np.ndarray


@dataclass(frozen=True)
class _Pending:
    """A proposal awaiting its loss: the start of a round (sign 0), or x + sign·step for direction
    number ``direction``."""

    point: Point
    direction: int = 0
    sign: int = 0
    step: np.ndarray | None = None


@register("proposals", "cfo", hyperparameters=HYPERPARAMETERS,
          description="CFO: FLOW² local search from a low-cost start, step-size shrinking and restarts (paper 000)")
class CFO(Proposal):
    """FLOW² with CFO's step-size rules and restarts; all state lives in the instance (one per run)."""

    supports_multi_fidelity = False

    def __init__(self, cfo_step_init: float = STEP_INIT.default_value,
                 cfo_patience_base: float = PATIENCE_BASE.default_value,
                 cfo_repeat_shrink: bool = REPEAT_SHRINK.default_value,
                 cfo_expand: bool = EXPAND.default_value,
                 cfo_start: str = START.default_value,
                 cfo_lower_scale: float = LOWER_SCALE.default_value,
                 cfo_restart_noise: float = RESTART_NOISE.default_value) -> None:
        self.c = float(cfo_step_init)
        self.patience_base = float(cfo_patience_base)
        self.repeat_shrink = bool(cfo_repeat_shrink)
        self.expand = bool(cfo_expand)
        self.random_start = cfo_start == "random"
        self.lower_scale = float(cfo_lower_scale)
        self.restart_noise = float(cfo_restart_noise)
        self.codec: SpaceCodec | None = None
        self.d = 0
        """Number of coordinates FLOW² moves (numeric and categorical hyperparameters)."""
        self.step_init = math.nan
        self.low_cost_start: Point | None = None
        self.incumbent: Point | None = None
        self.incumbent_loss = math.inf
        self.step = math.nan
        """δ."""
        self.restarts = 0
        """r, the number of restarts so far."""
        self.iterations = 0
        """k: completed iterations in this round."""
        self.best_iteration = 0
        """k': the iteration that found the round's best (0: none yet)."""
        self.failures = 0
        """Consecutive non-improving iterations."""
        self.last_shrink = 0
        """k at the incumbent's last shrink (0: none since it became the incumbent)."""
        self.shrink_divisor = 1.0
        """δ was divided by this at the last shrink (what ``cfo_expand`` undoes)."""
        self._moved = np.empty(0, bool)
        self._start: Point | None = None
        self._queued: list[tuple[int, np.ndarray]] = []
        self._pending: list[_Pending] = []
        self._seen = 0
        self._directions = 0

    # -- setup --------------------------------------------------------------------------------
    def _setup(self, ctx: ProposalContext) -> None:
        self.codec = ctx.codec
        layout = self.codec.layout
        self._moved = layout.numeric | layout.categorical
        self.d = int(self._moved.sum())
        self.step_init = self.c * math.sqrt(self.d)
        self.step = self.step_init
        self.low_cost_start = self._low_cost_start(ctx)
        self._begin_round(self.low_cost_start)

    def _low_cost_start(self, ctx: ProposalContext) -> Point:
        """x0: cheap ends where declared, ConfigSpace defaults elsewhere."""
        space, names, layout = self.codec.space, self.codec.names, self.codec.layout
        z = np.array([float(space[name].to_vector(space[name].default_value)) for name in names])
        choice = np.where(layout.categorical, z, 0.0)
        z[layout.categorical] = (choice[layout.categorical] + 0.5) / layout.n_choices[layout.categorical]
        cheap = {names.index(name): end for name, end in ctx.state.problem.cheap_end.items()}
        if self.random_start:
            free = self._moved & ~np.isin(np.arange(len(names)), list(cheap))
            draw = ctx.rng.random(len(names))
            z = np.where(free, draw, z)
            choice = np.where(free & layout.categorical, np.floor(draw * layout.n_choices), choice)
        for j, end in cheap.items():
            z[j] = 0.0 if end == "lower" else 1.0
        return self._project(z, choice, ctx.rng)

    def _project(self, z: np.ndarray, choice: np.ndarray, rng: np.random.Generator) -> Point:
        """Proj: clip, snap integers, apply conditions; ``z``/``choice`` take the repaired values where active."""
        cat = self.codec.layout.categorical
        z = np.clip(z, 0.0, 1.0)
        vector = self.codec.repair(np.where(cat, choice, z)[None], rng)[0]
        active = ~np.isnan(vector)
        return Point(np.where(active & ~cat, vector, z), np.where(active & cat, vector, choice), vector)

    def move(self, x: Point, step: np.ndarray, rng: np.random.Generator) -> Point:
        """Proj(x + step), categoricals re-drawn where their bucket changes."""
        z = np.clip(x.z + step, 0.0, 1.0)
        choice = x.choice.copy()
        layout = self.codec.layout
        for j in np.flatnonzero(layout.categorical):
            choice[j] = categorical_move(x.z[j], z[j], int(x.choice[j]), int(layout.n_choices[j]), rng)
        return self._project(z, choice, rng)

    def _direction(self, rng: np.random.Generator) -> np.ndarray:
        """u uniform on the unit sphere of the moved coordinates (zero elsewhere)."""
        g = rng.standard_normal(self.d)
        u = np.zeros(self.codec.dim)
        # The norm as a correctly rounded sum (math.fsum), not np.linalg.norm: that is BLAS's dot, whose
        # summation order (and use of FMA) depends on the CPU's kernel, so a direction's last bits did.
        u[self._moved] = g / math.sqrt(math.fsum(g * g))
        return u

    def _begin_round(self, start: Point) -> None:
        self._start = self.incumbent = start
        self.incumbent_loss = math.inf
        self.iterations = self.best_iteration = self.failures = self.last_shrink = 0
        self.shrink_divisor = 1.0
        self._queued = []

    # -- step-size rules ----------------------------------------------------------------------
    def step_lower(self) -> float:
        """δ_lower (Alg. 3) at the incumbent."""
        space, layout = self.codec.space, self.codec.layout
        units = []
        for j, name in enumerate(self.codec.names):
            hp = space[name]
            if layout.categorical[j]:
                units.append(1.0 / layout.n_choices[j])
            elif layout.integer[j] and hp.upper > hp.lower:
                if hp.log:
                    x = float(hp.to_value(np.array([self.incumbent.z[j]]))[0])
                    units.append(math.log1p(1.0 / x) / math.log(hp.upper / hp.lower))
                else:
                    units.append(1.0 / (hp.upper - hp.lower))
        return self.lower_scale * (self.step_init * min(units) if units else 0.01 * self.c)

    def patience(self) -> int:
        """Consecutive non-improving iterations before the step shrinks: ceil(b^(d−1))."""
        return math.ceil(self.patience_base ** (self.d - 1))

    def _count(self, completed: int, improved: bool, rng: np.random.Generator) -> None:
        """Alg. 2 lines 8-16 after ``completed`` iterations (one improving, if ``improved``)."""
        if completed == 0:
            return
        self.iterations += completed
        if improved:
            self.best_iteration, self.failures = self.iterations, 0
            if self.expand and self.last_shrink:
                self.step = min(self.step * self.shrink_divisor, math.sqrt(self.d))
            self.last_shrink, self.shrink_divisor = 0, 1.0
            return
        self.failures += completed
        self.best_iteration = self.best_iteration or 1
        patience = self.patience()
        if self.failures < patience:
            return
        if self.repeat_shrink:
            # FLAML: the next non-improving iteration shrinks again; factors telescope to √(k'/k).
            self.failures = patience - 1
            self.shrink_divisor = math.sqrt(self.iterations / (self.last_shrink or self.best_iteration))
        else:
            self.failures = 0
            self.shrink_divisor = math.sqrt(self.iterations / self.best_iteration)
        self.last_shrink = self.iterations
        self.step /= self.shrink_divisor
        if self.step <= self.step_lower():
            self.restarts += 1
            self.step = self.c * (self.restarts + math.sqrt(self.d))
            sd = self.restart_noise * self.c
            noise = np.where(self._moved, sd * rng.standard_normal(self.codec.dim), 0.0)
            self._begin_round(self.move(self.low_cost_start, noise, rng))

    # -- feedback -----------------------------------------------------------------------------
    def _learn(self, ctx: ProposalContext) -> None:
        """Read the losses of the previous proposals from the archive and update the search."""
        losses = ctx.archive.loss[self._seen:]
        self._seen += len(losses)
        batch, self._pending = self._pending[:len(losses)], []
        f = np.where(np.isnan(losses), np.inf, losses)
        if batch and batch[0].sign == 0:
            self._start, self.incumbent_loss = None, float(f[0])
            batch, f = batch[1:], f[1:]
        if not batch:
            return
        best = int(np.argmin(f))
        improved = bool(f[best] < self.incumbent_loss)
        directions = {p.direction for p in batch}
        if improved:
            self.incumbent, self.incumbent_loss = batch[best].point, float(f[best])
            self._queued = []
            completed = len(directions)
        else:
            minus_done = {p.direction for p in batch if p.sign < 0}
            open_ = [(p.direction, p.step) for p in batch if p.sign > 0 and p.direction not in minus_done]
            self._queued.extend(open_)
            completed = len(directions) - len(open_)
        self._count(completed, improved, ctx.rng)

    # -- proposals ----------------------------------------------------------------------------
    def propose(self, n: int, ctx: ProposalContext) -> np.ndarray:
        if self.codec is None:
            self._setup(ctx)
        self._learn(ctx)
        x, rng = self.incumbent, ctx.rng
        out: list[_Pending] = [_Pending(self._start)] if self._start is not None else []
        while self._queued and len(out) < n:
            direction, step = self._queued.pop(0)
            out.append(_Pending(self.move(x, -step, rng), direction, -1, step))
        while len(out) < n:
            step = self.step * self._direction(rng)
            self._directions += 1
            out.append(_Pending(self.move(x, step, rng), self._directions, 1, step))
            if len(out) < n:
                out.append(_Pending(self.move(x, -step, rng), self._directions, -1, step))
        self._pending = out
        return np.stack([p.point.vector for p in out])
