"""The one Keras private name the package rebinds is where it expects.

`keras_affine_div._keras_internals` rebinds
`keras.src.layers.attention.multi_head_attention.EinsumDense` while
`MultiHeadAttention` builds (`layers_of`, `AffineLikeMultiHeadAttention`).
If a Keras release moves it, these tests fail, loudly, rather than the
attention projections staying plain without a word.
"""

import importlib

import keras
import pytest

from keras_affine_div import _keras_internals


def test_the_rebound_name_is_keras_einsum_dense():
    module = importlib.import_module(_keras_internals.ATTENTION_MODULE)
    assert module.EinsumDense is keras.layers.EinsumDense
    assert _keras_internals.check() is module


def test_multi_head_attention_builds_through_that_name():
    # What the rebinding relies on: `build` looks the name up when it runs.
    calls = []

    def factory(*args, **kwargs):
        calls.append(kwargs["name"])
        return keras.layers.EinsumDense(*args, **kwargs)

    with _keras_internals.attention_projections(factory):
        layer = keras.layers.MultiHeadAttention(2, 4, use_gate=True)
        layer.build((None, 3, 6), (None, 3, 6))
    assert calls == ["query", "key", "gate", "value", "attention_output"]
    module = importlib.import_module(_keras_internals.ATTENTION_MODULE)
    assert module.EinsumDense is keras.layers.EinsumDense


def test_a_moved_name_is_a_one_line_error(monkeypatch):
    module = importlib.import_module(_keras_internals.ATTENTION_MODULE)
    monkeypatch.delattr(module, "EinsumDense")
    with pytest.raises(_keras_internals.KerasInternalsError) as info:
        _keras_internals.check()
    message = str(info.value)
    assert "\n" not in message
    assert f"keras {keras.version()}" in message
    assert "MultiHeadAttention" in message


def test_a_moved_module_is_a_one_line_error(monkeypatch):
    monkeypatch.setattr(
        _keras_internals, "ATTENTION_MODULE", "keras.src.layers.no_such"
    )
    with pytest.raises(_keras_internals.KerasInternalsError) as info:
        _keras_internals.check()
    assert "\n" not in str(info.value)
    assert "keras.src.layers.no_such" in str(info.value)


def test_sublayers_lists_the_layers_a_layer_holds():
    wrapped = keras.layers.Dense(3, name="inner")
    layer = keras.layers.TimeDistributed(wrapped)
    assert _keras_internals.sublayers(layer) == [wrapped]
    assert _keras_internals.sublayers(keras.layers.Flatten()) == []
