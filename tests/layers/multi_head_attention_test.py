"""`AffineLikeMultiHeadAttention` and `NormLikeMultiHeadAttention`.

Keras' `MultiHeadAttention` with the package's einsum layers as its
projections: checked against a NumPy computation of the whole layer (the
projections by `tests/layers/reference.py`, the attention written out),
against Keras' own layer for everything else (weights, config), and saved
and reloaded, in this process and in a fresh one on another backend.
"""

import math
import os
import subprocess
import sys

import keras
import numpy as np
import pytest

from conftest import BACKENDS
from keras_affine_div import diagnostics
from keras_affine_div import layers
from tests import testing
from tests.layers import reference

CLASSES = {
    "affine_like": (
        layers.AffineLikeMultiHeadAttention,
        "AffineLikeEinsumDense",
    ),
    "norm_like": (layers.NormLikeMultiHeadAttention, "NormLikeEinsumDense"),
}
HEADS, KEY_DIM, STEPS, DIM = 2, 3, 4, 5


def _layer(kind, **kwargs):
    cls, _ = CLASSES[kind]
    layer = cls(num_heads=HEADS, key_dim=KEY_DIM, **kwargs)
    layer.build((None, STEPS, DIM), (None, STEPS, DIM))
    return layer


def _randomise(layer, seed=0):
    rng = np.random.default_rng(seed)
    for weight in layer.weights:
        weight.assign(rng.standard_normal(tuple(weight.shape)) * 0.7)


def _projection(layer, x, equation):
    kernel = testing.to_numpy(layer.kernel)
    bias = testing.to_numpy(layer.bias)
    if type(layer).__name__ == "NormLikeEinsumDense":
        return reference.norm_like_einsum(
            x, equation, kernel, bias, layer.epsilon
        )
    return reference.affine_like_einsum(x, equation, kernel, bias)


def _softmax(scores):
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@pytest.mark.parametrize("use_gate", [False, True])
@pytest.mark.parametrize("kind", sorted(CLASSES))
def test_every_projection_is_the_packages(kind, use_gate):
    layer = _layer(kind, use_gate=use_gate)
    names = ["query_dense", "key_dense", "value_dense", "output_dense"]
    projections = [getattr(layer, name) for name in names]
    if use_gate:
        projections.append(layer._gate_dense)
    assert [type(p).__name__ for p in projections] == [CLASSES[kind][1]] * (
        len(projections)
    )


@pytest.mark.parametrize("kind", sorted(CLASSES))
def test_output_matches_numpy(kind):
    layer = _layer(kind)
    _randomise(layer)
    rng = np.random.default_rng(1)
    query = (rng.standard_normal((3, STEPS, DIM)) * 2).astype("float32")
    value = (rng.standard_normal((3, STEPS, DIM)) * 2).astype("float32")
    y, scores = layer(query, value, return_attention_scores=True)
    q = _projection(layer.query_dense, query, "abc,cde->abde")
    k = _projection(layer.key_dense, value, "abc,cde->abde")
    v = _projection(layer.value_dense, value, "abc,cde->abde")
    weights = _softmax(np.einsum("aecd,abcd->acbe", k, q / math.sqrt(KEY_DIM)))
    context = np.einsum("acbe,aecd->abcd", weights, v)
    expected = _projection(layer.output_dense, context, "abcd,cde->abe")
    np.testing.assert_allclose(
        testing.to_numpy(scores), weights, rtol=1e-4, atol=1e-5
    )
    np.testing.assert_allclose(
        testing.to_numpy(y), expected, rtol=1e-4, atol=1e-5
    )


@pytest.mark.parametrize("kind", sorted(CLASSES))
def test_weights_and_config_are_keras(kind):
    ours = _layer(kind, use_gate=True, dropout=0.1, output_shape=(7,))
    theirs = keras.layers.MultiHeadAttention(
        num_heads=HEADS,
        key_dim=KEY_DIM,
        use_gate=True,
        dropout=0.1,
        output_shape=(7,),
    )
    theirs.build((None, STEPS, DIM), (None, STEPS, DIM))
    assert [
        (w.path.split("/", 1)[1], tuple(w.shape)) for w in ours.weights
    ] == [(w.path.split("/", 1)[1], tuple(w.shape)) for w in theirs.weights]
    assert set(ours.get_config()) == set(theirs.get_config())


@pytest.mark.parametrize("kind", sorted(CLASSES))
def test_kernel_initializer(kind):
    default = _layer(kind)
    assert default.query_dense.kernel_initializer.get_config()["stddev"] == 0.5
    given = _layer(kind, kernel_initializer=keras.initializers.Zeros())
    for p in (given.query_dense, given.output_dense):
        assert not np.any(testing.to_numpy(p.kernel))


@pytest.mark.parametrize("kind", sorted(CLASSES))
def test_trains_one_step(kind):
    inputs = keras.Input((STEPS, DIM))
    outputs = CLASSES[kind][0](HEADS, KEY_DIM)(inputs, inputs)
    model = keras.Model(inputs, outputs)
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    rng = np.random.default_rng(2)
    x = rng.standard_normal((4, STEPS, DIM)).astype("float32")
    before = [testing.to_numpy(w) for w in model.trainable_weights]
    history = model.fit(x, x, batch_size=4, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])
    changed = [
        not np.array_equal(testing.to_numpy(w), b)
        for w, b in zip(model.trainable_weights, before)
    ]
    assert len(changed) == 8 and all(changed)


def _saved_model(kind, tmp_path):
    inputs = keras.Input((STEPS, DIM))
    outputs = CLASSES[kind][0](HEADS, KEY_DIM, name="mha")(inputs, inputs)
    model = keras.Model(inputs, outputs)
    _randomise(model.get_layer("mha"), seed=3)
    x = np.random.default_rng(4).standard_normal((2, STEPS, DIM))
    x = x.astype("float32")
    path = str(tmp_path / "model.keras")
    model.save(path)
    return path, x, testing.to_numpy(model(x))


@pytest.mark.parametrize("kind", sorted(CLASSES))
def test_saved_model_reloads(kind, tmp_path):
    path, x, y = _saved_model(kind, tmp_path)
    loaded = keras.saving.load_model(path)
    mha = loaded.get_layer("mha")
    assert type(mha) is CLASSES[kind][0]
    assert type(mha.value_dense).__name__ == CLASSES[kind][1]
    np.testing.assert_array_equal(testing.to_numpy(loaded(x)), y)


_FRESH_LOAD = """
import sys
import numpy as np
import keras
import keras_affine_div  # noqa: F401 (registers the layers)

path, x_path, y_path, cls, projection = sys.argv[1:6]
model = keras.saving.load_model(path)
mha = model.get_layer("mha")
assert type(mha).__name__ == cls, type(mha)
assert type(mha.query_dense).__name__ == projection, type(mha.query_dense)
y = keras.ops.convert_to_numpy(model(np.load(x_path)))
np.testing.assert_allclose(y, np.load(y_path), rtol=1e-5, atol=1e-5)
print("loaded on", keras.backend.backend())
"""


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(CLASSES))
def test_saved_model_reloads_in_a_fresh_process_on_another_backend(
    kind, tmp_path
):
    source = keras.backend.backend()
    target = BACKENDS[(BACKENDS.index(source) + 1) % len(BACKENDS)]
    path, x, y = _saved_model(kind, tmp_path)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y)
    env = {
        **os.environ,
        "KERAS_BACKEND": target,
        "OMP_NUM_THREADS": "1",
        "TF_CPP_MIN_LOG_LEVEL": "2",
        "CUDA_VISIBLE_DEVICES": "",
    }
    cls, projection = CLASSES[kind]
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            _FRESH_LOAD,
            path,
            str(tmp_path / "x.npy"),
            str(tmp_path / "y.npy"),
            cls.__name__,
            projection,
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"loaded on {target}" in result.stdout


# A softmax over one key is 1, as Keras warns; here that is the point.
@pytest.mark.filterwarnings("ignore:You are using a softmax over axis")
@pytest.mark.parametrize("projection", ["value", "attention_output"])
@pytest.mark.parametrize("kind", ["affine_like", "keras"])
def test_one_token_step_of_a_projection_inside_the_layer(kind, projection):
    # One sample, one token: the attention weight is 1, so the value and
    # output projections act on the token alone, and one SGD step moves
    # each by exactly the ideal step (multiplier 1) for ours, by
    # |x_c|^2 + 1 for Keras' own; measured inside the layer, by path.
    cls = {
        "affine_like": layers.AffineLikeMultiHeadAttention,
        "keras": keras.layers.MultiHeadAttention,
    }[kind]
    inputs = keras.Input((1, DIM))
    mha = cls(HEADS, KEY_DIM, name="mha")
    model = keras.Model(inputs, mha(inputs, inputs))
    _randomise(mha, seed=5)
    rng = np.random.default_rng(6)
    x = (rng.standard_normal((1, 1, DIM)) * 2).astype("float32")
    y = rng.standard_normal((1, 1, DIM)).astype("float32")
    result = diagnostics.activation_update_alignment(
        model, f"mha/{projection}", x, y, "mse", learning_rate=0.05
    )
    expected = 1.0
    if kind == "keras":
        layer_input = x
        if projection == "attention_output":
            v = testing.to_numpy(mha.value_dense(x))
            layer_input = v  # one key: the context is the value
        expected = float(np.sum(layer_input.astype(np.float64) ** 2)) + 1.0
    np.testing.assert_allclose(result.scale, [expected], rtol=1e-3)
    np.testing.assert_allclose(result.cosine, [1.0], rtol=1e-4)
