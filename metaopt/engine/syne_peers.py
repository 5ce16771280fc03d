"""syne-tune's asynchronous schedulers as peers on syne-tune's own simulator (``syne_asha``, ``syne_bohb``).

The problem (a YAHPO surrogate, a synthetic function) is wrapped as a syne-tune user blackbox
(:class:`ProblemBlackbox`) and run by syne-tune's ``Tuner`` with its ``UserBlackboxBackend`` (the
simulator backend of its blackbox repository) and N simulated workers. syne-tune's model of a
trial is a learning curve: a trial started at time t reports its loss at every fidelity of the
blackbox's grid, the one at fidelity r at t + the predicted runtime at r (the problem's ``cost``
there, made increasing by syne-tune), until its scheduler stops it. Its ASHA is the stopping
variant: a trial is stopped at a rung unless it is among the best 1/η of the results there, and a
trial that goes on continues from where it was (no promotion that pays its full r again, as
metaopt's ``asha`` does). The fidelity grid is the rungs of metaopt's ``asha`` at η = 3
(:func:`fidelity_grid`; lcbench: epochs 2, 6, 17, 52; rbv2: trainsize 0.037, 0.11, 0.33, 1), so
that both schedulers decide at the same fidelities; syne-tune's resource of the k-th grid fidelity
is 3^(k-1), so that its ASHA (grace period 1, η = 3) has a rung at each of them and max_t at the
last. (syne-tune's own YAHPO blackboxes report at every epoch, 52 results for a full lcbench trial
instead of 4 here; its ASHA decides only at its rungs all the same, but BOHB's KDE sees the
intermediate results too.)

Peers:

- ``syne_asha``: ``syne_tune.optimizer.baselines.ASHA`` (random proposals).
- ``syne_bohb``: ``syne_tune.optimizer.baselines.BOHB`` (ASHA with the KDE searcher of BOHB).
  syne-tune 0.16 has no MOBSTER or Hyper-Tune any more (their GP code, and its autograd
  dependency, left after 0.14, whose wheel pins numpy < 1.27); its model-based asynchronous
  schedulers are BOHB, ASHABORE (xgboost) and ASHACQR.

Both start, as syne-tune's searchers do, with the configuration at the middle of the space.

What is changed in syne-tune's simulation, so that a run is a pure function of (peer, problem,
seed, budget, workers, time limit) like every run on metaopt's clock: the simulator's delays are 0
(metaopt's clock has none); the real time the tuner spends between backend calls, which syne-tune
adds to the simulated time, is not added (:class:`_SimulatedTimeOnly`); and when every worker is
busy the tuner's sleep advances the clock to the next event instead of by a fixed 5 s
(the tuner callback of :func:`_recorder`), with no real sleep; numpy's global generator, which
syne-tune's random searcher draws from, is seeded with the run's seed (and restored after). Left as
syne-tune has it: stopping a trial advances the clock by 2 ms. Not changed but made faster: syne-tune's
bookkeeping and BOHB's proposal, replaced by code making the same decisions
(:func:`_without_quadratic_bookkeeping`).

Conversion to metaopt's trace (:func:`run`): every result the scheduler receives becomes a row, in
the order received: the configuration (inactive hyperparameters of a conditional space dropped),
its fidelity, its loss, ``cost`` = the time its worker spent since the trial's previous result
(so ``sim_start`` + ``cost`` = ``sim_time``) and ``budget_used`` charging the fidelity gained
since then over r_max (a full trial costs one full evaluation). The budget (evaluations or cost)
and the time limit T are kept as on metaopt's clock: a result that would take the spent budget past
B, or that arrives after T, is discarded and the run ends (stop reason ``budget`` or ``time``);
syne-tune's tuner then stops its running trials. ``worker`` numbers each trial's worker as metaopt's
clock would (the free one with the lowest index).
"""

from __future__ import annotations

import bisect
import contextlib
import dataclasses
import heapq
import io
import itertools
import logging
import math
import tempfile
import types
import warnings
from pathlib import Path
from typing import Any

import numpy as np
from ConfigSpace import ConfigurationSpace
from ConfigSpace.hyperparameters import (
    CategoricalHyperparameter,
    Constant,
    OrdinalHyperparameter,
    UniformFloatHyperparameter,
    UniformIntegerHyperparameter,
)

from metaopt.core.benchmarks.base import Fidelity
from metaopt.core.errors import UsageError
from metaopt.components.fidelity_schedules import n_stages, stage_fidelity
from metaopt.engine.peer_run import PeerRun, _clip, _native
from metaopt.engine.simclock import Job, SimClock

REDUCTION_FACTOR = 3
RESOURCE = "resource"
ELAPSED = "elapsed"
SCHEDULERS = {"syne_asha": "ASHA", "syne_bohb": "BOHB"}
"""Peer name -> class in ``syne_tune.optimizer.baselines``."""


def fidelity_grid(fidelity: Fidelity) -> np.ndarray:
    """The fidelities a syne-tune trial reports at: the rungs of metaopt's ``asha`` at η = 3,
    r_j = r_max·3^-(s-j) snapped (module docstring), increasing."""
    s = n_stages(fidelity, REDUCTION_FACTOR)
    return np.unique([stage_fidelity(fidelity, j, s, REDUCTION_FACTOR) for j in range(1, s + 1)])


def resources(grid: np.ndarray) -> np.ndarray:
    """syne-tune's resource for each grid fidelity: 1, 3, 9, ..., so that its ASHA (grace period 1,
    η = 3) has a rung at every grid fidelity but the last, its max_t."""
    return REDUCTION_FACTOR ** np.arange(len(grid))


def _vector(state: PeerRun, config: dict[str, Any], cache: dict[str, np.ndarray]) -> np.ndarray:
    """The codec vector of a syne-tune configuration (its inactive hyperparameters dropped); ``cache``
    keeps the vectors of the run's configurations (the blackbox and the recorder both need them)."""
    key = repr(sorted(config.items()))
    if key not in cache:
        space = state.problem.search_space
        # syne-tune 0.16's KDE searcher can propose an integer outside its range (max_units = 13 of
        # lcbench's [64, 1024], log scale): numbers are clipped to their range, as for the other peers
        clipped = _clip(space, {k: v for k, v in config.items() if k in space})
        cache[key] = state.codec.to_vector_dropping_inactive(clipped)
    return cache[key]


def syne_space(space: ConfigurationSpace) -> dict[str, Any]:
    """The search space as a syne-tune config space (conditions dropped: every hyperparameter is
    sampled, the inactive ones are dropped before an evaluation). UsageError for what has no
    translation."""
    from syne_tune.config_space import choice, lograndint, loguniform, ordinal, randint, uniform

    if space.forbidden_clauses:
        raise UsageError("the syne-tune peers cannot handle forbidden clauses in the search space")
    out: dict[str, Any] = {}
    for hp in space.values():
        if isinstance(hp, UniformFloatHyperparameter):
            out[hp.name] = (loguniform if hp.log else uniform)(float(hp.lower), float(hp.upper))
        elif isinstance(hp, UniformIntegerHyperparameter):
            out[hp.name] = (lograndint if hp.log else randint)(int(hp.lower), int(hp.upper))
        elif isinstance(hp, CategoricalHyperparameter) and hp.weights is None:
            out[hp.name] = choice([_native(c) for c in hp.choices])
        elif isinstance(hp, OrdinalHyperparameter):
            out[hp.name] = ordinal([_native(c) for c in hp.sequence])
        elif isinstance(hp, Constant):
            out[hp.name] = _native(hp.value)
        else:
            raise UsageError(f"the syne-tune peers cannot translate hyperparameter {hp.name} of type "
                             f"{type(hp).__name__} (supported: uniform float/integer, unweighted categorical, "
                             "ordinal, constant)")
    return out


def _blackbox_class() -> type:
    from syne_tune.blackbox_repository.blackbox import Blackbox

    class ProblemBlackbox(Blackbox):
        """A metaopt problem as a syne-tune blackbox: a configuration's losses and predicted runtimes
        at every fidelity of :func:`fidelity_grid` (one batched evaluation per trial)."""

        def __init__(self, state: PeerRun, grid: np.ndarray, space: dict[str, Any]) -> None:
            from syne_tune.config_space import randint

            super().__init__(configuration_space=space, fidelity_space={RESOURCE: randint(1, int(resources(grid)[-1]))},
                             objectives_names=["loss", ELAPSED])
            self.state, self.grid = state, grid
            self.vectors: dict[str, np.ndarray] = {}

        @property
        def fidelity_values(self) -> np.ndarray:
            return resources(self.grid)

        def objective_function(self, configuration: dict[str, Any], fidelity: Any = None,
                               seed: int | None = None) -> Any:
            """Called by the simulator when a trial starts: (loss, elapsed time) at each grid fidelity."""
            assert fidelity is None  # the simulator asks for the whole learning curve
            vector = _vector(self.state, configuration, self.vectors)
            evaluated = self.state.codec.to_dicts(vector[None, :])[0]
            result = self.state.problem.evaluate([evaluated] * len(self.grid), self.grid)
            if not np.all(np.isfinite(result.cost)):
                raise UsageError("an evaluation's cost must be a finite number >= 0 for the syne-tune simulator")
            # the scheduler ranks the losses: a failed evaluation (NaN) ranks last
            return np.column_stack([np.where(np.isnan(result.loss), np.inf, result.loss), result.cost])

    return ProblemBlackbox


def _recorder(state: PeerRun, grid: np.ndarray, backend: Any, time_limit: float | None,
              vectors: dict[str, np.ndarray]) -> Any:
    """The tuner callback that keeps syne-tune's clock event-driven and records each result
    into ``state`` (a ``syne_tune.tuner_callback.TunerCallback``; built when a run starts)."""
    from syne_tune.tuner_callback import TunerCallback

    position_of = {int(resource): k + 1 for k, resource in enumerate(resources(grid))}

    class Recorder(TunerCallback):
        def __init__(self) -> None:
            self.starts: dict[int, float] = {}
            """trial id -> simulated start time, in start order."""
            self.last: dict[int, tuple[float, int]] = {}
            """trial id -> (time, grid position) of its last result seen."""
            self.rows: list[tuple[int, float, float]] = []
            """Recorded results: (trial id, sim_start, sim_time), in trace order."""
            self.stopped: set[int] = set()
            """Trials the scheduler stopped (the others run until the run ends)."""
            self.end = 0.0
            """When the last result seen arrived."""

        def on_tuning_start(self, tuner: Any) -> None:
            backend.time_keeper.start_of_time()

        def on_tuning_sleep(self, sleep_time: float) -> None:
            # every worker is busy: move the clock to the next event (syne-tune moves it by the
            # tuner's sleep time, 5 s, which delays results to multiples of it)
            events = backend._simulator_state.event_heap  # noqa: SLF001 - no public accessor
            if events:
                backend.time_keeper.advance_to(events[0][0])

        def on_start_trial(self, trial: Any) -> None:
            self.starts[trial.trial_id] = backend.time_keeper.time()

        def on_trial_result(self, trial: Any, status: str, result: dict[str, Any], decision: str) -> None:
            from syne_tune.constants import ST_TUNER_TIME

            if state.done:
                return
            trial_id, now = trial.trial_id, float(result[ST_TUNER_TIME])
            position = position_of[int(result[RESOURCE])]
            self.end = max(self.end, now)
            started, previous = self.last.get(trial_id, (self.starts[trial_id], 0))
            self.last[trial_id] = (now, position)
            if decision == "STOP":
                self.stopped.add(trial_id)
            if time_limit is not None and now > time_limit:
                state.stop_reason = "time"
                return
            r = float(grid[position - 1])
            spent = r - (float(grid[previous - 1]) if previous else 0.0)
            vector = _vector(state, trial.config, vectors)
            loss = float(result["loss"]) if math.isfinite(result["loss"]) else math.nan
            if state.record(vector, r, loss, now - started, spent=spent, stage=position - 1):
                self.rows.append((trial_id, started, now))

    return Recorder()


def run(name: str, state: PeerRun, seed: int, workers: int, time_limit: float | None) -> tuple[list[Job], SimClock, float]:
    """Run syne-tune peer ``name`` on ``state``'s problem with ``workers`` simulated workers until the
    budget is spent or ``time_limit`` (simulated seconds) is reached.

    Called by :func:`metaopt.engine.peers.run_peer`. Records the results into ``state`` and returns
    the job of each recorded row (trace order), a clock holding every trial's occupation of a worker
    (for the utilization) and when the run ended.
    """
    from syne_tune import Tuner
    from syne_tune.backend.simulator_backend.simulator_backend import SimulatorConfig
    from syne_tune.backend.simulator_backend.time_keeper import SimulatedTimeKeeper
    from syne_tune.blackbox_repository import UserBlackboxBackend
    from syne_tune.optimizer import baselines

    class _SimulatedTimeOnly(SimulatedTimeKeeper):
        """syne-tune's simulated time keeper, without the real time spent outside the backend."""

        def real_time_since_last_recent_exit(self) -> float:
            return 0.0

    class _SimulatedTuner(Tuner):
        """syne-tune's tuner without its real sleep: time.sleep(0), once per result, yields the CPU to
        every other process of a loaded machine; the callbacks still see the sleep (and move the clock)."""

        def _sleep(self) -> None:
            for callback in self.callbacks:
                callback.on_tuning_sleep(0.0)

        def _stop_condition(self) -> bool:
            # syne-tune also stops when more trials failed than max_failures, counting the failed
            # ones anew over every trial each loop (a fifth of a long run's time). No trial fails on
            # this simulator: the blackbox raises instead (an error, not a trial status).
            return bool(self.stop_criterion(self.tuning_status))

    grid = fidelity_grid(state.problem.fidelity)
    space = syne_space(state.problem.search_space)
    state.settings.update(scheduler=f"syne_tune.optimizer.baselines.{SCHEDULERS[name]}",
                          reduction_factor=REDUCTION_FACTOR, grace_period=1, fidelity_grid=[float(r) for r in grid],
                          simulator="UserBlackboxBackend, delays 0, no real time")
    # syne-tune prints every trial to stdout, logs at INFO and warns about its dependencies' futures:
    # kept out of metaopt's output (the logger level is process-wide)
    logging.getLogger("syne_tune").setLevel(logging.ERROR)
    numpy_state = np.random.get_state()
    with tempfile.TemporaryDirectory(prefix="metaopt-peer-syne-") as folder, \
            contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        blackbox = _blackbox_class()(state, grid, space)
        backend = UserBlackboxBackend(blackbox=blackbox, elapsed_time_attr=ELAPSED,
                                      simulator_config=SimulatorConfig(0.0, 0.0, 0.0, 0.0, 0.0))
        backend._time_keeper = _SimulatedTimeOnly()  # noqa: SLF001 - the backend has no setter
        scheduler = getattr(baselines, SCHEDULERS[name])(
            config_space=space, metric="loss", time_attr=RESOURCE, max_t=int(resources(grid)[-1]), grace_period=1,
            reduction_factor=REDUCTION_FACTOR, do_minimize=True, random_seed=seed)
        _without_quadratic_bookkeeping(scheduler)
        rungs = sorted(milestone for milestone, _ in scheduler.brackets[0].rungs)
        # syne-tune counts its rungs with a floating-point logarithm: check that none was lost
        assert np.allclose(rungs, resources(grid)[:len(rungs)]) and len(rungs) >= len(grid) - 1, (rungs, grid)
        recorder = _recorder(state, grid, backend, time_limit, blackbox.vectors)
        tuner = _SimulatedTuner(trial_backend=backend, scheduler=scheduler, stop_criterion=lambda status: state.done,
                      n_workers=workers, sleep_time=0.0, callbacks=[recorder], save_tuner=False,
                      tuner_name="metaopt-peer", suffix_tuner_name=False, trial_backend_path=folder,
                      print_update_interval=math.inf, results_update_interval=math.inf)
        tuner.tuner_path = Path(folder)  # syne-tune writes its metadata there (default: ~/syne-tune)
        # syne-tune's RandomSearcher (what its ASHA proposes from after the first draws) and its
        # ASHA's bracket choice draw from numpy's global generator: seeded for the run, restored after.
        np.random.seed(seed)
        try:
            tuner.run()
        finally:
            np.random.set_state(numpy_state)
    end = recorder.end if time_limit is None else min(recorder.end, time_limit)
    return _jobs(recorder, workers, end)


SYNE_TUNE_REPLACED = "0.16."
"""The syne-tune release whose code :func:`_without_quadratic_bookkeeping` replaces (constraints.txt
pins it); with another, syne-tune's own code runs."""


def _without_quadratic_bookkeeping(scheduler: Any) -> None:
    """Called when a run starts: ``scheduler`` (syne-tune's asynchronous successive halving) with
    pieces of its bookkeeping, and BOHB's proposal, replaced by code that makes the same decisions
    (the same trace, bit for bit; tests/test_syne_peers.py runs both) in less time. syne-tune's
    bookkeeping takes time linear in the results so far at every result, so a run of thousands of
    trials (120·d on lcbench at 8 workers: about 6,000) spent two thirds of its time there.

    - Each bracket's rung decision (:class:`_SortedBracket`): syne-tune sorts every result recorded
      at the rung anew for each new one.
    - The searcher's refit: before each proposal syne-tune's ``LastValueMultiFidelitySearcher``
      builds a new searcher and tells it every trial's last result. ASHA's ``RandomSearcher``
      ignores results, so it is told none; BOHB's ``KernelDensityEstimator`` keeps each result's
      feature vector, which is computed once per trial instead of once per refit
      (:func:`_refit`).
    - BOHB's proposal (:func:`_kde_suggest`): the same candidates from the same draws, with the
      truncated-normal variates computed in one call instead of one scipy call each (three fifths
      of a long BOHB run: scipy's checks around each scalar draw).
    """
    from importlib.metadata import version

    from syne_tune.optimizer.schedulers.searchers.kde import KernelDensityEstimator
    from syne_tune.optimizer.schedulers.searchers.random_searcher import RandomSearcher

    if not version("syne-tune").startswith(SYNE_TUNE_REPLACED):
        return
    scheduler.brackets = [_sorted_bracket(bracket) for bracket in scheduler.brackets]
    searcher = scheduler.searcher
    kind = getattr(searcher, "searcher_cls", None)
    if kind is RandomSearcher or kind is KernelDensityEstimator:
        features = _Features()
        searcher.fit_model = lambda: _refit(searcher, features)
    if kind is KernelDensityEstimator:
        for method in ("on_trial_result", "on_trial_complete"):  # the two that append to trial_results
            setattr(searcher, method, _noting_changes(getattr(searcher, method), features.changed))


def _noting_changes(append: Any, changed: set[int]) -> Any:
    """``append`` (the searcher's ``on_trial_result`` or ``on_trial_complete``), noting the trial
    whose last result it changes in ``changed``."""
    def noted(trial_id: int, *args: Any, **kwargs: Any) -> Any:
        changed.add(trial_id)
        return append(trial_id, *args, **kwargs)
    return noted


@dataclasses.dataclass
class _Features:
    """What the KDE searcher's replay of ``trial_results`` gives, kept by :func:`_refit` in the order
    of ``trial_results``: each trial's feature vector, stacked (what ``np.array(X)`` makes of the
    searcher's ``X``; its rows are ``X``), and each trial's last result (``y``), of which only those of
    the trials ``changed`` since the last refit are read anew."""

    stacked: np.ndarray | None = None
    position: dict[int, int] = dataclasses.field(default_factory=dict)
    """Each trial's row, by trial ID: the trials featurized so far."""
    last: np.ndarray = dataclasses.field(default_factory=lambda: np.empty(0))
    changed: set[int] = dataclasses.field(default_factory=set)


def _refit(searcher: Any, features: _Features) -> None:
    """syne-tune's ``LastValueMultiFidelitySearcher.fit_model`` for its random or KDE searcher: a new
    searcher with a seed drawn from the same generator, holding what syne-tune's replay of every
    trial's last result leaves in it. A ``RandomSearcher`` keeps nothing (its ``on_trial_complete``
    does nothing); a ``KernelDensityEstimator`` appends each trial's feature vector to ``X`` and its
    last result to ``y``, in the order of ``trial_results``. A feature vector is a function of the
    trial's configuration alone, and ``trial_results`` only gains trials at its end (a defaultdict
    nothing deletes from), so ``features`` keeps the vectors in that order and grows by the new
    trials' only. The KDE searcher also gets both as arrays (``X_array``, ``y_array``: what its
    proposal makes of ``X`` and ``y`` by ``np.array``; :func:`_kde_suggest`)."""
    model = searcher.searcher_cls(
        config_space=searcher.config_space, random_seed=searcher.random_state.randint(0, 2**31 - 1),
        points_to_evaluate=None, **searcher.searcher_kwargs)
    if hasattr(model, "X"):
        results = searcher.trial_results
        added = list(itertools.islice(results.keys(), len(features.position), None))
        if added:
            new = np.array([model._to_feature(searcher.trial_configs[trial_id])  # noqa: SLF001 - what on_trial_complete appends
                            for trial_id in added])
            features.position.update({trial_id: len(features.position) + k for k, trial_id in enumerate(added)})
            features.stacked = new if features.stacked is None else np.concatenate([features.stacked, new])
            features.last = np.concatenate([features.last, np.empty(len(added))])
        # syne-tune's make_input_target's metrics, np.array(the last result of each trial): a float
        # array (the results are losses), of which only the changed trials' entries are read anew
        for trial_id in features.changed:
            features.last[features.position[trial_id]] = results[trial_id][-1]
        features.changed.clear()
        model.X.extend(features.stacked if features.stacked is not None else [])
        model.y.extend(features.last)
        model.X_array, model.y_array = features.stacked, features.last
        model.suggest = types.MethodType(_kde_suggest, model)
    searcher.searcher = model


def _kde_suggest(self: Any, **kwargs: Any) -> dict[str, Any] | None:
    """syne-tune 0.16's ``KernelDensityEstimator.suggest`` (BOHB's proposal), the same proposal from
    the same draws of its generator, bound to each KDE searcher by :func:`_refit`.

    syne-tune draws 64 candidates one by one, each hyperparameter from the good density's kernel
    around a random good point: a continuous one by ``scipy.stats.truncnorm.rvs`` (one uniform draw,
    then truncnorm's quantile function), a discrete one by one or two draws; it then scores each
    candidate by the bad over the good density and keeps the first lowest. Here the draws come in the
    same order, the quantiles of all continuous draws are computed in one call of truncnorm's own
    quantile function (elementwise: the same numbers as one call each), and both densities are
    evaluated on all candidates at once (:func:`_kde_densities`).
    """
    from scipy.stats import truncnorm

    suggestion = self._next_points_to_evaluate()
    if suggestion is not None:
        return suggestion
    # np.array(self.X) and np.array(self.y) as _refit keeps them (copies: the KDE keeps its data)
    models = self._train_kde(self.X_array.copy(), self.y_array.copy()) if self.y else None
    if models is None or self.random_state.rand() < self.random_fraction:
        return self._get_random_config()
    self.bad_kde, self.good_kde = models
    draw = self.random_state
    uniform, rand, randint = draw.uniform, draw.rand, draw.randint
    candidates: list[list[Any]] = []
    continuous: list[tuple[int, int, Any, float, float, float, float]] = []  # candidate, position, u, a, b, loc, scale
    # per variable, as syne-tune computes them for every candidate: the kernel's bandwidth (a continuous
    # one's widened by bandwidth_factor), and for the others the chance 1 - bw of keeping the mean's value
    widths = []
    for bw, (vartype, domain) in zip(self.good_kde.bw, self.vartypes):
        bw = max(bw, self.min_bandwidth)
        widths.append((vartype, domain, self.bandwidth_factor * bw if vartype == "c" else bw, 1 - bw))
    data, n_data = self.good_kde.data, len(self.good_kde.data)
    for i in range(self.num_candidates):
        mean = data[randint(0, n_data)]
        candidate: list[Any] = []
        for m, (vartype, domain, bw, keep) in zip(mean, widths):
            if vartype == "c":
                # what truncnorm.rvs(-m / bw, (1 - m) / bw, loc=m, scale=bw, random_state=draw) draws
                continuous.append((i, len(candidate), uniform(size=()), -m / bw, (1 - m) / bw, m, bw))
                candidate.append(None)
            elif rand() < keep:
                candidate.append(m)
            elif vartype == "o":
                sample = randint(domain[0], domain[1])
                candidate.append((sample - domain[0]) / (domain[1] - domain[0]))
            elif vartype == "u":
                candidate.append(randint(domain) / domain)
        candidates.append(candidate)
    if continuous:
        _, _, u, a, b, loc, scale = (np.array(column) for column in zip(*continuous))
        values = truncnorm._ppf(u, a, b) * scale + loc  # noqa: SLF001 - truncnorm.rvs's own quantile function
        for (i, position, *_), value in zip(continuous, values):
            candidates[i][position] = value
    points = np.asarray(candidates, dtype=float)
    bad, good = _kde_densities(self.bad_kde, points), _kde_densities(self.good_kde, points)
    best, chosen = None, None
    for candidate, bad_density, good_density in zip(candidates, bad, good):
        value = max(1e-32, bad_density) / max(good_density, 1e-32)
        if not np.isfinite(value):
            logging.getLogger("syne_tune").warning("candidate has non finite acquisition function value")
        if best is None or best > value:
            chosen, best = candidate, value
    # syne-tune converts every candidate to a configuration; only the chosen one's is used
    return self._from_feature(chosen) if chosen is not None else self._get_random_config()


def _sorted_bracket(bracket: Any) -> Any:
    """``bracket`` (a ``syne_tune.optimizer.schedulers.asha.Bracket``, no results yet) as a
    :class:`_SortedBracket` with the same rungs."""
    from syne_tune.optimizer.schedulers.asha import Bracket

    class _SortedBracket(Bracket):
        """syne-tune's bracket keeping each rung's metrics sorted as well: a new result's rank is
        found by bisection instead of by sorting the rung's metrics again. The decision is the
        same: syne-tune ranks a result by ``searchsorted(sorted(values), value) / len(values)``
        (``values`` with the new one), the number of recorded metrics strictly below it over their
        count plus one, and stops the trial when that exceeds 1/η."""

        def __init__(self, rungs: list[tuple[int, dict]], rf: float) -> None:
            self.rf, self.rungs, self.priority = rf, rungs, None
            self.sorted: dict[int, list[float]] = {milestone: [] for milestone, _ in rungs}

        def on_result(self, trial_id: int, cur_iter: int, metrics: dict | None) -> str:
            from syne_tune.optimizer.scheduler import SchedulerDecision

            assert metrics is not None and len(metrics) == 1, metrics  # one metric, no priority
            value = float(next(iter(metrics.values())))
            action = SchedulerDecision.CONTINUE
            for milestone, recorded in self.rungs:
                if cur_iter < milestone or trial_id in recorded:
                    continue
                values = self.sorted[milestone]
                if recorded and bisect.bisect_left(values, value) / (len(values) + 1) > 1 / self.rf:
                    action = SchedulerDecision.STOP
                recorded[trial_id] = metrics
                bisect.insort(values, value)
                break
            return action

    assert bracket.priority is None and not any(recorded for _, recorded in bracket.rungs)
    return _SortedBracket(bracket.rungs, bracket.rf)


def _kde_densities(kde: Any, points: np.ndarray) -> np.ndarray:
    """``kde.pdf(points)`` of a statsmodels ``KDEMultivariate`` (its default kernels: Gaussian,
    Wang-Ryzin, Aitchison-Aitken), the same numbers. statsmodels calls its kernels once per point and
    variable; here each variable's kernel is computed for all points at once (elementwise the same
    operations; an ordinal one once per pair of distinct levels, :func:`_wang_ryzin`), multiplied
    into the product over the variables in their order (what numpy's multiply reduction does: it has
    no pairwise order), and each point's sum over the data is numpy's pairwise sum of its contiguous
    row, as statsmodels sums it (one call for all rows: a reduction along the contiguous axis sums
    each row as the same call on that row alone; the test compares with statsmodels bit for bit)."""
    from statsmodels.nonparametric import kernels

    data, bw = kde.data, kde.bw
    product: np.ndarray | None = None
    for k, vartype in enumerate(kde.var_type):
        column, at = data[:, k], points[:, k:k + 1]
        if vartype == "c":
            kernel = kernels.gaussian(bw[k], column, at)
        elif vartype == "o":
            kernel = _wang_ryzin(bw[k], column, at)
        else:  # "u": kernels.aitchison_aitken, whose number of levels is the data's
            same = column == at
            other = np.ones(column.size) * bw[k] / (np.asarray(np.unique(column).size) - 1)
            kernel = np.where(same, same * (1 - bw[k]), other)
        product = kernel if product is None else product * kernel
    assert product is not None
    scale = np.prod(bw[np.array([c == "c" for c in kde.var_type])])
    return (product / scale).sum(axis=1) / kde.nobs


def _wang_ryzin(h: float, column: np.ndarray, at: np.ndarray) -> np.ndarray:
    """statsmodels' ``kernels.wang_ryzin(h, column, at)`` for a column of the data and a column of
    points: each element is a function of its data value and point value alone (h raised to their
    distance, as a broadcast power like statsmodels'), so it is computed once for each pair of
    distinct values, of which an ordinal variable has a few, and gathered."""
    from statsmodels.nonparametric import kernels

    levels, of_data = np.unique(column, return_inverse=True)
    point_levels, of_points = np.unique(at, return_inverse=True)
    table = kernels.wang_ryzin(h, levels, point_levels[:, None])
    return table[of_points.ravel()].take(of_data.ravel(), axis=1)


def _jobs(recorder: Any, workers: int, end: float) -> tuple[list[Job], SimClock, float]:
    """Workers for the trials (each on the free one with the lowest index when it starts, as on
    metaopt's clock) and the jobs of the recorded rows."""
    clock = SimClock(workers)
    free = list(range(workers))
    running: list[tuple[float, int]] = []  # (end, worker)
    worker_of: dict[int, int] = {}
    for trial_id, start in sorted(recorder.starts.items(), key=lambda item: (item[1], item[0])):
        while running and running[0][0] <= start:
            heapq.heappush(free, heapq.heappop(running)[1])
        if not free:  # a trial syne-tune started at the instant another stopped (its 2 ms apart)
            heapq.heappush(free, heapq.heappop(running)[1])
        worker = worker_of[trial_id] = heapq.heappop(free)
        # busy until the result it was stopped at, or, still running, until the end
        finish = max(min(recorder.last[trial_id][0], end) if trial_id in recorder.stopped else end, start)
        heapq.heappush(running, (finish, worker))
        clock.jobs.append(Job(trial_id, worker, start, finish))
    jobs = [Job(trial_id, worker_of[trial_id], start, now) for trial_id, start, now in recorder.rows]
    return jobs, clock, end
