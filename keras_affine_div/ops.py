"""The functional pieces the layers are made of: squared norms, patch norms.

Every layer of `keras_affine_div.layers` divides by `sqrt(|x|^2 + c)`, with
`|x|^2` the squared norm of its input vector (the dense layers) or of the
input patch of each output position (the convolutions). These functions
compute those norms on their own, for inspection, diagnostics or new
layers, with the layers' own code:

- `squared_norm(x)`: `sum(x**2)` over an axis, in one pass over `x` each
  way where the backend does not fuse the plain expression itself.
- `patch_squared_norms(x, kernel_size, ...)`: `|P_p|^2` at every output
  position `p` of a 1D, 2D or 3D convolution, as one extra single-channel
  (per group) convolution of the summed squares with a ones kernel: never
  an explicit extraction of patches.

Both accept backend tensors, NumPy arrays and symbolic `keras.KerasTensor`
inputs (the functional API). They compute in the dtype of their input: the
layers cast to float32 first whatever their dtype policy.
"""

import numbers

import keras

from keras_affine_div import _backend
from keras_affine_div import _conv
from keras_affine_div import _validation


def squared_norm(x, axis=-1, keepdims=False):
    """The squared L2 norm `sum(x**2)` over `axis`, one pass over `x`.

    ```
    squared_norm(x, axis)[i] = sum_j x[i, j]**2      (j runs along `axis`)
    ```

    On TensorFlow (outside XLA) and PyTorch this is the backend's one-pass
    Euclidean norm reduction, squared, with the exact gradient `2 x u`
    (`u` the upstream gradient) written as a custom gradient; on JAX and
    inside XLA-compiled TensorFlow functions it is `sum(square(x))`, which
    XLA fuses. The values agree up to float rounding. Gradients of any
    order are defined.

    Args:
        x: A tensor or array. Integer and boolean inputs are cast to
            `keras.config.floatx()` first.
        axis: An integer, a non-empty tuple of integers, or `None` (every
            axis): the axes to reduce. Defaults to `-1`.
        keepdims: Boolean, whether to keep the reduced axes with size 1.
            Defaults to `False`.

    Returns:
        A tensor of the (floating) dtype of `x`: the shape of `x` without
        the reduced axes, or with size 1 along them if `keepdims`.

    Raises:
        TypeError: if `axis` is not an integer, a tuple of integers or
            `None`, or `keepdims` is not a bool.
        ValueError: if `axis` is an empty tuple or list, or an entry of
            it is out of range for `x` or repeated.

    Example:

    >>> import numpy as np
    >>> import keras
    >>> from keras_affine_div.ops import squared_norm
    >>> x = np.array([[3.0, 4.0], [1.0, 0.0]], dtype="float32")
    >>> keras.ops.convert_to_numpy(squared_norm(x))
    array([25.,  1.], dtype=float32)
    >>> tuple(squared_norm(x, axis=0, keepdims=True).shape)
    (1, 2)
    >>> float(keras.ops.convert_to_numpy(squared_norm(x, axis=None)))
    26.0
    """
    x = _as_float_tensor(x)
    axis = _normalize_axis(axis, len(x.shape))
    keepdims = _validation.boolean(keepdims, "keepdims")
    if isinstance(x, keras.KerasTensor):
        return _SquaredNorm(axis, keepdims).symbolic_call(x)
    return _squared_norm(x, axis, keepdims)


def patch_squared_norms(
    x,
    kernel_size,
    strides=1,
    padding="valid",
    data_format=None,
    dilation_rate=1,
    groups=1,
):
    """The squared norm `|P_p|^2` of the input patch of every output position.

    ```
    |P_p|^2 = sum over the window at p and the channels c of group g of x^2
            = conv(sum_{c in g} x_c^2, ones(kernel_size))[p]
    ```

    For a convolution with these `kernel_size`, `strides`, `padding`,
    `dilation_rate` and `groups`, the patch `P_p` of output position `p` is
    the window at `p` across the input channels of one group: what the
    kernel of that group's filters multiplies. This computes `|P_p|^2` as
    one grouped convolution of the per-group sums of squares (one channel
    per group) with a ones kernel of the same size, strides, padding and
    dilation: never an explicit extraction of patches. Zero padding
    (`"same"`, and `"causal"` on the left of 1D inputs) contributes zeros,
    as it does to the convolution itself. These are the norms
    `PatchNormConv1D`, `AffineLikeConv2D` and the other convolutions of
    `keras_affine_div.layers` divide by.

    Args:
        x: A tensor or array of rank 3, 4 or 5: the input of a 1D, 2D or
            3D convolution. Integer and boolean inputs are cast to
            `keras.config.floatx()` first.
        kernel_size: An integer or a tuple of 1, 2 or 3 integers (one per
            spatial axis), the size of the convolution window.
        strides: An integer or a tuple of integers, the strides of the
            convolution. `strides > 1` is incompatible with
            `dilation_rate > 1`. Defaults to `1`.
        padding: `"valid"`, `"same"` or, for 1D inputs, `"causal"` (zero
            padding on the left only, so that position `t` sees inputs up to
            `t`). Defaults to `"valid"`.
        data_format: `"channels_last"` or `"channels_first"`. Defaults to
            `None`, which means `keras.config.image_data_format()`.
        dilation_rate: An integer or a tuple of integers, the dilation rate
            of the window. Defaults to `1`.
        groups: A positive integer dividing the number of input channels:
            the norm of each group's patch is computed separately. Defaults
            to `1`.

    Returns:
        A tensor of the (floating) dtype of `x`, with the spatial shape of
        the convolution's output and one channel per group:
        `(batch, *output_spatial_shape, groups)` for `"channels_last"`,
        `(batch, groups, *output_spatial_shape)` for `"channels_first"`.

    Raises:
        TypeError: if `kernel_size`, `strides`, `dilation_rate` or `groups`
            are not integers (or tuples of them).
        ValueError: if `x` is not of rank 3, 4 or 5; if an argument is out
            of range or `padding` unknown (`"causal"` with 2D or 3D
            inputs); if `strides > 1` meets `dilation_rate > 1`; if the
            channels are not divisible by `groups`; or if the input is
            smaller than the dilated kernel.

    Example:

    >>> import numpy as np
    >>> import keras
    >>> from keras_affine_div.ops import patch_squared_norms
    >>> x = np.arange(1.0, 6.0, dtype="float32").reshape(1, 5, 1)
    >>> sq = patch_squared_norms(x, 2)  # 1+4, 4+9, 9+16, 16+25
    >>> keras.ops.convert_to_numpy(sq)[0, :, 0]
    array([ 5., 13., 25., 41.], dtype=float32)
    >>> sq = patch_squared_norms(x, 2, padding="causal")  # 0+1 first
    >>> keras.ops.convert_to_numpy(sq)[0, :, 0]
    array([ 1.,  5., 13., 25., 41.], dtype=float32)
    >>> images = np.ones((2, 4, 4, 6), dtype="float32")
    >>> sq = patch_squared_norms(images, 3, groups=2)  # 3 x 3 x 3 ones
    >>> tuple(sq.shape), float(keras.ops.convert_to_numpy(sq)[0, 0, 0, 1])
    ((2, 2, 2, 2), 27.0)
    """
    x = _as_float_tensor(x)
    shape = tuple(x.shape)
    rank = len(shape) - 2
    if rank not in _conv.SPATIAL_AXES:
        raise ValueError(
            "Expected an input of rank 3, 4 or 5 (batch, 1 to 3 spatial "
            "axes, channels, in the order of `data_format`). Received: "
            f"x.shape={shape}"
        )
    (
        kernel_size,
        strides,
        padding,
        data_format,
        dilation_rate,
        groups,
    ) = _conv.check_arguments(
        rank, kernel_size, strides, padding, data_format, dilation_rate, groups
    )
    channels = shape[-1] if data_format == "channels_last" else shape[1]
    if channels is not None and channels % groups != 0:
        raise ValueError(
            "The number of input channels must be divisible by the number "
            f"of groups. Received: groups={groups}, x.shape={shape}, "
            f"data_format={data_format}"
        )
    spatial = shape[1:-1] if data_format == "channels_last" else shape[2:]
    lengths = _conv.output_lengths(
        spatial, kernel_size, strides, padding, dilation_rate
    )
    if any(length is not None and length <= 0 for length in lengths):
        raise ValueError(
            "Expected an input at least as large as the dilated kernel: "
            "the output would be empty. Received: "
            f"x.shape={shape}, kernel_size={kernel_size}, "
            f"dilation_rate={dilation_rate}, padding={padding}"
        )
    arguments = (kernel_size, strides, padding, data_format, dilation_rate)
    if isinstance(x, keras.KerasTensor):
        if data_format == "channels_last":
            out_shape = (shape[0], *lengths, groups)
        else:
            out_shape = (shape[0], groups, *lengths)
        return _PatchSquaredNorms(*arguments, groups, out_shape).symbolic_call(
            x
        )
    return _patch_squared_norms(x, *arguments, groups)


def _squared_norm(x, axis, keepdims):
    squares = _backend.squared_norm(x, axis=axis)
    if keepdims:
        return squares
    return keras.ops.squeeze(
        squares, axis=tuple(range(len(x.shape))) if axis is None else axis
    )


def _patch_squared_norms(
    x, kernel_size, strides, padding, data_format, dilation_rate, groups
):
    """`patch_squared_norms` on standardised arguments and a tensor."""
    if groups == 1:
        channel_axis = -1 if data_format == "channels_last" else 1
        squares = _backend.squared_norm(x, axis=channel_axis)
    else:
        shape = keras.ops.shape(x)
        if data_format == "channels_last":
            grouped = (shape[0], *shape[1:-1], groups, -1)
            squares = _backend.squared_norm(
                keras.ops.reshape(x, grouped), axis=-1
            )
            squares = keras.ops.squeeze(squares, axis=-1)
        else:
            grouped = (shape[0], groups, -1, *shape[2:])
            squares = _backend.squared_norm(
                keras.ops.reshape(x, grouped), axis=2
            )
            squares = keras.ops.squeeze(squares, axis=2)
    if padding == "causal":
        pad_width = _conv.causal_padding(
            kernel_size, dilation_rate, data_format
        )
        squares = keras.ops.pad(squares, pad_width)
        padding = "valid"
    # A ones kernel with one input channel per group: a grouped
    # convolution that sums each group's squares over its window.
    ones = keras.ops.ones(kernel_size + (1, groups), dtype=x.dtype)
    return keras.ops.conv(
        squares,
        ones,
        strides=strides,
        padding=padding,
        data_format=data_format,
        dilation_rate=dilation_rate,
    )


@keras.saving.register_keras_serializable(package="keras_affine_div")
class _SquaredNorm(keras.Operation):
    """`squared_norm` as a node of a functional model."""

    def __init__(self, axis, keepdims, name=None):
        super().__init__(name=name)
        self.axis = tuple(axis) if isinstance(axis, list) else axis
        self.keepdims = keepdims

    def call(self, x):
        return _squared_norm(x, self.axis, self.keepdims)

    def compute_output_spec(self, x):
        rank = len(x.shape)
        axes = range(rank) if self.axis is None else self.axis
        axes = {a % rank for a in ((axes,) if isinstance(axes, int) else axes)}
        if self.keepdims:
            shape = tuple(1 if i in axes else n for i, n in enumerate(x.shape))
        else:
            shape = tuple(n for i, n in enumerate(x.shape) if i not in axes)
        return keras.KerasTensor(shape, dtype=x.dtype)


@keras.saving.register_keras_serializable(package="keras_affine_div")
class _PatchSquaredNorms(keras.Operation):
    """`patch_squared_norms` as a node of a functional model."""

    def __init__(
        self,
        kernel_size,
        strides,
        padding,
        data_format,
        dilation_rate,
        groups,
        output_shape,
        name=None,
    ):
        super().__init__(name=name)
        # Tuples, also when restored from a (JSON) config.
        self.kernel_size = tuple(kernel_size)
        self.strides = tuple(strides)
        self.padding = padding
        self.data_format = data_format
        self.dilation_rate = tuple(dilation_rate)
        self.groups = groups
        self.output_shape = tuple(output_shape)

    def call(self, x):
        return _patch_squared_norms(
            x,
            self.kernel_size,
            self.strides,
            self.padding,
            self.data_format,
            self.dilation_rate,
            self.groups,
        )

    def compute_output_spec(self, x):
        return keras.KerasTensor(self.output_shape, dtype=x.dtype)


def _as_float_tensor(x):
    """`x` as a tensor (backend or symbolic) of a floating dtype."""
    if not (keras.ops.is_tensor(x) or isinstance(x, keras.KerasTensor)):
        x = keras.ops.convert_to_tensor(x)
    if not keras.backend.is_float_dtype(x.dtype):
        x = keras.ops.cast(x, keras.config.floatx())
    return x


def _normalize_axis(axis, rank):
    """`axis` as `None`, an int or a tuple of ints, checked against `rank`."""
    if axis is None:
        return None
    if isinstance(axis, numbers.Integral) and not isinstance(axis, bool):
        entries, single = (int(axis),), True
    elif isinstance(axis, (tuple, list)) and all(
        isinstance(a, numbers.Integral) and not isinstance(a, bool)
        for a in axis
    ):
        entries, single = tuple(int(a) for a in axis), False
    else:
        raise TypeError(
            "Received an invalid type for argument `axis`. Expected an "
            f"integer, a tuple of integers or None. Received: axis={axis!r}"
        )
    if not entries:
        raise ValueError(
            "Received an invalid value for argument `axis`. Expected an "
            "integer, a non-empty tuple of integers or None (every axis). "
            f"Received: axis={axis!r}"
        )
    if any(not -rank <= a < rank for a in entries) or len(
        {a % rank for a in entries}
    ) != len(entries):
        raise ValueError(
            "Received an invalid value for argument `axis`. Expected "
            f"distinct axes in [-{rank}, {rank}) for an input of rank {rank}. "
            f"Received: axis={axis!r}"
        )
    return entries[0] if single else entries
