"""CIFAR-10 and Fashion-MNIST as standardised NumPy arrays.

`load(name)` returns a `Dataset`: train, validation and test arrays, images
`float32` NHWC standardised per channel with the statistics of the returned
training images, labels `int32` class ids. The validation images are held
out of the original training split (deterministically for a seed); the test
split is kept for final numbers only.

Sources, in order of preference:

- CIFAR-10: an image folder (`train/<class>/*`, `test/<class>/*`, the ten
  CIFAR-10 class names) given as `data_dir` or through the environment
  variable `KERAS_AFFINE_DIV_CIFAR10_DIR`, read with
  `tfds.folder_dataset.ImageFolder`; otherwise `tfds.load("cifar10")`, which
  downloads the original once, or, where TensorFlow or TensorFlow Datasets
  is not installed (a JAX or PyTorch install),
  `keras.datasets.cifar10.load_data()`, which downloads the same original.
- Fashion-MNIST: the original IDX files in `data_dir`, else in
  `/usr/share/datasets/fashion-mnist/` (Debian's `dataset-fashion-mnist`),
  else `keras.datasets.fashion_mnist.load_data()` (downloads once).

The decoded `uint8` arrays of the full train and test splits are cached on
disk (`cache_dir`, default `$KERAS_AFFINE_DIV_CACHE` or
`~/.cache/keras_affine_div`), so a second load takes seconds; the
validation hold-out, the subsets and the standardisation are applied after
the cache. TensorFlow and TensorFlow Datasets are imported only when an
image folder or tfds is read, so the module works on every Keras backend.
"""

import dataclasses
import gzip
import hashlib
import json
import numbers
import os
import socket
import struct
import tempfile
import threading

import numpy as np

NAMES = ("cifar10", "fashion_mnist")

CIFAR10_CLASS_NAMES = (
    "airplane",
    "automobile",
    "bird",
    "cat",
    "deer",
    "dog",
    "frog",
    "horse",
    "ship",
    "truck",
)
FASHION_MNIST_CLASS_NAMES = (
    "T-shirt/top",
    "Trouser",
    "Pullover",
    "Dress",
    "Coat",
    "Sandal",
    "Shirt",
    "Sneaker",
    "Bag",
    "Ankle boot",
)

CIFAR10_DIR_ENV = "KERAS_AFFINE_DIV_CIFAR10_DIR"
CACHE_DIR_ENV = "KERAS_AFFINE_DIV_CACHE"
FASHION_MNIST_SYSTEM_DIR = "/usr/share/datasets/fashion-mnist"
FASHION_MNIST_FILES = {
    "x_train": "train-images-idx3-ubyte",
    "y_train": "train-labels-idx1-ubyte",
    "x_test": "t10k-images-idx3-ubyte",
    "y_test": "t10k-labels-idx1-ubyte",
}

# The host `tfds.load("cifar10")` downloads from, probed before a download
# so that an offline machine fails at once instead of retrying for minutes.
CIFAR10_DOWNLOAD_HOST = ("www.cs.toronto.edu", 443)
PROBE_TIMEOUT_S = 5.0

_IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png")
_JPEG_EXTENSIONS = (".jpg", ".jpeg")
_CIFAR10_IMAGE_SHAPE = (32, 32, 3)
# Bumped whenever the cached arrays change meaning.
_CACHE_FORMAT = 1


class DataUnavailableError(RuntimeError):
    """The data cannot be obtained here: offline and no local copy."""


@dataclasses.dataclass(frozen=True, eq=False)
class Dataset:
    """Train, validation and test arrays of one dataset.

    Images are `float32`, NHWC, standardised per channel with the mean and
    standard deviation of `x_train`; labels are `int32` class ids indexing
    `class_names`.

    Attributes:
        name: the dataset's name, `"cifar10"` or `"fashion_mnist"`.
        label: how results on it are to be labelled, e.g. `"CIFAR-10"`,
            `"CIFAR-10 (JPEG copy)"` or `"Fashion-MNIST"`.
        x_train: training images, `(n_train, height, width, channels)`.
        y_train: training labels, `(n_train,)`.
        x_val: validation images, held out of the original training split.
        y_val: validation labels.
        x_test: test images: for final numbers only.
        y_test: test labels.
        class_names: tuple of str, the class names in label order.
        source: where the images were read from: a directory, `"tfds"` or
            `"keras.datasets"`.
    """

    name: str
    label: str
    x_train: np.ndarray = dataclasses.field(repr=False)
    y_train: np.ndarray = dataclasses.field(repr=False)
    x_val: np.ndarray = dataclasses.field(repr=False)
    y_val: np.ndarray = dataclasses.field(repr=False)
    x_test: np.ndarray = dataclasses.field(repr=False)
    y_test: np.ndarray = dataclasses.field(repr=False)
    class_names: tuple
    source: str = ""

    @property
    def num_classes(self):
        """int: the number of classes."""
        return len(self.class_names)

    @property
    def input_shape(self):
        """tuple: the shape of one image, e.g. `(32, 32, 3)`."""
        return tuple(int(d) for d in self.x_train.shape[1:])


def load(
    name,
    data_dir=None,
    validation_split=0.1,
    seed=0,
    max_train_samples=None,
    max_test_samples=None,
    cache_dir=None,
    tfds_data_dir=None,
):
    """Loads a dataset as standardised train, validation and test arrays.

    The validation images are a seeded random `validation_split` of the
    training images considered; `max_train_samples` first draws a seeded
    random subset of the original training split (so the validation set
    shrinks with it), `max_test_samples` one of the test split. The same
    arguments always give the same arrays.

    Args:
        name: `"cifar10"` or `"fashion_mnist"`.
        data_dir: a local copy to read. For CIFAR-10, an image folder with
            `train/` and `test/` sub-folders holding one folder per class,
            named as the CIFAR-10 classes (`airplane` ... `truck`), of 32x32
            JPEG or PNG images; results on JPEG files are labelled
            `"CIFAR-10 (JPEG copy)"`, on PNG files `"CIFAR-10 (PNG copy)"`.
            For Fashion-MNIST, a folder with the four original IDX files
            (optionally gzipped). Defaults to `None`: for CIFAR-10 the
            folder in `$KERAS_AFFINE_DIV_CIFAR10_DIR` if set, else
            `tfds.load("cifar10")`; for Fashion-MNIST
            `/usr/share/datasets/fashion-mnist` if present, else
            `keras.datasets.fashion_mnist.load_data()`.
        validation_split: float in (0, 1), the fraction of the training
            images held out for validation. Defaults to `0.1`.
        seed: non-negative int, seeds the validation hold-out and the
            subsets. Defaults to `0`.
        max_train_samples: positive int or `None`, the number of images
            drawn from the original training split (at most all of them)
            before the validation hold-out. Defaults to `None` (all of
            them).
        max_test_samples: positive int or `None`, the number of test images
            drawn (at most all of them). Defaults to `None` (all of them).
        cache_dir: directory of the decoded-array cache. Defaults to `None`:
            `$KERAS_AFFINE_DIV_CACHE` if set, else
            `~/.cache/keras_affine_div`.
        tfds_data_dir: the `data_dir` handed to `tfds.load` when CIFAR-10
            comes from tfds. Defaults to `None` (tfds' own default).

    Returns:
        Dataset: the arrays, class names and label.

    Raises:
        ValueError: for an unknown `name`, a bad split, seed or subset
            size, or a `data_dir` that does not have the expected layout or
            images.
        TypeError: for a `seed` or subset size that is not an integer.
        FileNotFoundError: if `data_dir` (or a file it must hold) does not
            exist.
        DataUnavailableError: if the data must be downloaded and cannot be.
        ImportError: if a CIFAR-10 image folder is to be read and
            TensorFlow or TensorFlow Datasets is not installed (without
            them, CIFAR-10 downloads through `keras.datasets`).
    """
    if name not in NAMES:
        raise ValueError(
            "Received an invalid value for argument `name`. Expected one of "
            f"{', '.join(repr(n) for n in NAMES)}. Received: name={name!r}"
        )
    if (
        isinstance(validation_split, bool)
        or not isinstance(validation_split, numbers.Real)
        or not 0.0 < validation_split < 1.0
    ):
        raise ValueError(
            "Received an invalid value for argument `validation_split`. "
            "Expected a float strictly between 0 and 1. "
            f"Received: validation_split={validation_split!r}"
        )
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        raise TypeError(
            "Received an invalid type for argument `seed`. Expected a "
            f"non-negative integer. Received: seed={seed!r}"
        )
    if seed < 0:
        raise ValueError(
            "Received an invalid value for argument `seed`. Expected a "
            f"non-negative integer. Received: seed={seed!r}"
        )
    for arg_name, value in (
        ("max_train_samples", max_train_samples),
        ("max_test_samples", max_test_samples),
    ):
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise TypeError(
                f"Received an invalid type for argument `{arg_name}`. "
                f"Expected a positive integer or None. "
                f"Received: {arg_name}={value!r}"
            )
        if value <= 0:
            raise ValueError(
                f"Received an invalid value for argument `{arg_name}`. "
                f"Expected a positive integer or None. "
                f"Received: {arg_name}={value!r}"
            )
    if max_train_samples is not None and max_train_samples < 2:
        raise ValueError(
            "Received an invalid value for argument `max_train_samples`. "
            "Expected at least 2, one training and one validation image. "
            f"Received: max_train_samples={max_train_samples!r}"
        )
    cache_dir = _cache_dir(cache_dir)

    if name == "cifar10":
        raw = _load_cifar10(data_dir, cache_dir, tfds_data_dir)
    else:
        raw = _load_fashion_mnist(data_dir, cache_dir)
    return _split_and_standardize(
        raw,
        validation_split=float(validation_split),
        seed=int(seed),
        max_train_samples=max_train_samples,
        max_test_samples=max_test_samples,
    )


# Sources. Each returns a `_Raw` of the full decoded uint8 splits.


@dataclasses.dataclass(frozen=True, eq=False)
class _Raw:
    name: str
    label: str
    source: str
    class_names: tuple
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray


def _load_cifar10(data_dir, cache_dir, tfds_data_dir):
    if data_dir is None:
        data_dir = os.environ.get(CIFAR10_DIR_ENV) or None
        arg_name = CIFAR10_DIR_ENV
    else:
        arg_name = "data_dir"
    if data_dir is not None:
        return _load_cifar10_image_folder(
            os.fspath(data_dir), arg_name, cache_dir
        )
    if _tfds_installed():
        return _load_cifar10_tfds(cache_dir, tfds_data_dir)
    return _load_cifar10_keras(cache_dir)


def _tfds_installed():
    """Whether TensorFlow and TensorFlow Datasets can be imported."""
    import importlib.util

    return all(
        importlib.util.find_spec(name) is not None
        for name in ("tensorflow", "tensorflow_datasets")
    )


def _load_cifar10_keras(cache_dir):
    """CIFAR-10 through `keras.datasets`, for installs without TensorFlow."""

    def decode():
        if not _can_reach(CIFAR10_DOWNLOAD_HOST, PROBE_TIMEOUT_S):
            raise DataUnavailableError(
                "CIFAR-10 is not cached and its download host "
                f"{CIFAR10_DOWNLOAD_HOST[0]} cannot be reached. Either pass "
                "`data_dir` (or set the environment variable "
                f"{CIFAR10_DIR_ENV}) to a local CIFAR-10 image folder "
                "(`train/<class>/*.jpg`, `test/<class>/*.jpg`; reading it "
                "needs TensorFlow Datasets), or run once with internet "
                "access so that `keras.datasets.cifar10.load_data()` can "
                "download it. Received: data_dir=None"
            )
        import keras

        (x_train, y_train), (x_test, y_test) = (
            keras.datasets.cifar10.load_data()
        )
        return (
            _channels_last(x_train),
            np.asarray(y_train).reshape(-1),
            _channels_last(x_test),
            np.asarray(y_test).reshape(-1),
        )

    arrays = _cached(
        cache_dir, key=("cifar10", "keras.datasets"), decode=decode
    )
    return _Raw(
        "cifar10", "CIFAR-10", "keras.datasets", CIFAR10_CLASS_NAMES, *arrays
    )


def _channels_last(x):
    """`keras.datasets` follows `image_data_format()`; ours is NHWC."""
    x = np.asarray(x)
    if x.ndim == 4 and x.shape[1] == 3 and x.shape[-1] != 3:
        x = x.transpose(0, 2, 3, 1)
    return np.ascontiguousarray(x, dtype=np.uint8)


def _load_cifar10_image_folder(data_dir, arg_name, cache_dir):
    root = os.path.realpath(os.path.expanduser(data_dir))
    if not os.path.isdir(root):
        raise FileNotFoundError(
            f"The CIFAR-10 image folder does not exist. Expected a directory "
            f"with `train/` and `test/` sub-folders. "
            f"Received: {arg_name}={data_dir!r}"
        )
    listing = _list_image_folder(root, data_dir, arg_name)
    fingerprint = hashlib.sha256(
        json.dumps(listing, sort_keys=True).encode()
    ).hexdigest()
    extensions = {
        os.path.splitext(f)[1].lower()
        for split in listing.values()
        for files in split.values()
        for f, _, _ in files
    }
    if extensions & set(_JPEG_EXTENSIONS):
        label = "CIFAR-10 (JPEG copy)"
    else:
        label = "CIFAR-10 (PNG copy)"

    arrays = _cached(
        cache_dir,
        key=("cifar10", "image_folder", root, fingerprint),
        decode=lambda: _decode_image_folder(root),
    )
    return _Raw("cifar10", label, root, CIFAR10_CLASS_NAMES, *arrays)


def _list_image_folder(root, data_dir, arg_name):
    """Checks the layout; returns `{split: {class: [(file, size, mtime)]}}`."""
    missing = [
        split
        for split in ("train", "test")
        if not os.path.isdir(os.path.join(root, split))
    ]
    if missing:
        raise ValueError(
            "Expected an image folder with `train/` and `test/` sub-folders, "
            "each holding one folder per class; it lacks "
            f"{', '.join(s + '/' for s in missing)}. "
            f"Received: {arg_name}={data_dir!r}"
        )
    listing = {}
    for split in ("train", "test"):
        split_dir = os.path.join(root, split)
        classes = sorted(e.name for e in os.scandir(split_dir) if e.is_dir())
        if tuple(classes) != CIFAR10_CLASS_NAMES:
            raise ValueError(
                f"Expected `{split}/` to hold one folder per CIFAR-10 class, "
                f"named {', '.join(CIFAR10_CLASS_NAMES)}; found "
                f"{classes}. Received: {arg_name}={data_dir!r}"
            )
        listing[split] = {}
        for class_name in classes:
            files = []
            for entry in os.scandir(os.path.join(split_dir, class_name)):
                if entry.name.lower().endswith(_IMAGE_EXTENSIONS):
                    stat = entry.stat()
                    files.append((entry.name, stat.st_size, stat.st_mtime_ns))
            if not files:
                raise ValueError(
                    f"Expected JPEG or PNG images in `{split}/{class_name}/`; "
                    f"found none. Received: {arg_name}={data_dir!r}"
                )
            listing[split][class_name] = sorted(files)
    return listing


def _decode_image_folder(root):
    """Decodes a CIFAR-10 image folder with tfds' `ImageFolder`.

    Returns `(x_train, y_train, x_test, y_test)`: uint8 images in the
    folder's file order (sorted per class, then shuffled with a fixed seed by
    `ImageFolder`) and int labels in CIFAR-10 order (sorted class names).
    """
    tf, tfds = _import_tfds()
    builder = tfds.folder_dataset.ImageFolder(root)
    arrays = ()
    for split in ("train", "test"):
        ds = builder.as_dataset(split=split, as_supervised=True)
        ds = ds.map(
            lambda image, label: (
                tf.ensure_shape(image, _CIFAR10_IMAGE_SHAPE),
                label,
            ),
            num_parallel_calls=tf.data.AUTOTUNE,
        )
        try:
            arrays += _to_numpy(ds)
        except tf.errors.InvalidArgumentError as e:
            raise ValueError(
                "Expected CIFAR-10 images of shape "
                f"{_CIFAR10_IMAGE_SHAPE} (32x32 RGB) in `{split}/`; decoding "
                f"failed with: {e.message.splitlines()[0]} "
                f"Received: data_dir={root!r}"
            ) from None
    return tuple(arrays)


def _to_numpy(ds):
    """`(images, labels)` NumPy arrays of a supervised `tf.data.Dataset`."""
    _, tfds = _import_tfds()
    images, labels = [], []
    for x, y in tfds.as_numpy(ds.batch(2048)):
        images.append(x)
        labels.append(y)
    return np.concatenate(images), np.concatenate(labels)


def _import_tfds():
    """Returns `(tensorflow, tensorflow_datasets)`, imported on first use."""
    try:
        import tensorflow as tf
        import tensorflow_datasets as tfds
    except ImportError as e:
        raise ImportError(
            "Reading CIFAR-10 (from tfds or an image folder) requires "
            "TensorFlow and TensorFlow Datasets. Install them with "
            '`pip install "keras-affine-div[tensorflow,tuning]"`. '
            f"Received: {type(e).__name__}: {e}"
        ) from e
    return tf, tfds


def _load_cifar10_tfds(cache_dir, tfds_data_dir):
    _, tfds = _import_tfds()
    builder = tfds.builder("cifar10", data_dir=tfds_data_dir)
    full_name = builder.info.full_name

    def decode():
        if not builder.is_prepared() and not _can_reach(
            CIFAR10_DOWNLOAD_HOST, PROBE_TIMEOUT_S
        ):
            raise DataUnavailableError(
                "CIFAR-10 is not prepared in the TensorFlow Datasets data "
                "directory and its download host "
                f"{CIFAR10_DOWNLOAD_HOST[0]} cannot be reached. Either pass "
                "`data_dir` (or set the environment variable "
                f"{CIFAR10_DIR_ENV}) to a local CIFAR-10 image folder "
                "(`train/<class>/*.jpg`, `test/<class>/*.jpg`), or run once "
                "with internet access so that `tfds.load('cifar10')` can "
                "download it. Received: "
                f"tfds_data_dir={str(builder.data_dir_root)!r}"
            )
        train, test = tfds.load(
            "cifar10",
            split=["train", "test"],
            as_supervised=True,
            data_dir=tfds_data_dir,
        )
        return _to_numpy(train) + _to_numpy(test)

    arrays = _cached(
        cache_dir, key=("cifar10", "tfds", full_name), decode=decode
    )
    return _Raw("cifar10", "CIFAR-10", "tfds", CIFAR10_CLASS_NAMES, *arrays)


def _can_reach(address, timeout):
    """Whether a TCP connection to `address` opens within `timeout` seconds.

    Name resolution ignores socket timeouts, so the attempt runs in a daemon
    thread that is abandoned after `timeout`.
    """
    result = []

    def connect():
        try:
            socket.create_connection(address, timeout=timeout).close()
            result.append(True)
        except OSError:
            result.append(False)

    thread = threading.Thread(target=connect, daemon=True)
    thread.start()
    thread.join(timeout)
    return bool(result and result[0])


def _load_fashion_mnist(data_dir, cache_dir):
    if data_dir is None and os.path.isdir(FASHION_MNIST_SYSTEM_DIR):
        data_dir = FASHION_MNIST_SYSTEM_DIR
    if data_dir is not None:
        return _load_fashion_mnist_idx(os.fspath(data_dir), cache_dir)

    def decode():
        import keras

        try:
            (x_train, y_train), (x_test, y_test) = (
                keras.datasets.fashion_mnist.load_data()
            )
        except Exception as e:
            raise DataUnavailableError(
                "Fashion-MNIST could not be downloaded by "
                "`keras.datasets.fashion_mnist.load_data()` "
                f"({type(e).__name__}: {e}). Either install Debian's "
                "`dataset-fashion-mnist` package (IDX files in "
                f"{FASHION_MNIST_SYSTEM_DIR}), pass `data_dir` to a folder "
                "with the four IDX files, or get internet access. "
                "Received: data_dir=None"
            ) from e
        return x_train[..., None], y_train, x_test[..., None], y_test

    arrays = _cached(
        cache_dir, key=("fashion_mnist", "keras.datasets"), decode=decode
    )
    return _Raw(
        "fashion_mnist",
        "Fashion-MNIST",
        "keras.datasets",
        FASHION_MNIST_CLASS_NAMES,
        *arrays,
    )


def _load_fashion_mnist_idx(data_dir, cache_dir):
    root = os.path.realpath(os.path.expanduser(data_dir))
    if not os.path.isdir(root):
        raise FileNotFoundError(
            "The Fashion-MNIST folder does not exist. Expected a directory "
            "with the IDX files "
            f"{', '.join(FASHION_MNIST_FILES.values())} (optionally .gz). "
            f"Received: data_dir={data_dir!r}"
        )
    paths = {}
    for key, stem in FASHION_MNIST_FILES.items():
        for candidate in (stem, stem + ".gz"):
            if os.path.isfile(os.path.join(root, candidate)):
                paths[key] = os.path.join(root, candidate)
                break
    missing = [s for k, s in FASHION_MNIST_FILES.items() if k not in paths]
    if missing:
        raise FileNotFoundError(
            "Expected a Fashion-MNIST folder with the IDX files "
            f"{', '.join(FASHION_MNIST_FILES.values())} (optionally .gz); "
            f"it lacks {', '.join(missing)}. Received: data_dir={data_dir!r}"
        )
    fingerprint = [
        (os.path.basename(p), os.path.getsize(p), os.stat(p).st_mtime_ns)
        for p in paths.values()
    ]

    def decode():
        arrays = {key: _read_idx(path) for key, path in paths.items()}
        for split in ("train", "test"):
            x, y = arrays["x_" + split], arrays["y_" + split]
            if x.ndim != 3 or y.ndim != 1 or len(x) != len(y):
                raise ValueError(
                    f"Expected {split} images of rank 3 and as many rank-1 "
                    f"labels; got shapes {x.shape} and {y.shape}. "
                    f"Received: data_dir={data_dir!r}"
                )
        return (
            arrays["x_train"][..., None],
            arrays["y_train"],
            arrays["x_test"][..., None],
            arrays["y_test"],
        )

    arrays = _cached(
        cache_dir,
        key=("fashion_mnist", "idx", root, fingerprint),
        decode=decode,
    )
    return _Raw(
        "fashion_mnist",
        "Fashion-MNIST",
        root,
        FASHION_MNIST_CLASS_NAMES,
        *arrays,
    )


def _read_idx(path):
    """Reads an unsigned-byte IDX file (optionally gzipped) into an array."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    if len(data) < 4 or data[:2] != b"\x00\x00" or data[2] != 0x08:
        raise ValueError(
            "Expected an IDX file of unsigned bytes (magic 0x0000080N). "
            f"Received: path={path!r}"
        )
    ndim = data[3]
    header = 4 + 4 * ndim
    shape = struct.unpack(f">{ndim}I", data[4:header])
    if len(data) - header != int(np.prod(shape)):
        raise ValueError(
            f"Expected {int(np.prod(shape))} bytes of data for the IDX shape "
            f"{shape}; found {len(data) - header}. Received: path={path!r}"
        )
    return np.frombuffer(data, dtype=np.uint8, offset=header).reshape(shape)


# Cache.


def _cache_dir(cache_dir):
    if cache_dir is None:
        cache_dir = os.environ.get(CACHE_DIR_ENV) or os.path.join(
            os.path.expanduser("~"), ".cache", "keras_affine_div"
        )
    return os.fspath(cache_dir)


def _cache_path(cache_dir, key):
    digest = hashlib.sha256(
        json.dumps([_CACHE_FORMAT, key]).encode()
    ).hexdigest()[:20]
    return os.path.join(cache_dir, f"{key[0]}-{digest}.npz")


def _cached(cache_dir, key, decode):
    """Returns `(x_train, y_train, x_test, y_test)` from the cache or `decode`.

    A cache file that cannot be read is decoded again and overwritten. The
    file is written to a temporary name and renamed, so that an interrupted
    write never leaves a partial cache behind.
    """
    path = _cache_path(cache_dir, key)
    names = ("x_train", "y_train", "x_test", "y_test")
    if os.path.isfile(path):
        try:
            with np.load(path, allow_pickle=False) as f:
                return tuple(f[n] for n in names)
        except Exception:
            pass
    x_train, y_train, x_test, y_test = decode()
    arrays = (
        np.ascontiguousarray(x_train, dtype=np.uint8),
        np.asarray(y_train, dtype=np.int32),
        np.ascontiguousarray(x_test, dtype=np.uint8),
        np.asarray(y_test, dtype=np.int32),
    )
    os.makedirs(cache_dir, exist_ok=True)
    fd, tmp = tempfile.mkstemp(
        dir=cache_dir, prefix=os.path.basename(path) + ".", suffix=".tmp"
    )
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, **dict(zip(names, arrays)))
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
    return arrays


# Split, subset, standardise.


def _split_and_standardize(
    raw, validation_split, seed, max_train_samples, max_test_samples
):
    rng = np.random.default_rng(seed)
    train_perm = rng.permutation(len(raw.x_train))
    test_perm = rng.permutation(len(raw.x_test))
    if max_train_samples is not None:
        train_perm = train_perm[:max_train_samples]
    if max_test_samples is not None:
        # Keep the original order: a subset, not a shuffle.
        test_perm = np.sort(test_perm[:max_test_samples])
    else:
        test_perm = np.arange(len(raw.x_test))
    num_val = max(1, int(round(validation_split * len(train_perm))))
    if num_val >= len(train_perm):
        raise ValueError(
            "Expected at least one training image left after the validation "
            f"hold-out of {num_val} of {len(train_perm)} images. Received: "
            f"validation_split={validation_split!r}, "
            f"max_train_samples={max_train_samples!r}"
        )
    val_idx, train_idx = train_perm[:num_val], train_perm[num_val:]

    x_train = raw.x_train[train_idx]
    mean, std = _channel_stats(x_train)
    return Dataset(
        name=raw.name,
        label=raw.label,
        x_train=_standardize(x_train, mean, std),
        y_train=raw.y_train[train_idx],
        x_val=_standardize(raw.x_train[val_idx], mean, std),
        y_val=raw.y_train[val_idx],
        x_test=_standardize(raw.x_test[test_perm], mean, std),
        y_test=raw.y_test[test_perm],
        class_names=tuple(raw.class_names),
        source=raw.source,
    )


def _channel_stats(x):
    """Per-channel mean and standard deviation of uint8 NHWC images.

    Computed exactly from a 256-bin histogram per channel, without a float
    copy of the images.
    """
    values = np.arange(256, dtype=np.float64)
    mean, std = [], []
    for c in range(x.shape[-1]):
        counts = np.bincount(x[..., c].ravel(), minlength=256)
        m = counts @ values / counts.sum()
        var = counts @ (values - m) ** 2 / counts.sum()
        mean.append(m)
        std.append(np.sqrt(var))
    std = np.maximum(np.asarray(std), 1e-6)
    return np.asarray(mean, np.float32), std.astype(np.float32)


def _standardize(x, mean, std):
    out = x.astype(np.float32)
    out -= mean
    out /= std
    return out
