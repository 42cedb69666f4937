import keras
import numpy as np
import pytest

from keras_affine_div.layers import AffineLikeDense
from tests import testing
from tests.layers import common
from tests.layers import reference


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


def test_glorot_initialisation_would_vanish():
    # The bar of the deep-stack contract (`layer_contracts_test`) can fail:
    # with a Glorot kernel the stack vanishes.
    rms = common.last_preactivation_rms(
        lambda: AffineLikeDense(512, kernel_initializer="glorot_normal"),
        (256, 3072),
    )
    assert rms < 0.2, rms


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
