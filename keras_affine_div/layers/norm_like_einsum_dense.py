import keras

from keras_affine_div import _validation
from keras_affine_div.layers import _base_einsum


@keras.saving.register_keras_serializable(package="keras_affine_div")
class NormLikeEinsumDense(_base_einsum.BaseDivergenceEinsumDense):
    """An `EinsumDense` layer fed with L2-normalised inputs (norm-like).

    ```
    y = activation(einsum(equation, x / sqrt(|x_c|^2 + epsilon), kernel) + bias)
    ```

    with `x_c` the input entries the equation contracts for each output
    element (the input axes whose letters are not in the output spec, at
    the element's own position along the other axes), as in
    `AffineLikeEinsumDense`: over `c` per token for `"abc,cd->abd"` and
    `"abc,cde->abde"`, over `c` and `d` jointly for `"abcd,cde->abe"`. For
    one sample with one position, a plain SGD step of size `eta` on the
    kernel and a bias with its own entry for every output axis the kernel
    adds moves the output by `-eta (1 + |x_c|^2 / (|x_c|^2 + epsilon))
    dL/dz`, about `-2 eta dL/dz` (`-eta |x_c|^2 / (|x_c|^2 + epsilon)
    dL/dz` without a bias), instead of `EinsumDense`'s
    `-eta (|x_c|^2 + 1) dL/dz`. The positions of one sample share the
    kernel as the samples of a batch do (cross terms). This is
    parameter-free L2 (RMS, up to a constant) normalisation of each
    position's input followed by `EinsumDense`: the radial information is
    lost. `epsilon` keeps the value and the gradient finite at `x = 0`.

    `|x_c|^2` is computed in float32 whatever the dtype policy. A float32
    layer divides the einsum's output, `einsum(x, kernel) / n + bias`, when
    it has no more entries per position than `x_c`; otherwise, and always
    under a mixed-precision policy, it normalises the input first.
    Gradients flow through the norm. The mask of the input passes through
    where the equation keeps the axes it covers (see `compute_mask`).

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
        epsilon: Positive float added to `|x_c|^2` before the square root,
            at least `2**-84` (about 5.2e-26), below which the float32
            gradient at `x = 0` overflows. Defaults to `1e-3`.
        activation: Activation function to use. Defaults to `None` (no
            activation).
        bias_axes: A string of the output letters to apply a bias to, as
            for `EinsumDense`. Defaults to `None` (no bias).
        kernel_initializer: Initializer for the `kernel` weights.
            Defaults to `None`, which means `RandomNormal(stddev=0.5)`, the
            default of `NormLikeDense`: the normalised input has norm 1 per
            position, so the outputs have a standard deviation of about 0.5.
            A `VarianceScaling` initialiser (Glorot, He) gets the kernel's
            input and output axes, as in `EinsumDense`.
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
            lora_kernel_b) * (lora_alpha / lora_rank)` on the normalised
            input. LoRA can also be enabled on a built layer with
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
    >>> from keras_affine_div.layers import NormLikeEinsumDense
    >>> output = NormLikeEinsumDense(
    ...     "abcd,cde->abe", output_shape=(None, 6), bias_axes="e"
    ... )
    >>> x = np.ones((2, 5, 3, 4), dtype="float32")
    >>> y1 = keras.ops.convert_to_numpy(output(x))
    >>> y2 = keras.ops.convert_to_numpy(output(10.0 * x))  # scale-invariant
    >>> y1.shape, bool(np.allclose(y1, y2, atol=1e-3))
    ((2, 5, 6), True)

    Reference:
        G. Bird, "The Affine Divergence: Aligning Activation Updates Beyond
        Normalisation", arXiv:2512.22247.
    """

    def __init__(
        self,
        equation,
        output_shape,
        epsilon=1e-3,
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
        epsilon = _validation.epsilon(epsilon, "epsilon")
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
        self.epsilon = epsilon

    def call(self, inputs):
        outputs = self._divided_einsum(inputs, self.epsilon, divide_bias=False)
        if self.activation is not None:
            outputs = self.activation(outputs)
        return outputs

    def get_config(self):
        config = super().get_config()
        config["epsilon"] = self.epsilon
        return config
