"""A meta-optimization on the simulated clock (``meta.clock``): every inner run on N simulated workers,
the meta-objective read against simulated time (a γ* for parallel use); its validation, determinism,
resume from the compact meta-archive, the archive's clock settings, and the multi-fidelity search's
shorter inner runs (stopped at a shorter simulated time)."""

import gzip
import json
import re
import shutil

import numpy as np
import pandas as pd
import pytest

from metaopt.cli import main
from metaopt.core.benchmarks import get_benchmark
from metaopt.core.budget import Budget
from metaopt.core.references import get_reference, typical_cost
from metaopt.engine.simclock import run
from metaopt.spaces.presets import PRESETS

STUDY = """
name: meta_clock
benchmark: synthetic:mlp
budget: 30d
meta:
  instances: {{split: train, limit: 2}}
  trials: 8
  seeds: [1]
  objective: regret_at
  objective_budgets: [0.5, 1.0]
  clock: {clock}
importance: false
output: {out}
"""

CLOCK = "{workers: 4, time_limit: 3dc}"
RESULTS = ("archive.csv", "gamma_star.json")


def write(tmp_path, name, clock=CLOCK, extra=""):
    path = tmp_path / f"{name}.yaml"
    path.write_text(STUDY.format(clock=clock, out=tmp_path / name) + extra)
    return path


def results(folder):
    """The bytes of a search's archive and gamma*."""
    return {name: (folder / "meta" / name).read_bytes() for name in RESULTS}


def time_limit_of(instance: str, amount: float = 3.0) -> float:
    """``amount``·d typical full evaluations of a synthetic:mlp instance, in simulated seconds."""
    bench = get_benchmark("synthetic:mlp")
    return amount * bench.d * typical_cost(bench, instance)


@pytest.mark.parametrize("clock,message", [
    ("{workers: 4}", r"meta\.clock\.time_limit'.*required"),
    ("{workers: 0, time_limit: 1h}", r"meta\.clock\.workers'.*one integer >= 1"),
    ("{workers: true, time_limit: 1h}", r"meta\.clock\.workers'.*one integer >= 1"),
    ("{workers: [4, 8], time_limit: 1h}", r"meta\.clock\.workers'.*one integer >= 1"),
    ("{workers: 4, time_limit: soon}", r"meta\.clock\.time_limit'.*simulated duration"),
    ("{workers: 4, time_limit: -5m}", r"meta\.clock\.time_limit'.*simulated duration"),
    ("{workers: 4, time_limit: 1h, speed: 2}", r"meta\.clock\.speed'.*not permitted"),
    (CLOCK, r"field 'meta'.*max_evals .* is for runs off the clock"),
])
def test_bad_meta_clock_fields_are_one_line_naming_the_field(tmp_path, capsys, clock, message):
    path = write(tmp_path, "bad", clock=clock)
    if clock == CLOCK:  # a valid clock with an evaluation cap, which stored runs on the clock cannot be checked against
        path.write_text(path.read_text().replace("  seeds: [1]\n", "  seeds: [1]\n  max_evals: 100\n"))
    assert main(["optimize", str(path), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and re.search(message, err), err
    assert not (tmp_path / "bad").exists()


@pytest.mark.parametrize("evaluation,message", [
    ("optimizers: [gamma_star, asha]", "evaluate on the clock with them too"),
    ("optimizers: [gamma_star, asha]\n  clock: {workers: [1, 2], time_limit: 3dc}", "searched for 4 simulated workers"),
])
def test_a_gamma_star_searched_on_the_clock_is_evaluated_on_the_clock_with_its_workers(tmp_path, capsys, evaluation,
                                                                                        message):
    path = write(tmp_path, "ev", extra=f"evaluation:\n  instances: {{split: test, limit: 2}}\n  {evaluation}\n")
    assert main(["optimize", str(path), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "field 'evaluation.clock'" in err and message in err, err
    assert not (tmp_path / "ev").exists()


def test_a_pooled_benchmark_needs_a_time_limit_that_does_not_depend_on_d(tmp_path, capsys):
    path = write(tmp_path, "pooled")
    path.write_text(path.read_text().replace("synthetic:mlp", "pooled:synthetic:mlp+synthetic:rosenbrock")
                    .replace("budget: 30d", "budget: 30d\n"))
    assert main(["optimize", str(path), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "field 'meta.clock.time_limit'" in err, err


def test_a_clock_search_runs_every_inner_run_on_the_clock_and_is_deterministic(tmp_path):
    """Every inner run has the study's workers and ends by the time limit (3dc, resolved per instance);
    the archive records simulated time and utilization, gamma* its clock; a second search in a fresh
    folder gives the same archive and gamma*, byte for byte."""
    assert main(["optimize", str(write(tmp_path, "a")), "--quiet"]) == 0
    out = tmp_path / "a" / "meta"
    records = [json.loads(p.read_text()) for p in sorted((out / "runs").glob("*/*/seed-*.json"))]
    assert len(records) >= 2
    for record in records:
        summary = record["summary"]
        assert summary["workers"] == 4 and summary["budget_spec"] == "30d"
        assert 0 < summary["sim_time"] <= time_limit_of(record["instance"]) and 0 < summary["utilization"] <= 1
    archive = pd.read_csv(out / "archive.csv")
    assert (archive["inner.sim_time"] > 0).all() and archive["inner.utilization"].between(0, 1).all()
    star = json.loads((out / "gamma_star.json").read_text())
    assert star["clock"] == {"workers": 4, "time_limit": "3dc"}
    assert main(["optimize", str(write(tmp_path, "b")), "--quiet"]) == 0
    assert results(tmp_path / "b") == results(tmp_path / "a")


def test_the_meta_objective_is_the_regret_at_the_time_limit_of_the_run_recomputed_from_its_trace(tmp_path):
    """A trial's objective is the mean normalized regret of the best result in by 1/2 and all of the
    simulated time limit, recomputed here from the trace of the same run made by `metaopt run` on the
    clock (the lowest normalized loss among the rows whose result arrived by each time)."""
    assert main(["optimize", str(write(tmp_path, "a")), "--quiet"]) == 0
    bench = get_benchmark("synthetic:mlp")
    records = [json.loads(p.read_text()) for p in sorted((tmp_path / "a" / "meta" / "runs").glob("*/*/seed-*.json"))]
    for k, record in enumerate(records[:3]):
        instance, limit = record["instance"], time_limit_of(record["instance"])
        config = tmp_path / f"gamma{k}.json"
        config.write_text(json.dumps(record["gamma"]))
        run_dir = tmp_path / f"run{k}"
        assert main(["run", "--config", str(config), "--benchmark", "synthetic:mlp", "--instance", instance,
                     "--budget", "30d", "--seed", str(record["seed"]), "--sim-workers", "4",
                     "--sim-time", f"{limit!r}s", "--quiet", "--out", str(run_dir)]) == 0
        trace = pd.read_csv(run_dir / "trace.csv")
        assert (trace["sim_time"] <= limit).all()
        reference = get_reference(bench, instance)
        regret = [reference.normalize(trace.loc[trace["sim_time"] <= t, "loss"].min()) for t in (limit / 2, limit)]
        assert record["objective"] == pytest.approx(np.mean(regret), rel=1e-12, abs=1e-12)
        assert json.loads((run_dir / "summary.json").read_text())["final_loss"] == record["summary"]["final_loss"]


def test_a_clock_search_continues_from_its_meta_archive_and_other_clock_settings_are_refused(tmp_path, capsys):
    """A slice stopped after its first batch, exported, continued on a fresh store from the compact
    meta-archive alone, gives the uninterrupted search's archive and gamma*. The archive records the
    clock settings: a study with other workers, another time limit or no clock refuses it with one line,
    and a clock study refuses an archive of runs off the clock."""
    whole = write(tmp_path, "whole")
    assert main(["optimize", str(whole), "--quiet"]) == 0
    exported = tmp_path / "meta_runs.jsonl.gz"
    sliced = write(tmp_path, "sliced").read_text().replace("  seeds: [1]\n", f"  seeds: [1]\n  archive: {exported}\n")
    (tmp_path / "sliced.yaml").write_text(sliced)
    assert main(["optimize", str(tmp_path / "sliced.yaml"), "--quiet", "--stop-after", "0s"]) == 0
    assert main(["study", "export-meta", str(tmp_path / "sliced")]) == 0
    lines = gzip.decompress(exported.read_bytes()).decode().splitlines()
    assert json.loads(lines[0]) == {"meta_clock": {"workers": 4, "time_limit": "3dc"}}
    shutil.rmtree(tmp_path / "sliced")  # another machine: only the exported file is left
    capsys.readouterr()
    assert main(["optimize", str(tmp_path / "sliced.yaml"), "--quiet"]) == 0
    assert "(4 from the store" in capsys.readouterr().out
    assert results(tmp_path / "sliced") == results(tmp_path / "whole")
    # a finished search's archive restores it without SMAC proposing again: the same gamma*
    assert main(["study", "export-meta", str(tmp_path / "sliced")]) == 0
    shutil.rmtree(tmp_path / "sliced")
    capsys.readouterr()
    assert main(["optimize", str(tmp_path / "sliced.yaml"), "--quiet"]) == 0
    assert "finished earlier" in capsys.readouterr().out
    assert results(tmp_path / "sliced") == results(tmp_path / "whole")

    for k, clock in enumerate(["{workers: 2, time_limit: 3dc}", "{workers: 4, time_limit: 2dc}", None]):
        other = tmp_path / f"other{k}.yaml"
        text = sliced.replace(str(tmp_path / "sliced"), str(tmp_path / f"other{k}"))
        other.write_text(text.replace(f"clock: {CLOCK}", f"clock: {clock}") if clock else
                         text.replace(f"  clock: {CLOCK}\n", ""))
        capsys.readouterr()
        assert main(["optimize", str(other), "--quiet"]) == 2
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and "field 'meta.clock'" in err
        assert "with 4 workers and time limit 3dc" in err and not (tmp_path / f"other{k}").exists()
    # runs off the clock are refused by a clock study
    off = write(tmp_path, "off")
    off.write_text(off.read_text().replace(f"  clock: {CLOCK}\n", ""))
    assert main(["optimize", str(off), "--quiet", "--stop-after", "0s"]) == 0
    assert main(["study", "export-meta", str(tmp_path / "off"), "--out", str(tmp_path / "off.jsonl.gz")]) == 0
    (tmp_path / "clock.yaml").write_text(sliced.replace(str(exported), str(tmp_path / "off.jsonl.gz"))
                                         .replace(str(tmp_path / "sliced"), str(tmp_path / "clock")))
    capsys.readouterr()
    assert main(["optimize", str(tmp_path / "clock.yaml"), "--quiet"]) == 2
    assert "holds runs made off the simulated clock" in capsys.readouterr().err


def test_a_multi_fidelity_clock_search_stops_its_cheap_runs_at_a_shorter_simulated_time(tmp_path):
    """meta.fidelity on the clock: a run at b < 1 of the inner budget has the study's budget and stops
    at b·T (T: the time limit); its objective is read at b·T. Its records keep the inner budget."""
    path = write(tmp_path, "mf")
    path.write_text(path.read_text().replace("  trials: 8\n", "  trials: 12\n  fidelity: {min_budget: 0.12, eta: 3}\n")
                    .replace("objective: regret_at", "objective: regret"))
    assert main(["optimize", str(path), "--quiet"]) == 0
    records = [json.loads(p.read_text()) for p in (tmp_path / "mf" / "meta" / "runs").glob("*/*/seed-*.json")]
    low = [r for r in records if "inner_budget" in r]
    assert low and len(low) < len(records)
    for record in records:
        fraction = record.get("inner_budget", 1.0)
        limit = time_limit_of(record["instance"]) * fraction
        assert record["summary"]["budget_spec"] == "30d" and record["summary"]["sim_time"] <= limit


@pytest.mark.parametrize("name", ["asha", "async_bohb"])
def test_an_asynchronous_run_stopped_at_a_shorter_simulated_time_is_a_prefix_of_the_longer_run(name):
    """What a multi-fidelity clock search's cheap run is: for an asynchronous design, the run with time
    limit b·T has exactly the rows of the run with limit T whose results arrived by b·T, so its
    meta-objective is the longer run's read at b·T."""
    from metaopt.stages.meta_search import clock_objective

    bench = get_benchmark("synthetic:mlp")
    for instance in bench.instances_of("train")[:2]:
        problem, reference = bench.problem(instance), get_reference(bench, instance)
        config = PRESETS[name].config(problem.fidelity)
        limit = time_limit_of(instance)
        longer = run(config, problem, 3, Budget.parse("30d", bench.d), reference=reference, workers=4,
                     time_limit=limit)
        for fraction in (1 / 9, 1 / 3):
            shorter = run(config, problem, 3, Budget.parse("30d", bench.d), reference=reference, workers=4,
                          time_limit=fraction * limit)
            prefix = longer.trace[longer.trace["sim_time"] <= fraction * limit].reset_index(drop=True)
            columns = ["loss", "cost", "worker", "sim_start", "sim_time"]
            pd.testing.assert_frame_equal(shorter.trace[columns], prefix[columns])
            for kind in ("regret", "regret_at", "auc"):
                assert clock_objective(kind, shorter.trace, reference, fraction * limit, [0.5, 1.0]) == \
                    clock_objective(kind, prefix, reference, fraction * limit, [0.5, 1.0])


def test_a_clock_study_evaluates_its_gamma_star_on_the_clock_beside_the_asynchronous_presets(tmp_path):
    """`study run` of a study with meta.clock and evaluation.clock: gamma* is evaluated with the search's
    workers and time limit, stored as gamma_star@w4 beside asha@w4, and drawn on the clock's curves."""
    path = write(tmp_path, "study", extra="evaluation:\n  instances: {split: test, limit: 2}\n  seeds: 1\n"
                                         "  clock: {workers: [4], time_limit: 3dc}\n  optimizers: [gamma_star, asha]\n")
    assert main(["study", "run", str(path), "--quiet"]) == 0
    runs = tmp_path / "study" / "eval" / "runs"
    star = json.loads((tmp_path / "study" / "meta" / "gamma_star.json").read_text())
    for name in ("gamma_star@w4", "asha@w4"):
        for summary_file in (runs / name).glob("*/seed-1/summary.json"):
            summary = json.loads(summary_file.read_text())
            assert summary["workers"] == 4 and summary["sim_time"] <= time_limit_of(summary_file.parts[-3])
            if name.startswith("gamma_star"):
                assert summary["config"] == star["config"]
    assert len(list(runs.glob("*/*/seed-1/summary.json"))) == 4
    curves = pd.read_csv(tmp_path / "study" / "eval" / "anytime_clock.csv")
    assert set(curves["optimizer"]) == {"gamma_star", "asha"} and set(curves["workers"]) == {4}
