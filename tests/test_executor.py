"""Executors: tasks submitted while results come in are run too; map_unordered gives positions."""

import operator

import pytest

from metaopt.core.errors import UsageError
from metaopt.core.executor import Executor, make_executor


def _chain(executor) -> dict[int, int]:
    """Submit 0..2; each result below 10 submits its successor + 10 (a task that depends on a result)."""
    origin = {executor.submit(operator.add, (x, 0)): x for x in range(3)}
    results = {}
    for task_id, value in executor.completed():
        results[origin.pop(task_id)] = value
        if value < 10:
            origin[executor.submit(operator.add, (value, 10))] = value + 10
    assert not origin
    return results


def test_serial_executor_runs_tasks_submitted_during_iteration_in_order():
    executor = Executor()
    assert _chain(executor) == {0: 0, 1: 1, 2: 2, 10: 10, 11: 11, 12: 12}
    assert list(executor.map_unordered([(operator.mul, (2, 3)), (operator.neg, (4,))])) == [(0, 6), (1, -4)]


def test_dask_executor_runs_tasks_submitted_during_iteration():
    with make_executor(2) as executor:
        assert executor.dask_client is not None
        assert _chain(executor) == {0: 0, 1: 1, 2: 2, 10: 10, 11: 11, 12: 12}
        assert sorted(executor.map_unordered([(operator.mul, (2, 3)), (operator.neg, (4,))])) == [(0, 6), (1, -4)]


def test_zero_workers_is_a_usage_error():
    with pytest.raises(UsageError, match="0 workers; allowed: 1 to"):
        make_executor(0)
