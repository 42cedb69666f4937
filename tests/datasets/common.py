"""Helpers of the dataset tests: tiny image folders and IDX files."""

import gzip
import os
import struct

import numpy as np

from keras_affine_div import datasets


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


def idx_bytes(array):
    """The bytes of an unsigned-byte IDX file holding `array`."""
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
        data = idx_bytes(arrays[key])
        if gzipped:
            with gzip.open(os.path.join(root, stem + ".gz"), "wb") as f:
                f.write(data)
        else:
            with open(os.path.join(root, stem), "wb") as f:
                f.write(data)
    return str(root)


def raw_class_code(x):
    """Channel 0 of standardised images, per image (it codes the class)."""
    return x[..., 0].reshape(len(x), -1).mean(axis=1)


def image_ids(x):
    """Channels 0 and 1 of each image (class and index): unique per split."""
    return {(round(float(a), 4), round(float(b), 4)) for a, b in x[:, 0, 0, :2]}
