"""The papers' claims against our measurements: ``docs/reproductions.md`` from the studies' stores.

``docs/claims.yaml`` lists each headline claim of the papers in one sentence with the study
that tests it and the test itself; :func:`write_reproductions` reads the studies' held-out
evaluations (``<output>/eval/results.csv``), computes every comparison and writes the Markdown
page plus one figure per claim. A claim whose study has not been run (its store is missing) gets
the command that runs it instead of numbers.

A test compares optimizers on one metric, paired over the instances (seed means per instance): a
regret column of ``eval/results.csv`` (``regret@30d``, ``regret@10dc``; lower is better) or paper
002's ``ryc`` / ``rtc`` of ``eval/termination_runs.csv`` (higher is better). Each pair is reported as
the claimed optimizer's advantage (> 0: it is better) ± its standard error over instances, the
instances it wins, and a two-sided Wilcoxon signed-rank test
(:func:`metaopt.analysis.stats.paired_differences`):

* ``better``: each of ``optimizers`` ends lower than each of ``than``. Reproduced when every pair is
  significant in the claimed direction, not reproduced when none is, mixed otherwise.
* ``alike``: no pair differs significantly. Reproduced when none does, not reproduced when every
  pair does, mixed otherwise. Since a difference that is not significant may still be large, the
  reason also names the non-significant pair whose 95% interval (± 1.96 s.e.) reaches furthest.
"""

from __future__ import annotations

import math
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402
import yaml  # noqa: E402
from pydantic import BaseModel, ConfigDict, Field, ValidationError  # noqa: E402

from metaopt.analysis.stats import paired_differences, scores_by_instance  # noqa: E402
from metaopt.core.errors import UsageError  # noqa: E402
from metaopt.store.store import StudyStore  # noqa: E402
from metaopt.core.store_utils import atomic_write_text  # noqa: E402
from metaopt.store.study_spec import load_study  # noqa: E402

PAPERS = {"004": "Paper 004: Smashy (Moosbauer, Binder et al.)", "000": "Paper 000: CFO (Wu, Wang & Huang)",
          "001": "Paper 001: CASH/CAHB (Ivkin et al.)", "002": "Paper 002: Automatic termination (Makarova et al.)",
          "003": "Paper 003: Cost-aware acquisition (CEI)", "metaopt": "Beyond the papers: metaopt's own questions"}
"""Section headings of the page by a claim's ``paper``, in the page's order: the papers of
``../shared/papers`` by number (004, the frame, first), then ``metaopt``: questions none of the
papers asked (RQ12, one design for several scenarios)."""


class ClaimTest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    kind: Literal["better", "alike"]
    optimizers: list[str] = Field(min_length=1)
    than: list[str] = Field(min_length=1)
    metric: str = Field(pattern=r"^(regret@[0-9.]+dc?|ryc|rtc)$")
    alpha: float = Field(default=0.05, gt=0, lt=1)


class Claim(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str = Field(pattern=r"^[a-z0-9_-]+$")
    paper: Literal["000", "001", "002", "003", "004", "metaopt"]
    where: str
    """Where in the paper (section, figure, table)."""
    claim: str
    reported: str | None = None
    """What the paper reports for it (numbers, in its own setting), shown beside ours."""
    reading: str | None = None
    """Our reading of the evidence, written by hand from the measured numbers and the reports under
    ``docs/results``: why the claim holds, fails or holds in part here. Shown under the measurement,
    and rewritten on every run of the page, measured claims or kept ones (``--only``)."""
    studies: list[str] = Field(min_length=1)
    """Study files (names under ``studies/``) whose evaluations hold the optimizers; the first one
    that has an optimizer's runs provides them."""
    test: ClaimTest


class ClaimsFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    claims: list[Claim]


@dataclass(frozen=True)
class Outcome:
    """A claim measured: the pairs' comparisons (None when a study has not been run) and the verdict."""

    claim: Claim
    pairs: pd.DataFrame | None
    scores: pd.DataFrame | None
    instances: int
    seeds: int
    verdict: str
    reason: str
    missing: list[str]


def load_claims(path: Path) -> list[Claim]:
    """Read and validate the claims file; a problem is one UsageError naming the field."""
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as err:
        raise UsageError(f"{path}: cannot read the claims file ({err.strerror})") from None
    except yaml.YAMLError as err:
        raise UsageError(f"{path}: not valid YAML ({str(err).splitlines()[0]})") from None
    try:
        claims = ClaimsFile.model_validate(data).claims
    except ValidationError as err:
        first = err.errors()[0]
        field = ".".join(str(p) for p in first["loc"])
        raise UsageError(f"{path}: field '{field}': {first['msg']}") from None
    ids = [c.id for c in claims]
    if len(ids) != len(set(ids)):
        raise UsageError(f"{path}: claim ids must be unique ({sorted({i for i in ids if ids.count(i) > 1})})")
    return claims


HIGHER_IS_BETTER = {"ryc", "rtc"}
"""Metrics of ``eval/termination_runs.csv`` (paper 002); the regret columns of ``eval/results.csv`` are lower-better."""


def _evaluation(study_file: Path, metric: str, damaged: list[str]) -> pd.DataFrame | None:
    """The study's table holding ``metric``, one row per run (None when the study has not been evaluated).

    Runs whose stored files are damaged now (:meth:`metaopt.store.store.StudyStore.damaged_eval_runs`) are
    left out of the table and appended to ``damaged``, so that the claim names them."""
    study = load_study(study_file)
    store = StudyStore(study.output)
    files = store.readable_eval_files()
    table = files.termination_runs_csv if metric in HIGHER_IS_BETTER else files.results_csv
    if not table.exists():
        return None
    results = pd.read_csv(table, dtype={"instance": str})
    bad = store.damaged_eval_runs()
    if bad and {"optimizer", "instance", "seed"} <= set(results.columns):
        keys = {(run.optimizer, run.instance, run.seed) for run, _ in bad}
        rows = [(o, str(i), int(s)) in keys for o, i, s in zip(results["optimizer"], results["instance"],
                                                                 results["seed"])]
        results = results[[not row for row in rows]]
        damaged.extend(f"{study.spec.name}: {run} ({problem})" for run, problem in bad)
    return results


def measure(claim: Claim, studies_dir: Path) -> Outcome:
    """Compute the claim's comparisons from its studies' stores and give the verdict."""
    test = claim.test
    wanted = list(dict.fromkeys(test.optimizers + test.than))
    frames: list[pd.DataFrame] = []
    missing: list[str] = []
    damaged: list[str] = []
    for name in claim.studies:
        results = _evaluation(studies_dir / f"{name}.yaml", test.metric, damaged)
        if results is None:
            missing.append(name)
            continue
        taken = {o for f in frames for o in f["optimizer"].unique()}
        frames.append(results[results["optimizer"].isin(set(wanted) - taken)])
    runs = pd.concat(frames) if frames else pd.DataFrame(columns=["optimizer"])
    absent = [o for o in wanted if o not in set(runs["optimizer"])]
    if missing or absent:
        reason = (f"no held-out evaluation of {', '.join(missing)} yet" if missing else
                  f"the studies' stores hold no runs of {', '.join(absent)}")
        return Outcome(claim, None, None, 0, 0, "not run", reason, missing)
    if test.metric not in runs.columns:
        raise UsageError(f"claim {claim.id}: the studies' results have no column {test.metric!r} "
                         f"(report budgets: {[c for c in runs.columns if c.startswith('regret@')]})")
    # Pair on the (instance, seed) cells every optimizer has, so all pairs see the same problems.
    cells = runs.pivot_table(index=["instance", "seed"], columns="optimizer", values=test.metric).dropna()
    tidy = cells.stack().rename(test.metric).reset_index()
    scores = scores_by_instance(tidy, test.metric)
    oriented = -scores if test.metric in HIGHER_IS_BETTER else scores  # lower is better from here on
    rows = []
    for ours in test.optimizers:
        table = paired_differences(oriented[[ours, *test.than]], ours).set_index("optimizer").loc[test.than]
        rows.append(table.reset_index().assign(reference=ours))
    pairs = pd.concat(rows, ignore_index=True)  # in the claim's order: each of optimizers, each of than
    verdict, reason = _verdict(test, pairs)
    if damaged:
        print(f"metaopt: warning: claim {claim.id}: {len(damaged)} damaged run(s) left out: {'; '.join(damaged[:3])}"
              + (" ..." if len(damaged) > 3 else ""), file=sys.stderr)
        reason += f"; {len(damaged)} damaged run(s) left out ({'; '.join(damaged[:3])}{' ...' if len(damaged) > 3 else ''})"
    seeds = int(cells.reset_index().groupby("instance")["seed"].nunique().min())
    return Outcome(claim, pairs, scores, len(scores), seeds, verdict, reason, [])


def _verdict(test: ClaimTest, pairs: pd.DataFrame) -> tuple[str, str]:
    significant = pairs["p_wilcoxon"] < test.alpha
    identical = (pairs["delta"] == 0) & (pairs["se"] == 0)
    wilcoxon = f" (Wilcoxon, α = {test.alpha:g})"
    if test.kind == "better":
        holds = significant & (pairs["delta"] > 0)
        against = significant & (pairs["delta"] < 0)
        text = (f"{int(holds.sum())} of {len(pairs)} pairs significantly in the claimed direction"
                + (f", {int(against.sum())} significantly against it" if against.any() else "") + wilcoxon)
    else:
        holds = ~significant
        text = f"{int(holds.sum())} of {len(pairs)} pairs without a significant difference{wilcoxon}"
        open_pairs = holds & ~identical
        if open_pairs.any():  # "not significant" is weak evidence of "alike": say how large a gap it leaves open
            reach = pairs["delta"].abs() + 1.96 * pairs["se"]
            widest = pairs.assign(reach=reach)[open_pairs].sort_values("reach").iloc[-1]
            text += (f"; the widest left open: {widest['reference']} vs {widest['optimizer']} "
                     f"{widest['delta']:+.3f} ± {widest['se']:.3f}, a 95% interval reaching "
                     f"{widest['reach']:.3f} (no evidence of a difference, not evidence of none)")
    same = pairs[identical]
    if len(same):  # e.g. a study's γ* that is a shipped design: the test holds trivially, and the page says why
        text += ("; the same result on every instance (one design under two names): "
                 + ", ".join(f"{row.reference} and {row.optimizer}" for row in same.itertuples()))
    verdict = "reproduced" if holds.all() else "not reproduced" if not holds.any() else "mixed"
    return verdict, text


def _figure(outcome: Outcome, path: Path) -> None:
    """Per-instance advantage of the claimed optimizer in each pair (> 0: it is better), with its mean ± 1 s.e."""
    test, scores, pairs = outcome.claim.test, outcome.scores, outcome.pairs
    assert scores is not None and pairs is not None  # drawn only for a measured claim
    sign = -1.0 if test.metric in HIGHER_IS_BETTER else 1.0
    data = pd.concat([pd.DataFrame({"pair": f"{row.reference} vs {row.optimizer}",
                                    "difference": sign * (scores[row.optimizer] - scores[row.reference])})
                      for row in pairs.itertuples()], ignore_index=True)
    sns.set_theme(style="whitegrid", context="notebook")
    fig, ax = plt.subplots(figsize=(6.4, 0.55 * data["pair"].nunique() + 1.4))
    sns.stripplot(data=data, x="difference", y="pair", ax=ax, color="0.55", size=4, jitter=0.15)
    for i, row in enumerate(pairs.itertuples()):  # the strip plot's rows, in the same order
        ax.errorbar(row.delta, i, xerr=row.se, fmt="o", color="crimson", capsize=4, zorder=3)
    ax.axvline(0.0, color="black", linewidth=1)
    ax.set_xlabel(f"advantage of the first named in {test.metric} per instance (seed means; > 0: it is "
                  "better); red: mean ± 1 s.e.", fontsize=9)
    ax.set_ylabel("")
    ax.set_title(f"{outcome.claim.id}: {outcome.verdict} ({outcome.instances} instances × {outcome.seeds} seeds)",
                 fontsize=10)
    fig.savefig(path, dpi=110, bbox_inches="tight", metadata={"Software": None})
    plt.close(fig)


def _pair_table(outcome: Outcome) -> list[str]:
    assert outcome.pairs is not None  # shown only for a measured claim
    lines = ["| claimed | other | advantage ± s.e. | claimed wins | Wilcoxon p |", "|---|---|---|---|---|"]
    for row in outcome.pairs.itertuples():
        lines.append(f"| {row.reference} | {row.optimizer} | {row.delta:+.3f} ± {row.se:.3f} | "
                     f"{row.reference_better}/{row.n} | {row.p_wilcoxon:.2g} |")
    return lines


def _means(outcome: Outcome) -> str:
    assert outcome.scores is not None  # shown only for a measured claim
    means = outcome.scores.mean()
    se = outcome.scores.std(ddof=1) / math.sqrt(len(outcome.scores))
    order = means.sort_values(ascending=outcome.claim.test.metric not in HIGHER_IS_BETTER).index
    return ", ".join(f"{name} {means[name]:.3f} ± {se[name]:.3f}" for name in order)


def _row(claim: Claim, verdict: str, size: str) -> str:
    """The claim's row of the page's summary table (``verdict`` in bold, ``size``: instances × seeds)."""
    return f"| [{claim.id}](#{claim.id}) | {claim.paper} {claim.where} | {verdict} | {size} | {', '.join(claim.studies)} |"


def _header(claim: Claim) -> list[str]:
    """The lines of the claim's section before its verdict: anchor, heading, the claim, what the paper reports."""
    return [f'<a id="{claim.id}"></a>', f"### {claim.id}", "", f"**Claim** ({claim.where}): {claim.claim}", "",
            *([f"The paper reports: {claim.reported}", ""] if claim.reported else [])]


READING = "**Reading:** "
"""How a claim's ``reading`` starts on the page (the line is the claims file's, written anew each time)."""


def _reading(claim: Claim) -> list[str]:
    """The page's lines for ``claim.reading``, placed last in its section; none without one."""
    return ["", READING + " ".join(claim.reading.split())] if claim.reading else []


def _published(page: Path) -> tuple[dict[str, str], dict[str, list[str]]]:
    """The summary-table row and the section (lines from its anchor on, less its reading) of every claim
    on a written page; called by :func:`write_reproductions` with ``only``, to keep the other claims."""
    rows: dict[str, str] = {}
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in page.read_text(encoding="utf-8").splitlines() if page.exists() else []:
        row = re.match(r"\| \[([^\]]+)\]\(#\1\) \|", line)
        anchor = re.fullmatch(r'<a id="([^"]+)"></a>', line)
        if row:
            rows[row.group(1)] = line
        elif anchor:
            current = sections.setdefault(anchor.group(1), [])
        elif line.startswith("## "):
            current = None
        if current is not None and not line.startswith(READING):  # a reading is the claims file's, not the page's
            current.append(line)
    for lines in sections.values():  # the blank line before the next anchor or heading is the writer's
        while lines and not lines[-1]:
            lines.pop()
    return rows, sections


def write_reproductions(claims_path: Path, studies_dir: Path, out: Path, figures_dir: Path,
                        only: list[str] | None = None) -> list[Outcome]:
    """Measure the claims and write ``out`` (Markdown) and ``figures_dir/<claim id>.png``; returns the outcomes.

    With ``only`` (claim ids), those claims are measured and every other claim's measurement (verdict,
    size, numbers, figure) is kept as ``out`` has it, while what the claims file says (where, the claim,
    what the paper reports, the studies, the reading) is written from it as it is now: a page can be
    brought up to date one study at a time, on a machine that holds only that study's store.
    """
    claims = load_claims(claims_path)
    known = [c.id for c in claims]
    if only is not None:
        unknown = [i for i in only if i not in known]
        if unknown:
            raise UsageError(f"--only: unknown claim {unknown[0]!r}; the claims file has {', '.join(known)}")
    published_rows, published_sections = _published(out) if only is not None else ({}, {})
    kept = [c.id for c in claims if only is not None and c.id not in only]
    absent = [i for i in kept if i not in published_rows or i not in published_sections]
    if absent:
        raise UsageError(f"--only: {out} has no section of claim {absent[0]!r} to keep; "
                         "measure it too (add it to --only, or leave --only out)")
    outcomes = {c.id: measure(c, studies_dir) for c in claims if c.id not in kept}
    figures_dir.mkdir(parents=True, exist_ok=True)
    lines = ["# The papers' claims, reproduced or not",
             "",
             f"Generated by `metaopt reproductions` from `{claims_path.as_posix()}` and the studies' stores "
             "(run the studies named below first; a claim whose study has not been run says so). Each test "
             "pairs optimizers over held-out instances (seed means per instance): the claimed optimizer's "
             "advantage (> 0: lower regret, or higher RYC / RTC, than the other) ± standard error over "
             "instances, the instances it wins, and a two-sided Wilcoxon signed-rank test. Normalized "
             "regret: 0 = best known loss, 1 = median random configuration; RYC, RTC: paper 002's relative "
             "change of the final loss and of the time when a stopping rule ends the run early.",
             "",
             "| claim | paper | verdict | instances × seeds | study |",
             "|---|---|---|---|---|"]
    for claim in claims:
        o = outcomes.get(claim.id)
        if o is None:  # the measured cells as published, the claims file's cells as it is now
            cells = published_rows[claim.id].split(" | ")
            lines.append(_row(claim, cells[2], cells[3]))
            continue
        size = f"{o.instances} × {o.seeds}" if o.pairs is not None else "—"
        lines.append(_row(claim, f"**{o.verdict}**", size))
    for paper, title in PAPERS.items():
        chosen = [c for c in claims if c.paper == paper]
        lines += ["", f"## {title}"]
        if not chosen:
            lines += ["", "No claim of this paper is listed yet."]
        for claim in chosen:
            o = outcomes.get(claim.id)
            if o is None:
                section = published_sections[claim.id]
                measured = next(k for k, line in enumerate(section) if line.startswith("**Verdict: "))
                lines += ["", *_header(claim), *section[measured:], *_reading(claim)]
                continue
            lines += ["", *_header(claim), f"**Verdict: {o.verdict}** — {o.reason}."]
            if o.pairs is None:
                commands = "; ".join(f"`metaopt study run studies/{name}.yaml`" for name in o.missing)
                lines += ["", f"Run {commands} and regenerate this page." if commands else "", *_reading(claim)]
                continue
            figure = figures_dir / f"{o.claim.id}.png"
            _figure(o, figure)
            lines += ["", f"Measured: {o.instances} held-out instances × {o.seeds} seeds, {o.claim.test.metric} "
                      f"(mean ± s.e. over instances): {_means(o)}.", "", *_pair_table(o), "",
                      f"![{o.claim.id}]({figure.relative_to(out.parent).as_posix()})", *_reading(claim)]
    atomic_write_text(out, "\n".join(lines) + "\n")
    return list(outcomes.values())
