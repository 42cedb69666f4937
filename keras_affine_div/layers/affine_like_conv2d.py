import keras

from keras_affine_div.layers import _base_conv


@keras.saving.register_keras_serializable(package="keras_affine_div")
class AffineLikeConv2D(_base_conv.BaseAffineLikeConv):
    """2D convolution whose activation step matches the SGD step exactly.

    ```
    y_p = activation((kernel . P_p + bias) / sqrt(|P_p|^2 + 1))
    ```

    for every output position `p` with input patch `P_p` (the window at `p`
    across all input channels of its group). This is the affine-like
    correction of the affine divergence carried to convolutions: for an
    output with a single position, one plain SGD step of size `eta` moves it
    by exactly `-eta dL/dz`, where `Conv2D` moves it by
    `-eta (|P|^2 + 1) dL/dz`. It is not a normaliser: it keeps every degree
    of freedom and is smooth at `x = 0`.

    `|P_p|^2` is computed as one extra single-channel convolution of
    `sum_c x_c^2` with a ones kernel (same size, strides, padding and
    dilation; `keras_affine_div.ops.patch_squared_norms`), in float32
    whatever the dtype policy: no patches are ever extracted. Gradients flow
    through the norms.

    Under a 16-bit compute dtype (`"mixed_float16"`, `"bfloat16"`, ...)
    `kernel . P_p` can overflow float16 although `y_p` cannot: the layer
    then convolves `x / s`, `s` a power of two per sample (1 unless that
    product could come near float16's largest value), and multiplies back
    and divides by the norm in float32, casting to the compute dtype once.

    `AffineLikeConv2D.from_config(conv.get_config())` builds the layer from
    the config of a Keras `Conv2D`, every argument kept as given, the kernel
    initialiser included. That initialiser (Glorot by default) shrinks this
    layer's outputs by about `sqrt(fan_in)`, so `from_config` warns;
    `keras_affine_div.convert` gives converted layers this layer's default
    instead.

    Args:
        filters: Positive integer, the number of output filters.
        kernel_size: An integer or a tuple of 2 integers, the height and
            width of the convolution window.
        strides: An integer or a tuple of 2 integers, the strides of the
            convolution. `strides > 1` is incompatible with
            `dilation_rate > 1`. Defaults to `1`.
        padding: `"valid"` (no padding) or `"same"` (zero padding so that the
            output has the input's size when `strides=1`). Zero padding adds
            nothing to the patch norms, as it adds nothing to `W . P_p`.
            Defaults to `"valid"`.
        data_format: `"channels_last"` or `"channels_first"`. Defaults to
            `None`, which means `keras.config.image_data_format()`.
        dilation_rate: An integer or a tuple of 2 integers, the dilation rate
            of the window. Defaults to `1`.
        groups: A positive integer dividing both the input channels and
            `filters`. With `groups > 1` the input is split into `groups`
            channel groups, each convolved with its own `filters // groups`
            filters, and each filter is divided by the norm of its own
            group's patch (window x the channels of its group). Defaults to
            `1`.
        activation: Activation function to use. Defaults to `None` (no
            activation).
        use_bias: Boolean, whether the layer uses a bias vector. Defaults to
            `True`.
        kernel_initializer: Initializer for the convolution kernel. Defaults
            to `None`, which means `RandomNormal(stddev=0.5)`: each patch
            reaches the kernel with a norm of about 1, so the outputs keep
            a standard deviation of about 0.5 through a deep stack, where
            Glorot would shrink them by `sqrt(fan_in)` per layer (0.5 is
            the scale the MLP pilots chose on validation; see the README).
        bias_initializer: Initializer for the bias vector. Defaults to
            `"zeros"`.
        kernel_regularizer: Regularizer function applied to the convolution
            kernel. Defaults to `None`.
        bias_regularizer: Regularizer function applied to the bias vector.
            Defaults to `None`.
        activity_regularizer: Regularizer function applied to the output of
            the layer (its "activation"). Defaults to `None`.
        kernel_constraint: Constraint function applied to the kernel.
            Defaults to `None`.
        bias_constraint: Constraint function applied to the bias vector.
            Defaults to `None`.
        lora_rank: Optional positive integer. If set, the layer implements
            LoRA (Low-Rank Adaptation) of this rank, as Keras' `Conv2D`
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
        inputs: A rank-4 tensor.

    Input shape:
        `(batch_size, height, width, channels)` if
        `data_format="channels_last"`, else
        `(batch_size, channels, height, width)`.

    Output shape:
        `(batch_size, new_height, new_width, filters)` if
        `data_format="channels_last"`, else
        `(batch_size, filters, new_height, new_width)`, as for `Conv2D`.

    Example:

    >>> import numpy as np
    >>> import keras
    >>> from keras_affine_div.layers import AffineLikeConv2D
    >>> layer = AffineLikeConv2D(8, (3, 3), strides=2)
    >>> y = layer(np.zeros((2, 15, 15, 3), dtype="float32"))
    >>> tuple(y.shape)
    (2, 7, 7, 8)
    >>> float(np.abs(keras.ops.convert_to_numpy(y)).max())  # smooth at x = 0
    0.0

    Reference:
        G. Bird, "The Affine Divergence: Aligning Activation Updates Beyond
        Normalisation", arXiv:2512.22247.
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
            rank=2,
            filters=filters,
            kernel_size=kernel_size,
            strides=strides,
            padding=padding,
            data_format=data_format,
            dilation_rate=dilation_rate,
            groups=groups,
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
