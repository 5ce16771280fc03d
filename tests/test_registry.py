"""The two registries: components (each category tied to its base class, conditions and forbidden
combinations derived from class attributes) and benchmark kinds (``register_benchmark``)."""

from __future__ import annotations

import pkgutil
import sys

import pytest
from ConfigSpace import ForbiddenAndConjunction, InCondition

import metaopt.core.benchmarks as benchmarks
import metaopt.components
from metaopt.core.errors import UsageError
from metaopt.core.registry import (
    CATEGORIES,
    activating_choices,
    base_of,
    category_base,
    components,
    names_declaring,
    register,
)
from metaopt.spaces.design_space import design_space, forbidden_rules


def test_every_category_has_a_base_class_and_its_components_subclass_it():
    for name in CATEGORIES:
        base = base_of(name)
        assert base.__module__.startswith("metaopt.components.")
        assert components(name), name
        assert all(issubclass(c.factory, base) for c in components(name)), name


def test_register_refuses_a_class_outside_its_category():
    class NotASampler:
        pass

    with pytest.raises(TypeError, match=r"must subclass metaopt\.components\.samplers\.Sampler"):
        register("samplers", "not_a_sampler")(NotASampler)
    with pytest.raises(TypeError, match="must subclass"):
        register("samplers", "a_function")(lambda: None)
    assert "not_a_sampler" not in [c.name for c in components("samplers")]


def test_a_category_has_one_base_class():
    with pytest.raises(ValueError, match="already has the base class Sampler"):
        category_base("samplers")(type("OtherSampler", (), {}))
    with pytest.raises(ValueError, match="unknown category"):
        category_base("nonsense")


def test_every_public_component_module_is_loaded():
    """Component modules are found, not listed: every public module of the package is imported."""
    found = [m.name for m in pkgutil.iter_modules(metaopt.components.__path__) if not m.name.startswith("_")]
    assert "surrogates" in found and "local_search" in found
    components("samplers")  # loads them
    assert all(f"metaopt.components.{name}" in sys.modules for name in found)


def test_conditions_come_from_the_components_attributes():
    """What each category depends on, as the components declare it (and as the design space had it
    when these were lists of names)."""
    expected = {
        "samplers": ("proposal", ("sample_filter", "cfo_then_filter", "filter_then_rf")),
        "filters": ("proposal", ("sample_filter", "cfo_then_filter", "filter_then_rf")),
        "surrogates": ("filter_method", ("tournament", "progressive", "local_random")),
        "acquisitions": ("filter_method", ("tournament", "progressive", "local_random")),
        "cost_penalties": ("acquisition", ("ei",)),
        "promotion_rules": ("fidelity_schedule", ("equal", "sh", "hb", "cahb")),
        "cost_models": ("cost_penalty", ("eipu", "ei_alpha", "ei_cool", "cei")),
        "pending_policies": ("fidelity_schedule", ("asha",)),
    }
    assert {c.name: activating_choices(c) for c in CATEGORIES.values() if c.active_when} == expected
    space = design_space()
    for category, (parent, values) in expected.items():
        [condition] = space.parent_conditions_of[CATEGORIES[category].selector]
        assert condition.parent.name == parent
        assert tuple(condition.values if isinstance(condition, InCondition) else [condition.value]) == values


def test_forbidden_combinations_come_from_the_components_attributes():
    assert forbidden_rules() == [
        (("proposal", ("filter_then_rf",)), ("fidelity_schedule", ("asha",))),
        (("proposal", ("cfo", "cfo_then_filter")), ("fidelity_schedule", ("equal", "sh", "hb", "cahb", "asha"))),
        (("cost_penalty", ("eipu", "ei_alpha", "ei_cool", "cei")), ("surrogate", ("knn1", "kknn7", "tpe"))),
    ]
    assert names_declaring("surrogates", "has_std") == ("rf", "gp")
    assert len([f for f in design_space().forbidden_clauses if isinstance(f, ForbiddenAndConjunction)]) == 3


def test_benchmark_kinds_are_registered_in_listing_order(yahpo_data):
    names = benchmarks.list_benchmark_names(yahpo_data)
    assert [n.partition(":")[0] for n in names] == sorted(
        (n.partition(":")[0] for n in names), key=["synthetic", "functions", "live", "yahpo"].index)
    assert "synthetic:mlp" in names and "functions:classic4" in names and "live:hgb" in names and "yahpo:lcbench" in names


def test_register_benchmark_adds_a_kind(monkeypatch):
    monkeypatch.setattr(benchmarks, "_KINDS", dict(benchmarks._KINDS))
    monkeypatch.delenv(benchmarks.YAHPO_ENV, raising=False)
    mlp = benchmarks.get_benchmark("synthetic:mlp")
    benchmarks.register_benchmark("alias", lambda scenario, data_dir: mlp if scenario == "mlp" else None,
                                  lambda data_dir: ["mlp"])
    assert benchmarks.get_benchmark("alias:mlp") is mlp
    assert "alias:mlp" in benchmarks.list_benchmark_names()
    with pytest.raises(UsageError, match=r"unknown benchmark 'alias:other'; known benchmarks: .*alias:mlp"):
        benchmarks.get_benchmark("alias:other")
    with pytest.raises(ValueError, match="registered twice"):
        benchmarks.register_benchmark("alias", lambda scenario, data_dir: None, lambda data_dir: [])


def test_unknown_benchmarks_fail_in_one_line(monkeypatch):
    monkeypatch.delenv(benchmarks.YAHPO_ENV, raising=False)
    with pytest.raises(UsageError) as err:
        benchmarks.get_benchmark("nope:x")
    assert str(err.value).startswith("unknown benchmark 'nope:x'; known benchmarks: synthetic:")
    assert str(err.value).endswith(f"(set {benchmarks.YAHPO_ENV} to add yahpo:<scenario>)")
    assert "\n" not in str(err.value)
    with pytest.raises(UsageError, match="needs the YAHPO data directory"):
        benchmarks.get_benchmark("yahpo:lcbench")
    with pytest.raises(UsageError, match="unknown benchmark 'synthetic:nope'"):
        benchmarks.get_benchmark("synthetic:nope")

