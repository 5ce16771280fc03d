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


def test_run_without_an_optimizer_runs_metaopt_default(capsys, tmp_path):
    """`metaopt run` with neither --optimizer nor --config runs the default design: the same trace as naming it."""
    common = ["--benchmark", "synthetic:mlp", "--instance", "0", "--budget", "3d", "--seed", "2", "--quiet"]
    code, _, err = run_cli(capsys, "run", *common, "--out", str(tmp_path / "default"))
    assert code == 0, err
    code, _, err = run_cli(capsys, "run", "--optimizer", "metaopt_default", *common, "--out", str(tmp_path / "named"))
    assert code == 0, err
    assert (tmp_path / "default" / "trace.csv").read_bytes() == (tmp_path / "named" / "trace.csv").read_bytes()


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
    assert proc.stderr.strip().startswith("metaopt: error: --optimizer: unknown optimizer")


def test_space_show_and_export_round_trip(capsys, tmp_path):
    from ConfigSpace import ConfigurationSpace

    from metaopt.spaces.design_space import design_space
    from metaopt.spaces.restrictions import get_restriction

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
    from metaopt.spaces.presets import PRESETS

    for name in PRESETS:
        budget = "1" if name.startswith("bo_") else "1d"
        code, _, err = run_cli(capsys, "run", "--optimizer", name, "--benchmark", "synthetic:boosting", "--instance", "0",
                               "--budget", budget, "--quiet")
        assert code == 0, (name, err)


LCBENCH_CONFIG = {"batch_size": 153, "epoch": 5, "learning_rate": 0.0437, "max_dropout": 0.374, "max_units": 96,
                  "momentum": 0.233, "num_layers": 2, "weight_decay": 0.0799}


def _jsonl(config):
    return json.dumps({"instance": "3945", "config": config}) + "\n"


# (argv with {tmp} for the test's folder, the flag or field the one error line must name). Files the
# cases use: {tmp}/afile (an existing file), {tmp}/dir (an existing folder), {tmp}/in.jsonl (a valid
# input), {tmp}/float_int.jsonl (batch_size 64.7), {tmp}/bool.jsonl (learning_rate true),
# {tmp}/true_mu.json (a design configuration with mu true), {tmp}/binary.json (not UTF-8).
BAD_ARGUMENTS = [
    ("run seed -1", ["run", "--optimizer", "rs", "--benchmark", "synthetic:mlp", "--instance", "0", "--seed", "-1",
                     "--out", "{tmp}/o"], "--seed"),
    ("run seed not a number", ["run", "--optimizer", "rs", "--benchmark", "synthetic:mlp", "--instance", "0",
                               "--seed", "one", "--out", "{tmp}/o"], "--seed"),
    ("run budget 0", ["run", "--optimizer", "rs", "--benchmark", "synthetic:mlp", "--instance", "0", "--budget", "0d",
                      "--out", "{tmp}/o"], "budget"),
    ("run out is a file", ["run", "--optimizer", "rs", "--benchmark", "synthetic:mlp", "--instance", "0",
                           "--out", "{tmp}/afile"], "--out"),
    ("run out under a file", ["run", "--optimizer", "rs", "--benchmark", "synthetic:mlp", "--instance", "0",
                              "--out", "{tmp}/afile/o"], "--out"),
    ("run config mu true", ["run", "--config", "{tmp}/true_mu.json", "--benchmark", "synthetic:mlp", "--instance", "0",
                            "--out", "{tmp}/o"], "true_mu.json: parameter mu"),
    ("run config is a folder", ["run", "--config", "{tmp}/dir", "--benchmark", "synthetic:mlp", "--instance", "0",
                                "--out", "{tmp}/o"], "--config"),
    ("run config not UTF-8", ["run", "--config", "{tmp}/binary.json", "--benchmark", "synthetic:mlp", "--instance", "0",
                              "--out", "{tmp}/o"], "--config"),
    ("study workers 0", ["study", "run", "{tmp}/afile", "--workers", "0"], "--workers"),
    ("ablate workers 0", ["ablate", "--benchmark", "synthetic:mlp", "--from", "rs", "--to", "hb", "--estimator",
                          "evaluated", "--workers", "0", "--out", "{tmp}/o"], "--workers"),
    ("ablate instance twice", ["ablate", "--benchmark", "synthetic:mlp", "--from", "rs", "--to", "hb", "--estimator",
                               "evaluated", "--instances", "0,0", "--out", "{tmp}/o"], "--instances"),
    ("ablate out is a file", ["ablate", "--benchmark", "synthetic:mlp", "--from", "rs", "--to", "hb", "--estimator",
                              "evaluated", "--out", "{tmp}/afile"], "--out"),
    ("importance seed -1", ["importance", "--study-output", "{tmp}/dir", "--seed", "-1", "--out", "{tmp}/o"], "--seed"),
    ("bench seeds 0", ["bench", "--quick", "--seeds", "0", "--out", "{tmp}/o/r.json", "--md", "{tmp}/o/r.md"],
     "--seeds"),
    ("eval output is a folder", ["benchmark", "eval", "--benchmark", "yahpo:lcbench", "--input", "{tmp}/in.jsonl",
                                 "--output", "{tmp}/dir"], "--output"),
    ("eval input is a folder", ["benchmark", "eval", "--benchmark", "yahpo:lcbench", "--input", "{tmp}/dir",
                                "--output", "{tmp}/o/out.jsonl"], "--input"),
    ("eval integer given 64.7", ["benchmark", "eval", "--benchmark", "yahpo:lcbench", "--input", "{tmp}/float_int.jsonl",
                                 "--output", "{tmp}/o/out.jsonl"], "batch_size=64.7"),
    ("eval number given true", ["benchmark", "eval", "--benchmark", "yahpo:lcbench", "--input", "{tmp}/bool.jsonl",
                                "--output", "{tmp}/o/out.jsonl"], "learning_rate=True"),
    ("space export under a file", ["space", "export", "--out", "{tmp}/afile/space.json"], "--out"),
]


@pytest.mark.parametrize("argv, field", [case[1:] for case in BAD_ARGUMENTS], ids=[case[0] for case in BAD_ARGUMENTS])
def test_bad_arguments_give_one_line_before_any_work(capsys, env_data, tmp_path, monkeypatch, argv, field):
    import metaopt.engine.loop

    def no_run(*args, **kwargs):
        raise AssertionError("the run started before its arguments were checked")

    monkeypatch.setattr(metaopt.engine.loop, "run", no_run)
    (tmp_path / "afile").write_text("keep")
    (tmp_path / "dir").mkdir()
    (tmp_path / "in.jsonl").write_text(_jsonl(LCBENCH_CONFIG))
    (tmp_path / "float_int.jsonl").write_text(_jsonl({**LCBENCH_CONFIG, "batch_size": 64.7}))
    (tmp_path / "bool.jsonl").write_text(_jsonl({**LCBENCH_CONFIG, "learning_rate": True}))
    (tmp_path / "true_mu.json").write_text(json.dumps({"fidelity_schedule": "equal", "mu": True}))
    (tmp_path / "binary.json").write_bytes(b"\xff\xfe{}")
    code, _, err = run_cli(capsys, *[a.replace("{tmp}", str(tmp_path)) for a in argv])
    assert_one_line_error(code, err, field)
    assert "Traceback" not in err
    assert not (tmp_path / "o").exists() and (tmp_path / "afile").read_text() == "keep"
    assert not any((tmp_path / "dir").iterdir())  # nothing written


@pytest.mark.parametrize("damage, fragment", [
    (lambda folder: (folder / "model.onnx").write_bytes((folder / "model.onnx").read_bytes()[:1000]), "model.onnx"),
    (lambda folder: (folder / "config_space.json").write_text('{"hyperparameters": ['), "config_space.json"),
])
def test_damaged_yahpo_data_is_one_line(capsys, yahpo_data, tmp_path, damage, fragment):
    """A copy of one scenario folder, damaged (the shared data is never touched)."""
    import shutil

    shutil.copytree(yahpo_data / "lcbench", tmp_path / "data" / "lcbench")
    damage(tmp_path / "data" / "lcbench")
    code, _, err = run_cli(capsys, "run", "--optimizer", "rs", "--benchmark", "yahpo:lcbench", "--instance", "3945",
                           "--yahpo-data", str(tmp_path / "data"), "--out", str(tmp_path / "o"))
    assert_one_line_error(code, err, fragment, "lcbench")
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("factory, fragment", [("sys:exit", "the factory exited"), ("os:getcwd", "not a metaopt.core.benchmarks.Benchmark")])
def test_a_python_factory_must_return_a_benchmark(capsys, tmp_path, factory, fragment):
    code, _, err = run_cli(capsys, "run", "--optimizer", "rs", "--benchmark", f"python:{factory}", "--instance", "0",
                           "--out", str(tmp_path / "o"))
    assert_one_line_error(code, err, f"python:{factory}", fragment)
    assert not (tmp_path / "o").exists()
