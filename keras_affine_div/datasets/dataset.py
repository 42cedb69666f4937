"""The types every dataset source shares.

`Dataset` is what `keras_affine_div.datasets.load` returns. `RawSplits` is
what each source (`cifar10`, `fashion_mnist`) hands to
`split.split_and_standardize`: the full decoded train and test splits, as
they are cached. `DataUnavailableError` is raised by a source that must
download its data and cannot.
"""

import dataclasses

import numpy as np


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


@dataclasses.dataclass(frozen=True, eq=False)
class RawSplits:
    """The full original splits of one dataset, as decoded and cached.

    Attributes:
        name: the dataset's name, as in `Dataset.name`.
        label: how results on it are to be labelled, as in `Dataset.label`.
        source: where the images were read from, as in `Dataset.source`.
        class_names: tuple of str, the class names in label order.
        x_train: `uint8` NHWC images of the original training split.
        y_train: `int32` labels of the original training split.
        x_test: `uint8` NHWC images of the test split.
        y_test: `int32` labels of the test split.
    """

    name: str
    label: str
    source: str
    class_names: tuple
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
