"""Live benchmarks (metaopt.core.benchmarks.live): real scikit-learn fits with measured fit times.

Configurations are small so that the whole file runs in seconds. No assertion depends on how long
a fit takes: the cost's semantics are checked with a clock that the fit itself advances.
"""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import numpy as np
import pytest
import sklearn
from ConfigSpace import Configuration

from metaopt.core.benchmarks import get_benchmark, list_benchmark_names
from metaopt.core.benchmarks.base import split_instances
from metaopt.core.benchmarks.live import MIN_PER_CLASS, MODELS, LiveBenchmark, _data
from metaopt.core.errors import UsageError
from metaopt.engine.loop import run
from metaopt.spaces.presets import get_preset

NAMES = [f"live:{m}" for m in MODELS]

SMALL = {
    "live:hgb": [
        {"learning_rate": 0.3, "max_iter": 8, "max_leaf_nodes": 4, "min_samples_leaf": 8,
         "l2_regularization": 1e-3, "early_stopping": "off"},
        {"learning_rate": 0.1, "max_iter": 12, "max_leaf_nodes": 8, "min_samples_leaf": 4,
         "l2_regularization": 1.0, "early_stopping": "on", "validation_fraction": 0.2},
    ],
    "live:mlp": [
        {"width": 16, "depth": 1, "alpha": 1e-4, "learning_rate_init": 1e-2, "activation": "relu", "solver": "adam"},
        {"width": 24, "depth": 2, "alpha": 1e-3, "learning_rate_init": 3e-2, "activation": "tanh", "solver": "sgd",
         "momentum": 0.9},
    ],
}
"""Cheap valid configurations, covering both branches of each benchmark's conditional."""

def test_live_benchmarks_are_listed_and_loaded_by_name():
    names = list_benchmark_names()
    assert set(NAMES) <= set(names)
    for name in NAMES:
        bench = get_benchmark(name)
        assert isinstance(bench, LiveBenchmark) and bench.name == name
        assert bench.d == 7 and bench.search_space.conditions
        assert (bench.fidelity.name, bench.fidelity.r_min, bench.fidelity.r_max) == ("train_fraction", 0.1, 1.0)
        assert (bench.loss_name, bench.cost_name) == ("val_error", "fit_time")
        assert bench.cheap_end and set(bench.cheap_end) <= set(bench.hyperparameter_names)
        assert bench.describe()["benchmark"] == name
    with pytest.raises(UsageError, match="hgb, mlp"):
        get_benchmark("live:svm")


@pytest.mark.parametrize("name", NAMES)
def test_instances_split_and_fingerprint(name):
    bench = get_benchmark(name)
    assert {"digits", "breast_cancer", "wine"} <= set(bench.instances) and len(bench.instances) == 6
    train, test = bench.train_instances, bench.test_instances
    assert not set(train) & set(test) and sorted(train + test) == sorted(bench.instances)
    assert (train, test) == split_instances(bench.instances, n_train=3, seed=0)
    assert "split_instances" in bench.split_rule
    # machine-independent: the name, a version and the scikit-learn version, nothing else
    assert bench.fingerprint() == LiveBenchmark(name.split(":")[1]).fingerprint()
    assert bench.fingerprint().startswith(name) and sklearn.__version__ in bench.fingerprint()
    with pytest.raises(UsageError, match="unknown instance 'iris'"):
        bench.evaluate("iris", SMALL[name][:1], [1.0])


def test_training_subsets_are_nested_stratified_and_floored():
    for instance in ("wine", "digits", "mc_noisy"):
        data = _data(instance)
        sizes = [data.subset_size(r) for r in (0.1, 0.3, 0.5, 1.0)]
        assert sizes == sorted(sizes) and sizes[-1] == len(data.y_train)
        smallest = data.y_train[: sizes[0]]
        assert len(np.unique(smallest)) == data.n_classes  # every class in the smallest subset
        assert sizes[0] >= MIN_PER_CLASS * data.n_classes
    assert _data("wine").subset_size(0.1) == MIN_PER_CLASS * 3  # the floor: ceil(0.1 * 133) = 14 < 30
    assert _data("digits").subset_size(0.1) == 135  # ceil(0.1 * 1347)


@pytest.mark.parametrize("name", NAMES)
def test_evaluation_at_two_fidelities_is_deterministic_in_loss(name):
    bench = get_benchmark(name)
    configs = SMALL[name] * 2
    fidelities = [0.1, 0.1, 1.0, 1.0]
    for config in SMALL[name]:
        Configuration(bench.search_space, values=config).check_valid_configuration()
    first = bench.evaluate("breast_cancer", configs, fidelities)
    second = bench.evaluate("breast_cancer", configs, fidelities)
    assert ((first.loss >= 0) & (first.loss <= 1)).all()
    np.testing.assert_array_equal(first.loss, second.loss)
    assert (first.cost > 0).all() and (second.cost > 0).all()
    assert first.targets["n_train"].tolist() == [43, 43, 426, 426]
    rows = bench.evaluate_raw("breast_cancer", [c | {"train_fraction": 1.0} for c in SMALL[name]])
    assert [r["val_error"] for r in rows] == first.loss[2:].tolist()


@pytest.mark.parametrize("name", NAMES)
def test_cost_is_the_clock_time_around_the_fit_alone(name, monkeypatch):
    """The cost is the clock's advance from just before ``fit`` to just after it, nothing else.

    A clock that only the fit advances (by the number of training rows) makes that exact; the real
    clock's readings are machine- and load-bound, so no test compares them.
    """
    from metaopt.core.benchmarks import live

    now = [0.0]
    real_fit = live._fit

    def fit_that_takes_one_tick_per_row(model, X, y):
        now[0] += len(X)
        return real_fit(model, X, y)

    monkeypatch.setattr(live, "time", SimpleNamespace(perf_counter=lambda: now[0]))
    monkeypatch.setattr(live, "_fit", fit_that_takes_one_tick_per_row)
    ev = get_benchmark(name).evaluate("mc_binary", SMALL[name], [0.1, 1.0])
    np.testing.assert_array_equal(ev.cost, ev.targets["n_train"])
    assert ev.targets["n_train"][0] < ev.targets["n_train"][1]


@pytest.mark.parametrize(("name", "change", "message"), [
    ("live:hgb", {"max_depth": 3}, "unknown hyperparameter 'max_depth'"),
    ("live:hgb", {"max_iter": 1000}, "max_iter=1000 is not allowed"),
    ("live:hgb", {"max_iter": 12.5}, "max_iter=12.5 is not allowed; it must be an integer"),
    ("live:hgb", {"learning_rate": "fast"}, "learning_rate='fast' is not allowed"),
    ("live:hgb", {"early_stopping": True}, "early_stopping=True is not allowed"),
    ("live:hgb", {"validation_fraction": 0.2}, "validation_fraction is inactive unless early_stopping='on'"),
    ("live:hgb", {"early_stopping": "on"}, "validation_fraction is missing"),
    ("live:mlp", {"momentum": 0.5}, "momentum is inactive unless solver='sgd'"),
    ("live:mlp", {"solver": "lbfgs"}, "solver='lbfgs' is not allowed"),
    ("live:mlp", {"width": None}, "width=None is not allowed"),
])
def test_bad_configurations_fail_naming_the_parameter(name, change, message):
    bench = get_benchmark(name)
    bad = SMALL[name][0] | change
    with pytest.raises(UsageError, match=message):
        bench.evaluate("wine", [SMALL[name][0], bad], [1.0, 1.0])


def test_bad_fidelities_fail():
    bench = get_benchmark("live:hgb")
    config = SMALL["live:hgb"][0]
    with pytest.raises(UsageError, match=r"train_fraction=0.05 is not allowed"):
        bench.evaluate("wine", [config], [0.05])
    with pytest.raises(UsageError, match="2 configurations but 1 fidelities"):
        bench.evaluate("wine", [config, config], [1.0])
    with pytest.raises(UsageError, match="missing the fidelity"):
        bench.evaluate_raw("wine", [config])


def test_a_diverged_fit_scores_as_the_majority_class(monkeypatch):
    class Diverging:
        def fit(self, X, y):
            raise ValueError("Solver produced non-finite parameter weights.")

    bench = LiveBenchmark("mlp")
    monkeypatch.setattr(bench, "_model", dataclasses.replace(bench._model, build=lambda cfg, seed: Diverging()))
    ev = bench.evaluate("breast_cancer", SMALL["live:mlp"][:1], [1.0])
    data = _data("breast_cancer")
    majority = np.bincount(data.y_train).argmax()
    assert ev.loss[0] == pytest.approx(1 - np.mean(data.y_val == majority))


@pytest.mark.parametrize("name", NAMES)
def test_random_search_runs_on_a_live_problem(name):
    problem = get_benchmark(name).problem("wine")
    result = run(get_preset("rs").config(problem.fidelity), problem, seed=0, budget="3")
    trace = result.trace
    assert len(trace) == 3 and (trace["fidelity"] == problem.fidelity.r_max).all()
    assert ((trace["loss"] >= 0) & (trace["loss"] <= 1)).all()
    assert trace["cost_used"].iloc[-1] > 0
    assert trace["cost_used"].iloc[-1] == pytest.approx(trace["cost"].sum())
