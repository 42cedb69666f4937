import keras
import numpy as np
import pytest

from keras_affine_div.layers import PatchNormConv3D
from tests import testing
from tests.layers import common
from tests.layers import reference

CASES = common.CONV3D_CASES
IDS = common.CONV3D_IDS


@pytest.mark.parametrize("name,kwargs,input_shape", CASES, ids=IDS)
def test_matches_numpy_reference(name, kwargs, input_shape):
    common.skip_unless_supported(kwargs, rank=3)
    rng = np.random.default_rng(0)
    x = rng.standard_normal(input_shape).astype("float32")
    layer = PatchNormConv3D(4, epsilon=0.01, **kwargs)
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
        offset=0.01,
        bias_inside=False,
    )
    y = testing.to_numpy(layer(x))
    assert y.shape == expected.shape
    assert y.shape == tuple(
        keras.layers.Conv3D(4, **kwargs).compute_output_shape(input_shape)
    )
    np.testing.assert_allclose(y, expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
    "name,kwargs,input_shape",
    [CASES[i] for i in (1, 4)],
    ids=[IDS[i] for i in (1, 4)],
)
def test_layer_contracts(name, kwargs, input_shape, tmp_path):
    common.skip_unless_supported(kwargs, rank=3)
    testing.run_layer_test(
        PatchNormConv3D,
        {"filters": 4, "epsilon": 0.01, **kwargs},
        input_shape,
        PatchNormConv3D(4, **kwargs).compute_output_shape(input_shape),
        tmp_dir=tmp_path,
    )


def test_every_argument_round_trips(tmp_path):
    kwargs = {
        "filters": 2,
        "kernel_size": (2, 1, 2),
        "strides": 1,
        "padding": "valid",
        "data_format": "channels_last",
        "dilation_rate": (1, 1, 2),
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
        "name": "pn3",
    }
    testing.run_layer_test(
        PatchNormConv3D,
        kwargs,
        (2, 3, 2, 4, 3),
        (2, 2, 2, 2, 2),
        expected_num_trainable_weights=1,
        tmp_dir=tmp_path,
        run_policies=False,
    )


@pytest.mark.parametrize(
    "kwargs,input_shape",
    [
        ({"kernel_size": 2}, (1, 2, 2, 2, 3)),
        ({"kernel_size": (2, 1, 2), "groups": 2}, (1, 2, 1, 2, 4)),
    ],
    ids=["k2", "k2x1x2_groups2"],
)
def test_sgd_step_on_single_position(kwargs, input_shape):
    x = np.random.default_rng(1).standard_normal(input_shape).astype("float32")
    layer = PatchNormConv3D(4, epsilon=0.5, **kwargs)
    dz, g = common.sgd_activation_step(layer, x, learning_rate=0.05)
    assert dz.shape == (1, 1, 1, 1, 4)
    (sq,) = reference.patch_squared_norms(
        x, layer.kernel_size, layer.strides, groups=layer.groups
    ).reshape(1, -1)
    factor = np.repeat(1.0 + sq / (sq + 0.5), 4 // layer.groups)
    np.testing.assert_allclose(dz, -0.05 * factor * g, rtol=1e-4, atol=1e-6)


def test_zero_input_gives_finite_output_and_gradient():
    layer = PatchNormConv3D(3, 2, padding="same", bias_initializer="ones")
    x = np.zeros((2, 3, 3, 3, 2), "float32")
    np.testing.assert_allclose(
        testing.to_numpy(layer(x)), np.ones((2, 3, 3, 3, 3)), rtol=1e-6
    )
    grad = common.input_gradient(layer, x)
    assert np.all(np.isfinite(grad)) and np.any(grad != 0)


@pytest.mark.parametrize(
    "kwargs,error,match",
    [
        (
            {"filters": 4, "kernel_size": (2, 2)},
            ValueError,
            r"tuple of 3.*kernel_size=\(2, 2\)",
        ),
        (
            {"filters": 4, "kernel_size": 2, "padding": "causal"},
            ValueError,
            r"\['same', 'valid'\].*padding='causal'",
        ),
        (
            {"filters": 4, "kernel_size": 2, "epsilon": -1.0},
            ValueError,
            r"epsilon=-1.0",
        ),
    ],
    ids=["kernel_rank2", "causal_padding", "negative_epsilon"],
)
def test_bad_arguments_raise(kwargs, error, match):
    with pytest.raises(error, match=match):
        PatchNormConv3D(**kwargs)


def test_bad_input_shapes_raise():
    with pytest.raises(
        ValueError,
        match=r"rank 5 \(batch, depth, height, width, channels.*\(2, 4, 4, 3\)",
    ):
        PatchNormConv3D(4, 2).build((2, 4, 4, 3))
    with pytest.raises(ValueError, match=r"empty output.*\(2, 1, 4, 4, 3\)"):
        PatchNormConv3D(4, 2).build((2, 1, 4, 4, 3))
