import keras
import numpy as np
import pytest

from keras_affine_div.layers import NormLikeEinsumDense
from tests import testing
from tests.layers import common

CASES = {name: (kwargs, shape) for name, kwargs, shape in common.EINSUM_CASES}


@pytest.mark.parametrize(
    "name,kwargs,input_shape", common.EINSUM_CASES, ids=common.EINSUM_IDS
)
def test_matches_numpy_reference(name, kwargs, input_shape):
    common.assert_einsum_matches_reference(
        NormLikeEinsumDense, kwargs, input_shape
    )


@pytest.mark.parametrize("epsilon", [1e-3, 0.7])
def test_matches_numpy_reference_with_epsilon(epsilon):
    kwargs, input_shape = CASES["attention_output"]
    common.assert_einsum_matches_reference(
        NormLikeEinsumDense, {**kwargs, "epsilon": epsilon}, input_shape
    )


@pytest.mark.parametrize("epsilon", [1e-3, 2.0])
@pytest.mark.parametrize(
    "name,input_shape",
    [("attention_qkv", (1, 1, 9)), ("attention_output", (1, 1, 3, 4))],
)
def test_sgd_step_is_one_plus_normalised_square_norm(
    name, input_shape, epsilon
):
    kwargs, _ = CASES[name]
    x = np.random.default_rng(2).standard_normal(input_shape)
    x = x.astype("float32")
    dz, g = common.sgd_activation_step(
        NormLikeEinsumDense(**kwargs, epsilon=epsilon), x, learning_rate=0.05
    )
    sq = float(np.sum(x.astype(np.float64) ** 2))
    factor = 1.0 + sq / (sq + epsilon)
    np.testing.assert_allclose(dz, -0.05 * factor * g, rtol=1e-4, atol=1e-6)


def test_each_position_is_scale_invariant():
    # Scaling each token by its own factor leaves every output unchanged.
    kwargs, _ = CASES["attention_output"]
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 5, 2, 4)).astype("float32")
    factors = rng.uniform(0.1, 50.0, (2, 5, 1, 1)).astype("float32")
    layer = NormLikeEinsumDense(**kwargs, epsilon=1e-6)
    np.testing.assert_allclose(
        testing.to_numpy(layer(x)),
        testing.to_numpy(layer(factors * x)),
        rtol=1e-4,
        atol=1e-5,
    )


def test_config_round_trip_keeps_epsilon():
    layer = NormLikeEinsumDense("abc,cd->abd", (None, 3), epsilon=0.25)
    revived = NormLikeEinsumDense.from_config(layer.get_config())
    assert revived.epsilon == 0.25
    assert "use_bias" not in layer.get_config()
    keras_config = keras.layers.EinsumDense("abc,cd->abd", (None, 3))
    missing = set(keras_config.get_config()) - set(layer.get_config())
    assert missing == {"quantization_config"}
