import re

import keras
import numpy as np
import pytest

from keras_affine_div.layers import AffineLikeEinsumDense
from tests import testing
from tests.layers import common

CASES = {name: (kwargs, shape) for name, kwargs, shape in common.EINSUM_CASES}
# The cases whose bias has its own entry for every output axis the kernel
# adds: the exact identity holds for one position.
FULL_BIAS = [
    name for name in CASES if name not in ("shared_bias_not_last", "no_bias")
]


def _one_position(input_shape, equation):
    """One sample with one position along each kept axis.

    The axes of the input that the kernel does not multiply (the batch and
    the token axes) get size 1; the kernel's own axes keep their size.
    """
    inputs = equation.split(",")[0].replace("...", "")
    kernel = equation.split(",")[1].split("->")[0]
    if equation.startswith("..."):
        letters = "." * (len(input_shape) - len(inputs)) + inputs
    else:
        letters = inputs + "." * (len(input_shape) - len(inputs))
    return tuple(n if c in kernel else 1 for c, n in zip(letters, input_shape))


@pytest.mark.parametrize(
    "name,kwargs,input_shape", common.EINSUM_CASES, ids=common.EINSUM_IDS
)
def test_matches_numpy_reference(name, kwargs, input_shape):
    common.assert_einsum_matches_reference(
        AffineLikeEinsumDense, kwargs, input_shape
    )


@pytest.mark.parametrize(
    "name,kwargs,input_shape", common.EINSUM_CASES, ids=common.EINSUM_IDS
)
def test_shapes_are_those_of_keras_einsum_dense(name, kwargs, input_shape):
    x = np.ones(input_shape, "float32")
    theirs = keras.layers.EinsumDense(**kwargs)
    y = theirs(x)
    ours = AffineLikeEinsumDense(**kwargs)
    assert tuple(ours(x).shape) == tuple(y.shape)
    assert tuple(ours.compute_output_shape(input_shape)) == tuple(y.shape)
    assert tuple(ours.kernel.shape) == tuple(theirs.kernel.shape)
    if theirs.bias is None:
        assert ours.bias is None and not ours.use_bias
    else:
        assert tuple(ours.bias.shape) == tuple(theirs.bias.shape)
    # A batch of unknown size.
    symbolic = AffineLikeEinsumDense(**kwargs)(
        keras.KerasTensor((None,) + input_shape[1:])
    )
    assert tuple(symbolic.shape) == (None,) + tuple(y.shape)[1:]


@pytest.mark.parametrize("name", FULL_BIAS)
def test_sgd_step_of_one_position_is_exactly_the_ideal_step(name):
    kwargs, input_shape = CASES[name]
    shape = _one_position(input_shape, kwargs["equation"])
    x = (np.random.default_rng(2).standard_normal(shape) * 3).astype("float32")
    layer = AffineLikeEinsumDense(**kwargs, bias_initializer="ones")
    dz, g = common.sgd_activation_step(layer, x, learning_rate=0.05)
    np.testing.assert_allclose(dz, -0.05 * g, rtol=1e-4, atol=1e-6)


def test_kernel_per_position_is_exact_for_every_position():
    # Positions along an axis of the kernel do not share it: no cross term.
    kwargs, input_shape = CASES["kernel_per_position"]
    x = np.random.default_rng(2).standard_normal((1,) + input_shape[1:])
    dz, g = common.sgd_activation_step(
        AffineLikeEinsumDense(**kwargs), x.astype("float32"), 0.05
    )
    assert x.shape[1] > 1
    np.testing.assert_allclose(dz, -0.05 * g, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize(
    "equation,output_shape,bias_axes,input_shape",
    [
        ("abc,cde->abde", (None, 2, 3), "de", (1, 4, 5)),
        ("abcd,cde->abe", (None, 3), "e", (1, 3, 2, 4)),
    ],
    ids=["attention_qkv", "attention_output"],
)
def test_positions_of_one_sample_add_the_cross_terms_of_a_batch(
    equation, output_shape, bias_axes, input_shape
):
    # dz_t = -eta sum_s (x_s . x_t + 1) / (n_s n_t) g_s: the diagonal is 1.
    rng = np.random.default_rng(3)
    x = (rng.standard_normal(input_shape) * 2).astype("float32")
    layer = AffineLikeEinsumDense(equation, output_shape, bias_axes=bias_axes)
    dz, g = common.sgd_activation_step(layer, x, learning_rate=0.05)
    tokens = x[0].reshape(input_shape[1], -1).astype(np.float64)
    augmented = np.concatenate([tokens, np.ones((len(tokens), 1))], axis=1)
    unit = augmented / np.linalg.norm(augmented, axis=1, keepdims=True)
    cosines = unit @ unit.T
    np.testing.assert_allclose(np.diag(cosines), 1.0)
    assert np.abs(cosines - np.eye(len(tokens))).max() > 0.1
    g_tokens = g[0].reshape(input_shape[1], -1)
    expected = -0.05 * cosines @ g_tokens
    np.testing.assert_allclose(
        dz[0].reshape(input_shape[1], -1), expected, rtol=1e-4, atol=1e-6
    )


def test_sgd_step_without_bias_is_scaled_by_norm_fraction():
    kwargs, _ = CASES["no_bias"]
    x = (np.random.default_rng(4).standard_normal((1, 1, 2, 4))).astype(
        "float32"
    )
    dz, g = common.sgd_activation_step(AffineLikeEinsumDense(**kwargs), x)
    sq = float(np.sum(x.astype(np.float64) ** 2))
    np.testing.assert_allclose(
        dz, -0.05 * sq / (sq + 1.0) * g, rtol=1e-4, atol=1e-6
    )


def test_bias_shared_along_a_kernel_axis_couples_its_outputs():
    # bias_axes="d" for outputs (d, e): the bias step of (d, e) is the sum
    # of the gradients over e.
    kwargs, _ = CASES["shared_bias_not_last"]
    x = (np.random.default_rng(5).standard_normal((1, 1, 4)) * 2).astype(
        "float32"
    )
    dz, g = common.sgd_activation_step(AffineLikeEinsumDense(**kwargs), x)
    sq = float(np.sum(x.astype(np.float64) ** 2))
    shared = np.sum(g, axis=-1, keepdims=True)
    expected = -0.05 * (sq * g + shared) / (sq + 1.0)
    np.testing.assert_allclose(dz, expected, rtol=1e-4, atol=1e-6)


def test_keras_einsum_dense_step_is_scaled_by_squared_norm_plus_one():
    # The affine divergence of the output projection, with x_c over (c, d).
    kwargs, _ = CASES["attention_output"]
    x = (np.random.default_rng(2).standard_normal((1, 1, 2, 4)) * 3).astype(
        "float32"
    )
    dz, g = common.sgd_activation_step(
        keras.layers.EinsumDense(**kwargs), x, learning_rate=0.01
    )
    factor = float(np.sum(x.astype(np.float64) ** 2)) + 1.0
    assert factor > 20
    np.testing.assert_allclose(dz, -0.01 * factor * g, rtol=1e-4, atol=1e-6)


def test_variance_scaling_initializer_gets_the_einsum_fans():
    theirs = keras.layers.EinsumDense(
        "abc,cde->abde",
        (None, 4, 16),
        kernel_initializer=keras.initializers.GlorotUniform(seed=7),
    )
    if "input_axes" not in theirs.kernel_initializer.get_config():
        pytest.skip("this Keras has no `input_axes` for VarianceScaling")
    ours = AffineLikeEinsumDense(
        "abc,cde->abde",
        (None, 4, 16),
        kernel_initializer=keras.initializers.GlorotUniform(seed=7),
    )
    theirs.build((2, 3, 64))
    ours.build((2, 3, 64))
    testing.TestCase().assertAllEqual(ours.kernel, theirs.kernel)
    # The stored initialiser is the one given.
    config = ours.get_config()["kernel_initializer"]["config"]
    assert config["input_axes"] is None


def test_every_key_of_an_einsum_dense_config_builds_the_layer():
    theirs = keras.layers.EinsumDense(
        "abc,cde->abde",
        (None, 2, 3),
        bias_axes="de",
        activation="relu",
        activity_regularizer="l2",
        lora_rank=2,
        name="query",
    )
    config = theirs.get_config()
    ours = AffineLikeEinsumDense.from_config(config)
    # Every key but `quantization_config`, which can only be `None`.
    assert set(config) - set(ours.get_config()) == {"quantization_config"}
    for key in ("equation", "bias_axes", "lora_rank", "lora_alpha", "name"):
        assert ours.get_config()[key] == config[key], key
    assert tuple(ours.get_config()["output_shape"]) == (None, 2, 3)
    ours.build((2, 3, 4))
    assert ours.lora_enabled


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (
            {"quantization_config": {"mode": "int8"}},
            r"do not implement quantization.*Received: "
            r"quantization_config=\{'mode': 'int8'\}$",
        ),
        (
            {"gptq_unpacked_column_size": 4},
            r"do not implement quantization.*`EinsumDense` config\) must be "
            r"None\. Received: gptq_unpacked_column_size=4$",
        ),
        (
            {"dtype": "int8_from_float32"},
            r"do not implement quantization.*Received: dtype=.*"
            r"int8_from_float32",
        ),
    ],
    ids=["quantization_config", "gptq", "quantized_policy"],
)
def test_quantization_raises_instead_of_being_dropped(kwargs, match):
    with pytest.raises(ValueError, match=match):
        AffineLikeEinsumDense("abc,cd->abd", (None, 3), **kwargs)


def test_quantize_raises():
    layer = AffineLikeEinsumDense("abc,cd->abd", (None, 3))
    layer.build((2, 3, 4))
    with pytest.raises(NotImplementedError, match=r"quantize"):
        layer.quantize("int8")


@pytest.mark.parametrize(
    "equation,output_shape,input_shape,match",
    [
        (
            "abc,cd->abd",
            (None, 3),
            (2, 4),
            r"Layer `bad` expects inputs of rank 3, one axis per letter of "
            r"the input spec 'abc'\. Received: input_shape=\(2, 4\)$",
        ),
        (
            "...c,cd->...d",
            3,
            (4,),
            r"rank > 1 \(the batch axis is in '\.\.\.'\).*"
            r"input_shape=\(4,\)$",
        ),
        (
            "abc,cd->abd",
            (None, 3),
            (2, 5, None),
            r"needs the size of axis 'c'.*input_shape=\(2, 5, None\), "
            r"output_shape=\(None, 3\)$",
        ),
        (
            "abc,cd->abd",
            (4, 3),
            (2, 5, 6),
            r"disagree on the size of axis 'b'.*input_shape=\(2, 5, 6\), "
            r"output_shape=\(4, 3\)$",
        ),
        (
            "abc,cde->abde",
            (None, None, 3),
            (2, 5, 6),
            r"needs the size of axis 'd'",
        ),
    ],
    ids=[
        "rank",
        "ellipsis_without_batch",
        "undefined_contracted",
        "disagreeing",
        "undefined_output",
    ],
)
def test_input_shapes_that_do_not_fit_raise(
    equation, output_shape, input_shape, match
):
    layer = AffineLikeEinsumDense(equation, output_shape, name="bad")
    with pytest.raises(ValueError, match=match):
        layer.compute_output_shape(input_shape)
    with pytest.raises(ValueError, match=match):
        layer.build(input_shape)


def test_changing_feature_count_after_build_raises():
    layer = AffineLikeEinsumDense("abcd,cde->abe", (None, 3))
    layer(np.ones((2, 5, 2, 4), "float32"))
    with pytest.raises(ValueError, match=re.escape("(2, 5, 2, 6)")):
        layer(np.ones((2, 5, 2, 6), "float32"))
    # Another number of tokens is fine.
    assert tuple(layer(np.ones((1, 7, 2, 4), "float32")).shape) == (1, 7, 3)


def test_config_of_a_keras_einsum_dense_warns_of_its_glorot_kernel():
    config = keras.layers.EinsumDense("abc,cd->abd", (None, 3)).get_config()
    with pytest.warns(UserWarning, match=r"from_config.*GlorotUniform"):
        layer = AffineLikeEinsumDense.from_config(config)
    assert isinstance(
        layer.kernel_initializer, keras.initializers.GlorotUniform
    )
