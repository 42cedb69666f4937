"""The base of the einsum layers (private): weights, norms, division.

`BaseDivergenceEinsumDense` is to `AffineLikeEinsumDense` and
`NormLikeEinsumDense` what Keras' `EinsumDense` is to itself: the equation,
the partial output shape and the bias axes of `EinsumDense` (parsed and
laid out by `_einsum_equation`), with the kernel, bias and LoRA of
`_base.BaseDivergenceLayer`.

Each output element of `einsum(equation, x, kernel)` is an affine function
of the input entries the equation contracts for it: the input axes whose
letters are not in the output (they are summed over), at the element's own
position along the other input axes. Those entries are the input of the
affine map; their squared norm `|x_c|^2` is what the layers divide by:

```
"abc,cd->abd"     sum over c, per (a, b)         (a Dense per token)
"abc,cde->abde"   sum over c, per (a, b)         (MultiHeadAttention's
                                                  query, key, value)
"abcd,cde->abe"   sum over c and d, per (a, b)   (its output projection)
"ab,b->ab"        x[a, b]**2, per (a, b)         (nothing contracted)
```

computed as one reduction of `x**2` over the contracted axes, then laid
out as the output (kept axes in the output's order, size 1 along the axes
the kernel adds): never an einsum with a ones kernel.
"""

import warnings

import keras
from keras import ops

from keras_affine_div import ops as affine_div_ops
from keras_affine_div.layers import _base
from keras_affine_div.layers._einsum_equation import bias_axes_of
from keras_affine_div.layers._einsum_equation import layout
from keras_affine_div.layers._einsum_equation import parse_equation
from keras_affine_div.layers._einsum_equation import partial_output_shape


class BaseDivergenceEinsumDense(_base.BaseDivergenceLayer):
    """An `EinsumDense`-shaped layer divided by the norms of its inputs.

    Takes `EinsumDense`'s arguments: `equation`, `output_shape` and
    `bias_axes` (`use_bias` is `bias_axes is not None`, and not an
    argument). The keys `gptq_unpacked_column_size` and
    `quantization_config` of an `EinsumDense` config are accepted and must
    be `None`: the layers are not quantized.
    """

    def __init__(self, equation, output_shape, bias_axes=None, **kwargs):
        parsed = parse_equation(equation)
        output_shape = partial_output_shape(output_shape, parsed)
        bias_axes = bias_axes_of(bias_axes, parsed, equation)
        # `EinsumDense` writes this key only for a GPTQ-quantized layer:
        # accepted so that its config loads, refused unless it is `None`
        # (`quantization_config` and quantized dtype policies are refused
        # by `_base.BaseDivergenceLayer`).
        gptq_unpacked_column_size = kwargs.pop(
            "gptq_unpacked_column_size", None
        )
        if gptq_unpacked_column_size is not None:
            raise ValueError(
                "The layers of keras_affine_div do not implement "
                "quantization: `gptq_unpacked_column_size` (a key of Keras' "
                "`EinsumDense` config) must be None. Received: "
                f"gptq_unpacked_column_size={gptq_unpacked_column_size!r}"
            )
        super().__init__(use_bias=bias_axes is not None, **kwargs)
        self.equation = equation
        # Named as in Keras' `EinsumDense`: `output_shape` is the partial
        # shape, without the batch and the elided axes.
        self.partial_output_shape = output_shape
        self.bias_axes = bias_axes
        self._equation = parsed
        self._layout = None
        n = len(parsed.inputs)
        if parsed.ellipsis is None:
            self.input_spec = keras.InputSpec(ndim=n)
        else:
            self.input_spec = keras.InputSpec(
                min_ndim=n + (parsed.ellipsis == "left")
            )
        # The mask passes through where the leading axes it covers are
        # kept in place (`compute_mask`).
        self.supports_masking = True

    def build(self, input_shape):
        input_shape = tuple(input_shape)
        self._layout = layout(
            self._equation,
            self.bias_axes,
            self.partial_output_shape,
            input_shape,
            self.name,
        )
        self._kernel = self.add_weight(
            name="kernel",
            shape=self._layout.kernel_shape,
            initializer=self._kernel_initializer_with_axes(),
            regularizer=self.kernel_regularizer,
            constraint=self.kernel_constraint,
        )
        if self.use_bias:
            self.bias = self.add_weight(
                name="bias",
                shape=self._layout.bias_shape,
                initializer=self.bias_initializer,
                regularizer=self.bias_regularizer,
                constraint=self.bias_constraint,
            )
        else:
            self.bias = None
        in_tokens, _ = self._equation.axis_tokens(len(input_shape))
        self.input_spec = keras.InputSpec(
            ndim=len(input_shape),
            axes={
                i: input_shape[i]
                for i, t in enumerate(in_tokens)
                if t in self._equation.kernel
            },
        )
        self.built = True
        self._enable_lora_if_requested()

    def compute_output_shape(self, input_shape):
        return layout(
            self._equation,
            self.bias_axes,
            self.partial_output_shape,
            input_shape,
            self.name,
        ).output_shape

    def compute_mask(self, inputs, mask=None):
        """Passes `mask` through if the layer keeps the axes it covers.

        A mask covers the leading axes of the input (`(batch, steps)` for
        a sequence). It is returned unchanged when those axes are the
        leading axes of the output, in the same order: per-token
        projections such as `"abc,cd->abd"` and `"abc,cde->abde"`, and
        `"abcd,cde->abe"` for a `(batch, steps)` mask. Otherwise (a mask
        over an axis the equation contracts or moves) the layer warns, as
        Keras does for a layer that does not support masking, and returns
        `None`.
        """
        if mask is None:
            return None
        in_tokens, out_tokens = self._equation.axis_tokens(len(inputs.shape))
        k = len(mask.shape)
        if in_tokens[:k] == out_tokens[:k]:
            return mask
        warnings.warn(
            f"Layer '{self.name}' (of type {type(self).__name__}) was passed "
            f"a mask over input axes {''.join(in_tokens[:k])!r} that its "
            f"equation {self.equation!r} does not keep as the leading "
            "output axes; the mask is dropped. Downstream layers will not "
            "see it.",
            stacklevel=2,
        )
        return None

    def get_config(self):
        config = super().get_config()
        del config["use_bias"]
        config.update(
            {
                "equation": self.equation,
                "output_shape": self.partial_output_shape,
                "bias_axes": self.bias_axes,
            }
        )
        return config

    def _divided_einsum(self, inputs, offset, divide_bias):
        """`einsum(x, kernel) / sqrt(|x_c|^2 + offset)`, plus the bias.

        The bias is divided too if `divide_bias` (the affine-like layer),
        else added after the division (the norm-like layer). `|x_c|^2` is
        taken in float32 (float64 for a float64 layer). As in the dense
        layers, a float32 or float64 layer whose outputs per position are
        no more than `x_c`'s entries scales the einsum's output; otherwise,
        and always in 16 bits, the input is scaled before the einsum, so
        that `einsum(x, kernel)` cannot overflow float16 (each position of
        `x / sqrt(|x_c|^2 + offset)` has a norm below 1).
        """
        stats_dtype = _base.statistics_dtype(self.compute_dtype)
        x = ops.cast(inputs, stats_dtype)
        scale = ops.rsqrt(self._squared_norms(x) + offset)
        layout_ = self._layout
        scale_outputs = (
            stats_dtype == self.compute_dtype
            and layout_.new_output_size <= layout_.contracted_size
        )
        if scale_outputs:
            outputs = ops.einsum(self.equation, inputs, self.kernel)
            if self.use_bias and divide_bias:
                outputs = outputs + self.bias
            outputs = outputs * self._as_output_layout(scale)
        else:
            x = ops.cast(x * scale, self.compute_dtype)
            outputs = ops.einsum(self.equation, x, self.kernel)
            if self.use_bias and divide_bias:
                scale = ops.cast(self._as_output_layout(scale), x.dtype)
                outputs = outputs + scale * self.bias
        if self.use_bias and not divide_bias:
            outputs = outputs + self.bias
        return outputs

    def _squared_norms(self, x):
        """`|x_c|^2` in the input's layout: size 1 along contracted axes."""
        axes = self._layout.contracted_axes
        if not axes:
            return ops.square(x)
        return affine_div_ops.squared_norm(x, axis=axes, keepdims=True)

    def _as_output_layout(self, per_input):
        """A tensor of `_squared_norms`' shape, laid out as the output."""
        layout_ = self._layout
        if layout_.contracted_axes:
            per_input = ops.squeeze(per_input, axis=layout_.contracted_axes)
        if layout_.norm_transpose is not None:
            per_input = ops.transpose(per_input, layout_.norm_transpose)
        for axis in layout_.norm_expand:
            per_input = ops.expand_dims(per_input, axis)
        return per_input

    def _kernel_initializer_with_axes(self):
        """The kernel initialiser, told the fan axes as `EinsumDense` does.

        A `VarianceScaling` initialiser (Glorot, He, LeCun) of a Keras that
        takes `input_axes` and `output_axes` gets the kernel's input and
        output axes unless it has them, so that its fans are those of the
        einsum rather than of a convolution kernel. Any other initialiser
        (the default `RandomNormal` included) is used as it is.
        """
        initializer = self.kernel_initializer
        if not isinstance(initializer, keras.initializers.VarianceScaling):
            return initializer
        config = initializer.get_config()
        if "input_axes" not in config or (
            config["input_axes"] is not None
            and config["output_axes"] is not None
        ):
            return initializer
        config["seed"] = initializer.seed
        config["input_axes"] = self._layout.kernel_input_axes
        config["output_axes"] = self._layout.kernel_output_axes
        return type(initializer).from_config(config)
