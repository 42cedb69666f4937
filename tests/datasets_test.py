import gzip
import os
import socket
import struct
import subprocess
import sys
import time

import keras
import numpy as np
import pytest

from keras_affine_div import datasets
from tests.testing import CIFAR10_JPEG_COPY

# Fixture makers.


def _cifar_image(class_id, index, size=32):
    """A 32x32 RGB image: channel 0 codes the class, channel 1 the index."""
    image = np.empty((size, size, 3), dtype=np.uint8)
    image[..., 0] = 10 + 20 * class_id
    image[..., 1] = 10 + 20 * index
    image[..., 2] = np.arange(size * size).reshape(size, size) % 256
    return image


def write_image_folder(
    root,
    num_train=4,
    num_test=2,
    ext=".png",
    classes=datasets.CIFAR10_CLASS_NAMES,
    size=32,
):
    """Writes a tiny CIFAR-10-like image folder; returns its path."""
    import tensorflow as tf

    encode = tf.io.encode_png if ext == ".png" else tf.io.encode_jpeg
    for split, count in (("train", num_train), ("test", num_test)):
        for class_id, class_name in enumerate(classes):
            folder = os.path.join(root, split, class_name)
            os.makedirs(folder, exist_ok=True)
            for index in range(count):
                data = encode(_cifar_image(class_id, index, size)).numpy()
                with open(os.path.join(folder, f"{index:04d}{ext}"), "wb") as f:
                    f.write(data)
    return str(root)


def _idx_bytes(array):
    header = struct.pack(">BBBB", 0, 0, 8, array.ndim)
    header += struct.pack(f">{array.ndim}I", *array.shape)
    return header + np.ascontiguousarray(array, dtype=np.uint8).tobytes()


def write_idx_folder(root, num_train=20, num_test=6, gzipped=True):
    """Writes tiny Fashion-MNIST IDX files; pixel values code the label."""
    os.makedirs(root, exist_ok=True)
    arrays = {}
    for split, count in (("train", num_train), ("test", num_test)):
        y = (np.arange(count) % 10).astype(np.uint8)
        x = np.broadcast_to(
            (10 + 20 * y)[:, None, None], (count, 28, 28)
        ).copy()
        x[:, :, :14] //= 2
        arrays["x_" + split], arrays["y_" + split] = x, y
    for key, stem in datasets.FASHION_MNIST_FILES.items():
        data = _idx_bytes(arrays[key])
        if gzipped:
            with gzip.open(os.path.join(root, stem + ".gz"), "wb") as f:
                f.write(data)
        else:
            with open(os.path.join(root, stem), "wb") as f:
                f.write(data)
    return str(root)


@pytest.fixture(scope="module")
def image_folder(tmp_path_factory):
    return write_image_folder(tmp_path_factory.mktemp("cifar_png"))


@pytest.fixture(autouse=True)
def _no_environment(monkeypatch):
    monkeypatch.delenv(datasets.CIFAR10_DIR_ENV, raising=False)
    monkeypatch.delenv(datasets.CACHE_DIR_ENV, raising=False)


def _raw_class_code(x):
    """Channel 0 of standardised images, per image (it codes the class)."""
    return x[..., 0].reshape(len(x), -1).mean(axis=1)


# Image folder.


def test_image_folder_arrays(image_folder, tmp_path):
    ds = datasets.load(
        "cifar10",
        data_dir=image_folder,
        validation_split=0.25,
        cache_dir=tmp_path,
    )
    assert ds.name == "cifar10"
    assert ds.label == "CIFAR-10 (PNG copy)"
    assert ds.source == os.path.realpath(image_folder)
    assert ds.class_names == datasets.CIFAR10_CLASS_NAMES
    assert ds.num_classes == 10
    assert ds.input_shape == (32, 32, 3)
    assert ds.x_train.shape == (30, 32, 32, 3)
    assert ds.x_val.shape == (10, 32, 32, 3)
    assert ds.x_test.shape == (20, 32, 32, 3)
    assert ds.y_train.shape == (30,) and ds.y_val.shape == (10,)
    assert ds.y_test.shape == (20,)
    for x in (ds.x_train, ds.x_val, ds.x_test):
        assert x.dtype == np.float32
    for y in (ds.y_train, ds.y_val, ds.y_test):
        assert y.dtype == np.int32
    assert np.bincount(ds.y_test, minlength=10).tolist() == [2] * 10
    assert (
        np.bincount(
            np.concatenate([ds.y_train, ds.y_val]), minlength=10
        ).tolist()
        == [4] * 10
    )
    assert "x_train" not in repr(ds)


def test_standardised_with_train_statistics(image_folder, tmp_path):
    ds = datasets.load("cifar10", data_dir=image_folder, cache_dir=tmp_path)
    mean = ds.x_train.mean(axis=(0, 1, 2), dtype=np.float64)
    std = ds.x_train.std(axis=(0, 1, 2), dtype=np.float64)
    np.testing.assert_allclose(mean, 0.0, atol=1e-5)
    np.testing.assert_allclose(std, 1.0, atol=1e-5)
    # Validation and test images use the same (train) statistics: an image
    # equal to a training image is standardised to the same values.
    train = {tuple(np.round(x[0, 0], 4)): x for x in ds.x_train}
    matched = [x for x in ds.x_test if tuple(np.round(x[0, 0], 4)) in train]
    assert matched
    for x in matched:
        np.testing.assert_allclose(x, train[tuple(np.round(x[0, 0], 4))])


def test_labels_follow_class_order(image_folder, tmp_path):
    ds = datasets.load("cifar10", data_dir=image_folder, cache_dir=tmp_path)
    for x, y in (
        (ds.x_train, ds.y_train),
        (ds.x_val, ds.y_val),
        (ds.x_test, ds.y_test),
    ):
        code = _raw_class_code(x)
        # Channel 0 is 10 + 20 * class id: increasing with the label.
        per_class = {}
        for c, label in zip(code, y):
            per_class.setdefault(int(label), set()).add(round(float(c), 4))
        assert all(len(v) == 1 for v in per_class.values()), per_class
        ordered = [per_class[k].pop() for k in sorted(per_class)]
        assert ordered == sorted(ordered)
        assert len(set(ordered)) == len(ordered)


def _image_ids(x):
    """Channels 0 and 1 of each image (class and index): unique per split."""
    return {(round(float(a), 4), round(float(b), 4)) for a, b in x[:, 0, 0, :2]}


def test_split_is_disjoint_and_deterministic(image_folder, tmp_path):
    a = datasets.load(
        "cifar10", data_dir=image_folder, seed=3, cache_dir=tmp_path
    )
    b = datasets.load(
        "cifar10", data_dir=image_folder, seed=3, cache_dir=tmp_path
    )
    c = datasets.load(
        "cifar10", data_dir=image_folder, seed=4, cache_dir=tmp_path
    )
    assert len(a.x_val) == 4 and len(a.x_train) == 36
    train_ids, val_ids = _image_ids(a.x_train), _image_ids(a.x_val)
    assert len(train_ids) == 36 and len(val_ids) == 4
    assert not train_ids & val_ids
    for name in ("x_train", "y_train", "x_val", "y_val", "x_test", "y_test"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    # Another seed holds out other images; the test split is unchanged.
    assert _image_ids(c.x_val) != val_ids
    np.testing.assert_array_equal(a.y_test, c.y_test)


def test_max_samples_take_seeded_subsets(image_folder, tmp_path):
    kwargs = dict(
        data_dir=image_folder,
        validation_split=0.25,
        max_train_samples=20,
        max_test_samples=7,
        cache_dir=tmp_path,
    )
    a = datasets.load("cifar10", **kwargs)
    b = datasets.load("cifar10", **kwargs)
    assert (len(a.x_train), len(a.x_val), len(a.x_test)) == (15, 5, 7)
    np.testing.assert_array_equal(a.y_train, b.y_train)
    np.testing.assert_array_equal(a.y_test, b.y_test)
    assert not _image_ids(a.x_train) & _image_ids(a.x_val)
    # Statistics of the subset it returns: still standardised.
    np.testing.assert_allclose(
        a.x_train.mean(axis=(0, 1, 2), dtype=np.float64), 0.0, atol=1e-5
    )
    c = datasets.load("cifar10", **{**kwargs, "seed": 1})
    assert _image_ids(a.x_val) != _image_ids(c.x_val)


def test_jpeg_folder_is_labelled_jpeg_copy(tmp_path):
    root = write_image_folder(tmp_path / "jpeg", 2, 1, ext=".jpg")
    ds = datasets.load("cifar10", data_dir=root, cache_dir=tmp_path / "c")
    assert ds.label == "CIFAR-10 (JPEG copy)"
    assert ds.x_train.shape[1:] == (32, 32, 3)
    assert len(ds.x_test) == 10


def test_folder_from_environment(image_folder, tmp_path, monkeypatch):
    monkeypatch.setenv(datasets.CIFAR10_DIR_ENV, image_folder)
    monkeypatch.setenv(datasets.CACHE_DIR_ENV, str(tmp_path / "env_cache"))
    ds = datasets.load("cifar10")
    assert ds.source == os.path.realpath(image_folder)
    assert len(ds.x_test) == 20
    assert len(list((tmp_path / "env_cache").glob("cifar10-*.npz"))) == 1


# Cache.


def test_second_load_reads_the_cache(image_folder, tmp_path, monkeypatch):
    first = datasets.load("cifar10", data_dir=image_folder, cache_dir=tmp_path)
    files = list(tmp_path.iterdir())
    assert [f.suffix for f in files] == [".npz"]

    def fail(*args, **kwargs):
        raise AssertionError("decoded again instead of reading the cache")

    monkeypatch.setattr(datasets, "_decode_image_folder", fail)
    second = datasets.load("cifar10", data_dir=image_folder, cache_dir=tmp_path)
    np.testing.assert_array_equal(first.x_train, second.x_train)
    np.testing.assert_array_equal(first.y_test, second.y_test)
    # A changed folder is another cache entry: it is decoded again.
    changed = write_image_folder(tmp_path / "changed", 1, 1)
    with pytest.raises(AssertionError, match="decoded again"):
        datasets.load("cifar10", data_dir=changed, cache_dir=tmp_path)


def test_corrupt_cache_is_decoded_again(image_folder, tmp_path, monkeypatch):
    first = datasets.load("cifar10", data_dir=image_folder, cache_dir=tmp_path)
    (path,) = tmp_path.glob("*.npz")
    path.write_bytes(b"not an npz file")
    calls = []
    decode = datasets._decode_image_folder

    def counting(root):
        calls.append(root)
        return decode(root)

    monkeypatch.setattr(datasets, "_decode_image_folder", counting)
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

    monkeypatch.setattr(datasets.np, "savez", interrupted)
    with pytest.raises(KeyboardInterrupt):
        datasets.load("cifar10", data_dir=image_folder, cache_dir=tmp_path)
    assert list(tmp_path.iterdir()) == []


# CIFAR-10 through tfds.


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
    probes = []

    def unreachable(address, timeout):
        probes.append(address)
        return False

    monkeypatch.setattr(datasets, "_can_reach", unreachable)
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


# CIFAR-10 through keras.datasets, where TensorFlow Datasets is not
# installed.


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

    monkeypatch.setattr(datasets, "_tfds_installed", lambda: False)
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
    probes = []

    def unreachable(address, timeout):
        probes.append(address)
        return False

    monkeypatch.setattr(datasets, "_can_reach", unreachable)
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


def test_tfds_installed():
    import importlib.util

    expected = all(
        importlib.util.find_spec(m) is not None
        for m in ("tensorflow", "tensorflow_datasets")
    )
    assert datasets._tfds_installed() is expected


def test_import_is_light():
    heavy = ["tensorflow_datasets", "keras_tuner"]
    if keras.backend.backend() != "tensorflow":
        heavy.append("tensorflow")
    code = (
        "import sys; import keras_affine_div.datasets; "
        f"print([m for m in {heavy!r} if m in sys.modules])"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        env={**os.environ, "KERAS_BACKEND": keras.backend.backend()},
    )
    assert out.stdout.strip().splitlines()[-1] == "[]"


@pytest.mark.parametrize("module", ["tensorflow", "tensorflow_datasets"])
def test_missing_tensorflow_datasets(
    image_folder, tmp_path, monkeypatch, module
):
    monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(
        ImportError,
        match=r"requires TensorFlow and TensorFlow Datasets. Install them "
        r"with `pip install \"keras-affine-div\[tensorflow,tuning\]\"`. "
        rf"Received: .*{module}",
    ):
        datasets.load("cifar10", data_dir=image_folder, cache_dir=tmp_path)


def test_can_reach_a_listening_and_a_closed_port():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        address = server.getsockname()
        assert datasets._can_reach(address, 2.0)
    start = time.perf_counter()
    assert not datasets._can_reach(address, 2.0)
    assert time.perf_counter() - start < 2.5


# Fashion-MNIST.


@pytest.mark.parametrize("gzipped", [True, False], ids=["gzip", "plain"])
def test_fashion_mnist_from_idx_files(tmp_path, gzipped):
    root = write_idx_folder(tmp_path / "fm", gzipped=gzipped)
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
    root = write_idx_folder(tmp_path / "system")
    monkeypatch.setattr(datasets, "FASHION_MNIST_SYSTEM_DIR", root)
    ds = datasets.load("fashion_mnist", cache_dir=tmp_path / "cache")
    assert ds.source == os.path.realpath(root)
    assert len(ds.x_test) == 6


def test_fashion_mnist_falls_back_to_keras_datasets(tmp_path, monkeypatch):
    monkeypatch.setattr(
        datasets, "FASHION_MNIST_SYSTEM_DIR", str(tmp_path / "absent")
    )
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
    monkeypatch.setattr(
        datasets, "FASHION_MNIST_SYSTEM_DIR", str(tmp_path / "absent")
    )

    def offline():
        raise Exception("URL fetch failure")

    monkeypatch.setattr(keras.datasets.fashion_mnist, "load_data", offline)
    with pytest.raises(
        datasets.DataUnavailableError,
        match=r"URL fetch failure.*dataset-fashion-mnist.*data_dir.*"
        r"Received: data_dir=None",
    ):
        datasets.load("fashion_mnist", cache_dir=tmp_path / "cache")


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


# The real CIFAR-10 JPEG copy.


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


# Errors.


def test_unknown_name():
    with pytest.raises(
        ValueError,
        match=r"Expected one of 'cifar10', 'fashion_mnist'. "
        r"Received: name='mnist'",
    ):
        datasets.load("mnist")


@pytest.mark.parametrize("value", [0, 1, 1.5, -0.1, True, "0.1"])
def test_bad_validation_split(value):
    with pytest.raises(
        ValueError,
        match=r"strictly between 0 and 1. Received: validation_split=",
    ):
        datasets.load("cifar10", validation_split=value)


def test_bad_seed():
    with pytest.raises(
        TypeError, match=r"Expected a non-negative integer. Received: seed='a'"
    ):
        datasets.load("cifar10", seed="a")
    with pytest.raises(
        ValueError, match=r"Expected a non-negative integer. Received: seed=-1"
    ):
        datasets.load("cifar10", seed=-1)


def test_subset_larger_than_the_split(image_folder, tmp_path):
    ds = datasets.load(
        "cifar10",
        data_dir=image_folder,
        max_train_samples=1000,
        max_test_samples=1000,
        cache_dir=tmp_path,
    )
    assert (len(ds.x_train), len(ds.x_val), len(ds.x_test)) == (36, 4, 20)


@pytest.mark.parametrize(
    "kwargs,error,message",
    [
        (
            {"max_train_samples": 2.5},
            TypeError,
            r"Expected a positive integer or None. "
            r"Received: max_train_samples=2.5",
        ),
        (
            {"max_test_samples": 0},
            ValueError,
            r"Expected a positive integer or None. "
            r"Received: max_test_samples=0",
        ),
        (
            {"max_train_samples": 1},
            ValueError,
            r"Expected at least 2, one training and one validation image. "
            r"Received: max_train_samples=1",
        ),
    ],
    ids=["train_float", "test_zero", "train_one"],
)
def test_bad_subset_sizes(kwargs, error, message):
    with pytest.raises(error, match=message):
        datasets.load("cifar10", **kwargs)


def test_no_training_image_left(image_folder, tmp_path):
    with pytest.raises(
        ValueError,
        match=r"at least one training image left after the validation "
        r"hold-out of 2 of 2 images. Received: validation_split=0.9, "
        r"max_train_samples=2",
    ):
        datasets.load(
            "cifar10",
            data_dir=image_folder,
            validation_split=0.9,
            max_train_samples=2,
            cache_dir=tmp_path,
        )


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


def test_data_dir_without_splits(tmp_path):
    (tmp_path / "data" / "train" / "cat").mkdir(parents=True)
    with pytest.raises(
        ValueError,
        match=r"`train/` and `test/` sub-folders.*it lacks test/. "
        r"Received: data_dir=",
    ):
        datasets.load("cifar10", data_dir=tmp_path / "data", cache_dir=tmp_path)


def test_data_dir_with_other_classes(tmp_path):
    root = write_image_folder(tmp_path / "data", 1, 1, classes=("cat", "dog"))
    with pytest.raises(
        ValueError,
        match=r"one folder per CIFAR-10 class, named airplane, .*truck; "
        r"found \['cat', 'dog'\]. Received: data_dir=",
    ):
        datasets.load("cifar10", data_dir=root, cache_dir=tmp_path)


def test_data_dir_with_an_empty_class(tmp_path):
    root = write_image_folder(tmp_path / "data", 1, 1)
    for name in os.listdir(os.path.join(root, "test", "ship")):
        os.remove(os.path.join(root, "test", "ship", name))
    with pytest.raises(
        ValueError,
        match=r"Expected JPEG or PNG images in `test/ship/`; found none. "
        r"Received: data_dir=",
    ):
        datasets.load("cifar10", data_dir=root, cache_dir=tmp_path)


def test_data_dir_with_wrong_image_size(tmp_path):
    root = write_image_folder(tmp_path / "data", 1, 1, size=16)
    with pytest.raises(
        ValueError,
        match=r"Expected CIFAR-10 images of shape \(32, 32, 3\).*in `train/`"
        r".*Received: data_dir=",
    ):
        datasets.load("cifar10", data_dir=root, cache_dir=tmp_path / "c")
    assert not (tmp_path / "c").exists()


def test_fashion_mnist_missing_dir(tmp_path):
    with pytest.raises(
        FileNotFoundError,
        match=r"Fashion-MNIST folder does not exist.*Received: data_dir=",
    ):
        datasets.load("fashion_mnist", data_dir=tmp_path / "nowhere")


def test_fashion_mnist_missing_files(tmp_path):
    root = write_idx_folder(tmp_path / "fm")
    os.remove(os.path.join(root, "t10k-labels-idx1-ubyte.gz"))
    with pytest.raises(
        FileNotFoundError,
        match=r"it lacks t10k-labels-idx1-ubyte. Received: data_dir=",
    ):
        datasets.load("fashion_mnist", data_dir=root, cache_dir=tmp_path)


def test_fashion_mnist_bad_idx_files(tmp_path):
    root = write_idx_folder(tmp_path / "fm", gzipped=False)
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
        f.write(_idx_bytes(np.zeros(6, np.uint8))[:-1])
    with pytest.raises(
        ValueError,
        match=r"Expected 6 bytes of data for the IDX shape \(6,\); found 5",
    ):
        datasets.load("fashion_mnist", data_dir=root, cache_dir=tmp_path)
    with open(labels, "wb") as f:
        f.write(_idx_bytes(np.zeros(5, np.uint8)))
    with pytest.raises(
        ValueError,
        match=r"Expected test images of rank 3 and as many rank-1 labels; "
        r"got shapes \(6, 28, 28\) and \(5,\). Received: data_dir=",
    ):
        datasets.load("fashion_mnist", data_dir=root, cache_dir=tmp_path)
