"""Tests of keras_affine_div/diagnostics.py against exact identities and NumPy.

The models below put the measured layer in front of a `tanh` and a `Dense`
head, so that `g = dL/dz` is a non-trivial function of the sample. Weights
are drawn with NumPy and set with `set_weights`, so that every backend
measures the same network.
"""

import dataclasses
import math

import keras
import numpy as np
import pytest

from keras_affine_div import diagnostics
from keras_affine_div.layers import AffineLikeConv1D
from keras_affine_div.layers import AffineLikeConv2D
from keras_affine_div.layers import AffineLikeConv3D
from keras_affine_div.layers import AffineLikeDense
from keras_affine_div.layers import AffineLikeEinsumDense
from keras_affine_div.layers import NormLikeDense
from keras_affine_div.layers import NormLikeEinsumDense
from keras_affine_div.layers import PatchNormConv1D
from keras_affine_div.layers import PatchNormConv2D
from keras_affine_div.layers import PatchNormConv3D
from keras_affine_div.layers._einsum_equation import contracted_axes
from tests.layers import reference
from tests.layers.common import skip_unless_supported

EPSILON = 1e-3
HEAD_UNITS = 3
SUMMARY_KEYS = (
    "median_scale",
    "q10_scale",
    "q90_scale",
    "spread_scale",
    "mean_cosine",
    "mean_scale",
    "std_scale",
    "cv_scale",
)


def _set_weights(model, seed):
    rng = np.random.default_rng(seed)
    model.set_weights(
        [
            (0.5 * rng.standard_normal(w.shape)).astype("float32")
            for w in model.get_weights()
        ]
    )
    return model.get_weights()


def _snapshot(model):
    return [np.array(keras.ops.convert_to_numpy(w)) for w in model.weights]


def _assert_bitwise_equal(before, model):
    after = _snapshot(model)
    assert len(before) == len(after)
    for b, a in zip(before, after):
        assert b.dtype == a.dtype
        np.testing.assert_array_equal(a, b, strict=True)


def _model(layer, input_shape, seed=0):
    """`layer` -> (Flatten) -> tanh -> Dense head, weights from NumPy."""
    stack = [keras.Input(input_shape), layer]
    if len(input_shape) > 1:
        stack.append(keras.layers.Flatten())
    stack += [
        keras.layers.Activation("tanh"),
        keras.layers.Dense(HEAD_UNITS, name="head"),
    ]
    model = keras.Sequential(stack)
    _set_weights(model, seed)
    return model


def _batch(input_shape, batch_size, seed=1):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((batch_size,) + input_shape).astype("float32")
    y = rng.standard_normal((batch_size, HEAD_UNITS)).astype("float32")
    return x, y


def _measure(model, layer, x, y, **kwargs):
    """Runs the diagnostic and checks that no weight moved, bitwise."""
    before = _snapshot(model)
    result = diagnostics.activation_update_alignment(
        model, layer, x, y, "mse", **kwargs
    )
    _assert_bitwise_equal(before, model)
    return result


# One sample: the scale is the layer's nominal multiplier, from |x|^2 (or
# the one patch's |P|^2) alone.
def _dense_scale(sq):
    return sq + 1.0


def _one_scale(sq):
    return 1.0


def _norm_like_scale(sq):
    return 1.0 + sq / (sq + EPSILON)


SINGLE_SAMPLE_CASES = {
    "dense": (lambda: keras.layers.Dense(5), (4,), _dense_scale),
    "affine_like_dense": (lambda: AffineLikeDense(5), (4,), _one_scale),
    "norm_like_dense": (
        lambda: NormLikeDense(5, epsilon=EPSILON),
        (4,),
        _norm_like_scale,
    ),
    # A 3x3 kernel on a 3x3 input, "valid": one output position.
    "conv2d": (lambda: keras.layers.Conv2D(4, 3), (3, 3, 2), _dense_scale),
    "affine_like_conv2d": (
        lambda: AffineLikeConv2D(4, 3),
        (3, 3, 2),
        _one_scale,
    ),
    "patch_norm_conv2d": (
        lambda: PatchNormConv2D(4, 3, epsilon=EPSILON),
        (3, 3, 2),
        _norm_like_scale,
    ),
    # Causal 1D on one step: the window is two zeros and that step.
    "conv1d_causal": (
        lambda: keras.layers.Conv1D(4, 3, padding="causal"),
        (1, 3),
        _dense_scale,
    ),
    "affine_like_conv1d_causal": (
        lambda: AffineLikeConv1D(4, 3, padding="causal"),
        (1, 3),
        _one_scale,
    ),
    "patch_norm_conv1d": (
        lambda: PatchNormConv1D(4, 2, epsilon=EPSILON),
        (2, 3),
        _norm_like_scale,
    ),
    "einsum_dense": (
        lambda: keras.layers.EinsumDense("ab,bc->ac", 5, bias_axes="c"),
        (4,),
        _dense_scale,
    ),
    "affine_like_einsum_dense": (
        lambda: AffineLikeEinsumDense("ab,bc->ac", 5, bias_axes="c"),
        (4,),
        _one_scale,
    ),
    "norm_like_einsum_dense": (
        lambda: NormLikeEinsumDense(
            "ab,bc->ac", 5, bias_axes="c", epsilon=EPSILON
        ),
        (4,),
        _norm_like_scale,
    ),
    # Both input axes of a sample contracted: one "position", |x|^2 over
    # all of it.
    "einsum_dense_two_contracted_axes": (
        lambda: keras.layers.EinsumDense("abc,bcd->ad", 5, bias_axes="d"),
        (2, 3),
        _dense_scale,
    ),
    "conv3d": (lambda: keras.layers.Conv3D(4, 2), (2, 2, 2, 2), _dense_scale),
    "affine_like_conv3d": (
        lambda: AffineLikeConv3D(4, 2),
        (2, 2, 2, 2),
        _one_scale,
    ),
    "patch_norm_conv3d": (
        lambda: PatchNormConv3D(4, 2, epsilon=EPSILON),
        (2, 2, 2, 2),
        _norm_like_scale,
    ),
}


@pytest.mark.parametrize(
    "make_layer,input_shape,expected_scale",
    SINGLE_SAMPLE_CASES.values(),
    ids=SINGLE_SAMPLE_CASES.keys(),
)
def test_single_sample_scale_is_the_nominal_multiplier(
    make_layer, input_shape, expected_scale
):
    layer = make_layer()
    model = _model(layer, input_shape)
    x, y = _batch(input_shape, 1)
    result = _measure(model, layer, x, y)
    sq = float(np.sum(np.square(x.astype("float64"))))
    assert result.scale.shape == (1,)
    np.testing.assert_allclose(result.input_sq_norm, [sq], rtol=1e-6)
    np.testing.assert_allclose(result.scale, [expected_scale(sq)], rtol=2e-3)
    np.testing.assert_allclose(result.cosine, [1.0], atol=1e-5)
    assert result.layer_name == layer.name
    assert result.layer_class == type(layer).__name__
    assert result.learning_rate == 1e-3
    assert result.std_scale == 0.0
    assert result.cv_scale == 0.0
    # One sample: every quantile is its multiplier, and nothing spreads.
    for quantile in (result.q10_scale, result.median_scale, result.q90_scale):
        assert quantile == result.scale[0]
    assert result.spread_scale == 0.0


def test_scale_does_not_depend_on_the_learning_rate():
    layer = keras.layers.Dense(5)
    model = _model(layer, (4,))
    x, y = _batch((4,), 6)
    small = _measure(model, layer, x, y, learning_rate=1e-3)
    large = _measure(model, layer, x, y, learning_rate=0.5)
    assert large.learning_rate == 0.5
    np.testing.assert_allclose(small.scale, large.scale, rtol=1e-2)
    np.testing.assert_allclose(small.cosine, large.cosine, atol=1e-3)


def test_layer_by_name_equals_layer_by_object():
    layer = AffineLikeDense(5, name="measured")
    model = _model(layer, (4,))
    x, y = _batch((4,), 3)
    by_object = _measure(model, layer, x, y)
    by_name = _measure(model, "measured", x, y)
    np.testing.assert_array_equal(by_object.scale, by_name.scale)
    np.testing.assert_array_equal(by_object.cosine, by_name.cosine)


ACTIVATION_CASES = {
    "dense": (
        lambda **kw: keras.layers.Dense(5, name="d", **kw),
        _dense_scale,
    ),
    "einsum_dense": (
        lambda **kw: keras.layers.EinsumDense(
            "ab,bc->ac", 5, bias_axes="c", name="d", **kw
        ),
        _dense_scale,
    ),
    "affine_like_einsum_dense": (
        lambda **kw: AffineLikeEinsumDense(
            "ab,bc->ac", 5, bias_axes="c", name="d", **kw
        ),
        _one_scale,
    ),
}


@pytest.mark.parametrize(
    "make_layer,expected_scale",
    ACTIVATION_CASES.values(),
    ids=ACTIVATION_CASES.keys(),
)
def test_a_layer_with_an_activation_is_measured_before_it(
    make_layer, expected_scale
):
    # `Dense(activation="tanh")` must measure what `Dense` followed by an
    # `Activation("tanh")` layer measures: the pre-activation output.
    x, y = _batch((4,), 5)
    fused = _model(make_layer(activation="tanh"), (4,))
    fused = keras.Sequential(
        [keras.Input((4,)), fused.get_layer("d"), fused.get_layer("head")]
    )
    weights = _set_weights(fused, 3)
    split = _model(make_layer(), (4,))
    split.set_weights(weights)
    activation = fused.get_layer("d").activation
    a = _measure(fused, "d", x, y)
    b = _measure(split, "d", x, y)
    np.testing.assert_allclose(a.scale, b.scale, rtol=1e-4)
    np.testing.assert_allclose(a.cosine, b.cosine, atol=1e-5)
    assert fused.get_layer("d").activation is activation
    assert "call" not in vars(fused.get_layer("d"))
    one = _measure(fused, "d", x[:1], y[:1])
    np.testing.assert_allclose(
        one.scale,
        [expected_scale(np.sum(np.square(x[0].astype("float64"))))],
        rtol=2e-3,
    )


class _Scale(keras.layers.Layer):
    """`z = w * x`, elementwise: a layer with weights that is none of those
    the diagnostics know."""

    def build(self, input_shape):
        self.w = self.add_weight(shape=input_shape[1:], initializer="ones")

    def call(self, x):
        return self.w * x


def test_any_other_layer_with_trainable_weights_is_measured_at_its_output():
    # One SGD step on w moves z_i by -lr x_i * sum_j g_j x_j (elementwise).
    layer = _Scale()
    model = _model(layer, (4,))
    x, y = _batch((4,), 3)
    result = _measure(model, layer, x, y, learning_rate=0.1)
    w, head_kernel, head_bias = [
        w.astype("float64") for w in model.get_weights()
    ]
    x64 = x.astype("float64")
    a = np.tanh(w * x64)
    d_out = 2.0 * (a @ head_kernel + head_bias - y) / (len(x) * HEAD_UNITS)
    g = (d_out @ head_kernel.T) * (1.0 - a**2)
    dz = -0.1 * x64 * np.sum(g * x64, axis=0)
    ideal = -0.1 * g
    dot = np.sum(dz * ideal, axis=1)
    np.testing.assert_allclose(
        result.scale, dot / np.sum(ideal**2, axis=1), rtol=2e-3, atol=1e-4
    )
    np.testing.assert_allclose(
        result.cosine,
        dot / (np.linalg.norm(dz, axis=1) * np.linalg.norm(ideal, axis=1)),
        rtol=2e-3,
        atol=1e-4,
    )
    np.testing.assert_allclose(
        result.input_sq_norm, np.sum(x64**2, axis=1), rtol=1e-6
    )
    assert result.layer_class == "_Scale"


def test_affine_like_spread_grows_with_batch_size():
    # Cross-sample interference: dz_i = -lr sum_j K_ij g_j. With one sample
    # K = [[1]] and the scale is exactly 1; every extra sample adds an
    # off-diagonal term, so the spread of `scale` grows with the batch.
    stds, cvs, means = [], [], []
    for batch_size in (1, 8, 64):
        layer = AffineLikeDense(6)
        model = _model(layer, (4,), seed=0)
        x, y = _batch((4,), batch_size, seed=2)
        result = _measure(model, layer, x, y, learning_rate=0.1)
        stds.append(result.std_scale)
        cvs.append(result.cv_scale)
        means.append(result.mean_scale)
    assert stds[0] == 0.0 and cvs[0] == 0.0
    assert math.isclose(means[0], 1.0, rel_tol=1e-3)
    assert 0.0 < stds[1] < stds[2]
    assert 0.0 < cvs[1] < cvs[2]
    assert stds[2] > 2 * stds[1]


def _patches(x, kernel_size, strides, padding):
    """Input patches of a channels_last 2D conv, `(batch, positions, k*k*c)`.

    Each patch is flattened in the order of a `(kh, kw, c, filters)` kernel.
    """
    batch, height, width, channels = x.shape
    if padding == "same":
        out_h = -(-height // strides)
        out_w = -(-width // strides)
        pad_h = max((out_h - 1) * strides + kernel_size - height, 0)
        pad_w = max((out_w - 1) * strides + kernel_size - width, 0)
        x = np.pad(
            x,
            (
                (0, 0),
                (pad_h // 2, pad_h - pad_h // 2),
                (pad_w // 2, pad_w - pad_w // 2),
                (0, 0),
            ),
        )
    else:
        out_h = (height - kernel_size) // strides + 1
        out_w = (width - kernel_size) // strides + 1
    patches = [
        x[
            :,
            r * strides : r * strides + kernel_size,
            s * strides : s * strides + kernel_size,
            :,
        ].reshape(batch, -1)
        for r in range(out_h)
        for s in range(out_w)
    ]
    return np.stack(patches, axis=1)


def _divided_inputs(kind, vectors):
    """`(u, c)` with `z = u . W + c b` for each layer kind.

    `vectors` has shape `(..., d)`: inputs of a Dense-like layer or patches
    of a Conv-like one.
    """
    sq = np.sum(np.square(vectors), axis=-1, keepdims=True)
    if kind == "affine":
        n = np.sqrt(sq + 1.0)
        return vectors / n, 1.0 / n
    if kind == "norm":
        return vectors / np.sqrt(sq + EPSILON), np.ones_like(sq)
    return vectors, np.ones_like(sq)


def _reference(kind, vectors, kernel, bias, head_kernel, head_bias, y, lr):
    """NumPy scale and cosine of a layer followed by tanh, a head and mse.

    `vectors` are `(batch, positions, d)`; the layer's pre-activation is
    `z_ip = u_ip . W + c_ip b`, so one SGD step gives

        dz_ip = -lr sum_jq K_ip,jq g_jq,   K_ip,jq = u_ip . u_jq + c_ip c_jq

    which is `K_ij = (x_i . x_j + 1) / (n_i n_j)` for `AffineLikeDense`.
    """
    batch, positions, _ = vectors.shape
    u, c = _divided_inputs(kind, vectors)
    z = u @ kernel + c * bias  # (batch, positions, units)
    a = np.tanh(z.reshape(batch, -1))
    out = a @ head_kernel + head_bias
    d_out = 2.0 * (out - y) / out.size  # mse, mean over all entries
    g = ((d_out @ head_kernel.T) * (1.0 - a**2)).reshape(z.shape)
    u_flat = u.reshape(batch * positions, -1)
    c_flat = c.reshape(batch * positions, 1)
    k = u_flat @ u_flat.T + c_flat @ c_flat.T
    dz = -lr * (k @ g.reshape(batch * positions, -1))
    dz = dz.reshape(batch, -1)
    ideal = -lr * g.reshape(batch, -1)
    dot = np.sum(dz * ideal, axis=1)
    scale = dot / np.sum(ideal**2, axis=1)
    cosine = dot / (np.linalg.norm(dz, axis=1) * np.linalg.norm(ideal, axis=1))
    return scale, cosine


def _assert_matches_reference(result, model, kind, vectors, y, sq_rtol):
    """`result` (at learning rate 0.1) against `_reference` on `vectors`,
    `(batch, positions, d)`: what the measured layer's output at each
    position is an affine map of."""
    kernel, bias, head_kernel, head_bias = [
        w.astype("float64") for w in model.get_weights()
    ]
    scale, cosine = _reference(
        kind,
        vectors,
        kernel.reshape(-1, kernel.shape[-1]),
        bias.reshape(-1),
        head_kernel,
        head_bias,
        y,
        0.1,
    )
    np.testing.assert_allclose(result.scale, scale, rtol=2e-3, atol=1e-4)
    np.testing.assert_allclose(result.cosine, cosine, rtol=2e-3, atol=1e-4)
    np.testing.assert_allclose(
        result.input_sq_norm,
        np.mean(np.sum(vectors**2, axis=-1), axis=1),
        rtol=sq_rtol,
    )


DENSE_REFERENCE_CASES = {
    "dense": (lambda: keras.layers.Dense(5), "plain"),
    "affine_like_dense": (lambda: AffineLikeDense(5), "affine"),
    "norm_like_dense": (lambda: NormLikeDense(5, epsilon=EPSILON), "norm"),
}


@pytest.mark.parametrize(
    "make_layer,kind",
    DENSE_REFERENCE_CASES.values(),
    ids=DENSE_REFERENCE_CASES.keys(),
)
def test_dense_like_matches_numpy_cross_sample_formula(make_layer, kind):
    layer = make_layer()
    model = _model(layer, (4,))
    x, y = _batch((4,), 5)
    result = _measure(model, layer, x, y, learning_rate=0.1)
    kernel, bias, head_kernel, head_bias = [
        w.astype("float64") for w in model.get_weights()
    ]
    x64 = x.astype("float64")
    scale, cosine = _reference(
        kind, x64[:, None, :], kernel, bias, head_kernel, head_bias, y, 0.1
    )
    np.testing.assert_allclose(result.scale, scale, rtol=2e-3, atol=1e-4)
    np.testing.assert_allclose(result.cosine, cosine, rtol=2e-3, atol=1e-4)
    np.testing.assert_allclose(
        result.input_sq_norm, np.sum(x64**2, axis=1), rtol=1e-6
    )
    # Several samples: the scales now differ from sample to sample.
    assert result.std_scale > 0
    # The quantile summaries are those of the NumPy per-sample scales.
    q10, median, q90 = np.quantile(scale, [0.1, 0.5, 0.9])
    np.testing.assert_allclose(
        [result.q10_scale, result.median_scale, result.q90_scale],
        [q10, median, q90],
        rtol=2e-3,
        atol=1e-4,
    )
    np.testing.assert_allclose(
        result.spread_scale, q90 - q10, rtol=2e-3, atol=2e-4
    )
    assert result.spread_scale > 0


# (equation, output_shape, bias_axes, input shape of a sample): per token,
# as a Dense on
# a sequence; MultiHeadAttention's output projection (two axes contracted,
# per token); the same with a leading `...` (batch and tokens elided).
EINSUM_REFERENCE_EQUATIONS = {
    "per_token": ("abc,cd->abd", (3, 5), "d", (3, 4)),
    "two_contracted_axes": ("abcd,cde->abe", (3, 5), "e", (3, 2, 2)),
    "left_ellipsis": ("...c,cd->...d", 5, "d", (3, 4)),
}
EINSUM_REFERENCE_LAYERS = {
    "einsum_dense": (keras.layers.EinsumDense, {}, "plain"),
    "affine_like_einsum_dense": (AffineLikeEinsumDense, {}, "affine"),
    "norm_like_einsum_dense": (
        NormLikeEinsumDense,
        {"epsilon": EPSILON},
        "norm",
    ),
}


@pytest.mark.parametrize(
    "equation,output_shape,bias_axes,input_shape",
    EINSUM_REFERENCE_EQUATIONS.values(),
    ids=EINSUM_REFERENCE_EQUATIONS.keys(),
)
@pytest.mark.parametrize(
    "layer_cls,kwargs,kind",
    EINSUM_REFERENCE_LAYERS.values(),
    ids=EINSUM_REFERENCE_LAYERS.keys(),
)
def test_einsum_like_matches_numpy_cross_token_formula(
    layer_cls, kwargs, kind, equation, output_shape, bias_axes, input_shape
):
    # Each token's output is an affine map of the token's contracted
    # entries, flattened: the tokens of a sample share the step as the
    # samples of a batch do, `K` running over (sample, token) pairs.
    layer = layer_cls(equation, output_shape, bias_axes=bias_axes, **kwargs)
    model = _model(layer, input_shape)
    x, y = _batch(input_shape, 4)
    result = _measure(model, layer, x, y, learning_rate=0.1)
    tokens = x.astype("float64").reshape(len(x), input_shape[0], -1)
    _assert_matches_reference(result, model, kind, tokens, y, sq_rtol=1e-6)
    # Cross-token terms: even the affine-like layer's multiplier is not 1.
    assert result.spread_scale > 0


@pytest.mark.parametrize(
    "equation,rank,expected",
    [
        ("ab,bc->ac", 2, (1,)),
        ("ab,b->ab", 2, ()),
        ("abc,cd->abd", 3, (2,)),
        ("abcd,cde->abe", 4, (2, 3)),
        ("abc,bcd->ad", 3, (1, 2)),
        ("...c,cd->...d", 4, (3,)),
        ("...bc,bcd->...d", 4, (2, 3)),
        ("ab...,bc->ac...", 4, (1,)),
    ],
)
def test_contracted_axes_of_an_equation(equation, rank, expected):
    assert contracted_axes(equation, rank) == expected


@pytest.mark.parametrize(
    "equation", ["ab,bc", "...ab,bc->ac", "ab,bc->...ac", "ab..,bc->ac.."]
)
def test_contracted_axes_rejects_an_equation_of_no_form(equation):
    with pytest.raises(ValueError, match="Expected an einsum string"):
        contracted_axes(equation, 3)


CONV_REFERENCE_CASES = {
    "conv2d_valid": (keras.layers.Conv2D, {}, "plain", "valid", 1),
    "conv2d_same_strides_2": (keras.layers.Conv2D, {}, "plain", "same", 2),
    "affine_like_conv2d_valid": (AffineLikeConv2D, {}, "affine", "valid", 1),
    "affine_like_conv2d_same_strides_2": (
        AffineLikeConv2D,
        {},
        "affine",
        "same",
        2,
    ),
    "patch_norm_conv2d_valid": (
        PatchNormConv2D,
        {"epsilon": EPSILON},
        "norm",
        "valid",
        1,
    ),
}


@pytest.mark.parametrize(
    "layer_cls,kwargs,kind,padding,strides",
    CONV_REFERENCE_CASES.values(),
    ids=CONV_REFERENCE_CASES.keys(),
)
def test_conv_like_matches_numpy_patch_formula(
    layer_cls, kwargs, kind, padding, strides
):
    layer = layer_cls(3, 3, padding=padding, strides=strides, **kwargs)
    input_shape = (5, 5, 2) if padding == "same" else (4, 4, 2)
    model = _model(layer, input_shape)
    x, y = _batch(input_shape, 3)
    result = _measure(model, layer, x, y, learning_rate=0.1)
    patches = _patches(x.astype("float64"), 3, strides, padding)
    _assert_matches_reference(result, model, kind, patches, y, sq_rtol=1e-5)


@pytest.mark.parametrize(
    "layer_cls",
    [keras.layers.Conv2D, AffineLikeConv2D, PatchNormConv2D],
    ids=["conv2d", "affine_like_conv2d", "patch_norm_conv2d"],
)
def test_channels_first_measures_what_channels_last_measures(layer_cls):
    skip_unless_supported({"data_format": "channels_first"})
    # One output position, so that Flatten orders both outputs alike.
    last = _model(layer_cls(4, 3, data_format="channels_last"), (3, 3, 2))
    first = _model(layer_cls(4, 3, data_format="channels_first"), (2, 3, 3))
    first.set_weights(last.get_weights())
    x, y = _batch((3, 3, 2), 3)
    expected = _measure(last, last.layers[0], x, y, learning_rate=0.1)
    result = _measure(
        first, first.layers[0], x.transpose(0, 3, 1, 2), y, learning_rate=0.1
    )
    np.testing.assert_allclose(result.scale, expected.scale, rtol=1e-3)
    np.testing.assert_allclose(result.cosine, expected.cosine, atol=1e-5)
    np.testing.assert_allclose(
        result.input_sq_norm, expected.input_sq_norm, rtol=1e-6
    )


@pytest.mark.parametrize(
    "layer_cls,kwargs",
    [
        (keras.layers.Conv2D, {}),
        (AffineLikeConv2D, {}),
        (PatchNormConv2D, {"epsilon": EPSILON}),
    ],
    ids=["conv2d", "affine_like_conv2d", "patch_norm_conv2d"],
)
def test_grouped_conv_measures_the_patch_norms_the_layer_divides_by(
    layer_cls, kwargs
):
    # With groups=2 each filter sees (and ours divide by) the patch of its
    # own group: window x half of the channels.
    layer = layer_cls(4, 3, groups=2, padding="same", **kwargs)
    model = _model(layer, (4, 4, 6))
    x, y = _batch((4, 4, 6), 3)
    result = _measure(model, layer, x, y, learning_rate=0.1)
    per_group = reference.patch_squared_norms(
        x, (3, 3), (1, 1), padding="same", groups=2
    )
    np.testing.assert_allclose(
        result.input_sq_norm, per_group.reshape(3, -1).mean(axis=1), rtol=1e-5
    )
    whole = reference.patch_squared_norms(x, (3, 3), (1, 1), padding="same")
    assert np.all(result.input_sq_norm < 0.75 * whole.reshape(3, -1).mean(1))


def test_grouped_affine_like_conv_single_position_scale_is_one():
    layer = AffineLikeConv2D(4, 3, groups=2)
    model = _model(layer, (3, 3, 4))
    x, y = _batch((3, 3, 4), 1)
    result = _measure(model, layer, x, y)
    np.testing.assert_allclose(result.scale, [1.0], rtol=2e-3)
    np.testing.assert_allclose(result.cosine, [1.0], atol=1e-5)
    groups = np.sum(x.astype("float64").reshape(9, 2, 2) ** 2, axis=(0, 2))
    np.testing.assert_allclose(result.input_sq_norm, [groups.mean()], rtol=1e-6)


def test_undefined_samples_are_nan_and_skipped_by_the_summaries():
    # A dead ReLU: sample 0's pre-activation is negative, so g_0 = 0 and
    # its ideal step is zero; sample 1 still gets the Dense multiplier
    # |x_1|^2 + 1 = 3 (the cross term carries g_0 = 0).
    layer = keras.layers.Dense(1, activation="relu")
    model = keras.Sequential([keras.Input((2,)), layer, keras.layers.Dense(2)])
    _set_weights(model, 0)
    layer.kernel.assign(np.ones((2, 1), "float32"))
    layer.bias.assign(np.zeros((1,), "float32"))
    x = np.array([[-1.0, -1.0], [1.0, 1.0]], "float32")
    y = np.ones((2, 2), "float32")
    result = _measure(model, layer, x, y)
    assert np.isnan(result.scale[0]) and np.isnan(result.cosine[0])
    np.testing.assert_allclose(result.scale[1], 3.0, rtol=2e-3)
    np.testing.assert_allclose(result.cosine[1], 1.0, atol=1e-5)
    np.testing.assert_allclose(result.mean_scale, 3.0, rtol=2e-3)
    assert result.std_scale == 0.0
    for quantile in (result.q10_scale, result.median_scale, result.q90_scale):
        assert quantile == result.scale[1]
    assert result.spread_scale == 0.0
    np.testing.assert_allclose(result.mean_cosine, 1.0, atol=1e-5)


def test_all_undefined_gives_nan_summaries():
    layer = keras.layers.Dense(4)
    head = keras.layers.Dense(2, kernel_initializer="zeros")
    model = keras.Sequential([keras.Input((3,)), layer, head])
    x, y = _batch((3,), 4)
    result = _measure(model, layer, x, y[:, :2])
    assert np.all(np.isnan(result.scale)) and np.all(np.isnan(result.cosine))
    for value in (
        result.median_scale,
        result.q10_scale,
        result.q90_scale,
        result.spread_scale,
        result.mean_scale,
        result.std_scale,
        result.cv_scale,
        result.mean_cosine,
    ):
        assert math.isnan(value)


def test_result_summaries_and_immutability():
    result = diagnostics.ActivationUpdateAlignment(
        "l", "Dense", 0.1, [1.0, 3.0], [1.0, 0.5], [2.0, 4.0]
    )
    assert result.scale.dtype == np.float64
    assert (result.mean_scale, result.std_scale) == (2.0, 1.0)
    assert result.cv_scale == 0.5
    assert result.mean_cosine == 0.75
    # Linear interpolation between the two sorted values.
    assert result.median_scale == 2.0
    assert result.q10_scale == pytest.approx(1.2, abs=1e-12)
    assert result.q90_scale == pytest.approx(2.8, abs=1e-12)
    assert result.spread_scale == pytest.approx(1.6, abs=1e-12)
    summary = result.summary()
    # The readable summaries lead, the mean-based ones follow.
    assert list(summary) == [
        "layer",
        "class",
        "median_scale",
        "q10_scale",
        "q90_scale",
        "spread_scale",
        "mean_cosine",
        "mean_scale",
        "std_scale",
        "cv_scale",
    ]
    assert summary == {
        "layer": "l",
        "class": "Dense",
        "median_scale": result.median_scale,
        "q10_scale": result.q10_scale,
        "q90_scale": result.q90_scale,
        "spread_scale": result.spread_scale,
        "mean_cosine": 0.75,
        "mean_scale": 2.0,
        "std_scale": 1.0,
        "cv_scale": 0.5,
    }
    with pytest.raises(ValueError, match="read-only"):
        result.scale[0] = 5.0
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.scale = np.zeros(2)
    zero_mean = diagnostics.ActivationUpdateAlignment(
        "l", "Dense", 0.1, [1.0, -1.0], [1.0, 1.0], [1.0, 1.0]
    )
    assert math.isnan(zero_mean.cv_scale)


# Per-sample multipliers whose mean is almost 0: half the samples' steps
# go against the ideal one. cv = std / |mean| explodes; the quantiles stay
# multipliers, between the smallest and the largest sample's.
NEAR_ZERO_MEAN_SCALES = {
    "symmetric": [-3.0, -1.0, 1.0, 3.002],
    "skewed": [-40.0, -0.5, 0.2, 0.3, 1.0, 1.2, 37.8005],
    "with_nan": [np.nan, -2.0, 0.5, np.nan, -0.5, 2.0005, np.nan],
}


@pytest.mark.parametrize(
    "scale", NEAR_ZERO_MEAN_SCALES.values(), ids=NEAR_ZERO_MEAN_SCALES.keys()
)
def test_quantile_summaries_stay_readable_when_the_mean_is_near_zero(scale):
    result = diagnostics.ActivationUpdateAlignment(
        "l", "Dense", 0.1, scale, np.ones(len(scale)), np.ones(len(scale))
    )
    defined = np.array([s for s in scale if not math.isnan(s)])
    # What the old summary showed: a mean near 0 and a cv in the thousands.
    assert abs(result.mean_scale) < 1e-3
    assert result.cv_scale > 1000
    # NumPy reference on the defined per-sample values.
    q10, median, q90 = np.quantile(defined, [0.1, 0.5, 0.9])
    assert result.q10_scale == pytest.approx(q10, rel=1e-12, abs=1e-12)
    assert result.median_scale == pytest.approx(median, rel=1e-12, abs=1e-12)
    assert result.q90_scale == pytest.approx(q90, rel=1e-12, abs=1e-12)
    assert result.spread_scale == pytest.approx(q90 - q10, rel=1e-12)
    # Bounded by the per-sample values, whatever the mean.
    assert (
        defined.min()
        <= result.q10_scale
        <= result.median_scale
        <= result.q90_scale
        <= defined.max()
    )
    assert 0 < result.spread_scale <= defined.max() - defined.min()


def test_layer_in_a_nested_model():
    inner = keras.Sequential(
        [keras.Input((4,)), AffineLikeDense(5, name="inner_affine")],
        name="inner",
    )
    inputs = keras.Input((4,))
    hidden = keras.layers.Activation("tanh")(inner(inputs))
    model = keras.Model(inputs, keras.layers.Dense(HEAD_UNITS)(hidden))
    _set_weights(model, 0)
    x, y = _batch((4,), 1)
    result = _measure(model, "inner_affine", x, y)
    np.testing.assert_allclose(result.scale, [1.0], rtol=2e-3)


def test_weights_and_layer_restored_when_an_error_is_raised_midway():
    layer = keras.layers.Dense(5, activation="relu")
    model = _model(layer, (4,))
    model.add(keras.layers.BatchNormalization())
    model.add(keras.layers.Dropout(0.5))
    x, y = _batch((4,), 4)
    before = _snapshot(model)
    expected = keras.ops.convert_to_numpy(model(x))
    activation = layer.activation
    calls = []

    def failing_loss(y_true, y_pred):
        calls.append(1)
        raise RuntimeError("loss failed on purpose")

    with pytest.raises(RuntimeError, match="loss failed on purpose"):
        diagnostics.activation_update_alignment(
            model, layer, x, y, failing_loss
        )
    assert calls == [1]
    _assert_bitwise_equal(before, model)
    assert layer.activation is activation
    assert "call" not in vars(layer)
    np.testing.assert_array_equal(
        keras.ops.convert_to_numpy(model(x)), expected
    )
    # And it still measures afterwards.
    result = _measure(model, layer, x, y)
    assert result.scale.shape == (4,)


def test_alignment_report_over_a_mixed_model():
    inputs = keras.Input((5, 5, 2))
    h = keras.layers.Conv2D(3, 3, activation="relu", name="conv")(inputs)
    h = keras.layers.BatchNormalization(name="bn")(h)
    h = PatchNormConv2D(4, 2, activation="relu", name="patch_norm")(h)
    h = keras.layers.Flatten()(h)
    h = AffineLikeDense(6, activation="tanh", name="affine_dense")(h)
    h = NormLikeDense(6, activation="tanh", name="norm_dense")(h)
    frozen = keras.layers.Dense(6, activation="tanh", name="frozen")
    h = frozen(h)
    outputs = keras.layers.Dense(HEAD_UNITS, name="head")(h)
    model = keras.Model(inputs, outputs)
    _set_weights(model, 0)
    frozen.trainable = False
    x, y = _batch((5, 5, 2), 4)
    before = _snapshot(model)
    rows = diagnostics.alignment_report(model, x, y, "mse", learning_rate=0.1)
    _assert_bitwise_equal(before, model)
    assert [(r["layer"], r["class"]) for r in rows] == [
        ("conv", "Conv2D"),
        ("patch_norm", "PatchNormConv2D"),
        ("affine_dense", "AffineLikeDense"),
        ("norm_dense", "NormLikeDense"),
        ("head", "Dense"),
    ]
    single = diagnostics.activation_update_alignment(
        model, "patch_norm", x, y, "mse", learning_rate=0.1
    ).summary()
    assert (rows[1]["layer"], rows[1]["class"]) == (
        single["layer"],
        single["class"],
    )
    for key in SUMMARY_KEYS:
        assert rows[1][key] == pytest.approx(single[key], rel=1e-6)
    for row in rows:
        assert set(row) == {"layer", "class", *SUMMARY_KEYS}
        assert np.isfinite(row["mean_scale"]) and row["mean_scale"] > 0
        assert np.isfinite(row["median_scale"]) and row["median_scale"] > 0
        assert row["q10_scale"] <= row["median_scale"] <= row["q90_scale"]
        assert -1.0 <= row["mean_cosine"] <= 1.0 + 1e-6


def test_alignment_report_measures_the_einsum_layers_of_a_model():
    # The EinsumDense-like layers the model holds are measured, and those
    # inside a MultiHeadAttention (a layer, not a model), by their path.
    inputs = keras.Input((3, 4))
    h = keras.layers.EinsumDense(
        "abc,cd->abd", (3, 4), bias_axes="d", activation="tanh", name="embed"
    )(inputs)
    h = keras.layers.MultiHeadAttention(2, 2, name="attention")(h, h)
    h = AffineLikeEinsumDense(
        "abc,cd->abd", (3, 4), bias_axes="d", name="ours"
    )(h)
    h = NormLikeEinsumDense("abc,cd->abd", (3, 4), name="ours_norm")(h)
    h = keras.layers.Flatten()(h)
    outputs = keras.layers.Dense(HEAD_UNITS, name="head")(h)
    model = keras.Model(inputs, outputs)
    _set_weights(model, 0)
    x, y = _batch((3, 4), 4)
    before = _snapshot(model)
    rows = diagnostics.alignment_report(model, x, y, "mse", learning_rate=0.1)
    _assert_bitwise_equal(before, model)
    assert [(r["layer"], r["class"]) for r in rows] == [
        ("embed", "EinsumDense"),
        ("attention/query", "EinsumDense"),
        ("attention/key", "EinsumDense"),
        ("attention/value", "EinsumDense"),
        ("attention/attention_output", "EinsumDense"),
        ("ours", "AffineLikeEinsumDense"),
        ("ours_norm", "NormLikeEinsumDense"),
        ("head", "Dense"),
    ]
    for row in rows:
        single = diagnostics.activation_update_alignment(
            model, row["layer"], x, y, "mse", learning_rate=0.1
        ).summary()
        for key in SUMMARY_KEYS:
            assert row[key] == pytest.approx(single[key], rel=1e-6)


def test_alignment_report_one_sample_gives_nominal_multipliers():
    model = keras.Sequential(
        [
            keras.Input((4,)),
            AffineLikeDense(6, activation="tanh", name="affine"),
            NormLikeDense(6, activation="tanh", name="norm", epsilon=EPSILON),
            keras.layers.Dense(HEAD_UNITS, name="head"),
        ]
    )
    _set_weights(model, 0)
    x, y = _batch((4,), 1)
    rows = diagnostics.alignment_report(model, x, y, "mse")
    rows = {row["layer"]: row for row in rows}
    hidden = model.get_layer("norm")(model.get_layer("affine")(x))
    hidden_sq = float(np.sum(np.square(keras.ops.convert_to_numpy(hidden))))
    affine_out = keras.ops.convert_to_numpy(model.get_layer("affine")(x))
    norm_sq = float(np.sum(np.square(affine_out.astype("float64"))))
    assert rows["affine"]["mean_scale"] == pytest.approx(1.0, rel=2e-3)
    assert rows["affine"]["median_scale"] == pytest.approx(1.0, rel=2e-3)
    assert rows["affine"]["spread_scale"] == 0.0
    assert rows["norm"]["mean_scale"] == pytest.approx(
        1 + norm_sq / (norm_sq + EPSILON), rel=2e-3
    )
    assert rows["head"]["mean_scale"] == pytest.approx(hidden_sq + 1, rel=2e-3)
    for row in rows.values():
        assert row["mean_cosine"] == pytest.approx(1.0, abs=1e-5)


def test_shared_layer_is_rejected_and_restored():
    shared = keras.layers.Dense(4, name="shared")
    inputs = keras.Input((4,))
    outputs = shared(keras.layers.Activation("tanh")(shared(inputs)))
    model = keras.Model(inputs, outputs)
    x, y = _batch((4,), 2)
    before = _snapshot(model)
    with pytest.raises(
        ValueError,
        match=r"Expected a layer that the model calls exactly once per "
        r"forward pass\. "
        r"Received: layer='shared', calls=2",
    ):
        diagnostics.activation_update_alignment(
            model, shared, x, y[:, :1], "mse"
        )
    _assert_bitwise_equal(before, model)
    assert "call" not in vars(shared)


class _UnusedLayerModel(keras.Model):
    def __init__(self):
        super().__init__()
        self.used = keras.layers.Dense(2, name="used")
        self.unused = keras.layers.Dense(2, name="unused")
        self.unused.build((None, 3))

    def call(self, inputs):
        return self.used(inputs)


def test_layer_that_the_model_does_not_call_is_rejected():
    model = _UnusedLayerModel()
    x = np.ones((2, 3), "float32")
    model(x)
    with pytest.raises(ValueError, match=r"Received: layer='unused', calls=0"):
        diagnostics.activation_update_alignment(
            model, "unused", x, np.ones((2, 2), "float32"), "mse"
        )


def _small_model():
    layer = keras.layers.Dense(5, name="dense_a")
    return _model(layer, (4,)), layer


def test_rejects_a_model_that_is_not_a_keras_model():
    x, y = _batch((4,), 2)
    with pytest.raises(
        TypeError, match=r"Expected a `keras.Model`\. Received: model=3"
    ):
        diagnostics.activation_update_alignment(3, "dense_a", x, y, "mse")
    with pytest.raises(
        TypeError, match=r"Expected a `keras.Model`\. Received: model='m'"
    ):
        diagnostics.alignment_report("m", x, y, "mse")


def test_rejects_an_unknown_layer_name():
    model, _ = _small_model()
    x, y = _batch((4,), 2)
    with pytest.raises(
        ValueError,
        match=r"Expected the name of a layer of model `.*`, one of "
        r"\['dense_a', .*\]\. Received: layer='nope'",
    ):
        diagnostics.activation_update_alignment(model, "nope", x, y, "mse")


def test_rejects_a_layer_of_another_model():
    model, _ = _small_model()
    other = keras.layers.Dense(5, name="elsewhere")
    other.build((None, 4))
    x, y = _batch((4,), 2)
    with pytest.raises(
        ValueError,
        match=r"Expected a layer of model `.*`\. Received: "
        r"layer='elsewhere' of class Dense",
    ):
        diagnostics.activation_update_alignment(model, other, x, y, "mse")


def test_rejects_a_layer_argument_of_the_wrong_type():
    model, _ = _small_model()
    x, y = _batch((4,), 2)
    with pytest.raises(
        TypeError,
        match=r"Expected a `keras.layers.Layer` or a layer name \(str\)\. "
        r"Received: layer=0",
    ):
        diagnostics.activation_update_alignment(model, 0, x, y, "mse")


def test_rejects_a_layer_without_trainable_weights():
    model, layer = _small_model()
    x, y = _batch((4,), 2)
    activation_name = model.layers[1].name
    with pytest.raises(
        ValueError,
        match=r"Expected a layer with trainable weights .*Received: "
        rf"layer='{activation_name}' of class Activation",
    ):
        diagnostics.activation_update_alignment(
            model, activation_name, x, y, "mse"
        )
    layer.trainable = False
    with pytest.raises(
        ValueError,
        match=r"Expected a layer with trainable weights .*Received: "
        r"layer='dense_a' of class Dense",
    ):
        diagnostics.activation_update_alignment(model, layer, x, y, "mse")


@pytest.mark.parametrize(
    "x_shape,y_shape,match",
    [
        ((4, 4), (5, 3), r"Received: x.shape=\(4, 4\), y.shape=\(5, 3\)"),
        ((0, 4), (0, 3), r"Received: x.shape=\(0, 4\), y.shape=\(0, 3\)"),
    ],
    ids=["mismatched", "empty"],
)
def test_rejects_bad_batches(x_shape, y_shape, match):
    model, _ = _small_model()
    x = np.zeros(x_shape, "float32")
    y = np.zeros(y_shape, "float32")
    with pytest.raises(
        ValueError,
        match=r"Expected `x` and `y` to hold the same number of samples, at "
        r"least one .*" + match,
    ):
        diagnostics.activation_update_alignment(model, "dense_a", x, y, "mse")


@pytest.mark.parametrize(
    "learning_rate,error,match",
    [
        (
            0.0,
            ValueError,
            r"Expected a finite float > 0\. Received: "
            r"learning_rate=0\.0",
        ),
        (-1e-3, ValueError, r"Received: learning_rate=-0\.001"),
        (float("nan"), ValueError, r"Received: learning_rate=nan"),
        (float("inf"), ValueError, r"Received: learning_rate=inf"),
        (
            "0.1",
            TypeError,
            r"Expected a positive float\. Received: "
            r"learning_rate='0\.1'",
        ),
        (True, TypeError, r"Received: learning_rate=True"),
    ],
    ids=["zero", "negative", "nan", "inf", "string", "bool"],
)
def test_rejects_bad_learning_rates(learning_rate, error, match):
    model, _ = _small_model()
    x, y = _batch((4,), 2)
    with pytest.raises(error, match=match):
        diagnostics.activation_update_alignment(
            model, "dense_a", x, y, "mse", learning_rate=learning_rate
        )


def test_rejects_bad_losses():
    model, _ = _small_model()
    x, y = _batch((4,), 2)
    with pytest.raises(
        ValueError,
        match=r"Expected the name of a Keras loss.*Received: loss='nope'",
    ):
        diagnostics.activation_update_alignment(model, "dense_a", x, y, "nope")
    with pytest.raises(
        TypeError, match=r"Expected a loss name.*Received: loss=3"
    ):
        diagnostics.activation_update_alignment(model, "dense_a", x, y, 3)


def test_accepts_loss_objects_and_functions():
    model, layer = _small_model()
    x, y = _batch((4,), 3)
    by_name = _measure(model, layer, x, y)
    before = _snapshot(model)
    by_object = diagnostics.activation_update_alignment(
        model, layer, x, y, keras.losses.MeanSquaredError(reduction="sum")
    )
    by_function = diagnostics.activation_update_alignment(
        model, layer, x, y, keras.losses.mean_squared_error
    )
    _assert_bitwise_equal(before, model)
    # The scale of L cancels in `scale` and `cosine`.
    np.testing.assert_allclose(by_object.scale, by_name.scale, rtol=2e-3)
    np.testing.assert_allclose(by_function.scale, by_name.scale, rtol=2e-3)


def test_alignment_report_rejects_a_model_without_dense_or_conv_layers():
    model = keras.Sequential(
        [keras.Input((4,)), keras.layers.LayerNormalization(name="ln")]
    )
    x = np.ones((2, 4), "float32")
    with pytest.raises(
        ValueError,
        match=r"Expected a model with at least one trainable Dense-like, "
        r"Conv-like or EinsumDense-like layer\. Received: model with layers "
        r"\['ln'\]",
    ):
        diagnostics.alignment_report(model, x, x, "mse")
