"""Regret references (cached on disk) and the vector codec."""

import json

import numpy as np
import pytest
from ConfigSpace import Configuration

from metaopt.benchmarks import get_benchmark
from metaopt.references import Reference, _cache_path, compute_reference, get_reference
from metaopt.space_codec import SpaceCodec, _native

BENCH = get_benchmark("synthetic:boosting")


def test_reference_is_computed_once_and_cached():
    inst = BENCH.test_instances[0]
    ref = get_reference(BENCH, inst)
    path = _cache_path(BENCH, inst)
    assert path.exists() and json.loads(path.read_text())["y_max"] == ref.y_max
    assert ref.y_min <= ref.y_max
    assert ref.y_min == pytest.approx(BENCH.best_known(inst))  # the analytic optimum is below any sample
    assert get_reference(BENCH, inst) == ref


def test_corrupt_cache_file_is_recomputed():
    inst = BENCH.test_instances[1]
    ref = get_reference(BENCH, inst)
    _cache_path(BENCH, inst).write_text("{not json")
    assert get_reference(BENCH, inst) == ref


def test_reference_median_of_random_full_fidelity_sample():
    small = compute_reference(BENCH, BENCH.test_instances[0], n=500)
    assert small.n_samples == 500
    assert small.y_min < small.y_max


def test_normalize():
    ref = Reference(1.0, 3.0)
    assert np.allclose(ref.normalize(np.array([1.0, 2.0, 3.0, 0.0])), [0, 0.5, 1, -0.5])


@pytest.mark.parametrize("family", ["mlp", "boosting", "rosenbrock"])
def test_codec_conversion_matches_configspace(family):
    bench = get_benchmark(f"synthetic:{family}")
    codec = SpaceCodec(bench.search_space)
    X = codec.sample_uniform(200, np.random.default_rng(0))
    fast = codec.to_dicts(X)
    slow = [{k: _native(v) for k, v in Configuration(codec.space, vector=row).items()} for row in X]
    assert [set(a) for a in fast] == [set(b) for b in slow]
    for a, b in zip(fast, slow):
        for k in a:
            assert a[k] == pytest.approx(b[k], rel=1e-10) if isinstance(a[k], float) else a[k] == b[k]
    assert np.allclose(np.nan_to_num(codec.to_vector(fast[0]), nan=-1), np.nan_to_num(X[0], nan=-1))


def test_codec_sampling_is_seeded():
    codec = SpaceCodec(BENCH.search_space)
    a = codec.sample_uniform(10, np.random.default_rng(5))
    b = codec.sample_uniform(10, np.random.default_rng(5))
    assert np.array_equal(np.nan_to_num(a, nan=-1), np.nan_to_num(b, nan=-1))
