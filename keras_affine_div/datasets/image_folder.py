"""The image-folder reader: `train/<class>/*`, `test/<class>/*`.

The layout `tfds.folder_dataset.ImageFolder` reads, of JPEG or PNG files:
`list_images` checks it and lists the files (their names, sizes and
modification times fingerprint the folder for the cache), `decode` reads
both splits into arrays with TensorFlow Datasets.
"""

import hashlib
import json
import os

from keras_affine_div.datasets import _tfds

_IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png")
_JPEG_EXTENSIONS = (".jpg", ".jpeg")
_COLOURS = {1: "grayscale", 3: "RGB"}


def list_images(root, class_names, title, arg_name, data_dir):
    """Checks an image folder's layout and lists its images.

    Args:
        root: the folder's real path, an existing directory.
        class_names: the class folders each split must hold, sorted.
        title: the dataset's name in messages, e.g. `"CIFAR-10"`.
        arg_name: where the folder came from, for messages: `"data_dir"`
            or an environment variable.
        data_dir: the folder as given, for messages.

    Returns:
        dict: `{split: {class_name: [(file_name, size, mtime_ns), ...]}}`
        for the splits `"train"` and `"test"`, files sorted by name.

    Raises:
        ValueError: if a split, a class folder or a class's images are
            missing, or other class folders are there.
    """
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
        if tuple(classes) != tuple(class_names):
            raise ValueError(
                f"Expected `{split}/` to hold one folder per {title} class, "
                f"named {', '.join(class_names)}; found "
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


def fingerprint(listing):
    """Returns a digest of a `list_images` listing, for the cache key.

    Args:
        listing: the dict `list_images` returns.

    Returns:
        str: the SHA-256 hex digest of the listing.
    """
    return hashlib.sha256(
        json.dumps(listing, sort_keys=True).encode()
    ).hexdigest()


def encoding(listing):
    """Returns how the listed images are encoded: `"JPEG"` or `"PNG"`.

    Args:
        listing: the dict `list_images` returns.

    Returns:
        str: `"JPEG"` if any file is a JPEG (lossy), else `"PNG"`.
    """
    extensions = {
        os.path.splitext(f)[1].lower()
        for split in listing.values()
        for files in split.values()
        for f, _, _ in files
    }
    return "JPEG" if extensions & set(_JPEG_EXTENSIONS) else "PNG"


def decode(root, image_shape, title, arg_name, data_dir):
    """Decodes both splits of an image folder with tfds' `ImageFolder`.

    Args:
        root: the folder's real path, checked by `list_images`.
        image_shape: the `(height, width, channels)` every image must have.
        title: the dataset's name in messages, e.g. `"CIFAR-10"`.
        arg_name: where the folder came from, for messages: `"data_dir"`
            or an environment variable.
        data_dir: the folder as given, for messages.

    Returns:
        tuple: `(x_train, y_train, x_test, y_test)`: `uint8` images in the
        folder's file order (sorted per class, then shuffled with a fixed
        seed by `ImageFolder`) and int labels in the order of the sorted
        class names.

    Raises:
        ValueError: if an image does not have `image_shape`.
        ImportError: if TensorFlow or TensorFlow Datasets is not installed.
    """
    tf, tfds = _tfds.import_tfds()
    builder = tfds.folder_dataset.ImageFolder(root)
    height, width, channels = image_shape
    colour = _COLOURS.get(channels, f"{channels}-channel")
    arrays = ()
    for split in ("train", "test"):
        ds = builder.as_dataset(split=split, as_supervised=True)
        ds = ds.map(
            lambda image, label: (tf.ensure_shape(image, image_shape), label),
            num_parallel_calls=tf.data.AUTOTUNE,
        )
        try:
            arrays += _tfds.to_numpy(ds)
        except tf.errors.InvalidArgumentError as e:
            culprit = _first_bad_image(tf, root, split, image_shape)
            found = f" {culprit};" if culprit else ""
            raise ValueError(
                f"Expected {title} images of shape {tuple(image_shape)} "
                f"({height}x{width} {colour}) in `{split}/`;{found} decoding "
                f"failed with: {e.message.splitlines()[0]} "
                f"Received: {arg_name}={data_dir!r}"
            ) from None
    return tuple(arrays)


def _first_bad_image(tf, root, split, image_shape):
    """`"`split/class/file` is ..."` for the first image of `split` (in
    sorted order) that does not decode to `image_shape`, or `None`.

    Only called once decoding has failed: it decodes the split's images one
    by one to name the file.
    """
    split_dir = os.path.join(root, split)
    for class_name in sorted(os.listdir(split_dir)):
        class_dir = os.path.join(split_dir, class_name)
        if not os.path.isdir(class_dir):
            continue
        for name in sorted(os.listdir(class_dir)):
            if not name.lower().endswith(_IMAGE_EXTENSIONS):
                continue
            where = f"`{split}/{class_name}/{name}`"
            try:
                image = tf.io.decode_image(
                    tf.io.read_file(os.path.join(class_dir, name)),
                    expand_animations=False,
                )
            except tf.errors.OpError as e:
                reason = str(e.message).splitlines()[0]
                return f"{where} is not a readable image ({reason})"
            shape = tuple(int(d) for d in image.shape)
            if shape != tuple(image_shape):
                return f"{where} is of shape {shape}"
    return None
