"""End-to-end tests of the `metaopt` command line, including bad input."""

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from metaopt.cli import main

GOLDEN = Path(__file__).resolve().parents[2] / "shared" / "yahpo_golden"


@pytest.fixture
def env_data(yahpo_data, monkeypatch):
    monkeypatch.setenv("METAOPT_YAHPO_DATA", str(yahpo_data))
    return yahpo_data


def run_cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line_error(code, err, *fragments):
    assert code == 2
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("metaopt: error: ")
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def test_help_on_every_command():
    for argv in (["--help"], ["components", "--help"], ["benchmark", "list", "--help"], ["benchmark", "eval", "--help"],
                 ["space", "show", "--help"], ["space", "export", "--help"], ["presets", "show", "--help"],
                 ["run", "--help"], ["schedule", "--help"], ["presets", "--help"], ["study", "run", "--help"]):
        proc = subprocess.run([sys.executable, "-m", "metaopt", *argv], capture_output=True, text=True)
        assert proc.returncode == 0 and "usage: metaopt" in proc.stdout, (argv, proc.stderr)


def test_components_lists_categories_and_hyperparameters(capsys):
    code, out, _ = run_cli(capsys, "components")
    assert code == 0
    for text in ("fidelity_schedules", "hb", "log_eta_fid", "samplers", "uniform", "promotion_rules", "top",
                 "stopping_rules", "budget"):
        assert text in out


def test_benchmark_list_shows_yahpo_and_synthetic(capsys, env_data):
    code, out, _ = run_cli(capsys, "benchmark", "list")
    assert code == 0
    for name in ("yahpo:lcbench", "yahpo:rbv2_xgboost", "yahpo:rbv2_rpart", "yahpo:nb301", "synthetic:mlp"):
        assert name in out
    assert " 34 " in out and " 8 " in out and " 26 " in out  # lcbench instances, train, test


def test_benchmark_eval_reproduces_golden_records(capsys, env_data, tmp_path):
    records = [json.loads(line) for line in (GOLDEN / "lcbench.jsonl").read_text().splitlines()[:5]]
    inp = tmp_path / "in.jsonl"
    inp.write_text("".join(json.dumps({"instance": r["instance"], "config": r["config"]}) + "\n" for r in records))
    out_path = tmp_path / "out.jsonl"
    code, out, _ = run_cli(capsys, "benchmark", "eval", "--benchmark", "yahpo:lcbench", "--input", str(inp),
                           "--output", str(out_path), "--one-at-a-time")
    assert code == 0, out
    got = [json.loads(line) for line in out_path.read_text().splitlines()]
    assert len(got) == 5
    for g, r in zip(got, records):
        assert g["config"] == r["config"]
        for target, value in r["result"].items():
            assert g["result"][target] == value


def test_run_writes_trace_and_summary(capsys, env_data, tmp_path):
    out_dir = tmp_path / "run"
    code, out, err = run_cli(capsys, "run", "--optimizer", "hb", "--benchmark", "yahpo:lcbench", "--instance", "3945",
                             "--budget", "3d", "--seed", "1", "--out", str(out_dir), "--quiet")
    assert code == 0, err
    trace = pd.read_csv(out_dir / "trace.csv")
    summary = json.loads((out_dir / "summary.json").read_text())
    assert summary["n_evals"] == len(trace) > 0
    assert summary["budget"] == 21 and summary["budget_used"] <= 21
    assert 0 <= summary["normalized_regret"] < 2
    assert '"normalized_regret"' in out
    assert {"batch_size", "learning_rate", "incumbent_loss", "bracket", "stage"} <= set(trace.columns)


def test_run_accepts_a_configuration_file(capsys, tmp_path):
    cfg = tmp_path / "gamma.json"
    cfg.write_text(json.dumps({"fidelity_schedule": "equal", "mu": 8, "survival_fraction": 0.5}))
    code, out, err = run_cli(capsys, "run", "--config", str(cfg), "--benchmark", "synthetic:mlp", "--instance", "0",
                             "--budget", "2d", "--quiet")
    assert code == 0, err
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"fidelity_schedule": "equal", "mu": 0}))
    code, _, err = run_cli(capsys, "run", "--config", str(bad), "--benchmark", "synthetic:mlp", "--instance", "0")
    assert_one_line_error(code, err, "mu")


def test_schedule_shows_the_hyperband_brackets(capsys, env_data):
    code, out, _ = run_cli(capsys, "schedule", "--optimizer", "hb", "--benchmark", "yahpo:lcbench")
    assert code == 0
    table = [line.split() for line in out.splitlines()[2:]]
    assert [int(row[3]) for row in table] == [27, 9, 3, 1, 13, 4, 1, 6, 2, 4]


@pytest.mark.parametrize("argv, fragments", [
    (["run", "--optimizer", "hb", "--benchmark", "nope:x", "--instance", "1"], ["unknown benchmark 'nope:x'", "synthetic:mlp"]),
    (["run", "--optimizer", "nope", "--benchmark", "synthetic:mlp", "--instance", "0"], ["unknown optimizer 'nope'", "rs"]),
    (["run", "--optimizer", "hb", "--benchmark", "synthetic:mlp", "--instance", "999"], ["unknown instance '999'"]),
    (["run", "--optimizer", "hb", "--benchmark", "synthetic:mlp", "--instance", "0", "--budget", "lots"], ["budget 'lots'"]),
])
def test_bad_input_gives_one_line_and_exit_2(capsys, argv, fragments, tmp_path):
    code, _, err = run_cli(capsys, *argv, "--out", str(tmp_path / "o"))
    assert_one_line_error(code, err, *fragments)
    assert not (tmp_path / "o").exists()  # nothing half-written


def test_malformed_jsonl_line(capsys, env_data, tmp_path):
    inp = tmp_path / "in.jsonl"
    inp.write_text('{"instance": "3945", "config": {"epoch": 52}}\n{not json\n')
    code, _, err = run_cli(capsys, "benchmark", "eval", "--benchmark", "yahpo:lcbench", "--input", str(inp),
                           "--output", str(tmp_path / "out.jsonl"))
    assert_one_line_error(code, err, "line 2", "not valid JSON")
    assert not (tmp_path / "out.jsonl").exists()


def test_missing_data_dir(capsys, tmp_path, monkeypatch):
    missing = tmp_path / "no-such-dir"
    monkeypatch.setenv("METAOPT_YAHPO_DATA", str(missing))
    code, _, err = run_cli(capsys, "run", "--optimizer", "hb", "--benchmark", "yahpo:lcbench", "--instance", "3945")
    assert_one_line_error(code, err, str(missing))
    code, _, err = run_cli(capsys, "benchmark", "list", "--yahpo-data", str(missing))
    assert_one_line_error(code, err, str(missing))


def test_exit_status_through_the_entry_point(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "metaopt", "run", "--optimizer", "nope", "--benchmark",
                           "synthetic:mlp", "--instance", "0"], capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.strip().startswith("metaopt: error: unknown optimizer")


def test_space_show_and_export_round_trip(capsys, tmp_path):
    from ConfigSpace import ConfigurationSpace

    from spaces.design_space import design_space
    from spaces.restrictions import get_restriction

    code, out, _ = run_cli(capsys, "space", "show")
    assert code == 0 and "hyperparameters" in out and "filter_method" in out and "log_eta_fid" in out
    path = tmp_path / "space.json"
    code, _, _ = run_cli(capsys, "space", "export", "--out", str(path))
    assert code == 0 and ConfigurationSpace.from_json(path) == design_space()
    code, _, _ = run_cli(capsys, "space", "export", "--out", str(path), "--restrict", "gamma3")
    assert code == 0 and ConfigurationSpace.from_json(path) == get_restriction("gamma3").space()
    code, _, err = run_cli(capsys, "space", "show", "--restrict", "nope")
    assert_one_line_error(code, err, "unknown restriction 'nope'", "gamma1")


def test_presets_list_and_show_feed_run_config(capsys, tmp_path):
    code, out, _ = run_cli(capsys, "presets")
    for name in ("rs", "sh", "hb", "bohb", "bo_gp_ei", "bo_rf_ei", "smashy_lcbench_hb", "smashy_rbv2_equal"):
        assert name in out
    code, out, _ = run_cli(capsys, "presets", "show", "bohb")
    assert code == 0 and json.loads(out)["surrogate"] == "tpe"
    cfg = tmp_path / "bohb.json"
    cfg.write_text(out)
    code, out, err = run_cli(capsys, "run", "--config", str(cfg), "--benchmark", "synthetic:mlp", "--instance", "0",
                             "--budget", "2d", "--quiet")
    assert code == 0, err
    code, _, err = run_cli(capsys, "presets", "show", "nope")
    assert_one_line_error(code, err, "unknown optimizer 'nope'")


def test_every_preset_is_accepted_by_run(capsys):
    from spaces.presets import PRESETS

    for name in PRESETS:
        budget = "1" if name.startswith("bo_") else "1d"
        code, _, err = run_cli(capsys, "run", "--optimizer", name, "--benchmark", "synthetic:boosting", "--instance", "0",
                               "--budget", budget, "--quiet")
        assert code == 0, (name, err)
