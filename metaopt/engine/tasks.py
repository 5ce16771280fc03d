"""One inner run as a self-contained task: what to run, and its outcome (result or traceback).

Tasks are shipped to worker processes (possibly on other machines), so they carry names and
plain data, and load benchmarks by name in the worker. A run that raises is reported, not lost:
``RunOutcome.error`` holds the traceback, and callers decide what it counts as.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass
from typing import Any

from metaopt.core.budget import Budget
from metaopt.store.run_io import RunResult
from metaopt.core.references import Reference


@dataclass(frozen=True)
class RunSpec:
    """An optimizer (a design-space configuration or an external peer) on one (instance, seed)."""

    optimizer: str
    benchmark: str
    instance: str
    seed: int
    budget: Budget
    reference: Reference
    config: dict[str, Any] | None = None
    peer: str | None = None
    yahpo_data: str | None = None
    workers: int | None = None
    """Simulated workers (None: not on the clock); with ``time_limit`` in simulated seconds, or a
    typical-cost budget (``30dc``) resolved to seconds on the run's instance."""
    time_limit: float | Budget | None = None


@dataclass
class RunOutcome:
    spec: RunSpec
    result: RunResult | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


def execute(spec: RunSpec) -> RunOutcome:
    """Run ``spec``; any exception becomes ``RunOutcome.error`` (with its traceback)."""
    try:
        from metaopt.core.benchmarks import get_benchmark
        from metaopt.core.references import resolve_time_limit
        from metaopt.engine.simclock import run

        problem = get_benchmark(spec.benchmark, spec.yahpo_data).problem(spec.instance)
        time_limit = resolve_time_limit(spec.time_limit, problem)
        if spec.peer is not None:
            from metaopt.engine.peers import run_peer

            result = run_peer(spec.peer, problem, spec.seed, spec.budget, reference=spec.reference,
                              workers=spec.workers, time_limit=time_limit)
        else:
            assert spec.config is not None  # a task runs a peer or a configuration
            result = run(spec.config, problem, spec.seed, spec.budget, reference=spec.reference,
                         workers=spec.workers, time_limit=time_limit)
        result.summary["optimizer"] = spec.optimizer
        return RunOutcome(spec, result=result)
    except Exception:  # noqa: BLE001 - failure isolation: one bad run must not end a study
        return RunOutcome(spec, error=traceback.format_exc())
