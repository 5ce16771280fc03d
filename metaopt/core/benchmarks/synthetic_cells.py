"""The model of the synthetic family ``cells``: a NAS-cell-like, categorical, conditional search space.

:class:`metaopt.core.benchmarks.synthetic.SyntheticBenchmark` evaluates it with the formula every
synthetic family shares (see that module's docstring), loss = y* + E(x) + h(r; a(x)) G (w(x) + 0.1 eps);
this module defines the parts that differ: the space, the full-fidelity excess E, the gap's size w and
rate a, and the cost. It imitates the structure of NAS-Bench-301 (``yahpo:nb301``), not its data.

Space (d = 22, all categorical). Two cell types c in {normal, reduce}; in each, nodes 0 and 1 are the
cell's inputs and nodes 2, 3, 4 are computed from two earlier nodes each. Node 2 reads nodes 0 and 1;
``c_inputs_3`` (3 choices: "0_1", "0_2", "1_2") and ``c_inputs_4`` (6 choices, pairs of 0..3) say which
two nodes nodes 3 and 4 read. Each edge i -> k has an operation ``c_op_i_k`` among the 7 of ``OPS``
(three parameter-free "light" ops: skip, max and average pooling; four "heavy" convolutions); the edges
into nodes 3 and 4 are conditional: active only when the input choice names node i. So 12 operations
and 4 input choices are active in every configuration.

Full-fidelity excess, per instance (drawn from the instance's generator in :meth:`CellsModel.draw`):

    E(x) = sum_p A_p[x_p]  +  sum_(p, q) C_pq[x_p, x_q]  +  kappa (n_heavy(x) - n_heavy(x*))^2

- ``A_p`` (active hyperparameters only): per operation, importance_p * (quality_c[op] + 0.3 Exp(1)),
  with a per-cell operation quality that favours the convolutions (light ops drawn from [0.4, 1.2],
  heavy ones from [0, 0.6]) and a log-normal importance per edge (a few edges matter much more than
  the others); per input choice, importance_p * U(0, 1). Each A_p is shifted so that its minimum is 0;
  the optimum x* takes every argmin.
- ``C_pq``: 8 random pairs of operations, each a 7 x 7 matrix of penalties (a quarter of the entries
  nonzero, exponential), zero at (x*_p, x*_q), counted when both edges are active.
- ``kappa (n_heavy - n_heavy(x*))^2``: a parameter-free size term over the number of active
  convolutions, kappa from [0.02, 0.06].

Every term is >= 0 and zero at x*, so the minimum is exactly y* at x* (the optimum's inactive edges
are left out of :meth:`~metaopt.core.benchmarks.synthetic.SyntheticBenchmark.optimum_config`).

Low fidelity (``epoch``, 1..98, as nb301): operations converge at different speeds. With s(x) the
mean ``SLOWNESS`` of the active operations (light ops ~0, convolutions 0.7..1), the gap's size is
w = exp(2 s) and its rate a = 1.5 - 1.2 s: convolutions learn slowly and end lower, light ops learn
fast and plateau higher, so the low-fidelity ranking favours the configurations the full-fidelity
ranking punishes. G is calibrated per instance (``synthetic_calibration``) to a Spearman correlation
between r_min and r_max losses drawn from [0.25, 0.45], below the other families' [0.55, 0.75].

Cost: runtime = r (1 + sum over active normal-cell ops of ``EPOCH_COST`` + 0.5 sum over the reduce
cell's) seconds: linear in epochs, larger with convolutions (about 15x from all-skip to all-sep_conv_5x5).

Everything is sums and products of drawn constants looked up by index, plus exp from the C library:
the same bits on every machine and in every batch.
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np
from ConfigSpace import Categorical, ConfigurationSpace, InCondition

from metaopt.core.benchmarks.base import Fidelity
from metaopt.core.errors import UsageError
from metaopt.core.libm import exp as _exp

OPS = ("skip_connect", "max_pool_3x3", "avg_pool_3x3", "sep_conv_3x3", "sep_conv_5x5", "dil_conv_3x3", "dil_conv_5x5")
N_LIGHT = 3
"""The first ``N_LIGHT`` operations are parameter-free ("light"); the others are convolutions ("heavy")."""
SLOWNESS = np.array([0.0, 0.1, 0.15, 0.7, 0.9, 0.8, 1.0])
"""Per operation: how slowly a network made of it converges (sets the gap's size and rate)."""
EPOCH_COST = np.array([0.0, 0.2, 0.2, 1.0, 1.6, 0.8, 1.2])
"""Per operation: seconds it adds to an epoch in the normal cell (half of that in the reduce cell)."""
CELLS = ("normal", "reduce")
NODES = (2, 3, 4)
"""The computed nodes of a cell; node k reads two of the nodes 0..k-1 (node 2: nodes 0 and 1)."""
N_PAIRS = 8
"""Number of pairwise interactions between operations per instance."""


@dataclass(frozen=True)
class _Choice:
    """One categorical hyperparameter; an edge's operation is active only when ``parent`` is one of ``when``."""

    name: str
    choices: tuple[str, ...]
    parent: str | None = None
    when: tuple[str, ...] = ()

    @property
    def is_op(self) -> bool:
        return self.choices == OPS


def _params() -> tuple[_Choice, ...]:
    """The hyperparameters, each input choice before the edges it switches on."""
    out = []
    for cell in CELLS:
        for k in NODES:
            if k == NODES[0]:
                out += [_Choice(f"{cell}_op_{i}_{k}", OPS) for i in range(k)]
                continue
            pairs = tuple(f"{i}_{j}" for i in range(k) for j in range(i + 1, k))
            inputs = _Choice(f"{cell}_inputs_{k}", pairs)
            out.append(inputs)
            out += [_Choice(f"{cell}_op_{i}_{k}", OPS, inputs.name, tuple(p for p in pairs if str(i) in p.split("_")))
                    for i in range(k)]
    return tuple(out)


@dataclass(frozen=True)
class CellsBatch:
    """A batch of decoded configurations: per hyperparameter, the index of each one's choice (-1: inactive)."""

    choice: dict[str, np.ndarray]


@dataclass(frozen=True)
class CellsTables:
    """The per-instance draws the excess E reads (see the module docstring)."""

    effects: dict[str, np.ndarray]
    pairs: tuple[tuple[str, str, np.ndarray], ...]
    size_weight: float
    n_heavy_opt: int


class CellsModel:
    """The ``cells`` family's parts of the shared synthetic model (see the module docstring).

    :class:`~metaopt.core.benchmarks.synthetic.SyntheticBenchmark` calls ``space`` once, ``draw`` once
    per instance, and ``decode``, ``excess``, ``curve``, ``noise_columns`` and ``cost`` once per
    evaluated batch; the calibration calls ``random_batch``.
    """

    fidelity = Fidelity("epoch", 1, 98, is_int=True)
    loss_name = "val_error"
    cost_name = "runtime"
    cheap_end: dict[str, str] = {}  # no numeric hyperparameter to start cheap on (nor has nb301)
    best = (4.0, 7.0)
    """Range of the per-instance best loss y* (a validation error in percent)."""

    def __init__(self) -> None:
        self.params = _params()
        self.names = tuple(p.name for p in self.params)
        self._lookup = {p.name: {None: -1, **{c: i for i, c in enumerate(p.choices)}} for p in self.params}
        """Per hyperparameter, value -> choice index, and -1 for an absent value (``cfg.get`` gives None)."""
        self._ops = [p for p in self.params if p.is_op]

    def space(self, name: str) -> ConfigurationSpace:
        """The search space, named ``name``: 22 categoricals, the edges into nodes 3 and 4 conditional."""
        space = ConfigurationSpace(name=name)
        hps = {p.name: Categorical(p.name, p.choices) for p in self.params}
        space.add(list(hps.values()))
        space.add([InCondition(hps[p.name], hps[p.parent], list(p.when)) for p in self.params if p.parent])
        return space

    def _active(self, p: _Choice, choice: Mapping[str, np.ndarray], n: int) -> np.ndarray:
        """Per row of ``n``, whether ``p`` is active, given the (already decoded) choice of its parent."""
        if p.parent is None:
            return np.ones(n, bool)
        return np.isin(choice[p.parent], [self._lookup[p.parent][v] for v in p.when])

    def decode(self, name: str, configs: Sequence[Mapping[str, Any]]) -> CellsBatch:
        """Validate the configurations (their keys are known) and turn them into choice indices;
        ``name`` (the benchmark's) starts the error messages."""
        choice: dict[str, np.ndarray] = {}
        for p in self.params:
            lookup = self._lookup[p.name]
            try:  # map over C-level methods: the Python loop this replaces took most of an evaluation's time
                idx = np.fromiter(map(lookup.__getitem__, map(operator.methodcaller("get", p.name), configs)),
                                  dtype=int, count=len(configs))
            except (KeyError, TypeError):  # a value that is not one of the choices (or unhashable): find it
                idx = np.array([_index(lookup, cfg.get(p.name)) for cfg in configs], dtype=int)
            active = self._active(p, choice, len(configs))
            allowed = f"one of {list(p.choices)}"
            if (idx == -2).any():
                bad = configs[int(np.argmax(idx == -2))][p.name]
                raise UsageError(f"{name}: {p.name}={bad!r} is not allowed; it must be {allowed}")
            if (active & (idx < 0)).any():
                raise UsageError(f"{name}: {p.name} is missing; it must be {allowed}")
            if (~active & (idx >= 0)).any():
                raise UsageError(f"{name}: {p.name} is inactive unless {p.parent} is one of {list(p.when)}; leave it out")
            choice[p.name] = idx
        return CellsBatch(choice)

    def random_batch(self, rng: np.random.Generator, n: int) -> CellsBatch:
        """``n`` configurations drawn uniformly (each hyperparameter's choice uniform, inactive ones left out)."""
        choice: dict[str, np.ndarray] = {}
        for p in self.params:
            choice[p.name] = np.where(self._active(p, choice, n), rng.integers(len(p.choices), size=n), -1)
        return CellsBatch(choice)

    def draw(self, rng: np.random.Generator) -> tuple[CellsTables, dict[str, Any]]:
        """The instance's effects, interactions and size term, and the optimum's configuration, drawn
        from ``rng`` (called once per instance, after y*)."""
        effects: dict[str, np.ndarray] = {}
        for cell in CELLS:
            quality = np.concatenate([rng.uniform(0.4, 1.2, size=N_LIGHT), rng.uniform(0.0, 0.6, size=len(OPS) - N_LIGHT)])
            for p in self.params:
                if not p.name.startswith(cell + "_"):
                    continue
                importance = 0.5 * math.exp(0.7 * float(rng.standard_normal()))  # math.exp: the C library's
                if p.is_op:
                    raw = importance * (quality + 0.3 * rng.standard_exponential(len(OPS)))
                else:
                    raw = importance * rng.uniform(size=len(p.choices))
                effects[p.name] = raw - raw.min()  # exactly 0 at the argmin
        best = {p.name: int(np.argmin(effects[p.name])) for p in self.params}
        optimum: dict[str, Any] = {}
        for p in self.params:
            if p.parent is None or p.parent in optimum and optimum[p.parent] in p.when:
                optimum[p.name] = p.choices[best[p.name]]
        all_pairs = [(a, b) for k, a in enumerate(self._ops) for b in self._ops[k + 1:]]
        pairs = []
        for k in rng.choice(len(all_pairs), size=N_PAIRS, replace=False):
            a, b = all_pairs[int(k)]
            penalty = np.where(rng.uniform(size=(len(OPS), len(OPS))) < 0.25,
                               0.4 * rng.standard_exponential((len(OPS), len(OPS))), 0.0)
            penalty[best[a.name], best[b.name]] = 0.0
            pairs.append((a.name, b.name, penalty))
        size_weight = float(rng.uniform(0.02, 0.06))
        n_heavy_opt = sum(OPS.index(optimum[p.name]) >= N_LIGHT for p in self._ops if p.name in optimum)
        return CellsTables(effects, tuple(pairs), size_weight, n_heavy_opt), optimum

    def _n_heavy(self, x: CellsBatch) -> np.ndarray:
        """Per row, the number of active convolutions."""
        return np.asarray(sum((x.choice[p.name] >= N_LIGHT).astype(int) for p in self._ops))

    def excess(self, tables: CellsTables, x: CellsBatch) -> np.ndarray:
        """E(x): the full-fidelity loss minus y* (module docstring), summed in a fixed order."""
        n = len(next(iter(x.choice.values())))
        out = np.zeros(n)
        for p in self.params:
            c = x.choice[p.name]
            out += np.where(c >= 0, tables.effects[p.name][np.maximum(c, 0)], 0.0)
        for a, b, penalty in tables.pairs:
            ca, cb = x.choice[a], x.choice[b]
            out += np.where((ca >= 0) & (cb >= 0), penalty[np.maximum(ca, 0), np.maximum(cb, 0)], 0.0)
        return out + tables.size_weight * (self._n_heavy(x) - tables.n_heavy_opt) ** 2

    def _sum_over_ops(self, x: CellsBatch, per_op: np.ndarray, cell: str) -> np.ndarray:
        """Per row, the sum of ``per_op`` over the active operations of ``cell``."""
        n = len(next(iter(x.choice.values())))
        out = np.zeros(n)
        for p in self._ops:
            if p.name.startswith(cell + "_"):
                c = x.choice[p.name]
                out += np.where(c >= 0, per_op[np.maximum(c, 0)], 0.0)
        return out

    def curve(self, x: CellsBatch) -> tuple[np.ndarray, np.ndarray]:
        """(w, a) = (exp(2 s), 0.6 - 0.5 s), s the mean slowness of the active operations."""
        n_active = 2 * len(NODES) * len(CELLS)  # every computed node has two active edges
        s = np.asarray(sum(self._sum_over_ops(x, SLOWNESS, cell) for cell in CELLS)) / n_active
        return _exp(2.0 * s), 0.6 - 0.5 * s

    def cost(self, x: CellsBatch, r: np.ndarray) -> np.ndarray:
        """runtime = r (1 + normal-cell epoch cost + 0.5 reduce-cell epoch cost) seconds."""
        return r * (1.0 + self._sum_over_ops(x, EPOCH_COST, "normal") + 0.5 * self._sum_over_ops(x, EPOCH_COST, "reduce"))

    def noise_columns(self, x: CellsBatch) -> list[np.ndarray]:
        """The values the noise eps hashes: every hyperparameter's choice index (-1 where inactive)."""
        return [c.astype(float) for c in x.choice.values()]


def _index(lookup: Mapping[Any, int], value: Any) -> int:
    """The index of ``value`` among a hyperparameter's choices; -2 when it is not one (or unhashable)."""
    try:
        return lookup.get(value, -2)
    except TypeError:
        return -2
