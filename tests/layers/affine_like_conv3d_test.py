import keras
import numpy as np
import pytest

from keras_affine_div.layers import AffineLikeConv3D
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
    layer = AffineLikeConv3D(4, **kwargs)
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
    assert y.shape == expected.shape
    assert y.shape == tuple(
        keras.layers.Conv3D(4, **kwargs).compute_output_shape(input_shape)
    )
    np.testing.assert_allclose(y, expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
    "name,kwargs,input_shape",
    [CASES[i] for i in (0, 2, 3)],
    ids=[IDS[i] for i in (0, 2, 3)],
)
def test_layer_contracts(name, kwargs, input_shape, tmp_path):
    testing.run_layer_test(
        AffineLikeConv3D,
        {"filters": 4, **kwargs},
        input_shape,
        AffineLikeConv3D(4, **kwargs).compute_output_shape(input_shape),
        tmp_dir=tmp_path,
    )


def test_every_argument_round_trips(tmp_path):
    kwargs = {
        "filters": 2,
        "kernel_size": 2,
        "strides": (1, 2, 1),
        "padding": "same",
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
        "name": "alc3",
    }
    testing.run_layer_test(
        AffineLikeConv3D,
        kwargs,
        (2, 3, 4, 2, 3),
        (2, 3, 2, 2, 2),
        expected_num_trainable_weights=1,
        tmp_dir=tmp_path,
        run_policies=False,
    )


@pytest.mark.parametrize(
    "kwargs,input_shape",
    [
        ({"kernel_size": 2}, (1, 2, 2, 2, 3)),
        ({"kernel_size": 2, "dilation_rate": (1, 2, 1)}, (1, 2, 3, 2, 2)),
        ({"kernel_size": (1, 2, 2), "groups": 2}, (1, 1, 2, 2, 4)),
    ],
    ids=["k2", "k2_dilation1x2x1", "k1x2x2_groups2"],
)
def test_sgd_step_moves_single_position_by_exactly_the_ideal_step(
    kwargs, input_shape
):
    x = (np.random.default_rng(1).standard_normal(input_shape) * 2).astype(
        "float32"
    )
    layer = AffineLikeConv3D(4, bias_initializer="ones", **kwargs)
    dz, g = common.sgd_activation_step(layer, x, learning_rate=0.05)
    assert dz.shape == (1, 1, 1, 1, 4)
    np.testing.assert_allclose(dz, -0.05 * g, rtol=1e-4, atol=1e-6)


def test_keras_conv3d_step_is_scaled_by_patch_norm_plus_one():
    x = np.random.default_rng(1).standard_normal((1, 2, 2, 2, 3)) * 2
    x = x.astype("float32")
    dz, g = common.sgd_activation_step(
        keras.layers.Conv3D(4, 2), x, learning_rate=0.002
    )
    factor = float(np.sum(x.astype(np.float64) ** 2)) + 1.0
    assert factor > 20
    np.testing.assert_allclose(dz, -0.002 * factor * g, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("policy", ["float32", "mixed_float16"])
def test_zero_input_gives_finite_output_and_gradient(policy):
    layer = AffineLikeConv3D(
        3, 2, padding="same", bias_initializer="ones", dtype=policy
    )
    x = np.zeros((2, 3, 3, 3, 2), "float32")
    y = testing.to_numpy(keras.ops.cast(layer(x), "float32"))
    np.testing.assert_allclose(y, np.ones((2, 3, 3, 3, 3)), rtol=1e-3)
    grad = common.input_gradient(layer, x)
    assert np.all(np.isfinite(grad)) and np.any(grad != 0)


def test_default_initialisation_keeps_deep_stack_at_unit_scale():
    rms = common.last_preactivation_rms(
        lambda: AffineLikeConv3D(16, 3, padding="same"), (2, 6, 6, 6, 3)
    )
    assert 0.2 < rms < 5, rms


@pytest.mark.parametrize(
    "kwargs,error,match",
    [
        (
            {"filters": 4, "kernel_size": (2, 2, 2, 2)},
            ValueError,
            r"tuple of 3.*kernel_size=\(2, 2, 2, 2\)",
        ),
        (
            {
                "filters": 4,
                "kernel_size": 2,
                "strides": (1, 2, 1),
                "dilation_rate": 2,
            },
            ValueError,
            r"strides > 1.*dilation_rate > 1",
        ),
        (
            {"filters": 4, "kernel_size": 2, "groups": 3},
            ValueError,
            r"divisible.*filters=4, groups=3",
        ),
    ],
    ids=[
        "kernel_rank4",
        "strides_and_dilation",
        "filters_not_divisible_by_groups",
    ],
)
def test_bad_arguments_raise(kwargs, error, match):
    with pytest.raises(error, match=match):
        AffineLikeConv3D(**kwargs)


def test_bad_input_shapes_raise():
    with pytest.raises(ValueError, match=r"rank 5.*input_shape=\(2, 8, 3\)"):
        AffineLikeConv3D(4, 2).build((2, 8, 3))
    with pytest.raises(
        ValueError, match=r"divisible.*groups=2.*\(2, 4, 4, 4, 3\)"
    ):
        AffineLikeConv3D(4, 2, groups=2).build((2, 4, 4, 4, 3))
    layer = AffineLikeConv3D(4, 2)
    layer(np.ones((1, 3, 3, 3, 2), "float32"))
    with pytest.raises(
        ValueError, match=r"axis -1.*value 2.*\(1, 3, 3, 3, 1\)"
    ):
        layer(np.ones((1, 3, 3, 3, 1), "float32"))
