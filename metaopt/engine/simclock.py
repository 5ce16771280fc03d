"""A simulated clock for parallel HPO: N workers, each evaluation occupying one for its predicted cost.

An evaluation started at simulated time t on a free worker returns at t + its cost (the benchmark's
predicted runtime at the evaluation's fidelity: the trace's ``cost`` column, docs/design.md §4).
Results come back in simulated-time order; of results at the same time, the one started first comes
first, and a free worker is always the free one with the lowest index. The clock is a heap: no
threads, no real time, so a run on it is a pure function of (design, problem, seed, budget,
workers, time limit).

How designs use it (:func:`run`):

- Synchronous designs (every batch design of :mod:`metaopt.engine.loop`: RS, BO, HB, BOHB, Smashy) ask for
  a batch when the previous one has returned entirely. Its members start in batch order on the free
  workers, the others queue until a worker frees; the batch is told when its slowest member is in,
  so the workers idle meanwhile. The trace is that of :func:`metaopt.engine.loop.run` (the same answers in
  the same order), plus the clock's columns.
- Asynchronous designs (``fidelity_schedule: asha``, :mod:`metaopt.engine.async_loop`) are asked for one
  trial whenever a worker is free and told each result as it arrives.

Budgets: the run's budget (evaluations or cost, as for every run) and, optionally, a time limit T in
simulated seconds: no evaluation starts at or after T, and results arriving after T are discarded
(of a synchronous batch, the results in by T are kept up to the first one missing in batch order,
as :meth:`metaopt.engine.loop.AskTell.stop` keeps them); the stop reason is then ``time``.

The trace of a run on the clock has three more columns (:data:`CLOCK_COLUMNS`): ``worker``,
``sim_start`` and ``sim_time`` (the simulated time its result arrived; in an asynchronous trace
rows come in that order); the summary has ``workers``, ``sim_time`` (when the last result arrived,
at most the time limit) and ``utilization`` (busy worker time / (workers × sim_time), counting the
evaluations whose results were discarded too). Runs that do not use the clock are
unchanged.
"""

from __future__ import annotations

import heapq
import math
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Mapping, TypeVar

import numpy as np

from metaopt.engine.async_loop import AsyncRun
from metaopt.core.benchmarks.base import Problem
from metaopt.core.budget import Budget
from metaopt.core.errors import UsageError
from metaopt.engine import loop as batch_loop
from metaopt.engine.loop import AskTell, Optimizer, ProgressFn, Result
from metaopt.core.references import resolve_budget
from metaopt.core.registry import CATEGORIES, get_component
from metaopt.store.run_io import RunResult

CLOCK_COLUMNS = ["worker", "sim_start", "sim_time"]
R = TypeVar("R", bound=RunResult)


@dataclass(frozen=True)
class Job:
    """One evaluation on the clock: ``payload`` ran on ``worker`` from ``start`` to ``finish``."""

    payload: Any
    worker: int
    start: float
    finish: float


class SimClock:
    """N simulated workers; simulated time moves only when the next result is taken."""

    def __init__(self, workers: int) -> None:
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise UsageError(f"workers: must be an integer >= 1, got {workers!r}")
        self.workers = workers
        self.now = 0.0
        """The simulated time: when the last result taken arrived (0 at the start)."""
        self.jobs: list[Job] = []
        """Every evaluation started, in the order started."""
        self._free = list(range(workers))  # a heap of free worker indices
        self._running: list[tuple[float, int, Job]] = []  # a heap of (finish, start order, job)
        self._started = 0

    @property
    def n_free(self) -> int:
        return len(self._free)

    @property
    def n_running(self) -> int:
        return len(self._running)

    def start(self, duration: float, payload: Any) -> Job:
        """Start an evaluation of ``duration`` simulated seconds now, on the free worker with the
        lowest index (there must be one); return its job."""
        if not (math.isfinite(duration) and duration >= 0):
            raise UsageError(f"an evaluation's cost must be a finite number >= 0 to run on the clock, got {duration!r}")
        job = Job(payload, heapq.heappop(self._free), self.now, self.now + float(duration))
        heapq.heappush(self._running, (job.finish, self._started, job))
        self._started += 1
        self.jobs.append(job)
        return job

    def next_result(self) -> Job:
        """Advance the clock to the next result (earliest finish; of equal ones the earliest
        started), free its worker and return its job."""
        _, _, job = heapq.heappop(self._running)
        self.now = job.finish
        heapq.heappush(self._free, job.worker)
        return job

    def utilization(self, until: float) -> float:
        """The fraction of the workers' time in [0, ``until``] spent evaluating (0 when ``until`` is 0)."""
        if until <= 0:
            return 0.0
        busy = sum(max(min(job.finish, until) - job.start, 0.0) for job in self.jobs)
        return busy / (self.workers * until)


def is_asynchronous(config: Mapping[str, Any]) -> bool:
    """Whether the design γ = ``config`` is asynchronous (its fidelity schedule declares it)."""
    schedule = config.get("fidelity_schedule", CATEGORIES["fidelity_schedules"].default)
    return get_component("fidelity_schedules", str(schedule)).declares("asynchronous")


def run(config: Mapping[str, Any], problem: Problem, seed: int, budget: Budget | str,
        progress: ProgressFn | None = None, reference: Any = None, workers: int | None = None,
        time_limit: float | None = None) -> Result:
    """Run γ = ``config`` on ``problem``; on the clock with ``workers`` simulated workers when given.

    Without ``workers`` and ``time_limit`` a synchronous design runs as :func:`metaopt.engine.loop.run`
    (the same trace, byte for byte, no clock columns), an asynchronous one on a clock with one
    worker (sequentially). ``time_limit``: simulated seconds (module docstring).
    """
    if time_limit is not None and not (isinstance(time_limit, (int, float)) and not isinstance(time_limit, bool)
                                       and math.isfinite(time_limit) and time_limit > 0):
        raise UsageError(f"time limit: must be a number of simulated seconds > 0, got {time_limit!r}")
    asynchronous = is_asynchronous(config)
    if workers is None and time_limit is None and not asynchronous:
        # looked up when called: whatever stands in for metaopt.engine.loop.run (a wrapper) stays the batch runs' entry
        return batch_loop.run(config, problem, seed, budget, progress, reference)
    clock = SimClock(1 if workers is None else workers)
    started, cpu_started = time.perf_counter(), time.process_time()
    if asynchronous:
        async_run = AsyncRun(Optimizer.from_config(config), problem, int(seed), resolve_budget(budget, problem),
                             progress)
        jobs = _drive_async(async_run, problem, clock, time_limit)
        result = async_run.result(int(seed), reference, time.perf_counter() - started,
                                  time.process_time() - cpu_started)
    else:
        loop = AskTell(config, problem, seed, budget, progress, reference)
        jobs_of = _drive_batches(loop, problem, clock, time_limit)
        result = loop.result()
        # a batch's recorded rows are a prefix of it, in batch order
        positions = zip(result.trace["batch"].tolist(), result.trace.groupby("batch").cumcount().tolist())
        jobs = [jobs_of[b][i] for b, i in positions]
    return with_clock(result, jobs, clock, clock.now if time_limit is None else min(clock.now, time_limit))


def _drive_async(run: AsyncRun, problem: Problem, clock: SimClock, time_limit: float | None) -> list[Job]:
    """Run an asynchronous design on the clock; return the jobs of the recorded results, in trace order."""
    recorded: list[Job] = []
    while True:
        while clock.n_free and (time_limit is None or clock.now < time_limit) and (trial := run.ask()) is not None:
            evaluation = problem.evaluate([trial.config], [trial.fidelity])
            clock.start(float(evaluation.cost[0]), (trial, float(evaluation.loss[0]), float(evaluation.cost[0])))
        if clock.n_running == 0:
            return recorded
        job = clock.next_result()
        if time_limit is not None and job.finish > time_limit:  # so is every later result
            run.stop_reason = run.stop_reason or "time"
            return recorded
        if run.tell(*job.payload):
            recorded.append(job)


def _drive_batches(loop: AskTell, problem: Problem, clock: SimClock, time_limit: float | None) -> dict[int, list[Job]]:
    """Run a synchronous design on the clock, a whole batch at a time; return the jobs of each
    batch (by batch index), in batch order."""
    jobs_of: dict[int, list[Job]] = {}
    while (batch := loop.ask_batch()) is not None:
        if time_limit is not None and clock.now >= time_limit:
            loop.stop("time")
            break
        evaluation = problem.evaluate(batch.configs, np.full(len(batch), batch.fidelity))
        queue = deque(range(len(batch)))
        jobs: list[Job] = []
        while queue or clock.n_running:
            while queue and clock.n_free:
                i = queue.popleft()
                clock.start(float(evaluation.cost[i]), i)
            jobs.append(clock.next_result())
        jobs_of[batch.index] = sorted(jobs, key=lambda job: job.payload)
        if time_limit is None or clock.now <= time_limit:
            loop.tell_batch(evaluation.loss, evaluation.cost)
            continue
        for trial, job in zip(batch.trials, jobs_of[batch.index]):
            if job.finish <= time_limit:
                loop.tell(trial, evaluation.loss[job.payload], evaluation.cost[job.payload])
        loop.stop("time")
    return jobs_of


def with_clock(result: R, jobs: list[Job], clock: SimClock, end: float) -> R:
    """``result`` with the clock's trace columns and summary entries; ``end``: when the run ended.

    ``jobs``: the job of each trace row, in trace order; ``clock.jobs``: every evaluation started
    (for the utilization). Called at the end of a run on the clock (:func:`run`, and the syne-tune
    peers of :mod:`metaopt.engine.syne_peers`, whose simulator gives the same facts).
    """
    trace = result.trace
    columns = {"worker": [j.worker for j in jobs], "sim_start": [j.start for j in jobs],
               "sim_time": [j.finish for j in jobs]}
    trace = trace.rename(columns={name: f"hp_{name}" for name in CLOCK_COLUMNS if name in trace})  # a hyperparameter's
    at = trace.columns.get_loc("cost") + 1
    for k, name in enumerate(CLOCK_COLUMNS):
        trace.insert(at + k, name, np.asarray(columns[name], dtype=int if name == "worker" else float))
    result.trace = trace
    result.summary["workers"] = clock.workers
    result.summary["sim_time"] = end
    result.summary["utilization"] = clock.utilization(end)
    return result
