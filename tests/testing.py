"""The layer-test harness, shaped as keras-hub's `TestCase`.

Keras' own harness (`keras.src.testing.TestCase`) is private, so this is a
small one of our own. `TestCase.run_layer_test` puts a layer through the
contracts every Keras layer keeps; its parts run alone as well:
`run_serialization_test` (config, JSON and Keras serialization round trips),
`run_precision_test` (the mixed and low-precision dtype policies) and
`run_model_saving_test` (`.keras` save and reload).
"""

import inspect
import json
import os
import tempfile

import keras
import numpy as np

from tuning import provenance

# The CIFAR-10 copy shared by the project's machines (README.md, "The main job"):
# `../shared/datasets/cifar10-jpeg` next to the repository, wherever it is
# cloned, unless KERAS_AFFINE_DIV_CIFAR10_DIR names another copy.
REPO_ROOT = str(provenance.REPO_ROOT)
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


def _dtype(x):
    return keras.backend.standardize_dtype(x.dtype)


def _config_json(config):
    return json.dumps(config, sort_keys=True, indent=4)


class TestCase:
    """Assertions and layer checks shared by the layer tests.

    A plain class, so that pytest's parametrisation and fixtures work on
    its subclasses' methods: a test module subclasses it (`class
    TestLayerContracts(testing.TestCase)`) or instantiates it, and calls
    the `run_*` methods. Every check raises `AssertionError` with a message
    that says what was expected and what came.
    """

    def assertTrue(self, value, msg):
        if not value:
            raise AssertionError(msg)

    def assertEqual(self, actual, expected, msg):
        if actual != expected:
            raise AssertionError(
                f"{msg}. Expected: {expected!r}. Received: {actual!r}"
            )

    def assertLen(self, sequence, expected_len, msg):
        self.assertEqual(len(sequence), expected_len, msg)

    def assertDType(self, x, dtype, msg):
        self.assertEqual(_dtype(x), keras.backend.standardize_dtype(dtype), msg)

    def assertShape(self, x, expected_shape, msg):
        self.assertEqual(tuple(x.shape), tuple(expected_shape), msg)

    def assertAllFinite(self, x, msg):
        x = to_numpy(keras.ops.cast(x, "float32"))
        self.assertTrue(np.all(np.isfinite(x)), f"{msg}: not all finite")

    def assertAllClose(self, actual, desired, rtol=1e-6, atol=1e-6, msg=""):
        np.testing.assert_allclose(
            to_numpy(actual),
            to_numpy(desired),
            rtol=rtol,
            atol=atol,
            err_msg=msg,
        )

    def assertAllEqual(self, actual, desired, msg=""):
        np.testing.assert_array_equal(
            to_numpy(actual), to_numpy(desired), err_msg=msg
        )

    def run_layer_test(
        self,
        cls,
        init_kwargs,
        input_shape,
        expected_output_shape,
        expected_num_trainable_weights=2,
        expected_num_non_trainable_weights=0,
        expected_num_losses=0,
        supports_masking=None,
        run_training_check=True,
        run_precision_checks=True,
    ):
        """Runs a layer through every Keras contract; raises on the first miss.

        Config, JSON and Keras serialization round trips; build and weights;
        a symbolic call against `compute_output_shape` and
        `compute_output_spec`; an eager call, its dtype and `layer.losses`;
        masking; one `fit` step that moves every weight, and the layer
        inside a `Sequential`; the dtype policies of `POLICIES`; `.keras`
        save and reload.

        Args:
            cls: The layer class.
            init_kwargs: Dict, the constructor arguments.
            input_shape: Tuple, a concrete input shape (batch included).
            expected_output_shape: Tuple, the output shape for that input.
            expected_num_trainable_weights: Integer. Defaults to `2`.
            expected_num_non_trainable_weights: Integer. Defaults to `0`.
            expected_num_losses: Integer, the length of `layer.losses` after
                an eager call (weight regularizers and the activity
                regularizer each add one). Defaults to `0`.
            supports_masking: Boolean, the expected `supports_masking`;
                with `True` the mask must also pass through the layer.
                Defaults to `None`, not checked.
            run_training_check: Boolean, whether to run the `fit` step.
                Defaults to `True`.
            run_precision_checks: Boolean, whether to run
                `run_precision_test`. Defaults to `True`.
        """
        name = cls.__name__
        input_shape = tuple(input_shape)
        expected_output_shape = tuple(expected_output_shape)
        rng = np.random.default_rng(0)
        x = rng.standard_normal(input_shape).astype("float32")
        target = rng.standard_normal(expected_output_shape).astype("float32")

        self.run_serialization_test(cls, init_kwargs)

        def run_build_asserts(layer):
            self.assertTrue(layer.built, f"{name} is not built")
            self.assertLen(
                layer.trainable_weights,
                expected_num_trainable_weights,
                f"Unexpected number of trainable weights of {name}",
            )
            self.assertLen(
                layer.non_trainable_weights,
                expected_num_non_trainable_weights,
                f"Unexpected number of non-trainable weights of {name}",
            )
            names = {w.path.split("/")[-1] for w in layer.weights}
            self.assertTrue(
                names <= {"kernel", "bias"},
                f"Unexpected weights of {name}. Expected: kernel and bias. "
                f"Received: {sorted(names)}",
            )

        # Build.
        layer = cls(**init_kwargs)
        layer.build(input_shape)
        run_build_asserts(layer)

        # Symbolic call against compute_output_shape and compute_output_spec.
        layer = cls(**init_kwargs)
        symbolic = layer(keras.KerasTensor(input_shape))
        run_build_asserts(layer)
        self.assertShape(
            symbolic, expected_output_shape, f"Symbolic output of {name}"
        )
        self.assertDType(
            symbolic, layer.compute_dtype, f"Symbolic output dtype of {name}"
        )
        self.assertEqual(
            tuple(layer.compute_output_shape(input_shape)),
            expected_output_shape,
            f"compute_output_shape of {name}",
        )
        spec = layer.compute_output_spec(keras.KerasTensor(input_shape))
        self.assertShape(spec, expected_output_shape, f"Output spec of {name}")
        unbatched = (None,) + input_shape[1:]
        symbolic = cls(**init_kwargs)(keras.KerasTensor(unbatched))
        self.assertShape(
            symbolic,
            (None,) + expected_output_shape[1:],
            f"Symbolic output of {name} for a batch of unknown size",
        )

        # Eager call: shape, dtype (that of the output spec), losses.
        layer = cls(**init_kwargs)
        y = layer(x)
        self.assertShape(y, expected_output_shape, f"Output of {name}")
        self.assertDType(y, "float32", f"Output dtype of {name}")
        self.assertDType(y, spec.dtype, f"Output dtype vs spec of {name}")
        self.assertAllFinite(y, f"Output of {name}")
        self.assertLen(
            layer.losses,
            expected_num_losses,
            f"Unexpected number of losses of {name} after a call",
        )

        # Masking.
        if supports_masking is not None:
            self.assertEqual(
                layer.supports_masking,
                supports_masking,
                f"supports_masking of {name}",
            )
            if supports_masking:
                self.run_masking_test(cls, init_kwargs, x)

        # One fit step, compiled where the backend can; also in a Sequential.
        if run_training_check:
            self._run_training_step(cls, init_kwargs, x, target)

        if run_precision_checks:
            self.run_precision_test(cls, init_kwargs, x)

        self.run_model_saving_test(cls, init_kwargs, x)

    def run_serialization_test(self, cls, init_kwargs):
        """Config, JSON and Keras serialization round trips of a layer.

        Every constructor argument is in `get_config`, each given scalar
        stored as given (an integer for a tuple argument as that tuple);
        `from_config` gives back the same config, also from the config
        written as JSON; `keras.saving.serialize_keras_object` written as
        JSON deserializes to the same class, config and attributes.

        Args:
            cls: The layer class.
            init_kwargs: Dict, the constructor arguments.

        Returns:
            The layer revived from the JSON of its serialization.
        """
        name = cls.__name__
        layer = cls(**init_kwargs)
        config = layer.get_config()
        params = [
            param
            for param, p in inspect.signature(cls.__init__).parameters.items()
            if param != "self" and p.kind is not p.VAR_KEYWORD
        ]
        missing = [param for param in params if param not in config]
        self.assertEqual(missing, [], f"Constructor arguments of {name} lack")
        for arg, value in init_kwargs.items():
            if arg in ("dtype", "name") or not isinstance(
                value, (int, float, str, bool)
            ):
                continue
            stored = config[arg]
            if isinstance(stored, dict):
                # A serialized object (initializer, regularizer, ...): checked
                # by the round trips below.
                continue
            expected = value
            if isinstance(stored, tuple) and not isinstance(value, tuple):
                expected = (value,) * len(stored)
            self.assertEqual(stored, expected, f"{name} config[{arg!r}]")

        # get_config round trip, as Python objects and through JSON.
        config_json = _config_json(config)
        revived = cls.from_config(config)
        self.assertEqual(
            revived.get_config(), config, f"{name}.from_config round trip"
        )
        revived = cls.from_config(json.loads(config_json))
        self.assertEqual(
            _config_json(revived.get_config()),
            config_json,
            f"{name}.from_config round trip through JSON",
        )

        # Keras serialization round trip, through JSON.
        self.assertEqual(
            keras.saving.get_registered_name(cls),
            f"keras_affine_div>{name}",
            f"Registered name of {name}",
        )
        serialized_json = _config_json(
            keras.saving.serialize_keras_object(layer)
        )
        revived = keras.saving.deserialize_keras_object(
            json.loads(serialized_json)
        )
        self.assertTrue(
            type(revived) is cls,
            f"Deserialized {name} is a {type(revived).__name__}",
        )
        self.assertEqual(
            _config_json(revived.get_config()),
            config_json,
            f"{name} Keras serialization round trip through JSON",
        )
        self.assertEqual(
            set(dir(revived)) - {"__annotations__"},
            set(dir(layer)) - {"__annotations__"},
            f"Attributes of the deserialized {name}",
        )
        return revived

    def run_masking_test(self, cls, init_kwargs, input_data):
        """The input mask passes through the layer unchanged.

        `compute_mask` returns the mask it is given; for inputs of rank 3
        (batch, steps, features), a `GlobalAveragePooling1D` after
        `Masking` and the layer averages over the unmasked steps only.

        Args:
            cls: The layer class.
            init_kwargs: Dict, the constructor arguments.
            input_data: NumPy array, the input, at least of rank 2.
        """
        name = cls.__name__
        x = np.array(input_data, "float32")
        mask = np.random.default_rng(1).random(x.shape[:-1]) < 0.6
        mask[..., 0] = True
        layer = cls(**init_kwargs)
        layer(x)
        self.assertAllEqual(
            layer.compute_mask(x, keras.ops.convert_to_tensor(mask)),
            mask,
            f"compute_mask of {name}",
        )
        if x.ndim != 3:
            return
        x[~mask] = 0.0
        inputs = keras.Input(x.shape[1:])
        h = keras.layers.Masking(mask_value=0.0)(inputs)
        model = keras.Model(
            inputs, keras.layers.GlobalAveragePooling1D()(layer(h))
        )
        y = to_numpy(layer(x)).astype(np.float64)
        weights = mask[..., None].astype(np.float64)
        expected = np.sum(y * weights, axis=1) / np.sum(weights, axis=1)
        self.assertAllClose(
            model(x),
            expected,
            rtol=1e-5,
            atol=1e-6,
            msg=f"The masked mean after {name}",
        )

    def run_precision_test(self, cls, init_kwargs, input_data):
        """The layer under each dtype policy of `POLICIES`.

        The weights are in the variable dtype, the output (eager and as
        `compute_output_spec` gives it) in the compute dtype, finite, and
        close to the float32 layer's with the same weights.

        Args:
            cls: The layer class.
            init_kwargs: Dict, the constructor arguments (no `dtype`).
            input_data: NumPy array, the float32 input.
        """
        name = cls.__name__
        layer = cls(**init_kwargs)
        reference = to_numpy(layer(input_data))
        scale = np.max(np.abs(reference)) + 1e-6
        for policy, (compute, variable, rtol) in POLICIES.items():
            msg = f"{name} under the {policy} policy"
            low = cls(**{**init_kwargs, "dtype": policy})
            low.build(input_data.shape)
            self.assertEqual(low.compute_dtype, compute, f"{msg}: compute")
            for w_low, w in zip(low.weights, layer.weights):
                self.assertDType(w_low, variable, f"{msg}: {w_low.path}")
                w_low.assign(keras.ops.cast(w, variable))
            out = low(input_data)
            self.assertDType(out, compute, f"{msg}: output dtype")
            spec = low.compute_output_spec(
                keras.KerasTensor(input_data.shape, dtype=compute)
            )
            self.assertDType(spec, compute, f"{msg}: output spec dtype")
            self.assertShape(spec, out.shape, f"{msg}: output spec shape")
            self.assertAllFinite(out, msg)
            self.assertAllClose(
                keras.ops.cast(out, "float32"),
                reference,
                rtol=1e-7,
                atol=rtol * scale,
                msg=msg,
            )

    def run_model_saving_test(self, cls, init_kwargs, input_data):
        """`.keras` save and reload of a model of the layer, same outputs.

        The weights are set at random first, so that the bias is not its
        initial value.

        Args:
            cls: The layer class.
            init_kwargs: Dict, the constructor arguments.
            input_data: NumPy array, the input.
        """
        name = cls.__name__
        inputs = keras.Input(input_data.shape[1:])
        model = keras.Model(inputs, cls(**init_kwargs)(inputs))
        rng = np.random.default_rng(2)
        for w in model.weights:
            w.assign(rng.standard_normal(tuple(w.shape)).astype("float32"))
        expected = model(input_data)
        with tempfile.TemporaryDirectory() as tmp_dir:
            path = os.path.join(tmp_dir, "model.keras")
            model.save(path)
            loaded = keras.saving.load_model(path)
        self.assertTrue(
            type(loaded.layers[-1]) is cls,
            f"Reloaded {name} is a {type(loaded.layers[-1]).__name__}",
        )
        self.assertEqual(
            loaded.layers[-1].get_config(),
            model.layers[-1].get_config(),
            f"Config of the reloaded {name}",
        )
        self.assertAllEqual(
            loaded(input_data), expected, f"Output of the reloaded {name}"
        )

    def _run_training_step(self, cls, init_kwargs, x, target):
        name = cls.__name__
        inputs = keras.Input(x.shape[1:])
        model = keras.Model(inputs, cls(**init_kwargs)(inputs))
        model.compile(
            optimizer=keras.optimizers.SGD(0.1),
            loss="mse",
            jit_compile="auto",
        )
        before = [to_numpy(w) for w in model.trainable_weights]
        history = model.fit(x, target, batch_size=len(x), epochs=1, verbose=0)
        self.assertTrue(
            np.isfinite(history.history["loss"][0]),
            f"Loss of one fit step of {name}: {history.history['loss'][0]}",
        )
        for w, old in zip(model.trainable_weights, before):
            self.assertTrue(
                not np.array_equal(to_numpy(w), old),
                f"One fit step of {name} left {w.path} unchanged",
            )
        seq = keras.Sequential([keras.Input(x.shape[1:]), cls(**init_kwargs)])
        self.assertShape(
            seq(x), target.shape, f"Output of {name} in a Sequential"
        )
