import keras

from keras_affine_div import _validation
from keras_affine_div.layers import _base_dense


@keras.saving.register_keras_serializable(package="keras_affine_div")
class NormLikeDense(_base_dense.BaseDivergenceDense):
    """A `Dense` layer fed with L2-normalised inputs: the norm-like correction.

    ```
    y = activation(x / sqrt(|x|^2 + epsilon) @ kernel + bias)
    ```

    with `|x|` the L2 norm of each input vector over the last axis. A plain
    SGD step of size `eta` on this layer moves that sample's output by
    `-eta (1 + |x|^2 / (|x|^2 + epsilon)) dL/dz`, about `-2 eta dL/dz` for
    every sample, instead of `-eta (|x|^2 + 1) dL/dz` for `Dense`. This is
    parameter-free L2 normalisation (RMS normalisation up to a `sqrt(n)`
    scale) followed by an affine map: it projects inputs onto the unit
    sphere, so their radial information is lost. `epsilon` keeps the value
    and the gradient finite at `x = 0`.

    The norm is computed in float32 whatever the dtype policy. A float32
    layer divides the matmul's output, `(x @ kernel) / n + bias`, when it is
    the smaller tensor (`units <= input_dim`); otherwise, and always under
    a mixed-precision policy, it normalises the input first. Gradients flow
    through the norm.

    `NormLikeDense.from_config(dense.get_config())` builds the layer from
    the config of a Keras `Dense`, every argument kept as given, the kernel
    initialiser included. That initialiser (Glorot by default) shrinks this
    layer's outputs by about `sqrt(fan_in)`, so `from_config` warns;
    `keras_affine_div.convert` gives converted layers this layer's default
    instead.

    Args:
        units: Positive integer, dimensionality of the output space.
        epsilon: Positive float added to `|x|^2` before the square root,
            at least `2**-84` (about 5.2e-26), below which the float32
            gradient at `x = 0` overflows. It is small next to `|x|^2` of
            any non-degenerate input (a sum, not a mean, over the
            features). Defaults to `1e-3`.
        activation: Activation function to use. Defaults to `None` (no
            activation).
        use_bias: Boolean, whether the layer uses a bias vector. Defaults to
            `True`.
        kernel_initializer: Initializer for the `kernel` weights matrix.
            Defaults to `None`, which means `RandomNormal(stddev=0.5)`: the
            normalised input has norm 1, so the outputs have a standard
            deviation of about 0.5 at every width and depth (0.5 is the
            scale the kernel-scale pilots chose on validation; see the
            README).
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
    >>> from keras_affine_div.layers import NormLikeDense
    >>> layer = NormLikeDense(4, epsilon=1e-3)
    >>> x = np.ones((2, 3), dtype="float32")
    >>> y1 = keras.ops.convert_to_numpy(layer(x))
    >>> y2 = keras.ops.convert_to_numpy(layer(10.0 * x))  # scale-invariant
    >>> bool(np.allclose(y1, y2, atol=1e-3))
    True

    Reference:
        G. Bird, "The Affine Divergence: Aligning Activation Updates Beyond
        Normalisation", arXiv:2512.22247.
    """

    def __init__(
        self,
        units,
        epsilon=1e-3,
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
        epsilon = _validation.epsilon(epsilon, "epsilon")
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
        self.epsilon = epsilon

    def call(self, inputs):
        outputs = self._divided_matmul(inputs, self.epsilon, divide_bias=False)
        if self.activation is not None:
            outputs = self.activation(outputs)
        return outputs

    def get_config(self):
        config = super().get_config()
        config["epsilon"] = self.epsilon
        return config
