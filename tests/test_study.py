"""Studies: schema validation, a complete small study, resume, and refusing a changed study."""

import pandas as pd
import pytest

from metaopt.cli import main
from metaopt.core.errors import UsageError
from metaopt.store.study_spec import load_study

STUDY = """
name: tiny
description: a tiny study for the tests
benchmark: synthetic:rosenbrock
budget: 5d
evaluation:
  instances: {{split: test, limit: 2}}
  seeds: 2
  optimizers: [rs, hb]
output: {out}
"""


def write_study(tmp_path, text):
    path = tmp_path / "study.yaml"
    path.write_text(text)
    return path


def test_study_runs_writes_results_and_resumes(tmp_path, capsys):
    out = tmp_path / "out"
    path = write_study(tmp_path, STUDY.format(out=out))
    assert main(["study", "run", str(path), "--quiet"]) == 0
    runs = sorted(out.glob("eval/runs/*/*/seed-*/summary.json"))
    assert len(runs) == 2 * 2 * 2
    table = pd.read_csv(out / "eval" / "table.csv")
    assert set(table["optimizer"]) == {"rs", "hb"}
    assert (out / "eval" / "anytime.png").stat().st_size > 10_000
    assert "mean normalized regret" in (out / "eval" / "table.md").read_text().lower()
    assert "finished no evaluation" not in (out / "eval" / "table.md").read_text()
    results = pd.read_csv(out / "eval" / "results.csv")
    capsys.readouterr()
    # a second run finds everything done and recomputes nothing, with identical results
    (runs[0].parent / "summary.json").unlink()  # as if that run had been interrupted
    assert main(["study", "run", str(path), "--quiet"]) == 0
    assert "8 runs, 7 already done" in capsys.readouterr().out
    again = pd.read_csv(out / "eval" / "results.csv")
    pd.testing.assert_frame_equal(results, again)  # no wall times in results.csv: they are in wall_times.csv


def test_changed_study_is_refused(tmp_path, capsys):
    out = tmp_path / "out"
    path = write_study(tmp_path, STUDY.format(out=out))
    assert main(["study", "run", str(path), "--quiet"]) == 0
    path.write_text(STUDY.format(out=out).replace("seeds: 2", "seeds: 3"))
    assert main(["study", "run", str(path), "--quiet"]) == 2
    assert "different study" in capsys.readouterr().err


def test_a_study_that_adds_optimizers_keeps_its_runs(tmp_path, capsys):
    out = tmp_path / "out"
    path = write_study(tmp_path, STUDY.format(out=out))
    assert main(["study", "run", str(path), "--quiet"]) == 0
    stored = {p: p.read_bytes() for p in out.glob("eval/runs/*/*/seed-*/*")}
    capsys.readouterr()
    more = STUDY.format(out=out).replace("[rs, hb]", "[hb, sh, rs, {name: rs_again, preset: rs}]")
    path.write_text(more)
    assert main(["study", "run", str(path), "--quiet"]) == 0
    assert "16 runs, 8 already done" in capsys.readouterr().out
    assert (out / "study.yaml").read_text() == more
    assert {p: p.read_bytes() for p in stored} == stored  # the stored runs are kept as they were
    assert set(pd.read_csv(out / "eval" / "results.csv")["optimizer"]) == {"hb", "sh", "rs = rs_again"}


@pytest.mark.parametrize("stored, new", [
    ("[rs, hb]", "[rs]"),  # an optimizer removed
    ("[rs, {name: v, preset: hb}]", "[rs, {name: v, preset: sh}]"),  # a variant redefined
    ("[rs, {name: v, preset: hb}]", "[rs, {name: v, preset: hb, set: {mu: 16}}, sh]"),  # redefined, one added
    ("[rs, hb]", "[rs, hb, sh]\n  report_budgets: [2d]"),  # one added, another result field changed
])
def test_a_study_that_removes_or_changes_an_optimizer_is_refused(tmp_path, capsys, stored, new):
    out = tmp_path / "out"
    out.mkdir()
    (out / "study.yaml").write_text(STUDY.format(out=out).replace("[rs, hb]", stored))  # as a first run left it
    path = write_study(tmp_path, STUDY.format(out=out).replace("[rs, hb]", new))
    assert main(["study", "run", str(path), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("metaopt: error:") and "different study file" in err and len(err.strip().splitlines()) == 1
    assert (out / "study.yaml").read_text() == STUDY.format(out=out).replace("[rs, hb]", stored)
    assert not (out / "eval").exists()


@pytest.mark.parametrize("change, field", [
    (("seeds: 2", "seeds: [1, 1]"), "evaluation.seeds"),
    (("budget: 5d", "budget: lots"), None),
    (("optimizers: [rs, hb]", "optimizers: []"), "evaluation.optimizers"),
    (("benchmark: synthetic:rosenbrock", "benchmark: synthetic:rosenbrock\ncolour: blue"), "colour"),
    (("limit: 2", "limit: 0"), "evaluation.instances"),
])
def test_bad_study_files_name_the_field(tmp_path, capsys, change, field):
    path = write_study(tmp_path, STUDY.format(out=tmp_path / "out").replace(*change))
    code = main(["study", "run", str(path), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("metaopt: error:") and len(err.strip().splitlines()) == 1
    if field:
        assert f"'{field}" in err
    assert not (tmp_path / "out" / "eval").exists()


META = """
meta:
  instances: {split: train, limit: 1}
  trials: 2
  seeds: [1]
"""

GAMMA_STAR = '{"config": {"fidelity_schedule": "equal", "mu": 8}}'


def _meta(text):
    """The tiny study with a meta section (an optimize stage that the checks must not reach)."""
    return text.replace("evaluation:", META.strip() + "\nevaluation:")


# (what to do to the tiny study, the field the one error line must name; {dir} is the test's folder).
# Each case must fail before anything is written: no study.yaml, nothing else in the output folder.
BAD_STUDIES = [
    ("optimizer typo, meta section", lambda t: _meta(t).replace("[rs, hb]", "[rs, hbb]"),
     "evaluation.optimizers[1]"),
    ("optimizer twice", lambda t: t.replace("[rs, hb]", "[rs, rs]"), "evaluation.optimizers[1]"),
    ("variant named like a listed optimizer", lambda t: t.replace("[rs, hb]", "[rs, {name: rs, preset: hb}]"),
     "evaluation.optimizers[1]"),
    ("variant of an unknown preset", lambda t: t.replace("[rs, hb]", "[rs, {name: v, preset: nope}]"),
     "evaluation.optimizers[1]"),
    ("variant sets an unknown parameter", lambda t: t.replace("[rs, hb]", "[rs, {name: v, preset: hb, set: {colour: 1}}]"),
     "evaluation.optimizers[1]"),
    ("variant sets mu to true", lambda t: t.replace("[rs, hb]", "[rs, {name: v, preset: hb, set: {mu: true}}]"),
     "evaluation.optimizers[1]"),
    ("variant sets an integer to 8.5", lambda t: t.replace("[rs, hb]", "[rs, {name: v, preset: hb, set: {mu: 8.5}}]"),
     "evaluation.optimizers[1]"),
    ("gamma_star without meta", lambda t: t.replace("[rs, hb]", "[rs, gamma_star]"), "evaluation.optimizers[1]"),
    ("gamma_star of an unknown restriction", lambda t: _meta(t).replace("[rs, hb]", "[rs, 'gamma_star:gamma1']"),
     "evaluation.optimizers[1]"),
    ("cost_reference typo, meta section", lambda t: _meta(t).replace("optimizers:", "cost_reference: rss\n  optimizers:"),
     "evaluation.cost_reference"),
    ("gamma_star_from missing", lambda t: t.replace("optimizers:", "gamma_star_from: {dir}/none.json\n  optimizers:"),
     "evaluation.gamma_star_from"),
    ("gamma_star_from invalid JSON", lambda t: t.replace("optimizers:", "gamma_star_from: {dir}/broken.json\n  optimizers:"),
     "evaluation.gamma_star_from"),
    ("gamma_star_from a folder", lambda t: t.replace("optimizers:", "gamma_star_from: {dir}\n  optimizers:"),
     "evaluation.gamma_star_from"),
    ("gamma_star_from invalid config", lambda t: t.replace("optimizers:", "gamma_star_from: {dir}/bad_mu.json\n  optimizers:"),
     "evaluation.gamma_star_from"),
    ("seeds -1", lambda t: t.replace("seeds: 2", "seeds: [-1, 2]"), "evaluation.seeds"),
    ("seeds true", lambda t: t.replace("seeds: 2", "seeds: true"), "evaluation.seeds"),
    ("instance twice", lambda t: t.replace("{split: test, limit: 2}", "['0', 0]"), "evaluation.instances"),
    ("unknown instance", lambda t: t.replace("{split: test, limit: 2}", "['0', '999']"), "evaluation.instances"),
    ("meta instance twice", lambda t: _meta(t).replace("{split: train, limit: 1}", "['2', '2']"), "meta.instances"),
    ("unknown restriction", lambda t: _meta(t).replace("trials: 2", "trials: 2\n  restriction: nope"), "meta.restriction"),
    ("report budget above the budget", lambda t: t.replace("optimizers:", "report_budgets: [9d]\n  optimizers:"),
     "evaluation.report_budgets"),
    ("ablation endpoint typo", lambda t: t + "ablation:\n  - {from: rs, to: hbb}\n", "ablation[0].to"),
    ("ablation gamma_star without meta", lambda t: t + "ablation:\n  - {from: rs, to: gamma_star}\n",
     "ablation[0].to"),
    ("ablation surrogate without meta",
     lambda t: t + "ablation:\n  - {from: rs, to: hb, estimator: surrogate}\n", "ablation[0].estimator"),
    ("ablation from a bad file", lambda t: t + "ablation:\n  - {from: {dir}/bad_mu.json, to: hb}\n",
     "ablation[0].from"),
    ("ablation instance unknown", lambda t: t + "ablation:\n  - {from: rs, to: hb, instances: ['999']}\n",
     "ablation[0].instances"),
    ("report_with a missing study", lambda t: t + "report_with: [{dir}/nowhere.yaml]\n", "report_with[0]"),
    ("report_with other seeds", lambda t: t + "report_with: [{dir}/other_seeds.yaml]\n", "report_with[0]"),
    ("report_with an optimizer of this study",
     lambda t: t + "report_with: [{study: {dir}/same_seeds.yaml, optimizers: [rs]}]\n", "report_with[0]"),
    ("report_with an optimizer it lacks",
     lambda t: t + "report_with: [{study: {dir}/same_seeds.yaml, optimizers: [bohb]}]\n", "report_with[0]"),
    ("report_with one optimizer twice on a seed",
     lambda t: t + "report_with: [{dir}/bohb.yaml, {dir}/bohb.yaml]\n", "report_with[1]"),
    ("report_with a study on the simulated clock",
     lambda t: t + "report_with: [{dir}/on_clock.yaml]\n", "report_with[0]"),
    ("seeds 2**63", lambda t: _meta(t).replace("seeds: 2", "seeds: [9223372036854775808]"), "evaluation.seeds"),
    ("meta seeds 2**31", lambda t: _meta(t).replace("seeds: [1]", "seeds: [2147483648]"), "meta.seeds"),
    ("a billion seeds", lambda t: t.replace("seeds: 2", "seeds: 1000000000"), "evaluation.seeds"),
    ("budget below one evaluation", lambda t: t.replace("budget: 5d", "budget: 0.0000000001d"), "budget"),
    ("budget 1e400d", lambda t: t.replace("budget: 5d", "budget: 1" + "0" * 400 + "d"), "budget"),
    ("workers 1000", lambda t: t + "workers: 1000\n", "workers"),
    ("name ..", lambda t: t.replace("name: tiny", "name: '..'").split("output:")[0], "name"),
    ("name .", lambda t: t.replace("name: tiny", "name: ."), "name"),
    ("duplicate key", lambda t: t.replace("budget: 5d", "budget: 5d\nbudget: 6d"), "duplicate key 'budget'"),
    ("output is a dangling symlink", lambda t: t.split("output:")[0] + "output: {dir}/dangling\n", "output"),
    ("output in /proc", lambda t: t.split("output:")[0] + "output: /proc/x\n", "output"),
    ("output is an existing file", lambda t: t.split("output:")[0] + "output: {dir}/afile\n", "output"),
    ("output under an existing file", lambda t: t.split("output:")[0] + "output: {dir}/afile/out\n", "output"),
]


@pytest.mark.parametrize("make, field", [case[1:] for case in BAD_STUDIES], ids=[case[0] for case in BAD_STUDIES])
def test_bad_studies_fail_before_anything_is_written(tmp_path, capsys, monkeypatch, make, field):
    (tmp_path / "broken.json").write_text('{"config": {')
    (tmp_path / "bad_mu.json").write_text('{"config": {"mu": 0}}')
    (tmp_path / "afile").write_text("")
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    monkeypatch.chdir(tmp_path)  # a study without output writes results/<name> here
    (tmp_path / "other_seeds.yaml").write_text(STUDY.format(out=tmp_path / "other").replace("seeds: 2", "seeds: 3"))
    (tmp_path / "same_seeds.yaml").write_text(STUDY.format(out=tmp_path / "same"))
    (tmp_path / "bohb.yaml").write_text(STUDY.format(out=tmp_path / "bohb").replace("[rs, hb]", "[bohb]"))
    (tmp_path / "on_clock.yaml").write_text(STUDY.format(out=tmp_path / "clock").replace(
        "optimizers: [rs, hb]", "clock: {workers: [2]}\n  optimizers: [bohb]"))
    out = tmp_path / "out"
    path = write_study(tmp_path, make(STUDY.format(out=out)).replace("{dir}", str(tmp_path)))
    code = main(["study", "run", str(path), "--quiet"])
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("metaopt: error: "), err
    assert field in lines[0] and "Traceback" not in err
    assert not out.exists() or not any(out.iterdir())  # no study.yaml, nothing else
    assert not (tmp_path / "results").exists() and not (tmp_path / "eval").exists()


def test_a_companion_study_joins_the_report_tables(tmp_path):
    """A study's report_with adds another study's runs (same instances and seeds) to its tables; an
    optimizer in both is taken from the study itself; report_with may be added to a finished study."""
    companion = tmp_path / "companion.yaml"
    companion.write_text(STUDY.format(out=tmp_path / "companion").replace("name: tiny", "name: tiny_companion")
                         .replace("optimizers: [rs, hb]", "optimizers: [rs, bohb]"))
    path = write_study(tmp_path, STUDY.format(out=tmp_path / "out"))
    assert main(["study", "run", str(path), "--quiet"]) == 0
    assert "bohb" not in (tmp_path / "out" / "answer.md").read_text()
    assert main(["study", "run", str(companion), "--quiet"]) == 0
    path.write_text(path.read_text() + f"report_with: [{companion}]\n")
    assert main(["study", "run", str(path), "--quiet"]) == 0
    report = (tmp_path / "out" / "report" / "report.md").read_text()
    assert "3 optimizers (bohb, hb, rs) × 2 instances × 2 seeds = 12 finished runs" in report
    assert "The runs of bohb come from the companion study tiny_companion" in report
    answer = (tmp_path / "out" / "answer.md").read_text()
    assert "bohb" in answer and "hb" in answer and "rs" in answer
    assert "so far" not in report
    # a companion still running: the report says how far it is
    import shutil
    shutil.rmtree(sorted((tmp_path / "companion" / "eval" / "runs" / "bohb").glob("*/seed-*"))[0])
    assert main(["report", str(tmp_path / "out")]) == 0
    assert "; so far bohb 3 of 4 runs (tables and tests use the instances every optimizer finished)." in (
        tmp_path / "out" / "report" / "report.md").read_text()
    # or only the optimizers named
    path.write_text(path.read_text().replace(f"report_with: [{companion}]", f"report_with: [{{study: {companion}, "
                                             "optimizers: [bohb]}]"))
    assert main(["study", "run", str(path), "--quiet"]) == 0
    assert "{study: " in (tmp_path / "out" / "study.yaml").read_text()
    assert "The runs of bohb come from" in (tmp_path / "out" / "report" / "report.md").read_text()


def test_a_companion_split_by_seeds_joins_the_report_as_one(tmp_path):
    """A slow companion split into studies on disjoint seeds (one a session) adds its optimizer's runs
    from each: the report's tables count them as one optimizer's, and each slice's sentence names its
    seeds; before the last slice is in, the report says how far the optimizer is."""
    slices = []
    for seed in (1, 2):
        companion = tmp_path / f"companion{seed}.yaml"
        companion.write_text(STUDY.format(out=tmp_path / f"companion{seed}")
                             .replace("name: tiny", f"name: tiny_companion{seed}")
                             .replace("seeds: 2", f"seeds: [{seed}]").replace("optimizers: [rs, hb]", "optimizers: [bohb]"))
        slices.append(companion)
    path = write_study(tmp_path, STUDY.format(out=tmp_path / "out")
                       + f"report_with: [{slices[0]}, {slices[1]}]\n")
    assert main(["study", "run", str(slices[0]), "--quiet"]) == 0
    assert main(["study", "run", str(path), "--quiet"]) == 0
    report = (tmp_path / "out" / "report" / "report.md").read_text()
    assert "3 optimizers (bohb, hb, rs) × 2 instances × 2 seeds = 10 finished runs" in report
    assert "The runs of bohb come from the companion study tiny_companion1" in report
    assert "same instances, seeds [1]); so far bohb 2 of 4 runs" in report
    assert "tiny_companion2 (" in report and "; not run yet: bohb." in report
    assert "The runs of no optimizer come from the companion study tiny_companion2" in report
    assert main(["study", "run", str(slices[1]), "--quiet"]) == 0
    assert main(["report", str(tmp_path / "out")]) == 0
    report = (tmp_path / "out" / "report" / "report.md").read_text()
    assert "3 optimizers (bohb, hb, rs) × 2 instances × 2 seeds = 12 finished runs" in report
    assert "same instances, seeds [1])." in report and "same instances, seeds [2])." in report
    assert "so far" not in report


def test_a_companion_read_from_its_runs_file_gives_the_same_report(tmp_path, capsys):
    """A companion's runs exported to a runs file (metaopt study export-runs) stand in for its store
    once the store is gone (another session): the same answer, tables and figures; the report says
    which source it read. A runs file of runs at another budget is refused naming the field."""
    import shutil

    companion = tmp_path / "companion.yaml"
    companion.write_text(STUDY.format(out=tmp_path / "companion").replace("name: tiny", "name: tiny_companion")
                         .replace("optimizers: [rs, hb]", "optimizers: [rs, bohb]"))
    runs_file = tmp_path / "kept" / "runs.jsonl.gz"
    path = write_study(tmp_path, STUDY.format(out=tmp_path / "out")
                       + f"report_with: [{{study: {companion}, runs: {runs_file}}}]\n")
    assert main(["study", "run", str(companion), "--quiet"]) == 0
    assert main(["study", "run", str(path), "--quiet"]) == 0
    report_md = tmp_path / "out" / "report" / "report.md"
    from_store = report_md.read_text()
    answer = (tmp_path / "out" / "answer.md").read_text()
    figures = {p.name: p.read_bytes() for p in (tmp_path / "out" / "report" / "figures").glob("*.png")}
    assert "tiny_companion (" in from_store and f"stored in {tmp_path / 'companion'};" in from_store

    capsys.readouterr()
    assert main(["study", "export-runs", str(tmp_path / "companion"), "--out", str(runs_file),
                 "--optimizers", "bohb"]) == 0
    assert "wrote 4 runs to" in capsys.readouterr().out
    again = tmp_path / "again.jsonl.gz"
    assert main(["study", "export-runs", str(tmp_path / "companion"), "--out", str(again), "--optimizers", "bohb"]) == 0
    assert again.read_bytes() == runs_file.read_bytes()  # the same runs, the same bytes
    shutil.rmtree(tmp_path / "companion")
    assert main(["report", str(tmp_path / "out")]) == 0
    from_file = report_md.read_text()
    assert f"read from its runs file {runs_file};" in from_file
    assert from_file.replace(f"read from its runs file {runs_file}", f"stored in {tmp_path / 'companion'}") == from_store
    assert (tmp_path / "out" / "answer.md").read_text() == answer
    assert {p.name: p.read_bytes() for p in (tmp_path / "out" / "report" / "figures").glob("*.png")} == figures

    # a runs file of runs at another budget is refused, naming the entry
    (tmp_path / "other").mkdir()
    other = write_study(tmp_path / "other", STUDY.format(out=tmp_path / "other" / "out")
                        .replace("budget: 5d", "budget: 3d"))
    assert main(["study", "run", str(other), "--quiet"]) == 0
    assert main(["study", "export-runs", str(tmp_path / "other" / "out"), "--out", str(runs_file)]) == 0
    capsys.readouterr()
    assert main(["report", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "report_with[0].runs" in err[0] and "budget_spec '3d'" in err[0], err


def test_runs_that_finish_no_evaluation_are_named_in_the_table_and_report(tmp_path):
    """Under a cost budget of one typical evaluation, a run whose first evaluation costs more than
    all of it has no regret: table.md and the report say how many such runs each optimizer had."""
    text = (STUDY.format(out=tmp_path / "out").replace("budget: 5d", "budget: 1c").replace("seeds: 2", "seeds: [1, 2, 3]")
            + "importance: false\n")
    assert main(["study", "run", str(write_study(tmp_path, text)), "--quiet"]) == 0
    results = pd.read_csv(tmp_path / "out" / "eval" / "results.csv")
    empty = results[results["n_evals"] == 0]
    assert len(empty) and empty["regret@1c"].isna().all() and set(empty["optimizer"]) == {"rs"}
    sentence = f"left out of the means: rs {len(empty)} of 6."
    assert sentence in (tmp_path / "out" / "eval" / "table.md").read_text()
    assert sentence in (tmp_path / "out" / "report" / "report.md").read_text()


@pytest.mark.parametrize("content, fragment", [(None, "is a folder"), (b"name: \xff\xfe\n", "not a UTF-8 text file")])
def test_a_study_that_is_a_folder_or_binary_is_one_line(tmp_path, capsys, content, fragment):
    path = tmp_path / "study.yaml"
    if content is None:
        path.mkdir()
    else:
        path.write_bytes(content)
    code = main(["study", "run", str(path)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and err.startswith("metaopt: error: ") and fragment in err


def test_a_valid_gamma_star_from_and_ablation_files_pass(tmp_path):
    from metaopt.stages.study import StudyContext

    (tmp_path / "g.json").write_text(GAMMA_STAR)
    text = STUDY.format(out=tmp_path / "out").replace("[rs, hb]", "[rs, gamma_star]").replace(
        "optimizers:", f"gamma_star_from: {tmp_path}/g.json\n  cost_reference: rs\n  optimizers:")
    text += f"ablation:\n  - {{from: {tmp_path}/g.json, to: gamma_star}}\n"
    context = StudyContext(load_study(write_study(tmp_path, text)), None)
    assert context.gamma_star_names == ["gamma_star"]
    assert not (tmp_path / "out").exists()  # checking writes nothing


def test_train_test_overlap_is_one_warning_line(tmp_path, capsys):
    from metaopt.stages.study import StudyContext

    text = _meta(STUDY.format(out=tmp_path / "out")).replace("{split: train, limit: 1}", "['2', '0']")
    StudyContext(load_study(write_study(tmp_path, text.replace("{split: test, limit: 2}", "['0', '1']"))), None)
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("metaopt: warning: ") and "(0)" in err[0], err
    StudyContext(load_study(write_study(tmp_path, text.replace("{split: test, limit: 2}", "['1', '3']"))), None)
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("importance, line", [("false", "importance: skipped (the study sets 'importance: false')"),
                                              ("true", "importance: skipped for the full space")])
def test_importance_false_skips_the_importance_stage(tmp_path, capsys, importance, line):
    from metaopt.stages.study import run_stages

    text = _meta(STUDY.format(out=tmp_path / "out")) + f"importance: {importance}\n"
    run_stages(load_study(write_study(tmp_path, text)), ["importance"], quiet=True)
    assert line in capsys.readouterr().out


def test_shipped_study_files_are_valid(yahpo_data):
    """Every study file in studies/ loads and resolves against its benchmark (instances, restrictions, budgets)."""
    from pathlib import Path

    from metaopt.stages.study import StudyContext

    folder = Path(__file__).resolve().parents[1] / "studies"
    files = sorted(folder.glob("*.yaml"))
    assert len(files) >= 16
    for path in files:
        study = load_study(path)
        if study.spec.benchmark.startswith("live:"):
            continue  # resolving a live benchmark trains models for its references
        ev = study.spec.evaluation  # None for a study that only meta-optimizes (rq12_pooled)
        source = ev.gamma_star_from if ev else None
        if source and not Path(source).exists():  # another study's γ*, not computed here: refused up front
            with pytest.raises(UsageError, match="field 'evaluation.gamma_star_from': file not found"):
                StudyContext(study, str(yahpo_data))
            continue
        context = StudyContext(study, str(yahpo_data))
        assert context.eval_instances if ev else context.meta_instances, path
    assert load_study(folder / "quickstart.yaml").spec.benchmark.startswith("synthetic:")
    with pytest.raises(UsageError, match="not found"):
        load_study(Path("no/such/study.yaml"))


PIPELINE = """
name: pipeline
question: Does the pipeline run end to end?
benchmark: synthetic:mlp
budget: 3d
meta:
  instances: {{split: train, limit: 2}}
  restriction: [gamma1, hb_only]
  trials: 6
  seeds: [1]
evaluation:
  instances: {{split: test, limit: 3}}
  seeds: 1
  cost_reference: rs
  optimizers:
    - "gamma_star:gamma1"
    - "gamma_star:hb_only"
    - rs
    - {{name: rs_conv, preset: rs, set: {{stopping: conv, stop_conv_patience: 5}}}}
ablation:
  - {{from: hb, to: "gamma_star:hb_only", estimator: surrogate}}
  - {{from: rs, to: "gamma_star:gamma1", estimator: evaluated, instances: {{split: test, limit: 2}}}}
output: {out}
"""


def test_a_study_runs_every_stage_from_arms_to_report(tmp_path):
    """Two restriction arms, γ*'s of both, a variant with a stopping rule (and its full twin), a cost
    reference, a surrogate and an evaluated ablation, importance per arm, and the report."""
    out = tmp_path / "out"
    path = write_study(tmp_path, PIPELINE.format(out=out))
    assert main(["study", "run", str(path), "--quiet"]) == 0
    for arm in ("gamma1", "hb_only"):
        assert (out / "arms" / arm / "meta" / "gamma_star.json").exists()
        assert (out / "arms" / arm / "importance" / "fanova.csv").exists()
    optimizers = set(pd.read_csv(out / "eval" / "results.csv")["optimizer"])
    assert optimizers == {"gamma_star:gamma1", "gamma_star:hb_only", "rs", "rs_conv"}  # rs is rs_conv's twin
    termination = pd.read_csv(out / "eval" / "termination.csv")
    assert list(termination["optimizer"]) == ["rs_conv"] and termination["rtc"].between(0, 1).all()
    per_run = pd.read_csv(out / "eval" / "termination_runs.csv")
    assert set(per_run["optimizer"]) == {"rs_conv"} and len(per_run) == len(pd.read_csv(out / "eval" / "results.csv")) // 4
    assert per_run["rtc"].mean() == pytest.approx(termination["rtc"].iloc[0])  # one seed per instance
    assert set(pd.read_csv(out / "eval" / "cost.csv")["optimizer"]) == optimizers
    assert (out / "ablation" / "hb-to-gamma_star-hb_only-surrogate" / "path.csv").exists()
    path_table = pd.read_csv(out / "ablation" / "rs-to-gamma_star-gamma1-evaluated" / "path.csv")
    assert path_table["share"].iloc[1:].sum() == pytest.approx(1.0)
    answer = (out / "answer.md").read_text()
    assert "held-out instances" in answer and "Automatic termination" in answer
    html = (out / "report" / "report.html").read_text()
    assert "Does the pipeline run end to end?" in html and "data:image/png;base64," in html
    assert "Parameter importance: gamma1" in html and "Parameter importance: hb_only" in html
    # `metaopt importance` on a study with arms analyses each arm's meta-archive
    assert main(["importance", "--study-output", str(out), "--out", str(tmp_path / "imp"), "--trees", "5",
                 "--no-pairs", "--seed", "2"]) == 0
    for arm in ("gamma1", "hb_only"):
        assert (tmp_path / "imp" / "arms" / arm / "importance" / "fanova.csv").exists()


def test_parallel_workers_give_the_serial_results(tmp_path):
    serial, parallel = tmp_path / "serial", tmp_path / "parallel"
    for out, workers in ((serial, "1"), (parallel, "2")):
        path = write_study(tmp_path, STUDY.format(out=out))
        assert main(["study", "run", str(path), "--quiet", "--workers", workers]) == 0
    traces = list(serial.glob("eval/runs/*/*/seed-*/trace.csv"))
    assert len(traces) == 8
    for summary in traces:
        twin = parallel / summary.relative_to(serial)
        assert summary.read_text() == twin.read_text()


def test_one_configuration_under_two_names_is_run_once_and_stored_for_both(tmp_path, capsys):
    """γ* found to be a preset, or a design shipped under two names: the runs are the same (a run is
    a pure function of configuration, problem, seed and budget), so each is run once and stored under
    both names, with the same trace as when each name is run by itself."""
    alone = tmp_path / "alone"
    assert main(["study", "run", str(write_study(tmp_path, STUDY.format(out=alone))), "--quiet"]) == 0
    both = tmp_path / "both"
    text = STUDY.format(out=both).replace("optimizers: [rs, hb]", "optimizers: [rs, hb, {name: hb_again, preset: hb}]")
    capsys.readouterr()
    assert main(["study", "run", str(write_study(tmp_path, text))]) == 0
    out = capsys.readouterr().out
    assert "12 runs, 0 already done, 4 the same as another optimizer's" in out
    assert "evaluation: 12 runs in" in out  # every run is stored, 8 were executed
    for trace in alone.glob("eval/runs/hb/*/seed-*/trace.csv"):
        stored = both / trace.relative_to(alone)
        again = both / "eval" / "runs" / "hb_again" / stored.relative_to(both / "eval" / "runs" / "hb")
        assert trace.read_bytes() == stored.read_bytes() == again.read_bytes()
        import json
        assert json.loads((again.parent / "summary.json").read_text())["optimizer"] == "hb_again"
    assert len(list(both.glob("eval/runs/hb_again/*/seed-*/summary.json"))) == 4
    # one configuration, one row in every table, curve and test, labelled with both names
    for table in ("table.csv", "results.csv", "anytime.csv"):
        assert set(pd.read_csv(both / "eval" / table)["optimizer"]) == {"rs", "hb = hb_again"}, table
    alone_table, both_table = (pd.read_csv(out / "eval" / "table.csv") for out in (alone, both))
    assert both_table.drop(columns="optimizer").equals(alone_table.drop(columns="optimizer"))
    report = (both / "report" / "report.md").read_text()
    assert "\n| hb = hb_again |" in report  # rows of the tables
    assert "\n| hb |" not in report and "\n| hb_again |" not in report
    assert "hb = hb_again" in (both / "answer.md").read_text()


def test_evaluation_runs_peers_and_reports_missing_ones_as_skipped(tmp_path, capsys, monkeypatch):
    import metaopt.engine.peers

    real = metaopt.engine.peers.peer_status
    monkeypatch.setattr(metaopt.engine.peers, "peer_status",
                        lambda: {**real(), "optuna_tpe": "skipped (not installed: pip install .[peers])"})
    text = STUDY.format(out=tmp_path / "out").replace("optimizers: [rs, hb]", "optimizers: [rs, smac_hb, optuna_tpe]")
    path = write_study(tmp_path, text.replace("limit: 2", "limit: 1").replace("seeds: 2", "seeds: 1"))
    assert main(["evaluate", str(path), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "optuna_tpe: skipped (not installed" in out
    results = pd.read_csv(tmp_path / "out" / "eval" / "results.csv")
    assert set(results["optimizer"]) == {"rs", "smac_hb"}
    summary = (tmp_path / "out" / "eval" / "runs" / "smac_hb").glob("*/seed-1/summary.json")
    assert "smac" in next(summary).read_text()


@pytest.mark.parametrize("argv, field", [
    (["--scheduler", "garbage"], "--scheduler"),
    (["--scheduler", "tls://127.0.0.1:8786"], "--scheduler"),
    (["--scheduler", "ucx://127.0.0.1:8786"], "--scheduler"),
    (["--workers", "1000"], "--workers"),
], ids=["scheduler garbage", "scheduler tls", "scheduler ucx", "workers 1000"])
def test_bad_executor_options_are_refused_before_the_lock(tmp_path, capsys, argv, field):
    out = tmp_path / "out"
    path = write_study(tmp_path, STUDY.format(out=out))
    code = main(["study", "run", str(path), "--quiet", *argv])
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("metaopt: error: ") and field in lines[0], err
    assert not out.exists()  # no .lock, no study.yaml


def test_an_unreachable_scheduler_leaves_nothing_behind(tmp_path, capsys):
    import socket

    with socket.socket() as sock:  # a free port: nothing listens there
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    out = tmp_path / "out"
    path = write_study(tmp_path, STUDY.format(out=out))

    code = main(["study", "run", str(path), "--quiet", "--scheduler", f"tcp://127.0.0.1:{port}"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "--scheduler" in err
    assert not out.exists()  # neither .lock nor study.yaml


def test_a_file_system_error_during_a_stage_is_one_line_naming_the_path(tmp_path, capsys):
    """E.g. a folder of the store that cannot be created (here: a file in its place; a read-only folder
    or a full disk end the same way): one line naming the path, no traceback."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "eval").write_text("not a folder")
    path = write_study(tmp_path, STUDY.format(out=out))
    code = main(["study", "run", str(path), "--quiet"])
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("metaopt: error: ") and "eval" in lines[0], err
    assert "Traceback" not in err
