"""A small layer-test harness (Keras' own, `keras.src.testing`, is private).

`run_layer_test` puts a layer through the contracts every Keras layer keeps:
config round trip, build, symbolic call, eager call, one `fit` step, the
mixed and low-precision dtype policies, and `.keras` save and reload.
"""

import inspect
import os

import keras
import numpy as np

# The CIFAR-10 copy shared by the project's machines (see DESIGN.md, Data):
# `../shared/datasets/cifar10-jpeg` next to the repository, wherever it is
# cloned, unless KERAS_AFFINE_DIV_CIFAR10_DIR names another copy.
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CIFAR10_JPEG_COPY = os.environ.get("KERAS_AFFINE_DIV_CIFAR10_DIR") or (
    os.path.join(
        os.path.dirname(REPO_ROOT), "shared", "datasets", "cifar10-jpeg"
    )
)

POLICIES = {
    # policy: (compute dtype, variable dtype, relative tolerance vs float32)
    "mixed_float16": ("float16", "float32", 2e-2),
    "mixed_bfloat16": ("bfloat16", "float32", 6e-2),
    "bfloat16": ("bfloat16", "bfloat16", 6e-2),
}


def to_numpy(x):
    return np.asarray(keras.ops.convert_to_numpy(x))


def assert_config_round_trip(layer_cls, init_kwargs):
    """Every constructor argument is in `get_config`, and back again."""
    layer = layer_cls(**init_kwargs)
    config = layer.get_config()
    params = [
        name
        for name, p in inspect.signature(layer_cls.__init__).parameters.items()
        if name != "self" and p.kind is not p.VAR_KEYWORD
    ]
    missing = [name for name in params if name not in config]
    assert not missing, f"get_config lacks constructor arguments {missing}"
    for name, value in init_kwargs.items():
        if name in ("dtype", "name") or not isinstance(
            value, (int, float, str, bool)
        ):
            continue
        stored = config[name]
        if isinstance(stored, dict):
            # A serialized object (initializer, regularizer, ...): checked
            # by the round trip below.
            continue
        if isinstance(stored, tuple):
            expected = (
                value if isinstance(value, tuple) else (value,) * len(stored)
            )
            assert stored == tuple(expected), (name, stored, value)
        else:
            assert stored == value, (name, stored, value)
    revived = layer_cls.from_config(config)
    assert revived.get_config() == config
    serialized = keras.saving.serialize_keras_object(layer)
    revived = keras.saving.deserialize_keras_object(serialized)
    assert type(revived) is layer_cls
    assert revived.get_config() == config


def run_layer_test(
    layer_cls,
    init_kwargs,
    input_shape,
    expected_output_shape,
    expected_num_trainable_weights=2,
    tmp_dir=None,
    run_policies=True,
):
    """Runs a layer through every Keras contract; raises on the first miss.

    Args:
        layer_cls: the layer class.
        init_kwargs: dict, constructor arguments.
        input_shape: tuple, a concrete input shape (batch included).
        expected_output_shape: tuple, the output shape for that input.
        expected_num_trainable_weights: int.
        tmp_dir: a directory for the `.keras` file (save/reload is skipped
            when `None`).
        run_policies: whether to run the mixed/low-precision policies.
    """
    rng = np.random.default_rng(0)
    x = rng.standard_normal(input_shape).astype("float32")

    assert_config_round_trip(layer_cls, init_kwargs)

    # Build.
    layer = layer_cls(**init_kwargs)
    layer.build(input_shape)
    assert layer.built
    assert len(layer.trainable_weights) == expected_num_trainable_weights
    assert len(layer.non_trainable_weights) == 0
    assert {w.path.split("/")[-1] for w in layer.weights} <= {"kernel", "bias"}

    # Symbolic call against compute_output_shape.
    layer = layer_cls(**init_kwargs)
    symbolic = layer(keras.KerasTensor(input_shape))
    assert tuple(symbolic.shape) == tuple(expected_output_shape)
    assert tuple(layer.compute_output_shape(input_shape)) == tuple(
        expected_output_shape
    )
    symbolic = layer_cls(**init_kwargs)(
        keras.KerasTensor((None,) + tuple(input_shape[1:]))
    )
    assert tuple(symbolic.shape) == (None,) + tuple(expected_output_shape[1:])

    # Eager call.
    layer = layer_cls(**init_kwargs)
    y = to_numpy(layer(x))
    assert y.shape == tuple(expected_output_shape)
    assert y.dtype == np.float32
    assert np.all(np.isfinite(y))
    reference = y

    # One fit step, compiled where the backend can.
    inputs = keras.Input(input_shape[1:])
    model = keras.Model(inputs, layer_cls(**init_kwargs)(inputs))
    model.compile(
        optimizer=keras.optimizers.SGD(0.1),
        loss="mse",
        jit_compile="auto",
    )
    before = [to_numpy(w) for w in model.trainable_weights]
    target = rng.standard_normal(expected_output_shape).astype("float32")
    history = model.fit(
        x, target, batch_size=input_shape[0], epochs=1, verbose=0
    )
    assert np.isfinite(history.history["loss"][0])
    after = [to_numpy(w) for w in model.trainable_weights]
    assert all(not np.array_equal(a, b) for a, b in zip(before, after))

    # Also inside a Sequential model.
    seq = keras.Sequential(
        [keras.Input(input_shape[1:]), layer_cls(**init_kwargs)]
    )
    assert tuple(seq(x).shape) == tuple(expected_output_shape)

    # Dtype policies: weights, output dtype, values close to float32.
    if run_policies:
        for policy, (compute, variable, rtol) in POLICIES.items():
            low = layer_cls(**{**init_kwargs, "dtype": policy})
            low.build(input_shape)
            for w_low, w in zip(low.weights, layer.weights):
                assert w_low.dtype == variable, (policy, w_low.dtype)
                w_low.assign(keras.ops.cast(w, variable))
            out = low(x)
            assert keras.backend.standardize_dtype(out.dtype) == compute, (
                policy,
                out.dtype,
            )
            out = to_numpy(keras.ops.cast(out, "float32"))
            assert np.all(np.isfinite(out)), policy
            scale = np.max(np.abs(reference)) + 1e-6
            np.testing.assert_allclose(
                out, reference, atol=rtol * scale, err_msg=policy
            )

    # Save and reload.
    if tmp_dir is not None:
        path = os.path.join(str(tmp_dir), "model.keras")
        model.save(path)
        loaded = keras.saving.load_model(path)
        np.testing.assert_array_equal(to_numpy(loaded(x)), to_numpy(model(x)))
        assert loaded.layers[-1].get_config() == model.layers[-1].get_config()
