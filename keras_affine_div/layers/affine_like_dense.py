import keras

from keras_affine_div.layers import _base_dense


@keras.saving.register_keras_serializable(package="keras_affine_div")
class AffineLikeDense(_base_dense.BaseDivergenceDense):
    """A `Dense` layer whose activation step matches the SGD step exactly.

    ```
    y = activation((x @ kernel + bias) / sqrt(|x|^2 + 1))
    ```

    with `|x|` the L2 norm of each input vector over the last axis. One plain
    SGD step of size `eta` on a `Dense` layer moves that sample's output by
    `-eta (|x|^2 + 1) dL/dz`: every sample gets its own effective learning
    rate. Dividing the whole affine map by `sqrt(|x|^2 + 1)` cancels the
    factor: the step becomes exactly `-eta dL/dz`. Unlike a normaliser the
    layer is not scale-invariant and keeps every degree of freedom (it is the
    L2 normalisation of the augmented vector `[x, 1]` followed by an affine
    map), and it has no singularity at `x = 0`.

    `n = sqrt(|x|^2 + 1)` is taken in float32 whatever the dtype policy.
    A float32 layer divides the matmul's output when it is the smaller
    tensor (`units <= input_dim`); otherwise, and always under
    `mixed_float16` or `mixed_bfloat16`, the layer computes
    `(x / n) @ kernel + bias / n`, so that a large input cannot overflow.
    Gradients flow through `n`.

    `AffineLikeDense.from_config(dense.get_config())` builds the layer from
    the config of a Keras `Dense`, every argument kept as given, the kernel
    initialiser included. That initialiser (Glorot by default) shrinks this
    layer's outputs by about `sqrt(fan_in)`, so `from_config` warns;
    `keras_affine_div.convert` gives converted layers this layer's default
    instead.

    Args:
        units: Positive integer, dimensionality of the output space.
        activation: Activation function to use. Defaults to `None` (no
            activation).
        use_bias: Boolean, whether the layer uses a bias vector. Defaults to
            `True`.
        kernel_initializer: Initializer for the `kernel` weights matrix.
            Defaults to `None`, which means `RandomNormal(stddev=0.5)`: the
            input reaches the kernel with a norm of about 1, so the outputs
            keep a standard deviation of about 0.5 through a deep stack,
            where Glorot would shrink them by `sqrt(fan_in)` per layer (0.5
            is the scale the kernel-scale pilots chose on validation; see
            the README).
        bias_initializer: Initializer for the bias vector. Defaults to
            `"zeros"`.
        kernel_regularizer: Regularizer function applied to the `kernel`
            weights matrix. Defaults to `None`.
        bias_regularizer: Regularizer function applied to the bias vector.
            Defaults to `None`.
        activity_regularizer: Regularizer function applied to the output of
            the layer (its "activation"). Defaults to `None`.
        kernel_constraint: Constraint function applied to the `kernel`
            weights matrix. Defaults to `None`.
        bias_constraint: Constraint function applied to the bias vector.
            Defaults to `None`.
        lora_rank: Optional positive integer. If set, the layer implements
            LoRA (Low-Rank Adaptation) of this rank, as Keras' `Dense`
            does: the kernel is frozen and the layer applies
            `kernel + (lora_kernel_a @ lora_kernel_b) * (lora_alpha /
            lora_rank)` inside the same division, training the two
            low-rank matrices (and the bias) only. LoRA can also be enabled
            on a built layer with `layer.enable_lora(rank)`. Defaults to
            `None`.
        lora_alpha: Optional positive number scaling the low-rank update by
            `lora_alpha / lora_rank`. Defaults to `None`, which means
            `lora_rank` (a scale of 1).
        **kwargs: Base layer keyword arguments, such as `name` and `dtype`.
            `quantization_config`, a key of Keras' `Dense` config, is
            accepted and must be `None`: quantization is not
            implemented.

    Call arguments:
        inputs: A tensor of rank >= 2.

    Input shape:
        N-D tensor with shape `(batch_size, ..., input_dim)`.

    Output shape:
        N-D tensor with shape `(batch_size, ..., units)`.

    Example:

    >>> import numpy as np
    >>> import keras
    >>> from keras_affine_div.layers import AffineLikeDense
    >>> layer = AffineLikeDense(4, activation="tanh")
    >>> y = layer(np.ones((2, 3), dtype="float32"))
    >>> tuple(y.shape)
    (2, 4)
    >>> tuple(layer.kernel.shape), tuple(layer.bias.shape)
    ((3, 4), (4,))

    Reference:
        G. Bird, "The Affine Divergence: Aligning Activation Updates Beyond
        Normalisation", arXiv:2512.22247.
    """

    def __init__(
        self,
        units,
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
        super().__init__(
            units=units,
            activation=activation,
            use_bias=use_bias,
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
        outputs = self._divided_matmul(inputs, 1.0, divide_bias=True)
        if self.activation is not None:
            outputs = self.activation(outputs)
        return outputs
