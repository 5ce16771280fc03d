"""Regret references (cached on disk) and the vector codec."""

import json

import numpy as np
import pytest
from ConfigSpace import Configuration

from metaopt.core.benchmarks import get_benchmark
from metaopt.core.references import Reference, _cache_path, compute_reference, get_reference
from metaopt.core.space_codec import SpaceCodec, _native

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


USER_BENCHMARK = '''
from metaopt.core.benchmarks.base import Evaluation
from metaopt.core.benchmarks.synthetic import SyntheticBenchmark

POWER = {shift}


class Shifted(SyntheticBenchmark):
    def evaluate(self, instance, configs, fidelities):
        ev = super().evaluate(instance, configs, fidelities)
        return Evaluation(abs(ev.loss) ** POWER, ev.cost, ev.targets)

    def best_known(self, instance):
        return None


def make():
    return Shifted("rosenbrock")
'''


def _user_run(tmp_path, shift, cache):
    """`metaopt run` of a python: benchmark whose module raises the loss to the power ``shift``; the run's normalized regret."""
    import os
    import subprocess
    import sys

    (tmp_path / "mybench.py").write_text(USER_BENCHMARK.format(shift=shift))
    out = tmp_path / f"run-{shift}-{cache.name}"
    done = subprocess.run([sys.executable, "-m", "metaopt", "run", "--benchmark", "python:mybench:make",
                           "--instance", "0", "--optimizer", "rs", "--budget", "2d", "--quiet", "--out", str(out)],
                          cwd=tmp_path, env={**os.environ, "METAOPT_CACHE_DIR": str(cache)},
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return json.loads((out / "summary.json").read_text())["normalized_regret"]


def test_an_edited_user_benchmark_gets_new_references(tmp_path):
    """The references of a python: benchmark depend on the code defining it: after an edit of its module,
    a run normalizes against references of the edited benchmark (those a fresh cache computes), not the
    cached ones of the old code."""
    shared = tmp_path / "cache"
    before = _user_run(tmp_path, 1.0, shared)
    after = _user_run(tmp_path, 0.5, shared)
    fresh = _user_run(tmp_path, 0.5, tmp_path / "fresh-cache")
    assert after == fresh and after != before


def test_the_cache_key_covers_space_fidelity_and_instance():

    from metaopt.core.references import cache_key

    inst = BENCH.test_instances[0]
    key = cache_key(BENCH, inst)
    assert key["fingerprint"] == BENCH.fingerprint() and key["instance"] == inst
    assert "x0" in key["space"] or len(key["space"]) > 20
    assert cache_key(BENCH, BENCH.test_instances[1]) != key
    assert _cache_path(BENCH, inst) != _cache_path(BENCH, BENCH.test_instances[1])


def test_yahpo_fingerprint_covers_the_data_files(yahpo_data, tmp_path):
    import shutil

    from metaopt.core.benchmarks.yahpo import YahpoBenchmark

    shutil.copytree(yahpo_data / "lcbench", tmp_path / "lcbench")
    same = YahpoBenchmark("lcbench", tmp_path).fingerprint()
    assert same == get_benchmark("yahpo:lcbench", yahpo_data).fingerprint()
    encoding = tmp_path / "lcbench" / "encoding.json"
    encoding.chmod(0o644)
    encoding.write_text(encoding.read_text() + " ")
    assert YahpoBenchmark("lcbench", tmp_path).fingerprint() != same


def test_a_synthetic_model_edit_keys_new_references(monkeypatch):
    """The synthetic families' losses come from three source files; an edit of any of them (here: its
    digest) must give another cache file, not the reference computed for the old model."""
    from metaopt.core.benchmarks import synthetic

    inst = BENCH.test_instances[0]
    before = _cache_path(BENCH, inst)
    digest = synthetic.code_digest
    for module in ("metaopt.core.benchmarks.synthetic", "metaopt.core.benchmarks.synthetic_cells",
                   "metaopt.core.benchmarks.synthetic_gaps"):
        monkeypatch.setattr(synthetic, "code_digest",
                            lambda m, edited=module: "edited" if m.__name__ == edited else digest(m))
        synthetic._model_digest.cache_clear()  # a new process: the files are read once per process
        assert _cache_path(BENCH, inst) != before, module
    monkeypatch.setattr(synthetic, "code_digest", digest)
    synthetic._model_digest.cache_clear()
    assert _cache_path(BENCH, inst) == before


@pytest.mark.parametrize("damage", [
    lambda ref: {**ref, "y_min": ref["y_max"], "y_max": ref["y_min"]},  # swapped
    lambda ref: {**ref, "y_max": float("nan")},
    lambda ref: {**ref, "y_min": float("-inf")},
    lambda ref: {**ref, "y_min": ref["y_max"]},  # no span
], ids=["swapped", "nan", "-inf", "equal"])
def test_a_damaged_cached_reference_is_recomputed_with_a_warning(capsys, damage):
    inst = BENCH.test_instances[2]
    ref = get_reference(BENCH, inst)
    path = _cache_path(BENCH, inst)
    path.write_text(json.dumps(damage(json.loads(path.read_text()))))
    capsys.readouterr()
    assert get_reference(BENCH, inst) == ref
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("metaopt: warning: ") and str(path) in err[0]
    assert get_reference(BENCH, inst) == ref and not capsys.readouterr().err  # the file was replaced


def test_a_reference_without_a_span_is_refused_in_one_line():
    from metaopt.core.errors import UsageError
    from metaopt.core.references import check_reference

    with pytest.raises(UsageError, match="y_min < y_max"):
        check_reference(Reference(1.0, 1.0), "x instance 0")
    with pytest.raises(UsageError, match="not finite"):
        check_reference(Reference(float("nan"), 1.0), "x instance 0")
