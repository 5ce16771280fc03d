"""The house has floors: every import points down the layers, and no module imports itself round a circle.

Layers, lowest first (CONTRIBUTING.md explains them):

    core        errors, budget, codec, archives, registry, benchmarks, store, study schema
    components  the building blocks (metaopt.components)
    spaces      the design space, presets, restrictions (metaopt.spaces)
    engine      the optimization loop, external peers, the trace, one run as a task
    analysis    figures, statistics and the report (metaopt.analysis): reads the store only,
                so it may import core and spaces, never the engine or a stage
    stages      optimize (meta), evaluate, ablate, the study pipeline, the Python API (minimize)
    cli         the command line and the performance harness (metaopt.bench)
    package     the package root ``metaopt`` itself: it re-exports the Python API (lazily), so it
                sits on top; every other module of the core is matched by its own name

Every import counts, also one inside a function: an import placed in a function to dodge a cycle
is still an arrow. The test reads the source (ast), so it sees modules that are never imported.
"""

from __future__ import annotations

import ast
import graphlib
from importlib.util import find_spec
from pathlib import Path

import pytest

ROOT = "metaopt"
"""The package root: matched only by its own name (not as a prefix of every module)."""
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("core", ("metaopt.errors", "metaopt.libm", "metaopt.budget", "metaopt.space_codec", "metaopt.archive",
              "metaopt.registry", "metaopt.benchmarks", "metaopt.store_utils", "metaopt.executor",
              "metaopt.smac_utils", "metaopt.features", "metaopt.references", "metaopt.context",
              "metaopt.run_io", "metaopt.meta_archive", "metaopt.study_spec", "metaopt.store")),
    ("components", ("metaopt.components",)),
    ("spaces", ("metaopt.spaces",)),
    ("engine", ("metaopt.loop", "metaopt.async_loop", "metaopt.simclock", "metaopt.peers", "metaopt.tasks",
                "metaopt.trace")),
    ("analysis", ("metaopt.analysis",)),
    ("stages", ("metaopt.meta", "metaopt.meta_search", "metaopt.evaluation", "metaopt.ablation", "metaopt.ablation_estimators",
                "metaopt.study", "metaopt.api")),
    ("cli", ("metaopt.cli", "metaopt.__main__", "metaopt.bench")),
    ("package", (ROOT,)),
]
NOT_FROM = {"analysis": {"engine"}}
"""Lower layers a layer must not import all the same: analysis reads the store, it does not run anything."""
OLD_ROOTS = ("components", "spaces", "analysis", "bench")
"""Top-level names the folders had before they were installed under metaopt (importing them is a bug)."""


def _modules() -> dict[str, Path]:
    """Every module of the installed package: dotted name -> source file (subpackages may live in
    other folders: pyproject.toml maps metaopt.components to components/, and so on)."""
    modules: dict[str, Path] = {}
    packages = ["metaopt", *(f"metaopt.{name}" for name in ("benchmarks", *OLD_ROOTS))]
    for package in packages:
        folder = Path(find_spec(package).origin).parent
        for path in folder.glob("*.py"):
            name = package if path.stem == "__init__" else f"{package}.{path.stem}"
            modules[name] = path
    return modules


MODULES = _modules()


def _layer(module: str) -> int:
    """Index in LAYERS of the layer holding ``module`` (the longest matching prefix decides)."""
    best, index = "", -1
    for k, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            covers = module == prefix or (prefix != ROOT and module.startswith(prefix + "."))
            if covers and len(prefix) > len(best):
                best, index = prefix, k
    return index


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, imported module) for every absolute import in the file, at any depth; ``from p import m``
    counts as importing module p.m when that is a module, else p."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                found.append((node.lineno, sub if sub in MODULES else node.module))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
    return found


def _arrows() -> list[tuple[str, int, str]]:
    """(importer, line, imported) for every import of one of our own modules."""
    return [(name, line, target) for name, path in MODULES.items() for line, target in _imports(path)
            if target in MODULES and target != name]


def test_every_module_has_a_layer():
    assert len(MODULES) > 50
    assert [name for name in MODULES if _layer(name) < 0] == []


def test_imports_point_down_the_layers():
    wrong = []
    for importer, line, target in _arrows():
        here, there = _layer(importer), _layer(target)
        if there > here or LAYERS[there][0] in NOT_FROM.get(LAYERS[here][0], set()):
            wrong.append(f"{MODULES[importer]}:{line}: {importer} ({LAYERS[here][0]}) imports {target} "
                         f"({LAYERS[there][0]})")
    assert wrong == []


def test_no_import_circles():
    graph: dict[str, set[str]] = {name: set() for name in MODULES}
    for importer, _, target in _arrows():
        graph[importer].add(target)
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as err:
        pytest.fail(f"import circle: {' -> '.join(err.args[1])}")


def test_folders_are_imported_under_metaopt_only():
    old = [f"{path}:{line}: import {target}" for name, path in MODULES.items() for line, target in _imports(path)
           if target.split(".")[0] in OLD_ROOTS]
    tests = Path(__file__).parent
    old += [f"{path}:{line}: import {target}" for path in sorted(tests.glob("*.py")) for line, target in _imports(path)
            if target.split(".")[0] in OLD_ROOTS]
    assert old == []


def test_the_check_can_fail():
    """The layer test sees an arrow that runs back up (a guard against a test that passes on nothing)."""
    assert _layer("metaopt.components.surrogates") < _layer("metaopt.loop")
    arrows = {(importer, target) for importer, _, target in _arrows()}
    assert ("metaopt.loop", "metaopt.components.filters") in arrows
    assert _layer("metaopt.analysis.report") > _layer("metaopt.loop") and "engine" in NOT_FROM["analysis"]
