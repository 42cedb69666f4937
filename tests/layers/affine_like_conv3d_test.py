import keras
import numpy as np
import pytest

from keras_affine_div.layers import AffineLikeConv3D
from tests.layers import common

CASES = common.CONV3D_CASES
IDS = common.CONV3D_IDS


@pytest.mark.parametrize("name,kwargs,input_shape", CASES, ids=IDS)
def test_matches_numpy_reference(name, kwargs, input_shape):
    common.assert_conv_matches_reference(AffineLikeConv3D, kwargs, input_shape)


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
