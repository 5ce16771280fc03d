"""The one optimizer loop (paper 004, Alg. 2): propose a batch → evaluate it batched → archive → stop?

A run is a pure function of (γ, problem, seed, budget) → trace: every random draw comes from one
``numpy.random.Generator`` seeded with ``seed``; nothing else carries state between runs.

Budget accounting (DESIGN.md §4): each evaluation adds r/r_max full-evaluation equivalents (a
promoted configuration pays its full r again) and its cost to the cost account. The run never
exceeds its budget: of a batch, only the prefix that fits into what is left is evaluated (for a
cost budget, the evaluations that would finish after the budget ran out are discarded unseen).
Within a batch, survivors come first (best first), then new configurations.

Stopping rules are checked after every batch; the one that stops the run names the stop reason,
and its statistic after each batch goes into the trace (``stop_statistic``). Rules draw from their
own generator (spawned from ``seed``), so a rule never changes what the run proposes: the same γ
with and without a stopping rule gives the same trace up to the stop.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import numpy as np
import pandas as pd

from components.filters import Filter, NoFilter, Scorer
from components.fidelity_schedules import BracketPlan, FidelitySchedule
from components.promotion import PromotionRule
from components.samplers import Sampler
from components.stopping import BUDGET_TOLERANCE, BudgetRule, StoppingRule
from metaopt.archive import Archive
from metaopt.benchmarks.base import Problem
from metaopt.budget import Budget
from metaopt.context import ProposalContext, RunState
from metaopt.registry import select
from metaopt.space_codec import SpaceCodec
from metaopt.trace import build_trace, summarize
from spaces.design_space import validate

ProgressFn = Callable[[float], None]


@dataclass
class RunResult:
    """The outcome of one run: its trace (one row per evaluation) and its summary."""

    trace: pd.DataFrame
    summary: dict[str, Any]


@dataclass
class Optimizer:
    """The components one configuration γ selects, instantiated."""

    config: dict[str, Any]
    schedule: FidelitySchedule
    sampler: Sampler
    filter: Filter
    scorer: Scorer | None
    promotion: PromotionRule | None
    stopping: list[StoppingRule]

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> "Optimizer":
        gamma = validate(config)
        chosen = select(gamma)
        built = {cat: chosen.build(cat, gamma) for cat in chosen.components}
        proposal_filter = built.get("filters", NoFilter())
        scorer = None
        if "surrogates" in built:
            scorer = Scorer(built["surrogates"], built["acquisitions"], proposal_filter.predict_at_max_fidelity)
        return cls(
            config=gamma,
            schedule=built["fidelity_schedules"],
            sampler=built["samplers"],
            filter=proposal_filter,
            scorer=scorer,
            promotion=built.get("promotion_rules"),
            stopping=[BudgetRule()] + ([] if isinstance(built["stopping_rules"], BudgetRule)
                                       else [built["stopping_rules"]]),
        )


class _Run:
    """State of one run in progress; ``execute`` drives Alg. 2."""

    def __init__(self, optimizer: Optimizer, problem: Problem, seed: int, budget: Budget,
                 progress: ProgressFn | None) -> None:
        self.opt = optimizer
        self.problem = problem
        self.budget = budget
        self.rng = np.random.default_rng(seed)
        self.codec = SpaceCodec(problem.search_space)
        self.state = RunState(problem, budget, Archive(self.codec.dim), codec=self.codec,
                              stopping_rng=np.random.default_rng(np.random.SeedSequence(seed).spawn(1)[0]))
        self.vectors: list[np.ndarray] = []  # config_id -> vector
        self.progress = progress
        self.stop_reason: str | None = None

    # -- proposal ---------------------------------------------------------------------------
    def _propose(self, n: int, fidelity: float) -> np.ndarray:
        """IDs of ``n`` new configurations proposed by the sampler (through the filter, if any)."""
        if n <= 0:
            return np.empty(0, dtype=int)
        ctx = ProposalContext(self.state, self.codec, self.rng, fidelity)
        X = self.opt.filter.propose(n, ctx, self.opt.sampler, self.opt.scorer)
        X = np.asarray(X, dtype=float).reshape(n, self.codec.dim)
        first = len(self.vectors)
        self.vectors.extend(X)
        return np.arange(first, first + n)

    # -- evaluation -------------------------------------------------------------------------
    def _evaluate(self, ids: np.ndarray, fidelity: float, plan: BracketPlan, stage: int) -> tuple[np.ndarray, np.ndarray]:
        """Evaluate the budget-fitting prefix of ``ids`` at ``fidelity``; return (ids evaluated, losses)."""
        r_max = self.problem.fidelity.r_max
        step = fidelity / r_max
        if self.budget.unit == "full_evals":
            left = self.budget.amount - self.state.budget_used
            fits = int(np.floor((left + BUDGET_TOLERANCE) / step)) if left > 0 else 0
            ids = ids[: max(min(fits, len(ids)), 0)]
        if len(ids) == 0:
            self.stop_reason = "budget"
            return ids, np.empty(0)
        X = np.stack([self.vectors[i] for i in ids])
        result = self.problem.evaluate(self.codec.to_dicts(X), np.full(len(ids), fidelity))
        loss, cost = np.asarray(result.loss, dtype=float), np.asarray(result.cost, dtype=float)
        if self.budget.unit == "cost":
            left = self.budget.amount - self.state.cost_used
            keep = int(np.searchsorted(np.cumsum(cost), left + BUDGET_TOLERANCE, side="right"))
            if keep < len(ids):
                self.stop_reason = "budget"
            ids, X, loss, cost = ids[:keep], X[:keep], loss[:keep], cost[:keep]
            if keep == 0:
                return ids, loss
        n = len(ids)
        self.state.archive.add(
            X, config_id=ids, batch=np.full(n, self.state.n_batches), stage=np.full(n, stage),
            bracket=np.full(n, plan.bracket), fidelity=np.full(n, fidelity), loss=loss, cost=cost,
        )
        self.state.budget_used += n * step
        self.state.cost_used += float(cost.sum())
        self.state.n_batches += 1
        if self.progress is not None:
            self.progress(min(self.state.t, 1.0))
        return ids, loss

    def _should_stop(self) -> bool:
        if self.stop_reason is None:
            for rule in self.opt.stopping:
                self.stop_reason = rule.check(self.state)
                if rule.statistic is not None:
                    self.state.archive.annotate_last("stop_statistic", rule.statistic)
                if self.stop_reason:
                    break
        return self.stop_reason is not None

    # -- Alg. 2 -----------------------------------------------------------------------------
    def execute(self) -> None:
        mu = int(self.opt.config["mu"])
        for plan in self.opt.schedule.brackets(self.problem.fidelity, mu):
            batch_ids = np.empty(0, dtype=int)
            batch_losses = np.empty(0)
            for stage in plan.stages:
                if stage.n_survivors > 0:
                    survivors = self.opt.promotion.select(batch_losses, np.zeros(len(batch_losses)),
                                                          stage.n_survivors)
                    kept = batch_ids[survivors]
                else:
                    kept = np.empty(0, dtype=int)
                new = self._propose(stage.n_total - len(kept), stage.fidelity)
                batch_ids, batch_losses = self._evaluate(np.concatenate([kept, new]), stage.fidelity, plan, stage.stage)
                if self._should_stop():
                    return


def run(config: Mapping[str, Any], problem: Problem, seed: int, budget: Budget | str,
        progress: ProgressFn | None = None, reference: Any = None) -> RunResult:
    """Run the optimizer γ = ``config`` on ``problem`` with ``seed`` until ``budget`` is spent.

    ``budget`` is a :class:`Budget` or a spec such as ``"30d"``. ``reference`` (a
    :class:`metaopt.references.Reference`) adds normalized regret to the trace and summary.
    """
    budget = Budget.parse(budget, problem.d)
    optimizer = Optimizer.from_config(config)
    started = time.perf_counter()
    state = _Run(optimizer, problem, int(seed), budget, progress)
    state.execute()
    wall = time.perf_counter() - started
    trace = build_trace(state.state.archive, state.codec, problem, budget, reference)
    summary = summarize(trace, problem, budget, state.stop_reason or "budget", seed, optimizer.config, reference)
    summary["wall_time_s"] = wall
    return RunResult(trace, summary)
