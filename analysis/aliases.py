"""One configuration under several names is one optimizer: one row, one curve, one rank, with all its names.

γ* found to be a preset (``gamma_star`` and ``cfo_then_rf``), or a design shipped under two names, gives
the same runs bit for bit (a run is a pure function of configuration, problem, seed and budget; the
evaluate stage runs it once and stores it under each name). Shown twice, the duplicate would take two
rows of every table, two curves, and two places in the rank tests (changing everyone's average rank
and the critical difference). So the tables, curves and tests merge the names first: the runs of the
first name are kept under the label ``"gamma_star = cfo_then_rf"`` (names in the study's order).

Called by the evaluate stage before it writes its tables and by the report (and so the answer) when it
reads the held-out runs. External peers are never merged (their configuration is not a point of the
design space).
"""

from __future__ import annotations

import json
from typing import Any, Iterable, Mapping

SEPARATOR = " = "
"""Joins the names of one configuration in a label."""


def _key(config: Mapping[str, Any] | None) -> str | None:
    """A configuration's identity (None for a peer or an unknown configuration: never merged)."""
    if not config or "peer" in config:
        return None
    return json.dumps(dict(config), sort_keys=True, default=str)


def run_identity(config: Mapping[str, Any] | None, workers: int | None) -> Mapping[str, Any] | None:
    """What makes two optimizers' runs the same runs: the configuration and, on the simulated clock
    (``evaluation.clock``), the worker count (one configuration with 1 and with 8 workers gives other
    runs). The value to give :func:`same_configuration_labels` for each name."""
    if not config or workers is None:
        return config
    return {**config, "__workers__": workers}


def same_configuration_labels(configs: Mapping[str, Mapping[str, Any] | None], order: Iterable[str] = ()
                              ) -> dict[str, str]:
    """name -> label for every name of ``configs`` (optimizer name -> its resolved configuration; None or a
    peer's description for a peer). Names whose configurations are identical share the label that joins
    them with :data:`SEPARATOR`, in ``order`` (the study's optimizer list) and then by name; every other
    name is its own label."""
    rank = {name: k for k, name in enumerate(order)}
    groups: dict[str, list[str]] = {}
    for name, config in configs.items():
        key = _key(config)
        if key is not None:
            groups.setdefault(key, []).append(name)
    labels = {name: name for name in configs}
    for names in groups.values():
        if len(names) > 1:
            names = sorted(names, key=lambda n: (rank.get(n, len(rank)), n))
            labels.update({name: SEPARATOR.join(names) for name in names})
    return labels


def names_of(label: str) -> list[str]:
    """The optimizer names a label stands for (one for an optimizer that has no twin)."""
    return label.split(SEPARATOR)


def kept(name: str, labels: Mapping[str, str]) -> bool:
    """Whether ``name``'s runs stand for its label: the first name of a label's runs are kept, the others'
    (the same runs) are left out."""
    return names_of(labels.get(name, name))[0] == name


def label_containing(labels: Iterable[str], name: str) -> str | None:
    """The label among ``labels`` that stands for ``name`` (None when none does)."""
    return next((label for label in labels if name in names_of(label)), None)
