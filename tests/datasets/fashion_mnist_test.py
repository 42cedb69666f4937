"""Tests of the Fashion-MNIST sources: IDX files, `keras.datasets`."""

import os
import struct

import keras
import numpy as np
import pytest

from keras_affine_div import datasets
from keras_affine_div.datasets import fashion_mnist
from tests.datasets import common

# Nothing here depends on the Keras backend: run once (conftest.py).
pytestmark = pytest.mark.backend_independent


@pytest.mark.parametrize("gzipped", [True, False], ids=["gzip", "plain"])
def test_fashion_mnist_from_idx_files(tmp_path, gzipped):
    root = common.write_idx_folder(tmp_path / "fm", gzipped=gzipped)
    ds = datasets.load(
        "fashion_mnist",
        data_dir=root,
        validation_split=0.25,
        cache_dir=tmp_path / "cache",
    )
    assert ds.name == "fashion_mnist"
    assert ds.label == "Fashion-MNIST"
    assert ds.source == os.path.realpath(root)
    assert ds.class_names == datasets.FASHION_MNIST_CLASS_NAMES
    assert ds.input_shape == (28, 28, 1)
    assert (len(ds.x_train), len(ds.x_val), len(ds.x_test)) == (15, 5, 6)
    assert ds.x_test.dtype == np.float32 and ds.y_test.dtype == np.int32
    np.testing.assert_array_equal(ds.y_test, np.arange(6) % 10)
    # Pixel values code the label: their order is the label order.
    for x, y in ((ds.x_train, ds.y_train), (ds.x_test, ds.y_test)):
        code = x[:, 0, -1, 0]
        assert np.all(np.diff(code[np.argsort(y, kind="stable")]) >= -1e-5)
    np.testing.assert_allclose(
        ds.x_train.std(axis=(0, 1, 2), dtype=np.float64), 1.0, atol=1e-5
    )


def test_fashion_mnist_system_dir_is_the_default(tmp_path, monkeypatch):
    root = common.write_idx_folder(tmp_path / "system")
    monkeypatch.setattr(fashion_mnist, "SYSTEM_DIR", root)
    ds = datasets.load("fashion_mnist", cache_dir=tmp_path / "cache")
    assert ds.source == os.path.realpath(root)
    assert len(ds.x_test) == 6


def test_fashion_mnist_falls_back_to_keras_datasets(tmp_path, monkeypatch):
    monkeypatch.setattr(fashion_mnist, "SYSTEM_DIR", str(tmp_path / "absent"))
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, (12, 28, 28), dtype=np.uint8)
    y = np.arange(12, dtype=np.uint8) % 10
    monkeypatch.setattr(
        keras.datasets.fashion_mnist,
        "load_data",
        lambda: ((x, y), (x[:4], y[:4])),
    )
    ds = datasets.load("fashion_mnist", cache_dir=tmp_path / "cache")
    assert ds.source == "keras.datasets"
    assert ds.input_shape == (28, 28, 1)
    np.testing.assert_array_equal(ds.y_test, [0, 1, 2, 3])


def test_fashion_mnist_download_failure(tmp_path, monkeypatch):
    monkeypatch.setattr(fashion_mnist, "SYSTEM_DIR", str(tmp_path / "absent"))

    def offline():
        raise Exception("URL fetch failure")

    monkeypatch.setattr(keras.datasets.fashion_mnist, "load_data", offline)
    with pytest.raises(
        datasets.DataUnavailableError,
        match=r"URL fetch failure.*dataset-fashion-mnist.*data_dir.*"
        r"Received: data_dir=None",
    ):
        datasets.load("fashion_mnist", cache_dir=tmp_path / "cache")
    assert not (tmp_path / "cache").exists()


@pytest.mark.skipif(
    not os.path.isdir(datasets.FASHION_MNIST_SYSTEM_DIR),
    reason="Debian's dataset-fashion-mnist is not installed",
)
def test_real_fashion_mnist(tmp_path):
    ds = datasets.load(
        "fashion_mnist",
        max_train_samples=1000,
        max_test_samples=200,
        cache_dir=tmp_path,
    )
    assert (len(ds.x_train), len(ds.x_val), len(ds.x_test)) == (900, 100, 200)
    assert ds.input_shape == (28, 28, 1)
    assert set(np.unique(ds.y_test)) <= set(range(10))
    assert len(np.unique(ds.y_train)) == 10


def test_fashion_mnist_missing_dir(tmp_path):
    with pytest.raises(
        FileNotFoundError,
        match=r"Fashion-MNIST folder does not exist.*Received: data_dir=",
    ):
        datasets.load("fashion_mnist", data_dir=tmp_path / "nowhere")


def test_fashion_mnist_missing_files(tmp_path):
    root = common.write_idx_folder(tmp_path / "fm")
    os.remove(os.path.join(root, "t10k-labels-idx1-ubyte.gz"))
    with pytest.raises(
        FileNotFoundError,
        match=r"it lacks t10k-labels-idx1-ubyte. Received: data_dir=",
    ):
        datasets.load("fashion_mnist", data_dir=root, cache_dir=tmp_path)


def test_fashion_mnist_bad_idx_files(tmp_path):
    root = common.write_idx_folder(tmp_path / "fm", gzipped=False)
    labels = os.path.join(root, "t10k-labels-idx1-ubyte")
    with open(labels, "wb") as f:
        f.write(b"\x00\x00\x0d\x01" + struct.pack(">I", 6) + bytes(6))
    with pytest.raises(
        ValueError,
        match=r"Expected an IDX file of unsigned bytes.*Received: path=.*"
        r"t10k-labels-idx1-ubyte",
    ):
        datasets.load("fashion_mnist", data_dir=root, cache_dir=tmp_path)
    with open(labels, "wb") as f:
        f.write(common.idx_bytes(np.zeros(6, np.uint8))[:-1])
    with pytest.raises(
        ValueError,
        match=r"Expected 6 bytes of data for the IDX shape \(6,\); found 5",
    ):
        datasets.load("fashion_mnist", data_dir=root, cache_dir=tmp_path)
    with open(labels, "wb") as f:
        f.write(common.idx_bytes(np.zeros(5, np.uint8)))
    with pytest.raises(
        ValueError,
        match=r"Expected test images of rank 3 and as many rank-1 labels; "
        r"got shapes \(6, 28, 28\) and \(5,\). Received: data_dir=",
    ):
        datasets.load("fashion_mnist", data_dir=root, cache_dir=tmp_path)
