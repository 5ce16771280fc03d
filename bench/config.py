"""What ``metaopt bench`` measures: problems, optimizers, peers, budgets and seeds of each section.

:data:`FULL` is the default (over an hour on 2 cores, most of it in the SMAC peers on 10 instances × 3 seeds);
:data:`QUICK` is a minutes-sized version for CI and tests. Optimizer lists name presets of
:mod:`metaopt.spaces.presets`; a name that is not (yet) a preset is skipped, and the output says so.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any


@dataclass(frozen=True)
class BenchConfig:
    name: str
    benchmarks: tuple[str, ...] = ("yahpo:lcbench", "yahpo:rbv2_xgboost")
    instances: int = 1
    """Per benchmark: the first N instances of its test split (overhead section)."""
    seeds: int = 2
    peer_instances: int = 10
    """The peers section: the first N test instances per benchmark (a peer comparison on one
    instance is a fluke: paired differences need instances)."""
    peer_seeds: int = 3
    budget: str = "30d"
    overhead_optimizers: tuple[str, ...] = ("rs", "hb", "bohb", "smashy_lcbench_hb", "bo_gp_ei", "bo_rf_ei", "cfo",
                                            "metaopt_lcbench", "smac_like")
    peers: tuple[tuple[str, str], ...] = (("smac_hpo", "smac_like"), ("smac_hb", "hb"), ("optuna_tpe", "bohb"),
                                          ("flaml_cfo", "cfo_tuned"))
    """(peer, our preset it is compared with)."""
    meta_study: str = "studies/lcbench.yaml"
    """The study whose optimize stage is timed (benchmark, budget, restriction, training instances),
    and whose meta-seeds × trials give the projected wall time."""
    meta_trials: int | None = None
    """SMAC trials per meta-seed in the meta section (all of the study's meta-seeds run, side by side); None:
    the study's own (150 for lcbench.yaml), so the section times the whole optimize stage. Its trials
    differ widely in run time and each meta-seed waits for the slowest trial of each batch, so a slow
    design on one meta-seed's path weighs on 2 workers the more, the fewer trials are timed: the same
    code gave 1.43x for 40 trials per meta-seed and 1.74x for 80."""
    meta_workers: tuple[int, ...] = (1, 2)
    eval_optimizers: tuple[str, ...] = ("bohb", "cfo_tuned", "smashy_lcbench_hb", "smac_like")
    """The meta section's evaluate-stage measurement: these presets × ``eval_instances`` test instances of
    the meta study × ``eval_seeds`` seeds, once per worker count."""
    eval_instances: int = 4
    eval_seeds: int = 2
    scaling_optimizers: tuple[str, ...] = ("hb", "smashy_lcbench_hb", "bo_gp_ei", "bo_rf_ei", "smac_like",
                                           "metaopt_lcbench")
    scaling_budgets: tuple[str, ...] = ("10d", "30d", "100d", "300d")
    scaling_seeds: int = 1
    """Seeds per budget in the scaling section (``--seeds`` sets those of overhead and peers)."""
    api_optimizers: tuple[str, ...] = ("hb", "smashy_lcbench_hb", "cfo")
    """The api section: optimizers run through ``metaopt.minimize`` and ``run``."""
    scaling_max_run_s: float = 600.0
    """Scaling: a budget whose run is projected (from the growth so far) to take longer is skipped."""
    baseline_trials: int = 200
    """The baseline section: finished trials of the meta study's optimize stage timed per version."""
    baseline_repeats: int = 3
    """The baseline section: runs of each version, alternating (an older commit may not be deterministic:
    before 61ba438 the meta-seeds shared one generator in the order their batches finished)."""
    baseline_timeout_s: float = 3600.0
    """The baseline section: a version that has not finished ``baseline_trials`` trials by then fails."""
    replay_study: str = "studies/lcbench_cfo_race.yaml"
    """The replay section (:mod:`metaopt.bench.replay`): the study whose committed search is replayed
    from its meta-archive (a race: SMAC's algorithm-configuration facade over instances and seeds)."""
    replay_trials: int = 1000
    """The replay section: the archive's first trials replayed per arm."""
    replay_repeats: int = 2
    """The replay section: replays per arm, alternating."""
    meta_fidelity_studies: tuple[str, ...] = ("studies/lcbench_search.yaml", "studies/lcbench_search_mf.yaml",
                                              "studies/lcbench_search_sh.yaml")
    """The meta_fidelity section (:mod:`metaopt.bench.meta_fidelity`): a search at one inner budget, then the
    same search over the inner budget (SMAC's multi-fidelity facade: Hyperband, successive halving), each
    on the first one's CPU budget."""
    meta_fidelity_trials: int | None = None
    """The meta_fidelity section: trials per meta-seed of the one-fidelity search (None: its study's own); the
    multi-fidelity search runs as long as that one took."""
    meta_fidelity_meta_seeds: tuple[int, ...] | None = None
    """The meta_fidelity section: the meta-seeds every search runs (None: the studies' own)."""
    meta_fidelity_judge_seeds: int = 5
    """The meta_fidelity section: fresh seeds per training instance on which every γ* is re-run."""
    meta_fidelity_workers: int = 2
    clock_instances: int = 3
    clock_seeds: int = 2
    clock_workers: int = 8
    """The clock section (:mod:`metaopt.bench.clock`): the first ``clock_instances`` test instances of the
    first benchmark × ``clock_seeds`` seeds, ``clock_workers`` simulated workers, at ``budget``."""
    clock_optimizers: tuple[str, ...] = ("asha", "hb", "bohb", "async_bohb")
    """The clock section's anytime comparison against simulated time."""
    clock_overhead_optimizers: tuple[str, ...] = ("rs", "hb", "bohb")
    """The clock section: synchronous designs timed as today and on the clock, back to back (rs proposes
    and evaluates one configuration at a time, as an asynchronous design does)."""

    @property
    def our_peer_presets(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(ours for _, ours in self.peers))

    def with_overrides(self, seeds: int | None = None, instances: int | None = None,
                       benchmarks: tuple[str, ...] | None = None) -> "BenchConfig":
        changes: dict[str, Any] = {k: v for k, v in {"seeds": seeds, "instances": instances, "benchmarks": benchmarks,
                                     "peer_seeds": seeds, "peer_instances": instances}.items() if v is not None}
        return replace(self, **changes)


FULL = BenchConfig("full")
QUICK = BenchConfig("quick", seeds=1, peer_instances=1, peer_seeds=1, budget="10d", meta_trials=4, eval_instances=1,
                    eval_seeds=1,
                    scaling_budgets=("5d", "10d", "20d"),
                    scaling_max_run_s=20.0, baseline_trials=8, baseline_repeats=1, baseline_timeout_s=600.0,
                    replay_trials=60, replay_repeats=1,
                    meta_fidelity_trials=40, meta_fidelity_meta_seeds=(1,), meta_fidelity_judge_seeds=1,
                    meta_fidelity_workers=1,
                    clock_instances=1, clock_seeds=1)
