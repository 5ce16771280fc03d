"""The Python API: ask/tell gives run()'s traces, minimize() gives `metaopt run`'s, failures and bad input."""

from __future__ import annotations

import json
import re
import math
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from ConfigSpace import Categorical, ConfigurationSpace, Float, Integer, NormalFloatHyperparameter

import metaopt
from metaopt.core.benchmarks import _entry_point_kind, _KINDS, get_benchmark
from metaopt.cli import main
from metaopt.core.errors import UsageError
from metaopt.engine.loop import AskTell, run
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
    while (batch := loop.ask_batch()) is not None:
        assert loop.ask_batch() is batch  # asking again returns the pending batch
        ev = PROBLEM.evaluate(batch.configs, [batch.fidelity] * len(batch))
        loop.tell_batch(list(ev.loss), list(ev.cost))
    got = loop.result()
    assert loop.done
    pd.testing.assert_frame_equal(got.trace, expected.trace)
    assert got.summary["stop_reason"] == expected.summary["stop_reason"]


def test_tell_checks_its_input():
    loop = AskTell(get_preset("hb").config(PROBLEM.fidelity), PROBLEM, 0, "2d")
    batch = loop.ask_batch()
    with pytest.raises(UsageError, match=f"loss has 1 values for a batch of {len(batch)}"):
        loop.tell_batch([0.5])
    with pytest.raises(UsageError, match="cost must be a finite number"):
        loop.tell_batch(np.zeros(len(batch)), np.full(len(batch), -1.0))
    with pytest.raises(UsageError, match="loss must be a real number, got True"):
        loop.tell_batch([True] * len(batch))
    while (batch := loop.ask_batch()) is not None:
        loop.tell_batch(np.ones(len(batch)))
    with pytest.raises(UsageError, match="no batch is waiting.*the run is over"):
        loop.tell_batch([1.0])


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

    result = metaopt.minimize(objective, _space(), optimizer="rs", budget="20d", seed=1, catch=(RuntimeError,))
    failed = ~np.isfinite(result.trace["loss"])
    assert failed.sum() == result.summary["n_failed"] == len(result.errors) > 0
    assert any("RuntimeError: diverged" in e for e in result.errors)
    assert any("returned loss nan" in e for e in result.errors)
    assert math.isfinite(result.loss) and result.config["x"] <= 1.0
    assert len(result.trace) == 60  # failed evaluations are charged to the budget
    assert "failed evaluation" in caplog.text


def test_multi_fidelity_design_on_a_function_without_fidelity():
    calls = []
    with pytest.warns(UserWarning, match="no fidelity"):
        result = metaopt.minimize(lambda c, r: calls.append(r) or c["x"] ** 2, _space(), optimizer="hb", budget="5d")
    assert set(calls) == {None} and len(result.trace) == len(calls)


def test_ask_tell_loop_of_the_public_api():
    loop = metaopt.ask_tell(_space(), optimizer="bohb", budget="5d", fidelity=("epochs", 1, 9), seed=0)
    fidelities = set()
    while (trial := loop.ask()) is not None:
        fidelities.add(trial.fidelity)
        loop.tell(trial, trial.config["x"] ** 2 / trial.fidelity)
    assert fidelities == {1.0, 3.0, 9.0}
    trace = loop.result().trace
    assert trace["budget_used"].iloc[-1] <= 15 + 1e-9


def test_a_programming_error_keeps_the_finished_evaluations(tmp_path):
    count = {"n": 0}

    def objective(config, fidelity):
        count["n"] += 1
        return "oops" if count["n"] > 7 else config["x"] ** 2

    with pytest.raises(UsageError, match="objective: the loss must be a real number, got 'oops'"):
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
    from metaopt.core.benchmarks import Benchmark, Evaluation, Fidelity

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
    ("python:user_bowl:not_a_benchmark", "the factory returned a int, not a metaopt.core.benchmarks.Benchmark"),
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
        from metaopt.core.benchmarks import list_benchmark_names
        assert {"bowls:bowl", "bowls:deep"} <= set(list_benchmark_names())
    finally:
        _KINDS.pop("bowls")


# -- the API's promises on a user's (expensive) objective ----------------------------------------

class Counted:
    """An objective that counts its calls (module level for pickling is not needed: workers=1)."""

    def __init__(self, cost: float | None = None, fail_at: int | None = None, exc: type = RuntimeError) -> None:
        self.calls, self.cost, self.fail_at, self.exc = 0, cost, fail_at, exc

    def __call__(self, config: dict, fidelity) -> float | dict:
        self.calls += 1
        if self.fail_at is not None and self.calls == self.fail_at:
            raise self.exc(f"evaluation {self.calls} failed")
        loss = (config["x"] - 0.5) ** 2 + config["n"] / 10 + (0.1 if config["kind"] == "b" else 0.0)
        return loss if self.cost is None else {"loss": loss, "cost": self.cost}


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("METAOPT_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_a_cost_budget_calls_the_objective_only_for_the_trace(cache_dir):
    objective = Counted(cost=1.0)
    result = metaopt.minimize(objective, _space(), optimizer="rs", budget="20c", seed=0)
    assert objective.calls == len(result.trace) == 20  # 20 cost units of evaluations costing 1 each
    assert result.summary["budget_unit"] == "cost" and result.summary["cost_used"] == 20
    other = Counted(cost=2.0)  # another function with the same name: nothing cached by name
    again = metaopt.minimize(other, _space(), optimizer="rs", budget="20c", seed=0)
    assert other.calls == len(again.trace) == 10
    assert not cache_dir.exists()
    with_reference = Counted(cost=1.0)
    scaled = metaopt.minimize(with_reference, _space(), optimizer="rs", budget="5c", typical_cost=4.0, seed=0)
    assert with_reference.calls == len(scaled.trace) == 20 and scaled.summary["budget"] == 20


def test_an_exception_in_the_objective_propagates_with_the_finished_evaluations_saved(tmp_path):
    objective = Counted(fail_at=6)
    with pytest.raises(RuntimeError, match="evaluation 6 failed"):
        metaopt.minimize(objective, _space(), optimizer="rs", budget="10d", output=tmp_path / "out")
    assert len(pd.read_csv(tmp_path / "out" / "trace.csv")) == 5


def test_caught_exceptions_are_failed_evaluations():
    objective = Counted(fail_at=3)
    result = metaopt.minimize(objective, _space(), optimizer="rs", budget="3d", catch=(RuntimeError,))
    assert result.summary["n_failed"] == 1 and np.isnan(result.trace["loss"][2])
    assert result.errors == ["RuntimeError: evaluation 3 failed"]
    with pytest.raises(KeyError):  # only the listed exceptions are caught
        metaopt.minimize(Counted(fail_at=3, exc=KeyError), _space(), optimizer="rs", budget="3d",
                         catch=(RuntimeError,))


def test_a_wrong_signature_raises_instead_of_all_nan():
    with pytest.raises(TypeError):
        metaopt.minimize(lambda config: config["x"], _space(), optimizer="rs", budget="2d")


@pytest.mark.parametrize("value,shown", [(True, "True"), ("0.3", "'0.3'"), ({"loss": False}, "False"), (None, "None")])
def test_a_loss_must_be_a_real_number(value, shown):
    with pytest.raises(UsageError, match=f"objective: .*loss must be a real number.*{shown}"):
        metaopt.minimize(lambda c, r: value, _space(), optimizer="rs", budget="2d")


def test_every_evaluation_failed_is_an_error_not_config_none():
    def objective(config, fidelity):
        raise ValueError("broken")

    with pytest.raises(RuntimeError, match="all 6 evaluations failed.*ValueError: broken"):
        metaopt.minimize(objective, _space(), optimizer="rs", budget="2d", catch=(ValueError,))


def test_ask_tell_trials_can_be_told_in_any_order():
    config = get_preset("hb").config(PROBLEM.fidelity)
    expected = run(config, PROBLEM, 3, "5d")
    loop = AskTell(config, PROBLEM, 3, "5d")
    n_asked = 0
    while not loop.done:
        trials = []
        while (trial := loop.ask()) is not None:
            trials.append(trial)
            assert len(trials) <= 1000, "ask() hands out each trial once"
        assert [t.id for t in trials] == list(range(n_asked, n_asked + len(trials)))
        assert loop.pending == trials  # asked, not told: known to the loop
        n_asked += len(trials)
        for trial in reversed(trials):  # finished in another order than asked
            ev = PROBLEM.evaluate([trial.config], [trial.fidelity])
            loop.tell(trial, float(ev.loss[0]), cost=float(ev.cost[0]))
    pd.testing.assert_frame_equal(loop.result().trace, expected.trace)


def test_ask_tell_refuses_a_trial_told_twice_or_never_asked():
    loop = metaopt.ask_tell(_space(), optimizer="hb", budget="5d", fidelity=("epochs", 1, 9), seed=0)
    first, second = loop.ask(), loop.ask()
    loop.tell(first, 0.5)
    with pytest.raises(UsageError, match=f"trial {first.id} was already told"):
        loop.tell(first, 0.4)
    with pytest.raises(UsageError, match="trial 999 was never asked"):
        loop.tell(999, 0.4)
    loop.tell(second.id, 0.3)  # by id
    assert loop.pending == []


@pytest.mark.parametrize("bad", [True, "0.3", None])
def test_tell_refuses_a_loss_that_is_not_a_real_number(bad):
    loop = metaopt.ask_tell(_space(), optimizer="rs", budget="2d", seed=0)
    with pytest.raises(UsageError, match=f"tell: loss must be a real number, got {bad!r}"):
        loop.tell(loop.ask(), bad)


def test_ask_tell_non_finite_losses_are_failed_and_the_result_has_the_incumbent():
    loop = metaopt.ask_tell(_space(), optimizer="rs", budget="3d", seed=0)
    values = iter([-math.inf, math.inf, math.nan] + [0.1 * i + 1 for i in range(20)])
    while (trial := loop.ask()) is not None:
        loop.tell(trial, next(values))
    result = loop.result()
    assert result.loss == 1.0 and math.isfinite(result.trace["incumbent_loss"].iloc[-1])
    assert result.trace["loss"][:3].isna().all() and result.n_failed == 3
    assert result.config is not None and result.summary["n_evals"] == len(result.trace)


def test_minimize_resumes_from_its_output_to_the_uninterrupted_trace(tmp_path):
    args = dict(optimizer="bohb", budget="4d", fidelity=("epochs", 1, 9), seed=1)
    uninterrupted = metaopt.minimize(Counted(), _space(), **args)
    interrupted = Counted(fail_at=25, exc=KeyboardInterrupt)
    with pytest.raises(KeyboardInterrupt):
        metaopt.minimize(interrupted, _space(), output=tmp_path / "run", **args)
    resumed = Counted()
    result = metaopt.minimize(resumed, _space(), output=tmp_path / "run", **args)
    assert resumed.calls == len(uninterrupted.trace) - 24  # the 24 finished evaluations are not redone
    pd.testing.assert_frame_equal(result.trace, uninterrupted.trace)
    assert result.config == uninterrupted.config
    again = Counted()  # a finished run: read back, nothing evaluated
    pd.testing.assert_frame_equal(metaopt.minimize(again, _space(), output=tmp_path / "run", **args).trace,
                                  uninterrupted.trace)
    assert again.calls == 0
    with pytest.raises(UsageError, match="output: .* another run"):
        metaopt.minimize(Counted(), _space(), output=tmp_path / "run", **{**args, "seed": 2})


def test_a_timeout_stops_the_run_and_a_resume_finishes_it(tmp_path):
    args = dict(optimizer="hb", budget="3d", fidelity=("epochs", 1, 9), seed=1)
    short = metaopt.minimize(Counted(), _space(), output=tmp_path / "run", timeout=1e-9, **args)
    assert short.summary["stop_reason"] == "timeout"
    full = metaopt.minimize(Counted(), _space(), output=tmp_path / "run", **args)
    pd.testing.assert_frame_equal(full.trace, metaopt.minimize(Counted(), _space(), **args).trace)


def test_a_multi_fidelity_design_without_a_fidelity_warns():
    with pytest.warns(UserWarning, match="optimizer hb: .*no fidelity"):
        metaopt.minimize(Counted(), _space(), optimizer="hb", budget="2d")


def test_without_a_fidelity_the_default_is_the_no_fidelity_search_design():
    """metaopt_default on a problem without a fidelity is the design no_fidelity_switch_race chose for such
    problems (smashy_lcbench_hb's batches of 5 at the one level, SMAC's forest from half the budget on),
    not metaopt_balanced's batches of 20, and it does not warn about a multi-fidelity schedule: it was
    chosen for one level."""
    import warnings

    args = dict(budget="5d", seed=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        default = metaopt.minimize(Counted(), _space(), **args)
    gamma = Path(__file__).parents[1] / "studies/gammas/smashy_lcbench_hb_rf50.json"
    with pytest.warns(UserWarning, match="no fidelity"):
        chosen = metaopt.minimize(Counted(), _space(), optimizer=gamma, **args)
    pd.testing.assert_frame_equal(default.trace, chosen.trace)
    sizes = default.trace["batch"].value_counts(sort=False).sort_index().tolist()
    assert default.summary["config"]["mu"] == 5 and sizes[0] == 5 and sizes[-1] == 1  # batches of 5, then the forest
    with_fidelity = metaopt.minimize(Counted(), _space(), budget="5d", seed=2, fidelity=("epochs", 1, 27))
    assert with_fidelity.summary["config"]["proposal"] == "filter_then_rf" and with_fidelity.summary["config"]["mu"] == 47


def test_presets_show_gives_the_configuration_minimize_uses(capsys):
    assert main(["presets", "show", "bohb", "--fidelity", "1:27"]) in (0, None)
    shown = json.loads(capsys.readouterr().out)
    result = metaopt.minimize(Counted(), _space(), optimizer="bohb", budget="2d", fidelity=("epochs", 1, 27))
    assert shown == result.summary["config"] and shown["mu"] == 27


def test_metaopt_run_writes_the_best_configuration(tmp_path):
    assert main(["run", "--optimizer", "bohb", "--benchmark", "synthetic:mlp", "--instance", "0", "--budget", "5d",
                 "--seed", "2", "--out", str(tmp_path / "cli"), "--quiet"]) in (0, None)
    summary = json.loads((tmp_path / "cli" / "summary.json").read_text())
    best = summary["best_config"]
    assert set(best) <= set(BENCH.hyperparameter_names)
    assert synthetic_objective(best, BENCH.fidelity.r_max)["loss"] == pytest.approx(summary["final_loss_full"])
    result = metaopt.minimize(synthetic_objective, BENCH.search_space, optimizer="bohb", budget="5d",
                              fidelity=_fidelity_spec(), seed=2)
    assert result.config == best


@pytest.mark.parametrize("seed", ["a", -1, 1.5, True])
def test_a_bad_seed_is_named(seed):
    with pytest.raises(UsageError, match=f"seed: must be an integer >= 0, got {seed!r}"):
        metaopt.minimize(Counted(), _space(), optimizer="rs", budget="2d", seed=seed)
    with pytest.raises(UsageError, match="seed: must be an integer"):
        metaopt.ask_tell(_space(), optimizer="rs", budget="2d", seed=seed)


def test_usage_errors_are_value_errors_and_the_package_is_typed():
    assert issubclass(UsageError, ValueError)
    assert (Path(metaopt.__file__).parent / "py.typed").exists()
    import tomllib
    pyproject = tomllib.loads((Path(__file__).parent.parent / "pyproject.toml").read_text())
    assert "py.typed" in pyproject["tool"]["setuptools"]["package-data"]["metaopt"]


def test_minimize_needs_only_declared_dependencies_and_not_yahpo():
    script = textwrap.dedent('''
        import sys, json
        before = set(sys.modules)  # the interpreter's own start-up (site hooks)
        import metaopt
        from ConfigSpace import ConfigurationSpace, Float
        space = ConfigurationSpace({"x": (0.0, 1.0), "y": (0.0, 1.0)})
        for optimizer in ("bohb", "smac_like", "cfo", "bo_gp_ei", "smashy_lcbench_hb"):
            metaopt.minimize(lambda c, r: c["x"] + c["y"], space, optimizer=optimizer, budget="3d",
                             fidelity=("r", 1, 9))
        new = {m.split(".")[0] for m in set(sys.modules) - before}
        print(json.dumps(sorted(new - set(sys.stdlib_module_names))))
    ''')
    import subprocess
    from importlib import metadata
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    imported = set(json.loads(out.splitlines()[-1]))
    assert "yahpo_gym" not in imported
    needed, todo = set(), ["metaopt"]
    while todo:  # the distributions metaopt declares, and theirs, transitively (no extras)
        name = todo.pop().lower().replace("_", "-")
        if name in needed:
            continue
        needed.add(name)
        try:
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue
        for req in requires:
            if "extra ==" not in req:
                todo.append(re.split(r"[\s\[<>=!~;(]", req, maxsplit=1)[0])
    providers = metadata.packages_distributions()
    undeclared = {m for m in imported if m in providers
                  and not {d.lower().replace("_", "-") for d in providers[m]} & needed}
    assert not undeclared


def test_the_default_optimizer_is_the_pooled_search_design():
    """Without ``optimizer``, minimize and ask_tell run metaopt_default (with a fidelity the design the
    race over the pooled training instances found; spaces/designs/metaopt_default.json): the same trace
    as naming it."""
    import inspect

    from metaopt.spaces.presets import DEFAULT_OPTIMIZER, get_preset

    assert DEFAULT_OPTIMIZER == "metaopt_default" and get_preset(DEFAULT_OPTIMIZER).found_by == "default_switch_race"
    for function in (metaopt.minimize, metaopt.ask_tell):
        assert inspect.signature(function).parameters["optimizer"].default == "metaopt_default"
    args = dict(budget="10d", fidelity=_fidelity_spec(), seed=3)
    default = metaopt.minimize(synthetic_objective, BENCH.search_space, **args)
    named = metaopt.minimize(synthetic_objective, BENCH.search_space, optimizer="metaopt_default", **args)
    pd.testing.assert_frame_equal(default.trace, named.trace)
    assert default.summary["n_evals"] > 0 and default.loss == named.loss
