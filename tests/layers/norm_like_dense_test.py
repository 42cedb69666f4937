import keras
import numpy as np
import pytest

from keras_affine_div.layers import NormLikeDense
from tests import testing
from tests.layers import common
from tests.layers import reference


@pytest.mark.parametrize(
    "init_kwargs,input_shape,output_shape",
    [
        ({"units": 5}, (4, 3), (4, 5)),
        (
            {"units": 3, "epsilon": 0.5, "activation": "relu"},
            (2, 6, 4),
            (2, 6, 3),
        ),
        ({"units": 4, "use_bias": False}, (3, 7), (3, 4)),
        (
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
            (2, 2),
        ),
    ],
    ids=["basic", "rank3_relu_eps", "no_bias", "every_argument"],
)
def test_layer_contracts(init_kwargs, input_shape, output_shape, tmp_path):
    testing.run_layer_test(
        NormLikeDense,
        init_kwargs,
        input_shape,
        output_shape,
        expected_num_trainable_weights=2
        if init_kwargs.get("use_bias", True)
        else 1,
        tmp_dir=tmp_path,
    )


@pytest.mark.parametrize("epsilon", [1e-3, 0.7])
@pytest.mark.parametrize("input_shape", [(5, 6), (2, 3, 6)])
def test_matches_numpy_reference(input_shape, epsilon):
    rng = np.random.default_rng(1)
    x = (rng.standard_normal(input_shape) * 0.5).astype("float32")
    layer = NormLikeDense(4, epsilon=epsilon)
    layer.build(input_shape)
    kernel = rng.standard_normal((6, 4)).astype("float32")
    bias = rng.standard_normal(4).astype("float32")
    layer.kernel.assign(kernel)
    layer.bias.assign(bias)
    np.testing.assert_allclose(
        testing.to_numpy(layer(x)),
        reference.norm_like_dense(x, kernel, bias, epsilon),
        rtol=1e-5,
        atol=1e-5,
    )


@pytest.mark.parametrize("epsilon", [1e-3, 2.0])
def test_sgd_step_is_one_plus_normalised_square_norm(epsilon):
    x = np.random.default_rng(2).standard_normal((1, 9)).astype("float32")
    dz, g = common.sgd_activation_step(
        NormLikeDense(5, epsilon=epsilon), x, learning_rate=0.05
    )
    sq = float(np.sum(x.astype(np.float64) ** 2))
    factor = 1.0 + sq / (sq + epsilon)
    np.testing.assert_allclose(dz, -0.05 * factor * g, rtol=1e-4, atol=1e-6)


def test_scale_invariance():
    x = np.random.default_rng(3).standard_normal((4, 10)).astype("float32")
    layer = NormLikeDense(3, epsilon=1e-6)
    np.testing.assert_allclose(
        testing.to_numpy(layer(x)),
        testing.to_numpy(layer(50.0 * x)),
        rtol=1e-4,
        atol=1e-5,
    )


@pytest.mark.parametrize("policy", ["float32", "mixed_float16"])
def test_zero_input_gives_finite_output_and_gradient(policy):
    layer = NormLikeDense(4, bias_initializer="ones", dtype=policy)
    x = np.zeros((2, 8), "float32")
    y = testing.to_numpy(keras.ops.cast(layer(x), "float32"))
    np.testing.assert_allclose(y, np.ones((2, 4)), rtol=1e-3)
    grad = common.input_gradient(layer, x)
    assert np.all(np.isfinite(grad))
    # d(x / sqrt(|x|^2 + eps))/dx = I / sqrt(eps) at x = 0.
    assert np.max(np.abs(grad)) > 1.0


def test_huge_input_does_not_overflow_in_float16():
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((4, 1024)) * 300).astype("float32")
    assert np.all(np.sum(x.astype(np.float64) ** 2, axis=-1) > 65504 * 100)
    ref = NormLikeDense(16, bias_initializer="random_normal")
    low = NormLikeDense(16, dtype="mixed_float16")
    ref.build(x.shape)
    low.build(x.shape)
    for a, b in zip(low.weights, ref.weights):
        a.assign(b)
    y = testing.to_numpy(keras.ops.cast(low(x), "float32"))
    assert np.all(np.isfinite(y))
    np.testing.assert_allclose(y, testing.to_numpy(ref(x)), atol=2e-2)
    assert np.all(np.isfinite(common.input_gradient(low, x)))


def test_default_initialisation_keeps_deep_stack_at_unit_scale():
    rms = common.last_preactivation_rms(lambda: NormLikeDense(512), (256, 3072))
    assert 0.2 < rms < 5, rms


@pytest.mark.parametrize(
    "kwargs,error,match",
    [
        ({"units": 0}, ValueError, r"positive integer.*units=0"),
        ({"units": 1.5}, TypeError, r"units=1.5"),
        ({"units": None}, TypeError, r"units=None"),
        ({"units": 4, "epsilon": 0.0}, ValueError, r"> 0.*epsilon=0.0"),
        ({"units": 4, "epsilon": -1e-3}, ValueError, r"epsilon=-0.001"),
        ({"units": 4, "epsilon": float("nan")}, ValueError, r"epsilon=nan"),
        ({"units": 4, "epsilon": "small"}, TypeError, r"epsilon='small'"),
    ],
    ids=[
        "zero_units",
        "float_units",
        "none_units",
        "zero_epsilon",
        "negative_epsilon",
        "nan_epsilon",
        "string_epsilon",
    ],
)
def test_bad_arguments_raise(kwargs, error, match):
    with pytest.raises(error, match=match):
        NormLikeDense(**kwargs)


def test_wrong_rank_and_changed_features_raise():
    with pytest.raises(ValueError, match=r"rank >= 2.*input_shape=\(4,\)"):
        NormLikeDense(3).build((4,))
    layer = NormLikeDense(3)
    layer(np.ones((2, 4), "float32"))
    with pytest.raises(ValueError, match=r"axis -1.*value 4.*\(2, 6\)"):
        layer(np.ones((2, 6), "float32"))
