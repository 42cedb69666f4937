"""Checks an installed wheel of keras-affine-div with only Keras, NumPy and
one backend: every public layer builds, runs and trains one step, a model
with them saves and loads, and CIFAR-10 loads through `keras.datasets`
(its download mocked) where TensorFlow is not installed.

    KERAS_BACKEND=jax python scripts/wheel_smoke.py

Run it outside the repository, so that the installed package is imported.
"""

import importlib.util
import inspect
import os
import sys
import tempfile

import keras
import numpy as np

import keras_affine_div
from keras_affine_div import datasets
from keras_affine_div import layers

# What the extras bring, which the library itself must not import.
OPTIONAL = ("keras_tuner", "tensorflow_datasets", "matplotlib", "pytest")


def _input_shape(cls):
    name = cls.__name__
    if name.endswith(("EinsumDense", "MultiHeadAttention")):
        return (5, 8)
    if name.endswith("Dense"):
        return (8,)
    for rank in (1, 2, 3):
        if name.endswith(f"{rank}D"):
            return (6,) * rank + (3,)
    raise AssertionError(f"unknown layer kind: {name}")


def check_layers():
    classes = [getattr(layers, n) for n in layers.__all__]
    classes = [c for c in classes if inspect.isclass(c)]
    assert classes, "no public layer"
    rng = np.random.default_rng(0)
    for cls in classes:
        shape = _input_shape(cls)
        if cls.__name__.endswith("MultiHeadAttention"):
            # Self-attention takes the input twice: a functional model.
            inputs = keras.Input(shape)
            h = cls(num_heads=2, key_dim=4)(inputs, inputs)
            outputs = keras.layers.Dense(2)(keras.layers.Flatten()(h))
            model = keras.Model(inputs, outputs)
        else:
            if cls.__name__.endswith("EinsumDense"):
                layer = cls(
                    "abc,cd->abd", output_shape=(None, 4), bias_axes="d"
                )
            elif shape == (8,):
                layer = cls(4)
            else:
                layer = cls(4, 3, padding="same")
            model = keras.Sequential(
                [
                    keras.Input(shape),
                    layer,
                    keras.layers.Flatten(),
                    keras.layers.Dense(2),
                ]
            )
        model.compile("sgd", "mse")
        x = rng.standard_normal((4, *shape)).astype("float32")
        y = rng.standard_normal((4, 2)).astype("float32")
        model.fit(x, y, epochs=1, verbose=0)
        out = model.predict(x, verbose=0)
        assert np.all(np.isfinite(out)), cls.__name__
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "model.keras")
            model.save(path)
            again = keras.saving.load_model(path)
        np.testing.assert_allclose(
            again.predict(x, verbose=0), out, rtol=1e-5, atol=1e-5
        )
        print(f"{cls.__name__}: ok")
    return len(classes)


def check_cifar10_without_tensorflow(cache_dir):
    assert importlib.util.find_spec("tensorflow") is None, (
        "TensorFlow is installed: this check is for installs without it"
    )
    rng = np.random.default_rng(0)

    def load_data():
        x = rng.integers(0, 256, (20, 32, 32, 3), dtype=np.uint8)
        return (x, np.arange(20).reshape(-1, 1) % 10), (
            x[:10],
            np.arange(10) % 10,
        )

    keras.datasets.cifar10.load_data = load_data
    datasets._can_reach = lambda *args: True
    ds = datasets.load("cifar10", cache_dir=cache_dir)
    assert ds.source == "keras.datasets", ds.source
    assert (len(ds.x_train), len(ds.x_val), len(ds.x_test)) == (18, 2, 10)
    print("CIFAR-10 through keras.datasets: ok")


def check_no_git_code(here):
    """The library ships no provenance or git code (the research tools keep
    theirs in `tuning/provenance.py`)."""
    found = []
    for folder, _, files in os.walk(here):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                text = open(path, encoding="utf-8").read()
                if "provenance" in name or "import subprocess" in text:
                    found.append(os.path.relpath(path, here))
    assert not found, f"the wheel carries provenance or git code: {found}"


def main():
    here = os.path.dirname(keras_affine_div.__file__)
    assert "site-packages" in here, f"not the installed package: {here}"
    check_no_git_code(here)
    n = check_layers()
    loaded = [m for m in OPTIONAL if m in sys.modules]
    assert not loaded, f"the library imported optional packages: {loaded}"
    with tempfile.TemporaryDirectory() as tmp:
        check_cifar10_without_tensorflow(tmp)
    print(
        f"wheel ok: {n} layers on {keras.backend.backend()}, "
        f"keras_affine_div {keras_affine_div.__version__}"
    )


if __name__ == "__main__":
    main()
