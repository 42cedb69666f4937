"""Fixtures of the dataset tests."""

import pytest

from keras_affine_div import datasets
from tests.datasets import common


@pytest.fixture(scope="session")
def image_folder(tmp_path_factory):
    """A tiny PNG image folder: 4 train and 2 test images per class."""
    return common.write_image_folder(tmp_path_factory.mktemp("cifar_png"))


@pytest.fixture(autouse=True)
def _no_environment(monkeypatch):
    monkeypatch.delenv(datasets.CIFAR10_DIR_ENV, raising=False)
    monkeypatch.delenv(datasets.CACHE_DIR_ENV, raising=False)
