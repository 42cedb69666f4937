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
| `patch_norm_stem`, `affine_like_conv_stem` | as `patch_norm` / `affine_like_conv`, but the first stage is a plain `Conv2D(activation)` (a stem with Keras' default kernel) |
| `patch_norm_head`, `affine_like_conv_head` | as `patch_norm` / `affine_like_conv`, and the head is an `AffineLikeDense(num_classes)` |
| `patch_norm_stem_head`, `affine_like_conv_stem_head` | both: a plain `Conv2D` stem and an `AffineLikeDense` head |

The stem variants keep the first convolution, which sees raw pixels, an
ordinary affine map: `PatchNormConv2D` there scales every 27-value pixel
patch to unit norm (discarding local contrast), and `AffineLikeConv2D`
divides it by `sqrt(|P|^2 + 1)`. The head variants correct the output
layer as `affine_like_head` does in the MLP.

The baselines follow the Keras convention: affine map, then normaliser,
then activation. Images are channels-last whatever
`keras.config.image_data_format()` says, as `datasets` returns them.
"""

import dataclasses
import math

import keras

from keras_affine_div import _kernel_scale
from keras_affine_div import _validation
from keras_affine_div.layers import AffineLikeConv2D
from keras_affine_div.layers import AffineLikeDense
from keras_affine_div.layers import NormLikeDense
from keras_affine_div.layers import PatchNormConv2D

# The number of groups of `GroupNormalization` in the `group_norm` CNN arm,
# reduced to `gcd(channels, GROUP_NORM_GROUPS)` for channel counts that are
# not a multiple of it. Eight groups keep several channels per group at the
# small widths of these models (32 filters: 4 per group), where the usual 32
# groups would be one channel each, i.e. instance normalisation.
GROUP_NORM_GROUPS = 8

FAMILIES = ("mlp", "cnn")


@dataclasses.dataclass(frozen=True)
class Arm:
    """One arm of a study: how a family's model builds its hidden blocks.

    The registry `ARMS` holds every arm `mlp` and `cnn` can build; the
    study files' checks, the HyperModels and the report read it rather
    than keeping their own lists.

    Attributes:
        name: the arm's name, the `variant` argument of its builder (unique
            within a family; `batch_norm` and `layer_norm` exist in both).
        family: `"mlp"` or `"cnn"`.
        ours: whether the arm is built from this package's layers (the
            layers under test), rather than a baseline.
        layer: for our arms, the layer class of the block (it takes a
            `kernel_initializer`, set from `kernel_scale`); `None` for a
            baseline.
        normalizer: for a normalised baseline, a function `(channels,
            name)` returning the normalisation layer placed between the
            affine map and the activation; `None` otherwise.
        corrected_head: whether the output layer is an `AffineLikeDense`
            too, rather than a plain `Dense`.
        plain_stem: for a CNN arm of ours, whether the first stage is a
            plain `Conv2D` (Keras' default kernel) rather than `layer`.
    """

    name: str
    family: str
    ours: bool
    layer: type = None
    normalizer: object = None
    corrected_head: bool = False
    plain_stem: bool = False

    @property
    def scale_sensitive(self):
        """Whether the model depends on the scale of the hidden kernels:
        our arms and the plain affine map, not the normalised baselines
        (their normaliser divides the scale out)."""
        return self.ours or self.normalizer is None


def _normalizer(layer_class):
    return lambda channels, name: layer_class(name=name)


def _group_normalizer(channels, name):
    return keras.layers.GroupNormalization(
        groups=math.gcd(channels, GROUP_NORM_GROUPS), name=name
    )


ARMS = (
    Arm("dense", "mlp", False),
    Arm("affine_like", "mlp", True, layer=AffineLikeDense),
    Arm("norm_like", "mlp", True, layer=NormLikeDense),
    Arm(
        "batch_norm",
        "mlp",
        False,
        normalizer=_normalizer(keras.layers.BatchNormalization),
    ),
    Arm(
        "layer_norm",
        "mlp",
        False,
        normalizer=_normalizer(keras.layers.LayerNormalization),
    ),
    Arm(
        "rms_norm",
        "mlp",
        False,
        normalizer=_normalizer(keras.layers.RMSNormalization),
    ),
    Arm(
        "affine_like_head",
        "mlp",
        True,
        layer=AffineLikeDense,
        corrected_head=True,
    ),
    Arm("conv", "cnn", False),
    Arm("patch_norm", "cnn", True, layer=PatchNormConv2D),
    Arm("affine_like_conv", "cnn", True, layer=AffineLikeConv2D),
    Arm(
        "batch_norm",
        "cnn",
        False,
        normalizer=_normalizer(keras.layers.BatchNormalization),
    ),
    Arm("group_norm", "cnn", False, normalizer=_group_normalizer),
    Arm(
        "layer_norm",
        "cnn",
        False,
        normalizer=_normalizer(keras.layers.LayerNormalization),
    ),
    *(
        Arm(
            f"{base}_{suffix}",
            "cnn",
            True,
            layer=layer,
            plain_stem="stem" in suffix,
            corrected_head="head" in suffix,
        )
        for base, layer in (
            ("patch_norm", PatchNormConv2D),
            ("affine_like_conv", AffineLikeConv2D),
        )
        for suffix in ("stem", "head", "stem_head")
    ),
)


def arm_names(family=None, ours=None):
    """Returns the names of the registered arms, in registry order.

    Args:
        family: `"mlp"`, `"cnn"`, or `None` for both (a name registered in
            both families is listed once).
        ours: `True` for our arms only, `False` for the baselines only,
            `None` for all.

    Returns:
        tuple of str.

    Raises:
        ValueError: for an unknown `family`.

    Example:

    >>> from keras_affine_div import models
    >>> models.arm_names("cnn", ours=True)[:2]
    ('patch_norm', 'affine_like_conv')
    >>> models.arm_names("cnn", ours=True)[2:5]
    ('patch_norm_stem', 'patch_norm_head', 'patch_norm_stem_head')
    """
    if family is not None:
        _validation.one_of(family, FAMILIES, "family")
    names = (
        arm.name
        for arm in ARMS
        if (family is None or arm.family == family)
        and (ours is None or arm.ours == ours)
    )
    return tuple(dict.fromkeys(names))


def get_arm(family, name):
    """Returns the registered `Arm` of `family` called `name`.

    Args:
        family: `"mlp"` or `"cnn"`.
        name: the arm's name.

    Returns:
        Arm.

    Raises:
        ValueError: for an unknown family, or a name the family lacks.
    """
    name = _validation.one_of(name, arm_names(family), "variant")
    return next(a for a in ARMS if a.family == family and a.name == name)


MLP_VARIANTS = arm_names("mlp")
CNN_VARIANTS = arm_names("cnn")
OUR_MLP_VARIANTS = arm_names("mlp", ours=True)
OUR_CNN_VARIANTS = arm_names("cnn", ours=True)


# The plain stem of the CNN stem variants: the `conv` arm's block.
_PLAIN_CONV = next(a for a in ARMS if a.family == "cnn" and a.name == "conv")

# The plain affine map of each family's baselines, and its layers' names.
_AFFINE = {
    "mlp": (keras.layers.Dense, "dense"),
    "cnn": (keras.layers.Conv2D, "conv"),
}


def _hidden_block(
    arm,
    x,
    channels,
    activation,
    kernel_initializer,
    prefix,
    **layer_kwargs,
):
    """One hidden block of `arm`: the affine map, normaliser, activation."""
    if arm.layer is not None:
        return arm.layer(
            channels,
            activation=activation,
            kernel_initializer=kernel_initializer,
            name=f"{prefix}_{arm.name}",
            **layer_kwargs,
        )(x)
    base_class, base_name = _AFFINE[arm.family]
    base_name = f"{prefix}_{base_name}"
    if arm.normalizer is None:
        if kernel_initializer is not None:
            layer_kwargs["kernel_initializer"] = kernel_initializer
        return base_class(
            channels, activation=activation, name=base_name, **layer_kwargs
        )(x)
    x = base_class(channels, name=base_name, **layer_kwargs)(x)
    x = arm.normalizer(channels, f"{prefix}_{arm.name}")(x)
    return keras.layers.Activation(activation, name=f"{prefix}_activation")(x)


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
        kernel_scale: positive float or `None`, a multiplier on the
            default kernel initialiser of the hidden blocks: for our layers
            (`OUR_MLP_VARIANTS`) the standard deviation of a `RandomNormal`
            kernel (their default is `RandomNormal(stddev=0.5)`), for
            `"dense"` a factor on the limit of Keras' `GlorotUniform`
            (`VarianceScaling(scale=kernel_scale**2, mode="fan_avg",
            distribution="uniform")`). The normalised baselines divide the
            scale out and do not take it. The output layer keeps Keras'
            default, except in `"affine_like_head"`. Defaults to `None`
            (each layer's own default).
        name: the model's name. Defaults to `None` (`"mlp_<variant>"`).

    Returns:
        keras.Model: the functional model, mapping a batch of samples to
        `(batch_size, num_classes)` logits.

    Raises:
        ValueError: for an unknown `variant`, a bad `input_shape`,
            `activation` or `kernel_scale`, or `kernel_scale` given to a
            normalised baseline.
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
    arm = get_arm("mlp", variant)
    input_shape = _validation.shape(input_shape, "input_shape", min_rank=1)
    num_classes = _validation.positive_int(num_classes, "num_classes")
    depth = _validation.positive_int(depth, "depth")
    width = _validation.positive_int(width, "width")
    _validation.activation(activation)
    kernel_initializer = _kernel_scale.initializer_factory(
        arm, kernel_scale, ARMS
    )

    inputs = keras.Input(input_shape, name="inputs")
    x = keras.layers.Flatten(name="flatten")(inputs)
    for i in range(depth):
        x = _hidden_block(
            arm,
            x,
            width,
            activation,
            kernel_initializer(),
            prefix=f"block{i + 1}",
        )
    if arm.corrected_head:
        # Every affine map of the model is corrected, the output one too.
        outputs = AffineLikeDense(
            num_classes, kernel_initializer=kernel_initializer(), name="logits"
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
    module docstring; the first one is a plain `Conv2D` in the stem
    variants) and a 2x2 max-pooling; then `GlobalAveragePooling2D` and a
    plain `Dense(num_classes)` returning logits (an
    `AffineLikeDense(num_classes)` in the head variants). Images are
    channels-last.

    Args:
        variant: one of `CNN_VARIANTS`: `"conv"`, `"patch_norm"`,
            `"affine_like_conv"`, `"batch_norm"`, `"group_norm"`,
            `"layer_norm"`, and the stem and head variants of our two
            (`"patch_norm_stem"`, `"patch_norm_head"`,
            `"patch_norm_stem_head"`, the same for `"affine_like_conv"`).
            `group_norm` uses `GroupNormalization` with
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
        kernel_scale: positive float or `None`, a multiplier on the
            default kernel initialiser of the convolutions: for our layers
            (`OUR_CNN_VARIANTS`) the standard deviation of a `RandomNormal`
            kernel (the `AffineLikeDense` head of the head variants too),
            for `"conv"` a factor on the limit of Keras' `GlorotUniform`.
            A stem keeps Keras' default. The normalised baselines divide
            the scale out and do not take it. Defaults to `None` (each
            layer's own default).
        name: the model's name. Defaults to `None` (`"cnn_<variant>"`).

    Returns:
        keras.Model: the functional model, mapping `(batch_size, height,
        width, channels)` images to `(batch_size, num_classes)` logits.

    Raises:
        ValueError: for an unknown `variant`, a bad `input_shape`,
            `activation` or `kernel_scale`, `kernel_scale` given to a
            normalised baseline, or a `depth` too large for the image size.
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
    arm = get_arm("cnn", variant)
    input_shape = _validation.shape(
        input_shape, "input_shape", min_rank=3, max_rank=3
    )
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
    _validation.activation(activation)
    kernel_initializer = _kernel_scale.initializer_factory(
        arm, kernel_scale, ARMS
    )

    inputs = keras.Input(input_shape, name="inputs")
    x = inputs
    for i in range(depth):
        prefix = f"stage{i + 1}"
        stem = i == 0 and arm.plain_stem
        x = _hidden_block(
            _PLAIN_CONV if stem else arm,
            x,
            filters * 2**i,
            activation,
            None if stem else kernel_initializer(),
            prefix=prefix,
            kernel_size=3,
            padding="same",
            data_format="channels_last",
        )
        x = keras.layers.MaxPooling2D(
            2, data_format="channels_last", name=f"{prefix}_pool"
        )(x)
    x = keras.layers.GlobalAveragePooling2D(
        data_format="channels_last", name="global_pool"
    )(x)
    if arm.corrected_head:
        outputs = AffineLikeDense(
            num_classes, kernel_initializer=kernel_initializer(), name="logits"
        )(x)
    else:
        outputs = keras.layers.Dense(num_classes, name="logits")(x)
    return keras.Model(inputs, outputs, name=name or f"cnn_{variant}")
