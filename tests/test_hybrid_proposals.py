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
