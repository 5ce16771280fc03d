"""The machine a benchmark ran on: CPU, cores, load, Python and library versions, git commit."""

from __future__ import annotations

import datetime
import importlib.metadata
import os
import platform
import subprocess
import time
from pathlib import Path
from typing import Any

PACKAGES = ("smac", "numpy", "scipy", "scikit-learn", "ConfigSpace", "yahpo-gym", "onnxruntime", "pandas",
            "dask", "optuna", "flaml")
REPO = Path(__file__).resolve().parents[1]


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def _git_commit() -> str | None:
    """The checked-out commit, with ``+changes`` when the working tree differs from it."""
    try:
        commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return commit + ("+changes" if dirty else "")


def machine_info() -> dict[str, Any]:
    """Everything needed to judge where numbers came from; ``load_average`` is taken now (a noisy machine shows)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "cpu": _cpu_model(),
        "cores": cores,
        "load_average": [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "packages": {name: _version(name) for name in PACKAGES},
        "git_commit": _git_commit(),
    }


IDLE_BUSY_CORES = 0.2
"""A speed-up from parallel workers is reported only when at most this many cores were busy with other
work just before the measurement (:func:`busy_cores`): on a shared machine it would measure the free
cores, not the executor."""


def measured_idle(rows: list[dict[str, Any]]) -> bool:
    """Whether every measurement in ``rows`` started on an idle machine: its ``busy_cores_before`` is
    known and at most :data:`IDLE_BUSY_CORES`."""
    return all(r["busy_cores_before"] is not None and r["busy_cores_before"] <= IDLE_BUSY_CORES for r in rows)


def _cpu_jiffies() -> tuple[int, int] | None:
    """(busy, total) CPU time of the whole machine since boot, from the first line of /proc/stat."""
    try:
        fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return sum(fields) - idle, sum(fields)


def busy_cores(interval_s: float = 3.0) -> float | None:
    """How many cores other processes keep busy: the machine's busy share over ``interval_s`` while this
    process sleeps, times the cores. Called right before a parallel measurement (the 1-minute load
    average lags by a minute and still shows the previous measurement). None where /proc/stat is missing."""
    before = _cpu_jiffies()
    time.sleep(interval_s)
    after = _cpu_jiffies()
    if before is None or after is None or after[1] == before[1]:
        return None
    cores = os.cpu_count() or 1
    return round(cores * (after[0] - before[0]) / (after[1] - before[1]), 2)
