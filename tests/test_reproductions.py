"""docs/reproductions.md from claims and study stores: verdict rules, missing studies, bad claim files."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from metaopt.analysis.reproductions import load_claims, write_reproductions
from metaopt.cli import main
from metaopt.core.errors import UsageError

REPO = Path(__file__).resolve().parents[1]


def _study(studies: Path, name: str, output: Path) -> None:
    (studies / f"{name}.yaml").write_text(
        f"name: {name}\nbenchmark: synthetic:mlp\nbudget: 30d\n"
        f"evaluation:\n  instances: {{split: test}}\n  seeds: 2\n  optimizers: [rs, hb, bohb]\n"
        f"output: {output.as_posix()}\n")


def _results(output: Path, regret: dict[str, np.ndarray]) -> None:
    """eval/results.csv with one row per (optimizer, instance, seed): regret[optimizer] has shape (instances, seeds)."""
    rows = [{"optimizer": name, "instance": f"i{i}", "seed": s + 1, "regret@30d": values[i, s]}
            for name, values in regret.items() for i in range(values.shape[0]) for s in range(values.shape[1])]
    (output / "eval").mkdir(parents=True)
    pd.DataFrame(rows).to_csv(output / "eval" / "results.csv", index=False)


CLAIMS = """claims:
  - id: rs-loses
    paper: "004"
    where: RQ2
    claim: hb and bohb end below rs.
    reported: rs 0.36, hb 0.28.
    studies: [base]
    test: {kind: better, optimizers: [hb, bohb], than: [rs], metric: "regret@30d"}
  - id: hb-like-bohb
    paper: "004"
    where: RQ2
    claim: hb and bohb end alike.
    studies: [base]
    test: {kind: alike, optimizers: [hb], than: [bohb], metric: "regret@30d"}
  - id: needs-another-study
    paper: "001"
    where: "§6"
    claim: cahb beats hb.
    studies: [other]
    test: {kind: better, optimizers: [cahb], than: [hb], metric: "regret@30dc"}
"""


def _base_study_run(tmp_path: Path) -> tuple[Path, Path, np.ndarray]:
    """Studies 'base' (run: rs, hb and bohb on 12 instances x 2 seeds) and 'other' (not run), and
    CLAIMS; returns (studies folder, claims file, hb's regrets)."""
    studies = tmp_path / "studies"
    studies.mkdir()
    _study(studies, "base", tmp_path / "results" / "base")
    _study(studies, "other", tmp_path / "results" / "other")
    data = np.random.default_rng(0)
    hb = data.uniform(0.1, 0.2, (12, 2))
    _results(tmp_path / "results" / "base", {"rs": hb + 0.3, "hb": hb, "bohb": hb - 0.05 + data.normal(0, 1e-3, hb.shape)})
    claims = tmp_path / "claims.yaml"
    claims.write_text(CLAIMS)
    return studies, claims, hb


def test_verdicts_numbers_and_a_study_not_run(tmp_path):
    studies, claims, _ = _base_study_run(tmp_path)
    out = tmp_path / "docs" / "reproductions.md"
    outcomes = {o.claim.id: o for o in write_reproductions(claims, studies, out, tmp_path / "docs" / "figures")}

    better = outcomes["rs-loses"]
    assert better.verdict == "reproduced" and (better.instances, better.seeds) == (12, 2)
    assert better.pairs["delta"].tolist() == pytest.approx([0.3, 0.35], abs=2e-3)
    assert (better.pairs["reference_better"] == 12).all()
    assert outcomes["hb-like-bohb"].verdict == "not reproduced"  # bohb is lower on every instance
    assert outcomes["needs-another-study"].verdict == "not run"

    page = out.read_text()
    assert "| [rs-loses](#rs-loses) | 004 RQ2 | **reproduced** | 12 × 2 | base |" in page
    assert "Run `metaopt study run studies/other.yaml` and regenerate this page." in page
    assert "The paper reports: rs 0.36, hb 0.28." in page
    assert "| hb | rs | +0.300 ± 0.000 | 12/12 |" in page
    assert (tmp_path / "docs" / "figures" / "rs-loses.png").stat().st_size > 0
    assert not (tmp_path / "docs" / "figures" / "needs-another-study.png").exists()


def test_only_measures_the_named_claims_and_keeps_the_others_as_published(tmp_path):
    """A page brought up to date one study at a time: --only measures the named claims; every other
    claim's row and section stay as the page had them, even where this machine has no store for them."""
    studies, claims, hb = _base_study_run(tmp_path)
    out, figures = tmp_path / "reproductions.md", tmp_path / "figures"
    write_reproductions(claims, studies, out, figures)
    first = out.read_text()

    # the base study's store is gone; the other study has now been run
    (tmp_path / "results" / "base" / "eval" / "results.csv").unlink()
    _results(tmp_path / "results" / "other", {"cahb": hb, "hb": hb + 0.2})
    (tmp_path / "results" / "other" / "eval" / "results.csv").write_text(
        (tmp_path / "results" / "other" / "eval" / "results.csv").read_text().replace("regret@30d", "regret@30dc"))
    outcomes = write_reproductions(claims, studies, out, figures, only=["needs-another-study"])
    assert [o.claim.id for o in outcomes] == ["needs-another-study"] and outcomes[0].verdict == "reproduced"
    page = out.read_text()
    assert "| [needs-another-study](#needs-another-study) | 001 §6 | **reproduced** | 12 × 2 | other |" in page
    # the other claims' rows and sections are the first page's, line for line, in the same places
    for claim in ("rs-loses", "hb-like-bohb"):
        row = next(line for line in first.splitlines() if line.startswith(f"| [{claim}]"))
        assert row in page.splitlines()
        section = first[first.index(f'<a id="{claim}">'):].split("\n<a id=")[0].split("\n## ")[0]
        assert section in page and section.count("![") == 1
    assert page.split("## ")[0].count("\n| [") == 3
    assert "| [rs-loses](#rs-loses) | 004 RQ2 | **reproduced** | 12 × 2 | base |" in page
    assert page.count("### ") == 3 and page.index("### rs-loses") < page.index("### hb-like-bohb")
    # and measuring everything again from the same stores gives the same page
    write_reproductions(claims, studies, out, figures, only=["needs-another-study"])
    assert out.read_text() == page

    with pytest.raises(UsageError, match="unknown claim 'nope'"):
        write_reproductions(claims, studies, out, figures, only=["nope"])
    with pytest.raises(UsageError, match="has no section of claim 'rs-loses' to keep"):
        write_reproductions(claims, studies, tmp_path / "empty.md", figures, only=["needs-another-study"])
    assert not (tmp_path / "empty.md").exists()


def test_a_reading_is_shown_under_the_measurement_and_rewritten_in_kept_sections(tmp_path):
    """A claim's reading (the authors' interpretation) closes its section; --only keeps the other claims'
    measurements but writes what the claims file says (where, claim, reading) from it as it is now."""
    studies, claims, _ = _base_study_run(tmp_path)
    claims.write_text(CLAIMS.replace("    studies: [base]\n    test: {kind: alike",
                                     "    reading: >-\n      bohb samples\n      from a model.\n"
                                     "    studies: [base]\n    test: {kind: alike"))
    out, figures = tmp_path / "reproductions.md", tmp_path / "figures"
    write_reproductions(claims, studies, out, figures)
    section = out.read_text().split('<a id="hb-like-bohb">')[1].split("\n## ")[0]
    assert section.rstrip().endswith("![hb-like-bohb](figures/hb-like-bohb.png)\n\n**Reading:** bohb samples from a model.")
    # what the claims file says is written anew in kept sections; the measurement is kept
    claims.write_text(claims.read_text().replace("from a model.", "from a density model.")
                      .replace("where: RQ2\n    claim: hb and bohb end alike.", "where: RQ2b\n    claim: hb, bohb alike."))
    write_reproductions(claims, studies, out, figures, only=["needs-another-study"])
    page = out.read_text()
    assert page.count("**Reading:**") == 1 and "**Reading:** bohb samples from a density model." in page
    assert "| [hb-like-bohb](#hb-like-bohb) | 004 RQ2b | **not reproduced** | 12 × 2 | base |" in page
    kept = page.split('<a id="hb-like-bohb">')[1].split("\n## ")[0]
    assert "**Claim** (RQ2b): hb, bohb alike." in kept
    assert kept.replace("density ", "").replace("(RQ2b): hb, bohb alike.", "(RQ2): hb and bohb end alike.") == section


def _outcomes_of_base(tmp_path: Path, regret: dict[str, np.ndarray]) -> dict:
    """CLAIMS measured on study 'base' run with ``regret`` (study 'other' not run): outcomes by claim id."""
    studies = tmp_path / "studies"
    studies.mkdir()
    _study(studies, "base", tmp_path / "results" / "base")
    _study(studies, "other", tmp_path / "results" / "other")
    _results(tmp_path / "results" / "base", regret)
    claims = tmp_path / "claims.yaml"
    claims.write_text(CLAIMS)
    return {o.claim.id: o for o in write_reproductions(claims, studies, tmp_path / "r.md", tmp_path / "f")}


def test_an_alike_verdict_says_how_large_a_difference_it_leaves_open(tmp_path):
    hb = np.random.default_rng(0).uniform(0.1, 0.2, (6, 1))
    signs = np.array([[1.0], [-1.0], [1.0], [-1.0], [1.0], [-1.0]])  # bohb: +-0.1 around hb, a mean of 0
    alike = _outcomes_of_base(tmp_path, {"rs": hb + 0.3, "hb": hb, "bohb": hb + 0.1 * signs})["hb-like-bohb"]
    assert alike.verdict == "reproduced"
    (delta,), (se,) = alike.pairs["delta"].tolist(), alike.pairs["se"].tolist()
    # the differences are +-0.1, three each: s.d. (ddof 1) 0.1 * sqrt(6 / 5), over sqrt(6) instances
    assert delta == pytest.approx(0.0, abs=1e-12) and se == pytest.approx(0.1 / np.sqrt(5), rel=1e-6)
    assert (f"the widest left open: hb vs bohb +0.000 ± {se:.3f}, a 95% interval reaching {1.96 * se:.3f} "
            "(no evidence of a difference, not evidence of none)") in alike.reason


def test_an_alike_verdict_between_one_design_under_two_names_says_so(tmp_path):
    hb = np.random.default_rng(0).uniform(0.1, 0.2, (6, 2))
    outcomes = _outcomes_of_base(tmp_path, {"rs": hb + 0.3, "hb": hb, "bohb": hb.copy()})
    alike = outcomes["hb-like-bohb"]
    assert alike.verdict == "reproduced" and alike.pairs["p_wilcoxon"].tolist() == [1.0]
    assert alike.reason == ("1 of 1 pairs without a significant difference (Wilcoxon, α = 0.05); the same result on "
                            "every instance (one design under two names): hb and bohb")
    assert "one design" not in outcomes["rs-loses"].reason


def test_termination_claims_read_ryc_where_higher_is_better(tmp_path):
    studies = tmp_path / "studies"
    studies.mkdir()
    _study(studies, "stop", tmp_path / "results" / "stop")
    (tmp_path / "results" / "stop" / "eval").mkdir(parents=True)
    rows = [{"optimizer": name, "instance": f"i{i}", "seed": 1, "ryc": ryc - 0.01 * i, "rtc": 0.5}
            for i in range(10) for name, ryc in (("autostop", -0.01), ("conv", -0.2))]
    pd.DataFrame(rows).to_csv(tmp_path / "results" / "stop" / "eval" / "termination_runs.csv", index=False)
    claims = tmp_path / "claims.yaml"
    claims.write_text("""claims:
  - id: keeps-quality
    paper: "002"
    where: Table 3
    claim: autostop loses less than conv.
    studies: [stop]
    test: {kind: better, optimizers: [autostop], than: [conv], metric: ryc}
""")
    (outcome,) = write_reproductions(claims, studies, tmp_path / "r.md", tmp_path / "figures")
    assert outcome.verdict == "reproduced"
    assert outcome.pairs["delta"].tolist() == pytest.approx([0.19])  # the advantage of autostop, > 0
    assert "ryc (mean ± s.e. over instances): autostop -0.055 ± 0.010, conv -0.245 ± 0.010" in \
        (tmp_path / "r.md").read_text()


@pytest.mark.parametrize("text, fragment", [
    ("claims:\n  - id: x\n", "field 'claims.0.paper'"),
    (CLAIMS.replace('paper: "001"', 'paper: "007"'), "field 'claims.2.paper'"),
    (CLAIMS.replace("regret@30dc", "loss"), "field 'claims.2.test.metric'"),
    (CLAIMS.replace("id: hb-like-bohb", "id: rs-loses"), "claim ids must be unique"),
])
def test_bad_claims_files_name_the_field(tmp_path, text, fragment):
    path = tmp_path / "claims.yaml"
    path.write_text(text)
    with pytest.raises(UsageError, match=fragment):
        load_claims(path)


def test_the_shipped_claims_name_existing_studies_and_their_optimizers():
    """Each optimizer a claim tests is one its studies evaluate, under its stored name: on the clock
    ``<optimizer>@w<N>`` for each worker count (clock_run_name)."""
    from metaopt.store.study_spec import clock_run_name, load_study

    for claim in load_claims(REPO / "docs" / "claims.yaml"):
        evaluated = set()
        for name in claim.studies:
            ev = load_study(REPO / "studies" / f"{name}.yaml").spec.evaluation
            names = {o if isinstance(o, str) else o.name for o in ev.optimizers}
            evaluated |= {clock_run_name(o, w) for o in names for w in ev.clock.workers} if ev.clock else names
        missing = set(claim.test.optimizers + claim.test.than) - evaluated
        assert not missing, (claim.id, missing)


def test_cli_reports_a_bad_claims_file_in_one_line(tmp_path, capsys):
    path = tmp_path / "claims.yaml"
    path.write_text("claims: [")
    assert main(["reproductions", "--claims", str(path), "--out", str(tmp_path / "r.md")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not valid YAML" in err[0]
    assert not (tmp_path / "r.md").exists()
