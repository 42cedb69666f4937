"""Tests of `keras_affine_div.datasets.load`: its API and argument checks."""

import os
import subprocess
import sys

import keras
import pytest

from keras_affine_div import datasets

# Nothing here depends on the Keras backend: run once (conftest.py).
pytestmark = pytest.mark.backend_independent


def test_public_api():
    for name in datasets.__all__:
        assert hasattr(datasets, name), name
    assert datasets.NAMES == ("cifar10", "fashion_mnist")
    assert issubclass(datasets.DataUnavailableError, RuntimeError)


def test_import_is_light():
    heavy = ["tensorflow_datasets", "keras_tuner"]
    if keras.backend.backend() != "tensorflow":
        heavy.append("tensorflow")
    code = (
        "import sys; import keras_affine_div.datasets; "
        f"print([m for m in {heavy!r} if m in sys.modules])"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        env={**os.environ, "KERAS_BACKEND": keras.backend.backend()},
    )
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_unknown_name():
    with pytest.raises(
        ValueError,
        match=r"Received an invalid value for argument `name`. Expected one "
        r"of 'cifar10', 'fashion_mnist'. Received: name='mnist'",
    ):
        datasets.load("mnist")


@pytest.mark.parametrize("value", [0, 1, 1.5, -0.1, True, "0.1", float("nan")])
def test_bad_validation_split(value):
    with pytest.raises(
        ValueError,
        match=r"Received an invalid value for argument `validation_split`. "
        r"Expected a number in \(0, 1\). Received: validation_split=",
    ):
        datasets.load("cifar10", validation_split=value)


@pytest.mark.parametrize(
    "value,error,message",
    [
        (
            "a",
            TypeError,
            r"Received an invalid type for argument `seed`. Expected a "
            r"non-negative integer. Received: seed='a' of type str",
        ),
        (
            True,
            TypeError,
            r"Received an invalid type for argument `seed`. Expected a "
            r"non-negative integer. Received: seed=True of type bool",
        ),
        (
            -1,
            ValueError,
            r"Received an invalid value for argument `seed`. Expected a "
            r"non-negative integer. Received: seed=-1",
        ),
    ],
    ids=["str", "bool", "negative"],
)
def test_bad_seed(value, error, message):
    with pytest.raises(error, match=message):
        datasets.load("cifar10", seed=value)


@pytest.mark.parametrize(
    "kwargs,error,message",
    [
        (
            {"max_train_samples": 2.5},
            TypeError,
            r"Received an invalid type for argument `max_train_samples`. "
            r"Expected a positive integer or None. "
            r"Received: max_train_samples=2.5 of type float",
        ),
        (
            {"max_test_samples": 0},
            ValueError,
            r"Received an invalid value for argument `max_test_samples`. "
            r"Expected a positive integer or None. "
            r"Received: max_test_samples=0",
        ),
        (
            {"max_train_samples": 1},
            ValueError,
            r"Received an invalid value for argument `max_train_samples`. "
            r"Expected at least 2, one training and one validation image. "
            r"Received: max_train_samples=1",
        ),
    ],
    ids=["train_float", "test_zero", "train_one"],
)
def test_bad_subset_sizes(kwargs, error, message):
    with pytest.raises(error, match=message):
        datasets.load("cifar10", **kwargs)
