"""Ablation between two configurations γ of the design space (paper 004 §5.2, §6.3; Fawcett & Hoos 2016).

Three variants, all independent of how a configuration's performance is estimated (an ``Estimate``
maps a list of γ's to (mean, s.e.) pairs; lower is better):

- :func:`greedy_path`: from the source, at each step flip the one remaining differing parameter
  whose change helps most, until the target is reached;
- :func:`ofat`: each difference applied alone to the source (one factor at a time);
- :func:`leave_one_component_out`: each component of the target (a category's selector with its
  components' hyperparameters; the loop parameters count as one component) reverted to the
  baseline's.

Flip rules. A parameter can be flipped when it is active in both the current configuration and the
target and their values differ. Conditional parameters go with their parent: a child that becomes
active takes the target's value (its default if the target lacks it too); one that becomes inactive
is dropped. A step's parameters are the flipped one(s) followed by those children. A candidate
that is forbidden or otherwise invalid is skipped; if no single flip is valid at a step, every pair
of flips is tried; if no pair is valid either, the remaining differences are flipped at once. Each
step resolves at least one difference, and the path ends exactly at the target.

Store (``<output>/ablation/<name>/``): ``path.csv|.md|.png``, ``ofat.*``, ``loco.*`` with the
columns of :data:`COLUMNS`, ``meta.json`` (what was compared, how), and for the ``evaluated``
estimator ``runs/<γ hash>/<instance>/seed-<k>.json`` (see ``metaopt.stages.ablation_estimators``).
"""

from __future__ import annotations

import itertools
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import pandas as pd
from ConfigSpace import ConfigurationSpace
from ConfigSpace.util import deactivate_inactive_hyperparameters

from metaopt.analysis.stats import seeds_are_replicates
from metaopt.stages.ablation_estimators import EvaluatedEstimator, Gamma, SurrogateEstimator
from metaopt.core.budget import Budget
from metaopt.core.errors import UsageError
from metaopt.core.executor import Executor
from metaopt.store.run_io import jsonable
from metaopt.store.store import AblationFiles, StudyStore
from metaopt.core.store_utils import atomic_write_text

Estimate = Callable[[list[Gamma]], list[tuple[float, float]]]
ESTIMATORS = ("evaluated", "surrogate")
VARIANTS = ("path", "ofat", "loco")
COLUMNS = ["step", "label", "parameters", "values", "mean", "se", "share", "note"]
"""Columns of path.csv, ofat.csv and loco.csv (``parameters``/``values``: '; '-separated)."""
INACTIVE = "inactive"


# -- configurations -----------------------------------------------------------------------------

def _space(space: ConfigurationSpace | None) -> ConfigurationSpace:
    from metaopt.spaces.design_space import design_space

    return space if space is not None else design_space()


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        return isinstance(a, (int, float)) and isinstance(b, (int, float)) and math.isclose(a, b, rel_tol=1e-9)
    return a == b


def same_config(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Equal active parameters with equal values (floats up to rounding)."""
    return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)


def differing(current: Mapping[str, Any], target: Mapping[str, Any],
              space: ConfigurationSpace | None = None) -> list[str]:
    """Parameters active in both with different values, in design-space order: the possible flips."""
    return [n for n in _space(space) if n in current and n in target and not _same(current[n], target[n])]


def differences(a: Mapping[str, Any], b: Mapping[str, Any], space: ConfigurationSpace | None = None) -> list[str]:
    """Parameters whose activity or value differs, in design-space order."""
    return [n for n in _space(space) if (n in a) != (n in b) or (n in a and not _same(a[n], b[n]))]


def settle(assigned: Mapping[str, Any], fallback: Mapping[str, Any], space: ConfigurationSpace | None = None
           ) -> Gamma | None:
    """The configuration with the ``assigned`` values where active; parameters that are active but not
    assigned take ``fallback``'s value, else their default; inactive ones are dropped. None when the
    result is forbidden or invalid."""
    from metaopt.spaces.design_space import validate

    space = _space(space)
    values = {hp.name: hp.default_value for hp in space.values()}
    values.update(fallback)
    values.update(assigned)
    try:
        active = deactivate_inactive_hyperparameters(values, space).keys()
        result = validate({n: values[n] for n in active}, space)
    except (ValueError, UsageError):
        return None
    # validation may round floats through ConfigSpace's vector form; keep the exact inputs
    return {n: values[n] if _same(v, values[n]) else v for n, v in result.items()}


def flip(current: Gamma, names: Sequence[str], target: Gamma, space: ConfigurationSpace | None = None) -> Gamma | None:
    """``current`` with ``names`` set to the target's values and their children settled (None if invalid)."""
    return settle({**current, **{n: target[n] for n in names}}, target, space)


# -- rows and the three variants ----------------------------------------------------------------

@dataclass(frozen=True)
class Row:
    """One configuration of an ablation: what changed (vs. the previous or reference row) and its estimate.

    ``config`` is None for a candidate that is forbidden or invalid (its mean and s.e. are NaN);
    ``skipped`` lists the single flips rejected as forbidden/invalid at a path step.
    """

    label: str
    parameters: tuple[str, ...]
    values: tuple[Any, ...]
    config: Gamma | None
    mean: float
    se: float
    skipped: tuple[str, ...] = field(default=())


def _fmt(value: Any) -> str:
    if value is None:
        return INACTIVE
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _change(before: Gamma, after: Gamma, names: Sequence[str], space: ConfigurationSpace) -> tuple[str, tuple, tuple]:
    """(label, parameters, values) of the change ``before`` -> ``after``: ``names`` first, then the
    parameters that became active or inactive with them."""
    moved = [n for n in differences(before, after, space) if n not in names and (n in before) != (n in after)]
    params = tuple(names) + tuple(moved)
    values = tuple(after.get(n) for n in params)
    label = " & ".join(f"{n}={_fmt(after.get(n))}" for n in names) or "(conditional parameters)"
    if moved:
        label += f" (+{len(moved)})"
    return label, params, values


def greedy_path(source: Gamma, target: Gamma, estimate: Estimate, space: ConfigurationSpace | None = None,
                labels: tuple[str, str] = ("source", "target")) -> list[Row]:
    """The greedy ablation path from ``source`` to ``target`` (module docstring: flip rules).

    Returns the source row, then one row per step; the last row's configuration is the target.
    Ties are broken by design-space order.
    """
    space = _space(space)
    (mean, se), = estimate([source])
    rows = [Row(labels[0], (), (), source, mean, se)]
    current = source
    while not same_config(current, target):
        names_left = differing(current, target, space)
        singles = [((n,), flip(current, [n], target, space)) for n in names_left]
        skipped = tuple(n for (n,), config in singles if config is None)
        candidates: list[tuple[tuple[str, ...], Gamma]] = [(names, config) for names, config in singles if config is not None]
        if not candidates:
            pairs = [(pair, flip(current, pair, target, space)) for pair in itertools.combinations(names_left, 2)]
            candidates = [(tuple(names), config) for names, config in pairs if config is not None]
        if not candidates:
            candidates = [(tuple(names_left), target)]
        estimates = estimate([config for _, config in candidates])
        best = min(range(len(candidates)), key=lambda i: estimates[i][0])
        names, config = candidates[best]
        if same_config(config, target):
            config = target
        label, params, values = _change(current, config, names, space)
        rows.append(Row(label, params, values, config, *estimates[best], skipped=skipped))
        current = config
    return rows


def ofat(source: Gamma, target: Gamma, estimate: Estimate, space: ConfigurationSpace | None = None,
         labels: tuple[str, str] = ("source", "target")) -> list[Row]:
    """One factor at a time: the source, each possible flip applied alone to the source, the target."""
    space = _space(space)
    flips = [(n, flip(source, [n], target, space)) for n in differing(source, target, space)]
    configs = [source] + [c for _, c in flips if c is not None] + [target]
    estimates = iter(estimate(configs))
    rows = [Row(labels[0], (), (), source, *next(estimates))]
    for name, config in flips:
        if config is None:
            rows.append(Row(f"{name}={_fmt(target[name])}", (name,), (target[name],), None, math.nan, math.nan))
        else:
            rows.append(Row(*_change(source, config, [name], space), config, *next(estimates)))
    return rows + [Row(labels[1], (), (), target, *next(estimates))]


def components_of(space: ConfigurationSpace | None = None) -> dict[str, list[str]]:
    """Components as named groups of parameters: ``loop`` (μ) and each category (selector + its
    components' hyperparameters), restricted to the space's parameters."""
    from metaopt.core.registry import CATEGORIES, components
    from metaopt.spaces.design_space import LOOP_HYPERPARAMETERS

    space = _space(space)
    groups = {"loop": [hp.name for hp in LOOP_HYPERPARAMETERS]}
    for category in CATEGORIES.values():
        names = [category.selector] + [hp.name for c in components(category.name) for hp in c.hyperparameters]
        groups[category.name] = list(dict.fromkeys(names))
    return {k: [n for n in v if n in space] for k, v in groups.items() if any(n in space for n in v)}


def leave_one_component_out(target: Gamma, baseline: Gamma, estimate: Estimate,
                            space: ConfigurationSpace | None = None,
                            labels: tuple[str, str] = ("target", "baseline")) -> list[Row]:
    """The target, then the target with one component reverted to the baseline's, then the baseline.

    A reverted parameter the baseline lacks takes its default; parameters that become active take
    the baseline's values. Components on which target and baseline agree are left out, and so is a
    revert that leaves the target unchanged.
    """
    space = _space(space)
    differ = differences(target, baseline, space)
    reverts = []
    for component, names in components_of(space).items():
        if not any(n in differ for n in names):
            continue
        assigned = {**{k: v for k, v in target.items() if k not in names},
                    **{n: baseline[n] for n in names if n in baseline}}
        config = settle(assigned, baseline, space)
        if config is None or not same_config(config, target):
            reverts.append((component, names, config))
    configs = [target] + [c for _, _, c in reverts if c is not None] + [baseline]
    estimates = iter(estimate(configs))
    rows = [Row(labels[0], (), (), target, *next(estimates))]
    for component, names, config in reverts:
        if config is None:
            changed = tuple(n for n in names if n in differ)
            rows.append(Row(component, changed, tuple(baseline.get(n) for n in changed), None, math.nan, math.nan))
        else:
            changed = tuple(differences(target, config, space))
            rows.append(Row(component, changed, tuple(config.get(n) for n in changed), config, *next(estimates)))
    return rows + [Row(labels[1], (), (), baseline, *next(estimates))]


# -- tables -------------------------------------------------------------------------------------

def ablation_table(rows: list[Row], variant: str, note: Callable[[Gamma], str] = lambda _: "") -> pd.DataFrame:
    """The table of a variant (columns :data:`COLUMNS`); ``share`` is the part of the total improvement

    - path: due to each step, (m[k-1] - m[k]) / (m[0] - m[K]), summing to 1 over the steps;
    - ofat: achieved by that change alone, (m[source] - m[k]) / (m[source] - m[target]);
    - loco: lost by reverting that component, (m[k] - m[target]) / (m[baseline] - m[target]).

    Negative shares mean the change made things worse; NaN when the total is zero.
    """
    means = np.array([r.mean for r in rows], dtype=float)
    total = means[0] - means[-1] if variant != "loco" else means[-1] - means[0]
    total = total if total != 0 else math.nan
    if variant == "path":
        share = np.concatenate([[math.nan], (means[:-1] - means[1:]) / total])
    elif variant == "ofat":
        share = (means[0] - means) / total
        share[[0, -1]] = math.nan
    else:
        share = (means - means[0]) / total
        share[[0, -1]] = math.nan
    notes = []
    for r in rows:
        text = note(r.config) if r.config is not None else "forbidden or invalid: not estimated"
        if r.skipped:
            text = "; ".join(filter(None, [text, "skipped (forbidden/invalid): " + ", ".join(r.skipped)]))
        notes.append(text)
    return pd.DataFrame({
        "step": range(len(rows)),
        "label": [r.label for r in rows],
        "parameters": ["; ".join(r.parameters) for r in rows],
        "values": ["; ".join(_fmt(v) for v in r.values) for r in rows],
        "mean": means,
        "se": [r.se for r in rows],
        "share": share,
        "note": notes,
    })[COLUMNS]


# -- a whole ablation: spec, endpoints, output --------------------------------------------------

@dataclass(frozen=True)
class Endpoint:
    """A named configuration γ (a preset, γ* of a study, or a file)."""

    name: str
    config: Gamma | None
    """None only for a gamma* not computed yet (a study checked before it runs), never for an ablation run."""


@dataclass(frozen=True)
class AblationSpec:
    """Everything :func:`run_ablation` needs, resolved (a study stage builds one the way the CLI does).

    ``instances``/``seeds``/``race`` are for the ``evaluated`` estimator, ``archive`` (a study's
    ``meta/archive.csv``) for the ``surrogate``; ``budget`` is the run budget (evaluated) or, for the
    record, the budget of the archive's study (surrogate).
    """

    benchmark: str
    source: Endpoint
    target: Endpoint
    estimator: str
    variants: tuple[str, ...] = ("path",)
    instances: tuple[str, ...] = ()
    seeds: tuple[int, ...] = (1,)
    budget: Budget | None = None
    race: bool = False
    archive: Path | None = None
    yahpo_data: str | None = None
    name: str | None = None

    @property
    def folder_name(self) -> str:
        return self.name or f"{self.source.name}-to-{self.target.name}-{self.estimator}"


def check_choices(field_name: str, values: Sequence[str], allowed: Sequence[str]) -> None:
    """UsageError naming the field and the allowed values for the first value not allowed."""
    for value in values:
        if value not in allowed:
            raise UsageError(f"{field_name}: {value!r} is not allowed; allowed: {', '.join(allowed)}")


def resolve_endpoint(text: str, field_name: str, fidelity: Any,
                     gamma_stars: Mapping[str, Gamma | None] | None = None, pending: bool = False,
                     gamma_star_hint: str = "") -> Endpoint:
    """Called before any work (``metaopt ablate``, a study's ablate stage, and when a study is loaded):
    the endpoint ``text`` names, in the vocabulary of :func:`metaopt.spaces.resolve.resolve_optimizer`
    (a preset, ``gamma_star[:<restriction>]`` of ``gamma_stars``, or a JSON file; peers have no
    configuration to ablate). Every problem is a UsageError starting with ``field_name``; the
    endpoint's name has ``-`` for ``:`` (it becomes part of a folder name).
    """
    from metaopt.spaces.resolve import resolve_optimizer

    resolved = resolve_optimizer(text, fidelity, field_name, gamma_stars=gamma_stars, files=True, pending=pending,
                                 gamma_star_hint=gamma_star_hint)
    return Endpoint(resolved.name.replace(":", "-"), resolved.config)


def _claim(files: AblationFiles, identity: dict[str, Any]) -> dict[str, Any]:
    """Check that the ablation's folder holds nothing or an ablation with this identity; return its meta.json."""
    folder, path = files.folder, files.meta_json
    if not path.exists():
        return {}
    previous = json.loads(path.read_text())
    mismatch = [k for k, v in jsonable(identity).items() if previous.get(k) != v]
    if mismatch:
        raise UsageError(f"{folder} holds an ablation with a different {', '.join(mismatch)}; "
                         "use another --name or --out, or remove that folder")
    return previous


def run_ablation(spec: AblationSpec, output: Path, executor: Executor | None = None, quiet: bool = False
                 ) -> dict[str, pd.DataFrame]:
    """Run the spec's variants; write ``<output>/ablation/<name>/`` (module docstring); return the tables.

    ``executor`` (a ``metaopt.core.executor.Executor``, serial when None) runs the ``evaluated`` estimator's
    runs. Finished runs are reused, so rerunning (also with more variants or seeds) resumes.
    """

    check_choices("estimator", [spec.estimator], ESTIMATORS)
    check_choices("variant", spec.variants, VARIANTS)
    store = StudyStore(output)
    files = store.ablation(spec.folder_name)
    identity = {"benchmark": spec.benchmark, "estimator": spec.estimator,
                "budget": spec.budget.spec if spec.budget else None,
                "source": {"name": spec.source.name, "config": spec.source.config},
                "target": {"name": spec.target.name, "config": spec.target.config}}
    previous = _claim(files, identity)
    if spec.estimator == "evaluated":
        if not spec.instances or not spec.seeds or spec.budget is None:
            raise UsageError("estimator evaluated: needs instances, seeds and a budget")
        estimator: EvaluatedEstimator | SurrogateEstimator = EvaluatedEstimator(files.runs_dir, spec.benchmark, list(spec.instances), list(spec.seeds),
                                       spec.budget, executor or Executor(), spec.race, spec.yahpo_data, quiet)
    else:
        if spec.archive is None or not spec.archive.exists():
            raise UsageError(f"estimator surrogate: needs a meta-archive (meta/archive.csv); not found: {spec.archive}")
        estimator = SurrogateEstimator.from_archive(spec.archive)

    src, tgt = spec.source, spec.target
    source, target = src.config, tgt.config
    assert source is not None and target is not None  # the study runs its ablations after optimize
    run = {
        "path": lambda: greedy_path(source, target, estimator, labels=(src.name, tgt.name)),
        "ofat": lambda: ofat(source, target, estimator, labels=(src.name, tgt.name)),
        "loco": lambda: leave_one_component_out(target, source, estimator, labels=(tgt.name, src.name)),
    }
    tables = {}
    for variant in spec.variants:
        table = ablation_table(run[variant](), variant, estimator.note)
        tables[variant] = table
        _write_variant(files, variant, table, spec, estimator.describe())
        if not quiet:
            print(f"ablation {spec.folder_name}: wrote {files.variant_csv(variant)}|.md|.png")
    meta = {**identity, "name": spec.folder_name, **estimator.describe(), "race": spec.race,
            "variants": sorted(set(previous.get("variants", [])) | set(spec.variants))}
    atomic_write_text(files.meta_json, json.dumps(jsonable(meta), indent=1) + "\n")
    return tables


TITLES = {"path": "Greedy ablation path", "ofat": "One factor at a time", "loco": "Leave one component out"}
EXPLAIN = {
    "path": "Each step flips the one remaining differing parameter (with the conditional parameters that "
            "become active or inactive with it) whose change helps most. share = the step's part of the total "
            "improvement from {source} to {target} (sums to 1; negative: the step made things worse).",
    "ofat": "Each difference applied alone to {source}. share = the part of the total improvement from "
            "{source} to {target} that this change achieves alone.",
    "loco": "Each component (a category's selector and its hyperparameters; 'loop' = mu) of {target} reverted "
            "to {source}'s. share = the part of the total improvement from {source} to {target} lost by "
            "reverting it.",
}


def _write_variant(files: AblationFiles, variant: str, table: pd.DataFrame, spec: AblationSpec, details: dict[str, Any]
                   ) -> None:
    from metaopt.analysis.ablation_plots import plot_ablation
    from metaopt.analysis.markdown import markdown_table

    atomic_write_text(files.variant_csv(variant), table.to_csv(index=False))
    caption = _caption(spec, details)
    title = f"{TITLES[variant]}: {spec.source.name} → {spec.target.name} ({spec.benchmark})"
    plot_ablation(table, files.variant_png(variant), variant, title, caption)
    shown = table.assign(mean=[f"{m:.4f} ± {s:.4f}" for m, s in zip(table["mean"], table["se"])],
                         share=[f"{s:.1%}" if pd.notna(s) else "" for s in table["share"]])
    shown = shown.rename(columns={"mean": "mean ± s.e."}).drop(columns="se")
    md = [f"# {title}", "", EXPLAIN[variant].format(source=spec.source.name, target=spec.target.name), "",
          markdown_table(shown), "", f"![{variant}]({files.variant_png(variant).name})", "", f"*{caption}*"]
    atomic_write_text(files.variant_md(variant), "\n".join(md) + "\n")


def _caption(spec: AblationSpec, details: dict[str, Any]) -> str:
    if spec.estimator == "evaluated":
        instances = details["instances"]
        shown = ", ".join(instances[:6]) + (" ..." if len(instances) > 6 else "")
        if seeds_are_replicates(len(instances)):
            return (f"evaluated: mean normalized regret at budget {spec.budget} ± s.e. over the {len(spec.seeds)} "
                    f"seeds of its one instance ({shown})")
        return (f"evaluated: mean normalized regret at budget {spec.budget} ± s.e. over {len(instances)} instances "
                f"({shown}), seeds averaged per instance ({len(spec.seeds)} seeds"
                f"{', racing' if spec.race else ''})")
    return (f"surrogate: random-forest prediction of the meta-objective (mean over the archive's "
            f"{len(details['instances'])} instances) ± s.d. across trees; fitted on {details['surrogate']['n_rows']} "
            f"archive trials, out-of-bag R² {details['surrogate']['oob_r2']:.2f}")
