import numpy as np
import pytest

from keras_affine_div.layers import NormLikeDense
from tests import testing
from tests.layers import common
from tests.layers import reference


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


def test_wrong_rank_and_changed_features_raise():
    with pytest.raises(ValueError, match=r"rank >= 2.*input_shape=\(4,\)"):
        NormLikeDense(3).build((4,))
    layer = NormLikeDense(3)
    layer(np.ones((2, 4), "float32"))
    with pytest.raises(ValueError, match=r"axis -1.*value 4.*\(2, 6\)"):
        layer(np.ones((2, 6), "float32"))
