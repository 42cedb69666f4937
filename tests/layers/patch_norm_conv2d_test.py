import keras
import numpy as np
import pytest

from keras_affine_div.layers import PatchNormConv2D
from tests import testing
from tests.layers import common
from tests.layers import reference

CONV_CASES = common.CONV_CASES
CONV_IDS = common.CONV_IDS


@pytest.mark.parametrize("epsilon", [1e-3, 0.5])
@pytest.mark.parametrize("name,kwargs,input_shape", CONV_CASES, ids=CONV_IDS)
def test_matches_numpy_reference(name, kwargs, input_shape, epsilon):
    common.skip_unless_supported(kwargs)
    rng = np.random.default_rng(0)
    x = rng.standard_normal(input_shape).astype("float32")
    layer = PatchNormConv2D(4, epsilon=epsilon, **kwargs)
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
        offset=epsilon,
        bias_inside=False,
    )
    y = testing.to_numpy(layer(x))
    assert y.shape == expected.shape
    np.testing.assert_allclose(y, expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
    "name,kwargs,input_shape",
    [CONV_CASES[i] for i in (1, 3, 7, 9)],
    ids=[CONV_IDS[i] for i in (1, 3, 7, 9)],
)
def test_layer_contracts(name, kwargs, input_shape, tmp_path):
    common.skip_unless_supported(kwargs)
    expected = PatchNormConv2D(4, **kwargs).compute_output_shape(input_shape)
    testing.run_layer_test(
        PatchNormConv2D,
        {"filters": 4, "epsilon": 0.01, **kwargs},
        input_shape,
        expected,
        tmp_dir=tmp_path,
    )


def test_every_argument_round_trips(tmp_path):
    kwargs = {
        "filters": 2,
        "kernel_size": (3, 2),
        "strides": 1,
        "padding": "valid",
        "data_format": "channels_last",
        "dilation_rate": (2, 1),
        "groups": 1,
        "epsilon": 0.25,
        "activation": "relu",
        "use_bias": False,
        "kernel_initializer": "glorot_uniform",
        "bias_initializer": "ones",
        "kernel_regularizer": "l2",
        "bias_regularizer": "l1",
        "activity_regularizer": "l2",
        "kernel_constraint": "max_norm",
        "bias_constraint": "non_neg",
        "name": "pn",
    }
    testing.run_layer_test(
        PatchNormConv2D,
        kwargs,
        (2, 6, 5, 3),
        (2, 2, 4, 2),
        expected_num_trainable_weights=1,
        tmp_dir=tmp_path,
        run_policies=False,
    )


@pytest.mark.parametrize("epsilon", [1e-3, 3.0])
@pytest.mark.parametrize(
    "kwargs,input_shape",
    [
        ({"kernel_size": 3}, (1, 3, 3, 4)),
        ({"kernel_size": 3, "dilation_rate": 2}, (1, 5, 5, 2)),
        ({"kernel_size": (2, 3), "groups": 2}, (1, 2, 3, 4)),
    ],
    ids=["k3", "k3_dilation2", "k2x3_groups2"],
)
def test_sgd_step_on_single_position(kwargs, input_shape, epsilon):
    x = np.random.default_rng(1).standard_normal(input_shape).astype("float32")
    layer = PatchNormConv2D(4, epsilon=epsilon, **kwargs)
    dz, g = common.sgd_activation_step(layer, x, learning_rate=0.05)
    groups = kwargs.get("groups", 1)
    # Each filter's factor uses the squared norm of its own group's patch.
    (patch,) = reference.extract_patches(
        x.astype(np.float64),
        layer.kernel_size,
        layer.strides,
        layer.padding,
        layer.dilation_rate,
    ).reshape((1,) + layer.kernel_size + (input_shape[-1],))
    sq = np.sum(
        patch.reshape(layer.kernel_size + (groups, -1)) ** 2, axis=(0, 1, 3)
    )
    factor = np.repeat(1.0 + sq / (sq + epsilon), 4 // groups)
    np.testing.assert_allclose(dz, -0.05 * factor * g, rtol=1e-4, atol=1e-6)


def test_zero_patches_are_finite_and_far_patches_scale_invariant():
    x = np.zeros((1, 8, 8, 2), "float32")
    x[0, 5:, 5:, :] = np.random.default_rng(2).standard_normal((3, 3, 2))
    layer = PatchNormConv2D(3, 3, bias_initializer="ones", epsilon=1e-6)
    y = testing.to_numpy(layer(x))
    assert np.all(np.isfinite(y))
    np.testing.assert_allclose(y[0, 0, 0], np.ones(3), rtol=1e-6)
    np.testing.assert_allclose(
        testing.to_numpy(layer(1000.0 * x))[0, 5, 5],
        y[0, 5, 5],
        rtol=1e-4,
    )


@pytest.mark.parametrize("policy", ["float32", "mixed_float16"])
def test_zero_input_gives_finite_output_and_gradient(policy):
    layer = PatchNormConv2D(
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
    ref = PatchNormConv2D(
        8, 3, padding="same", bias_initializer="random_normal"
    )
    low = PatchNormConv2D(8, 3, padding="same", dtype="mixed_float16")
    ref.build(x.shape)
    low.build(x.shape)
    for a, b in zip(low.weights, ref.weights):
        a.assign(b)
    y = testing.to_numpy(keras.ops.cast(low(x), "float32"))
    assert np.all(np.isfinite(y))
    np.testing.assert_allclose(y, testing.to_numpy(ref(x)), atol=3e-2)
    assert np.all(np.isfinite(common.input_gradient(low, x)))


def test_default_initialisation_keeps_deep_stack_at_unit_scale():
    rms = common.last_preactivation_rms(
        lambda: PatchNormConv2D(32, 3, padding="same"), (8, 16, 16, 3)
    )
    assert 0.2 < rms < 5, rms


@pytest.mark.parametrize(
    "kwargs,error,match",
    [
        ({"filters": -1, "kernel_size": 3}, ValueError, r"filters=-1"),
        ({"filters": "4", "kernel_size": 3}, TypeError, r"filters='4'"),
        (
            {"filters": 4, "kernel_size": 3, "epsilon": 0},
            ValueError,
            r"epsilon=0",
        ),
        (
            {"filters": 4, "kernel_size": 3, "epsilon": float("inf")},
            ValueError,
            r"epsilon=inf",
        ),
        (
            {"filters": 4, "kernel_size": 3, "epsilon": None},
            TypeError,
            r"epsilon=None",
        ),
        (
            {
                "filters": 4,
                "kernel_size": 3,
                "strides": (1, 2),
                "dilation_rate": (2, 1),
            },
            ValueError,
            r"strides > 1.*dilation_rate > 1",
        ),
        (
            {"filters": 4, "kernel_size": 3, "padding": "full"},
            ValueError,
            r"padding='full'",
        ),
        (
            {"filters": 4, "kernel_size": 3, "data_format": 1},
            ValueError,
            r"data_format=1",
        ),
        (
            {"filters": 4, "kernel_size": 3, "strides": -2},
            ValueError,
            r"strides=-2",
        ),
    ],
    ids=[
        "negative_filters",
        "string_filters",
        "zero_epsilon",
        "infinite_epsilon",
        "none_epsilon",
        "strides_and_dilation",
        "unknown_padding",
        "bad_data_format",
        "negative_strides",
    ],
)
def test_bad_arguments_raise(kwargs, error, match):
    with pytest.raises(error, match=match):
        PatchNormConv2D(**kwargs)


def test_bad_input_shapes_raise():
    with pytest.raises(
        ValueError, match=r"rank 4.*input_shape=\(2, 4, 8, 8, 3\)"
    ):
        PatchNormConv2D(4, 3).build((2, 4, 8, 8, 3))
    layer = PatchNormConv2D(4, 3, data_format="channels_first")
    with pytest.raises(ValueError, match=r"channel axis.*\(2, None, 8, 8\)"):
        layer.build((2, None, 8, 8))
    layer = PatchNormConv2D(4, 3, padding="same")
    layer(np.ones((1, 5, 5, 3), "float32"))
    with pytest.raises(ValueError, match=r"axis -1.*value 3.*\(1, 5, 5, 4\)"):
        layer(np.ones((1, 5, 5, 4), "float32"))
