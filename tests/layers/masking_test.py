"""The dense layers pass a mask through unchanged, as Keras' `Dense` does;
the einsum layers too, where their equation keeps the axes it covers."""

import warnings

import keras
import numpy as np
import pytest

from keras_affine_div.layers import AffineLikeDense
from keras_affine_div.layers import AffineLikeEinsumDense
from keras_affine_div.layers import NormLikeDense
from keras_affine_div.layers import NormLikeEinsumDense
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


# Four tanh units per token, as each layer spells them.
TOKEN_LAYERS = {
    "affine": lambda: AffineLikeDense(4, activation="tanh"),
    "norm": lambda: NormLikeDense(4, activation="tanh"),
    "affine_einsum": lambda: AffineLikeEinsumDense(
        "abc,cd->abd", (None, 4), bias_axes="d", activation="tanh"
    ),
    "norm_einsum": lambda: NormLikeEinsumDense(
        "abc,cd->abd", (None, 4), bias_axes="d", activation="tanh"
    ),
}


@pytest.mark.parametrize(
    "make_layer", TOKEN_LAYERS.values(), ids=TOKEN_LAYERS.keys()
)
def test_mask_reaches_the_lstm(make_layer):
    layer = make_layer()
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
    unmasked = _model(make_layer(), mask_zero=False)
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


@pytest.mark.parametrize(
    "layer_cls", [AffineLikeEinsumDense, NormLikeEinsumDense]
)
@pytest.mark.parametrize(
    "equation,output_shape,input_shape",
    [
        ("abc,cde->abde", (None, 2, 3), (2, 6, 5)),
        ("abcd,cde->abe", (None, 3), (2, 6, 2, 5)),
        ("...c,cd->...d", 3, (2, 6, 5)),
    ],
    ids=["attention_qkv", "attention_output", "ellipsis_left"],
)
def test_einsum_passes_a_mask_over_kept_leading_axes(
    layer_cls, equation, output_shape, input_shape
):
    layer = layer_cls(equation, output_shape)
    x = np.ones(input_shape, "float32")
    mask = keras.ops.convert_to_tensor(TOKENS != 0)
    layer(x)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert layer.compute_mask(x, mask) is mask
        assert layer.compute_mask(x, None) is None


@pytest.mark.parametrize(
    "equation,output_shape,input_shape",
    [
        # A mask over (batch, steps, heads): the heads are contracted.
        ("abcd,cde->abe", (None, 3), (2, 6, 2, 5)),
        # A mask over (batch, steps): the steps move behind the units.
        ("abc,cd->adb", (3, None), (2, 6, 5)),
    ],
    ids=["contracted_axis", "moved_axis"],
)
def test_einsum_drops_a_mask_it_cannot_keep_with_a_warning(
    equation, output_shape, input_shape
):
    layer = AffineLikeEinsumDense(equation, output_shape, name="proj")
    x = np.ones(input_shape, "float32")
    mask = keras.ops.convert_to_tensor(np.ones(input_shape[:-1], bool))
    layer(x)
    with pytest.warns(UserWarning, match=r"Layer 'proj'.*mask is dropped"):
        assert layer.compute_mask(x, mask) is None
