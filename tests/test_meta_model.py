"""The meta-archive model: one encoding and one forest per archive, shared by importance, ablation and report."""

import numpy as np
import pandas as pd
import pytest
from ConfigSpace import Categorical, ConfigurationSpace, EqualsCondition, Float

from metaopt.stages.ablation_estimators import SurrogateEstimator
from metaopt.analysis.meta_model import INACTIVE, encode, meta_archive_model
from metaopt.analysis.report import _archive_configs, _surrogate_scores
from metaopt.store.meta_archive import gamma_hash
from metaopt.spaces.design_space import design_space, validate
from metaopt.spaces.restrictions import get_restriction


def conditional_archive(n: int = 400) -> tuple[ConfigurationSpace, pd.DataFrame]:
    """x is active iff sel == A; f = 2x if A else 0.5, plus 1 on instance i2."""
    sel, x = Categorical("sel", ["A", "B"]), Float("x", (0.0, 1.0))
    space = ConfigurationSpace(seed=0, space=[sel, x])
    space.add(EqualsCondition(x, sel, "A"))
    configs = [dict(c) for c in space.sample_configuration(n)]
    rows = [{"gamma.sel": c["sel"], "gamma.x": c.get("x"), "instance": "i2" if k % 2 else "i1",
             "objective": (2 * c["x"] if c["sel"] == "A" else 0.5) + (k % 2)} for k, c in enumerate(configs)]
    return space, pd.DataFrame(rows)


def test_encoding_and_prediction_averaged_over_instances():
    space, archive = conditional_archive()
    vectors = encode(space, [{"sel": "B", "x": 0.3}, {"sel": "A", "x": 0.25}, {"sel": "A"}])
    assert np.isnan(vectors[0, 1]) and vectors[1].tolist() == [0.0, 0.25] and vectors[2, 1] == 0.5  # default
    model = meta_archive_model(archive, space, n_trees=20)
    assert model.instances == ["i1", "i2"] and model.n_rows == len(archive) and len(model.trees) == 20
    assert model._features(vectors[:1], np.array([1.0]))[0].tolist() == [1.0, INACTIVE, 1.0]
    mean, std = model.predict([{"sel": "A", "x": 0.25}, {"sel": "B"}])
    assert mean == pytest.approx([0.5 + 0.5, 0.5 + 0.5], abs=0.1) and (std >= 0).all()  # 0.5 = mean instance shift
    per_instance = model.per_tree(np.repeat(vectors[1:2], 2, axis=0), np.array([0.0, 1.0]))
    assert mean[0] == pytest.approx(per_instance.mean())
    assert model.oob_r2 > 0.9


def test_fitted_once_per_archive_content_and_settings():
    space, archive = conditional_archive(100)
    model = meta_archive_model(archive, space, n_trees=5)
    assert meta_archive_model(archive.copy(), space, n_trees=5) is model
    assert meta_archive_model(archive.assign(unused=1), space, n_trees=5) is model  # columns it does not read
    assert meta_archive_model(archive, space, n_trees=6) is not model
    changed = archive.copy()
    changed.loc[0, "objective"] += 1.0
    assert meta_archive_model(changed, space, n_trees=5) is not model


def test_ablation_and_report_use_the_same_model():
    space = get_restriction("table4").space()
    space.seed(3)
    rows = []
    for k, config in enumerate(space.sample_configuration(30)):
        gamma = validate(dict(config))
        rows.append({"hash": gamma_hash(gamma), "instance": "ab"[k % 2], "seed": 1, "status": "ok",
                     "objective": 0.2 * (gamma["sampler"] == "kde") + 0.1 * (k % 2),
                     **{f"gamma.{n}": v for n, v in gamma.items()}})
    archive = pd.DataFrame(rows)
    estimator = SurrogateEstimator(archive, n_trees=10)
    model = meta_archive_model(archive, design_space(), n_trees=10)
    assert estimator.model is model
    configs = _archive_configs(archive)
    full = meta_archive_model(archive, design_space())
    scores = _surrogate_scores(archive, configs, design_space())
    assert scores.to_numpy() == pytest.approx(full.predict(configs.to_dict(orient="records"))[0])
    gammas = [validate(configs.loc[h].dropna().to_dict()) for h in configs.index[:3]]
    assert [m for m, _ in estimator(gammas)] == pytest.approx(model.predict(gammas)[0])
