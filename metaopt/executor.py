"""Running independent inner runs: in this process, or on a Dask cluster.

A task is a plain function call; results come back to the calling process as each task finishes
(so they can be stored at once, and only there — workers may sit on other machines). The default
cluster is a ``dask.distributed.LocalCluster`` with one single-threaded worker process per core
requested; ``scheduler`` joins an existing cluster instead (e.g. one started with dask-jobqueue
on SLURM, see README). Each run is a pure function of its inputs, so results do not depend on
where or in which order they ran.
"""

from __future__ import annotations

import os
from contextlib import AbstractContextManager
from typing import Any, Callable, Iterable, Iterator

from metaopt.errors import UsageError

Task = tuple[Callable[..., Any], tuple[Any, ...]]


class Executor(AbstractContextManager):
    """Runs tasks; ``map_unordered`` yields (index, result) pairs as tasks finish."""

    workers = 1
    dask_client = None

    def map_unordered(self, tasks: Iterable[Task]) -> Iterator[tuple[int, Any]]:
        for i, (fn, args) in enumerate(tasks):
            yield i, fn(*args)

    def __exit__(self, *exc: object) -> None:
        return None

    def describe(self) -> str:
        return "serial (this process)"


class DaskExecutor(Executor):
    """Tasks on a dask.distributed cluster: a new LocalCluster, or an existing scheduler."""

    def __init__(self, workers: int = 2, scheduler: str | None = None) -> None:
        from dask.distributed import Client, LocalCluster

        self._cluster = None
        if scheduler:
            try:
                self.dask_client = Client(scheduler, timeout="20s")
            except OSError as err:
                raise UsageError(f"--scheduler: cannot reach a Dask scheduler at {scheduler} ({err})") from None
            self.workers = max(len(self.dask_client.scheduler_info().get("workers", {})), 1)
        else:
            # One single-threaded process per worker; linear algebra pinned to one thread per process.
            self._cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                         dashboard_address=":0", host="127.0.0.1",
                                         env={"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
                                              "MKL_NUM_THREADS": "1"})
            self.dask_client = Client(self._cluster)
            self.workers = workers
        self._scheduler = scheduler

    def map_unordered(self, tasks: Iterable[Task]) -> Iterator[tuple[int, Any]]:
        from dask.distributed import as_completed

        futures = {}
        for i, (fn, args) in enumerate(tasks):
            futures[self.dask_client.submit(fn, *args, pure=False)] = i
        for future in as_completed(futures):
            yield futures[future], future.result()

    def __exit__(self, *exc: object) -> None:
        if self.dask_client is not None:
            self.dask_client.close()
        if self._cluster is not None:
            self._cluster.close()

    def describe(self) -> str:
        return f"Dask scheduler {self._scheduler}" if self._scheduler else f"Dask LocalCluster, {self.workers} workers"


def make_executor(workers: int = 1, scheduler: str | None = None) -> Executor:
    """Serial for one worker and no scheduler; Dask otherwise."""
    if workers < 1:
        raise UsageError(f"workers must be at least 1, got {workers}")
    if scheduler is None and workers == 1:
        return Executor()
    return DaskExecutor(workers=workers, scheduler=scheduler)


def default_workers() -> int:
    """The number of cores this process may use."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
