"""Per-instance regret references (y_min, y_max) and normalized regret (docs/design.md §4).

y_max is the median loss of ``SAMPLE_SIZE`` fixed-seed random full-fidelity configurations.
y_min is the best loss known: the smallest of the benchmark's own best-known value (e.g. an
analytic optimum), the random sample, and a local refinement of the sample's best points (an
evolution strategy in the vector space: Gaussian steps on numeric hyperparameters, random
re-draws of categorical ones, ``REFINE_ROUNDS`` rounds with shrinking steps). A random sample
alone is a weak y_min: model-based optimizers beat it within 30·d evaluations, which made their
normalized regret negative. Both numbers are computed once per (benchmark, instance) and cached
on disk as a small JSON file (written atomically), so every run and every process normalizes
against the same numbers.

A cache file is keyed by everything the numbers depend on (:func:`cache_key`: the benchmark's
fingerprint, which covers its version, data and, for a user's benchmark, the code defining it; the
search space; the fidelity; the instance; the method), so a changed benchmark never reads stale
references. A cached or computed reference is checked (:func:`check_reference`: finite, y_min <
y_max); a damaged cache file is computed again with a warning line, a computed one that fails the
check is a one-line error.

The cache lives in ``$METAOPT_CACHE_DIR`` (default ``~/.cache/metaopt``).
"""

from __future__ import annotations

import json
import math
import os
import re
import sys
from dataclasses import asdict, dataclass
from typing import overload
from pathlib import Path

import numpy as np

from metaopt.core.benchmarks.base import Benchmark, Problem
from metaopt.core.budget import Budget
from metaopt.core.space_codec import SpaceCodec
from metaopt.core.errors import UsageError
from metaopt.core.store_utils import atomic_write_text, file_digest

SAMPLE_SIZE = 10_000
SAMPLE_SEED = 20240601
METHOD_VERSION = 2
BATCH = 2_000
REFINE_ROUNDS = 40
REFINE_PARENTS = 16
REFINE_CHILDREN = 16


@dataclass(frozen=True)
class Reference:
    """y_min / y_max of one instance; ``normalize`` maps losses to normalized regret."""

    y_min: float
    y_max: float
    n_samples: int = 0
    source: str = ""

    def normalize(self, loss: np.ndarray | float) -> np.ndarray | float:
        """(loss − y_min) / (y_max − y_min). Negative when a run beats the best known loss."""
        span = self.y_max - self.y_min
        return (np.asarray(loss, dtype=float) - self.y_min) / (span if span > 0 else 1.0)


def cache_dir() -> Path:
    return Path(os.environ.get("METAOPT_CACHE_DIR", Path.home() / ".cache" / "metaopt")).expanduser()


def cache_key(benchmark: Benchmark, instance: str) -> dict[str, object]:
    """Everything an instance's cached reference and typical cost depend on: the benchmark's
    fingerprint (kind, version, data, a user's code: :meth:`Benchmark.fingerprint`), its search space
    and fidelity, the instance, the sample sizes and this module's method version."""
    return {"fingerprint": benchmark.fingerprint(), "space": str(benchmark.search_space),
            "fidelity": repr(benchmark.fidelity), "instance": instance, "samples": benchmark.reference_samples,
            "refine_rounds": benchmark.reference_refine_rounds, "method": METHOD_VERSION}


def _cache_path(benchmark: Benchmark, instance: str) -> Path:
    """``<cache>/references-v<method>/<benchmark>/<instance>-<digest of cache_key>.json``: a change of
    anything the reference depends on gives another file (a stale one is never read)."""
    safe = lambda s: re.sub(r"[^A-Za-z0-9_.-]+", "_", s)  # noqa: E731
    key = file_digest(json.dumps(cache_key(benchmark, instance), sort_keys=True).encode())[:16]
    return cache_dir() / f"references-v{METHOD_VERSION}" / safe(benchmark.name) / f"{safe(instance)}-{key}.json"


def check_reference(ref: Reference, what: str) -> Reference:
    """``ref`` if y_min and y_max are finite and y_min < y_max; else a UsageError naming ``what`` (without
    that, normalized regret would be NaN, infinite or of the wrong sign). Called on every reference
    read from the cache or computed."""
    if not (math.isfinite(ref.y_min) and math.isfinite(ref.y_max) and ref.y_min < ref.y_max):
        raise UsageError(f"{what}: regret references y_min = {ref.y_min}, y_max = {ref.y_max} are not finite "
                         "numbers with y_min < y_max, so normalized regret is undefined")
    return ref


def compute_reference(benchmark: Benchmark, instance: str, n: int | None = None) -> Reference:
    """Evaluate ``n`` fixed-seed random configurations at full fidelity; derive y_min and y_max.

    ``n`` defaults to the benchmark's ``reference_samples`` (SAMPLE_SIZE for surrogate and
    synthetic benchmarks; live benchmarks that really train models ask for far fewer and skip
    the refinement, so their y_min is only the best of a small sample).
    """
    n = n or benchmark.reference_samples
    rounds = benchmark.reference_refine_rounds
    codec = SpaceCodec(benchmark.search_space)
    rng = np.random.default_rng([SAMPLE_SEED, n])

    def evaluate(X: np.ndarray) -> np.ndarray:
        ev = benchmark.evaluate(instance, codec.to_dicts(X), np.full(len(X), benchmark.fidelity.r_max))
        return np.where(np.isfinite(ev.loss), np.asarray(ev.loss, dtype=float), np.inf)

    X = np.concatenate([codec.sample_uniform(min(BATCH, n - start), rng) for start in range(0, n, BATCH)])
    loss = np.concatenate([evaluate(X[start:start + BATCH]) for start in range(0, n, BATCH)])
    finite = loss[np.isfinite(loss)]
    if not len(finite):
        raise UsageError(f"{benchmark.name} instance {instance}: none of {len(loss)} random configurations has a "
                         "finite loss at full fidelity; regret references cannot be computed")
    y_max = float(np.median(finite))
    refined = _refine(codec, evaluate, X, loss, rng, rounds) if rounds else np.inf
    y_min = float(min(finite.min(), refined))
    source = (f"y_max: median of {len(finite)} random full-fidelity configurations; y_min: best of those"
              + (f" and of a {rounds}-round local refinement" if rounds else ""))
    known = benchmark.best_known(instance)
    if known is not None and known < y_min:
        y_min, source = float(known), source + "; y_min = the benchmark's known optimum"
    return Reference(y_min, y_max, len(loss), source)


def _refine(codec: SpaceCodec, evaluate, X: np.ndarray, loss: np.ndarray, rng: np.random.Generator,
            rounds: int = REFINE_ROUNDS) -> float:
    """A (μ + λ) evolution strategy from the best sampled points; returns the best loss found.

    Written here rather than taken from a library because it must work on ConfigSpace vectors
    with categoricals and conditions (``SpaceCodec.repair`` keeps every child valid) and evaluate
    whole generations in one batched benchmark call.
    """
    layout = codec.layout
    order = np.argsort(loss, kind="stable")[:REFINE_PARENTS]
    parents, parent_loss = X[order], loss[order]
    for round_ in range(rounds):
        sigma = 0.1 * (0.05 ** (round_ / max(rounds - 1, 1)))  # 0.1 -> 0.005
        children = np.repeat(parents, REFINE_CHILDREN, axis=0)
        noise = rng.normal(0.0, sigma, children.shape)
        children[:, layout.numeric] += noise[:, layout.numeric]
        redraw = layout.categorical & (rng.random(children.shape) < 0.1)
        children[redraw] = np.floor(rng.random(children.shape) * np.maximum(layout.n_choices, 1))[redraw]
        children = codec.repair(children, rng)
        child_loss = evaluate(children)
        pool = np.concatenate([parents, children])
        pool_loss = np.concatenate([parent_loss, child_loss])
        best = np.argsort(pool_loss, kind="stable")[:REFINE_PARENTS]
        parents, parent_loss = pool[best], pool_loss[best]
    return float(parent_loss.min())


def get_reference(benchmark: Benchmark, instance: str) -> Reference:
    """The cached reference of an instance, computed on first use (a pooled benchmark's instance
    shares its member scenario's reference)."""
    benchmark, instance = benchmark.owner(instance)
    path = _cache_path(benchmark, str(instance))
    if path.exists():
        try:
            return check_reference(Reference(**json.loads(path.read_text())), str(path))
        except (ValueError, TypeError, UsageError) as err:  # a damaged cache file is recomputed and replaced
            print(f"metaopt: warning: {err if isinstance(err, UsageError) else f'{path}: not a reference'}; "
                  "computing it again", file=sys.stderr)
    ref = check_reference(compute_reference(benchmark, str(instance)), f"{benchmark.name} instance {instance}")
    atomic_write_text(path, json.dumps(asdict(ref), indent=1))
    return ref


TYPICAL_COST_SAMPLES = 1000
"""Random full-fidelity configurations behind an instance's typical evaluation cost."""


def typical_cost(benchmark: Benchmark, instance: str) -> float:
    """Median cost of fixed-seed random full-fidelity evaluations of the instance (cached on disk).

    The yardstick of typical-cost budgets (``30dc``): comparisons under equal cost across instances
    whose costs differ by orders of magnitude. Live benchmarks use their (small) ``reference_samples``.
    """
    path = _cache_path(benchmark, str(instance)).with_suffix(".typical_cost.json")
    if path.exists():
        try:
            value = float(json.loads(path.read_text())["typical_cost"])
            if math.isfinite(value) and value > 0:
                return value
        except (ValueError, KeyError, TypeError):
            pass  # a damaged cache file is recomputed and replaced
    n = min(TYPICAL_COST_SAMPLES, benchmark.reference_samples)
    codec = SpaceCodec(benchmark.search_space)
    X = codec.sample_uniform(n, np.random.default_rng([SAMPLE_SEED, n, 1]))
    cost = benchmark.evaluate(str(instance), codec.to_dicts(X), np.full(n, benchmark.fidelity.r_max)).cost
    value = float(np.median(np.asarray(cost, dtype=float)))
    if not (math.isfinite(value) and value > 0):
        raise UsageError(f"{benchmark.name} instance {instance}: the typical cost of a full evaluation is {value}; "
                         "a typical-cost budget needs a positive, finite one (use 'Nd', 'N' or 'Ns')")
    atomic_write_text(path, json.dumps({"typical_cost": value, "samples": n}, indent=1))
    return value


def resolve_budget(budget: Budget | str | float, problem: Problem) -> Budget:
    """The budget of a run on ``problem``, from a :class:`Budget` or a spec such as ``"30d"``
    (:meth:`Budget.parse` with the problem's dimension d).

    Called by :func:`metaopt.engine.loop.run` and :func:`metaopt.engine.peers.run_peer` before a run starts; returns
    a budget in full evaluations or cost units: a typical-cost budget becomes a cost budget of that
    instance (its typical full-evaluation cost, :func:`typical_cost`, times the amount).
    """
    budget = Budget.parse(budget, problem.d)  # a per-hyperparameter budget becomes this problem's
    if budget.unit != "typical_cost":
        return budget
    return budget.in_cost_units(typical_cost(problem.benchmark, problem.instance))


@overload
def resolve_time_limit(limit: None, problem: Problem) -> None: ...
@overload
def resolve_time_limit(limit: float | Budget, problem: Problem) -> float: ...
def resolve_time_limit(limit: float | Budget | None, problem: Problem) -> float | None:
    """A simulated-clock time limit on ``problem`` in simulated seconds: ``limit`` as it is if seconds,
    a typical-cost budget (``10dc``, ``100c``: a clock's ``time_limit``) resolved on this instance
    (:func:`resolve_budget`); None: no limit. Called by :func:`metaopt.engine.tasks.execute` before a
    run on the clock and by the optimize stage for ``meta.clock`` (whose objective reads each run at it)."""
    if limit is None:
        return None
    return resolve_budget(limit, problem).amount if isinstance(limit, Budget) else float(limit)
