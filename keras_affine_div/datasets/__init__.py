"""CIFAR-10 and Fashion-MNIST as standardised NumPy arrays.

`load(name)` returns a `Dataset`: train, validation and test arrays, images
`float32` NHWC standardised per channel with the statistics of the returned
training images, labels `int32` class ids. The validation images are held
out of the original training split (deterministically for a seed); the test
split is kept for final numbers only.

Sources, in order of preference:

- CIFAR-10 (`cifar10`): an image folder (`train/<class>/*`,
  `test/<class>/*`, the ten CIFAR-10 class names) given as `data_dir` or
  through the environment variable `KERAS_AFFINE_DIV_CIFAR10_DIR`, read with
  `tfds.folder_dataset.ImageFolder` (`image_folder`); otherwise
  `tfds.load("cifar10")`, which downloads the original once, or, where
  TensorFlow or TensorFlow Datasets is not installed (a JAX or PyTorch
  install), `keras.datasets.cifar10.load_data()`, which downloads the same
  original.
- Fashion-MNIST (`fashion_mnist`): the original IDX files in `data_dir`,
  else in `/usr/share/datasets/fashion-mnist/` (Debian's
  `dataset-fashion-mnist`), else `keras.datasets.fashion_mnist.load_data()`
  (downloads once).

The decoded `uint8` arrays of the full train and test splits are cached on
disk (`cache`: `cache_dir`, default `$KERAS_AFFINE_DIV_CACHE` or
`~/.cache/keras_affine_div`), so a second load takes seconds; the
validation hold-out, the subsets and the standardisation (`split`) are
applied after the cache. TensorFlow and TensorFlow Datasets are imported
only when an image folder or tfds is read, so the package works on every
Keras backend.

The public API is what this module exports; the modules named above are
its parts.
"""

from keras_affine_div import _validation
from keras_affine_div.datasets import cache
from keras_affine_div.datasets import cifar10
from keras_affine_div.datasets import fashion_mnist
from keras_affine_div.datasets import split
from keras_affine_div.datasets.dataset import Dataset
from keras_affine_div.datasets.dataset import DataUnavailableError

NAMES = ("cifar10", "fashion_mnist")

CIFAR10_CLASS_NAMES = cifar10.CLASS_NAMES
CIFAR10_DIR_ENV = cifar10.DIR_ENV
CIFAR10_DOWNLOAD_HOST = cifar10.DOWNLOAD_HOST
PROBE_TIMEOUT_S = cifar10.PROBE_TIMEOUT_S
FASHION_MNIST_CLASS_NAMES = fashion_mnist.CLASS_NAMES
FASHION_MNIST_SYSTEM_DIR = fashion_mnist.SYSTEM_DIR
FASHION_MNIST_FILES = fashion_mnist.FILES
CACHE_DIR_ENV = cache.CACHE_DIR_ENV

# The network probe `load` hands to the CIFAR-10 sources, looked up at each
# call: a check without network replaces it here (`datasets._can_reach`).
_can_reach = cifar10.can_reach

__all__ = [
    "CACHE_DIR_ENV",
    "CIFAR10_CLASS_NAMES",
    "CIFAR10_DIR_ENV",
    "CIFAR10_DOWNLOAD_HOST",
    "DataUnavailableError",
    "Dataset",
    "FASHION_MNIST_CLASS_NAMES",
    "FASHION_MNIST_FILES",
    "FASHION_MNIST_SYSTEM_DIR",
    "NAMES",
    "PROBE_TIMEOUT_S",
    "load",
]


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
        max_train_samples: int >= 2 or `None`, the number of images drawn
            from the original training split before the validation
            hold-out; more than the split holds is an error, never a
            smaller set. Defaults to `None` (all of them).
        max_test_samples: positive int or `None`, the number of test images
            drawn; more than the test split holds is an error. Defaults to
            `None` (all of them).
        cache_dir: directory of the decoded-array cache. Defaults to `None`:
            `$KERAS_AFFINE_DIV_CACHE` if set, else
            `~/.cache/keras_affine_div`.
        tfds_data_dir: the `data_dir` handed to `tfds.load` when CIFAR-10
            comes from tfds. Defaults to `None` (tfds' own default).

    Returns:
        Dataset: the arrays, class names and label.

    Raises:
        ValueError: for an unknown `name`, a `validation_split` that is not
            a number in (0, 1), a negative `seed`, a subset size below 1
            (`max_train_samples` below 2) or above what its split holds,
            or a `data_dir` that does not have the expected layout or
            images.
        TypeError: for a `seed` or subset size that is not an integer.
        FileNotFoundError: if `data_dir` (or a file it must hold) does not
            exist.
        DataUnavailableError: if the data must be downloaded and cannot be.
        ImportError: if a CIFAR-10 image folder is to be read and
            TensorFlow or TensorFlow Datasets is not installed (without
            them, CIFAR-10 downloads through `keras.datasets`).
    """
    name = _validation.one_of(name, NAMES, "name")
    validation_split = _validation.number_in(
        validation_split, "validation_split", 0, 1
    )
    seed = _validation.non_negative_int(seed, "seed")
    max_train_samples = _validation.positive_int(
        max_train_samples, "max_train_samples", allow_none=True
    )
    max_test_samples = _validation.positive_int(
        max_test_samples, "max_test_samples", allow_none=True
    )
    if max_train_samples is not None and max_train_samples < 2:
        raise ValueError(
            "Received an invalid value for argument `max_train_samples`. "
            "Expected at least 2, one training and one validation image. "
            f"Received: max_train_samples={max_train_samples!r}"
        )
    cache_dir = cache.resolve_cache_dir(cache_dir)

    if name == "cifar10":
        raw = cifar10.load_raw(data_dir, cache_dir, tfds_data_dir, _can_reach)
    else:
        raw = fashion_mnist.load_raw(data_dir, cache_dir)
    return split.split_and_standardize(
        raw,
        validation_split=validation_split,
        seed=seed,
        max_train_samples=max_train_samples,
        max_test_samples=max_test_samples,
    )
