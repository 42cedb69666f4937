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


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("axis", [-1, 1, 2])
def test_squared_norm_value_and_gradient(axis, dtype):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 4, 5)).astype(dtype)
    expected = np.sum(x.astype(np.float64) ** 2, axis=axis, keepdims=True)
    weights = rng.standard_normal(expected.shape)
    x_tensor = keras.ops.convert_to_tensor(x)
    if keras.backend.standardize_dtype(x_tensor.dtype) != dtype:
        pytest.skip(f"{dtype} tensors are disabled on this backend")
    out = _backend.squared_norm(x_tensor, axis=axis)
    assert keras.backend.standardize_dtype(out.dtype) == dtype
    assert tuple(out.shape) == expected.shape
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(out), expected, rtol=1e-5
    )
    w = keras.ops.convert_to_tensor(weights.astype(dtype))
    value, (grad,) = _backend.value_and_gradients(
        lambda x: keras.ops.sum(_backend.squared_norm(x, axis=axis) * w), [x]
    )
    assert value == pytest.approx(float(np.sum(expected * weights)), rel=1e-5)
    np.testing.assert_allclose(grad, 2 * x * weights, rtol=1e-5, atol=1e-6)


def test_squared_norm_of_zeros_has_a_zero_gradient():
    x = np.zeros((3, 4), "float32")
    value, (grad,) = _backend.value_and_gradients(
        lambda x: keras.ops.sum(
            keras.ops.sqrt(_backend.squared_norm(x) + 1e-3)
        ),
        [x],
    )
    assert value == pytest.approx(3 * np.sqrt(1e-3))
    np.testing.assert_array_equal(grad, np.zeros((3, 4)))


def _hessian_vector_product(fn, x, v):
    """`d/dx <grad fn(x), v>` with the backend's own nested autodiff."""
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        x = tf.convert_to_tensor(x)
        with tf.GradientTape() as outer:
            outer.watch(x)
            with tf.GradientTape() as inner:
                inner.watch(x)
                y = fn(x)
            g = inner.gradient(y, x)
            z = tf.reduce_sum(g * v)
        return outer.gradient(z, x).numpy()
    if backend == "jax":
        import jax

        return np.asarray(jax.grad(lambda x: (jax.grad(fn)(x) * v).sum())(x))
    import torch

    x = torch.tensor(x, requires_grad=True)
    (g,) = torch.autograd.grad(fn(x), x, create_graph=True)
    (h,) = torch.autograd.grad((g * torch.tensor(v)).sum(), x)
    return h.numpy()


def test_squared_norm_has_second_derivatives():
    # f(x) = sum_k w_k |x_k|^2 has gradient 2 w_k x_k and Hessian 2 w_k I.
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 4)).astype("float32")
    v = rng.standard_normal((3, 4)).astype("float32")
    w = rng.standard_normal((3, 1)).astype("float32")

    def fn(x):
        return keras.ops.sum(
            _backend.squared_norm(x) * keras.ops.convert_to_tensor(w)
        )

    np.testing.assert_allclose(
        _hessian_vector_product(fn, x, v), 2 * w * v, rtol=1e-5, atol=1e-6
    )


@pytest.mark.requires_backend("jax")
def test_squared_norm_keeps_forward_mode_on_jax():
    import jax

    x = np.array([[1.0, -2.0, 3.0]], "float32")
    t = np.array([[0.5, 1.0, -1.0]], "float32")
    value, tangent = jax.jvp(_backend.squared_norm, (x,), (t,))
    np.testing.assert_allclose(np.asarray(value), [[14.0]])
    np.testing.assert_allclose(np.asarray(tangent), [[2 * (0.5 - 2 - 3)]])
