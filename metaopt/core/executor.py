"""Running independent inner runs: in this process, or on a Dask cluster.

A task is a plain function call; results come back to the calling process as each task finishes
(so they can be stored at once, and only there — workers may sit on other machines). The default
cluster is a ``dask.distributed.LocalCluster`` with one single-threaded worker process per core
requested; ``scheduler`` joins an existing cluster instead (e.g. one started with dask-jobqueue
on SLURM, see README). Each run is a pure function of its inputs, so results do not depend on
where or in which order they ran.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
from collections import deque
from contextlib import AbstractContextManager
from typing import Any, Callable, Iterable, Iterator

from metaopt.core.errors import UsageError

Task = tuple[Callable[..., Any], tuple[Any, ...]]


class Executor(AbstractContextManager):
    """Runs tasks in this process, in the order they were submitted.

    Two ways to use an executor: :meth:`map_unordered` for a fixed list of tasks, or :meth:`submit`
    and :meth:`completed` when finished tasks decide which tasks come next (the optimize stage
    runs its meta-seeds side by side this way).
    """

    workers = 1
    dask_client: Any = None
    """The dask.distributed Client of a :class:`DaskExecutor`; None for the serial executor."""

    def __init__(self) -> None:
        self._queue: deque[tuple[int, Task]] = deque()
        self._next_id = 0

    def _new_task_id(self) -> int:
        """The next task id (0, 1, ...), for :meth:`submit` of every executor."""
        self._next_id += 1
        return self._next_id - 1

    def submit(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> int:
        """Queue ``fn(*args)``; returns the task's id, which :meth:`completed` yields with its result."""
        task_id = self._new_task_id()
        self._queue.append((task_id, (fn, args)))
        return task_id

    def completed(self) -> Iterator[tuple[int, Any]]:
        """Yields ``(task id, result)`` of every submitted task as it finishes, including tasks
        submitted while iterating; ends when no task is left."""
        while self._queue:
            task_id, (fn, args) = self._queue.popleft()
            yield task_id, fn(*args)

    def map_unordered(self, tasks: Iterable[Task]) -> Iterator[tuple[int, Any]]:
        """Runs ``tasks``; yields ``(position in tasks, result)`` as each finishes."""
        position = {self.submit(fn, args): i for i, (fn, args) in enumerate(tasks)}
        for task_id, result in self.completed():
            yield position[task_id], result

    def __exit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        return None

    def describe(self) -> str:
        return "serial (this process)"


_LOCAL_WORKER_CONFIG = {
    # Dask's nanny sets glibc's trim threshold to 64 KiB so that workers hand freed memory back to the
    # system at once. Setting it at all also fixes glibc's mmap threshold, so every numpy temporary
    # above 128 KiB (a neighbour query's distances, a GP's kernel matrix) is mapped and unmapped anew,
    # and inner runs took longer in a worker than in a plain process. Our tasks are short and small.
    "distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": 128 * 1024 * 1024,
    # Timers that wake each worker's event loop (the statistical profiler every 10 ms, the tick
    # monitor every 20 ms, memory and system monitors): each wake-up takes the GIL from the inner
    # run. Nothing here reads their output.
    "distributed.worker.profile.enabled": False,
    "distributed.admin.tick.interval": "1s",
    "distributed.admin.system-monitor.interval": "5s",
    "distributed.worker.memory.monitor-interval": "1s",
}
"""Settings for the worker processes of a LocalCluster this module starts; their effect on the
speed-up of 2 workers over 1 is measured in docs/benchmarks.md (section 3)."""


class DaskExecutor(Executor):
    """Tasks on a dask.distributed cluster: a new LocalCluster, or an existing scheduler."""

    def __init__(self, workers: int = 2, scheduler: str | None = None) -> None:
        import dask
        from dask.distributed import Client, LocalCluster, as_completed

        super().__init__()
        self._ids: dict[Any, int] = {}
        self._cluster: Any = None
        if scheduler:
            try:
                # a refused connection is known at once: Dask's client would retry it for its whole timeout
                socket.create_connection(scheduler_address(scheduler), timeout=20).close()
                self.dask_client = Client(scheduler, timeout="20s")
            except OSError as err:
                raise UsageError(f"--scheduler: cannot reach a Dask scheduler at {scheduler} ({err})") from None
            self.workers = max(len(self.dask_client.scheduler_info().get("workers", {})), 1)
        else:
            # One single-threaded process per worker; linear algebra pinned to one thread per process.
            # Worker processes ignore SIGINT (inherited: Python installs no KeyboardInterrupt handler for a
            # signal ignored at its start): Ctrl-C interrupts this process alone, which closes the cluster,
            # instead of every worker printing a KeyboardInterrupt traceback.
            previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
            try:
                with dask.config.set(_LOCAL_WORKER_CONFIG):  # read when the worker processes start
                    self._cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                                 dashboard_address=":0", host="127.0.0.1",
                                                 env={"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
                                                      "MKL_NUM_THREADS": "1"})
            finally:
                signal.signal(signal.SIGINT, previous)
            self.dask_client = Client(self._cluster)
            self.workers = workers
        self._scheduler = scheduler
        self._running = as_completed(loop=self.dask_client.loop)  # futures not yet yielded by completed()

    def submit(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> int:
        task_id = self._new_task_id()
        future = self.dask_client.submit(fn, *args, pure=False)
        self._ids[future] = task_id
        self._running.add(future)
        return task_id

    def completed(self) -> Iterator[tuple[int, Any]]:
        while not self._running.is_empty():
            future = next(self._running)
            yield self._ids.pop(future), future.result()

    def __exit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        if self._cluster is not None:
            # The results are in (or, on Ctrl-C, abandoned on purpose): what the local workers log while
            # the cluster closes (a heartbeat to a scheduler already gone, a loaded machine's slow
            # shutdown) is not the user's business, so they log nothing more.
            with contextlib.suppress(Exception):
                self.dask_client.run(_quiet_dask_logs)
        if exc_type is not None and issubclass(exc_type, KeyboardInterrupt) and self._cluster is not None:
            # Interrupted: the CLI says so in one line, so Dask's warnings about cancelled tasks and
            # killed workers are not printed by this process either.
            _quiet_dask_logs()
        if self.dask_client is not None:
            self.dask_client.close()
        if self._cluster is not None:
            self._cluster.close()

    def describe(self) -> str:
        return f"Dask scheduler {self._scheduler}" if self._scheduler else f"Dask LocalCluster, {self.workers} workers"


WORKERS_PER_CORE = 4
"""A LocalCluster may have at most this many worker processes per core of the machine (more only compete)."""
SCHEDULER_SCHEMES = ("tcp",)
"""Address schemes ``--scheduler`` accepts (``tls://`` needs certificates, ``ucx://`` a UCX build; neither is set up)."""


def check_executor(workers: int, scheduler: str | None, field: str = "--workers") -> None:
    """Called before a command takes its output folder's lock: UsageError unless ``workers`` is in
    1..WORKERS_PER_CORE x the cores (``field`` names where it came from) and ``scheduler``, when given,
    is an address ``tcp://HOST:PORT`` (or ``HOST:PORT``)."""
    limit = WORKERS_PER_CORE * default_workers()
    if not 1 <= workers <= limit:
        raise UsageError(f"{field}: {workers} workers; allowed: 1 to {limit} ({WORKERS_PER_CORE} per core of the "
                         f"{default_workers()} this process may use)")
    if scheduler is not None:
        scheduler_address(scheduler)


def scheduler_address(scheduler: str) -> tuple[str, int]:
    """(host, port) of the Dask scheduler address ``tcp://HOST:PORT`` (or ``HOST:PORT``); UsageError for
    anything else. Called by :func:`check_executor` and before connecting to the scheduler."""
    scheme, sep, rest = scheduler.partition("://")
    if not sep:
        scheme, rest = "tcp", scheduler
    host, _, port = rest.rpartition(":")
    if scheme not in SCHEDULER_SCHEMES or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise UsageError(f"--scheduler: {scheduler!r} is not a Dask scheduler address; allowed: "
                         "tcp://HOST:PORT or HOST:PORT (tls:// and ucx:// are not supported)")
    return host.strip("[]"), int(port)


def _quiet_dask_logs() -> None:
    """Nothing from Dask's loggers from now on but critical failures (in the process that calls it):
    called in the local workers before the cluster is closed, and here when a run is interrupted.
    ERROR was not enough: a worker whose heartbeat finds the scheduler closed logs at ERROR."""
    logging.getLogger("distributed").setLevel(logging.CRITICAL)


def make_executor(workers: int = 1, scheduler: str | None = None) -> Executor:
    """Serial for one worker and no scheduler; Dask otherwise (:func:`check_executor` first)."""
    check_executor(workers, scheduler)
    if scheduler is None and workers == 1:
        return Executor()
    return DaskExecutor(workers=workers, scheduler=scheduler)


def default_workers() -> int:
    """The number of cores this process may use."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
