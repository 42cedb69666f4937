"""The base of the dense layers (private): `BaseDivergenceDense`.

A `Dense`-shaped kernel and bias on `_base.BaseDivergenceLayer`, and the
one divided matmul both public dense layers compute.
"""

import keras
from keras import ops

from keras_affine_div import _backend
from keras_affine_div import _validation
from keras_affine_div.layers import _base


class BaseDivergenceDense(_base.BaseDivergenceLayer):
    """A `Dense`-shaped layer: kernel `(input_dim, units)`, bias `(units,)`."""

    def __init__(self, units, **kwargs):
        units = _validation.positive_int(units, "units")
        super().__init__(**kwargs)
        self.units = units
        self.input_spec = keras.InputSpec(min_ndim=2)
        # The mask passes through unchanged, as in Keras' `Dense`.
        self.supports_masking = True

    def build(self, input_shape):
        input_shape = tuple(input_shape)
        if len(input_shape) < 2:
            raise ValueError(
                f"Layer `{self.name}` expects inputs of rank >= 2 (a batch "
                "of vectors, features on the last axis). Received: "
                f"input_shape={input_shape}"
            )
        input_dim = input_shape[-1]
        if input_dim is None:
            raise ValueError(
                f"Layer `{self.name}` needs the last axis of its input to be "
                f"defined. Received: input_shape={input_shape}"
            )
        self._add_kernel_and_bias((input_dim, self.units), (self.units,))
        self.input_spec = keras.InputSpec(min_ndim=2, axes={-1: input_dim})
        self.built = True
        self._enable_lora_if_requested()

    def compute_output_shape(self, input_shape):
        return tuple(input_shape)[:-1] + (self.units,)

    def get_config(self):
        config = super().get_config()
        config["units"] = self.units
        return config

    def _divided_matmul(self, inputs, offset, divide_bias):
        """`x . kernel / sqrt(|x|^2 + offset)`, plus the bias.

        The bias is divided too if `divide_bias` (the affine-like layer),
        else added after the division (the norm-like layer). `|x|^2` is
        taken over the last axis in float32 (float64 for a float64 layer).

        Where the division happens is chosen for cost and range, with the
        same result up to rounding:

        - float32 and float64 layers with `units <= input_dim` scale the
          matmul's output, the smaller of the two tensors: one elementwise
          pass over `(batch, units)` instead of `(batch, input_dim)`, each
          way;
        - otherwise the input is scaled before the matmul. In float16 this
          is required: `x . kernel` of an unscaled input could overflow
          where the scaled one cannot.
        """
        stats_dtype = _base.statistics_dtype(self.compute_dtype)
        x = ops.cast(inputs, stats_dtype)
        scale = ops.rsqrt(_backend.squared_norm(x, axis=-1) + offset)
        scale_outputs = (
            stats_dtype == self.compute_dtype
            and self.units <= self._kernel.shape[0]
        )
        if scale_outputs:
            outputs = ops.matmul(inputs, self.kernel)
            if self.use_bias and divide_bias:
                outputs = outputs + self.bias
            outputs = outputs * scale
        else:
            x = ops.cast(x * scale, self.compute_dtype)
            outputs = ops.matmul(x, self.kernel)
            if self.use_bias and divide_bias:
                scale = ops.cast(scale, self.compute_dtype)
                outputs = outputs + scale * self.bias
        if self.use_bias and not divide_bias:
            outputs = outputs + self.bias
        return outputs
