"""Live benchmarks: scikit-learn models trained for real on bundled datasets (``live:<model>``).

Every evaluation fits a model; nothing is looked up or simulated. This makes them slow (a fit
takes from a few milliseconds to a couple of seconds), so they are meant for showing
cost-aware optimizers on real training time, not for meta-optimization (use ``synthetic:`` or
``yahpo:`` benchmarks there).

**The cost is measured, hence not reproducible.** The cost of an evaluation is the wall-clock
time of ``fit`` in seconds (``time.perf_counter`` around it). It depends on the machine, its
load and chance. Two runs with the same seed never have the same ``cost`` / ``cost_used``
columns; they evaluate the same configurations with bitwise equal losses only when the budget is
in full evaluations and the optimizer ignores costs (cost-aware peers such as FLAML's CFO do
not). A run with a cost budget (``"60s"``) may stop after a different number of evaluations on
another machine or on a busy one. :meth:`LiveBenchmark.fingerprint` therefore names only the
machine-independent part (benchmark, version, scikit-learn version). Fits run with one thread
(``threadpoolctl.threadpool_limits(1)``, which covers OpenMP and BLAS) so that costs are
comparable and several runs can share a machine. Regret references (``metaopt.core.references``)
use only ``reference_samples`` = 64 random full-fidelity fits per instance and no refinement
(tens of seconds instead of hours), so y_min is weak and good runs can reach negative
normalized regret here.

Models (the searched hyperparameters; the fidelity is not among them):

- ``hgb`` (d = 7): ``HistGradientBoostingClassifier`` with learning_rate (log, [0.01, 1]),
  max_iter (log int, [8, 128]), max_leaf_nodes (log int, [4, 64]), min_samples_leaf (log int,
  [2, 64]), l2_regularization (log, [1e-6, 10]), early_stopping {off, on} and validation_fraction
  ([0.1, 0.3], only when early_stopping = on). Cheap end: few iterations, few leaves.
- ``mlp`` (d = 7): ``MLPClassifier`` with width (log int, [16, 256]) and depth (int, [1, 3]) of
  the hidden layers, alpha (log, [1e-6, 0.1]), learning_rate_init (log, [1e-4, 0.1]), activation
  {relu, tanh, logistic}, solver {adam, sgd} and momentum ([0, 0.99], only when solver = sgd);
  at most ``MLP_EPOCHS`` epochs (a ConvergenceWarning is expected and silenced). Cheap end:
  narrow, shallow nets.

Instances are six classification datasets, none downloaded: ``wine``, ``breast_cancer`` and
``digits`` (bundled with scikit-learn) and three seeded ``make_classification`` tasks
(``mc_binary``, ``mc_multiclass``, ``mc_noisy``; see ``_DATASETS``). The train/test split of
instances is ``split_instances(instances, n_train=3, seed=0)``: the three make_classification
tasks are training instances, the three real datasets test instances.

Per instance, with ``seed = zlib.crc32(instance)``:

- the data is split into 75 % training / 25 % validation rows (stratified, ``random_state=seed``)
  and standardized with the training rows' mean and deviation;
- the training rows are put in one fixed order (a ``seed``-permutation, interleaved by class so
  that every prefix holds each class in about its overall proportion);
- the fidelity ``train_fraction`` r in [0.1, 1] trains on the first ``ceil(r n)`` rows of that
  order, but on at least ``MIN_PER_CLASS`` times the number of classes (this floor only matters
  for ``wine`` below r = 0.23; it keeps every class present and the stratified early-stopping
  split of ``hgb`` possible). Subsets are nested: a larger fraction contains every row of a
  smaller one;
- the model's ``random_state`` is ``seed``.

The loss ``val_error`` is the validation error 1 − accuracy, in [0, 1]; for a given instance,
configuration and fidelity it is deterministic (on a given machine and software stack). A fit
that diverges (MLPClassifier raises on non-finite weights; not seen in practice on these
standardized data) scores as predicting the training subset's majority class. The
cost ``fit_time`` is the measured fit time in seconds. ``evaluate_raw`` also reports
``n_train``, the number of training rows used.
"""

from __future__ import annotations

import functools
import math
import numbers
import time
import warnings
import zlib
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence, cast

import numpy as np
import sklearn
from ConfigSpace import ConfigurationSpace, EqualsCondition
from sklearn import datasets
from sklearn.base import ClassifierMixin
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import train_test_split
from sklearn.neural_network import MLPClassifier
from threadpoolctl import threadpool_limits

from metaopt.core.benchmarks.base import Benchmark, Evaluation, Fidelity, ParamSpec, split_instances
from metaopt.core.errors import UsageError

VERSION = 1
"""Bumped whenever a change alters losses (part of the fingerprint)."""
N_TRAIN = 3
VALIDATION_SIZE = 0.25
MIN_PER_CLASS = 10
MLP_EPOCHS = 30
FIDELITY = Fidelity("train_fraction", 0.1, 1.0)

_DATASETS: dict[str, Callable[[], tuple[np.ndarray, np.ndarray]]] = {
    "wine": functools.partial(datasets.load_wine, return_X_y=True),
    "breast_cancer": functools.partial(datasets.load_breast_cancer, return_X_y=True),
    "digits": functools.partial(datasets.load_digits, return_X_y=True),
    "mc_binary": functools.partial(datasets.make_classification, n_samples=1500, n_features=20, n_informative=8,
                                   n_redundant=4, random_state=1),
    "mc_multiclass": functools.partial(datasets.make_classification, n_samples=2000, n_features=30,
                                       n_informative=12, n_classes=5, random_state=2),
    "mc_noisy": functools.partial(datasets.make_classification, n_samples=1200, n_features=12, n_informative=6,
                                  n_classes=3, weights=[0.6, 0.3, 0.1], flip_y=0.1, class_sep=0.8, random_state=3),
}
"""Instance name -> (X, y), smallest first (``wine`` is instance 0, the cheapest)."""


@dataclass(frozen=True)
class _Data:
    """One instance's data: training rows in their nested-subset order, validation rows, seed."""

    X_train: np.ndarray
    y_train: np.ndarray
    X_val: np.ndarray
    y_val: np.ndarray
    n_classes: int
    seed: int

    def subset_size(self, r: float) -> int:
        """Training rows used at fidelity ``r``: ceil(r n), at least MIN_PER_CLASS x the number of classes."""
        n = len(self.y_train)
        return min(n, max(math.ceil(round(r * n, 9)), MIN_PER_CLASS * self.n_classes))


def _nested_order(y: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A random permutation interleaved by class: every prefix holds each class in about its share."""
    perm = rng.permutation(len(y))
    key = np.empty(len(y))
    for c in np.unique(y):
        members = perm[y[perm] == c]
        key[members] = (np.arange(len(members)) + 0.5) / len(members)
    return perm[np.argsort(key[perm], kind="stable")]


@functools.cache
def _data(instance: str) -> _Data:
    X, y = _DATASETS[instance]()
    seed = zlib.crc32(instance.encode())
    X_train, X_val, y_train, y_val = train_test_split(
        np.asarray(X, dtype=float), np.asarray(y), test_size=VALIDATION_SIZE, stratify=y, random_state=seed)
    mean, std = X_train.mean(axis=0), X_train.std(axis=0)
    std[std == 0] = 1.0
    order = _nested_order(y_train, np.random.default_rng(seed))
    return _Data((X_train[order] - mean) / std, y_train[order], (X_val - mean) / std, y_val,
                 len(np.unique(y)), seed)


@dataclass(frozen=True)
class _Param(ParamSpec):
    active_if: tuple[str, str] | None = None
    """(categorical parent, value) under which this hyperparameter is active; None: always."""


@dataclass(frozen=True)
class _Model:
    """One live benchmark's model: its hyperparameters, how to build it, its cheap end."""

    params: tuple[_Param, ...]
    """Parents before their children."""
    build: Callable[[dict[str, Any], int], ClassifierMixin]
    """(validated configuration, seed) -> unfitted estimator."""
    cheap_end: dict[str, str]


def _hgb(cfg: dict[str, Any], seed: int) -> ClassifierMixin:
    on = cfg["early_stopping"] == "on"
    return HistGradientBoostingClassifier(
        learning_rate=cfg["learning_rate"], max_iter=cfg["max_iter"], max_leaf_nodes=cfg["max_leaf_nodes"],
        min_samples_leaf=cfg["min_samples_leaf"], l2_regularization=cfg["l2_regularization"],
        early_stopping=on, validation_fraction=cfg["validation_fraction"] if on else None, random_state=seed)


def _mlp(cfg: dict[str, Any], seed: int) -> ClassifierMixin:
    return MLPClassifier(
        hidden_layer_sizes=(cfg["width"],) * cfg["depth"], alpha=cfg["alpha"],
        learning_rate_init=cfg["learning_rate_init"], activation=cfg["activation"], solver=cfg["solver"],
        momentum=cfg.get("momentum", 0.9), max_iter=MLP_EPOCHS, random_state=seed)


MODELS: dict[str, _Model] = {
    "hgb": _Model(
        params=(
            _Param("learning_rate", 0.01, 1.0, log=True),
            _Param("max_iter", 8, 128, log=True, integer=True),
            _Param("max_leaf_nodes", 4, 64, log=True, integer=True),
            _Param("min_samples_leaf", 2, 64, log=True, integer=True),
            _Param("l2_regularization", 1e-6, 10.0, log=True),
            _Param("early_stopping", choices=("off", "on")),
            _Param("validation_fraction", 0.1, 0.3, active_if=("early_stopping", "on")),
        ),
        build=_hgb,
        cheap_end={"max_iter": "lower", "max_leaf_nodes": "lower"},
    ),
    "mlp": _Model(
        params=(
            _Param("width", 16, 256, log=True, integer=True),
            _Param("depth", 1, 3, integer=True),
            _Param("alpha", 1e-6, 0.1, log=True),
            _Param("learning_rate_init", 1e-4, 0.1, log=True),
            _Param("activation", choices=("relu", "tanh", "logistic")),
            _Param("solver", choices=("adam", "sgd")),
            _Param("momentum", 0.0, 0.99, active_if=("solver", "sgd")),
        ),
        build=_mlp,
        cheap_end={"width": "lower", "depth": "lower"},
    ),
}


def _fit(model: ClassifierMixin, X: np.ndarray, y: np.ndarray) -> bool:
    """Fit ``model``; True when it diverged (MLPClassifier raises on non-finite weights)."""
    try:
        model.fit(X, y)
    except ValueError as error:
        if "non-finite" not in str(error):
            raise
        return True
    return False


class LiveBenchmark(Benchmark):
    """One scikit-learn model trained for real on bundled datasets (see the module docstring)."""

    reference_samples = 64
    reference_refine_rounds = 0

    def __init__(self, model: str) -> None:
        if model not in MODELS:
            raise UsageError(f"unknown live benchmark {model!r}; known: {', '.join(MODELS)}")
        self._model = MODELS[model]
        self.name = f"live:{model}"
        self.instances = list(_DATASETS)
        self.train_instances, self.test_instances = split_instances(self.instances, n_train=N_TRAIN, seed=0)
        self.split_rule = (
            f"{N_TRAIN} of the {len(self.instances)} datasets are training instances, chosen by "
            f"split_instances(instances, n_train={N_TRAIN}, seed=0) (the make_classification tasks); "
            "the real datasets are test instances."
        )
        self.fidelity = FIDELITY
        self.loss_name = "val_error"
        self.cost_name = "fit_time"
        self.cheap_end = dict(self._model.cheap_end)
        self.search_space = ConfigurationSpace(name=self.name)
        hps = {p.name: p.hyperparameter() for p in self._model.params}
        self.search_space.add(list(hps.values()))
        for p in self._model.params:
            if p.active_if is not None:
                self.search_space.add(EqualsCondition(hps[p.name], hps[p.active_if[0]], p.active_if[1]))

    def fingerprint(self) -> str:
        """Benchmark, version and scikit-learn version: what fixes the losses (costs are machine-bound)."""
        return f"{self.name}-v{VERSION}-sklearn{sklearn.__version__}"

    def _check_config(self, cfg: Mapping[str, Any]) -> dict[str, Any]:
        """The configuration validated, integers as ``int``; a UsageError names the offending parameter."""
        if not isinstance(cfg, Mapping):
            raise UsageError(f"{self.name}: a configuration must be a mapping of hyperparameters, got {cfg!r}")
        known = [p.name for p in self._model.params]
        unknown = [k for k in cfg if k not in known]
        if unknown:
            raise UsageError(f"unknown hyperparameter {unknown[0]!r} for {self.name}; known: {', '.join(known)}")
        out: dict[str, Any] = {}
        for p in self._model.params:
            active = p.active_if is None or out.get(p.active_if[0]) == p.active_if[1]
            if p.name not in cfg:
                if active:
                    raise UsageError(f"{self.name}: {p.name} is missing; it must be {p.allowed()}")
                continue
            if not active:
                assert p.active_if is not None  # only a conditional parameter is ever inactive
                parent, value = p.active_if
                raise UsageError(f"{self.name}: {p.name} is inactive unless {parent}={value!r}; leave it out")
            v = cfg[p.name]
            if p.choices:
                if not isinstance(v, str) or v not in p.choices:
                    raise UsageError(f"{self.name}: {p.name}={v!r} is not allowed; it must be {p.allowed()}")
                out[p.name] = v
                continue
            ok = isinstance(v, numbers.Real) and not isinstance(v, bool) and p.lower <= cast(float, v) <= p.upper
            if not ok or (p.integer and v != round(v)):
                raise UsageError(f"{self.name}: {p.name}={v!r} is not allowed; it must be {p.allowed()}")
            out[p.name] = int(round(v)) if p.integer else float(v)
        return out

    def evaluate(self, instance: str, configs: Sequence[Mapping[str, Any]], fidelities: Sequence[float] | np.ndarray) -> Evaluation:
        """Fit each configuration on its training subset; validation error and measured fit time.

        Everything is validated before the first fit. Fits run one after the other, single-threaded.
        """
        instance = self.problem(instance).instance  # fails on unknown instances
        r = self._check_fidelities(fidelities, len(configs))
        checked = [self._check_config(cfg) for cfg in configs]
        data = _data(instance)
        loss, cost, n_train = np.empty(len(checked)), np.empty(len(checked)), np.empty(len(checked))
        with threadpool_limits(limits=1), warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            for i, (cfg, fraction) in enumerate(zip(checked, r)):
                n = data.subset_size(float(fraction))
                model = self._model.build(cfg, data.seed)
                X, y = data.X_train[:n], data.y_train[:n]
                start = time.perf_counter()
                diverged = _fit(model, X, y)
                cost[i] = time.perf_counter() - start
                predicted = np.full(len(data.y_val), np.bincount(y).argmax()) if diverged else model.predict(data.X_val)
                loss[i] = 1.0 - float(np.mean(predicted == data.y_val))
                n_train[i] = n
        return Evaluation(loss=loss, cost=cost,
                          targets={self.loss_name: loss, self.cost_name: cost, "n_train": n_train})
