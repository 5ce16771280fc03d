"""Per-instance regret references (y_min, y_max) and normalized regret (DESIGN.md §4).

y_max is the median loss of random full-fidelity configurations; y_min the best loss known:
the smaller of the benchmark's own best-known value (e.g. an analytic optimum) and the best of
the random sample. Both come from a fixed-seed sample of ``SAMPLE_SIZE`` configurations, computed
once per (benchmark, instance) and cached on disk as a small JSON file (written atomically), so
every run and every process normalizes against the same numbers.

The cache lives in ``$METAOPT_CACHE_DIR`` (default ``~/.cache/metaopt``).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from metaopt.benchmarks.base import Benchmark
from metaopt.space_codec import SpaceCodec
from metaopt.store_utils import atomic_write_text

SAMPLE_SIZE = 10_000
SAMPLE_SEED = 20240601
METHOD_VERSION = 1
BATCH = 2_000


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


def _cache_path(benchmark: Benchmark, instance: str) -> Path:
    safe = lambda s: re.sub(r"[^A-Za-z0-9_.-]+", "_", s)  # noqa: E731
    return (cache_dir() / f"references-v{METHOD_VERSION}" / safe(benchmark.fingerprint()) / f"{safe(instance)}.json")


def compute_reference(benchmark: Benchmark, instance: str, n: int = SAMPLE_SIZE) -> Reference:
    """Evaluate ``n`` fixed-seed random configurations at full fidelity; derive y_min and y_max."""
    codec = SpaceCodec(benchmark.search_space)
    rng = np.random.default_rng([SAMPLE_SEED, n])
    losses = []
    for start in range(0, n, BATCH):
        X = codec.sample_uniform(min(BATCH, n - start), rng)
        ev = benchmark.evaluate(instance, codec.to_dicts(X), np.full(len(X), benchmark.fidelity.r_max))
        losses.append(np.asarray(ev.loss, dtype=float))
    loss = np.concatenate(losses)
    loss = loss[np.isfinite(loss)]
    y_max = float(np.median(loss))
    y_min = float(loss.min())
    source = f"median / min of {len(loss)} random full-fidelity configurations"
    known = benchmark.best_known(instance)
    if known is not None and known < y_min:
        y_min, source = float(known), source + "; y_min = the benchmark's known optimum"
    return Reference(y_min, y_max, len(loss), source)


def get_reference(benchmark: Benchmark, instance: str) -> Reference:
    """The cached reference of an instance, computed on first use."""
    path = _cache_path(benchmark, str(instance))
    if path.exists():
        try:
            return Reference(**json.loads(path.read_text()))
        except (ValueError, TypeError):
            pass  # a corrupt cache file is recomputed and replaced
    ref = compute_reference(benchmark, str(instance))
    atomic_write_text(path, json.dumps(asdict(ref), indent=1))
    return ref
