"""LoRA on every layer, with the semantics of Keras' `Dense` and `Conv*D`.

The kernel is frozen, `lora_kernel_a` and `lora_kernel_b` train, and the
layer applies `kernel + (a @ b) * (lora_alpha / lora_rank)` inside its own
division; a `.keras` file holds the merged kernel.
"""

import os

import keras
import numpy as np
import pytest

from keras_affine_div import layers
from keras_affine_div.layers import _base
from tests import testing

# (layer class, constructor arguments, input shape, the Keras layer with the
# same kernel layout)
LAYERS = {
    "affine_like_dense": (
        layers.AffineLikeDense,
        {"units": 4},
        (3, 6),
        keras.layers.Dense,
    ),
    "norm_like_dense": (
        layers.NormLikeDense,
        {"units": 5, "epsilon": 0.01},
        (2, 3, 4),
        keras.layers.Dense,
    ),
    "affine_like_einsum_dense": (
        layers.AffineLikeEinsumDense,
        {
            "equation": "abc,cde->abde",
            "output_shape": (None, 2, 3),
            "bias_axes": "de",
        },
        (2, 3, 4),
        keras.layers.EinsumDense,
    ),
    "norm_like_einsum_dense": (
        layers.NormLikeEinsumDense,
        {
            "equation": "abcd,cde->abe",
            "output_shape": (None, 5),
            "bias_axes": "e",
            "epsilon": 0.01,
        },
        (2, 3, 2, 4),
        keras.layers.EinsumDense,
    ),
    "patch_norm_conv1d": (
        layers.PatchNormConv1D,
        {"filters": 4, "kernel_size": 3, "padding": "causal"},
        (2, 7, 3),
        keras.layers.Conv1D,
    ),
    "affine_like_conv1d": (
        layers.AffineLikeConv1D,
        {"filters": 4, "kernel_size": 3, "groups": 2},
        (2, 7, 4),
        keras.layers.Conv1D,
    ),
    "patch_norm_conv2d": (
        layers.PatchNormConv2D,
        {"filters": 4, "kernel_size": 3, "padding": "same"},
        (2, 5, 5, 3),
        keras.layers.Conv2D,
    ),
    "affine_like_conv2d": (
        layers.AffineLikeConv2D,
        {"filters": 4, "kernel_size": (3, 2), "groups": 2},
        (2, 5, 5, 4),
        keras.layers.Conv2D,
    ),
    "patch_norm_conv3d": (
        layers.PatchNormConv3D,
        {"filters": 4, "kernel_size": 2},
        (2, 3, 4, 3, 2),
        keras.layers.Conv3D,
    ),
    "affine_like_conv3d": (
        layers.AffineLikeConv3D,
        {"filters": 2, "kernel_size": 2, "padding": "same"},
        (2, 3, 3, 3, 2),
        keras.layers.Conv3D,
    ),
}
CASES = list(LAYERS.values())
IDS = list(LAYERS)


def _keras_kwargs(kwargs):
    return {k: v for k, v in kwargs.items() if k != "epsilon"}


def _built(layer_cls, kwargs, input_shape, seed=0, **extra):
    layer = layer_cls(**kwargs, **extra)
    layer.build(input_shape)
    rng = np.random.default_rng(seed)
    for weight in layer.weights:
        weight.assign(rng.standard_normal(tuple(weight.shape)))
    return layer


def _names(weights):
    return [w.path.split("/")[-1] for w in weights]


def _merged_kernel(layer):
    a = testing.to_numpy(layer.lora_kernel_a).astype(np.float64)
    b = testing.to_numpy(layer.lora_kernel_b).astype(np.float64)
    kernel = testing.to_numpy(layer._kernel).astype(np.float64)
    return kernel + (a @ b) * (layer.lora_alpha / layer.lora_rank)


@pytest.mark.parametrize(
    "layer_cls,kwargs,input_shape,keras_cls", CASES, ids=IDS
)
def test_enable_lora_freezes_the_kernel_as_keras_does(
    layer_cls, kwargs, input_shape, keras_cls
):
    layer = _built(layer_cls, kwargs, input_shape)
    ours_before = layer.kernel
    layer.enable_lora(2)
    theirs = keras_cls(**_keras_kwargs(kwargs))
    theirs.build(input_shape)
    theirs.enable_lora(2)
    assert layer.lora_enabled and layer.lora_rank == 2
    assert layer.lora_alpha == 2
    assert _names(layer.trainable_weights) == _names(theirs.trainable_weights)
    assert _names(layer.trainable_weights) == [
        "bias",
        "lora_kernel_a",
        "lora_kernel_b",
    ]
    assert _names(layer.non_trainable_weights) == ["kernel"]
    assert _names(layer.non_trainable_weights) == _names(
        theirs.non_trainable_weights
    )
    for ours, keras_weight in zip(layer.weights, theirs.weights):
        assert tuple(ours.shape) == tuple(keras_weight.shape), ours.path
        assert ours.dtype == keras_weight.dtype, ours.path
    assert not layer._kernel.trainable
    assert ours_before is layer._kernel
    # The default zero `lora_kernel_b`: the layer computes what it did.
    assert np.all(testing.to_numpy(layer.lora_kernel_b) == 0)


@pytest.mark.parametrize(
    "layer_cls,kwargs,input_shape,keras_cls", CASES, ids=IDS
)
def test_output_is_that_of_the_merged_kernel(
    layer_cls, kwargs, input_shape, keras_cls
):
    x = np.random.default_rng(1).standard_normal(input_shape)
    x = x.astype("float32")
    layer = _built(layer_cls, kwargs, input_shape)
    before = testing.to_numpy(layer(x))
    layer.enable_lora(2, lora_alpha=3)
    np.testing.assert_allclose(testing.to_numpy(layer(x)), before, rtol=1e-6)
    layer.lora_kernel_a.assign(
        np.random.default_rng(2).standard_normal(layer.lora_kernel_a.shape)
    )
    layer.lora_kernel_b.assign(
        np.random.default_rng(3).standard_normal(layer.lora_kernel_b.shape)
    )
    merged = _merged_kernel(layer)
    np.testing.assert_allclose(
        testing.to_numpy(layer.kernel), merged, rtol=1e-5, atol=1e-5
    )
    plain = _built(layer_cls, kwargs, input_shape)
    plain.kernel.assign(merged.astype("float32"))
    plain.bias.assign(layer.bias)
    y = testing.to_numpy(layer(x))
    assert not np.allclose(y, before, atol=1e-3)
    np.testing.assert_allclose(
        y, testing.to_numpy(plain(x)), rtol=1e-5, atol=1e-5
    )


@pytest.mark.parametrize(
    "layer_cls,kwargs,input_shape,keras_cls", CASES, ids=IDS
)
def test_fit_trains_the_lora_weights_and_the_bias_only(
    layer_cls, kwargs, input_shape, keras_cls
):
    rng = np.random.default_rng(4)
    x = rng.standard_normal(input_shape).astype("float32")
    model = keras.Sequential(
        [keras.Input(input_shape[1:]), layer_cls(**kwargs, lora_rank=2)]
    )
    layer = model.layers[-1]
    y = rng.standard_normal(layer.compute_output_shape(input_shape))
    y = y.astype("float32")
    kernel = testing.to_numpy(layer._kernel)
    b = testing.to_numpy(layer.lora_kernel_b)
    bias = testing.to_numpy(layer.bias)
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    model.fit(x, y, batch_size=input_shape[0], epochs=2, verbose=0)
    np.testing.assert_array_equal(testing.to_numpy(layer._kernel), kernel)
    assert not np.array_equal(testing.to_numpy(layer.lora_kernel_b), b)
    assert not np.array_equal(testing.to_numpy(layer.bias), bias)


@pytest.mark.parametrize(
    "layer_cls,kwargs,input_shape,keras_cls", CASES, ids=IDS
)
def test_lora_rank_argument_enables_lora_at_build(
    layer_cls, kwargs, input_shape, keras_cls
):
    lora = {"lora_rank": 3, "lora_alpha": 6}
    testing.TestCase().run_serialization_test(layer_cls, {**kwargs, **lora})
    layer = layer_cls(**kwargs, **lora)
    assert not layer.lora_enabled
    layer.build(input_shape)
    assert layer.lora_enabled
    assert (layer.lora_rank, layer.lora_alpha) == (3, 6)
    assert tuple(layer.lora_kernel_b.shape)[0] == 3
    config = layer.get_config()
    assert (config["lora_rank"], config["lora_alpha"]) == (3, 6)
    revived = layer_cls.from_config(config)
    revived.build(input_shape)
    assert revived.lora_enabled and revived.lora_alpha == 6


@pytest.mark.parametrize(
    "layer_cls,kwargs,input_shape,keras_cls", CASES, ids=IDS
)
def test_config_without_lora(layer_cls, kwargs, input_shape, keras_cls):
    layer = layer_cls(**kwargs)
    config = layer.get_config()
    assert config["lora_rank"] is None and config["lora_alpha"] is None
    # Configs written before LoRA existed still load.
    del config["lora_rank"], config["lora_alpha"]
    revived = layer_cls.from_config(config)
    revived.build(input_shape)
    assert not revived.lora_enabled
    layer.build(input_shape)
    layer.enable_lora(4, lora_alpha=2.5)
    assert layer.get_config()["lora_rank"] == 4
    assert layer.get_config()["lora_alpha"] == 2.5


@pytest.mark.parametrize(
    "layer_cls,kwargs,input_shape,keras_cls", CASES, ids=IDS
)
def test_keras_file_holds_the_merged_kernel(
    layer_cls, kwargs, input_shape, keras_cls, tmp_path
):
    x = np.random.default_rng(5).standard_normal(input_shape)
    x = x.astype("float32")
    model = keras.Sequential(
        [keras.Input(input_shape[1:]), layer_cls(**kwargs)]
    )
    layer = model.layers[-1]
    layer.enable_lora(2, b_initializer="random_normal")
    expected = testing.to_numpy(model(x))
    merged = testing.to_numpy(layer.kernel)
    path = os.path.join(str(tmp_path), "model.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    loaded_layer = loaded.layers[-1]
    assert type(loaded_layer) is layer_cls
    assert loaded_layer.lora_enabled and loaded_layer.lora_rank == 2
    assert _names(loaded_layer.trainable_weights) == _names(
        layer.trainable_weights
    )
    # As Keras: the merged kernel becomes the frozen kernel, LoRA restarts.
    np.testing.assert_array_equal(
        testing.to_numpy(loaded_layer._kernel), merged
    )
    assert np.all(testing.to_numpy(loaded_layer.lora_kernel_a) == 0)
    assert np.all(testing.to_numpy(loaded_layer.lora_kernel_b) == 0)
    np.testing.assert_allclose(
        testing.to_numpy(loaded(x)), expected, rtol=1e-6, atol=1e-6
    )
    store = {}
    layer.save_own_variables(store)
    # The two weights, and the entry naming the class (not a weight).
    assert sorted(store) == sorted(["0", "1", _base.CLASS_ENTRY])


@pytest.mark.parametrize(
    "layer_cls,kwargs,input_shape,keras_cls",
    [
        LAYERS[name]
        for name in (
            "affine_like_dense",
            "affine_like_einsum_dense",
            "patch_norm_conv2d",
        )
    ],
    ids=["affine_like_dense", "affine_like_einsum_dense", "patch_norm_conv2d"],
)
def test_mixed_precision_keeps_lora_weights_in_float32(
    layer_cls, kwargs, input_shape, keras_cls
):
    layer = layer_cls(**kwargs, dtype="mixed_float16", lora_rank=2)
    layer.build(input_shape)
    assert layer.lora_kernel_a.dtype == layer.lora_kernel_b.dtype == "float32"
    x = np.random.default_rng(6).standard_normal(input_shape)
    y = layer(x.astype("float32"))
    assert keras.backend.standardize_dtype(y.dtype) == "float16"
    assert np.all(np.isfinite(testing.to_numpy(keras.ops.cast(y, "float32"))))


@pytest.mark.parametrize(
    "layer_cls,kwargs,input_shape,keras_cls", CASES, ids=IDS
)
def test_lora_errors(layer_cls, kwargs, input_shape, keras_cls):
    layer = layer_cls(**kwargs, name="lora_layer")
    # "You must build the layer before accessing `kernel`." (as Keras'; on
    # PyTorch `torch.nn.Module.__getattr__` rewords it, as for Keras' own).
    with pytest.raises(AttributeError, match=r"kernel"):
        _ = layer.kernel
    with pytest.raises(
        ValueError,
        match=r"Cannot enable lora on a layer that isn't yet built\. Build "
        r"it first.*\. Received: lora_layer\.built=False$",
    ):
        layer.enable_lora(2)
    layer.build(input_shape)
    with pytest.raises(ValueError, match=r"positive integer.*rank=0"):
        layer.enable_lora(0)
    with pytest.raises(TypeError, match=r"positive integer.*rank=1.5"):
        layer.enable_lora(1.5)
    with pytest.raises(ValueError, match=r"lora_alpha=-1"):
        layer.enable_lora(2, lora_alpha=-1)
    assert not layer.lora_enabled and len(layer.weights) == 2
    layer.enable_lora(2)
    with pytest.raises(
        ValueError,
        match=r"lora is already enabled\. This can only be done once per "
        r"layer\. Received: rank=3, lora_layer\.lora_rank=2$",
    ):
        layer.enable_lora(3)
    constrained = layer_cls(**kwargs, kernel_constraint="max_norm")
    constrained.build(input_shape)
    with pytest.raises(
        ValueError,
        match=r"Lora is incompatible with kernel constraints\. .*remove the "
        r"`kernel_constraint` argument\. Received: kernel_constraint=MaxNorm$",
    ):
        constrained.enable_lora(2)


@pytest.mark.parametrize(
    "lora_kwargs,error,match",
    [
        ({"lora_rank": 0}, ValueError, r"positive integer.*lora_rank=0"),
        ({"lora_rank": "4"}, TypeError, r"lora_rank='4'"),
        ({"lora_rank": 4, "lora_alpha": 0}, ValueError, r"lora_alpha=0"),
        ({"lora_rank": 4, "lora_alpha": "8"}, TypeError, r"lora_alpha='8'"),
    ],
    ids=["zero_rank", "string_rank", "zero_alpha", "string_alpha"],
)
@pytest.mark.parametrize(
    "layer_cls,kwargs,input_shape,keras_cls", CASES, ids=IDS
)
def test_bad_lora_arguments_raise(
    layer_cls, kwargs, input_shape, keras_cls, lora_kwargs, error, match
):
    with pytest.raises(error, match=match):
        layer_cls(**kwargs, **lora_kwargs)
