"""Tests of the TensorFlow Datasets import (`datasets._tfds`)."""

import importlib.util
import sys

import pytest

from keras_affine_div import datasets
from keras_affine_div.datasets import _tfds

# Nothing here depends on the Keras backend: run once (conftest.py).
pytestmark = pytest.mark.backend_independent


def test_installed():
    expected = all(
        importlib.util.find_spec(m) is not None
        for m in ("tensorflow", "tensorflow_datasets")
    )
    assert _tfds.installed() is expected


@pytest.mark.parametrize("module", ["tensorflow", "tensorflow_datasets"])
def test_missing_tensorflow_datasets(
    image_folder, tmp_path, monkeypatch, module
):
    monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(
        ImportError,
        match=r"requires TensorFlow and TensorFlow Datasets. Install them "
        r"with `pip install \"keras-affine-div\[tensorflow,tuning\]\"`. "
        rf"Received: .*{module}",
    ):
        datasets.load("cifar10", data_dir=image_folder, cache_dir=tmp_path)
