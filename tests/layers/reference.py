"""NumPy reference implementations of the four layers, independent of Keras.

The convolutions extract every patch explicitly (what the layers never do)
and compute each output from its own patch, in float64.
"""

import numpy as np


def affine_like_dense(x, kernel, bias):
    x = np.asarray(x, np.float64)
    norm = np.sqrt(np.sum(x**2, axis=-1, keepdims=True) + 1.0)
    return (x @ kernel + bias) / norm


def norm_like_dense(x, kernel, bias, epsilon):
    x = np.asarray(x, np.float64)
    norm = np.sqrt(np.sum(x**2, axis=-1, keepdims=True) + epsilon)
    return (x / norm) @ kernel + bias


def extract_patches(x, kernel_size, strides, padding, dilation_rate):
    """Patches of a NHWC array: shape `(B, out_h, out_w, kh, kw, C)`."""
    batch, height, width, channels = x.shape
    out_sizes, pads = [], []
    for size, k, s, d in zip(
        (height, width), kernel_size, strides, dilation_rate
    ):
        extent = (k - 1) * d + 1
        if padding == "same":
            out = -(-size // s)
            total = max((out - 1) * s + extent - size, 0)
            pads.append((total // 2, total - total // 2))
        else:
            out = (size - extent) // s + 1
            pads.append((0, 0))
        out_sizes.append(out)
    xp = np.pad(x, ((0, 0), pads[0], pads[1], (0, 0)))
    (oh, ow), (kh, kw) = out_sizes, kernel_size
    (sh, sw), (dh, dw) = strides, dilation_rate
    patches = np.zeros((batch, oh, ow, kh, kw, channels), x.dtype)
    for i in range(oh):
        for j in range(ow):
            patches[:, i, j] = xp[
                :,
                i * sh : i * sh + (kh - 1) * dh + 1 : dh,
                j * sw : j * sw + (kw - 1) * dw + 1 : dw,
                :,
            ]
    return patches


def patch_conv2d(
    x,
    kernel,
    bias,
    strides=(1, 1),
    padding="valid",
    data_format="channels_last",
    dilation_rate=(1, 1),
    groups=1,
    offset=1.0,
    bias_inside=True,
):
    """`(W.P + b)/sqrt(|P|^2+offset)` (bias_inside) or `W.P/sqrt(...) + b`.

    `offset=None` gives a plain convolution (no division).
    """
    x = np.asarray(x, np.float64)
    if data_format == "channels_first":
        x = np.transpose(x, (0, 2, 3, 1))
    kernel = np.asarray(kernel, np.float64)
    bias = np.zeros(kernel.shape[-1]) if bias is None else np.asarray(bias)
    patches = extract_patches(
        x, kernel.shape[:2], strides, padding, dilation_rate
    )
    channels, filters = x.shape[-1], kernel.shape[-1]
    cg, fg = channels // groups, filters // groups
    out = np.zeros(patches.shape[:3] + (filters,))
    for g in range(groups):
        p = patches[..., g * cg : (g + 1) * cg]
        f = slice(g * fg, (g + 1) * fg)
        z = np.einsum("bijklc,klcf->bijf", p, kernel[..., f])
        if offset is None:
            out[..., f] = z + bias[f]
            continue
        norm = np.sqrt(np.sum(p**2, axis=(3, 4, 5))[..., None] + offset)
        if bias_inside:
            out[..., f] = (z + bias[f]) / norm
        else:
            out[..., f] = z / norm + bias[f]
    if data_format == "channels_first":
        out = np.transpose(out, (0, 3, 1, 2))
    return out
