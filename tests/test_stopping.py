"""Stopping rules (paper 002): Conv-i, EI / PI thresholds, the regret bound; RYC and RTC."""

import math

import numpy as np
import pandas as pd
import pytest
from ConfigSpace import ConfigurationSpace

from metaopt.analysis.termination import rtc, ryc
from metaopt.stages.evaluation import termination_metrics, write_termination_table
from metaopt.spaces.design_space import without_stopping
from metaopt.components.stopping import WARMUP, ConvergenceRule, EIThresholdRule, RegretBoundRule, beta
from metaopt.core.archive import Archive
from metaopt.core.benchmarks import get_benchmark
from metaopt.core.benchmarks.base import Benchmark, Evaluation, Fidelity
from metaopt.core.budget import Budget
from metaopt.core.context import RunState
from metaopt.engine.loop import run
from metaopt.engine.simclock import run as run_on_clock
from metaopt.engine.trace import stopped_early
from metaopt.spaces.design_space import validate
from metaopt.spaces.presets import get_preset
from metaopt.store.store import EvalFiles

ROSENBROCK = get_benchmark("synthetic:rosenbrock").problem("0")


class Toy(Benchmark):
    """A 2-d function on [0, 1]², one fidelity level, unit cost."""

    def __init__(self, name, f):
        self.name, self.f = name, f
        self.instances = self.train_instances = ["0"]
        self.test_instances = []
        self.split_rule = "one instance"
        self.search_space = ConfigurationSpace({"x0": (0.0, 1.0), "x1": (0.0, 1.0)})
        self.fidelity = Fidelity("epoch", 1, 1)
        self.loss_name, self.cost_name, self.cheap_end = "loss", "time", {}

    def evaluate(self, instance, configs, fidelities):
        x = np.array([[c["x0"], c["x1"]] for c in configs])
        return Evaluation(self.f(x), np.ones(len(x)))


def _branin(x):
    a, b = 15 * x[:, 0] - 5, 15 * x[:, 1]
    return ((b - 5.1 / (4 * np.pi**2) * a**2 + 5 / np.pi * a - 6) ** 2 + 10 * (1 - 1 / (8 * np.pi)) * np.cos(a)) / 100


FLAT = Toy("flat", lambda x: 1 + 0.01 * np.tanh(((x - [0.3, 0.6]) ** 2).sum(axis=1))).problem("0")
PLANE = Toy("plane", lambda x: x.sum(axis=1)).problem("0")
BRANIN = Toy("branin", _branin).problem("0")


def with_rule(preset, problem, stopping, **hyperparameters):
    config = without_stopping(get_preset(preset).config(problem.fidelity))
    return validate({**config, "stopping": stopping, **hyperparameters})


def hand_made_state(problem=PLANE):
    return RunState(problem, Budget.parse("100", problem.d), Archive(problem.d))


def add_batch(state, losses):
    n = len(losses)
    X = np.random.default_rng(len(state.archive)).random((n, state.archive.dim))
    state.archive.add(X, config_id=np.arange(n), batch=np.full(n, state.n_batches),
                      stage=np.zeros(n), bracket=np.zeros(n), fidelity=np.ones(n), loss=np.asarray(losses, float),
                      cost=np.ones(n))
    state.n_batches += 1


def test_conv_stops_exactly_after_i_iterations_without_improvement():
    state, rule = hand_made_state(), ConvergenceRule(stop_conv_patience=5)
    # batch 1 sets the incumbent 4; a tie (batch 3) and worse or NaN losses do not improve it
    batches = [[5.0], [4.0, 9.0], [4.5], [4.0], [6.0, np.nan], [7.0], [8.0], [np.nan]]
    reasons, stats = [], []
    for losses in batches:
        add_batch(state, losses)
        reasons.append(rule.check(state))
        stats.append(rule.statistic)
    assert stats == [0, 0, 1, 2, 3, 4, 5, 6]
    assert reasons == [None] * 6 + ["conv", "conv"]


def test_model_rules_do_not_stop_without_evidence():
    state = hand_made_state()
    rules = (EIThresholdRule(stop_ei_threshold=0.1), RegretBoundRule(stop_regret_epsilon=0.3))
    add_batch(state, [1.0] * (WARMUP - 1))  # warm-up: too few evaluations
    for rule in rules:
        assert rule.check(state) is None and math.isnan(rule.statistic)
    add_batch(state, [1.0, np.nan])  # constant losses (NaN ones are ignored): the GP falls back
    for rule in rules:
        assert rule.check(state) is None and math.isnan(rule.statistic)


@pytest.mark.parametrize("stopping, threshold", [("ei_threshold", {"stop_ei_threshold": 1e-2}),
                                                 ("pi_threshold", {"stop_pi_threshold": 1e-2})])
def test_improvement_thresholds_stop_on_a_flat_problem_not_at_the_start(stopping, threshold):
    result = run(with_rule("bo_autostop", FLAT, stopping, **threshold), FLAT, seed=1, budget="40")
    assert result.summary["stop_reason"] == stopping
    assert WARMUP <= result.summary["n_evals"] < 40
    statistic = result.trace["stop_statistic"]
    assert statistic.iloc[: WARMUP - 1].isna().all() and statistic.iloc[WARMUP - 1:].notna().all()


def test_ei_threshold_goes_on_while_improvement_is_expected():
    result = run(with_rule("rs", PLANE, "ei_threshold", stop_ei_threshold=1e-2), PLANE, seed=1, budget="40")
    assert result.summary["stop_reason"] == "budget"


def test_beta_follows_the_paper():
    assert beta(9, 20) == pytest.approx(2 * math.log(9 * 400 * math.pi**2 / 0.6) / 5)


def test_regret_bound_tightens_as_evidence_accumulates():
    result = run(with_rule("bo_autostop", BRANIN, "regret_bound", stop_regret_epsilon=1e-3), BRANIN, seed=2, budget="60")
    assert result.summary["stop_reason"] == "budget"
    bound = result.trace["stop_statistic"].dropna().to_numpy()
    assert len(bound) >= 30 and (bound >= 0).all()
    # The first ten bounds against the last ten: a single early bound can be small by chance (few points
    # near one another), the median of ten is not.
    assert np.median(bound[-10:]) < 0.3 * np.median(bound[:10])


def test_regret_bound_stops_later_the_tighter_epsilon_is():
    loose = run(with_rule("bo_autostop", ROSENBROCK, "regret_bound", stop_regret_epsilon=0.3), ROSENBROCK, 1, "40")
    tight = run(with_rule("bo_autostop", ROSENBROCK, "regret_bound", stop_regret_epsilon=1e-3), ROSENBROCK, 1, "40")
    assert loose.summary["stop_reason"] == "regret_bound" and WARMUP <= loose.summary["n_evals"] < 40
    assert tight.summary["n_evals"] > loose.summary["n_evals"]
    # the rule draws from its own generator: the same seed gives the same run, up to the stop
    plain = run(without_stopping(get_preset("bo_autostop").config(ROSENBROCK.fidelity)), ROSENBROCK, 1, "40")
    m = tight.summary["n_evals"]
    pd.testing.assert_frame_equal(tight.trace.drop(columns="stop_statistic"),
                                  plain.trace.drop(columns="stop_statistic").iloc[:m], check_exact=True)
    n = loose.summary["n_evals"]
    pd.testing.assert_frame_equal(loose.trace, tight.trace.iloc[:n], check_exact=True)


def test_stopped_run_agrees_with_the_full_run_and_metrics():
    config = with_rule("rs", ROSENBROCK, "conv", stop_conv_patience=5)
    stopped = run(config, ROSENBROCK, seed=1, budget="40")
    full = run(without_stopping(config), ROSENBROCK, seed=1, budget="40")
    n = stopped.summary["n_evals"]
    assert stopped.summary["stop_reason"] == "conv" and n < 40
    assert full.summary["stop_reason"] == "budget" and full.trace["stop_statistic"].isna().all()
    pd.testing.assert_frame_equal(stopped.trace.drop(columns="stop_statistic"),
                                  full.trace.iloc[:n].drop(columns="stop_statistic"), check_exact=True)
    assert stopped.trace["stop_statistic"].iloc[-1] == 5
    metrics = termination_metrics(config, ROSENBROCK, seed=1, budget="40")
    assert metrics["stop_reason"] == "conv" and metrics["n_evals_stopped"] == n and metrics["n_evals_full"] == 40
    assert metrics["ryc"] == pytest.approx(ryc(stopped.trace, full.trace)) and metrics["ryc"] <= 0
    assert metrics["rtc"] == pytest.approx(rtc(stopped.trace, full.trace)) and 0 < metrics["rtc"] < 1
    assert metrics["rtc_budget"] == pytest.approx((40 - n) / 40)
    assert metrics["stopped_at_budget"] == pytest.approx(n)


def test_a_run_the_clocks_time_limit_ended_did_not_stop_early(tmp_path):
    """On the simulated clock, a run whose rule has not fired by the time limit ends with stop reason
    `time`: the termination table counts it as run to its end (stopped 0), like a run that spent its
    budget, and only a run its rule ended as stopped early (1)."""
    config = with_rule("rs", ROSENBROCK, "conv", stop_conv_patience=5)
    ruled = run_on_clock(config, ROSENBROCK, 1, "40", workers=2)
    limit = ruled.summary["sim_time"] / 3
    timed = run_on_clock(config, ROSENBROCK, 1, "40", workers=2, time_limit=limit)
    assert (ruled.summary["stop_reason"], timed.summary["stop_reason"]) == ("conv", "time")
    full = {key: run_on_clock(without_stopping(config), ROSENBROCK, 1, "40", workers=2, time_limit=t)
            for key, t in (("ruled", None), ("timed", limit))}
    results = [({"optimizer": name, "instance": key, "seed": 1}, res)
               for key, stopped in (("ruled", ruled), ("timed", timed))
               for name, res in (("rs_conv", stopped), ("rs", full[key]))]
    write_termination_table(EvalFiles(tmp_path), results, {"rs_conv": "rs"}, "caption")
    per_run = pd.read_csv(tmp_path / "termination_runs.csv").set_index("instance")
    assert per_run.loc["ruled", "stopped"] == 1.0 and per_run.loc["timed", "stopped"] == 0.0
    assert not stopped_early("time") and not stopped_early("budget") and stopped_early("conv")


def test_ryc_and_rtc_formulas():
    stopped = pd.DataFrame({"incumbent_loss": [0.5, 0.3], "cost_used": [10.0, 25.0], "budget_used": [1.0, 2.0]})
    full = pd.DataFrame({"incumbent_loss": [0.5, 0.3, 0.2], "cost_used": [10.0, 25.0, 100.0],
                         "budget_used": [1.0, 2.0, 4.0]})
    assert ryc(stopped, full) == pytest.approx((0.2 - 0.3) / 0.3)  # Eq. 11
    assert rtc(stopped, full) == pytest.approx((100 - 25) / 100)  # Eq. 12, in cost
    assert rtc(stopped, full, column="budget_used") == pytest.approx(0.5)
    assert ryc(full, full) == 0 and rtc(full, full) == 0
    assert ryc(stopped.assign(incumbent_loss=0.1), full) == pytest.approx(0.1 / 0.2)  # positive: overfitting


def test_runs_are_deterministic_with_a_model_based_rule():
    config = with_rule("rs", PLANE, "regret_bound")
    a, b = run(config, PLANE, seed=3, budget="30"), run(config, PLANE, seed=3, budget="30")
    pd.testing.assert_frame_equal(a.trace, b.trace, check_exact=True)
    assert a.trace["stop_statistic"].notna().any()


def test_bo_autostop_preset_runs():
    config = get_preset("bo_autostop").config(ROSENBROCK.fidelity)
    assert config["stopping"] == "regret_bound" and config["stop_regret_epsilon"] == pytest.approx(0.05)
    # bo_gp_ei one point at a time, its kernel optimized at every batch
    one_point = {**get_preset("bo_gp_ei").config(ROSENBROCK.fidelity), "mu": 1, "gp_refit_growth": 0.0}
    assert without_stopping(config) == one_point
    result = run(config, ROSENBROCK, seed=1, budget="25")
    assert result.summary["stop_reason"] in {"regret_bound", "budget"}
    assert result.trace["stop_statistic"].iloc[WARMUP - 1:-1].notna().all()
