"""The layers train the same with and without `jit_compile=True`, and
export to a TensorFlow SavedModel.

On TensorFlow and PyTorch the squared norms take a custom-gradient path
outside XLA (`keras_affine_div._backend.squared_norm`) and the plain path
inside it; on JAX `jit_compile=True` is the default.
"""

import keras
import numpy as np
import pytest

from keras_affine_div import _backend
from keras_affine_div import layers
from tests import testing


def _model():
    return keras.Sequential(
        [
            keras.Input((6, 6, 4)),
            layers.PatchNormConv2D(4, 3, padding="same"),
            layers.AffineLikeConv2D(4, 3, groups=2),
            # (4, 4, 4) -> (4, 4): each row's (width, channels) contracted.
            layers.NormLikeEinsumDense(
                "abcd,cde->abe", (None, 4), bias_axes="e"
            ),
            layers.AffineLikeEinsumDense(
                "...c,cd->...d", 3, bias_axes="d", activation="tanh"
            ),
            keras.layers.Flatten(),
            layers.AffineLikeDense(5, activation="tanh"),
            layers.NormLikeDense(3),
        ]
    )


def _fit_and_predict(jit_compile):
    keras.utils.set_random_seed(0)
    model = _model()
    model.compile(optimizer="sgd", loss="mse", jit_compile=jit_compile)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, 6, 6, 4)).astype("float32")
    y = rng.standard_normal((8, 3)).astype("float32")
    history = model.fit(x, y, epochs=2, batch_size=4, verbose=0)
    return model, history.history["loss"], model.predict(x, verbose=0)


@pytest.mark.slow
def test_jit_compiled_training_matches_uncompiled():
    model, losses, predictions = _fit_and_predict(jit_compile=True)
    assert model.jit_compile
    ref_model, ref_losses, ref_predictions = _fit_and_predict(False)
    assert not ref_model.jit_compile
    assert losses[1] < losses[0]
    np.testing.assert_allclose(losses, ref_losses, rtol=1e-4)
    np.testing.assert_allclose(predictions, ref_predictions, atol=1e-4)


@pytest.mark.requires_backend("tensorflow")
def test_tensorflow_xla_context_is_detected():
    import tensorflow as tf

    assert not _backend._in_tensorflow_xla_context()
    seen = {}

    @tf.function(jit_compile=True)
    def compiled(x):
        seen["xla"] = _backend._in_tensorflow_xla_context()
        return _backend.squared_norm(x)

    @tf.function
    def traced(x):
        seen["graph"] = _backend._in_tensorflow_xla_context()
        return _backend.squared_norm(x)

    x = tf.constant([[3.0, 4.0]])
    np.testing.assert_allclose(testing.to_numpy(compiled(x)), [[25.0]])
    np.testing.assert_allclose(testing.to_numpy(traced(x)), [[25.0]])
    assert seen == {"xla": True, "graph": False}


@pytest.mark.requires_backend("tensorflow")
def test_exported_saved_model_serves_the_same_outputs(tmp_path):
    import tensorflow as tf

    keras.utils.set_random_seed(0)
    model = _model()
    x = np.random.default_rng(1).standard_normal((2, 6, 6, 4))
    x = x.astype("float32")
    model.export(str(tmp_path / "saved_model"), verbose=False)
    loaded = tf.saved_model.load(str(tmp_path / "saved_model"))
    served = loaded.serve(x)
    np.testing.assert_allclose(
        served.numpy(), model.predict(x, verbose=0), rtol=1e-6, atol=1e-6
    )
