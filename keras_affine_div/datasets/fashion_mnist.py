"""Fashion-MNIST: from the original IDX files or from `keras.datasets`.

`load_raw` reads the four IDX files (optionally gzipped) in `data_dir`,
else in `/usr/share/datasets/fashion-mnist/` (Debian's
`dataset-fashion-mnist`), else downloads once through
`keras.datasets.fashion_mnist.load_data()`.
"""

import gzip
import os
import struct

import numpy as np

from keras_affine_div.datasets import cache
from keras_affine_div.datasets.dataset import DataUnavailableError
from keras_affine_div.datasets.dataset import RawSplits

CLASS_NAMES = (
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
SYSTEM_DIR = "/usr/share/datasets/fashion-mnist"
FILES = {
    "x_train": "train-images-idx3-ubyte",
    "y_train": "train-labels-idx1-ubyte",
    "x_test": "t10k-images-idx3-ubyte",
    "y_test": "t10k-labels-idx1-ubyte",
}


def load_raw(data_dir, cache_dir):
    """Returns the full Fashion-MNIST splits from the preferred source.

    Args:
        data_dir: a folder with the four IDX files, or `None` for
            `SYSTEM_DIR` if it exists, else `keras.datasets`.
        cache_dir: the decoded-array cache directory.

    Returns:
        RawSplits: `uint8` images `(n, 28, 28, 1)` and `int32` labels of
        both splits.

    Raises:
        FileNotFoundError: if `data_dir` or one of its IDX files is missing.
        ValueError: if an IDX file is not what it should be.
        DataUnavailableError: if the download fails.
    """
    if data_dir is None and os.path.isdir(SYSTEM_DIR):
        data_dir = SYSTEM_DIR
    if data_dir is not None:
        return _load_idx_folder(os.fspath(data_dir), cache_dir)

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
                f"{SYSTEM_DIR}), pass `data_dir` to a folder "
                "with the four IDX files, or get internet access. "
                "Received: data_dir=None"
            ) from e
        return x_train[..., None], y_train, x_test[..., None], y_test

    arrays = cache.cached(
        cache_dir, key=("fashion_mnist", "keras.datasets"), decode=decode
    )
    return RawSplits(
        "fashion_mnist",
        "Fashion-MNIST",
        "keras.datasets",
        CLASS_NAMES,
        *arrays,
    )


def _load_idx_folder(data_dir, cache_dir):
    root = os.path.realpath(os.path.expanduser(data_dir))
    if not os.path.isdir(root):
        raise FileNotFoundError(
            "The Fashion-MNIST folder does not exist. Expected a directory "
            "with the IDX files "
            f"{', '.join(FILES.values())} (optionally .gz). "
            f"Received: data_dir={data_dir!r}"
        )
    paths = {}
    for key, stem in FILES.items():
        for candidate in (stem, stem + ".gz"):
            if os.path.isfile(os.path.join(root, candidate)):
                paths[key] = os.path.join(root, candidate)
                break
    missing = [s for k, s in FILES.items() if k not in paths]
    if missing:
        raise FileNotFoundError(
            "Expected a Fashion-MNIST folder with the IDX files "
            f"{', '.join(FILES.values())} (optionally .gz); "
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

    arrays = cache.cached(
        cache_dir,
        key=("fashion_mnist", "idx", root, fingerprint),
        decode=decode,
    )
    return RawSplits(
        "fashion_mnist",
        "Fashion-MNIST",
        root,
        CLASS_NAMES,
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
