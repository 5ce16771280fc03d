"""The Smashy loop: budget accounting, determinism, traces and summaries."""

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from metaopt.core.benchmarks import get_benchmark
from metaopt.engine.loop import run
from metaopt.core.references import get_reference
from metaopt.engine.trace import TRACE_COLUMNS
from metaopt.spaces.design_space import design_space
from metaopt.spaces.presets import get_preset

BENCH = get_benchmark("synthetic:mlp")
PROBLEM = BENCH.problem(BENCH.test_instances[0])


def preset(name):
    return get_preset(name).config(PROBLEM.fidelity)


@pytest.mark.parametrize("name", ["rs", "sh", "hb"])
def test_budget_accounting_and_trace_columns(name):
    result = run(preset(name), PROBLEM, seed=3, budget="10d")
    trace = result.trace
    assert list(trace.columns[: len(TRACE_COLUMNS)]) == TRACE_COLUMNS
    assert set(BENCH.hyperparameter_names) <= set(trace.columns)
    spent = (trace["fidelity"] / PROBLEM.fidelity.r_max).sum()
    assert trace["budget_used"].iloc[-1] == pytest.approx(spent)
    assert spent <= 10 * PROBLEM.d + 1e-9
    assert trace["cost_used"].iloc[-1] == pytest.approx(trace["cost"].sum())
    assert result.summary["budget_used"] == pytest.approx(spent)
    assert result.summary["n_evals"] == len(trace)
    assert result.summary["stop_reason"] == "budget"
    # the incumbent is the running minimum of the loss
    assert np.allclose(trace["incumbent_loss"], np.minimum.accumulate(trace["loss"]))


def test_rs_spends_exactly_its_budget_at_full_fidelity():
    trace = run(preset("rs"), PROBLEM, seed=1, budget="20").trace
    assert len(trace) == 20 and (trace["fidelity"] == PROBLEM.fidelity.r_max).all()


def test_hb_trace_follows_the_bracket_plan():
    trace = run(preset("hb"), PROBLEM, seed=1, budget="30d").trace
    first = trace[trace["batch"] < 5]  # bracket 1: 81/27/9/3/1 on epochs 1..81 with eta = 3
    assert first.groupby("batch").size().tolist() == [81, 27, 9, 3, 1]
    assert first.groupby("batch")["fidelity"].first().tolist() == [1, 3, 9, 27, 81]
    # survivors are re-evaluated: configurations of stage 2 all appeared at stage 1
    stage1 = set(first.loc[first["batch"] == 0, "config_id"])
    assert set(first.loc[first["batch"] == 1, "config_id"]) <= stage1
    # and they are the best of stage 1
    s1 = first[first["batch"] == 0].sort_values("loss", kind="stable")
    assert set(first.loc[first["batch"] == 1, "config_id"]) == set(s1["config_id"].iloc[:27])


def test_same_inputs_give_identical_traces():
    a = run(preset("hb"), PROBLEM, seed=7, budget="10d")
    b = run(preset("hb"), PROBLEM, seed=7, budget="10d")
    pd.testing.assert_frame_equal(a.trace, b.trace, check_exact=True)
    drop = lambda s: {k: v for k, v in s.items() if k not in ("wall_time_s", "cpu_time_s")}  # noqa: E731
    assert drop(a.summary) == drop(b.summary)
    c = run(preset("hb"), PROBLEM, seed=8, budget="10d")
    assert not a.trace["loss"].equals(c.trace["loss"])


def test_cost_budget_is_never_exceeded():
    result = run(preset("hb"), PROBLEM, seed=1, budget="2000s")
    assert result.trace["cost_used"].iloc[-1] <= 2000 + 1e-6
    assert result.summary["budget_unit"] == "cost"
    assert result.summary["stop_reason"] == "budget"


def test_normalized_regret_uses_the_reference():
    ref = get_reference(BENCH, PROBLEM.instance)
    result = run(preset("rs"), PROBLEM, seed=1, budget="5d", reference=ref)
    expected = (result.summary["final_loss"] - ref.y_min) / (ref.y_max - ref.y_min)
    assert result.summary["normalized_regret"] == pytest.approx(expected)
    assert 0 <= result.summary["normalized_regret"] <= 1.5


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**31 - 1), budget=st.floats(1.0, 15.0))
def test_any_configuration_respects_its_budget(seed, budget):
    """Property: any point of the design space spends at most its budget, and the trace adds up
    (asynchronous designs run sequentially, on a clock with one worker)."""
    from metaopt.engine.simclock import run
    space = design_space()
    space.seed(seed % (2**31 - 1))
    config = dict(space.sample_configuration())
    result = run(config, PROBLEM, seed=seed, budget=str(budget))
    trace = result.trace
    spent = float((trace["fidelity"] / PROBLEM.fidelity.r_max).sum())
    assert spent <= budget + 1e-9
    if len(trace):
        assert trace["budget_used"].iloc[-1] == pytest.approx(spent)
    if result.summary["stop_reason"] == "budget":
        # what is left is smaller than the cheapest evaluation the run could still have made
        assert budget - spent < 1.0 + 1e-9
