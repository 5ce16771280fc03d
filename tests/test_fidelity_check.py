"""`metaopt benchmark fidelity` and metaopt.core.benchmarks.fidelity_check: how low fidelities rank
configurations against the full one."""

import json
import math

import pytest
from ConfigSpace import ConfigurationSpace, Float

from metaopt.cli import main
from metaopt.core.benchmarks import get_benchmark
from metaopt.core.benchmarks.base import Fidelity
from metaopt.core.benchmarks.fidelity_check import check_fidelity, rung_fidelities, summarize
from metaopt.core.benchmarks.function import FunctionBenchmark
from metaopt.core.errors import UsageError


def _problem(objective, fidelity=("r", 1, 81)):
    space = ConfigurationSpace({"x": Float("x", (0.0, 1.0))})
    return FunctionBenchmark(objective, space, fidelity).problem("0")


def test_rungs_are_hyperbands_below_r_max_down_to_r_min():
    assert rung_fidelities(Fidelity("epoch", 1, 52, True), 3) == [17.0, 6.0, 2.0, 1.0]
    assert rung_fidelities(Fidelity("r", 1, 81, True), 3) == [27.0, 9.0, 3.0, 1.0]
    assert rung_fidelities(Fidelity("frac", 0.05, 1.0), 3) == pytest.approx([1 / 3, 1 / 9, 0.05])
    assert rung_fidelities(Fidelity("r", 5, 5), 3) == []
    with pytest.raises(UsageError, match="eta: must be > 1"):
        rung_fidelities(Fidelity("r", 1, 81), 1.0)


def test_a_fidelity_that_does_not_change_the_ranking_and_one_that_reverses_it():
    same = check_fidelity(_problem(lambda c, r: c["x"]), n_configs=50, seed=3)
    assert [row.fidelity for row in same] == [27.0, 9.0, 3.0, 1.0]
    assert all(row.spearman == pytest.approx(1.0) and row.top_recall == 1.0 and row.n == 50 for row in same)
    assert [row.budget_share for row in same] == pytest.approx([1 / 3, 1 / 9, 1 / 27, 1 / 81])
    assert [row.cost_share for row in same] == pytest.approx([1 / 3, 1 / 9, 1 / 27, 1 / 81])  # cost r / r_max
    # below r = 9 the loss runs the other way: the lowest rungs rank the best configurations last
    reversed_low = check_fidelity(_problem(lambda c, r: c["x"] if r >= 9 else -c["x"]), n_configs=50, seed=3)
    assert [round(row.spearman, 6) for row in reversed_low] == [1.0, 1.0, -1.0, -1.0]
    assert [row.top_recall for row in reversed_low] == [1.0, 1.0, 0.0, 0.0]
    summary = summarize(reversed_low)
    assert [row["rung"] for row in summary] == [1, 2, 3, 4]
    assert summary[2]["spearman_median"] == pytest.approx(-1.0) and summary[2]["instances"] == 1


def test_failed_evaluations_are_left_out_and_the_draws_are_seeded():
    def objective(config, r):
        x = config["x"]
        return float("nan") if x > 0.9 else x + (0.3 * math.sin(37 * x) if r < 9 else 0.0)

    first = check_fidelity(_problem(objective), n_configs=40, seed=7)
    assert all(row.n < 40 for row in first) and len({row.n for row in first}) == 1
    assert first[0].spearman == pytest.approx(1.0) and first[-1].spearman < 0.9
    assert check_fidelity(_problem(objective), n_configs=40, seed=7) == first
    assert check_fidelity(_problem(objective), n_configs=40, seed=8) != first


def test_a_problem_without_a_fidelity_or_with_too_few_configurations_is_refused():
    with pytest.raises(UsageError, match="has no fidelity to check"):
        check_fidelity(_problem(lambda c, r: c["x"], fidelity=None))
    with pytest.raises(UsageError, match="n_configs: must be an integer >= 10"):
        check_fidelity(_problem(lambda c, r: c["x"]), n_configs=5)


def test_the_synthetic_families_lowest_fidelity_ranks_worse_than_their_middle_one():
    problem = get_benchmark("synthetic:mlp").problem("0")
    rows = check_fidelity(problem, n_configs=60, seed=0)
    assert rows[0].fidelity == 27 and rows[-1].fidelity == 1
    assert 0 < rows[-1].spearman < rows[1].spearman < rows[0].spearman <= 1


def test_cli_prints_the_summary_and_writes_json(capsys, tmp_path):
    out_file = tmp_path / "check.json"
    code = main(["benchmark", "fidelity", "--benchmark", "synthetic:boosting", "--instances", "train", "--limit", "2",
                 "--configs", "20", "--eta", "2", "--json", str(out_file), "--per-instance", "--quiet"])
    out, _ = capsys.readouterr()
    assert code == 0
    assert "synthetic:boosting: 2 instances x 20 random configurations" in out and "spearman_median" in out
    payload = json.loads(out_file.read_text())
    assert payload["eta"] == 2 and payload["configs"] == 20
    checked = payload["benchmarks"]["synthetic:boosting"]
    assert {row["instance"] for row in checked["rows"]} == set(get_benchmark("synthetic:boosting").instances_of("train")[:2])
    assert [row["rung"] for row in checked["summary"]] == sorted({row["rung"] for row in checked["rows"]})


def test_cli_checks_several_benchmarks_and_draws_them(capsys, tmp_path):
    plot, out_file = tmp_path / "rho.png", tmp_path / "check.json"
    code = main(["benchmark", "fidelity", "--benchmark", "synthetic:mlp,synthetic:rosenbrock", "--limit", "2",
                 "--configs", "12", "--plot", str(plot), "--json", str(out_file), "--quiet"])
    out, _ = capsys.readouterr()
    assert code == 0 and "synthetic:mlp: 2 instances" in out and "synthetic:rosenbrock: 2 instances" in out
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert set(json.loads(out_file.read_text())["benchmarks"]) == {"synthetic:mlp", "synthetic:rosenbrock"}


@pytest.mark.parametrize("argv, fragment", [
    (["--benchmark", "functions:classic4"], "has no fidelity to check"),
    (["--benchmark", "synthetic:mlp,functions:classic4"], "has no fidelity to check"),
    (["--benchmark", "synthetic:mlp", "--eta", "1"], "--eta: must be a number > 1"),
    (["--benchmark", "synthetic:mlp", "--configs", "3"], "--configs: must be an integer >= 10"),
    (["--benchmark", "synthetic:mlp", "--instances", "nope"], "--instances:"),
])
def test_cli_bad_input_is_one_line_and_status_2(capsys, tmp_path, argv, fragment):
    out_file = tmp_path / "check.json"
    code = main(["benchmark", "fidelity", *argv, "--json", str(out_file), "--quiet"])
    _, err = capsys.readouterr()
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("metaopt: error: ") and fragment in lines[0], err
    assert not out_file.exists()


def test_python_api_checks_a_users_objective():
    """metaopt.fidelity_check: the same rows as the core check on the same function problem; a failing
    objective is recorded only for the exception classes given in catch; no fidelity is refused."""
    import metaopt

    space = ConfigurationSpace({"x": Float("x", (0.0, 1.0))})

    def objective(config, r):
        return config["x"] + (0.5 * math.sin(20 * config["x"]) if r < 10 else 0.0)

    rows = metaopt.fidelity_check(objective, space, ("epochs", 1, 81), n_configs=40, seed=2)
    assert rows == check_fidelity(_problem(objective, ("epochs", 1, 81)), n_configs=40, seed=2)
    assert rows[0].spearman == pytest.approx(1.0) and rows[1].spearman < 0.9

    def failing(config, r):
        if config["x"] > 0.8:
            raise RuntimeError("diverged")
        return config["x"]

    with pytest.raises(RuntimeError, match="diverged"):
        metaopt.fidelity_check(failing, space, ("epochs", 1, 81), n_configs=40)
    caught = metaopt.fidelity_check(failing, space, ("epochs", 1, 81), n_configs=40, catch=(RuntimeError,))
    assert all(row.n < 40 and row.spearman == pytest.approx(1.0) for row in caught)
    with pytest.raises(UsageError, match="fidelity_check needs the fidelity"):
        metaopt.fidelity_check(objective, space, None)
