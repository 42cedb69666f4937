import keras

from keras_affine_div.layers import _base_einsum


@keras.saving.register_keras_serializable(package="keras_affine_div")
class AffineLikeEinsumDense(_base_einsum.BaseDivergenceEinsumDense):
    """An `EinsumDense` layer whose activation step matches the SGD step.

    ```
    y = activation((einsum(equation, x, kernel) + bias) / sqrt(|x_c|^2 + 1))
    ```

    Each output element of the einsum is an affine function of the input
    entries `x_c` that the equation contracts for it: the input axes whose
    letters are not in the output spec, at the element's own position
    along the other input axes. `|x_c|^2` is their sum of squares, one
    value per kept input position, broadcast to the output:

    - `"abc,cd->abd"` (a `Dense` per token): over `c`, per `(a, b)`;
    - `"abc,cde->abde"` (`MultiHeadAttention`'s query, key and value
      projections, kernel `(dim, heads, head_dim)`): over `c`, per
      `(a, b)`;
    - `"abcd,cde->abe"` (its output projection, kernel
      `(heads, head_dim, dim)`): over `c` and `d` jointly, per `(a, b)`;
    - an axis in the input, kernel and output (a kernel per position) is
      kept: the norm is per position along it. With nothing contracted
      (`"ab,b->ab"`) `|x_c|^2` is `x**2` itself.

    The equation, `output_shape` and `bias_axes` are those of Keras'
    `EinsumDense`, with the same kernel and bias shapes; every contracted
    input axis must also be a kernel axis.

    The exact identity: for one sample with one position (one input of
    the affine map), one plain SGD step of size `eta` on the kernel and a
    bias with its own entry for every output axis the kernel adds (as
    `MultiHeadAttention` gives its projections) moves the layer's output
    before the activation by exactly `-eta dL/dz`, where `EinsumDense`
    moves it by `-eta (|x_c|^2 + 1) dL/dz`. The `1` is the bias's constant
    input. With several positions per sample (tokens), the positions
    share the kernel as the samples of a batch do: position `t` moves by

    ```
    dz_t = -eta sum_s (x_s . x_t + 1) / (n_s n_t) g_s,  n_t = sqrt(|x_t|^2 + 1)
    ```

    its own term exactly `-eta g_t`, plus cross terms weighted by the
    cosine of the augmented inputs `[x_s, 1]` and `[x_t, 1]` (positions
    along an axis of the kernel do not share it and add none). Without a
    bias (`bias_axes=None`, Keras' default) the divisor stays
    `sqrt(|x_c|^2 + 1)`, as for `AffineLikeDense(use_bias=False)`: the
    layer is the biased one with its bias fixed at zero, and one position
    moves by `-eta |x_c|^2 / (|x_c|^2 + 1) dL/dz`. A bias shared along an
    output axis of the kernel (`bias_axes` without it) couples the
    outputs along that axis the same way.

    `|x_c|^2` is taken in float32 whatever the dtype policy. A float32
    layer divides the einsum's output when it has no more entries per
    position than `x_c`; otherwise, and always under `mixed_float16` or
    `mixed_bfloat16`, the layer computes
    `einsum(x / n, kernel) + bias / n`, so that a large input cannot
    overflow. Gradients flow through `n`. The mask of the input passes
    through where the equation keeps the axes it covers (see
    `compute_mask`).

    `AffineLikeEinsumDense.from_config(einsum_dense.get_config())` builds the layer
    from the config of a Keras `EinsumDense`, every argument kept as given,
    the kernel initialiser included. That initialiser (Glorot by default)
    shrinks this layer's outputs by about `sqrt(fan_in)`, so `from_config`
    warns; `keras_affine_div.convert` gives converted layers this layer's
    default instead.

    Args:
        equation: An equation describing the einsum to perform, of the
            form `"ab,bc->ac"`, `"...ab,bc->...ac"` or `"ab...,bc->ac..."`,
            as for `EinsumDense`. The first letter (without a leading
            `...`) is the batch axis; every input letter missing from the
            output must be a kernel letter.
        output_shape: The expected shape of the output tensor, excluding
            the batch axis and the axes of `...`: an integer or a tuple,
            with `None` for a size the input defines.
        activation: Activation function to use. Defaults to `None` (no
            activation).
        bias_axes: A string of the output letters to apply a bias to, as
            for `EinsumDense`. Defaults to `None` (no bias; see above).
        kernel_initializer: Initializer for the `kernel` weights.
            Defaults to `None`, which means `RandomNormal(stddev=0.5)`, the
            default of `AffineLikeDense`: `x_c` reaches the kernel with a
            norm of about 1, so the outputs keep a standard deviation of
            about 0.5 through a deep stack. A `VarianceScaling` initialiser
            (Glorot, He) gets the kernel's input and output axes, as in
            `EinsumDense`.
        bias_initializer: Initializer for the bias. Defaults to `"zeros"`.
        kernel_regularizer: Regularizer function applied to the `kernel`
            weights. Defaults to `None`.
        bias_regularizer: Regularizer function applied to the bias.
            Defaults to `None`.
        activity_regularizer: Regularizer function applied to the output of
            the layer (its "activation"). Defaults to `None`.
        kernel_constraint: Constraint function applied to the `kernel`
            weights. Defaults to `None`.
        bias_constraint: Constraint function applied to the bias. Defaults
            to `None`.
        lora_rank: Optional positive integer. If set, the layer implements
            LoRA (Low-Rank Adaptation) of this rank, as Keras' `EinsumDense`
            does (the factorisation on the kernel's last axis): the kernel
            is frozen and the layer applies `kernel + (lora_kernel_a @
            lora_kernel_b) * (lora_alpha / lora_rank)` inside the same
            division. LoRA can also be enabled on a built layer with
            `layer.enable_lora(rank)`. Defaults to `None`.
        lora_alpha: Optional positive number scaling the low-rank update by
            `lora_alpha / lora_rank`. Defaults to `None`, which means
            `lora_rank` (a scale of 1).
        **kwargs: Base layer keyword arguments, such as `name` and `dtype`.
            `quantization_config` and `gptq_unpacked_column_size`, keys of
            Keras' `EinsumDense` config, are accepted and must be `None`,
            and a quantized dtype policy raises: quantization is not
            implemented.

    Call arguments:
        inputs: A tensor whose rank fits the equation.

    Input shape:
        A tensor with one axis per letter of the equation's input spec
        (and any number for `...`).

    Output shape:
        The batch axis, then `output_shape` (with the sizes the input
        defines where it has `None`), and the axes of `...` where the
        equation puts them.

    Example:

    >>> import numpy as np
    >>> import keras
    >>> from keras_affine_div.layers import AffineLikeEinsumDense
    >>> query = AffineLikeEinsumDense(
    ...     "abc,cde->abde", output_shape=(None, 2, 4), bias_axes="de"
    ... )
    >>> y = query(np.ones((3, 5, 8), dtype="float32"))
    >>> tuple(y.shape)
    (3, 5, 2, 4)
    >>> tuple(query.kernel.shape), tuple(query.bias.shape)
    ((8, 2, 4), (2, 4))

    Reference:
        G. Bird, "The Affine Divergence: Aligning Activation Updates Beyond
        Normalisation", arXiv:2512.22247.
    """

    def __init__(
        self,
        equation,
        output_shape,
        activation=None,
        bias_axes=None,
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
        super().__init__(
            equation=equation,
            output_shape=output_shape,
            activation=activation,
            bias_axes=bias_axes,
            kernel_initializer=kernel_initializer,
            bias_initializer=bias_initializer,
            kernel_regularizer=kernel_regularizer,
            bias_regularizer=bias_regularizer,
            activity_regularizer=activity_regularizer,
            kernel_constraint=kernel_constraint,
            bias_constraint=bias_constraint,
            lora_rank=lora_rank,
            lora_alpha=lora_alpha,
            **kwargs,
        )

    def call(self, inputs):
        outputs = self._divided_einsum(inputs, 1.0, divide_bias=True)
        if self.activation is not None:
            outputs = self.activation(outputs)
        return outputs
