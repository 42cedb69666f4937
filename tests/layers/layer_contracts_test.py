"""What every layer of the package keeps: one test per contract.

Each test runs over the layer classes, with the construction arguments and
input shapes of the tables below: the harness of `tests.testing`, the
output shape of Keras' own layer, zero input, float16 overflow, the signal
of a deep stack, and the argument checks. The per-layer files keep what is
particular to one layer: its NumPy reference and exact identities.
"""

import doctest
import inspect
import re

import keras
import numpy as np
import pytest

from keras_affine_div import _validation
from keras_affine_div import layers
from tests import testing
from tests.layers import bad_arguments
from tests.layers import common
from tests.layers import reference

FLOAT16_MAX = 65504

# Every layer class: its test id and rank (`None` for the dense layers,
# `"einsum"` for the einsum layers).
LAYERS = {
    layers.AffineLikeDense: ("affine_like_dense", None),
    layers.NormLikeDense: ("norm_like_dense", None),
    layers.AffineLikeEinsumDense: ("affine_like_einsum_dense", "einsum"),
    layers.NormLikeEinsumDense: ("norm_like_einsum_dense", "einsum"),
    layers.PatchNormConv1D: ("patch_norm_conv1d", 1),
    layers.PatchNormConv2D: ("patch_norm_conv2d", 2),
    layers.PatchNormConv3D: ("patch_norm_conv3d", 3),
    layers.AffineLikeConv1D: ("affine_like_conv1d", 1),
    layers.AffineLikeConv2D: ("affine_like_conv2d", 2),
    layers.AffineLikeConv3D: ("affine_like_conv3d", 3),
}
CLASSES = list(LAYERS)
CLASS_IDS = [LAYERS[cls][0] for cls in CLASSES]
DENSE_CLASSES = [cls for cls in CLASSES if LAYERS[cls][1] is None]
EINSUM_CLASSES = [cls for cls in CLASSES if LAYERS[cls][1] == "einsum"]
CONV_CLASSES = [cls for cls in CLASSES if isinstance(LAYERS[cls][1], int)]
CONV_CLASS_IDS = [LAYERS[cls][0] for cls in CONV_CLASSES]
# The layers with an `epsilon` argument: the norm-like ones.
EPSILON_CLASSES = [
    cls for cls in CLASSES if "epsilon" in inspect.signature(cls).parameters
]
CONV_CASES = {
    1: common.CONV1D_CASES,
    2: common.CONV_CASES,
    3: common.CONV3D_CASES,
}


def _keras_cls(cls):
    """The Keras layer with the same output shape: `Dense`, `EinsumDense`
    or `ConvND`."""
    rank = LAYERS[cls][1]
    if rank is None:
        return keras.layers.Dense
    if rank == "einsum":
        return keras.layers.EinsumDense
    return common.KERAS_CONV[rank]


def _by_class(dense, conv_by_rank, einsum):
    """A table over every class: one entry for the dense layers, one per
    rank of the convolutions, one for the einsum layers.

    Args:
        dense: The entry of the dense layers.
        conv_by_rank: Dict, rank -> the entry of the convolutions of that
            rank.
        einsum: The entry of the einsum layers.

    Returns:
        Dict, layer class -> entry.
    """
    table = {cls: dense for cls in DENSE_CLASSES}
    table.update({cls: conv_by_rank[LAYERS[cls][1]] for cls in CONV_CLASSES})
    table.update({cls: einsum for cls in EINSUM_CLASSES})
    return table


def _keras_output_shape(cls, init_kwargs, input_shape):
    kwargs = {
        key: value
        for key, value in init_kwargs.items()
        if key not in ("epsilon", "name")
    }
    return tuple(_keras_cls(cls)(**kwargs).compute_output_shape(input_shape))


def _harness_case(cls, name, init_kwargs, input_shape, **expected):
    return pytest.param(
        cls, init_kwargs, input_shape, expected, id=f"{LAYERS[cls][0]}-{name}"
    )


def _conv_harness_cases(cls, rank, indices, **extra_kwargs):
    return [
        _harness_case(
            cls, name, {"filters": 4, **extra_kwargs, **kwargs}, input_shape
        )
        for name, kwargs, input_shape in (CONV_CASES[rank][i] for i in indices)
    ]


# Every argument set, none at its default, for each convolution.
_CONV_EVERY_ARGUMENT = {
    "data_format": "channels_last",
    "groups": 1,
    "use_bias": False,
    "bias_initializer": "ones",
    "kernel_regularizer": "l2",
    "bias_regularizer": "l1",
    "activity_regularizer": "l2",
    "kernel_constraint": "max_norm",
    "bias_constraint": "non_neg",
}
_PATCH_NORM_EVERY_ARGUMENT = {
    **_CONV_EVERY_ARGUMENT,
    "epsilon": 0.25,
    "activation": "relu",
    "kernel_initializer": "glorot_uniform",
}
_AFFINE_LIKE_EVERY_ARGUMENT = {
    **_CONV_EVERY_ARGUMENT,
    "activation": "tanh",
    "kernel_initializer": "orthogonal",
}


def _conv_every_argument_case(cls, base, input_shape, output_shape, **kwargs):
    """A convolution with every argument set, none at its default.

    The arguments of `base`, two filters and `kwargs`. Without a bias the
    layer has one trainable weight; the kernel and activity regularizers
    add two losses.
    """
    return _harness_case(
        cls,
        "every_argument",
        {**base, "filters": 2, **kwargs},
        input_shape,
        output_shape=output_shape,
        num_trainable_weights=1,
        num_losses=2,
        run_precision_checks=False,
    )


# The einsum layers with every argument set, none at its default (but
# `epsilon`, added for the norm-like layer).
_EINSUM_EVERY_ARGUMENT = {
    "equation": "abc,cde->abde",
    "output_shape": (None, 2, 3),
    "activation": "tanh",
    "bias_axes": "de",
    "kernel_initializer": "glorot_uniform",
    "bias_initializer": "ones",
    "kernel_regularizer": "l2",
    "bias_regularizer": "l1",
    "activity_regularizer": "l2",
    "kernel_constraint": "max_norm",
    "bias_constraint": "non_neg",
}


def _einsum_harness_cases(cls, **extra_kwargs):
    """The harness cases of an einsum layer.

    The mask (over every input axis but the last) passes through the
    per-token projection and the left-ellipsis case; the harness' masking
    check does not fit the others (rank-4 outputs, masks over an axis the
    equation contracts: `masking_test` covers those).
    """
    return [
        _harness_case(
            cls,
            "token_dense",
            {
                "equation": "abc,cd->abd",
                "output_shape": (None, 5),
                "bias_axes": "d",
                **extra_kwargs,
            },
            (2, 3, 4),
            output_shape=(2, 3, 5),
            supports_masking=True,
        ),
        _harness_case(
            cls,
            "attention_qkv",
            {
                "equation": "abc,cde->abde",
                "output_shape": (None, 2, 3),
                "bias_axes": "de",
                **extra_kwargs,
            },
            (2, 3, 4),
            output_shape=(2, 3, 2, 3),
        ),
        _harness_case(
            cls,
            "attention_output",
            {
                "equation": "abcd,cde->abe",
                "output_shape": (None, 5),
                "bias_axes": "e",
                **extra_kwargs,
            },
            (2, 3, 2, 4),
            output_shape=(2, 3, 5),
        ),
        _harness_case(
            cls,
            "transposed_bias_not_last",
            {
                "equation": "abc,cd->adb",
                "output_shape": (5, 3),
                "bias_axes": "d",
                **extra_kwargs,
            },
            (2, 3, 4),
            output_shape=(2, 5, 3),
        ),
        _harness_case(
            cls,
            "ellipsis_left_no_bias",
            {"equation": "...c,cd->...d", "output_shape": 4, **extra_kwargs},
            (3, 7),
            output_shape=(3, 4),
            num_trainable_weights=1,
            supports_masking=True,
        ),
        _harness_case(
            cls,
            "every_argument",
            {**_EINSUM_EVERY_ARGUMENT, **extra_kwargs, "name": "einsum"},
            (2, 3, 4),
            output_shape=(2, 3, 2, 3),
            num_losses=3,
        ),
    ]


# The cases of `run_layer_test`: (class, case name, constructor arguments,
# input shape, what differs from the defaults of `test_layer_contracts`).
HARNESS_CASES = [
    _harness_case(layers.AffineLikeDense, "basic", {"units": 5}, (4, 3)),
    _harness_case(
        layers.AffineLikeDense,
        "rank3_tanh",
        {"units": 3, "activation": "tanh"},
        (2, 6, 4),
    ),
    _harness_case(
        layers.AffineLikeDense,
        "no_bias",
        {"units": 4, "use_bias": False},
        (3, 7),
        num_trainable_weights=1,
    ),
    _harness_case(
        layers.AffineLikeDense,
        "every_argument",
        {
            "units": 2,
            "kernel_initializer": "glorot_uniform",
            "bias_initializer": "ones",
            "kernel_regularizer": "l2",
            "bias_regularizer": "l1",
            "activity_regularizer": "l2",
            "kernel_constraint": "max_norm",
            "bias_constraint": "non_neg",
            "name": "affine_like",
        },
        (2, 3),
        num_losses=3,
    ),
    _harness_case(layers.NormLikeDense, "basic", {"units": 5}, (4, 3)),
    _harness_case(
        layers.NormLikeDense,
        "rank3_relu_eps",
        {"units": 3, "epsilon": 0.5, "activation": "relu"},
        (2, 6, 4),
    ),
    _harness_case(
        layers.NormLikeDense,
        "no_bias",
        {"units": 4, "use_bias": False},
        (3, 7),
        num_trainable_weights=1,
    ),
    _harness_case(
        layers.NormLikeDense,
        "every_argument",
        {
            "units": 2,
            "epsilon": 1e-5,
            "kernel_initializer": "he_normal",
            "bias_initializer": "ones",
            "kernel_regularizer": "l1l2",
            "bias_regularizer": "l2",
            "activity_regularizer": "l1",
            "kernel_constraint": "unit_norm",
            "bias_constraint": "non_neg",
            "name": "norm_like",
        },
        (2, 3),
        num_losses=3,
    ),
    *_conv_harness_cases(layers.PatchNormConv1D, 1, (2, 7, 10), epsilon=0.01),
    _conv_every_argument_case(
        layers.PatchNormConv1D,
        _PATCH_NORM_EVERY_ARGUMENT,
        (2, 7, 3),
        (2, 7, 2),
        kernel_size=3,
        strides=1,
        padding="causal",
        dilation_rate=2,
        name="pn1",
    ),
    *_conv_harness_cases(layers.PatchNormConv2D, 2, (1, 3, 7, 9), epsilon=0.01),
    _conv_every_argument_case(
        layers.PatchNormConv2D,
        _PATCH_NORM_EVERY_ARGUMENT,
        (2, 6, 5, 3),
        (2, 2, 4, 2),
        kernel_size=(3, 2),
        strides=1,
        padding="valid",
        dilation_rate=(2, 1),
        name="pn",
    ),
    *_einsum_harness_cases(layers.AffineLikeEinsumDense),
    *_einsum_harness_cases(layers.NormLikeEinsumDense, epsilon=0.01),
    *_conv_harness_cases(layers.PatchNormConv3D, 3, (1, 4), epsilon=0.01),
    _conv_every_argument_case(
        layers.PatchNormConv3D,
        _PATCH_NORM_EVERY_ARGUMENT,
        (2, 3, 2, 4, 3),
        (2, 2, 2, 2, 2),
        kernel_size=(2, 1, 2),
        strides=1,
        padding="valid",
        dilation_rate=(1, 1, 2),
        name="pn3",
    ),
    *_conv_harness_cases(layers.AffineLikeConv1D, 1, (0, 4, 8, 9)),
    _conv_every_argument_case(
        layers.AffineLikeConv1D,
        _AFFINE_LIKE_EVERY_ARGUMENT,
        (2, 7, 3),
        (2, 4, 2),
        kernel_size=(2,),
        strides=2,
        padding="same",
        dilation_rate=1,
        name="alc1",
    ),
    *_conv_harness_cases(layers.AffineLikeConv2D, 2, (0, 2, 7, 8)),
    _conv_every_argument_case(
        layers.AffineLikeConv2D,
        _AFFINE_LIKE_EVERY_ARGUMENT,
        (2, 5, 6, 3),
        (2, 5, 3, 2),
        kernel_size=(2, 3),
        strides=(1, 2),
        padding="same",
        dilation_rate=1,
        name="alc",
    ),
    *_conv_harness_cases(layers.AffineLikeConv3D, 3, (0, 2, 3)),
    _conv_every_argument_case(
        layers.AffineLikeConv3D,
        _AFFINE_LIKE_EVERY_ARGUMENT,
        (2, 3, 4, 2, 3),
        (2, 3, 2, 2, 2),
        kernel_size=2,
        strides=(1, 2, 1),
        padding="same",
        dilation_rate=1,
        name="alc3",
    ),
]

# MultiHeadAttention's output projection.
_EINSUM_ZERO_KWARGS = {
    "equation": "abcd,cde->abe",
    "output_shape": (None, 4),
    "bias_axes": "e",
}

# Zero input, with the bias initialised to ones: (constructor arguments,
# input shape, output shape, a floor for the largest input gradient).
ZERO_INPUT = {
    **_by_class(
        ({"units": 4}, (2, 8), (2, 4), 0.0),
        {
            1: (
                {"filters": 3, "kernel_size": 3, "padding": "causal"},
                (2, 6, 2),
                (2, 6, 3),
                0.0,
            ),
            2: (
                {"filters": 3, "kernel_size": 3, "padding": "same"},
                (2, 5, 5, 2),
                (2, 5, 5, 3),
                0.0,
            ),
            3: (
                {"filters": 3, "kernel_size": 2, "padding": "same"},
                (2, 3, 3, 3, 2),
                (2, 3, 3, 3, 3),
                0.0,
            ),
        },
        (_EINSUM_ZERO_KWARGS, (2, 3, 2, 4), (2, 3, 4), 0.0),
    ),
    # d(x / sqrt(|x|^2 + eps))/dx = I / sqrt(eps) at x = 0.
    layers.NormLikeDense: ({"units": 4}, (2, 8), (2, 4), 1.0),
    layers.NormLikeEinsumDense: (
        _EINSUM_ZERO_KWARGS,
        (2, 3, 2, 4),
        (2, 3, 4),
        1.0,
    ),
}

# Inputs whose squared norms overflow float16: (constructor arguments,
# input shape, input scale, atol against float32, how many times float16's
# maximum each squared norm (of a row, or of an interior patch) exceeds).
OVERFLOW = _by_class(
    ({"units": 16}, (4, 1024), 300, 2e-2, 100),
    {
        1: (
            {"filters": 8, "kernel_size": 3, "padding": "causal"},
            (2, 16, 16),
            100,
            3e-2,
            2,
        ),
        2: (
            {"filters": 8, "kernel_size": 3, "padding": "same"},
            (2, 8, 8, 16),
            100,
            3e-2,
            10,
        ),
        3: (
            {"filters": 8, "kernel_size": 3, "padding": "same"},
            (2, 5, 5, 5, 8),
            100,
            3e-2,
            10,
        ),
    },
    (
        {
            "equation": "abcd,cde->abe",
            "output_shape": (None, 16),
            "bias_axes": "e",
        },
        (2, 3, 16, 64),
        300,
        2e-2,
        100,
    ),
)

# Large positive inputs with a positive kernel, so that every product
# `kernel . P_p` (`x . kernel` for the dense layers) overflows float16
# while every input value fits in it: (case name, constructor arguments,
# input shape).
PRODUCT_OVERFLOW = _by_class(
    [("units16", {"units": 16}, (4, 256))],
    {
        1: [
            (
                "causal_k3",
                {"filters": 4, "kernel_size": 3, "padding": "causal"},
                (2, 10, 16),
            ),
            (
                "valid_groups2",
                {"filters": 4, "kernel_size": 3, "groups": 2},
                (2, 10, 16),
            ),
        ],
        2: [
            (
                "same_k3",
                {"filters": 4, "kernel_size": 3, "padding": "same"},
                (2, 6, 6, 16),
            ),
            (
                "strides2_groups2",
                {"filters": 4, "kernel_size": 3, "strides": 2, "groups": 2},
                (2, 7, 7, 16),
            ),
            (
                "channels_first_same",
                {
                    "filters": 4,
                    "kernel_size": 3,
                    "padding": "same",
                    "data_format": "channels_first",
                },
                (2, 16, 6, 6),
            ),
        ],
        3: [
            (
                "same_k2",
                {"filters": 4, "kernel_size": 2, "padding": "same"},
                (2, 3, 3, 3, 16),
            ),
        ],
    },
    [
        (
            "attention_qkv",
            {
                "equation": "abc,cde->abde",
                "output_shape": (None, 2, 4),
                "bias_axes": "de",
            },
            (2, 3, 256),
        ),
        (
            "attention_output",
            {
                "equation": "abcd,cde->abe",
                "output_shape": (None, 8),
                "bias_axes": "e",
            },
            (2, 3, 4, 64),
        ),
    ],
)

# A 10-layer tanh stack at the default initialisation: (constructor
# arguments, input shape).
DEEP_STACK = _by_class(
    ({"units": 512}, (256, 3072)),
    {
        1: ({"filters": 32, "kernel_size": 3, "padding": "causal"}, (8, 32, 3)),
        2: (
            {"filters": 32, "kernel_size": 3, "padding": "same"},
            (8, 16, 16, 3),
        ),
        3: (
            {"filters": 16, "kernel_size": 3, "padding": "same"},
            (2, 6, 6, 6, 3),
        ),
    },
    (
        {"equation": "abc,cd->abd", "output_shape": (None, 256)},
        (32, 8, 1024),
    ),
)


def _supports_masking(cls, expected):
    """The `supports_masking` the harness checks (`None`: not checked).

    The mask passes through the dense layers, as through `Dense`, and
    through the einsum layers where they keep its axes (the cases say
    where); Keras' convolutions and ours take none.
    """
    if cls in DENSE_CLASSES:
        return True
    if cls in CONV_CLASSES:
        return False
    return expected.get("supports_masking")


def _product_overflow_cases():
    for cls in CLASSES:
        for name, kwargs, input_shape in PRODUCT_OVERFLOW[cls]:
            yield pytest.param(
                cls, kwargs, input_shape, id=f"{LAYERS[cls][0]}-{name}"
            )


def _reference(layer, kernel, bias):
    """The NumPy reference of the built `layer`: `x -> output`, float64."""
    if isinstance(layer, layers.AffineLikeDense):
        return lambda x: reference.affine_like_dense(x, kernel, bias)
    if isinstance(layer, layers.NormLikeDense):
        return lambda x: reference.norm_like_dense(
            x, kernel, bias, layer.epsilon
        )
    if layer.__class__ in EINSUM_CLASSES:
        return common.einsum_reference(layer, kernel, bias)
    return common.conv_reference(layer, kernel, bias)


def _products(layer, kernel, x):
    """`x . kernel`, the einsum, or `kernel . P_p` at every position, in
    float64."""
    if layer.__class__ in DENSE_CLASSES:
        return x.astype(np.float64) @ kernel
    if layer.__class__ in EINSUM_CLASSES:
        return np.einsum(layer.equation, x.astype(np.float64), kernel)
    return reference.patch_conv(
        x,
        kernel,
        None,
        strides=layer.strides,
        padding=layer.padding,
        data_format=layer.data_format,
        dilation_rate=layer.dilation_rate,
        groups=layer.groups,
        offset=None,
    )


def _conv_shape_cases():
    for cls in CONV_CLASSES:
        cls_id, rank = LAYERS[cls]
        for name, kwargs, input_shape in CONV_CASES[rank]:
            yield pytest.param(cls, kwargs, input_shape, id=f"{cls_id}-{name}")


class TestLayerContracts(testing.TestCase):
    @pytest.mark.parametrize(
        "cls,init_kwargs,input_shape,expected", HARNESS_CASES
    )
    def test_layer_contracts(self, cls, init_kwargs, input_shape, expected):
        common.skip_unless_supported(init_kwargs, rank=len(input_shape) - 2)
        output_shape = expected.get("output_shape") or _keras_output_shape(
            cls, init_kwargs, input_shape
        )
        self.run_layer_test(
            cls,
            init_kwargs,
            input_shape,
            output_shape,
            expected_num_trainable_weights=expected.get(
                "num_trainable_weights", 2
            ),
            expected_num_losses=expected.get("num_losses", 0),
            supports_masking=_supports_masking(cls, expected),
            run_precision_checks=expected.get("run_precision_checks", True),
        )

    @pytest.mark.parametrize("cls,kwargs,input_shape", _conv_shape_cases())
    def test_output_shape_is_keras_conv_output_shape(
        self, cls, kwargs, input_shape
    ):
        self.assertEqual(
            tuple(cls(4, **kwargs).compute_output_shape(input_shape)),
            _keras_output_shape(cls, {"filters": 4, **kwargs}, input_shape),
            f"Output shape of {cls.__name__}",
        )

    @pytest.mark.parametrize(
        "policy,rtol", [("float32", 1e-6), ("mixed_float16", 1e-3)]
    )
    @pytest.mark.parametrize("cls", CLASSES, ids=CLASS_IDS)
    def test_zero_input_gives_finite_output_and_gradient(
        self, cls, policy, rtol
    ):
        kwargs, input_shape, output_shape, grad_floor = ZERO_INPUT[cls]
        layer = cls(**kwargs, bias_initializer="ones", dtype=policy)
        x = np.zeros(input_shape, "float32")
        y = testing.to_numpy(keras.ops.cast(layer(x), "float32"))
        np.testing.assert_allclose(y, np.ones(output_shape), rtol=rtol)
        grad = common.input_gradient(layer, x)
        self.assertShape(grad, x.shape, "Input gradient")
        self.assertAllFinite(grad, "Input gradient at zero")
        self.assertTrue(
            np.max(np.abs(grad)) > grad_floor,
            f"Input gradient at zero: max |grad| = {np.max(np.abs(grad))}, "
            f"not above {grad_floor}",
        )

    @pytest.mark.parametrize("cls", CLASSES, ids=CLASS_IDS)
    def test_huge_input_does_not_overflow_in_float16(self, cls):
        kwargs, input_shape, scale, atol, excess = OVERFLOW[cls]
        rng = np.random.default_rng(3)
        x = (rng.standard_normal(input_shape) * scale).astype("float32")
        ref = cls(**kwargs, bias_initializer="random_normal")
        low = cls(**kwargs, dtype="mixed_float16")
        ref.build(x.shape)
        low.build(x.shape)
        # Every value fits in float16; every squared norm far exceeds it.
        self.assertTrue(np.max(np.abs(x)) < FLOAT16_MAX, "Input too large")
        if cls in DENSE_CLASSES:
            squared_norms = np.sum(x.astype(np.float64) ** 2, axis=-1)
        elif cls in EINSUM_CLASSES:
            squared_norms = reference.einsum_squared_norms(
                x, ref.equation, tuple(ref.kernel.shape)
            )
        else:
            squared_norms = reference.patch_squared_norms(
                x, ref.kernel_size, ref.strides, dilation_rate=ref.dilation_rate
            )
        self.assertTrue(
            np.all(squared_norms > FLOAT16_MAX * excess),
            f"Smallest squared norm {np.min(squared_norms)}",
        )
        for a, b in zip(low.weights, ref.weights):
            a.assign(b)
        y = testing.to_numpy(keras.ops.cast(low(x), "float32"))
        self.assertAllFinite(y, "float16 output")
        np.testing.assert_allclose(y, testing.to_numpy(ref(x)), atol=atol)
        self.assertAllFinite(common.input_gradient(low, x), "float16 gradient")

    @pytest.mark.parametrize(
        "cls,kwargs,input_shape", list(_product_overflow_cases())
    )
    def test_huge_product_does_not_overflow_in_float16(
        self, cls, kwargs, input_shape
    ):
        # The output is bounded by the kernel's norm, whatever `kernel .
        # P_p`: the layer must not compute that product unscaled in
        # float16 (a 16-bit convolution divides its input by a power of
        # two first).
        common.skip_unless_supported(kwargs, rank=len(input_shape) - 2)
        rng = np.random.default_rng(5)
        x = rng.uniform(1e4, 3e4, input_shape).astype("float32")
        layer = cls(**kwargs, dtype="mixed_float16")
        layer.build(x.shape)
        kernel = np.abs(rng.standard_normal(tuple(layer.kernel.shape)))
        kernel = kernel.astype("float32")
        bias = rng.standard_normal(tuple(layer.bias.shape)).astype("float32")
        layer.kernel.assign(kernel)
        layer.bias.assign(bias)
        products = _products(layer, kernel, x)
        self.assertTrue(
            np.all(np.abs(products) > FLOAT16_MAX),
            f"Smallest product {np.min(np.abs(products))}",
        )
        expected = _reference(layer, kernel, bias)(x)
        y = testing.to_numpy(keras.ops.cast(layer(x), "float32"))
        self.assertAllFinite(y, "float16 output")
        scale = np.max(np.abs(expected))
        np.testing.assert_allclose(y, expected, rtol=0, atol=4e-3 * scale)
        # The gradients stay finite; those of the input and the kernel
        # close to float32's. (The dense layers' bias gradient is only
        # finite: it is scaled by `1 / |x|`, below float16's normal range.)
        ref = cls(**kwargs)
        ref.build(x.shape)
        ref.kernel.assign(kernel)
        ref.bias.assign(bias)
        grads = common.input_and_weight_gradients(layer, x)
        ref_grads = common.input_and_weight_gradients(ref, x)
        for grad, ref_grad, name in zip(
            grads, ref_grads, ["input", "kernel", "bias"]
        ):
            self.assertAllFinite(grad, f"float16 gradient of the {name}")
            if name != "bias":
                np.testing.assert_allclose(
                    grad,
                    ref_grad,
                    rtol=0,
                    atol=5e-3 * np.max(np.abs(ref_grad)),
                    err_msg=f"float16 gradient of the {name}",
                )

    @pytest.mark.parametrize("cls", CLASSES, ids=CLASS_IDS)
    def test_default_initialisation_keeps_deep_stack_at_unit_scale(self, cls):
        kwargs, input_shape = DEEP_STACK[cls]
        rms = common.last_preactivation_rms(lambda: cls(**kwargs), input_shape)
        assert 0.2 < rms < 5, rms

    @pytest.mark.parametrize(
        "cls,kwargs,error,match",
        [
            pytest.param(cls, *case, id=f"{LAYERS[cls][0]}-{name}")
            for cls, cases in bad_arguments.BAD_ARGUMENTS.items()
            for name, case in cases.items()
        ],
    )
    def test_bad_arguments_raise(self, cls, kwargs, error, match):
        with pytest.raises(error, match=match):
            cls(**kwargs)

    @pytest.mark.parametrize("cls", CONV_CLASSES, ids=CONV_CLASS_IDS)
    def test_wrong_input_rank_raises_in_build_and_output_shape(self, cls):
        rank = LAYERS[cls][1]
        # One axis short (batch and channels only for 1D), one too many.
        for input_shape in [(None,) + (8,) * rank, (2,) + (8,) * (rank + 2)]:
            layer = cls(2, 3, name="conv")
            match = (
                rf"Layer `conv` expects inputs of rank {rank + 2} \(batch, "
                r".*Received: input_shape=" + re.escape(str(input_shape))
            )
            with pytest.raises(ValueError, match=match):
                layer.compute_output_shape(input_shape)
            with pytest.raises(ValueError, match=match):
                layer.build(input_shape)

    @pytest.mark.parametrize("policy", ["float32", "mixed_float16"])
    @pytest.mark.parametrize(
        "cls", EPSILON_CLASSES, ids=[LAYERS[cls][0] for cls in EPSILON_CLASSES]
    )
    def test_smallest_epsilon_gives_finite_output_and_gradient_at_zero(
        self, cls, policy
    ):
        # A smaller epsilon is rejected: the derivative of `rsqrt` at
        # x = 0, `-epsilon**-1.5 / 2`, would overflow float32 and the
        # gradient would be `0 * inf = NaN`. Under float16 the gradient at
        # zero, about `epsilon**-0.5`, cannot be held whatever the layer
        # does; the output can.
        kwargs, input_shape, output_shape, _ = ZERO_INPUT[cls]
        layer = cls(
            **kwargs,
            epsilon=_validation.MIN_EPSILON,
            bias_initializer="ones",
            dtype=policy,
        )
        x = np.zeros(input_shape, "float32")
        y = testing.to_numpy(keras.ops.cast(layer(x), "float32"))
        np.testing.assert_array_equal(y, np.ones(output_shape))
        if policy == "float32":
            grad = common.input_gradient(layer, x)
            self.assertAllFinite(grad, "Input gradient at zero")

    @pytest.mark.parametrize("cls", CLASSES, ids=CLASS_IDS)
    def test_docstring_documents_every_argument(self, cls):
        # The `Args:` entries, in the order of the signature.
        args = cls.__doc__.split("\n    Args:\n", 1)[1].split("\n\n", 1)[0]
        documented = re.findall(r"^        (\*\*\w+|\w+):", args, re.M)
        params = [
            ("**" if p.kind is p.VAR_KEYWORD else "") + name
            for name, p in inspect.signature(cls.__init__).parameters.items()
            if name != "self"
        ]
        self.assertEqual(documented, params, f"Args of {cls.__name__}")

    @pytest.mark.parametrize("cls", CLASSES, ids=CLASS_IDS)
    def test_docstring_example_runs_on_its_own_imports(self, cls):
        # `--doctest-modules` runs the example in the module's namespace,
        # where `keras` is imported already; a reader's session is empty.
        (test,) = doctest.DocTestFinder(recurse=False).find(
            cls, cls.__name__, globs={}
        )
        self.assertTrue(test.examples, f"{cls.__name__} has no example")
        report = []
        runner = doctest.DocTestRunner(
            optionflags=doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS
        )
        result = runner.run(test, out=report.append)
        self.assertEqual(result.failed, 0, "".join(report))
