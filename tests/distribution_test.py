"""The package's layers train under `keras.distribution` on JAX.

On 4 simulated CPU devices (`XLA_FLAGS=
--xla_force_host_platform_device_count=4`, set before JAX is imported, so
in a fresh process), a model with every kind of layer of the package
trains two SGD steps under `DataParallel` (the batch split over the
devices) and under `ModelParallel` (the kernels sharded over a 2 x 2 mesh)
and ends with the weights one device gives.
"""

import os
import subprocess
import sys
import textwrap

import pytest

_SCRIPT = textwrap.dedent(
    """
    import sys
    import numpy as np
    import keras
    import jax
    from keras_affine_div import layers

    assert len(jax.devices()) == 4, jax.devices()
    mode = sys.argv[1]

    def build():
        keras.utils.set_random_seed(0)
        inputs = keras.Input((8, 8, 4))
        h = layers.AffineLikeConv2D(8, 3, padding="same", name="conv")(inputs)
        h = layers.PatchNormConv2D(8, 3, padding="same", name="patch")(h)
        h = keras.layers.Reshape((64, 8))(h)
        h = layers.AffineLikeMultiHeadAttention(2, 4, name="mha")(h, h)
        h = layers.NormLikeEinsumDense(
            "abc,cd->abd", (64, 8), bias_axes="d", name="einsum"
        )(h)
        h = keras.layers.GlobalAveragePooling1D()(h)
        h = layers.NormLikeDense(16, activation="tanh", name="norm_like")(h)
        outputs = layers.AffineLikeDense(4, name="affine_like")(h)
        model = keras.Model(inputs, outputs)
        model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
        return model

    rng = np.random.default_rng(0)
    x = rng.standard_normal((16, 8, 8, 4)).astype("float32")
    y = rng.standard_normal((16, 4)).astype("float32")

    def train():
        model = build()
        model.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)
        return model

    single = [w.copy() for w in train().get_weights()]
    devices = keras.distribution.list_devices()
    if mode == "data":
        distribution = keras.distribution.DataParallel(devices=devices)
    else:
        mesh = keras.distribution.DeviceMesh(
            (2, 2), ["batch", "model"], devices=devices
        )
        layout_map = keras.distribution.LayoutMap(mesh)
        layout_map["conv/kernel"] = (None, None, None, "model")
        layout_map["patch/kernel"] = (None, None, None, "model")
        layout_map["mha/.*/kernel"] = (None, "model", None)
        layout_map["einsum/kernel"] = (None, "model")
        layout_map["norm_like/kernel"] = (None, "model")
        layout_map["affine_like/kernel"] = ("model", None)
        distribution = keras.distribution.ModelParallel(
            layout_map=layout_map, batch_dim_name="batch"
        )
    keras.distribution.set_distribution(distribution)
    model = train()
    sharded = [
        w for w in model.weights
        if len(w.value.sharding.device_set) > 1
    ]
    if mode == "model":
        split = [
            w.path for w in model.weights
            if not w.value.sharding.is_fully_replicated
        ]
        assert len(split) >= 8, split
    for ours, one in zip(model.get_weights(), single):
        np.testing.assert_allclose(ours, one, rtol=1e-4, atol=1e-5)
    print("ok", mode, len(sharded), "of", len(model.weights), "on 4 devices")
    """
)


@pytest.mark.slow
@pytest.mark.requires_backend("jax")
@pytest.mark.parametrize("mode", ["data", "model"])
def test_trains_as_on_one_device(mode):
    env = {
        **os.environ,
        "KERAS_BACKEND": "jax",
        "XLA_FLAGS": "--xla_force_host_platform_device_count=4",
        "TF_CPP_MIN_LOG_LEVEL": "2",
    }
    result = subprocess.run(
        [sys.executable, "-c", _SCRIPT, mode],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"ok {mode}" in result.stdout, result.stdout
