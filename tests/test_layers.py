"""The house has floors: the folders are the layers, every import points down them, and no module
imports itself round a circle.

Layers, lowest first (the table in CONTRIBUTING.md is compared with ``LAYERS`` below):

    core        metaopt/core/: errors, budget, codec, archive, registry, executor, file helpers, the
                benchmarks (metaopt/core/benchmarks/) and their regret references
    store       metaopt/store/: the study schema, one run's files, a study's output folder, the meta-archive
    components  components/ (metaopt.components): the building blocks
    spaces      spaces/ (metaopt.spaces): the design space, presets, restrictions
    engine      metaopt/engine/: the optimization loop, external peers, the trace, one run as a task
    analysis    analysis/ (metaopt.analysis): figures, statistics and the report; reads the store only,
                so it never imports the engine
    stages      metaopt/stages/: optimize (meta), evaluate, ablate, the study pipeline, the Python API
    cli         metaopt/cli.py, metaopt/__main__.py and bench/ (metaopt.bench, the performance harness)
    package     the package root ``metaopt`` itself: it re-exports the Python API (lazily), so it sits on
                top; it is matched by its own name only, not as a prefix of every module

A layer is a set of dotted prefixes (folders, or single modules for the cli); the longest prefix
that covers a module decides its layer, so a new file in a layer's folder, at any depth, is in that
layer without editing this test. Every import counts, also one inside a function, and so does
``importlib.import_module`` with a literal, a module constant or an f-string starting with a
module name: an import placed in a function to dodge a cycle is still an arrow. The test reads the
source (ast), so it sees modules that are never imported.
"""

from __future__ import annotations

import ast
import graphlib
import re
from importlib.util import find_spec
from pathlib import Path

import pytest

ROOT = "metaopt"
"""The package root: matched only by its own name (not as a prefix of every module)."""
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("core", ("metaopt.core",)),
    ("store", ("metaopt.store",)),
    ("components", ("metaopt.components",)),
    ("spaces", ("metaopt.spaces",)),
    ("engine", ("metaopt.engine",)),
    ("analysis", ("metaopt.analysis",)),
    ("stages", ("metaopt.stages",)),
    ("cli", ("metaopt.cli", "metaopt.__main__", "metaopt.bench")),
    ("package", (ROOT,)),
]
NOT_FROM = {"analysis": {"engine"}}
"""Lower layers a layer must not import all the same: analysis reads the store, it does not run anything."""
PLUGIN_ARROWS = {("metaopt.core.registry", "metaopt.components"):
                 "load_components() imports every public module of the components package by name, so that "
                 "the registry knows every component; it names the package only, never one module"}
"""The arrows that point up on purpose, each with its reason (an arrow found and not listed fails)."""
OLD_ROOTS = ("components", "spaces", "analysis", "bench")
"""Top-level names the folders had before they were installed under metaopt (importing them is a bug)."""
REPO = Path(__file__).resolve().parents[1]


def _package_folders() -> dict[str, Path]:
    """Dotted package -> folder for the package root and every folder pyproject.toml maps into it."""
    return {name: Path(find_spec(name).origin).parent for name in (ROOT, *(f"{ROOT}.{old}" for old in OLD_ROOTS))}


def _modules() -> dict[str, Path]:
    """Every module of the installed package, found recursively: dotted name -> source file."""
    modules: dict[str, Path] = {}
    for package, folder in _package_folders().items():
        for path in sorted(folder.rglob("*.py")):
            parts = path.relative_to(folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            if package == ROOT and parts and parts[0] in OLD_ROOTS:
                continue  # a mapped folder linked into metaopt/ (its own entry finds it)
            modules[".".join((package, *parts))] = path
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


def _constants(tree: ast.Module) -> dict[str, str]:
    """Module-level ``NAME = "string"`` assignments (how a module may spell a package name once)."""
    found = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            found.update({target.id: node.value.value for target in node.targets if isinstance(target, ast.Name)})
    return found


def _dynamic_name(node: ast.expr, constants: dict[str, str]) -> str | None:
    """The module an ``import_module`` argument names, as far as the source says: a literal, a module
    constant, or the part of an f-string before its first ``.{...}`` (the package it imports from)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name):
        return constants.get(node.id)
    if isinstance(node, ast.JoinedStr) and node.values:
        first = node.values[0]
        if isinstance(first, ast.FormattedValue):
            return _dynamic_name(first.value, constants)
        if isinstance(first, ast.Constant):
            return str(first.value).rstrip(".")
    return None


def _is_import_module(call: ast.Call) -> bool:
    func = call.func
    return ((isinstance(func, ast.Attribute) and func.attr == "import_module")
            or (isinstance(func, ast.Name) and func.id in ("import_module", "__import__")))


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, imported module) for every absolute import in the file, at any depth, and every
    ``importlib.import_module`` whose module name the source spells; ``from p import m`` counts as
    importing module p.m when that is a module, else p."""
    tree = ast.parse(path.read_text())
    constants = _constants(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                found.append((node.lineno, sub if sub in MODULES else node.module))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.Call) and _is_import_module(node) and node.args:
            name = _dynamic_name(node.args[0], constants)
            if name:
                found.append((node.lineno, name))
    return found


def _arrows() -> list[tuple[str, int, str]]:
    """(importer, line, imported) for every import of one of our own modules."""
    return [(name, line, target) for name, path in MODULES.items() for line, target in _imports(path)
            if target in MODULES and target != name]


def test_every_module_has_a_layer():
    assert len(MODULES) > 80
    assert [name for name in MODULES if _layer(name) < 0] == []


def test_the_folders_of_metaopt_are_the_layers():
    """metaopt/ holds one folder per layer of its own (core, store, engine, stages) and, beside them,
    only the modules of the top layers: the package root, the cli and ``python -m metaopt``."""
    folder = Path(find_spec(ROOT).origin).parent
    assert {path.stem for path in folder.glob("*.py")} == {"__init__", "cli", "__main__"}
    subpackages = {path.name for path in folder.iterdir() if (path / "__init__.py").exists()}
    assert subpackages == {name for name, prefixes in LAYERS if prefixes == (f"{ROOT}.{name}",) and name not in OLD_ROOTS}


def test_imports_point_down_the_layers():
    wrong = []
    for importer, line, target in _arrows():
        here, there = _layer(importer), _layer(target)
        up = there > here or LAYERS[there][0] in NOT_FROM.get(LAYERS[here][0], set())
        if up and (importer, target) not in PLUGIN_ARROWS:
            wrong.append(f"{MODULES[importer]}:{line}: {importer} ({LAYERS[here][0]}) imports {target} "
                         f"({LAYERS[there][0]})")
    assert wrong == []


def test_the_arrows_that_point_up_on_purpose_exist():
    """Each listed plug-in arrow is still there and still points up (else the list is stale)."""
    arrows = {(importer, target) for importer, _, target in _arrows()}
    for importer, target in PLUGIN_ARROWS:
        assert (importer, target) in arrows
        assert _layer(target) > _layer(importer)


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
    old += [f"{path}:{line}: import {target}" for path in sorted(tests.rglob("*.py")) for line, target in _imports(path)
            if target.split(".")[0] in OLD_ROOTS]
    assert old == []


def _contributing_table() -> list[tuple[str, tuple[str, ...], str]]:
    """The layer table of CONTRIBUTING.md: (layer, imported-as prefixes, may import) per row."""
    text = (REPO / "CONTRIBUTING.md").read_text()
    head = "| layer | folders | imported as | may import |"
    assert head in text, "CONTRIBUTING.md has no layer table"
    rows = []
    for line in text.split(head, 1)[1].splitlines()[2:]:
        if not line.startswith("|"):
            break
        layer, _, imported, may = (cell.strip() for cell in line.strip("|").split("|"))
        rows.append((layer, tuple(re.findall(r"`([\w.]+)`", imported)), may))
    return rows


def _may_import(k: int) -> str:
    """What CONTRIBUTING's last column says layer k may import: the layers below, less NOT_FROM."""
    name = LAYERS[k][0]
    below = [lower for lower, _ in LAYERS[:k] if lower not in NOT_FROM.get(name, set())]
    text = ", ".join(below) or "—"
    if name in NOT_FROM:
        text += "; not " + ", ".join(sorted(NOT_FROM[name]))
    return text


def test_contributing_lists_the_layers_of_this_test():
    """CONTRIBUTING.md's layer table is this test's LAYERS, row by row, with what each may import."""
    expected = [(name, prefixes, _may_import(k)) for k, (name, prefixes) in enumerate(LAYERS)]
    assert _contributing_table() == expected


def test_the_check_can_fail():
    """The layer test sees an arrow that runs back up (a guard against a test that passes on nothing),
    the nested modules and the arrows of import_module."""
    assert _layer("metaopt.components.surrogates") < _layer("metaopt.engine.loop")
    arrows = {(importer, target) for importer, _, target in _arrows()}
    assert ("metaopt.engine.loop", "metaopt.components.filters") in arrows
    assert _layer("metaopt.analysis.report") > _layer("metaopt.engine.loop") and "engine" in NOT_FROM["analysis"]
    assert "metaopt.core.benchmarks.yahpo" in MODULES  # two folders deep
    assert ("metaopt.core.registry", "metaopt.components") in arrows  # import_module(COMPONENT_PACKAGE)
    tree = ast.parse('P = "metaopt.x"\nimport importlib\nimportlib.import_module(f"{P}.{n}")\n'
                     'importlib.import_module(f"metaopt.y.{n}")\nimportlib.import_module("metaopt.z")')
    calls = [node for node in ast.walk(tree) if isinstance(node, ast.Call) and _is_import_module(node)]
    assert [_dynamic_name(call.args[0], _constants(tree)) for call in calls] == ["metaopt.x", "metaopt.y", "metaopt.z"]
    assert _may_import(len(LAYERS) - 1).startswith("core, store, components")
