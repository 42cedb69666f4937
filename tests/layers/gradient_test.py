"""Input gradients of the layers against their NumPy references.

The reference gradient is a central finite difference, in float64, of the
NumPy reference implementation (`tests/layers/reference.py`): independent of
the layers' own code, in particular of the custom gradient of the squared
norms (`keras_affine_div._backend.squared_norm`).
"""

import functools

import numpy as np
import pytest

from keras_affine_div.layers import AffineLikeConv1D
from keras_affine_div.layers import AffineLikeConv2D
from keras_affine_div.layers import AffineLikeConv3D
from keras_affine_div.layers import AffineLikeDense
from keras_affine_div.layers import AffineLikeEinsumDense
from keras_affine_div.layers import NormLikeDense
from keras_affine_div.layers import NormLikeEinsumDense
from keras_affine_div.layers import PatchNormConv1D
from keras_affine_div.layers import PatchNormConv2D
from keras_affine_div.layers import PatchNormConv3D
from tests.layers import common
from tests.layers import reference


def finite_difference_gradient(fn, x, step=1e-6):
    """Central differences of the scalar `fn` at every entry of `x`."""
    x = np.asarray(x, np.float64)
    grad = np.zeros_like(x)
    flat, out = x.reshape(-1), grad.reshape(-1)
    for i in range(flat.size):
        saved = flat[i]
        flat[i] = saved + step
        up = fn(x)
        flat[i] = saved - step
        down = fn(x)
        flat[i] = saved
        out[i] = (up - down) / (2 * step)
    return grad


def set_random_weights(layer, input_shape, rng):
    layer.build(input_shape)
    weights = []
    for variable in layer.weights:
        value = rng.standard_normal(tuple(variable.shape)).astype("float32")
        variable.assign(value)
        weights.append(value)
    return weights


def assert_input_gradient_matches(layer, reference_fn, x):
    """`d<c, layer(x)>/dx` against finite differences of the reference."""
    c = np.random.default_rng(0).standard_normal(
        tuple(layer.compute_output_shape(x.shape))
    )
    expected = finite_difference_gradient(
        lambda v: float(np.sum(reference_fn(v) * c)), x
    )
    grad = common.input_gradient(layer, x, seed=0)
    assert np.abs(expected).max() > 0.1
    np.testing.assert_allclose(grad, expected, rtol=2e-3, atol=2e-4)


# units 4 < input_dim 6 divides the matmul's output, units 9 its input.
@pytest.mark.parametrize("units", [4, 9], ids=["scaled_output", "scaled_input"])
@pytest.mark.parametrize("use_bias", [True, False], ids=["bias", "no_bias"])
@pytest.mark.parametrize("layer_cls", [AffineLikeDense, NormLikeDense])
def test_dense_input_gradient(layer_cls, use_bias, units):
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((3, 6)) * 1.5).astype("float32")
    layer = layer_cls(units, use_bias=use_bias)
    weights = set_random_weights(layer, x.shape, rng)
    kernel, bias = weights[0], (weights[1] if use_bias else 0.0)
    if layer_cls is AffineLikeDense:
        ref = functools.partial(
            reference.affine_like_dense, kernel=kernel, bias=bias
        )
    else:
        ref = functools.partial(
            reference.norm_like_dense,
            kernel=kernel,
            bias=bias,
            epsilon=layer.epsilon,
        )
    assert_input_gradient_matches(layer, ref, x)


# The einsum cases divide the einsum's output where it has no more entries
# per position than `x_c` (attention_output, nothing_contracted, no_bias),
# else the input.
@pytest.mark.parametrize(
    "name,kwargs,input_shape", common.EINSUM_CASES, ids=common.EINSUM_IDS
)
@pytest.mark.parametrize(
    "layer_cls", [AffineLikeEinsumDense, NormLikeEinsumDense]
)
def test_einsum_input_gradient(layer_cls, name, kwargs, input_shape):
    rng = np.random.default_rng(1)
    x = (rng.standard_normal(input_shape) * 1.5).astype("float32")
    layer = layer_cls(**kwargs)
    weights = set_random_weights(layer, x.shape, rng)
    bias = weights[1] if layer.use_bias else None
    ref = common.einsum_reference(layer, weights[0], bias)
    assert_input_gradient_matches(layer, ref, x)


def _check_conv_input_gradient(layer_cls, kwargs, input_shape, rank):
    common.skip_unless_supported(kwargs, rank=rank)
    rng = np.random.default_rng(2)
    x = rng.standard_normal(input_shape).astype("float32")
    layer = layer_cls(4, **kwargs)
    kernel, bias = set_random_weights(layer, input_shape, rng)
    ref = common.conv_reference(layer, kernel, bias)
    assert_input_gradient_matches(layer, ref, x)


@pytest.mark.parametrize(
    "name,kwargs,input_shape",
    [common.CONV_CASES[i] for i in (1, 2, 6, 7, 9)],
    ids=[common.CONV_IDS[i] for i in (1, 2, 6, 7, 9)],
)
@pytest.mark.parametrize("layer_cls", [PatchNormConv2D, AffineLikeConv2D])
def test_conv_input_gradient(layer_cls, name, kwargs, input_shape):
    _check_conv_input_gradient(layer_cls, kwargs, input_shape, rank=2)


@pytest.mark.parametrize(
    "name,kwargs,input_shape",
    [common.CONV1D_CASES[i] for i in (1, 3, 4, 8, 10)],
    ids=[common.CONV1D_IDS[i] for i in (1, 3, 4, 8, 10)],
)
@pytest.mark.parametrize("layer_cls", [PatchNormConv1D, AffineLikeConv1D])
def test_conv1d_input_gradient(layer_cls, name, kwargs, input_shape):
    _check_conv_input_gradient(layer_cls, kwargs, input_shape, rank=1)


@pytest.mark.parametrize(
    "name,kwargs,input_shape",
    [common.CONV3D_CASES[i] for i in (1, 3)],
    ids=[common.CONV3D_IDS[i] for i in (1, 3)],
)
@pytest.mark.parametrize("layer_cls", [PatchNormConv3D, AffineLikeConv3D])
def test_conv3d_input_gradient(layer_cls, name, kwargs, input_shape):
    _check_conv_input_gradient(layer_cls, kwargs, input_shape, rank=3)
