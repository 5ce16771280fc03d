"""cfo_then_filter (components.hybrid_proposals): CFO before the switch point, sample-and-filter after."""

import pandas as pd
import pytest

from metaopt.core.benchmarks import get_benchmark
from metaopt.components.hybrid_proposals import CFOThenFilter
from metaopt.core.errors import UsageError
from metaopt.engine.loop import Optimizer, run
from metaopt.spaces.design_space import validate
from metaopt.spaces.presets import get_preset


def _hybrid(fidelity, switch_at: float) -> dict:
    """The preset cfo_then_rf (cfo_tuned's local search, then smac_like's filter) switching at ``switch_at``."""
    return {**get_preset("cfo_then_rf").config(fidelity), "switch_at": switch_at}


def test_wired_with_the_configured_sampler_filter_and_scorer():
    bench = get_benchmark("synthetic:mlp")
    opt = Optimizer.from_config(_hybrid(bench.fidelity, 0.5))
    assert isinstance(opt.proposal, CFOThenFilter)
    assert opt.proposal.filtered.filter is not None and opt.proposal.filtered.scorer is not None
    assert opt.proposal.local_search.c == 1.0 and opt.proposal.local_search.random_start


@pytest.mark.parametrize("switch_at", [0.25, 0.5])
def test_follows_cfo_until_the_switch_then_proposes_elsewhere(switch_at):
    bench = get_benchmark("synthetic:mlp")
    problem = bench.problem("2")
    cfo = run(get_preset("cfo_tuned").config(bench.fidelity), problem, 3, "10d").trace
    hybrid = run(_hybrid(bench.fidelity, switch_at), problem, 3, "10d").trace
    n = len(hybrid)
    before = int(round(switch_at * n))
    # Every evaluation proposed while less than switch_at of the budget was spent is CFO's.
    pd.testing.assert_frame_equal(hybrid.iloc[:before], cfo.iloc[:before])
    assert not hybrid["loss"].iloc[before:].equals(cfo["loss"].iloc[before:n])


def test_same_seed_same_trace():
    bench = get_benchmark("synthetic:mlp")
    config = _hybrid(bench.fidelity, 0.33)
    a, b = (run(config, bench.problem("2"), 5, "10d").trace for _ in range(2))
    pd.testing.assert_frame_equal(a, b)


def test_no_multi_fidelity_and_bounded_switch():
    bench = get_benchmark("synthetic:mlp")
    with pytest.raises(UsageError, match="forbidden|Forbidden"):
        validate({**_hybrid(bench.fidelity, 0.5), "fidelity_schedule": "hb"})
    with pytest.raises(UsageError, match="switch_at"):
        validate(_hybrid(bench.fidelity, 1.5))


# -- filter_then_rf ---------------------------------------------------------------------------------

def _filter_then_rf(fidelity, switch_at: float) -> dict:
    """Hyperband with BOHB's KDE sampler and TPE filter, leaving the schedule for SMAC's model at ``switch_at``."""
    return {**get_preset("bohb").config(fidelity), "proposal": "filter_then_rf", "switch_at": switch_at}


def _settings(component) -> dict:
    """A component's attributes, compared by their repr (some are arrays)."""
    return {name: repr(value) for name, value in vars(component).items()}


def test_filter_then_rf_is_wired_with_smac_models_proposal():
    from metaopt.components.hybrid_proposals import SMAC_MODEL, FilterThenRF

    bench = get_benchmark("synthetic:mlp")
    opt = Optimizer.from_config(_filter_then_rf(bench.fidelity, 0.5))
    assert isinstance(opt.proposal, FilterThenRF)
    assert type(opt.proposal.filtered.filter).__name__ == type(Optimizer.from_config(
        get_preset("bohb").config(bench.fidelity)).proposal.filter).__name__
    smac = Optimizer.from_config(get_preset("smac_like").config(bench.fidelity)).proposal
    late = opt.proposal.late
    for part in ("sampler", "filter"):
        assert type(getattr(late, part)) is type(getattr(smac, part))
        assert _settings(getattr(late, part)) == _settings(getattr(smac, part))
    for part in ("surrogate", "acquisition"):
        assert type(getattr(late.scorer, part)) is type(getattr(smac.scorer, part))
        ours, theirs = _settings(getattr(late.scorer, part)), _settings(getattr(smac.scorer, part))
        if part == "surrogate":  # smac_like caps its bootstrap at 30 draws per feature; SMAC_MODEL does not
            assert (ours.pop("max_samples_per_feature"), theirs.pop("max_samples_per_feature")) == ("0", "30")
        assert ours == theirs
    assert (late.scorer.target, late.scorer.predict_at_max_fidelity) == (smac.scorer.target, True)
    assert get_preset("smac_like").config(bench.fidelity) == validate(
        {"fidelity_schedule": "single", "mu": 1, **SMAC_MODEL, "rf_max_samples_per_feature": 30})


@pytest.mark.parametrize("switch_at", [0.3, 0.6])
def test_filter_then_rf_follows_the_schedule_until_the_switch_then_one_full_point_at_a_time(switch_at):
    bench = get_benchmark("synthetic:mlp")
    problem = bench.problem("2")
    budget = 10 * problem.d
    plain = run(get_preset("bohb").config(bench.fidelity), problem, 3, "10d").trace
    hybrid = run(_filter_then_rf(bench.fidelity, switch_at), problem, 3, "10d").trace
    tail = hybrid.index[hybrid["bracket"] == 0]
    first = int(tail[0])
    # Before the switch: the bohb run, row for row (the same proposals from the same draws).
    pd.testing.assert_frame_equal(hybrid.iloc[:first], plain.iloc[:first])
    # It left at a stage boundary once switch_at of the budget was spent, not before.
    assert hybrid["budget_used"].iloc[first - 1] >= switch_at * budget
    assert hybrid["batch"].iloc[first - 1] != hybrid["batch"].iloc[first]
    before_last_batch = hybrid[hybrid["batch"] < hybrid["batch"].iloc[first - 1]]
    assert before_last_batch["budget_used"].iloc[-1] < switch_at * budget
    # After it: every evaluation a new configuration at full fidelity, one per batch, to the end.
    after = hybrid.iloc[first:]
    assert (tail == range(first, len(hybrid))).all()
    assert (after["fidelity"] == bench.fidelity.r_max).all()
    assert after["batch"].is_unique and after["config_id"].is_unique
    assert not set(after["config_id"]) & set(hybrid["config_id"].iloc[:first])
    assert hybrid["budget_used"].iloc[-1] <= budget


def test_filter_then_rf_same_seed_same_trace_and_ask_tell_agrees():
    from metaopt.engine.loop import AskTell

    bench = get_benchmark("synthetic:mlp")
    problem = bench.problem("2")
    config = _filter_then_rf(bench.fidelity, 0.4)
    a, b = (run(config, problem, 5, "10d").trace for _ in range(2))
    pd.testing.assert_frame_equal(a, b)
    loop = AskTell(config, problem, seed=5, budget="10d")
    while (trial := loop.ask()) is not None:
        evaluation = problem.evaluate([trial.config], [trial.fidelity])
        loop.tell(trial, float(evaluation.loss[0]), float(evaluation.cost[0]))
    pd.testing.assert_frame_equal(loop.result().trace, a)


def test_filter_then_rf_not_with_an_asynchronous_schedule():
    bench = get_benchmark("synthetic:mlp")
    async_bohb = get_preset("async_bohb").config(bench.fidelity)
    with pytest.raises(UsageError, match="forbidden|Forbidden"):
        validate({**async_bohb, "proposal": "filter_then_rf", "switch_at": 0.5})
    with pytest.raises(UsageError, match="switch_at"):
        validate(_filter_then_rf(bench.fidelity, 0.99))
