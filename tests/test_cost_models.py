"""Cost models (paper 003 §3.2): fitted on log cost, they predict positive costs of unseen configurations."""

import numpy as np
import pytest
from scipy.stats import spearmanr

from metaopt.core.registry import get_component

MODELS = ["loglinear", "gp", "rf"]


def build(name: str):
    return get_component("cost_models", name).factory()


def synthetic(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Features (x0, x1, fidelity column) in [0, 1] and cost = exp(2 + 3·x0 + log r), r = e^(2·fid),
    with 10% multiplicative noise; x1 is irrelevant."""
    F = rng.uniform(size=(n, 3))
    log_r = 2.0 * F[:, 2]
    return F, np.exp(2.0 + 3.0 * F[:, 0] + log_r + 0.1 * rng.standard_normal(n))


@pytest.mark.parametrize("name", MODELS)
def test_recovers_a_log_linear_cost(name):
    rng = np.random.default_rng(0)
    F, cost = synthetic(40, rng)
    F_test, cost_test = synthetic(200, rng)
    model = build(name).fit(F, cost, rng)
    predicted = model.predict(F_test)
    assert spearmanr(predicted, cost_test).statistic > 0.9
    assert (predicted > 0).all()


@pytest.mark.parametrize("name", MODELS)
def test_predicts_one_before_data_and_positive_always(name):
    rng = np.random.default_rng(1)
    F_test = rng.uniform(-0.5, 1.5, size=(30, 3))  # features lie in [-0.5, 1]; go beyond
    assert np.array_equal(build(name).predict(F_test), np.ones(30))
    assert np.array_equal(build(name).fit(np.empty((0, 3)), np.empty(0), rng).predict(F_test), np.ones(30))
    F, cost = synthetic(15, rng)
    cost[:3] = 0.0  # zero costs (tiny runs) are floored, not log(0)
    cost[3] = np.nan  # a failed run is ignored
    predicted = build(name).fit(F, cost, rng).predict(F_test)
    assert np.isfinite(predicted).all() and (predicted > 0).all()


@pytest.mark.parametrize("name", MODELS)
def test_too_few_points_give_the_geometric_mean(name):
    rng = np.random.default_rng(2)
    F, cost = np.array([[0.1, 0.2, 0.3], [0.4, 0.5, 0.6]]), np.array([1.0, 100.0])
    assert np.allclose(build(name).fit(F[1:], cost[1:], rng).predict(F), 100.0)
    if name == "loglinear":  # needs 3 points; GP and RF fit 2
        assert np.allclose(build(name).fit(F, cost, rng).predict(F), 10.0)
