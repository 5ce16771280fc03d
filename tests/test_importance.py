"""Parameter importance: fANOVA against closed-form decompositions, local importance, files and CLI."""

import json

import numpy as np
import pandas as pd
import pytest
import yaml
from ConfigSpace import Categorical, ConfigurationSpace, EqualsCondition, Float

from metaopt.analysis.importance import compute_importance, write_importance
from metaopt.cli import main
from metaopt.spaces.restrictions import get_restriction

TOL = 0.05


def uniform_space(n: int) -> ConfigurationSpace:
    return ConfigurationSpace(seed=0, space=[Float(f"x{i}", (0.0, 1.0)) for i in range(n)])


def archive_of(space: ConfigurationSpace, f, n: int, **extra) -> pd.DataFrame:
    """An archive of ``n`` configurations sampled from ``space`` with objective ``f(config)``."""
    configs = [dict(c) for c in space.sample_configuration(n)]
    rows = [{**{f"gamma.{k}": v for k, v in c.items()}, "objective": f(c)} for c in configs]
    return pd.DataFrame(rows).assign(**extra)


def effects(result) -> dict[str, float]:
    return dict(zip(result.fanova["parameter"], result.fanova["importance"]))


def test_fanova_matches_the_analytic_decomposition():
    # f = a x0 + b x1^2 + c x0 x2 on U[0,1]^4 (x3 irrelevant). With u = x - 1/2:
    # f - E f = (a + c/2) u0 + b (x1^2 - 1/3) + (c/2) u2 + c u0 u2, so
    # V0 = (a + c/2)^2 / 12, V1 = b^2 Var(x1^2) = 4 b^2 / 45, V2 = c^2 / 48, V02 = c^2 / 144.
    a, b, c = 1.0, 3.0, 4.0
    space = uniform_space(4)
    archive = archive_of(space, lambda x: a * x["x0"] + b * x["x1"] ** 2 + c * x["x0"] * x["x2"], 3000)
    v = {"x0": (a + c / 2) ** 2 / 12, "x1": 4 * b**2 / 45, "x2": c**2 / 48, "x0 × x2": c**2 / 144}
    total = sum(v.values())
    result = compute_importance(archive, space, "objective", {f"x{i}": 0.5 for i in range(4)}, seed=1, n_trees=30)
    got = effects(result)
    for name, variance in v.items():
        assert got[name] == pytest.approx(variance / total, abs=TOL), name
    assert got["x3"] < 0.01
    assert max(got[p] for p in got if "x3" in p) < 0.02
    assert set(result.fanova["kind"]) == {"main", "pair"}
    assert (result.fanova["std"] >= 0).all()


def test_categorical_parameter_and_instances_marginalized():
    # f = offset(cat) + 4 x0 + a large per-instance shift that must not count as variance of γ.
    # Var offset({0, 1, 3} uniform) = 14/9, Var 4 x0 = 4/3.
    space = ConfigurationSpace(seed=0, space=[Categorical("cat", ["a", "b", "c"]), Float("x0", (0.0, 1.0))])
    offset = {"a": 0.0, "b": 1.0, "c": 3.0}
    archive = archive_of(space, lambda x: offset[x["cat"]] + 4 * x["x0"], 2000)
    archive["instance"] = np.resize(["i1", "i2"], len(archive))
    archive["objective"] += np.where(archive["instance"] == "i2", 10.0, 0.0)
    result = compute_importance(archive, space, "objective", {"cat": "a", "x0": 0.5}, seed=1, n_trees=30)
    got = effects(result)
    total = 14 / 9 + 4 / 3
    assert got["cat"] == pytest.approx(14 / 9 / total, abs=TOL)
    assert got["x0"] == pytest.approx(4 / 3 / total, abs=TOL)
    assert result.meta["n_instances"] == 2


def test_conditional_parameter():
    # x is active iff sel == A; f = 2x if A else 0.5. Over the space's measure (sel uniform, x
    # uniform and masked when inactive): V_sel = 1/16, V_x = 1/12, V_total = 11/48, the rest is
    # the interaction sel × x.
    sel = Categorical("sel", ["A", "B"])
    x = Float("x", (0.0, 1.0))
    space = ConfigurationSpace(seed=0, space=[sel, x])
    space.add(EqualsCondition(x, sel, "A"))
    archive = archive_of(space, lambda c: 2 * c["x"] if c["sel"] == "A" else 0.5, 2000)
    assert archive["gamma.x"].isna().any()
    result = compute_importance(archive, space, "objective", {"sel": "A", "x": 0.2}, seed=1, n_trees=30)
    got = effects(result)
    total = 11 / 48
    assert got["sel"] == pytest.approx(1 / 16 / total, abs=TOL)
    assert got["x"] == pytest.approx(1 / 12 / total, abs=TOL)
    assert got["sel × x"] == pytest.approx((total - 1 / 16 - 1 / 12) / total, abs=TOL)
    assert set(result.local["parameter"]) == {"sel", "x"}
    at_b = compute_importance(archive, space, "objective", {"sel": "B"}, seed=1, n_trees=10, pairs=False)
    assert list(at_b.local["parameter"]) == ["sel"]  # x is inactive in this incumbent: no local effect
    assert set(at_b.fanova["kind"]) == {"main"}


def test_local_importance_finds_the_locally_dominant_parameter():
    # f = x0 x1 + 0.1 x2: globally x0 and x1 matter equally; at x1 = 0.05 only x1 moves f.
    space = uniform_space(3)
    archive = archive_of(space, lambda x: x["x0"] * x["x1"] + 0.1 * x["x2"], 3000)
    result = compute_importance(archive, space, "objective", {"x0": 0.9, "x1": 0.05, "x2": 0.5}, seed=1,
                                n_trees=30, pairs=False)
    local = dict(zip(result.local["parameter"], result.local["importance"]))
    assert local["x1"] > 0.9
    assert sum(local.values()) == pytest.approx(1.0)
    got = effects(result)
    assert got["x0"] == pytest.approx(got["x1"], abs=TOL)


def test_files_and_cli_on_a_table4_study(tmp_path, capsys):
    # A fake optimize-stage output over the table4 space (conditional parameters, instances).
    space = get_restriction("table4").space()
    score = {"knn1": 0.0, "kknn7": 0.1, "tpe": 0.2, "rf": 0.3}

    def objective(c):
        return c["filter_rho_0"] + score[c["surrogate"]] + (0.2 if c["sampler"] == "kde" else 0.0)

    archive = archive_of(space, objective, 300)
    archive["instance"] = np.resize([3, 7, 9], len(archive))
    study_dir = tmp_path / "study"
    (study_dir / "meta").mkdir(parents=True)
    archive.to_csv(study_dir / "meta" / "archive.csv", index=False)
    star = {k[len("gamma."):]: v for k, v in archive.iloc[0].items() if k.startswith("gamma.") and pd.notna(v)}
    (study_dir / "meta" / "gamma_star.json").write_text(json.dumps({"config": star}, default=lambda v: v.item()))
    (study_dir / "study.yaml").write_text(yaml.safe_dump({
        "name": "fake", "benchmark": "synthetic:mlp", "meta": {"restriction": "table4"},
        "evaluation": {"optimizers": ["rs"]}}))

    code = main(["importance", "--study-output", str(study_dir), "--out", str(tmp_path / "out"), "--no-pairs",
                 "--trees", "10"])
    out, _ = capsys.readouterr()
    assert code == 0 and "filter_rho_0" in out
    folder = tmp_path / "out" / "importance"
    for name in ("fanova.csv", "local.csv", "fanova.png", "local.png", "meta.json"):
        assert (folder / name).stat().st_size > 0, name
    fanova = pd.read_csv(folder / "fanova.csv")
    assert list(fanova.columns) == ["parameter", "kind", "importance", "std"]
    assert fanova.iloc[0]["parameter"] == "filter_rho_0"
    assert list(pd.read_csv(folder / "local.csv").columns) == ["parameter", "importance", "std"]
    meta = json.loads((folder / "meta.json").read_text())
    assert meta["restriction"] == "table4" and meta["n_rows"] == 300 and meta["seed"] == 1
    assert "proposal" not in meta["parameters"]  # a single-choice parameter has no effect to measure

    # Same archive, gamma* and settings: the stored result is kept (files untouched); anything else recomputes.
    args = ["importance", "--study-output", str(study_dir), "--out", str(tmp_path / "out"), "--no-pairs",
            "--trees", "10"]
    stamps = {name: (folder / name).stat().st_mtime_ns for name in ("fanova.csv", "meta.json", "fanova.png")}
    assert main(args) == 0 and "kept" in capsys.readouterr()[0]
    assert {name: (folder / name).stat().st_mtime_ns for name in stamps} == stamps
    assert main(args[:-1] + ["11"]) == 0 and "wrote" in capsys.readouterr()[0]
    assert json.loads((folder / "meta.json").read_text())["n_trees"] == 11
    archive.iloc[:299].to_csv(study_dir / "meta" / "archive.csv", index=False)  # the archive changed
    assert main(args[:-1] + ["11"]) == 0 and "wrote" in capsys.readouterr()[0]
    assert json.loads((folder / "meta.json").read_text())["n_rows"] == 299
    assert main(args[:-1] + ["11", "--recompute"]) == 0 and "wrote" in capsys.readouterr()[0]

    assert main(["importance", "--study-output", str(tmp_path / "missing")]) == 2


def test_write_importance_with_pairs(tmp_path):
    space = uniform_space(2)
    archive = archive_of(space, lambda x: x["x0"] * x["x1"], 200)
    result = compute_importance(archive, space, "objective", {"x0": 0.5, "x1": 0.5}, seed=1, n_trees=5)
    folder = write_importance(result, tmp_path)
    fanova = pd.read_csv(folder / "fanova.csv")
    assert list(fanova["kind"]) == ["main", "main", "pair"] and fanova.iloc[2]["parameter"] == "x0 × x1"
    assert (folder / "fanova.png").exists() and (folder / "local.png").exists()
