"""The meta-level picture of a study's search: how the best design on the training instances improved
with meta-trials and CPU time, for the search and its baselines, against the meta-objective's noise.

Read from the store (written by the optimize stage, :mod:`metaopt.stages.meta`): the trials logs of the
search (``meta/trials-seed-<m>.jsonl``) and of its baselines (``meta/baselines/<name>/…``), the run
records (for each run's CPU time; those of a compact meta-archive too) and ``meta/noise.csv``.

The incumbent after trial t of one meta-seed's search is the configuration with the lowest mean
objective (seeds averaged per instance, then instances) among those the search has run on every
training instance by then: the γ* rule applied to the trials so far (a multi-fidelity search's runs
below the full inner budget cost CPU time but are not candidates). A search's CPU time after
trial t is the sum of the CPU times of its distinct runs so far (:func:`run_cpu_seconds`) (a run repeated within the search
is counted once; a run taken from the store counts what it cost when it ran).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from metaopt.store.meta_archive import load_cache, read_trials_log
from metaopt.store.store import StudyStore

SEARCH_LABELS = {"smac": "SMAC", "random": "random search"}
BASELINE_LABELS = {"random": "random search (baseline)", "seeds": "known designs alone"}


def _read_log(path: Path) -> pd.DataFrame:
    return pd.DataFrame(read_trials_log(path))


def run_cpu_seconds(record: dict) -> float:
    """An inner run's CPU time in seconds: its process time where the run recorded one, else (runs
    stored before it was recorded) its wall time, which overstates it on a busy machine."""
    summary = record.get("summary", {})
    return float(summary.get("cpu_time_s", summary.get("wall_time_s", 0.0)))


def incumbent_trajectory(trials: pd.DataFrame, n_instances: int, wall: dict[tuple[str, str, int], float]) -> pd.DataFrame:
    """One row per trial of one search (in order): ``trial`` (1-based), ``cpu_hours`` so far and
    ``best``, the incumbent's mean objective (NaN until a configuration has run on all
    ``n_instances``); ``wall`` gives each run's wall time by (γ hash, instance, seed)."""
    objectives: dict[str, dict[str, list[float]]] = {}  # γ hash -> instance -> its objectives so far
    means: dict[str, float] = {}
    seen: set[tuple[str, str, int]] = set()
    cpu, best, rows = 0.0, np.nan, []
    for t, trial in enumerate(trials.itertuples(index=False), 1):
        key = (trial.hash, str(trial.instance), int(trial.seed))
        if key not in seen:
            seen.add(key)
            cpu += wall.get(key, 0.0)
        if pd.isna(getattr(trial, "inner_budget", np.nan)):  # only runs below the full budget record theirs
            runs = objectives.setdefault(trial.hash, {})
            runs.setdefault(str(trial.instance), []).append(float(trial.objective))
            if len(runs) == n_instances:
                means[trial.hash] = float(np.mean([np.mean(v) for v in runs.values()]))
                best = min(means.values())
        rows.append({"trial": t, "cpu_hours": cpu / 3600.0, "best": best})
    return pd.DataFrame(rows)


def search_curves(store: StudyStore) -> pd.DataFrame:
    """The incumbent trajectories of the stored search and baselines: columns search, meta_seed, trial,
    cpu_hours, best (empty when the study has no stored search). The training instances are those the
    search and its baselines ran on (the search's incumbents run on all of them)."""
    spec = store.spec()
    if spec.meta is None:
        return pd.DataFrame()
    logs: list[tuple[str, Path]] = [(SEARCH_LABELS[spec.meta.optimizer], p) for p in store.trials_logs()]
    logs += [(BASELINE_LABELS.get(name, name), p) for name, paths in store.baseline_trials_logs().items()
             for p in paths]
    tables = [(label, path, _read_log(path)) for label, path in logs]
    tables = [(label, path, table) for label, path, table in tables if not table.empty]
    if not tables:
        return pd.DataFrame()
    instances = set().union(*(set(table["instance"].astype(str)) for _, _, table in tables))
    archive = Path(spec.meta.archive) if spec.meta.archive and Path(spec.meta.archive).exists() else None
    runs = load_cache(store, archive, max_evals=spec.meta.max_evals, objective=spec.meta.objective_tag)
    wall = {key: run_cpu_seconds(record) for key, record in runs.items()}
    curves = []
    for label, _path, table in tables:
        trajectory = incumbent_trajectory(table, len(instances), wall)
        trajectory.insert(0, "meta_seed", int(table["meta_seed"].iloc[0]))
        trajectory.insert(0, "search", label)
        curves.append(trajectory)
    return pd.concat(curves, ignore_index=True)


def search_trials(store: StudyStore) -> pd.DataFrame:
    """The stored search's trials at the full inner budget, all meta-seeds, from its trials logs (also
    while a search is under way, before there is an archive); empty without any."""
    tables = [table for table in (_read_log(path) for path in store.trials_logs()) if not table.empty]
    if not tables:
        return pd.DataFrame()
    trials = pd.concat(tables, ignore_index=True)
    if "inner_budget" in trials:
        trials = trials[trials["inner_budget"].isna()]
    return trials


def noise_bands(store: StudyStore) -> pd.DataFrame:
    """Per re-run design of ``meta/noise.csv``: mean, standard deviation and count over its seeds of the
    mean objective over the training instances (empty without noise re-runs)."""
    if not store.noise_csv.exists():
        return pd.DataFrame()
    table = pd.read_csv(store.noise_csv)
    return table.groupby("design", sort=False)["objective"].agg(["mean", "std", "count"]).reset_index()


def search_summary(curves: pd.DataFrame) -> pd.DataFrame:
    """Per search and meta-seed: trials, CPU-hours and the final incumbent's mean objective."""
    last = curves.groupby(["search", "meta_seed"], sort=False).tail(1)
    return last.rename(columns={"trial": "trials", "best": "best objective"})[
        ["search", "meta_seed", "trials", "cpu_hours", "best objective"]].reset_index(drop=True)
