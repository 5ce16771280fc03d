"""Configurations of a problem's search space as numeric vectors, and back.

Inside a run, configurations are rows of a float matrix in ConfigSpace's vector representation
(numeric values mapped to [0, 1] on their own scale, categoricals as choice indices, NaN where a
conditional hyperparameter is inactive). The benchmark gets plain dicts. ConfigSpace does both
conversions; this class owns a private copy of the space so that seeding it never touches state
shared with other runs.
"""

from __future__ import annotations

import copy
import functools
import math
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
from ConfigSpace import Configuration, ConfigurationSpace
from ConfigSpace.configuration import ROUND_PLACES
from ConfigSpace.conditions import Condition, Conjunction, InCondition
from ConfigSpace.hyperparameters import (
    CategoricalHyperparameter,
    FloatHyperparameter,
    IntegerHyperparameter,
    OrdinalHyperparameter,
)
from ConfigSpace.hyperparameters.distributions import (DiscretizedContinuousScipyDistribution,
                                                       UniformIntegerDistribution, UniformIntegerNormalizedDistribution,
                                                        UnitUniformContinuousDistribution)
from ConfigSpace.hyperparameters.hp_components import UnitScaler
from scipy.stats import uniform

from metaopt.core.libm import exp as libm_exp


def to_value(hp: Any, vector: np.ndarray) -> np.ndarray:
    """``hp.to_value(vector)``, with a log scale's ``exp`` and ``log`` taken from the C library.

    ConfigSpace maps a log-scaled float or integer through ``np.exp``, whose last bit depends on the
    CPU (:mod:`metaopt.core.libm`). A value one bit apart is another configuration to anything that hashes
    values (the synthetic benchmarks' noise) or compares them, so the same run came out differently
    on an AVX-512 machine. The values below are ConfigSpace's on a CPU without AVX-512 (``scale``,
    then ``exp``, then clipping or rounding, as ``UnitScaler.to_value``), on every machine.
    """
    scaler = getattr(hp, "_transformer", None)
    if not isinstance(scaler, UnitScaler) or not scaler.log:
        return hp.to_value(vector)
    lower, upper = float(scaler.lower_value), float(scaler.upper_value)
    scaled = vector * (math.log(upper) - math.log(lower)) + math.log(lower)  # ConfigSpace.functional.scale
    unchecked = libm_exp(scaled)
    if np.issubdtype(scaler.dtype, np.integer):
        return unchecked.round().astype(scaler.dtype)
    return np.clip(unchecked, lower, upper, dtype=scaler.dtype)


def _native(value: Any) -> Any:
    """numpy scalars (np.str_, np.int64, ...) to plain Python values, for JSON and CSV."""
    return value.item() if isinstance(value, np.generic) else value


@dataclass(frozen=True)
class ColumnLayout:
    """What each column of a configuration vector holds.

    ``numeric``: float and integer hyperparameters (vector in [0, 1]); ``integer``: the integer
    ones among them; ``categorical``: categorical and ordinal ones (vector = choice index, with
    ``n_choices`` choices; 0 for other columns). Other kinds (constants) are in none of these.
    """

    numeric: np.ndarray
    integer: np.ndarray
    categorical: np.ndarray
    n_choices: np.ndarray


class SpaceCodec:
    """Vector <-> dict conversion and seeded uniform sampling for one search space."""

    def __init__(self, space: ConfigurationSpace) -> None:
        self.space = copy.deepcopy(space)
        self.names: list[str] = list(self.space.keys())
        self._state = np.random.RandomState(0)
        """The RandomState the samples are drawn from, re-seeded from the run's generator per sample."""
        self._repair_state = np.random.RandomState(0)
        """The RandomState :meth:`repair` draws fresh values from, re-seeded from the run's generator per call."""

    @property
    def dim(self) -> int:
        return len(self.names)

    def sample_uniform(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` configurations drawn uniformly (respecting conditions and forbiddens), as vectors.

        Exactly the vectors of ConfigSpace's ``sample_configuration(size=n)`` after seeding the
        space from ``rng`` (same draws, same order), several times faster: see :meth:`_sample`.
        """
        if n <= 0:
            return np.empty((0, self.dim))
        # ConfigSpace samples from its own RandomState, seeded here from the run's generator so every
        # draw still derives from the run seed. Its ``space.seed`` builds a new RandomState per call
        # (about 60 µs, a tenth of a random-search batch); re-seeding one in place gives the same state.
        self._state.seed(int(rng.integers(2**31 - 1)))
        return self._sample(n, self._state)

    @functools.cached_property
    def _quantizers(self) -> list[Callable[[np.ndarray], np.ndarray] | None]:
        """Per hyperparameter, the quantization of a quantized uniform (integers), applied to its
        ``state.uniform(0, 1, n)`` draws; None for the others."""
        quantizers: list[Callable[[np.ndarray], np.ndarray] | None] = []
        for name in self.names:
            dist = self.space[name]._vector_dist
            rv: Any = getattr(dist, "rv", None)
            if (isinstance(dist, DiscretizedContinuousScipyDistribution) and isinstance(rv.dist, type(uniform))
                    and rv.dist._parse_args(*rv.args, **rv.kwds) == ((), 0, 1)):
                def quantize(u: np.ndarray, dist: Any = dist) -> np.ndarray:
                    return dist._quantize(x=u)

                quantizers.append(quantize)
            else:
                quantizers.append(None)
        return quantizers

    @functools.cached_property
    def _vector_samplers(self) -> list[Callable[[int, np.random.RandomState], np.ndarray]]:
        """Per hyperparameter, ``sample_vector`` of its ConfigSpace distribution; for quantized
        uniforms (integer hyperparameters) the same computation without scipy.stats' per-call
        overhead: ``uniform.rvs`` with loc 0 and scale 1 is ``random_state.uniform(0, 1, n)``."""
        samplers: list[Callable[[int, np.random.RandomState], np.ndarray]] = []
        for name, quantize in zip(self.names, self._quantizers):
            if quantize is not None:
                def sample_quantized(n: int, state: np.random.RandomState,
                                     quantize: Callable[[np.ndarray], np.ndarray] = quantize) -> np.ndarray:
                    return quantize(state.uniform(0.0, 1.0, n))

                samplers.append(sample_quantized)
            else:
                def sample(n: int, state: np.random.RandomState, dist: Any = self.space[name]._vector_dist) -> np.ndarray:
                    return dist.sample_vector(n, seed=state)

                samplers.append(sample)
        return samplers

    def _sample(self, n: int, state: np.random.RandomState) -> np.ndarray:
        """ConfigSpace 1.2's ``sample_configuration`` loop as a matrix, without a Configuration per row.

        Same rounds of the same sizes (ConfigSpace draws ``max(int(MULT² · missing), 5)`` per round,
        MULT = (forbidden clauses + conditional hyperparameters) / hyperparameters), the same draws
        per hyperparameter and round, the same conditions and forbiddens: the same vectors
        (tests/test_exact_speedups.py checks this against ConfigSpace). Samples of ``STREAM_MIN_ROWS``
        rows or more from a space without forbidden clauses whose draws are all uniforms or bounded
        integers (:attr:`_stream_groups`) are decoded from one block of the stream instead.
        """
        space, dag = self.space, self.space._dag
        mult = (len(space.forbidden_clauses) + len(space.conditional_hyperparameters)) / self.dim
        if mult == 0:
            return self._sample_unconstrained(n, state)
        if not space.forbidden_clauses and self._stream_groups is not None and n >= STREAM_MIN_ROWS:
            return self._sample_conditional_from_stream(n, mult, state)
        accepted: list[np.ndarray] = []
        missing = n
        while missing > 0:
            size = _round_rows(mult, missing)
            matrix = np.empty((self.dim, size))  # hyperparameters as rows, as ConfigSpace does
            for i, sample in enumerate(self._vector_samplers):
                matrix[i] = sample(size, state)
            forbidden = np.zeros(size, dtype=bool)
            for clause in dag.unconditional_forbiddens:
                forbidden |= clause.is_forbidden_vector_array(matrix)
            valid = matrix[:, ~forbidden]
            self._deactivate(valid)
            forbidden = np.zeros(valid.shape[1], dtype=bool)
            for clause in dag.conditional_forbiddens:
                forbidden |= clause.is_forbidden_vector_array(valid)
            accepted.append(valid[:, ~forbidden].T)
            missing -= accepted[-1].shape[0]
        return np.concatenate(accepted)[:n]

    def _deactivate(self, columns: np.ndarray) -> None:
        """Sets the hyperparameters inactive in each configuration of ``columns`` (hyperparameters as
        rows, a configuration per column, as ConfigSpace holds them) to NaN, in place: condition after
        condition in ConfigSpace's order, so a child of an inactive parent is inactive too."""
        for cnode in self.space._dag.minimum_conditions:
            satisfied = cnode.condition.satisfied_by_vector_array(columns)
            columns[np.ix_(cnode.children_indices, ~satisfied)] = np.nan

    def _sample_conditional_from_stream(self, n: int, mult: float, state: np.random.RandomState) -> np.ndarray:
        """:meth:`_sample` for a space with conditions but no forbidden clauses, from one block of the stream.

        Without forbidden clauses no row is rejected, so the rounds' sizes follow from ``n`` alone
        (:func:`_round_rows` until none is missing) and every round can be decoded from
        one block (:meth:`_sample_from_stream`). A condition is a test of each row on its own, so
        applying them, in ConfigSpace's order, to all rounds at once marks the same rows inactive.
        """
        sizes, missing = [], n
        while missing > 0:
            sizes.append(_round_rows(mult, missing))
            missing -= sizes[-1]
        matrix = self._sample_from_stream(n, state, sizes)
        self._deactivate(matrix.T)  # a view: the NaNs land in matrix
        return matrix

    def _sample_unconstrained(self, n: int, state: np.random.RandomState) -> np.ndarray:
        """:meth:`_sample` for a space without conditions and forbidden clauses.

        ConfigSpace then draws rounds of 5 rows (``max(int(0 · missing), 5)``) and rejects none. The
        draws are taken in the same order (round by round, hyperparameter by hyperparameter), with one
        call for each run of hyperparameters that draw uniforms (:attr:`_draw_groups`); the
        quantization of integers, an elementwise function, is applied once to all rounds instead of
        once per round (it cost more than the draws). Where every draw is a uniform or a bounded
        integer, samples of ``STREAM_MIN_ROWS`` rows or more are read from one block of the
        generator's stream (:meth:`_sample_from_stream`) instead of two or three calls per round of
        five rows.
        """
        if self._stream_groups is not None and n >= STREAM_MIN_ROWS:
            return self._sample_from_stream(n, state)
        return self._sample_round_by_round(n, state)

    def _sample_round_by_round(self, n: int, state: np.random.RandomState) -> np.ndarray:
        """:meth:`_sample_unconstrained` with ConfigSpace's calls, two or three per round of five rows."""
        rounds = -(-n // 5)
        columns: list[list[np.ndarray]] = [[] for _ in self.names]
        for _ in range(rounds):
            for first, count, sample in self._draw_groups:
                if sample is None:  # `count` hyperparameters in a row that each draw state.uniform(0, 1, 5)
                    for i, draws in enumerate(state.uniform(0.0, 1.0, 5 * count).reshape(count, 5), first):
                        columns[i].append(draws)
                else:
                    columns[first].append(sample(5, state))
        matrix = np.empty((rounds * 5, self.dim))
        for i, quantize in enumerate(self._quantizers):
            values = np.concatenate(columns[i])
            matrix[:, i] = quantize(values) if quantize is not None else values
        return matrix[:n]

    @functools.cached_property
    def _stream_groups(self) -> list[tuple[int, int, int]] | None:
        """:attr:`_draw_groups` as (first column, count, size): size 0 for a run of uniforms, else the
        number of values a single hyperparameter draws with ``randint(0, size)`` (ConfigSpace's integer
        distributions of categoricals, ordinals and small integers); None if some hyperparameter draws
        otherwise (then :meth:`_sample_from_stream` does not apply)."""
        groups = []
        for first, count, sample in self._draw_groups:
            if sample is None:
                groups.append((first, count, 0))
                continue
            dist: Any = self.space[self.names[first]]._vector_dist
            if type(dist) not in (UniformIntegerDistribution, UniformIntegerNormalizedDistribution) \
                    or not 2 <= dist.size < 2**32:
                return None
            groups.append((first, 1, int(dist.size)))
        return groups

    def _sample_from_stream(self, n: int, state: np.random.RandomState,
                            sizes: list[int] | None = None) -> np.ndarray:
        """The first ``n`` rows of rounds of ``sizes`` draws per hyperparameter (default: rounds of 5,
        :meth:`_sample_unconstrained`'s), decoded from one block of raw 32-bit words of ``state``'s
        stream; ``state`` ends where the round-by-round draws would leave it.

        numpy freezes the legacy ``RandomState`` stream (NEP 19), and each draw here is a documented
        function of it: ``uniform(0, 1)`` is ``random_sample``, a double from two words a, b as
        ``((a >> 5) · 2²⁶ + (b >> 6)) / 2⁵³``; ``randint(0, size)`` takes words until ``word & mask ≤
        size − 1``, mask the smallest ``2^k − 1 ≥ size − 1`` (masked rejection). Reading the block is
        sequential only in where each round starts (the integer draws take a variable number of
        words); the values themselves are decoded for all rounds at once.
        tests/test_exact_speedups.py checks the vectors against ConfigSpace's and the state after.
        """
        groups = self._stream_groups
        assert groups is not None  # the callers check that the space decodes from the stream
        round_sizes = np.array(sizes if sizes is not None else [5] * -(-n // 5), dtype=np.int64)
        start_state = state.get_state()
        length = self._block_length(int(round_sizes.sum()))
        while True:
            words = state.randint(0, 2**32, size=length, dtype=np.uint32)  # the raw stream, word by word
            decoded = _decode_rounds(words, groups, round_sizes)
            if decoded is not None:
                break
            state.set_state(start_state)  # a block too short for the rejections: read a longer one
            length *= 2
        columns, used = decoded
        state.set_state(start_state)
        state.randint(0, 2**32, size=used, dtype=np.uint32)  # advance the state past what was read
        for first, _, size in groups:
            if size and isinstance(self.space[self.names[first]]._vector_dist, UniformIntegerNormalizedDistribution):
                columns[first] = np.true_divide(columns[first], size - 1, dtype=float)  # as its sample_vector
        matrix = np.empty((int(round_sizes.sum()), self.dim))
        for i, quantize in enumerate(self._quantizers):
            matrix[:, i] = quantize(columns[i]) if quantize is not None else columns[i]
        return matrix[:n]

    def _block_length(self, rows: int) -> int:
        """Words to read for ``rows`` rows: 10% above the expected count (a bounded integer takes
        (mask + 1) / size words on average), so that a second read is rare."""
        assert self._stream_groups is not None  # called by _sample_from_stream only
        per_row: float = sum(2 * count if size == 0 else (_mask(size - 1) + 1) / size
                             for _, count, size in self._stream_groups)
        return int(rows * per_row * 1.1) + 256

    @functools.cached_property
    def _draw_groups(self) -> list[tuple[int, int, Callable[[int, np.random.RandomState], np.ndarray] | None]]:
        """The hyperparameters in order as (first column, count, sampler): a run of hyperparameters whose
        draw is ``state.uniform(0, 1, n)`` (quantized uniforms and ConfigSpace's unit-uniform floats)
        is one group without a sampler, since one call of 5 · count draws takes the same numbers from
        the stream; any other hyperparameter (categoricals and small integers draw ``randint``) is a
        group of its own with its ``sample_vector``."""
        groups: list[tuple[int, int, Callable[[int, np.random.RandomState], np.ndarray] | None]] = []
        for i, (name, quantize, sample) in enumerate(zip(self.names, self._quantizers, self._vector_samplers)):
            unit_uniform = quantize is not None or isinstance(self.space[name]._vector_dist,
                                                              UnitUniformContinuousDistribution)
            if not unit_uniform:
                groups.append((i, 1, sample))
            elif groups and groups[-1][2] is None:  # the previous group ends at column i - 1
                groups[-1] = (groups[-1][0], groups[-1][1] + 1, None)
            else:
                groups.append((i, 1, None))
        return groups

    def to_dicts(self, vectors: np.ndarray) -> list[dict[str, Any]]:
        """Vectors to configuration dicts (active hyperparameters only, plain Python values).

        Column-wise with each hyperparameter's vectorized ``to_value``: the same values as
        ``dict(Configuration(space, vector=row))``, an order of magnitude faster for batches
        (this conversion sits on the evaluation hot path).
        """
        X = np.atleast_2d(np.asarray(vectors, dtype=float))
        if len(X) == 1:  # one row (a sequential optimizer's batch): the same calls, without the column bookkeeping
            row = X[0]
            return [{name: _native(to_value(self.space[name], row[j:j + 1])[0])
                     for j, name in enumerate(self.names) if not math.isnan(row[j])}]
        columns: list[tuple[str, np.ndarray, list[Any]]] = []
        for j, name in enumerate(self.names):
            active = ~np.isnan(X[:, j])
            values = [_native(v) for v in to_value(self.space[name], X[active, j])] if active.any() else []
            full: list[Any] = [None] * len(X)
            for i, v in zip(np.flatnonzero(active), values):
                full[i] = v
            columns.append((name, active, full))
        return [{name: full[i] for name, active, full in columns if active[i]} for i in range(len(X))]

    def to_vector(self, config: dict[str, Any]) -> np.ndarray:
        """A configuration dict (validated against the space) to its vector."""
        return Configuration(self.space, values=config).get_array()

    def to_vector_dropping_inactive(self, config: dict[str, Any]) -> np.ndarray:
        """A dict with a legal value for every hyperparameter, active or not (a peer that samples
        conditional spaces flat), to the vector of its active ones: called by the syne-tune peers for
        each configuration syne-tune proposes. The same vector as
        ``to_vector(dict(ConfigSpace.util.deactivate_inactive_hyperparameters(config, space)))``,
        which builds a validated Configuration per hyperparameter it drops (1-2 ms a call on
        rbv2_xgboost): each value checked and converted as a Configuration does, then the inactive
        ones set to NaN by :meth:`_deactivate`. ValueError names a missing or illegal value."""
        vector = np.empty(self.dim)
        for j, name in enumerate(self.names):
            hp = self.space[name]
            if name not in config or not hp.legal_value(config[name]):
                raise ValueError(f"hyperparameter {name}: {config.get(name)!r} is not a legal value")
            value = config[name]
            if isinstance(hp, FloatHyperparameter):  # as Configuration does: a float to ROUND_PLACES digits
                value = float(np.round(value, ROUND_PLACES))
            vector[j] = hp.to_vector(value)
        self._deactivate(vector[:, None])
        return vector

    # -- making perturbed vectors valid -------------------------------------------------------
    @functools.cached_property
    def layout(self) -> ColumnLayout:
        """Column kinds of this space's vectors (see :class:`ColumnLayout`)."""
        hps = [self.space[name] for name in self.names]
        categorical = np.array([isinstance(hp, (CategoricalHyperparameter, OrdinalHyperparameter)) for hp in hps], bool)
        return ColumnLayout(
            numeric=np.array([isinstance(hp, (FloatHyperparameter, IntegerHyperparameter)) for hp in hps], bool),
            integer=np.array([isinstance(hp, IntegerHyperparameter) for hp in hps], bool),
            categorical=categorical,
            n_choices=np.array([len(hp.choices) if isinstance(hp, CategoricalHyperparameter)
                                else len(hp.sequence) if isinstance(hp, OrdinalHyperparameter) else 0
                                for hp in hps], int),
        )

    @functools.cached_property
    def _conditions_in_order(self) -> list[tuple[int, list[Condition | Conjunction]]]:
        """(column, its conditions) of every conditional hyperparameter, parents before children."""
        by_child: dict[str, list[Condition | Conjunction]] = {}
        for cond in self.space.conditions:
            by_child.setdefault(cond.child.name, []).append(cond)

        depth: dict[str, int] = {}

        def depth_of(name: str) -> int:
            if name not in depth:
                parents = [p.name for c in by_child.get(name, [])
                           for p in (c.parents if isinstance(c, Conjunction) else [c.parent])]
                depth[name] = 1 + max((depth_of(p) for p in parents), default=-1)
            return depth[name]

        order = sorted(by_child, key=lambda name: (depth_of(name), self.names.index(name)))
        return [(self.names.index(name), by_child[name]) for name in order]

    @functools.cached_property
    def _repair_plan(self) -> _RepairPlan:
        """What :meth:`repair` does to each column, looked up once instead of on every call."""
        hps = [self.space[name] for name in self.names]
        categorical = self.layout.categorical
        conditional = {j for j, _ in self._conditions_in_order}
        return _RepairPlan(
            lower=np.array([float(hp.lower_vectorized) for hp in hps]),
            upper=np.array([float(hp.upper_vectorized) for hp in hps]),
            categorical=np.flatnonzero(categorical),
            round_trip=[(j, _snapper(hp)) for j, hp in enumerate(hps)
                        if not categorical[j] and not isinstance(hp, FloatHyperparameter)],
            unconditional=np.array([j for j in range(self.dim) if j not in conditional], dtype=np.intp),
            conditions=[(j, [_condition_test(cond) for cond in conds]) for j, conds in self._conditions_in_order],
        )

    def from_unit_cube(self, U: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Points of the unit cube, one column per hyperparameter, as valid configuration vectors.

        Called by the initial design (:mod:`metaopt.components.proposals`) with quasi-random points.
        Column j spreads over hyperparameter j's values: a number's vector range linearly (an
        integer then snapped to the nearest legal value, as SMAC's initial designs do), a
        categorical's or ordinal's m choices in equal parts (u in [i/m, (i+1)/m) is choice i); a
        constant keeps its value. :meth:`repair` then deactivates what the conditions switch off
        and replaces rows that violate a forbidden clause by uniform samples from ``rng`` (its only
        draws). Returns an array of shape ``U.shape``.
        """
        U = np.asarray(U, dtype=float).reshape(-1, self.dim)
        plan = self._repair_plan
        X = plan.lower + U * (plan.upper - plan.lower)
        cat = plan.categorical
        choices = self.layout.n_choices[cat]
        X[:, cat] = np.minimum(np.floor(U[:, cat] * choices), choices - 1)
        return self.repair(X, rng)

    def repair(self, X: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Make arbitrary (e.g. perturbed) vectors valid configurations; returns a repaired copy.

        Numeric entries are clipped to their vector range; integers snapped to the vector of the
        nearest legal integer (ConfigSpace's ``to_value`` rounds); categoricals rounded to a valid
        choice index. Then, parents before children, a hyperparameter whose condition fails becomes
        NaN and one that is active but NaN gets a fresh value from its own distribution (uniform
        unless the space declares a prior). Rows that violate a forbidden clause are replaced by
        fresh uniform samples. Conditions are evaluated exactly as ConfigSpace does (its
        ``satisfied_by_vector_array``), so repaired rows pass ``check_valid_configuration``; note
        that ConfigSpace counts a ``!=`` condition on an inactive parent as satisfied.
        """
        X = np.array(X, dtype=float, copy=True).reshape(-1, self.dim)
        n = len(X)
        if n == 0:
            return X
        plan = self._repair_plan
        # Clipping and rounding are elementwise (NaN stays NaN), so all columns go at once; the
        # integers' value round trip gets each column's set entries, the very arrays it got column
        # by column before.
        np.clip(X, plan.lower, plan.upper, out=X)
        X[:, plan.categorical] = np.rint(X[:, plan.categorical])
        for j, snap in plan.round_trip:
            col = X[:, j]
            set_ = ~np.isnan(col)
            if not set_.any():
                continue
            col[set_] = snap(col[set_])

        # ConfigSpace draws from a legacy RandomState, seeded from the run's generator when first
        # needed: re-seeding one in place gives the state a new RandomState(seed) has.
        seeded = False

        def fill(j: int, rows: np.ndarray) -> None:
            nonlocal seeded
            count = int(rows.sum())
            if count:
                if not seeded:
                    self._repair_state.seed(int(rng.integers(2**31 - 1)))
                    seeded = True
                X[rows, j] = self._vector_samplers[j](count, self._repair_state)

        # unconditional hyperparameters are always active: fill the NaNs, column by column in order
        unconditional = plan.unconditional
        for j in unconditional[np.isnan(X[:, unconditional]).any(axis=0)]:
            fill(int(j), np.isnan(X[:, j]))
        for j, tests in plan.conditions:
            active = np.ones(n, bool)
            for test in tests:
                active &= test(X)
            X[~active, j] = np.nan
            fill(j, active & np.isnan(X[:, j]))

        forbidden = np.zeros(n, bool)
        for clause in self.space.forbidden_clauses:
            forbidden |= clause.is_forbidden_vector_array(X.T)
        if forbidden.any():
            X[forbidden] = self.sample_uniform(int(forbidden.sum()), rng)
        return X


@dataclass(frozen=True)
class _RepairPlan:
    """:meth:`SpaceCodec.repair`'s view of the columns: the vector bounds ``lower``/``upper`` of every
    column, the ``categorical`` columns (rounded to a choice index), the ``round_trip`` columns
    (integers and constants: snapped through their value), the ``unconditional`` columns and, for
    each conditional one in order (parents first), the tests of its conditions."""

    lower: np.ndarray
    upper: np.ndarray
    categorical: np.ndarray
    round_trip: list[tuple[int, Callable[[np.ndarray], np.ndarray]]]
    unconditional: np.ndarray
    conditions: list[tuple[int, list[Callable[[np.ndarray], np.ndarray]]]]


def _snapper(hp: Any) -> Callable[[np.ndarray], np.ndarray]:
    """How :meth:`SpaceCodec.repair` snaps the set vector entries ``v`` of an integer (or constant)
    hyperparameter: ``v`` where ``hp.legal_vector(v)``, else ``hp.to_vector(hp.to_value(v))``.

    For an integer on a :class:`UnitScaler` (ConfigSpace 1.2's integers), ``legal_vector`` and
    ``to_value`` both start from the same unchecked values (``_unsafe_to_value``: a scaling, and an
    ``exp`` on a log scale), so they are computed once and ConfigSpace's steps after them are called
    directly, without the hyperparameter's per-call dispatch: the same operations on the same
    arrays, half the calls. tests/test_exact_speedups.py compares with the calls through ``hp``.
    """
    scaler = getattr(hp, "_transformer", None)
    if isinstance(scaler, UnitScaler) and np.issubdtype(scaler.dtype, np.integer):
        def snap_integer(v: np.ndarray) -> np.ndarray:
            unchecked = scaler._unsafe_to_value(v)
            snapped = np.asarray(scaler.to_vector(unchecked.round().astype(scaler.dtype)), dtype=float)
            # The round trip is not bit-exact on log scales: leave already-legal vectors alone.
            return np.where(scaler.legal_value(unchecked), v, snapped)

        return snap_integer

    def snap(v: np.ndarray) -> np.ndarray:
        snapped = np.asarray(hp.to_vector(hp.to_value(v)), dtype=float)
        return np.where(hp.legal_vector(v), v, snapped)

    return snap


def _condition_test(cond: Condition | Conjunction) -> Callable[[np.ndarray], np.ndarray]:
    """Whether each row of a matrix of vectors (n, d) satisfies ``cond``: ConfigSpace's
    ``cond.satisfied_by_vector_array(X.T)``. An ``InCondition`` is tested as "parent equals one of the
    values", which is how ``np.isin`` (ConfigSpace's test) compares a few values, the same booleans
    (NaN equals nothing in both) without its per-call set-up, which cost more than a repair's other
    steps on spaces with conditions (rbv2_xgboost)."""
    if isinstance(cond, InCondition):
        column, values = cond.parent_vector_id, [float(v) for v in cond.vector_values]

        def among(X: np.ndarray) -> np.ndarray:
            parent = X[:, column]
            satisfied = parent == values[0]
            for value in values[1:]:
                satisfied |= parent == value
            return satisfied

        return among
    return lambda X: cond.satisfied_by_vector_array(X.T)  # ConfigSpace wants (dim, n)


STREAM_MIN_ROWS = 50
"""From this many rows on, :meth:`SpaceCodec._sample_from_stream` is faster than the calls round by
round (reading and rewinding the generator's state costs about 0.1 ms); both give the same rows."""


def _round_rows(mult: float, missing: int) -> int:
    """The rows ConfigSpace 1.2's ``sample_configuration`` draws in a round while ``missing`` rows are
    still missing: ``max(int(MULT² · missing), 5)``, MULT as in :meth:`SpaceCodec._sample`."""
    return max(int(mult**2 * missing), 5)


def _mask(bound: int) -> int:
    """The smallest 2^k − 1 ≥ ``bound``: numpy's mask for bounded integers in [0, bound]."""
    return (1 << int(bound).bit_length()) - 1


def _decode_rounds(words: np.ndarray, groups: list[tuple[int, int, int]],
                   sizes: np.ndarray) -> tuple[dict[int, np.ndarray], int] | None:
    """The values rounds of ``sizes[r]`` draws per group take from the stream ``words``, per column (the
    rounds one after the other), and the number of words they use; None if ``words`` ends before the
    last round does.

    In a round of s rows a run of ``count`` uniforms takes 2 · s · count words (s doubles per column,
    column by column); a ``randint(0, size)`` group takes words until s of them pass its mask test.
    """
    accepted: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for _, _, size in groups:
        if size and size not in accepted:
            ok = (words & np.uint32(_mask(size - 1))) <= size - 1
            accepted[size] = (np.flatnonzero(ok), np.concatenate([[0], np.cumsum(ok)]))
    rounds = len(sizes)
    starts = {first: np.empty(rounds, dtype=np.int64) for first, _, _ in groups}
    position, length = 0, len(words)
    for r, rows in enumerate(sizes.tolist()):  # where each round's draws start: sequential, a few integer operations
        for first, count, size in groups:
            if size == 0:
                starts[first][r] = position
                position += 2 * rows * count
            else:
                at, before = accepted[size]
                if position > length or before[position] + rows > len(at):
                    return None
                starts[first][r] = before[position]  # index of the group's first accepted word
                position = int(at[before[position] + rows - 1]) + 1
    if position > length:
        return None
    # Row k of the sample is draw `within[k]` of round `round_of[k]`.
    round_of = np.repeat(np.arange(rounds), sizes)
    within = np.arange(len(round_of)) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    columns: dict[int, np.ndarray] = {}
    for first, count, size in groups:
        if size == 0:
            for i in range(count):
                a = (starts[first] + 2 * sizes * i)[round_of] + 2 * within  # the first word of each double
                columns[first + i] = ((words[a] >> 5).astype(float) * 67108864.0 + (words[a + 1] >> 6)) \
                    / 9007199254740992.0
        else:
            at, _ = accepted[size]
            ints = words[at[starts[first][round_of] + within]] & np.uint32(_mask(size - 1))
            columns[first] = ints.astype(np.int64)
    return columns, position
