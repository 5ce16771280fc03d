"""Making SMAC 2.4 runs reproducible across processes (used by the meta-optimizer and the SMAC peers),
and the meta-optimizer's asks cheaper (:func:`bound_forest_leaves`, the same trees;
:func:`fast_asks`, the same asks).

Two sources of run-to-run differences, both fixed through private attributes (left alone if
SMAC's internals change):

- its random forest fits and predicts with ``n_jobs=-1``: threads on every core summing tree
  predictions in whatever order they finish. One thread keeps the sums in a fixed order, and
  runs already use one process per core.
- its local search dedups start points through a ``set`` of Configurations, whose order depends
  on string hashing, i.e. on PYTHONHASHSEED, i.e. on the process. We sort them by their vector.
"""

from __future__ import annotations

import logging
from typing import Any, Literal

import numpy as np


def quiet_smac_logging() -> Literal[False]:
    """What every SMAC facade metaopt builds gets as ``logging_level``: False, i.e. no logging set-up by
    SMAC, whose own (``logging.config.dictConfig``) would give the root logger SMAC's handler and
    level for the rest of the process, and so silence every library's warnings, metaopt's failed
    evaluations included; SMAC's own loggers are set to ERROR instead. Called when a facade is built."""
    logging.getLogger("smac").setLevel(logging.ERROR)
    return False


def reproducible_model_and_maximizer(facade: Any, scenario: Any, **model_options: Any) -> tuple[Any, Any]:
    """``facade``'s default surrogate model (``model_options`` passed to its ``get_model``) and
    acquisition maximizer, made reproducible."""
    model = facade.get_model(scenario, **model_options)
    model._rf_opts["n_jobs"] = 1
    maximizer = facade.get_acquisition_maximizer(scenario)
    local = getattr(maximizer, "_local_search", None)
    original = getattr(local, "_get_init_points_from_previous_configs", None)
    if local is not None and original is not None:
        def ordered(*args: Any, **kwargs: Any) -> list:
            return sorted(original(*args, **kwargs), key=lambda c: tuple(np.nan_to_num(c.get_array(), nan=-1.0)))

        local._get_init_points_from_previous_configs = ordered
    return model, maximizer


def bound_forest_leaves(model: Any) -> Any:
    """``model`` (SMAC 2.4's random forest) fitting the same trees without reserving room for 2²¹ nodes
    per tree; returns ``model``. Called once on the meta-optimizer's model, before SMAC trains it.

    SMAC passes ``max_leaf_nodes = 2**20`` to scikit-learn, whose best-first builder then reserves
    2 · max_leaf_nodes − 1 nodes before growing a tree: about 70 ms a tree, most of an ask once the
    model is trained (and on the cores the workers run on). A tree has at most one leaf per training
    row, so a bound of one more than the rows never binds: the builder is the same, it expands the
    same nodes in the same order with the same draws, and only the reserved room differs. The bound
    is set anew before each fit (the rows grow). Left alone if SMAC's internals differ.
    """
    options, train = getattr(model, "_rf_opts", None), getattr(model, "_train", None)
    if not isinstance(options, dict) or not isinstance(options.get("max_leaf_nodes"), int) or train is None:
        return model
    limit = options["max_leaf_nodes"]

    def train_bounded(X: np.ndarray, y: np.ndarray) -> Any:
        options["max_leaf_nodes"] = min(limit, len(X) + 1)
        return train(X, y)

    model._train = train_bounded
    return model


def known_designs_first(design: Any) -> Any:
    """``design`` (a SMAC 2.4 initial design built with ``additional_configs``) proposing those additional
    configurations first and its own after them; returns ``design``. Called on a multi-fidelity search's
    initial design before the facade is built.

    SMAC lists an initial design's own configurations first (the multi-fidelity facade's: random ones, a
    quarter of the trials), then the additional ones, and has no option for the order. Hyperband takes
    them into its brackets in that order, so the known designs of a search (every preset) would wait
    behind some forty random ones and be reached, at the full inner budget, only after hundreds of inner
    runs; the algorithm-configuration facade, whose own share is the default configuration, starts from
    them. The configurations and their count are SMAC's; only the order changes.
    """
    select = design.select_configurations
    additional = list(getattr(design, "_additional_configs", None) or [])

    def known_first() -> list[Any]:
        configs = select()
        known = [config for config in configs if config in additional]
        return known + [config for config in configs if config not in additional]

    design.select_configurations = known_first
    return design


def fast_asks(smac: Any) -> Any:
    """``smac`` (a SMAC 2.4 facade with a random forest) asking for the same trials in a fraction of
    the time; returns ``smac``. Called once on each meta-optimizer's facade, right after it is built.

    An ask of a search with thousands of trials was almost all SMAC's bookkeeping (docs/benchmarks.md,
    the replay section), in two places, both exact to replace:

    - after every retraining the config selector predicts the model's mean for every configuration in
      the run history, one forest prediction per configuration, to find the acquisition function's
      incumbent (:func:`_batch_best_prediction`);
    - the config selector and the intensifier test whether a configuration is among the processed or
      the rejected ones with ``in`` on lists of thousands of Configurations, whose ``==`` (two dicts
      built from the values, about 70 µs) is the cost (:class:`IndexedConfigs`).

    Each part is left alone if SMAC's internals differ from 2.4's; tests/test_exact_speedups.py checks
    both against SMAC's own methods and a whole race's trials against SMAC as shipped.
    """
    selector: Any = getattr(smac, "_config_selector", None)
    _batch_best_prediction(selector)
    keys = ConfigKeys()
    if selector is not None and isinstance(getattr(selector, "_processed_configs", None), list):
        selector.__class__ = _indexed_selector_class(type(selector))
        selector._config_keys = keys
        selector._processed_configs = selector.__dict__["_processed_configs"]  # indexed from now on
    intensifier: Any = getattr(smac, "_intensifier", None)
    rejected = getattr(intensifier, "get_rejected_configs", None)
    if rejected is not None:
        intensifier.get_rejected_configs = lambda: IndexedConfigs(rejected(), keys)
    return smac


class ConfigKeys:
    """Each Configuration's values as a hashable key (a frozenset of its items: equal exactly when the
    configurations' dicts are, which is what their ``==`` compares besides the space), computed once
    per object. One per facade (:func:`fast_asks`), shared by its :class:`IndexedConfigs`; it keeps
    the configurations it has keyed alive, so an object's id is not reused while it is known.
    Configurations are not changed after SMAC makes them (it makes new ones: neighbours, samples)."""

    def __init__(self) -> None:
        self._keys: dict[int, tuple[Any, frozenset]] = {}

    def __call__(self, config: Any) -> frozenset:
        """The key of ``config``; TypeError or ValueError if it is not a mapping."""
        entry = self._keys.get(id(config))
        if entry is None or entry[0] is not config:
            entry = (config, frozenset(dict(config).items()))
            self._keys[id(config)] = entry
        return entry[1]


class IndexedConfigs(list):
    """A list of Configurations whose ``in`` answers as a list's (any element ``is`` or ``==`` the item)
    but compares only the elements whose values equal the item's (:class:`ConfigKeys`), kept in an
    index. Mutations other than ``append`` rebuild the index. Made by :func:`fast_asks`."""

    def __init__(self, configs: Any = (), keys: ConfigKeys | None = None) -> None:
        super().__init__(configs)
        self._keys = keys or ConfigKeys()
        self._rebuild()

    def _rebuild(self) -> None:
        self._index: dict[frozenset, list[Any]] = {}
        self._unkeyed: list[Any] = []
        """Elements without values (not Configurations), compared with every item."""
        for config in self:
            self._add(config)

    def _add(self, config: Any) -> None:
        try:
            self._index.setdefault(self._keys(config), []).append(config)
        except (TypeError, ValueError):
            self._unkeyed.append(config)

    def append(self, config: Any) -> None:
        super().append(config)
        self._add(config)

    def __contains__(self, item: object) -> bool:
        try:
            key = self._keys(item)
        except (TypeError, ValueError):  # not a Configuration: the list's own answer
            return list.__contains__(self, item)
        return any(config is item or config == item for config in [*self._index.get(key, ()), *self._unkeyed])


def _rebuilding(name: str) -> Any:
    def mutate(self: IndexedConfigs, *args: Any, **kwargs: Any) -> Any:
        result = getattr(list, name)(self, *args, **kwargs)
        self._rebuild()
        return self if name == "__iadd__" else result

    return mutate


for _name in ("extend", "insert", "remove", "pop", "clear", "sort", "reverse", "__setitem__", "__delitem__",
              "__iadd__"):
    setattr(IndexedConfigs, _name, _rebuilding(_name))


_INDEXED_SELECTORS: dict[type, type] = {}


def _indexed_selector_class(base: type) -> type:
    """``base`` (SMAC's ConfigSelector) whose ``_processed_configs`` is always an :class:`IndexedConfigs`:
    SMAC assigns it a plain list when its iteration starts (the run history's configurations) and
    then appends to it and tests ``in`` on it for every challenger."""
    if base not in _INDEXED_SELECTORS:
        def get(self: Any) -> IndexedConfigs:
            return self.__dict__["_processed_configs"]

        def set_(self: Any, value: list) -> None:
            indexed = value if isinstance(value, IndexedConfigs) else IndexedConfigs(value, self._config_keys)
            self.__dict__["_processed_configs"] = indexed

        _INDEXED_SELECTORS[base] = type(base.__name__, (base,), {"_processed_configs": property(get, set_),
                                                                 "__module__": base.__module__})
    return _INDEXED_SELECTORS[base]


def _batch_best_prediction(selector: Any) -> None:
    """``selector`` (SMAC 2.4's config selector) finding the predicted best configuration with one
    batched forest prediction where SMAC makes one per configuration. Called by :func:`fast_asks`.

    After every retraining, ``ConfigSelector._get_x_best`` predicts the model's mean for every
    configuration in the run history, the acquisition function's incumbent: one
    ``predict_marginalized`` call per configuration, i.e. one joblib dispatch per tree and instance
    per configuration. In a race of 2,000 designs over 10 instances that was two thirds of an ask.
    Here the trees' predictions for all configurations come from one call of the forest's own batch
    method, the one SMAC calls for a single row (each row's predictions do not depend on the other
    rows: the same tree lookups, divisions and sums, element by element), and each row's mean over
    the trees is then taken from its own one-row slice, exactly the reduction SMAC applies to its
    one-row array. The ranking is SMAC's: a stable sort by the mean, the first row wins. Left alone
    (SMAC's own method) for a model without a forest or if SMAC's internals differ.
    """
    model: Any = getattr(selector, "_model", None)
    original = getattr(selector, "_get_x_best", None)
    needed = ("_impute_inactive", "_n_features", "_instance_features", "_log_y")
    if original is None or not all(hasattr(model, name) for name in needed):
        return

    def x_best(X: np.ndarray) -> tuple[np.ndarray, float]:
        forest = getattr(model, "_rf", None)
        if forest is None or not getattr(selector, "_predict_x_best", False) or X.ndim != 2 or len(X) == 0:
            return original(X)
        rows = model._impute_inactive(X)
        if model._n_features == 0:  # RandomForest._predict → EPMRandomForest.predict
            trees = forest.all_trees_pred(rows)
        else:  # RandomForest.predict_marginalized
            features = np.asarray(list(model._instance_features.values()))
            trees = forest.predict_marginalized_over_instances_batch(rows, features, model._log_y)
        trees = np.asarray(trees)
        costs = sorted(((trees[i:i + 1].mean(axis=1)[0], x) for i, x in enumerate(X)), key=lambda t: t[0])
        return costs[0][1], costs[0][0]

    selector._get_x_best = x_best
