"""Helpers shared by the layer tests."""

import functools

import keras
import numpy as np
import pytest

from keras_affine_div import _backend
from tests.layers import reference
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


def input_and_weight_gradients(layer, x, seed=0):
    """Gradients of `<c, layer(x)>` w.r.t. `x` and each trainable weight.

    As `input_gradient`, through the `stateless_call` of a model made of
    `layer` alone (a layer's own `stateless_call` skips the autocasting of
    its dtype policy), so that the weights are differentiated too.

    Returns:
        list: NumPy arrays, the input gradient first, then one per
        trainable weight, in the order of `layer.trainable_variables`.
    """
    model = keras.Sequential([keras.Input(x.shape[1:]), layer])
    c = np.random.default_rng(seed).standard_normal(
        tuple(layer.compute_output_shape(x.shape))
    )
    c = keras.ops.convert_to_tensor(c.astype("float32"))
    frozen = [v.value for v in model.non_trainable_variables]

    def loss(inputs, *trainable):
        out, _ = model.stateless_call(list(trainable), frozen, inputs)
        return keras.ops.sum(keras.ops.cast(out, "float32") * c)

    trainable = [v.value for v in model.trainable_variables]
    _, grads = _backend.value_and_gradients(loss, [x, *trainable])
    return grads


KERAS_CONV = {
    1: keras.layers.Conv1D,
    2: keras.layers.Conv2D,
    3: keras.layers.Conv3D,
}


@functools.cache
def channels_first_conv_supported(rank=2):
    """Whether Keras' own `Conv{rank}D` runs `channels_first` here.

    TensorFlow on CPU has no channels_first 1D or 2D convolution (its 3D
    and grouped ones go through XLA, which has).
    """
    shape = (1, 2) + (5,) * rank
    try:
        for groups in (1, 2):
            layer = KERAS_CONV[rank](
                2, 3, data_format="channels_first", groups=groups
            )
            layer(np.ones(shape, "float32"))
    except Exception:  # noqa: BLE001 - any failure means "unsupported here"
        return False
    return True


def skip_unless_supported(kwargs, rank=2):
    if kwargs.get("data_format") == "channels_first" and (
        not channels_first_conv_supported(rank)
    ):
        pytest.skip(
            f"Keras' Conv{rank}D has no channels_first on "
            f"{keras.backend.backend()} CPU"
        )


# Convolution cases shared by both conv layers' tests.
# (case name, constructor arguments, input shape)
CONV_CASES = [
    ("valid_k3", {"kernel_size": 3}, (2, 7, 6, 3)),
    ("same_k3", {"kernel_size": 3, "padding": "same"}, (2, 7, 6, 3)),
    (
        "same_k3x2_strides2",
        {"kernel_size": (3, 2), "padding": "same", "strides": 2},
        (2, 7, 6, 3),
    ),
    (
        "same_k4_strides3_asymmetric_pad",
        {"kernel_size": 4, "padding": "same", "strides": 3},
        (2, 8, 7, 2),
    ),
    (
        "valid_k2x3_strides2x1",
        {"kernel_size": (2, 3), "strides": (2, 1)},
        (2, 7, 6, 3),
    ),
    (
        "same_dilation2",
        {"kernel_size": 3, "padding": "same", "dilation_rate": 2},
        (2, 7, 6, 3),
    ),
    (
        "valid_k3x2_dilation1x2",
        {"kernel_size": (3, 2), "dilation_rate": (1, 2)},
        (2, 7, 6, 3),
    ),
    (
        "same_groups2",
        {"kernel_size": 3, "padding": "same", "groups": 2},
        (2, 6, 5, 4),
    ),
    (
        "channels_first_same",
        {"kernel_size": 3, "padding": "same", "data_format": "channels_first"},
        (2, 3, 7, 6),
    ),
    (
        "channels_first_strides2_groups2",
        {
            "kernel_size": 3,
            "strides": 2,
            "groups": 2,
            "data_format": "channels_first",
        },
        (2, 4, 7, 6),
    ),
]
CONV_IDS = [case[0] for case in CONV_CASES]

# The same for the 1D layers: (case name, constructor arguments, input shape).
CONV1D_CASES = [
    ("valid_k3", {"kernel_size": 3}, (2, 9, 3)),
    ("same_k4", {"kernel_size": 4, "padding": "same"}, (2, 9, 3)),
    ("causal_k3", {"kernel_size": 3, "padding": "causal"}, (2, 9, 3)),
    (
        "causal_k3_dilation2",
        {"kernel_size": 3, "padding": "causal", "dilation_rate": 2},
        (2, 9, 3),
    ),
    (
        "causal_k2_strides2",
        {"kernel_size": 2, "padding": "causal", "strides": 2},
        (2, 9, 3),
    ),
    (
        "same_k3_strides3",
        {"kernel_size": 3, "padding": "same", "strides": 3},
        (2, 10, 2),
    ),
    ("valid_k2_dilation3", {"kernel_size": 2, "dilation_rate": 3}, (2, 9, 3)),
    ("valid_groups2", {"kernel_size": 3, "groups": 2}, (2, 8, 4)),
    (
        "causal_groups2",
        {"kernel_size": 3, "padding": "causal", "groups": 2},
        (2, 8, 4),
    ),
    (
        "channels_first_same",
        {"kernel_size": 3, "padding": "same", "data_format": "channels_first"},
        (2, 3, 9),
    ),
    (
        "channels_first_causal_groups2",
        {
            "kernel_size": 3,
            "padding": "causal",
            "groups": 2,
            "data_format": "channels_first",
        },
        (2, 4, 8),
    ),
]
CONV1D_IDS = [case[0] for case in CONV1D_CASES]

# And for the 3D layers.
CONV3D_CASES = [
    ("valid_k2", {"kernel_size": 2}, (2, 4, 3, 5, 2)),
    (
        "same_k3x2x2_strides2",
        {"kernel_size": (3, 2, 2), "padding": "same", "strides": 2},
        (2, 5, 4, 3, 2),
    ),
    (
        "same_dilation2",
        {"kernel_size": 2, "padding": "same", "dilation_rate": (2, 1, 2)},
        (2, 4, 4, 4, 2),
    ),
    ("valid_groups2", {"kernel_size": 2, "groups": 2}, (2, 3, 4, 3, 4)),
    (
        "channels_first_valid_groups2",
        {
            "kernel_size": (2, 3, 2),
            "groups": 2,
            "data_format": "channels_first",
        },
        (2, 4, 3, 4, 3),
    ),
]
CONV3D_IDS = [case[0] for case in CONV3D_CASES]


def conv_reference(layer, kernel, bias):
    """The NumPy reference of the built convolution `layer`: `x -> output`.

    PatchNorm layers divide by `sqrt(|P|^2 + epsilon)` with the bias after
    the division; affine-like ones by `sqrt(|P|^2 + 1)`, the bias inside.
    """
    patch_norm = hasattr(layer, "epsilon")
    return functools.partial(
        reference.patch_conv,
        kernel=kernel,
        bias=bias,
        strides=layer.strides,
        padding=layer.padding,
        data_format=layer.data_format,
        dilation_rate=layer.dilation_rate,
        groups=layer.groups,
        offset=layer.epsilon if patch_norm else 1.0,
        bias_inside=not patch_norm,
    )


def assert_conv_matches_reference(layer_cls, kwargs, input_shape, **extra):
    """`layer_cls(4, **extra, **kwargs)` with random weights, against NumPy.

    Skips where Keras' own convolution does not run the data format.
    """
    skip_unless_supported(kwargs, rank=len(input_shape) - 2)
    rng = np.random.default_rng(0)
    x = rng.standard_normal(input_shape).astype("float32")
    layer = layer_cls(4, **extra, **kwargs)
    layer.build(input_shape)
    kernel = rng.standard_normal(tuple(layer.kernel.shape)).astype("float32")
    bias = rng.standard_normal(4).astype("float32")
    layer.kernel.assign(kernel)
    layer.bias.assign(bias)
    expected = conv_reference(layer, kernel, bias)(x)
    y = to_numpy(layer(x))
    assert (
        y.shape
        == expected.shape
        == tuple(layer.compute_output_shape(input_shape))
    )
    np.testing.assert_allclose(y, expected, rtol=1e-4, atol=1e-5)


# Einsum cases shared by both einsum layers' tests: (case name, constructor
# arguments, input shape). Every case but the last two has a bias with its
# own entry for every output axis the kernel adds.
EINSUM_CASES = [
    (
        "token_dense",
        {
            "equation": "abc,cd->abd",
            "output_shape": (None, 5),
            "bias_axes": "d",
        },
        (2, 3, 4),
    ),
    (
        "attention_qkv",
        {
            "equation": "abc,cde->abde",
            "output_shape": (None, 2, 3),
            "bias_axes": "de",
        },
        (2, 3, 4),
    ),
    (
        "attention_output",
        {
            "equation": "abcd,cde->abe",
            "output_shape": (None, 5),
            "bias_axes": "e",
        },
        (2, 3, 2, 4),
    ),
    (
        "transposed_bias_not_last",
        {
            "equation": "abc,cd->adb",
            "output_shape": (5, None),
            "bias_axes": "d",
        },
        (2, 3, 4),
    ),
    (
        "ellipsis_left",
        {"equation": "...c,cd->...d", "output_shape": 5, "bias_axes": "d"},
        (2, 3, 4),
    ),
    (
        "ellipsis_right",
        {"equation": "ab...,bc->ac...", "output_shape": (4,), "bias_axes": "c"},
        (2, 3, 5),
    ),
    (
        "kernel_per_position",
        {"equation": "abc,bcd->abd", "output_shape": (3, 5), "bias_axes": "bd"},
        (2, 3, 4),
    ),
    (
        "nothing_contracted",
        {"equation": "ab,b->ab", "output_shape": (4,), "bias_axes": "b"},
        (3, 4),
    ),
    (
        "shared_bias_not_last",
        {
            "equation": "abc,cde->abde",
            "output_shape": (None, 2, 3),
            "bias_axes": "d",
        },
        (2, 3, 4),
    ),
    (
        "no_bias",
        {"equation": "abcd,cde->abe", "output_shape": (None, 5)},
        (2, 3, 2, 4),
    ),
]
EINSUM_IDS = [case[0] for case in EINSUM_CASES]


def einsum_reference(layer, kernel, bias):
    """The NumPy reference of the built einsum `layer`: `x -> output`.

    Norm-like layers divide by `sqrt(|x_c|^2 + epsilon)` with the bias
    after the division; affine-like ones by `sqrt(|x_c|^2 + 1)`, the bias
    inside. `bias=None` means no bias.
    """
    bias = 0.0 if bias is None else bias
    if hasattr(layer, "epsilon"):
        return functools.partial(
            reference.norm_like_einsum,
            equation=layer.equation,
            kernel=kernel,
            bias=bias,
            epsilon=layer.epsilon,
        )
    return functools.partial(
        reference.affine_like_einsum,
        equation=layer.equation,
        kernel=kernel,
        bias=bias,
    )


def assert_einsum_matches_reference(layer_cls, kwargs, input_shape):
    """`layer_cls(**kwargs)` with random weights, against NumPy."""
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(input_shape) * 2).astype("float32")
    layer = layer_cls(**kwargs)
    layer.build(input_shape)
    kernel = rng.standard_normal(tuple(layer.kernel.shape)).astype("float32")
    layer.kernel.assign(kernel)
    bias = None
    if layer.bias is not None:
        bias = rng.standard_normal(tuple(layer.bias.shape)).astype("float32")
        layer.bias.assign(bias)
    expected = einsum_reference(layer, kernel, bias)(x)
    y = to_numpy(layer(x))
    assert (
        y.shape
        == expected.shape
        == tuple(layer.compute_output_shape(input_shape))
    )
    np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-5)


def last_preactivation_rms(make_layer, input_shape, depth=10):
    """RMS of the last pre-activation of a `depth`-layer tanh stack.

    `make_layer()` returns a fresh layer; the input is unit-variance noise
    of `input_shape` with a fixed seed.
    """
    x = np.random.default_rng(4).standard_normal(input_shape).astype("float32")
    h = keras.ops.convert_to_tensor(x)
    for _ in range(depth):
        z = make_layer()(h)
        h = keras.ops.tanh(z)
    return float(np.sqrt(np.mean(to_numpy(z) ** 2)))
