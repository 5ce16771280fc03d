"""`metaopt bench`: its sections end to end on a synthetic benchmark, its report, and its errors."""

import json
import re

import pytest

from metaopt.cli import main

OVERHEAD_COLUMNS = ["benchmark", "optimizer", "runs", "evals", "batches", "run [s]", "limit [s]", "run / limit",
                    "ms per batch"]


def test_bench_quick_overhead_writes_json_and_markdown(tmp_path, capsys):
    out, md = tmp_path / "results.json", tmp_path / "benchmarks.md"
    argv = ["bench", "--quick", "--sections", "overhead", "--benchmarks", "synthetic:mlp",
            "--out", str(out), "--md", str(md)]
    assert main(argv) == 0
    results = json.loads(out.read_text())
    assert {"date", "cpu", "cores", "python", "packages"} <= results["machine"].keys()
    assert {"smac", "numpy", "ConfigSpace", "yahpo-gym"} <= results["machine"]["packages"].keys()
    assert results["command"].startswith("metaopt bench --sections overhead --quick --benchmarks synthetic:mlp")
    assert list(results["sections"]) == ["overhead"]
    rows = results["sections"]["overhead"]["rows"]
    measured = {r["optimizer"] for r in rows}
    skipped = {s["optimizer"] for s in results["sections"]["overhead"]["skipped"]}
    assert measured | skipped == set(results["config"]["overhead_optimizers"]) and {"rs", "hb", "bo_gp_ei"} <= measured
    for row in rows:
        assert row["benchmark"] == "synthetic:mlp" and row["evals"] > 0
        # times are measured, not asserted against each other: no test may depend on timing
        assert row["run_s"] > 0 and row["limit_s"] > 0 and abs(row["ratio"] - row["run_s"] / row["limit_s"]) < 1e-9
    text = md.read_text()
    assert text.startswith("# Benchmarks") and results["machine"]["date"] in text
    assert "| " + " | ".join(OVERHEAD_COLUMNS) + " |" in text
    assert results["command"] in text
    assert sum(line.startswith("| synthetic:mlp |") for line in text.splitlines()) == len(measured)

    # The report alone is regenerated from the JSON.
    md.unlink()
    assert main(["bench", "--report-only", "--out", str(out), "--md", str(md)]) == 0
    assert md.read_text() == text

    # Another section added to an older result (as written before sections were stamped): the old
    # section is kept with its own date and command.
    results["machine"]["date"] = "2026-01-01T00:00:00+00:00"
    del results["sections"]["overhead"]["measured"]
    out.write_text(json.dumps(results))
    assert main(["bench", "--quick", "--sections", "api", "--benchmarks", "synthetic:mlp", "--keep-other-sections",
                 "--out", str(out), "--md", str(md)]) == 0
    merged = json.loads(out.read_text())
    assert list(merged["sections"]) == ["overhead", "api"] and "--keep-other-sections" in merged["command"]
    assert merged["sections"]["overhead"]["rows"] == rows
    assert merged["sections"]["overhead"]["measured"]["date"] == "2026-01-01T00:00:00+00:00"
    assert merged["sections"]["api"]["measured"]["date"] == merged["machine"]["date"] != "2026-01-01T00:00:00+00:00"
    text = md.read_text()
    assert "Sections measured at different times:" in text
    assert f"- overhead: 2026-01-01T00:00:00+00:00, commit {results['machine'].get('git_commit') or 'unknown'} " \
           f"(`{results['command']}`)" in text


def test_bench_bad_flags_are_one_line_errors(tmp_path, capsys):
    for argv, fragment in [(["--sections", "overhead,speed"], "unknown section(s) speed"),
                           (["--seeds", "0"], "--seeds: must be an integer >= 1, got 0"),
                           (["--benchmarks", "synthetic:nope"], "unknown benchmark"),
                           (["--report-only", "--out", str(tmp_path / "missing.json")], "file not found"),
                           (["--sections", "baseline"], "--baseline REV and the section 'baseline' go together"),
                           (["--sections", "meta", "--baseline", "HEAD"], "go together"),
                           (["--sections", "baseline", "--baseline", "no-such-rev"], "'no-such-rev' is not a commit")]:
        assert main(["bench", "--md", str(tmp_path / "b.md"), *argv]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("metaopt: error: ") and fragment in err[0], err
    assert not (tmp_path / "b.md").exists()


def test_bench_api_section_compares_minimize_with_run(tmp_path, capsys):
    out, md = tmp_path / "results.json", tmp_path / "benchmarks.md"
    assert main(["bench", "--quick", "--sections", "api", "--benchmarks", "synthetic:mlp", "--seeds", "1",
                 "--out", str(out), "--md", str(md)]) == 0
    rows = json.loads(out.read_text())["sections"]["api"]["rows"]
    assert {r["optimizer"] for r in rows} == {"hb", "smashy_lcbench_hb", "cfo"}
    for row in rows:  # on a synthetic benchmark both drivers give the same losses
        assert row["same_length"] and row["max_loss_difference"] == 0.0
        # the four times are all measured; how they compare is the harness's finding, never a test's
        assert all(row[k] > 0 for k in ("minimize_s", "per_config_limit_s", "run_s", "batched_limit_s"))
    text = md.read_text()
    assert "## 5. The Python API (ask/tell) against the batched loop" in text and "own-time ratio" in text


def test_peer_comparison_pairs_runs_and_averages_seeds_per_instance():
    from metaopt.bench.report import peer_comparisons

    def row(kind, name, instance, seed, regret):
        return {"kind": kind, "optimizer": name, "benchmark": "b", "instance": instance, "seed": seed,
                "run_s": 1.0, "normalized_regret": regret}

    rows = [row("ours", "cfo_tuned", i, s, 0.1 * i + 0.01 * s) for i in (1, 2, 3) for s in (1, 2)]
    # the peer: worse by 0.1 on instance 1 (both seeds), better by 0.04 on 2 and 3; one unpaired run ignored
    rows += [row("peer", "flaml_cfo", 1, s, 0.1 + 0.01 * s + 0.1) for s in (1, 2)]
    rows += [row("peer", "flaml_cfo", i, s, 0.1 * i + 0.01 * s - 0.04) for i in (2, 3) for s in (1, 2)]
    rows += [row("peer", "flaml_cfo", 9, 1, 0.0)]
    (c,) = peer_comparisons({"rows": rows, "counterparts": {"flaml_cfo": "cfo_tuned"}})
    assert (c["n"], c["n_instances"], c["peer_better"]) == (6, 3, 2)
    assert abs(c["regret_delta"] - (0.1 - 0.04 - 0.04) / 3) < 1e-12
    deltas = [0.1, -0.04, -0.04]
    se = (sum((d - sum(deltas) / 3) ** 2 for d in deltas) / 2) ** 0.5 / 3 ** 0.5
    assert abs(c["regret_delta_se"] - se) < 1e-12
    # the paired test is over instances (seed means), not over runs
    from scipy.stats import wilcoxon
    assert c["p_wilcoxon"] == wilcoxon(deltas).pvalue != wilcoxon([0.1, 0.1] + [-0.04] * 4).pvalue


def test_a_parallel_speed_up_measured_under_load_is_not_reported():
    from metaopt.bench.report import _meta

    def row(workers, busy, runs_per_s):
        return {"workers": workers, "busy_cores_before": busy, "trials": 24, "failed": 0, "wall_s": 10.0,
                "startup_s": 1.0, "runs_per_s": runs_per_s, "speedup": runs_per_s, "inner_run_s_mean": 1.0,
                "outside_inner_share": 0.1, "projected_study_h": 1.0,
                "speedup_valid": busy is not None and busy <= 0.2}

    section = {"study": "s.yaml", "benchmark": "b", "budget": "30d", "restriction": None, "instances": ["1"],
               "meta_seeds": [1, 2, 3], "study_meta_seeds": 3, "study_trials": 600, "study_runs": 1800,
               "rows": [row(1, 0.05, 1.0), row(2, 1.5, 1.2)]}
    text = "\n".join(_meta(section))
    assert "not reported (1.20× under load)" in text and "other work kept 1.50 cores busy" in text
    assert "its meta-seeds 1, 2, 3, side by side, run 24 SMAC trials" in text
    section["rows"] = [row(1, 0.05, 1.0), row(2, 0.1, 1.9)]
    text = "\n".join(_meta(section))
    assert "1.90×" in text and "not reported" not in text
    evaluate = [{"workers": w, "busy_cores_before": b, "runs": 32, "failed": 0, "wall_s": 10.0 / s, "runs_per_s": 3.2 * s,
                 "speedup": s, "speedup_valid": b <= 0.2} for w, b, s in ((1, 0.0, 1.0), (2, 0.1, 1.85))]
    section["evaluate_rows"] = evaluate
    text = "\n".join(_meta(section))
    assert "The evaluate stage" in text and "| 2 | 32 | 5.41 | 5.920 | 0.10 | 1.85× |" in text


def test_busy_cores_is_the_busy_share_of_the_machine_times_its_cores(monkeypatch):
    from metaopt.bench import machine

    samples = iter([(1000, 5000), (1150, 5400)])  # (busy, total) jiffies: 150 of 400 busy
    monkeypatch.setattr(machine, "_cpu_jiffies", lambda: next(samples))
    monkeypatch.setattr(machine.os, "cpu_count", lambda: 4)
    assert machine.busy_cores(0.0) == 1.5
    monkeypatch.setattr(machine, "_cpu_jiffies", lambda: None)
    assert machine.busy_cores(0.0) is None


def test_a_short_speed_up_names_the_cpu_this_process_used_beside_the_workers():
    from metaopt.bench.report import _meta_remarks

    serial = {"workers": 1, "busy_cores_before": 0.0, "wall_s": 45.0, "runs_per_s": 1.0, "speedup": 1.0,
              "inner_run_s_mean": 0.84, "own_cpu_s": 44.0, "speedup_valid": True}
    parallel = {"workers": 2, "busy_cores_before": 0.0, "wall_s": 26.6, "runs_per_s": 1.71, "speedup": 1.71,
                "inner_run_s_mean": 1.0, "own_cpu_s": 4.1, "speedup_valid": True}
    text = " ".join(_meta_remarks({"rows": [serial, parallel]}))
    assert "used 4.1 CPU seconds in the 26.6 s, 15% of a core" in text and "1.19× as long" in text
    assert "slows them by at most 1.08×" in text
    parallel["own_cpu_s"] = 0.5  # a process that only schedules: the remark does not blame it
    assert "CPU seconds" not in " ".join(_meta_remarks({"rows": [serial, parallel]}))


QUICK_META_STUDY = """\
name: bench_baseline_probe
benchmark: synthetic:mlp
budget: 5d
meta:
  instances: {split: train, limit: 2}
  restriction: table4
  trials: 12
  seeds: [1, 2]
  objective: regret_at
  select_top: 1
  select_seeds: 1
output: results/probe
"""


def test_the_optimize_stage_is_timed_until_the_asked_trials_and_then_stopped(tmp_path):
    from metaopt.bench.baseline import _command_env, time_optimize_stage

    (tmp_path / "probe.yaml").write_text(QUICK_META_STUDY)
    timing = time_optimize_stage(tmp_path, "probe.yaml", _command_env(None, None), workers=1, trials=5,
                                 timeout_s=300)
    logs = sorted((tmp_path / "results" / "probe" / "meta").glob("trials-seed-*.jsonl"))
    logged = sum(len(path.read_text().splitlines()) for path in logs)
    assert timing["trials"] >= 5 and logged >= timing["trials"]
    assert logged < 24  # stopped before the study's 2 meta-seeds x 12 trials
    assert 0 < timing["timed_trials"] <= timing["trials"]
    assert timing["trials_per_s"] == pytest.approx(timing["timed_trials"] / timing["wall_s"])
    assert timing["startup_s"] > 0
    with pytest.raises(RuntimeError, match="fresh output folder"):
        time_optimize_stage(tmp_path, "probe.yaml", _command_env(None, None), 1, 5, 300)


def test_a_commit_is_built_apart_and_its_code_is_what_runs(tmp_path):
    from metaopt.bench.baseline import _check_code, _command_env, install_commit, resolve_commit

    commit = resolve_commit("HEAD")
    source = install_commit(commit, tmp_path)
    assert (source / "studies" / "lcbench.yaml").exists()
    env = _command_env(tmp_path / "lib", None)
    assert env["PYTHONPATH"] == str(tmp_path / "lib")
    _check_code(env, tmp_path, tmp_path / "lib")  # the built package, not this checkout
    with pytest.raises(RuntimeError, match="would import"):  # started inside a source tree: its metaopt/
        _check_code(env, source, tmp_path / "lib")


def test_the_baseline_table_withholds_a_speed_up_measured_under_load():
    from metaopt.bench.report import _baseline

    row = {"timed_trials": 199, "startup_s": 12.0, "wall_s": 100.0, "trials_per_s": 1.99, "busy_cores_before": 0.1}
    section = {"study": "studies/lcbench.yaml", "baseline": "v1", "workers": 2, "trials": 200, "speedup_valid": True,
               "rows": [{**row, "code": "baseline", "commit": "0123456789abcdef", "repeat": 0},
                        {**row, "code": "current", "commit": None, "trials_per_s": 5.97, "repeat": 0}],
               "speedup": 3.0, "speedup_range": [2.5, 3.5]}
    text = "\n".join(_baseline(section))
    assert "`v1` (0123456)" in text and "**Speed-up: 3.00×**" in text and "2.50× to 3.50×" in text
    text = "\n".join(_baseline({**section, "speedup_valid": False}))
    assert "(3.00×) is not reported" in text and "**Speed-up" not in text


def test_bench_clock_section_times_the_clock_and_reads_regret_against_simulated_time(tmp_path):
    out, md = tmp_path / "results.json", tmp_path / "benchmarks.md"
    assert main(["bench", "--quick", "--sections", "clock", "--benchmarks", "synthetic:mlp",
                 "--out", str(out), "--md", str(md)]) == 0
    section = json.loads(out.read_text())["sections"]["clock"]
    synchronous = [r for r in section["overhead"] if "today_s" in r]
    assert {r["optimizer"] for r in synchronous} == {"rs", "hb", "bohb"} and all(r["same_trace"] for r in synchronous)
    assert {r["optimizer"] for r in section["anytime"]} == {"asha", "hb", "bohb", "async_bohb"}
    for row in section["anytime"]:
        assert row["times"][-1] >= row["sim_time"] and 0 < row["utilization"] <= 1 + 1e-12
        finite = [r for r in row["regret"] if r is not None]
        assert finite == sorted(finite, reverse=True)  # the best so far only improves with time
    assert "## 7. The simulated clock" in md.read_text()


def test_bench_replay_section_times_smac_as_shipped_and_fast_asks_on_the_same_trials(tmp_path, yahpo_data):
    """The replay section asks SMAC for the first trials of the lcbench race, from its archive, as
    shipped and with fast_asks: both arms propose the same trials and run none (the section checks
    it and fails otherwise), and the report gives each arm's time per trial and one ratio per run."""
    out, md = tmp_path / "results.json", tmp_path / "benchmarks.md"
    assert main(["bench", "--quick", "--sections", "replay", "--out", str(out), "--md", str(md),
                 "--yahpo-data", str(yahpo_data)]) == 0
    section = json.loads(out.read_text())["sections"]["replay"]
    assert section["study"] == "studies/lcbench_cfo_race.yaml" and section["trials"] == 60
    assert [r["arm"] for r in section["rows"]] == ["SMAC 2.4 as shipped", "fast_asks"]
    assert all(r["trials"] == 60 and r["wall_s"] > 0 for r in section["rows"]) and 0 < section["from_archive"] <= 60
    text = md.read_text()
    assert "## 8. The meta-optimizer's own time" in text
    assert re.search(r"CPU time \d+\.\d\d×, wall time \d+\.\d\d×[ .]", text)  # one run per arm: one ratio each


def _meta_fidelity_study(name: str, trials: int, fidelity: str) -> str:
    return f"""\
name: {name}
benchmark: synthetic:mlp
budget: 5d
meta:
  instances: {{split: train, limit: 2}}
  restriction: table4
  trials: {trials}
  seeds: [1]
  objective: regret_at
  objective_budgets: [0.3333333333333333, 1.0]
  select_top: 2
  select_seeds: 1
{fidelity}output: results/{name}
"""


def test_bench_meta_fidelity_section_gives_every_search_one_time_and_judges_every_gamma_star_alike(tmp_path):
    """The meta_fidelity section: the one-fidelity search runs its trials and its selection; each
    multi-fidelity search (Hyperband, successive halving) runs at most as long (here they finish first: their
    24 inner runs, most of them at a third of the inner budget, cost less than the other's 30 full runs); each
    arm's meta-trials and their CPU come from its own store; every γ* is re-run on the same fresh seeds, and
    the report puts the ratios side by side."""
    from dataclasses import replace

    from metaopt.bench.config import QUICK
    from metaopt.bench.meta_fidelity import JUDGE_SEED_BASE, meta_fidelity_section
    from metaopt.bench.report import _meta_fidelity

    one, multi, halving = tmp_path / "one.yaml", tmp_path / "multi.yaml", tmp_path / "halving.yaml"
    one.write_text(_meta_fidelity_study("one", 30, ""))
    multi.write_text(_meta_fidelity_study("multi", 24, "  fidelity: {min_budget: 0.3333333333333333, eta: 3}\n"))
    halving.write_text(_meta_fidelity_study(
        "halving", 24, "  fidelity: {min_budget: 0.3333333333333333, eta: 3, brackets: successive_halving}\n"))
    config = replace(QUICK, meta_fidelity_studies=(str(one), str(multi), str(halving)), meta_fidelity_trials=None,
                     meta_fidelity_judge_seeds=2)
    section = meta_fidelity_section(config, None)
    first, second, third = section["arms"]
    assert first["trials_finished"] == [30] and not first["stopped_at_time"]
    assert first["inner_runs"] == 30 and first["by_inner_budget"] == {"1": 30} and first["full_equivalents"] == 30
    assert "Hyperband" in second["search"] and "successive halving" in third["search"]
    for arm in (second, third):
        assert arm["by_inner_budget"]["1"] > 0 and arm["by_inner_budget"]["0.3333"] > 0
        assert arm["inner_runs"] == sum(arm["by_inner_budget"].values()) >= 24
    # successive halving starts every design at a third of the inner budget: 3 there for each 1 promoted
    assert third["by_inner_budget"]["0.3333"] >= 2 * third["by_inner_budget"]["1"]
    for arm in (first, second, third):
        assert arm["inner_cpu_s"] > 0 and arm["failed"] == 0
        assert arm["runs_per_cpu_hour"] == pytest.approx(arm["inner_runs"] / arm["inner_cpu_s"] * 3600)
        assert arm["selection_runs"] > 0 and len(arm["judged"]) == 2  # one score per training instance
        chosen = min(arm["candidates"], key=lambda c: c["selection_mean"])
        assert chosen["hash"] == arm["gamma_star"] and chosen["selection_mean"] == arm["gamma_star_selection_mean"]
        assert arm["same_gamma_star"] == (arm["gamma_star"] == first["gamma_star"])
        if arm["same_gamma_star"]:  # one design, one set of runs: the same scores
            assert arm["judged"] == first["judged"]
    assert section["judge_seeds"] == [JUDGE_SEED_BASE + 1, JUDGE_SEED_BASE + 2]
    text = "\n".join(_meta_fidelity(section))
    assert "## 9. Cheaper meta-trials" in text and "`" + str(one) + "`" in text
    for path in (multi, halving):
        assert re.search(rf"- `{re.escape(str(path))}`: inner runs per CPU-hour \*\*\d+\.\d\d×\*\*", text)
