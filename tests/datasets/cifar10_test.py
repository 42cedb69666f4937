"""Tests of the CIFAR-10 sources: image folder, tfds, `keras.datasets`."""

import os
import socket
import time

import keras
import numpy as np
import pytest

from keras_affine_div import datasets
from keras_affine_div.datasets import _tfds
from keras_affine_div.datasets import cifar10
from tests.testing import CIFAR10_JPEG_COPY

# Nothing here depends on the Keras backend: run once (conftest.py).
pytestmark = pytest.mark.backend_independent

# The image folder.


def test_folder_from_environment(image_folder, tmp_path, monkeypatch):
    monkeypatch.setenv(datasets.CIFAR10_DIR_ENV, image_folder)
    monkeypatch.setenv(datasets.CACHE_DIR_ENV, str(tmp_path / "env_cache"))
    ds = datasets.load("cifar10")
    assert ds.source == os.path.realpath(image_folder)
    assert len(ds.x_test) == 20
    assert len(list((tmp_path / "env_cache").glob("cifar10-*.npz"))) == 1


def test_missing_data_dir(tmp_path, monkeypatch):
    missing = str(tmp_path / "nowhere")
    with pytest.raises(
        FileNotFoundError,
        match=r"image folder does not exist.*Received: data_dir=",
    ):
        datasets.load("cifar10", data_dir=missing, cache_dir=tmp_path)
    monkeypatch.setenv(datasets.CIFAR10_DIR_ENV, missing)
    with pytest.raises(
        FileNotFoundError,
        match=r"Received: KERAS_AFFINE_DIV_CIFAR10_DIR=",
    ):
        datasets.load("cifar10", cache_dir=tmp_path)


@pytest.mark.skipif(
    not os.path.isdir(CIFAR10_JPEG_COPY),
    reason="the CIFAR-10 JPEG copy is not here",
)
def test_real_cifar10_jpeg_copy_subset(tmp_path):
    # Links to a few files of each class: the real JPEGs, without decoding
    # all 60,000 of them.
    for split, count in (("train", 6), ("test", 2)):
        for class_name in datasets.CIFAR10_CLASS_NAMES:
            src = os.path.join(CIFAR10_JPEG_COPY, split, class_name)
            dst = tmp_path / "copy" / split / class_name
            dst.mkdir(parents=True)
            for name in sorted(os.listdir(src))[:count]:
                os.symlink(os.path.join(src, name), dst / name)
    ds = datasets.load(
        "cifar10",
        data_dir=tmp_path / "copy",
        validation_split=0.5,
        cache_dir=tmp_path / "cache",
    )
    assert ds.label == "CIFAR-10 (JPEG copy)"
    assert (len(ds.x_train), len(ds.x_val), len(ds.x_test)) == (30, 30, 20)
    assert ds.input_shape == (32, 32, 3)
    assert np.bincount(ds.y_test, minlength=10).tolist() == [2] * 10
    # Natural images: every channel varies within an image.
    assert np.all(ds.x_train.std(axis=(1, 2)) > 0.05)


# tfds. Offline, `tfds.load("cifar10")` retries for minutes: these tests
# mock it, or the network probe.


def _offline(monkeypatch):
    """Makes the download host unreachable; returns the probed addresses."""
    probes = []

    def unreachable(address, timeout):
        probes.append(address)
        return False

    monkeypatch.setattr(datasets, "_can_reach", unreachable)
    return probes


def test_tfds_path_with_mock_data(tmp_path, monkeypatch):
    tfds = pytest.importorskip("tensorflow_datasets")
    monkeypatch.setattr(datasets, "_can_reach", lambda *args: True)
    with tfds.testing.mock_data(num_examples=20):
        ds = datasets.load(
            "cifar10",
            cache_dir=tmp_path / "cache",
            tfds_data_dir=str(tmp_path / "tfds"),
        )
    assert ds.label == "CIFAR-10"
    assert ds.source == "tfds"
    assert ds.input_shape == (32, 32, 3)
    assert (len(ds.x_train), len(ds.x_val), len(ds.x_test)) == (18, 2, 20)
    assert ds.x_train.dtype == np.float32 and ds.y_train.dtype == np.int32
    assert set(ds.y_test.tolist()) <= set(range(10))
    np.testing.assert_allclose(
        ds.x_train.std(axis=(0, 1, 2), dtype=np.float64), 1.0, atol=1e-5
    )


def test_tfds_offline_fails_fast(tmp_path, monkeypatch):
    pytest.importorskip("tensorflow_datasets")
    probes = _offline(monkeypatch)
    start = time.perf_counter()
    with pytest.raises(
        datasets.DataUnavailableError,
        match=r"KERAS_AFFINE_DIV_CIFAR10_DIR.*internet access.*"
        r"Received: tfds_data_dir=",
    ):
        datasets.load(
            "cifar10",
            cache_dir=tmp_path / "cache",
            tfds_data_dir=str(tmp_path / "empty"),
        )
    assert time.perf_counter() - start < 10
    assert probes == [datasets.CIFAR10_DOWNLOAD_HOST]
    assert not (tmp_path / "cache").exists()


# `keras.datasets`, where TensorFlow Datasets is not installed.


def _mock_keras_cifar10(
    monkeypatch, n_train=30, n_test=12, channels_first=False
):
    calls = []
    rng = np.random.default_rng(0)
    shape = (3, 32, 32) if channels_first else (32, 32, 3)
    x_train = rng.integers(0, 256, (n_train, *shape), dtype=np.uint8)
    x_test = rng.integers(0, 256, (n_test, *shape), dtype=np.uint8)
    y_train = (np.arange(n_train) % 10).reshape(-1, 1).astype(np.uint8)
    y_test = (np.arange(n_test) % 10).reshape(-1, 1).astype(np.uint8)

    def load_data():
        calls.append(1)
        return (x_train, y_train), (x_test, y_test)

    monkeypatch.setattr(_tfds, "installed", lambda: False)
    monkeypatch.setattr(keras.datasets.cifar10, "load_data", load_data)
    return calls, x_train, x_test


@pytest.mark.parametrize(
    "channels_first", [False, True], ids=["channels_last", "channels_first"]
)
def test_keras_datasets_path_without_tfds(
    tmp_path, monkeypatch, channels_first
):
    calls, x_train, x_test = _mock_keras_cifar10(
        monkeypatch, channels_first=channels_first
    )
    monkeypatch.setattr(datasets, "_can_reach", lambda *args: True)
    ds = datasets.load(
        "cifar10", cache_dir=tmp_path / "cache", validation_split=0.2
    )
    assert (ds.label, ds.source) == ("CIFAR-10", "keras.datasets")
    assert ds.input_shape == (32, 32, 3)
    assert (len(ds.x_train), len(ds.x_val), len(ds.x_test)) == (24, 6, 12)
    assert ds.x_train.dtype == np.float32 and ds.y_train.dtype == np.int32
    assert ds.class_names == datasets.CIFAR10_CLASS_NAMES
    # The same standardisation as every source: the training images'.
    np.testing.assert_allclose(
        ds.x_train.mean(axis=(0, 1, 2), dtype=np.float64), 0.0, atol=1e-5
    )
    np.testing.assert_allclose(
        ds.x_train.std(axis=(0, 1, 2), dtype=np.float64), 1.0, atol=1e-5
    )
    # A NumPy reference of the split and standardisation: the seeded
    # hold-out, statistics of the training images, the test split in its
    # original order, all in NHWC.
    nhwc = (
        (lambda x: x.transpose(0, 2, 3, 1)) if channels_first else (lambda x: x)
    )
    rng = np.random.default_rng(0)
    train_perm = rng.permutation(30)
    rng.permutation(12)
    train_idx = train_perm[6:]
    train = nhwc(x_train)[train_idx].astype(np.float64)
    mean = train.mean(axis=(0, 1, 2))
    std = train.std(axis=(0, 1, 2))
    np.testing.assert_allclose(
        ds.x_test, (nhwc(x_test) - mean) / std, rtol=1e-4, atol=1e-4
    )
    np.testing.assert_array_equal(ds.y_test, np.arange(12) % 10)
    np.testing.assert_array_equal(ds.y_train, train_idx % 10)
    # Cached: the second load downloads nothing.
    again = datasets.load(
        "cifar10", cache_dir=tmp_path / "cache", validation_split=0.2
    )
    assert len(calls) == 1
    np.testing.assert_array_equal(again.x_train, ds.x_train)


def test_keras_datasets_offline_fails_fast(tmp_path, monkeypatch):
    calls, _, _ = _mock_keras_cifar10(monkeypatch)
    probes = _offline(monkeypatch)
    start = time.perf_counter()
    with pytest.raises(
        datasets.DataUnavailableError,
        match=r"CIFAR-10 is not cached and its download host "
        r"www.cs.toronto.edu cannot be reached.*"
        r"keras.datasets.cifar10.load_data\(\)` can download it. "
        r"Received: data_dir=None",
    ):
        datasets.load("cifar10", cache_dir=tmp_path / "cache")
    assert time.perf_counter() - start < 10
    assert probes == [datasets.CIFAR10_DOWNLOAD_HOST] and calls == []
    assert not (tmp_path / "cache").exists()


# The network probe.


def test_can_reach_a_listening_and_a_closed_port():
    assert datasets._can_reach is cifar10.can_reach
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        address = server.getsockname()
        assert cifar10.can_reach(address, 2.0)
    start = time.perf_counter()
    assert not cifar10.can_reach(address, 2.0)
    assert time.perf_counter() - start < 2.5
