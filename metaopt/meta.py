"""The optimize stage: SMAC's AlgorithmConfigurationFacade searches the design space over training instances.

Each SMAC trial is one inner run: a configuration γ of the (restricted) design space on one
training instance with one seed; its cost is the meta-objective computed from the run's trace.
Several meta-seeds run SMAC independently; γ* is chosen from their pooled results.

γ* rule: pool every trial of every meta-seed; per configuration, average the objective over seeds
per instance, then over instances; among configurations evaluated on *all* training instances,
γ* is the one with the lowest mean (ties: the one found first). SMAC's intensification evaluates
its incumbents on every instance, so such configurations exist once a meta-seed has run a few
dozen trials.

Store (under ``<output>/meta``):
- ``runs/<γ hash>/<instance>/seed-<k>.json``: each finished inner run's objective and summary,
  written atomically as SMAC is told the result. This is also the cache that makes a rerun resume:
  SMAC is started again with the same seed, replays the same proposals, and finished runs are
  looked up instead of recomputed (exactly so with one worker; with Dask workers SMAC's proposal
  order depends on timing, and cached runs are still reused where they recur). A meta-seed whose
  trials all finished is not replayed at all: its log and stored runs are final.
- ``trials-seed-<m>.jsonl``: the order in which meta-seed m's SMAC evaluated trials.
- ``archive.csv``: the meta-archive (meta-seed, trial, γ, instance, seed, objective, inner summary).
- ``gamma_star.json``: γ*, its mean objective and how it was chosen.

Failure isolation: an inner run that raises gets the objective ``CRASH_OBJECTIVE`` and its
traceback is kept in the store and the archive; the meta-optimization goes on.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from tqdm import tqdm

from metaopt.budget import Budget
from metaopt.errors import UsageError
from metaopt.executor import Executor
from metaopt.references import Reference
from metaopt.run_io import jsonable
from metaopt.smac_utils import reproducible_model_and_maximizer
from metaopt.store_utils import atomic_write_text
from metaopt.tasks import RunSpec, execute

CRASH_OBJECTIVE = 10.0
"""Meta-objective of an inner run that raised (normalized regret of a run is ~1 for a median random config)."""
OBJECTIVES = ("regret", "regret_at", "auc")


def gamma_hash(gamma: dict[str, Any]) -> str:
    """A short stable identifier of a configuration γ."""
    return hashlib.sha1(json.dumps(gamma, sort_keys=True, default=str).encode()).hexdigest()[:12]


def meta_objective(kind: str, trace: pd.DataFrame, budget: Budget, fractions: list[float]) -> float:
    """The meta-objective of one inner run from its trace.

    - ``regret``: normalized regret at the inner budget (the default);
    - ``regret_at``: mean normalized regret at the given fractions of the budget;
    - ``auc``: mean normalized regret over 50 log-spaced budgets from the first evaluation to B
      (the area under the anytime curve on a log budget axis).
    """
    from analysis.anytime import budget_grid, regret_at

    if len(trace) == 0:
        return CRASH_OBJECTIVE
    spent = trace["budget_used" if budget.unit == "full_evals" else "cost_used"].to_numpy()
    regret = trace["normalized_regret"].to_numpy()
    if kind == "regret":
        return float(regret[-1])
    if kind == "regret_at":
        values = regret_at(spent, regret, np.asarray(fractions) * budget.amount)
    else:
        values = regret_at(spent, regret, budget_grid(spent[0], budget.amount, 50))
    return float(np.mean(np.where(np.isnan(values), 1.0, values)))  # before the first evaluation: regret 1


@dataclass(frozen=True)
class MetaSetup:
    """Everything an inner trial needs, shipped to SMAC's workers."""

    benchmark: str
    yahpo_data: str | None
    budget: Budget
    references: dict[str, Reference]
    restriction: str | None
    objective: str
    objective_fractions: tuple[float, ...]


class InnerObjective:
    """SMAC's target function: (γ, instance, seed) -> (meta-objective, additional info).

    Picklable (SMAC's Dask runner ships it to workers); finished runs come from ``cache``.
    """

    def __init__(self, setup: MetaSetup, cache: dict[tuple[str, str, int], dict[str, Any]]) -> None:
        self.setup = setup
        self.cache = cache

    def complete(self, config: dict[str, Any]) -> dict[str, Any]:
        from spaces.design_space import validate
        from spaces.restrictions import get_restriction

        return get_restriction(self.setup.restriction).complete(config) if self.setup.restriction else validate(config)

    def __call__(self, config: Any, instance: str, seed: int = 0) -> tuple[float, dict[str, Any]]:
        gamma = self.complete(dict(config))
        key = (gamma_hash(gamma), str(instance), int(seed))
        if key in self.cache:
            record = self.cache[key]
            return record["objective"], {**record, "cached": True}
        s = self.setup
        outcome = execute(RunSpec("gamma", s.benchmark, str(instance), int(seed), s.budget,
                                  s.references[str(instance)], config=gamma, yahpo_data=s.yahpo_data))
        record: dict[str, Any] = {"gamma": gamma, "hash": key[0], "instance": key[1], "seed": key[2]}
        if outcome.ok:
            summary = {k: v for k, v in outcome.result.summary.items() if k not in ("config", "reference")}
            record.update(status="ok", summary=summary,
                          objective=meta_objective(s.objective, outcome.result.trace, s.budget,
                                                   list(s.objective_fractions)))
        else:
            record.update(status="failed", objective=CRASH_OBJECTIVE, traceback=outcome.error)
        return record["objective"], record


def as_target_function(objective: InnerObjective):
    """SMAC inspects its target function's code and signature, so it must be a real function;
    a closure is fine for its Dask runner (cloudpickle ships closures)."""

    def target(config: Any, instance: str, seed: int = 0) -> tuple[float, dict[str, Any]]:
        return objective(config, instance, seed)

    return target


def _store_path(meta_dir: Path, key: tuple[str, str, int]) -> Path:
    return meta_dir / "runs" / key[0] / key[1] / f"seed-{key[2]}.json"


def load_cache(meta_dir: Path) -> dict[tuple[str, str, int], dict[str, Any]]:
    cache = {}
    for path in meta_dir.glob("runs/*/*/seed-*.json"):
        try:
            record = json.loads(path.read_text())
        except ValueError:
            continue  # cannot happen with atomic writes; a foreign file is simply not a cache entry
        cache[(record["hash"], record["instance"], int(record["seed"]))] = record
    return cache


def optimize(output: Path, setup: MetaSetup, space, instances: list[str], instance_features: dict[str, list[float]],
             trials: int, meta_seeds: list[int], executor: Executor, quiet: bool = False) -> dict[str, Any]:
    """Run SMAC once per meta-seed, store every trial, choose and write γ*."""
    meta_dir = output / "meta"
    meta_dir.mkdir(parents=True, exist_ok=True)
    cache = load_cache(meta_dir)
    objective = InnerObjective(setup, cache)
    rows: list[dict[str, Any]] = []
    for meta_seed in meta_seeds:
        started = time.perf_counter()
        trial_rows = _finished_trials(meta_dir, meta_seed, trials, cache)
        if trial_rows is not None:
            print(f"meta-seed {meta_seed}: finished earlier ({trials} trials in the store); SMAC is not rerun")
            rows += trial_rows
            continue
        trial_rows = _smac_trials(meta_dir, meta_seed, objective, cache, space, instances, instance_features,
                                  trials, executor, quiet)
        failed = sum(r["status"] == "failed" for r in trial_rows)
        print(f"meta-seed {meta_seed}: {len(trial_rows)} trials "
              f"({sum(r['cached'] for r in trial_rows)} from the store, {failed} failed) "
              f"in {time.perf_counter() - started:.1f} s")
        rows += trial_rows

    archive = meta_archive(rows)
    atomic_write_text(meta_dir / "archive.csv", archive.to_csv(index=False))
    star = choose_gamma_star(archive, instances, rows)
    atomic_write_text(meta_dir / "gamma_star.json", json.dumps(jsonable(star), indent=1) + "\n")
    return star


def _finished_trials(meta_dir: Path, meta_seed: int, trials: int, cache: dict) -> list[dict[str, Any]] | None:
    """The rows of a meta-seed that finished all its ``trials`` earlier (its log and every run stored), else None.

    A finished meta-seed is not replayed: its trials are final even if the design space has since
    grown (a replay would then propose differently) or it ran with several workers (not replayable).
    """
    log_path = meta_dir / f"trials-seed-{meta_seed}.jsonl"
    if not log_path.exists():
        return None
    rows = [json.loads(line) for line in log_path.read_text().splitlines() if line.strip()]
    if len(rows) != trials:
        return None
    for row in rows:
        record = cache.get((row["hash"], str(row["instance"]), int(row["seed"])))
        if record is None:
            return None
        row["summary"] = record.get("summary", {})
    return rows


def _smac_trials(meta_dir: Path, meta_seed: int, objective: InnerObjective, cache: dict, space,
                 instances: list[str], instance_features: dict[str, list[float]], trials: int,
                 executor: Executor, quiet: bool) -> list[dict[str, Any]]:
    """One meta-seed: SMAC's ask-and-tell loop with up to ``executor.workers`` trials in flight.

    We drive SMAC's ask/tell interface ourselves instead of handing it a Dask client: SMAC 2.4's
    Dask runner returns from optimize() once n_trials are *submitted* and drops the results of
    trials still running (seen here: 7 of 12 trials told with 2 workers). Here every trial is
    told and stored, and with one worker the run is exactly reproducible, which resume relies on.
    """
    from smac import Scenario

    log_path = meta_dir / f"trials-seed-{meta_seed}.jsonl"
    log_path.write_text("")  # the log of this meta-seed is rebuilt by the (replaying) rerun
    with tempfile.TemporaryDirectory(prefix="metaopt-smac-") as smac_dir:  # SMAC's own files: not needed
        scenario = Scenario(space, name=f"meta-seed-{meta_seed}", deterministic=True, n_trials=trials,
                            instances=instances, instance_features=instance_features, seed=meta_seed,
                            output_directory=Path(smac_dir), crash_cost=CRASH_OBJECTIVE)
        return _ask_tell(meta_dir, log_path, meta_seed, objective, cache, scenario, trials, executor, quiet)


def _ask_tell(meta_dir: Path, log_path: Path, meta_seed: int, objective: InnerObjective, cache: dict, scenario,
              trials: int, executor: Executor, quiet: bool) -> list[dict[str, Any]]:
    from smac import AlgorithmConfigurationFacade
    from smac.runhistory.dataclasses import TrialValue

    model, maximizer = reproducible_model_and_maximizer(AlgorithmConfigurationFacade, scenario)
    smac = AlgorithmConfigurationFacade(
        scenario, as_target_function(objective), model=model, acquisition_maximizer=maximizer,
        intensifier=AlgorithmConfigurationFacade.get_intensifier(scenario, max_config_calls=len(scenario.instances)),
        overwrite=True, logging_level=40,
    )
    rows: list[dict[str, Any]] = []
    bar = tqdm(total=trials, desc=f"meta-seed {meta_seed}: SMAC trials", unit="trial", disable=True if quiet else None)

    def tell(info, record: dict[str, Any]) -> None:
        cached = record.pop("cached", False)
        key = (record["hash"], record["instance"], int(record["seed"]))
        if not cached:
            atomic_write_text(_store_path(meta_dir, key), json.dumps(jsonable(record)))
            cache[key] = record
        smac.tell(info, TrialValue(cost=record["objective"], additional_info={"hash": key[0]}), save=False)
        row = {"meta_seed": meta_seed, "trial": len(rows), "hash": key[0], "instance": key[1], "seed": key[2],
               "objective": record["objective"], "status": record["status"], "cached": cached,
               "gamma": record["gamma"], "summary": record.get("summary", {}), "traceback": record.get("traceback")}
        rows.append(row)
        with log_path.open("a") as fh:
            fh.write(json.dumps(jsonable({k: v for k, v in row.items() if k != "summary"})) + "\n")
        bar.update(1)

    in_flight: dict[Any, Any] = {}  # future -> TrialInfo
    asked = 0
    with warnings.catch_warnings():
        # SMAC's local search averages an empty list of timings when it finds no neighbours.
        warnings.filterwarnings("ignore", "Mean of empty slice", RuntimeWarning)
        warnings.filterwarnings("ignore", "invalid value encountered in scalar divide", RuntimeWarning)
        while len(rows) < trials:
            while asked < trials and len(in_flight) < max(executor.workers, 1):
                info = smac.ask()
                asked += 1
                gamma = objective.complete(dict(info.config))
                key = (gamma_hash(gamma), str(info.instance), int(info.seed or 0))
                if key in cache or executor.dask_client is None:
                    tell(info, objective(info.config, info.instance, info.seed or 0)[1])
                else:
                    in_flight[executor.dask_client.submit(objective, info.config, info.instance, info.seed or 0,
                                                          pure=False)] = info
            if in_flight:
                from dask.distributed import wait

                done = wait(list(in_flight), return_when="FIRST_COMPLETED").done
                for future in done:
                    tell(in_flight.pop(future), future.result()[1])
            elif asked >= trials:
                break
    bar.close()
    return rows


def meta_archive(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """One row per trial: meta-seed, trial, γ (one column per parameter), instance, seed, objective, summary."""
    table = []
    for r in rows:
        row = {k: r[k] for k in ("meta_seed", "trial", "hash", "instance", "seed", "objective", "status", "cached")}
        row.update({f"gamma.{k}": v for k, v in r["gamma"].items()})
        row.update({f"inner.{k}": v for k, v in r.get("summary", {}).items()
                    if k in ("final_loss", "normalized_regret", "budget_used", "cost_used", "n_evals",
                             "stop_reason", "wall_time_s")})
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
