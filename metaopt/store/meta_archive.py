"""The meta-archive: one row per meta-optimization trial, and the γ* rule over it.

Core facts shared by the optimize stage (:mod:`metaopt.stages.meta`, which writes ``meta/archive.csv`` and
``meta/gamma_star.json``), the ablation estimators and the report (which read them): how a γ is
identified (:func:`gamma_hash`), the objective of a failed trial, the archive's columns
(:func:`meta_archive`), how γ* is chosen (:func:`choose_gamma_star`) and which configurations are
re-run to select it (:func:`selection_pool`).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import math
from pathlib import Path
from typing import Any, Callable

import pandas as pd

from metaopt.core.errors import UsageError
from metaopt.store.store import StudyStore, stored_run_records
from metaopt.store.study_spec import arm_archive

Key = tuple[str, str, int]
"""A trial's identity in the store: (γ hash, instance, seed)."""


def run_name(gamma: dict[str, Any], fraction: float = 1.0) -> str:
    """The name a run of γ at ``fraction`` of the inner budget is stored under: γ's hash at the full
    budget, ``<hash>@<fraction>`` below it (a multi-fidelity search's cheap runs)."""
    return gamma_hash(gamma) if fraction == 1.0 else f"{gamma_hash(gamma)}@{fraction:.6g}"


def trials_log_line(row: dict[str, Any]) -> str:
    """A trial's line in a trials log (a trial row without its ``summary``, which the run record
    holds), newline included; :func:`read_trials_log` reads it back."""
    return json.dumps({k: v for k, v in row.items() if k != "summary"}) + "\n"


def read_trials_log(path: Path) -> list[dict[str, Any]]:
    """The trial rows of the trials log ``path``, in order; ValueError if a line is damaged (e.g. cut
    short by a kill)."""
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


def record_key(record: dict[str, Any]) -> Key:
    """The store key of a run record."""
    return record["hash"], str(record["instance"]), int(record["seed"])

CRASH_OBJECTIVE = 10.0
"""Meta-objective of an inner run that raised (normalized regret of a run is ~1 for a median random config)."""

OBJECTIVE_TRANSFORM = "objective_transform"
"""The key under which a run record names how its objective counts regret
(:func:`metaopt.store.study_spec.objective_tag`);
records of plain regret have none, as every record written before the field existed."""


HASH_NEUTRAL_DEFAULTS: dict[str, Any] = {"rf_max_samples": 0, "rf_max_samples_per_feature": 0, "fidelity_floor": 0.0}
"""Design-space hyperparameters added after committed archives were written, each with its default, the
value that means "as before the hyperparameter existed": :func:`gamma_hash` leaves a hyperparameter at
that value out, so a design keeps the identity it had in those archives (its stored runs are found, a
preset is still recognized as the known design it is). Only for hyperparameters added from now on: one
added earlier is part of the hashes written since, and leaving it out would change those.
tests/test_meta.py checks each value against the design space's default."""


def gamma_hash(gamma: dict[str, Any]) -> str:
    """A short stable identifier of a configuration γ (:data:`HASH_NEUTRAL_DEFAULTS` left out)."""
    identity = {k: v for k, v in gamma.items() if k not in HASH_NEUTRAL_DEFAULTS or v != HASH_NEUTRAL_DEFAULTS[k]}
    return hashlib.sha1(json.dumps(identity, sort_keys=True, default=str).encode()).hexdigest()[:12]


INNER_SUMMARY_FIELDS = ("final_loss", "normalized_regret", "budget_used", "cost_used", "n_evals", "stop_reason",
                        "sim_time", "utilization")
"""The inner run's summary fields the archive keeps as ``inner.<field>`` columns (``sim_time`` and
``utilization`` only runs on the simulated clock have: ``meta.clock``)."""


def meta_archive(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """One row per trial: meta-seed, trial, γ (one column per parameter), instance, seed, objective, summary.

    Only what a run computes: no wall times and no record of which runs came from the store, so the
    archive of a study does not depend on workers, timing or interruptions.
    """
    table = []
    for r in rows:
        row = {k: r[k] for k in ("meta_seed", "trial", "hash", "instance", "seed", "objective", "status")}
        row.update({f"gamma.{k}": v for k, v in r["gamma"].items()})
        row.update({f"inner.{k}": v for k, v in r.get("summary", {}).items() if k in INNER_SUMMARY_FIELDS})
        row["error"] = (r.get("traceback") or "").strip().splitlines()[-1] if r.get("traceback") else ""
        table.append(row)
    return pd.DataFrame(table)


def search_means(archive: pd.DataFrame) -> tuple[pd.Series, pd.DataFrame]:
    """The search's objective per (γ hash, instance), seeds averaged, and per γ hash in the archive's
    order: ``mean`` over its instances and ``n_instances``. Read by :func:`choose_gamma_star` and
    :func:`selection_pool`."""
    per_instance = archive.groupby(["hash", "instance"], sort=False)["objective"].mean()
    per_config = per_instance.groupby(level="hash", sort=False).agg(["mean", "count"]).rename(
        columns={"count": "n_instances"})
    return per_instance, per_config


def choose_gamma_star(archive: pd.DataFrame, instances: list[str], rows: list[dict[str, Any]]) -> dict[str, Any]:
    """γ* by the pooled rule of the module docstring."""
    if archive.empty:
        raise UsageError("meta-optimization produced no trials")
    _, per_config = search_means(archive)
    complete = per_config[per_config["n_instances"] == len(instances)]
    pool = complete if len(complete) else per_config[per_config["n_instances"] == per_config["n_instances"].max()]
    best_hash = pool["mean"].idxmin()
    best = pool.loc[best_hash]
    gamma = next(r["gamma"] for r in rows if r["hash"] == best_hash)
    first = archive[archive["hash"] == best_hash].iloc[0]
    return {"config": gamma, "hash": best_hash, "mean_objective": float(best["mean"]),
            "n_instances": int(best["n_instances"]), "all_instances": bool(len(complete)),
            "found_by_meta_seed": int(first["meta_seed"]), "found_at_trial": int(first["trial"]),
            "n_configurations": int(len(per_config)), "n_trials": int(len(archive)),
            "rule": "lowest mean objective (seeds averaged per instance, then instances) among configurations "
                    "evaluated on all training instances, pooled over meta-seeds"}


def selection_pool(archive: pd.DataFrame, instances: list[str], top: int,
                   min_instance_fraction: float = 1.0) -> pd.DataFrame:
    """The candidates for γ*'s selection re-runs; called once per optimize stage, after all meta-seeds.

    Returns one row per candidate, best first, indexed by γ hash, with columns ``mean`` (its mean
    objective in the search, over the instances it ran on), ``n_instances`` and ``difference`` (its
    mean paired difference to the reference over the instances both ran on); empty when no
    configuration ran on all ``instances``.

    The reference is :func:`choose_gamma_star`'s pick (the lowest mean among configurations run on all
    training instances) and is always a candidate. With ``min_instance_fraction`` = 1 the others are
    the configurations run on all instances with the lowest means (the reference first). Below 1,
    a configuration run on at least that fraction of the instances is a candidate too, ranked by its
    paired difference to the reference: SMAC's intensifier runs few challengers on every instance
    (with 30 instances and 150 trials per meta-seed, only its incumbent), and a plain mean over
    different instances would compare instances' difficulties rather than configurations.
    """
    per_instance, per_config = search_means(archive)
    complete = per_config[per_config["n_instances"] == len(instances)]
    if complete.empty:
        return per_config.iloc[:0].assign(difference=[])
    reference = complete["mean"].idxmin()
    if min_instance_fraction >= 1.0:
        pool = complete.sort_values("mean", kind="stable").head(top)
        return pool.assign(difference=pool["mean"] - pool.loc[reference, "mean"])
    by_instance = per_instance.unstack("instance")
    difference = by_instance.sub(by_instance.loc[reference], axis=1).mean(axis=1, skipna=True)
    needed = math.ceil(min_instance_fraction * len(instances) - 1e-9)
    eligible = per_config[per_config["n_instances"] >= needed].assign(difference=difference)
    others = eligible.drop(index=reference).sort_values("difference", kind="stable").head(max(top - 1, 0))
    return pd.concat([eligible.loc[[reference]], others])


def best_designs(records: list[dict[str, Any]], top: int) -> list[tuple[str, dict[str, Any], float]]:
    """The ``top`` best designs of a compact meta-archive's ``records`` (:func:`read_meta_runs`), best
    first, as (γ hash, γ, mean objective); called when a study warm-starts from another study's
    search (``meta.warm_start``).

    Only runs at the full inner budget count, and only designs run on every instance the archive's
    best-covered design ran on (a design's mean over fewer instances would compare the instances'
    difficulties, see :func:`selection_pool`); seeds are averaged per instance first, as in
    :func:`search_means`. Ties keep the archive's order.
    """
    full = [r for r in records if "inner_budget" not in r]
    if not full:
        return []
    table = pd.DataFrame([{"hash": r["hash"], "instance": str(r["instance"]), "objective": float(r["objective"])}
                          for r in full])
    _, per_config = search_means(table)
    covered = per_config[per_config["n_instances"] == per_config["n_instances"].max()]
    gammas = {r["hash"]: r["gamma"] for r in full}
    return [(h, gammas[h], float(mean)) for h, mean in covered["mean"].sort_values(kind="stable").head(top).items()]


def _valid_record(record: Any) -> bool:
    """A run record that may serve as a cache entry: status ok, a numeric objective, a γ."""
    try:
        record_key(record)
        return (record["status"] == "ok" and isinstance(record["objective"], (int, float))
                and not isinstance(record["objective"], bool) and isinstance(record["gamma"], dict))
    except (KeyError, TypeError, ValueError):
        return False


def same_under_cap(record: dict[str, Any], max_evals: int | None) -> bool:
    """Whether the stored run ``record`` is the run its design makes under the evaluation cap
    ``max_evals`` (``meta.max_evals``; None: no cap). A run that stopped below the cap for another
    reason is the same run with any cap at least its length; a run the cap stopped (``eval_cap``) is
    the same run only under that cap. Records without the two summary fields (older archives'
    failed runs, which are never cache entries) count as the same."""
    summary = record.get("summary") or {}
    n_evals, reason = summary.get("n_evals"), summary.get("stop_reason")
    if n_evals is None:
        return True
    if reason == "eval_cap":
        return max_evals is not None and n_evals == max_evals
    return max_evals is None or n_evals <= max_evals


def load_cache(store: StudyStore, archive_file: Path | None, *, max_evals: int | None,
               objective: str | None) -> dict[Key, dict[str, Any]]:
    """The finished (status ``ok``) runs in the store, by key, and those of the compact meta-archive
    ``archive_file`` (``meta.archive``) the store lacks; called once per optimize stage.

    Failed runs are not cache entries (they are retried), nor is a damaged or foreign file. A damaged
    compact archive is refused with one line (it is a file someone committed, not a crash's leftover).
    Nor is a run that the evaluation cap ``max_evals`` (the study's ``meta.max_evals``; every caller
    names it, since None drops the runs a cap stopped) would have made otherwise (:func:`same_under_cap`):
    it is run again under the cap. Nor is a run whose objective counts regret otherwise than
    ``objective`` (:func:`~metaopt.store.study_spec.objective_tag` of the study's ``meta.objective_transform``; every caller
    names it, None being plain regret): its trace is not kept, so it is run again.
    """
    def usable(record: dict[str, Any]) -> bool:
        """The run this search makes: the same under its evaluation cap, counted its way."""
        return same_under_cap(record, max_evals) and record.get(OBJECTIVE_TRANSFORM) == objective

    cache = {}
    for path in stored_run_records(store.meta_runs_dir):
        try:
            record = json.loads(path.read_text())
        except ValueError:  # e.g. truncated by a full disk: recomputed
            continue
        if (_valid_record(record) and path == store.meta_run_file(*record_key(record))
                and usable(record)):
            cache[record_key(record)] = record
    if archive_file is not None and not Path(archive_file).exists():
        print(f"optimize: the meta-archive {archive_file} does not exist yet: nothing to continue from "
              "(`metaopt study export-meta` writes it)")
    elif archive_file is not None:
        for record in read_meta_runs(archive_file):
            if usable(record):
                cache.setdefault(record_key(record), record)
    return cache


TRIALS_LOG = "trials_log"
"""The key of a compact meta-archive's line that holds one meta-seed's trials in order (not a run)."""
META_CLOCK = "meta_clock"
"""The key of a compact meta-archive's first line when its runs were made on the simulated clock
(``meta.clock``): ``{"meta_clock": {"workers": 8, "time_limit": "10dc"}}``; an archive without it
holds runs off the clock."""
META_ARM = "meta_arm"
"""The key of the line that names the arm of a compact meta-archive of one arm of a study that
meta-optimizes a list of restrictions (:func:`metaopt.store.study_spec.arm_archive`):
``{"meta_arm": "gamma1"}``, after the clock line if there is one; none in the archive of a study
of one design space."""


def _archive_lines(path: Path) -> list[tuple[int, str]]:
    """(line number, text) of the non-empty lines of the gzipped compact meta-archive ``path``."""
    try:
        text = gzip.decompress(Path(path).read_bytes()).decode()
    except FileNotFoundError:
        arms = sorted(str(p) for p in Path(path).parent.glob(arm_archive(path, "*").name))
        hint = (f"; a search of several restrictions has one archive per arm: {', '.join(arms)}" if arms
                else " (write one with `metaopt study export-meta`)")
        raise UsageError(f"{path}: no such meta-archive{hint}") from None
    except (OSError, EOFError, UnicodeDecodeError) as err:
        raise UsageError(f"{path}: not a gzipped meta-archive ({err})") from None
    return [(number, line) for number, line in enumerate(text.splitlines(), 1) if line.strip()]


LogId = tuple[str | None, int]
"""A trials log of a study's meta folder: (baseline name, or None for the search itself; meta-seed)."""


def read_archived_trials(path: Path) -> dict[LogId, list[tuple[Key, bool]]]:
    """The trials logs a compact meta-archive carries (``metaopt study export-meta`` writes those of the
    search and of its meta-level baselines beside the runs): log → its trials in order, each as (run
    key, whether the run came from the store). Read by the optimize stage, which restores a finished
    search from them without replaying it; UsageError naming the file and line if one is damaged."""
    logs: dict[LogId, list[tuple[Key, bool]]] = {}
    for number, line in _archive_lines(path):
        if f'"{TRIALS_LOG}"' not in line:
            continue
        try:
            entry = json.loads(line)[TRIALS_LOG]
            baseline = entry.get("baseline")
            if baseline is not None and (not isinstance(baseline, str) or not baseline.isidentifier()):
                raise ValueError(baseline)
            logs[(baseline, int(entry["meta_seed"]))] = [((str(h), str(i), int(s)), bool(c))
                                                         for h, i, s, c in entry["trials"]]
        except (ValueError, KeyError, TypeError, AttributeError):
            raise UsageError(f"{path}: line {number} is not a trials log (baseline, meta_seed, trials)") from None
    return logs


def read_meta_runs(path: Path) -> list[dict[str, Any]]:
    """The run records of a compact meta-archive (:func:`export_meta_runs`; its trials logs are read
    by :func:`read_archived_trials`); UsageError naming the file and line if it is not one."""
    records = []
    for number, line in _archive_lines(path):
        try:
            record = json.loads(line)
        except ValueError:
            record = None
        if isinstance(record, dict) and (TRIALS_LOG in record or META_CLOCK in record or META_ARM in record):
            continue
        if not _valid_record(record):
            raise UsageError(f"{path}: line {number} is not a finished run record (hash, gamma, instance, seed, "
                             "status ok, objective)")
        if run_name(record["gamma"], record.get("inner_budget", 1.0)) != record["hash"]:
            raise UsageError(f"{path}: line {number}: the record's hash is not its gamma's")
        records.append(record)
    return records


def _archive_header(path: Path, key: str, lines: int, what: str, convert: Callable[[Any], Any]) -> Any:
    """``convert`` of the value of the line ``{key: value}`` among the first ``lines`` lines of the
    compact meta-archive ``path`` (the lines :func:`metaopt.stages.meta.export_meta_runs` writes before
    the runs), None without one; UsageError naming the line, as the archive's ``what``, if it is damaged."""
    for number, line in _archive_lines(path)[:lines]:
        if f'"{key}"' in line:
            try:
                return convert(json.loads(line)[key])
            except (ValueError, KeyError, TypeError):
                raise UsageError(f"{path}: line {number} is not the archive's {what}") from None
    return None


def read_archived_clock(path: Path) -> dict[str, Any] | None:
    """The simulated-clock settings (``meta.clock``: workers, time limit) a compact meta-archive's runs
    were made with (its first line), None for runs off the clock; UsageError if the file is not a meta-archive."""
    return _archive_header(path, META_CLOCK, 1, "clock settings (workers, time_limit)", dict)


def read_archived_arm(path: Path) -> str | None:
    """The arm (restriction) whose search a compact meta-archive holds (its :data:`META_ARM` line, the
    first or after the clock line), None for the archive of a study of one design space; UsageError if
    the file is not a meta-archive."""
    return _archive_header(path, META_ARM, 2, "arm (meta_arm)", str)


def check_archived_arm(path: Path, restriction: str | None) -> None:
    """Called when a study with ``meta.archive`` is loaded, before any work, for the archive of each of
    its meta-optimizations: UsageError when the archive holds an arm's search and ``restriction`` (the
    reading search's design space; None: the full space) is not that arm's. An archive of a study of
    one design space passes (it names none). A missing archive passes (nothing to continue from yet).
    Another space's trials logs would otherwise be restored as this search's."""
    if not Path(path).exists():
        return
    archived = read_archived_arm(path)
    if archived is not None and archived != restriction:
        raise UsageError(f"the meta-archive {path} holds the search of the restriction {archived} (an arm of a "
                         f"study of several restrictions), this search is in {restriction or 'the full space'}: "
                         f"name that arm's archive ({arm_archive(path, restriction or '<restriction>').name} "
                         "beside it, say) or another meta.archive")


def check_archived_clock(path: Path, clock: dict[str, Any] | None) -> None:
    """Called when a study with ``meta.archive`` is loaded, before any work: UsageError unless the
    archive's runs were made with the study's simulated-clock settings ``clock`` (``meta.clock``'s
    workers and time limit as written; None: off the clock). A missing archive passes (nothing to
    continue from yet). Runs made with other settings have the same keys (γ, instance, seed) but
    other objectives, so taking them as stored would mix two searches."""
    if not Path(path).exists():
        return
    archived = read_archived_clock(path)
    if archived != clock:
        def describe(settings: dict[str, Any] | None) -> str:
            return ("off the simulated clock" if settings is None else
                    f"on the simulated clock with {settings.get('workers')} workers and time limit "
                    f"{settings.get('time_limit')}")

        raise UsageError(f"the meta-archive {path} holds runs made {describe(archived)}, this study's runs are "
                         f"made {describe(clock)}: its runs are not this search's (give meta.clock the archive's "
                         "settings, or name another meta.archive)")
