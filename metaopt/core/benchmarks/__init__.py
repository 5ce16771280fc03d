"""Benchmarks by name: ``<kind>:<scenario>``, where each kind is registered with
:func:`register_benchmark`: ``yahpo:<scenario>`` (offline YAHPO Gym surrogates),
``synthetic:<family>``, ``live:<model>`` (scikit-learn models trained for real; slow, with
measured costs) and ``pooled:<benchmark>+<benchmark>+...`` (several scenarios' instances as one
benchmark, for a meta-optimization across scenarios: :mod:`metaopt.core.benchmarks.pooled`). Users add their own without editing metaopt (docs/python_api.md):
``python:package.module:factory`` calls ``factory()`` for the benchmark, and every entry point of
the group ``metaopt.benchmarks`` of an installed package adds a kind ``<entry point name>:<scenario>``
whose object is called as ``factory(scenario)``.

``get_benchmark`` is the one entry point; benchmarks are cached per (name, data directory) so a
process loads each surrogate once. A kind's module is imported only when one of its benchmarks is
loaded or listed (YAHPO and scikit-learn are slow to import).
"""

from __future__ import annotations

import functools
import importlib
import os
import sys
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import Callable

from metaopt.core.benchmarks.base import Benchmark, Evaluation, Fidelity, Problem, split_instances
from metaopt.core.errors import UsageError

__all__ = [
    "Benchmark",
    "Evaluation",
    "Fidelity",
    "Problem",
    "get_benchmark",
    "list_benchmark_names",
    "register_benchmark",
    "split_instances",
    "yahpo_data_dir",
]

YAHPO_ENV = "METAOPT_YAHPO_DATA"


def yahpo_data_dir(override: str | os.PathLike | None = None) -> Path | None:
    """The YAHPO data directory: the explicit ``override``, else ``$METAOPT_YAHPO_DATA``, else None."""
    value = override if override is not None else os.environ.get(YAHPO_ENV)
    return Path(value).expanduser().resolve() if value else None


BenchmarkFactory = Callable[[str, Path | None], Benchmark | None]
"""``factory(scenario, yahpo_data_dir)``: the benchmark, or None when ``scenario`` is not one of the kind's."""
ScenarioLister = Callable[[Path | None], list[str]]
"""``scenarios(yahpo_data_dir)``: the scenarios of the kind available (for listings and error messages)."""


@dataclass(frozen=True)
class BenchmarkKind:
    """A kind of benchmark: how to load ``<prefix>:<scenario>`` and which scenarios there are."""

    prefix: str
    factory: BenchmarkFactory
    scenarios: ScenarioLister


_KINDS: dict[str, BenchmarkKind] = {}


def register_benchmark(prefix: str, factory: BenchmarkFactory, scenarios: ScenarioLister) -> None:
    """Make the benchmarks ``<prefix>:<scenario>`` loadable by :func:`get_benchmark`.

    ``factory(scenario, data_dir)`` builds the benchmark (it may raise :class:`UsageError` with a
    better message, e.g. for a missing data directory) or returns None for a scenario that is not
    one of the kind's; ``scenarios(data_dir)`` lists the available ones. Kinds are listed in the
    order they were registered.
    """
    if prefix in _KINDS:
        raise ValueError(f"benchmark kind {prefix!r} is registered twice")
    _KINDS[prefix] = BenchmarkKind(prefix, factory, scenarios)


def list_benchmark_names(data_dir: str | os.PathLike | None = None) -> list[str]:
    """Every benchmark name available: synthetic families, live models, plus YAHPO scenarios found in the data dir."""
    path = yahpo_data_dir(data_dir)
    return [f"{kind.prefix}:{scenario}" for kind in _KINDS.values() for scenario in kind.scenarios(path)]


def get_benchmark(name: str, data_dir: str | os.PathLike | None = None) -> Benchmark:
    """Load a benchmark by name. Unknown names fail with the list of known ones."""
    path = yahpo_data_dir(data_dir)
    return _load(name, str(path) if path else None)


@functools.lru_cache(maxsize=32)
def _load(name: str, data_dir: str | None) -> Benchmark:
    prefix, _, scenario = name.partition(":")
    kind = _KINDS.get(prefix)
    benchmark = kind.factory(scenario, Path(data_dir) if data_dir else None) if kind else None
    if benchmark is not None:
        return benchmark
    known = list_benchmark_names(data_dir)
    raise UsageError(f"unknown benchmark {name!r}; known benchmarks: {', '.join(known)}"
                     + ("" if data_dir else f" (set {YAHPO_ENV} to add yahpo:<scenario>)"))


# -- the built-in kinds, in the order `metaopt benchmark list` shows them -------------------------

def _synthetic(scenario: str, data_dir: Path | None) -> Benchmark | None:
    from metaopt.core.benchmarks import synthetic

    return synthetic.SyntheticBenchmark(scenario) if scenario in synthetic.FAMILIES else None


def _synthetic_scenarios(data_dir: Path | None) -> list[str]:
    from metaopt.core.benchmarks import synthetic

    return list(synthetic.FAMILIES)


def _functions(scenario: str, data_dir: Path | None) -> Benchmark | None:
    from metaopt.core.benchmarks.classic_functions import ClassicFunctionsBenchmark

    return ClassicFunctionsBenchmark() if scenario == "classic4" else None


def _functions_scenarios(data_dir: Path | None) -> list[str]:
    return ["classic4"]


def _live(scenario: str, data_dir: Path | None) -> Benchmark | None:
    if not scenario:
        return None
    from metaopt.core.benchmarks import live

    return live.LiveBenchmark(scenario)  # unknown models fail there, with the known ones listed


def _live_scenarios(data_dir: Path | None) -> list[str]:
    from metaopt.core.benchmarks import live

    return list(live.MODELS)


def _yahpo(scenario: str, data_dir: Path | None) -> Benchmark | None:
    if not scenario:
        return None
    from metaopt.core.benchmarks import yahpo

    if data_dir is None:
        raise UsageError(
            f"benchmark yahpo:{scenario} needs the YAHPO data directory: set {YAHPO_ENV} or pass --yahpo-data PATH"
        )
    return yahpo.YahpoBenchmark(scenario, data_dir)


def _yahpo_scenarios(data_dir: Path | None) -> list[str]:
    if data_dir is None:
        return []
    from metaopt.core.benchmarks import yahpo

    return list(yahpo.available_scenarios(data_dir))


def _checked(benchmark: object, spec: str) -> Benchmark:
    """``benchmark`` if it is a Benchmark (named ``spec`` unless it has a name); UsageError otherwise."""
    if not isinstance(benchmark, Benchmark):
        raise UsageError(f"benchmark {spec!r}: the factory returned a {type(benchmark).__name__}, "
                         "not a metaopt.core.benchmarks.Benchmark (see docs/python_api.md)")
    if not getattr(benchmark, "name", None):
        benchmark.name = spec
    return benchmark


def _python(scenario: str, data_dir: Path | None) -> Benchmark | None:
    """``python:package.module:factory``: import the module (the current directory is searched too,
    as ``python -m`` would) and call ``factory()``, which must return a Benchmark (UsageError otherwise).

    This runs the module's code, with the user's rights: a study file naming one is trusted code, like
    a Makefile (README.md, studies/README.md). Readers of stored results (``metaopt report``) never
    load the benchmark."""
    spec = f"python:{scenario}"
    module_name, _, attribute = scenario.partition(":")
    if not module_name or not attribute:
        raise UsageError(f"benchmark {spec!r}: expected python:package.module:factory")
    if os.getcwd() not in sys.path:
        sys.path.append(os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise UsageError(f"benchmark {spec!r}: cannot import module {module_name!r} ({err})") from None
    factory = getattr(module, attribute, None)
    if not callable(factory):
        raise UsageError(f"benchmark {spec!r}: module {module_name!r} has no callable {attribute!r}")
    try:
        benchmark = factory()
    except SystemExit as err:  # e.g. python:sys:exit; a study file runs code like a Makefile (README)
        raise UsageError(f"benchmark {spec!r}: the factory exited (status {err.code!r}) instead of returning a "
                         "metaopt.core.benchmarks.Benchmark") from None
    return _checked(benchmark, spec)


def _pooled(scenario: str, data_dir: Path | None) -> Benchmark | None:
    """``pooled:yahpo:lcbench+yahpo:rbv2_xgboost``: the member benchmarks, each loaded by its name."""
    if not scenario:
        return None
    from metaopt.core.benchmarks.pooled import PooledBenchmark

    return PooledBenchmark([_load(name.strip(), str(data_dir) if data_dir else None) for name in scenario.split("+")])


def _full(scenario: str, data_dir: Path | None) -> Benchmark | None:
    """``full:synthetic:mlp``: the member benchmark at its full fidelity only (a problem without a fidelity)."""
    if not scenario:
        return None
    from metaopt.core.benchmarks.full_fidelity import FullFidelityBenchmark

    return FullFidelityBenchmark(_load(scenario, str(data_dir) if data_dir else None))


def _no_scenarios(data_dir: Path | None) -> list[str]:
    return []


def _entry_point_kind(entry_point: EntryPoint) -> None:
    """Register the kind an installed package declares in the entry-point group ``metaopt.benchmarks``."""
    prefix = entry_point.name

    def factory(scenario: str, data_dir: Path | None) -> Benchmark | None:
        make = entry_point.load()
        return _checked(make(scenario), f"{prefix}:{scenario}") if scenario else None

    def scenarios(data_dir: Path | None) -> list[str]:
        listed = getattr(entry_point.load(), "scenarios", [])
        return list(listed() if callable(listed) else listed)

    register_benchmark(prefix, factory, scenarios)


register_benchmark("synthetic", _synthetic, _synthetic_scenarios)
register_benchmark("functions", _functions, _functions_scenarios)
register_benchmark("live", _live, _live_scenarios)
register_benchmark("yahpo", _yahpo, _yahpo_scenarios)
register_benchmark("python", _python, _no_scenarios)
register_benchmark("pooled", _pooled, _no_scenarios)
register_benchmark("full", _full, _no_scenarios)
for _entry_point in entry_points(group="metaopt.benchmarks"):
    if _entry_point.name not in _KINDS:  # a built-in kind is never replaced
        _entry_point_kind(_entry_point)
