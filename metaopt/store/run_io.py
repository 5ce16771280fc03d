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
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from metaopt.core.errors import UsageError
from metaopt.core.store_utils import atomic_write_text, file_digest

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


def trace_file(directory: Path) -> Path:
    """``<directory>/trace.csv``: one row per evaluation of the run."""
    return Path(directory) / "trace.csv"


def summary_file(directory: Path) -> Path:
    """``<directory>/summary.json``: the run's summary and its trace's digest (written last)."""
    return Path(directory) / "summary.json"


def failed_file(directory: Path) -> Path:
    """``<directory>/failed.json``: the traceback of a run that raised."""
    return Path(directory) / "failed.json"


def write_run(directory: Path, result: RunResult) -> None:
    """Write the trace first and the summary (with the trace's digest) last: the summary marks a finished run."""
    atomic_write_text(trace_file(directory), result.trace.to_csv(index=False))
    digest = file_digest(trace_file(directory).read_bytes())
    summary = {**jsonable(result.summary), TRACE_DIGEST: digest}
    atomic_write_text(summary_file(directory), json.dumps(summary, indent=1) + "\n")


def _verified_files(directory: Path) -> tuple[dict[str, Any], bytes]:
    """The summary (without the digest field) and the trace's bytes of a finished, intact run.

    Raises FileNotFoundError when there is no summary.json (an unfinished run) and DamagedRun when
    the files are there but do not match.
    """
    text = summary_file(directory).read_text()
    try:
        summary = json.loads(text)
    except json.JSONDecodeError:
        raise DamagedRun("summary.json is not valid JSON (truncated?)") from None
    if not isinstance(summary, dict) or not isinstance(summary.get(TRACE_DIGEST), str):
        raise DamagedRun(f"summary.json has no {TRACE_DIGEST} (damaged, or written by an older version)")
    try:
        trace = trace_file(directory).read_bytes()
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


def write_failure(directory: Path, traceback: str) -> None:
    """Record that the run in ``directory`` raised (``failed.json`` with its traceback); it is tried again."""
    atomic_write_text(failed_file(directory), json.dumps({"traceback": traceback}, indent=1))


def clear_failure(directory: Path) -> None:
    """Called when a run that had failed has now finished: its ``failed.json`` goes."""
    failed_file(directory).unlink(missing_ok=True)


def has_failed(directory: Path) -> bool:
    """True when the run in ``directory`` left a ``failed.json`` (it raised, and was not retried since)."""
    return failed_file(directory).exists()


def stored_config(directory: Path) -> Any:
    """The ``config`` in the summary of the run in ``directory`` (None if it has none); called after
    :func:`check_run` found the run finished and intact."""
    summary = json.loads(summary_file(Path(directory)).read_text())
    return summary.get("config") if isinstance(summary, dict) else None


def discard_summary(directory: Path) -> None:
    """Called on a damaged run before it is redone: its summary goes, so that nothing reads it as finished."""
    summary_file(directory).unlink(missing_ok=True)


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


EVALUATIONS_FILE = "evaluations.jsonl"
"""The evaluation log of a ``metaopt.minimize(output=...)`` folder (:class:`EvaluationLog`)."""


class EvaluationLog:
    """``<output>/evaluations.jsonl``: every evaluation of a ``metaopt.minimize`` run, appended as it finishes.

    The first line is a header naming the run (optimizer configuration, seed, budget, search
    space, fidelity); each further line one evaluation (trial ID, configuration, fidelity, loss,
    cost, error), flushed and synced to disk before the run goes on, so a crash loses at most the
    evaluations that were running. Opening the log of an earlier call with the same header resumes
    it: :meth:`stored` hands back its evaluations, so the objective is not called for them. A
    header that differs is a UsageError naming ``field``; a line cut short by a crash is dropped.
    (Hand-written: a few lines of append-and-fsync; a database would be a new dependency.)
    """

    def __init__(self, directory: Path, header: dict[str, Any], field: str) -> None:
        self.path = Path(directory) / EVALUATIONS_FILE
        self.records: dict[int, dict[str, Any]] = {}
        header = json.loads(json.dumps(jsonable(header)))
        self.path.parent.mkdir(parents=True, exist_ok=True)
        data = self.path.read_bytes() if self.path.exists() else b""
        complete = data[: data.rfind(b"\n") + 1]  # a last line without its newline was cut short
        lines = complete.decode().splitlines()
        if lines:
            stored = self._parse(lines[0], 1)
            differs = [key for key in sorted(set(header) | set(stored)) if header.get(key) != stored.get(key)]
            if differs:
                raise UsageError(f"{field}: {directory} holds the evaluations of another run ({', '.join(differs)} "
                                 "differ); give another folder, or delete it to start again")
            for number, line in enumerate(lines[1:], start=2):
                record = self._parse(line, number)
                self.records[int(record["trial"])] = record
        self._file = self.path.open("r+b" if data else "wb")
        self._file.truncate(len(complete))
        self._file.seek(len(complete))
        if not lines:
            self._append(header)

    def _parse(self, line: str, number: int) -> dict[str, Any]:
        try:
            value = json.loads(line)
        except json.JSONDecodeError:
            value = None
        if not isinstance(value, dict):
            raise DamagedRun(f"{self.path} line {number} is not a JSON object; the log is damaged "
                             "(delete the folder to start again)")
        return value

    def _append(self, record: dict[str, Any]) -> None:
        self._file.write((json.dumps(jsonable(record)) + "\n").encode())
        self._file.flush()
        os.fsync(self._file.fileno())

    def stored(self, trial: int, config: dict[str, Any], fidelity: float) -> tuple[float, float, str | None] | None:
        """(loss, cost, error) of trial ``trial`` if the log holds it, else None. Called before the
        trial is evaluated; a stored trial whose configuration or fidelity differs is a UsageError
        (the log is another run's)."""
        record = self.records.get(trial)
        if record is None:
            return None
        if record["config"] != json.loads(json.dumps(jsonable(config))) or record["fidelity"] != fidelity:
            raise UsageError(f"{self.path}: trial {trial} was {record['config']} at fidelity {record['fidelity']}, "
                             f"not {config} at {fidelity}: the log is another run's; give another folder")
        loss = math.nan if record["loss"] is None else float(record["loss"])
        return loss, float(record["cost"]), record["error"]

    def append(self, trial: int, config: dict[str, Any], fidelity: float,
               outcome: tuple[float, float, str | None]) -> None:
        """Called as each evaluation finishes: append it (and sync it to disk)."""
        loss, cost, error = outcome
        self._append({"trial": trial, "config": config, "fidelity": fidelity, "loss": loss, "cost": cost,
                      "error": error})

    def close(self) -> None:
        self._file.close()
