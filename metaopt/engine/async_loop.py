"""The asynchronous optimizer: one trial whenever a worker is free, results taken in any order.

The counterpart of the batch loop (:mod:`metaopt.engine.loop`) for designs with an asynchronous fidelity
schedule (``fidelity_schedule: asha``, :mod:`metaopt.components.async_schedules`). The components
are the same (proposal, sampler, filter, surrogate, stopping rules; the pending policy says what a
proposal assumes about the evaluations still running, :mod:`metaopt.components.pending`), and a run
is the same pure function of (γ, problem, seed, budget) once the order in which results come back
is fixed; :mod:`metaopt.engine.simclock` fixes it by simulating N workers.

Each result is recorded when it is told, in the order the results arrive: it is its own batch
(trace column ``batch``), ``stage`` is its rung (1..s), ``bracket`` is 1. The budget rule is checked
after every result, the other stopping rules after each result at the highest rung (r_max): they
judge the progress of the full-fidelity results (paper 002's rules were made for sequential BO, where
every result is one), and a model-based rule fitted after every low-fidelity result would cost a
model fit per evaluation. Without a fidelity every result is at r_max.

Budget accounting (:class:`metaopt.core.budget.BudgetMeter`): with a budget in full evaluations a trial
starts only if the evaluations done and running and the new one together fit into B; the first
trial that does not fit ends the proposals (the run ends when the running ones are in). With a cost
budget a trial starts while the cost of the results in is below B; a result that would take the
spent cost past B is discarded unseen, and so is every result after it. Once a stopping rule fired,
results still coming in are discarded too. A budget's evaluation cap (``Budget.max_evals``) counts
the results in and the trials running: the trial that would exceed it is not started, and the run
then stops with the reason ``eval_cap``.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np

from metaopt.core.benchmarks.base import Problem
from metaopt.core.benchmarks.function import as_loss
from metaopt.core.budget import BUDGET_TOLERANCE, Budget
from metaopt.components.async_schedules import AsyncSuccessiveHalving, RungResults
from metaopt.core.context import ProposalContext
from metaopt.engine.loop import Optimizer, ProgressFn, Trial, _Run
from metaopt.core.registry import select


class AsyncRun(_Run):
    """One run of an asynchronous design: :meth:`ask` for a trial whenever a worker is free,
    :meth:`tell` each result as it arrives (in any order)."""

    def __init__(self, optimizer: Optimizer, problem: Problem, seed: int, budget: Budget,
                 progress: ProgressFn | None = None) -> None:
        super().__init__(optimizer, problem, seed, budget, progress)
        assert isinstance(optimizer.schedule, AsyncSuccessiveHalving)  # simclock.run builds this only for those
        self.schedule = optimizer.schedule
        self.fidelities = self.schedule.rung_fidelities(problem.fidelity)
        self.rungs = [RungResults() for _ in self.fidelities]
        self.pending_policy = select(optimizer.config).build("pending_policies", optimizer.config)
        self.running: dict[int, Trial] = {}
        """The trials asked and not told yet, by trial ID."""
        self.exhausted = False
        """Set when the next trial did not fit into the budget: nothing more is asked."""
        self.configs: dict[int, dict[str, Any]] = {}
        """Each configuration as a dict, by configuration ID (made once: a promoted one is asked again)."""

    @property
    def done(self) -> bool:
        """Whether the run is over: nothing more will be asked and nothing is running."""
        return (self.exhausted or self.stop_reason is not None) and not self.running

    def _fits(self, fidelity: float) -> bool:
        """Whether a trial at ``fidelity`` may start now (the module docstring's budget accounting); when the
        evaluation cap alone forbids it, the meter's :attr:`~metaopt.core.budget.BudgetMeter.limit` says so."""
        meter = self.meter
        if self.budget.unit == "full_evals":
            committed = meter.budget_used + sum(meter.step(t.fidelity) for t in self.running.values())
            fits = committed + meter.step(fidelity) <= self.budget.amount + BUDGET_TOLERANCE
        else:
            fits = meter.left() > BUDGET_TOLERANCE
        starting = len(self.running) + 1  # the evaluation cap counts the running trials too
        return fits and meter.within_cap(starting, starting) == starting

    def _new_config(self, fidelity: float) -> int:
        """The ID of a new configuration from the proposal strategy, which sees the archive the
        pending policy makes of the completed results and the running trials."""
        running = list(self.running.values())
        X = np.stack([self.vectors[t.config_id] for t in running]) if running else np.empty((0, self.codec.dim))
        archive = self.pending_policy.archive_for_proposal(
            self.state.archive, X, np.array([t.fidelity for t in running], dtype=float))
        state = self.state if archive is self.state.archive else replace(self.state, archive=archive)
        ctx = ProposalContext(state, self.codec, self.rng, fidelity)
        vector = np.asarray(self.opt.proposal.propose(1, ctx), dtype=float).reshape(1, self.codec.dim)
        return int(self._add(vector)[0])

    def ask(self) -> Trial | None:
        """Called whenever a worker is free: the next trial, or None once nothing more may start
        (the budget is spent or a stopping rule fired; :attr:`done` once the running trials are told)."""
        if self.exhausted or self.stop_reason is not None:
            return None
        config_id, rung = self.schedule.next_job(self.rungs)
        fidelity = self.fidelities[rung]
        if not self._fits(fidelity):
            self.exhausted = True
            return None
        if config_id is None:
            config_id = self._new_config(fidelity)
        if config_id not in self.configs:
            self.configs[config_id] = self.config_of(config_id)
        trial = Trial(self.n_asked, self.configs[config_id], fidelity, config_id, self.n_asked)
        self.n_asked += 1
        self.running[trial.id] = trial
        return trial

    def tell(self, trial: Trial, loss: Any, cost: float) -> bool:
        """Report the result of a running trial; return whether it was recorded (False: discarded,
        because it finished past a cost budget or after a stopping rule fired)."""
        del self.running[trial.id]
        loss = as_loss(loss, "tell: loss")
        loss = loss if math.isfinite(loss) else math.nan  # NaN and ±inf: a failed evaluation
        if self.stop_reason is not None:
            return False
        if self.meter.affordable([cost]) < 1:
            self.stop_reason = self.meter.limit
            return False
        rung = self.fidelities.index(trial.fidelity)
        self._record(self.vectors[trial.config_id][None], np.array([trial.config_id]), trial.fidelity, rung + 1, 1,
                     np.array([loss]), np.array([cost]))
        self.rungs[rung].config_ids.append(trial.config_id)
        self.rungs[rung].losses.append(loss)
        # the budget rule after every result, the others after each result at r_max (module docstring)
        self._should_stop(None if rung == len(self.fidelities) - 1 else self.opt.stopping[:1])
        return True
