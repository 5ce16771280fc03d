"""The meta-archive: one row per meta-optimization trial, and the γ* rule over it.

Core facts shared by the optimize stage (:mod:`metaopt.meta`, which writes ``meta/archive.csv`` and
``meta/gamma_star.json``), the ablation estimators and the report (which read them): how a γ is
identified (:func:`gamma_hash`), the objective of a failed trial, the archive's columns
(:func:`meta_archive`) and how γ* is chosen (:func:`choose_gamma_star`).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pandas as pd

from metaopt.errors import UsageError

CRASH_OBJECTIVE = 10.0
"""Meta-objective of an inner run that raised (normalized regret of a run is ~1 for a median random config)."""


def gamma_hash(gamma: dict[str, Any]) -> str:
    """A short stable identifier of a configuration γ."""
    return hashlib.sha1(json.dumps(gamma, sort_keys=True, default=str).encode()).hexdigest()[:12]


def meta_archive(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """One row per trial: meta-seed, trial, γ (one column per parameter), instance, seed, objective, summary.

    Only what a run computes: no wall times and no record of which runs came from the store, so the
    archive of a study does not depend on workers, timing or interruptions.
    """
    table = []
    for r in rows:
        row = {k: r[k] for k in ("meta_seed", "trial", "hash", "instance", "seed", "objective", "status")}
        row.update({f"gamma.{k}": v for k, v in r["gamma"].items()})
        row.update({f"inner.{k}": v for k, v in r.get("summary", {}).items()
                    if k in ("final_loss", "normalized_regret", "budget_used", "cost_used", "n_evals",
                             "stop_reason")})
        row["error"] = (r.get("traceback") or "").strip().splitlines()[-1] if r.get("traceback") else ""
        table.append(row)
    return pd.DataFrame(table)


def choose_gamma_star(archive: pd.DataFrame, instances: list[str], rows: list[dict[str, Any]]) -> dict[str, Any]:
    """γ* by the pooled rule of the module docstring."""
    if archive.empty:
        raise UsageError("meta-optimization produced no trials")
    per_instance = archive.groupby(["hash", "instance"], sort=False)["objective"].mean().reset_index()
    per_config = per_instance.groupby("hash", sort=False).agg(mean=("objective", "mean"),
                                                              n_instances=("instance", "nunique")).reset_index()
    complete = per_config[per_config["n_instances"] == len(instances)]
    pool = complete if len(complete) else per_config[per_config["n_instances"] == per_config["n_instances"].max()]
    best = pool.loc[pool["mean"].idxmin()]
    gamma = next(r["gamma"] for r in rows if r["hash"] == best["hash"])
    first = archive[archive["hash"] == best["hash"]].iloc[0]
    return {"config": gamma, "hash": best["hash"], "mean_objective": float(best["mean"]),
            "n_instances": int(best["n_instances"]), "all_instances": bool(len(complete)),
            "found_by_meta_seed": int(first["meta_seed"]), "found_at_trial": int(first["trial"]),
            "n_configurations": int(len(per_config)), "n_trials": int(len(archive)),
            "rule": "lowest mean objective (seeds averaged per instance, then instances) among configurations "
                    "evaluated on all training instances, pooled over meta-seeds"}
