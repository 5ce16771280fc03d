"""Reading and writing one run's files: ``trace.csv`` and ``summary.json`` (written atomically, last).

``summary.json`` records the SHA-256 digest of the exact bytes of ``trace.csv`` (field
:data:`TRACE_DIGEST`). A run is finished only when its summary parses, has that digest, and the
trace exists with that digest: a truncated or deleted trace, a truncated summary or a summary
from before digests were recorded is *damaged* (:func:`check_run` says why) and never read as a
result (:func:`read_run` raises :class:`DamagedRun`); the stages redo such runs.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from metaopt.store_utils import atomic_write_text, file_digest

TRACE_DIGEST = "trace_sha256"
"""summary.json field: SHA-256 of trace.csv's bytes (not part of the RunResult summary read back)."""
UNFINISHED = "unfinished"
"""What :func:`check_run` says of a folder without summary.json: the run never finished (not damage)."""


@dataclass
class RunResult:
    """The outcome of one run: its trace (one row per evaluation) and its summary."""

    trace: pd.DataFrame
    summary: dict[str, Any]


class DamagedRun(ValueError):
    """A stored run whose files do not match (see the module docstring); the message says how."""


def write_run(directory: Path, result: RunResult) -> None:
    """Write the trace first and the summary (with the trace's digest) last: the summary marks a finished run."""
    directory = Path(directory)
    atomic_write_text(directory / "trace.csv", result.trace.to_csv(index=False))
    digest = file_digest((directory / "trace.csv").read_bytes())
    summary = {**jsonable(result.summary), TRACE_DIGEST: digest}
    atomic_write_text(directory / "summary.json", json.dumps(summary, indent=1) + "\n")


def _verified_files(directory: Path) -> tuple[dict[str, Any], bytes]:
    """The summary (without the digest field) and the trace's bytes of a finished, intact run.

    Raises FileNotFoundError when there is no summary.json (an unfinished run) and DamagedRun when
    the files are there but do not match.
    """
    text = (directory / "summary.json").read_text()
    try:
        summary = json.loads(text)
    except json.JSONDecodeError:
        raise DamagedRun("summary.json is not valid JSON (truncated?)") from None
    if not isinstance(summary, dict) or not isinstance(summary.get(TRACE_DIGEST), str):
        raise DamagedRun(f"summary.json has no {TRACE_DIGEST} (damaged, or written by an older version)")
    try:
        trace = (directory / "trace.csv").read_bytes()
    except FileNotFoundError:
        raise DamagedRun("trace.csv is missing beside summary.json") from None
    if file_digest(trace) != summary[TRACE_DIGEST]:
        raise DamagedRun("trace.csv does not match the digest in summary.json (truncated or changed)")
    del summary[TRACE_DIGEST]
    return summary, trace


def check_run(directory: Path) -> str | None:
    """Called before using or redoing a stored run: None when it is finished and intact, else why not.

    Returns :data:`UNFINISHED` for a folder without summary.json (never started, interrupted or
    failed), else a one-line description of the damage.
    """
    try:
        _verified_files(Path(directory))
    except FileNotFoundError:
        return UNFINISHED
    except DamagedRun as err:
        return str(err)
    return None


def read_run(directory: Path) -> RunResult:
    """The stored run in ``directory``; DamagedRun (or FileNotFoundError) unless it is finished and intact."""
    summary, trace = _verified_files(Path(directory))
    return RunResult(pd.read_csv(io.BytesIO(trace)), summary)


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
