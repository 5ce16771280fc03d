"""The Python API: ask/tell gives run()'s traces, minimize() gives `metaopt run`'s, failures and bad input."""

from __future__ import annotations

import json
import math
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from ConfigSpace import Categorical, ConfigurationSpace, Float, Integer, NormalFloatHyperparameter

import metaopt
from metaopt.benchmarks import _entry_point_kind, _KINDS, get_benchmark
from metaopt.cli import main
from metaopt.errors import UsageError
from metaopt.loop import AskTell, run
from metaopt.spaces.presets import get_preset

BENCH = get_benchmark("synthetic:mlp")
PROBLEM = BENCH.problem("0")


def synthetic_objective(config: dict, fidelity: float) -> dict:
    """The synthetic:mlp instance 0 as a user's function (module level: Dask workers can pickle it)."""
    ev = PROBLEM.evaluate([config], [fidelity])
    return {"loss": float(ev.loss[0]), "cost": float(ev.cost[0])}


def _fidelity_spec() -> tuple:
    fid = BENCH.fidelity
    return (fid.name, int(fid.r_min), int(fid.r_max)) if fid.is_int else (fid.name, fid.r_min, fid.r_max)


@pytest.mark.parametrize("preset,budget", [("hb", "10d"), ("smashy_lcbench_hb", "10d"), ("cfo", "10d"),
                                           ("cahb", "5dc"), ("bo_autostop", "5d")])
def test_ask_tell_by_hand_gives_the_trace_of_run(preset, budget):
    config = get_preset(preset).config(PROBLEM.fidelity)
    expected = run(config, PROBLEM, 3, budget)
    loop = AskTell(config, PROBLEM, 3, budget)
    while (batch := loop.ask()) is not None:
        assert loop.ask() is batch  # asking again returns the pending batch
        ev = PROBLEM.evaluate(batch.configs, [batch.fidelity] * len(batch))
        loop.tell(list(ev.loss), list(ev.cost))
    got = loop.result()
    assert loop.done
    pd.testing.assert_frame_equal(got.trace, expected.trace)
    assert got.summary["stop_reason"] == expected.summary["stop_reason"]


def test_tell_checks_its_input():
    loop = AskTell(get_preset("hb").config(PROBLEM.fidelity), PROBLEM, 0, "2d")
    batch = loop.ask()
    with pytest.raises(UsageError, match=f"loss has 1 values for a batch of {len(batch)}"):
        loop.tell([0.5])
    with pytest.raises(UsageError, match="cost must be a finite number"):
        loop.tell(np.zeros(len(batch)), np.full(len(batch), -1.0))
    while (batch := loop.ask()) is not None:
        loop.tell(np.ones(len(batch)))
    with pytest.raises(UsageError, match="no batch is waiting.*the run is over"):
        loop.tell([1.0])


def test_minimize_gives_the_trace_of_metaopt_run(tmp_path):
    result = metaopt.minimize(synthetic_objective, BENCH.search_space, optimizer="bohb", budget="10d",
                              fidelity=_fidelity_spec(), seed=2, output=tmp_path / "api")
    assert main(["run", "--optimizer", "bohb", "--benchmark", "synthetic:mlp", "--instance", "0", "--budget", "10d",
                 "--seed", "2", "--out", str(tmp_path / "cli"), "--quiet"]) in (0, None)
    cli = pd.read_csv(tmp_path / "cli" / "trace.csv")
    api = pd.read_csv(tmp_path / "api" / "trace.csv")
    shared = [c for c in cli.columns if c in api.columns]
    assert set(cli.columns) - set(shared) <= {"normalized_regret", "normalized_regret_full"}
    pd.testing.assert_frame_equal(api[shared], cli[shared])
    full = result.trace[result.trace["fidelity"] == result.trace["fidelity"].max()]
    assert result.loss == full["loss"].min()
    # the incumbent is a configuration of the space that evaluates to the reported loss
    assert synthetic_objective(result.config, BENCH.fidelity.r_max)["loss"] == pytest.approx(result.loss)
    summary = json.loads((tmp_path / "api" / "summary.json").read_text())
    assert summary["n_failed"] == 0 and summary["optimizer"] == "bohb"


def test_minimize_with_cheap_ends_gives_cfos_trace():
    config = get_preset("cfo").config(PROBLEM.fidelity)
    expected = run(config, PROBLEM, 4, "3d")
    got = metaopt.minimize(synthetic_objective, BENCH.search_space, optimizer="cfo", budget="3d",
                           fidelity=_fidelity_spec(), seed=4, cheap_end=PROBLEM.cheap_end)
    pd.testing.assert_frame_equal(got.trace, expected.trace)


def test_minimize_with_two_workers_gives_the_trace_of_one():
    args = dict(optimizer="smashy_lcbench_hb", budget="3d", fidelity=_fidelity_spec(), seed=5)
    one = metaopt.minimize(synthetic_objective, BENCH.search_space, workers=1, **args)
    two = metaopt.minimize(synthetic_objective, BENCH.search_space, workers=2, **args)
    pd.testing.assert_frame_equal(one.trace, two.trace)


def _space() -> ConfigurationSpace:
    space = ConfigurationSpace(seed=0)
    space.add([Float("x", (-3.0, 3.0)), Integer("n", (1, 10)), Categorical("kind", ["a", "b"])])
    return space


def test_failed_evaluations_are_recorded_and_never_the_incumbent(caplog):
    def objective(config, fidelity):
        assert fidelity is None  # no fidelity declared: the objective gets None
        if config["x"] > 1.0:
            raise RuntimeError("diverged")
        if config["kind"] == "b" and config["x"] < -2.0:
            return float("nan")
        return (config["x"] - 0.5) ** 2 + config["n"] / 10

    result = metaopt.minimize(objective, _space(), optimizer="rs", budget="20d", seed=1)
    failed = ~np.isfinite(result.trace["loss"])
    assert failed.sum() == result.summary["n_failed"] == len(result.errors) > 0
    assert any("RuntimeError: diverged" in e for e in result.errors)
    assert any("returned loss nan" in e for e in result.errors)
    assert math.isfinite(result.loss) and result.config["x"] <= 1.0
    assert len(result.trace) == 60  # failed evaluations are charged to the budget
    assert "failed evaluation" in caplog.text


def test_multi_fidelity_design_on_a_function_without_fidelity():
    calls = []
    result = metaopt.minimize(lambda c, r: calls.append(r) or c["x"] ** 2, _space(), optimizer="hb", budget="5d")
    assert set(calls) == {None} and len(result.trace) == len(calls)


def test_ask_tell_loop_of_the_public_api():
    loop = metaopt.ask_tell(_space(), optimizer="bohb", budget="5d", fidelity=("epochs", 1, 9), seed=0)
    fidelities = set()
    while (batch := loop.ask()) is not None:
        fidelities.add(batch.fidelity)
        loop.tell([c["x"] ** 2 / batch.fidelity for c in batch.configs])
    assert fidelities == {1.0, 3.0, 9.0}
    trace = loop.result().trace
    assert trace["budget_used"].iloc[-1] <= 15 + 1e-9


def test_a_programming_error_keeps_the_finished_evaluations(tmp_path):
    count = {"n": 0}

    def objective(config, fidelity):
        count["n"] += 1
        return "oops" if count["n"] > 7 else config["x"] ** 2

    with pytest.raises(UsageError, match="objective: must return a number"):
        metaopt.minimize(objective, _space(), optimizer="rs", budget="10d", output=tmp_path / "out")
    trace = pd.read_csv(tmp_path / "out" / "trace.csv")
    assert len(trace) == 7


@pytest.mark.parametrize("kwargs,message", [
    (dict(space="not a space"), "space: expected a ConfigSpace ConfigurationSpace"),
    (dict(space=ConfigurationSpace({"z": NormalFloatHyperparameter("z", 0.0, 1.0, lower=-3.0, upper=3.0)})), "hyperparameter 'z' is a NormalFloat"),
    (dict(fidelity=("x", 1, 9)), "fidelity x: it is also a hyperparameter"),
    (dict(fidelity=("epochs", 9, 1)), "fidelity epochs: need 0 < r_min <= r_max"),
    (dict(fidelity=("epochs", 0, 9)), "fidelity epochs: need 0 < r_min <= r_max"),
    (dict(fidelity="epochs"), "fidelity: expected"),
    (dict(optimizer="hbb"), "optimizer: unknown optimizer 'hbb'"),
    (dict(optimizer={"mu": 0}), "optimizer: parameter mu: value 0 is not allowed"),
    (dict(budget="lots"), "budget"),
    (dict(workers=0), "workers: must be an integer >= 1"),
    (dict(objective=3), "objective: expected a callable"),
    (dict(cheap_end={"kind": "lower"}), "cheap_end: 'kind' is not a numeric hyperparameter"),
    (dict(cheap_end={"x": "low"}), "cheap_end: x='low'; allowed"),
])
def test_bad_input_gives_one_clear_error(kwargs, message):
    args = dict(objective=lambda c, r: c["x"] ** 2, space=_space(), optimizer="rs", budget="2d")
    args.update(kwargs)
    with pytest.raises(UsageError, match=message):
        metaopt.minimize(**args)


def test_a_gamma_star_file_is_an_optimizer(tmp_path):
    path = tmp_path / "gamma_star.json"
    path.write_text(json.dumps({"config": get_preset("hb").config(BENCH.fidelity)}))
    from_file = metaopt.minimize(synthetic_objective, BENCH.search_space, optimizer=path, budget="3d",
                                 fidelity=_fidelity_spec())
    from_name = metaopt.minimize(synthetic_objective, BENCH.search_space, optimizer="hb", budget="3d",
                                 fidelity=_fidelity_spec())
    pd.testing.assert_frame_equal(from_file.trace, from_name.trace)


# -- user benchmarks -----------------------------------------------------------------------------

FAMILY = textwrap.dedent('''
    import numpy as np
    from ConfigSpace import ConfigurationSpace, Float
    from metaopt.benchmarks import Benchmark, Evaluation, Fidelity

    class Bowl(Benchmark):
        reference_samples = 200
        reference_refine_rounds = 2

        def __init__(self, scenario="bowl"):
            self.name = f"user:{scenario}"
            self.instances = ["1", "2", "3"]
            self.train_instances, self.test_instances = ["1"], ["2", "3"]
            self.split_rule = "fixed"
            self.search_space = ConfigurationSpace({"x": (0.0, 1.0), "y": (0.0, 1.0)})
            self.fidelity = Fidelity("r", 1, 9, is_int=True)
            self.loss_name, self.cost_name, self.cheap_end = "loss", "cost", {}

        def evaluate(self, instance, configs, fidelities):
            r = self._check_fidelities(fidelities, len(configs))
            c = int(instance) / 4
            loss = [(cfg["x"] - c) ** 2 + (cfg["y"] - c) ** 2 + 0.1 / ri for cfg, ri in zip(configs, r)]
            return Evaluation(np.array(loss), np.asarray(r, float))

    def make():
        return Bowl()

    def not_a_benchmark():
        return 42

    make_scenario = Bowl
    make_scenario.scenarios = ["bowl", "deep"]
''')


@pytest.fixture
def user_module(tmp_path, monkeypatch):
    (tmp_path / "user_bowl.py").write_text(FAMILY)
    monkeypatch.chdir(tmp_path)  # python: specs find modules in the current directory
    yield "user_bowl"
    sys.modules.pop("user_bowl", None)


def test_python_benchmark_runs_from_the_cli(user_module, tmp_path, capsys):
    spec = f"python:{user_module}:make"
    bench = get_benchmark(spec)
    assert bench.name == "user:bowl" and bench.instances == ["1", "2", "3"]
    assert main(["run", "--optimizer", "hb", "--benchmark", spec, "--instance", "2", "--budget", "5d",
                 "--out", str(tmp_path / "run"), "--quiet"]) in (0, None)
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["normalized_regret"] is not None  # references computed from random evaluations


@pytest.mark.parametrize("spec,message", [
    ("python:user_bowl", "expected python:package.module:factory"),
    ("python:no_such_module_xyz:make", "cannot import module 'no_such_module_xyz'"),
    ("python:user_bowl:missing", "has no callable 'missing'"),
    ("python:user_bowl:not_a_benchmark", "the factory returned a int, not a metaopt.benchmarks.Benchmark"),
])
def test_python_benchmark_spec_errors(user_module, spec, message):
    with pytest.raises(UsageError, match=message):
        get_benchmark(spec)


def test_entry_point_adds_a_benchmark_kind(user_module, monkeypatch):
    import user_bowl

    class EntryPoint:  # what importlib.metadata yields for an installed package's entry point
        name = "bowls"

        def load(self):
            return user_bowl.make_scenario

    monkeypatch.setitem(_KINDS, "placeholder", None)  # restored after the test, with the kind below
    del _KINDS["placeholder"]
    _entry_point_kind(EntryPoint())
    try:
        assert get_benchmark("bowls:deep").name == "user:deep"
        from metaopt.benchmarks import list_benchmark_names
        assert {"bowls:bowl", "bowls:deep"} <= set(list_benchmark_names())
    finally:
        _KINDS.pop("bowls")
