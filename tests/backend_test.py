"""Tests of keras_affine_div/_backend.py: gradients on every backend."""

import keras
import numpy as np
import pytest

from keras_affine_div import _backend


def test_value_and_gradients_match_analytic_gradients():
    a = np.array([1.0, -2.0, 3.0], "float32")
    b = np.array([0.5, 4.0, -1.0], "float32")

    def fn(a, b):
        return keras.ops.sum(keras.ops.square(a) * b)

    value, (grad_a, grad_b) = _backend.value_and_gradients(fn, [a, b])
    assert isinstance(value, float)
    assert value == pytest.approx(float(np.sum(a**2 * b)))
    assert isinstance(grad_a, np.ndarray) and grad_a.shape == a.shape
    np.testing.assert_allclose(grad_a, 2 * a * b, rtol=1e-6)
    np.testing.assert_allclose(grad_b, a**2, rtol=1e-6)


def test_an_unused_argument_gets_a_zero_gradient():
    a = np.ones((2, 3), "float32")
    unused = np.ones((4,), "float32")
    _, (grad_a, grad_unused) = _backend.value_and_gradients(
        lambda a, unused: keras.ops.sum(a), [a, unused]
    )
    np.testing.assert_array_equal(grad_a, np.ones((2, 3)))
    np.testing.assert_array_equal(grad_unused, np.zeros((4,)))


def test_gradients_through_a_layer_treat_its_weights_as_constants():
    layer = keras.layers.Dense(2)
    x = np.array([[1.0, 2.0, 3.0]], "float32")
    layer.build(x.shape)
    kernel = np.arange(6, dtype="float32").reshape(3, 2)
    layer.kernel.assign(kernel)
    _, (grad,) = _backend.value_and_gradients(
        lambda x: keras.ops.sum(layer(x)), [x]
    )
    np.testing.assert_allclose(grad, kernel.sum(axis=1, keepdims=True).T)
    np.testing.assert_array_equal(
        keras.ops.convert_to_numpy(layer.kernel), kernel
    )


def test_rejects_an_unsupported_backend(monkeypatch):
    monkeypatch.setattr(keras.backend, "backend", lambda: "numpy")
    with pytest.raises(
        ValueError,
        match=r"Expected the tensorflow, jax or torch Keras backend, for "
        r"which gradients are implemented\. Received: backend='numpy'",
    ):
        _backend.value_and_gradients(keras.ops.sum, [np.ones(2, "float32")])
