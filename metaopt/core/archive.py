"""The archive A of a run: every evaluation so far, in order, as growing numpy arrays."""

from __future__ import annotations

from typing import Sequence

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
        self._rows = 0
        self._last_batch = 0
        """Rows added by the last :meth:`add` (the ones :meth:`annotate_last` sets)."""
        # Each field lives in a buffer of spare capacity that doubles when full, so appending a batch
        # copies only the batch (joining a list of per-batch arrays on every read after a change
        # was quadratic in the run's length); readers get read-only views of the filled rows.
        self._buffers: dict[str, np.ndarray] = {"X": np.empty((0, dim))}
        self._buffers.update({f: np.empty(0) for f in self._ANNOTATIONS})

    def __len__(self) -> int:
        return self._rows

    def add(self, vectors: np.ndarray, **columns: np.ndarray | Sequence[float]) -> None:
        """Append a batch; every field of ``_FIELDS`` must be given, one value per row."""
        n = len(vectors)
        values = {f: np.asarray(columns[f]) for f in self._FIELDS}
        for f, v in values.items():
            if v.shape != (n,):
                raise ValueError(f"archive field {f}: expected {n} values, got shape {v.shape}")
        values["X"] = np.asarray(vectors, dtype=float).reshape(n, self.dim)
        values.update({f: np.full(n, np.nan) for f in self._ANNOTATIONS})
        end = self._rows + n
        for f, v in values.items():
            buffer = self._buffers.get(f, np.empty((0, *v.shape[1:]), dtype=v.dtype))
            dtype = np.result_type(buffer, v)  # as concatenating every batch's values would give
            if dtype != buffer.dtype or len(buffer) < end:
                buffer = self._grow(buffer, end, dtype)
            buffer[self._rows:end] = v
            self._buffers[f] = buffer
        self._rows, self._last_batch = end, n

    def _grow(self, buffer: np.ndarray, rows: int, dtype: np.dtype) -> np.ndarray:
        """A new buffer of at least ``rows`` rows (the capacity doubled) holding ``buffer``'s filled rows."""
        grown = np.empty((max(rows, 2 * len(buffer), 16), *buffer.shape[1:]), dtype=dtype)
        grown[:self._rows] = buffer[:self._rows]
        return grown

    def annotate_last(self, name: str, value: float) -> None:
        """Set the annotation ``name`` of every row of the last added batch."""
        # Into a copy: arrays handed out before must not change under their reader.
        annotations = self._buffers[name].copy()
        annotations[self._rows - self._last_batch:self._rows] = value
        self._buffers[name] = annotations

    def _view(self, key: str) -> np.ndarray:
        """The filled rows of one buffer, read-only (appending never changes rows already filled)."""
        view = self._buffers[key][:self._rows]
        view.flags.writeable = False
        return view

    @property
    def X(self) -> np.ndarray:
        """Configuration vectors, one row per evaluation (read-only)."""
        return self._view("X")

    def column(self, name: str) -> np.ndarray:
        """One field or annotation, one value per evaluation (read-only)."""
        if name not in self._FIELDS + self._ANNOTATIONS:
            raise KeyError(name)
        if name not in self._buffers:  # no batch yet
            return np.empty(0)
        return self._view(name)

    @property
    def loss(self) -> np.ndarray:
        return self.column("loss")

    @property
    def fidelity(self) -> np.ndarray:
        return self.column("fidelity")

    @property
    def cost(self) -> np.ndarray:
        return self.column("cost")
