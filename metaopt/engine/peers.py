"""Known HPO libraries ("peers") run on metaopt's problems, with metaopt's budget accounting.

A peer run produces the same :class:`~metaopt.engine.loop.RunResult` as :func:`metaopt.engine.loop.run`: the
evaluations go into a :class:`~metaopt.core.archive.Archive` and the trace and summary come from
:func:`metaopt.engine.trace.build_trace` and :func:`metaopt.engine.trace.summarize`, so a study can put peers
and designed optimizers side by side.

Every peer is driven through its library's ask-and-tell interface, one configuration per call
(these are sequential optimizers), and stops exactly when the budget is spent, by the rule of
:mod:`metaopt.engine.loop` (kept by the same :class:`~metaopt.core.budget.BudgetMeter`): each evaluation adds
r/r_max full-evaluation equivalents and an evaluation that would exceed a full-evaluation budget is
not run; for a cost budget, an evaluation that finishes after the budget is spent is discarded
unseen; the run ends once the budget is spent. Budget and fidelity per peer:

- ``smac_hpo``: SMAC's HyperparameterOptimizationFacade (random-forest BO), full fidelity. Its
  Sobol initial design counts against the budget; it has SMAC's default size for a run of
  ``n_trials`` = the full evaluations in the budget: min(10·d, ⌊B/4⌋) (10·d for cost budgets).
- ``smac_hb``: SMAC's HyperbandFacade (random sampling + Hyperband), eta = 3, SMAC budgets =
  the problem's fidelity range [r_min, r_max]; each requested budget is evaluated at
  ``fidelity.snap(budget)`` (integer epochs) and charged snap(budget)/r_max.
- ``optuna_tpe``: Optuna's TPESampler (seeded, library defaults), full fidelity, define-by-run.
- ``flaml_cfo``: FLAML's CFO searcher, full fidelity, starting from the benchmark's low-cost
  point (``cheap_end``) when it has one; it is told the simulated cost of each evaluation.

- ``syne_asha``, ``syne_bohb``: syne-tune's ASHA and BOHB on syne-tune's simulator with N simulated
  workers and a time limit (:mod:`metaopt.engine.syne_peers`); their traces have the clock's columns
  (:mod:`metaopt.engine.simclock`). The other peers are sequential and refuse workers.

Optuna and FLAML are optional (``pip install .[peers]``), syne-tune too (``pip install .[syne]`` and
syne-tune itself with ``--no-deps``): without them :func:`run_peer` raises :class:`PeerUnavailable`
and :func:`peer_status` says "skipped (not installed)".
"""

from __future__ import annotations

import copy
import importlib
import importlib.metadata
import logging
import math
import tempfile
import time
import warnings
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Mapping

import numpy as np
from ConfigSpace import ConfigurationSpace
from ConfigSpace.conditions import EqualsCondition, InCondition
from ConfigSpace.hyperparameters import (
    CategoricalHyperparameter,
    Constant,
    Hyperparameter,
    OrdinalHyperparameter,
    UniformFloatHyperparameter,
    UniformIntegerHyperparameter,
)

from metaopt.core.benchmarks.base import Problem
from metaopt.core.smac_utils import quiet_smac_logging, reproducible_model_and_maximizer
from metaopt.core.budget import BUDGET_TOLERANCE, Budget
from metaopt.core.errors import UsageError
from metaopt.engine.loop import ProgressFn
from metaopt.engine.peer_run import PeerRun, _clip, _native
from metaopt.engine.simclock import Job, SimClock, with_clock
from metaopt.core.references import resolve_budget
from metaopt.store.run_io import RunResult
from metaopt.engine.trace import build_trace, summarize

INSTALL_HINT = "pip install .[peers]"
SMAC_N_TRIALS = 10**9
"""SMAC's own trial limit: never reached, our budget ends every run."""
FLAML_MAX_FAILURES = 100
"""Consecutive empty suggestions after which a FLAML run ends (flaml.tune's ``max_failure``)."""


class PeerUnavailable(UsageError):
    """The library a peer needs is not installed; the message says what to install."""


# -- registry ---------------------------------------------------------------------------------
Runner = Callable[[PeerRun, int], None]
ClockRunner = Callable[[PeerRun, int, int, "float | None"], "tuple[list[Job], SimClock, float]"]
"""A peer on a simulated clock: (run, seed, workers, time limit) -> the job of each recorded row,
the clock with every evaluation started, and when the run ended (see :func:`metaopt.engine.simclock.with_clock`)."""


@dataclass(frozen=True)
class Peer:
    """A known optimizer: the library it needs (import name, pip name) and its runner
    (``runner`` for a sequential peer, ``clock_runner`` for one on a simulated clock with N workers)."""

    name: str
    description: str
    module: str
    package: str
    runner: Runner | None = field(default=None, repr=False)
    clock_runner: ClockRunner | None = field(default=None, repr=False)
    install_hint: str = INSTALL_HINT

    def load(self) -> ModuleType:
        """The peer's library; PeerUnavailable if it is not installed."""
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # flaml warns on import that flaml.automl is absent
                return importlib.import_module(self.module)
        except ImportError as exc:
            raise PeerUnavailable(
                f"peer {self.name} needs the {self.package!r} package, which is not installed: "
                f"{self.install_hint} (or pip install {self.package})") from exc

    def library(self) -> str:
        """Library name and version, e.g. ``smac 2.4.1``."""
        self.load()
        return f"{self.package} {importlib.metadata.version(self.package)}"


def get_peer(name: str) -> Peer:
    """The peer called ``name``; UsageError listing the known peers otherwise."""
    if name not in PEERS:
        raise UsageError(f"unknown peer {name!r}; known peers: {', '.join(PEERS)}")
    return PEERS[name]


def available_peers() -> list[str]:
    """Names of the peers whose library is installed."""
    return [name for name, status in peer_status().items() if status == "available"]


def peer_status() -> dict[str, str]:
    """Per peer: ``available`` or ``skipped (not installed: pip install .[peers])``."""
    status = {}
    for name, peer in PEERS.items():
        try:
            peer.load()
            status[name] = "available"
        except PeerUnavailable:
            status[name] = f"skipped (not installed: {peer.install_hint})"
    return status


def run_peer(name: str, problem: Problem, seed: int, budget: Budget | str, reference: Any = None,
             progress: ProgressFn | None = None, workers: int | None = None,
             time_limit: float | None = None) -> RunResult:
    """Run peer ``name`` on ``problem`` with ``seed`` until ``budget`` is spent.

    Same inputs and output as :func:`metaopt.engine.simclock.run`; ``summary["config"]`` names the peer
    and its library. A peer on a simulated clock (the syne-tune peers) runs with ``workers`` (default
    1) and the ``time_limit`` in simulated seconds, and its trace has the clock's columns; the other
    peers are sequential and refuse both. UsageError for an unknown peer, PeerUnavailable if its
    library is missing.
    """
    peer = get_peer(name)
    if peer.clock_runner is None and (workers is not None or time_limit is not None):
        raise UsageError(f"peer {name} runs sequentially, not on the simulated clock (no workers or time limit); "
                         f"peers on the clock: {', '.join(n for n, p in PEERS.items() if p.clock_runner)}")
    library = peer.library()
    budget = resolve_budget(budget, problem)
    state = PeerRun(problem, budget, progress)
    started, cpu_started = time.perf_counter(), time.process_time()
    if peer.clock_runner is not None:
        jobs, clock, end = peer.clock_runner(state, int(seed), 1 if workers is None else workers, time_limit)
    else:
        assert peer.runner is not None  # a peer has one of the two
        peer.runner(state, int(seed))
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    trace = build_trace(state.archive, state.codec, problem, budget, reference, spent=np.asarray(state.spent))
    config = {"peer": name, "library": library, "method": peer.description, **state.settings}
    summary = summarize(trace, problem, budget, state.stop_reason or "budget", seed, config, reference)
    summary["wall_time_s"] = wall
    summary["cpu_time_s"] = cpu
    result = RunResult(trace, summary)
    return result if peer.clock_runner is None else with_clock(result, jobs, clock, end)


# -- search-space translation (Optuna, FLAML) -----------------------------------------------------
def _conditions(space: ConfigurationSpace) -> dict[str, tuple[str, tuple[Any, ...]]]:
    """child -> (parent, parent values that activate it). UsageError for what we cannot translate."""
    if space.forbidden_clauses:
        raise UsageError("this peer cannot handle forbidden clauses in the search space")
    out = {}
    for cond in space.conditions:
        if isinstance(cond, EqualsCondition):
            out[cond.child.name] = (cond.parent.name, (_native(cond.value),))
        elif isinstance(cond, InCondition):
            out[cond.child.name] = (cond.parent.name, tuple(_native(v) for v in cond.values))
        else:
            raise UsageError(f"this peer cannot translate the condition {cond!r}: "
                             "only EqualsCondition and InCondition are supported")
    return out


def _choices(hp: Hyperparameter) -> list[Any] | None:
    """The choices of a categorical or ordinal hyperparameter (ordinals lose their order); else None."""
    if isinstance(hp, CategoricalHyperparameter):
        if hp.weights is not None:
            raise UsageError(f"this peer cannot translate the weighted categorical {hp.name}")
        return [_native(c) for c in hp.choices]
    if isinstance(hp, OrdinalHyperparameter):
        return [_native(c) for c in hp.sequence]
    return None


def _unsupported(hp: Hyperparameter) -> UsageError:
    return UsageError(f"this peer cannot translate hyperparameter {hp.name} of type {type(hp).__name__} "
                      "(supported: uniform float/integer, categorical, ordinal, constant)")


# -- SMAC ------------------------------------------------------------------------------------
def _smac_scenario(state: PeerRun, seed: int, output: str, multi_fidelity: bool) -> Any:
    from smac import Scenario

    fid = state.problem.fidelity
    budgets: dict[str, Any] = {"min_budget": fid.r_min, "max_budget": fid.r_max} if multi_fidelity else {}
    # SMAC seeds the space it is given: it gets its own copy. Its output (it writes one by
    # default to ./smac3_output) goes to a temporary folder that the caller removes.
    return Scenario(copy.deepcopy(state.problem.search_space), name="peer", output_directory=Path(output),
                    deterministic=True, n_trials=SMAC_N_TRIALS, seed=seed, **budgets)


def _smac_loop(state: PeerRun, smac: Any, position: Callable[[Any], tuple[int, int]]) -> None:
    """Ask SMAC, evaluate, tell, until the budget is spent."""
    from smac.runhistory import StatusType, TrialValue

    while not state.done:
        try:
            info = smac.ask()
        except StopIteration:  # SMAC found no new configuration (tiny discrete space)
            state.stop_reason = "peer_stopped"
            break
        fidelity = None if info.budget is None else state.problem.fidelity.snap(info.budget)
        bracket, stage = position(info)
        loss = state.evaluate(dict(info.config), fidelity, stage=stage, bracket=bracket)
        if loss is None:
            break
        value = TrialValue(cost=loss) if math.isfinite(loss) else TrialValue(cost=math.inf, status=StatusType.CRASHED)
        smac.tell(info, value, save=False)  # save=False: no runhistory file written after every trial


def _run_smac_hpo(state: PeerRun, seed: int) -> None:
    from smac import HyperparameterOptimizationFacade as HPO

    b = state.budget
    n_init = 10 * state.problem.d
    if b.unit == "full_evals":
        # SMAC's default design size for n_trials = the full evaluations in the budget (max_ratio 0.25);
        # our n_trials is set out of reach, so the size is given explicitly.
        n_init = max(1, min(n_init, int(0.25 * math.floor(b.amount + BUDGET_TOLERANCE))))
    state.settings.update(facade="HyperparameterOptimizationFacade", initial_design=f"sobol, {n_init} configurations",
                          fidelity="full")
    with tempfile.TemporaryDirectory(prefix="metaopt-peer-smac-") as output:
        scenario = _smac_scenario(state, seed, output, multi_fidelity=False)
        model, maximizer = reproducible_model_and_maximizer(HPO, scenario)
        smac = HPO(scenario, None, model=model, acquisition_maximizer=maximizer,
                   initial_design=HPO.get_initial_design(scenario, n_configs=n_init),
                   overwrite=True, logging_level=quiet_smac_logging())
        _smac_loop(state, smac, lambda info: (0, 0))


def _run_smac_hb(state: PeerRun, seed: int) -> None:
    from smac import HyperbandFacade as HB

    fid = state.problem.fidelity
    state.settings.update(facade="HyperbandFacade", eta=3, min_budget=float(fid.r_min), max_budget=float(fid.r_max))
    with tempfile.TemporaryDirectory(prefix="metaopt-peer-smac-") as output:
        scenario = _smac_scenario(state, seed, output, multi_fidelity=True)
        smac = HB(scenario, None, intensifier=HB.get_intensifier(scenario, eta=3),
                  overwrite=True, logging_level=quiet_smac_logging())
        _smac_loop(state, smac, lambda info: _smac_hb_position(smac.intensifier, info))


def _smac_hb_position(intensifier: Any, info: Any) -> tuple[int, int]:
    """(bracket, stage) of a trial in metaopt's numbering: bracket b = 1..s, stage = rung 1..s.

    SMAC does not put them on the TrialInfo; its (private) Hyperband tracker knows where the
    asked configuration waits. SMAC's bracket i (0-based) starts at rung i, so rung = i + stage.
    (0, 0) if SMAC's internals change.
    """
    tracker = getattr(intensifier, "_tracker", {})
    budgets = getattr(intensifier, "_budgets_in_stage", {})
    for (bracket, stage), pairs in tracker.items():
        rungs = budgets.get(bracket, [])
        if stage < len(rungs) and rungs[stage] == info.budget and any(info.config in c for _, c in pairs):
            return bracket + 1, bracket + stage + 1
    return 0, 0


# -- Optuna ----------------------------------------------------------------------------------
_INACTIVE = object()  # the value of an inactive parent: satisfies no condition


def _optuna_suggest(trial: Any, space: ConfigurationSpace, conditions: Mapping[str, tuple[str, tuple]]) -> dict:
    """Define-by-run: suggest each active hyperparameter, parents first; children only when active."""
    config: dict[str, Any] = {}
    for name, hp in space.items():  # ConfigSpace orders hyperparameters parents-before-children
        if name in conditions:
            parent, values = conditions[name]
            if config.get(parent, _INACTIVE) not in values:
                continue
        if isinstance(hp, UniformFloatHyperparameter):
            config[name] = trial.suggest_float(name, float(hp.lower), float(hp.upper), log=hp.log)
        elif isinstance(hp, UniformIntegerHyperparameter):
            config[name] = trial.suggest_int(name, int(hp.lower), int(hp.upper), log=hp.log)
        elif (choices := _choices(hp)) is not None:
            config[name] = trial.suggest_categorical(name, choices)
        elif isinstance(hp, Constant):
            config[name] = _native(hp.value)
        else:
            raise _unsupported(hp)
    return config


def _run_optuna_tpe(state: PeerRun, seed: int) -> None:
    optuna = PEERS["optuna_tpe"].load()
    from optuna.trial import TrialState

    space = state.problem.search_space
    conditions = _conditions(space)
    # Optuna logs every trial at INFO on its own logger: keep it to warnings (process-wide setting).
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(direction="minimize", sampler=optuna.samplers.TPESampler(seed=seed))
    state.settings.update(sampler="TPESampler (library defaults)", fidelity="full")
    while not state.done:
        trial = study.ask()
        config = _clip(space, _optuna_suggest(trial, space, conditions))
        loss = state.evaluate(config)
        if loss is None:
            break
        if math.isfinite(loss):
            study.tell(trial, loss)
        else:
            study.tell(trial, state=TrialState.FAIL)


# -- FLAML -----------------------------------------------------------------------------------
def _flaml_space(space: ConfigurationSpace, conditions: Mapping[str, tuple[str, tuple]]) -> dict[str, Any]:
    """A ``flaml.tune`` search space. A categorical parent becomes a choice among dicts, one per
    value, each holding the parent's value and the children it activates (FLAML's hierarchical
    spaces); :func:`_flatten` undoes the nesting."""
    from flaml import tune

    children: dict[str, list[str]] = {}
    for child, (parent, _) in conditions.items():
        children.setdefault(parent, []).append(child)

    def domain(name: str) -> Any:
        hp = space[name]
        choices = _choices(hp)
        if name in children:
            if choices is None:
                raise UsageError(f"FLAML peer: conditions on the non-categorical {name} are not supported")
            return tune.choice([{name: v, **{c: domain(c) for c in children[name] if v in conditions[c][1]}}
                                for v in choices])
        if isinstance(hp, UniformFloatHyperparameter):
            return (tune.loguniform if hp.log else tune.uniform)(hp.lower, hp.upper)
        if isinstance(hp, UniformIntegerHyperparameter):  # FLAML's randint excludes its upper end
            return (tune.lograndint if hp.log else tune.randint)(hp.lower, hp.upper + 1)
        if choices is not None:
            return tune.choice(choices)
        if isinstance(hp, Constant):
            return _native(hp.value)
        raise _unsupported(hp)

    return {name: domain(name) for name in space if name not in conditions}


def _flatten(config: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, value in config.items():
        if isinstance(value, dict):
            out.update(_flatten(value))
        else:
            out[name] = value
    return out


def _run_flaml_cfo(state: PeerRun, seed: int) -> None:
    PEERS["flaml_cfo"].load()
    from flaml import CFO

    bench = state.problem.benchmark
    space: Any = bench.search_space
    conditions = _conditions(space)
    # The low-cost start: cheap ends of unconditional numeric hyperparameters (a conditional one
    # would have to sit inside FLAML's nested choice; it starts where FLAML puts it).
    low_cost = {name: (space[name].lower if end == "lower" else space[name].upper)
                for name, end in state.problem.cheap_end.items()
                if name not in conditions and isinstance(space[name], (UniformFloatHyperparameter,
                                                                       UniformIntegerHyperparameter))}
    # flaml's package logger is set to INFO on import: keep it to warnings (process-wide setting).
    logging.getLogger("flaml").setLevel(logging.WARNING)
    # cost_attr: CFO is cost-frugal; under flaml.tune it would see each trial's run time, here the
    # simulated cost of the evaluation.
    searcher = CFO(metric="loss", mode="min", space=_flaml_space(space, conditions),
                   low_cost_partial_config=low_cost or None, cost_attr="cost", seed=seed)
    state.settings.update(searcher="CFO", low_cost_partial_config=low_cost, fidelity="full")
    trial_id = failures = 0
    while not state.done:
        trial_id += 1
        suggested = searcher.suggest(str(trial_id))
        if suggested is None:  # FLAML has nothing this time (duplicate, a local search restarting)
            failures += 1
            if failures >= FLAML_MAX_FAILURES:  # flaml.tune gives up there too
                state.stop_reason = "peer_stopped"
            continue
        failures = 0
        cost_before = state.meter.cost_used
        loss = state.evaluate(_clip(space, _flatten(suggested)))
        if loss is None:
            break
        # FLAML reads the configuration back from the result, as flaml.tune.report provides it.
        result = {"loss": loss, "cost": state.meter.cost_used - cost_before, "config": suggested}
        searcher.on_trial_complete(str(trial_id), result, error=not math.isfinite(loss))


# -- syne-tune (metaopt.engine.syne_peers) ------------------------------------------------------------
SYNE_INSTALL_HINT = "pip install .[syne] && pip install --no-deps syne-tune==0.16.0 (make install does both)"


def _run_syne(name: str, state: PeerRun, seed: int, workers: int, time_limit: float | None) -> tuple[list[Job], SimClock, float]:
    PEERS[name].load()
    from metaopt.engine import syne_peers

    return syne_peers.run(name, state, seed, workers, time_limit)


PEERS: dict[str, Peer] = {
    "smac_hpo": Peer("smac_hpo", "SMAC HyperparameterOptimizationFacade (RF-BO), full fidelity",
                     "smac", "smac", _run_smac_hpo),
    "smac_hb": Peer("smac_hb", "SMAC HyperbandFacade (random sampling + Hyperband, eta = 3)",
                    "smac", "smac", _run_smac_hb),
    "optuna_tpe": Peer("optuna_tpe", "Optuna TPESampler, full fidelity", "optuna", "optuna", _run_optuna_tpe),
    "flaml_cfo": Peer("flaml_cfo", "FLAML CFO, full fidelity, low-cost start", "flaml", "flaml", _run_flaml_cfo),
    "syne_asha": Peer("syne_asha", "syne-tune ASHA (stopping, eta = 3) on its simulator backend",
                      "syne_tune", "syne-tune", clock_runner=partial(_run_syne, "syne_asha"),
                      install_hint=SYNE_INSTALL_HINT),
    "syne_bohb": Peer("syne_bohb", "syne-tune BOHB (ASHA with a KDE searcher, eta = 3) on its simulator backend",
                      "syne_tune", "syne-tune", clock_runner=partial(_run_syne, "syne_bohb"),
                      install_hint=SYNE_INSTALL_HINT),
}
"""Peer name -> :class:`Peer` (its library and runner)."""
