"""Use a design on your own problem: ``minimize`` a function, or drive the loop yourself (``AskTell``).

``minimize`` is the third driver of :class:`metaopt.loop.AskTell`, next to :func:`metaopt.loop.run`
(benchmarks) and a user's own ask/tell loop: it asks for a batch, evaluates each configuration of
the batch with the user's objective (in this process, or spread over Dask workers), and tells the
results. The run is the same pure function of (optimizer, problem, seed, budget) as ``metaopt run``:
with the same objective values it gives the same trace, whatever the number of workers.
docs/python_api.md has the guide; examples/ has runnable scripts.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import pandas as pd
from ConfigSpace import ConfigurationSpace

from metaopt.benchmarks.base import Benchmark, Fidelity
from metaopt.benchmarks.function import FunctionBenchmark, Objective, call_objective
from metaopt.budget import Budget
from metaopt.errors import UsageError
from metaopt.executor import make_executor
from metaopt.loop import AskTell, Batch
from metaopt.run_io import RunResult, write_run
from metaopt.spaces.resolve import resolve_optimizer
from metaopt.store_utils import check_writable

__all__ = ["AskTell", "Batch", "MinimizeResult", "ask_tell", "minimize", "optimizer_config"]


@dataclass
class MinimizeResult:
    """What :func:`minimize` returns.

    ``config`` is the incumbent: the configuration with the lowest loss at the highest fidelity
    evaluated (the full fidelity, unless the budget ended before any configuration got there);
    ``loss`` its loss; ``trace`` one row per evaluation, the columns ``metaopt run`` writes
    (without normalized regret: a user's function has no known optimum); ``summary`` the run's
    summary (``n_failed`` counts failed evaluations); ``errors`` the text of each failure.
    """

    config: dict[str, Any] | None
    loss: float
    trace: pd.DataFrame
    summary: dict[str, Any]
    errors: list[str]


def optimizer_config(optimizer: str | Mapping[str, Any] | Path, fidelity: Fidelity) -> dict[str, Any]:
    """The validated design-space configuration ``optimizer`` names: a preset name, a configuration
    dict, or a JSON file (a configuration, or a study's ``gamma_star.json``)."""
    from metaopt.spaces.design_space import validate

    if isinstance(optimizer, Mapping):
        try:
            return validate(dict(optimizer))
        except UsageError as err:
            raise UsageError(f"optimizer: {err}") from None
    if not isinstance(optimizer, (str, Path)):
        raise UsageError(f"optimizer: expected a preset name, a configuration dict or a JSON file, "
                         f"got {type(optimizer).__name__}")
    return resolve_optimizer(str(optimizer), fidelity, "optimizer").config


def ask_tell(space: ConfigurationSpace, optimizer: str | Mapping[str, Any] | Path = "bohb", budget: str = "30d",
             fidelity: tuple | Fidelity | None = None, seed: int = 0) -> AskTell:
    """An ask/tell loop of ``optimizer`` over ``space`` (the arguments as for :func:`minimize`).

    ``ask()`` returns the next :class:`Batch` (its ``configs`` and their ``fidelity``) or None when
    the budget is spent; ``tell(losses, costs=None)`` reports the batch's results in its order
    (NaN: a failed evaluation; without costs each costs r / r_max); ``result()`` gives the trace.
    """
    benchmark = FunctionBenchmark(_no_objective, space, fidelity, name="ask_tell")
    config = optimizer_config(optimizer, benchmark.fidelity)
    return AskTell(config, benchmark.problem("0"), seed, _budget(budget, benchmark))


def _no_objective(config: dict[str, Any], fidelity: float | None) -> float:
    raise AssertionError("an ask/tell loop is evaluated by its driver")


def _budget(budget: str | Budget, benchmark: Benchmark) -> Budget:
    if isinstance(budget, Budget):
        return budget
    if not isinstance(budget, (str, int, float)) or isinstance(budget, bool):
        raise UsageError(f"budget: expected a spec such as '30d', '100' or '3600c', got {budget!r}")
    return Budget.parse(str(budget), benchmark.d)


def minimize(objective: Objective, space: ConfigurationSpace, optimizer: str | Mapping[str, Any] | Path = "bohb",
             budget: str = "30d", fidelity: tuple | Fidelity | None = None, seed: int = 0, workers: int = 1,
             output: str | Path | None = None, progress: bool = False,
             cheap_end: Mapping[str, str] | None = None) -> MinimizeResult:
    """Minimize ``objective`` over ``space`` with a design of the design space.

    Args:
        objective: ``objective(config, fidelity) -> loss`` or ``-> {"loss": ..., "cost": ...}``;
            ``config`` is a dict (inactive hyperparameters absent), ``fidelity`` the value of the
            multi-fidelity parameter (None without one). An exception or a NaN/inf loss is a failed
            evaluation (recorded, never the incumbent). Without a cost, an evaluation costs r / r_max.
        space: the search space (a ConfigSpace ConfigurationSpace; conditions and forbidden clauses
            are respected).
        optimizer: a preset name (``metaopt presets``), a configuration dict, or a JSON file such
            as a study's ``meta/gamma_star.json``.
        budget: as for ``metaopt run``: ``30d`` (30 × number of hyperparameters full evaluations),
            ``100`` (full evaluations) or ``3600c`` (cost units, e.g. seconds when the objective
            returns its fit time as cost).
        fidelity: ``(name, r_min, r_max)`` of the multi-fidelity parameter (integers: an integer
            fidelity), or None to evaluate at full fidelity only (multi-fidelity designs then
            run their schedule on a single level).
        seed: the run's seed; the same seed and objective give the same trace.
        workers: evaluate a batch's configurations on this many Dask worker processes (the
            objective must be picklable, as for any Dask task); the trace is that of ``workers=1``.
        output: a folder to write ``trace.csv`` and ``summary.json`` into, as ``metaopt run --out``.
            If the objective raises a programming error (a wrong return type) or the run is
            interrupted, the evaluations so far are written before the error propagates.
        progress: show a progress bar.
        cheap_end: per hyperparameter, the end of its range where evaluations are cheap
            (``"lower"`` or ``"upper"``), for CFO's low-cost start; others start at their default.

    Returns:
        A :class:`MinimizeResult`.
    """
    benchmark = FunctionBenchmark(objective, space, fidelity, cheap_end=cheap_end)
    config = optimizer_config(optimizer, benchmark.fidelity)
    if not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:
        raise UsageError(f"workers: must be an integer >= 1, got {workers!r}")
    if output is not None:
        check_writable(output, "output", folder=True)
    problem = benchmark.problem("0")
    bar = _progress_bar(benchmark, progress)
    loop = AskTell(config, problem, seed, _budget(budget, benchmark), progress=bar.update_to if bar else None)
    try:
        with make_executor(workers) as executor:
            while (batch := loop.ask()) is not None:
                evaluation = benchmark.record(_evaluate_batch(benchmark, batch, executor))
                loop.tell(evaluation.loss, evaluation.cost)
    finally:
        if bar is not None:
            bar.close()
        result = loop.result()
        result.summary["optimizer"] = optimizer if isinstance(optimizer, str) else "config"
        result.summary["n_failed"] = len(benchmark.errors)
        if output is not None:
            write_run(Path(output), result)
    return _minimize_result(result, benchmark, loop)


def _evaluate_batch(benchmark: FunctionBenchmark, batch: Batch, executor: Any) -> list[tuple[float, float, str | None]]:
    """(loss, cost, error) of each configuration of ``batch``, in its order, on the executor."""
    fid, cost = benchmark.objective_fidelity(batch.fidelity), benchmark.default_cost(batch.fidelity)
    tasks = [(call_objective, (benchmark.objective, config, fid, cost)) for config in batch.configs]
    outcomes: list[Any] = [None] * len(tasks)
    for index, outcome in executor.map_unordered(tasks):
        outcomes[index] = outcome
    return outcomes


def _minimize_result(result: RunResult, benchmark: FunctionBenchmark, loop: AskTell) -> MinimizeResult:
    """The incumbent (lowest finite loss at the highest fidelity evaluated) and the run's trace."""
    trace = result.trace
    finite = trace[np.isfinite(trace["loss"])] if len(trace) else trace
    if len(finite) == 0:
        return MinimizeResult(None, float("nan"), trace, result.summary, list(benchmark.errors))
    top = finite[finite["fidelity"] == finite["fidelity"].max()]
    row = top.loc[top["loss"].idxmin()]
    return MinimizeResult(loop.config_of(int(row["config_id"])), float(row["loss"]), trace, result.summary,
                          list(benchmark.errors))


def _progress_bar(benchmark: FunctionBenchmark, show: bool) -> Any:
    """A tqdm bar over the budget fraction, or None."""
    if not show:
        return None
    from tqdm import tqdm

    class _Bar(tqdm):
        def update_to(self, t: float) -> None:
            self.n = t
            self.refresh()

    return _Bar(total=1.0, desc=f"minimize {benchmark.name}", unit="budget",
                bar_format="{l_bar}{bar}| {n:.0%} [{elapsed}<{remaining}]")
