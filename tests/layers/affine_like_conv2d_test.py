import keras
import numpy as np
import pytest

from keras_affine_div.layers import AffineLikeConv2D
from tests import testing
from tests.layers import common

CONV_CASES = common.CONV_CASES
CONV_IDS = common.CONV_IDS


@pytest.mark.parametrize("name,kwargs,input_shape", CONV_CASES, ids=CONV_IDS)
def test_matches_numpy_reference(name, kwargs, input_shape):
    common.assert_conv_matches_reference(AffineLikeConv2D, kwargs, input_shape)


def test_padding_is_case_insensitive():
    assert AffineLikeConv2D(2, (2, 3), padding="SAME").padding == "same"


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
