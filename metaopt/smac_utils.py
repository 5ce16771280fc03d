"""Making SMAC 2.4 runs reproducible across processes (used by the meta-optimizer and the SMAC peers).

Two sources of run-to-run differences, both fixed through private attributes (left alone if
SMAC's internals change):

- its random forest fits and predicts with ``n_jobs=-1``: threads on every core summing tree
  predictions in whatever order they finish. One thread keeps the sums in a fixed order, and
  runs already use one process per core.
- its local search dedups start points through a ``set`` of Configurations, whose order depends
  on string hashing, i.e. on PYTHONHASHSEED, i.e. on the process. We sort them by their vector.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def reproducible_model_and_maximizer(facade: Any, scenario: Any, **model_options: Any) -> tuple[Any, Any]:
    """``facade``'s default surrogate model (``model_options`` passed to its ``get_model``) and
    acquisition maximizer, made reproducible."""
    model = facade.get_model(scenario, **model_options)
    model._rf_opts["n_jobs"] = 1
    maximizer = facade.get_acquisition_maximizer(scenario)
    local = getattr(maximizer, "_local_search", None)
    original = getattr(local, "_get_init_points_from_previous_configs", None)
    if original is not None:
        def ordered(*args: Any, **kwargs: Any) -> list:
            return sorted(original(*args, **kwargs), key=lambda c: tuple(np.nan_to_num(c.get_array(), nan=-1.0)))

        local._get_init_points_from_previous_configs = ordered
    return model, maximizer
