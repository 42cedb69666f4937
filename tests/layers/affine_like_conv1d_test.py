import keras
import numpy as np
import pytest

from keras_affine_div.layers import AffineLikeConv1D
from tests import testing
from tests.layers import common

CASES = common.CONV1D_CASES
IDS = common.CONV1D_IDS


@pytest.mark.parametrize("name,kwargs,input_shape", CASES, ids=IDS)
def test_matches_numpy_reference(name, kwargs, input_shape):
    common.assert_conv_matches_reference(AffineLikeConv1D, kwargs, input_shape)


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
