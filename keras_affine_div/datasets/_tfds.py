"""TensorFlow and TensorFlow Datasets, imported on first use (private).

Only an image folder or `tfds.load` needs them, so that the datasets work on
every Keras backend without TensorFlow installed.
"""

import importlib.util

import numpy as np


def installed():
    """Returns whether TensorFlow and TensorFlow Datasets can be imported.

    Returns:
        bool: `True` if both are installed (neither is imported here).
    """
    return all(
        importlib.util.find_spec(name) is not None
        for name in ("tensorflow", "tensorflow_datasets")
    )


def import_tfds():
    """Imports TensorFlow and TensorFlow Datasets.

    Returns:
        tuple: `(tensorflow, tensorflow_datasets)`, the modules.

    Raises:
        ImportError: if either is not installed, with the `pip install`
            that installs them.
    """
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


def to_numpy(ds):
    """Reads a supervised `tf.data.Dataset` into NumPy arrays.

    Args:
        ds: a `tf.data.Dataset` of `(image, label)` pairs.

    Returns:
        tuple: `(images, labels)`, NumPy arrays in the dataset's order.
    """
    _, tfds = import_tfds()
    images, labels = [], []
    for x, y in tfds.as_numpy(ds.batch(2048)):
        images.append(x)
        labels.append(y)
    return np.concatenate(images), np.concatenate(labels)
