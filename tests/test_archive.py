"""The archive: appended batches read back as one array per field, and arrays handed out never change."""

import numpy as np
import pytest

from metaopt.core.archive import Archive


def _batch(archive: Archive, n: int, start: int, fidelity=1.0) -> None:
    archive.add(np.full((n, archive.dim), float(start)), config_id=np.arange(start, start + n), batch=np.full(n, start),
                stage=np.zeros(n, dtype=int), bracket=np.zeros(n, dtype=int), fidelity=np.full(n, fidelity),
                loss=np.arange(n) / 10.0, cost=np.ones(n))


def test_fields_read_as_the_concatenated_batches():
    archive = Archive(3)
    sizes = [1, 0, 5, 17, 2, 40, 3]
    start = 0
    for n in sizes:
        _batch(archive, n, start)
        start += n
    assert len(archive) == sum(sizes) and archive.X.shape == (sum(sizes), 3)
    np.testing.assert_array_equal(archive.column("config_id"), np.arange(sum(sizes)))
    np.testing.assert_array_equal(archive.loss, np.concatenate([np.arange(n) / 10.0 for n in sizes]))
    assert archive.column("config_id").dtype == np.arange(1).dtype
    assert np.isnan(archive.column("stop_statistic")).all()
    with pytest.raises(ValueError, match="read-only"):
        archive.loss[0] = 1.0


def test_arrays_handed_out_do_not_change_with_later_batches_or_annotations():
    archive = Archive(2)
    _batch(archive, 3, 0)
    X, loss, stop = archive.X, archive.loss.copy(), archive.column("stop_statistic")
    before = X.copy()
    archive.annotate_last("stop_statistic", 0.5)
    for i in range(20):  # grows the buffers several times
        _batch(archive, 4, 3 + 4 * i)
    archive.annotate_last("stop_statistic", 0.25)
    np.testing.assert_array_equal(X, before)
    np.testing.assert_array_equal(archive.loss[:3], loss)
    assert np.isnan(stop).all()
    np.testing.assert_array_equal(archive.column("stop_statistic")[:3], 0.5)
    np.testing.assert_array_equal(archive.column("stop_statistic")[-4:], 0.25)
    assert np.isnan(archive.column("stop_statistic")[3:-4]).all()


def test_a_wider_type_in_a_later_batch_widens_the_field():
    archive = Archive(1)
    _batch(archive, 2, 0)
    archive.add(np.zeros((1, 1)), config_id=np.array([2.5]), batch=np.array([1]), stage=np.array([0]),
                bracket=np.array([0]), fidelity=np.array([1.0]), loss=np.array([0.0]), cost=np.array([1.0]))
    np.testing.assert_array_equal(archive.column("config_id"), [0.0, 1.0, 2.5])
    assert archive.column("config_id").dtype == float


def test_an_empty_archive_has_empty_fields():
    archive = Archive(4)
    assert archive.X.shape == (0, 4) and archive.loss.shape == (0,)
    with pytest.raises(KeyError):
        archive.column("nonsense")
