"""The answer a study produced, in words, from its stored results (``<output>/answer.md``).

Every sentence is computed from the files the stages wrote, so the answer is regenerated with the
results and never goes stale: the ranking at the full budget (mean normalized regret ± s.e. over
instances), the Friedman/Nemenyi verdict for the best optimizer, and — when the study has them —
whether γ* is a design that was already known (a preset of SMAC's initial design),
the cost-aware comparison, the termination trade-off, the ablation path's main steps and the most
important parameters. Interpretation beyond that is the reader's (and the report's figures').
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from metaopt.analysis.anytime import mean_se_over_instances
from metaopt.analysis.held_out_runs import Evaluation
from metaopt.analysis.stats import rank_test, replicates_phrase, scores_by_instance
from metaopt.store.store import EvalFiles, StudyStore, read_gamma_star
from metaopt.core.store_utils import atomic_write_text


def _ranking(results: pd.DataFrame, column: str, alpha: float) -> list[str]:
    table = mean_se_over_instances(results, ["optimizer"], column).sort_values("mean")
    lines = ["At the full budget, mean normalized regret ± s.e. over "
             f"{replicates_phrase(results, 'held-out ')}: "
             + "; ".join(f"{r.optimizer} {r.mean:.3f} ± {r.se:.3f}" for r in table.itertuples()) + "."]
    scores = scores_by_instance(results, column)
    if scores.shape[1] >= 3 and len(scores) >= 2:
        test = rank_test(scores, alpha)
        best = test.ranks.index[0]
        worse = [name for name, rank in test.ranks.items() if rank - test.ranks[best] >= test.critical_difference]
        tied = [name for name in test.ranks.index[1:] if name not in worse]
        verdict = (f"{best} has the best average rank ({test.ranks[best]:.2f}); " + test.describe() + ". ")
        if not test.rejected:
            verdict += "The differences in rank are not significant."
        else:
            verdict += (f"{best} ranks significantly better than {', '.join(worse) or 'none of the others'}"
                        + (f" and is not distinguishable from {', '.join(tied)}." if tied else "."))
        lines.append(verdict)
    return lines


def _cost(files: EvalFiles) -> list[str]:
    path = files.cost_csv
    if not path.exists():
        return []
    table = pd.read_csv(path)
    parts = [f"{r.optimizer} {r.regret_at_cost:.3f}, reaching the target in {r.reached:.0%} of runs"
             + (f" (median cost {r.median_cost_to_target_rel:.2f}× the equal cost budget)"
                if np.isfinite(r.median_cost_to_target_rel) else " (median cost ∞: at most half of the runs reach it)")
             for r in table.itertuples()]
    return ["Under equal cost, regret is: " + "; ".join(parts) + ". (The target is the cost reference's median final "
            "loss per instance; see eval/cost.md.)"]


def _termination(files: EvalFiles) -> list[str]:
    path = files.termination_csv
    if not path.exists():
        return []
    table = pd.read_csv(path).sort_values("rtc", ascending=False)
    parts = [f"{r.optimizer} saves {r.rtc:.0%} of the cost (stops early in {r.stopped:.0%} of runs) at RYC "
             f"{r.ryc:+.3f} (regret {r.regret_stopped:.3f} vs {r.regret_full:.3f} when run to the end)"
             for r in table.itertuples()]
    return ["Automatic termination: " + "; ".join(parts) + "."]


def _ablation(store: StudyStore) -> list[str]:
    lines = []
    for ablation in store.stored_ablations():
        path = ablation.variant_csv("path")
        if not path.exists():
            continue
        table = pd.read_csv(path)
        steps = table[table["step"] > 0].sort_values("share", ascending=False).head(3)
        parts = [f"{r.parameters.split(';')[0]} ({r.share:.0%})" for r in steps.itertuples()]
        lines.append(f"Ablation {ablation.name}: the largest shares of the improvement come from "
                     + ", ".join(parts) + ".")
    return lines


def _importance(store: StudyStore) -> list[str]:
    lines = []
    for meta in [*store.stored_arms(), store]:  # as the folders' paths sort: arms/... before importance/
        path = meta.importance.fanova_csv
        if not path.exists():
            continue
        table = pd.read_csv(path)
        main = table[table["kind"] == "main"].sort_values("importance", ascending=False).head(3)
        where = meta.root.relative_to(store.root)
        lines.append(f"fANOVA ({'meta-archive' if str(where) == '.' else where}): the most important parameters "
                     "are " + ", ".join(f"{r.parameter} ({r.importance:.0%} of the variance)"
                                        for r in main.itertuples()) + ".")
    return lines


def _known_designs(store: StudyStore) -> list[str]:
    """A sentence for each γ* (of the study, or of each restriction's arm) that is a design SMAC's
    initial design already held (a preset or a named γ file): the meta-search found nothing better on
    the training instances than that design."""
    lines = []
    for meta in [store, *store.stored_arms()]:
        try:
            name = read_gamma_star(meta.gamma_star_json).get("known_design")
        except (OSError, ValueError):  # a damaged file is a UsageError, a ValueError
            continue  # no γ* (yet), or a damaged one, which the stage that reads it reports
        if name:
            label = "γ*" if meta is store else f"γ* ({meta.name})"
            lines.append(f"{label} is the known design {name}: the meta-search found no configuration that beat it "
                         "on the training instances.")
    return lines


def write_answer(output: Path, evaluation: Evaluation | None, alpha: float = 0.05) -> Path | None:
    """Write ``<output>/answer.md`` from the stored results; None (writing nothing) without held-out runs.

    Called by :func:`metaopt.analysis.report.write_report` before it builds the report, with the
    held-out runs it read (the study's and its companions'); the ranking is at the full budget."""
    if evaluation is None:
        return None
    store = StudyStore(output)
    results = evaluation.regret_at(evaluation.budget)
    lines = [*_ranking(results, "regret", alpha), *_known_designs(store), *_cost(store.eval_files),
             *_termination(store.eval_files), *_ablation(store), *_importance(store)]
    note = evaluation.damage_note()
    if note:
        lines.insert(0, note + ".")
    path = store.answer_file
    atomic_write_text(path, "\n\n".join(lines) + "\n")
    return path
