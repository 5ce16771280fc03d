"""The scripts in examples/ run as a user would run them (small sizes) and print what they promise."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
METAOPT = Path(sys.executable).parent / "metaopt"


def _run(args: list[str], cwd: Path) -> str:
    done = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_tune_sklearn_with_minimize(tmp_path):
    out = _run([sys.executable, str(EXAMPLES / "tune_sklearn.py"), "--quick", "--out", str(tmp_path / "run")], tmp_path)
    assert "0 failed" in out and "best CV error" in out
    assert (tmp_path / "run" / "trace.csv").exists() and (tmp_path / "run" / "summary.json").exists()


def test_ask_tell_around_an_epoch_loop(tmp_path):
    out = _run([sys.executable, str(EXAMPLES / "ask_tell_epochs.py"), "--quick"], tmp_path)
    assert "stop: budget" in out and "best validation error" in out


def test_study_over_a_user_defined_benchmark_family(tmp_path):
    for name in ("branin_family.py", "branin_study.yaml"):
        shutil.copy(EXAMPLES / name, tmp_path / name)
    out = _run([str(METAOPT), "study", "run", "branin_study.yaml"], tmp_path)
    assert "gamma_star" in out
    report = tmp_path / "results" / "branin_family" / "report" / "report.md"
    assert report.exists() and "python:branin_family:make_benchmark" in report.read_text()
    table = (tmp_path / "results" / "branin_family" / "eval" / "table.md").read_text()
    assert all(name in table for name in ("gamma_star", "rs", "hb", "bohb"))


def test_a_killed_minimize_run_resumes_to_the_uninterrupted_trace(tmp_path):
    out = _run([sys.executable, str(EXAMPLES / "resume_minimize.py"), "--kill-at", "30", "--out", str(tmp_path / "run")],
               tmp_path)
    assert "killed run: exit status 9, 29 evaluations stored, trace.csv written: False" in out
    assert "29 read back" in out and "same trace as an uninterrupted run: True" in out


def test_asynchronous_ask_tell_with_several_pending_trials(tmp_path):
    out = _run([sys.executable, str(EXAMPLES / "ask_tell_async.py"), "--workers", "4"], tmp_path)
    assert "up to 4 pending at once" in out and "same trace as a serial run: True" in out
