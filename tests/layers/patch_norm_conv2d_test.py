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
    common.assert_conv_matches_reference(
        PatchNormConv2D, kwargs, input_shape, epsilon=epsilon
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
