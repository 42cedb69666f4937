import os

import keras
import numpy as np
import pytest

from keras_affine_div import layers
from keras_affine_div import models
from tests import testing

MLP_INPUT = (4, 4, 3)
CNN_INPUT = (8, 8, 3)
NUM_CLASSES = 3

# The hidden-block layers of each arm, in order (one block).
MLP_BLOCKS = {
    "dense": [keras.layers.Dense],
    "affine_like": [layers.AffineLikeDense],
    "norm_like": [layers.NormLikeDense],
    "batch_norm": [
        keras.layers.Dense,
        keras.layers.BatchNormalization,
        keras.layers.Activation,
    ],
    "layer_norm": [
        keras.layers.Dense,
        keras.layers.LayerNormalization,
        keras.layers.Activation,
    ],
    "rms_norm": [
        keras.layers.Dense,
        keras.layers.RMSNormalization,
        keras.layers.Activation,
    ],
    "affine_like_head": [layers.AffineLikeDense],
}
CNN_BLOCKS = {
    "conv": [keras.layers.Conv2D],
    "patch_norm": [layers.PatchNormConv2D],
    "affine_like_conv": [layers.AffineLikeConv2D],
    "batch_norm": [
        keras.layers.Conv2D,
        keras.layers.BatchNormalization,
        keras.layers.Activation,
    ],
    "group_norm": [
        keras.layers.Conv2D,
        keras.layers.GroupNormalization,
        keras.layers.Activation,
    ],
    "layer_norm": [
        keras.layers.Conv2D,
        keras.layers.LayerNormalization,
        keras.layers.Activation,
    ],
}


def _fit_one_step(model, input_shape):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((8,) + input_shape).astype("float32")
    y = np.arange(8) % NUM_CLASSES
    model.compile(
        optimizer=keras.optimizers.SGD(0.01),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        jit_compile="auto",
    )
    before = [testing.to_numpy(w) for w in model.trainable_weights]
    history = model.fit(x, y, batch_size=8, epochs=1, verbose=0)
    after = [testing.to_numpy(w) for w in model.trainable_weights]
    assert np.isfinite(history.history["loss"][0])
    assert all(not np.array_equal(a, b) for a, b in zip(before, after))
    logits = testing.to_numpy(model.predict(x, verbose=0))
    assert logits.shape == (8, NUM_CLASSES)
    assert np.all(np.isfinite(logits))


def _assert_plain_head(model, num_classes=NUM_CLASSES):
    head = model.layers[-1]
    assert type(head) is keras.layers.Dense
    assert head.units == num_classes
    assert head.activation is keras.activations.linear
    assert isinstance(head.kernel_initializer, keras.initializers.GlorotUniform)


def _assert_block_activations(blocks, expected):
    """The activation is fused in one-layer blocks, else its own layer."""
    fused = [l for l in blocks if type(l) is not keras.layers.Activation]
    separate = [l for l in blocks if type(l) is keras.layers.Activation]
    if separate:
        assert [l.activation for l in separate] == [expected] * len(separate)
        assert all(
            l.activation is keras.activations.linear
            for l in fused
            if hasattr(l, "activation")
        )
    else:
        assert [l.activation for l in fused] == [expected] * len(fused)


def test_variant_tuples():
    assert set(models.OUR_MLP_VARIANTS) <= set(models.MLP_VARIANTS)
    assert set(models.OUR_CNN_VARIANTS) <= set(models.CNN_VARIANTS)
    assert set(MLP_BLOCKS) == set(models.MLP_VARIANTS)
    assert set(CNN_BLOCKS) <= set(models.CNN_VARIANTS)


# MLP.


@pytest.mark.parametrize("variant", models.MLP_VARIANTS)
def test_mlp_arm_trains(variant):
    model = models.mlp(variant, MLP_INPUT, NUM_CLASSES, depth=2, width=8)
    _fit_one_step(model, MLP_INPUT)


@pytest.mark.parametrize("variant", models.MLP_VARIANTS)
def test_mlp_layers(variant):
    model = models.mlp(
        variant,
        MLP_INPUT,
        NUM_CLASSES,
        depth=3,
        width=6,
        activation="leaky_relu",
    )
    assert model.name == f"mlp_{variant}"
    assert model.input_shape == (None,) + MLP_INPUT
    assert model.output_shape == (None, NUM_CLASSES)
    assert type(model.layers[1]) is keras.layers.Flatten
    blocks = model.layers[2:-1]
    assert [type(l) for l in blocks] == MLP_BLOCKS[variant] * 3
    assert [l.units for l in blocks if hasattr(l, "units")] == [6, 6, 6]
    _assert_block_activations(blocks, keras.activations.leaky_relu)
    if variant == "affine_like_head":
        head = model.layers[-1]
        assert type(head) is layers.AffineLikeDense
        assert head.units == NUM_CLASSES
        assert head.activation is keras.activations.linear
    else:
        _assert_plain_head(model)


def test_affine_like_head_kernel_scale_reaches_the_head():
    model = models.mlp(
        "affine_like_head",
        MLP_INPUT,
        NUM_CLASSES,
        depth=1,
        width=4,
        kernel_scale=0.25,
    )
    stddevs = [
        l.kernel_initializer.stddev
        for l in model.layers
        if type(l) is layers.AffineLikeDense
    ]
    assert stddevs == [0.25, 0.25]


def test_mlp_name_and_defaults():
    model = models.mlp("dense", (5,), 10, name="custom")
    assert model.name == "custom"
    dense = [l for l in model.layers if type(l) is keras.layers.Dense]
    assert [l.units for l in dense] == [512, 512, 512, 10]
    assert dense[0].activation is keras.activations.tanh


# CNN.


@pytest.mark.parametrize("variant", models.CNN_VARIANTS)
def test_cnn_arm_trains(variant):
    model = models.cnn(variant, CNN_INPUT, NUM_CLASSES, depth=1, filters=4)
    _fit_one_step(model, CNN_INPUT)


# The stem and head variants of our CNN arms: (base arm, stem, head).
CNN_VARIANTS_OF_OURS = {
    f"{base}_{suffix}": (base, "stem" in suffix, "head" in suffix)
    for base in ("patch_norm", "affine_like_conv")
    for suffix in ("stem", "head", "stem_head")
}
BASE_CNN_VARIANTS = [v for v in models.CNN_VARIANTS if v in CNN_BLOCKS]


def test_cnn_stem_and_head_variants_are_registered():
    assert set(models.CNN_VARIANTS) == set(CNN_BLOCKS) | set(
        CNN_VARIANTS_OF_OURS
    )
    assert set(CNN_VARIANTS_OF_OURS) <= set(models.OUR_CNN_VARIANTS)


@pytest.mark.parametrize("variant", sorted(CNN_VARIANTS_OF_OURS))
def test_cnn_stem_and_head_variants(variant):
    base, stem, head = CNN_VARIANTS_OF_OURS[variant]
    model = models.cnn(
        variant, CNN_INPUT, NUM_CLASSES, depth=3, filters=2, kernel_scale=0.5
    )
    convs = [l for l in model.layers if hasattr(l, "filters")]
    expected = CNN_BLOCKS[base] * 3
    if stem:
        expected = [keras.layers.Conv2D] + expected[1:]
    assert [type(l) for l in convs] == expected
    assert [l.filters for l in convs] == [2, 4, 8]
    if stem:
        # The stem keeps Keras' default kernel; the kernel scale reaches
        # our layers only.
        assert convs[0].name == "stage1_conv"
        assert type(convs[0].kernel_initializer).__name__ == "GlorotUniform"
    ours = convs[1:] if stem else convs
    assert all(l.kernel_initializer.stddev == 0.5 for l in ours)
    head = model.layers[-1]
    assert head.name == "logits"
    if variant.endswith("head"):
        assert type(head) is layers.AffineLikeDense
        assert head.kernel_initializer.stddev == 0.5
    else:
        assert type(head) is keras.layers.Dense
    _fit_one_step(model, CNN_INPUT)


@pytest.mark.parametrize("variant", BASE_CNN_VARIANTS)
def test_cnn_layers(variant):
    model = models.cnn(variant, CNN_INPUT, NUM_CLASSES, depth=3, filters=2)
    assert model.name == f"cnn_{variant}"
    assert model.output_shape == (None, NUM_CLASSES)
    pools = [l for l in model.layers if type(l) is keras.layers.MaxPooling2D]
    assert len(pools) == 3
    assert type(model.layers[-2]) is keras.layers.GlobalAveragePooling2D
    blocks = [
        l
        for l in model.layers[1:-2]
        if type(l) is not keras.layers.MaxPooling2D
    ]
    assert [type(l) for l in blocks] == CNN_BLOCKS[variant] * 3
    _assert_block_activations(blocks, keras.activations.relu)
    convs = [l for l in model.layers if hasattr(l, "filters")]
    assert [l.filters for l in convs] == [2, 4, 8]
    assert all(tuple(l.kernel_size) == (3, 3) for l in convs)
    assert all(l.padding == "same" for l in convs)
    _assert_plain_head(model)
    # Spatial sizes: 8 -> 4 -> 2 -> 1 through the poolings.
    sizes = [tuple(p.output.shape[1:3]) for p in pools]
    assert sizes == [(4, 4), (2, 2), (1, 1)]


def test_cnn_group_norm_groups():
    model = models.cnn("group_norm", (16, 16, 3), 2, depth=4, filters=4)
    norms = [
        l for l in model.layers if type(l) is keras.layers.GroupNormalization
    ]
    # gcd(channels, 8) for channels 4, 8, 16, 32.
    assert [n.groups for n in norms] == [4, 8, 8, 8]


def test_cnn_layer_norm_is_over_channels():
    model = models.cnn("layer_norm", CNN_INPUT, 2, depth=1, filters=4)
    (norm,) = [
        l for l in model.layers if type(l) is keras.layers.LayerNormalization
    ]
    assert norm.axis in (-1, 3, [-1], [3])


def test_cnn_is_channels_last_whatever_the_global_format():
    previous = keras.config.image_data_format()
    keras.config.set_image_data_format("channels_first")
    try:
        model = models.cnn("affine_like_conv", (8, 8, 3), 5, depth=2, filters=4)
    finally:
        keras.config.set_image_data_format(previous)
    x = np.zeros((2, 8, 8, 3), "float32")
    assert testing.to_numpy(model(x)).shape == (2, 5)
    convs = [l for l in model.layers if hasattr(l, "filters")]
    assert tuple(convs[0].kernel.shape) == (3, 3, 3, 4)


# kernel_scale.


@pytest.mark.parametrize(
    "builder,variant",
    [
        (models.mlp, "affine_like"),
        (models.mlp, "norm_like"),
        (models.cnn, "patch_norm"),
        (models.cnn, "affine_like_conv"),
    ],
    ids=["affine_like", "norm_like", "patch_norm", "affine_like_conv"],
)
def test_kernel_scale_reaches_our_layers(builder, variant):
    size = {"width": 64} if builder is models.mlp else {"filters": 32}
    input_shape = (16, 16, 1) if builder is models.mlp else (8, 8, 16)
    ours = (
        layers.AffineLikeDense,
        layers.NormLikeDense,
        layers.PatchNormConv2D,
        layers.AffineLikeConv2D,
    )
    for scale in (0.25, None):
        model = builder(
            variant, input_shape, 2, depth=1, kernel_scale=scale, **size
        )
        (layer,) = [l for l in model.layers if isinstance(l, ours)]
        initializer = layer.kernel_initializer
        assert isinstance(initializer, keras.initializers.RandomNormal)
        expected = 0.5 if scale is None else scale
        assert initializer.stddev == expected
        kernel = testing.to_numpy(layer.kernel)
        assert abs(kernel.std() / expected - 1) < 0.1
        # The head keeps the Keras default.
        _assert_plain_head(model, num_classes=2)


@pytest.mark.parametrize(
    "builder,variant",
    [
        (models.mlp, "affine_like"),
        (models.mlp, "norm_like"),
        (models.mlp, "affine_like_head"),
        (models.cnn, "patch_norm"),
        (models.cnn, "affine_like_conv"),
    ],
    ids=["affine_like", "norm_like", "affine_like_head", "patch_norm", "conv"],
)
@pytest.mark.parametrize("scale", [0.5, None], ids=["scaled", "default"])
def test_every_layer_draws_its_own_kernel(builder, variant, scale):
    # An unseeded Keras initialiser draws its seed when it is made: one
    # instance shared by the layers would start them all from the same
    # random values (the same kernel where the shapes agree, the same
    # leading values where they do not).
    if builder is models.mlp:
        size, input_shape = {"width": 8}, (8,)
    else:
        size, input_shape = {"filters": 4}, (8, 8, 4)
    model = builder(
        variant, input_shape, 8, depth=3, kernel_scale=scale, **size
    )
    ours = (
        layers.AffineLikeDense,
        layers.NormLikeDense,
        layers.PatchNormConv2D,
        layers.AffineLikeConv2D,
    )
    kernels = [
        testing.to_numpy(l.kernel).ravel()
        for l in model.layers
        if isinstance(l, ours)
    ]
    assert len(kernels) == (4 if variant == "affine_like_head" else 3)
    for i in range(len(kernels)):
        for j in range(i + 1, len(kernels)):
            n = min(kernels[i].size, kernels[j].size)
            assert not np.allclose(kernels[i][:n], kernels[j][:n]), (i, j)
    # Seeded, the same build gives the same kernels.
    keras.utils.set_random_seed(3)
    first = builder(
        variant, input_shape, 8, depth=3, kernel_scale=scale, **size
    )
    keras.utils.set_random_seed(3)
    second = builder(
        variant, input_shape, 8, depth=3, kernel_scale=scale, **size
    )
    for a, b in zip(first.weights, second.weights):
        np.testing.assert_array_equal(testing.to_numpy(a), testing.to_numpy(b))


@pytest.mark.parametrize("variant", ["affine_like", "patch_norm"])
def test_model_save_and_reload(variant, tmp_path):
    if variant == "affine_like":
        model = models.mlp(
            variant, MLP_INPUT, NUM_CLASSES, depth=2, width=8, kernel_scale=0.5
        )
        shape = MLP_INPUT
    else:
        model = models.cnn(
            variant,
            CNN_INPUT,
            NUM_CLASSES,
            depth=2,
            filters=4,
            kernel_scale=0.5,
        )
        shape = CNN_INPUT
    path = os.path.join(tmp_path, "model.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    x = np.random.default_rng(0).standard_normal((2,) + shape).astype("float32")
    np.testing.assert_allclose(
        testing.to_numpy(loaded(x)), testing.to_numpy(model(x)), rtol=1e-6
    )
    assert [type(l) for l in loaded.layers] == [type(l) for l in model.layers]


# Errors.


@pytest.mark.parametrize(
    "builder", [models.mlp, models.cnn], ids=["mlp", "cnn"]
)
@pytest.mark.parametrize("variant", ["transformer", None, "Dense"])
def test_unknown_variant(builder, variant):
    valid = (
        models.MLP_VARIANTS if builder is models.mlp else models.CNN_VARIANTS
    )
    listed = ", ".join(repr(v) for v in valid)
    with pytest.raises(
        ValueError,
        match=rf"Expected one of {listed}. Received: variant={variant!r}",
    ):
        builder(variant, CNN_INPUT, NUM_CLASSES)


def test_cnn_variant_is_not_an_mlp_variant():
    with pytest.raises(ValueError, match=r"Received: variant='conv'"):
        models.mlp("conv", MLP_INPUT, NUM_CLASSES)
    with pytest.raises(ValueError, match=r"Received: variant='dense'"):
        models.cnn("dense", CNN_INPUT, NUM_CLASSES)


@pytest.mark.parametrize(
    "builder,kwargs,error,message",
    [
        (
            models.mlp,
            {"depth": 0},
            ValueError,
            r"Expected a positive integer. Received: depth=0",
        ),
        (
            models.mlp,
            {"depth": 2.0},
            TypeError,
            r"Expected a positive integer. Received: depth=2.0",
        ),
        (
            models.mlp,
            {"width": -1},
            ValueError,
            r"Expected a positive integer. Received: width=-1",
        ),
        (models.mlp, {"width": "64"}, TypeError, r"Received: width='64'"),
        (
            models.cnn,
            {"filters": 0},
            ValueError,
            r"Expected a positive integer. Received: filters=0",
        ),
        (models.cnn, {"filters": True}, TypeError, r"Received: filters=True"),
        (models.cnn, {"depth": -2}, ValueError, r"Received: depth=-2"),
        (
            models.mlp,
            {"num_classes": 0},
            ValueError,
            r"Received: num_classes=0",
        ),
        (
            models.cnn,
            {"num_classes": None},
            TypeError,
            r"Received: num_classes=None",
        ),
    ],
    ids=[
        "mlp_depth_zero",
        "mlp_depth_float",
        "width_negative",
        "width_str",
        "filters_zero",
        "filters_bool",
        "cnn_depth_negative",
        "mlp_num_classes_zero",
        "cnn_num_classes_none",
    ],
)
def test_bad_sizes(builder, kwargs, error, message):
    variant = "dense" if builder is models.mlp else "conv"
    args = {"input_shape": CNN_INPUT, "num_classes": NUM_CLASSES, **kwargs}
    with pytest.raises(error, match=message):
        builder(variant, **args)


def test_cnn_too_deep_for_the_image():
    with pytest.raises(
        ValueError,
        match=r"image sides to be at least 2\*\*depth = 16, one 2x2 pooling "
        r"per stage. Received: depth=4, input_shape=\(8, 8, 3\)",
    ):
        models.cnn("conv", CNN_INPUT, NUM_CLASSES, depth=4)


@pytest.mark.parametrize(
    "builder,input_shape,expected",
    [
        (models.cnn, (8, 8), "a tuple of 3 positive integers"),
        (models.cnn, (8, 8, 3, 1), "a tuple of 3 positive integers"),
        (models.cnn, (8, 0, 3), "a tuple of 3 positive integers"),
        (models.mlp, (), "a tuple of at least 1 positive integers"),
        (models.mlp, 784, "a tuple of at least 1 positive integers"),
        (models.mlp, (28, 28.0), "a tuple of at least 1 positive integers"),
    ],
    ids=[
        "cnn_rank2",
        "cnn_rank4",
        "cnn_zero",
        "mlp_empty",
        "mlp_int",
        "mlp_float",
    ],
)
def test_bad_input_shape(builder, input_shape, expected):
    variant = "dense" if builder is models.mlp else "conv"
    with pytest.raises(
        ValueError,
        match=rf"Expected {expected} \(the shape of one sample, without the "
        rf"batch axis\). Received: input_shape=",
    ):
        builder(variant, input_shape, NUM_CLASSES)


@pytest.mark.parametrize(
    "builder", [models.mlp, models.cnn], ids=["mlp", "cnn"]
)
def test_bad_activation(builder):
    variant = "dense" if builder is models.mlp else "conv"
    with pytest.raises(
        ValueError,
        match=r"Expected a Keras activation name \(e.g. 'tanh', 'relu', "
        r"'leaky_relu'\), a callable or None. Received: activation='relus'",
    ):
        builder(variant, CNN_INPUT, NUM_CLASSES, activation="relus")


NORMALISED = [
    (builder, arm.name)
    for builder, family in ((models.mlp, "mlp"), (models.cnn, "cnn"))
    for arm in models.ARMS
    if arm.family == family and arm.normalizer is not None
]


@pytest.mark.parametrize(
    "builder,variant",
    NORMALISED,
    ids=[f"{b.__name__}_{v}" for b, v in NORMALISED],
)
def test_kernel_scale_for_a_normalised_baseline(builder, variant):
    with pytest.raises(
        ValueError,
        match=rf"Expected None for '{variant}': its normaliser divides out "
        r"the scale of the kernel before it.*Variants that take it: "
        r"(dense|conv), .*"
        rf"Received: variant='{variant}', kernel_scale=0.5",
    ):
        builder(variant, CNN_INPUT, NUM_CLASSES, kernel_scale=0.5)


@pytest.mark.parametrize(
    "builder,variant",
    NORMALISED,
    ids=[f"{b.__name__}_{v}" for b, v in NORMALISED],
)
def test_normalised_baselines_divide_out_the_kernel_scale(builder, variant):
    # Why they do not take `kernel_scale`: every hidden kernel times 3
    # (the biases are zero at initialisation) leaves the logits unchanged,
    # in training mode (batch statistics) and out of it, up to the
    # normaliser's `epsilon` (BatchNormalization's 1e-3 against a variance
    # of about 0.1 here: under 1%).
    keras.utils.set_random_seed(0)
    size = {"width": 16} if builder is models.mlp else {"filters": 8}
    model = builder(variant, CNN_INPUT, NUM_CLASSES, depth=2, **size)
    x = np.random.default_rng(0).standard_normal((8, *CNN_INPUT))
    x = x.astype("float32")
    before = [testing.to_numpy(model(x, training=t)) for t in (True, False)]
    hidden = [l for l in model.layers if l.name.startswith(("block", "stage"))]
    affine = [
        l
        for l in hidden
        if isinstance(l, (keras.layers.Dense, keras.layers.Conv2D))
    ]
    assert len(affine) == 2
    for layer in affine:
        layer.kernel.assign(3.0 * layer.kernel)
    after = [testing.to_numpy(model(x, training=t)) for t in (True, False)]
    # Out of training, BatchNormalization uses its moving statistics
    # (0 and 1 at initialisation), which do not divide the scale out.
    checked = [0] if variant == "batch_norm" else [0, 1]
    for i in checked:
        np.testing.assert_allclose(after[i], before[i], rtol=2e-2, atol=2e-3)
    # The first block's pre-activation did scale by 3.
    probe = keras.Model(model.inputs, affine[0].output)
    scaled = testing.to_numpy(probe(x))
    for layer in affine:
        layer.kernel.assign(layer.kernel / 3.0)
    np.testing.assert_allclose(
        scaled, 3.0 * testing.to_numpy(probe(x)), rtol=1e-4, atol=1e-5
    )


@pytest.mark.parametrize(
    "builder,variant,size,input_shape",
    [
        (models.mlp, "dense", {"width": 64}, (16, 16, 1)),
        (models.cnn, "conv", {"filters": 32}, (8, 8, 16)),
    ],
    ids=["dense", "conv"],
)
def test_kernel_scale_multiplies_the_plain_baselines_glorot_limit(
    builder, variant, size, input_shape
):
    model = builder(variant, input_shape, 2, depth=1, kernel_scale=0.25, **size)
    default = builder(variant, input_shape, 2, depth=1, **size)
    affine = (keras.layers.Dense, keras.layers.Conv2D)
    (layer, _) = [l for l in model.layers if isinstance(l, affine)]
    (plain, _) = [l for l in default.layers if isinstance(l, affine)]
    kernel = testing.to_numpy(layer.kernel)
    shape = kernel.shape
    fan_in = np.prod(shape[:-1])
    fan_out = shape[-1] * (np.prod(shape[:-2]) if len(shape) > 2 else 1)
    glorot_limit = np.sqrt(6.0 / (fan_in + fan_out))
    assert np.abs(kernel).max() <= 0.25 * glorot_limit
    assert np.abs(kernel).max() > 0.9 * 0.25 * glorot_limit
    default_kernel = testing.to_numpy(plain.kernel)
    assert np.abs(default_kernel).max() <= glorot_limit
    assert np.abs(default_kernel).max() > 0.9 * glorot_limit
    # The head keeps the Keras default.
    _assert_plain_head(model, num_classes=2)


@pytest.mark.parametrize(
    "value,error,message",
    [
        (
            0.0,
            ValueError,
            r"Expected a finite float > 0. "
            r"Received: kernel_scale=0.0",
        ),
        (-1, ValueError, r"Received: kernel_scale=-1"),
        (float("nan"), ValueError, r"Received: kernel_scale=nan"),
        (
            "1.0",
            TypeError,
            r"Expected a positive float. "
            r"Received: kernel_scale='1.0'",
        ),
    ],
    ids=["zero", "negative", "nan", "str"],
)
def test_bad_kernel_scale(value, error, message):
    with pytest.raises(error, match=message):
        models.mlp("affine_like", MLP_INPUT, NUM_CLASSES, kernel_scale=value)
