"""Shared machinery of the dense and convolutional layers (private).

The public layers subclass `BaseDivergenceDense` or `BaseDivergenceConv2D`
and implement `call`; arguments, weights, shapes and configs live here so
that the four layers cannot drift apart.
"""

import keras
from keras import ops

from keras_affine_div import _backend
from keras_affine_div.layers import _validation


def default_kernel_initializer():
    """The default kernel initialiser of every layer: `RandomNormal(1.0)`.

    The layers divide by `sqrt(|x|^2 + c)`, so the kernel sees a vector of
    norm about 1 whatever the width of the input. A unit-variance kernel then
    gives unit-variance outputs, which keeps a deep stack at O(1) activations
    at initialisation; a Glorot kernel (variance `~1/fan_in`) would shrink
    every layer's output by about `sqrt(fan_in)`.

    Returns:
        keras.initializers.RandomNormal: a fresh initialiser (seeded per
        layer, so that two layers never share their kernels).
    """
    return keras.initializers.RandomNormal(mean=0.0, stddev=1.0)


def statistics_dtype(compute_dtype):
    """The dtype the norms are computed in: float32, or float64 if asked.

    Args:
        compute_dtype: the layer's compute dtype.

    Returns:
        str: `"float64"` for a float64 layer, else `"float32"`.
    """
    return "float64" if compute_dtype == "float64" else "float32"


class _BaseDivergenceLayer(keras.layers.Layer):
    """Arguments common to the four layers."""

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
        **kwargs,
    ):
        if not isinstance(use_bias, bool):
            raise TypeError(
                "Received an invalid type for argument `use_bias`. Expected "
                f"a bool. Received: use_bias={use_bias!r}"
            )
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

    def _add_kernel_and_bias(self, kernel_shape, bias_shape):
        self.kernel = self.add_weight(
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
            }
        )
        return config


class BaseDivergenceDense(_BaseDivergenceLayer):
    """A `Dense`-shaped layer: kernel `(input_dim, units)`, bias `(units,)`."""

    def __init__(self, units, **kwargs):
        units = _validation.positive_int(units, "units")
        super().__init__(**kwargs)
        self.units = units
        self.input_spec = keras.InputSpec(min_ndim=2)

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
        stats_dtype = statistics_dtype(self.compute_dtype)
        x = ops.cast(inputs, stats_dtype)
        scale = ops.rsqrt(_backend.squared_norm(x, axis=-1) + offset)
        scale_outputs = (
            stats_dtype == self.compute_dtype
            and self.units <= self.kernel.shape[0]
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


class BaseDivergenceConv2D(_BaseDivergenceLayer):
    """A `Conv2D`-shaped layer whose output is divided by its patch norms.

    For output position p with input patch P_p (window x the input channels
    of its group), the squared patch norm `|P_p|^2` is the convolution of
    `sum_c x_c^2` (one channel per group) with a ones kernel of the same
    size, strides, padding and dilation as the layer's own kernel: one extra
    single-channel convolution, in float32, never an explicit extraction of
    patches. Zero padding contributes zeros, as it does to `W . P_p`.
    """

    def __init__(
        self,
        filters,
        kernel_size,
        strides=1,
        padding="valid",
        data_format=None,
        dilation_rate=1,
        groups=1,
        **kwargs,
    ):
        filters = _validation.positive_int(filters, "filters")
        kernel_size = _validation.int_tuple(kernel_size, 2, "kernel_size")
        strides = _validation.int_tuple(strides, 2, "strides")
        dilation_rate = _validation.int_tuple(dilation_rate, 2, "dilation_rate")
        padding = _validation.one_of(padding, {"valid", "same"}, "padding")
        if data_format is None:
            data_format = keras.config.image_data_format()
        data_format = _validation.one_of(
            data_format, {"channels_last", "channels_first"}, "data_format"
        )
        groups = _validation.positive_int(groups, "groups")
        if max(strides) > 1 and max(dilation_rate) > 1:
            raise ValueError(
                "`strides > 1` is not supported together with "
                "`dilation_rate > 1`. Received: "
                f"strides={strides}, dilation_rate={dilation_rate}"
            )
        if filters % groups != 0:
            raise ValueError(
                "The number of filters must be divisible by the number of "
                f"groups. Received: filters={filters}, groups={groups}"
            )
        super().__init__(**kwargs)
        self.filters = filters
        self.kernel_size = kernel_size
        self.strides = strides
        self.padding = padding
        self.data_format = data_format
        self.dilation_rate = dilation_rate
        self.groups = groups
        self.input_spec = keras.InputSpec(ndim=4)

    def build(self, input_shape):
        input_shape = tuple(input_shape)
        if len(input_shape) != 4:
            raise ValueError(
                f"Layer `{self.name}` expects inputs of rank 4 (batch, "
                "height, width, channels, in the order of `data_format`). "
                f"Received: input_shape={input_shape}"
            )
        channel_axis = self._channel_axis
        channels = input_shape[channel_axis]
        if channels is None:
            raise ValueError(
                f"Layer `{self.name}` needs the channel axis of its input to "
                f"be defined. Received: input_shape={input_shape}, "
                f"data_format={self.data_format}"
            )
        if channels % self.groups != 0:
            raise ValueError(
                "The number of input channels must be divisible by the "
                f"number of groups. Received: groups={self.groups}, "
                f"input_shape={input_shape}, data_format={self.data_format}"
            )
        # Raises if the output would be empty.
        self.compute_output_shape(input_shape)
        self._add_kernel_and_bias(
            self.kernel_size + (channels // self.groups, self.filters),
            (self.filters,),
        )
        self.input_spec = keras.InputSpec(
            ndim=4, axes={channel_axis: channels}
        )
        self.built = True

    def compute_output_shape(self, input_shape):
        input_shape = tuple(input_shape)
        if self.data_format == "channels_last":
            spatial = input_shape[1:3]
        else:
            spatial = input_shape[2:4]
        out = []
        for size, k, s, d in zip(
            spatial, self.kernel_size, self.strides, self.dilation_rate
        ):
            if size is None:
                out.append(None)
                continue
            if self.padding == "same":
                length = -(-size // s)
            else:
                length = (size - d * (k - 1) - 1) // s + 1
            if length <= 0:
                raise ValueError(
                    f"Layer `{self.name}` would produce an empty output: the "
                    "input is smaller than the dilated kernel. Received: "
                    f"input_shape={input_shape}, "
                    f"kernel_size={self.kernel_size}, "
                    f"dilation_rate={self.dilation_rate}, "
                    f"padding={self.padding}"
                )
            out.append(length)
        if self.data_format == "channels_last":
            return (input_shape[0], *out, self.filters)
        return (input_shape[0], self.filters, *out)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "filters": self.filters,
                "kernel_size": self.kernel_size,
                "strides": self.strides,
                "padding": self.padding,
                "data_format": self.data_format,
                "dilation_rate": self.dilation_rate,
                "groups": self.groups,
            }
        )
        return config

    @property
    def _channel_axis(self):
        return -1 if self.data_format == "channels_last" else 1

    def _convolution(self, inputs):
        """`W . P_p` at every output position, in the compute dtype."""
        return ops.conv(
            inputs,
            self.kernel,
            strides=self.strides,
            padding=self.padding,
            data_format=self.data_format,
            dilation_rate=self.dilation_rate,
        )

    def _inverse_patch_norm(self, inputs, offset):
        """`1 / sqrt(|P_p|^2 + offset)`, one value per position and filter.

        Returns a tensor in the compute dtype that broadcasts against the
        convolution's output: one channel for `groups=1`, else one channel
        per filter (each filter divided by the norm of its group's patch).
        """
        channel_axis = self._channel_axis
        x = ops.cast(inputs, statistics_dtype(self.compute_dtype))
        if self.groups == 1:
            squares = _backend.squared_norm(x, axis=channel_axis)
        else:
            shape = ops.shape(x)
            if self.data_format == "channels_last":
                grouped = (shape[0], shape[1], shape[2], self.groups, -1)
                squares = _backend.squared_norm(
                    ops.reshape(x, grouped), axis=-1
                )
                squares = ops.squeeze(squares, axis=-1)
            else:
                grouped = (shape[0], self.groups, -1, shape[2], shape[3])
                squares = _backend.squared_norm(
                    ops.reshape(x, grouped), axis=2
                )
                squares = ops.squeeze(squares, axis=2)
        # A ones kernel with one input channel per group: a grouped
        # convolution that sums each group's squares over its window.
        ones = ops.ones(self.kernel_size + (1, self.groups), dtype=x.dtype)
        sq_norms = ops.conv(
            squares,
            ones,
            strides=self.strides,
            padding=self.padding,
            data_format=self.data_format,
            dilation_rate=self.dilation_rate,
        )
        scale = ops.rsqrt(sq_norms + offset)
        if self.groups > 1:
            scale = ops.repeat(
                scale, self.filters // self.groups, axis=channel_axis
            )
        return ops.cast(scale, self.compute_dtype)

    def _broadcastable_bias(self):
        if self.data_format == "channels_last":
            return self.bias
        return ops.reshape(self.bias, (self.filters, 1, 1))
