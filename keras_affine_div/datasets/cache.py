"""The on-disk cache of decoded dataset arrays.

Each source decodes the full train and test splits once and keeps them in
`<cache_dir>/<name>-<digest>.npz` (`uint8` images, `int32` labels), where
the digest hashes `_CACHE_FORMAT` and the source's key: what was read (an
image folder's path and file listing, a tfds version, ...), so that changed
data is another entry. The validation hold-out, the subsets and the
standardisation are applied after the cache, so one entry serves every
split and seed. Files are written through `keras_affine_div._files`, whole
or not at all.
"""

import hashlib
import json
import os

import numpy as np

from keras_affine_div._files import atomic_open

CACHE_DIR_ENV = "KERAS_AFFINE_DIV_CACHE"

# Bumped whenever the cached arrays change meaning.
_CACHE_FORMAT = 1
_ARRAY_NAMES = ("x_train", "y_train", "x_test", "y_test")


def resolve_cache_dir(cache_dir):
    """Returns the cache directory to use.

    Args:
        cache_dir: a directory, or `None` for `$KERAS_AFFINE_DIV_CACHE` if
            set, else `~/.cache/keras_affine_div`.

    Returns:
        str: the directory (not created here).
    """
    if cache_dir is None:
        cache_dir = os.environ.get(CACHE_DIR_ENV) or os.path.join(
            os.path.expanduser("~"), ".cache", "keras_affine_div"
        )
    return os.fspath(cache_dir)


def cache_path(cache_dir, key):
    """Returns the cache file of `key`.

    Args:
        cache_dir: the cache directory.
        key: a JSON-serialisable list or tuple whose first entry is the
            dataset's name.

    Returns:
        str: `<cache_dir>/<key[0]>-<digest>.npz`.
    """
    digest = hashlib.sha256(
        json.dumps([_CACHE_FORMAT, key]).encode()
    ).hexdigest()[:20]
    return os.path.join(cache_dir, f"{key[0]}-{digest}.npz")


def cached(cache_dir, key, decode):
    """Returns the arrays of `key` from the cache, or decodes and caches them.

    A cache file that cannot be read is decoded again and overwritten. The
    file is written atomically, so that an interrupted write never leaves a
    partial cache behind; nothing is written if `decode` raises.

    Args:
        cache_dir: the cache directory; created when first written.
        key: the cache key, as for `cache_path`.
        decode: a function of no argument returning
            `(x_train, y_train, x_test, y_test)`, called on a cache miss.

    Returns:
        tuple: `(x_train, y_train, x_test, y_test)`, images `uint8` and
        labels `int32` NumPy arrays.
    """
    path = cache_path(cache_dir, key)
    if os.path.isfile(path):
        try:
            with np.load(path, allow_pickle=False) as f:
                return tuple(f[n] for n in _ARRAY_NAMES)
        except Exception:
            pass
    x_train, y_train, x_test, y_test = decode()
    arrays = (
        np.ascontiguousarray(x_train, dtype=np.uint8),
        np.asarray(y_train, dtype=np.int32),
        np.ascontiguousarray(x_test, dtype=np.uint8),
        np.asarray(y_test, dtype=np.int32),
    )
    with atomic_open(path, "wb") as f:
        np.savez(f, **dict(zip(_ARRAY_NAMES, arrays)))
    return arrays
