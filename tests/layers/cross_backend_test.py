"""A `.keras` file saved on one backend loads on another, same outputs.

Each pass saves and loads on the next backend of `BACKENDS`, round the
cycle (tensorflow -> jax -> torch -> tensorflow): every backend's file is
read by another, and every backend reads another's.
"""

import os
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest

from conftest import BACKENDS
from keras_affine_div import layers
from tests.testing import to_numpy

_LOAD_SCRIPT = textwrap.dedent(
    """
    import sys
    import numpy as np
    import keras
    import keras_affine_div  # noqa: F401 (registers the layers)

    model_path, x_path, y_path = sys.argv[1:4]
    model = keras.saving.load_model(model_path)
    y = keras.ops.convert_to_numpy(model(np.load(x_path)))
    expected = np.load(y_path)
    np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-5)
    print("loaded on", keras.backend.backend(), "max abs diff",
          float(np.max(np.abs(y - expected))))
    """
)


def _model_with_every_layer():
    inputs = keras.Input((10, 10, 4))
    h = layers.PatchNormConv2D(6, 3, padding="same", activation="relu")(inputs)
    h = layers.AffineLikeConv2D(6, 3, strides=2, groups=2, activation="tanh")(h)
    h = layers.AffineLikeEinsumDense(
        "abcd,de->abce", (4, 4, 5), bias_axes="e", activation="tanh"
    )(h)
    h = layers.NormLikeEinsumDense(
        "abcd,cde->abe", (None, 3), bias_axes="e", epsilon=0.05
    )(h)
    h = keras.layers.Flatten()(h)
    h = layers.NormLikeDense(8, epsilon=0.01, activation="tanh")(h)
    outputs = layers.AffineLikeDense(3, bias_initializer="random_normal")(h)
    return keras.Model(inputs, outputs)


@pytest.mark.slow
@pytest.mark.parametrize("target", BACKENDS)
def test_saved_model_loads_on_other_backends(target, tmp_path):
    source = keras.backend.backend()
    if target == source:
        pytest.skip("same backend: covered by the save/reload tests")
    if target != BACKENDS[(BACKENDS.index(source) + 1) % len(BACKENDS)]:
        pytest.skip(f"{target} reads the file of the backend before it")
    model = _model_with_every_layer()
    x = np.random.default_rng(0).standard_normal((3, 10, 10, 4))
    x = x.astype("float32")
    model_path = os.path.join(tmp_path, "model.keras")
    model.save(model_path)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", to_numpy(model(x)))
    env = {
        **os.environ,
        "KERAS_BACKEND": target,
        "OMP_NUM_THREADS": "1",
        "TF_CPP_MIN_LOG_LEVEL": "2",
        "CUDA_VISIBLE_DEVICES": "",
    }
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            _LOAD_SCRIPT,
            model_path,
            str(tmp_path / "x.npy"),
            str(tmp_path / "y.npy"),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"loaded on {target}" in result.stdout
