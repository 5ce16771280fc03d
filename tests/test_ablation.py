"""Ablation: greedy path, OFAT and leave-one-component-out on toy estimates; both estimators end to end."""

import copy
import json
import math

import numpy as np
import pandas as pd
import pytest
from ConfigSpace import ForbiddenAndConjunction, ForbiddenEqualsClause

from metaopt.stages.ablation import (
    ablation_table,
    differences,
    greedy_path,
    leave_one_component_out,
    ofat,
    same_config,
)
from metaopt.stages.ablation_estimators import SurrogateEstimator
from metaopt.core.benchmarks import get_benchmark
from metaopt.cli import main
from metaopt.store.meta_archive import gamma_hash
from metaopt.spaces.design_space import design_space, validate
from metaopt.spaces.presets import get_preset
from metaopt.spaces.restrictions import get_restriction

SOURCE = {"fidelity_schedule": "hb", "mu": 8, "log_eta_fid": 1.0, "survival_fraction": 0.5, "sampler": "uniform"}
TARGET = {"fidelity_schedule": "hb", "mu": 27, "log_eta_fid": 0.5, "survival_fraction": 0.3, "sampler": "kde"}
EFFECTS = {"log_eta_fid": 0.3, "sampler": 0.2, "mu": 0.1, "survival_fraction": -0.05}


def additive(target, effects, base=1.0, calls=None):
    """A toy estimate: each parameter at the target's value lowers the loss by its effect."""
    def estimate(configs):
        if calls is not None:
            calls.append(len(configs))
        return [(base - sum(e for p, e in effects.items() if c.get(p) == target.get(p)), 0.01) for c in configs]
    return estimate


def flipped_once(rows, source, target, space=None):
    """Every parameter that differs between source and target appears in exactly one step."""
    names = [p for r in rows[1:] for p in r.parameters]
    return sorted(names) == sorted(differences(source, target, space)) and len(names) == len(set(names))


def test_greedy_path_orders_additive_effects_and_shares_them():
    source, target, calls = validate(SOURCE), validate(TARGET), []
    rows = greedy_path(source, target, additive(target, EFFECTS, calls=calls))
    assert [r.parameters[0] for r in rows[1:]] == ["log_eta_fid", "sampler", "mu", "survival_fraction"]
    assert rows[2].parameters == ("sampler", "kde_bandwidth_factor", "kde_top_fraction")  # children come along
    assert rows[-1].config == target and calls == [1, 4, 3, 2, 1]  # one batch per step, all remaining flips
    table = ablation_table(rows, "path")
    total = sum(EFFECTS.values())
    assert table["share"].iloc[1:].tolist() == pytest.approx([e / total for e in EFFECTS.values()])
    assert table["share"].iloc[1:].sum() == pytest.approx(1.0)
    assert table["mean"].iloc[0] == pytest.approx(1.0) and table["mean"].iloc[-1] == pytest.approx(1 - total)
    assert flipped_once(rows, source, target)


def test_conditional_children_flip_with_their_parent():
    fidelity = get_benchmark("synthetic:mlp").fidelity
    hb, bohb = get_preset("hb").config(fidelity), get_preset("bohb").config(fidelity)
    filter_children = {n for n in bohb if n.startswith("filter_")} - {"filter_method"} | {"surrogate", "acquisition"}
    rows = greedy_path(hb, bohb, additive(bohb, {"filter_method": 0.5, "sampler": 0.1}))
    step = rows[1]
    assert step.parameters[0] == "filter_method" and filter_children <= set(step.parameters)
    assert all(step.config[n] == bohb[n] for n in filter_children)  # activated children take the target's values
    assert rows[-1].config == bohb and flipped_once(rows, hb, bohb)

    back = greedy_path(bohb, hb, additive(hb, {"filter_method": 0.5, "sampler": 0.1}))
    step = back[1]
    assert step.parameters[0] == "filter_method" and filter_children <= set(step.parameters)
    assert not filter_children & set(step.config) and all(v is None for v in step.values[1:])  # dropped
    assert back[-1].config == hb and flipped_once(back, bohb, hb)


def forbidding(*pairs):
    """The design space with the given (parameter, value) combinations forbidden."""
    space = copy.deepcopy(design_space())
    for pair in pairs:
        space.add(ForbiddenAndConjunction(*[ForbiddenEqualsClause(space[n], v) for n, v in pair]))
    return space


def test_forbidden_intermediates_are_skipped_without_corrupting_the_bookkeeping():
    space = forbidding([("fidelity_schedule", "single"), ("sampler", "kde")])
    source = validate({"fidelity_schedule": "single", "mu": 8, "sampler": "uniform"}, space)
    target = validate({"fidelity_schedule": "hb", "mu": 27, "sampler": "kde"}, space)
    effects = {"sampler": 0.5, "mu": 0.2, "fidelity_schedule": 0.1}
    seen = []

    def estimate(configs):
        seen.extend(configs)
        return additive(target, effects)(configs)

    rows = greedy_path(source, target, estimate, space)
    assert not any(c["fidelity_schedule"] == "single" and c.get("sampler") == "kde" for c in seen)
    assert "sampler" in rows[1].skipped  # the best flip was forbidden at first
    assert [r.parameters[0] for r in rows[1:]] == ["mu", "fidelity_schedule", "sampler"]
    assert rows[-1].config == target and flipped_once(rows, source, target, space)
    assert ablation_table(rows, "path")["share"].iloc[1:].sum() == pytest.approx(1.0)

    # no single flip is valid: the two parameters flip together
    space = forbidding([("fidelity_schedule", "single"), ("sampler", "kde")],
                       [("fidelity_schedule", "hb"), ("sampler", "uniform")])
    source = validate({"fidelity_schedule": "single", "mu": 8, "sampler": "uniform"}, space)
    target = validate({"fidelity_schedule": "hb", "mu": 8, "sampler": "kde"}, space)
    rows = greedy_path(source, target, additive(target, effects), space)
    assert len(rows) == 2 and rows[1].parameters[:2] == ("fidelity_schedule", "sampler")
    assert rows[1].config == target and flipped_once(rows, source, target, space)


def test_ofat_and_leave_one_component_out_on_a_toy():
    source, target = validate(SOURCE), validate(TARGET)
    total = sum(EFFECTS.values())
    rows = ofat(source, target, additive(target, EFFECTS))
    table = ablation_table(rows, "ofat")
    assert [r.parameters[0] for r in rows[1:-1]] == ["mu", "log_eta_fid", "sampler", "survival_fraction"]
    assert all(same_config(r.config, {**source, **{p: target[p] for p in r.parameters}}) for r in rows[1:-1])
    assert table["share"].iloc[1:-1].tolist() == pytest.approx([EFFECTS[p] / total for p in
                                                                 ["mu", "log_eta_fid", "sampler", "survival_fraction"]])

    rows = leave_one_component_out(target, source, additive(target, EFFECTS))
    table = ablation_table(rows, "loco").set_index("label")
    assert list(table.index) == ["target", "loop", "fidelity_schedules", "samplers", "baseline"]
    assert table.loc["fidelity_schedules", "parameters"] == "log_eta_fid; survival_fraction"
    assert table.loc["fidelity_schedules", "share"] == pytest.approx(0.25 / total)
    assert table.loc["samplers", "share"] == pytest.approx(0.2 / total)
    assert table.loc["loop", "share"] == pytest.approx(0.1 / total)

    # a forbidden one-factor change is reported, not estimated
    space = forbidding([("fidelity_schedule", "single"), ("sampler", "kde")])
    single = validate({"fidelity_schedule": "single", "mu": 8, "sampler": "uniform"}, space)
    rows = ofat(single, target, additive(target, EFFECTS), space)
    sampler = next(r for r in rows if r.parameters == ("sampler",))
    assert sampler.config is None and math.isnan(sampler.mean)


def run_files(folder):
    return {p: p.stat().st_mtime_ns for p in folder.glob("runs/*/*/seed-*.json")}


def test_evaluated_estimator_end_to_end_and_resumes(tmp_path, capsys):
    argv = ["ablate", "--benchmark", "synthetic:mlp", "--from", "hb", "--to", "bohb", "--estimator", "evaluated",
            "--instances", "test", "--limit", "2", "--seeds", "1", "--budget", "3d", "--variant", "path,ofat",
            "--out", str(tmp_path), "--quiet"]
    assert main(argv) == 0
    folder = tmp_path / "ablation" / "hb-to-bohb-evaluated"
    for name in ("path.csv", "path.md", "path.png", "ofat.csv", "ofat.md", "ofat.png", "meta.json"):
        assert (folder / name).exists(), name
    path = pd.read_csv(folder / "path.csv")
    assert list(path.columns) == ["step", "label", "parameters", "values", "mean", "se", "share", "note"]
    assert path["share"].iloc[1:].sum() == pytest.approx(1.0)
    meta = json.loads((folder / "meta.json").read_text())
    assert meta["estimator"] == "evaluated" and meta["seeds"] == [1] and len(meta["instances"]) == 2
    assert meta["budget"] == "3d" and meta["source"]["name"] == "hb" and sorted(meta["variants"]) == ["ofat", "path"]
    runs = run_files(folder)
    configs = {gamma_hash(json.loads(p.read_text())["gamma"]) for p in runs}
    assert len(runs) == 2 * len(configs) and gamma_hash(meta["target"]["config"]) in configs
    record = json.loads(next(iter(runs)).read_text())
    assert record["status"] == "ok" and {"regret", "summary", "instance", "seed"} <= record.keys()

    # a rerun recomputes nothing; a missing run is redone alone
    assert main(argv) == 0
    assert run_files(folder) == runs
    pd.testing.assert_frame_equal(pd.read_csv(folder / "path.csv"), path)
    lost = next(iter(runs))
    lost.unlink()
    assert main(argv) == 0
    again = run_files(folder)
    assert again.keys() == runs.keys() and [p for p in runs if again[p] != runs[p]] == [lost]

    # another benchmark into the same folder is refused; so is bad input, in one line
    capsys.readouterr()
    assert main(argv[:2] + ["synthetic:rosenbrock"] + argv[3:]) == 2
    assert main(argv[:8] + ["guess"] + argv[9:]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert "different benchmark" in err[0] and err[1] == ("metaopt: error: --estimator: 'guess' is not allowed; "
                                                          "allowed: evaluated, surrogate")


def test_evaluated_estimates_on_one_instance_spread_over_its_seeds(tmp_path):
    """With one instance (a scenario like nb301) the seeds are the replicates: the s.e. is theirs, not NaN."""
    argv = ["ablate", "--benchmark", "synthetic:mlp", "--from", "rs", "--to", "hb", "--estimator", "evaluated",
            "--instances", "test", "--limit", "1", "--seeds", "3", "--budget", "2d", "--variant", "ofat",
            "--out", str(tmp_path), "--quiet"]
    assert main(argv) == 0
    folder = tmp_path / "ablation" / "rs-to-hb-evaluated"
    ofat = pd.read_csv(folder / "ofat.csv")
    regrets = {}
    for p in folder.glob("runs/*/*/seed-*.json"):
        record = json.loads(p.read_text())
        regrets.setdefault(gamma_hash(record["gamma"]), []).append(record["regret"])
    meta = json.loads((folder / "meta.json").read_text())
    source = np.array(regrets[gamma_hash(meta["source"]["config"])])
    assert len(source) == 3 and ofat["se"].iloc[0] == pytest.approx(np.std(source, ddof=1) / np.sqrt(3))
    assert ofat["mean"].iloc[0] == pytest.approx(source.mean())
    assert "the 3 seeds of its one instance" in (folder / "ofat.md").read_text()


def synthetic_archive(n_configs=40, seed=0):
    """Archive rows of table4-space configurations: kde sampling is 0.3 better, instances differ by 0.1."""
    rng = np.random.default_rng(seed)
    space = get_restriction("table4").space()
    space.seed(seed)
    rows = []
    for config in space.sample_configuration(n_configs):
        gamma = validate(dict(config))  # table4 ties no parameters: its configurations are complete
        for k, instance in enumerate(rng.choice(["a", "b", "c"], size=2, replace=False)):
            objective = 0.5 - 0.3 * (gamma["sampler"] == "kde") + 0.1 * "abc".index(instance) + rng.normal(0, 0.01)
            rows.append({"hash": gamma_hash(gamma), "instance": instance, "seed": k, "objective": objective,
                         "status": "ok", **{f"gamma.{n}": v for n, v in gamma.items()}})
    return pd.DataFrame(rows)


def test_surrogate_estimator_on_a_synthetic_archive(tmp_path, capsys):
    archive = synthetic_archive()
    estimator = SurrogateEstimator(archive, n_trees=100)
    base = {"fidelity_schedule": "hb", "filter_method": "tournament", "surrogate": "knn1"}
    source = validate({**base, "sampler": "uniform", "mu": 8})
    target = validate({**base, "sampler": "kde", "mu": 16})
    (m_source, s_source), (m_target, _) = estimator([source, target])
    assert m_source - m_target == pytest.approx(0.3, abs=0.1) and s_source >= 0
    rows = greedy_path(source, target, estimator)
    share = ablation_table(rows, "path").set_index("label")["share"]
    assert share[next(lbl for lbl in share.index if lbl.startswith("sampler"))] > 0.7
    assert estimator.note(target) == "" and "filter_method=none" in estimator.note(validate({"mu": 8}))

    # through the CLI, from a study folder
    study = tmp_path / "study"
    (study / "meta").mkdir(parents=True)
    archive.to_csv(study / "meta" / "archive.csv", index=False)
    (study / "gamma_star.json").write_text(json.dumps({"config": target}))
    code = main(["ablate", "--benchmark", "synthetic:mlp", "--from", "bohb", "--to", str(study / "gamma_star.json"),
                 "--study-output", str(study), "--estimator", "surrogate", "--variant", "all", "--out", str(tmp_path),
                 "--quiet"])
    assert code == 0
    folder = tmp_path / "ablation" / "bohb-to-gamma_star-surrogate"
    assert all((folder / f"{v}.{ext}").exists() for v in ("path", "ofat", "loco") for ext in ("csv", "md", "png"))
    meta = json.loads((folder / "meta.json").read_text())
    assert meta["surrogate"]["n_rows"] == len(archive) and meta["instances"] == ["a", "b", "c"]
    capsys.readouterr()
    assert main(["ablate", "--benchmark", "synthetic:mlp", "--from", "hb", "--to", "bohb", "--study-output",
                 str(study), "--estimator", "surrogate", "--seeds", "2", "--out", str(tmp_path)]) == 2
    assert capsys.readouterr().err.startswith("metaopt: error: --seeds: only with --estimator evaluated")


def test_racing_drops_only_clearly_worse_candidates(tmp_path):
    from metaopt.stages.ablation_estimators import EvaluatedEstimator
    from metaopt.core.budget import Budget
    from metaopt.core.executor import Executor

    instances = get_benchmark("synthetic:mlp").test_instances[:4]
    estimator = EvaluatedEstimator(tmp_path, "synthetic:mlp", instances, [1, 2], Budget.parse("3d", 6), Executor(),
                                   race=True)
    regrets = {"best": [0.10, 0.20, 0.30, 0.40], "close": [0.12, 0.18, 0.33, 0.41], "worse": [0.30, 0.41, 0.52, 0.60]}
    for h, values in regrets.items():
        for i, value in zip(instances, values):
            estimator.records[(h, i, 1)] = {"regret": value, "status": "ok"}
    assert estimator._race(list(regrets), [1]) == ["best", "close"]
    assert estimator.raced_out == {"worse": 1}
    mean, se = estimator._estimate("worse")
    assert mean == pytest.approx(np.mean(regrets["worse"]))
    assert se == pytest.approx(np.std(regrets["worse"], ddof=1) / 2)


def test_ablate_help(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["ablate", "--help"])
    assert exit_.value.code == 0 and "--estimator" in capsys.readouterr().out
