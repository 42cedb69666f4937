import keras
import numpy as np
import pytest

from keras_affine_div.layers import AffineLikeConv1D
from tests import testing
from tests.layers import common
from tests.layers import reference

CASES = common.CONV1D_CASES
IDS = common.CONV1D_IDS


@pytest.mark.parametrize("name,kwargs,input_shape", CASES, ids=IDS)
def test_matches_numpy_reference(name, kwargs, input_shape):
    common.skip_unless_supported(kwargs, rank=1)
    rng = np.random.default_rng(0)
    x = rng.standard_normal(input_shape).astype("float32")
    layer = AffineLikeConv1D(4, **kwargs)
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
    assert y.shape == tuple(layer.compute_output_shape(input_shape))
    np.testing.assert_allclose(y, expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name,kwargs,input_shape", CASES, ids=IDS)
def test_output_shape_is_keras_conv1d_output_shape(name, kwargs, input_shape):
    expected = keras.layers.Conv1D(4, **kwargs).compute_output_shape(
        input_shape
    )
    layer = AffineLikeConv1D(4, **kwargs)
    assert tuple(layer.compute_output_shape(input_shape)) == tuple(expected)


@pytest.mark.parametrize(
    "name,kwargs,input_shape",
    [CASES[i] for i in (0, 4, 8, 9)],
    ids=[IDS[i] for i in (0, 4, 8, 9)],
)
def test_layer_contracts(name, kwargs, input_shape, tmp_path):
    common.skip_unless_supported(kwargs, rank=1)
    testing.run_layer_test(
        AffineLikeConv1D,
        {"filters": 4, **kwargs},
        input_shape,
        AffineLikeConv1D(4, **kwargs).compute_output_shape(input_shape),
        tmp_dir=tmp_path,
    )


def test_every_argument_round_trips(tmp_path):
    kwargs = {
        "filters": 2,
        "kernel_size": (2,),
        "strides": 2,
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
        "name": "alc1",
    }
    testing.run_layer_test(
        AffineLikeConv1D,
        kwargs,
        (2, 7, 3),
        (2, 4, 2),
        expected_num_trainable_weights=1,
        tmp_dir=tmp_path,
        run_policies=False,
    )


@pytest.mark.parametrize(
    "kwargs,input_shape",
    [
        ({"kernel_size": 3}, (1, 3, 4)),
        ({"kernel_size": 3, "dilation_rate": 2}, (1, 5, 2)),
        (
            {"kernel_size": 4, "padding": "causal", "dilation_rate": 2},
            (1, 1, 3),
        ),
        ({"kernel_size": 2, "groups": 2}, (1, 2, 4)),
    ],
    ids=["k3", "k3_dilation2", "k4_causal_dilation2", "k2_groups2"],
)
def test_sgd_step_moves_single_position_by_exactly_the_ideal_step(
    kwargs, input_shape
):
    x = (np.random.default_rng(1).standard_normal(input_shape) * 2).astype(
        "float32"
    )
    layer = AffineLikeConv1D(4, bias_initializer="ones", **kwargs)
    dz, g = common.sgd_activation_step(layer, x, learning_rate=0.05)
    assert dz.shape == (1, 1, 4)
    np.testing.assert_allclose(dz, -0.05 * g, rtol=1e-4, atol=1e-6)


def test_keras_conv1d_step_is_scaled_by_patch_norm_plus_one():
    x = (np.random.default_rng(1).standard_normal((1, 3, 4)) * 2).astype(
        "float32"
    )
    dz, g = common.sgd_activation_step(
        keras.layers.Conv1D(4, 3), x, learning_rate=0.005
    )
    factor = float(np.sum(x.astype(np.float64) ** 2)) + 1.0
    assert factor > 20
    np.testing.assert_allclose(dz, -0.005 * factor * g, rtol=1e-4, atol=1e-6)


def test_causal_padding_adds_nothing_to_the_patch_norm():
    # The first causal output sees [0, 0, x_0]: kernel ones, no bias.
    x = np.full((1, 4, 1), 2.0, "float32")
    layer = AffineLikeConv1D(
        1, 3, padding="causal", use_bias=False, kernel_initializer="ones"
    )
    y = testing.to_numpy(layer(x))[0, :, 0]
    np.testing.assert_allclose(
        y,
        [
            2 / np.sqrt(4 + 1),
            4 / np.sqrt(8 + 1),
            6 / np.sqrt(12 + 1),
            6 / np.sqrt(12 + 1),
        ],
        rtol=1e-6,
    )


def test_huge_input_does_not_overflow_in_float16():
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((2, 16, 16)) * 100).astype("float32")
    ref = AffineLikeConv1D(
        8, 3, padding="causal", bias_initializer="random_normal"
    )
    low = AffineLikeConv1D(8, 3, padding="causal", dtype="mixed_float16")
    ref.build(x.shape)
    low.build(x.shape)
    for a, b in zip(low.weights, ref.weights):
        a.assign(b)
    y = testing.to_numpy(keras.ops.cast(low(x), "float32"))
    assert np.all(np.isfinite(y))
    np.testing.assert_allclose(y, testing.to_numpy(ref(x)), atol=3e-2)
    assert np.all(np.isfinite(common.input_gradient(low, x)))


@pytest.mark.parametrize(
    "kwargs,error,match",
    [
        ({"filters": 2.0, "kernel_size": 3}, TypeError, r"filters=2.0"),
        (
            {"filters": 4, "kernel_size": 0},
            ValueError,
            r"positive.*kernel_size=0",
        ),
        ({"filters": 4, "kernel_size": "3"}, TypeError, r"kernel_size='3'"),
        (
            {"filters": 4, "kernel_size": 3, "data_format": "NWC"},
            ValueError,
            r"data_format='NWC'",
        ),
        (
            {"filters": 4, "kernel_size": 3, "groups": 0},
            ValueError,
            r"groups=0",
        ),
    ],
    ids=[
        "float_filters",
        "zero_kernel",
        "string_kernel",
        "unknown_data_format",
        "zero_groups",
    ],
)
def test_bad_arguments_raise(kwargs, error, match):
    with pytest.raises(error, match=match):
        AffineLikeConv1D(**kwargs)


def test_bad_input_shapes_raise():
    with pytest.raises(ValueError, match=r"rank 3.*input_shape=\(2, 8\)"):
        AffineLikeConv1D(4, 3).build((2, 8))
    layer = AffineLikeConv1D(4, 3, data_format="channels_first")
    with pytest.raises(ValueError, match=r"channel axis.*\(2, None, 8\)"):
        layer.build((2, None, 8))
    layer = AffineLikeConv1D(4, 3)
    layer(np.ones((1, 5, 3), "float32"))
    with pytest.raises(ValueError, match=r"ndim=3.*ndim=4"):
        layer(np.ones((1, 5, 5, 3), "float32"))
