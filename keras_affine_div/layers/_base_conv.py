"""The rank-generic base of the convolutional layers (private).

`BaseDivergenceConv` is to our convolutions what Keras' `BaseConv` is to
`Conv1D`, `Conv2D` and `Conv3D`: arguments, weights, shapes and configs for
any number of spatial axes. `BasePatchNormConv` and `BaseAffineLikeConv`
add the two corrections; each public layer only fixes the rank.
"""

import keras
from keras import ops

from keras_affine_div import _conv
from keras_affine_div import _validation
from keras_affine_div import ops as affine_div_ops
from keras_affine_div.layers import _base

# The compute dtypes whose convolutions go through
# `_scaled_divided_convolution`.
_SIXTEEN_BIT_DTYPES = ("float16", "bfloat16")
# The largest `|W_f| |P_p|` a 16-bit convolution is given: a power of two,
# a factor 4 below float16's largest finite value, 65504.
_SCALED_BOUND = 2.0**14


class BaseDivergenceConv(_base.BaseDivergenceLayer):
    """A `rank`-D convolution whose output is divided by its patch norms.

    For output position p with input patch P_p (window x the input channels
    of its group), the squared patch norm `|P_p|^2` is the convolution of
    `sum_c x_c^2` (one channel per group) with a ones kernel of the same
    size, strides, padding and dilation as the layer's own kernel
    (`keras_affine_div.ops.patch_squared_norms`): one extra single-channel
    convolution, in float32, never an explicit extraction of patches. Zero
    padding contributes zeros, as it does to `W . P_p`; causal padding (1D)
    pads the input and the summed squares alike.

    In float32 and float64 the layer convolves `x` and multiplies the result
    by `1 / sqrt(|P_p|^2 + c)`. In float16 `W . P_p` itself can overflow
    (65504) although the output, bounded by `|W|`, cannot; so with a 16-bit
    compute dtype (float16, bfloat16) the layer convolves `x / s` instead,
    `s` a power of two per sample, 1 unless `|W_f| |P_p| / s` could exceed
    `2**14` for some filter and patch of the sample, and finishes in
    float32 (`_scaled_divided_convolution`).
    """

    def __init__(
        self,
        rank,
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
        (
            kernel_size,
            strides,
            padding,
            data_format,
            dilation_rate,
            groups,
        ) = _conv.check_arguments(
            rank,
            kernel_size,
            strides,
            padding,
            data_format,
            dilation_rate,
            groups,
        )
        if filters % groups != 0:
            raise ValueError(
                "The number of filters must be divisible by the number of "
                f"groups. Received: filters={filters}, groups={groups}"
            )
        super().__init__(**kwargs)
        self.rank = rank
        self.filters = filters
        self.kernel_size = kernel_size
        self.strides = strides
        self.padding = padding
        self.data_format = data_format
        self.dilation_rate = dilation_rate
        self.groups = groups
        self.input_spec = keras.InputSpec(ndim=rank + 2)

    def build(self, input_shape):
        input_shape = tuple(input_shape)
        self._check_input_rank(input_shape)
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
            ndim=self.rank + 2, axes={channel_axis: channels}
        )
        self.built = True
        self._enable_lora_if_requested()

    def compute_output_shape(self, input_shape):
        input_shape = tuple(input_shape)
        self._check_input_rank(input_shape)
        if self.data_format == "channels_last":
            spatial = input_shape[1:-1]
        else:
            spatial = input_shape[2:]
        out = _conv.output_lengths(
            spatial,
            self.kernel_size,
            self.strides,
            self.padding,
            self.dilation_rate,
        )
        if any(length is not None and length <= 0 for length in out):
            raise ValueError(
                f"Layer `{self.name}` would produce an empty output: the "
                "input is smaller than the dilated kernel. Received: "
                f"input_shape={input_shape}, "
                f"kernel_size={self.kernel_size}, "
                f"dilation_rate={self.dilation_rate}, "
                f"padding={self.padding}"
            )
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

    def _check_input_rank(self, input_shape):
        """Raises unless `input_shape` has a batch, spatial and channel axes."""
        if len(input_shape) != self.rank + 2:
            raise ValueError(
                f"Layer `{self.name}` expects inputs of rank {self.rank + 2} "
                f"(batch, {_conv.SPATIAL_AXES[self.rank]}, channels, in the "
                "order of `data_format`). "
                f"Received: input_shape={input_shape}"
            )

    @property
    def _channel_axis(self):
        return -1 if self.data_format == "channels_last" else 1

    def _convolution(self, inputs):
        """`W . P_p` at every output position, in the compute dtype."""
        padding = self.padding
        if padding == "causal":
            inputs = ops.pad(
                inputs,
                _conv.causal_padding(
                    self.kernel_size, self.dilation_rate, self.data_format
                ),
            )
            padding = "valid"
        return ops.conv(
            inputs,
            self.kernel,
            strides=self.strides,
            padding=padding,
            data_format=self.data_format,
            dilation_rate=self.dilation_rate,
        )

    def _inverse_patch_norm(self, inputs, offset):
        """`1 / sqrt(|P_p|^2 + offset)`, one value per position and filter.

        Returns a tensor in the compute dtype that broadcasts against the
        convolution's output: one channel for `groups=1`, else one channel
        per filter (each filter divided by the norm of its group's patch).
        """
        x = ops.cast(inputs, _base.statistics_dtype(self.compute_dtype))
        scale = ops.rsqrt(self._patch_squared_norms(x) + offset)
        return ops.cast(self._per_filter(scale), self.compute_dtype)

    def _scaled_divided_convolution(self, inputs, offset, divide_bias):
        """`W . P_p / sqrt(|P_p|^2 + offset)`, plus the bias, in 16 bits.

        The bias is divided too if `divide_bias` (the affine-like layer),
        else added after the division (the norm-like layer).

        `|W_f . P_p| <= |W_f| |P_p|` (Cauchy-Schwarz, for every partial sum
        too), so convolving `x / s` cannot overflow once
        `s >= max_f |W_f| max_p |P_p| / 2**14`, a factor 4 below float16's
        largest value. `s` is taken per sample, as the smallest such power
        of two and at least 1: `x / s` and `* s` are then exact (barring
        float16 subnormals), and a sample that could not overflow is
        convolved exactly as in the plain path. The rest is done in
        float32: `conv(x / s) * s / sqrt(|P_p|^2 + offset)` with the bias,
        cast to the compute dtype once at the end. `s` carries no gradient:
        the result does not depend on it.

        Returns:
            A tensor in the compute dtype, the shape of the convolution's
            output.
        """
        x = ops.cast(inputs, "float32")
        sq_norms = self._patch_squared_norms(x)
        kernel = ops.cast(self.kernel, "float32")
        kernel_sq_norm = ops.max(
            ops.sum(ops.square(kernel), axis=tuple(range(self.rank + 1)))
        )
        sample_sq_norm = ops.max(
            sq_norms, axis=tuple(range(1, self.rank + 2)), keepdims=True
        )
        excess = ops.sqrt(sample_sq_norm * kernel_sq_norm) / _SCALED_BOUND
        s = ops.stop_gradient(
            ops.power(2.0, ops.ceil(ops.log2(ops.maximum(excess, 1.0))))
        )
        outputs = self._convolution(ops.cast(x / s, self.compute_dtype))
        outputs = ops.cast(outputs, "float32") * s
        bias = None
        if self.use_bias:
            bias = ops.cast(self._broadcastable_bias(), "float32")
        if bias is not None and divide_bias:
            outputs = outputs + bias
        outputs = outputs * self._per_filter(ops.rsqrt(sq_norms + offset))
        if bias is not None and not divide_bias:
            outputs = outputs + bias
        return ops.cast(outputs, self.compute_dtype)

    def _patch_squared_norms(self, x):
        """`|P_p|^2` of `x`, in its dtype: one channel per group."""
        return affine_div_ops.patch_squared_norms(
            x,
            self.kernel_size,
            strides=self.strides,
            padding=self.padding,
            data_format=self.data_format,
            dilation_rate=self.dilation_rate,
            groups=self.groups,
        )

    def _per_filter(self, per_group):
        """A per-group tensor repeated to one channel per filter."""
        if self.groups == 1:
            return per_group
        return ops.repeat(
            per_group, self.filters // self.groups, axis=self._channel_axis
        )

    def _broadcastable_bias(self):
        if self.data_format == "channels_last":
            return self.bias
        return ops.reshape(self.bias, (self.filters,) + (1,) * self.rank)


class BasePatchNormConv(BaseDivergenceConv):
    """`phi(W . P_p / sqrt(|P_p|^2 + epsilon) + b)`: the norm-like conv."""

    def __init__(self, rank, filters, kernel_size, epsilon=1e-3, **kwargs):
        epsilon = _validation.epsilon(epsilon, "epsilon")
        super().__init__(rank, filters, kernel_size, **kwargs)
        self.epsilon = epsilon

    def call(self, inputs):
        if self.compute_dtype in _SIXTEEN_BIT_DTYPES:
            outputs = self._scaled_divided_convolution(
                inputs, self.epsilon, divide_bias=False
            )
        else:
            outputs = self._convolution(inputs)
            outputs = outputs * self._inverse_patch_norm(inputs, self.epsilon)
            if self.use_bias:
                outputs = outputs + self._broadcastable_bias()
        if self.activation is not None:
            outputs = self.activation(outputs)
        return outputs

    def get_config(self):
        config = super().get_config()
        config["epsilon"] = self.epsilon
        return config


class BaseAffineLikeConv(BaseDivergenceConv):
    """`phi((W . P_p + b) / sqrt(|P_p|^2 + 1))`: the affine-like conv."""

    def call(self, inputs):
        if self.compute_dtype in _SIXTEEN_BIT_DTYPES:
            outputs = self._scaled_divided_convolution(
                inputs, 1.0, divide_bias=True
            )
        else:
            outputs = self._convolution(inputs)
            if self.use_bias:
                outputs = outputs + self._broadcastable_bias()
            outputs = outputs * self._inverse_patch_norm(inputs, 1.0)
        if self.activation is not None:
            outputs = self.activation(outputs)
        return outputs
