"""The archive A of a run: every evaluation so far, in order, as growing numpy arrays."""

from __future__ import annotations

import numpy as np


class Archive:
    """Append-only record of evaluations: configuration vector, fidelity, loss, cost and bookkeeping.

    ``config_id`` identifies a configuration across re-evaluations at higher fidelities.
    Annotations (``stop_statistic``) are NaN when a batch is added and may be set for the last
    batch afterwards (:meth:`annotate_last`), e.g. with a statistic computed from it.
    """

    _FIELDS = ("config_id", "batch", "stage", "bracket", "fidelity", "loss", "cost")
    _ANNOTATIONS = ("stop_statistic",)

    def __init__(self, dim: int) -> None:
        self.dim = dim
        self._vectors: list[np.ndarray] = []
        self._columns: dict[str, list[np.ndarray]] = {f: [] for f in self._FIELDS + self._ANNOTATIONS}

    def __len__(self) -> int:
        return sum(len(v) for v in self._vectors)

    def add(self, vectors: np.ndarray, **columns: np.ndarray) -> None:
        """Append a batch; every field of ``_FIELDS`` must be given, one value per row."""
        n = len(vectors)
        self._vectors.append(np.asarray(vectors, dtype=float).reshape(n, self.dim))
        for f in self._FIELDS:
            values = np.asarray(columns[f])
            if values.shape != (n,):
                raise ValueError(f"archive field {f}: expected {n} values, got shape {values.shape}")
            self._columns[f].append(values)
        for f in self._ANNOTATIONS:
            self._columns[f].append(np.full(n, np.nan))

    def annotate_last(self, name: str, value: float) -> None:
        """Set the annotation ``name`` of every row of the last added batch."""
        self._columns[name][-1][:] = value

    def _concat(self, parts: list[np.ndarray], empty_shape: tuple[int, ...]) -> np.ndarray:
        return np.concatenate(parts) if parts else np.empty(empty_shape)

    @property
    def X(self) -> np.ndarray:
        """Configuration vectors, one row per evaluation."""
        return self._concat(self._vectors, (0, self.dim))

    def column(self, name: str) -> np.ndarray:
        return self._concat(self._columns[name], (0,))

    @property
    def loss(self) -> np.ndarray:
        return self.column("loss")

    @property
    def fidelity(self) -> np.ndarray:
        return self.column("fidelity")

    @property
    def cost(self) -> np.ndarray:
        return self.column("cost")
