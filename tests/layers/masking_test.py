"""The dense layers pass a mask through unchanged, as Keras' `Dense` does."""

import warnings

import keras
import numpy as np
import pytest

from keras_affine_div.layers import AffineLikeDense
from keras_affine_div.layers import NormLikeDense
from tests import testing

# Two sequences padded with zeros to length 6: 3 and 5 real tokens.
TOKENS = np.array([[3, 5, 2, 0, 0, 0], [7, 1, 4, 9, 8, 0]], "int32")
LENGTHS = (3, 5)


def _model(layer, mask_zero=True):
    model = keras.Sequential(
        [
            keras.Input((None,), dtype="int32"),
            keras.layers.Embedding(10, 5, mask_zero=mask_zero),
            layer,
            keras.layers.LSTM(3),
        ]
    )
    rng = np.random.default_rng(0)
    model.set_weights(
        [rng.standard_normal(w.shape).astype("float32") for w in model.weights]
    )
    return model


@pytest.mark.parametrize(
    "layer_cls", [AffineLikeDense, NormLikeDense], ids=["affine", "norm"]
)
def test_mask_reaches_the_lstm(layer_cls):
    layer = layer_cls(4, activation="tanh")
    assert layer.supports_masking
    model = _model(layer)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        y = testing.to_numpy(model(TOKENS))
    mask_warnings = [w for w in caught if "mask" in str(w.message)]
    assert not mask_warnings, mask_warnings[0].message
    # The LSTM skips the masked steps: each output is that of the sequence
    # without its padding.
    for i, length in enumerate(LENGTHS):
        unpadded = testing.to_numpy(model(TOKENS[i : i + 1, :length]))
        np.testing.assert_allclose(y[i], unpadded[0], rtol=1e-5, atol=1e-6)
    # Without the mask the padding changes the outputs.
    unmasked = _model(layer_cls(4, activation="tanh"), mask_zero=False)
    assert not np.allclose(testing.to_numpy(unmasked(TOKENS)), y, atol=1e-4)


@pytest.mark.parametrize(
    "layer_cls", [AffineLikeDense, NormLikeDense], ids=["affine", "norm"]
)
def test_mask_is_passed_through_unchanged(layer_cls):
    layer = layer_cls(4)
    x = np.ones((2, 6, 5), "float32")
    mask = keras.ops.convert_to_tensor(TOKENS != 0)
    layer(x)
    assert layer.compute_mask(x, mask) is mask
    dense = keras.layers.Dense(4)
    dense(x)
    assert dense.compute_mask(x, mask) is mask
