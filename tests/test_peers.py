"""Peers (SMAC, Optuna, FLAML) on metaopt's problems: budget accounting, trace format, determinism."""

import functools
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from ConfigSpace import ConfigurationSpace, Float, GreaterThanCondition

from metaopt.core.benchmarks import get_benchmark
from metaopt.core.budget import Budget
from metaopt.core.errors import UsageError
from metaopt.engine.loop import run
from metaopt.engine.peers import PEERS, PeerUnavailable, _conditions, available_peers, peer_status, run_peer
from metaopt.core.references import Reference
from metaopt.engine.trace import TRACE_COLUMNS
from metaopt.spaces.presets import get_preset

REPO = Path(__file__).resolve().parents[1]
MLP = get_benchmark("synthetic:mlp")
MLP_PROBLEM = MLP.problem(MLP.test_instances[0])
REF = Reference(y_min=0.0, y_max=1.0)  # a fixed reference: computing the real one takes a while
SEQUENTIAL = [name for name, peer in PEERS.items() if peer.clock_runner is None]
"""The peers run here; those on the simulated clock (syne-tune's) are tested in test_syne_peers.py."""


@functools.lru_cache(maxsize=None)
def _run(name: str, bench: str, instance: str, seed: int, budget: str):
    """Runs shared between tests (each peer run once per setting)."""
    problem = get_benchmark(bench).problem(instance)
    return run_peer(name, problem, seed, budget, reference=REF)


def _need(name: str) -> None:
    if name not in available_peers():
        pytest.skip(f"{name}: {peer_status()[name]}")


def _check_run(result, problem, budget: Budget) -> None:
    trace, summary = result.trace, result.summary
    assert len(trace) > 0
    spent = (trace["fidelity"] / problem.fidelity.r_max).sum()
    assert spent <= budget.amount + 1e-9
    assert trace["budget_used"].iloc[-1] == pytest.approx(spent)
    assert summary["budget_used"] == pytest.approx(spent)
    assert trace["cost_used"].iloc[-1] == pytest.approx(trace["cost"].sum())
    assert summary["n_evals"] == len(trace)
    assert summary["stop_reason"] == "budget"
    assert np.allclose(trace["incumbent_loss"], np.minimum.accumulate(trace["loss"]))
    assert summary["normalized_regret"] == pytest.approx(REF.normalize(summary["final_loss"]))
    assert summary["config"]["peer"] in PEERS and summary["config"]["library"].split()[0] in ("smac", "optuna", "flaml")
    assert summary["wall_time_s"] > 0 and summary["cpu_time_s"] > 0
    if (trace["fidelity"] == problem.fidelity.r_max).all():  # full fidelity: the budget is spent exactly
        assert spent == pytest.approx(np.floor(budget.amount))


@pytest.mark.parametrize("name", SEQUENTIAL)
def test_peer_on_synthetic_mlp(name):
    _need(name)
    result = _run(name, "synthetic:mlp", MLP_PROBLEM.instance, 1, "2d")
    _check_run(result, MLP_PROBLEM, Budget.parse("2d", MLP.d))
    trace = result.trace
    # the conditional momentum is set exactly when optimizer == sgd
    assert ((trace["optimizer"] == "sgd") == trace["momentum"].notna()).all()
    if name != "smac_hb":
        assert (trace["fidelity"] == MLP.fidelity.r_max).all()
        assert (trace["stage"] == 0).all() and (trace["bracket"] == 0).all()


@pytest.mark.parametrize("name", SEQUENTIAL)
def test_peer_on_lcbench(name, yahpo_data):
    _need(name)
    bench = get_benchmark("yahpo:lcbench", data_dir=yahpo_data)
    result = run_peer(name, bench.problem("3945"), seed=2, budget="2d", reference=REF)
    _check_run(result, bench.problem("3945"), Budget.parse("2d", bench.d))
    assert result.summary["instance"] == "3945"


def test_trace_format_equals_a_metaopt_run():
    _need("smac_hb")
    ours = run(get_preset("hb").config(MLP_PROBLEM.fidelity), MLP_PROBLEM, seed=1, budget="2d", reference=REF)
    peer = _run("smac_hb", "synthetic:mlp", MLP_PROBLEM.instance, 1, "2d")
    assert list(peer.trace.columns) == list(ours.trace.columns)
    assert list(peer.trace.columns[: len(TRACE_COLUMNS)]) == TRACE_COLUMNS
    assert peer.trace.dtypes.to_dict() == ours.trace.dtypes.to_dict()
    assert set(peer.summary) == set(ours.summary)


def test_smac_hb_uses_several_fidelities_and_keeps_config_ids():
    _need("smac_hb")
    trace = _run("smac_hb", "synthetic:mlp", MLP_PROBLEM.instance, 1, "2d").trace
    fid = MLP.fidelity
    assert sorted(trace["fidelity"].unique()) == [1.0, 3.0, 9.0, 27.0, 81.0]  # 81 / 3^k, eta = 3
    assert trace["budget_used"].iloc[-1] < 2 * MLP.d  # the next evaluation did not fit
    # metaopt's numbering: stage = rung of the fidelity ladder, bracket b starts at stage b
    rung = np.round(np.log(trace["fidelity"] / fid.r_min) / np.log(3)).astype(int) + 1
    assert (trace["stage"] == rung).all() and (trace["stage"] >= trace["bracket"]).all()
    # promoted configurations are re-evaluated under the same config_id, at a higher fidelity
    first = trace.groupby("config_id")["fidelity"].apply(list)
    promoted = first[first.str.len() > 1]
    assert len(promoted) > 0
    assert all(f == sorted(f) and len(set(f)) == len(f) for f in promoted)
    hp = MLP.hyperparameter_names
    for _, rows in trace.groupby("config_id"):
        assert len(rows[hp].astype(str).drop_duplicates()) == 1


@pytest.mark.parametrize("name", ["smac_hpo", "smac_hb"])
def test_same_inputs_give_identical_traces(name):
    a = _run(name, "synthetic:mlp", MLP_PROBLEM.instance, 1, "2d")
    b = run_peer(name, MLP_PROBLEM, 1, "2d", reference=REF)
    pd.testing.assert_frame_equal(a.trace, b.trace, check_exact=True)
    drop = lambda s: {k: v for k, v in s.items() if k not in ("wall_time_s", "cpu_time_s")}  # noqa: E731
    assert drop(a.summary) == drop(b.summary)
    c = run_peer(name, MLP_PROBLEM, 2, "2d", reference=REF)
    assert not a.trace["loss"].equals(c.trace["loss"])


def test_a_smac_run_leaves_the_processs_logging_alone():
    """SMAC's own logging set-up would give the root logger its handler and level ERROR for the rest of
    the process, silencing metaopt's warnings (a failed evaluation) after a peer run or a meta-search."""
    import logging

    root = logging.getLogger()
    before = (root.level, list(root.handlers))
    run_peer("smac_hpo", MLP_PROBLEM, 1, "1d", reference=REF)
    assert (root.level, list(root.handlers)) == before
    assert logging.getLogger("smac").getEffectiveLevel() == logging.ERROR


def test_smac_hpo_does_not_depend_on_the_hash_seed():
    """SMAC orders its local-search start points through a set; peers.py fixes that order."""
    script = ("import hashlib; from metaopt.core.benchmarks import get_benchmark; from metaopt.engine.peers import run_peer; "
              "b = get_benchmark('synthetic:mlp'); "
              "t = run_peer('smac_hpo', b.problem(b.test_instances[0]), 1, '1d').trace; "
              "print(hashlib.md5(t.to_csv().encode()).hexdigest())")
    procs = [subprocess.Popen([sys.executable, "-c", script], env={**os.environ, "PYTHONHASHSEED": h}, cwd=REPO,
                              stdout=subprocess.PIPE, text=True) for h in ("1", "2")]
    digests = [p.communicate(timeout=120)[0].strip() for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert digests[0] == digests[1]


@pytest.mark.parametrize("name", ["optuna_tpe", "flaml_cfo"])
def test_optional_peers_are_deterministic(name):
    _need(name)
    a = run_peer(name, MLP_PROBLEM, 3, "1d")
    b = run_peer(name, MLP_PROBLEM, 3, "1d")
    pd.testing.assert_frame_equal(a.trace, b.trace, check_exact=True)


@pytest.mark.parametrize("name", ["smac_hb", "optuna_tpe"])
def test_cost_budget_is_never_exceeded(name):
    _need(name)
    result = run_peer(name, MLP_PROBLEM, 1, "500s")
    assert result.summary["budget_unit"] == "cost"
    assert result.summary["stop_reason"] == "budget"
    assert 0 < result.trace["cost_used"].iloc[-1] <= 500 + 1e-6


def test_missing_library_raises_peer_unavailable(monkeypatch):
    monkeypatch.setitem(sys.modules, "optuna", None)  # makes `import optuna` fail, installed or not
    with pytest.raises(PeerUnavailable, match=r"pip install \.\[peers\]"):
        run_peer("optuna_tpe", MLP_PROBLEM, 1, "1d")
    assert peer_status()["optuna_tpe"].startswith("skipped (not installed")
    assert "optuna_tpe" not in available_peers()
    assert {"smac_hpo", "smac_hb"} <= set(available_peers())
    assert issubclass(PeerUnavailable, UsageError)


def test_unknown_peer_lists_the_known_ones():
    with pytest.raises(UsageError, match="unknown peer 'nope'; known peers: smac_hpo, smac_hb, optuna_tpe, flaml_cfo"):
        run_peer("nope", MLP_PROBLEM, 1, "1d")


def test_untranslatable_conditions_are_rejected():
    space = ConfigurationSpace()
    a, b = Float("a", (0, 1)), Float("b", (0, 1))
    space.add([a, b, GreaterThanCondition(b, a, 0.5)])
    with pytest.raises(UsageError, match="EqualsCondition and InCondition"):
        _conditions(space)
