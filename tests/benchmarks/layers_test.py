"""The benchmark's naive PatchNorms compute exactly `PatchNormConv2D`."""

import keras
import numpy as np
import pytest

from benchmarks import layers
from keras_affine_div.layers import PatchNormConv2D


@pytest.mark.parametrize("kind", ["extract_patches", "slices"])
@pytest.mark.parametrize("padding", ["same", "valid"])
def test_naive_patch_norm_computes_patch_norm_conv2d(kind, padding):
    naive_cls = layers.NAIVE_PATCH_NORMS[kind]
    x = np.random.default_rng(0).normal(size=(2, 7, 6, 3)).astype("float32")
    ours = PatchNormConv2D(4, 3, padding=padding)
    naive = naive_cls(4, 3, padding=padding)
    expected = ours(x)
    naive(x)
    naive.kernel.assign(ours.kernel)
    naive.bias.assign(keras.random.normal((4,), seed=1))
    ours.bias.assign(naive.bias)
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(naive(x)),
        keras.ops.convert_to_numpy(ours(x)),
        rtol=1e-4,
        atol=1e-5,
    )
    assert tuple(expected.shape) == tuple(naive(x).shape)
