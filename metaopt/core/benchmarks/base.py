"""The benchmark interface: scenarios with instances, a search space, a fidelity, a loss and a cost.

A :class:`Benchmark` is one scenario (e.g. ``yahpo:lcbench``); a :class:`Problem` is one instance of
it. Evaluation is batched: a list of configurations and their fidelities go in, arrays of loss and
cost come out. Everything an optimizer needs to know about a problem is on these two classes.
"""

from __future__ import annotations

import hashlib
import inspect
import marshal
import math
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Mapping, Sequence

import numpy as np
from ConfigSpace import Categorical, ConfigurationSpace, Float, Integer
from ConfigSpace.hyperparameters import Hyperparameter

from metaopt.core.errors import UsageError


def code_digest(obj: Any) -> str:
    """The SHA-256 (first 16 hex digits) of the source file that defines ``obj`` (a class, a function or
    a module), for :meth:`Benchmark.fingerprint`: an edit of that file gives another digest. A function without a
    source file (defined in an interactive session) is digested by its compiled code instead."""
    try:
        data = Path(inspect.getsourcefile(obj) or "").read_bytes()
    except (TypeError, OSError):
        code = getattr(obj, "__code__", None)
        data = marshal.dumps(code) if code is not None else repr(getattr(obj, "__qualname__", obj)).encode()
    return hashlib.sha256(data).hexdigest()[:16]


@dataclass(frozen=True)
class Fidelity:
    """The multi-fidelity parameter: its name and range. ``is_int`` rounds stage fidelities."""

    name: str
    r_min: float
    r_max: float
    is_int: bool = False

    def __post_init__(self) -> None:
        if not (0 < self.r_min <= self.r_max):
            raise ValueError(f"fidelity {self.name}: need 0 < r_min <= r_max, got {self.r_min}, {self.r_max}")

    def snap(self, r: float) -> float:
        """The fidelity actually evaluated for a requested ``r``: clipped to the range, integer-rounded."""
        r = min(max(r, self.r_min), self.r_max)
        if self.is_int:
            r = float(min(max(round(r), math.ceil(self.r_min)), math.floor(self.r_max)))
        return float(r)


@dataclass(frozen=True)
class ParamSpec:
    """One hyperparameter of a built-in benchmark (synthetic, live); non-empty ``choices`` makes it categorical."""

    name: str
    lower: float = 0.0
    upper: float = 1.0
    log: bool = False
    integer: bool = False
    choices: tuple[str, ...] = ()

    def hyperparameter(self) -> Hyperparameter:
        """The ConfigSpace hyperparameter."""
        if self.choices:
            return Categorical(self.name, self.choices)
        if self.integer:
            return Integer(self.name, (int(self.lower), int(self.upper)), log=self.log)
        return Float(self.name, (self.lower, self.upper), log=self.log)

    def allowed(self) -> str:
        """What a value must be, for error messages."""
        if self.choices:
            return f"one of {list(self.choices)}"
        kind = "an integer" if self.integer else "a number"
        return f"{kind} in [{self.lower:g}, {self.upper:g}]"


@dataclass(frozen=True)
class Evaluation:
    """Result of a batched evaluation: one loss and one cost per configuration.

    ``targets`` keeps every raw target of the benchmark (one array per target name) for users who
    want more than the loss (e.g. the ``benchmark eval`` command).
    """

    loss: np.ndarray
    cost: np.ndarray
    targets: Mapping[str, np.ndarray] = field(default_factory=dict)


Split = Literal["train", "test", "all"]


class Benchmark(ABC):
    """A scenario: instances, search space (fidelity excluded), fidelity, loss and cost.

    Subclasses set the attributes in ``__init__`` and implement :meth:`evaluate`; a new kind of
    benchmark is made loadable by name with :func:`metaopt.core.benchmarks.register_benchmark`.
    """

    name: str
    """Full name, e.g. ``yahpo:lcbench`` or ``synthetic:branin``."""
    instances: list[str]
    train_instances: list[str]
    test_instances: list[str]
    split_rule: str
    """One sentence saying how the train/test split was made (it is deterministic)."""
    search_space: ConfigurationSpace
    fidelity: Fidelity
    loss_name: str
    cost_name: str
    cheap_end: dict[str, str]
    """Per hyperparameter, the cheap end for low-cost starts ("lower"/"upper"); may be empty."""
    reference_samples: int = 10_000
    """Random full-fidelity evaluations behind an instance's regret reference (metaopt.core.references)."""
    reference_refine_rounds: int = 40
    """Generations of the local refinement that sharpens the reference's y_min (0: none)."""

    @property
    def d(self) -> int:
        """Number of searched hyperparameters (fidelity excluded)."""
        return len(self.search_space)

    @property
    def hyperparameter_names(self) -> list[str]:
        return list(self.search_space.keys())

    def instances_of(self, split: Split) -> list[str]:
        return {"train": self.train_instances, "test": self.test_instances, "all": self.instances}[split]

    def named_instances(self, names: Sequence[str | int]) -> list[str]:
        """``names`` (a study's or the command line's list of instances) as instance names; called
        before a stage runs. Raises UsageError for an unknown instance (with the known ones listed)
        or one listed twice."""
        for name in names:
            self.problem(name)  # an unknown instance fails here, with the known ones listed
        instances = [str(name) for name in names]
        repeated = next((i for k, i in enumerate(instances) if i in instances[:k]), None)
        if repeated is not None:
            raise UsageError(f"instance {repeated!r} is listed twice")
        return instances

    def owner(self, instance: str) -> tuple["Benchmark", str]:
        """The single-scenario benchmark that defines ``instance``, and the instance's name there:
        this benchmark and ``instance`` itself, except for a pooled benchmark (its member).
        Called where an instance's own data is needed (its regret reference)."""
        return self, str(instance)

    def instance_features(self, instance: str) -> list[float]:
        """Features of ``instance`` that SMAC sees in a meta-optimization besides its regret
        reference (y_min, y_max); none by default (a pooled benchmark names the member scenario)."""
        return []

    def problem(self, instance: str | int) -> "Problem":
        """The problem for one instance; unknown instances fail with the known ones listed."""
        key = str(instance)
        if key not in self.instances:
            shown = ", ".join(self.instances[:40]) + (" ..." if len(self.instances) > 40 else "")
            raise UsageError(f"unknown instance {key!r} for benchmark {self.name}; known instances: {shown}")
        return Problem(self, key)

    @abstractmethod
    def evaluate(self, instance: str, configs: Sequence[Mapping[str, Any]], fidelities: Sequence[float] | np.ndarray) -> Evaluation:
        """Evaluate a batch of configurations of one instance, each at its fidelity.

        Called through :meth:`Problem.evaluate` by the optimizer loop once per stage (every
        configuration of a batch in one call), by the regret references and by
        ``metaopt benchmark eval`` (:meth:`evaluate_raw`).

        Args:
            instance: One of :attr:`instances`.
            configs: Configurations as dicts of the searched hyperparameters (the fidelity is not
                among them): inactive hyperparameters are absent, never NaN or None. Values are
                Python numbers or category strings of :attr:`search_space`.
            fidelities: One fidelity per configuration, each in [r_min, r_max] (an integer for
                an integer fidelity); :meth:`_check_fidelities` validates them.

        Returns:
            An :class:`Evaluation` with ``loss`` and ``cost`` of shape ``(len(configs),)`` (loss is
            minimized; NaN marks a failed evaluation; cost ≥ 0), in the order of ``configs``.

        Must be deterministic: the same (instance, configuration, fidelity) always gives the same
        loss, whatever the batch around it, and the same cost unless the cost is measured (the
        ``live:`` benchmarks report real fit times). A benchmark never draws from the optimizer's
        generator; any noise it simulates is derived from its own seeds.
        """

    def _check_fidelities(self, fidelities: Sequence[float] | np.ndarray, n: int) -> np.ndarray:
        """``n`` fidelities as an array; non-numbers, a wrong count or values off the range fail."""
        try:
            r = np.array(fidelities, dtype=float).reshape(-1)
        except (TypeError, ValueError):
            raise UsageError(f"{self.name}: fidelities must be numbers") from None
        if len(r) != n:
            raise UsageError(f"{self.name}: got {n} configurations but {len(r)} fidelities")
        fid = self.fidelity
        ok = (r >= fid.r_min) & (r <= fid.r_max)
        if fid.is_int:
            ok &= r == np.round(r)
        if not ok.all():
            kind = "an integer" if fid.is_int else "a number"
            raise UsageError(
                f"{self.name}: fidelity {fid.name}={r[int(np.argmin(ok))]:g} is not allowed; "
                f"it must be {kind} in [{fid.r_min:g}, {fid.r_max:g}]"
            )
        return r

    def evaluate_raw(self, instance: str, configs: Sequence[Mapping[str, Any]]) -> list[dict[str, float]]:
        """Evaluate configurations that carry their fidelity value; return every target per config.

        Used by ``metaopt benchmark eval``. The default splits off the fidelity and calls
        :meth:`evaluate`; adapters with their own native format may override it.
        """
        fids = []
        stripped = []
        for cfg in configs:
            if self.fidelity.name not in cfg:
                raise UsageError(f"config is missing the fidelity parameter {self.fidelity.name!r}")
            cfg = dict(cfg)
            fids.append(float(cfg.pop(self.fidelity.name)))
            stripped.append(cfg)
        ev = self.evaluate(instance, stripped, fids)
        out = []
        for i in range(len(configs)):
            row = {k: float(v[i]) for k, v in ev.targets.items()}
            row.setdefault(self.loss_name, float(ev.loss[i]))
            row.setdefault(self.cost_name, float(ev.cost[i]))
            out.append(row)
        return out

    def best_known(self, instance: str) -> float | None:
        """The best full-fidelity loss known for ``instance`` (e.g. an analytic optimum), if any."""
        return None

    def fingerprint(self) -> str:
        """What the benchmark's losses depend on beyond its name, space and fidelity: part of the key of
        the cached regret references and typical costs (:mod:`metaopt.core.references`), so that a change
        gives new ones instead of stale numbers.

        The default is the name, and for a benchmark defined outside metaopt (``python:module:factory``,
        an entry point) also :func:`code_digest` of the module defining its class: editing that file
        gives new references. Benchmarks whose data or version can change override it (YAHPO: the
        digest of the scenario's files; live: version and scikit-learn); one whose objective lives in
        another file or reads a data file should override it too.
        """
        cls = type(self)
        return self.name if cls.__module__.split(".")[0] == "metaopt" else f"{self.name}+code:{code_digest(cls)}"

    def describe(self) -> dict[str, Any]:
        """A one-row summary used by ``metaopt benchmark list``."""
        return {
            "benchmark": self.name,
            "instances": len(self.instances),
            "train": len(self.train_instances),
            "test": len(self.test_instances),
            "d": self.d,
            "fidelity": f"{self.fidelity.name} [{self.fidelity.r_min:g}, {self.fidelity.r_max:g}]",
            "loss": self.loss_name,
            "cost": self.cost_name,
        }


@dataclass(frozen=True)
class Problem:
    """One instance of a benchmark: what a single optimizer run works on.

    The loop reads :attr:`search_space` (configurations are encoded against it: vectors in [0, 1]
    with NaN for inactive hyperparameters, :mod:`metaopt.core.space_codec`), :attr:`fidelity` (the
    stages) and :attr:`cheap_end` (CFO's low-cost start), and calls :meth:`evaluate` once per stage
    with the decoded configurations.
    """

    benchmark: Benchmark
    instance: str
    cheap_end_override: Mapping[str, str] | None = field(default=None, hash=False)
    """Cheap ends that replace the benchmark's for the named hyperparameters (``metaopt run --cheap-end``)."""

    @property
    def cheap_end(self) -> dict[str, str]:
        """Per hyperparameter, the cheap end ("lower"/"upper"): the benchmark's, updated by the override."""
        return {**self.benchmark.cheap_end, **(self.cheap_end_override or {})}

    @property
    def search_space(self) -> ConfigurationSpace:
        return self.benchmark.search_space

    @property
    def fidelity(self) -> Fidelity:
        return self.benchmark.fidelity

    @property
    def d(self) -> int:
        return self.benchmark.d

    def evaluate(self, configs: Sequence[Mapping[str, Any]], fidelities: Sequence[float] | np.ndarray) -> Evaluation:
        """Evaluate a batch on this instance: :meth:`Benchmark.evaluate` with the instance filled in."""
        return self.benchmark.evaluate(self.instance, configs, fidelities)

    def __str__(self) -> str:
        return f"{self.benchmark.name}/{self.instance}"


def split_instances(instances: Sequence[str], n_train: int, seed: int = 0) -> tuple[list[str], list[str]]:
    """A deterministic train/test split: a seeded permutation of the sorted instance list.

    The first ``n_train`` instances of the permutation form the training set; the rest, in their
    original order, the test set.
    """
    ordered = sorted(instances, key=lambda s: (len(s), s))
    perm = np.random.default_rng(seed).permutation(len(ordered))
    train = sorted((ordered[i] for i in perm[:n_train]), key=lambda s: (len(s), s))
    train_set = set(train)
    test = [s for s in instances if s not in train_set]
    return train, test
