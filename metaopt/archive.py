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
        self._rows = 0
        self._joined: dict[str, np.ndarray] = {}
        """Concatenations already made since the last change, by field ("X" for the vectors): the
        components read the archive several times per batch, and joining it anew each time was
        quadratic in the run's length."""

    def __len__(self) -> int:
        return self._rows

    def add(self, vectors: np.ndarray, **columns: np.ndarray) -> None:
        """Append a batch; every field of ``_FIELDS`` must be given, one value per row."""
        n = len(vectors)
        values = {f: np.asarray(columns[f]) for f in self._FIELDS}
        for f, v in values.items():
            if v.shape != (n,):
                raise ValueError(f"archive field {f}: expected {n} values, got shape {v.shape}")
        self._vectors.append(np.asarray(vectors, dtype=float).reshape(n, self.dim))
        self._rows += n
        for f, v in values.items():
            self._columns[f].append(v)
        for f in self._ANNOTATIONS:
            self._columns[f].append(np.full(n, np.nan))
        self._joined.clear()

    def annotate_last(self, name: str, value: float) -> None:
        """Set the annotation ``name`` of every row of the last added batch."""
        self._columns[name][-1][:] = value
        self._joined.pop(name, None)

    def _concat(self, key: str, parts: list[np.ndarray], empty_shape: tuple[int, ...]) -> np.ndarray:
        """The parts as one read-only array, joined once per change of the archive."""
        if key not in self._joined:
            joined = np.concatenate(parts) if parts else np.empty(empty_shape)
            joined.flags.writeable = False  # shared by every reader until the next change
            self._joined[key] = joined
        return self._joined[key]

    @property
    def X(self) -> np.ndarray:
        """Configuration vectors, one row per evaluation (read-only)."""
        return self._concat("X", self._vectors, (0, self.dim))

    def column(self, name: str) -> np.ndarray:
        """One field or annotation, one value per evaluation (read-only)."""
        return self._concat(name, self._columns[name], (0,))

    @property
    def loss(self) -> np.ndarray:
        return self.column("loss")

    @property
    def fidelity(self) -> np.ndarray:
        return self.column("fidelity")

    @property
    def cost(self) -> np.ndarray:
        return self.column("cost")
