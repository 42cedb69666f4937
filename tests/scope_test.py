"""`keras_affine_div.layers_of`: build any model with the package's layers.

Inside the block the public Keras classes build the package's layers (by
any code that asks `keras.layers` for them, a subclassed model included);
outside it, Keras is exactly as before, after an error too.
"""

import importlib

import keras
import numpy as np
import pytest

import keras_affine_div
from keras_affine_div import _keras_internals
from keras_affine_div import layers
from tests import testing

NAMES = (
    "Dense",
    "EinsumDense",
    "Conv1D",
    "Conv2D",
    "Conv3D",
    "Convolution2D",
    "MultiHeadAttention",
)
ORIGINALS = {name: getattr(keras.layers, name) for name in NAMES}


def _attention_module():
    return importlib.import_module(_keras_internals.ATTENTION_MODULE)


def _assert_keras_restored():
    for name, cls in ORIGINALS.items():
        assert getattr(keras.layers, name) is cls, name
    assert _attention_module().EinsumDense is keras.layers.EinsumDense


def _build_everything():
    """One layer of each class, by the public names, as user code does."""
    return {
        "Dense": keras.layers.Dense(4),
        "EinsumDense": keras.layers.EinsumDense("ab,bc->ac", 4, bias_axes="c"),
        "Conv1D": keras.layers.Conv1D(2, 3),
        "Conv2D": keras.layers.Conv2D(2, 3, padding="same"),
        "Conv3D": keras.layers.Conv3D(2, 3),
        "Convolution2D": keras.layers.Convolution2D(2, 3),
        "MultiHeadAttention": keras.layers.MultiHeadAttention(2, 4),
    }


EXPECTED = {
    "affine_like": {
        "Dense": layers.AffineLikeDense,
        "EinsumDense": layers.AffineLikeEinsumDense,
        "Conv1D": layers.AffineLikeConv1D,
        "Conv2D": layers.AffineLikeConv2D,
        "Conv3D": layers.AffineLikeConv3D,
        "Convolution2D": layers.AffineLikeConv2D,
        "MultiHeadAttention": layers.AffineLikeMultiHeadAttention,
    },
    "norm_like": {
        "Dense": layers.NormLikeDense,
        "EinsumDense": layers.NormLikeEinsumDense,
        "Conv1D": layers.PatchNormConv1D,
        "Conv2D": layers.PatchNormConv2D,
        "Conv3D": layers.PatchNormConv3D,
        "Convolution2D": layers.PatchNormConv2D,
        "MultiHeadAttention": layers.NormLikeMultiHeadAttention,
    },
}


@pytest.mark.parametrize("kind", sorted(EXPECTED))
def test_every_class_builds_the_packages_inside_and_keras_after(kind):
    with keras_affine_div.layers_of(kind) as record:
        built = _build_everything()
    for name, layer in built.items():
        assert type(layer) is EXPECTED[kind][name], name
    assert [cls for _, cls in record.built] == [
        EXPECTED[kind][name].__name__ for name in built
    ]
    assert record.left == {}
    _assert_keras_restored()
    after = _build_everything()
    assert [type(layer) for layer in after.values()] == [
        ORIGINALS[name] for name in after
    ]


def test_arguments_are_kept_but_the_kernel_initializer():
    with keras_affine_div.layers_of():
        layer = keras.layers.Dense(
            5,
            activation="tanh",
            use_bias=False,
            kernel_initializer="zeros",
            kernel_regularizer="l2",
            name="hidden",
        )
    assert isinstance(layer, layers.AffineLikeDense)
    assert (layer.units, layer.name, layer.use_bias) == (5, "hidden", False)
    assert layer.activation is keras.activations.tanh
    assert isinstance(layer.kernel_regularizer, keras.regularizers.L2)
    # The package's default kernel, as `convert` gives.
    assert layer.kernel_initializer.get_config()["stddev"] == 0.5
    layer.build((None, 3))
    assert np.any(testing.to_numpy(layer.kernel))


def test_positional_arguments_reach_the_layer():
    with keras_affine_div.layers_of("norm_like"):
        layer = keras.layers.EinsumDense("abc,cd->abd", (None, 6), "relu")
    assert isinstance(layer, layers.NormLikeEinsumDense)
    assert layer.partial_output_shape == (None, 6)
    assert layer.activation is keras.activations.relu


def test_keras_is_restored_after_an_error_in_the_block():
    with pytest.raises(RuntimeError, match="boom"):
        with keras_affine_div.layers_of():
            assert keras.layers.Dense is not ORIGINALS["Dense"]
            raise RuntimeError("boom")
    _assert_keras_restored()


def test_blocks_nest_and_each_restores_what_it_found():
    with keras_affine_div.layers_of("affine_like"):
        with keras_affine_div.layers_of("norm_like"):
            inner = keras.layers.Dense(2)
        outer = keras.layers.Dense(2)
    assert type(inner) is layers.NormLikeDense
    assert type(outer) is layers.AffineLikeDense
    _assert_keras_restored()


def test_layers_chooses_which_classes():
    with keras_affine_div.layers_of(layers=keras.layers.Conv2D) as record:
        built = _build_everything()
    assert type(built["Conv2D"]) is layers.AffineLikeConv2D
    assert type(built["Dense"]) is keras.layers.Dense
    assert type(built["MultiHeadAttention"]) is keras.layers.MultiHeadAttention
    assert len(record.built) == 2  # Conv2D and its alias Convolution2D


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"kind": "affine"}, "Received: kind='affine'"),
        ({"layers": keras.layers.Flatten}, "Expected None or Keras layer"),
        ({"layers": ()}, "Expected None or Keras layer"),
    ],
)
def test_bad_arguments_are_one_line_errors(kwargs, match):
    with pytest.raises(ValueError, match=match) as info:
        with keras_affine_div.layers_of(**kwargs):
            pass
    assert "\n" not in str(info.value)
    _assert_keras_restored()


def test_class_checks_still_see_keras_layers():
    plain = keras.layers.Dense(2)
    with keras_affine_div.layers_of():
        ours = keras.layers.Dense(2)
        assert isinstance(plain, keras.layers.Dense)
        assert isinstance(ours, keras.layers.Dense)
        assert not isinstance(keras.layers.Flatten(), keras.layers.Dense)


def test_subclassing_inside_the_block_is_refused():
    with keras_affine_div.layers_of():
        with pytest.raises(TypeError, match="outside the `with` block"):

            class MyDense(keras.layers.Dense):
                pass

    _assert_keras_restored()


class _Block(keras.layers.Layer):
    """A layer that builds its sublayers in its own `build`."""

    def build(self, input_shape):
        self.hidden = keras.layers.Dense(8)
        self.attention = keras.layers.MultiHeadAttention(2, 4)

    def call(self, x):
        return self.attention(self.hidden(x), self.hidden(x))


class _MyAttention(keras.layers.MultiHeadAttention):
    """A subclass defined outside any block, as KerasHub's are."""


def test_nested_layers_and_attention_subclasses_are_reached():
    with keras_affine_div.layers_of() as record:
        block = _Block()
        attention = _MyAttention(2, 4)
        x = np.ones((1, 3, 6), "float32")
        block(x)
        attention(x, x)
    assert type(block.hidden) is layers.AffineLikeDense
    assert type(block.attention) is layers.AffineLikeMultiHeadAttention
    assert type(attention) is _MyAttention
    for projection in (attention.query_dense, attention.output_dense):
        assert type(projection) is layers.AffineLikeEinsumDense
    # The subclass's four projections are recorded with the two layers.
    assert len(record.built) == 6


def test_a_layer_the_package_refuses_is_built_as_keras_and_recorded():
    with keras_affine_div.layers_of() as record:
        layer = keras.layers.Dense(4, dtype="int8_from_float32", name="q")
    assert type(layer) is keras.layers.Dense
    assert list(record.left) == ["q"]
    assert "refused" in record.left["q"]
    assert "left" in str(record)
