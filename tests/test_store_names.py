"""The store owns every file name of a study's output folder and of a run's folder: no module outside
``metaopt/store/`` spells one of them, it asks the store (``StudyStore``, ``run_io``) for the path.

The names are collected from the store's own source (every string literal that is a file name, such
as ``"table.csv"`` or ``"gamma_star.json"``), so a name the store gains is guarded without editing
this test. Elsewhere, a string literal without white space (a name or a path, also a piece of an
f-string) may not contain one; prose that mentions a file (a docstring, a help text, an error
message with spaces) may.
"""

from __future__ import annotations

import ast
import re
from importlib.util import find_spec
from pathlib import Path

STORE_PACKAGE = "metaopt.store"
FILE_NAME = re.compile(r"^[\w.-]+\.(csv|json|jsonl|md|png|html|yaml|gz)$")
PACKAGES = ("metaopt", "metaopt.components", "metaopt.spaces", "metaopt.analysis", "metaopt.bench")


def _sources() -> dict[Path, bool]:
    """Every module file of the installed package -> whether it is in the store layer."""
    store = Path(find_spec(STORE_PACKAGE).origin).parent.resolve()
    found: dict[Path, bool] = {}
    for package in PACKAGES:
        for path in Path(find_spec(package).origin).parent.rglob("*.py"):
            found[path.resolve()] = path.resolve().is_relative_to(store)
    return found


def _literals(source: str) -> list[tuple[int, str]]:
    """The string literals of ``source`` that are not docstrings or bare string statements, with their lines
    (the pieces of an f-string count one by one)."""
    tree = ast.parse(source)
    prose = {id(node.value) for node in ast.walk(tree)
             if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)}
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in prose]


def store_names() -> set[str]:
    """The file names the store layer spells."""
    return {value for path, in_store in _sources().items() if in_store
            for _, value in _literals(path.read_text()) if FILE_NAME.match(value)}


def spelled(source: str, names: set[str]) -> list[tuple[int, str]]:
    """Literals of ``source`` without white space that contain one of ``names`` (as a whole path part)."""
    found = []
    for line, value in _literals(source):
        if re.search(r"\s", value):
            continue
        for name in names:
            if re.search(rf"(^|[/\\]){re.escape(name)}($|[^\w.])", value):
                found.append((line, name))
    return found


def test_the_store_names_its_files():
    names = store_names()
    # a few that every stage relies on: if these are not found, the collection above is broken
    assert {"archive.csv", "gamma_star.json", "trace.csv", "summary.json", "table.md", "fanova.csv"} <= names


def test_no_module_outside_the_store_spells_a_store_file_name():
    names = store_names()
    offenders = [f"{path}:{line}: {name}" for path, in_store in sorted(_sources().items()) if not in_store
                 for line, name in spelled(path.read_text(), names)]
    assert not offenders, "ask metaopt.store for these paths:\n" + "\n".join(offenders)


def test_the_check_can_fail():
    source = '''
def f(folder):
    """Writes table.csv (a docstring may name it)."""
    print("see table.csv for the numbers")
    name = f"{folder}/{'x'}.csv"
    return folder / "table.csv", f"{folder}/gamma_star.json", "meta/archive.csv", "table.csvx"
'''
    found = spelled(source, {"table.csv", "gamma_star.json", "archive.csv"})
    assert sorted(name for _, name in found) == ["archive.csv", "gamma_star.json", "table.csv"]
