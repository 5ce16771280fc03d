"""Embedded multi-fidelity test functions: ``synthetic:<family>``, no download needed.

Families (24 instances "0".."23" each; 6 train / 18 test by
``split_instances(instances, n_train=6, seed=0)``; u_p is the unit coordinate of p, see below):

- ``rosenbrock`` (d = 5): floats x0, x1 (log, [1e-3, 1e3]) and x2..x4 ([-5, 5]).
  F = log(1 + Rosenbrock), a curved ill-conditioned valley. Fidelity ``epoch``, integer 1..81.
  Loss ``loss``; runtime = 0.1 r 1000^((u_x0 + u_x1) / 2) s.
- ``mlp`` (d = 6): num_layers (int 1..5), units (log int 16..1024), learning_rate (log float),
  optimizer {adam, sgd}, momentum (only when optimizer = sgd), dropout. F = saturating bowl
  with cosine ripples (local minima). Fidelity ``epoch``, integer 1..81. Loss ``val_loss``;
  runtime = 1 + 0.05 r num_layers units / 16 s.
- ``boosting`` (d = 6): booster {gbtree, gblinear}, eta and lambda (log floats), nrounds (log
  int 10..2000), subsample, max_depth (int 1..15, only when booster = gbtree). F = saturating
  bowl with per-axis scales 0.5..5 (ill-conditioned). Fidelity ``trainsize``, float 0.05..1.
  Loss ``logloss``; runtime = 0.5 + 0.02 r nrounds subsample max_depth s (max_depth = 1 for gblinear).
- ``cells`` (d = 22, all categorical, imitating NAS-Bench-301's cell space): two cells of three
  computed nodes, 18 edge operations (7 choices: skip, two poolings, four convolutions), 14 of them
  conditional on 4 input-node choices (3 or 6 choices). Its excess E(x) is additive per-choice
  effects, sparse pairwise penalties and a size term over the number of convolutions; convolutions
  learn slowly and end lower, so low fidelities mislead more (target Spearman correlation [0.25, 0.45]).
  Fidelity ``epoch``, integer 1..98. Loss ``val_error``; runtime = r (1 + per-epoch cost of the
  operations) s. Its space, E, w, a and cost are in :mod:`metaopt.core.benchmarks.synthetic_cells`
  (:class:`~metaopt.core.benchmarks.synthetic_cells.CellsModel`); the rest of this docstring holds
  for it with E(x) in place of delta_b + F(z).

The first three families share one model. A configuration x is mapped to unit coordinates u in [0, 1]
(log scale for log hyperparameters; 0 for inactive ones). The categorical "branch"
hyperparameter (optimizer, booster) selects which numeric hyperparameters are active and which
sub-function applies. The loss at fidelity r in [r_min, r_max] is

    loss(x, r) = y* + delta_b + F(z) + h(r; a(x)) * G * (w(x) + 0.1 * eps(x, r))
    z          = S_b * Q_b @ (u_b - u*_b)                 (u_b: the active numeric coordinates)
    h(r; a)    = ((r / r_max)^-a - 1) / ((r_min / r_max)^-a - 1)

- ``F`` is the family's base function (``_rosenbrock``, ``_rippled_bowl``, ``_bowl``):
  non-negative and zero only at z = 0.
- Per instance, ``numpy.random.default_rng([crc32(family), instance])`` draws the optimum's
  location ``u*_b`` (interior, on the integer grid for integers), the rotation ``Q_b`` (the Q
  factor of a Gaussian matrix, by Gram-Schmidt in plain Python floats so that it is bitwise the
  same on every machine), the per-axis rescaling ``S_b``, the branch penalty ``delta_b`` (zero for
  the optimum's branch) and the best loss ``y*``: an instance is a pure function of (family, index).
  (``_Family.draw`` and ``CellsModel.draw`` make these draws after y*; ``_MODELS`` maps every family
  to its model, and :class:`SyntheticBenchmark` evaluates every family by the formula above.)
- The low-fidelity gap ``h * G * (w + 0.1 eps)`` is zero at r_max and decays with r like a
  learning curve, with a configuration-dependent size ``w(x) > 0`` and rate ``a(x) > 0`` (see
  each family's ``_*_curve``); ``eps(x, r)`` in [0, 1) is deterministic noise hashed from the
  configuration's values, r and the instance. ``G`` is a per-instance constant shipped in
  ``synthetic_gaps.py``, calibrated (by ``python -m metaopt.core.benchmarks.synthetic_calibration``,
  which rewrites that file) so that the Spearman correlation between r_min and r_max losses is
  a target drawn from [0.55, 0.75] ([0.25, 0.45] for ``cells``), capped where the gap already agrees with the full-fidelity
  ranking (then the correlation is higher). It is shipped rather than calibrated at run time
  because a calibration on another CPU may differ from it by rounding errors (about 1e-13
  relative, see ``GAP_RTOL`` there); the shipped constants make every instance exact.

Evaluation takes exp, log, expm1, log1p and pow from the C library (:mod:`metaopt.core.libm`): numpy's
own AVX-512 kernels for them differ from the C library's in the last bit, and the noise hashes
values, so one bit was another loss. With them, and cos (the same in numpy's
kernels as in the C library), losses are the same bits on every machine, bitwise deterministic
and batch independent (tests/test_synthetic.py runs whole studies' optimizers under every vector
kernel level of the CPU). The optimum's values are rounded to 8 significant digits.

Hence the full-fidelity minimum is exactly ``y*`` (:meth:`SyntheticBenchmark.best_known`),
reached at :meth:`SyntheticBenchmark.optimum_config`. The cost is a simulated runtime in seconds,
roughly linear in r, that grows with model size (each family's ``_*_cost``).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import sys
import zlib
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Protocol, Sequence, TypeVar

import numpy as np
from ConfigSpace import ConfigurationSpace, EqualsCondition

from metaopt.core.benchmarks import synthetic_cells, synthetic_gaps
from metaopt.core.benchmarks.base import Benchmark, Evaluation, Fidelity, ParamSpec, code_digest, split_instances
from metaopt.core.benchmarks.synthetic_cells import CellsModel
from metaopt.core.benchmarks.synthetic_gaps import GAPS
from metaopt.core.errors import UsageError
from metaopt.core.libm import exp as _exp, expm1 as _expm1, log as _log, log1p as _log1p, power as _pow

N_INSTANCES = 24
N_TRAIN = 6




@dataclass(frozen=True)
class _Param(ParamSpec):
    """One hyperparameter. Non-empty ``choices`` makes it the family's categorical branch."""

    active_if: str | None = None
    """The branch value under which this hyperparameter is active; None: always active."""

    def to_unit(self, v: np.ndarray) -> np.ndarray:
        if self.log:
            return _log(v / self.lower) / _log(self.upper / self.lower)
        return (v - self.lower) / (self.upper - self.lower)

    def from_unit(self, u: np.ndarray) -> np.ndarray:
        v = self.lower * _pow(self.upper / self.lower, u) if self.log else self.lower + u * (self.upper - self.lower)
        return np.round(v) if self.integer else v


@dataclass(frozen=True)
class _Batch:
    """A batch of decoded configurations, one array per hyperparameter.

    ``value``: the raw values (NaN where inactive); ``unit``: unit coordinates (0 where inactive);
    ``branch``: the index of the branch choice (all 0 for families without a branch).
    """

    value: dict[str, np.ndarray]
    unit: dict[str, np.ndarray]
    branch: np.ndarray


@dataclass(frozen=True)
class _Family:
    """Everything that defines one family (see the module docstring for the shared model)."""

    params: tuple[_Param, ...]
    fidelity: Fidelity
    loss_name: str
    cost_name: str
    cheap_end: dict[str, str]
    base: Callable[[np.ndarray], np.ndarray]
    """F(z) for z of shape (n, k): non-negative, zero only at z = 0."""
    scales: tuple[float, float]
    """Range of the per-axis rescaling factors S."""
    best: tuple[float, float]
    """Range of the per-instance best loss y*."""
    penalty: tuple[float, float]
    """Range of delta_b for the branches that do not hold the optimum."""
    curve: Callable[[_Batch], tuple[np.ndarray, np.ndarray]]
    """x -> (w(x), a(x)): size and decay rate of the low-fidelity gap."""
    cost: Callable[[_Batch, np.ndarray], np.ndarray]
    """(x, r) -> simulated runtime in seconds."""

    @property
    def branch(self) -> _Param | None:
        return next((p for p in self.params if p.choices), None)

    @property
    def branches(self) -> tuple[str | None, ...]:
        return self.branch.choices if self.branch else (None,)

    def active(self, p: _Param, branch: np.ndarray) -> np.ndarray:
        """For each row of branch indices, whether ``p`` is active."""
        if p.active_if is None:
            return np.ones(len(branch), bool)
        assert self.branch is not None  # a family with conditional parameters has a branch
        return np.asarray(branch == self.branch.choices.index(p.active_if))

    def numeric(self, branch: str | None) -> list[_Param]:
        """The numeric hyperparameters active under ``branch``."""
        return [p for p in self.params if not p.choices and p.active_if in (None, branch)]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.params)

    def space(self, name: str) -> ConfigurationSpace:
        """The search space, named ``name``: the hyperparameters, each conditional one under its branch."""
        space = ConfigurationSpace(name=name)
        hps = {p.name: p.hyperparameter() for p in self.params}
        space.add(list(hps.values()))
        for p in self.params:
            if p.active_if is not None:
                assert self.branch is not None
                space.add(EqualsCondition(hps[p.name], hps[self.branch.name], p.active_if))
        return space

    def draw(self, rng: np.random.Generator) -> tuple[dict[str | None, _Branch], dict[str, Any]]:
        """The per-branch transformations and the optimum's configuration, drawn from ``rng``
        (called once per instance, after y*)."""
        best_branch = self.branches[int(rng.integers(len(self.branches)))]
        branches: dict[str | None, _Branch] = {}
        optimum: dict[str, Any] = {}
        for b in self.branches:
            params = self.numeric(b)
            # optimum in the interior: u in [0.1, 0.9], then snapped to the integer grid or rounded to
            # 8 significant digits (np.power's last bit depends on the CPU; the rounded decimal does not)
            values = [p.from_unit(rng.uniform(0.1, 0.9, size=1)) for p in params]
            values = [v if p.integer else np.array([float(f"{v[0]:.8g}")]) for p, v in zip(params, values)]
            u_opt = np.array([p.to_unit(v)[0] for p, v in zip(params, values)])
            rotation = _rotation(rng.standard_normal((len(params), len(params))))
            scale = rng.uniform(*self.scales, size=len(params))
            penalty = 0.0 if b == best_branch else float(rng.uniform(*self.penalty))
            branches[b] = _Branch(u_opt, rotation, scale, penalty)
            if b == best_branch:
                optimum = {self.branch.name: b} if self.branch else {}
                optimum |= {p.name: int(v[0]) if p.integer else float(v[0]) for p, v in zip(params, values)}
        return branches, optimum

    def random_batch(self, rng: np.random.Generator, n: int) -> _Batch:
        """``n`` configurations drawn uniformly in unit coordinates (log-uniform for log parameters)."""
        branch = rng.integers(len(self.branches), size=n)
        value = {}
        for p in self.params:
            if not p.choices:
                value[p.name] = np.where(self.active(p, branch), p.from_unit(rng.uniform(size=n)), np.nan)
        return self._batch(branch, value)

    def _batch(self, branch: np.ndarray, value: dict[str, np.ndarray]) -> _Batch:
        """A batch from branch indices and raw numeric values (NaN where inactive)."""
        unit = {}
        for p in self.params:
            if not p.choices:
                present = ~np.isnan(value[p.name])
                unit[p.name] = np.where(present, p.to_unit(np.where(present, value[p.name], p.lower)), 0.0)
        return _Batch(value, unit, branch)

    def excess(self, branches: dict[str | None, _Branch], x: _Batch) -> np.ndarray:
        """delta_b + F(z): the full-fidelity loss minus y*."""
        out = np.zeros(len(x.branch))
        for i, b in enumerate(self.branches):
            rows = x.branch == i
            if not rows.any():
                continue
            br = branches[b]
            diff = np.stack([x.unit[p.name][rows] for p in self.numeric(b)], axis=1) - br.u_opt
            z = np.zeros_like(diff)
            for j in range(diff.shape[1]):  # elementwise (no BLAS): a row's result never depends on the batch
                z += diff[:, j, None] * br.rotation[:, j]
            out[rows] = br.penalty + self.base(z * br.scale)
        return out

    def noise_columns(self, x: _Batch) -> list[np.ndarray]:
        """The values the noise eps hashes: the branch index and the raw values (-1 where inactive)."""
        return [x.branch.astype(float), *(np.nan_to_num(v, nan=-1.0) for v in x.value.values())]

    def decode(self, name: str, configs: Sequence[Mapping[str, Any]]) -> _Batch:
        """Validate the configurations (their keys are known) and turn them into one array per
        hyperparameter; ``name`` (the benchmark's) starts the error messages."""
        branch_param = self.branch
        if branch_param is None:
            branch = np.zeros(len(configs), dtype=int)
        else:
            lookup: dict[Any, int] = {c: i for i, c in enumerate(branch_param.choices)}
            try:
                branch = np.array([lookup.get(cfg.get(branch_param.name), -1) for cfg in configs], dtype=int)
            except TypeError:  # an unhashable value
                branch = np.full(len(configs), -1)
            if (branch < 0).any():
                cfg = configs[int(np.argmax(branch < 0))]
                got = f"={cfg[branch_param.name]!r} is not allowed" if branch_param.name in cfg else " is missing"
                raise UsageError(f"{name}: {branch_param.name}{got}; it must be {branch_param.allowed()}")
        value = {}
        for p in self.params:
            if p.choices:
                continue
            if any(isinstance(cfg.get(p.name), (bool, np.bool_)) for cfg in configs):
                raise UsageError(f"{name}: {p.name} must be {p.allowed()}, got true/false")
            try:
                v = np.array([cfg.get(p.name, np.nan) for cfg in configs], dtype=float)
            except (TypeError, ValueError):
                raise UsageError(f"{name}: {p.name} must be {p.allowed()}, got a non-number") from None
            present = ~np.isnan(v)
            active = self.active(p, branch)
            if (active & ~present).any():
                raise UsageError(f"{name}: {p.name} is missing (or NaN); it must be {p.allowed()}")
            if (present & ~active).any():
                assert branch_param is not None  # only a conditional parameter is ever inactive
                raise UsageError(f"{name}: {p.name} is inactive unless {branch_param.name}={p.active_if!r}; leave it out")
            ok = ~present | ((v >= p.lower) & (v <= p.upper))
            if p.integer:
                ok &= ~present | (v == np.round(v))
            if not ok.all():
                bad = v[int(np.argmin(ok))]
                raise UsageError(f"{name}: {p.name}={bad:g} is not allowed; it must be {p.allowed()}")
            value[p.name] = v
        return self._batch(branch, value)


def _rosenbrock(z: np.ndarray) -> np.ndarray:
    """log(1 + Rosenbrock(1 + z)): a curved, ill-conditioned valley, minimum 0 at z = 0."""
    w = 1.0 + z
    terms = 100.0 * (w[:, 1:] - w[:, :-1] ** 2) ** 2 + (1.0 - w[:, :-1]) ** 2
    return _log1p(terms.sum(axis=1))


def _rippled_bowl(z: np.ndarray) -> np.ndarray:
    """0.6 (1 - exp(-mean z^2)) + 0.03 mean(1 - cos(2 pi z)): saturating bowl with local minima."""
    return 0.6 * -_expm1(-np.mean(z**2, axis=1)) + 0.03 * np.mean(1.0 - np.cos(2 * np.pi * z), axis=1)


def _bowl(z: np.ndarray) -> np.ndarray:
    """0.6 (1 - exp(-mean z^2)): a saturating bowl (ill-conditioned through the wide scale range)."""
    return 0.6 * -_expm1(-np.mean(z**2, axis=1))


def _rosenbrock_curve(x: _Batch) -> tuple[np.ndarray, np.ndarray]:
    """w = exp(2 (u_x0 - u_x1)), a = 0.5 + u_x2."""
    return _exp(2.0 * (x.unit["x0"] - x.unit["x1"])), 0.5 + x.unit["x2"]


def _rosenbrock_cost(x: _Batch, r: np.ndarray) -> np.ndarray:
    """runtime = 0.1 r 1000^((u_x0 + u_x1) / 2) seconds: from 0.1 r to 100 r."""
    return 0.1 * r * _pow(1000.0, (x.unit["x0"] + x.unit["x1"]) / 2)


def _mlp_curve(x: _Batch) -> tuple[np.ndarray, np.ndarray]:
    """Big, strongly regularized nets with small learning rates learn slowly.

    w = exp(u_layers + u_units + u_dropout - 2 u_lr), a = 0.3 + 1.2 u_lr.
    """
    u = x.unit
    w = _exp(u["num_layers"] + u["units"] + u["dropout"] - 2.0 * u["learning_rate"])
    return w, 0.3 + 1.2 * u["learning_rate"]


def _mlp_cost(x: _Batch, r: np.ndarray) -> np.ndarray:
    """runtime = 1 + 0.05 r layers units / 16 seconds (startup plus per-epoch time)."""
    return 1.0 + 0.05 * r * x.value["num_layers"] * x.value["units"] / 16.0


def _boosting_curve(x: _Batch) -> tuple[np.ndarray, np.ndarray]:
    """Complex, weakly regularized models gain most from more data.

    w = exp(u_nrounds + u_max_depth - u_lambda), a = 0.4 + 0.4 u_eta.
    """
    u = x.unit
    return _exp(u["nrounds"] + u["max_depth"] - u["lambda"]), 0.4 + 0.4 * u["eta"]


def _boosting_cost(x: _Batch, r: np.ndarray) -> np.ndarray:
    """runtime = 0.5 + 0.02 trainsize nrounds subsample depth seconds (depth = max_depth, or 1 for gblinear)."""
    depth = np.where(np.isnan(x.value["max_depth"]), 1.0, x.value["max_depth"])
    return 0.5 + 0.02 * r * x.value["nrounds"] * x.value["subsample"] * depth


_FAMILIES: dict[str, _Family] = {
    "rosenbrock": _Family(
        params=(
            _Param("x0", 1e-3, 1e3, log=True),
            _Param("x1", 1e-3, 1e3, log=True),
            _Param("x2", -5.0, 5.0),
            _Param("x3", -5.0, 5.0),
            _Param("x4", -5.0, 5.0),
        ),
        fidelity=Fidelity("epoch", 1, 81, is_int=True),
        loss_name="loss",
        cost_name="runtime",
        cheap_end={"x0": "lower", "x1": "lower"},
        base=_rosenbrock,
        scales=(1.5, 3.0),
        best=(0.0, 0.0),
        penalty=(0.0, 0.0),
        curve=_rosenbrock_curve,
        cost=_rosenbrock_cost,
    ),
    "mlp": _Family(
        params=(
            _Param("num_layers", 1, 5, integer=True),
            _Param("units", 16, 1024, log=True, integer=True),
            _Param("learning_rate", 1e-5, 1e-1, log=True),
            _Param("optimizer", choices=("adam", "sgd")),
            _Param("momentum", 0.0, 0.99, active_if="sgd"),
            _Param("dropout", 0.0, 0.8),
        ),
        fidelity=Fidelity("epoch", 1, 81, is_int=True),
        loss_name="val_loss",
        cost_name="runtime",
        cheap_end={"num_layers": "lower", "units": "lower"},
        base=_rippled_bowl,
        scales=(1.0, 3.0),
        best=(0.05, 0.3),
        penalty=(0.02, 0.1),
        curve=_mlp_curve,
        cost=_mlp_cost,
    ),
    "boosting": _Family(
        params=(
            _Param("booster", choices=("gbtree", "gblinear")),
            _Param("eta", 1e-3, 1.0, log=True),
            _Param("nrounds", 10, 2000, log=True, integer=True),
            _Param("lambda", 1e-3, 1e3, log=True),
            _Param("subsample", 0.1, 1.0),
            _Param("max_depth", 1, 15, integer=True, active_if="gbtree"),
        ),
        fidelity=Fidelity("trainsize", 0.05, 1.0),
        loss_name="logloss",
        cost_name="runtime",
        cheap_end={"nrounds": "lower", "subsample": "lower", "max_depth": "lower"},
        base=_bowl,
        scales=(0.5, 5.0),
        best=(0.1, 0.5),
        penalty=(0.02, 0.1),
        curve=_boosting_curve,
        cost=_boosting_cost,
    ),
}

Batch = TypeVar("Batch")
Tables = TypeVar("Tables")


class SyntheticModel(Protocol[Batch, Tables]):
    """What :class:`SyntheticBenchmark` and the calibration read of a family's model: :class:`_Family`
    (mlp, boosting, rosenbrock) and :class:`~metaopt.core.benchmarks.synthetic_cells.CellsModel`, each
    with its own batch of decoded configurations and its own per-instance tables."""

    @property
    def fidelity(self) -> Fidelity: ...
    @property
    def loss_name(self) -> str: ...
    @property
    def cost_name(self) -> str: ...
    @property
    def cheap_end(self) -> dict[str, str]: ...
    @property
    def best(self) -> tuple[float, float]: ...
    @property
    def names(self) -> tuple[str, ...]: ...
    @property
    def curve(self) -> Callable[[Batch], tuple[np.ndarray, np.ndarray]]: ...
    @property
    def cost(self) -> Callable[[Batch, np.ndarray], np.ndarray]: ...
    def space(self, name: str) -> ConfigurationSpace: ...
    def draw(self, rng: np.random.Generator) -> tuple[Tables, dict[str, Any]]: ...
    def random_batch(self, rng: np.random.Generator, n: int) -> Batch: ...
    def decode(self, name: str, configs: Sequence[Mapping[str, Any]]) -> Batch: ...
    def excess(self, tables: Tables, x: Batch) -> np.ndarray: ...
    def noise_columns(self, x: Batch) -> list[np.ndarray]: ...


# The batch and tables types are Any here: each model has its own, which a union cannot pair with its
# methods; SyntheticModel checks the methods themselves.
_MODELS: dict[str, SyntheticModel[Any, Any]] = {**_FAMILIES, "cells": CellsModel()}
"""Every family's model: the shared one above, or ``cells``'s own (:mod:`metaopt.core.benchmarks.synthetic_cells`)."""
FAMILIES: tuple[str, ...] = tuple(_MODELS)


@dataclass(frozen=True)
class _Branch:
    """The per-instance transformation of one branch: z = scale * (rotation @ (u - u_opt))."""

    u_opt: np.ndarray
    rotation: np.ndarray
    scale: np.ndarray
    penalty: float


@dataclass(frozen=True)
class _Instance:
    best: float
    gap: float
    seed: int
    tables: Any
    """The model's per-instance draws that ``excess`` reads (the branches' transformations, or the cells' effects)."""
    optimum: dict[str, Any]


def _noise(columns: list[np.ndarray], r: np.ndarray, seed: int) -> np.ndarray:
    """eps(x, r) in [0, 1): splitmix64 hash of the configuration's values (``noise_columns``), r and the instance seed."""
    h = np.full(len(r), seed, dtype=np.uint64)
    for col in [*columns, r]:
        h ^= np.ascontiguousarray(col, dtype=np.float64).view(np.uint64)
        h += np.uint64(0x9E3779B97F4A7C15)
        h = (h ^ (h >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        h = (h ^ (h >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        h ^= h >> np.uint64(31)
    return (h >> np.uint64(11)).astype(np.float64) / 2.0**53


def _rotation(a: np.ndarray) -> np.ndarray:
    """The orthogonal factor Q of a = QR with diag(R) > 0: Gram-Schmidt on the columns of ``a``.

    Called once per branch when an instance is drawn. Hand-written instead of ``np.linalg.qr``:
    LAPACK's Q differs in the last bits with the BLAS kernels picked for the CPU (e.g. OpenBLAS
    with OPENBLAS_CORETYPE=Sandybridge vs Haswell), and the rotation is an instance constant.
    Python float products, ``math.fsum`` (exactly rounded sums) and ``math.sqrt`` are IEEE
    operations with one correct result, so Q is bitwise the same on every machine.
    """
    q: list[list[float]] = []
    for j in range(a.shape[1]):
        v = [float(x) for x in a[:, j]]
        for u in q:  # modified Gram-Schmidt: project out the previous columns one at a time
            d = math.fsum(x * y for x, y in zip(u, v))
            v = [x - d * y for x, y in zip(v, u)]
        norm = math.sqrt(math.fsum(x * x for x in v))
        q.append([x / norm for x in v])
    return np.array(q).T


def _draw(family: str, index: int) -> tuple[_Instance, np.random.Generator]:
    """All random draws of instance ``index`` of ``family`` except its gap constant G.

    Called by :func:`_instance` and by the calibration of G
    (:mod:`metaopt.core.benchmarks.synthetic_calibration`). Returns the instance with ``gap`` NaN and
    the instance's generator, positioned where the calibration continues to draw from it.
    """
    model = _MODELS[family]
    rng = np.random.default_rng([zlib.crc32(family.encode()), index])
    best = float(rng.uniform(*model.best))
    tables, optimum = model.draw(rng)
    seed = int(rng.integers(2**63))
    return _Instance(best, float("nan"), seed, tables, optimum), rng


@functools.cache
def _instance(family: str, index: int) -> _Instance:
    """Instance ``index`` of ``family``: its random draws plus its shipped gap constant G."""
    inst, _ = _draw(family, index)
    return dataclasses.replace(inst, gap=GAPS[family][index])


@functools.cache
def _model_digest() -> str:
    """The digests of the three source files the families' losses come from (this module, the cells
    model, the calibrated gaps), for :meth:`SyntheticBenchmark.fingerprint`: read once per process, as
    the YAHPO benchmark reads its data files once (every run's reference lookup asks for it)."""
    modules = (sys.modules[__name__], synthetic_cells, synthetic_gaps)
    return "+".join(code_digest(m) for m in modules)


class SyntheticBenchmark(Benchmark):
    """One family of embedded multi-fidelity test functions (see the module docstring)."""

    def __init__(self, family: str) -> None:
        if family not in _MODELS:
            raise UsageError(f"unknown synthetic family {family!r}; known families: {', '.join(FAMILIES)}")
        self.family = family
        self._model = model = _MODELS[family]
        self.name = f"synthetic:{family}"
        self.instances = [str(i) for i in range(N_INSTANCES)]
        self.train_instances, self.test_instances = split_instances(self.instances, n_train=N_TRAIN, seed=0)
        self.split_rule = (
            f"{N_TRAIN} of the {N_INSTANCES} instances are training instances, chosen by "
            f"split_instances(instances, n_train={N_TRAIN}, seed=0); the other {N_INSTANCES - N_TRAIN} are test."
        )
        self.fidelity = model.fidelity
        self.loss_name = model.loss_name
        self.cost_name = model.cost_name
        self.cheap_end = dict(model.cheap_end)
        self.search_space = model.space(self.name)

    def _index(self, instance: str | int) -> int:
        key = str(instance)
        if key not in self.instances:
            raise UsageError(
                f"unknown instance {key!r} for benchmark {self.name}; known instances: 0..{N_INSTANCES - 1}"
            )
        return int(key)

    def fingerprint(self) -> str:
        """The base fingerprint (the name; a subclass outside metaopt adds its own code) plus the digests
        of the three source files the losses come from (this module, the cells model, the calibrated
        gaps): editing a family's model gives new cached regret references
        (:mod:`metaopt.core.references`) instead of the stale ones a name alone would key."""
        return f"{super().fingerprint()}+model:{_model_digest()}"

    def best_known(self, instance: str | int) -> float:
        """The exact minimum of the full-fidelity loss (y* of the instance)."""
        return _instance(self.family, self._index(instance)).best

    def optimum_config(self, instance: str | int) -> dict[str, Any]:
        """A configuration whose full-fidelity loss equals :meth:`best_known`."""
        return dict(_instance(self.family, self._index(instance)).optimum)

    def evaluate(self, instance: str, configs: Sequence[Mapping[str, Any]], fidelities: Sequence[float] | np.ndarray) -> Evaluation:
        """Loss and simulated runtime of ``configs`` at ``fidelities`` (vectorized over the batch)."""
        inst = _instance(self.family, self._index(instance))
        model = self._model
        r = self._check_fidelities(fidelities, len(configs))
        known = set(model.names)
        for cfg in configs:
            unknown = [k for k in cfg.keys() if k not in known]
            if unknown:
                raise UsageError(
                    f"unknown hyperparameter {unknown[0]!r} for {self.name}; known: {', '.join(sorted(model.names))}"
                )
        x = model.decode(self.name, configs)

        w, a = model.curve(x)
        fid = self.fidelity
        h = _expm1(-a * _log(r / fid.r_max)) / _expm1(-a * _log(fid.r_min / fid.r_max))
        noise = _noise(model.noise_columns(x), r, inst.seed)
        loss = inst.best + model.excess(inst.tables, x) + h * inst.gap * (w + 0.1 * noise)
        cost = model.cost(x, r)
        return Evaluation(loss=loss, cost=cost, targets={self.loss_name: loss, self.cost_name: cost})
