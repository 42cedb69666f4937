"""Tests of keras_affine_div/ops.py against NumPy references."""

import os

import keras
import numpy as np
import pytest

from keras_affine_div import _backend
from keras_affine_div import ops
from tests import testing
from tests.layers import common
from tests.layers import reference


@pytest.mark.parametrize("keepdims", [False, True], ids=["drop", "keep"])
@pytest.mark.parametrize(
    "axis", [-1, 0, 1, (0, 2), None], ids=["last", "0", "1", "0_2", "all"]
)
def test_squared_norm_values(axis, keepdims):
    x = np.random.default_rng(0).standard_normal((3, 4, 5)).astype("float32")
    y = ops.squared_norm(x, axis=axis, keepdims=keepdims)
    expected = np.sum(x.astype(np.float64) ** 2, axis=axis, keepdims=keepdims)
    assert tuple(y.shape) == expected.shape
    np.testing.assert_allclose(testing.to_numpy(y), expected, rtol=1e-6)


@pytest.mark.parametrize("axis", [-1, 1], ids=["last", "channels_first"])
def test_squared_norm_is_the_layers_squared_norm(axis):
    # The same numbers as the private one-pass version the layers use.
    x = np.random.default_rng(1).standard_normal((2, 3, 4)).astype("float32")
    ours = ops.squared_norm(keras.ops.convert_to_tensor(x), axis, keepdims=True)
    private = _backend.squared_norm(keras.ops.convert_to_tensor(x), axis)
    np.testing.assert_array_equal(
        testing.to_numpy(ours), testing.to_numpy(private)
    )


def test_squared_norm_gradient_is_two_x():
    x = np.random.default_rng(2).standard_normal((3, 4)).astype("float32")
    _, (grad,) = _backend.value_and_gradients(
        lambda v: keras.ops.sum(ops.squared_norm(v, axis=(0, 1))), [x]
    )
    np.testing.assert_allclose(grad, 2 * x, rtol=1e-6)


def test_squared_norm_casts_integers_and_accepts_symbolic_inputs():
    y = ops.squared_norm(np.array([[3, 4]], "int32"))
    assert keras.backend.standardize_dtype(y.dtype) == keras.config.floatx()
    np.testing.assert_allclose(testing.to_numpy(y), [25.0])
    inputs = keras.Input((3, 4))
    symbolic = ops.squared_norm(inputs, axis=1, keepdims=True)
    assert tuple(symbolic.shape) == (None, 1, 4)
    model = keras.Model(inputs, symbolic)
    x = np.random.default_rng(3).standard_normal((2, 3, 4)).astype("float32")
    np.testing.assert_allclose(
        testing.to_numpy(model(x)),
        np.sum(x**2, axis=1, keepdims=True),
        rtol=1e-6,
    )


@pytest.mark.parametrize(
    "kwargs,error,match",
    [
        ({"axis": "last"}, TypeError, r"axis='last'"),
        ({"axis": 1.0}, TypeError, r"axis=1.0"),
        ({"axis": 2}, ValueError, r"\[-2, 2\).*axis=2"),
        ({"axis": (0, -2)}, ValueError, r"distinct.*axis=\(0, -2\)"),
        (
            {"axis": ()},
            ValueError,
            r"Received an invalid value for argument `axis`\. Expected an "
            r"integer, a non-empty tuple of integers or None \(every axis\)\. "
            r"Received: axis=\(\)",
        ),
        ({"axis": []}, ValueError, r"non-empty tuple.*Received: axis=\[\]"),
        ({"keepdims": 1}, TypeError, r"keepdims=1"),
    ],
    ids=[
        "string_axis",
        "float_axis",
        "axis_out_of_range",
        "repeated_axis",
        "empty_tuple_axis",
        "empty_list_axis",
        "int_keepdims",
    ],
)
def test_squared_norm_bad_arguments_raise(kwargs, error, match):
    with pytest.raises(error, match=match):
        ops.squared_norm(np.ones((2, 3), "float32"), **kwargs)


# (case name, rank, arguments, input shape)
PATCH_CASES = [
    *[
        ("1d_" + name, 1, kwargs, shape)
        for name, kwargs, shape in common.CONV1D_CASES
    ],
    *[
        ("2d_" + name, 2, kwargs, shape)
        for name, kwargs, shape in common.CONV_CASES
    ],
    *[
        ("3d_" + name, 3, kwargs, shape)
        for name, kwargs, shape in common.CONV3D_CASES
    ],
]
PATCH_IDS = [case[0] for case in PATCH_CASES]


@pytest.mark.parametrize(
    "name,rank,kwargs,input_shape", PATCH_CASES, ids=PATCH_IDS
)
def test_patch_squared_norms_match_numpy_patches(
    name, rank, kwargs, input_shape
):
    common.skip_unless_supported(kwargs, rank=rank)
    x = np.random.default_rng(4).standard_normal(input_shape).astype("float32")
    kwargs = {"data_format": "channels_last", **kwargs}
    y = ops.patch_squared_norms(x, **kwargs)
    kernel_size = kwargs["kernel_size"]
    if isinstance(kernel_size, int):
        kernel_size = (kernel_size,) * rank

    def as_tuple(name):
        value = kwargs.get(name, 1)
        return (value,) * rank if isinstance(value, int) else value

    expected = reference.patch_squared_norms(
        x,
        kernel_size,
        as_tuple("strides"),
        padding=kwargs.get("padding", "valid"),
        data_format=kwargs["data_format"],
        dilation_rate=as_tuple("dilation_rate"),
        groups=kwargs.get("groups", 1),
    )
    assert tuple(y.shape) == expected.shape
    np.testing.assert_allclose(testing.to_numpy(y), expected, rtol=1e-5)
    # The spatial shape of Keras' own convolution, one channel per group.
    keras_shape = common.KERAS_CONV[rank](
        kwargs.get("groups", 1), **kwargs
    ).compute_output_shape(input_shape)
    assert tuple(y.shape) == tuple(keras_shape)


@pytest.mark.parametrize("groups", [1, 3])
def test_patch_squared_norms_of_ones_count_the_patch(groups):
    # A ones input: |P|^2 is the number of entries of a group's patch,
    # except where zero padding covers part of the window.
    x = np.ones((1, 5, 6), "float32")
    y = testing.to_numpy(
        ops.patch_squared_norms(x, 3, padding="causal", groups=groups)
    )
    per_group = 6 // groups
    np.testing.assert_allclose(
        y[0, :, 0], np.array([1, 2, 3, 3, 3]) * per_group, rtol=1e-6
    )
    assert y.shape == (1, 5, groups)


def test_patch_squared_norms_default_data_format_is_the_keras_one():
    x = np.ones((1, 2, 4, 4), "float32")
    previous = keras.config.image_data_format()
    keras.config.set_image_data_format("channels_first")
    try:
        if not common.channels_first_conv_supported(2):
            pytest.skip("no channels_first convolution on this backend")
        y = ops.patch_squared_norms(x, 3)
    finally:
        keras.config.set_image_data_format(previous)
    assert tuple(y.shape) == (1, 1, 2, 2)
    np.testing.assert_allclose(testing.to_numpy(y), 18.0, rtol=1e-6)


def test_patch_squared_norms_are_what_the_layers_divide_by():
    # AffineLikeConv1D with a zero bias: W.P / sqrt(|P|^2 + 1).
    from keras_affine_div.layers import AffineLikeConv1D

    x = np.random.default_rng(5).standard_normal((2, 9, 4)).astype("float32")
    layer = AffineLikeConv1D(4, 3, padding="causal", groups=2)
    plain = keras.layers.Conv1D(4, 3, padding="causal", groups=2)
    plain.build(x.shape)
    layer.build(x.shape)
    plain.set_weights(layer.get_weights())
    sq = ops.patch_squared_norms(x, 3, padding="causal", groups=2)
    scale = np.repeat(1 / np.sqrt(testing.to_numpy(sq) + 1), 2, axis=-1)
    np.testing.assert_allclose(
        testing.to_numpy(layer(x)),
        testing.to_numpy(plain(x)) * scale,
        rtol=1e-5,
        atol=1e-6,
    )


def test_patch_squared_norms_in_a_functional_model(tmp_path):
    inputs = keras.Input((None, 4))
    outputs = ops.patch_squared_norms(
        inputs, 2, padding="causal", dilation_rate=2, groups=2
    )
    assert tuple(outputs.shape) == (None, None, 2)
    model = keras.Model(inputs, outputs)
    x = np.random.default_rng(6).standard_normal((2, 7, 4)).astype("float32")
    expected = reference.patch_squared_norms(
        x, (2,), (1,), padding="causal", dilation_rate=(2,), groups=2
    )
    np.testing.assert_allclose(testing.to_numpy(model(x)), expected, rtol=1e-5)
    path = os.path.join(str(tmp_path), "norms.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    np.testing.assert_allclose(testing.to_numpy(loaded(x)), expected, rtol=1e-5)


def test_patch_squared_norms_gradient_matches_finite_differences():
    rng = np.random.default_rng(7)
    x = rng.standard_normal((1, 5, 2)).astype("float32")
    c = rng.standard_normal((1, 5, 2))

    def ref(v):
        sq = reference.patch_squared_norms(
            v, (3,), (1,), padding="same", groups=2
        )
        return float(np.sum(sq * c))

    expected = np.zeros(x.shape)
    for index in np.ndindex(x.shape):
        up, down = x.astype(np.float64), x.astype(np.float64)
        up[index] += 1e-6
        down[index] -= 1e-6
        expected[index] = (ref(up) - ref(down)) / 2e-6
    c_tensor = keras.ops.convert_to_tensor(c.astype("float32"))
    _, (grad,) = _backend.value_and_gradients(
        lambda v: keras.ops.sum(
            ops.patch_squared_norms(v, 3, padding="same", groups=2) * c_tensor
        ),
        [x],
    )
    np.testing.assert_allclose(grad, expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    "shape,kwargs,error,match",
    [
        (
            (2, 5),
            {"kernel_size": 3},
            ValueError,
            r"rank 3, 4 or 5.*x.shape=\(2, 5\)",
        ),
        (
            (1, 5, 5, 2),
            {"kernel_size": 3, "padding": "causal"},
            ValueError,
            r"Expected one of 'valid', 'same'. Received: padding='causal'",
        ),
        (
            (1, 5, 3),
            {"kernel_size": 3, "groups": 2},
            ValueError,
            r"divisible.*groups=2, x.shape=\(1, 5, 3\)",
        ),
        (
            (1, 2, 3),
            {"kernel_size": 3},
            ValueError,
            r"at least as large.*x.shape=\(1, 2, 3\)",
        ),
        (
            (1, 9, 3),
            {"kernel_size": 3, "strides": 2, "dilation_rate": 2},
            ValueError,
            r"strides > 1.*dilation_rate > 1",
        ),
        (
            (1, 5, 5, 2),
            {"kernel_size": (3, 3, 3)},
            ValueError,
            r"tuple of 2.*kernel_size=\(3, 3, 3\)",
        ),
        (
            (1, 5, 2),
            {"kernel_size": 3, "groups": 1.0},
            TypeError,
            r"groups=1.0",
        ),
        (
            (1, 5, 2),
            {"kernel_size": 3, "data_format": "NWC"},
            ValueError,
            r"data_format='NWC'",
        ),
    ],
    ids=[
        "rank2_input",
        "causal_2d",
        "groups_not_dividing_channels",
        "empty_output",
        "strides_and_dilation",
        "kernel_of_wrong_rank",
        "float_groups",
        "unknown_data_format",
    ],
)
def test_patch_squared_norms_bad_arguments_raise(shape, kwargs, error, match):
    with pytest.raises(error, match=match):
        ops.patch_squared_norms(np.ones(shape, "float32"), **kwargs)
