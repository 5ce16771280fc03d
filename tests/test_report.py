"""The design-analysis report, built from a tiny study run here plus fake-but-consistent analysis outputs."""

import json
import re
import shutil

import numpy as np
import pandas as pd
import pytest
import yaml

from metaopt.analysis import figures
from metaopt.cli import main
from metaopt.store.meta_archive import choose_gamma_star, gamma_hash, meta_archive
from metaopt.store.run_io import jsonable

STUDY = """
name: tiny_report
description: a tiny study for the report tests
benchmark: synthetic:mlp
budget: 3d
evaluation:
  instances: {{split: test, limit: 2}}
  seeds: 2
  report_budgets: [1d]
  optimizers: [rs, hb, bohb]
output: {out}
"""
CAPTION = "synthetic:mlp: 2 held-out instances × 2 seeds, budget 18 full evaluations (3d), 3 optimizers"


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory):
    root = tmp_path_factory.mktemp("report")
    path = root / "study.yaml"
    path.write_text(STUDY.format(out=root / "out"))
    assert main(["study", "run", str(path), "--quiet"]) == 0
    return root / "out"


@pytest.fixture
def output(evaluated, tmp_path):
    """A fresh copy of the study's results that a test may add to."""
    return shutil.copytree(evaluated, tmp_path / "out")


def build(output, *options):
    assert main(["report", str(output), *options]) == 0
    folder = output / "report"
    return (folder / "report.html").read_text(), (folder / "report.md").read_text()


def section_titles(text):
    return re.findall(r"<h2>(.*?)</h2>", text)


def check_self_contained_and_complete(output, html, md):
    sources = re.findall(r"""src=['"]([^'"]*)""", html)
    assert sources and all(s.startswith("data:image/png;base64,") for s in sources)
    assert "<link" not in html and "http" not in "".join(re.findall(r"""href=['"]([^'"]*)""", html))
    referenced = re.findall(r"!\[[^\]]*\]\((figures/[^)]+\.png)\)", md)
    assert len(referenced) == len(sources) == len(list((output / "report" / "figures").glob("*.png")))
    for png in referenced:
        assert (output / "report" / png).read_bytes().startswith(b"\x89PNG")
    assert not list(output.glob(".report*")), "staging folders must be gone"


def test_report_of_an_evaluated_study(output, capsys):
    html, md = build(output)
    assert "with 4 figures" in capsys.readouterr().out
    check_self_contained_and_complete(output, html, md)
    assert section_titles(html) == ["Study", "Configurations compared", "Held-out evaluation",
                                    "Statistical comparison (Friedman test, Nemenyi post-hoc)"]
    assert CAPTION in html and CAPTION in md
    assert "a tiny study for the report tests" in html
    # the answer is computed from the stored results (analysis/answer.py) and shown in the report
    answer = (output / "answer.md").read_text()
    assert answer.startswith("At the full budget, mean normalized regret") and "bohb" in answer
    assert "Answer: At the full budget" in html
    for name in ["anytime", "final_boxplots", "cd_1d", "cd_3d"]:
        assert f"figures/{name}.png" in md
    assert "Friedman χ² = " in md and "Nemenyi CD = 2.34 for 3 optimizers on 2 instances" in md
    assert "| bohb |" in md and "regret@1d" in md


def write_fake_analyses(output):
    """A meta-archive with γ*, an ablation, importance, termination metrics, a question and an answer."""
    from metaopt.spaces.restrictions import get_restriction

    restriction = get_restriction("table4")
    space = restriction.space()
    space.seed(1)
    rng = np.random.default_rng(1)
    rows = []
    for i, config in enumerate(space.sample_configuration(12)):
        gamma = jsonable(restriction.complete(dict(config)))
        for instance in ["0", "1"] if i % 3 == 0 else [str(i % 2)]:
            rows.append({"meta_seed": 1 + i % 2, "trial": len(rows), "hash": gamma_hash(gamma), "instance": instance,
                         "seed": 1, "objective": float(rng.uniform()), "status": "ok", "cached": False,
                         "gamma": gamma, "summary": {}})
    archive = meta_archive(rows)
    (output / "meta").mkdir()
    archive.to_csv(output / "meta" / "archive.csv", index=False)
    star = choose_gamma_star(archive, ["0", "1"], rows)
    (output / "meta" / "gamma_star.json").write_text(json.dumps(jsonable(star)))

    png = (output / "eval" / "anytime.png").read_bytes()
    ablation = output / "ablation" / "hb-to-bohb"
    ablation.mkdir(parents=True)
    pd.DataFrame({"step": [0, 1, 2], "parameters": ["", "sampler", "filter_method"],
                  "values": ["", "kde", "tournament"], "mean": [0.3, 0.2, 0.15], "se": [0.05, 0.04, 0.04],
                  "share": [np.nan, 0.67, 0.33]}
                 ).to_csv(ablation / "path.csv", index=False)
    (ablation / "path.png").write_bytes(png)
    (ablation / "meta.json").write_text(json.dumps({
        "benchmark": "synthetic:mlp", "estimator": "evaluated", "budget": "3d", "source": {"name": "hb"},
        "target": {"name": "bohb"}, "instances": ["0", "1"], "seeds": [1, 2]}))
    importance = output / "importance"
    importance.mkdir()
    pd.DataFrame({"parameter": ["sampler", "mu", "sampler x mu"], "kind": ["main", "main", "pair"],
                  "importance": [0.5, 0.3, 0.1], "std": [0.1, 0.1, 0.05]}
                 ).to_csv(importance / "fanova.csv", index=False)
    pd.DataFrame({"parameter": ["sampler", "mu"], "importance": [0.7, 0.3], "std": [0.1, 0.1]}
                 ).to_csv(importance / "local.csv", index=False)
    (importance / "fanova.png").write_bytes(png)
    (importance / "meta.json").write_text(json.dumps({"n_trees": 100, "oob_r2": 0.61, "n_rows": len(archive),
                                                      "n_configurations": 12, "n_instances": 2,
                                                      "objective": "objective"}))
    pd.DataFrame({"optimizer": ["hb", "bohb"], "n_instances": 2, "ryc": [-0.05, 0.0], "ryc_se": [0.05, 0.0],
                  "rtc": [0.4, 0.3], "rtc_se": [0.1, 0.1], "rtc_budget": [0.4, 0.3], "rtc_budget_se": [0.1, 0.1],
                  "stopped": [1.0, 0.5], "stopped_se": [0.0, 0.5], "regret_stopped": [0.3, 0.2],
                  "regret_stopped_se": [0.1, 0.1], "regret_full": [0.25, 0.2], "regret_full_se": [0.1, 0.1]}
                 ).to_csv(output / "eval" / "termination.csv", index=False)
    pd.DataFrame({"optimizer": ["bohb", "hb", "rs"], "n_instances": 2, "regret_at_cost": [0.1, 0.2, 0.3],
                  "regret_at_cost_se": [0.01, 0.02, 0.03], "reached": [1.0, 0.5, 0.5], "reached_se": [0.0, 0.5, 0.5],
                  "median_cost_to_target_rel": [0.3, 0.8, 1.0], "median_cost_per_eval": [100.0, 50.0, 200.0]}
                 ).to_csv(output / "eval" / "cost.csv", index=False)

    study = yaml.safe_load((output / "study.yaml").read_text())
    study["question"] = "Does a meta-optimized design beat Hyperband?"
    study["answer"] = "Yes, on these two instances.\n\nSecond paragraph."
    study["meta"] = {"instances": {"split": "train", "limit": 2}, "restriction": "table4", "trials": 9, "seeds": [1, 2]}
    (output / "study.yaml").write_text(yaml.safe_dump(study))


def test_report_with_meta_archive_ablation_importance_and_answer(output):
    write_fake_analyses(output)
    html, md = build(output, "--alpha", "0.1", "--budgets", "1.5d")
    check_self_contained_and_complete(output, html, md)
    assert section_titles(html) == [
        "Study", "Meta-optimization: γ* and the configurations compared", "Held-out evaluation",
        "Statistical comparison (Friedman test, Nemenyi post-hoc)", "Cost and automatic termination",
        "Ablation: hb-to-bohb", "Parameter importance"]
    assert "Question: Does a meta-optimized design beat Hyperband?" in html
    assert "<p>Answer: Yes, on these two instances.</p><p>Second paragraph.</p>" in html
    assert "<p>Measured: At the full budget" in html and "Automatic termination: hb saves 40%" in html
    assert "γ* (tiny_report, synthetic:mlp)" in md and "(!)" in md  # Table 5 style, restriction marks
    for name in ["beeswarm", "cd_1.5d", "cd_3d", "cost_accuracy", "termination", "termination_frontier",
                 "ablation_hb-to-bohb_path",
                 "importance_fanova"]:
        assert f"figures/{name}.png" in md
    assert "hb → bohb on synthetic:mlp; each candidate run on 2 instances × 2 seeds at budget 3d" in html
    assert "out-of-bag R² 0.61" in html and "| sampler x mu | pair |" in md
    assert "α = 0.1" in html and "Top 10 of 12 configurations" in html
    assert "| bohb | 2 | 0.100 ± 0.010 | 1.000 ± 0.000 |" in md and "| hb | 2 | -0.050 ± 0.050 |" in md
    assert "Meta-optimization: SMAC over 2 training instances, 9 trials per meta-seed" in html


def test_report_is_deterministic_and_replaced_whole(output):
    first = build(output)
    (output / "report" / "figures" / "stale.png").write_bytes(b"\x89PNG")
    assert build(output) == first
    assert not (output / "report" / "figures" / "stale.png").exists()
    assert not list(output.glob(".report*"))


def test_bad_paths_and_options_give_one_line_and_write_nothing(output, tmp_path, capsys):
    shutil.rmtree(output / "report", ignore_errors=True)  # the study's report stage wrote one
    missing = tmp_path / "missing"
    empty = tmp_path / "empty"
    empty.mkdir()
    for argv, message in [([str(missing)], "no such output folder"), ([str(empty)], "no study.yaml"),
                          ([str(output), "--alpha", "1.5"], "--alpha must be between 0 and 1"),
                          ([str(output), "--budgets", "9d"], "--budgets: 9d must be"),
                          ([str(output), "--budgets", "ten"], "not understood")]:
        assert main(["report", *argv]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("metaopt: error:") and message in err and "\n" not in err
    assert not missing.exists() and not list(empty.iterdir())
    assert not (output / "report").exists() and not list(output.glob(".report*"))


def test_cost_accuracy_figure_renders():
    points = pd.DataFrame({"optimizer": ["a", "b"], "cost": [10.0, 100.0], "cost_se": [1.0, 5.0],
                           "regret": [0.3, 0.1], "regret_se": [0.05, 0.02]})
    figure = figures.cost_accuracy(points, figures.optimizer_palette(["a", "b"]), "two optimizers")
    assert figure.png.startswith(b"\x89PNG") and figure.caption == "two optimizers"


@pytest.mark.parametrize("damage, problem", [
    (lambda folder: (folder / "summary.json").write_text("garbage{"), "summary.json is not valid JSON"),
    (lambda folder: (folder / "trace.csv").write_text(""), "trace.csv does not match"),
    (lambda folder: (folder / "trace.csv").write_bytes((folder / "trace.csv").read_bytes()[:200]),
     "trace.csv does not match"),
], ids=["garbage summary", "empty trace", "truncated trace"])
def test_a_damaged_run_is_named_and_left_out_of_report_and_answer(output, capsys, damage, problem):
    """The report reads the runs through the store's one validation: a damaged run is left out of every
    table and named in the report, the answer and a warning line (it was silently dropped)."""
    damage(output / "eval" / "runs" / "hb" / "0" / "seed-2")  # hb's run on the first test instance
    html, md = build(output)
    err = capsys.readouterr().err
    named = "hb on 0 seed 2"
    assert "11 finished runs" in md and "1 damaged run(s) left out" in md and named in md and problem in md
    answer = (output / "answer.md").read_text()
    assert answer.startswith("1 damaged run(s) left out") and named in answer
    warnings = [line for line in err.splitlines() if line.startswith("metaopt: warning:")]
    assert len(warnings) == 1 and named in warnings[0]


def test_a_garbage_meta_archive_is_one_line(output, capsys):
    write_fake_analyses(output)
    (output / "meta" / "archive.csv").write_bytes(b'meta_seed,trial\n1,2,3,"4\n\x00\xff')
    assert main(["report", str(output)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("metaopt: error:") and "\n" not in err and "archive.csv is damaged" in err


def test_deleted_meta_archive_rows_are_said(output, capsys):
    write_fake_analyses(output)
    archive = output / "meta" / "archive.csv"
    lines = archive.read_text().splitlines(keepends=True)
    archive.write_text("".join(lines[:4]))  # 3 of the trials left
    html, md = build(output)
    err = capsys.readouterr().err
    assert "holds 3 trials, but gamma_star.json counted" in md
    assert "holds 3 trials, but gamma_star.json counted" in err


def test_report_never_imports_a_python_benchmark(output, tmp_path, monkeypatch):
    """A study file may run code (python:module:factory), but reading its results never does."""
    (tmp_path / "evil.py").write_text("import pathlib\npathlib.Path('imported').write_text('yes')\n"
                                      "def make():\n    raise SystemExit(0)\n")
    monkeypatch.chdir(tmp_path)
    study = (output / "study.yaml").read_text().replace("benchmark: synthetic:mlp", "benchmark: python:evil:make")
    (output / "study.yaml").write_text(study)
    build(output)
    assert not (tmp_path / "imported").exists()


def test_shared_settings_say_how_many_configurations_use_a_parameter():
    from metaopt.analysis.report import shared_settings

    configs = pd.DataFrame({"surrogate": ["gp", "gp", "gp"], "rf_n_trees": [np.nan, 43.0, np.nan],
                            "lcb_kappa": [np.nan, np.nan, np.nan]})
    assert shared_settings(configs) == ["surrogate = gp", "rf_n_trees = 43 (the 1 that use it)"]


def test_the_selection_table_shows_both_seed_sets_and_names_the_known_design(tmp_path):
    from metaopt.analysis.report import _selection_table
    from metaopt.store.store import StudyStore

    store = StudyStore(tmp_path)
    assert _selection_table(store, None) is None  # no selection made
    store.meta_dir.mkdir(parents=True)
    pd.DataFrame({"hash": ["aaa", "bbb"], "search_mean": [1.40, 1.74], "search_instances": [8, 8],
                  "search_difference": [0.0, 0.34], "selection_mean": [1.83, 1.60], "selection_se": [0.34, 0.20],
                  "difference_to_gamma_star": [0.23, 0.0], "difference_se": [0.23, 0.0], "chosen": [False, True],
                  "known_design": [np.nan, "cfo_then_rf"]}).to_csv(store.selection_csv, index=False)
    table = _selection_table(store, {"config": {}, "hash": "bbb", "selection": {"seeds": [1001, 1002, 1003]}})
    assert "3 fresh seeds" in table.caption
    assert table.frame.to_dict("records") == [
        {"candidate": "aaa", "search's seeds": "1.4 (8 instances)", "fresh seeds": "1.83 ± 0.34",
         "difference to γ*": "0.23 ± 0.23", "γ*": ""},
        {"candidate": "bbb (cfo_then_rf)", "search's seeds": "1.74 (8 instances)", "fresh seeds": "1.6 ± 0.2",
         "difference to γ*": "", "γ*": "yes"}]
