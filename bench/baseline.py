"""The optimize stage of the meta study, run by an older commit and by this checkout, back to back.

A speed-up of the optimize stage is a claim about two versions of the code, so both are measured in
one harness call on the same machine: the ``baseline`` section builds the commit ``--baseline REV``
names into a temporary folder (``git archive``, then ``pip install --no-deps --target``; the
libraries are this environment's), and runs ``python -m metaopt optimize <meta study>`` of each
version in turn, the baseline first, each with the same number of Dask workers and a fresh output
folder (no cached inner runs). Each version runs its own copy of the study file, as it would have
run it.

Measured: the wall time from the first finished trial to the ``baseline_trials``-th, counted as lines
of the stage's ``meta/trials-seed-*.jsonl`` logs (the meta-seeds run side by side, so the count is
over all of them; both versions append a line per finished trial). The stage is stopped there: the
study's own trial count and γ*'s selection re-runs are not part of the measurement. Starting the
stage (imports, references, the cluster) is reported apart as ``startup_s``.
"""

from __future__ import annotations

import io
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

from metaopt.bench.config import BenchConfig
from metaopt.bench.machine import REPO, busy_cores, measured_idle
from metaopt.core.errors import UsageError
from metaopt.store.store import StudyStore

POLL_S = 0.25
"""How often the trial logs are counted: the resolution of the measured times."""


def resolve_commit(rev: str) -> str:
    """The full hash of ``rev`` in this repository; UsageError if it names no commit."""
    done = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise UsageError(f"--baseline: {rev!r} is not a commit of {REPO}")
    return done.stdout.strip()


def install_commit(commit: str, folder: Path) -> Path:
    """Build ``commit``'s package into ``folder``/lib (its source in ``folder``/src); returns the source folder.

    The package goes into a plain folder put first on ``PYTHONPATH`` rather than into a virtual
    environment: the dependencies are this environment's, so only our code differs between the runs.
    """
    archive = subprocess.run(["git", "-C", str(REPO), "archive", "--format=tar", commit],
                             capture_output=True, check=True).stdout
    source = folder / "src"
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(source, filter="data")
    built = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target",
                            str(folder / "lib"), str(source)], capture_output=True, text=True)
    if built.returncode != 0:
        raise RuntimeError(f"building commit {commit[:12]} failed: {built.stderr[-2000:]}")
    return source


def _command_env(lib: Path | None, yahpo_data: str | None) -> dict[str, str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    if lib is not None:
        env["PYTHONPATH"] = str(lib)
    else:
        env.pop("PYTHONPATH", None)
    if yahpo_data:
        env["METAOPT_YAHPO_DATA"] = str(yahpo_data)
    return env


def _check_code(env: dict[str, str], cwd: Path, expected: Path) -> None:
    """Refuse to measure if ``python -m metaopt`` started in ``cwd`` would not run the code under
    ``expected`` (a folder holding a package ``metaopt``, first on the path, would take over)."""
    probe = ("import metaopt, metaopt.components.surrogates as s; "  # paths that exist before and after the
             "print(metaopt.__file__); print(s.__file__)")  # layer folders (a baseline may be older)
    found = subprocess.run([sys.executable, "-c", probe], cwd=cwd, env=env, capture_output=True, text=True,
                           check=True)
    for module in found.stdout.split():
        if not Path(module).resolve().is_relative_to(expected.resolve()):
            raise RuntimeError(f"the measured command would import {module}, not the code in {expected}")


def _trials_done(output: Path) -> int:
    return sum(path.read_bytes().count(b"\n") for path in StudyStore(output).trials_logs())


def time_optimize_stage(workdir: Path, study: str, env: dict[str, str], workers: int, trials: int,
                        timeout_s: float) -> dict[str, Any]:
    """Run ``metaopt optimize <study>`` in ``workdir`` until ``trials`` trials have finished; returns the
    times. The study's output folder (its ``output``, relative to ``workdir``) must not exist yet."""
    from metaopt.store.study_spec import load_study

    output = workdir / load_study(workdir / study).output
    if output.exists():
        raise RuntimeError(f"{output} exists: the measurement needs a fresh output folder")
    busy_before = busy_cores()
    log_path = workdir / "optimize.log"
    started = time.perf_counter()
    with log_path.open("wb") as log:
        process = subprocess.Popen([sys.executable, "-m", "metaopt", "optimize", study, "--workers", str(workers),
                                    "--quiet"], cwd=workdir, env=env, stdout=log, stderr=subprocess.STDOUT,
                                   start_new_session=True)  # its own process group: the Dask workers stop with it
        first_at = first_count = None
        try:
            while True:
                done = _trials_done(output)
                now = time.perf_counter()
                if first_at is None and done > 0:
                    first_at, first_count = now, done
                if done >= trials:
                    break
                if process.poll() is not None:
                    raise RuntimeError(f"the optimize stage ended after {done} of {trials} trials "
                                       f"(exit {process.returncode}); its output: {log_path.read_text()[-2000:]}")
                if now - started > timeout_s:
                    raise RuntimeError(f"{done} of {trials} trials after {timeout_s:.0f} s")
                time.sleep(POLL_S)
        finally:
            _stop(process)
    assert first_at is not None and first_count is not None  # the loop ends only after a trial finished
    return {"busy_cores_before": busy_before, "trials": done, "timed_trials": done - first_count,
            "startup_s": first_at - started, "wall_s": now - first_at,
            "trials_per_s": (done - first_count) / (now - first_at)}


def _stop(process: subprocess.Popen) -> None:
    """Stop the stage and every process it started (Dask's scheduler, nannies and workers)."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    try:
        os.killpg(process.pid, signal.SIGKILL)  # stragglers of the group, if any
    except ProcessLookupError:
        pass


def baseline_section(config: BenchConfig, yahpo_data: str | None, rev: str) -> dict[str, Any]:
    """The optimize stage of ``config.meta_study`` under the commit ``rev`` and under this checkout,
    ``config.baseline_repeats`` times each, alternating (baseline first), each time in a fresh folder."""
    commit = resolve_commit(rev)
    workers = max(config.meta_workers)
    rows = []
    with tempfile.TemporaryDirectory(prefix="metaopt-bench-baseline-") as tmp:
        folder = Path(tmp)
        source = install_commit(commit, folder / "baseline")
        versions = {"baseline": (source, _command_env(folder / "baseline" / "lib", yahpo_data)),
                    "current": (REPO, _command_env(None, yahpo_data))}
        # Each run is started in a folder holding only its study files (``folder`` holds no package):
        # started inside a source tree, Python would import that tree's metaopt/ before the built package.
        for code, (_, env) in versions.items():
            _check_code(env, folder, folder / "baseline" / "lib" if code == "baseline" else REPO)
        for repeat in range(config.baseline_repeats):
            for code, (source, env) in versions.items():
                workdir = folder / code / f"work-{repeat}"
                shutil.copytree(source / "studies", workdir / "studies")
                rows.append({"code": code, "commit": commit if code == "baseline" else None, "repeat": repeat,
                             **time_optimize_stage(workdir, config.meta_study, env, workers, config.baseline_trials,
                                                   config.baseline_timeout_s)})
    throughput = {code: [r["trials_per_s"] for r in rows if r["code"] == code] for code in versions}
    mean = {code: sum(values) / len(values) for code, values in throughput.items()}
    return {"study": config.meta_study, "baseline": rev, "commit": commit, "workers": workers,
            "trials": config.baseline_trials, "rows": rows, "mean_trials_per_s": mean,
            "speedup": mean["current"] / mean["baseline"],
            "speedup_range": [min(throughput["current"]) / max(throughput["baseline"]),
                              max(throughput["current"]) / min(throughput["baseline"])],
            "speedup_valid": measured_idle(rows)}
