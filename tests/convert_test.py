"""`keras_affine_div.convert`: Keras models rebuilt with the package's layers.

Small models test the rules (what is converted, dropped and kept); Keras'
own applications and a transformer encoder, which no one here wrote, are
converted, trained one step, saved and reloaded.
"""

import collections

import keras
import numpy as np
import pytest

import keras_affine_div
from keras_affine_div import layers
from tests.testing import to_numpy


@keras.saving.register_keras_serializable(package="keras_affine_div_tests")
class _MyDense(keras.layers.Dense):
    """A subclass of `Dense`, which `convert` must leave alone."""


class _Subclassed(keras.Model):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.dense = keras.layers.Dense(2)

    def call(self, inputs):
        return self.dense(inputs)


def _mlp():
    return keras.Sequential(
        [
            keras.Input((6,)),
            keras.layers.Dense(8, activation="relu", name="h1"),
            keras.layers.Dense(8, activation="tanh", name="h2"),
            keras.layers.Dense(3, name="out"),
        ],
        name="mlp",
    )


def _cnn():
    """Conv, BN, ReLU; a conv feeding a BN and a skip; a dense head."""
    inputs = keras.Input((8, 8, 3), name="image")
    x = keras.layers.Conv2D(4, 3, name="c1")(inputs)
    x = keras.layers.BatchNormalization(name="bn1")(x)
    x = keras.layers.ReLU(name="relu1")(x)
    y = keras.layers.Conv2D(4, 3, padding="same", name="c2")(x)
    z = keras.layers.BatchNormalization(name="bn2")(y)
    x = keras.layers.Add(name="skip")([y, z])
    x = keras.layers.GlobalAveragePooling2D(name="pool")(x)
    x = keras.layers.Dense(6, activation="relu", name="h")(x)
    outputs = keras.layers.Dense(3, name="out")(x)
    return keras.Model(inputs, outputs, name="cnn")


def _encoder(seq_len=8, dim=16):
    """One post-norm transformer encoder block and a classifier head."""
    inputs = keras.Input((seq_len, dim), name="tokens")
    attention = keras.layers.MultiHeadAttention(
        num_heads=2, key_dim=8, name="mha"
    )(inputs, inputs)
    x = keras.layers.Add(name="add1")([inputs, attention])
    x = keras.layers.LayerNormalization(name="ln1")(x)
    y = keras.layers.Dense(32, activation="relu", name="ff1")(x)
    y = keras.layers.Dense(dim, name="ff2")(y)
    x = keras.layers.Add(name="add2")([x, y])
    x = keras.layers.LayerNormalization(name="ln2")(x)
    x = keras.layers.GlobalAveragePooling1D(name="pool")(x)
    outputs = keras.layers.Dense(2, name="out")(x)
    return keras.Model(inputs, outputs, name="encoder")


def _types(model):
    return {layer.name: type(layer).__name__ for layer in model.layers}


def _perturb(model, seed=0):
    """Sets every weight to random values in [0.5, 1.5] (variances too)."""
    rng = np.random.default_rng(seed)
    for layer in model.layers:
        weights = layer.get_weights()
        layer.set_weights(
            [
                rng.uniform(0.5, 1.5, w.shape).astype(w.dtype)
                if w.dtype.kind == "f"
                else w
                for w in weights
            ]
        )


def _assert_kept_weights_equal(model, new_model, report):
    """Every layer neither converted nor dropped has the same weights."""
    changed = set(report.converted) | set(report.dropped)
    compared = 0
    for layer in model.layers:
        if layer.name in changed or not layer.weights:
            continue
        new_weights = new_model.get_layer(layer.name).get_weights()
        assert len(new_weights) == len(layer.weights), layer.name
        for old, new in zip(layer.get_weights(), new_weights):
            np.testing.assert_array_equal(new, old, err_msg=layer.name)
        compared += 1
    return compared


def _train_save_reload(model, x, y, tmp_path, loss="mse"):
    """One SGD step (finite loss), then `.keras` save and reload."""
    model.compile(optimizer=keras.optimizers.SGD(0.01), loss=loss)
    value = model.train_on_batch(x, y)
    assert np.isfinite(value)
    path = str(tmp_path / f"{model.name}.keras")
    model.save(path)
    reloaded = keras.saving.load_model(path)
    assert _types(reloaded) == _types(model)
    np.testing.assert_allclose(
        to_numpy(reloaded(x, training=False)),
        to_numpy(model(x, training=False)),
        rtol=1e-6,
        atol=1e-6,
    )
    return reloaded


def _random(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype("float32")


# --- Sequential and functional models ---------------------------------------


def test_sequential_mlp_is_converted_trained_saved_and_reloaded(tmp_path):
    model = _mlp()
    _perturb(model)
    x, y = _random((4, 6)), _random((4, 3), seed=1)
    before = to_numpy(model(x))
    new_model, report = keras_affine_div.convert(model)
    assert isinstance(new_model, keras.Sequential)
    assert new_model.name == "mlp"
    assert _types(new_model) == {
        "h1": "AffineLikeDense",
        "h2": "AffineLikeDense",
        "out": "Dense",
    }
    assert report.kind == "affine_like"
    assert report.converted == {
        "h1": "AffineLikeDense",
        "h2": "AffineLikeDense",
    }
    assert report.dropped == ()
    assert report.skipped == {
        "out": "an output layer of the model (include_output=False)"
    }
    for name in ("h1", "h2"):
        old, new = model.get_layer(name), new_model.get_layer(name)
        assert new.units == old.units
        assert new.activation is old.activation
        # The package's initialiser, not Keras' Glorot.
        assert isinstance(
            new.kernel_initializer, keras.initializers.RandomNormal
        )
        assert new.kernel_initializer.stddev == 0.5
    assert new_model.output_shape == model.output_shape
    assert _assert_kept_weights_equal(model, new_model, report) == 1
    _train_save_reload(new_model, x, y, tmp_path)
    # The original model is a different model: untouched by the training.
    np.testing.assert_array_equal(to_numpy(model(x)), before)


def test_norm_like_kind_with_the_output_layer():
    new_model, report = keras_affine_div.convert(
        _mlp(), kind="norm_like", include_output=True
    )
    assert set(_types(new_model).values()) == {"NormLikeDense"}
    assert report.kind == "norm_like"
    assert report.skipped == {}


@pytest.mark.parametrize(
    "kind,prefix",
    [("affine_like", "AffineLikeConv"), ("norm_like", "PatchNormConv")],
)
@pytest.mark.parametrize("rank", [1, 2, 3])
def test_every_convolution_rank_is_converted(kind, prefix, rank):
    conv = {
        1: keras.layers.Conv1D,
        2: keras.layers.Conv2D,
        3: keras.layers.Conv3D,
    }
    model = keras.Sequential(
        [
            keras.Input((5,) * rank + (2,)),
            conv[rank](3, 2, strides=2, padding="same", name="conv"),
            keras.layers.Flatten(name="flat"),
            keras.layers.Dense(2, name="out"),
        ]
    )
    new_model, report = keras_affine_div.convert(model, kind=kind)
    assert report.converted == {"conv": f"{prefix}{rank}D"}
    layer = new_model.get_layer("conv")
    assert (layer.filters, layer.kernel_size) == (3, (2,) * rank)
    assert (layer.strides, layer.padding) == ((2,) * rank, "same")
    assert new_model.output_shape == model.output_shape


@pytest.mark.slow  # > 10 s on jax (compiling), ~1 s elsewhere
def test_functional_cnn_drops_only_the_norm_that_only_follows(tmp_path):
    model = _cnn()
    _perturb(model)
    new_model, report = keras_affine_div.convert(
        model, drop_following_norm=True
    )
    assert report.converted == {
        "c1": "AffineLikeConv2D",
        "c2": "AffineLikeConv2D",
        "h": "AffineLikeDense",
    }
    # `bn2` stays: `c2` feeds the skip connection too.
    assert report.dropped == ("bn1",)
    assert _types(new_model)["bn1"] == "Identity"
    assert _types(new_model)["bn2"] == "BatchNormalization"
    assert [layer.name for layer in new_model.layers] == [
        layer.name for layer in model.layers
    ]
    assert new_model.input_shape == model.input_shape
    assert new_model.output_shape == model.output_shape
    assert _assert_kept_weights_equal(model, new_model, report) == 2
    x = np.random.default_rng(0).uniform(size=(2, 8, 8, 3)).astype("float32")
    _train_save_reload(new_model, x, _random((2, 3)), tmp_path)


def test_norm_is_kept_without_drop_following_norm():
    new_model, report = keras_affine_div.convert(_cnn())
    assert report.dropped == ()
    assert _types(new_model)["bn1"] == "BatchNormalization"


def test_nested_model_is_converted_inside():
    inner = keras.Sequential(
        [
            keras.Input((4,)),
            keras.layers.Dense(4, name="inner_h"),
            keras.layers.BatchNormalization(name="inner_bn"),
            keras.layers.Dense(2, name="inner_out"),
        ],
        name="inner",
    )
    inputs = keras.Input((3,))
    outputs = inner(keras.layers.Dense(4, name="h")(inputs))
    model = keras.Model(inputs, outputs)
    new_model, report = keras_affine_div.convert(
        model, drop_following_norm=True
    )
    assert report.converted == {
        "h": "AffineLikeDense",
        "inner/inner_h": "AffineLikeDense",
    }
    # The nested model produces the output: its last layer is an output.
    assert list(report.skipped) == ["inner/inner_out"]
    assert report.dropped == ("inner/inner_bn",)
    new_inner = new_model.get_layer("inner")
    assert _types(new_inner) == {
        "inner_h": "AffineLikeDense",
        "inner_bn": "Identity",
        "inner_out": "Dense",
    }
    only, _ = keras_affine_div.convert(model, layers=["inner/inner_h"])
    assert type(only.get_layer("h")).__name__ == "Dense"


# --- What is preserved -------------------------------------------------------


def test_masks_reach_the_layers_after_a_converted_one():
    inputs = keras.Input((None,), dtype="int32")
    x = keras.layers.Embedding(10, 6, mask_zero=True, name="embed")(inputs)
    x = keras.layers.Dense(5, activation="tanh", name="h")(x)
    x = keras.layers.GlobalAveragePooling1D(name="pool")(x)
    model = keras.Model(inputs, keras.layers.Dense(2, name="out")(x))
    new_model, report = keras_affine_div.convert(model)
    assert report.converted == {"h": "AffineLikeDense"}
    padded = to_numpy(new_model(np.array([[3, 7, 0, 0]], dtype="int32")))
    unpadded = to_numpy(new_model(np.array([[3, 7]], dtype="int32")))
    # The pooling averages the two unmasked steps only.
    np.testing.assert_allclose(padded, unpadded, rtol=1e-5, atol=1e-6)


def test_dtype_policies_are_kept():
    model = keras.Sequential(
        [
            keras.Input((4,)),
            keras.layers.Dense(4, dtype="mixed_bfloat16", name="h"),
            keras.layers.LayerNormalization(dtype="mixed_bfloat16", name="ln"),
            keras.layers.Dense(4, dtype="float32", name="h2"),
            keras.layers.Dense(2, dtype="mixed_bfloat16", name="out"),
        ]
    )
    new_model, report = keras_affine_div.convert(
        model, drop_following_norm=True
    )
    assert report.dropped == ("ln",)
    for layer in model.layers:
        new = new_model.get_layer(layer.name)
        assert new.dtype_policy.name == layer.dtype_policy.name, layer.name
    y = new_model.get_layer("h")(np.ones((1, 4), dtype="float32"))
    assert keras.backend.standardize_dtype(y.dtype) == "bfloat16"


# --- Choosing layers ----------------------------------------------------------

_CNN_DENSE = {"h": "AffineLikeDense"}
_CNN_CONVS = {"c1": "AffineLikeConv2D", "c2": "AffineLikeConv2D"}


@pytest.mark.parametrize(
    "kwargs,expected",
    [
        ({"layers": keras.layers.Conv2D}, _CNN_CONVS),
        ({"layers": (keras.layers.Dense,)}, _CNN_DENSE),
        ({"layers": "c2"}, {"c2": "AffineLikeConv2D"}),
        ({"layers": ["c1", "h"]}, {"c1": "AffineLikeConv2D", **_CNN_DENSE}),
        ({"layers": lambda l: l.name.startswith("c")}, _CNN_CONVS),
        (
            {"include_output": True},
            {**_CNN_CONVS, **_CNN_DENSE, "out": "AffineLikeDense"},
        ),
        (
            {"layers": [keras.layers.Dense], "include_output": True},
            {**_CNN_DENSE, "out": "AffineLikeDense"},
        ),
        ({"layers": ["out"]}, {}),
    ],
    ids=[
        "class",
        "tuple",
        "name",
        "names",
        "predicate",
        "include_output",
        "class_and_output",
        "output_named_but_excluded",
    ],
)
def test_choice_of_layers(kwargs, expected):
    if expected:
        new_model, report = keras_affine_div.convert(_cnn(), **kwargs)
    else:
        with pytest.warns(UserWarning, match="converted no layer"):
            new_model, report = keras_affine_div.convert(_cnn(), **kwargs)
    assert report.converted == expected
    for name in ("c1", "c2", "h", "out"):
        converted = type(new_model.get_layer(name)).__name__ != (
            "Conv2D" if name.startswith("c") else "Dense"
        )
        assert converted == (name in expected), name
        if not converted:
            assert name in report.skipped
    if "out" not in expected:
        assert report.skipped["out"].startswith(
            ("an output layer", "not chosen")
        )


def test_report_reads_as_a_list():
    _, report = keras_affine_div.convert(_cnn(), drop_following_norm=True)
    text = str(report)
    assert text.splitlines()[0] == (
        "Converted 3 layer(s) (affine_like), dropped 1 normalisation "
        "layer(s), left 1 as they were."
    )
    assert "  c1: -> AffineLikeConv2D" in text
    assert "  bn1: dropped (Identity)" in text
    assert "  out: left, an output layer" in text


# --- Layers left as they are, with the reason ---------------------------------


def test_lora_quantized_and_subclassed_layers_are_left_with_reasons():
    inputs = keras.Input((4,))
    x = keras.layers.Dense(4, lora_rank=2, name="lora")(inputs)
    x = keras.layers.Dense(4, name="quantized")(x)
    x = _MyDense(4, name="mine")(x)
    model = keras.Model(inputs, keras.layers.Dense(2, name="out")(x))
    model.get_layer("quantized").quantize("int8")
    x = _random((2, 4))
    expected = to_numpy(model(x))
    new_model, report = keras_affine_div.convert(model, include_output=True)
    assert report.converted == {"out": "AffineLikeDense"}
    assert report.skipped["lora"].startswith("LoRA is enabled (lora_rank=2)")
    assert report.skipped["quantized"].startswith(
        "quantized (dtype='int8_from_float32')"
    )
    assert report.skipped["mine"].startswith("a subclass of Dense (_MyDense)")
    assert new_model.get_layer("quantized").quantization_mode == "int8"
    # The layers left are exact copies: the output before the converted
    # head is the same.
    head = new_model.get_layer("out").input
    probe = keras.Model(new_model.input, head)
    reference = keras.Model(model.input, model.get_layer("out").input)
    np.testing.assert_allclose(
        to_numpy(probe(x)), to_numpy(reference(x)), rtol=1e-6, atol=1e-6
    )
    assert expected.shape == (2, 2)


@pytest.mark.requires_backend("tensorflow", "jax")
def test_dense_on_a_sparse_input_is_left():
    inputs = keras.Input((5,), sparse=True)
    x = keras.layers.Dense(4, name="on_sparse")(inputs)
    x = keras.layers.Dense(4, name="on_dense")(x)
    model = keras.Model(inputs, keras.layers.Dense(2, name="out")(x))
    _, report = keras_affine_div.convert(model)
    assert report.converted == {"on_dense": "AffineLikeDense"}
    assert report.skipped["on_sparse"] == (
        "its input is sparse; the package's layers take dense inputs"
    )


def test_einsum_dense_is_converted_once_the_package_has_the_layer():
    if not hasattr(layers, "AffineLikeEinsumDense"):
        pytest.skip("keras_affine_div.layers has no AffineLikeEinsumDense yet")
    inputs = keras.Input((5, 6))
    x = keras.layers.EinsumDense(
        "abc,cd->abd", output_shape=(5, 4), bias_axes="d", name="proj"
    )(inputs)
    model = keras.Model(inputs, keras.layers.Dense(2, name="out")(x))
    for kind, expected in (
        ("affine_like", "AffineLikeEinsumDense"),
        ("norm_like", "NormLikeEinsumDense"),
    ):
        new_model, report = keras_affine_div.convert(model, kind=kind)
        assert report.converted == {"proj": expected}
        layer = new_model.get_layer("proj")
        assert type(layer).__name__ == expected
        assert new_model.output_shape == model.output_shape


# --- Errors ---------------------------------------------------------------------


def test_subclassed_model_raises_naming_what_to_do():
    model = _Subclassed(name="custom")
    model(np.ones((1, 3), dtype="float32"))
    with pytest.raises(
        TypeError,
        match=r"subclassed model.*keras_affine_div.layers.*functional model"
        r".*Received: model='custom' of type _Subclassed",
    ):
        keras_affine_div.convert(model)


def test_not_a_model_raises():
    with pytest.raises(TypeError, match="Received: model=<Dense"):
        keras_affine_div.convert(keras.layers.Dense(2))


def test_unbuilt_sequential_raises():
    model = keras.Sequential([keras.layers.Dense(2)], name="unbuilt")
    with pytest.raises(
        ValueError,
        match="needs a built model.*Received: model='unbuilt' with "
        "model.built=False",
    ):
        keras_affine_div.convert(model)


@pytest.mark.parametrize(
    "kwargs,error,match",
    [
        ({"kind": "affine"}, ValueError, "Received: kind='affine'"),
        ({"include_output": 1}, TypeError, "Received: include_output=1"),
        (
            {"drop_following_norm": "yes"},
            TypeError,
            "Received: drop_following_norm='yes'",
        ),
        (
            {"layers": keras.layers.BatchNormalization},
            ValueError,
            "Expected Keras layer classes among Dense, EinsumDense, Conv1D, "
            "Conv2D, Conv3D. Received: layers=<class",
        ),
        (
            {"layers": ["c1", "bn1", "nope"]},
            ValueError,
            r"not among them: \['bn1', 'nope'\]. Received: layers=",
        ),
        ({"layers": 3}, TypeError, "Received: layers=3 of type int"),
    ],
    ids=["kind", "include_output", "drop", "class", "names", "type"],
)
def test_bad_arguments_raise(kwargs, error, match):
    with pytest.raises(error, match=match):
        keras_affine_div.convert(_cnn(), **kwargs)


# --- Real architectures ---------------------------------------------------------


@pytest.mark.slow  # > 10 s on jax (compiling), ~1 s elsewhere
def test_transformer_encoder_is_converted_trained_saved_and_reloaded(
    tmp_path,
):
    model = _encoder()
    _perturb(model)
    new_model, report = keras_affine_div.convert(
        model, drop_following_norm=True
    )
    # The feed-forward layers; the attention's own projections are inside
    # `MultiHeadAttention` and stay, and no norm follows a converted layer
    # alone (`ff2` feeds the residual sum).
    assert report.converted == {
        "ff1": "AffineLikeDense",
        "ff2": "AffineLikeDense",
    }
    assert report.dropped == ()
    assert _types(new_model)["mha"] == "MultiHeadAttention"
    # The projections it cannot reach are listed by path, with the way in.
    nested = {n: why for n, why in report.skipped.items() if "/" in n}
    assert sorted(nested) == [
        "mha/attention_output",
        "mha/key",
        "mha/query",
        "mha/value",
    ]
    assert all("layers_of" in why for why in nested.values())
    # MultiHeadAttention, both LayerNormalizations and the head.
    assert _assert_kept_weights_equal(model, new_model, report) == 4
    x = _random((2, 8, 16))
    _train_save_reload(new_model, x, _random((2, 2), seed=1), tmp_path)


def _count(model, cls_name):
    return collections.Counter(type(l).__name__ for l in model.layers)[cls_name]


@pytest.mark.slow
@pytest.mark.parametrize(
    "name,build,convs,drop",
    [
        # An application's graph converts the same way on every backend,
        # and the converted layers train, save and reload on each in the
        # tests above: each application on the backends that train it in
        # seconds (JAX compiles these graphs for minutes).
        pytest.param(
            "resnet50",
            lambda: keras.applications.ResNet50(
                weights=None, input_shape=(32, 32, 3), classes=4
            ),
            53,
            False,
            marks=pytest.mark.requires_backend("torch"),
        ),
        pytest.param(
            "mobilenetv2",
            lambda: keras.applications.MobileNetV2(
                weights=None, input_shape=(32, 32, 3), alpha=0.35, classes=4
            ),
            35,
            True,
            marks=pytest.mark.requires_backend("tensorflow", "torch"),
        ),
    ],
    ids=["resnet50", "mobilenetv2"],
)
def test_keras_application_is_converted_trained_saved_and_reloaded(
    name, build, convs, drop, tmp_path
):
    model = build()
    assert _count(model, "Conv2D") == convs
    _perturb(model)
    new_model, report = keras_affine_div.convert(
        model, drop_following_norm=drop
    )
    assert len(report.converted) == convs
    assert set(report.converted.values()) == {"AffineLikeConv2D"}
    assert _count(new_model, "AffineLikeConv2D") == convs
    assert _count(new_model, "Conv2D") == 0
    # The classifier head is the output layer: kept; the depthwise
    # convolutions, which the package has no layer for, are listed.
    depthwise = {
        l.name: "keras_affine_div has no counterpart of DepthwiseConv2D: "
        "an affine map left as Keras'"
        for l in model.layers
        if type(l) is keras.layers.DepthwiseConv2D
    }
    assert len(depthwise) == {"resnet50": 0, "mobilenetv2": 17}[name]
    assert report.skipped == {
        **depthwise,
        "predictions": "an output layer of the model (include_output=False)",
    }
    if drop:
        # Every Conv2D of MobileNetV2 feeds a BatchNormalization alone; the
        # ones after its DepthwiseConv2D layers stay.
        assert len(report.dropped) == convs
        assert _count(new_model, "Identity") == convs
        assert _count(new_model, "BatchNormalization") == (
            _count(model, "BatchNormalization") - convs
        )
    else:
        assert report.dropped == ()
    changed = set(report.converted) | set(report.dropped)
    kept = _assert_kept_weights_equal(model, new_model, report)
    assert kept == sum(1 for l in model.layers if l.weights) - len(changed)
    assert new_model.output_shape == model.output_shape
    x = np.random.default_rng(0).uniform(size=(2, 32, 32, 3))
    _train_save_reload(
        new_model,
        x.astype("float32"),
        np.array([1, 3]),
        tmp_path,
        loss="sparse_categorical_crossentropy",
    )


def test_affine_maps_without_a_counterpart_are_listed():
    inputs = keras.Input((8, 8, 3))
    h = keras.layers.DepthwiseConv2D(3, name="depthwise")(inputs)
    h = keras.layers.SeparableConv2D(4, 3, name="separable")(h)
    h = keras.layers.Conv2DTranspose(4, 3, name="transposed")(h)
    h = keras.layers.Conv2D(4, 3, name="conv")(h)
    outputs = keras.layers.GlobalAveragePooling2D()(h)
    _, report = keras_affine_div.convert(keras.Model(inputs, outputs))
    assert report.converted == {"conv": "AffineLikeConv2D"}
    assert report.skipped == {
        name: f"keras_affine_div has no counterpart of {cls}: an affine map "
        "left as Keras'"
        for name, cls in [
            ("depthwise", "DepthwiseConv2D"),
            ("separable", "SeparableConv2D"),
            ("transposed", "Conv2DTranspose"),
        ]
    }


def test_layers_inside_a_layer_are_listed_and_named_by_path():
    inputs = keras.Input((6,))
    h = keras.layers.TimeDistributed(
        keras.layers.Dense(3, name="inner_dense"), name="td"
    )(keras.layers.Reshape((2, 3))(inputs))
    outputs = keras.layers.Dense(2, name="out")(keras.layers.Flatten()(h))
    model = keras.Model(inputs, outputs)
    with pytest.warns(UserWarning, match="converted no layer of model"):
        _, report = keras_affine_div.convert(model)
    assert report.converted == {}
    assert report.skipped["td/inner_dense"].startswith(
        "a Dense inside TimeDistributed 'td', which `convert` cannot rebuild"
    )
    with pytest.raises(ValueError, match="'td' is a TimeDistributed") as info:
        keras_affine_div.convert(model, layers="td")
    assert "layers_of" in str(info.value) and "\n" not in str(info.value)
    with pytest.raises(ValueError, match="nested inside TimeDistributed"):
        keras_affine_div.convert(model, layers=["td/inner_dense"])


def test_the_output_map_behind_reshaping_and_activation_layers_is_kept():
    # As MobileNetV3's head: a 1x1 Conv2D classifier, then Flatten and an
    # Activation; and a Sequential Dense followed by a softmax layer.
    inputs = keras.Input((4, 4, 3))
    h = keras.layers.Conv2D(8, 3, name="features")(inputs)
    h = keras.layers.GlobalAveragePooling2D(keepdims=True)(h)
    h = keras.layers.Conv2D(5, 1, name="logits")(h)
    h = keras.layers.Flatten()(h)
    outputs = keras.layers.Activation("softmax")(h)
    functional = keras.Model(inputs, outputs)
    sequential = keras.Sequential(
        [
            keras.Input((6,)),
            keras.layers.Dense(4, name="hidden"),
            keras.layers.Dense(3, name="head"),
            keras.layers.Dropout(0.1),
            keras.layers.Softmax(),
        ]
    )
    for model, hidden, head in [
        (functional, "features", "logits"),
        (sequential, "hidden", "head"),
    ]:
        _, report = keras_affine_div.convert(model)
        assert list(report.converted) == [hidden]
        assert report.skipped == {
            head: "an output layer of the model (include_output=False)"
        }
        _, report = keras_affine_div.convert(model, include_output=True)
        assert list(report.converted) == [hidden, head]
