"""Saved weights name the layer's class, so they never load silently into
a layer that computes another function with them.

A model whose layers rebuild their sublayers when loaded (KerasHub's
transformer layers, built inside `layers_of`) gets Keras' plain layers
when loaded outside the block: with the same weights it would compute
another function. The entry `_base.CLASS_ENTRY` makes that a loud failure,
and a file saved by one of the package's classes refuses another.
"""

import os

import keras
import numpy as np
import pytest

from keras_affine_div import layers
from keras_affine_div.layers import _base
from tests import testing


class _Holder(keras.layers.Layer):
    """Holds its dense layer in an attribute, as Keras' `MultiHeadAttention`
    and KerasHub's layers do: its weights are saved under the attribute's
    name, whatever the class, so nothing but the class entry tells them
    apart."""

    def __init__(self, dense_cls, **kwargs):
        super().__init__(**kwargs)
        self.inner = dense_cls(4, name="hidden")

    def build(self, input_shape):
        self.inner.build(input_shape)

    def call(self, x):
        return self.inner(x)


def _model(dense_cls):
    inputs = keras.Input((6,))
    outputs = _Holder(dense_cls, name="holder")(inputs)
    return keras.Model(inputs, outputs)


def _saved_weights(tmp_path, dense_cls=layers.AffineLikeDense):
    model = _model(dense_cls)
    path = os.path.join(str(tmp_path), "model.weights.h5")
    model.save_weights(path)
    return model, path


def test_the_store_names_the_class():
    layer = layers.NormLikeDense(3)
    layer.build((None, 5))
    store = {}
    layer.save_own_variables(store)
    assert bytes(store[_base.CLASS_ENTRY]).decode() == "NormLikeDense"
    fresh = layers.NormLikeDense(3)
    fresh.build((None, 5))
    fresh.load_own_variables(store)
    np.testing.assert_array_equal(
        testing.to_numpy(fresh.kernel), testing.to_numpy(layer.kernel)
    )


def test_weights_of_ours_do_not_load_into_keras_dense(tmp_path):
    _, path = _saved_weights(tmp_path)
    plain = _model(keras.layers.Dense)
    with pytest.raises(ValueError, match="'hidden' expected 2 variables"):
        plain.load_weights(path)


def test_without_the_entry_they_would_load_silently(tmp_path, monkeypatch):
    # What the entry prevents: the weights land in Keras' layer unnoticed.
    monkeypatch.setattr(
        _base.BaseDivergenceLayer,
        "save_own_variables",
        keras.layers.Layer.save_own_variables,
    )
    model, path = _saved_weights(tmp_path)
    plain = _model(keras.layers.Dense)
    plain.load_weights(path)
    np.testing.assert_array_equal(
        testing.to_numpy(plain.get_layer("holder").inner.kernel),
        testing.to_numpy(model.get_layer("holder").inner.kernel),
    )


def test_weights_of_one_class_do_not_load_into_another(tmp_path):
    _, path = _saved_weights(tmp_path)
    other = _model(layers.NormLikeDense)
    with pytest.raises(ValueError, match="saved by an AffineLikeDense"):
        other.load_weights(path)


def test_weights_without_the_entry_still_load():
    # As saved by earlier versions of the package (or by Keras' layer).
    layer = layers.AffineLikeDense(3)
    layer.build((None, 5))
    store = {"0": testing.to_numpy(layer.kernel) + 1.0, "1": np.ones(3)}
    layer.load_own_variables(store)
    np.testing.assert_array_equal(testing.to_numpy(layer.bias), np.ones(3))


def test_the_same_class_reloads_exactly(tmp_path):
    model, path = _saved_weights(tmp_path)
    again = _model(layers.AffineLikeDense)
    again.load_weights(path)
    x = np.random.default_rng(0).standard_normal((2, 6)).astype("float32")
    np.testing.assert_array_equal(
        testing.to_numpy(again(x)), testing.to_numpy(model(x))
    )
