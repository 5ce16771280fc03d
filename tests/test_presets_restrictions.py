"""Presets are valid points that run on every shipped benchmark; restrictions give restricted spaces."""

import json
import math
from pathlib import Path

import pytest
from ConfigSpace import ConfigurationSpace

from metaopt.core.benchmarks import get_benchmark, list_benchmark_names
from metaopt.core.errors import UsageError
from metaopt.engine.simclock import run
from metaopt.spaces.design_space import design_space, validate
from metaopt.spaces.presets import PRESETS
from metaopt.spaces.restrictions import RESTRICTIONS, TABLE4_DEFAULTS, get_restriction


@pytest.fixture(scope="module")
def benchmarks(yahpo_data):
    # live benchmarks train real models: too slow for every preset here (tests/test_live_benchmark.py)
    return [get_benchmark(name, yahpo_data) for name in list_benchmark_names(yahpo_data) if not name.startswith("live:")]


def test_all_shipped_benchmarks_are_listed(benchmarks):
    names = {b.name for b in benchmarks}
    assert {"yahpo:lcbench", "yahpo:rbv2_xgboost", "yahpo:rbv2_rpart", "yahpo:nb301"} <= names
    assert len([n for n in names if n.startswith("synthetic:")]) >= 3


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_preset_is_valid_and_runs_on_every_benchmark(name, benchmarks):
    for bench in benchmarks:
        config = PRESETS[name].config(bench.fidelity)
        assert validate(config) == config
        problem = bench.problem(bench.instances[0])
        budget = "2" if name.startswith("bo_") else "3d"  # the GP is refit every evaluation
        result = run(config, problem, seed=1, budget=budget)
        assert result.summary["n_evals"] > 0, (name, bench.name)
        assert result.summary["budget_used"] <= result.summary["budget"] + 1e-9


def test_table5_values():
    from metaopt.core.benchmarks.base import Fidelity

    g = PRESETS["smashy_lcbench_hb"].config(Fidelity("epoch", 1, 52, True))
    assert g["mu"] == 5 and math.exp(g["log_eta_fid"]) == pytest.approx(3.11)
    assert 1 / g["survival_fraction"] == pytest.approx(2.22)
    assert (g["filter_method"], g["sampler"], g["surrogate"]) == ("progressive", "kde", "kknn7")
    assert (g["filter_ns0_0"], g["filter_ns0_1"], g["filter_ns1_0"], g["filter_ns1_1"]) == (101, 312, 28.9, 8)
    bohb = PRESETS["bohb"].config(Fidelity("epoch", 1, 52, True))
    assert (bohb["sampler"], bohb["surrogate"], bohb["fidelity_schedule"]) == ("kde", "tpe", "hb")
    assert bohb["filter_rho_0"] == pytest.approx(1 / 3)


def test_design_space_summary_and_json_round_trip(tmp_path):
    space = design_space()
    assert len(space) >= 23 and len(space.conditions) >= 18
    path = tmp_path / "space.json"
    space.to_json(path)
    assert ConfigurationSpace.from_json(path) == space


@pytest.mark.parametrize("name", sorted(RESTRICTIONS))
def test_restrictions_give_valid_spaces_whose_points_complete(name, tmp_path):
    restriction = RESTRICTIONS[name]
    space = restriction.space()
    space.to_json(tmp_path / "r.json")
    assert ConfigurationSpace.from_json(tmp_path / "r.json") == space
    space.seed(0)
    for sample in space.sample_configuration(20):
        full = restriction.complete(dict(sample))
        assert validate(full) == full
        for param, value in restriction.fixed.items():
            if param in full:
                assert full[param] == value
        for target, source in restriction.tied.items():
            assert full.get(target) == full.get(source)


def test_specific_restrictions():
    assert get_restriction("gamma1").complete({})["fidelity_schedule"] == "single"
    g3 = get_restriction("gamma3").complete({"filter_ns0_0": 50.0})
    assert g3["filter_method"] == "tournament" and g3["filter_n_trn_0"] == g3["filter_n_trn_1"] == 1
    assert g3["filter_ns0_0"] == g3["filter_ns0_1"] == g3["filter_ns1_0"] == g3["filter_ns1_1"] == 50.0
    assert "filter_rho_1" not in get_restriction("gamma2").space()
    assert get_restriction("gamma7").complete({})["mu"] == 32
    with pytest.raises(UsageError, match="known: gamma1"):
        get_restriction("nope")
    with pytest.raises(UsageError, match="fidelity_schedule"):
        get_restriction("gamma1").complete({"fidelity_schedule": "hb"})


def test_table3_restrictions_are_restrictions_of_table4():
    """γ1..γ7 and the RQ3/RQ6 variants restrict the paper's Table 4 space, not the whole design space."""
    for name, restriction in RESTRICTIONS.items():
        if restriction.defaults != TABLE4_DEFAULTS:  # not built on Table 4 (e.g. cfo_then_model, for our searches)
            continue
        space = restriction.space()
        choices = {p: set(getattr(space[p], "choices", [getattr(space[p], "value", None)]))
                   for p in ("proposal", "promotion", "stopping") if p in space}
        assert choices.get("proposal", {"sample_filter"}) == {"sample_filter"}, name
        assert choices.get("promotion", {"top"}) == {"top"}, name
        assert choices.get("stopping") == {"budget"}, name
        assert "cost_penalty" not in space and "cost_model" not in space, name


def test_presets_json_serializable():
    from metaopt.core.benchmarks.base import Fidelity

    for preset in PRESETS.values():
        json.dumps(preset.config(Fidelity("epoch", 1, 52, True)))


def test_default_then_rf_is_metaopt_balanceds_family_with_the_switch():
    """The family default_then_rf searches holds metaopt_balanced with SMAC's forest after a switch (the
    hand-made probe its study starts from), not metaopt_balanced itself, and fixes what makes it that family;
    the γ* it found is metaopt_default's design for problems with a fidelity."""
    from metaopt.core.benchmarks.base import Fidelity

    restriction = get_restriction("default_then_rf")
    space = restriction.space()
    default = PRESETS["metaopt_balanced"].config(Fidelity("epoch", 1, 52, True))
    switched = validate(json.loads((Path(__file__).parents[1] / "studies/gammas/metaopt_default_rf33.json").read_text()))
    assert switched == validate({**default, "proposal": "filter_then_rf", "switch_at": 0.33})
    assert restriction.complete({k: v for k, v in switched.items() if k in space}) == switched
    with pytest.raises(UsageError, match="proposal: value 'sample_filter' is not allowed"):
        restriction.complete({k: v for k, v in default.items() if k in space})
    assert {"switch_at", "lcb_kappa", "log_eta_fid", "kde_top_fraction"} <= set(space)
    assert "cost_model" not in space and "rf_n_trees" not in space  # the forest after the switch is SMAC's
    shipped = PRESETS["metaopt_default"].config(Fidelity("epoch", 1, 52, True))
    assert restriction.complete({k: v for k, v in shipped.items() if k in space}) == shipped
    assert PRESETS["metaopt_default"].found_by == "default_switch_race"


def test_no_fidelity_holds_every_design_a_problem_without_a_fidelity_can_use():
    """The space of no_fidelity_race: presets as they are configured for a fidelity of one level (bohb
    proposes one configuration at a time, metaopt_balanced keeps its batches of 20) are points of it;
    what has nothing to act on without a fidelity or a cost (a cost penalty, a stopping rule) is not."""
    from metaopt.core.benchmarks.base import Fidelity

    restriction = get_restriction("no_fidelity")
    space = restriction.space()
    one_level = Fidelity("epoch", 81, 81, True)
    for name in ("bohb", "smac_like", "metaopt_balanced", "metaopt_default", "metaopt_lcbench", "bo_gp_ei", "rs"):
        config = PRESETS[name].config(one_level)
        assert restriction.complete({k: v for k, v in config.items() if k in space}) == config, name
    assert PRESETS["bohb"].config(one_level)["mu"] == 1
    assert space["fidelity_schedule"].choices == ("single", "hb")
    assert "stop_conv_patience" not in space and "cei_lambda" not in space and "liar" not in space
    cost_aware = {**PRESETS["smac_like"].config(one_level), "acquisition": "ei", "cost_penalty": "eipu"}
    with pytest.raises(UsageError, match="cost_penalty"):
        restriction.complete({k: v for k, v in cost_aware.items() if k in space or k == "cost_penalty"})
