"""KerasHub backbones built with the package's layers inside.

KerasHub's BERT and GPT-2 backbones, from small configs (presets cannot be
downloaded here), built inside `keras_affine_div.layers_of`: every dense
and attention projection nested in their transformer layers is the
package's, the backbone stays a backbone (a task model builds on it), it
trains, and it saves and reloads with the same predictions.
"""

import collections

import keras
import numpy as np
import pytest

import keras_affine_div
from keras_affine_div import diagnostics
from keras_affine_div import layers
from tests import testing

keras_hub = pytest.importorskip("keras_hub")

SIZES = dict(
    vocabulary_size=100,
    num_layers=2,
    num_heads=2,
    hidden_dim=16,
    intermediate_dim=32,
    max_sequence_length=8,
)


def _nested_classes(layer):
    """Class name -> count over every layer nested in `layer`."""
    counts = collections.Counter()
    stack = list(layer._flatten_layers(include_self=False, recursive=False))
    while stack:
        sub = stack.pop()
        counts[type(sub).__name__] += 1
        stack.extend(sub._flatten_layers(include_self=False, recursive=False))
    return counts


def _affine_maps(counts):
    keras_maps = ("Dense", "EinsumDense", "Conv1D", "Conv2D", "Conv3D")
    return {name: n for name, n in counts.items() if name in keras_maps}


def _bert(kind="affine_like"):
    keras.utils.set_random_seed(0)
    with keras_affine_div.layers_of(kind) as record:
        backbone = keras_hub.models.BertBackbone(**SIZES)
    return backbone, record


def _bert_inputs(batch=2):
    rng = np.random.default_rng(0)
    return {
        "token_ids": rng.integers(1, 100, (batch, 8)).astype("int32"),
        "segment_ids": np.zeros((batch, 8), "int32"),
        "padding_mask": np.ones((batch, 8), "int32"),
    }


@pytest.mark.parametrize("kind", ["affine_like", "norm_like"])
def test_bert_projections_are_all_the_packages(kind):
    backbone, record = _bert(kind)
    assert type(backbone) is keras_hub.models.BertBackbone
    counts = _nested_classes(backbone)
    assert _affine_maps(counts) == {}, counts
    prefix = "AffineLike" if kind == "affine_like" else "NormLike"
    # 2 layers x (4 attention projections) and 2 x 2 feed-forward Dense,
    # plus the pooler.
    assert counts[f"{prefix}EinsumDense"] == 8
    assert counts[f"{prefix}Dense"] == 5
    assert counts[f"{prefix}MultiHeadAttention"] == 2
    assert len(record.built) == 7 and record.left == {}


@pytest.mark.slow
def test_bert_trains_and_reloads_with_the_same_predictions(tmp_path):
    backbone, _ = _bert()
    inputs = {
        name: keras.Input((8,), dtype="int32", name=name)
        for name in _bert_inputs()
    }
    pooled = backbone(inputs)["pooled_output"]
    outputs = keras.layers.Dense(2)(pooled)
    model = keras.Model(inputs, outputs)
    model.compile(
        optimizer=keras.optimizers.SGD(0.1),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    x = _bert_inputs(4)
    y = np.array([0, 1, 0, 1])
    before = [testing.to_numpy(w) for w in backbone.trainable_weights]
    history = model.fit(x, y, batch_size=4, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])
    moved = [
        not np.array_equal(testing.to_numpy(w), b)
        for w, b in zip(backbone.trainable_weights, before)
    ]
    assert sum(moved) > len(moved) // 2
    expected = testing.to_numpy(backbone(x)["sequence_output"])
    path = str(tmp_path / "bert.keras")
    backbone.save(path)
    # The transformer layers build their sublayers when loaded: inside the
    # block they are the package's again, with the saved weights.
    with keras_affine_div.layers_of():
        loaded = keras.saving.load_model(path)
    assert type(loaded) is keras_hub.models.BertBackbone
    assert _affine_maps(_nested_classes(loaded)) == {}
    np.testing.assert_allclose(
        testing.to_numpy(loaded(x)["sequence_output"]),
        expected,
        rtol=1e-5,
        atol=1e-5,
    )


def test_gpt2_backbone_takes_a_task_model():
    keras.utils.set_random_seed(0)
    with keras_affine_div.layers_of() as record:
        backbone = keras_hub.models.GPT2Backbone(**SIZES)
    counts = _nested_classes(backbone)
    assert _affine_maps(counts) == {}, counts
    # KerasHub's own attention class, its projections ours.
    assert counts["CachedMultiHeadAttention"] == 2
    assert counts["AffineLikeEinsumDense"] == 8
    assert counts["AffineLikeDense"] == 4
    assert len(record.built) == 12
    causal_lm = keras_hub.models.GPT2CausalLM(
        backbone=backbone, preprocessor=None
    )
    x = {
        "token_ids": np.ones((1, 8), "int32"),
        "padding_mask": np.ones((1, 8), "int32"),
    }
    logits = testing.to_numpy(causal_lm(x))
    assert logits.shape == (1, 8, 100) and np.all(np.isfinite(logits))


def test_layers_of_plain_attention_only():
    keras.utils.set_random_seed(0)
    with keras_affine_div.layers_of(layers=keras.layers.MultiHeadAttention):
        backbone = keras_hub.models.BertBackbone(**SIZES)
    counts = _nested_classes(backbone)
    assert counts["AffineLikeEinsumDense"] == 8
    assert counts["Dense"] == 5 and "AffineLikeDense" not in counts
    assert isinstance(
        backbone.transformer_layers[0]._self_attention_layer,
        layers.AffineLikeMultiHeadAttention,
    )


@pytest.mark.slow
def test_alignment_report_reaches_the_attention_projections():
    backbone, _ = _bert()
    inputs = {
        name: keras.Input((8,), dtype="int32", name=name)
        for name in _bert_inputs()
    }
    model = keras.Model(inputs, backbone(inputs)["pooled_output"])
    x = _bert_inputs(2)
    y = np.zeros((2, 16), "float32")
    rows = diagnostics.alignment_report(model, x, y, "mse", learning_rate=0.01)
    names = [row["layer"] for row in rows]
    projections = [n for n in names if n.endswith(("/query", "/value"))]
    # Two transformer layers, a query and a value projection in each.
    assert len(projections) == 4, names
    assert all(row["class"].startswith("AffineLike") for row in rows)
    assert len(rows) == 13  # 8 projections, 4 feed-forward, the pooler
