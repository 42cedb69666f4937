"""The geometry of a rank-generic convolution (private).

Shared by `keras_affine_div.ops.patch_squared_norms` and the convolutional
layers, so that both accept the same arguments, agree on output shapes and
pad causal inputs alike.
"""

import keras

from keras_affine_div import _validation

# The spatial axes of a convolution's input, by rank, for error messages.
SPATIAL_AXES = {1: "steps", 2: "height, width", 3: "depth, height, width"}


def check_arguments(
    rank, kernel_size, strides, padding, data_format, dilation_rate, groups
):
    """Standardises the window arguments of a `rank`-D convolution.

    Args:
        rank: 1, 2 or 3, the number of spatial axes.
        kernel_size: an integer or a tuple of `rank` integers.
        strides: an integer or a tuple of `rank` integers.
        padding: `"valid"`, `"same"` or (`rank == 1` only) `"causal"`, in
            any case.
        data_format: `"channels_last"`, `"channels_first"` or `None`
            (`keras.config.image_data_format()`).
        dilation_rate: an integer or a tuple of `rank` integers.
        groups: a positive integer.

    Returns:
        tuple: `(kernel_size, strides, padding, data_format, dilation_rate,
        groups)`: tuples of `rank` ints, lower-case strings and an int.

    Raises:
        TypeError: for arguments of the wrong type.
        ValueError: for values out of range, and for `strides > 1` together
            with `dilation_rate > 1`.
    """
    kernel_size = _validation.int_tuple(kernel_size, rank, "kernel_size")
    strides = _validation.int_tuple(strides, rank, "strides")
    dilation_rate = _validation.int_tuple(dilation_rate, rank, "dilation_rate")
    allowed = ("valid", "same", "causal") if rank == 1 else ("valid", "same")
    padding = _validation.one_of(padding, allowed, "padding", lower=True)
    if data_format is None:
        data_format = keras.config.image_data_format()
    data_format = _validation.one_of(
        data_format,
        ("channels_last", "channels_first"),
        "data_format",
        lower=True,
    )
    groups = _validation.positive_int(groups, "groups")
    if max(strides) > 1 and max(dilation_rate) > 1:
        raise ValueError(
            "`strides > 1` is not supported together with "
            "`dilation_rate > 1`. Received: "
            f"strides={strides}, dilation_rate={dilation_rate}"
        )
    return kernel_size, strides, padding, data_format, dilation_rate, groups


def output_lengths(spatial_shape, kernel_size, strides, padding, dilation_rate):
    """The output length of a convolution along each spatial axis.

    Args:
        spatial_shape: the input's spatial sizes (`None` where unknown).
        kernel_size: tuple of ints, one per spatial axis.
        strides: tuple of ints.
        padding: `"valid"`, `"same"` or `"causal"`.
        dilation_rate: tuple of ints.

    Returns:
        list: one int per axis (`<= 0` for an input smaller than the dilated
        kernel), or `None` where the input's size is unknown.
    """
    lengths = []
    for size, k, s, d in zip(
        spatial_shape, kernel_size, strides, dilation_rate
    ):
        if size is None:
            lengths.append(None)
        elif padding in ("same", "causal"):
            lengths.append(-(-size // s))
        else:
            lengths.append((size - d * (k - 1) - 1) // s + 1)
    return lengths


def causal_padding(kernel_size, dilation_rate, data_format):
    """The `keras.ops.pad` widths of a causal 1D convolution: left only.

    The layers pad their input with it and `patch_squared_norms` the summed
    squares, so that the kernel and the patch norm see the same zeros.

    Args:
        kernel_size: tuple of one int.
        dilation_rate: tuple of one int.
        data_format: `"channels_last"` or `"channels_first"`.

    Returns:
        list: `[[0, 0], [left, 0], [0, 0]]` in the order of `data_format`,
        with `left = dilation_rate * (kernel_size - 1)`.
    """
    left = dilation_rate[0] * (kernel_size[0] - 1)
    if data_format == "channels_last":
        return [[0, 0], [left, 0], [0, 0]]
    return [[0, 0], [0, 0], [left, 0]]
