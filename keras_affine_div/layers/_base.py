"""Shared machinery of the dense and convolutional layers (private).

The public dense layers subclass `_base_dense.BaseDivergenceDense` and
implement `call`; the convolutions subclass the rank-generic bases of
`_base_conv`, the einsum layers `_base_einsum`'s.
Arguments, weights (LoRA included), shapes and configs live here so that
the layers cannot drift apart.
"""

import contextlib
import numbers
import warnings

import keras
import numpy as np
from keras import ops

from keras_affine_div import _validation

# The standard deviation of the layers' default kernel (see below).
DEFAULT_KERNEL_STDDEV = 0.5


def default_kernel_initializer():
    """The default kernel initialiser of every layer: `RandomNormal(0.5)`.

    The layers divide by `sqrt(|x|^2 + c)`, so the kernel sees a vector of
    norm about 1 whatever the width of the input, and a kernel of standard
    deviation `s` gives outputs of standard deviation about `s` at every
    width and depth; a Glorot kernel (variance `~1/fan_in`) would shrink
    every layer's output by about `sqrt(fan_in)`.

    `s = 0.5` is the scale the kernel-scale pilots chose on the validation
    split (depth-8, width-256 CIFAR-10 MLPs, 15 epochs, each scale at its
    own bracketed learning rate, one seed; `tuning/results/
    cifar10-mlp-v2-pilot-sgd` and `-adam`). Validation accuracy at
    0.125 / 0.25 / 0.5 / 1.0:

    - tanh, SGD, `AffineLikeDense`: 0.480 / 0.507 / **0.520** / 0.452;
    - tanh, SGD, `NormLikeDense`: 0.476 / 0.499 / **0.512** / 0.480;
    - leaky ReLU, Adam, `AffineLikeDense`: **0.545** / 0.534 / 0.539 / 0.476;
    - leaky ReLU, Adam, `NormLikeDense`: 0.537 / **0.545** / 0.544 / 0.471.

    0.5 has the best mean (0.529, against 0.521 at 0.25 and 0.470 at the
    former default 1.0) and is never more than 0.6 points below a
    column's best; 1.0 is last in all four. The convolutions and the
    einsum layers share the default; no pilot has chosen a scale for them.

    Returns:
        keras.initializers.RandomNormal: a fresh initialiser (seeded per
        layer, so that two layers never share their kernels).
    """
    return keras.initializers.RandomNormal(
        mean=0.0, stddev=DEFAULT_KERNEL_STDDEV
    )


def check_not_quantized(quantization_config, dtype):
    """Raises if a layer is asked to quantize: no layer here implements it.

    Keras' `Dense` config carries `quantization_config` (`None` unless the
    layer was quantized), and a quantized layer's dtype policy is a
    `QuantizedDTypePolicy` (`"int8_from_float32"`, ...). The layers accept
    the key so that a Keras config loads, and refuse any quantization
    rather than silently drop it.

    Args:
        quantization_config: the `quantization_config` keyword argument.
        dtype: the `dtype` keyword argument (a name, a policy or `None`).

    Raises:
        ValueError: if `quantization_config` is not `None`, or `dtype` is a
            quantized dtype policy.
    """
    if quantization_config is not None:
        raise ValueError(
            "The layers of keras_affine_div do not implement quantization: "
            "`quantization_config` (a key of Keras' `Dense` config) must be "
            f"None. Received: quantization_config={quantization_config!r}"
        )
    policy = dtype
    if isinstance(dtype, str):
        try:
            policy = keras.dtype_policies.get(dtype)
        except (ValueError, TypeError):
            return  # Not a policy name: `Layer.__init__` says why.
    if getattr(policy, "quantization_mode", None) is not None:
        raise ValueError(
            "The layers of keras_affine_div do not implement quantization: "
            "`dtype` must not be a quantized dtype policy. "
            f"Received: dtype={policy!r}"
        )


def warn_if_keras_kernel_initializer(cls, config):
    """Warns when a config from a Keras layer carries a fan-in initialiser.

    `AffineLikeDense.from_config(dense.get_config())` builds the layer with
    every argument of Keras' `Dense`, its kernel initialiser included:
    `GlorotUniform` unless the user chose another. Behind the division by
    the input's (or patch's) norm, such a kernel (variance `~1/fan_in`)
    shrinks the outputs by about `sqrt(fan_in)`, so a network built that
    way starts almost dead. The warning fires for a config written by Keras'
    `Dense`, `EinsumDense` or `Conv*D` (it has no `lora_rank` key, which
    those write only with LoRA enabled and ours always write) whose kernel
    initialiser is a `VarianceScaling` one (Glorot, He, LeCun). Configs
    written by this package's layers never warn, so reloading a saved model
    stays quiet.

    Args:
        cls: the layer class being built.
        config: the config given to `cls.from_config`.
    """
    if "lora_rank" in config:
        return
    initializer = config.get("kernel_initializer")
    if initializer is None:
        return
    try:
        initializer = keras.initializers.get(initializer)
    except (ValueError, TypeError):
        return  # The constructor says why.
    if not isinstance(initializer, keras.initializers.VarianceScaling):
        return
    warnings.warn(
        f"`{cls.__name__}.from_config` received the config of a Keras layer "
        f"with kernel_initializer={type(initializer).__name__}, and uses it "
        "as given. Such an initialiser (Glorot, Keras' default, He or "
        "LeCun) scales the kernel by `1/sqrt(fan_in)`; behind this layer's "
        "division by the norm of its input (or patch) it shrinks the "
        "outputs by about `sqrt(fan_in)`, so a deep stack starts almost "
        "dead. Set `config['kernel_initializer'] = None` for the package's "
        "default, `RandomNormal(stddev=0.5)`, or convert whole models with "
        "`keras_affine_div.convert`.",
        UserWarning,
        stacklevel=3,
    )


def statistics_dtype(compute_dtype):
    """The dtype the norms are computed in: float32, or float64 if asked.

    Args:
        compute_dtype: the layer's compute dtype.

    Returns:
        str: `"float64"` for a float64 layer, else `"float32"`.
    """
    return "float64" if compute_dtype == "float64" else "float32"


class BaseDivergenceLayer(keras.layers.Layer):
    """Arguments, kernel and bias common to every layer, with LoRA.

    The kernel variable is `_kernel`; the `kernel` property is what the
    layer applies: the variable itself, or with LoRA enabled the merged
    kernel (as in Keras' `Dense` and `BaseConv`).
    """

    def __init__(
        self,
        activation=None,
        use_bias=True,
        kernel_initializer=None,
        bias_initializer="zeros",
        kernel_regularizer=None,
        bias_regularizer=None,
        activity_regularizer=None,
        kernel_constraint=None,
        bias_constraint=None,
        lora_rank=None,
        lora_alpha=None,
        **kwargs,
    ):
        # Keras' `Dense` config carries `quantization_config`: accepted so
        # that the config loads, refused unless it is `None`. Not stored:
        # it can only be `None`.
        check_not_quantized(
            kwargs.pop("quantization_config", None), kwargs.get("dtype")
        )
        use_bias = _validation.boolean(use_bias, "use_bias")
        lora_rank = _validation.positive_int(
            lora_rank, "lora_rank", allow_none=True
        )
        lora_alpha = _lora_alpha(lora_alpha, "lora_alpha")
        super().__init__(activity_regularizer=activity_regularizer, **kwargs)
        self.activation = keras.activations.get(activation)
        self.use_bias = use_bias
        if kernel_initializer is None:
            kernel_initializer = default_kernel_initializer()
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.kernel_regularizer = keras.regularizers.get(kernel_regularizer)
        self.bias_regularizer = keras.regularizers.get(bias_regularizer)
        self.kernel_constraint = keras.constraints.get(kernel_constraint)
        self.bias_constraint = keras.constraints.get(bias_constraint)
        self.lora_rank = lora_rank
        self.lora_alpha = lora_alpha if lora_alpha is not None else lora_rank
        self.lora_enabled = False

    @property
    def kernel(self):
        """The kernel the layer applies: with LoRA, the merged kernel.

        `kernel + (lora_kernel_a @ lora_kernel_b) * (lora_alpha / lora_rank)`
        in the compute dtype once LoRA is enabled, else the kernel variable
        itself.
        """
        if not self.built:
            raise AttributeError(
                "You must build the layer before accessing `kernel`."
            )
        kernel = self._kernel
        if self.lora_enabled:
            kernel = ops.cast(
                ops.add(
                    kernel,
                    (self.lora_alpha / self.lora_rank)
                    * ops.matmul(self.lora_kernel_a, self.lora_kernel_b),
                ),
                dtype=self.compute_dtype,
            )
        return kernel

    def enable_lora(
        self,
        rank,
        lora_alpha=None,
        a_initializer="he_uniform",
        b_initializer="zeros",
    ):
        """Freezes the kernel and trains a low-rank update of it (LoRA).

        Adds the trainable float32 weights `lora_kernel_a`, of the kernel's
        shape with `rank` in place of its last axis, and `lora_kernel_b`, of
        shape `(rank, units)` (`(rank, filters)` for a convolution), and
        makes the kernel non-trainable. The layer then applies the merged
        kernel `kernel + (lora_kernel_a @ lora_kernel_b) * (lora_alpha /
        rank)` inside the same division by the input's (or patch's) norm.
        With the default zero `b_initializer` its outputs do not change
        until it trains. As Keras' `Dense.enable_lora` and
        `Conv2D.enable_lora`.

        Args:
            rank: Positive integer, the rank of the update.
            lora_alpha: Positive number scaling the update by
                `lora_alpha / rank`. Defaults to `None`, which means `rank`
                (a scale of 1).
            a_initializer: Initializer for `lora_kernel_a`. Defaults to
                `"he_uniform"`.
            b_initializer: Initializer for `lora_kernel_b`. Defaults to
                `"zeros"`.

        Raises:
            ValueError: if the layer has a `kernel_constraint`, is not yet
                built, or has LoRA enabled already; if `rank` is not
                positive or `lora_alpha` not a positive number.
            TypeError: if `rank` is not an integer or `lora_alpha` not a
                number.
        """
        if self.kernel_constraint:
            raise ValueError(
                "Lora is incompatible with kernel constraints. "
                "In order to enable lora on this layer, remove the "
                "`kernel_constraint` argument. Received: "
                f"kernel_constraint={_describe(self.kernel_constraint)}"
            )
        if not self.built:
            raise ValueError(
                "Cannot enable lora on a layer that isn't yet built. Build "
                "it first, e.g. by calling it on an input. Received: "
                f"{self.name}.built={self.built}"
            )
        if self.lora_enabled:
            raise ValueError(
                "lora is already enabled. This can only be done once per "
                f"layer. Received: rank={rank!r}, "
                f"{self.name}.lora_rank={self.lora_rank}"
            )
        rank = _validation.positive_int(rank, "rank")
        lora_alpha = _lora_alpha(lora_alpha, "lora_alpha")
        # LoRA weights are float32 whatever the dtype policy, as in Keras, so
        # that their updates neither underflow nor overflow.
        with _unlocked_state(self):
            self.lora_kernel_a = self.add_weight(
                name="lora_kernel_a",
                shape=tuple(self._kernel.shape[:-1]) + (rank,),
                initializer=keras.initializers.get(a_initializer),
                dtype="float32",
                regularizer=self.kernel_regularizer,
            )
            self.lora_kernel_b = self.add_weight(
                name="lora_kernel_b",
                shape=(rank, self._kernel.shape[-1]),
                initializer=keras.initializers.get(b_initializer),
                dtype="float32",
                regularizer=self.kernel_regularizer,
            )
            self._kernel.trainable = False
        self.lora_enabled = True
        self.lora_rank = rank
        self.lora_alpha = lora_alpha if lora_alpha is not None else rank

    def save_own_variables(self, store):
        """Saves the weights; with LoRA, the merged kernel and the bias.

        As Keras' `Dense` and `Conv2D`: a LoRA layer saves the kernel it
        applies (merged with its update) in place of the kernel, and no
        LoRA weights. Without LoRA every weight is saved as usual. Beside
        the weights, the entry `CLASS_ENTRY` names the layer's class: a
        Keras layer loading these weights (a model whose layers rebuild
        their sublayers as Keras' when loaded outside `layers_of`) then
        fails, naming the layer, instead of computing another function
        with them.
        """
        if not self.lora_enabled:
            super().save_own_variables(store)
        else:
            store["0"] = self.kernel
            if self.use_bias:
                store["1"] = self.bias
        store[CLASS_ENTRY] = np.frombuffer(
            type(self).__name__.encode("ascii"), np.uint8
        )

    def load_own_variables(self, store):
        """Loads what `save_own_variables` saved.

        With LoRA the saved (merged) kernel becomes the frozen kernel and the
        LoRA weights are zeroed, so the layer computes what the saved one
        did, as Keras' `Dense` and `Conv2D` do. Weights saved by another
        class of the package are refused; weights saved without the class
        entry (by earlier versions, or by Keras' own layer) load as before.

        Raises:
            ValueError: if the weights were saved by another class of the
                package.
        """
        store = _checked_store(self, store)
        if not self.lora_enabled:
            super().load_own_variables(store)
            return
        self._kernel.assign(store["0"])
        if self.use_bias:
            self.bias.assign(store["1"])
        self.lora_kernel_a.assign(ops.zeros(self.lora_kernel_a.shape))
        self.lora_kernel_b.assign(ops.zeros(self.lora_kernel_b.shape))

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "activation": keras.activations.serialize(self.activation),
                "use_bias": self.use_bias,
                "kernel_initializer": keras.initializers.serialize(
                    self.kernel_initializer
                ),
                "bias_initializer": keras.initializers.serialize(
                    self.bias_initializer
                ),
                "kernel_regularizer": keras.regularizers.serialize(
                    self.kernel_regularizer
                ),
                "bias_regularizer": keras.regularizers.serialize(
                    self.bias_regularizer
                ),
                "activity_regularizer": keras.regularizers.serialize(
                    self.activity_regularizer
                ),
                "kernel_constraint": keras.constraints.serialize(
                    self.kernel_constraint
                ),
                "bias_constraint": keras.constraints.serialize(
                    self.bias_constraint
                ),
                "lora_rank": self.lora_rank,
                "lora_alpha": self.lora_alpha,
            }
        )
        return config

    @classmethod
    def from_config(cls, config):
        """Builds the layer from its config, or from a Keras layer's config.

        Every key of the config of Keras' matching layer (`Dense`, `Conv1D`,
        `Conv2D`, `Conv3D`) is accepted and used as given, its kernel
        initialiser included; a Keras config whose kernel initialiser is
        a Glorot, He or LeCun one makes a warning (see
        `warn_if_keras_kernel_initializer`). `quantization_config` must be
        `None`.
        """
        layer = super().from_config(config)
        warn_if_keras_kernel_initializer(cls, config)
        return layer

    def _add_kernel_and_bias(self, kernel_shape, bias_shape):
        self._kernel = self.add_weight(
            name="kernel",
            shape=kernel_shape,
            initializer=self.kernel_initializer,
            regularizer=self.kernel_regularizer,
            constraint=self.kernel_constraint,
        )
        if self.use_bias:
            self.bias = self.add_weight(
                name="bias",
                shape=bias_shape,
                initializer=self.bias_initializer,
                regularizer=self.bias_regularizer,
                constraint=self.bias_constraint,
            )
        else:
            self.bias = None

    def _enable_lora_if_requested(self):
        """The end of `build`: LoRA from the `lora_rank` argument."""
        if self.lora_rank:
            self.enable_lora(self.lora_rank, lora_alpha=self.lora_alpha)


def _lora_alpha(value, name):
    """`None`, or `value` checked to be a positive number (int or float)."""
    if value is None:
        return None
    _validation.positive_float(value, name)
    if isinstance(value, numbers.Integral):
        return int(value)
    return float(value)


def _describe(obj):
    """The name of a function, else of the class of an object."""
    return getattr(obj, "__name__", type(obj).__name__)


@contextlib.contextmanager
def _unlocked_state(layer):
    """Lets a built layer add weights, then locks its state again.

    Keras 3 locks a layer's state at the end of `build` and offers no public
    way to add a weight later; its own `enable_lora` (in `Dense` and the
    convolutions) unlocks the layer's tracker the same way.
    """
    tracker = layer._tracker
    locked = tracker.locked
    tracker.unlock()
    try:
        yield
    finally:
        if locked:
            tracker.lock()


# The entry of a saved layer's weights that names its class (not a weight).
CLASS_ENTRY = "keras_affine_div_class"


class _WeightsOnly:
    """A read-only view of a weights store without `CLASS_ENTRY`."""

    def __init__(self, store):
        self._store = store

    def keys(self):
        return [k for k in self._store.keys() if k != CLASS_ENTRY]

    def __getitem__(self, key):
        return self._store[key]

    def __contains__(self, key):
        return key != CLASS_ENTRY and key in self._store.keys()


def _checked_store(layer, store):
    """`store` without its class entry, checked against `layer`'s class."""
    if CLASS_ENTRY not in store.keys():
        return store
    saved = bytes(np.asarray(store[CLASS_ENTRY], np.uint8)).decode("ascii")
    if saved != type(layer).__name__:
        raise ValueError(
            f"Layer '{layer.name}' is a {type(layer).__name__}, but the "
            f"weights loaded into it were saved by {_article(saved)} {saved}: "
            "the two "
            "compute different functions with the same weights. Load them "
            f"into {_article(saved)} {saved}."
        )
    return _WeightsOnly(store)


def _article(name):
    return "an" if name[0] in "AEIOU" else "a"
