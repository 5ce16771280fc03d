"""YAHPO Gym surrogate benchmarks (offline ONNX models) behind the :class:`Benchmark` interface.

A data directory holds one folder per scenario (``config_space.json``, ``encoding.json``,
``model.onnx``; see ``yahpo_data/PROVENANCE.md``). ``yahpo-gym`` 1.0.2 does the encoding and the
inference; it is installed without its stale pins (ConfigSpace<=0.6.1, numpy<2), and the few
work-arounds it needs are in :func:`_open_benchmark_set` and :func:`_quiet`. Nothing is written to
yahpo's settings file in the user's home.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import warnings
from pathlib import Path
from typing import Any, Callable, Collection, Iterator, Mapping, Sequence

import numpy as np
import onnxruntime as rt
from ConfigSpace import ConfigurationSpace
from ConfigSpace.hyperparameters import IntegerHyperparameter, NumericalHyperparameter
from yahpo_gym import BenchmarkSet, list_scenarios, local_config

from metaopt.core.benchmarks.base import Benchmark, Evaluation, Fidelity, split_instances
from metaopt.core.errors import DataError, UsageError
from metaopt.core.store_utils import file_digest

REQUIRED_FILES = ("config_space.json", "encoding.json", "model.onnx")
"""Files a scenario folder needs to be usable."""

LCBENCH_TRAIN = ["3945", "7593", "126026", "167201", "168329", "168868", "168908", "189354"]
"""The lcbench training instances of the Smashy paper; the other 26 are test instances."""

Targets = Mapping[str, np.ndarray]

CHEAP_END: dict[str, dict[str, str]] = {
    "lcbench": {"batch_size": "upper", "max_units": "lower", "num_layers": "lower"},
    "rbv2_xgboost": {"nrounds": "lower"},
    "rbv2_rpart": {"cp": "upper"},
}
"""Cheap ends for low-cost starts (CFO), derived from the data: 2000 uniform random configurations
(seed 0) evaluated at full fidelity on the first four training instances; declared where the
Spearman correlation of the hyperparameter with the runtime target has |rho| > 0.1 with the same
sign on all four (cheap end: "lower" for rho > 0, "upper" for rho < 0). rho per instance:

- lcbench (3945, 7593, 126026, 167201): batch_size -0.16 -0.36 -0.18 -0.13, max_units +0.49 +0.43
  +0.40 +0.51, num_layers +0.58 +0.64 +0.67 +0.73; not declared: learning_rate +0.05 +0.07 -0.19
  -0.10, weight_decay +0.06 +0.13 +0.06 +0.07, max_dropout, momentum (all |rho| < 0.1).
- rbv2_xgboost (6, 15, 24, 31): nrounds +0.62 +0.69 +0.78 +0.71; every other hyperparameter has
  |rho| <= 0.1 on at least three of the four (e.g. lambda -0.02 -0.04 -0.06 -0.11, colsample_bytree
  +0.04 +0.04 +0.04 +0.15).
- rbv2_rpart (15, 22, 24, 28): cp -0.66 -0.33 -0.87 -0.52; not declared: maxdepth -0.02 +0.41 +0.14
  +0.47, minbucket +0.41 -0.11 -0.07 -0.19, minsplit -0.17 -0.03 -0.14 -0.05.
- nb301: nothing (every hyperparameter is categorical).
"""

LOSSES: dict[str, tuple[str, Callable[[Targets], np.ndarray]]] = {
    "lcbench": ("val_cross_entropy", lambda t: t["val_cross_entropy"]),
    "rbv2_": ("logloss", lambda t: t["logloss"]),
    "iaml_": ("mmce", lambda t: t["mmce"]),
    "nb301": ("val_error", lambda t: 100.0 - t["val_accuracy"]),
}
"""Default loss per scenario prefix: (loss name, loss from the targets). All are minimized;
nb301's ``val_error`` is ``100 - val_accuracy`` (accuracy is in percent)."""


def available_scenarios(path: Path) -> list[str]:
    """Scenarios that yahpo_gym knows and whose folder in ``path`` has every required file."""
    _require_data_dir(path)
    return sorted(s for s in list_scenarios() if not _missing_files(path / s))


def _require_data_dir(path: Path) -> None:
    if not Path(path).is_dir():
        raise DataError(f"YAHPO data directory not found: {path}")


def _missing_files(folder: Path) -> list[str]:
    return [f for f in REQUIRED_FILES if not (folder / f).is_file()]


def _check_scenario(scenario: str, data_dir: Path) -> None:
    """Fail unless ``scenario`` is known to yahpo_gym and complete in ``data_dir``."""
    available = ", ".join(available_scenarios(data_dir)) or "none"
    if scenario not in list_scenarios():
        raise UsageError(f"unknown YAHPO scenario {scenario!r}; available in {data_dir}: {available} "
                         f"(yahpo_gym knows: {', '.join(list_scenarios())})")
    folder = data_dir / scenario
    if not folder.is_dir():
        raise DataError(f"YAHPO scenario {scenario!r} not found: {folder} does not exist; "
                        f"available scenarios: {available}")
    missing = _missing_files(folder)
    if missing:
        raise DataError(f"YAHPO scenario {scenario!r} is incomplete: {folder} lacks {', '.join(missing)}; "
                        f"available scenarios: {available}")


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Silence, locally, the ConfigSpace 1.x warnings that yahpo-gym 1.0.2 triggers: deprecated API
    calls, and the old ``default`` key in its config_space.json files."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.filterwarnings("ignore", "The field 'default' should be", UserWarning)
        yield


def _open_benchmark_set(scenario: str, data_dir: Path) -> BenchmarkSet:
    """yahpo's ``BenchmarkSet`` for ``scenario`` reading from ``data_dir``; no ONNX session yet."""
    # yahpo_gym reads its data path from the settings file ~/.config/yahpo_gym (`set_data_path`
    # writes it; without it, creating a scenario fails). Instead we fill the in-memory cache of
    # those settings while the scenario's Configuration is created (it copies the path into its
    # `basedir`), then restore it: no file is written and other yahpo_gym users are unaffected.
    saved = local_config._config
    local_config._config = {"data_path": str(data_dir)}
    try:
        # check=False: we validate configurations ourselves (yahpo's check is slow and its errors
        # are obscure). redirect_stdout: BenchmarkSet prints citation notes.
        with _quiet(), contextlib.redirect_stdout(io.StringIO()):
            bench = BenchmarkSet(scenario, active_session=False, check=False)
    except (ValueError, KeyError, TypeError, AttributeError, IndexError, OSError) as err:
        # A malformed config_space.json / encoding.json (ValueError covers invalid JSON).
        reason = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise DataError(f"YAHPO scenario {scenario!r}: cannot read {data_dir / scenario} (config_space.json or "
                        f"encoding.json is corrupt: {reason}); restore the folder from the original data") from None
    finally:
        local_config._config = saved
    # yahpo-gym 1.0.2 calls `config_space._sort_hyperparameters()` before encoding each
    # configuration; ConfigSpace 1.x removed that method (spaces are always kept sorted). The order
    # only affects an intermediate dict: model inputs are built in the scenario's fixed
    # cat_names/cont_names order. So a no-op on this one space is an exact replacement.
    bench.config_space._sort_hyperparameters = lambda: None
    return bench


def _search_space(space: ConfigurationSpace, excluded: set[str]) -> ConfigurationSpace:
    """``space`` without the ``excluded`` hyperparameters; conditions and forbiddens kept."""
    cs = ConfigurationSpace()
    cs.add([hp for name, hp in space.items() if name not in excluded], space.conditions, space.forbidden_clauses)
    return cs


Domain = tuple[float, float, bool] | frozenset
"""What a hyperparameter accepts: (lower, upper, integer) for numbers, else the set of choices."""


def _domain(hp: Any) -> Domain:
    """A fast membership test for input validation: a (lower, upper, integer) range or a set of choices."""
    if isinstance(hp, NumericalHyperparameter):
        return (hp.lower, hp.upper, isinstance(hp, IntegerHyperparameter))
    if hasattr(hp, "choices"):
        return frozenset(hp.choices)
    if hasattr(hp, "sequence"):
        return frozenset(hp.sequence)
    return frozenset([hp.value])  # Constant


def _in_domain(value: Any, domain: Domain) -> bool:
    """Whether ``value`` is allowed: numbers (not true/false) in range, integral for integers; or a choice."""
    if isinstance(domain, tuple):
        lower, upper, integer = domain
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.number)):
            return False
        return bool(lower <= value <= upper and (not integer or float(value).is_integer()))
    try:
        return value in domain
    except TypeError:  # unhashable value
        return False


def _describe(domain: Domain) -> str:
    if isinstance(domain, tuple):
        return f"{'an integer' if domain[2] else 'a number'} in [{domain[0]}, {domain[1]}]"
    return "one of {" + ", ".join(sorted(map(str, domain))) + "}"


def _upper(hp: Any) -> int | float:
    return int(hp.upper) if isinstance(hp, IntegerHyperparameter) else float(hp.upper)


class YahpoBenchmark(Benchmark):
    """One YAHPO Gym scenario, e.g. ``yahpo:lcbench``.

    The search space is the scenario's space without the instance parameter and the fidelity
    parameters. The fidelity is yahpo's first fidelity parameter (lcbench/nb301 ``epoch``, rbv2
    ``trainsize``); other fidelity parameters (rbv2 ``repl``) are fixed at their maximum. The loss
    follows :data:`LOSSES`; the cost is yahpo's runtime target (lcbench ``time``, rbv2
    ``timetrain``, nb301 ``runtime``). The ONNX session is created when the benchmark is loaded, so
    broken data (a truncated ``model.onnx``, a corrupt ``config_space.json``) is one
    :class:`DataError` before any work.
    """

    def __init__(self, scenario: str, data_dir: Path) -> None:
        data_dir = Path(data_dir)
        _require_data_dir(data_dir)
        _check_scenario(scenario, data_dir)
        loss = next((rule for prefix, rule in LOSSES.items() if scenario.startswith(prefix)), None)
        if loss is None:
            raise UsageError(f"no default loss for YAHPO scenario {scenario!r}; "
                             f"known scenario families: {', '.join(LOSSES)}")
        self.scenario = scenario
        self.data_dir = data_dir
        self._fingerprint: str | None = None
        self._yahpo = _open_benchmark_set(scenario, data_dir)
        config = self._yahpo.config
        space = self._yahpo.config_space

        self.name = f"yahpo:{scenario}"
        self.loss_name, self._loss = loss
        self.cost_name = config.runtime_name
        self.target_names: list[str] = list(config.y_names)
        self.cheap_end = dict(CHEAP_END.get(scenario, {}))

        self._instance_param: str | None = config.instance_names
        with _quiet():
            self.instances = [str(i) for i in self._yahpo.instances]
        self.train_instances, self.test_instances, self.split_rule = self._split()

        fid_name, *other_fids = config.fidelity_params
        fid = space[fid_name]
        self.fidelity = Fidelity(fid_name, float(fid.lower), float(fid.upper),
                                 is_int=isinstance(fid, IntegerHyperparameter))
        self._fixed = {name: _upper(space[name]) for name in other_fids}
        excluded = {*config.fidelity_params} | ({self._instance_param} if self._instance_param else set())
        self.search_space = _search_space(space, excluded)

        # Validation tables: searched hyperparameters (evaluate) and every parameter (evaluate_raw).
        self._domains = {name: _domain(hp) for name, hp in space.items()}
        self._searched = set(self.search_space.keys())
        self._required = set(self.search_space.unconditional_hyperparameters)
        self._raw_required = self._required | {fid_name}
        self._bench()  # load the surrogate now (tens of ms): a broken model.onnx fails before any work

    def _split(self) -> tuple[list[str], list[str], str]:
        """(train, test, rule): the paper's split for lcbench and nb301, a seeded 25% split otherwise."""
        if self.scenario == "lcbench":
            test = [i for i in self.instances if i not in LCBENCH_TRAIN]
            rule = "train = the Smashy paper's 8 lcbench instances; test = the other 26"
            return list(LCBENCH_TRAIN), test, rule
        if self.scenario == "nb301":
            rule = "nb301 has a single instance (CIFAR10), used for evaluation only (test), as in the paper"
            return [], list(self.instances), rule
        n_train = max(1, round(0.25 * len(self.instances)))
        train, test = split_instances(self.instances, n_train=n_train, seed=0)
        rule = f"train = split_instances(n_train=max(1, round(0.25 * n)) = {n_train}, seed=0); test = the rest"
        return train, test, rule

    def fingerprint(self) -> str:
        """The name and the SHA-256 (first 16 hex digits) of the scenario's data files (REQUIRED_FILES):
        another version of the data gives other regret references (read once per process)."""
        if self._fingerprint is None:
            digest = hashlib.sha256()
            for name in REQUIRED_FILES:
                digest.update(file_digest((self.data_dir / self.scenario / name).read_bytes()).encode())
            self._fingerprint = f"{self.name}+data:{digest.hexdigest()[:16]}"
        return self._fingerprint

    def __reduce__(self) -> tuple:
        """Pickle by (scenario, data_dir): worker processes rebuild their own ONNX session."""
        return (type(self), (self.scenario, self.data_dir))

    def evaluate(self, instance: str, configs: Sequence[Mapping[str, Any]], fidelities: Sequence[float] | np.ndarray) -> Evaluation:
        """One batched surrogate call; ``targets`` holds every yahpo target as a float array."""
        if len(configs) != len(fidelities):
            raise UsageError(f"got {len(configs)} configurations but {len(fidelities)} fidelities")
        instance = self.problem(instance).instance  # UsageError for unknown instances
        fixed = {**self._fixed, **self._instance_value(instance)}
        rows = []
        for cfg, r in zip(configs, fidelities):
            self._validate(cfg, self._searched, self._required)
            rows.append({**cfg, **fixed, self.fidelity.name: self._fidelity_value(r)})
        targets = self._predict(rows)
        return Evaluation(loss=self._loss(targets), cost=targets[self.cost_name], targets=targets)

    def evaluate_raw(self, instance: str, configs: Sequence[Mapping[str, Any]]) -> list[dict[str, float]]:
        """Evaluate configurations in yahpo's own format, in one batched call.

        Each configuration carries the fidelity; the instance parameter and the other fidelity
        parameters (``repl``) are optional (default: ``instance`` and their maximum). One
        configuration per call reproduces yahpo_gym's reference predictions exactly.
        """
        instance = self.problem(instance).instance  # UsageError for unknown instances
        instance_value = self._instance_value(instance)
        rows = []
        for cfg in configs:
            row = {**self._fixed, **cfg}
            if self._instance_param and str(row.get(self._instance_param, instance)) != instance:
                raise UsageError(f"config has {self._instance_param}={row[self._instance_param]!r} "
                                 f"but instance {instance!r} was requested")
            row.update(instance_value)
            self._validate(row, self._domains.keys(), self._raw_required)
            rows.append(row)
        targets = self._predict(rows)
        loss = self._loss(targets)
        out = []
        for i in range(len(rows)):
            row = {k: float(v[i]) for k, v in targets.items()}
            row.setdefault(self.loss_name, float(loss[i]))
            out.append(row)
        return out

    def _instance_value(self, instance: str) -> dict[str, str]:
        """The instance parameter to add to each configuration (none for nb301)."""
        return {self._instance_param: instance} if self._instance_param else {}

    def _fidelity_value(self, r: float) -> int | float:
        f = self.fidelity
        if not f.r_min <= r <= f.r_max or (f.is_int and r != round(r)):
            kind = "an integer" if f.is_int else "a number"
            raise UsageError(f"{self.name}: fidelity {f.name}={r!r} must be {kind} in [{f.r_min:g}, {f.r_max:g}]")
        return int(r) if f.is_int else float(r)

    def _validate(self, cfg: Mapping[str, Any], allowed: Collection[str], required: set[str]) -> None:
        """UsageError for unknown names, values outside their range or choices, missing required names."""
        for name, value in cfg.items():
            if name not in allowed:
                raise UsageError(f"{self.name}: unknown hyperparameter {name!r}; "
                                 f"known: {', '.join(sorted(allowed))}")
            domain = self._domains[name]
            if not _in_domain(value, domain):
                raise UsageError(f"{self.name}: {name}={value!r} is out of range; it must be {_describe(domain)}")
        if not required.issubset(cfg.keys()):
            raise UsageError(f"{self.name}: config lacks {', '.join(sorted(required - cfg.keys()))}")

    def _predict(self, rows: list[dict[str, Any]]) -> dict[str, np.ndarray]:
        """Every target for ``rows`` (complete yahpo configurations), one surrogate call."""
        if not rows:
            return {k: np.empty(0) for k in self.target_names}
        with _quiet():
            results = self._bench().objective_function(rows)
        values = np.array([[r[k] for k in self.target_names] for r in results], dtype=float)
        return {k: values[:, j] for j, k in enumerate(self.target_names)}

    def _bench(self) -> BenchmarkSet:
        """The BenchmarkSet, with its ONNX session created on first use."""
        if self._yahpo.session is None:
            options = rt.SessionOptions()
            # Runs are parallelized across processes: one thread per session avoids
            # oversubscription, and keeps predictions deterministic.
            options.intra_op_num_threads = 1
            options.inter_op_num_threads = 1
            model = self._yahpo.config.get_path("model")
            try:
                session = rt.InferenceSession(model, sess_options=options, providers=["CPUExecutionProvider"])
            except Exception as err:  # onnxruntime's errors (InvalidProtobuf, Fail, ...) derive from Exception only
                raise DataError(f"YAHPO scenario {self.scenario!r}: cannot load {model} "
                                f"({str(err).splitlines()[0]}); restore the file from the original data") from None
            self._yahpo.active_session = True  # otherwise yahpo drops the session after each call
            self._yahpo.set_session(session)
        return self._yahpo
