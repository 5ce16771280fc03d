"""The report's meta-level picture (analysis.search_curves): the incumbent after each trial and the
CPU time spent so far."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from metaopt.analysis.search_curves import incumbent_trajectory, run_cpu_seconds


def test_cpu_time_is_the_process_time_where_recorded_else_the_wall_time():
    assert run_cpu_seconds({"summary": {"wall_time_s": 9.0, "cpu_time_s": 2.0}}) == 2.0
    assert run_cpu_seconds({"summary": {"wall_time_s": 9.0}}) == 9.0  # runs stored before CPU times were
    assert run_cpu_seconds({}) == 0.0


def test_the_incumbent_is_the_best_mean_over_all_instances_seeds_averaged_first():
    trials = pd.DataFrame([
        {"hash": "a", "instance": "1", "seed": 1, "objective": 0.4},
        {"hash": "b", "instance": "1", "seed": 1, "objective": 0.1},  # b: not yet on every instance
        {"hash": "a", "instance": "2", "seed": 1, "objective": 0.2},  # a complete: (0.4 + 0.2) / 2
        {"hash": "b", "instance": "2", "seed": 1, "objective": 0.3},  # b complete: 0.2, the incumbent
        {"hash": "b", "instance": "2", "seed": 7, "objective": 0.5},  # b's instance 2: (0.3 + 0.5) / 2
        {"hash": "b", "instance": "2", "seed": 7, "objective": 0.5},  # the same run again: counted as the
    ])  # archive counts it (a trial), its CPU once
    cpu = {("a", "1", 1): 3600.0, ("b", "1", 1): 1800.0, ("a", "2", 1): 1800.0, ("b", "2", 1): 3600.0,
           ("b", "2", 7): 3600.0}
    curve = incumbent_trajectory(trials, 2, cpu)
    assert list(curve["trial"]) == [1, 2, 3, 4, 5, 6]
    assert np.isnan(curve["best"][:2]).all()
    assert list(curve["best"][2:]) == pytest.approx([0.3, 0.2, (0.1 + 0.4) / 2, (0.1 + 1.3 / 3) / 2])
    assert list(curve["cpu_hours"]) == pytest.approx([1.0, 1.5, 2.0, 3.0, 4.0, 4.0])
