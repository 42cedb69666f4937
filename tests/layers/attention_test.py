"""A self-attention block whose four projections are the einsum layers.

`keras.layers.MultiHeadAttention` cannot be given other projection layers,
so the block is written out as it computes: query, key and value
projections `"abc,cde->abde"` (kernel `(dim, heads, head_dim)`), scaled
dot-product softmax attention with `keras.ops`, and the output projection
`"abcd,cde->abe"` (kernel `(heads, head_dim, dim)`).
"""

import math

import keras
import numpy as np
import pytest
from keras import ops

from keras_affine_div import diagnostics
from keras_affine_div.layers import AffineLikeEinsumDense
from keras_affine_div.layers import NormLikeEinsumDense
from tests import testing
from tests.layers import reference

STEPS, DIM, HEADS, HEAD_DIM = 5, 6, 2, 3
PROJECTIONS = ("query", "key", "value", "attention_output")
PROJECTION_CLASSES = {
    "affine_like": AffineLikeEinsumDense,
    "norm_like": NormLikeEinsumDense,
    "keras": keras.layers.EinsumDense,
}


def _attention_block(projection_cls, steps=STEPS):
    """The block as a model: `x -> [output, query, key, value, context]`."""
    inputs = keras.Input((steps, DIM))
    q, k, v = (
        projection_cls(
            "abc,cde->abde",
            (None, HEADS, HEAD_DIM),
            bias_axes="de",
            name=name,
        )(inputs)
        for name in PROJECTIONS[:3]
    )
    scores = ops.einsum("aecd,abcd->acbe", k, q) / math.sqrt(HEAD_DIM)
    context = ops.einsum("acbe,aecd->abcd", ops.softmax(scores, axis=-1), v)
    outputs = projection_cls(
        "abcd,cde->abe", (None, DIM), bias_axes="e", name=PROJECTIONS[3]
    )(context)
    return keras.Model(inputs, [outputs, q, k, v, context])


def _numpy_projection(layer, x, equation):
    kernel = testing.to_numpy(layer.kernel)
    bias = testing.to_numpy(layer.bias)
    if isinstance(layer, NormLikeEinsumDense):
        return reference.norm_like_einsum(
            x, equation, kernel, bias, layer.epsilon
        )
    return reference.affine_like_einsum(x, equation, kernel, bias)


def _softmax(scores):
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@pytest.mark.parametrize(
    "projection_cls",
    [AffineLikeEinsumDense, NormLikeEinsumDense],
    ids=["affine_like", "norm_like"],
)
def test_projections_and_output_match_numpy(projection_cls):
    model = _attention_block(projection_cls)
    rng = np.random.default_rng(0)
    for weight in model.weights:
        weight.assign(rng.standard_normal(tuple(weight.shape)))
    x = (rng.standard_normal((3, STEPS, DIM)) * 2).astype("float32")
    outputs, q, k, v, context = (testing.to_numpy(y) for y in model(x))
    q_ref, k_ref, v_ref = (
        _numpy_projection(model.get_layer(name), x, "abc,cde->abde")
        for name in PROJECTIONS[:3]
    )
    weights = _softmax(
        np.einsum("aecd,abcd->acbe", k_ref, q_ref) / math.sqrt(HEAD_DIM)
    )
    context_ref = np.einsum("acbe,aecd->abcd", weights, v_ref)
    outputs_ref = _numpy_projection(
        model.get_layer(PROJECTIONS[3]), context_ref, "abcd,cde->abe"
    )
    for y, expected in [
        (q, q_ref),
        (k, k_ref),
        (v, v_ref),
        (context, context_ref),
        (outputs, outputs_ref),
    ]:
        np.testing.assert_allclose(y, expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
    "projection_cls",
    [AffineLikeEinsumDense, NormLikeEinsumDense],
    ids=["affine_like", "norm_like"],
)
def test_block_trains_one_step(projection_cls):
    block = _attention_block(projection_cls)
    model = keras.Model(block.input, block.output[0])
    model.compile(
        optimizer=keras.optimizers.SGD(0.1), loss="mse", jit_compile="auto"
    )
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, STEPS, DIM)).astype("float32")
    y = rng.standard_normal((4, STEPS, DIM)).astype("float32")
    before = [testing.to_numpy(w) for w in model.trainable_weights]
    assert len(before) == 8
    history = model.fit(x, y, batch_size=4, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])
    for weight, old in zip(model.trainable_weights, before):
        assert not np.array_equal(testing.to_numpy(weight), old), weight.path


# A softmax over one key is 1, as Keras warns; here that is the point.
@pytest.mark.filterwarnings("ignore:You are using a softmax over axis")
@pytest.mark.parametrize("name", ["value", "attention_output"])
@pytest.mark.parametrize("kind", ["affine_like", "keras"])
def test_one_token_step_inside_the_block(kind, name):
    # One sample, one token: the softmax weight is 1, so the value and the
    # output projections act on the token alone. One SGD step on either
    # layer moves its output by exactly the ideal step (multiplier 1) for
    # the affine-like projections, by |x_c|^2 + 1 for Keras' own. (The
    # query and key get no gradient: one key, softmax constant.)
    block = _attention_block(PROJECTION_CLASSES[kind], steps=1)
    model = keras.Model(block.input, block.output[0])
    rng = np.random.default_rng(2)
    for weight in model.weights:
        weight.assign(rng.standard_normal(tuple(weight.shape)) * 0.5)
    x = (rng.standard_normal((1, 1, DIM)) * 2).astype("float32")
    y = rng.standard_normal((1, 1, DIM)).astype("float32")
    result = diagnostics.activation_update_alignment(
        model, name, x, y, "mse", learning_rate=0.05
    )
    layer_input = x if name == "value" else testing.to_numpy(block(x)[4])
    expected = 1.0
    if kind == "keras":
        expected = float(np.sum(layer_input.astype(np.float64) ** 2)) + 1.0
        assert expected > 2
    np.testing.assert_allclose(result.scale, [expected], rtol=1e-3)
    np.testing.assert_allclose(result.cosine, [1.0], rtol=1e-4)
