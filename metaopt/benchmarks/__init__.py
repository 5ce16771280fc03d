"""Benchmarks by name: ``yahpo:<scenario>`` (offline YAHPO Gym surrogates), ``synthetic:<family>``
and ``live:<model>`` (scikit-learn models trained for real; slow, with measured costs).

``get_benchmark`` is the one entry point; benchmarks are cached per (name, data directory) so a
process loads each surrogate once.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

from metaopt.benchmarks.base import Benchmark, Evaluation, Fidelity, Problem, split_instances
from metaopt.errors import UsageError

__all__ = [
    "Benchmark",
    "Evaluation",
    "Fidelity",
    "Problem",
    "get_benchmark",
    "list_benchmark_names",
    "split_instances",
    "yahpo_data_dir",
]

YAHPO_ENV = "METAOPT_YAHPO_DATA"


def yahpo_data_dir(override: str | os.PathLike | None = None) -> Path | None:
    """The YAHPO data directory: the explicit ``override``, else ``$METAOPT_YAHPO_DATA``, else None."""
    value = override if override is not None else os.environ.get(YAHPO_ENV)
    return Path(value).expanduser().resolve() if value else None


def list_benchmark_names(data_dir: str | os.PathLike | None = None) -> list[str]:
    """Every benchmark name available: synthetic families, live models, plus YAHPO scenarios found in the data dir."""
    from metaopt.benchmarks import live, synthetic

    names = [f"synthetic:{f}" for f in synthetic.FAMILIES] + [f"live:{m}" for m in live.MODELS]
    path = yahpo_data_dir(data_dir)
    if path is not None:
        from metaopt.benchmarks import yahpo

        names += [f"yahpo:{s}" for s in yahpo.available_scenarios(path)]
    return names


def get_benchmark(name: str, data_dir: str | os.PathLike | None = None) -> Benchmark:
    """Load a benchmark by name. Unknown names fail with the list of known ones."""
    path = yahpo_data_dir(data_dir)
    return _load(name, str(path) if path else None)


@functools.lru_cache(maxsize=32)
def _load(name: str, data_dir: str | None) -> Benchmark:
    from metaopt.benchmarks import synthetic

    kind, _, scenario = name.partition(":")
    if kind == "synthetic" and scenario in synthetic.FAMILIES:
        return synthetic.SyntheticBenchmark(scenario)
    if kind == "live" and scenario:
        from metaopt.benchmarks import live

        return live.LiveBenchmark(scenario)
    if kind == "yahpo" and scenario:
        from metaopt.benchmarks import yahpo

        if data_dir is None:
            raise UsageError(
                f"benchmark {name} needs the YAHPO data directory: set {YAHPO_ENV} or pass --yahpo-data PATH"
            )
        return yahpo.YahpoBenchmark(scenario, Path(data_dir))
    known = list_benchmark_names(data_dir)
    raise UsageError(f"unknown benchmark {name!r}; known benchmarks: {', '.join(known)}"
                     + ("" if data_dir else f" (set {YAHPO_ENV} to add yahpo:<scenario>)"))
