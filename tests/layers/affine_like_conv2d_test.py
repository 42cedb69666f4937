import keras
import numpy as np
import pytest

from keras_affine_div.layers import AffineLikeConv2D
from tests import testing
from tests.layers import common
from tests.layers import reference

CONV_CASES = common.CONV_CASES
CONV_IDS = common.CONV_IDS


def _output_shape(kwargs, input_shape, filters):
    layer = AffineLikeConv2D(filters, **kwargs)
    return layer.compute_output_shape(input_shape)


@pytest.mark.parametrize("name,kwargs,input_shape", CONV_CASES, ids=CONV_IDS)
def test_matches_numpy_reference(name, kwargs, input_shape):
    common.skip_unless_supported(kwargs)
    rng = np.random.default_rng(0)
    x = rng.standard_normal(input_shape).astype("float32")
    layer = AffineLikeConv2D(4, **kwargs)
    layer.build(input_shape)
    kernel = rng.standard_normal(tuple(layer.kernel.shape)).astype("float32")
    bias = rng.standard_normal(4).astype("float32")
    layer.kernel.assign(kernel)
    layer.bias.assign(bias)
    expected = reference.patch_conv(
        x,
        kernel,
        bias,
        strides=layer.strides,
        padding=layer.padding,
        data_format=layer.data_format,
        dilation_rate=layer.dilation_rate,
        groups=layer.groups,
        offset=1.0,
        bias_inside=True,
    )
    y = testing.to_numpy(layer(x))
    assert (
        y.shape
        == expected.shape
        == tuple(layer.compute_output_shape(input_shape))
    )
    np.testing.assert_allclose(y, expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
    "name,kwargs,input_shape",
    [CONV_CASES[i] for i in (0, 2, 7, 8)],
    ids=[CONV_IDS[i] for i in (0, 2, 7, 8)],
)
def test_layer_contracts(name, kwargs, input_shape, tmp_path):
    common.skip_unless_supported(kwargs)
    testing.run_layer_test(
        AffineLikeConv2D,
        {"filters": 4, **kwargs},
        input_shape,
        _output_shape(kwargs, input_shape, 4),
        tmp_dir=tmp_path,
    )


def test_every_argument_round_trips(tmp_path):
    kwargs = {
        "filters": 2,
        "kernel_size": (2, 3),
        "strides": (1, 2),
        "padding": "SAME",
        "data_format": "channels_last",
        "dilation_rate": 1,
        "groups": 1,
        "activation": "tanh",
        "use_bias": False,
        "kernel_initializer": "orthogonal",
        "bias_initializer": "ones",
        "kernel_regularizer": "l2",
        "bias_regularizer": "l1",
        "activity_regularizer": "l2",
        "kernel_constraint": "max_norm",
        "bias_constraint": "non_neg",
        "name": "alc",
    }
    layer = AffineLikeConv2D(**kwargs)
    assert layer.padding == "same"
    testing.run_layer_test(
        AffineLikeConv2D,
        {**kwargs, "padding": "same"},
        (2, 5, 6, 3),
        (2, 5, 3, 2),
        expected_num_trainable_weights=1,
        tmp_dir=tmp_path,
        run_policies=False,
    )


@pytest.mark.parametrize(
    "kwargs,input_shape",
    [
        ({"kernel_size": 3}, (1, 3, 3, 4)),
        ({"kernel_size": 3, "dilation_rate": 2}, (1, 5, 5, 2)),
        ({"kernel_size": (2, 3), "groups": 2}, (1, 2, 3, 4)),
    ],
    ids=["k3", "k3_dilation2", "k2x3_groups2"],
)
def test_sgd_step_moves_single_position_by_exactly_the_ideal_step(
    kwargs, input_shape
):
    x = (np.random.default_rng(1).standard_normal(input_shape) * 2).astype(
        "float32"
    )
    layer = AffineLikeConv2D(4, bias_initializer="ones", **kwargs)
    dz, g = common.sgd_activation_step(layer, x, learning_rate=0.05)
    assert dz.shape == (1, 1, 1, 4)
    np.testing.assert_allclose(dz, -0.05 * g, rtol=1e-4, atol=1e-6)


def test_keras_conv2d_step_is_scaled_by_patch_norm_plus_one():
    x = (np.random.default_rng(1).standard_normal((1, 3, 3, 4)) * 2).astype(
        "float32"
    )
    dz, g = common.sgd_activation_step(
        keras.layers.Conv2D(4, 3), x, learning_rate=0.002
    )
    factor = float(np.sum(x.astype(np.float64) ** 2)) + 1.0
    assert factor > 50
    np.testing.assert_allclose(dz, -0.002 * factor * g, rtol=1e-4, atol=1e-6)


def test_each_position_divides_by_its_own_patch():
    # Not "normalise the input, then convolve": a bright corner only
    # shrinks the outputs whose patches contain it.
    x = np.ones((1, 6, 6, 1), "float32")
    x[0, 0, 0, 0] = 100.0
    layer = AffineLikeConv2D(1, 3, use_bias=False, kernel_initializer="ones")
    y = testing.to_numpy(layer(x))[0, :, :, 0]
    np.testing.assert_allclose(y[3, 3], 9 / np.sqrt(9 + 1), rtol=1e-5)
    corner = (8 + 100) / np.sqrt(8 + 100**2 + 1)
    np.testing.assert_allclose(y[0, 0], corner, rtol=1e-5)


@pytest.mark.parametrize("policy", ["float32", "mixed_float16"])
def test_zero_input_gives_finite_output_and_gradient(policy):
    layer = AffineLikeConv2D(
        3, 3, padding="same", bias_initializer="ones", dtype=policy
    )
    x = np.zeros((2, 5, 5, 2), "float32")
    y = testing.to_numpy(keras.ops.cast(layer(x), "float32"))
    np.testing.assert_allclose(y, np.ones((2, 5, 5, 3)), rtol=1e-3)
    grad = common.input_gradient(layer, x)
    assert np.all(np.isfinite(grad)) and np.any(grad != 0)


def test_huge_input_does_not_overflow_in_float16():
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((2, 8, 8, 16)) * 100).astype("float32")
    ref = AffineLikeConv2D(
        8, 3, padding="same", bias_initializer="random_normal"
    )
    low = AffineLikeConv2D(8, 3, padding="same", dtype="mixed_float16")
    ref.build(x.shape)
    low.build(x.shape)
    for a, b in zip(low.weights, ref.weights):
        a.assign(b)
    # Every interior patch has |P|^2 far above float16's maximum.
    assert 9 * 16 * 100**2 > 10 * 65504
    y = testing.to_numpy(keras.ops.cast(low(x), "float32"))
    assert np.all(np.isfinite(y))
    np.testing.assert_allclose(y, testing.to_numpy(ref(x)), atol=3e-2)
    assert np.all(np.isfinite(common.input_gradient(low, x)))


def test_default_initialisation_keeps_deep_stack_at_unit_scale():
    rms = common.last_preactivation_rms(
        lambda: AffineLikeConv2D(32, 3, padding="same"), (8, 16, 16, 3)
    )
    assert 0.2 < rms < 5, rms


@pytest.mark.parametrize(
    "kwargs,error,match",
    [
        ({"filters": 0, "kernel_size": 3}, ValueError, r"filters=0"),
        ({"filters": 2.0, "kernel_size": 3}, TypeError, r"filters=2.0"),
        (
            {"filters": 4, "kernel_size": 0},
            ValueError,
            r"positive.*kernel_size=0",
        ),
        (
            {"filters": 4, "kernel_size": (3, -1)},
            ValueError,
            r"kernel_size=\(3, -1\)",
        ),
        (
            {"filters": 4, "kernel_size": (3, 3, 3)},
            ValueError,
            r"tuple of 2.*kernel_size=\(3, 3, 3\)",
        ),
        ({"filters": 4, "kernel_size": "3"}, TypeError, r"kernel_size='3'"),
        (
            {"filters": 4, "kernel_size": 3, "strides": 0},
            ValueError,
            r"strides=0",
        ),
        (
            {"filters": 4, "kernel_size": 3, "dilation_rate": (1, 0)},
            ValueError,
            r"dilation_rate=\(1, 0\)",
        ),
        (
            {"filters": 4, "kernel_size": 3, "strides": 2, "dilation_rate": 2},
            ValueError,
            r"strides=\(2, 2\), dilation_rate=\(2, 2\)",
        ),
        (
            {"filters": 4, "kernel_size": 3, "padding": "causal"},
            ValueError,
            r"\['same', 'valid'\].*padding='causal'",
        ),
        (
            {"filters": 4, "kernel_size": 3, "data_format": "NHWC"},
            ValueError,
            r"data_format='NHWC'",
        ),
        (
            {"filters": 4, "kernel_size": 3, "groups": 0},
            ValueError,
            r"groups=0",
        ),
        (
            {"filters": 4, "kernel_size": 3, "groups": 3},
            ValueError,
            r"divisible.*filters=4, groups=3",
        ),
    ],
    ids=[
        "zero_filters",
        "float_filters",
        "zero_kernel",
        "negative_kernel",
        "kernel_rank3",
        "string_kernel",
        "zero_strides",
        "zero_dilation",
        "strides_and_dilation",
        "causal_padding",
        "unknown_data_format",
        "zero_groups",
        "filters_not_divisible_by_groups",
    ],
)
def test_bad_arguments_raise(kwargs, error, match):
    with pytest.raises(error, match=match):
        AffineLikeConv2D(**kwargs)


def test_bad_input_shapes_raise():
    with pytest.raises(ValueError, match=r"rank 4.*input_shape=\(2, 8, 3\)"):
        AffineLikeConv2D(4, 3).build((2, 8, 3))
    with pytest.raises(
        ValueError, match=r"divisible.*groups=2.*\(2, 8, 8, 3\)"
    ):
        AffineLikeConv2D(4, 3, groups=2).build((2, 8, 8, 3))
    with pytest.raises(ValueError, match=r"empty output.*\(2, 2, 2, 3\)"):
        AffineLikeConv2D(4, 3).build((2, 2, 2, 3))
    layer = AffineLikeConv2D(4, 3)
    layer(np.ones((1, 5, 5, 3), "float32"))
    with pytest.raises(ValueError, match=r"axis -1.*value 3.*\(1, 5, 5, 2\)"):
        layer(np.ones((1, 5, 5, 2), "float32"))
    with pytest.raises(ValueError, match=r"ndim=4.*ndim=3"):
        layer(np.ones((5, 5, 3), "float32"))
