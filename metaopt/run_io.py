"""Reading and writing one run's files: ``trace.csv`` and ``summary.json`` (written atomically)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from metaopt.loop import RunResult
from metaopt.store_utils import atomic_write_text


def write_run(directory: Path, result: RunResult) -> None:
    """Write the trace first and the summary last: a directory with a summary.json is complete."""
    directory = Path(directory)
    atomic_write_text(directory / "trace.csv", result.trace.to_csv(index=False))
    atomic_write_text(directory / "summary.json", json.dumps(jsonable(result.summary), indent=1) + "\n")


def is_complete(directory: Path) -> bool:
    return (Path(directory) / "summary.json").exists()


def read_run(directory: Path) -> RunResult:
    directory = Path(directory)
    summary = json.loads((directory / "summary.json").read_text())
    trace = pd.read_csv(directory / "trace.csv")
    return RunResult(trace, summary)


def jsonable(value: Any) -> Any:
    """numpy scalars to Python values, NaN to None, recursively: what json.dumps can write."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if hasattr(value, "item"):
        return value.item()
    if isinstance(value, float) and value != value:
        return None
    return value
