import keras
import numpy as np
import pytest

from keras_affine_div.layers import AffineLikeDense
from tests import testing
from tests.layers import common
from tests.layers import reference


@pytest.mark.parametrize(
    "init_kwargs,input_shape,output_shape",
    [
        ({"units": 5}, (4, 3), (4, 5)),
        ({"units": 3, "activation": "tanh"}, (2, 6, 4), (2, 6, 3)),
        ({"units": 4, "use_bias": False}, (3, 7), (3, 4)),
        (
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
            (2, 2),
        ),
    ],
    ids=["basic", "rank3_tanh", "no_bias", "every_argument"],
)
def test_layer_contracts(init_kwargs, input_shape, output_shape, tmp_path):
    testing.run_layer_test(
        AffineLikeDense,
        init_kwargs,
        input_shape,
        output_shape,
        expected_num_trainable_weights=2
        if init_kwargs.get("use_bias", True)
        else 1,
        tmp_dir=tmp_path,
    )


@pytest.mark.parametrize("input_shape", [(5, 6), (2, 3, 6), (2, 2, 2, 6)])
def test_matches_numpy_reference(input_shape):
    rng = np.random.default_rng(1)
    x = (rng.standard_normal(input_shape) * 2).astype("float32")
    layer = AffineLikeDense(4)
    layer.build(input_shape)
    kernel = rng.standard_normal((6, 4)).astype("float32")
    bias = rng.standard_normal(4).astype("float32")
    layer.kernel.assign(kernel)
    layer.bias.assign(bias)
    np.testing.assert_allclose(
        testing.to_numpy(layer(x)),
        reference.affine_like_dense(x, kernel, bias),
        rtol=1e-5,
        atol=1e-5,
    )


def test_sgd_step_moves_activation_by_exactly_the_ideal_step():
    x = (np.random.default_rng(2).standard_normal((1, 9)) * 3).astype("float32")
    dz, g = common.sgd_activation_step(
        AffineLikeDense(5, bias_initializer="ones"), x, learning_rate=0.05
    )
    np.testing.assert_allclose(dz, -0.05 * g, rtol=1e-4, atol=1e-6)


def test_keras_dense_step_is_scaled_by_squared_norm_plus_one():
    # The affine divergence itself, as a check on the identity above.
    x = (np.random.default_rng(2).standard_normal((1, 9)) * 3).astype("float32")
    dz, g = common.sgd_activation_step(
        keras.layers.Dense(5), x, learning_rate=0.01
    )
    factor = float(np.sum(x.astype(np.float64) ** 2)) + 1.0
    assert factor > 20
    np.testing.assert_allclose(dz, -0.01 * factor * g, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("policy", ["float32", "mixed_float16"])
def test_zero_input_gives_finite_output_and_gradient(policy):
    layer = AffineLikeDense(4, bias_initializer="ones", dtype=policy)
    x = np.zeros((2, 8), "float32")
    y = testing.to_numpy(keras.ops.cast(layer(x), "float32"))
    np.testing.assert_allclose(y, np.ones((2, 4)), rtol=1e-3)
    grad = common.input_gradient(layer, x)
    assert grad.shape == x.shape
    assert np.all(np.isfinite(grad))
    assert np.any(grad != 0)


def test_huge_input_does_not_overflow_in_float16():
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((4, 1024)) * 300).astype("float32")
    assert np.all(np.sum(x.astype(np.float64) ** 2, axis=-1) > 65504 * 100)
    assert np.max(np.abs(x)) < 65504
    ref = AffineLikeDense(16, bias_initializer="random_normal")
    low = AffineLikeDense(16, dtype="mixed_float16")
    low.build(x.shape)
    ref.build(x.shape)
    for a, b in zip(low.weights, ref.weights):
        a.assign(b)
    y = testing.to_numpy(keras.ops.cast(low(x), "float32"))
    assert np.all(np.isfinite(y))
    np.testing.assert_allclose(y, testing.to_numpy(ref(x)), atol=2e-2)
    grad = common.input_gradient(low, x)
    assert np.all(np.isfinite(grad))


def test_default_initialisation_keeps_deep_stack_at_unit_scale():
    rms = common.last_preactivation_rms(
        lambda: AffineLikeDense(512), (256, 3072)
    )
    assert 0.2 < rms < 5, rms


def test_glorot_initialisation_would_vanish():
    # The bar above can fail: with a Glorot kernel the stack vanishes.
    rms = common.last_preactivation_rms(
        lambda: AffineLikeDense(512, kernel_initializer="glorot_normal"),
        (256, 3072),
    )
    assert rms < 0.2, rms


@pytest.mark.parametrize(
    "kwargs,error,match",
    [
        ({"units": 0}, ValueError, r"Expected a positive integer.*units=0"),
        ({"units": -3}, ValueError, r"units=-3"),
        ({"units": 2.5}, TypeError, r"positive integer.*units=2.5"),
        ({"units": "8"}, TypeError, r"units='8'"),
        ({"units": True}, TypeError, r"units=True"),
        ({"units": 4, "use_bias": "yes"}, TypeError, r"use_bias='yes'"),
        ({"units": 4, "activation": "nope"}, ValueError, r"nope"),
    ],
    ids=[
        "zero_units",
        "negative_units",
        "float_units",
        "string_units",
        "bool_units",
        "string_use_bias",
        "unknown_activation",
    ],
)
def test_bad_arguments_raise(kwargs, error, match):
    with pytest.raises(error, match=match):
        AffineLikeDense(**kwargs)


def test_rank_one_input_raises_with_shape():
    layer = AffineLikeDense(3)
    with pytest.raises(ValueError, match=r"rank >= 2.*input_shape=\(4,\)"):
        layer.build((4,))
    with pytest.raises(ValueError, match=r"min_ndim=2.*\(4,\)"):
        layer(np.ones((4,), "float32"))


def test_undefined_feature_axis_raises():
    with pytest.raises(ValueError, match=r"last axis.*\(2, None\)"):
        AffineLikeDense(3).build((2, None))


def test_changing_feature_count_after_build_raises():
    layer = AffineLikeDense(3)
    layer(np.ones((2, 4), "float32"))
    with pytest.raises(ValueError, match=r"axis -1.*value 4.*\(2, 5\)"):
        layer(np.ones((2, 5), "float32"))
