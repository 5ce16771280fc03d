"""A pooled benchmark (several scenarios' instances as one), per-hyperparameter budgets resolved per
instance, and a meta-optimization over a pooled benchmark (RQ12)."""

import json

import numpy as np
import pandas as pd
import pytest

from metaopt.core.benchmarks import get_benchmark
from metaopt.core.budget import Budget
from metaopt.cli import main
from metaopt.core.errors import UsageError
from metaopt.core.references import get_reference, resolve_budget

POOL = "pooled:synthetic:mlp+synthetic:rosenbrock"


def test_a_pooled_benchmark_is_its_members_instances_under_scenario_prefixes():
    pool, mlp, rosen = get_benchmark(POOL), get_benchmark("synthetic:mlp"), get_benchmark("synthetic:rosenbrock")
    assert pool.train_instances == [f"mlp:{i}" for i in mlp.train_instances] + \
        [f"rosenbrock:{i}" for i in rosen.train_instances]
    assert pool.test_instances == [f"mlp:{i}" for i in mlp.test_instances] + \
        [f"rosenbrock:{i}" for i in rosen.test_instances]
    problem = pool.problem(f"rosenbrock:{rosen.train_instances[0]}")
    assert problem.benchmark is rosen and problem.instance == rosen.train_instances[0] and problem.d == 5
    config = dict(rosen.search_space.sample_configuration())
    ours = pool.evaluate(f"rosenbrock:{rosen.train_instances[0]}", [config], [81])
    theirs = rosen.evaluate(rosen.train_instances[0], [config], [81])
    assert np.array_equal(ours.loss, theirs.loss) and np.array_equal(ours.cost, theirs.cost)
    assert get_reference(pool, f"mlp:{mlp.train_instances[1]}") == get_reference(mlp, mlp.train_instances[1])
    assert pool.instance_features(f"mlp:{mlp.train_instances[1]}") == [1.0, 0.0]
    assert pool.instance_features(f"rosenbrock:{rosen.train_instances[1]}") == [0.0, 1.0]
    assert pool.d is None


def test_what_differs_between_members_fails_with_a_message():
    pool = get_benchmark(POOL)
    with pytest.raises(UsageError, match="no single search space"):
        _ = pool.search_space
    with pytest.raises(UsageError, match="no single fidelity"):
        _ = pool.fidelity
    with pytest.raises(UsageError, match="unknown instance 'mlp:nope'.*<scenario>:<instance>"):
        pool.problem("mlp:nope")
    with pytest.raises(UsageError, match="at least two members"):
        get_benchmark("pooled:synthetic:mlp")
    with pytest.raises(UsageError, match="two members are named 'mlp'"):
        get_benchmark("pooled:synthetic:mlp+synthetic:mlp")


def test_a_budget_per_hyperparameter_is_resolved_per_instance():
    pool = get_benchmark(POOL)
    budget = Budget.parse("30d", pool.d)
    assert (budget.amount, budget.unit) == (30, "full_evals_per_d")
    mlp, rosen = pool.problem(pool.train_instances[0]), pool.problem(pool.train_instances[-1])
    assert resolve_budget(budget, mlp) == Budget(180, "full_evals", "30d")
    assert resolve_budget(budget, rosen) == Budget(150, "full_evals", "30d")
    with pytest.raises(ValueError, match="resolve it per instance"):
        budget.fraction(1.0, 1.0)
    with pytest.raises(UsageError, match="needs one benchmark's d"):
        Budget.parse("30dc", None)


STUDY = f"""
name: pooled_tiny
benchmark: {POOL}+synthetic:boosting
budget: 4d
meta:
  instances: [mlp:{{mlp0}}, mlp:{{mlp1}}, rosenbrock:{{rosen0}}, rosenbrock:{{rosen1}}, boosting:{{boost0}},
              boosting:{{boost1}}]
  restriction: table4
  trials: 12
  seeds: [1]
output: {{out}}
"""


def test_a_pooled_study_meta_optimizes_each_instance_at_its_own_budget(tmp_path, capsys):
    """Three scenarios: five instance features (reference and indicators), SMAC's model in use after the
    six designs of its initial design."""
    mlp, rosen = get_benchmark("synthetic:mlp").train_instances, get_benchmark("synthetic:rosenbrock").train_instances
    boost = get_benchmark("synthetic:boosting").train_instances
    path = tmp_path / "pooled.yaml"
    path.write_text(STUDY.format(mlp0=mlp[0], mlp1=mlp[1], rosen0=rosen[0], rosen1=rosen[1], boost0=boost[0],
                                 boost1=boost[1], out=tmp_path / "out"))
    assert main(["study", "run", str(path), "--quiet"]) == 0
    assert "evaluate: skipped (the study has no 'evaluation' section)" in capsys.readouterr().out
    archive = pd.read_csv(tmp_path / "out" / "meta" / "archive.csv")
    assert len(archive) == 12 and (archive["status"] == "ok").all()
    records = [json.loads(p.read_text()) for p in (tmp_path / "out" / "meta" / "runs").glob("*/*/seed-*.json")]
    budgets = {(r["instance"].partition(":")[0], r["summary"]["budget"]) for r in records}
    assert budgets == {("mlp", 24.0), ("rosenbrock", 20.0), ("boosting", 24.0)}  # 4 x d of each member
    assert {r["summary"]["benchmark"] for r in records} == {"synthetic:mlp", "synthetic:rosenbrock",
                                                            "synthetic:boosting"}
    star = json.loads((tmp_path / "out" / "meta" / "gamma_star.json").read_text())
    assert star["n_trials"] == 12 and star["hash"] in set(archive["hash"])
    # its gamma* is evaluated on one scenario by a study of that scenario
    evaluation = tmp_path / "on_mlp.yaml"
    evaluation.write_text(f"name: on_mlp\nbenchmark: synthetic:mlp\nbudget: 4d\nevaluation:\n"
                          f"  instances: {{split: test, limit: 2}}\n  seeds: 1\n  optimizers: [gamma_star, rs]\n"
                          f"  gamma_star_from: {tmp_path / 'out' / 'meta' / 'gamma_star.json'}\n"
                          f"output: {tmp_path / 'on_mlp'}\n")
    assert main(["study", "run", str(evaluation), "--quiet"]) == 0
    summary = json.loads(next((tmp_path / "on_mlp" / "eval" / "runs" / "gamma_star").glob("*/seed-1/summary.json"))
                         .read_text())
    assert summary["budget"] == 24.0 and summary["optimizer"] == "gamma_star"


def test_a_pooled_study_with_an_evaluation_section_is_refused(tmp_path, capsys):
    path = tmp_path / "pooled.yaml"
    path.write_text(f"name: p\nbenchmark: {POOL}\nbudget: 4d\nevaluation:\n  seeds: 1\n  optimizers: [rs]\n"
                    f"output: {tmp_path / 'out'}\n")
    assert main(["study", "run", str(path), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "field 'evaluation'" in err and "evaluate its gamma* per scenario" in err
    assert not (tmp_path / "out").exists()


def test_a_study_needs_a_meta_or_an_evaluation_section(tmp_path, capsys):
    path = tmp_path / "empty.yaml"
    path.write_text(f"name: e\nbenchmark: synthetic:mlp\nbudget: 4d\noutput: {tmp_path / 'out'}\n")
    assert main(["study", "run", str(path), "--quiet"]) == 2
    assert "a 'meta' section, an 'evaluation' section or both" in capsys.readouterr().err


def test_named_instances_checks_the_names_and_keeps_them_as_given():
    """The one check of a list of instances (a study's and `metaopt ablate --instances`): unknown and
    repeated names fail, the names are kept (a pooled benchmark's keep their scenario prefix)."""
    mlp, pool = get_benchmark("synthetic:mlp"), get_benchmark(POOL)
    assert mlp.named_instances(["2", 0]) == ["2", "0"]
    assert pool.named_instances(["mlp:1", "rosenbrock:0"]) == ["mlp:1", "rosenbrock:0"]
    with pytest.raises(UsageError, match="instance '0' is listed twice"):
        mlp.named_instances(["0", 0])
    with pytest.raises(UsageError, match="unknown instance 'nope'"):
        mlp.named_instances(["0", "nope"])


def test_a_full_fidelity_scenario_is_its_member_at_the_top_fidelity_only():
    """full:synthetic:mlp: the member's instances, space and regret references, a fidelity of one level at the
    member's r_max (a problem without a fidelity), the member's losses there; any other fidelity is refused."""
    mlp, full = get_benchmark("synthetic:mlp"), get_benchmark("full:synthetic:mlp")
    assert full.name == "full:synthetic:mlp" and full.instances == mlp.instances
    assert (full.train_instances, full.test_instances) == (mlp.train_instances, mlp.test_instances)
    assert full.search_space is mlp.search_space and full.d == mlp.d
    assert (full.fidelity.r_min, full.fidelity.r_max) == (mlp.fidelity.r_max, mlp.fidelity.r_max)
    instance = mlp.train_instances[0]
    configs = [dict(c) for c in mlp.search_space.sample_configuration(5)]
    ours = full.evaluate(instance, configs, [mlp.fidelity.r_max] * 5)
    theirs = mlp.evaluate(instance, configs, [mlp.fidelity.r_max] * 5)
    assert np.array_equal(ours.loss, theirs.loss) and np.array_equal(ours.cost, theirs.cost)
    with pytest.raises(UsageError, match="fidelity epoch=27 is not allowed.*\\[81, 81\\]"):
        full.evaluate(instance, configs[:1], [27])
    assert full.owner(instance) == (mlp, instance)
    assert get_reference(full, instance) == get_reference(mlp, instance)
    assert full.fingerprint() != mlp.fingerprint()


def test_a_pool_of_full_fidelity_scenarios_names_instances_by_the_whole_scenario():
    """pooled:full:synthetic:mlp+full:synthetic:rosenbrock: instances synthetic:mlp:<i> (the scenario name
    holds a colon); problems are the full-fidelity ones, references the scenarios' own."""
    pool = get_benchmark("pooled:full:synthetic:mlp+full:synthetic:rosenbrock")
    mlp = get_benchmark("synthetic:mlp")
    instance = f"synthetic:mlp:{mlp.train_instances[1]}"
    assert instance in pool.train_instances
    problem = pool.problem(instance)
    assert problem.benchmark.name == "full:synthetic:mlp" and problem.instance == mlp.train_instances[1]
    assert problem.fidelity.r_min == problem.fidelity.r_max == mlp.fidelity.r_max
    assert pool.owner(instance) == (mlp, mlp.train_instances[1])
    assert get_reference(pool, instance) == get_reference(mlp, mlp.train_instances[1])
    assert pool.instance_features(instance) == [1.0, 0.0]
