"""NumPy reference implementations of the layers, independent of Keras.

The convolutions (1D, 2D and 3D) extract every patch explicitly (what the
layers never do) and compute each output from its own patch, in float64.
The einsum layers take their norms from an einsum of `x**2` with a ones
kernel (what the layers never do either: they reduce over the contracted
axes and lay the result out as the output).
"""

import itertools

import numpy as np


def affine_like_dense(x, kernel, bias):
    x = np.asarray(x, np.float64)
    norm = np.sqrt(np.sum(x**2, axis=-1, keepdims=True) + 1.0)
    return (x @ kernel + bias) / norm


def norm_like_dense(x, kernel, bias, epsilon):
    x = np.asarray(x, np.float64)
    norm = np.sqrt(np.sum(x**2, axis=-1, keepdims=True) + epsilon)
    return (x / norm) @ kernel + bias


def einsum_squared_norms(x, equation, kernel_shape):
    """`|x_c|^2` of every output element of `einsum(equation, x, kernel)`.

    The einsum of `x**2` with a ones kernel: each output element sums the
    squares of exactly the input entries its own einsum term multiplies.
    """
    x = np.asarray(x, np.float64)
    return np.einsum(equation, x**2, np.ones(kernel_shape))


def affine_like_einsum(x, equation, kernel, bias, offset=1.0):
    """`(einsum(x, W) + b) / sqrt(|x_c|^2 + offset)`; `bias` may be 0."""
    x = np.asarray(x, np.float64)
    z = np.einsum(equation, x, np.asarray(kernel, np.float64))
    sq = einsum_squared_norms(x, equation, np.shape(kernel))
    return (z + bias) / np.sqrt(sq + offset)


def norm_like_einsum(x, equation, kernel, bias, epsilon):
    """`einsum(x, W) / sqrt(|x_c|^2 + epsilon) + b`; `bias` may be 0."""
    x = np.asarray(x, np.float64)
    z = np.einsum(equation, x, np.asarray(kernel, np.float64))
    sq = einsum_squared_norms(x, equation, np.shape(kernel))
    return z / np.sqrt(sq + epsilon) + bias


def extract_patches(x, kernel_size, strides, padding, dilation_rate):
    """Patches of a channels_last array, `(B, *out_sizes, *kernel_size, C)`.

    The rank (1, 2 or 3 spatial axes) is `len(kernel_size)`. `"same"` pads
    as TensorFlow does (the extra zero after), `"causal"` (1D) pads
    `dilation * (kernel - 1)` zeros before.
    """
    spatial = x.shape[1:-1]
    out_sizes, pads = [], []
    for size, k, s, d in zip(spatial, kernel_size, strides, dilation_rate):
        extent = (k - 1) * d + 1
        if padding == "same":
            out = -(-size // s)
            total = max((out - 1) * s + extent - size, 0)
            pads.append((total // 2, total - total // 2))
        elif padding == "causal":
            out = -(-size // s)
            pads.append((extent - 1, 0))
        else:
            out = (size - extent) // s + 1
            pads.append((0, 0))
        out_sizes.append(out)
    xp = np.pad(x, [(0, 0), *pads, (0, 0)])
    patches = np.zeros(
        (x.shape[0], *out_sizes, *kernel_size, x.shape[-1]), x.dtype
    )
    for position in itertools.product(*(range(n) for n in out_sizes)):
        window = tuple(
            slice(i * s, i * s + (k - 1) * d + 1, d)
            for i, k, s, d in zip(position, kernel_size, strides, dilation_rate)
        )
        patches[(slice(None), *position)] = xp[(slice(None), *window)]
    return patches


def _to_channels_last(x):
    return np.moveaxis(x, 1, -1)


def _to_channels_first(x):
    return np.moveaxis(x, -1, 1)


def patch_squared_norms(
    x,
    kernel_size,
    strides,
    padding="valid",
    data_format="channels_last",
    dilation_rate=None,
    groups=1,
):
    """`|P_p|^2` per output position and group, in the layout of `x`."""
    x = np.asarray(x, np.float64)
    if data_format == "channels_first":
        x = _to_channels_last(x)
    rank = len(kernel_size)
    dilation_rate = dilation_rate or (1,) * rank
    patches = extract_patches(x, kernel_size, strides, padding, dilation_rate)
    grouped = patches.reshape(patches.shape[:-1] + (groups, -1))
    kernel_axes = tuple(range(1 + rank, 1 + 2 * rank))
    out = np.sum(grouped**2, axis=kernel_axes + (-1,))
    if data_format == "channels_first":
        out = _to_channels_first(out)
    return out


def patch_conv(
    x,
    kernel,
    bias,
    strides=None,
    padding="valid",
    data_format="channels_last",
    dilation_rate=None,
    groups=1,
    offset=1.0,
    bias_inside=True,
):
    """`(W.P + b)/sqrt(|P|^2+offset)` (bias_inside) or `W.P/sqrt(...) + b`.

    For a 1D, 2D or 3D convolution (the rank is `kernel.ndim - 2`);
    `offset=None` gives a plain convolution (no division).
    """
    x = np.asarray(x, np.float64)
    if data_format == "channels_first":
        x = _to_channels_last(x)
    kernel = np.asarray(kernel, np.float64)
    rank = kernel.ndim - 2
    strides = strides or (1,) * rank
    dilation_rate = dilation_rate or (1,) * rank
    bias = np.zeros(kernel.shape[-1]) if bias is None else np.asarray(bias)
    patches = extract_patches(
        x, kernel.shape[:rank], strides, padding, dilation_rate
    )
    channels, filters = x.shape[-1], kernel.shape[-1]
    cg, fg = channels // groups, filters // groups
    positions = patches.shape[: 1 + rank]
    out = np.zeros(positions + (filters,))
    for g in range(groups):
        p = patches[..., g * cg : (g + 1) * cg].reshape(positions + (-1,))
        f = slice(g * fg, (g + 1) * fg)
        z = p @ kernel[..., f].reshape(-1, fg)
        if offset is None:
            out[..., f] = z + bias[f]
            continue
        norm = np.sqrt(np.sum(p**2, axis=-1, keepdims=True) + offset)
        if bias_inside:
            out[..., f] = (z + bias[f]) / norm
        else:
            out[..., f] = z / norm + bias[f]
    if data_format == "channels_first":
        out = _to_channels_first(out)
    return out
