"""The one optimizer loop (paper 004, Alg. 2): propose a batch → evaluate it batched → archive → stop?

A run is a pure function of (γ, problem, seed, budget) → trace: every random draw comes from one
``numpy.random.Generator`` seeded with ``seed``; nothing else carries state between runs.

Budget accounting (docs/design.md §4, :class:`metaopt.core.budget.BudgetMeter`): each evaluation adds r/r_max
full-evaluation equivalents (a promoted configuration pays its full r again) and its cost to the cost
account. The run never exceeds its budget: of a batch, only the prefix that fits into what is left is
evaluated (for a cost budget, the evaluations that would finish after the budget ran out are
discarded unseen). A budget's evaluation cap (``Budget.max_evals``) cuts batches the same way; a run
that reaches it with budget left stops with the reason ``eval_cap``.
Within a batch, survivors come first (best first), then new configurations.

Stage sizes are decided as the run goes: a bracket's first stage has the plan's ``n_total`` new
configurations, or, for a bracket filled by cost (CAHB, ``BracketPlan.resize``), as many as the
fill rule of :mod:`metaopt.components.fidelity_schedules` draws. The promotion rule chooses the survivors of
each later stage (``top``: the plan's count; ``cost_aware``: by cost, :mod:`metaopt.components.promotion`).
Survivors are topped up with new configurations only in ``equal`` brackets (``refill``); elsewhere a
stage holds survivors only, and a lone survivor, which no later stage could discard, goes straight
to the bracket's last stage. Whatever the sizes, the budget accounting above applies to each batch.

A proposal that ``leaves_schedule`` (``filter_then_rf``) ends the schedule's brackets at the first
stage boundary after its ``switch_at`` of the budget; the rest of the run is one new configuration
per batch at full fidelity (bracket 0 in the trace).

Stopping rules are checked after every batch; the one that stops the run names the stop reason,
and its statistic after each batch goes into the trace (``stop_statistic``). Rules draw from their
own generator (spawned from ``seed``), so a rule never changes what the run proposes: the same γ
with and without a stopping rule gives the same trace up to the stop.

Who evaluates: the loop itself never calls the objective. :class:`AskTell` hands out one
:class:`Batch` at a time (``ask``) and takes its losses and costs back (``tell``); :func:`run` is
the driver that answers each batch with one batched :meth:`Problem.evaluate` call, and
:func:`metaopt.stages.api.minimize` the driver for a user's function. Whoever drives it, the same answers
give the same trace. A NaN or infinite loss is a failed evaluation: it is archived with its cost and
charged to the budget, but never becomes the incumbent (surrogates drop it, CFO counts it as +inf).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Callable, Generator, Mapping, Sequence

import numpy as np

from metaopt.store.run_io import RunResult
from metaopt.components.cost_models import CostModel, LogLinearCostModel
from metaopt.components.filters import Scorer
from metaopt.components.fidelity_schedules import BracketPlan, FidelitySchedule, Stage, fill_by_cost
from metaopt.components.promotion import PromotionRule, Rung
from metaopt.components.proposals import Proposal
from metaopt.components.stopping import BudgetRule, StoppingRule
from metaopt.core.archive import Archive
from metaopt.core.benchmarks.base import Problem
from metaopt.core.benchmarks.function import as_loss, as_losses
from metaopt.core.budget import Budget, BudgetMeter, full_evaluations
from metaopt.core.errors import UsageError
from metaopt.core.context import ProposalContext, RunState
from metaopt.core.references import resolve_budget
from metaopt.core.features import FeatureEncoder
from metaopt.core.registry import select
from metaopt.core.space_codec import SpaceCodec
from metaopt.engine.trace import build_trace, summarize
from metaopt.spaces.design_space import validate

ProgressFn = Callable[[float], None]


@dataclass(frozen=True)
class Trial:
    """One evaluation the loop asks for: evaluate ``config`` at ``fidelity`` and tell its loss.

    ``id`` numbers the trials of a run in the order they are asked (0, 1, ...); ``config_id`` is
    the run's configuration ID (a promoted configuration keeps it and is asked again at a higher
    fidelity); ``batch`` the index of the batch the trial belongs to.
    """

    id: int
    config: dict[str, Any]
    fidelity: float
    config_id: int
    batch: int


@dataclass(frozen=True)
class Batch:
    """One batch the loop asks to have evaluated: configurations, all at one fidelity.

    ``ids`` are the run's configuration IDs (a promoted configuration keeps its ID and is asked
    again at a higher fidelity); ``configs`` the configurations as dicts of the searched
    hyperparameters (inactive ones absent), in the order the losses must be told;
    ``first_trial`` the trial ID of the first configuration (the others follow in order) and
    ``index`` the batch's number in the run.
    """

    ids: np.ndarray
    configs: list[dict[str, Any]]
    fidelity: float
    first_trial: int = 0
    index: int = 0

    def __len__(self) -> int:
        return len(self.configs)

    @cached_property
    def trials(self) -> list[Trial]:
        """The batch's configurations as :class:`Trial` s, in batch order (made once per batch)."""
        return [Trial(self.first_trial + i, config, self.fidelity, int(config_id), self.index)
                for i, (config, config_id) in enumerate(zip(self.configs, self.ids))]


@dataclass
class Optimizer:
    """The components one configuration γ selects, instantiated."""

    config: dict[str, Any]
    schedule: FidelitySchedule
    proposal: Proposal
    cost_model: CostModel
    promotion: PromotionRule | None
    stopping: list[StoppingRule]

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> "Optimizer":
        """Build the components γ = ``config`` selects (validated, defaults filled in) for one run.

        Each chosen component is built from the registry with its hyperparameters; a proposal that
        ``uses_sampler_and_filter`` (``sample_filter``, ``cfo_then_filter``) is then wired to the chosen
        sampler, filter and, for a filter with ``uses_surrogate``, a :class:`Scorer` (surrogate,
        acquisition, cost penalty and model); one with a ``late_design`` (``filter_then_rf``) gets that
        design's proposal, built the same way.
        """
        gamma = validate(config)
        chosen = select(gamma)
        built = {cat: chosen.build(cat, gamma) for cat in chosen.components}
        penalty_cost_model = built.get("cost_models")
        proposal = built["proposals"]
        if proposal.uses_sampler_and_filter:
            proposal_filter = built["filters"]
            scorer = None
            if proposal_filter.uses_surrogate:
                scorer = Scorer(built["surrogates"], built["acquisitions"], proposal_filter.predict_at_max_fidelity,
                                cost_penalty=built.get("cost_penalties"), cost_model=penalty_cost_model,
                                target=proposal_filter.target)
            proposal = proposal.wired(built["samplers"], proposal_filter, scorer)
        if proposal.late_design is not None:
            proposal = proposal.with_late(cls.from_config({"fidelity_schedule": "single", "mu": 1,
                                                           **proposal.late_design}).proposal)
        return cls(
            config=gamma,
            schedule=built["fidelity_schedules"],
            proposal=proposal,
            # Cost-aware promotion and CAHB use the penalty's cost model when there is one, else log-linear.
            cost_model=penalty_cost_model or LogLinearCostModel(),
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
        self.meter = BudgetMeter(budget, problem.fidelity.r_max)
        self.rng = np.random.default_rng(seed)
        self.codec = SpaceCodec(problem.search_space)
        self.encoder = FeatureEncoder(self.codec, problem.fidelity)
        self.state = RunState(problem, budget, Archive(self.codec.dim), codec=self.codec,
                              stopping_rng=np.random.default_rng(np.random.SeedSequence(seed).spawn(1)[0]))
        self.vectors: list[np.ndarray] = []  # config_id -> vector
        self.progress = progress
        self.stop_reason: str | None = None
        self.stop_request: str | None = None
        """Set by :meth:`AskTell.stop` before it tells a batch's told prefix: the stop reason."""
        self.n_asked = 0
        """Trials asked so far (the next batch's first trial ID)."""

    # -- proposal ---------------------------------------------------------------------------
    def _draw(self, n: int, fidelity: float) -> np.ndarray:
        """``n`` new configuration vectors from the proposal strategy (through the filter, if any)."""
        ctx = ProposalContext(self.state, self.codec, self.rng, fidelity)
        return np.asarray(self.opt.proposal.propose(n, ctx), dtype=float).reshape(n, self.codec.dim)

    def _add(self, X: np.ndarray) -> np.ndarray:
        """Give the vectors ``X`` configuration IDs; return them."""
        first = len(self.vectors)
        self.vectors.extend(X)
        return np.arange(first, first + len(X))

    def _propose(self, n: int, fidelity: float) -> np.ndarray:
        """IDs of ``n`` new configurations."""
        if n <= 0:
            return np.empty(0, dtype=int)
        return self._add(self._draw(n, fidelity))

    def _fill_by_cost(self, m: int, fidelity: float) -> np.ndarray:
        """IDs of new configurations whose estimated cost at ``fidelity`` fills that of ``m`` of average cost.

        CAHB's first stage (:func:`metaopt.components.fidelity_schedules.fill_by_cost`); the average is the cost
        model's mean prediction over the configurations evaluated so far.
        """
        if len(self.state.archive) == 0:  # no cost observed yet: the count rule
            return self._propose(m, fidelity)
        model = self._fitted_cost_model()

        def estimate(X: np.ndarray) -> np.ndarray:
            return model.predict(self.encoder.encode(X, fidelity))

        _, first = np.unique(self.state.archive.column("config_id"), return_index=True)
        budget = m * float(np.mean(estimate(self.state.archive.X[first])))
        return self._add(fill_by_cost(lambda n: self._draw(n, fidelity), estimate, m, budget))

    def _fitted_cost_model(self) -> CostModel:
        """The run's cost model, fitted on every evaluation so far."""
        model = self.opt.cost_model
        archive = self.state.archive
        return model.fit(self.encoder.encode(archive.X, archive.fidelity), archive.cost, self.rng)

    # -- promotion --------------------------------------------------------------------------
    def _promote(self, ids: np.ndarray, losses: np.ndarray, costs: np.ndarray, stage: Stage,
                 next_stage: Stage) -> np.ndarray:
        """IDs of the survivors of ``stage`` (evaluated: ``ids``, ``losses``, ``costs``), best first."""
        def next_costs() -> np.ndarray:
            # observed cost, scaled to the next fidelity by the cost model: c(r') = c(r)·m(x, r')/m(x, r)
            model = self._fitted_cost_model()
            X = np.stack([self.vectors[i] for i in ids])
            ratio = model.predict(self.encoder.encode(X, next_stage.fidelity)) / model.predict(
                self.encoder.encode(X, stage.fidelity))
            return costs * ratio

        rung = Rung(losses, next_stage.n_survivors, float(self.opt.config["survival_fraction"]), next_costs)
        assert self.opt.promotion is not None  # a schedule with later stages has a promotion rule
        return ids[self.opt.promotion.select(rung)]

    # -- evaluation -------------------------------------------------------------------------
    def _evaluate(self, ids: np.ndarray, fidelity: float, plan: BracketPlan,
                  stage: int) -> Generator[Batch, tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """Have the budget-fitting prefix of ``ids`` evaluated at ``fidelity`` (yields the :class:`Batch`,
        receives its losses and costs); return (ids evaluated, losses, costs)."""
        ids = ids[: self.meter.how_many_fit(len(ids), fidelity)]
        if len(ids) == 0:
            self.stop_reason = self.meter.limit
            return ids, np.empty(0), np.empty(0)
        X = np.stack([self.vectors[i] for i in ids])
        batch = Batch(ids, self.codec.to_dicts(X), fidelity, self.n_asked, self.state.n_batches)
        self.n_asked += len(ids)
        loss, cost = yield batch
        loss = np.where(np.isfinite(loss), loss, np.nan)  # NaN and ±inf: a failed evaluation
        if len(loss) < len(ids):  # the driver stopped the run (AskTell.stop): keep the told prefix
            self.stop_reason = self.stop_request
            ids, X = ids[:len(loss)], X[:len(loss)]
        keep = self.meter.affordable(cost)
        cut = keep < len(ids)
        ids, X, loss, cost = ids[:keep], X[:keep], loss[:keep], cost[:keep]
        if len(ids):
            self._record(X, ids, fidelity, stage, plan.bracket, loss, cost)
        if cut:  # the rest finished past the budget, or past the evaluation cap
            self.stop_reason = self.meter.limit
        return ids, loss, cost

    def _record(self, X: np.ndarray, ids: np.ndarray, fidelity: float, stage: int, bracket: int,
                loss: np.ndarray, cost: np.ndarray) -> None:
        """Record evaluated results as the run's next batch: archive them (configurations ``X`` with
        the IDs ``ids``, all at ``fidelity``, ``stage`` and ``bracket``), charge the budget, and
        report progress. Called once per batch by :meth:`_evaluate`, and once per result by the
        asynchronous loop (:class:`metaopt.engine.async_loop.AsyncRun`)."""
        n = len(ids)
        self.state.archive.add(
            X, config_id=ids, batch=np.full(n, self.state.n_batches), stage=np.full(n, stage),
            bracket=np.full(n, bracket), fidelity=np.full(n, fidelity), loss=loss, cost=cost,
        )
        self.meter.charge(fidelity, cost)
        # What components and stopping rules see of the account (RunState.t).
        self.state.budget_used, self.state.cost_used = self.meter.budget_used, self.meter.cost_used
        self.state.n_batches += 1
        if self.progress is not None:
            self.progress(min(self.state.t, 1.0))

    def config_of(self, config_id: int) -> dict[str, Any]:
        """The configuration (a dict, inactive hyperparameters absent) with the run's ID ``config_id``."""
        return self.codec.to_dicts(self.vectors[config_id][None])[0]

    def result(self, seed: int, reference: Any, wall: float, cpu: float) -> Result:
        """The trace, summary and incumbent of the run so far; ``wall`` and ``cpu`` (seconds: its wall
        time, and this process's CPU time, a worker's own) go into the summary."""
        trace = build_trace(self.state.archive, self.codec, self.problem, self.budget, reference)
        summary = summarize(trace, self.problem, self.budget, self.stop_reason or self.meter.limit, seed,
                            self.opt.config, reference)
        summary["wall_time_s"] = wall
        summary["cpu_time_s"] = cpu
        finite = trace[trace["loss"].notna()]
        if len(finite) == 0:
            return Result(trace, summary)
        top = finite[finite["fidelity"] == finite["fidelity"].max()]
        row = top.loc[top["loss"].idxmin()]
        return Result(trace, summary, self.config_of(int(row["config_id"])), float(row["loss"]))

    def _should_stop(self, rules: Sequence[StoppingRule] | None = None) -> bool:
        """Check the stopping ``rules`` (default: all of the run's) unless the run has a stop reason;
        whether it has one now."""
        if self.stop_reason is None:
            for rule in self.opt.stopping if rules is None else rules:
                self.stop_reason = rule.check(self.state)
                if rule.statistic is not None:
                    self.state.archive.annotate_last("stop_statistic", rule.statistic)
                if self.stop_reason:
                    break
        return self.stop_reason is not None

    # -- Alg. 2 -----------------------------------------------------------------------------
    def _leaves_schedule(self) -> bool:
        """Whether the run leaves its fidelity schedule now (a proposal with ``leaves_schedule`` whose
        ``switch_at`` of the budget is spent); checked before each stage is proposed or promoted."""
        proposal = self.opt.proposal
        return proposal.leaves_schedule and self.state.t >= proposal.switch_at

    def execute(self) -> Generator[Batch, tuple[np.ndarray, np.ndarray], None]:
        """Alg. 2 as a generator: yields each batch to evaluate and receives its (losses, costs).

        For a proposal that ``leaves_schedule``, the brackets end at the first stage boundary after
        its switch point, and the rest of the run is :meth:`_one_at_a_time`."""
        yield from self._brackets()
        if self.stop_reason is None and self.opt.proposal.leaves_schedule:
            yield from self._one_at_a_time()

    def _one_at_a_time(self) -> Generator[Batch, tuple[np.ndarray, np.ndarray], None]:
        """One new configuration per batch at full fidelity until the run ends (bracket 0, stage 1)."""
        plan = BracketPlan(0, (Stage(1, self.problem.fidelity.r_max, 1, 0),))
        while True:
            ids = self._propose(1, self.problem.fidelity.r_max)
            yield from self._evaluate(ids, self.problem.fidelity.r_max, plan, 1)
            if self._should_stop():
                return

    def _brackets(self) -> Generator[Batch, tuple[np.ndarray, np.ndarray], None]:
        """The fidelity schedule's brackets until the run ends or leaves the schedule."""
        mu = int(self.opt.config["mu"])
        for plan in self.opt.schedule.brackets(self.problem.fidelity, mu):
            if self._leaves_schedule():
                return
            first = plan.stages[0]
            if plan.resize is None:
                ids = self._propose(first.n_total, first.fidelity)
            else:
                ids = self._fill_by_cost(first.n_total, first.fidelity)
                plan = plan.resize(len(ids))
            j = 0
            while True:
                stage = plan.stages[j]
                ids, losses, costs = yield from self._evaluate(ids, stage.fidelity, plan, stage.stage)
                if self._should_stop():
                    return
                if j == len(plan.stages) - 1:
                    break
                if self._leaves_schedule():
                    return
                j += 1
                following = plan.stages[j]
                ids = self._promote(ids, losses, costs, stage, following)
                if plan.refill:
                    ids = np.concatenate([ids, self._propose(following.n_total - len(ids), following.fidelity)])
                elif len(ids) == 1:  # nobody left to discard: straight to the last stage
                    j = len(plan.stages) - 1


@dataclass
class Result(RunResult):
    """A run's trace and summary (:class:`RunResult`) and its incumbent.

    ``config`` is the configuration with the lowest loss at the highest fidelity evaluated (the
    full fidelity, unless the budget ended before any configuration got there), ``loss`` its loss;
    None and NaN while no evaluation has succeeded.
    """

    config: dict[str, Any] | None = None
    loss: float = math.nan

    @property
    def n_failed(self) -> int:
        """Failed evaluations in the trace (loss NaN: the objective failed, or returned NaN or ±inf)."""
        return int(self.trace["loss"].isna().sum())


class AskTell:
    """One run of the optimizer γ driven from outside: ``ask`` for trials, evaluate them, ``tell`` the results.

    For training loops that cannot be wrapped in a function (and the drivers :func:`run` and
    :func:`metaopt.stages.api.minimize`)::

        loop = AskTell(get_preset("hb").config(problem.fidelity), problem, seed=1, budget="30d")
        while (trial := loop.ask()) is not None:
            loop.tell(trial, train(trial.config, trial.fidelity))
        result = loop.result()

    The loop is batch-synchronous: it proposes a batch (configurations at one fidelity) and
    proposes the next one once every trial of the batch has been told. :meth:`ask` hands out the
    current batch's trials one at a time and returns None when all of them are out (and when the
    run is over: :attr:`done`); :meth:`tell` takes each trial's result in any order. The results
    reach the optimizer in batch order once the batch is complete, so the trace does not depend
    on the order of the tells. :meth:`ask_batch` / :meth:`tell_batch` do the same a whole batch
    at a time (:func:`run` uses them).

    The loop's semantics do not depend on the driver: batches, budget accounting (only what fits is
    asked; for a cost budget, evaluations told past the budget are discarded), promotion, stopping
    and determinism are those of :func:`run`, and the same answers give the same trace.
    ``problem`` supplies the search space, fidelity and cheap ends; its ``evaluate`` is not called.
    """

    def __init__(self, config: Mapping[str, Any], problem: Problem, seed: int, budget: Budget | str,
                 progress: ProgressFn | None = None, reference: Any = None) -> None:
        self.problem = problem
        self.budget = resolve_budget(budget, problem)
        self.seed = int(seed)
        self.reference = reference
        self.optimizer = Optimizer.from_config(config)
        self._run = _Run(self.optimizer, problem, self.seed, self.budget, progress)
        self._steps = self._run.execute()
        self._pending: Batch | None = None
        self._handed_out = 0
        """How many trials of the pending batch :meth:`ask` has handed out."""
        self._told: dict[int, tuple[float, float]] = {}
        """(loss, cost) of the pending batch's trials told so far, by position in the batch."""
        self._done = False
        self._started = time.perf_counter()
        self._cpu_started = time.process_time()
        self._advance(None)

    def _advance(self, answer: tuple[np.ndarray, np.ndarray] | None) -> None:
        """Run the loop to its next batch (or its end), sending ``answer`` to the batch it waits on."""
        try:
            self._pending = next(self._steps) if answer is None else self._steps.send(answer)
        except StopIteration:
            self._pending, self._done = None, True
        self._handed_out, self._told = 0, {}

    @property
    def done(self) -> bool:
        """Whether the run is over (budget spent, a stopping rule fired, or :meth:`stop`)."""
        return self._done

    @property
    def pending(self) -> list[Trial]:
        """The trials asked and not told yet, in the order they were asked."""
        if self._pending is None:
            return []
        return [t for i, t in enumerate(self._pending.trials[:self._handed_out]) if i not in self._told]

    def ask(self) -> Trial | None:
        """The next trial to evaluate; None when every trial of the current batch is out (tell
        them to go on) or the run is over (:attr:`done`)."""
        batch = self._pending
        if batch is None or self._handed_out == len(batch):
            return None
        self._handed_out += 1
        return batch.trials[self._handed_out - 1]

    def ask_batch(self) -> Batch | None:
        """The current batch, all its trials handed out at once; None once the run is over.

        Asking again before telling returns the same batch.
        """
        if self._pending is not None:
            self._handed_out = len(self._pending)
        return self._pending

    def tell(self, trial: Trial | int, loss: Any, cost: Any = None) -> None:
        """Report the result of one trial (a :class:`Trial` from :meth:`ask`, or its ID), in any order.

        ``loss`` must be a real number (a NaN or infinite loss marks a failed evaluation); ``cost``
        a finite number >= 0, by default the fidelity's share of a full evaluation (r / r_max).
        When the last trial of the batch is told, the loop goes on to the next batch. Raises
        :class:`UsageError` for a trial never asked, one told before, or a bad value.
        """
        batch = self._pending
        trial_id = trial.id if isinstance(trial, Trial) else trial
        if not isinstance(trial_id, (int, np.integer)) or isinstance(trial_id, bool):
            raise UsageError(f"tell: expected a trial from ask() or its id, got {trial!r}")
        if batch is None:
            raise UsageError(f"tell: trial {trial_id} is not waiting for a result: the run is over")
        position = int(trial_id) - batch.first_trial
        if position < 0 or position in self._told:  # earlier batches are complete: all told
            raise UsageError(f"tell: trial {trial_id} was already told")
        if position >= self._handed_out:
            raise UsageError(f"tell: trial {trial_id} was never asked")
        if isinstance(trial, Trial) and trial != batch.trials[position]:
            raise UsageError(f"tell: trial {trial_id} is not the trial this loop asked (another loop's?)")
        self._told[position] = (as_loss(loss, "tell: loss"), self._cost(cost, batch.fidelity, "tell: cost"))
        if len(self._told) == len(batch):
            answers = [self._told[i] for i in range(len(batch))]
            self._advance((np.array([a[0] for a in answers]), np.array([a[1] for a in answers])))

    def tell_batch(self, loss: Sequence[Any] | np.ndarray, cost: Sequence[Any] | np.ndarray | None = None) -> None:
        """Report the losses (and costs) of the whole batch :meth:`ask_batch` returned, in its order.

        The values as for :meth:`tell`. Raises :class:`UsageError` when no batch is pending, some
        of its trials were told one at a time, or the lengths do not match.
        """
        batch = self._pending
        if batch is None:
            raise UsageError("tell_batch: no batch is waiting for results; call ask_batch() first"
                             + (" (the run is over)" if self._done else ""))
        if self._told:
            raise UsageError("tell_batch: some trials of this batch were told one at a time; tell the others so")
        if cost is None:
            cost = np.full(len(batch), self._default_cost(batch.fidelity))
        loss, cost = as_losses(loss, "tell_batch: loss"), np.asarray(cost, dtype=float).reshape(-1)
        for name, values in (("loss", loss), ("cost", cost)):
            if len(values) != len(batch):
                raise UsageError(f"tell_batch: {name} has {len(values)} values for a batch of "
                                 f"{len(batch)} configurations")
        if not (np.isfinite(cost) & (cost >= 0)).all():
            raise UsageError("tell_batch: every cost must be a finite number >= 0")
        self._advance((loss, cost))

    def stop(self, reason: str) -> None:
        """End the run now (e.g. on a timeout); ``reason`` becomes the summary's stop reason.

        Of the pending batch, the trials told so far in batch order from its first one (its told
        prefix) are recorded; later told trials and untold ones are dropped. Nothing happens once
        the run is over.
        """
        if self._pending is None:
            return
        prefix: list[tuple[float, float]] = []
        while len(prefix) in self._told:
            prefix.append(self._told[len(prefix)])
        self._run.stop_request = reason
        self._advance((np.array([p[0] for p in prefix], dtype=float), np.array([p[1] for p in prefix], dtype=float)))
        if not self._done:  # the loop always ends after a stop request; this is a programming error
            raise AssertionError("the run went on after stop()")

    def _default_cost(self, fidelity: float) -> float:
        """The cost of an evaluation told without one: r / r_max."""
        return full_evaluations(fidelity, self.problem.fidelity.r_max)

    def _cost(self, cost: Any, fidelity: float, field: str) -> float:
        """A told cost, checked (a finite number >= 0), or the default cost at ``fidelity``."""
        if cost is None:
            return self._default_cost(fidelity)
        value = as_loss(cost, field)
        if not (math.isfinite(value) and value >= 0):
            raise UsageError(f"{field} must be a finite number >= 0, got {cost!r}")
        return value

    def config_of(self, config_id: int) -> dict[str, Any]:
        """The configuration (a dict, inactive hyperparameters absent) with the run's ID ``config_id``."""
        return self._run.config_of(config_id)

    def result(self) -> Result:
        """The trace, summary and incumbent of the run so far (complete once :attr:`done`)."""
        return self._run.result(self.seed, self.reference, time.perf_counter() - self._started,
                                time.process_time() - self._cpu_started)


def run(config: Mapping[str, Any], problem: Problem, seed: int, budget: Budget | str,
        progress: ProgressFn | None = None, reference: Any = None) -> Result:
    """Run the optimizer γ = ``config`` on ``problem`` with ``seed`` until ``budget`` is spent.

    ``budget`` is a :class:`Budget` or a spec such as ``"30d"``. ``reference`` (a
    :class:`metaopt.core.references.Reference`) adds normalized regret to the trace and summary.
    The driver of :class:`AskTell` that answers each batch with one batched ``problem.evaluate``.
    Asynchronous designs (``fidelity_schedule: asha``) have no batches: :func:`metaopt.engine.simclock.run`
    runs every design, these too.
    """
    loop = AskTell(config, problem, seed, budget, progress, reference)
    while (batch := loop.ask_batch()) is not None:
        result = problem.evaluate(batch.configs, np.full(len(batch), batch.fidelity))
        loop.tell_batch(result.loss, result.cost)
    return loop.result()
