"""The syne-tune peers on syne-tune's simulator (metaopt.engine.syne_peers) and studies on the clock
(evaluation.clock): determinism, budgets and time limits, the conversion of syne-tune's results into
a trace on the clock, the study field's validation and a study run end to end."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from metaopt.cli import main
from metaopt.core.benchmarks import get_benchmark
from metaopt.core.budget import BUDGET_TOLERANCE
from metaopt.core.errors import UsageError
from metaopt.core.references import Reference
from metaopt.core.registry import get_component
from metaopt.engine.peers import run_peer
from metaopt.engine.simclock import CLOCK_COLUMNS
from metaopt.engine.syne_peers import fidelity_grid

MLP = get_benchmark("synthetic:mlp")  # momentum is active only with optimizer sgd: a conditional space
PROBLEM = MLP.problem("0")
REF = Reference(y_min=0.0, y_max=1.0)


def _run(name: str, seed: int = 1, budget: str = "2d", workers: int = 4, time_limit: float | None = None):
    return run_peer(name, PROBLEM, seed, budget, reference=REF, workers=workers, time_limit=time_limit)


# -- one run ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["syne_asha", "syne_bohb"])
def test_same_seed_same_trace_other_seed_other_trace(name):
    first, again, other = _run(name), _run(name), _run(name, seed=2)
    pd.testing.assert_frame_equal(first.trace, again.trace)
    assert {k: v for k, v in first.summary.items() if not k.endswith("time_s")} == \
        {k: v for k, v in again.summary.items() if not k.endswith("time_s")}
    assert not first.trace["loss"].equals(other.trace["loss"])


@pytest.mark.parametrize("name, workers", [("syne_asha", 4), ("syne_bohb", 4), ("syne_bohb", 1)])
def test_the_replaced_bookkeeping_makes_syne_tunes_own_decisions(monkeypatch, name, workers):
    """syne_peers replaces syne-tune's linear-per-result bookkeeping (rung ranking, searcher refit,
    BOHB's proposal loop); syne-tune's own code gives the same trace bit for bit, with BOHB's
    densities proposing (not only its random fraction)."""
    from metaopt.engine import syne_peers

    proposals = []
    kde_suggest = syne_peers._kde_suggest

    def counted(self, **kwargs):
        suggestion = kde_suggest(self, **kwargs)
        proposals.append(self.good_kde is not None)
        return suggestion

    monkeypatch.setattr(syne_peers, "_kde_suggest", counted)
    ours = _run(name, budget="4d", workers=workers, time_limit=None)
    assert name == "syne_asha" or sum(proposals) >= 10
    monkeypatch.setattr(syne_peers, "_without_quadratic_bookkeeping", lambda scheduler: None)
    theirs = _run(name, budget="4d", workers=workers, time_limit=None)
    pd.testing.assert_frame_equal(ours.trace, theirs.trace)


@pytest.mark.parametrize("n_data", [6, 200, 9000])
def test_bohb_densities_are_statsmodels_bit_for_bit(n_data):
    """BOHB's densities for all candidates at once equal statsmodels' ``KDEMultivariate.pdf``, which
    computes them point by point, bit for bit: continuous, ordinal (few and many levels) and unordered
    variables, and more data than one of numpy's buffers (8,192) holds."""
    from statsmodels.nonparametric.kernel_density import KDEMultivariate

    from metaopt.engine.syne_peers import _kde_densities

    rng = np.random.default_rng(n_data)
    def sample(n):  # an ordinal of 5 levels and one of 400, as syne-tune's features scale them
        return np.column_stack([rng.uniform(size=n), rng.integers(0, 5, n) / 4, rng.uniform(size=n),
                                rng.integers(0, 3, n).astype(float), rng.integers(0, 400, n) / 399])

    data, points = sample(n_data), sample(64)
    kde = KDEMultivariate(data=data, var_type="cocuo", bw="normal_reference")
    assert _kde_densities(kde, points).tobytes() == np.asarray(kde.pdf(points), dtype=float).tobytes()


def test_numpy_global_generator_is_restored():
    np.random.seed(123)
    expected = np.random.rand()
    np.random.seed(123)
    _run("syne_asha", budget="1d")
    assert np.random.rand() == expected


def test_trace_is_a_run_on_the_clock():
    """Each row continues its trial from the previous result: sim_start + cost = sim_time, the budget
    charges the fidelity gained, fidelities climb the grid, no worker runs two trials at once."""
    result = _run("syne_asha", budget="3d", workers=3)
    trace, grid = result.trace, fidelity_grid(PROBLEM.fidelity)
    assert list(trace.columns[trace.columns.get_loc("cost") + 1:][:3]) == CLOCK_COLUMNS
    np.testing.assert_allclose(trace["sim_time"], trace["sim_start"] + trace["cost"], atol=1e-9)
    assert set(trace["fidelity"]) <= set(grid)
    gained = []
    for _, rows in trace.groupby("config_id", sort=False):
        positions = np.searchsorted(grid, rows["fidelity"].to_numpy())
        assert (positions == np.arange(len(rows))).all()  # every grid fidelity in turn from the first
        assert (rows["sim_start"].to_numpy()[1:] == rows["sim_time"].to_numpy()[:-1]).all()
        assert rows["worker"].nunique() == 1
        gained.append(pd.Series(np.diff(rows["fidelity"].to_numpy(), prepend=0.0), index=rows.index))
    spent = pd.concat(gained).sort_index() / PROBLEM.fidelity.r_max
    np.testing.assert_allclose(trace["budget_used"], spent.cumsum(), atol=1e-9)
    for _, rows in trace.groupby("worker"):  # one trial at a time on a worker
        spans = rows.groupby("config_id").agg(start=("sim_start", "min"), end=("sim_time", "max")).sort_values("start")
        assert (spans["start"].to_numpy()[1:] >= spans["end"].to_numpy()[:-1] - 1e-9).all()
    adam = trace[trace["optimizer"] == "adam"]
    assert len(adam) and adam["momentum"].isna().all()  # inactive hyperparameters are dropped
    summary = result.summary
    assert summary["workers"] == 3 and 0 < summary["utilization"] <= 1
    assert summary["sim_time"] >= trace["sim_time"].max()  # the result that no longer fitted arrived last


@pytest.mark.parametrize("name", ["syne_asha", "syne_bohb"])
def test_evaluation_budget_is_respected(name):
    result = _run(name, budget="2d")
    budget = 2 * PROBLEM.d
    assert result.summary["stop_reason"] == "budget"
    assert result.trace["budget_used"].iloc[-1] <= budget + BUDGET_TOLERANCE
    assert result.summary["budget_used"] > budget - 1  # it spent the budget, up to the step that did not fit


def test_cost_budget_and_time_limit_are_respected():
    by_cost = _run("syne_asha", budget="300s")
    assert by_cost.summary["stop_reason"] == "budget"
    assert 0 < by_cost.trace["cost_used"].iloc[-1] <= 300 + BUDGET_TOLERANCE
    by_time = _run("syne_asha", budget="10d", time_limit=60.0)
    assert by_time.summary["stop_reason"] == "time"
    assert by_time.trace["sim_time"].max() <= 60.0 and by_time.summary["sim_time"] == 60.0
    assert by_time.summary["budget_used"] < 10 * PROBLEM.d


def test_a_syne_peer_on_lcbench(yahpo_data):
    problem = get_benchmark("yahpo:lcbench", data_dir=yahpo_data).problem("3945")
    result = run_peer("syne_bohb", problem, 1, "2d", reference=REF, workers=4)
    trace = result.trace
    assert result.summary["stop_reason"] == "budget" and trace["budget_used"].iloc[-1] <= 2 * problem.d + 1e-9
    assert set(trace["fidelity"]) <= {2.0, 6.0, 17.0, 52.0} and (trace["fidelity"] == 52.0).any()
    np.testing.assert_allclose(trace["sim_time"], trace["sim_start"] + trace["cost"], atol=1e-6)


def test_more_workers_spend_the_budget_sooner():
    one, eight = _run("syne_asha", budget="2d", workers=1), _run("syne_asha", budget="2d", workers=8)
    assert one.trace["worker"].eq(0).all()
    assert eight.summary["sim_time"] < one.summary["sim_time"] / 3


@pytest.mark.parametrize("family", ["mlp", "boosting"])
def test_the_fidelity_grid_is_the_rungs_of_asha_at_eta_3(family):
    fidelity = get_benchmark(f"synthetic:{family}").fidelity
    asha = get_component("fidelity_schedules", "asha").build({"log_eta_fid": math.log(3), "survival_fraction": 1 / 3})
    np.testing.assert_allclose(fidelity_grid(fidelity), asha.rung_fidelities(fidelity))


def test_a_proposal_outside_the_space_is_clipped_into_it():
    """syne-tune's KDE searcher can propose an integer below its range (seen on lcbench)."""
    from metaopt.core.budget import Budget
    from metaopt.engine.peer_run import PeerRun
    from metaopt.engine.syne_peers import _vector

    state = PeerRun(PROBLEM, Budget.parse("1d", PROBLEM.d))
    units = PROBLEM.search_space["units"]
    config = {**dict(PROBLEM.search_space.get_default_configuration()), "units": units.lower - 3, "optimizer": "adam",
              "momentum": 0.5}
    decoded = state.codec.to_dicts(_vector(state, config, {})[None, :])[0]
    assert decoded["units"] == units.lower and "momentum" not in decoded


def test_sequential_peers_refuse_the_clock():
    with pytest.raises(UsageError, match="runs sequentially, not on the simulated clock"):
        run_peer("smac_hpo", PROBLEM, 1, "1d", workers=2)


def test_metaopt_run_runs_a_syne_peer_on_the_clock(tmp_path, capsys):
    argv = ["run", "--benchmark", "synthetic:mlp", "--instance", "0", "--optimizer", "syne_bohb", "--budget", "1d",
            "--sim-workers", "2", "--sim-time", "5m", "--quiet", "--out", str(tmp_path)]
    assert main(argv) == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["optimizer"] == "syne_bohb" and summary["workers"] == 2 and summary["sim_time"] <= 300
    assert set(CLOCK_COLUMNS) <= set(pd.read_csv(tmp_path / "trace.csv").columns)


# -- studies on the clock ----------------------------------------------------------------------------
STUDY = """
name: clock
benchmark: synthetic:mlp
budget: 1d
evaluation:
  instances: ["0"]
  seeds: 1
  clock: {clock}
  optimizers: [{optimizers}]
output: {out}
"""


@pytest.mark.parametrize("clock, optimizers, field", [
    ("{workers: []}", "asha", "evaluation.clock.workers"),
    ("{workers: [1, 1]}", "asha", "evaluation.clock.workers"),
    ("{workers: [0, 8]}", "asha", "evaluation.clock.workers"),
    ("{workers: [true]}", "asha", "evaluation.clock.workers"),
    ("{workers: 8}", "asha", "evaluation.clock.workers"),
    ("{workers: [2], time_limit: -1h}", "asha", "evaluation.clock.time_limit"),
    ("{workers: [2], time_limit: soon}", "asha", "evaluation.clock.time_limit"),
    ("{workers: [2], time_limit: 30d}", "asha", "evaluation.clock.time_limit"),
    ("{workers: [2], speed: 2}", "asha", "evaluation.clock.speed"),
    ("{workers: [2]}", "asha, smac_hpo", "evaluation.optimizers[1]"),
])
def test_bad_clock_fields_are_one_line_naming_the_field(tmp_path, capsys, clock, optimizers, field):
    path = tmp_path / "study.yaml"
    path.write_text(STUDY.format(clock=clock, optimizers=optimizers, out=tmp_path / "out"))
    assert main(["study", "run", str(path), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("metaopt: error:") and len(err.strip().splitlines()) == 1 and f"'{field}" in err
    assert not (tmp_path / "out").exists()


def test_a_study_on_the_clock_stores_each_worker_count_and_draws_the_clock_curves(tmp_path):
    out = tmp_path / "out"
    path = tmp_path / "study.yaml"
    path.write_text(STUDY.format(clock="{workers: [1, 3], time_limit: 1dc}", optimizers="asha, hb, syne_asha",
                                 out=out))
    assert main(["study", "run", str(path), "--quiet"]) == 0
    for name in ("asha", "hb", "syne_asha"):
        for workers in (1, 3):
            summary = json.loads((out / "eval" / "runs" / f"{name}@w{workers}" / "0" / "seed-1" / "summary.json")
                                 .read_text())
            assert summary["workers"] == workers and summary["sim_time"] > 0
    curves = pd.read_csv(out / "eval" / "anytime_clock.csv")
    assert set(curves["workers"]) == {1, 3} and set(curves["optimizer"]) == {"asha", "hb", "syne_asha"}
    assert curves.groupby("workers")["time"].max().iloc[0] > curves.groupby("workers")["time"].max().iloc[1]
    assert (out / "eval" / "anytime_clock.png").stat().st_size > 10_000
    report = (out / "report" / "report.md").read_text()
    assert "figures/anytime_clock.png" in report
    # the table of the curves at three times of each worker count's log time axis, the last its end
    from metaopt.analysis.clock_curves import clock_table

    table = clock_table(curves)
    assert len(table) == 3 and len(table.columns) == 1 + 2 * 3 and table.columns[1].startswith("1 worker, ")
    last = curves[curves["workers"] == 3]
    last = last[last["time"] == last["time"].max()].groupby("optimizer")["regret"].mean()
    assert list(table["optimizer"]) == list(last.sort_values(kind="stable").index)
    assert table.iloc[0, -1] == f"{last.min():.3f}"  # one instance: the mean alone
    assert "of the best result in by each simulated time" in report and f"| {table.iloc[0, -1]} |" in report
    assert set(pd.read_csv(out / "eval" / "table.csv")["optimizer"]) == {
        f"{n}@w{w}" for n in ("asha", "hb", "syne_asha") for w in (1, 3)}


def test_a_companion_on_the_clock_joins_the_curves_against_simulated_time_from_its_runs_file(tmp_path):
    """syne-tune's runs, too slow to share a study's session, come from a companion study on the same
    clock; its runs file keeps what the curves against simulated time read, so the report draws the
    same curves from the file as from the companion's store. A companion on another clock is refused."""
    from metaopt.analysis.report import _load

    clock = "{workers: [1, 3], time_limit: 1dc}"
    path, companion = tmp_path / "study.yaml", tmp_path / "companion.yaml"
    companion.write_text(STUDY.format(clock="{workers: [3], time_limit: 1dc}", optimizers="syne_asha, hb",
                                      out=tmp_path / "companion").replace("name: clock", "name: clock_syne"))
    runs_file = tmp_path / "syne_runs.jsonl.gz"
    path.write_text(STUDY.format(clock=clock, optimizers="asha", out=tmp_path / "out")
                    + f"report_with: [{{study: {companion}, optimizers: ['syne_asha@w3', 'hb@w3'], runs: {runs_file}}}]\n")
    assert main(["study", "run", str(companion), "--quiet"]) == 0
    assert main(["study", "export-runs", str(tmp_path / "companion"), "--out", str(runs_file)]) == 0
    assert main(["study", "run", str(path), "--quiet"]) == 0
    from_store = _load(tmp_path / "out")[2].clock
    assert set(from_store["optimizer"]) == {"asha", "syne_asha", "hb"} and set(from_store["workers"]) == {1, 3}
    import shutil
    shutil.rmtree(tmp_path / "companion")
    evaluation = _load(tmp_path / "out")[2]
    assert "read from its runs file" in next(iter(evaluation.read_from.values()))
    pd.testing.assert_frame_equal(evaluation.clock, from_store)
    assert main(["report", str(tmp_path / "out")]) == 0
    # a runs file written before runs files kept the simulated times: tables as before, no curve for it
    import gzip
    lines = gzip.decompress(runs_file.read_bytes()).decode().splitlines()
    old = [lines[0]] + [json.dumps({**item, "trace": {k: v for k, v in item["trace"].items() if k not in ("sim_time", "loss")}})
                        for item in map(json.loads, lines[1:])]
    runs_file.write_bytes(gzip.compress(("\n".join(old) + "\n").encode()))
    evaluation = _load(tmp_path / "out")[2]
    assert set(evaluation.clock["optimizer"]) == {"asha"} and evaluation.untimed == ["hb@w3", "syne_asha@w3"]
    assert main(["report", str(tmp_path / "out")]) == 0
    assert "No curve for hb@w3, syne_asha@w3" in (tmp_path / "out" / "report" / "report.md").read_text()
    companion.write_text(companion.read_text().replace("time_limit: 1dc", "time_limit: 2dc"))
    assert main(["report", str(tmp_path / "out")]) == 2


def test_the_clock_table_reads_the_curves_at_three_times_of_each_worker_count():
    """The report's table of the curves against simulated time: per worker count the grid times a third
    and two thirds along the log grid and its last, mean ± s.e. over instances, rows by the last column;
    a worker count an optimizer did not run at is a dash."""
    from metaopt.analysis.clock_curves import clock_table

    rows = []
    for workers, grid in ((1, [1.0, 10.0, 100.0, 1000.0]), (8, [2.0, 20.0, 200.0, 2000.0])):
        for optimizer, level in (("slow", 0.5), ("fast", 0.2)):
            if workers == 8 and optimizer == "slow":
                continue
            for instance, shift in (("a", 0.0), ("b", 0.1)):
                rows += [{"workers": workers, "optimizer": optimizer, "instance": instance, "time": t,
                          "regret": level + shift - 0.01 * k} for k, t in enumerate(grid)]
    table = clock_table(pd.DataFrame(rows))
    assert list(table.columns) == ["optimizer", "1 worker, 10 s", "1 worker, 100 s", "1 worker, 1e+03 s",
                                   "8 workers, 20 s", "8 workers, 200 s", "8 workers, 2e+03 s"]
    assert list(table["optimizer"]) == ["fast", "slow"]
    assert table.loc[0, "1 worker, 1e+03 s"] == "0.220 ± 0.050" and table.loc[1, "8 workers, 2e+03 s"] == "—"


def test_a_clock_curve_starts_once_every_run_has_a_result():
    """A point of an optimizer's curve against simulated time is a mean over all its runs: none before
    the last of them has its first result in (instance b's second seed here), never a mean over the
    runs with a result so far."""
    from types import SimpleNamespace

    from metaopt.analysis.clock_curves import clock_curves, clock_table

    def result(arrivals: list[float], losses: list[float]) -> SimpleNamespace:
        trace = pd.DataFrame({"sim_time": arrivals, "loss": losses})
        return SimpleNamespace(trace=trace, summary={"workers": 8, "sim_time": 1000.0,
                                                     "reference": {"y_min": 0.0, "y_max": 1.0}})

    runs = [({"optimizer": "opt@w8", "instance": "a", "seed": 1}, result([1.0, 50.0], [0.5, 0.2])),
            ({"optimizer": "opt@w8", "instance": "a", "seed": 2}, result([2.0, 60.0], [0.4, 0.3])),
            ({"optimizer": "opt@w8", "instance": "b", "seed": 1}, result([1.0], [0.1])),
            ({"optimizer": "opt@w8", "instance": "b", "seed": 2}, result([100.0], [0.9]))]
    curves = clock_curves(runs, points=40)
    assert curves["time"].min() == 1.5 and len(curves) == 2 * 40  # the grid from the median first result
    assert curves.loc[curves["time"] < 100.0, "regret"].isna().all()
    assert curves.loc[curves["time"] >= 100.0, "regret"].notna().all()
    late = curves[curves["time"] == curves["time"].max()].set_index("instance")["regret"]
    assert late["a"] == pytest.approx(0.25) and late["b"] == pytest.approx(0.5)
    table = clock_table(curves)
    assert table.iloc[0, 1] == "—" and table.iloc[0, 3] == "0.375 ± 0.125"
