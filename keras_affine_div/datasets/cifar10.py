"""CIFAR-10: from an image folder, from tfds or from `keras.datasets`.

`load_raw` picks the source, in order of preference: an image folder
(`train/<class>/*`, `test/<class>/*`, the ten class names) given as
`data_dir` or through the environment variable
`KERAS_AFFINE_DIV_CIFAR10_DIR`, read with `tfds.folder_dataset.ImageFolder`;
otherwise `tfds.load("cifar10")`, which downloads the original once; or,
where TensorFlow or TensorFlow Datasets is not installed (a JAX or PyTorch
install), `keras.datasets.cifar10.load_data()`, which downloads the same
original. Before a download the host is probed, so that an offline machine
fails at once instead of retrying for minutes.
"""

import os
import socket
import threading

import numpy as np

from keras_affine_div.datasets import _tfds
from keras_affine_div.datasets import cache
from keras_affine_div.datasets import image_folder
from keras_affine_div.datasets.dataset import DataUnavailableError
from keras_affine_div.datasets.dataset import RawSplits

CLASS_NAMES = (
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
DIR_ENV = "KERAS_AFFINE_DIV_CIFAR10_DIR"

# The host `tfds.load("cifar10")` downloads from, probed before a download
# so that an offline machine fails at once instead of retrying for minutes.
DOWNLOAD_HOST = ("www.cs.toronto.edu", 443)
PROBE_TIMEOUT_S = 5.0

_IMAGE_SHAPE = (32, 32, 3)


def load_raw(data_dir, cache_dir, tfds_data_dir, probe):
    """Returns the full CIFAR-10 splits from the preferred source.

    Args:
        data_dir: an image folder, or `None` for the folder in
            `$KERAS_AFFINE_DIV_CIFAR10_DIR` if set, else tfds (or
            `keras.datasets` without TensorFlow Datasets).
        cache_dir: the decoded-array cache directory.
        tfds_data_dir: the `data_dir` handed to tfds, or `None`.
        probe: `probe(address, timeout) -> bool`, whether the download host
            answers (`can_reach`, as `load` passes it).

    Returns:
        RawSplits: `uint8` images and `int32` labels of both splits.

    Raises:
        FileNotFoundError: if the image folder does not exist.
        ValueError: if the image folder has another layout or other images.
        DataUnavailableError: if the data must be downloaded and cannot be.
        ImportError: if an image folder is to be read without TensorFlow
            Datasets.
    """
    if data_dir is None:
        data_dir = os.environ.get(DIR_ENV) or None
        arg_name = DIR_ENV
    else:
        arg_name = "data_dir"
    if data_dir is not None:
        return _load_image_folder(os.fspath(data_dir), arg_name, cache_dir)
    if _tfds.installed():
        return _load_tfds(cache_dir, tfds_data_dir, probe)
    return _load_keras(cache_dir, probe)


def can_reach(address, timeout):
    """Returns whether a TCP connection to `address` opens in time.

    Name resolution ignores socket timeouts, so the attempt runs in a daemon
    thread that is abandoned after `timeout`.

    Args:
        address: `(host, port)`.
        timeout: float, seconds to wait.

    Returns:
        bool: `True` if the connection opened within `timeout` seconds.
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


def _load_image_folder(data_dir, arg_name, cache_dir):
    root = os.path.realpath(os.path.expanduser(data_dir))
    if not os.path.isdir(root):
        raise FileNotFoundError(
            f"The CIFAR-10 image folder does not exist. Expected a directory "
            f"with `train/` and `test/` sub-folders. "
            f"Received: {arg_name}={data_dir!r}"
        )
    listing = image_folder.list_images(
        root, CLASS_NAMES, "CIFAR-10", arg_name, data_dir
    )
    arrays = cache.cached(
        cache_dir,
        key=(
            "cifar10",
            "image_folder",
            root,
            image_folder.fingerprint(listing),
        ),
        decode=lambda: image_folder.decode(
            root, _IMAGE_SHAPE, "CIFAR-10", arg_name, data_dir
        ),
    )
    label = f"CIFAR-10 ({image_folder.encoding(listing)} copy)"
    return RawSplits("cifar10", label, root, CLASS_NAMES, *arrays)


def _load_tfds(cache_dir, tfds_data_dir, probe):
    _, tfds = _tfds.import_tfds()
    builder = tfds.builder("cifar10", data_dir=tfds_data_dir)
    full_name = builder.info.full_name

    def decode():
        if not builder.is_prepared() and not probe(
            DOWNLOAD_HOST, PROBE_TIMEOUT_S
        ):
            raise DataUnavailableError(
                "CIFAR-10 is not prepared in the TensorFlow Datasets data "
                "directory and its download host "
                f"{DOWNLOAD_HOST[0]} cannot be reached. Either pass "
                "`data_dir` (or set the environment variable "
                f"{DIR_ENV}) to a local CIFAR-10 image folder "
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
        return _tfds.to_numpy(train) + _tfds.to_numpy(test)

    arrays = cache.cached(
        cache_dir, key=("cifar10", "tfds", full_name), decode=decode
    )
    return RawSplits("cifar10", "CIFAR-10", "tfds", CLASS_NAMES, *arrays)


def _load_keras(cache_dir, probe):
    """CIFAR-10 through `keras.datasets`, for installs without TensorFlow."""

    def decode():
        if not probe(DOWNLOAD_HOST, PROBE_TIMEOUT_S):
            raise DataUnavailableError(
                "CIFAR-10 is not cached and its download host "
                f"{DOWNLOAD_HOST[0]} cannot be reached. Either pass "
                "`data_dir` (or set the environment variable "
                f"{DIR_ENV}) to a local CIFAR-10 image folder "
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

    arrays = cache.cached(
        cache_dir, key=("cifar10", "keras.datasets"), decode=decode
    )
    return RawSplits(
        "cifar10", "CIFAR-10", "keras.datasets", CLASS_NAMES, *arrays
    )


def _channels_last(x):
    """`keras.datasets` follows `image_data_format()`; ours is NHWC."""
    x = np.asarray(x)
    if x.ndim == 4 and x.shape[1] == 3 and x.shape[-1] != 3:
        x = x.transpose(0, 2, 3, 1)
    return np.ascontiguousarray(x, dtype=np.uint8)
