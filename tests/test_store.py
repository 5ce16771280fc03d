"""The study store's layout (unchanged on disk, so old stores stay readable) and the one optimizer resolver."""

from __future__ import annotations

import json
import re

import pytest

from metaopt.core.benchmarks import get_benchmark
from metaopt.core.errors import UsageError
from metaopt.spaces.presets import get_preset
from metaopt.spaces.resolve import is_gamma_star, resolve_optimizer
from metaopt.store.store import StudyStore, read_gamma_star
from metaopt.store.study_spec import OptimizerVariant


def test_the_store_layout_is_the_documented_one(tmp_path):
    store = StudyStore(tmp_path)
    assert store.study_file == tmp_path / "study.yaml"
    assert store.lock_file == tmp_path / ".lock"
    assert store.timings_file == tmp_path / "timings.json"
    assert store.archive_csv == tmp_path / "meta" / "archive.csv"
    assert store.gamma_star_json == tmp_path / "meta" / "gamma_star.json"
    assert store.trials_log(2) == tmp_path / "meta" / "trials-seed-2.jsonl"
    assert store.meta_run_file("abc", "3945", 1) == tmp_path / "meta" / "runs" / "abc" / "3945" / "seed-1.json"
    assert store.eval_run_dir("hb", "3945", 2) == tmp_path / "eval" / "runs" / "hb" / "3945" / "seed-2"
    assert store.eval_files.results_csv == tmp_path / "eval" / "results.csv"
    assert store.eval_files.table_md == tmp_path / "eval" / "table.md"
    assert store.ablation("a").runs_dir == tmp_path / "ablation" / "a" / "runs"
    assert store.ablation("a").variant_csv("path") == tmp_path / "ablation" / "a" / "path.csv"
    assert store.importance.fanova_csv == tmp_path / "importance" / "fanova.csv"
    assert store.report.figure("x") == tmp_path / "report" / "figures" / "x.png"
    arm = store.arm("gamma1")
    assert arm.gamma_star_json == tmp_path / "arms" / "gamma1" / "meta" / "gamma_star.json"
    assert arm.importance_dir == tmp_path / "arms" / "gamma1" / "importance"
    assert not list(tmp_path.iterdir())  # asking for paths creates nothing
    assert store.readable_eval_files() == store.eval_files
    (tmp_path / "runs").mkdir()  # a store written before eval/ existed: its runs at the top level
    assert store.readable_eval_files().results_csv == tmp_path / "results.csv"


def test_the_store_reads_the_validated_study(tmp_path):
    store = StudyStore(tmp_path)
    assert not store.is_study()
    store.study_file.write_text("name: s\nbenchmark: synthetic:mlp\nbudget: 30\nevaluation:\n  optimizers: [rs]\n")
    spec = store.spec()
    assert store.is_study() and spec.budget == "30" and spec.evaluation.seeds == [1, 2, 3]
    store.study_file.write_text("name: s\nbenchmark: synthetic:mlp\nevaluation:\n  optimizers: []\n")
    with pytest.raises(UsageError, match="field 'evaluation.optimizers'"):
        store.spec()
    (tmp_path / "arms" / "b").mkdir(parents=True)
    (tmp_path / "arms" / "a").mkdir()
    assert [arm.name for arm in store.stored_arms()] == ["a", "b"]


@pytest.fixture(scope="module")
def fidelity():
    return get_benchmark("synthetic:mlp").fidelity


def test_one_vocabulary_presets_peers_gamma_stars_files_and_variants(tmp_path, fidelity):
    hb = get_preset("hb").config(fidelity)
    assert resolve_optimizer("hb", fidelity, "--x").config == hb
    assert resolve_optimizer("smac_hpo", fidelity, "--x", peers=["smac_hpo"]).peer == "smac_hpo"
    stars = {"gamma_star:a": hb, "gamma_star:b": None}
    assert resolve_optimizer("gamma_star:a", fidelity, "--x", gamma_stars=stars).config == hb
    assert resolve_optimizer("gamma_star:b", fidelity, "--x", gamma_stars=stars, pending=True).config is None
    assert is_gamma_star("gamma_star") and is_gamma_star("gamma_star:a") and not is_gamma_star("gamma_star.json")
    plain, wrapped = tmp_path / "plain.json", tmp_path / "gamma_star.json"
    plain.write_text(json.dumps(hb))
    wrapped.write_text(json.dumps({"config": hb, "mean_objective": 0.1}))
    assert resolve_optimizer(str(plain), fidelity, "--x").config == hb
    resolved = resolve_optimizer(str(wrapped), fidelity, "--x")
    assert resolved.name == "gamma_star" and resolved.config == hb
    variant = OptimizerVariant(name="hb_mu", preset="hb", set={"mu": 3})
    assert resolve_optimizer(variant, fidelity, "--x").config == {**hb, "mu": 3}


@pytest.mark.parametrize("entry, kwargs, message", [
    ("nope", {}, "--x: unknown optimizer 'nope'; known: presets rs"),
    ("smac_hpo", {}, "--x: unknown optimizer 'smac_hpo'"),  # peers only where the caller runs them
    ("x.json", {"files": False}, "--x: unknown optimizer 'x.json'"),
    ("x.json", {}, "--x: file not found"),
    ("gamma_star", {}, "--x: 'gamma_star' is not a gamma\\* of this study; known: none"),
    ("gamma_star:b", {"gamma_stars": {"gamma_star:b": None}, "gamma_star_hint": "run it"},
     "--x: 'gamma_star:b' needs a finished meta-optimization \\(run it\\)"),
])
def test_every_problem_names_the_field(fidelity, entry, kwargs, message):
    with pytest.raises(UsageError, match=f"^{message}"):
        resolve_optimizer(entry, fidelity, "--x", **kwargs)


def test_a_variant_error_names_the_field_and_the_variant(fidelity):
    variant = OptimizerVariant(name="v", preset="hb", set={"colour": 1})
    with pytest.raises(UsageError, match=r"^field 'evaluation.optimizers\[1\]' \(v\): "):
        resolve_optimizer(variant, fidelity, "field 'evaluation.optimizers[1]'")


def test_deleting_the_lock_file_does_not_let_a_second_writer_in(tmp_path):
    """The lock is on the output folder itself: removing ``.lock`` (which only names the holder) does not
    release it, and a second taker is still refused."""
    from metaopt.core.errors import UsageError
    from metaopt.core.store_utils import output_lock

    with output_lock(tmp_path / "out"):
        (tmp_path / "out" / ".lock").unlink()
        with pytest.raises(UsageError, match="in use by another metaopt process"):
            with output_lock(tmp_path / "out"):
                pass
    with output_lock(tmp_path / "out"):  # released with the block
        pass


def test_a_failed_command_leaves_no_folder_it_created(tmp_path):
    from metaopt.core.store_utils import output_lock

    with pytest.raises(RuntimeError):
        with output_lock(tmp_path / "new"):
            raise RuntimeError("the scheduler cannot be reached")
    assert not (tmp_path / "new").exists()


def test_read_gamma_star_returns_the_record_and_names_a_damaged_file(tmp_path):
    """The one reader of gamma* files: the whole record of an intact file; a one-line UsageError naming
    a cut-short, non-object or config-less file; FileNotFoundError for a missing one."""
    path = tmp_path / "gamma_star.json"
    record = {"config": {"mu": 20}, "n_trials": 40, "known_design": "hb"}
    text = json.dumps(record)
    path.write_text(text)
    assert read_gamma_star(path) == record
    for damaged in (text[: len(text) // 2], "[1, 2]", '{"n_trials": 40}', '{"config": 3}'):
        path.write_text(damaged)
        with pytest.raises(UsageError, match=f"{path} is damaged .*not a complete gamma"):
            read_gamma_star(path)
    with pytest.raises(FileNotFoundError):
        read_gamma_star(tmp_path / "missing.json")


def test_read_gamma_star_of_a_user_named_file_names_the_field(tmp_path):
    """A γ* file the user names (``evaluation.gamma_star_from``): every problem is one UsageError line
    starting with the field, also a missing file or a folder."""
    field = "s.yaml: field 'evaluation.gamma_star_from'"
    with pytest.raises(UsageError, match=f"^{re.escape(field)}: file not found: "):
        read_gamma_star(tmp_path / "missing.json", field)
    with pytest.raises(UsageError, match=f"^{re.escape(field)}: {re.escape(str(tmp_path))} is a folder"):
        read_gamma_star(tmp_path, field)
    (tmp_path / "g.json").write_text('{"config": [1]}')
    with pytest.raises(UsageError, match=f"^{re.escape(field)}: .*g.json is damaged .*\"config\" object"):
        read_gamma_star(tmp_path / "g.json", field)
