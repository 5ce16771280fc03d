"""Meta-optimization with SMAC: archive, gamma*, determinism over workers and resume (after kill -9 or
damage to the store), failure isolation and retry."""

import json
import os
from pathlib import Path
import signal
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import pytest

from metaopt.cli import main
import metaopt.stages.meta
import metaopt.stages.meta_search
from metaopt.core.budget import Budget
from metaopt.core.errors import UsageError
from metaopt.stages.meta import meta_objective
from metaopt.store.meta_archive import (CRASH_OBJECTIVE, choose_gamma_star, gamma_hash, read_meta_runs, record_key,
                                       same_under_cap, selection_pool)
from metaopt.store.store import StudyStore
from metaopt.store.study_spec import load_study

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
RESULTS = ("archive.csv", "gamma_star.json")


def write(tmp_path, name, trials=10, seeds="[1, 2]"):
    path = tmp_path / f"{name}.yaml"
    path.write_text(STUDY.format(trials=trials, out=tmp_path / name).replace("seeds: [1, 2]", f"seeds: {seeds}"))
    return path


def results(folder):
    """The bytes of a study's archive and gamma*."""
    return {name: (folder / "meta" / name).read_bytes() for name in RESULTS}


def log(folder, meta_seed):
    """A meta-seed's trials log as a table."""
    return pd.read_json(folder / "meta" / f"trials-seed-{meta_seed}.jsonl", lines=True)


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
    assert capsys.readouterr().out.count("the search is not rerun") == 2
    pd.testing.assert_frame_equal(archive, pd.read_csv(out / "archive.csv"))
    # more trials: SMAC replays the finished ones from the store and adds the rest
    path.write_text(STUDY.format(trials=12, out=tmp_path / "a"))
    (tmp_path / "a" / "study.yaml").unlink()  # the study changed: start its folder over, keeping the run store
    assert main(["optimize", str(path), "--quiet"]) == 0
    longer = pd.read_csv(out / "archive.csv")
    assert len(longer) == 24 and all(log(tmp_path / "a", m).head(10)["cached"].all() for m in (1, 2))
    pd.testing.assert_frame_equal(archive[KEY], longer.groupby("meta_seed").head(10)[KEY].reset_index(drop=True))
    # and the evaluation stage uses gamma*
    assert main(["evaluate", str(path), "--quiet"]) == 0
    assert "gamma_star" in set(pd.read_csv(tmp_path / "a" / "eval" / "results.csv")["optimizer"])
    assert not (out / ".smac").exists()  # SMAC's scratch files are removed when a meta-seed ends


def test_an_evaluation_cap_reruns_only_the_stored_runs_it_would_have_changed(tmp_path):
    """``meta.max_evals``: stored runs no longer than the cap (and not cut by another cap) are the runs
    the capped search makes, so they are reused; longer ones are run again and stop at the cap."""
    path = write(tmp_path, "c", trials=4, seeds="[1]")
    assert main(["optimize", str(path), "--quiet"]) == 0
    before = pd.read_csv(tmp_path / "c" / "meta" / "archive.csv")
    cap = int(before["inner.n_evals"].median())
    assert (before["inner.n_evals"] > cap).any() and (before["inner.n_evals"] <= cap).any()
    (tmp_path / "c" / "study.yaml").unlink()  # the study changes: its folder starts over, keeping the run store
    path.write_text(path.read_text().replace("  seeds: [1]\n", f"  seeds: [1]\n  max_evals: {cap}\n", 1))
    assert main(["optimize", str(path), "--quiet"]) == 0
    after = pd.read_csv(tmp_path / "c" / "meta" / "archive.csv")
    assert (after["inner.n_evals"] <= cap).all()
    cut = after["inner.stop_reason"] == "eval_cap"
    assert cut.any() and (after.loc[cut, "inner.n_evals"] == cap).all()
    cached = log(tmp_path / "c", 1)["cached"]
    old = before.set_index(["hash", "instance", "seed"])
    for i, row in after.iterrows():
        key = (row["hash"], row["instance"], row["seed"])
        if key in old.index:  # a run of the first search: reused exactly when the cap would not change it
            short = old.loc[key, "inner.n_evals"] <= cap
            assert bool(cached[i]) == short and (not short or old.loc[key, "objective"] == row["objective"])
    # the compact meta-archive carries the runs the cap stopped too: the search restores from it alone
    assert main(["study", "export-meta", str(tmp_path / "c"), "--out", str(tmp_path / "c.jsonl.gz")]) == 0
    exported = {record_key(r): r for r in read_meta_runs(tmp_path / "c.jsonl.gz")}
    assert set(exported) == set(zip(after["hash"], after["instance"].astype(str), after["seed"]))
    assert sum(r["summary"]["stop_reason"] == "eval_cap" for r in exported.values()) == cut.sum()


def test_a_stored_run_is_the_capped_run_when_no_longer_than_the_cap():
    def record(n_evals, reason):
        return {"summary": {"n_evals": n_evals, "stop_reason": reason}}
    assert same_under_cap(record(50, "budget"), None) and same_under_cap(record(50, "budget"), 50)
    assert not same_under_cap(record(51, "budget"), 50) and same_under_cap(record(50, "pi_threshold"), 80)
    assert same_under_cap(record(50, "eval_cap"), 50)
    assert not same_under_cap(record(50, "eval_cap"), 80) and not same_under_cap(record(50, "eval_cap"), None)
    assert same_under_cap({"summary": {}}, 10)


def test_two_dask_workers_give_the_serial_archive_and_gamma_star(tmp_path):
    """Batches make SMAC's proposals independent of the worker count: byte-identical results."""
    for name, workers in (("serial", "1"), ("dask", "2")):
        assert main(["optimize", str(write(tmp_path, name, trials=9)), "--quiet", "--workers", workers]) == 0
    assert results(tmp_path / "serial") == results(tmp_path / "dask")
    for meta_seed in (1, 2):
        assert (tmp_path / "serial" / "meta" / f"trials-seed-{meta_seed}.jsonl").read_bytes() == \
            (tmp_path / "dask" / "meta" / f"trials-seed-{meta_seed}.jsonl").read_bytes()


def test_resume_after_kill_equals_uninterrupted_run(tmp_path):
    """Three processes with different hash seeds: uninterrupted, killed with -9 mid-run, resumed with 2 workers."""
    reference = write(tmp_path, "uninterrupted", trials=14)
    cmd = [sys.executable, "-m", "metaopt", "optimize"]
    env = lambda hashseed: {**os.environ, "PYTHONHASHSEED": hashseed}  # noqa: E731
    subprocess.run(cmd + [str(reference), "--quiet"], env=env("1"), check=True, capture_output=True)
    killed = write(tmp_path, "killed", trials=14)
    proc = subprocess.Popen(cmd + [str(killed), "--quiet"], env=env("2"),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    runs = tmp_path / "killed" / "meta" / "runs"
    deadline = time.time() + 600
    while time.time() < deadline and len(list(runs.glob("*/*/seed-*.json"))) < 6 and proc.poll() is None:
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    done_before = len(list(runs.glob("*/*/seed-*.json")))
    assert done_before >= 6, "the killed run stored nothing before the deadline"
    assert not (tmp_path / "killed" / "meta" / "archive.csv").exists(), "killed too late: the run had finished"
    subprocess.run(cmd + [str(killed), "--quiet", "--workers", "2"], env=env("3"), check=True, capture_output=True)
    assert results(tmp_path / "uninterrupted") == results(tmp_path / "killed")
    replayed = pd.concat([log(tmp_path / "killed", m) for m in (1, 2)])
    assert replayed["cached"].sum() >= done_before  # finished runs were not recomputed
    assert not (tmp_path / "killed" / "meta" / ".smac").exists()


def test_resume_from_a_damaged_store_equals_uninterrupted_run(tmp_path, capsys):
    """A crash mid-batch (runs missing, a log line and a run record cut short) and a truncated gamma*:
    the next invocation recomputes exactly what is missing or damaged and writes the same results."""
    path = write(tmp_path, "d", trials=10)
    assert main(["optimize", str(path), "--quiet"]) == 0
    folder, meta = tmp_path / "d", tmp_path / "d" / "meta"
    before = results(folder)
    second = log(folder, 2)
    record = lambda row: meta / "runs" / row.hash / str(row.instance) / f"seed-{row.seed}.json"  # noqa: E731
    damaged = {trial: record(row) for trial, row in zip(second["trial"], second.itertuples())
               if trial in (5, 6) and not row.cached}
    assert damaged, "meta-seed 2 computed neither trial 5 nor 6"
    if 5 in damaged:
        damaged[5].write_text(damaged[5].read_text()[:40])  # a run record cut short
    if 6 in damaged:
        damaged[6].unlink()  # a run that had not finished
    log_1 = meta / "trials-seed-1.jsonl"
    log_1.write_text(log_1.read_text()[:-30])  # meta-seed 1's last log line cut short
    gamma_star = meta / "gamma_star.json"
    gamma_star.write_text(gamma_star.read_text()[:50])
    with pytest.raises(UsageError, match="gamma_star.json is damaged.*rerun the optimize stage"):
        from metaopt.stages.study import StudyContext

        StudyContext(load_study(path), None).gamma_stars()
    capsys.readouterr()
    assert main(["optimize", str(path), "--quiet"]) == 0
    assert results(folder) == before
    assert "the search is not rerun" not in capsys.readouterr().out  # both meta-seeds were replayed
    assert log(folder, 1)["cached"].all()
    assert set(log(folder, 2).query("not cached")["trial"]) == set(damaged)
    assert all(json.loads(p.read_text())["status"] == "ok" for p in damaged.values())  # rewritten


def test_a_failing_inner_run_is_isolated(tmp_path, monkeypatch):
    import metaopt.engine.simclock

    real_run = metaopt.engine.simclock.run

    def flaky(config, problem, seed, budget, **kw):
        if config.get("fidelity_schedule") != "single":
            raise RuntimeError("boom: this gamma is broken")
        return real_run(config, problem, seed, budget, **kw)

    monkeypatch.setattr(metaopt.engine.simclock, "run", flaky)
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


def test_failed_trials_write_no_gamma_star_and_are_retried(tmp_path, monkeypatch, capsys):
    """Every trial fails (e.g. a broken benchmark): one error line, no archive, no gamma*. Once the
    cause is fixed, the failed trials are recomputed and the results equal a run that never failed."""
    import metaopt.engine.simclock

    real_run = metaopt.engine.simclock.run

    def broken(*args, **kw):
        raise RuntimeError("boom: the model file is corrupt")

    monkeypatch.setattr(metaopt.engine.simclock, "run", broken)
    path = write(tmp_path, "broken", trials=6, seeds="[1]")
    assert main(["optimize", str(path), "--quiet"]) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith("metaopt: error: all 6 trials of the meta-optimization failed") and "\n" not in error
    assert "RuntimeError: boom: the model file is corrupt" in error
    assert not any((tmp_path / "broken" / "meta" / name).exists() for name in RESULTS)
    monkeypatch.setattr(metaopt.engine.simclock, "run", real_run)
    assert main(["optimize", str(path), "--quiet"]) == 0
    assert "the search is not rerun" not in capsys.readouterr().out
    assert main(["optimize", str(write(tmp_path, "clean", trials=6, seeds="[1]")), "--quiet"]) == 0
    assert results(tmp_path / "broken") == results(tmp_path / "clean")
    assert (log(tmp_path / "broken", 1)["status"] == "ok").all()


def test_a_batch_runs_each_distinct_uncached_trial_once(tmp_path):
    """Two SMAC configurations that complete to the same gamma in one batch run once; stored runs
    are not rerun; results come back in ask order; a failed run does not enter the cache."""
    def fake_run(gamma, instance, seed):
        status = "failed" if gamma["x"] == 3 else "ok"
        return {"gamma": gamma, "hash": gamma_hash(gamma), "instance": instance, "seed": seed,
                "status": status, "objective": float(gamma["x"])}

    stored = {"x": 2}
    cache = {(gamma_hash(stored), "i", 0): {"gamma": stored, "hash": gamma_hash(stored), "instance": "i",
                                            "seed": 0, "status": "ok", "objective": 2.0}}
    gammas = [{"x": x} for x in (1, 2, 1, 3)]
    batch = metaopt.stages.meta_search.Batch([(gamma_hash(g), "i", 0) for g in gammas], gammas, cache)
    assert [gamma["x"] for gamma in batch.todo.values()] == [1, 3]
    store = StudyStore(tmp_path)
    for key, gamma in batch.todo.items():
        assert not batch.done
        batch.deliver(key, metaopt.stages.meta_search.store_record(store, fake_run(gamma, key[1], key[2])))
    assert batch.done
    assert [(r["objective"], cached) for r, cached in batch.results()] == [(1.0, False), (2.0, True), (1.0, True),
                                                                           (3.0, False)]
    assert [r["gamma"]["x"] for r in batch.fresh_ok().values()] == [1]
    assert len(list(tmp_path.glob("meta/runs/*/i/seed-0.json"))) == 2  # both fresh runs are stored


def test_meta_seeds_run_side_by_side_on_the_executor(tmp_path):
    """While one meta-seed waits for its batch, the other meta-seeds' trials are on the executor: the
    first batches of all meta-seeds are submitted before any result comes back."""
    from metaopt.core.executor import Executor

    class Recording(Executor):
        def __init__(self):
            super().__init__()
            self.events = []

        def submit(self, fn, args):
            self.events.append(("submit", args[3]))
            return super().submit(fn, args)

        def completed(self):
            for task_id, result in super().completed():
                self.events.append(("done", result["seed"]))
                yield task_id, result

    executor = Recording()
    path = write(tmp_path, "side", trials=6, seeds="[1, 2, 3]")
    study = load_study(path)
    from metaopt.stages.study import StudyContext, run_optimize

    run_optimize(StudyContext(study, None), executor, quiet=True)
    first_done = executor.events.index(next(e for e in executor.events if e[0] == "done"))
    assert len({seed for kind, seed in executor.events[:first_done] if kind == "submit"}) == 3
    assert len([e for e in executor.events if e[0] == "done"]) == 18


@pytest.mark.parametrize("value", [0, 2.5, "four", True])
def test_meta_batch_size_must_be_a_positive_integer(tmp_path, value):
    path = tmp_path / "bad.yaml"
    text = STUDY.format(trials=4, out=tmp_path / "bad")
    path.write_text(text.replace("  trials: 4", f"  trials: 4\n  batch_size: {value}"))
    with pytest.raises(UsageError, match="field 'meta.batch_size'"):
        load_study(path)


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


def _setup(restriction=None):
    from metaopt.stages.meta import MetaSetup

    return MetaSetup("synthetic:mlp", None, Budget.parse("4d", 6), {}, restriction, "regret", (1.0,))


def test_known_designs_are_the_presets_that_are_points_of_the_space(tmp_path):
    from metaopt.stages.meta import complete_gamma, known_designs
    from metaopt.spaces.design_space import design_space
    from metaopt.spaces.presets import PRESETS, get_preset
    from metaopt.spaces.restrictions import get_restriction

    full = known_designs(_setup(), design_space())
    assert {"rs", "hb", "bohb", "cfo", "cfo_tuned", "bo_gp_ei", "smashy_lcbench_hb"} <= set(full)
    table4 = known_designs(_setup("table4"), get_restriction("table4").space())
    assert set(table4) == {"bohb", "smashy_lcbench_hb", "smashy_lcbench_equal", "smashy_rbv2_hb", "smashy_rbv2_equal"}
    fidelity = __import__("metaopt.core.benchmarks", fromlist=["get_benchmark"]).get_benchmark("synthetic:mlp").fidelity
    for name, configuration in table4.items():  # each completes to exactly the preset
        assert complete_gamma(_setup("table4"), dict(configuration)) == get_preset(name).config(fidelity)
    mine = {**get_preset("smashy_lcbench_hb").config(fidelity), "mu": 20}
    extra = known_designs(_setup("table4"), get_restriction("table4").space(), {"mine.json": mine}, presets=False)
    assert list(extra) == ["mine.json"]
    assert known_designs(_setup("table4"), get_restriction("table4").space(),
                         {"cfo.json": get_preset("cfo").config(fidelity)}, presets=False) == {}
    # a design under a second name (a shipped gamma* equal to a preset, a gamma file of a preset) is tried once
    twice = known_designs(_setup("table4"), get_restriction("table4").space(),
                          {"bohb.json": get_preset("bohb").config(fidelity)})
    assert list(twice) == list(table4)

    # the family the lcbench search tunes within (studies/lcbench_cfo_race.yaml) holds the hand-made designs
    family = known_designs(_setup("cfo_then_model"), get_restriction("cfo_then_model").space())
    assert set(family) == {"cfo_then_rf", "metaopt_lcbench", "metaopt_cfo_gp"}
    for name, configuration in family.items():
        assert complete_gamma(_setup("cfo_then_model"), dict(configuration)) == get_preset(name).config(fidelity)
    # the design the race judged at 30·d found: its own study and the searches made before it shipped leave it out
    for study in ("lcbench_cfo_race_final", "lcbench_cfo_race_asinh", "rbv2_xgboost_cfo_race_asinh"):
        assert set(known_designs(_setup("cfo_then_model"), get_restriction("cfo_then_model").space(),
                                 found_by=study)) == {"cfo_then_rf", "metaopt_lcbench"}, study
    studies = Path(__file__).resolve().parents[1] / "studies"
    for preset in PRESETS.values():  # every study a shipped design names exists
        assert all((studies / f"{name}.yaml").is_file() for name in preset.found_by_studies), preset.name


SELECTION_STUDY = """
name: selection
benchmark: synthetic:mlp
budget: 4d
meta:
  instances: {{split: train, limit: 2}}
  restriction: table4
  trials: 12
  seeds: [1]
  select_top: 3
  select_seeds: 2
  initial_configs: [{extra}]
evaluation:
  instances: {{split: test, limit: 2}}
  seeds: 1
  optimizers: [gamma_star, bohb]
output: {out}
"""


def test_gamma_star_is_selected_by_reruns_of_the_top_candidates(tmp_path, capsys):
    from metaopt.spaces.presets import get_preset

    extra = tmp_path / "mine.json"
    extra.write_text(json.dumps({**get_preset("smashy_lcbench_hb").config(
        __import__("metaopt.core.benchmarks", fromlist=["get_benchmark"]).get_benchmark("synthetic:mlp").fidelity), "mu": 20}))
    path = tmp_path / "s.yaml"
    path.write_text(SELECTION_STUDY.format(extra=extra, out=tmp_path / "out"))
    assert main(["optimize", str(path), "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert "6 known designs for SMAC's initial design" in printed and str(extra) in printed
    meta = tmp_path / "out" / "meta"
    table = pd.read_csv(meta / "selection.csv")
    star = json.loads((meta / "gamma_star.json").read_text())
    assert len(table) == 3 and table["chosen"].sum() == 1
    fidelity = __import__("metaopt.core.benchmarks", fromlist=["get_benchmark"]).get_benchmark("synthetic:mlp").fidelity
    tried = set(pd.read_csv(meta / "archive.csv")["hash"])
    assert {gamma_hash(get_preset("bohb").config(fidelity)), gamma_hash(json.loads(extra.read_text()))} <= tried
    chosen = table[table["chosen"]].iloc[0]
    assert chosen["hash"] == star["hash"] and chosen["selection_mean"] == table["selection_mean"].min()
    assert star["mean_objective"] == pytest.approx(chosen["selection_mean"])
    assert chosen["difference_to_gamma_star"] == 0 and (table["difference_to_gamma_star"] >= 0).all()
    # candidates that are designs of the initial design are named, in the table and in gamma_star.json
    known = {gamma_hash(get_preset(name).config(fidelity)): name
             for name in ("bohb", "smashy_lcbench_hb", "smashy_lcbench_equal", "smashy_rbv2_hb", "smashy_rbv2_equal")}
    known[gamma_hash(json.loads(extra.read_text()))] = str(extra)
    for row in table.itertuples():
        assert (row.known_design if isinstance(row.known_design, str) else None) == known.get(row.hash)
    assert star["known_design"] == known.get(star["hash"])
    # 3 candidates x 2 instances x 2 seeds, stored beside the trials, with seeds no trial used
    records = [json.loads(p.read_text()) for p in (meta / "runs").rglob("*.json")]
    assert star["selection"]["seeds"] == [1001, 1002]
    assert not set(pd.read_csv(meta / "archive.csv")["seed"]) & {1001, 1002}
    assert sum(r["seed"] in (1001, 1002) for r in records) == 12
    # a second invocation reruns nothing and gives the same bytes
    before = {name: (meta / name).read_bytes() for name in ("archive.csv", "gamma_star.json", "selection.csv")}
    assert main(["optimize", str(path), "--quiet"]) == 0
    assert before == {name: (meta / name).read_bytes() for name in before}


def test_the_selection_can_run_on_training_instances_the_search_did_not_run(tmp_path, capsys):
    """meta.select_instances: the candidates are re-run on other training instances and γ* is the best
    there; the search's runs are the same as without it; test instances and a missing selection are refused."""
    from metaopt.core.benchmarks import get_benchmark

    train = get_benchmark("synthetic:mlp").instances_of("train")
    text = SELECTION_STUDY.replace("  initial_configs: [{extra}]\n", "")
    plain, other = tmp_path / "plain.yaml", tmp_path / "other.yaml"
    plain.write_text(text.format(out=tmp_path / "plain"))
    other.write_text(text.format(out=tmp_path / "other").replace(
        "  select_seeds: 2\n", f"  select_seeds: 2\n  select_instances: [{train[2]}, {train[3]}, {train[4]}]\n"))
    assert main(["optimize", str(plain), "--quiet"]) == 0
    assert main(["optimize", str(other), "--quiet"]) == 0
    capsys.readouterr()
    meta, plain_meta = tmp_path / "other" / "meta", tmp_path / "plain" / "meta"
    assert (meta / "archive.csv").read_bytes() == (plain_meta / "archive.csv").read_bytes()
    star, table = json.loads((meta / "gamma_star.json").read_text()), pd.read_csv(meta / "selection.csv")
    plain_table = pd.read_csv(plain_meta / "selection.csv")
    assert list(table["hash"]) == list(plain_table["hash"])  # the same candidates, scored elsewhere
    assert star["selection"]["instances"] == train[2:5] and "of 3 instances the search did not run" in star["rule"]
    records = [json.loads(p.read_text()) for p in (meta / "runs").rglob("*.json")]
    selection_runs = [r for r in records if r["seed"] in star["selection"]["seeds"]]
    assert len(selection_runs) == 3 * 3 * 2 and {r["instance"] for r in selection_runs} == set(train[2:5])
    by_hash = {h: [r["objective"] for r in selection_runs if r["hash"] == h] for h in table["hash"]}
    assert star["hash"] == min(by_hash, key=lambda h: (sum(by_hash[h]) / len(by_hash[h]), list(table["hash"]).index(h)))
    assert star["mean_objective"] == pytest.approx(sum(by_hash[star["hash"]]) / 6)
    test = get_benchmark("synthetic:mlp").instances_of("test")[0]
    bad = tmp_path / "bad.yaml"
    bad.write_text(other.read_text().replace(f"[{train[2]}, ", f"[{test}, "))
    assert main(["optimize", str(bad), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "field 'meta.select_instances'" in err and "stay held out" in err
    bad.write_text(other.read_text().replace("  select_top: 3\n", ""))
    assert main(["optimize", str(bad), "--quiet"]) == 2
    assert "select_instances" in capsys.readouterr().err


def _archive(objectives: dict[str, dict[str, float]]) -> pd.DataFrame:
    """An archive with one trial per (configuration, instance) objective given."""
    return pd.DataFrame([{"hash": h, "instance": i, "seed": 0, "objective": y}
                         for h, by_instance in objectives.items() for i, y in by_instance.items()])


def test_the_selection_pool_admits_challengers_by_their_paired_difference():
    instances = [str(i) for i in range(6)]
    hard = {"0": 0.9, "1": 0.8, "2": 0.7, "3": 0.1, "4": 0.05, "5": 0.05}  # instances' difficulties differ a lot
    archive = _archive({
        "incumbent": dict(hard),
        "runner_up": {i: y + 0.02 for i, y in hard.items()},
        "easy_only": {"3": 0.2, "4": 0.2, "5": 0.2},  # low mean only because its instances are easy
        "challenger": {"0": 0.85, "1": 0.75},  # better than the incumbent where both ran
        "one_instance": {"0": 0.1},  # below the fraction
    })
    # default: only configurations run on all instances, by their mean (as choose_gamma_star)
    pool = selection_pool(archive, instances, 3)
    assert list(pool.index) == ["incumbent", "runner_up"]
    assert pool.loc["runner_up", "difference"] == pytest.approx(0.02)
    # a third of the instances: challengers ranked by their paired difference, the incumbent kept
    pool = selection_pool(archive, instances, 3, 1 / 3)
    assert list(pool.index) == ["incumbent", "challenger", "runner_up"]
    assert pool.loc["challenger", "difference"] == pytest.approx(-0.05)
    assert pool.loc["challenger", "n_instances"] == 2 and pool.loc["incumbent", "difference"] == 0
    everyone = selection_pool(archive, instances, 9, 1 / 3)
    assert list(everyone.index) == ["incumbent", "challenger", "runner_up", "easy_only"]  # not one_instance
    assert everyone.loc["easy_only", "mean"] == pytest.approx(0.2)  # below the incumbent's 0.433 ...
    assert everyone.loc["easy_only", "difference"] == pytest.approx(0.4 / 3)  # ... but worse where both ran
    assert list(selection_pool(archive, instances, 1, 1 / 3).index) == ["incumbent"]
    # nothing ran on all instances: no pool (γ* is then choose_gamma_star's)
    assert selection_pool(archive[archive["instance"] != "5"], instances, 3, 1 / 3).empty


@pytest.mark.parametrize("field,value,message", [
    ("select_top", "-1", "meta.select_top"),
    ("select_seeds", "0", "meta.select_seeds"),
    ("select_min_instance_fraction", "0", "meta.select_min_instance_fraction"),
    ("select_min_instance_fraction", "1.5", "meta.select_min_instance_fraction"),
    ("initial_configs", "[nowhere.json]", r"meta\.initial_configs\[0\]'.*file not found"),
])
def test_bad_selection_and_initial_design_fields(tmp_path, capsys, field, value, message):
    path = tmp_path / "s.yaml"
    text = STUDY.format(trials=4, out=tmp_path / "out").replace("  seeds: [1, 2]\n", f"  seeds: [1, 2]\n  {field}: {value}\n", 1)
    path.write_text(text)
    assert main(["optimize", str(path), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and __import__("re").search(message, err)
    assert not (tmp_path / "out").exists()


def test_a_meta_seed_proposes_the_same_trials_alone_or_beside_others(tmp_path):
    """SMAC draws random configurations from its Scenario's ConfigurationSpace: each meta-seed's search
    must own its copy, or side-by-side searches share one generator (seeded by the last one started,
    drawn from in the order batches finish)."""
    for name, seeds in (("alone", "[2]"), ("beside", "[1, 2, 3]")):
        path = write(tmp_path, name, trials=16, seeds=seeds)
        # a space with few known designs, so that most trials are SMAC's own (random draws included)
        path.write_text(path.read_text().replace("meta:\n", "meta:\n  restriction: equal_only\n"))
        assert main(["optimize", str(path), "--quiet", "--workers", "2"]) == 0
    assert (tmp_path / "alone" / "meta" / "trials-seed-2.jsonl").read_bytes() == \
        (tmp_path / "beside" / "meta" / "trials-seed-2.jsonl").read_bytes()


BASELINES = """
name: meta_baselines
benchmark: synthetic:mlp
budget: 4d
meta:
  instances: {{split: train, limit: 2}}
  restriction: table4
  trials: 6
  seeds: [1]
  baselines: [random, seeds]
  noise_seeds: 2
output: {out}
"""


def test_meta_level_baselines_and_noise(tmp_path, capsys):
    """The baselines spend the search's trials on random configurations (each on every training
    instance in turn) and run every known design on every instance, all with the search's inner
    seed; the noise re-runs give gamma* one mean objective per extra seed; a rerun runs nothing."""
    path = tmp_path / "b.yaml"
    path.write_text(BASELINES.format(out=tmp_path / "b"))
    assert main(["optimize", str(path), "--quiet"]) == 0
    store = StudyStore(tmp_path / "b")
    search = log(tmp_path / "b", 1)
    logs = store.baseline_trials_logs()
    assert sorted(logs) == ["random", "seeds"]
    random = pd.read_json(logs["random"][0], lines=True)
    assert len(random) == 6 and set(random["seed"]) == set(search["seed"])
    assert list(random["instance"]) == list(random["instance"][:2]) * 3  # each configuration on both, in order
    assert random.groupby("hash", sort=False)["instance"].count().tolist() == [2, 2, 2]
    seeds = pd.read_json(logs["seeds"][0], lines=True)
    assert len(seeds) % 2 == 0 and seeds["hash"].nunique() == len(seeds) // 2 >= 3
    noise = pd.read_csv(store.noise_csv)
    star = json.loads(store.gamma_star_json.read_text())
    assert (noise[noise["design"] == "gamma*"]["hash"] == star["hash"]).all()
    assert noise.groupby("design")["seed"].count().eq(2).all()
    assert not set(noise["seed"]) & set(search["seed"])
    capsys.readouterr()
    runs = len(list(store.meta_runs_dir.glob("*/*/seed-*.json")))
    assert main(["optimize", str(path), "--quiet"]) == 0
    assert len(list(store.meta_runs_dir.glob("*/*/seed-*.json"))) == runs
    assert "the search is not rerun" in capsys.readouterr().out


def test_a_search_continues_from_its_exported_meta_archive(tmp_path, capsys):
    """A slice stopped by --stop-after writes no archive; its runs exported to a compact meta-archive
    and read by meta.archive on a fresh store give exactly an uninterrupted search's archive and gamma*."""
    whole = write(tmp_path, "whole", trials=8, seeds="[1]")
    assert main(["optimize", str(whole), "--quiet"]) == 0
    sliced = tmp_path / "sliced.yaml"
    exported = tmp_path / "meta_runs.jsonl.gz"
    sliced.write_text(whole.read_text().replace(str(tmp_path / "whole"), str(tmp_path / "sliced"))
                      .replace("  seeds: [1]\n", f"  seeds: [1]\n  archive: {exported}\n", 1))
    capsys.readouterr()
    assert main(["optimize", str(sliced), "--quiet", "--stop-after", "0s"]) == 0
    assert "stopped at the --stop-after limit (4 of 8 trials, 0 of them from the store" in capsys.readouterr().out
    store = StudyStore(tmp_path / "sliced")
    assert not store.archive_csv.exists() and len(log(tmp_path / "sliced", 1)) == 4  # the first batch only
    assert main(["study", "export-meta", str(tmp_path / "sliced")]) == 0
    import shutil

    shutil.rmtree(tmp_path / "sliced")  # another machine: only the exported file is left
    capsys.readouterr()
    assert main(["optimize", str(sliced), "--quiet"]) == 0
    assert "(4 from the store" in capsys.readouterr().out
    assert results(tmp_path / "sliced") == results(tmp_path / "whole")
    # the export holds what the store holds, and is refused when damaged
    assert main(["study", "export-meta", str(tmp_path / "sliced"), "--out", str(tmp_path / "again.jsonl.gz")]) == 0
    import gzip

    assert len(gzip.decompress((tmp_path / "again.jsonl.gz").read_bytes()).splitlines()) == 8 + 1  # and the log
    exported.write_bytes(gzip.compress(b'{"hash": "x"}\n'))
    shutil.rmtree(tmp_path / "sliced")
    capsys.readouterr()
    assert main(["optimize", str(sliced), "--quiet"]) == 2
    assert "line 1 is not a finished run record" in capsys.readouterr().err


@pytest.mark.parametrize("value", ["abc", "-5m", "nanh"])
def test_stop_after_must_be_a_duration(tmp_path, value, capsys):
    path = write(tmp_path, "d")
    assert main(["optimize", str(path), f"--stop-after={value}"]) == 2
    assert "expected a duration" in capsys.readouterr().err


def test_multi_fidelity_search_over_the_inner_budget(tmp_path):
    """meta.fidelity: SMAC's Hyperband over the inner budget; each SMAC trial runs on every training
    instance; runs below the full budget are stored under their own name with their inner budget,
    kept out of archive.csv (gamma* is chosen at the full budget) and cheaper than full runs."""
    path = tmp_path / "mf.yaml"
    path.write_text(STUDY.format(trials=36, out=tmp_path / "mf").replace(
        "  seeds: [1, 2]\n", "  seeds: [1]\n  fidelity: {min_budget: 0.25, eta: 2}\n", 1))
    assert main(["optimize", str(path), "--quiet"]) == 0
    out = tmp_path / "mf" / "meta"
    trials = log(tmp_path / "mf", 1)
    assert len(trials) >= 36 and len(trials) % 3 == 0
    low = trials[trials["inner_budget"].notna()]
    assert set(low["inner_budget"]) <= {0.25, 0.5} and len(low) > 0
    assert all(h.endswith(f"@{b:g}") for h, b in zip(low["hash"], low["inner_budget"]))
    # each SMAC trial: one configuration at one budget on all three instances, in order
    for start in range(0, len(trials), 3):
        group = trials.iloc[start:start + 3]
        assert group["hash"].nunique() == 1 and group["instance"].nunique() == 3
    archive = pd.read_csv(out / "archive.csv")
    assert not archive["hash"].str.contains("@").any()
    assert len(pd.read_csv(out / "archive_lower_budgets.csv")) == len(low)
    record = json.loads(next((out / "runs").glob("*@0.25/*/seed-*.json")).read_text())
    assert record["inner_budget"] == 0.25 and record["summary"]["budget"] == pytest.approx(record["summary"]["budget"])
    full = json.loads(next(p for p in (out / "runs").glob("*/*/seed-*.json") if "@" not in str(p)).read_text())
    assert record["summary"]["budget"] == pytest.approx(0.25 * full["summary"]["budget"])
    star = json.loads((out / "gamma_star.json").read_text())
    assert "@" not in star["hash"] and star["n_instances"] == 3
    # its compact meta-archive keeps each run's inner budget, and reads back as the store's runs
    from metaopt.stages.meta import export_meta_runs
    from metaopt.store.meta_archive import load_cache, read_meta_runs

    count = export_meta_runs(StudyStore(tmp_path / "mf"), tmp_path / "mf.jsonl.gz", max_evals=None,
                             objective=None)
    records = read_meta_runs(tmp_path / "mf.jsonl.gz")
    assert count == len(records) == len(load_cache(StudyStore(tmp_path / "mf"), None, max_evals=None,
                                                                         objective=None))
    assert sum("inner_budget" in r for r in records) == len(list((out / "runs").glob("*@*/*/seed-*.json")))


def test_a_multi_fidelity_search_takes_the_known_designs_into_its_brackets_first(tmp_path, capsys):
    """SMAC lists its multi-fidelity initial design's random configurations before the additional ones;
    known_designs_first puts the known designs first and keeps SMAC's configurations and their count,
    so a multi-fidelity search's first Hyperband brackets run the presets, as the one-fidelity search
    starts from them."""
    from ConfigSpace import Configuration, ConfigurationSpace, Float
    from smac import MultiFidelityFacade, Scenario

    from metaopt.core.benchmarks import get_benchmark
    from metaopt.core.smac_utils import known_designs_first
    from metaopt.spaces.design_space import validate
    from metaopt.spaces.presets import PRESETS

    space = ConfigurationSpace(seed=0)
    space.add([Float("x", (0.0, 1.0)), Float("y", (0.0, 1.0))])
    known = [Configuration(space, values={"x": 0.5, "y": v}) for v in (0.1, 0.2, 0.3)]
    scenario = Scenario(space, deterministic=True, n_trials=40, min_budget=0.25, max_budget=1.0, seed=3,
                        output_directory=tmp_path / "smac")
    smac_order = MultiFidelityFacade.get_initial_design(scenario, additional_configs=known).select_configurations()
    assert smac_order[-3:] == known and len(smac_order) > 3  # SMAC's own (random) ones first
    ours = known_designs_first(MultiFidelityFacade.get_initial_design(scenario, additional_configs=known))
    assert ours.select_configurations() == known + smac_order[:-3]

    # a search: its first Hyperband rung (4 configurations at a quarter of the inner budget, eta 2) runs presets
    path = tmp_path / "mf.yaml"
    path.write_text(STUDY.format(trials=36, out=tmp_path / "mf").replace(
        "  seeds: [1, 2]\n", "  seeds: [1]\n  fidelity: {min_budget: 0.25, eta: 2}\n", 1))
    assert main(["optimize", str(path), "--quiet"]) == 0
    bench = get_benchmark("synthetic:mlp", None)
    fidelity = bench.problem(bench.instances[0]).fidelity
    presets = set()
    for preset in PRESETS.values():
        try:
            presets.add(gamma_hash(validate(preset.config(fidelity))))
        except (UsageError, ValueError, KeyError, TypeError):
            continue
    first = list(dict.fromkeys(h.split("@")[0] for h in log(tmp_path / "mf", 1)["hash"]))[:4]
    assert len(first) == 4 and set(first) <= presets

    # successive halving: every design starts at a quarter of the inner budget, the presets first again
    halving = tmp_path / "sh.yaml"
    halving.write_text(path.read_text().replace("eta: 2}", "eta: 2, brackets: successive_halving}")
                       .replace(str(tmp_path / "mf"), str(tmp_path / "sh")))
    assert main(["optimize", str(halving), "--quiet"]) == 0
    trials = log(tmp_path / "sh", 1)
    first_budget = {}
    for h, b in zip(trials["hash"], trials["inner_budget"]):
        first_budget.setdefault(h.split("@")[0], b)
    assert set(first_budget.values()) == {0.25}  # no design starts above min_budget
    assert set(list(first_budget)[:4]) <= presets
    halving.write_text(halving.read_text().replace("successive_halving", "sideways"))
    assert main(["optimize", str(halving), "--quiet"]) == 2
    assert "field 'meta.fidelity.brackets'" in capsys.readouterr().err


def test_best_designs_of_an_archive_ranks_the_best_covered_designs_by_their_mean():
    from metaopt.store.meta_archive import best_designs

    def record(h, instance, seed, objective, **extra):
        return {"hash": h, "gamma": {"name": h}, "instance": instance, "seed": seed, "objective": objective, **extra}

    records = [record("a", "1", 1, 0.3), record("a", "2", 1, 0.1), record("a", "2", 2, 0.3),  # a: (0.3 + 0.2) / 2
               record("b", "1", 1, 0.2), record("b", "2", 1, 0.2),  # b: 0.2, the best on both instances
               record("c", "1", 1, 0.0),  # c: on one instance only, so not comparable
               record("d@0.333", "1", 1, 0.0, inner_budget=0.333), record("d@0.333", "2", 1, 0.0, inner_budget=0.333)]
    assert [(h, mean) for h, _, mean in best_designs(records, 5)] == [("b", pytest.approx(0.2)),
                                                                      ("a", pytest.approx(0.25))]
    assert [h for h, _, _ in best_designs(records, 1)] == ["b"]
    assert best_designs(records[-2:], 3) == []


def test_a_study_warm_starts_from_another_studys_meta_archive(tmp_path, capsys):
    """Transfer between scenarios: the best designs of one study's exported search join the initial
    design of a search on another benchmark, after the presets, named by archive and rank."""
    from metaopt.store.meta_archive import best_designs, read_meta_runs

    source = write(tmp_path, "source", trials=8, seeds="[1]")
    assert main(["optimize", str(source), "--quiet"]) == 0
    exported = tmp_path / "source.jsonl.gz"
    assert main(["study", "export-meta", str(tmp_path / "source"), "--out", str(exported)]) == 0
    best = best_designs(read_meta_runs(exported), 2)
    assert len(best) == 2
    target = tmp_path / "target.yaml"
    target.write_text(STUDY.format(trials=8, out=tmp_path / "target")
                      .replace("synthetic:mlp", "synthetic:boosting")
                      .replace("  seeds: [1, 2]\n", f"  seeds: [1]\n  initial_presets: false\n"
                                                    f"  warm_start: [{{archive: {exported}, top: 2}}]\n", 1))
    capsys.readouterr()
    assert main(["optimize", str(target), "--quiet"]) == 0
    assert f"2 known designs for SMAC's initial design (as many as its trials leave room for, in this order): " \
           f"{exported}#1, {exported}#2" in capsys.readouterr().out
    assert {h for h, _, _ in best} <= set(log(tmp_path / "target", 1)["hash"])  # SMAC ran them
    # a missing archive is one line naming the field, before anything is written
    target.write_text(target.read_text().replace(str(exported), str(tmp_path / "nowhere.jsonl.gz"))
                      .replace(str(tmp_path / "target"), str(tmp_path / "other")))
    assert main(["optimize", str(target), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "meta.warm_start[0].archive" in err
    assert not (tmp_path / "other").exists()


def test_smac_races_designs_over_inner_seeds(tmp_path, capsys):
    """meta.inner_seeds = 2: SMAC's intensifier runs designs on (instance, seed) pairs of two seeds and
    its incumbent on all of them; γ*'s mean averages the seeds of each instance first."""
    path = write(tmp_path, "raced", trials=16, seeds="[1]")
    path.write_text(path.read_text().replace("  seeds: [1]\n", "  seeds: [1]\n  inner_seeds: 2\n", 1))
    assert main(["optimize", str(path), "--quiet"]) == 0
    archive = pd.read_csv(tmp_path / "raced" / "meta" / "archive.csv")
    assert archive["seed"].nunique() == 2
    pairs = archive.groupby("hash")[["instance", "seed"]].apply(lambda t: len(set(zip(t["instance"], t["seed"]))))
    assert pairs.max() > 3  # a design raced on more (instance, seed) pairs than there are instances
    star = json.loads((tmp_path / "raced" / "meta" / "gamma_star.json").read_text())
    mine = archive[archive["hash"] == star["hash"]]
    assert star["mean_objective"] == pytest.approx(mine.groupby("instance")["objective"].mean().mean())
    # racing is the algorithm-configuration search's
    path.write_text(path.read_text().replace("  inner_seeds: 2\n", "  inner_seeds: 2\n  optimizer: random\n", 1)
                    .replace(str(tmp_path / "raced"), str(tmp_path / "other")))
    capsys.readouterr()
    assert main(["optimize", str(path), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "inner_seeds" in err and not (tmp_path / "other").exists()


def test_the_best_known_design_is_always_a_selection_candidate():
    """The search's best are its luckiest runs too: the best known design joins the candidates (once),
    so that a proposed design becomes gamma* only by beating it on the selection's fresh seeds."""
    from metaopt.stages.meta import _known_design_runs, _with_best_known_design

    rows = [("lucky", "1", 0.0), ("lucky", "2", 0.0), ("second", "1", 0.1), ("second", "2", 0.0),
            ("preset", "1", 0.1), ("preset", "2", 0.1), ("worse_preset", "1", 0.3), ("worse_preset", "2", 0.3)]
    archive = pd.DataFrame([{"hash": h, "instance": i, "seed": 1, "objective": o} for h, i, o in rows])
    known = {"preset": "bohb", "worse_preset": "rs"}
    known_runs = _known_design_runs(archive, {}, known, ["1", "2"], [1])
    pool = selection_pool(archive, ["1", "2"], 2)
    assert list(pool.index) == ["lucky", "second"]
    with_known = _with_best_known_design(pool, known_runs, ["1", "2"])
    assert list(with_known.index) == ["lucky", "second", "preset"]
    assert with_known.loc["preset", "difference"] == pytest.approx(0.1)
    wide = selection_pool(archive, ["1", "2"], 3)
    assert _with_best_known_design(wide, known_runs, ["1", "2"]).equals(wide)  # already a candidate
    none_known = _known_design_runs(archive, {}, {}, ["1", "2"], [1])
    assert _with_best_known_design(pool, none_known, ["1", "2"]).equals(pool)  # no known design


def test_a_known_design_the_search_dropped_is_a_candidate_through_the_seeds_baseline():
    """A multi-fidelity search (or SMAC's racing) may never run a known design on every instance at
    the full budget; the seeds baseline's full runs (found in the cache, with the search's seed) make
    it the best known design, and so a selection candidate with its own configuration."""
    from metaopt.stages.meta import _best_known_design, _known_design_runs

    archive = pd.DataFrame([{"hash": h, "instance": i, "seed": 7, "objective": o}
                            for h, i, o in [("found", "1", 0.2), ("found", "2", 0.2), ("preset", "1", 0.5)]])
    known = {"preset": "bohb", "dropped": "smac_like"}
    cache = {("dropped", "1", 7): {"objective": 0.1}, ("dropped", "2", 7): {"objective": 0.1},
             ("preset", "2", 7): {"objective": 0.5}, ("dropped", "1", 8): {"objective": 0.0}}
    assert _best_known_design(_known_design_runs(archive, {}, known, ["1", "2"], [7]), ["1", "2"]) is None
    runs = _known_design_runs(archive, cache, known, ["1", "2"], [7])
    assert len(runs) == 4  # the archive's preset run once, not again from the cache; seed 8 is not the search's
    best, mean = _best_known_design(runs, ["1", "2"])
    assert best == "dropped" and mean == pytest.approx(0.1)


def test_a_hyperparameter_added_at_its_neutral_default_keeps_every_designs_hash():
    """A design written to an archive before a hyperparameter existed and the same design completed in
    today's space (the new hyperparameter at its default) are one design: the same hash, so stored runs
    are found and a preset is still its known design; any other value is another design."""
    from metaopt.spaces.design_space import design_space, validate
    from metaopt.spaces.presets import get_preset
    from metaopt.store.meta_archive import HASH_NEUTRAL_DEFAULTS

    from metaopt.core.benchmarks.base import Fidelity

    space = design_space()
    for name, value in HASH_NEUTRAL_DEFAULTS.items():
        assert space[name].default_value == value, name
    seen = set()
    # the forest's caps are active in cfo_then_rf, the fidelity floor in bohb's Hyperband schedule
    for preset in ("cfo_then_rf", "bohb"):
        gamma = validate(get_preset(preset).config(Fidelity("epoch", 1, 52, True)))
        active = [name for name in HASH_NEUTRAL_DEFAULTS if name in gamma]
        assert active and all(gamma[name] == HASH_NEUTRAL_DEFAULTS[name] for name in active)
        seen.update(active)
        before = {k: v for k, v in gamma.items() if k not in HASH_NEUTRAL_DEFAULTS}
        assert gamma_hash(gamma) == gamma_hash(before)
        for name in active:  # each alone: a design from before only one of them existed
            assert gamma_hash({k: v for k, v in gamma.items() if k != name}) == gamma_hash(gamma)
    assert seen == set(HASH_NEUTRAL_DEFAULTS)
    gamma = validate(get_preset("cfo_then_rf").config(None))
    assert gamma_hash({**gamma, "rf_max_samples": 500}) != gamma_hash(gamma)
    assert gamma_hash({**gamma, "rf_max_samples_per_feature": 30}) != gamma_hash(gamma)
    bohb = validate(get_preset("bohb").config(Fidelity("epoch", 1, 52, True)))
    assert gamma_hash({**bohb, "fidelity_floor": 0.3}) != gamma_hash(bohb)


def test_a_finished_search_is_restored_from_its_meta_archive_without_replaying(tmp_path, capsys):
    """export-meta carries the search's trials logs: a finished search continued from its archive on
    another machine gets the same trials log, archive and gamma* byte for byte, and SMAC proposes
    nothing again; a damaged trials-log line is one error naming the file and line."""
    whole = write(tmp_path, "whole", trials=8, seeds="[1]")
    whole.write_text(whole.read_text().replace("  seeds: [1]\n", "  seeds: [1]\n  baselines: [random]\n", 1))
    assert main(["optimize", str(whole), "--quiet"]) == 0
    exported = tmp_path / "meta_runs.jsonl.gz"
    assert main(["study", "export-meta", str(tmp_path / "whole"), "--out", str(exported)]) == 0
    restored = tmp_path / "restored.yaml"
    restored.write_text(whole.read_text().replace(str(tmp_path / "whole"), str(tmp_path / "restored"))
                        .replace("  seeds: [1]\n", f"  seeds: [1]\n  archive: {exported}\n", 1))
    capsys.readouterr()
    import metaopt.stages.meta_search as meta_search

    proposed = []
    originals = {cls: cls._propose for cls in (meta_search.SmacSearch, meta_search.RandomSearch)}
    for cls, original in originals.items():
        cls._propose = lambda self, n, original=original: proposed.append(n) or original(self, n)
    try:
        assert main(["optimize", str(restored), "--quiet"]) == 0
    finally:
        for cls, original in originals.items():
            cls._propose = original
    assert proposed == []  # neither SMAC nor the random-search baseline was replayed
    assert f"8 trials restored from {exported}); the search is not rerun" in capsys.readouterr().out
    assert results(tmp_path / "restored") == results(tmp_path / "whole")
    for log_name in ("meta/trials-seed-1.jsonl", "meta/baselines/random/trials-seed-1.jsonl"):
        assert (tmp_path / "restored" / log_name).read_bytes() == (tmp_path / "whole" / log_name).read_bytes()
    import gzip

    lines = gzip.decompress(exported.read_bytes()).decode().splitlines()
    exported.write_bytes(gzip.compress(("\n".join(lines[:-1] + ['{"trials_log": {"meta_seed": 1}}']) + "\n").encode()))
    shutil_rmtree = __import__("shutil").rmtree
    shutil_rmtree(tmp_path / "restored")
    capsys.readouterr()
    assert main(["optimize", str(restored), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and f"line {len(lines)} is not a trials log" in err


ARMS = """
name: arms_tiny
benchmark: synthetic:mlp
budget: 3d
meta:
  instances: {{split: train, limit: 2}}
  restriction: [gamma1, hb_only]
  trials: 4
  batch_size: 2
  seeds: [1]
  archive: {archive}
output: {out}
"""


def test_a_study_of_several_restrictions_continues_from_one_meta_archive_per_arm(tmp_path, capsys):
    """export-meta writes one compact meta-archive per arm (the arm's name before the extensions, named
    inside too); a sliced search continued from them on a fresh store gives each arm the uninterrupted
    search's archive and gamma*; an arm's archive is refused by another design space's search."""
    import gzip
    import shutil

    from metaopt.store.meta_archive import best_designs, read_meta_runs

    whole = tmp_path / "whole.yaml"
    whole.write_text(ARMS.format(archive=tmp_path / "unused.jsonl.gz", out=tmp_path / "whole"))
    assert main(["optimize", str(whole), "--quiet"]) == 0
    archive = tmp_path / "meta_runs.jsonl.gz"
    sliced = tmp_path / "sliced.yaml"
    sliced.write_text(ARMS.format(archive=archive, out=tmp_path / "sliced"))
    assert main(["optimize", str(sliced), "--quiet", "--stop-after", "0s"]) == 0  # one batch of the first arm
    capsys.readouterr()
    assert main(["study", "export-meta", str(tmp_path / "sliced")]) == 0
    out = capsys.readouterr().out
    first, second = tmp_path / "meta_runs.gamma1.jsonl.gz", tmp_path / "meta_runs.hb_only.jsonl.gz"
    assert f"wrote 2 meta-optimization runs to {first}" in out and f"{second}: not written" in out
    assert not archive.exists() and not second.exists()
    assert gzip.decompress(first.read_bytes()).decode().splitlines()[0] == '{"meta_arm": "gamma1"}'
    shutil.rmtree(tmp_path / "sliced")  # another machine: only the exported file is left
    assert main(["optimize", str(sliced), "--quiet"]) == 0
    assert "(2 from the store" in capsys.readouterr().out
    for arm in ("gamma1", "hb_only"):
        assert results(tmp_path / "sliced" / "arms" / arm) == results(tmp_path / "whole" / "arms" / arm)
    assert main(["study", "export-meta", str(tmp_path / "sliced")]) == 0
    assert len(read_meta_runs(second)) == 4 and best_designs(read_meta_runs(second), 1)  # warm_start reads it
    # another design space's search refuses an arm's archive, and the archive's common name lists the arms'
    other = tmp_path / "other.yaml"
    other.write_text(ARMS.format(archive=second, out=tmp_path / "other").replace("[gamma1, hb_only]", "gamma1"))
    capsys.readouterr()
    assert main(["optimize", str(other), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "'meta.archive'" in err and "restriction hb_only" in err
    assert not (tmp_path / "other").exists()
    with pytest.raises(UsageError, match=f"one archive per arm: {first}, {second}"):
        read_meta_runs(archive)


def test_an_asinh_objective_counts_each_regret_read_by_its_order_of_magnitude():
    trace = pd.DataFrame({"budget_used": [1.0, 2.0, 4.0], "normalized_regret": [0.8, -0.05, -0.05]})
    budget = Budget(4.0)
    plain = meta_objective("regret_at", trace, budget, [0.25, 1.0])
    assert plain == pytest.approx((0.8 - 0.05) / 2)
    counted = meta_objective("regret_at", trace, budget, [0.25, 1.0], "asinh", 0.01)
    assert counted == pytest.approx((np.arcsinh(80.0) + np.arcsinh(-5.0)) / 2)  # the sign is kept
    # 'none' is the objective as it always was, bit for bit
    assert meta_objective("regret_at", trace, budget, [0.25, 1.0], "none", 0.01) == plain
    # a swing of 0.3 on one instance weighs less than a halving of regret on every one of eight
    swing = np.arcsinh(0.4 / 0.01) - np.arcsinh(0.1 / 0.01)
    halving = 8 * (np.arcsinh(0.02 / 0.01) - np.arcsinh(0.01 / 0.01))
    assert swing < halving and 0.3 > 8 * 0.01


def test_a_search_with_an_asinh_objective_stores_its_runs_apart_from_plain_regrets(tmp_path):
    """The same inner runs with ``objective: regret`` counted as they are and as asinh(regret / 0.05):
    each objective is the transform of the other, and neither search takes the other's stored runs,
    nor its exported archive's, for its own."""
    plain = write(tmp_path, "p", trials=4, seeds="[1]")
    text = plain.read_text().replace("  trials: 4", "  trials: 4\n  objective_transform: asinh\n  objective_scale: 0.05")
    counted = tmp_path / "q.yaml"
    counted.write_text(text.replace(f"output: {tmp_path / 'p'}", f"output: {tmp_path / 'q'}"))
    assert main(["optimize", str(plain), "--quiet"]) == 0
    first = log(tmp_path / "p", 1).iloc[0]
    # the run store of the plain search, under the other objective: none of its runs is reused
    import shutil
    shutil.copytree(tmp_path / "p" / "meta" / "runs", tmp_path / "q" / "meta" / "runs")
    assert main(["optimize", str(counted), "--quiet"]) == 0
    second = log(tmp_path / "q", 1)
    assert not second["cached"].any()
    assert second.iloc[0]["hash"] == first["hash"] and second.iloc[0]["instance"] == first["instance"]
    assert second.iloc[0]["objective"] == pytest.approx(np.arcsinh(first["objective"] / 0.05), rel=1e-12)
    record = json.loads(StudyStore(tmp_path / "q").meta_run_file(*record_key(second.iloc[0].to_dict())).read_text())
    assert record["objective_transform"] == "asinh/0.05"
    assert "objective_transform" not in json.loads(
        StudyStore(tmp_path / "p").meta_run_file(*record_key(first.to_dict())).read_text())
    # the exported archive keeps the tag: a search from it alone replays every run
    assert main(["study", "export-meta", str(tmp_path / "q"), "--out", str(tmp_path / "q.jsonl.gz")]) == 0
    assert all(r["objective_transform"] == "asinh/0.05" for r in read_meta_runs(tmp_path / "q.jsonl.gz"))
    again = tmp_path / "r.yaml"
    again.write_text(counted.read_text().replace(f"output: {tmp_path / 'q'}", f"output: {tmp_path / 'r'}")
                     .replace("  seeds: [1]\n", f"  seeds: [1]\n  archive: {tmp_path / 'q.jsonl.gz'}\n", 1))
    assert main(["optimize", str(again), "--quiet"]) == 0
    assert results(tmp_path / "r") == results(tmp_path / "q")
    # and the plain search refuses the asinh archive's runs as its own: it makes its own search again
    plain.write_text(plain.read_text().replace("  seeds: [1]\n", f"  seeds: [1]\n  archive: {tmp_path / 'q.jsonl.gz'}\n", 1)
                     .replace(f"output: {tmp_path / 'p'}", f"output: {tmp_path / 's'}"))
    assert main(["optimize", str(plain), "--quiet"]) == 0
    assert results(tmp_path / "s") == results(tmp_path / "p")


@pytest.mark.parametrize("field, value", [("objective_transform", "log"), ("objective_scale", 0)])
def test_a_bad_objective_transform_is_refused_naming_its_field(tmp_path, field, value):
    path = tmp_path / "bad.yaml"
    path.write_text(STUDY.format(trials=4, out=tmp_path / "bad").replace("  trials: 4", f"  trials: 4\n  {field}: {value}"))
    with pytest.raises(UsageError, match=f"field 'meta.{field}'"):
        load_study(path)


def test_the_default_is_listed_once_and_never_in_the_search_that_chose_it():
    """metaopt_default is default_switch_race's γ* with a fidelity and no_fidelity_switch_race's without one:
    a search lists each design once, leaves out every design it found itself or that was built on it, so
    that default_balanced_mf and no_fidelity_race keep the initial designs they had before those designs
    shipped (metaopt_balanced, the former metaopt_default, in its place; no metaopt_default)."""
    from metaopt.core.budget import Budget as B
    from metaopt.stages.meta import MetaSetup, known_designs
    from metaopt.spaces.design_space import design_space
    from metaopt.spaces.restrictions import get_restriction

    full = known_designs(_setup(), design_space())
    assert "metaopt_balanced" in full and "metaopt_default" in full
    switch = known_designs(_setup("default_then_rf"), get_restriction("default_then_rf").space())
    assert "metaopt_default" in switch
    assert "metaopt_default" not in known_designs(_setup("default_then_rf"), get_restriction("default_then_rf").space(),
                                                  found_by="default_switch_race")
    nofid = MetaSetup("pooled:full:synthetic:mlp+full:synthetic:rosenbrock", None, B.parse("4d", None), {},
                      "no_fidelity", "regret", (1.0,))
    space = get_restriction("no_fidelity").space()
    listed = list(known_designs(nofid, space))
    assert "smashy_lcbench_hb" in listed and "metaopt_balanced" in listed and "metaopt_default" in listed
    before = list(known_designs(nofid, space, found_by="no_fidelity_race"))
    # metaopt_cfo_gp shipped after no_fidelity_race too (its design file's left_out_by)
    assert before == [name for name in listed if name not in ("metaopt_default", "metaopt_cfo_gp")]
    balanced = known_designs(_setup(), design_space(), found_by="default_balanced_mf")
    assert "metaopt_balanced" not in balanced and "metaopt_default" not in balanced
