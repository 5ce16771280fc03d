"""How an ablation estimates a configuration γ's performance (lower is better): two estimators.

``EvaluatedEstimator`` runs γ on instances × seeds; its estimate is the mean normalized regret at
the budget ± s.e. over instances (seeds averaged per instance first; over the seeds when there is one
instance). Each run is stored as
``<store>/<γ hash>/<instance>/seed-<k>.json`` (written atomically as it finishes); stored finished
runs are never rerun, runs that raised are retried by the next call (until then they count with
the meta-optimization's crash objective, ``metaopt.stages.meta.CRASH_OBJECTIVE``), and a damaged record
(not valid JSON, fields missing) is redone with a line saying so.

Racing (optional): the candidates of one call run seed by seed (a round = one seed on every
instance). After each round but the last, every candidate is compared with the current best (the
lowest mean) by a one-sided paired t-test over instances on the per-instance means so far
(H1: the candidate's regret is higher), α = 0.05, no multiplicity correction; candidates for
which H1 is accepted get no further seeds. Needs at least 2 instances; the best is never dropped.

``SurrogateEstimator`` predicts from the model of a study's meta-archive
(``meta/archive.csv``: one row per meta-trial γ × instance × seed with its meta-objective), the random
forest of :mod:`metaopt.analysis.meta_model` over the design space: the estimate of a candidate is
the forest's prediction averaged over the archive's instances, its s.e. the standard deviation of
that average across the trees (the forest's own uncertainty). Configurations outside the archive's
support (a value, or an active/inactive state, never seen in the archive; numeric values more than
:data:`SUPPORT_MARGIN` beyond the archive's range) are extrapolations and are named in ``note``.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from ConfigSpace import ConfigurationSpace
from ConfigSpace.hyperparameters import CategoricalHyperparameter, NumericalHyperparameter, OrdinalHyperparameter
from tqdm import tqdm

from metaopt.analysis.meta_model import N_TREES, SEED, MetaArchiveModel, meta_archive_model
from metaopt.analysis.stats import seeds_are_replicates
from metaopt.core.budget import Budget
from metaopt.core.executor import Executor
from metaopt.stages.meta import meta_objective
from metaopt.store.meta_archive import CRASH_OBJECTIVE, gamma_hash
from metaopt.store.run_io import jsonable
from metaopt.core.errors import UsageError
from metaopt.store.store import read_meta_archive, run_record_file, stored_run_records
from metaopt.core.store_utils import atomic_write_text
from metaopt.engine.tasks import RunSpec, execute

Gamma = dict[str, Any]
"""A design-space configuration (γ) as a dict."""

RACE_ALPHA = 0.05
RECORD_FIELDS = {"hash", "instance", "seed", "status", "regret"}
"""Fields every stored run record has; a record without them is damaged and redone."""
SUPPORT_MARGIN = 0.05
"""How far (in ConfigSpace's [0, 1] vector scale) beyond the archive's range a numeric value counts as seen."""


class EvaluatedEstimator:
    """Estimates by running each candidate on ``instances`` × ``seeds`` (module docstring)."""

    def __init__(self, store: Path, benchmark: str, instances: list[str], seeds: list[int], budget: Budget,
                 executor: Executor, race: bool = False, yahpo_data: str | None = None, quiet: bool = False) -> None:
        from metaopt.core.benchmarks import get_benchmark
        from metaopt.core.references import get_reference

        bench = get_benchmark(benchmark, yahpo_data)
        self.store, self.benchmark, self.budget = store, bench.name, budget
        self.instances = [bench.problem(i).instance for i in instances]
        self.seeds, self.executor, self.race = seeds, executor, race
        self.yahpo_data, self.quiet = yahpo_data, quiet
        self.references = {i: get_reference(bench, i) for i in self.instances}
        self.records: dict[tuple[str, str, int], dict[str, Any]] = {}
        for path in stored_run_records(store):
            try:  # one atomically written file per run: damage means someone changed it
                record = json.loads(path.read_text())
            except ValueError:
                record = None
            if not isinstance(record, dict) or not RECORD_FIELDS <= record.keys():
                print(f"ablation: stored run {path} is damaged (not a complete run record); it is redone")
                path.unlink()
                continue
            if record["status"] == "ok":
                self.records[(record["hash"], record["instance"], int(record["seed"]))] = record
        self.raced_out: dict[str, int] = {}  # γ hash -> seeds it ran before racing dropped it

    def __call__(self, configs: list[Gamma]) -> list[tuple[float, float]]:
        hashes = [gamma_hash(c) for c in configs]
        by_hash = dict(zip(hashes, configs))
        alive = list(by_hash)
        for k, seed in enumerate(self.seeds):
            self._run([(h, by_hash[h], i, seed) for h in alive for i in self.instances
                       if (h, i, seed) not in self.records])
            if self.race and k < len(self.seeds) - 1 and len(alive) > 1 and len(self.instances) > 1:
                alive = self._race(alive, self.seeds[: k + 1])
        return [self._estimate(h) for h in hashes]

    def _per_instance(self, h: str, seeds: list[int]) -> np.ndarray:
        """Mean regret over the stored seeds of each instance (NaN where none is stored)."""
        values = [[self.records[(h, i, s)]["regret"] for s in seeds if (h, i, s) in self.records]
                  for i in self.instances]
        return np.array([np.mean(v) if v else math.nan for v in values])

    def _replicates(self, h: str) -> np.ndarray:
        """What the estimate's mean ± s.e. is taken over: each instance's mean over its stored seeds, or,
        with a single instance, the stored seeds' regrets (:func:`metaopt.analysis.stats.seeds_are_replicates`)."""
        if not seeds_are_replicates(len(self.instances)):
            return self._per_instance(h, self.seeds)
        return np.array([self.records[(h, i, s)]["regret"] for i in self.instances for s in self.seeds
                         if (h, i, s) in self.records])

    def _estimate(self, h: str) -> tuple[float, float]:
        y = self._replicates(h)
        y = y[~np.isnan(y)]
        se = float(np.std(y, ddof=1) / math.sqrt(len(y))) if len(y) > 1 else math.nan
        return float(np.mean(y)), se

    def _race(self, alive: list[str], seeds: list[int]) -> list[str]:
        from scipy.stats import ttest_rel

        y = {h: self._per_instance(h, seeds) for h in alive}
        best = min(alive, key=lambda h: float(np.mean(y[h])))
        kept = []
        for h in alive:
            p = math.nan if h == best else ttest_rel(y[h], y[best], alternative="greater").pvalue
            if p < RACE_ALPHA:
                self.raced_out[h] = len(seeds)
            else:
                kept.append(h)
        return kept

    def _run(self, tasks: list[tuple[str, Gamma, str, int]]) -> None:
        specs = [RunSpec(h, self.benchmark, i, s, self.budget, self.references[i], config=config,
                         yahpo_data=self.yahpo_data) for h, config, i, s in tasks]
        outcomes = self.executor.map_unordered((execute, (spec,)) for spec in specs)
        for _, outcome in tqdm(outcomes, total=len(specs), desc="ablation runs", unit="run", leave=False,
                               disable=True if self.quiet else None):
            spec = outcome.spec
            record: dict[str, Any] = {"hash": spec.optimizer, "instance": spec.instance, "seed": spec.seed,
                                      "budget": spec.budget.spec or spec.budget.amount, "gamma": spec.config}
            if outcome.ok:
                summary = {k: v for k, v in outcome.result.summary.items() if k not in ("config", "reference")}
                record.update(status="ok", summary=summary,
                              regret=meta_objective("regret", outcome.result.trace, spec.budget, [1.0]))
            else:
                record.update(status="failed", regret=CRASH_OBJECTIVE, traceback=outcome.error)
                tqdm.write(f"ablation run failed: {spec.optimizer} {spec.instance} seed {spec.seed}: "
                           f"{outcome.error.strip().splitlines()[-1]}")
            atomic_write_text(run_record_file(self.store, spec.optimizer, spec.instance, spec.seed),
                              json.dumps(jsonable(record), indent=1) + "\n")
            self.records[(spec.optimizer, spec.instance, spec.seed)] = record

    def note(self, config: Gamma) -> str:
        h = gamma_hash(config)
        failed = sum(r["status"] == "failed" for (rh, _, _), r in self.records.items() if rh == h)
        parts = [f"raced out after {self.raced_out[h]} of {len(self.seeds)} seeds" if h in self.raced_out else "",
                 f"{failed} runs failed (counted as regret {CRASH_OBJECTIVE:g})" if failed else ""]
        return "; ".join(p for p in parts if p)

    def describe(self) -> dict[str, Any]:
        return {"instances": self.instances, "seeds": self.seeds,
                "racing": (f"after each seed round, one-sided paired t-test over instances vs. the best, "
                           f"alpha {RACE_ALPHA}") if self.race else None}


class SurrogateEstimator:
    """Estimates by the random forest of a meta-archive (module docstring)."""

    def __init__(self, archive: pd.DataFrame, space: ConfigurationSpace | None = None, n_trees: int = N_TREES,
                 seed: int = SEED) -> None:
        from metaopt.spaces.design_space import design_space, validate

        self.space = space if space is not None else design_space()
        self.hps = [hp for hp in self.space.values()
                    if isinstance(hp, (CategoricalHyperparameter, OrdinalHyperparameter, NumericalHyperparameter))]
        self.model: MetaArchiveModel = meta_archive_model(archive, self.space, n_trees=n_trees, seed=seed)
        columns = [c for c in archive.columns if c.startswith("gamma.")]
        gammas = [validate({c[len("gamma."):]: (v.item() if hasattr(v, "item") else v)
                            for c, v in row.items() if not pd.isna(v)}, self.space)
                  for _, row in archive.drop_duplicates("hash")[columns].iterrows()]
        self.seen = {hp.name: [g.get(hp.name) for g in gammas] for hp in self.hps}

    @classmethod
    def from_archive(cls, path: Path) -> SurrogateEstimator:
        """The estimator of the meta-archive ``path``, read and checked by :func:`metaopt.store.store.read_meta_archive`
        (UsageError when it is damaged or missing; a warning line when rows are missing)."""
        archive, note = read_meta_archive(path)
        if archive is None:
            raise UsageError(f"{path} not found: the surrogate estimator needs a study's meta-archive")
        if note:
            print(f"metaopt: warning: {note}", file=sys.stderr)
        return cls(archive)

    def __call__(self, configs: list[Gamma]) -> list[tuple[float, float]]:
        mean, std = self.model.predict(configs)
        return [(float(m), float(s)) for m, s in zip(mean, std)]

    def note(self, config: Gamma) -> str:
        """The parameters of ``config`` outside the archive's support (parents only: a child whose
        parent is already named is implied)."""
        unseen: list[str] = []
        for hp in self.hps:
            value, seen = config.get(hp.name), self.seen[hp.name]
            if any(p.name in unseen for p in self.space.parents_of[hp.name]):
                unseen.append(hp.name)
                continue
            if isinstance(hp, NumericalHyperparameter) and value is not None:
                active = [float(hp.to_vector(v)) for v in seen if v is not None]
                x = float(hp.to_vector(value))
                outside = not active or not min(active) - SUPPORT_MARGIN <= x <= max(active) + SUPPORT_MARGIN
            else:
                outside = value not in seen
            if outside:
                unseen.append(hp.name)
        parents = [n for n in unseen if not any(p.name in unseen for p in self.space.parents_of[n])]
        shown = [f"{n}={config[n]:.4g}" if isinstance(config.get(n), float) else
                 f"{n}={config[n]}" if n in config else f"{n} inactive" for n in parents]
        return "extrapolates (never in the archive): " + ", ".join(shown) if shown else ""

    def describe(self) -> dict[str, Any]:
        return {"instances": self.model.instances, "seeds": None, "surrogate": self.model.describe()}
