"""Helpers shared by the layer tests."""

import functools

import keras
import numpy as np
import pytest

from keras_affine_div import _backend
from tests.testing import to_numpy


def linear_loss(y_true, y_pred):
    """`L = <c, z>` per sample, so that `dL/dz = c` exactly."""
    axes = tuple(range(1, len(y_pred.shape)))
    return keras.ops.sum(y_true * y_pred, axis=axes)


def sgd_activation_step(layer, x, learning_rate=0.05, seed=0):
    """One plain SGD step on a one-sample model made of `layer` alone.

    Returns:
        tuple: `(dz, g)`, the change of the layer's output on `x` after the
        step and the gradient `dL/dz` of the loss it was taken on.
    """
    model = keras.Sequential([keras.Input(x.shape[1:]), layer])
    z0 = to_numpy(model(x))
    g = np.random.default_rng(seed).standard_normal(z0.shape).astype("float32")
    model.compile(
        optimizer=keras.optimizers.SGD(learning_rate), loss=linear_loss
    )
    model.fit(x, g, batch_size=1, epochs=1, shuffle=False, verbose=0)
    z1 = to_numpy(model(x))
    return z1 - z0, g


def input_gradient(layer, x, seed=0):
    """Gradient of `<c, layer(x)>` with respect to `x`, as NumPy."""
    c = np.random.default_rng(seed).standard_normal(
        tuple(layer.compute_output_shape(x.shape))
    )
    c = keras.ops.convert_to_tensor(c.astype("float32"))

    def loss(inputs):
        out = keras.ops.cast(layer(inputs), "float32")
        return keras.ops.sum(out * c)

    _, (grad,) = _backend.value_and_gradients(loss, [x])
    return grad


@functools.cache
def channels_first_conv_supported():
    """Whether Keras' own `Conv2D` runs `channels_first` on this backend."""
    try:
        layer = keras.layers.Conv2D(2, 3, data_format="channels_first")
        layer(np.ones((1, 2, 5, 5), "float32"))
        layer = keras.layers.Conv2D(
            2, 3, data_format="channels_first", groups=2
        )
        layer(np.ones((1, 2, 5, 5), "float32"))
    except Exception:  # noqa: BLE001 - any failure means "unsupported here"
        return False
    return True


def skip_unless_supported(kwargs):
    if kwargs.get("data_format") == "channels_first" and (
        not channels_first_conv_supported()
    ):
        pytest.skip(
            f"Keras' Conv2D has no channels_first on {keras.backend.backend()}"
            " CPU"
        )


# Convolution cases shared by both conv layers' tests.
# (case name, constructor arguments, input shape)
CONV_CASES = [
    ("valid_k3", {"kernel_size": 3}, (2, 7, 6, 3)),
    ("same_k3", {"kernel_size": 3, "padding": "same"}, (2, 7, 6, 3)),
    ("same_k3x2_strides2", {"kernel_size": (3, 2), "padding": "same", "strides": 2}, (2, 7, 6, 3)),
    ("same_k4_strides3_asymmetric_pad", {"kernel_size": 4, "padding": "same", "strides": 3}, (2, 8, 7, 2)),
    ("valid_k2x3_strides2x1", {"kernel_size": (2, 3), "strides": (2, 1)}, (2, 7, 6, 3)),
    ("same_dilation2", {"kernel_size": 3, "padding": "same", "dilation_rate": 2}, (2, 7, 6, 3)),
    ("valid_k3x2_dilation1x2", {"kernel_size": (3, 2), "dilation_rate": (1, 2)}, (2, 7, 6, 3)),
    ("same_groups2", {"kernel_size": 3, "padding": "same", "groups": 2}, (2, 6, 5, 4)),
    ("channels_first_same", {"kernel_size": 3, "padding": "same", "data_format": "channels_first"}, (2, 3, 7, 6)),
    ("channels_first_strides2_groups2", {"kernel_size": 3, "strides": 2, "groups": 2, "data_format": "channels_first"}, (2, 4, 7, 6)),
]
CONV_IDS = [case[0] for case in CONV_CASES]


def last_preactivation_rms(make_layer, input_shape, depth=10):
    """RMS of the last pre-activation of a `depth`-layer tanh stack.

    `make_layer()` returns a fresh layer; the input is unit-variance noise
    of `input_shape` with a fixed seed.
    """
    x = np.random.default_rng(4).standard_normal(input_shape).astype(
        "float32"
    )
    h = keras.ops.convert_to_tensor(x)
    for _ in range(depth):
        z = make_layer()(h)
        h = keras.ops.tanh(z)
    return float(np.sqrt(np.mean(to_numpy(z) ** 2)))
