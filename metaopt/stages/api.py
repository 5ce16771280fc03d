"""Use a design on your own problem: ``minimize`` a function, or drive the loop yourself (``AskTell``).

``minimize`` is the third driver of :class:`metaopt.engine.loop.AskTell`, next to :func:`metaopt.engine.loop.run`
(benchmarks) and a user's own ask/tell loop: it asks for a batch, evaluates each configuration of
the batch with the user's objective (in this process, or spread over Dask workers), and tells the
results. The run is the same pure function of (optimizer, problem, seed, budget) as ``metaopt run``:
with the same objective values it gives the same trace, whatever the number of workers.
docs/python_api.md has the guide; examples/ has runnable scripts.
"""

from __future__ import annotations

import math
import numbers
import time
import warnings
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, cast

from ConfigSpace import ConfigurationSpace

from metaopt.core.benchmarks.base import Benchmark, Fidelity
from metaopt.core.benchmarks.fidelity_check import RungCheck, check_fidelity
from metaopt.core.benchmarks.function import FunctionBenchmark, Objective, call_objective
from metaopt.core.budget import Budget
from metaopt.core.errors import NoSuccessfulEvaluation, UsageError
from metaopt.core.executor import make_executor
from metaopt.engine.loop import AskTell, Batch, Result, Trial
from metaopt.store.run_io import EvaluationLog, write_run
from metaopt.spaces.presets import DEFAULT_OPTIMIZER, PRESETS
from metaopt.spaces.resolve import resolve_optimizer
from metaopt.core.store_utils import check_writable, output_lock

__all__ = ["AskTell", "Batch", "MinimizeResult", "Result", "Trial", "ask_tell", "fidelity_check", "minimize",
           "optimizer_config"]


@dataclass
class MinimizeResult(Result):
    """What :func:`minimize` returns: the run's :class:`~metaopt.engine.loop.Result` (``config`` and
    ``loss``: the incumbent, the configuration with the lowest loss at the highest fidelity
    evaluated; ``trace`` one row per evaluation, the columns ``metaopt run`` writes, without
    normalized regret: a user's function has no known optimum; ``summary`` the run's summary, its
    ``n_failed`` the failed evaluations) and ``errors``, the text of each failure."""

    errors: list[str] = field(default_factory=list)


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
    config = resolve_optimizer(str(optimizer), fidelity, "optimizer").config
    assert config is not None  # None only for a peer or a pending gamma*, which are not accepted here
    return config


def ask_tell(space: ConfigurationSpace, optimizer: str | Mapping[str, Any] | Path = DEFAULT_OPTIMIZER, budget: str = "30d",
             fidelity: tuple | Fidelity | None = None, seed: int = 0, typical_cost: float | None = None) -> AskTell:
    """An ask/tell loop of ``optimizer`` over ``space`` (the arguments as for :func:`minimize`).

    ``ask()`` returns the next :class:`~metaopt.engine.loop.Trial` (``id``, ``config``, ``fidelity``), or
    None when every trial of the current batch is out or the run is over (``done``);
    ``tell(trial, loss, cost=None)`` reports one trial's result, in any order (NaN or ±inf: a
    failed evaluation; without a cost it costs r / r_max); ``result()`` gives the incumbent and
    the trace. ``ask_batch()`` / ``tell_batch(losses, costs)`` do the same a batch at a time.
    """
    benchmark = FunctionBenchmark(_no_objective, space, fidelity, name="ask_tell")
    config = optimizer_config(optimizer, benchmark.fidelity)
    seed = _check_seed(seed)
    run_budget = _budget(budget, benchmark, typical_cost)
    _warn_without_fidelity(optimizer, config, benchmark)
    return AskTell(config, benchmark.problem("0"), seed, run_budget)


def _no_objective(config: dict[str, Any], fidelity: float | None) -> float:
    raise AssertionError("an ask/tell loop is evaluated by its driver")


def _budget(budget: str | Budget, benchmark: Benchmark, typical_cost: float | None) -> Budget:
    """The run's budget in full evaluations or cost units: a budget in typical costs (``20c``,
    ``5dc``) counts ``typical_cost`` cost units per typical evaluation, 1 when it is not given.
    Nothing is evaluated to find a typical cost."""
    if not isinstance(budget, (str, int, float, Budget)) or isinstance(budget, bool):
        raise UsageError(f"budget: expected a spec such as '30d', '100' or '3600c', got {budget!r}")
    parsed = Budget.parse(budget if isinstance(budget, Budget) else str(budget), benchmark.d)
    if typical_cost is None:
        return parsed.in_cost_units(1.0)
    if isinstance(typical_cost, bool) or not isinstance(typical_cost, numbers.Real) \
            or not (math.isfinite(typical_cost) and typical_cost > 0):
        raise UsageError(f"typical_cost: must be a number > 0, got {typical_cost!r}")
    if parsed.unit != "typical_cost":
        raise UsageError(f"typical_cost: only used with a budget in typical costs (e.g. '20c' or '5dc'), "
                         f"got budget {parsed.spec or budget!r}")
    return parsed.in_cost_units(float(typical_cost))


def _check_seed(seed: Any) -> int:
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise UsageError(f"seed: must be an integer >= 0, got {seed!r}")
    return int(seed)


def _check_catch(catch: Any) -> tuple[type[BaseException], ...]:
    """``catch`` as a tuple of exception classes (one class is accepted too)."""
    types = (catch,) if isinstance(catch, type) else catch
    try:
        types = tuple(types)
    except TypeError:
        types = None
    if types is None or not all(isinstance(t, type) and issubclass(t, BaseException) for t in types):
        raise UsageError(f"catch: expected a tuple of exception classes such as (ValueError,), got {catch!r}")
    return types


def _check_timeout(timeout: Any) -> float | None:
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, numbers.Real) or not cast(float, timeout) > 0:
        raise UsageError(f"timeout: must be a number of seconds > 0 or None, got {timeout!r}")
    return float(timeout)


def _warn_without_fidelity(optimizer: Any, config: Mapping[str, Any], benchmark: FunctionBenchmark) -> None:
    """Warn when a multi-fidelity design runs on a problem without a fidelity (its schedule has one level),
    unless it is a preset's design for problems without one (``metaopt_default``'s)."""
    if benchmark.has_fidelity or config["fidelity_schedule"] == "single":
        return
    preset = PRESETS.get(optimizer) if isinstance(optimizer, str) else None
    if preset is not None and preset.found_without_fidelity_by:
        return
    name = optimizer if isinstance(optimizer, str) else "config"
    warnings.warn(f"optimizer {name}: a multi-fidelity design (fidelity_schedule={config['fidelity_schedule']}) "
                  "on a problem with no fidelity: every evaluation is at full fidelity, so its schedule has a "
                  "single level (Hyperband is then random search in brackets); pass fidelity=(name, r_min, r_max) "
                  "to use its schedule", UserWarning, stacklevel=3)


def minimize(objective: Objective, space: ConfigurationSpace, optimizer: str | Mapping[str, Any] | Path = DEFAULT_OPTIMIZER,
             budget: str = "30d", fidelity: tuple | Fidelity | None = None, seed: int = 0, workers: int = 1,
             output: str | Path | None = None, progress: bool = False,
             cheap_end: Mapping[str, str] | None = None, catch: tuple[type[BaseException], ...] = (),
             timeout: float | None = None, typical_cost: float | None = None) -> MinimizeResult:
    """Minimize ``objective`` over ``space`` with a design of the design space.

    Args:
        objective: ``objective(config, fidelity) -> loss`` or ``-> {"loss": ..., "cost": ...}``;
            ``config`` is a dict (inactive hyperparameters absent), ``fidelity`` the value of the
            multi-fidelity parameter (None without one). The loss must be a real number (a bool or
            a string raises UsageError); NaN or ±inf is a failed evaluation (recorded, never the
            incumbent). Without a cost, an evaluation costs r / r_max.
        space: the search space (a ConfigSpace ConfigurationSpace; conditions and forbidden clauses
            are respected).
        optimizer: a preset name (``metaopt presets``), a configuration dict, or a JSON file such
            as a study's ``meta/gamma_star.json``; by default ``metaopt_default``, the design the
            pooled meta-optimization over six scenarios found.
        budget: ``30d`` (30 × number of hyperparameters full evaluations), ``100`` (full
            evaluations), ``3600s`` (cost units, as the objective returns them), ``20c`` / ``5dc``
            (20 / 5·d typical evaluation costs: ``typical_cost`` cost units each, 1 without it).
        fidelity: ``(name, r_min, r_max)`` of the multi-fidelity parameter (integers: an integer
            fidelity), or None to evaluate at full fidelity only (multi-fidelity designs then
            run their schedule on a single level, with a warning).
        seed: the run's seed (an integer >= 0); the same seed and objective give the same trace.
        workers: evaluate a batch's configurations on this many Dask worker processes (the
            objective must be picklable, as for any Dask task); the trace is that of ``workers=1``.
        output: a folder: every evaluation is appended to ``evaluations.jsonl`` as it finishes, and
            ``trace.csv`` and ``summary.json`` are written at the end (also when the run stops on
            an error or an interrupt), as ``metaopt run --out``. Calling again with the same
            arguments and folder resumes: stored evaluations are read back, not recomputed.
        progress: show a progress bar.
        cheap_end: per hyperparameter, the end of its range where evaluations are cheap
            (``"lower"`` or ``"upper"``), for CFO's low-cost start; others start at their default.
        catch: exception classes that make a failed evaluation; any other exception in the
            objective propagates (after the finished evaluations are written to ``output``).
        timeout: seconds of wall-clock time after which no new evaluation starts (running ones
            finish and are recorded); the stop reason is then ``timeout``.
        typical_cost: the cost of a typical full evaluation, for budgets in typical costs.

    Returns:
        A :class:`MinimizeResult`. Raises :class:`~metaopt.core.errors.NoSuccessfulEvaluation` when no
        evaluation succeeded (every one failed, or none fit into the budget).
    """
    benchmark = FunctionBenchmark(objective, space, fidelity, cheap_end=cheap_end, catch=_check_catch(catch))
    config = optimizer_config(optimizer, benchmark.fidelity)
    seed = _check_seed(seed)
    if not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:
        raise UsageError(f"workers: must be an integer >= 1, got {workers!r}")
    seconds = _check_timeout(timeout)
    run_budget = _budget(budget, benchmark, typical_cost)
    if output is not None:
        check_writable(output, "output", folder=True)
    _warn_without_fidelity(optimizer, config, benchmark)
    problem = benchmark.problem("0")
    bar = _progress_bar(benchmark, progress)
    loop = AskTell(config, problem, seed, run_budget, progress=bar.update_to if bar else None)
    with ExitStack() as stack:
        log = None
        if output is not None:
            stack.enter_context(output_lock(Path(output)))
            header = {"optimizer": config, "seed": seed, "budget": [run_budget.amount, run_budget.unit],
                      "fidelity": [benchmark.fidelity.name, benchmark.fidelity.r_min, benchmark.fidelity.r_max]
                      if benchmark.has_fidelity else None, "cheap_end": benchmark.cheap_end,
                      "space": space.to_serialized_dict()}
            log = EvaluationLog(Path(output), header, "output")
            stack.callback(log.close)
        driver = _Driver(loop, benchmark, log, None if seconds is None else time.monotonic() + seconds)
        try:
            with make_executor(workers) as executor:
                while (batch := loop.ask_batch()) is not None:
                    if not driver.evaluate(batch, executor):
                        loop.stop("timeout")
        except BaseException:
            loop.stop("error")  # the batch's told prefix is kept
            raise
        finally:
            if bar is not None:
                bar.close()
            result = loop.result()
            result.summary["optimizer"] = optimizer if isinstance(optimizer, str) else "config"
            result.summary["n_failed"] = result.n_failed
            if output is not None:
                write_run(Path(output), result)
    if result.config is None:
        reason = (f"all {len(result.trace)} evaluations failed (the first: {benchmark.errors[0]})"
                  if len(result.trace) else "no evaluation fit into the budget")
        raise NoSuccessfulEvaluation(f"minimize: {reason}; there is no best configuration")
    return MinimizeResult(result.trace, result.summary, result.config, result.loss, list(benchmark.errors))


def fidelity_check(objective: Objective, space: ConfigurationSpace, fidelity: tuple | Fidelity, n_configs: int = 50,
                   seed: int = 0, eta: float = 3.0, catch: tuple[type[BaseException], ...] = ()) -> list[RungCheck]:
    """Does ``objective``'s fidelity pay? Before choosing a multi-fidelity design, evaluate ``n_configs``
    random configurations of ``space`` (drawn with ``seed``) at Hyperband's rungs ``r_max / eta^k`` down to
    ``r_min`` and at ``r_max`` (``n_configs`` × (rungs + 1) calls of the objective, in this process).

    Returns one :class:`~metaopt.core.benchmarks.fidelity_check.RungCheck` per rung, highest fidelity first:
    ``spearman`` is the rank correlation of its losses with the full fidelity's, ``top_recall`` the share of
    the best 10% at ``r_max`` among the rung's best third. Where the low rungs rank configurations unlike
    ``r_max``, a design at full fidelity only may be the better choice, and ``fidelity_floor`` keeps a
    multi-fidelity design off those rungs (docs/python_api.md says what was measured). Raises UsageError for a
    fidelity of one level or ``n_configs`` < 10. Failed evaluations (NaN or ±inf, or an exception of a class
    in ``catch``, as in :func:`minimize`) are left out of the ranks.
    """
    if fidelity is None:
        raise UsageError("fidelity: fidelity_check needs the fidelity (name, r_min, r_max) to check")
    problem = FunctionBenchmark(objective, space, fidelity, catch=_check_catch(catch)).problem("0")
    return check_fidelity(problem, n_configs, _check_seed(seed), eta)


class _Driver:
    """Evaluates the batches of one :func:`minimize` run: stored evaluations from the log, the
    others with the objective on the executor (at most ``executor.workers`` at a time), each told
    to the loop and appended to the log as it finishes."""

    def __init__(self, loop: AskTell, benchmark: FunctionBenchmark, log: EvaluationLog | None,
                 deadline: float | None) -> None:
        self.loop, self.benchmark, self.log, self.deadline = loop, benchmark, log, deadline
        self.n_evaluated = 0

    def _may_start(self) -> bool:
        """Whether a new evaluation may start: before the deadline (the first one always may)."""
        return self.deadline is None or self.n_evaluated == 0 or time.monotonic() < self.deadline

    def evaluate(self, batch: Batch, executor: Any) -> bool:
        """Evaluate and tell every trial of ``batch``; False when the timeout left some untold."""
        fidelity, cost = self.benchmark.objective_fidelity(batch.fidelity), self.benchmark.default_cost(batch.fidelity)
        todo = []
        for trial in batch.trials:
            stored = self.log.stored(trial.id, trial.config, trial.fidelity) if self.log else None
            if stored is None:
                todo.append(trial)
            else:
                self.loop.tell(trial, *self.benchmark.record_one(stored))
        running: dict[int, Trial] = {}

        def start_next() -> None:
            if todo and self._may_start():
                trial = todo.pop(0)
                args = (self.benchmark.objective, trial.config, fidelity, cost, self.benchmark.catch)
                running[executor.submit(call_objective, args)] = trial
                self.n_evaluated += 1

        for _ in range(executor.workers):
            start_next()
        for task_id, outcome in executor.completed():
            trial = running.pop(task_id)
            if self.log is not None:
                self.log.append(trial.id, trial.config, trial.fidelity, outcome)
            self.loop.tell(trial, *self.benchmark.record_one(outcome))
            start_next()
        return not todo


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
