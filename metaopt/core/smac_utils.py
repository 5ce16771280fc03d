"""Making SMAC 2.4 runs reproducible across processes (used by the meta-optimizer and the SMAC peers),
and the meta-optimizer's forest cheaper to fit (:func:`bound_forest_leaves`, the same trees).

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
