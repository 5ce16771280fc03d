"""The YAHPO adapter: data checks, scenario definitions, and replay of the golden reference outputs."""

from __future__ import annotations

import json
import pickle
import warnings
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
import yahpo_gym

from metaopt.core.benchmarks.yahpo import YahpoBenchmark, available_scenarios
from metaopt.core.errors import DataError, UsageError

SCENARIOS = ["lcbench", "nb301", "rbv2_rpart", "rbv2_xgboost"]
LCBENCH_TRAIN = ["3945", "7593", "126026", "167201", "168329", "168868", "168908", "189354"]


@pytest.fixture(scope="module")
def bench(yahpo_data: Path):
    """``bench(scenario)``: one benchmark object per scenario for the whole module."""
    cache: dict[str, YahpoBenchmark] = {}

    def get(scenario: str) -> YahpoBenchmark:
        if scenario not in cache:
            cache[scenario] = YahpoBenchmark(scenario, yahpo_data)
        return cache[scenario]

    return get


def golden(yahpo_data: Path, scenario: str) -> list[dict]:
    path = yahpo_data.parent / "yahpo_golden" / f"{scenario}.jsonl"
    if not path.is_file():
        pytest.fail(f"golden reference file not found: {path}")
    return [json.loads(line) for line in path.read_text().splitlines()]


def searched(b: YahpoBenchmark, config: dict) -> dict:
    return {k: v for k, v in config.items() if k in b.search_space}


# --- data directory ---------------------------------------------------------------------------


def test_available_scenarios(yahpo_data: Path) -> None:
    assert set(SCENARIOS) <= set(available_scenarios(yahpo_data))


def test_missing_data_dir(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    with pytest.raises(DataError, match=str(missing)):
        available_scenarios(missing)
    with pytest.raises(DataError, match=str(missing)):
        YahpoBenchmark("lcbench", missing)


def test_incomplete_scenario(tmp_path: Path, yahpo_data: Path) -> None:
    for name in ["config_space.json", "encoding.json", "model.onnx"]:  # a complete rbv2_rpart
        (tmp_path / "rbv2_rpart").mkdir(exist_ok=True)
        (tmp_path / "rbv2_rpart" / name).symlink_to(yahpo_data / "rbv2_rpart" / name)
    (tmp_path / "lcbench").mkdir()  # lcbench without its model
    for name in ["config_space.json", "encoding.json"]:
        (tmp_path / "lcbench" / name).symlink_to(yahpo_data / "lcbench" / name)

    assert available_scenarios(tmp_path) == ["rbv2_rpart"]
    with pytest.raises(DataError) as err:
        YahpoBenchmark("lcbench", tmp_path)
    message = str(err.value)
    assert str(tmp_path / "lcbench") in message and "model.onnx" in message and "rbv2_rpart" in message
    assert "encoding.json" not in message
    with pytest.raises(DataError, match=str(tmp_path / "nb301")):
        YahpoBenchmark("nb301", tmp_path)
    with pytest.raises(UsageError, match="unknown YAHPO scenario 'nope'"):
        YahpoBenchmark("nope", tmp_path)


def test_no_settings_file_needed_or_written(tmp_path: Path, yahpo_data: Path, monkeypatch, capsys) -> None:
    settings = tmp_path / "yahpo_gym"
    monkeypatch.setattr(yahpo_gym.local_config, "settings_path", settings)
    monkeypatch.setattr(yahpo_gym.local_config, "_config", None)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # yahpo/ConfigSpace warnings are silenced locally
        b = YahpoBenchmark("lcbench", yahpo_data)
        b.evaluate("3945", [b.search_space.get_default_configuration()], [52])
    assert not settings.exists() and yahpo_gym.local_config._config is None
    assert capsys.readouterr().out == ""  # yahpo's citation notes are not printed


# --- golden replay ----------------------------------------------------------------------------


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_golden_one_at_a_time_is_exact(bench, yahpo_data: Path, scenario: str) -> None:
    b = bench(scenario)
    records = golden(yahpo_data, scenario)
    mismatches = []
    for i, rec in enumerate(records):
        row = b.evaluate_raw(rec["instance"], [rec["config"]])[0]
        mismatches += [(i, k, row[k], v) for k, v in rec["result"].items() if row[k] != v]
    assert not mismatches, f"{len(mismatches)} mismatches, first: {mismatches[:3]}"
    assert len(records) >= 100


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_golden_batched_is_close(bench, yahpo_data: Path, scenario: str) -> None:
    b = bench(scenario)
    by_instance = defaultdict(list)
    for rec in golden(yahpo_data, scenario):
        by_instance[rec["instance"]].append(rec)
    for instance, records in by_instance.items():
        rows = b.evaluate_raw(instance, [rec["config"] for rec in records])
        for key in records[0]["result"]:
            got = np.array([row[key] for row in rows])
            ref = np.array([rec["result"][key] for rec in records])
            assert np.isclose(got, ref, rtol=1e-4, atol=2e-3).all(), (instance, key)


def test_evaluate_matches_raw(bench, yahpo_data: Path) -> None:
    """The optimizer path (searched HPs + fidelity) gives the raw path's numbers; repl is at its max."""
    b = bench("rbv2_xgboost")
    records = [r for r in golden(yahpo_data, "rbv2_xgboost") if r["instance"] == "16"][:20]
    configs = [searched(b, r["config"]) for r in records]
    fids = [r["config"]["trainsize"] for r in records]
    ev = b.evaluate("16", configs, fids)
    raw = b.evaluate_raw("16", [{**c, "trainsize": r, "repl": 10} for c, r in zip(configs, fids)])
    for key in b.target_names:
        assert np.array_equal(ev.targets[key], [row[key] for row in raw])
    assert np.array_equal(ev.loss, ev.targets["logloss"]) and np.array_equal(ev.cost, ev.targets["timetrain"])
    assert [row["logloss"] for row in b.evaluate_raw("16", [{**configs[0], "trainsize": fids[0]}])] == [ev.loss[0]]


# --- scenario definitions ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "scenario, d, fidelity, r_min, r_max, is_int, loss, cost",
    [
        ("lcbench", 7, "epoch", 1, 52, True, "val_cross_entropy", "time"),
        ("nb301", 34, "epoch", 1, 98, True, "val_error", "runtime"),
        ("rbv2_rpart", 5, "trainsize", 0.03, 1, False, "logloss", "timetrain"),
        ("rbv2_xgboost", 14, "trainsize", 0.03, 1, False, "logloss", "timetrain"),
    ],
)
def test_scenario_definition(bench, scenario, d, fidelity, r_min, r_max, is_int, loss, cost) -> None:
    b = bench(scenario)
    print(b.describe())
    config = yahpo_gym.configuration.config_dict.configs[scenario]  # yahpo's scenario definition
    excluded = set(config["fidelity_params"]) | {config.get("instance_names")}
    assert not excluded & set(b.hyperparameter_names)
    assert b.d == d and b.name == f"yahpo:{scenario}"
    assert (b.fidelity.name, b.fidelity.r_min, b.fidelity.r_max, b.fidelity.is_int) == (fidelity, r_min, r_max, is_int)
    assert (b.loss_name, b.cost_name) == (loss, cost)
    ev = b.evaluate(b.instances[0], b.search_space.sample_configuration(5), [r_max] * 5)
    assert ev.loss.shape == ev.cost.shape == (5,) and set(ev.targets) == set(config["y_names"])


def test_conditions_preserved(bench) -> None:
    assert len(bench("rbv2_xgboost").search_space.conditions) == 8
    assert len(bench("nb301").search_space.conditions) == 24


def test_nb301_loss_is_error_in_percent(bench) -> None:
    b = bench("nb301")
    ev = b.evaluate("CIFAR10", b.search_space.sample_configuration(5), [98] * 5)
    assert np.array_equal(ev.loss, 100.0 - ev.targets["val_accuracy"])
    assert np.array_equal(ev.cost, ev.targets["runtime"])


def test_fixed_fidelity_params_at_max(bench) -> None:
    b = bench("rbv2_rpart")
    config = dict(b.search_space.get_default_configuration())
    ev = b.evaluate("41138", [config], [0.5])
    at = {repl: b.evaluate_raw("41138", [{**config, "trainsize": 0.5, "repl": repl}])[0] for repl in (1, 10)}
    assert ev.targets["logloss"][0] == at[10]["logloss"] != at[1]["logloss"]


def test_splits(bench) -> None:
    lc = bench("lcbench")
    assert lc.train_instances == LCBENCH_TRAIN
    assert len(lc.test_instances) == 26 and not set(lc.test_instances) & set(LCBENCH_TRAIN)
    assert sorted(lc.train_instances + lc.test_instances) == sorted(lc.instances)
    nb = bench("nb301")
    assert (nb.train_instances, nb.test_instances) == ([], ["CIFAR10"])
    for scenario in ["rbv2_rpart", "rbv2_xgboost"]:
        b = bench(scenario)
        assert len(b.train_instances) == round(0.25 * len(b.instances))
        assert sorted(b.train_instances + b.test_instances) == sorted(b.instances)
        assert b.train_instances == YahpoBenchmark(scenario, b.data_dir).train_instances  # deterministic
    for b in (lc, nb):
        assert b.split_rule


# --- input validation -------------------------------------------------------------------------


def test_unknown_instance(bench) -> None:
    b = bench("lcbench")
    with pytest.raises(UsageError, match="unknown instance '42'"):
        b.evaluate("42", [dict(b.search_space.get_default_configuration())], [52])
    with pytest.raises(UsageError, match="unknown instance"):
        b.problem("42")
    with pytest.raises(UsageError, match="OpenML_task_id"):  # config and instance disagree
        b.evaluate_raw("3945", [{**b.search_space.get_default_configuration(), "epoch": 1, "OpenML_task_id": "7593"}])


def test_invalid_configs(bench) -> None:
    b = bench("rbv2_xgboost")
    ok = dict(b.search_space.get_default_configuration())
    cases = [
        ({**ok, "colour": 1}, "unknown hyperparameter 'colour'"),
        ({**ok, "alpha": -1.0}, r"alpha=-1.0 is out of range; it must be a number in \[0.000911"),
        ({**ok, "booster": "linear"}, r"booster='linear' .* one of \{dart, gblinear, gbtree\}"),
        ({**ok, "trainsize": 0.5}, "unknown hyperparameter 'trainsize'"),  # the fidelity is separate
        ({k: v for k, v in ok.items() if k != "nrounds"}, "config lacks nrounds"),
    ]
    for config, message in cases:
        with pytest.raises(UsageError, match=message):
            b.evaluate("16", [config], [1.0])
    with pytest.raises(UsageError, match=r"fidelity trainsize=2.0 must be a number in \[0.03, 1\]"):
        b.evaluate("16", [ok], [2.0])
    with pytest.raises(UsageError, match="epoch=2.5 must be an integer"):
        bench("lcbench").evaluate("3945", [dict(bench("lcbench").search_space.get_default_configuration())], [2.5])
    with pytest.raises(UsageError, match="repl=11 is out of range"):
        b.evaluate_raw("16", [{**ok, "trainsize": 0.5, "repl": 11}])


def test_empty_batch_and_pickle(bench) -> None:
    b = bench("lcbench")
    ev = b.evaluate("3945", [], [])
    assert ev.loss.shape == ev.cost.shape == (0,)
    configs = b.search_space.sample_configuration(3)
    copy = pickle.loads(pickle.dumps(b))
    assert np.array_equal(copy.evaluate("3945", configs, [10] * 3).loss, b.evaluate("3945", configs, [10] * 3).loss)
