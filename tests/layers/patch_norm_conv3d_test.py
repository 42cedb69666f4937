import numpy as np
import pytest

from keras_affine_div.layers import PatchNormConv3D
from tests.layers import common
from tests.layers import reference

CASES = common.CONV3D_CASES
IDS = common.CONV3D_IDS


@pytest.mark.parametrize("name,kwargs,input_shape", CASES, ids=IDS)
def test_matches_numpy_reference(name, kwargs, input_shape):
    common.assert_conv_matches_reference(
        PatchNormConv3D, kwargs, input_shape, epsilon=0.01
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


def test_bad_input_shapes_raise():
    with pytest.raises(
        ValueError,
        match=r"rank 5 \(batch, depth, height, width, channels.*\(2, 4, 4, 3\)",
    ):
        PatchNormConv3D(4, 2).build((2, 4, 4, 3))
    with pytest.raises(ValueError, match=r"empty output.*\(2, 1, 4, 4, 3\)"):
        PatchNormConv3D(4, 2).build((2, 1, 4, 4, 3))
