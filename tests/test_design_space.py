"""The registry, the design space assembled from it, validation and presets."""

import math

import pytest
from ConfigSpace import ConfigurationSpace

from metaopt.core.benchmarks.base import Fidelity
from metaopt.core.errors import UsageError
from metaopt.core.registry import CATEGORIES, component_names, get_component
from metaopt.spaces.design_space import design_space, validate
from metaopt.spaces.presets import PRESETS, get_preset

LCBENCH = Fidelity("epoch", 1, 52, is_int=True)


def test_registry_has_the_foundation_components():
    assert component_names("fidelity_schedules") == ["single", "equal", "sh", "hb", "cahb", "asha"]
    assert "uniform" in component_names("samplers")
    assert "top" in component_names("promotion_rules")
    assert "budget" in component_names("stopping_rules")


def test_unknown_component_lists_known_ones():
    with pytest.raises(UsageError, match="known: single, equal, sh, hb, cahb"):
        get_component("fidelity_schedules", "nope")
    with pytest.raises(UsageError, match="known categories"):
        get_component("nope", "x")


def test_components_declare_their_hyperparameters():
    hb = get_component("fidelity_schedules", "hb")
    assert hb.hyperparameter_names == ["log_eta_fid", "survival_fraction", "fidelity_floor"]
    assert get_component("fidelity_schedules", "single").hyperparameter_names == []


def test_design_space_has_selectors_and_conditions():
    space = design_space()
    for cat in CATEGORIES.values():
        assert (cat.selector in space) == bool(component_names(cat.name))
    # eta parameters exist only for multi-fidelity schedules; promotion only with stages
    conditioned = {c.child.name for c in space.conditions}
    assert {"log_eta_fid", "survival_fraction", "promotion"} <= conditioned
    # eta_fid range is the paper's [2^(1/4), 2^4] (searched as log(log eta))
    hp = space["log_eta_fid"]
    assert math.exp(hp.lower) == pytest.approx(2 ** 0.25) and math.exp(hp.upper) == pytest.approx(16)
    assert hp.log


def test_design_space_round_trips_through_json(tmp_path):
    path = tmp_path / "space.json"
    design_space().to_json(path)
    assert ConfigurationSpace.from_json(path) == design_space()


def test_validate_fills_defaults_and_names_bad_parameters():
    assert validate({"fidelity_schedule": "hb"})["survival_fraction"] == pytest.approx(1 / 3)
    with pytest.raises(UsageError, match="parameter mu: value 500"):
        validate({"mu": 500})
    with pytest.raises(UsageError, match="unknown design-space parameter 'bogus'"):
        validate({"bogus": 1})
    with pytest.raises(UsageError, match="log_eta_fid is inactive"):
        validate({"fidelity_schedule": "single", "log_eta_fid": 1.0})
    with pytest.raises(UsageError, match="fidelity_schedule: value 'xx'"):
        validate({"fidelity_schedule": "xx"})


@pytest.mark.parametrize("name", list(PRESETS))
def test_presets_are_valid_points(name):
    config = get_preset(name).config(LCBENCH)
    assert validate(config) == config


def test_hyperband_preset_matches_table_1():
    hb = get_preset("hb").config(LCBENCH)
    assert hb["fidelity_schedule"] == "hb" and hb["mu"] == 27  # eta^(s-1) with s = 4
    assert math.exp(hb["log_eta_fid"]) == pytest.approx(3) and hb["survival_fraction"] == pytest.approx(1 / 3)
    assert get_preset("hb").config(Fidelity("epoch", 1, 98, True))["mu"] == 81  # nb301: s = 5
    assert get_preset("rs").config(LCBENCH)["fidelity_schedule"] == "single"


def test_unknown_preset():
    with pytest.raises(UsageError, match="known presets: rs, sh, hb"):
        get_preset("nope")


def test_every_sampled_configuration_is_valid():
    """ConfigSpace's own sampler yields only valid configurations of the full space: conditions and
    forbiddens agree with ``validate`` (e.g. no cost model without a cost penalty, no CFO with
    multi-fidelity schedules, no cost penalty with a std-less surrogate)."""
    space = design_space()
    space.seed(7)
    for sample in space.sample_configuration(400):
        config = dict(sample)
        assert validate(config) == config
        if config.get("proposal") == "cfo":
            assert config["fidelity_schedule"] == "single"
        if config.get("cost_penalty", "none") != "none":
            assert config["surrogate"] in ("rf", "gp") and "cost_model" in config
