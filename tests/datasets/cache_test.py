"""Tests of the decoded-array cache."""

import os

import numpy as np
import pytest

from keras_affine_div import datasets
from keras_affine_div.datasets import cache
from keras_affine_div.datasets import image_folder as image_folder_lib
from tests.datasets import common

# Nothing here depends on the Keras backend: run once (conftest.py).
pytestmark = pytest.mark.backend_independent


def test_cache_file_names_are_stable():
    # The names of caches written before: a change here orphans them.
    assert cache.cache_path("/c", ("cifar10", "keras.datasets")) == (
        "/c/cifar10-3a9b51c41a26944e5461.npz"
    )
    assert cache.cache_path(
        "/c", ("fashion_mnist", "idx", "/r", [("a", 1, 2)])
    ) == ("/c/fashion_mnist-8df46a823e94cd3bdc88.npz")


def test_default_cache_dir(tmp_path, monkeypatch):
    assert cache.resolve_cache_dir(None) == os.path.join(
        os.path.expanduser("~"), ".cache", "keras_affine_div"
    )
    monkeypatch.setenv(datasets.CACHE_DIR_ENV, str(tmp_path))
    assert cache.resolve_cache_dir(None) == str(tmp_path)
    assert cache.resolve_cache_dir(tmp_path / "x") == str(tmp_path / "x")


def test_cached_arrays_and_dtypes(tmp_path):
    calls = []

    def decode():
        calls.append(1)
        x = np.arange(24, dtype=np.int64).reshape(2, 2, 2, 3)
        return x, np.array([1, 2], np.uint8), x[:1], np.array([3], np.uint8)

    first = cache.cached(tmp_path / "c", key=("toy", 1), decode=decode)
    second = cache.cached(tmp_path / "c", key=("toy", 1), decode=decode)
    assert len(calls) == 1
    assert [a.dtype for a in first] == [np.uint8, np.int32] * 2
    for a, b in zip(first, second):
        np.testing.assert_array_equal(a, b)
        assert a.dtype == b.dtype
    assert [p.name for p in (tmp_path / "c").iterdir()] == [
        os.path.basename(cache.cache_path(tmp_path / "c", ("toy", 1)))
    ]


def test_second_load_reads_the_cache(image_folder, tmp_path, monkeypatch):
    first = datasets.load("cifar10", data_dir=image_folder, cache_dir=tmp_path)
    files = list(tmp_path.iterdir())
    assert [f.suffix for f in files] == [".npz"]

    def fail(*args, **kwargs):
        raise AssertionError("decoded again instead of reading the cache")

    monkeypatch.setattr(image_folder_lib, "decode", fail)
    second = datasets.load("cifar10", data_dir=image_folder, cache_dir=tmp_path)
    np.testing.assert_array_equal(first.x_train, second.x_train)
    np.testing.assert_array_equal(first.y_test, second.y_test)
    # A changed folder is another cache entry: it is decoded again.
    changed = common.write_image_folder(tmp_path / "changed", 1, 1)
    with pytest.raises(AssertionError, match="decoded again"):
        datasets.load("cifar10", data_dir=changed, cache_dir=tmp_path)


def test_corrupt_cache_is_decoded_again(image_folder, tmp_path, monkeypatch):
    first = datasets.load("cifar10", data_dir=image_folder, cache_dir=tmp_path)
    (path,) = tmp_path.glob("*.npz")
    path.write_bytes(b"not an npz file")
    calls = []
    decode = image_folder_lib.decode

    def counting(root, *args):
        calls.append(root)
        return decode(root, *args)

    monkeypatch.setattr(image_folder_lib, "decode", counting)
    second = datasets.load("cifar10", data_dir=image_folder, cache_dir=tmp_path)
    assert len(calls) == 1
    np.testing.assert_array_equal(first.x_train, second.x_train)
    with np.load(path) as f:
        assert f["x_train"].dtype == np.uint8


def test_interrupted_cache_write_leaves_nothing(
    image_folder, tmp_path, monkeypatch
):
    def interrupted(file, **arrays):
        file.write(b"partial")
        raise KeyboardInterrupt

    monkeypatch.setattr(np, "savez", interrupted)
    with pytest.raises(KeyboardInterrupt):
        datasets.load("cifar10", data_dir=image_folder, cache_dir=tmp_path)
    assert list(tmp_path.iterdir()) == []
