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
    common.assert_conv_matches_reference(
        PatchNormConv1D, kwargs, input_shape, epsilon=epsilon
    )


def test_padding_is_case_insensitive():
    assert PatchNormConv1D(2, 3, padding="CAUSAL").padding == "causal"


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
