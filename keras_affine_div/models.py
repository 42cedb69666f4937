"""MLP and CNN classifiers, one builder argument `variant` per arm.

Every arm of a builder shares the same skeleton and the same plain
`Dense(num_classes)` head returning logits (no softmax: train with
`from_logits=True`); only the hidden blocks differ, except in the MLP arm
`affine_like_head`, whose head is an `AffineLikeDense(num_classes)` as well
(with a plain `Dense` head, the output layer alone keeps the affine
divergence, and one global learning rate cannot suit both it and the
corrected hidden layers):

MLP (`mlp`), `depth` blocks of `width` units after a `Flatten`:

| variant | block |
|---|---|
| `dense` | `Dense(width, activation)` |
| `affine_like` | `AffineLikeDense(width, activation)` |
| `norm_like` | `NormLikeDense(width, activation)` |
| `batch_norm` | `Dense(width)`, `BatchNormalization`, `Activation` |
| `layer_norm` | `Dense(width)`, `LayerNormalization`, `Activation` |
| `rms_norm` | `Dense(width)`, `RMSNormalization`, `Activation` |
| `affine_like_head` | `AffineLikeDense(width, activation)`, and the head is an `AffineLikeDense(num_classes)` too |

CNN (`cnn`), `depth` stages of one 3x3 same-padded convolution block with
`filters * 2**i` filters and a 2x2 max-pooling, then global average
pooling:

| variant | block |
|---|---|
| `conv` | `Conv2D(activation)` |
| `patch_norm` | `PatchNormConv2D(activation)` |
| `affine_like_conv` | `AffineLikeConv2D(activation)` |
| `batch_norm` | `Conv2D`, `BatchNormalization`, `Activation` |
| `group_norm` | `Conv2D`, `GroupNormalization`, `Activation` |
| `layer_norm` | `Conv2D`, `LayerNormalization`, `Activation` |

The baselines follow the Keras convention: affine map, then normaliser,
then activation. Images are channels-last whatever
`keras.config.image_data_format()` says, as `datasets` returns them.
"""

import math
import numbers

import keras

from keras_affine_div.layers import AffineLikeConv2D
from keras_affine_div.layers import AffineLikeDense
from keras_affine_div.layers import NormLikeDense
from keras_affine_div.layers import PatchNormConv2D
from keras_affine_div.layers import _validation

MLP_VARIANTS = (
    "dense",
    "affine_like",
    "norm_like",
    "batch_norm",
    "layer_norm",
    "rms_norm",
    "affine_like_head",
)
CNN_VARIANTS = (
    "conv",
    "patch_norm",
    "affine_like_conv",
    "batch_norm",
    "group_norm",
    "layer_norm",
)
OUR_MLP_VARIANTS = ("affine_like", "norm_like", "affine_like_head")
OUR_CNN_VARIANTS = ("patch_norm", "affine_like_conv")

# The number of groups of `GroupNormalization` in the `group_norm` CNN arm,
# reduced to `gcd(channels, GROUP_NORM_GROUPS)` for channel counts that are
# not a multiple of it. Eight groups keep several channels per group at the
# small widths of these models (32 filters: 4 per group), where the usual 32
# groups would be one channel each, i.e. instance normalisation.
GROUP_NORM_GROUPS = 8

_OUR_DENSE = {
    "affine_like": AffineLikeDense,
    "norm_like": NormLikeDense,
    "affine_like_head": AffineLikeDense,
}
_OUR_CONV = {
    "patch_norm": PatchNormConv2D,
    "affine_like_conv": AffineLikeConv2D,
}
_MLP_NORMALIZERS = {
    "batch_norm": keras.layers.BatchNormalization,
    "layer_norm": keras.layers.LayerNormalization,
    "rms_norm": keras.layers.RMSNormalization,
}


def mlp(
    variant,
    input_shape,
    num_classes,
    depth=3,
    width=512,
    activation="tanh",
    kernel_scale=None,
    name=None,
):
    """Builds an MLP classifier of one arm.

    `Input`, `Flatten`, `depth` hidden blocks of `width` units (the block is
    set by `variant`, see the module docstring), and a plain
    `Dense(num_classes)` returning logits (an `AffineLikeDense(num_classes)`
    for `"affine_like_head"`).

    Args:
        variant: one of `MLP_VARIANTS`: `"dense"`, `"affine_like"`,
            `"norm_like"`, `"batch_norm"`, `"layer_norm"`, `"rms_norm"`,
            `"affine_like_head"`.
        input_shape: tuple of positive ints, the shape of one sample, e.g.
            `(32, 32, 3)`.
        num_classes: positive int, the number of logits.
        depth: positive int, the number of hidden blocks. Defaults to `3`.
        width: positive int, the units of each hidden block. Defaults to
            `512`.
        activation: the hidden activation, a Keras name (`"tanh"`,
            `"relu"`, `"leaky_relu"`, ...) or a callable. Defaults to
            `"tanh"`.
        kernel_scale: positive float or `None`, the standard deviation of a
            `RandomNormal` kernel initialiser for our layers
            (`OUR_MLP_VARIANTS`). Defaults to `None` (the layers' default,
            `RandomNormal(stddev=1.0)`). Baselines keep the Keras default
            initialisers and do not take it.
        name: the model's name. Defaults to `None` (`"mlp_<variant>"`).

    Returns:
        keras.Model: the functional model, mapping a batch of samples to
        `(batch_size, num_classes)` logits.

    Raises:
        ValueError: for an unknown `variant`, a bad `input_shape`,
            `activation` or `kernel_scale`, or `kernel_scale` given to a
            baseline.
        TypeError: for a `depth`, `width` or `num_classes` that is not an
            integer, or a `kernel_scale` that is not a number.

    Example:

    >>> from keras_affine_div import models
    >>> model = models.mlp("affine_like", (4, 4, 1), 10, depth=2, width=8)
    >>> tuple(model.output_shape)
    (None, 10)
    >>> [type(layer).__name__ for layer in model.layers[1:]]
    ['Flatten', 'AffineLikeDense', 'AffineLikeDense', 'Dense']
    """
    variant = _check_variant(variant, MLP_VARIANTS)
    input_shape = _check_input_shape(input_shape, min_rank=1)
    num_classes = _validation.positive_int(num_classes, "num_classes")
    depth = _validation.positive_int(depth, "depth")
    width = _validation.positive_int(width, "width")
    _check_activation(activation)
    kernel_initializer = _kernel_initializer(
        variant, kernel_scale, OUR_MLP_VARIANTS
    )

    inputs = keras.Input(input_shape, name="inputs")
    x = keras.layers.Flatten(name="flatten")(inputs)
    for i in range(depth):
        prefix = f"block{i + 1}"
        if variant == "dense":
            x = keras.layers.Dense(
                width, activation=activation, name=f"{prefix}_dense"
            )(x)
        elif variant in _OUR_DENSE:
            x = _OUR_DENSE[variant](
                width,
                activation=activation,
                kernel_initializer=kernel_initializer,
                name=f"{prefix}_{variant}",
            )(x)
        else:
            x = keras.layers.Dense(width, name=f"{prefix}_dense")(x)
            x = _MLP_NORMALIZERS[variant](name=f"{prefix}_{variant}")(x)
            x = keras.layers.Activation(
                activation, name=f"{prefix}_activation"
            )(x)
    if variant == "affine_like_head":
        # Every affine map of the model is corrected, the output one too.
        outputs = AffineLikeDense(
            num_classes, kernel_initializer=kernel_initializer, name="logits"
        )(x)
    else:
        outputs = keras.layers.Dense(num_classes, name="logits")(x)
    return keras.Model(inputs, outputs, name=name or f"mlp_{variant}")


def cnn(
    variant,
    input_shape,
    num_classes,
    depth=3,
    filters=32,
    activation="relu",
    kernel_scale=None,
    name=None,
):
    """Builds a small CNN classifier of one arm.

    `depth` stages, stage `i` (from 0) a 3x3 same-padded convolution block
    with `filters * 2**i` filters (the block is set by `variant`, see the
    module docstring) and a 2x2 max-pooling; then `GlobalAveragePooling2D`
    and a plain `Dense(num_classes)` returning logits. Images are
    channels-last.

    Args:
        variant: one of `CNN_VARIANTS`: `"conv"`, `"patch_norm"`,
            `"affine_like_conv"`, `"batch_norm"`, `"group_norm"`,
            `"layer_norm"`. `group_norm` uses `GroupNormalization` with
            `gcd(channels, GROUP_NORM_GROUPS)` groups (8 for the default
            widths); `layer_norm` uses `LayerNormalization` over the
            channels of each position (the Keras default axis, as in
            ConvNeXt).
        input_shape: tuple `(height, width, channels)` of positive ints.
            Both sides must be at least `2**depth`.
        num_classes: positive int, the number of logits.
        depth: positive int, the number of stages. Defaults to `3`.
        filters: positive int, the filters of the first stage. Defaults to
            `32`.
        activation: the hidden activation, a Keras name (`"relu"`,
            `"tanh"`, `"leaky_relu"`, ...) or a callable. Defaults to
            `"relu"`.
        kernel_scale: positive float or `None`, the standard deviation of a
            `RandomNormal` kernel initialiser for our layers
            (`OUR_CNN_VARIANTS`). Defaults to `None` (the layers' default,
            `RandomNormal(stddev=1.0)`). Baselines keep the Keras default
            initialisers and do not take it.
        name: the model's name. Defaults to `None` (`"cnn_<variant>"`).

    Returns:
        keras.Model: the functional model, mapping `(batch_size, height,
        width, channels)` images to `(batch_size, num_classes)` logits.

    Raises:
        ValueError: for an unknown `variant`, a bad `input_shape`,
            `activation` or `kernel_scale`, `kernel_scale` given to a
            baseline, or a `depth` too large for the image size.
        TypeError: for a `depth`, `filters` or `num_classes` that is not an
            integer, or a `kernel_scale` that is not a number.

    Example:

    >>> from keras_affine_div import models
    >>> model = models.cnn("patch_norm", (8, 8, 3), 10, depth=2, filters=4)
    >>> tuple(model.output_shape)
    (None, 10)
    >>> [layer.filters for layer in model.layers if hasattr(layer, "filters")]
    [4, 8]
    """
    variant = _check_variant(variant, CNN_VARIANTS)
    input_shape = _check_input_shape(input_shape, min_rank=3, max_rank=3)
    num_classes = _validation.positive_int(num_classes, "num_classes")
    depth = _validation.positive_int(depth, "depth")
    filters = _validation.positive_int(filters, "filters")
    if min(input_shape[:2]) < 2**depth:
        raise ValueError(
            "Received an invalid value for argument `depth`. Expected the "
            f"image sides to be at least 2**depth = {2**depth}, one 2x2 "
            f"pooling per stage. Received: depth={depth}, "
            f"input_shape={input_shape}"
        )
    _check_activation(activation)
    kernel_initializer = _kernel_initializer(
        variant, kernel_scale, OUR_CNN_VARIANTS
    )

    conv_kwargs = dict(
        kernel_size=3, padding="same", data_format="channels_last"
    )
    inputs = keras.Input(input_shape, name="inputs")
    x = inputs
    for i in range(depth):
        prefix = f"stage{i + 1}"
        channels = filters * 2**i
        if variant == "conv":
            x = keras.layers.Conv2D(
                channels,
                activation=activation,
                name=f"{prefix}_conv",
                **conv_kwargs,
            )(x)
        elif variant in _OUR_CONV:
            x = _OUR_CONV[variant](
                channels,
                activation=activation,
                kernel_initializer=kernel_initializer,
                name=f"{prefix}_{variant}",
                **conv_kwargs,
            )(x)
        else:
            x = keras.layers.Conv2D(
                channels, name=f"{prefix}_conv", **conv_kwargs
            )(x)
            x = _cnn_normalizer(variant, channels, f"{prefix}_{variant}")(x)
            x = keras.layers.Activation(
                activation, name=f"{prefix}_activation"
            )(x)
        x = keras.layers.MaxPooling2D(
            2, data_format="channels_last", name=f"{prefix}_pool"
        )(x)
    x = keras.layers.GlobalAveragePooling2D(
        data_format="channels_last", name="global_pool"
    )(x)
    outputs = keras.layers.Dense(num_classes, name="logits")(x)
    return keras.Model(inputs, outputs, name=name or f"cnn_{variant}")


def _cnn_normalizer(variant, channels, name):
    if variant == "batch_norm":
        return keras.layers.BatchNormalization(name=name)
    if variant == "group_norm":
        return keras.layers.GroupNormalization(
            groups=math.gcd(channels, GROUP_NORM_GROUPS), name=name
        )
    return keras.layers.LayerNormalization(name=name)


def _check_variant(variant, variants):
    if not isinstance(variant, str) or variant not in variants:
        raise ValueError(
            "Received an invalid value for argument `variant`. Expected one "
            f"of {', '.join(repr(v) for v in variants)}. "
            f"Received: variant={variant!r}"
        )
    return variant


def _check_input_shape(input_shape, min_rank, max_rank=None):
    valid = isinstance(input_shape, (tuple, list)) and all(
        isinstance(d, numbers.Integral) and not isinstance(d, bool) and d > 0
        for d in input_shape
    )
    rank_ok = valid and min_rank <= len(input_shape) <= (
        max_rank if max_rank is not None else len(input_shape)
    )
    if not rank_ok:
        if max_rank == min_rank:
            expected = f"a tuple of {min_rank} positive integers"
        else:
            expected = f"a tuple of at least {min_rank} positive integers"
        raise ValueError(
            "Received an invalid value for argument `input_shape`. Expected "
            f"{expected} (the shape of one sample, without the batch axis). "
            f"Received: input_shape={input_shape!r}"
        )
    return tuple(int(d) for d in input_shape)


def _check_activation(activation):
    try:
        keras.activations.get(activation)
    except (ValueError, TypeError):
        raise ValueError(
            "Received an invalid value for argument `activation`. Expected a "
            "Keras activation name (e.g. 'tanh', 'relu', 'leaky_relu'), a "
            f"callable or None. Received: activation={activation!r}"
        ) from None


def _kernel_initializer(variant, kernel_scale, our_variants):
    if kernel_scale is None:
        return None
    if variant not in our_variants:
        raise ValueError(
            "Received an invalid value for argument `kernel_scale`. Expected "
            "None for a baseline variant: the initialisation scale is a "
            f"factor of our layers only ({', '.join(our_variants)}). "
            f"Received: variant={variant!r}, kernel_scale={kernel_scale!r}"
        )
    kernel_scale = _validation.positive_float(kernel_scale, "kernel_scale")
    return keras.initializers.RandomNormal(stddev=kernel_scale)
