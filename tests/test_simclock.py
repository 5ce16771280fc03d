"""The simulated clock: workers and return times, synchronous batches idling workers and asynchronous
designs not, ASHA's promotion rule, the constant liar, determinism and budget accounting."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from ConfigSpace import ConfigurationSpace, Float
from hypothesis import HealthCheck, given, settings, strategies as st

from metaopt.core.archive import Archive
from metaopt.core.benchmarks import get_benchmark
from metaopt.core.benchmarks.function import FunctionBenchmark
from metaopt.core.budget import BUDGET_TOLERANCE, Budget
from metaopt.components.async_schedules import AsyncSuccessiveHalving, RungResults
from metaopt.components.pending import ConstantLiar, IgnorePending
from metaopt.core.errors import UsageError
from metaopt.engine.loop import AskTell, run as run_loop
from metaopt.engine.simclock import CLOCK_COLUMNS, SimClock, run
from metaopt.spaces.design_space import design_space, validate
from metaopt.spaces.presets import get_preset

PROBLEM = get_benchmark("synthetic:mlp").problem("0")
DESIGNS = ["rs", "hb", "bohb", "smashy_lcbench_equal", "asha", "async_bohb"]


def _config(name: str) -> dict:
    return get_preset(name).config(PROBLEM.fidelity)


# -- the clock ------------------------------------------------------------------------------------
def test_clock_returns_results_in_time_order_ties_by_start_on_the_lowest_free_worker():
    clock = SimClock(2)
    a, b = clock.start(5.0, "a"), clock.start(5.0, "b")
    assert (a.worker, b.worker, clock.n_free) == (0, 1, 0)
    assert clock.next_result().payload == "a"  # equal finish: the one started first
    c = clock.start(1.0, "c")
    assert (c.worker, c.start, c.finish) == (0, 5.0, 6.0)
    assert [clock.next_result().payload for _ in range(2)] == ["b", "c"]
    assert clock.now == 6.0 and clock.utilization(6.0) == 11.0 / 12.0 and clock.utilization(2.0) == 1.0
    with pytest.raises(UsageError, match="workers: must be an integer >= 1"):
        SimClock(0)
    with pytest.raises(UsageError, match="finite number >= 0"):
        clock.start(math.nan, "d")


# -- properties of every trace on the clock ----------------------------------------------------------
def _check_clock_trace(trace: pd.DataFrame, workers: int, asynchronous: bool) -> None:
    """Return time = start + cost; no worker runs two evaluations at once; time order where it must hold."""
    assert (trace["worker"].between(0, workers - 1)).all()
    np.testing.assert_allclose(trace["sim_time"], trace["sim_start"] + trace["cost"], rtol=0, atol=1e-9)
    for _, rows in trace.sort_values("sim_start", kind="stable").groupby("worker"):
        assert (rows["sim_start"].to_numpy()[1:] >= rows["sim_time"].to_numpy()[:-1] - 1e-9).all()
    if asynchronous:  # rows are results in the order they arrived
        assert (np.diff(trace["sim_time"]) >= 0).all()
    else:  # a batch starts when the previous one has returned entirely
        ends = trace.groupby("batch")["sim_time"].max()
        starts = trace.groupby("batch")["sim_start"].min()
        assert (starts.to_numpy()[1:] >= ends.to_numpy()[:-1] - 1e-9).all()


@pytest.mark.parametrize("name", DESIGNS)
@pytest.mark.parametrize("workers", [1, 3, 8])
def test_runs_on_the_clock_are_deterministic_and_keep_time(name, workers):
    config = _config(name)
    first = run(config, PROBLEM, 2, "6d", workers=workers)
    again = run(config, PROBLEM, 2, "6d", workers=workers)
    pd.testing.assert_frame_equal(first.trace, again.trace)
    trace = first.trace
    assert len(trace) > 0 and list(trace.columns[8:11]) == CLOCK_COLUMNS
    _check_clock_trace(trace, workers, asynchronous=name in ("asha", "async_bohb"))
    budget = Budget.parse("6d", PROBLEM.d).amount
    assert trace["budget_used"].iloc[-1] <= budget + BUDGET_TOLERANCE
    assert first.summary["sim_time"] == pytest.approx(trace["sim_time"].max())
    assert 0 < first.summary["utilization"] <= 1 + 1e-12
    if workers == 1:
        assert first.summary["utilization"] == pytest.approx(1.0)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**31 - 2), workers=st.integers(1, 16), budget=st.floats(1.0, 8.0))
def test_any_design_on_the_clock_keeps_time_and_budget(seed, workers, budget):
    """Property: any point of the design space, with any number of workers, keeps the clock's
    invariants and its budget."""
    space = design_space()
    space.seed(seed)
    config = dict(space.sample_configuration())
    result = run(config, PROBLEM, seed, str(budget), workers=workers)
    trace = result.trace
    if len(trace):
        _check_clock_trace(trace, workers, asynchronous=config["fidelity_schedule"] == "asha")
    assert float((trace["fidelity"] / PROBLEM.fidelity.r_max).sum()) <= budget + BUDGET_TOLERANCE


@pytest.mark.parametrize("name", ["hb", "bohb", "smashy_lcbench_hb"])
def test_a_synchronous_design_on_the_clock_has_the_trace_of_run(name):
    config = _config(name)
    plain = run(config, PROBLEM, 1, "5d")  # no workers: the batch loop itself, no clock columns
    pd.testing.assert_frame_equal(plain.trace, run_loop(config, PROBLEM, 1, "5d").trace)
    on_clock = run(config, PROBLEM, 1, "5d", workers=4)
    pd.testing.assert_frame_equal(on_clock.trace.drop(columns=CLOCK_COLUMNS), plain.trace)


def test_more_workers_finish_sooner_in_simulated_time():
    times = [run(_config("asha"), PROBLEM, 0, "6d", workers=w).summary["sim_time"] for w in (1, 4, 16)]
    assert times[0] > times[1] > times[2]


# -- the test: a slow evaluation idles a synchronous batch's workers, not an asynchronous run's ---
SLOW = 100.0


def _slow_objective(config: dict, fidelity: float | None) -> dict:
    """Loss x; every evaluation takes 1 simulated second but those with x < 0.1, which take 100."""
    return {"loss": config["x"], "cost": SLOW if config["x"] < 0.1 else 1.0}


def test_a_slow_evaluation_idles_the_other_workers_of_a_synchronous_batch_only():
    space = ConfigurationSpace(seed=0)
    space.add(Float("x", (0.0, 1.0)))
    problem = FunctionBenchmark(_slow_objective, space, None, name="slow").problem("0")
    workers = 8
    synchronous = run({"fidelity_schedule": "single", "mu": workers}, problem, 3, "64", workers=workers)
    asynchronous = run({"fidelity_schedule": "asha", "mu": 1}, problem, 3, "64", workers=workers)
    for result in (synchronous, asynchronous):
        assert len(result.trace) == 64 and (result.trace["cost"] == SLOW).any()

    sync = synchronous.trace
    for _, batch in sync.groupby("batch"):
        if (batch["cost"] == SLOW).any():  # the other 7 workers wait 99 seconds for the slow one
            assert batch["sim_time"].max() - batch["sim_time"].min() == pytest.approx(SLOW - 1)
            later = sync[sync["batch"] > batch["batch"].iloc[0]]
            assert (later["sim_start"] >= batch["sim_time"].max()).all()

    trace = asynchronous.trace
    slow = trace[trace["cost"] == SLOW].iloc[0]
    during = trace[(trace["sim_start"] > slow["sim_start"]) & (trace["sim_start"] < slow["sim_time"])]
    assert set(during["worker"]) == set(range(workers)) - {slow["worker"]}  # the others keep working
    assert asynchronous.summary["utilization"] > synchronous.summary["utilization"]
    assert asynchronous.summary["sim_time"] < synchronous.summary["sim_time"]


# -- budgets ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["hb", "asha"])
def test_a_time_limit_discards_what_arrives_later(name):
    unlimited = run(_config(name), PROBLEM, 0, "10d", workers=4)
    limit = unlimited.summary["sim_time"] / 3
    limited = run(_config(name), PROBLEM, 0, "10d", workers=4, time_limit=limit)
    assert limited.summary["stop_reason"] == "time"
    assert 0 < len(limited.trace) < len(unlimited.trace)
    assert (limited.trace["sim_time"] <= limit).all() and (limited.trace["sim_start"] < limit).all()
    # what arrived in time is what the unlimited run saw first
    shared = unlimited.trace.iloc[:len(limited.trace)].drop(columns=["stop_statistic"])
    pd.testing.assert_frame_equal(limited.trace.drop(columns=["stop_statistic"]), shared)


def test_an_asynchronous_run_never_exceeds_a_cost_budget():
    budget = Budget(300.0, "cost", "300s")
    result = run(_config("asha"), PROBLEM, 1, budget, workers=4)
    assert result.summary["stop_reason"] == "budget"
    assert result.trace["cost_used"].iloc[-1] <= 300.0 + BUDGET_TOLERANCE


def test_bad_time_limits_and_batch_ask_tell_of_an_asynchronous_design_are_refused():
    with pytest.raises(UsageError, match="time limit: must be a number of simulated seconds > 0"):
        run(_config("hb"), PROBLEM, 0, "2d", workers=2, time_limit=0)
    with pytest.raises(UsageError, match="fidelity_schedule asha is asynchronous"):
        AskTell(_config("asha"), PROBLEM, 0, "2d")


# -- ASHA's promotion and the pending policies --------------------------------------------------------
def test_asha_promotes_the_top_third_of_a_rung_once_each():
    schedule = AsyncSuccessiveHalving(math.log(3), 1 / 3)
    rungs = [RungResults([0, 1], [0.5, 0.2]), RungResults(), RungResults()]
    assert schedule.next_job(rungs) == (None, 0)  # floor(2/3) = 0: nobody is promotable yet
    rungs[0].config_ids.append(2)
    rungs[0].losses.append(0.9)
    assert schedule.next_job(rungs) == (1, 1)  # the best of 3
    assert schedule.next_job(rungs) == (None, 0)  # promoted once only
    rungs[0].config_ids += [3, 4, 5]
    rungs[0].losses += [math.nan, math.nan, math.nan]
    assert schedule.next_job(rungs) == (0, 1)  # the second best of 6; failures are never promoted
    rungs[1] = RungResults([1, 0, 7], [0.3, 0.1, 0.4], promoted=set())
    assert schedule.next_job(rungs) == (0, 2)  # the highest rung first


@pytest.mark.parametrize("seed", range(5))
def test_asha_promotes_as_the_scan_of_each_rungs_ranking_does(seed):
    """The rule of the module docstring as written (each rung's results ranked by loss, NaN last, ties
    in arrival order; the first not promoted of the top floor(n·f) that did not fail, the highest rung
    first) against the schedule's bookkeeping, over random runs with ties, failures and results
    arriving between the calls."""
    from metaopt.components.promotion import by_loss

    def scan(rungs, promoted, f):
        for j in range(len(rungs) - 2, -1, -1):
            ids, losses = rungs[j]
            n_top = int(math.floor(len(losses) * f + 1e-9))
            for i in by_loss(np.asarray(losses, dtype=float))[:n_top]:
                if math.isnan(losses[i]):
                    break
                if ids[i] not in promoted[j]:
                    promoted[j].add(ids[i])
                    return ids[i], j + 1
        return None, 0

    rng = np.random.default_rng(seed)
    schedule = AsyncSuccessiveHalving(math.log(3), 1 / 3)
    rungs, plain, promoted, next_id = [RungResults() for _ in range(4)], [([], []) for _ in range(4)], \
        [set() for _ in range(4)], 0
    for _ in range(600):
        for _ in range(int(rng.integers(0, 3))):  # results arrive: a new configuration or a promoted one
            j = int(rng.integers(0, 4))
            candidates = sorted(promoted[j - 1] - set(plain[j][0])) if j else []
            if j and not candidates:
                continue
            config_id = int(rng.choice(candidates)) if j else next_id
            next_id += j == 0
            loss = math.nan if rng.uniform() < 0.1 else float(rng.integers(0, 20)) / 4  # ties and failures
            for ids, losses in (plain[j], (rungs[j].config_ids, rungs[j].losses)):
                ids.append(config_id)
                losses.append(loss)
        assert schedule.next_job(rungs) == scan(plain, promoted, 1 / 3)
    assert sum(map(len, promoted)) > 50


def test_constant_liar_adds_the_running_evaluations_with_the_observed_loss_at_their_fidelity():
    archive = Archive(2)
    archive.add(np.array([[0.1, 0.2], [0.3, 0.4], [0.5, 0.6]]), config_id=np.arange(3), batch=np.arange(3),
                stage=np.ones(3), bracket=np.ones(3), fidelity=np.array([1.0, 1.0, 3.0]),
                loss=np.array([0.2, 0.4, 0.1]), cost=np.array([1.0, 2.0, 6.0]))
    running = np.array([[0.7, 0.8], [0.9, 0.0]])
    assert IgnorePending().archive_for_proposal(archive, running, np.array([1.0, 9.0])) is archive
    for liar, lies in (("min", [0.2, 0.1]), ("mean", [0.3, 0.7 / 3]), ("max", [0.4, 0.4])):
        seen = ConstantLiar(liar).archive_for_proposal(archive, running, np.array([1.0, 9.0]))
        assert len(seen) == 5 and len(archive) == 3
        np.testing.assert_allclose(seen.loss[3:], lies)  # at fidelity 9 nothing is observed: every loss
        np.testing.assert_array_equal(seen.X[3:], running)
        np.testing.assert_allclose(seen.cost[3:], 3.0)


def test_constant_liar_changes_what_a_model_based_asynchronous_run_proposes():
    liar = run(_config("async_bohb"), PROBLEM, 0, "6d", workers=8)
    config = {k: v for k, v in _config("async_bohb").items() if k != "liar"}
    ignoring = run({**config, "pending": "ignore"}, PROBLEM, 0, "6d", workers=8)
    assert not liar.trace["loss"].equals(ignoring.trace["loss"])


def test_design_space_keeps_promotion_rules_to_batches_and_pending_policies_to_asynchronous_designs():
    assert "promotion" not in _config("asha") and "promotion" in _config("hb")
    assert "pending" not in _config("hb")
    with pytest.raises(UsageError, match="parameter pending is inactive"):
        validate({"fidelity_schedule": "hb", "pending": "constant_liar"})
    with pytest.raises(UsageError):  # CFO has no multi-fidelity variant, asynchronous or not
        validate({"fidelity_schedule": "asha", "proposal": "cfo"})


# -- the command line ---------------------------------------------------------------------------------
def test_metaopt_run_on_the_clock_writes_the_clock_columns(capsys, tmp_path):
    from metaopt.cli import main

    argv = ["run", "--benchmark", "synthetic:mlp", "--instance", "0", "--optimizer", "asha", "--budget", "4d",
            "--quiet"]
    assert main([*argv, "--sim-workers", "4", "--sim-time", "1m", "--out", str(tmp_path / "run")]) == 0
    trace = pd.read_csv(tmp_path / "run" / "trace.csv")
    expected = run(_config("asha"), PROBLEM, 1, "4d", workers=4, time_limit=60.0).trace
    np.testing.assert_allclose(trace["sim_time"], expected["sim_time"])
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["workers"] == 4 and summary["sim_time"] <= 60.0
    capsys.readouterr()
    for flag, value, message in (("--sim-workers", "0", "argument --sim-workers: must be an integer >= 1"),
                                 ("--sim-time", "0s", "argument --sim-time: must be a simulated duration > 0")):
        assert main([*argv, flag, value]) == 2
        lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith(f"metaopt: error: {message}"), lines


def test_metaopt_run_takes_a_typical_cost_time_limit_as_a_study_does(capsys, tmp_path):
    """``--sim-time 0.5dc`` is the time of d/2 typical full evaluations of the instance, resolved as a
    study's ``evaluation.clock.time_limit`` is (references.resolve_time_limit): the same trace as the run
    given those seconds; what is neither a duration nor a typical cost is refused with one line."""
    from metaopt.cli import main
    from metaopt.core.references import resolve_time_limit

    argv = ["run", "--benchmark", "synthetic:mlp", "--instance", "0", "--optimizer", "asha", "--budget", "4d",
            "--quiet", "--sim-workers", "4"]
    assert main([*argv, "--sim-time", "0.5dc", "--out", str(tmp_path / "run")]) == 0
    seconds = resolve_time_limit(Budget.parse("0.5dc", PROBLEM.d), PROBLEM)
    expected = run(_config("asha"), PROBLEM, 1, "4d", workers=4, time_limit=seconds)
    assert expected.summary["stop_reason"] == "time"  # the limit is what ends the run
    trace = pd.read_csv(tmp_path / "run" / "trace.csv")
    np.testing.assert_array_equal(trace["sim_time"], expected.trace["sim_time"])
    capsys.readouterr()
    for value in ("2d", "0dc", "3dcs", "soon"):
        assert main([*argv, "--sim-time", value]) == 2
        lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith("metaopt: error: argument --sim-time: must be a simulated "
                                                       "duration > 0"), (value, lines)
        assert "30dc" in lines[0]


@pytest.mark.parametrize("name,workers", [("hb", None), ("bohb", 4), ("asha", None), ("async_bohb", 4)])
def test_an_evaluation_cap_ends_a_run_after_that_many_evaluations(name, workers):
    """A budget's ``max_evals`` (a meta-search's guard, ``meta.max_evals``) stops a run, synchronous or
    asynchronous, on the clock or off it, after that many evaluations, stop reason ``eval_cap``; a cap
    the run never reaches changes nothing. Its trace is the first rows of the uncapped run's, except
    for an asynchronous design on several workers: there the first ``cap`` trials started are the
    uncapped run's, and their results come in order of arrival, among which later trials' were."""
    budget = Budget.parse("10d", PROBLEM.d)
    full = run(_config(name), PROBLEM, 3, budget, workers=workers)
    n = full.summary["n_evals"]
    cap = n // 2
    capped = run(_config(name), PROBLEM, 3, replace(budget, max_evals=cap), workers=workers)
    assert capped.summary["stop_reason"] == "eval_cap" and capped.summary["max_evals"] == cap
    assert capped.summary["n_evals"] == cap and capped.summary["budget_used"] < budget.amount
    if name == "async_bohb":
        first_started = full.trace.sort_values("sim_start", kind="stable").iloc[:cap]
        columns = ["config_id", "fidelity", "loss", "worker", "sim_start", "sim_time"]
        pd.testing.assert_frame_equal(capped.trace[columns], first_started.sort_values("sim_time", kind="stable")[
            columns].reset_index(drop=True))
    else:
        pd.testing.assert_frame_equal(capped.trace, full.trace.iloc[:cap].reset_index(drop=True))
    loose = run(_config(name), PROBLEM, 3, replace(budget, max_evals=n), workers=workers)
    pd.testing.assert_frame_equal(loose.trace, full.trace)
    assert loose.summary["stop_reason"] == full.summary["stop_reason"]
