"""Meta-optimization with SMAC: archive, gamma*, resume after kill -9, failure isolation."""

import json
import os
import signal
import subprocess
import sys
import time

import pandas as pd
import pytest

from metaopt.cli import main
from metaopt.meta import CRASH_OBJECTIVE, choose_gamma_star, gamma_hash, meta_objective
from metaopt.budget import Budget

STUDY = """
name: meta_tiny
benchmark: synthetic:mlp
budget: 4d
meta:
  instances: {{split: train, limit: 3}}
  trials: {trials}
  seeds: [1, 2]
evaluation:
  instances: {{split: test, limit: 2}}
  seeds: 2
  optimizers: [gamma_star, rs]
output: {out}
"""

KEY = ["meta_seed", "trial", "hash", "instance", "seed", "objective", "status"]


def write(tmp_path, name, trials=10):
    path = tmp_path / f"{name}.yaml"
    path.write_text(STUDY.format(trials=trials, out=tmp_path / name))
    return path


def test_optimize_writes_archive_and_gamma_star_and_replays_identically(tmp_path, capsys):
    path = write(tmp_path, "a")
    assert main(["optimize", str(path), "--quiet"]) == 0
    out = tmp_path / "a" / "meta"
    archive = pd.read_csv(out / "archive.csv")
    assert len(archive) == 20 and set(archive["meta_seed"]) == {1, 2}
    assert {"gamma.fidelity_schedule", "inner.final_loss", "objective"} <= set(archive.columns)
    star = json.loads((out / "gamma_star.json").read_text())
    assert star["hash"] == gamma_hash(star["config"]) and star["n_trials"] == 20
    # gamma* has the lowest mean over instances among the configurations seen on all of them
    per = archive.groupby(["hash", "instance"])["objective"].mean().groupby("hash").agg(["mean", "count"])
    assert star["mean_objective"] == pytest.approx(per[per["count"] == 3]["mean"].min())
    # a second, identical run does not rerun SMAC for finished meta-seeds: the archive stays as it was
    capsys.readouterr()
    assert main(["optimize", str(path), "--quiet"]) == 0
    assert capsys.readouterr().out.count("SMAC is not rerun") == 2
    pd.testing.assert_frame_equal(archive, pd.read_csv(out / "archive.csv"))
    # more trials: SMAC replays the finished ones from the store and adds the rest
    path.write_text(STUDY.format(trials=12, out=tmp_path / "a"))
    (tmp_path / "a" / "study.yaml").unlink()  # the study changed: start its folder over, keeping the run store
    assert main(["optimize", str(path), "--quiet"]) == 0
    longer = pd.read_csv(out / "archive.csv")
    assert len(longer) == 24 and longer.groupby("meta_seed").head(10)["cached"].all()
    pd.testing.assert_frame_equal(archive[KEY], longer.groupby("meta_seed").head(10)[KEY].reset_index(drop=True))
    # and the evaluation stage uses gamma*
    assert main(["evaluate", str(path), "--quiet"]) == 0
    assert "gamma_star" in set(pd.read_csv(tmp_path / "a" / "eval" / "results.csv")["optimizer"])


def test_resume_after_kill_equals_uninterrupted_run(tmp_path):
    """Three processes with different hash seeds: uninterrupted, killed with -9, resumed."""
    reference = write(tmp_path, "uninterrupted", trials=14)
    cmd = [sys.executable, "-m", "metaopt", "optimize"]
    env = lambda hashseed: {**os.environ, "PYTHONHASHSEED": hashseed}  # noqa: E731
    subprocess.run(cmd + [str(reference), "--quiet"], env=env("1"), check=True, capture_output=True)
    killed = write(tmp_path, "killed", trials=14)
    proc = subprocess.Popen(cmd + [str(killed), "--quiet"], env=env("2"),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    runs = tmp_path / "killed" / "meta" / "runs"
    deadline = time.time() + 600
    while time.time() < deadline and len(list(runs.glob("*/*/seed-*.json"))) < 4 and proc.poll() is None:
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    done_before = len(list(runs.glob("*/*/seed-*.json")))
    assert done_before >= 4, "the killed run stored nothing before the deadline"
    assert not (tmp_path / "killed" / "meta" / "archive.csv").exists(), "killed too late: the run had finished"
    assert main(["optimize", str(killed), "--quiet"]) == 0
    a = pd.read_csv(tmp_path / "uninterrupted" / "meta" / "archive.csv")
    b = pd.read_csv(tmp_path / "killed" / "meta" / "archive.csv")
    pd.testing.assert_frame_equal(a[KEY], b[KEY])
    assert b["cached"].sum() >= done_before - 1  # finished runs were not recomputed
    assert json.loads((tmp_path / "killed" / "meta" / "gamma_star.json").read_text())["config"] == \
        json.loads((tmp_path / "uninterrupted" / "meta" / "gamma_star.json").read_text())["config"]


def test_a_failing_inner_run_is_isolated(tmp_path, monkeypatch):
    import metaopt.loop

    real_run = metaopt.loop.run

    def flaky(config, problem, seed, budget, **kw):
        if config.get("fidelity_schedule") != "single":
            raise RuntimeError("boom: this gamma is broken")
        return real_run(config, problem, seed, budget, **kw)

    monkeypatch.setattr(metaopt.loop, "run", flaky)
    path = write(tmp_path, "f", trials=12)
    assert main(["optimize", str(path), "--quiet"]) == 0
    archive = pd.read_csv(tmp_path / "f" / "meta" / "archive.csv")
    failed = archive[archive["status"] == "failed"]
    assert len(failed) > 0 and (failed["objective"] == CRASH_OBJECTIVE).all()
    assert failed["error"].str.contains("boom").all()
    stored = [json.loads(p.read_text()) for p in (tmp_path / "f" / "meta" / "runs").glob("*/*/seed-*.json")]
    assert any("RuntimeError: boom" in r.get("traceback", "") for r in stored)
    star = json.loads((tmp_path / "f" / "meta" / "gamma_star.json").read_text())
    assert star["config"]["fidelity_schedule"] == "single"


def test_meta_objectives():
    trace = pd.DataFrame({"budget_used": [1.0, 2.0, 4.0], "cost_used": [1, 2, 3],
                          "normalized_regret": [0.8, 0.5, 0.2]})
    budget = Budget(4.0)
    assert meta_objective("regret", trace, budget, [1.0]) == 0.2
    assert meta_objective("regret_at", trace, budget, [0.5, 1.0]) == pytest.approx((0.5 + 0.2) / 2)
    assert 0.2 < meta_objective("auc", trace, budget, [1.0]) < 0.8
    assert meta_objective("regret", trace.iloc[:0], budget, [1.0]) == CRASH_OBJECTIVE


def test_gamma_star_prefers_configurations_seen_on_all_instances():
    archive = pd.DataFrame({"hash": ["a", "a", "b"], "instance": ["1", "2", "1"], "objective": [0.3, 0.3, 0.01],
                            "meta_seed": [1, 1, 1], "trial": [0, 1, 2]})
    rows = [{"hash": "a", "gamma": {"mu": 1}}, {"hash": "b", "gamma": {"mu": 2}}]
    star = choose_gamma_star(archive, ["1", "2"], rows)
    assert star["hash"] == "a" and star["all_instances"]


def test_dask_evaluation_equals_serial(tmp_path):
    """A 2-worker LocalCluster on loopback gives the serial run's traces."""
    text = STUDY.replace("optimizers: [gamma_star, rs]", "optimizers: [rs, hb]").replace("meta:", "unused:")
    text = "\n".join(line for line in text.splitlines() if not line.startswith(("unused:", "  instances: {{split: train",
                                                                               "  trials:", "  seeds: [1, 2]")))
    for name, workers in (("serial", "1"), ("dask", "2")):
        path = tmp_path / f"{name}.yaml"
        path.write_text(text.format(trials=0, out=tmp_path / name))
        assert main(["evaluate", str(path), "--quiet", "--workers", workers]) == 0
    traces = sorted((tmp_path / "serial").glob("eval/runs/*/*/seed-*/trace.csv"))
    assert len(traces) == 2 * 2 * 2
    for trace in traces:
        assert trace.read_bytes() == (tmp_path / "dask" / trace.relative_to(tmp_path / "serial")).read_bytes()
