"""The design-analysis report of a study's output folder: one self-contained HTML file and a Markdown twin.

``write_report(OUTPUT)`` reads what the stages stored and writes ``OUTPUT/report/``::

    report.html         images embedded as data: URIs, tables as HTML, inline CSS
    report.md           the same content; figures as files below
    figures/*.png

Sections (each only when its data exists): question, description, design and answer of the study;
γ* (paper 004 Table 5 style) and the meta-archive's top configurations (Fig. 1); the search at the
meta level (best training objective against meta-trials and CPU-hours for the search, its
baselines and the noise bands, :mod:`metaopt.analysis.search_curves`); the held-out
evaluation (table, anytime curves, box plots); Friedman + Nemenyi critical-difference diagrams
at an intermediate and the full budget; cost versus accuracy for cost-aware studies; RYC/RTC when
``eval/termination.csv`` (per stopped optimizer: RYC, RTC ± s.e.) exists; ablation paths
(``ablation/<name>/``); parameter importance (``importance/``). The folder is replaced atomically.
"""

from __future__ import annotations

import base64
import html
import json
import math
import numbers
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, cast

import numpy as np
import pandas as pd

from metaopt.analysis import figures
from metaopt.analysis.answer import write_answer
from metaopt.analysis.anytime import budget_grid, regret_at
from metaopt.analysis.clock_curves import clock_curves, clock_figure, clock_table
from metaopt.analysis.figures import Figure
from metaopt.analysis.held_out_runs import Evaluation, read_runs_file, stored_runs
from metaopt.analysis.meta_model import meta_archive_model
from metaopt.analysis.stats import (average_ranks, empty_runs, paired_differences, rank_test, replicate_columns,
                                    scores_by_instance)
from metaopt.core.budget import Budget, BudgetUnit, split_spec
from metaopt.core.errors import UsageError
from metaopt.analysis.aliases import kept, label_containing, names_of, run_identity, same_configuration_labels
from metaopt.store.run_io import RunResult
from metaopt.store.store import EvalFiles, ReportFiles, StudyStore, read_gamma_star
from metaopt.store.study_spec import Companion, StudySpec, companion_studies

TOP_TABLE_ROWS = 20


@dataclass(frozen=True)
class Table:
    caption: str
    frame: pd.DataFrame  # cells already formatted as text


@dataclass
class Section:
    title: str
    blocks: list[str | Table | Figure] = field(default_factory=list)  # str: a paragraph of text


# -- reading the store --------------------------------------------------------------------------

def _eval_files(output: Path) -> EvalFiles:
    """``OUTPUT/eval``'s files; folders written before the eval/ subfolder existed keep them at the top level."""
    return StudyStore(output).readable_eval_files()


def study_budget(spec: str, amount: float, unit: str) -> Budget:
    """The study's budget on the report's budget axis, from a run's summary (its budget spec, amount, unit).

    Full evaluations and cost units are used as they are. A typical-cost budget (``30dc``, ``100c``)
    is resolved per instance into cost units; the report measures it in typical full-evaluation costs
    (30 for ``30dc``: the factor d is kept in the label), scaling each run's cost alike.
    """
    number, suffix = split_spec(spec)
    if suffix.endswith("c"):
        return Budget(number, "typical_cost", spec)
    return Budget(amount, cast(BudgetUnit, unit), spec)


def _study_optimizers(study: StudySpec) -> set[str]:
    """Names of the optimizers the study evaluates (names or variants' names; none without an evaluation)."""
    return set(study.evaluation.optimizer_names()) if study.evaluation else set()


def _failed_runs(output: Path) -> int:
    return len(StudyStore(output).failed_eval_runs())


def load_evaluation(output: Path, study: StudySpec, companions: list[Companion]) -> Evaluation | None:
    """The finished runs under ``eval/runs`` of the study's optimizers (None when there are none), and
    those the ``companions`` (:func:`metaopt.store.study_spec.companion_studies`) add: from a companion's
    store, or from its runs file when the store holds none of them.

    Runs of other optimizers, e.g. the full-budget twins behind RYC/RTC, stay out of the comparison.
    """
    if study.evaluation is None:
        return None
    damaged: list[str] = []
    runs = list(stored_runs(output, _study_optimizers(study), damaged))
    failed, read_from = _failed_runs(output), {}
    for k, companion in enumerate(companions):
        theirs = list(stored_runs(companion.study.output, companion.optimizers, damaged))
        if theirs:
            failed += _failed_runs(companion.study.output)
            read_from[companion.study.spec.name] = f"stored in {companion.study.output}"
        elif companion.runs_file is not None and companion.runs_file.exists():
            theirs = read_runs_file(companion.runs_file, companion.study.spec.benchmark,
                                    companion.study.spec.budget, companion.optimizers,
                                    f"{study.name}: field 'report_with[{k}].runs'")
            read_from[companion.study.spec.name] = f"read from its runs file {companion.runs_file}"
        runs += [run for run in theirs if run.seed in companion.seeds]  # seeds another companion may hold
    # one configuration under several names: one optimizer, labelled with all of them (analysis.aliases)
    named: dict[str, Mapping[str, Any] | None] = {}
    for run in runs:
        named.setdefault(run.optimizer, run_identity(run.result.summary.get("config") or {},
                                                     run.result.summary.get("workers")))
    labels = same_configuration_labels(named, study.evaluation.optimizer_names())
    rows: list[dict[str, Any]] = []
    traces: dict[tuple[str, str, int], pd.DataFrame] = {}
    on_clock: list[tuple[dict[str, Any], RunResult]] = []
    untimed: set[str] = set()
    configs: dict[str, dict[str, Any]] = {}
    budget: Budget | None = None
    for run in runs:
        if not kept(run.optimizer, labels):
            continue
        name = labels[run.optimizer]
        summary = run.result.summary
        budget = budget or study_budget(str(summary["budget_spec"]), float(summary["budget"]), summary["budget_unit"])
        configs.setdefault(name, summary.get("config") or {})
        rows.append({"optimizer": name, "instance": run.instance, "seed": run.seed,
                     **{k: v for k, v in summary.items() if k not in ("config", "reference", "optimizer", "instance",
                                                                     "seed")}})
        trace = run.result.trace
        spent = trace[budget.spent_column]
        if budget.unit == "typical_cost":
            spent = spent * budget.amount / float(summary["budget"])
        traces[(name, run.instance, run.seed)] = pd.DataFrame({"spent": spent, "normalized_regret":
                                                                        trace["normalized_regret"]})
        if "workers" in summary and "sim_time" in trace.columns:
            on_clock.append(({"optimizer": name, "instance": run.instance, "seed": run.seed}, run.result))
        elif "workers" in summary:  # from a runs file written before runs files kept the simulated times
            untimed.add(name)
    if damaged:
        print(f"metaopt: warning: {output}: {len(damaged)} damaged run(s) left out of the report: "
              + "; ".join(damaged[:3]) + (" ..." if len(damaged) > 3 else ""), file=sys.stderr)
    if not rows or budget is None:
        return None
    return Evaluation(pd.DataFrame(rows), traces, configs, budget, failed, read_from, damaged,
                      clock_curves(on_clock) if on_clock else None, sorted(untimed))


def parse_budget(spec: str, total: Budget) -> Budget:
    """A budget given like the study's (``10d``, ``70``, ``3600s``, ``10dc``), checked against the study's ``total``."""
    number, suffix = split_spec(spec)
    total_number, total_suffix = split_spec(total.spec)
    if total.unit == "typical_cost" or suffix.endswith("c"):
        if suffix != total_suffix:
            raise UsageError(f"--budgets: {spec} must be in the unit of the study's budget {total.spec}")
        budget = Budget(number, total.unit, spec)
    elif suffix == "d":
        if total_suffix != "d":
            raise UsageError(f"--budgets: {spec} is in units of d, but the study's budget {total.spec} is not")
        budget = Budget.parse(spec, total.amount / total_number)
    else:
        budget = Budget.parse(spec, 1)
    if budget.unit != total.unit or budget.amount > total.amount * (1 + 1e-9):
        raise UsageError(f"--budgets: {spec} must be in the unit of the study's budget and at most {total.spec}")
    return budget


def report_budgets(study: StudySpec, total: Budget, requested: list[str] | None) -> list[Budget]:
    """The budgets of box plots and CD diagrams: ``requested``, else the study's report_budgets, else
    25 % of the budget; the full budget always comes last."""
    specs = requested if requested else study.evaluation.report_budgets if study.evaluation else []
    budgets = [parse_budget(str(s), total) for s in specs]
    if not budgets or all(b.amount == total.amount for b in budgets):
        number, suffix = split_spec(total.spec)
        budgets.append(Budget(total.amount / 4, total.unit, f"{number / 4:g}{suffix}"))
    budgets = sorted({b.amount: b for b in budgets if b.amount < total.amount}.values(), key=lambda b: b.amount)
    return budgets + [total]


# -- formatting ---------------------------------------------------------------------------------

def _is_number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


def fmt(value: Any) -> str:
    """Table cell text: floats to 3 significant digits (no exponent below a million), missing values as a dash."""
    if value is None or isinstance(value, float) and math.isnan(value):
        return "—"
    if isinstance(value, (bool, np.bool_)):
        return str(bool(value))
    if isinstance(value, (float, np.floating)):
        return f"{value:.0f}" if 1e3 <= abs(float(value)) < 1e6 else f"{value:.3g}"
    return str(value)


def _count_of(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def _text_table(df: pd.DataFrame) -> pd.DataFrame:
    return df.map(fmt).astype(str)


# -- sections -----------------------------------------------------------------------------------

def _unfinished(evaluation: Evaluation | None, companions: list[str]) -> str:
    """"; so far ..." naming the optimizers of a companion study that have fewer finished runs than the
    study's own optimizers (a companion still running), "" when none has: tables and tests then
    compare every optimizer on the instances all of them finished, which the report must say."""
    if evaluation is None or not companions:
        return ""
    counts = evaluation.runs.groupby("optimizer").size()
    full = int(counts.drop(index=companions, errors="ignore").max()) if len(counts) > len(companions) else 0
    short = [f"{name} {counts[name]} of {full} runs" for name in companions if counts[name] < full]
    return (f"; so far {', '.join(short)} (tables and tests use the instances every optimizer finished)"
            if short else "")


def study_section(study: StudySpec, output: Path, evaluation: Evaluation | None,
                  archive: pd.DataFrame | None, companions: list[Companion]) -> Section:
    """Question, description, design (with where the ``companions``' runs were read) and answer of the study."""
    section = Section("Study")
    if study.question:
        section.blocks.append(f"Question: {study.question.strip()}")
    if study.description:
        section.blocks.append(study.description.strip())
    design = [f"Benchmark {study.benchmark}, budget {study.budget} per optimizer run."]
    meta = study.meta
    if meta is not None:
        training = f"{archive['instance'].nunique()} " if archive is not None else ""
        design.append(f"Meta-optimization: SMAC over {training}training instances, {meta.trials} trials "
                      f"per meta-seed, "
                      f"meta-seeds {meta.seeds}, design space {meta.restriction or 'full'}, "
                      f"objective {meta.objective_text()}.")
    ev = study.evaluation
    if evaluation is not None:
        runs = evaluation.runs
        design.append(f"Held-out evaluation: {runs['optimizer'].nunique()} optimizers "
                      f"({', '.join(sorted(runs['optimizer'].unique()))}) × {runs['instance'].nunique()} instances × "
                      f"{_count_of(runs['seed'].nunique(), 'seed')} = {len(runs)} finished runs"
                      + (f", {evaluation.n_failed} failed" if evaluation.n_failed else "") + ".")
        empty = empty_runs(runs)
        if empty:
            design.append(empty + ".")
        note = evaluation.damage_note()
        if note:
            design.append(note + ".")
    elif ev:
        names = ev.optimizer_names()
        design.append(f"Held-out evaluation of {', '.join(names)}: no finished run yet.")
    for companion in companions:
        names = sorted(companion.optimizers)
        found = sorted(set(evaluation.runs.loc[evaluation.runs["seed"].isin(companion.seeds), "optimizer"])
                       & set(names)) if evaluation is not None else []
        seeds = ("same instances and seeds" if study.evaluation is None or companion.seeds == study.evaluation.seeds
                 else f"same instances, seeds {companion.seeds}")
        name, where = companion.study.spec.name, (evaluation.read_from if evaluation is not None else {})
        source = where.get(name) or (f"no runs in {companion.study.output}" + (
            f" nor a runs file {companion.runs_file}" if companion.runs_file else ""))
        design.append(f"The runs of {', '.join(found) or 'no optimizer'} come from the companion study "
                      f"{name} ({companion.study.path}, {source}; {seeds})"
                      + (f"; not run yet: {', '.join(n for n in names if n not in found)}" if len(found) < len(names)
                         else "") + _unfinished(evaluation, found) + ".")
    section.blocks.append("Design: " + " ".join(design))
    # The authors' reading (the study file's ``answer``), then what the stored results say (answer.md).
    interpretation = study.answer.strip()
    if interpretation:
        section.blocks.append(f"Answer: {interpretation}")
    answer_file = StudyStore(output).answer_file
    measured = answer_file.read_text().strip() if answer_file.exists() else ""
    if measured:
        section.blocks.append(f"{'Measured' if interpretation else 'Answer'}: {measured}")
    return section


def _design_configs(evaluation: Evaluation | None) -> dict[str, dict[str, Any]]:
    """Evaluated optimizers that are points of the design space (peers describe themselves with 'peer')."""
    if evaluation is None:
        return {}
    return {name: cfg for name, cfg in sorted(evaluation.configs.items()) if cfg and "peer" not in cfg}


def _archive_configs(archive: pd.DataFrame) -> pd.DataFrame:
    """One row per configuration (index: hash) of the meta-archive, one column per parameter."""
    columns = [c for c in archive.columns if c.startswith("gamma.")]
    configs = archive.drop_duplicates("hash").set_index("hash")[columns]
    return configs.rename(columns=lambda c: c.removeprefix("gamma."))


def _per_seed_winners(archive: pd.DataFrame) -> list[dict[str, Any]]:
    """γ* chosen by the stage's rule within each meta-seed's trials alone (Table 5's brackets)."""
    from metaopt.store.meta_archive import choose_gamma_star

    configs = _archive_configs(archive)
    winners = []
    for _, trials in archive.groupby("meta_seed"):
        rows = [{"hash": h, "gamma": configs.loc[h].dropna().to_dict()} for h in trials["hash"].unique()]
        winners.append(choose_gamma_star(trials, list(trials["instance"].unique()), rows)["config"])
    return winners


def _forced_parameters(restriction: str | None) -> set[str]:
    """Parameters a restriction fixes (constants, single choices) or derives (tied): Table 5's "(!)"."""
    if not restriction:
        return set()
    from ConfigSpace import Constant

    from metaopt.spaces.design_space import design_space
    from metaopt.spaces.restrictions import get_restriction

    space = get_restriction(restriction).space()
    free = {hp.name for hp in space.values()
            if len(getattr(hp, "choices", (0, 1))) > 1 and not isinstance(hp, Constant)}
    return set(design_space()) - free


def _shown(param: str, value: Any) -> tuple[str, Any]:
    """Log-parameters (``log_*``) are shown as their values."""
    if param.startswith("log_") and _is_number(value):
        return param.removeprefix("log_"), math.exp(value)
    return param, value


def _cell(values: list[Any]) -> str:
    """First value, then in brackets the range (numbers) or the other levels found in individual meta-seeds."""
    head, rest = values[0], values[1:]
    if not rest:
        return fmt(head)
    if all(_is_number(v) for v in values):
        low, high = min(values), max(values)
        return fmt(head) + (f" [{fmt(low)}, {fmt(high)}]" if low != high else "")
    others = sorted({fmt(v) for v in rest} - {fmt(head)})
    return fmt(head) + (f" [{', '.join(others)}]" if others else "")


def gamma_table(study: StudySpec, star: dict[str, Any] | None, archive: pd.DataFrame | None,
                evaluation: Evaluation | None) -> Table | None:
    """Paper 004 Table 5 style: rows = parameters, columns = γ* of this study and the evaluated presets."""
    from metaopt.spaces.design_space import design_space

    columns: dict[str, list[dict[str, Any]]] = {}
    name = study.name
    if star is not None:
        winners = _per_seed_winners(archive) if archive is not None and archive["meta_seed"].nunique() > 1 else []
        columns[f"γ* ({name}, {study.benchmark})"] = [star["config"]] + winners
    columns.update({opt: [cfg] for opt, cfg in _design_configs(evaluation).items()
                    if "gamma_star" not in names_of(opt) or star is None})
    if not columns:
        return None
    order = list(design_space())
    params = sorted({p for configs in columns.values() for p in configs[0]},
                    key=lambda p: (order.index(p) if p in order else len(order), p))
    restriction = study.meta.restriction if study.meta else None
    # a study with a list of restrictions has its γ* in its arms, never here (star is None)
    forced = _forced_parameters(restriction) if star is not None and not isinstance(restriction, list) else set()
    rows = []
    for param in params:
        row = {"parameter": _shown(param, 0.0)[0]}
        for column, configs in columns.items():
            values = [_shown(param, c[param])[1] for c in configs if param in c]
            row[column] = "—" if param not in configs[0] else _cell(values) + (
                " (!)" if column.startswith("γ*") and param in forced else "")
        rows.append(row)
    brackets = (" Brackets: range (numbers) or other values (categories) of the configuration each "
                "meta-seed would have chosen alone." if star is not None and archive is not None
                and archive["meta_seed"].nunique() > 1 else "")
    caption = (f"Configurations as points of the design space (γ*: mean meta-objective "
               f"{fmt(star['mean_objective'])} on {star['n_instances']} training instances"
               + (" the search did not run" if _selected_elsewhere(star) else "")
               + ", chosen among "
               f"{star['n_configurations']} configurations in {star['n_trials']} SMAC trials"
               + (f"; it is the known design {star['known_design']} of SMAC's initial design" if star.get("known_design")
                  else "") + ")." if star else
               "Evaluated presets as points of the design space.")
    caption += brackets + (" (!): fixed or derived by the restriction." if forced else "") + \
        " log_* parameters are shown as their values (e.g. eta_fid = exp(log_eta_fid)); — : inactive."
    return Table(caption, pd.DataFrame(rows))


def _surrogate_scores(archive: pd.DataFrame, configs: pd.DataFrame, space) -> pd.Series:
    """Each configuration's mean objective over all training instances as the meta-archive's random forest
    (:mod:`metaopt.analysis.meta_model`) predicts it: configurations seen on few instances are compared fairly."""
    mean, _ = meta_archive_model(archive, space).predict(configs.to_dict(orient="records"))
    return pd.Series(mean, index=configs.index)


def shared_settings(configs: pd.DataFrame) -> list[str]:
    """``name = value`` for each column of ``configs`` (configurations as rows, NaN where a parameter is
    inactive) that has one value wherever it is active, for the beeswarm's caption; a parameter active
    in only some of the rows says in how many ("(the 3 that use it)"): a forest's settings among GP
    designs would otherwise read as settings of every design shown. Columns never active are left out."""
    shared = []
    for name in configs.columns:
        active = configs[name].dropna()
        if len(active):
            shared.append(f"{name} = {fmt(active.iloc[0])}"
                          + ("" if len(active) == len(configs) else f" (the {len(active)} that use it)"))
    return shared


def meta_section(study: StudySpec, output: Path, evaluation: Evaluation | None) -> Section | None:
    """γ* (Table 5 style) and the beeswarm of the meta-archive's top configurations (Fig. 1)."""
    from metaopt.spaces.design_space import design_space

    store = StudyStore(output)
    star_path = store.gamma_star_json
    archive, note = store.read_archive()
    star = read_gamma_star(star_path) if star_path.exists() else None
    table = gamma_table(study, star, archive, evaluation)
    if table is None:
        return None
    title = "Meta-optimization: γ* and the configurations compared" if star else "Configurations compared"
    section = Section(title, [table])
    if note:
        section.blocks.insert(0, f"Warning: {note}.")
    if archive is not None and archive["hash"].nunique() >= 5:
        space = design_space()
        configs = _archive_configs(archive)
        scores = _surrogate_scores(archive, configs, space)
        k = min(80, max(10, len(configs) // 5))
        top = configs.loc[scores.sort_values(kind="stable").index[:k]]
        varied = [p for p in top.columns if p in space and top[p].dropna().astype(str).nunique() > 1]
        fixed = shared_settings(top[[p for p in top.columns if p in space and p not in varied]])
        caption = (f"Top {len(top)} of {len(configs)} configurations of the meta-archive ({len(archive)} SMAC trials "
                   f"on {archive['instance'].nunique()} training instances, {archive['meta_seed'].nunique()} "
                   f"meta-seeds), ranked by a random forest's predicted mean objective over all training instances; "
                   f"each parameter on [0, 1] of its design-space range (log scale where it is log), its bounds or "
                   f"levels written above the points. Red diamond: γ*."
                   + (f" Same in all shown configurations: {', '.join(fixed)}." if fixed else ""))
        highlight = star["config"] if star else {}
        section.blocks.append(figures.beeswarm(top[varied], highlight, space, caption))
    return section


def search_section(study: StudySpec, output: Path) -> Section | None:
    """The search at the meta level (issue: see the search): the incumbent's mean training objective
    against meta-trials and CPU-hours for the search and its baselines, the noise bands, a table per
    search and meta-seed, and what limits the search, in numbers. None without a stored search."""
    from metaopt.analysis.search_curves import noise_bands, search_curves, search_summary

    store = StudyStore(output)
    curves = search_curves(store)
    if curves.empty or curves["best"].isna().all():
        return None
    bands = noise_bands(store)
    baselines = curves["search"].nunique() > 1
    caption = ("Best mean objective on the training instances so far (the γ* rule applied to the trials so far: "
               "the lowest mean over instances among configurations run on all of them), one line per search and "
               "meta-seed, against meta-trials (log) and the CPU time of their inner runs (log; the process time "
               "of each run, or its wall time on the machine that ran it for runs stored before process times "
               "were recorded)."
               + (" Baselines spend their trials with the search's inner seed: random search over the same space "
                  "(each configuration on every training instance in turn) and the known designs alone (each on "
                  "every instance)." if baselines else " No meta-level baselines were run (meta.baselines).")
               + (" Shaded: a design re-run on more seeds, mean ± 1 s.d. of its mean objective over the seeds: "
                  "differences between designs smaller than this band are noise." if not bands.empty else ""))
    section = Section("The search at the meta level", [figures.search_progress(curves, bands, caption)])
    summary = search_summary(curves)
    summary["cpu_hours"] = summary["cpu_hours"].map(lambda v: f"{v:.2f}")
    summary["best objective"] = summary["best objective"].map(fmt)
    section.blocks.append(Table("Per search and meta-seed: trials, CPU-hours of its inner runs, and the final "
                                "incumbent's mean objective on the training instances.", summary))
    star = read_gamma_star(store.gamma_star_json) if store.gamma_star_json.exists() else None  # read once, for both
    selection = _selection_table(store, star)
    if selection is not None:
        section.blocks.append(selection)
    section.blocks.append(_search_limits(study, store, bands, star))
    return section


def _selected_elsewhere(star: dict[str, Any] | None) -> int:
    """How many training instances the search did not run γ*'s selection ran on (``meta.select_instances``
    in ``gamma_star.json``); 0 when it ran on the search's own."""
    return len(((star or {}).get("selection") or {}).get("instances") or [])


def _selection_table(store: StudyStore, star: dict[str, Any] | None) -> Table | None:
    """γ*'s selection (``meta.select_top``) from ``meta/selection.csv``: each candidate's mean objective on
    the search's own seeds and on the selection's fresh seeds, side by side, so that a reader sees how
    much of a candidate's lead was its luck (the winner's curse) and whether the difference that chose
    γ* is larger than its standard error (``star``: the study's γ* record, which names the selection's
    seeds). None when the study made no selection."""
    if not store.selection_csv.exists():
        return None
    table = pd.read_csv(store.selection_csv)
    table["known_design"] = table["known_design"].fillna("").astype(str)
    seeds = len(((star or {}).get("selection") or {}).get("seeds") or [])
    shown = pd.DataFrame({
        "candidate": [h + (f" ({name})" if name else "") for h, name in zip(table["hash"], table["known_design"])],
        "search's seeds": [f"{fmt(m)} ({int(n)} instances)" for m, n in
                           zip(table["search_mean"], table["search_instances"])],
        "fresh seeds": [f"{fmt(m)} ± {fmt(se)}" for m, se in zip(table["selection_mean"], table["selection_se"])],
        "difference to γ*": ["" if chosen else f"{fmt(d)} ± {fmt(se)}" for d, se, chosen in
                             zip(table["difference_to_gamma_star"], table["difference_se"],
                                 table["chosen"])],
        "γ*": ["yes" if chosen else "" for chosen in table["chosen"]],
    })
    fresh = (f"{seeds} fresh seeds" if seeds else "fresh seeds") + " per instance"
    elsewhere = _selected_elsewhere(star)
    fresh += (f" of {elsewhere} other training instances, which the search did not run (meta.select_instances)"
              if elsewhere else "")
    return Table(f"γ*'s selection: each candidate's mean objective over the training instances on the search's own "
                 f"seeds and on {fresh} (± s.e. over instances), and its paired difference to γ* there "
                 "(> 0: γ* is better). Candidates are the best configurations of the search and the best known "
                 "design (name in parentheses) when it ran on every training instance; a drop from the first column "
                 "to the second is the search's selection of its luckiest runs.", shown)


def _search_limits(study: StudySpec, store: StudyStore, bands: pd.DataFrame, star: dict[str, Any] | None) -> str:
    """What limits the search, in numbers: trials and instance coverage per configuration, the noise
    against the differences it must resolve, the size of the space, and whether γ* (``star``, the study's
    γ* record; None before one is chosen) is a known design."""
    from metaopt.analysis.search_curves import search_trials
    from metaopt.spaces.design_space import design_space
    from metaopt.spaces.restrictions import get_restriction

    facts = []
    trials = search_trials(store)
    if not trials.empty:
        coverage = trials.groupby("hash")["instance"].nunique()
        n = trials["instance"].nunique()
        facts.append(f"{len(trials)} trials{'' if store.archive_csv.exists() else ' so far (the search is under way)'} "
                     f"ran {len(coverage)} configurations on {n} training instances: a "
                     f"configuration was seen on {coverage.median():g} of them (median), and "
                     f"{int((coverage == n).sum())} configurations on all {n}")
    restriction = study.meta.restriction if study.meta is not None else None
    if isinstance(restriction, str) or restriction is None:
        space = get_restriction(restriction).space() if restriction else design_space()
        facts.append(f"the searched space has {len(space)} parameters ({restriction or 'the full design space'})")
    if not bands.empty:
        noise = bands.set_index("design")
        spread = ", ".join(f"{design} {row['mean']:.4f} ± {0.0 if pd.isna(row['std']) else row['std']:.4f}"
                           for design, row in noise.iterrows())
        facts.append(f"re-run on {int(noise['count'].iloc[0])} more seeds per training instance, the mean objective "
                     f"(± 1 s.d. over seeds) is {spread}")
    if star is not None:
        facts.append("γ* is the known design " + star["known_design"] if star.get("known_design")
                     else "γ* is a configuration the search proposed, not a known design")
    return "What limits the search: " + "; ".join(facts) + "."


def _base_caption(study: StudySpec, runs: pd.DataFrame, budget: Budget) -> str:
    shown = (f"{budget.spec} (in typical full-evaluation costs of each instance)" if budget.unit == "typical_cost"
             else str(budget))
    one_instance = ("; with one instance, every ± s.e., rank and paired test is over its seeds"
                    if replicate_columns(runs) != ["instance"] else "")
    return (f"{study.benchmark}: {runs['instance'].nunique()} held-out instances × "
            f"{_count_of(runs['seed'].nunique(), 'seed')}, budget {shown}, {runs['optimizer'].nunique()} optimizers"
            + one_instance)


def anytime_curves(evaluation: Evaluation, scenario: str) -> pd.DataFrame:
    """Seed-averaged regret per optimizer and instance on a log grid from the median first evaluation to B.

    The grid starts where half the runs have their first result (with heavy-tailed costs the latest
    first evaluation can come after most of the budget); before its first evaluation a run has no
    regret and is left out of the means at that budget.
    """
    first = float(np.median([float(t["spent"].iloc[0]) for t in evaluation.traces.values() if len(t)]))
    grid = budget_grid(first, evaluation.budget.amount)
    frames = [pd.DataFrame({"optimizer": o, "instance": i, "seed": s, "budget": grid,
                            "regret": regret_at(t["spent"].to_numpy(), t["normalized_regret"].to_numpy(), grid)})
              for (o, i, s), t in evaluation.traces.items() if len(t)]
    curves = pd.concat(frames, ignore_index=True)
    curves = curves.groupby(["optimizer", "instance", "budget"], as_index=False)["regret"].mean()
    return curves.assign(scenario=scenario)


def _summary_table(runs: pd.DataFrame, scores: dict[str, pd.DataFrame], total: Budget, base: str) -> Table:
    """Mean ± s.e. of the regret at each budget, mean rank at the full budget, runs and wall time per optimizer."""
    final = scores.get(total.spec, pd.DataFrame())
    summary = pd.DataFrame(index=sorted(runs["optimizer"].unique()))
    for label, table in scores.items():
        summary[f"regret@{label}"] = [f"{table[o].mean():.4f} ± {table[o].sem():.4f}" if o in table else "—"
                                      for o in summary.index]
    ranks = average_ranks(final) if len(final) else pd.Series(dtype=float)
    summary[f"mean rank@{total.spec}"] = [fmt(ranks.get(o, math.nan)) for o in summary.index]
    summary["runs"] = runs.groupby("optimizer").size().astype(str)
    summary["wall time per run (s)"] = runs.groupby("optimizer")["wall_time_s"].mean().map(fmt)
    summary = summary.loc[final.mean().sort_values(kind="stable").index.union(summary.index, sort=False)]
    return Table(f"Mean normalized regret ± 1 s.e. over the instances every optimizer finished (mean over seeds per "
                 f"instance) at budgets {', '.join(scores)}; mean rank over instances (1 = best) at the full budget. "
                 f"{base}.", summary.reset_index(names="optimizer"))


def _paired_table(table: pd.DataFrame, label: str, base: str) -> Table:
    """γ* (else the optimizer with the lowest mean regret) against every other optimizer at one budget,
    paired by instance (a difference of two optimizers is less noisy than either's mean)."""
    reference = label_containing(table.columns, "gamma_star") or str(table.mean().idxmin())
    paired = paired_differences(table, reference)
    shown = pd.DataFrame({
        "optimizer": paired["optimizer"],
        f"Δ regret@{label} (other − {reference})": [f"{d:+.4f} ± {e:.4f}" for d, e in zip(paired["delta"], paired["se"])],
        f"{reference} better on": [f"{b}/{n}" for b, n in zip(paired["reference_better"], paired["n"])],
        "Wilcoxon p": paired["p_wilcoxon"].map(lambda p: f"{p:.2g}"),
    })
    return Table(f"Paired comparison with {reference} at budget {label}: per instance, the other optimizer's "
                 f"seed-mean regret minus {reference}'s; mean ± 1 s.e. over instances (> 0: {reference} is better), "
                 f"the instances where {reference} is better, and the two-sided Wilcoxon signed-rank test. {base}.",
                 shown)


def evaluation_sections(study: StudySpec, output: Path, evaluation: Evaluation, budgets: list[Budget],
                        alpha: float) -> list[Section]:
    """The held-out evaluation (table, anytime, box plots), its statistical comparison, cost and termination."""
    runs, total = evaluation.runs, evaluation.budget
    palette = figures.optimizer_palette(runs["optimizer"].unique())
    base = _base_caption(study, runs, total)
    scores = {b.spec: scores_by_instance(evaluation.regret_at(b), "regret") for b in budgets}
    scores = {label: table for label, table in scores.items() if len(table)}  # drop budgets before a first evaluation
    x_label = {"full_evals": "budget spent (full-evaluation equivalents)", "cost": "cost spent (seconds)",
               "typical_cost": "cost spent (typical full-evaluation costs of the instance"
                               + (" × d)" if total.spec.endswith("dc") else ")")}[total.unit]
    held_out = Section("Held-out evaluation", [_summary_table(runs, scores, total, base), figures.anytime(
        anytime_curves(evaluation, study.benchmark), palette, x_label,
        f"Mean normalized regret of the incumbent vs budget spent (log axis): mean over seeds per instance, then "
        f"mean ± 1 s.e. over instances. {base}.")])
    if evaluation.clock is not None and len(evaluation.clock):  # evaluation.clock: the curves against simulated time
        untimed = (f" No curve for {', '.join(evaluation.untimed)}: their runs file has no simulated times "
                   "(written before runs files kept them; export it again)." if evaluation.untimed else "")
        held_out.blocks.append(clock_figure(evaluation.clock, f"{base}.{untimed}"))
        held_out.blocks.append(Table(
            "Mean normalized regret ± 1 s.e. over instances (mean over seeds per instance) of the best result in "
            "by each simulated time: the figure's curves a third and two thirds of the way along each worker "
            "count's log time axis and at its end; rows by the last column; — : not every run of the optimizer "
            f"has a result in yet. {base}.", clock_table(evaluation.clock)))
    if scores:
        held_out.blocks.append(figures.final_boxplots(
            scores, palette, f"Normalized regret per instance (mean over seeds) at budgets {', '.join(scores)}; "
                             f"boxes: quartiles, whiskers: 1.5 IQR, dots: instances. {base}."))

    comparison = Section("Statistical comparison (Friedman test, Nemenyi post-hoc)", [
        "Optimizers are ranked on each instance (1 = lowest seed-mean regret); the Friedman test asks whether "
        "their average ranks differ at all, and two optimizers differ significantly (Nemenyi) when their average "
        "ranks differ by at least the critical difference CD. Bars join optimizers that do not. The post-hoc "
        f"comparison is only meaningful where the Friedman test rejects (α = {alpha:g})."])
    for label, table in scores.items():
        if table.shape[1] < 3 or len(table) < 2:
            comparison.blocks.append(f"Budget {label}: not tested; the Friedman test needs at least 3 optimizers "
                                     f"and 2 instances (here {table.shape[1]} and {len(table)}).")
            continue
        test = rank_test(table, alpha)
        comparison.blocks.append(figures.cd_diagram(
            test, f"cd_{label}", f"Critical differences at budget {label}",
            f"Average ranks at budget {label} ({'full budget' if label == total.spec else 'intermediate'}); "
            f"{test.describe()}. {base}."))
    for label, table in scores.items():
        if table.shape[1] >= 2 and len(table) >= 2:
            comparison.blocks.append(_paired_table(table, label, base))
    sections = [held_out, comparison]
    cost = cost_section(output, evaluation, palette, base)
    if cost is not None:
        sections.append(cost)
    return sections


def _cost_aware(output: Path, evaluation: Evaluation) -> bool:
    """A budget in cost units, a cost-aware comparison (``eval/cost.csv``), or an evaluated configuration
    that models cost (its cost_model is active)."""
    return (evaluation.budget.unit in ("cost", "typical_cost") or _eval_files(output).cost_csv.exists()
            or any("cost_model" in cfg for cfg in _design_configs(evaluation).values()))


def _mean_se(table: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """Columns ``c`` and ``c_se`` shown together as "mean ± s.e."."""
    shown = table.drop(columns=[f"{c}_se" for c in columns])
    for c in columns:
        shown[c] = [f"{m:.3f} ± {e:.3f}" for m, e in zip(table[c], table[f"{c}_se"])]
    return _text_table(shown)


def cost_section(output: Path, evaluation: Evaluation, palette: dict, base: str) -> Section | None:
    """Cost versus accuracy (cost-aware studies) and RYC/RTC (``eval/termination.csv``), when they apply."""
    section = Section("Cost and automatic termination")
    if _cost_aware(output, evaluation):
        runs = evaluation.runs
        relative = runs["cost_used"] / runs.groupby("instance")["cost_used"].transform("median")
        per_instance = runs.assign(relative=relative).groupby(["optimizer", "instance"])[
            ["relative", "normalized_regret"]].mean()
        grouped = per_instance.groupby("optimizer")
        points = pd.DataFrame({"cost": grouped["relative"].mean(), "cost_se": grouped["relative"].sem(),
                               "regret": grouped["normalized_regret"].mean(),
                               "regret_se": grouped["normalized_regret"].sem()}).reset_index()
        section.blocks.append(figures.cost_accuracy(points.fillna(0.0), palette, (
            f"Cost spent per run (relative to the median over all runs on the instance, so that instances of "
            f"different cost weigh alike) vs final normalized regret: mean over seeds per instance, then mean ± 1 "
            f"s.e. over instances. {base}.")))
    cost_path = _eval_files(output).cost_csv
    if cost_path.exists():
        section.blocks.append(Table(
            "Cost-aware comparison (eval/cost.csv): per instance, the reference optimizer's median cost fixes the "
            "equal cost budget and its median final loss the target; regret at equal cost and the share of runs "
            "reaching the target are mean ± s.e. over instances, the cost to reach it is the median over the runs "
            f"that do, as a multiple of the equal cost budget. {base}.",
            _mean_se(pd.read_csv(cost_path), ["regret_at_cost", "reached"])))
    termination_path = _eval_files(output).termination_csv
    if termination_path.exists():
        table = pd.read_csv(termination_path)
        what = (f"each run stopped by its stopping rule against the same γ, instance and seed run to the full "
                f"budget; mean ± 1 s.e. over instances (seeds averaged). {base}.")
        configs = _design_configs(evaluation)
        rules = {name: (configs[name]["stopping"], configs[name].get(figures.STOPPING_THRESHOLDS.get(
                     configs[name]["stopping"], ""))) for name in table["optimizer"] if name in configs}
        section.blocks += [
            figures.termination_frontier(table, rules, "RYC against RTC of each stopping rule and threshold (paper "
                                         f"002, Fig. 3): up is better quality, right is more saved; {what}"),
            figures.termination_bars(table, palette, "RYC (paper 002 Eq. 11: relative change of the final loss; "
                                                     "negative: stopping made it worse) and RTC (Eq. 12: share of "
                                                     f"the full run's cost saved) of {what}"),
            Table(f"Automatic termination (eval/termination.csv): RYC, RTC (rtc_budget: in budget instead of cost), "
                  f"share of runs stopped early, final regrets of the stopped and the full runs, of {what}",
                  _mean_se(table, [c for c in ("ryc", "rtc", "rtc_budget", "stopped", "regret_stopped",
                                               "regret_full") if f"{c}_se" in table]))]
    return section if section.blocks else None


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (FileNotFoundError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _count(value: Any) -> Any:
    return len(value) if isinstance(value, list) else value


def _ablation_caption(meta: dict[str, Any]) -> str:
    """What an ablation compared and how it estimated, from its meta.json."""
    source, target = (meta.get(k, {}).get("name", k) for k in ("source", "target"))
    if meta.get("estimator") == "evaluated":
        how = (f"each candidate run on {_count(meta.get('instances'))} instances × {_count(meta.get('seeds'))} seeds "
               f"at budget {meta.get('budget')}; mean normalized regret ± s.e. over instances")
    else:
        forest = meta.get("surrogate") or {}
        how = (f"random-forest prediction of the meta-objective from the meta-archive ({forest.get('n_rows')} trials, "
               f"out-of-bag R² {fmt(forest.get('oob_r2'))}) over {_count(meta.get('instances'))} training instances")
    return f"{source} → {target} on {meta.get('benchmark')}; {how}."


def _importance_caption(meta: dict[str, Any]) -> str:
    """How the importance was estimated, from its meta.json."""
    if not meta:
        return ""
    return (f"Random forest ({meta.get('n_trees')} trees, out-of-bag R² {fmt(meta.get('oob_r2'))}) on "
            f"{meta.get('n_rows')} meta-archive trials ({meta.get('n_configurations')} configurations, "
            f"{meta.get('n_instances')} training instances); mean ± std over trees.")


def _stored_figure(path: Path, name: str, title: str, caption: str) -> Figure | None:
    return Figure(name, title, caption, path.read_bytes()) if path.exists() else None


def _csv_table(path: Path, caption: str, limit: int | None = None) -> Table | None:
    if not path.exists():
        return None
    df = pd.read_csv(path)
    if limit is not None and len(df) > limit:
        caption += f" First {limit} of {len(df)} rows."
        df = df.head(limit)
    return Table(caption, _text_table(df))


def _fanova_table(path: Path, caption: str, top_pairs: int = 10) -> Table | None:
    """All main effects, then the largest pairwise interactions."""
    if not path.exists():
        return None
    df = pd.read_csv(path)
    pairs = df[df["kind"] == "pair"]
    if len(pairs) > top_pairs:
        caption += f" Only the {top_pairs} largest of {len(pairs)} pairwise interactions."
    shown = pd.concat([df[df["kind"] == "main"], pairs.sort_values("importance", ascending=False).head(top_pairs)])
    return Table(caption, _text_table(shown))


ABLATION_VARIANTS = {
    "path": ("Greedy ablation path", "each step flips the remaining difference that helps most"),
    "ofat": ("One factor at a time", "each difference applied alone to the source"),
    "loco": ("Leave one component out", "each component of the target reverted to the source's"),
}


def ablation_sections(output: Path) -> list[Section]:
    """One section per ``ablation/<name>/``: each variant's plot and table (path, ofat, loco) that exists."""
    sections = []
    for ablation in StudyStore(output).stored_ablations():
        caption = _ablation_caption(_read_json(ablation.meta_json))
        blocks: list[Figure | Table | None] = []
        for variant, (title, explain) in ABLATION_VARIANTS.items():
            blocks += [_stored_figure(ablation.variant_png(variant), f"ablation_{ablation.name}_{variant}", title,
                                      f"{title} ({explain}): {caption}"),
                       _csv_table(ablation.variant_csv(variant), f"{title} ({explain}); share = part of the total change "
                                                             f"from source to target. {caption}", TOP_TABLE_ROWS)]
        shown: list[str | Table | Figure] = [b for b in blocks if b is not None]
        if shown:
            sections.append(Section(f"Ablation: {ablation.name}", shown))
    return sections


def importance_section(output: Path, title: str = "Parameter importance") -> Section | None:
    """fANOVA and local parameter importance from ``<output>/importance/``, when present."""
    files = StudyStore(output).importance
    tag = "" if title == "Parameter importance" else f"_{output.name}"  # figure names unique per arm
    caption = _importance_caption(_read_json(files.meta_json))
    blocks: list[Figure | Table | None] = [_stored_figure(files.fanova_png, f"importance_fanova{tag}", "fANOVA importance",
                             f"fANOVA: share of the meta-objective's variance explained by each parameter (main "
                             f"effects) and pair of parameters. {caption}"),
              _fanova_table(files.fanova_csv, f"fANOVA importance ± std. {caption}"),
              _stored_figure(files.local_png, f"importance_local{tag}", "Local importance around γ*",
                             f"Local parameter importance: share of the variance of the objective when one "
                             f"parameter of γ* varies at a time. {caption}"),
              _csv_table(files.local_csv, f"Local importance ± std. {caption}", TOP_TABLE_ROWS)]
    shown: list[str | Table | Figure] = [b for b in blocks if b is not None]
    return Section(title, shown) if shown else None


# -- rendering ----------------------------------------------------------------------------------

CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; max-width: 1100px; margin: 2em auto;
       padding: 0 1em; color: #222; line-height: 1.45; }
h1 { border-bottom: 2px solid #4c72b0; padding-bottom: .2em; }
h2 { margin-top: 2em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; margin: .5em 0; font-size: .9em; }
th, td { border: 1px solid #ccc; padding: .25em .6em; text-align: left; }
th { background: #eef2f8; }
tr:nth-child(even) td { background: #fafafa; }
figure { margin: 1.5em 0; }
figure img { max-width: 100%; }
.caption, figcaption { font-size: .9em; color: #444; font-style: italic; }
"""


def _paragraphs_html(text: str) -> str:
    return "".join(f"<p>{html.escape(p.strip())}</p>" for p in text.split("\n\n") if p.strip())


def render_html(title: str, sections: list[Section]) -> str:
    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
             f"<style>{CSS}</style></head><body><h1>{html.escape(title)}</h1>"]
    for section in sections:
        parts.append(f"<h2>{html.escape(section.title)}</h2>")
        for block in section.blocks:
            if isinstance(block, str):
                parts.append(_paragraphs_html(block))
            elif isinstance(block, Table):
                parts.append(f"<p class='caption'>{html.escape(block.caption)}</p>"
                             + block.frame.to_html(index=False, border=0, escape=True))
            else:
                data = base64.b64encode(block.png).decode()
                parts.append(f"<figure><img alt='{html.escape(block.title)}' src='data:image/png;base64,{data}'>"
                             f"<figcaption><b>{html.escape(block.title)}.</b> {html.escape(block.caption)}"
                             f"</figcaption></figure>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def render_markdown(title: str, sections: list[Section]) -> str:
    from metaopt.analysis.markdown import markdown_table

    lines = [f"# {title}", ""]
    for section in sections:
        lines += [f"## {section.title}", ""]
        for block in section.blocks:
            if isinstance(block, str):
                lines += [block, ""]
            elif isinstance(block, Table):
                lines += [f"*{block.caption}*", "", markdown_table(block.frame), ""]
            else:
                lines += [f"![{block.title}]({ReportFiles(Path()).figure(block.name).as_posix()})", "", f"*{block.title}.* {block.caption}", ""]
    return "\n".join(lines)


# -- the report ---------------------------------------------------------------------------------

def _load(output: Path) -> tuple[StudySpec, list[Companion], Evaluation | None]:
    """The study stored in ``output``, its companions and its held-out runs; UsageError when the
    folder holds no study or nothing finished yet."""
    if not output.is_dir():
        raise UsageError(f"no such output folder: {output}")
    store = StudyStore(output)
    study = store.study_spec()
    companions = companion_studies(study, store.study_file, output)
    evaluation = load_evaluation(output, study, companions)
    if evaluation is None and not store.archive_csv.exists() and not store.trials_logs():
        raise UsageError(f"{output} holds no finished runs yet (no eval/runs/*/*/seed-*/summary.json, "
                         f"no meta/archive.csv)")
    return study, companions, evaluation


def build_sections(output: Path, study: StudySpec, companions: list[Companion], evaluation: Evaluation | None,
                   alpha: float = 0.05, budgets: list[str] | None = None) -> tuple[str, list[Section]]:
    """The report's title and sections from what ``output`` holds (``study``, ``companions`` and
    ``evaluation`` as :func:`_load` read them)."""
    store = StudyStore(output)
    archive, note = store.read_archive()
    if note:
        print(f"metaopt: warning: {note}", file=sys.stderr)
    sections = [study_section(study, output, evaluation, archive, companions)]
    meta = meta_section(study, output, evaluation)
    if meta is not None:
        sections.append(meta)
    search = search_section(study, output)
    if search is not None:
        sections.append(search)
    if evaluation is not None:
        chosen = report_budgets(study, evaluation.budget, budgets)
        sections += evaluation_sections(study, output, evaluation, chosen, alpha)
    sections += ablation_sections(output)
    # one importance section for a single meta-optimization, one per restriction arm otherwise
    importance = [importance_section(output)] + [importance_section(arm.root, f"Parameter importance: {arm.name}")
                                                 for arm in store.stored_arms()]
    sections += [s for s in importance if s is not None]
    return f"Study report: {study.name}", sections


def write_report(output: Path, alpha: float = 0.05, budgets: list[str] | None = None) -> Path:
    """Build the report and replace ``output/report`` with it atomically; returns that folder.

    The study's answer (``answer.md``, :mod:`metaopt.analysis.answer`) is regenerated from the same
    runs first, so the report never shows a stale one.
    """
    output = Path(output)
    study, companions, evaluation = _load(output)
    write_answer(output, evaluation, alpha)
    title, sections = build_sections(output, study, companions, evaluation, alpha, budgets)
    target = StudyStore(output).report_dir
    staging = Path(tempfile.mkdtemp(dir=output, prefix=".report-"))
    try:
        files = ReportFiles(staging)
        files.figures_dir.mkdir()
        for block in (b for s in sections for b in s.blocks if isinstance(b, Figure)):
            files.figure(block.name).write_bytes(block.png)
        files.html.write_text(render_html(title, sections))
        files.markdown.write_text(render_markdown(title, sections))
        old = None
        if target.exists():
            old = Path(tempfile.mkdtemp(dir=output, prefix=".report-old-"))
            target.rename(old / target.name)
        staging.rename(target)
        if old is not None:
            shutil.rmtree(old)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return target
