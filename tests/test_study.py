"""Studies: schema validation, a complete small study, resume, and refusing a changed study."""

import pandas as pd
import pytest

from metaopt.cli import main
from metaopt.errors import UsageError
from metaopt.study import load_study

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
    results = pd.read_csv(out / "eval" / "results.csv")
    capsys.readouterr()
    # a second run finds everything done and recomputes nothing, with identical results
    (runs[0].parent / "summary.json").unlink()  # as if that run had been interrupted
    assert main(["study", "run", str(path), "--quiet"]) == 0
    assert "8 runs, 7 already done" in capsys.readouterr().out
    again = pd.read_csv(out / "eval" / "results.csv")
    pd.testing.assert_frame_equal(results.drop(columns="wall_time_s"), again.drop(columns="wall_time_s"))


def test_changed_study_is_refused(tmp_path, capsys):
    out = tmp_path / "out"
    path = write_study(tmp_path, STUDY.format(out=out))
    assert main(["study", "run", str(path), "--quiet"]) == 0
    path.write_text(STUDY.format(out=out).replace("seeds: 2", "seeds: 3"))
    assert main(["study", "run", str(path), "--quiet"]) == 2
    assert "different study" in capsys.readouterr().err


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


def test_shipped_study_files_are_valid(yahpo_data):
    """Every study file in studies/ loads and resolves against its benchmark (instances, restrictions, budgets)."""
    from pathlib import Path

    from metaopt.study import StudyContext

    folder = Path(__file__).resolve().parents[1] / "studies"
    files = sorted(folder.glob("*.yaml"))
    assert len(files) >= 16
    for path in files:
        study = load_study(path)
        if study.spec.benchmark.startswith("live:"):
            continue  # resolving a live benchmark trains models for its references
        context = StudyContext(study, str(yahpo_data))
        assert context.eval_instances, path
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


def test_evaluation_runs_peers_and_reports_missing_ones_as_skipped(tmp_path, capsys, monkeypatch):
    import metaopt.peers

    real = metaopt.peers.peer_status
    monkeypatch.setattr(metaopt.peers, "peer_status",
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
