"""The benchmark's own layers: the input scale and two naive PatchNorms.

Not part of the library: `InputScale` starts every benchmark model, and
the naive PatchNorms show what materialising the patches costs.
"""

import keras
from keras import ops


class InputScale(keras.layers.Layer):
    """A trainable per-feature scale, `x * s` with `s` initialised to ones.

    Every benchmark model starts with one, so that its training step
    computes the gradient with respect to the measured layer's input, as it
    would inside a network (the batch itself needs no gradient, and the
    backends skip what nobody needs). It costs every model the same.
    """

    def build(self, input_shape):
        self.scale = self.add_weight(
            name="scale", shape=(input_shape[-1],), initializer="ones"
        )

    def call(self, inputs):
        return inputs * self.scale


class NaivePatchNorm(keras.layers.Layer):
    """PatchNorm from explicit patches; subclasses say how they get them.

    Computes exactly `PatchNormConv2D` (3x3 and larger windows, stride 1,
    channels_last, groups=1): it materialises every patch, `(batch, height,
    width, kh * kw * channels)`, then takes the norms and a matmul with the
    flattened kernel.
    """

    def __init__(
        self, filters, kernel_size, padding="same", epsilon=1e-3, **kwargs
    ):
        super().__init__(**kwargs)
        self.filters = filters
        self.kernel_size = kernel_size
        self.padding = padding
        self.epsilon = epsilon

    def build(self, input_shape):
        self.kernel = self.add_weight(
            name="kernel",
            shape=(
                self.kernel_size,
                self.kernel_size,
                input_shape[-1],
                self.filters,
            ),
            initializer=keras.initializers.RandomNormal(stddev=1.0),
        )
        self.bias = self.add_weight(
            name="bias", shape=(self.filters,), initializer="zeros"
        )

    def call(self, inputs):
        patches = self._patches(inputs)
        sq_norms = ops.sum(
            ops.square(ops.cast(patches, "float32")),
            axis=-1,
            keepdims=True,
        )
        kernel = ops.reshape(self.kernel, (-1, self.filters))
        outputs = ops.matmul(patches, kernel)
        outputs = outputs * ops.cast(
            ops.rsqrt(sq_norms + self.epsilon), outputs.dtype
        )
        return outputs + self.bias

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[:-1]) + (self.filters,)

    def get_config(self):
        return {
            **super().get_config(),
            "filters": self.filters,
            "kernel_size": self.kernel_size,
            "padding": self.padding,
            "epsilon": self.epsilon,
        }

    def _patches(self, inputs):
        raise NotImplementedError


class NaivePatchNormExtractPatches(NaivePatchNorm):
    """Patches from `keras.ops.image.extract_patches`."""

    def _patches(self, inputs):
        return ops.image.extract_patches(
            inputs,
            size=self.kernel_size,
            strides=1,
            padding=self.padding,
            data_format="channels_last",
        )


class NaivePatchNormSlices(NaivePatchNorm):
    """Patches as `kh * kw` shifted slices, concatenated."""

    def _patches(self, inputs):
        k = self.kernel_size
        height, width = inputs.shape[1], inputs.shape[2]
        if self.padding == "same":
            before = (k - 1) // 2
            inputs = ops.pad(
                inputs,
                (
                    (0, 0),
                    (before, k - 1 - before),
                    (before, k - 1 - before),
                    (0, 0),
                ),
            )
        else:
            height, width = height - k + 1, width - k + 1
        shifted = [
            inputs[:, i : i + height, j : j + width, :]
            for i in range(k)
            for j in range(k)
        ]
        return ops.concatenate(shifted, axis=-1)


# The naive PatchNorms by how they get their patches.
NAIVE_PATCH_NORMS = {
    "extract_patches": NaivePatchNormExtractPatches,
    "slices": NaivePatchNormSlices,
}
