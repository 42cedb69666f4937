import keras
import numpy as np
import pytest

from keras_affine_div.layers import PatchNormConv1D
from tests import testing
from tests.layers import common
from tests.layers import reference

CASES = common.CONV1D_CASES
IDS = common.CONV1D_IDS


@pytest.mark.parametrize("epsilon", [1e-3, 0.5])
@pytest.mark.parametrize("name,kwargs,input_shape", CASES, ids=IDS)
def test_matches_numpy_reference(name, kwargs, input_shape, epsilon):
    common.skip_unless_supported(kwargs, rank=1)
    rng = np.random.default_rng(0)
    x = rng.standard_normal(input_shape).astype("float32")
    layer = PatchNormConv1D(4, epsilon=epsilon, **kwargs)
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


@pytest.mark.parametrize("name,kwargs,input_shape", CASES, ids=IDS)
def test_output_shape_is_keras_conv1d_output_shape(name, kwargs, input_shape):
    expected = keras.layers.Conv1D(4, **kwargs).compute_output_shape(
        input_shape
    )
    layer = PatchNormConv1D(4, **kwargs)
    assert tuple(layer.compute_output_shape(input_shape)) == tuple(expected)


@pytest.mark.parametrize(
    "name,kwargs,input_shape",
    [CASES[i] for i in (2, 7, 10)],
    ids=[IDS[i] for i in (2, 7, 10)],
)
def test_layer_contracts(name, kwargs, input_shape, tmp_path):
    common.skip_unless_supported(kwargs, rank=1)
    expected = PatchNormConv1D(4, **kwargs).compute_output_shape(input_shape)
    testing.run_layer_test(
        PatchNormConv1D,
        {"filters": 4, "epsilon": 0.01, **kwargs},
        input_shape,
        expected,
        tmp_dir=tmp_path,
    )


def test_every_argument_round_trips(tmp_path):
    kwargs = {
        "filters": 2,
        "kernel_size": 3,
        "strides": 1,
        "padding": "CAUSAL",
        "data_format": "channels_last",
        "dilation_rate": 2,
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
        "name": "pn1",
    }
    assert PatchNormConv1D(**kwargs).padding == "causal"
    testing.run_layer_test(
        PatchNormConv1D,
        {**kwargs, "padding": "causal"},
        (2, 7, 3),
        (2, 7, 2),
        expected_num_trainable_weights=1,
        tmp_dir=tmp_path,
        run_policies=False,
    )


def test_causal_output_depends_on_the_past_only():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1, 10, 3)).astype("float32")
    layer = PatchNormConv1D(4, 3, padding="causal", dilation_rate=2)
    y = testing.to_numpy(layer(x))
    changed = x.copy()
    changed[0, 6:] = 100.0 * rng.standard_normal((4, 3))
    y_changed = testing.to_numpy(layer(changed))
    np.testing.assert_array_equal(y_changed[0, :6], y[0, :6])
    assert not np.allclose(y_changed[0, 6:], y[0, 6:])


@pytest.mark.parametrize("epsilon", [1e-3, 3.0])
@pytest.mark.parametrize(
    "kwargs,input_shape",
    [
        ({"kernel_size": 3}, (1, 3, 4)),
        ({"kernel_size": 3, "dilation_rate": 2}, (1, 5, 2)),
        ({"kernel_size": 3, "padding": "causal"}, (1, 1, 3)),
        ({"kernel_size": 2, "groups": 2}, (1, 2, 4)),
    ],
    ids=["k3", "k3_dilation2", "k3_causal", "k2_groups2"],
)
def test_sgd_step_on_single_position(kwargs, input_shape, epsilon):
    x = np.random.default_rng(1).standard_normal(input_shape).astype("float32")
    layer = PatchNormConv1D(4, epsilon=epsilon, **kwargs)
    dz, g = common.sgd_activation_step(layer, x, learning_rate=0.05)
    assert dz.shape == (1, 1, 4)
    # Each filter's factor uses the squared norm of its own group's patch
    # (the causal zeros add nothing).
    (sq,) = reference.patch_squared_norms(
        x,
        layer.kernel_size,
        layer.strides,
        layer.padding,
        dilation_rate=layer.dilation_rate,
        groups=layer.groups,
    ).reshape(1, -1)
    factor = np.repeat(1.0 + sq / (sq + epsilon), 4 // layer.groups)
    np.testing.assert_allclose(dz, -0.05 * factor * g, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("policy", ["float32", "mixed_float16"])
def test_zero_input_gives_finite_output_and_gradient(policy):
    layer = PatchNormConv1D(
        3, 3, padding="causal", bias_initializer="ones", dtype=policy
    )
    x = np.zeros((2, 6, 2), "float32")
    y = testing.to_numpy(keras.ops.cast(layer(x), "float32"))
    np.testing.assert_allclose(y, np.ones((2, 6, 3)), rtol=1e-3)
    grad = common.input_gradient(layer, x)
    assert np.all(np.isfinite(grad)) and np.any(grad != 0)


def test_default_initialisation_keeps_deep_stack_at_unit_scale():
    rms = common.last_preactivation_rms(
        lambda: PatchNormConv1D(32, 3, padding="causal"), (8, 32, 3)
    )
    assert 0.2 < rms < 5, rms


@pytest.mark.parametrize(
    "kwargs,error,match",
    [
        ({"filters": 0, "kernel_size": 3}, ValueError, r"filters=0"),
        (
            {"filters": 4, "kernel_size": (3, 3)},
            ValueError,
            r"tuple of 1.*kernel_size=\(3, 3\)",
        ),
        (
            {"filters": 4, "kernel_size": 3, "epsilon": 0},
            ValueError,
            r"epsilon=0",
        ),
        (
            {"filters": 4, "kernel_size": 3, "padding": "full"},
            ValueError,
            r"\['causal', 'same', 'valid'\].*padding='full'",
        ),
        (
            {"filters": 4, "kernel_size": 3, "strides": 2, "dilation_rate": 2},
            ValueError,
            r"strides=\(2,\), dilation_rate=\(2,\)",
        ),
        (
            {"filters": 4, "kernel_size": 3, "groups": 3},
            ValueError,
            r"divisible.*filters=4, groups=3",
        ),
    ],
    ids=[
        "zero_filters",
        "kernel_rank2",
        "zero_epsilon",
        "unknown_padding",
        "strides_and_dilation",
        "filters_not_divisible_by_groups",
    ],
)
def test_bad_arguments_raise(kwargs, error, match):
    with pytest.raises(error, match=match):
        PatchNormConv1D(**kwargs)


def test_bad_input_shapes_raise():
    with pytest.raises(
        ValueError, match=r"rank 3 \(batch, steps, channels.*\(2, 8, 8, 3\)"
    ):
        PatchNormConv1D(4, 3).build((2, 8, 8, 3))
    with pytest.raises(ValueError, match=r"divisible.*groups=2.*\(2, 8, 3\)"):
        PatchNormConv1D(4, 3, groups=2).build((2, 8, 3))
    with pytest.raises(ValueError, match=r"empty output.*\(2, 4, 3\)"):
        PatchNormConv1D(4, 3, dilation_rate=2).build((2, 4, 3))
    layer = PatchNormConv1D(4, 3)
    layer(np.ones((1, 5, 3), "float32"))
    with pytest.raises(ValueError, match=r"axis -1.*value 3.*\(1, 5, 2\)"):
        layer(np.ones((1, 5, 2), "float32"))
