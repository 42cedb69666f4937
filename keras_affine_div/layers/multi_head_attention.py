"""`MultiHeadAttention` whose projections are the package's einsum layers.

`AffineLikeMultiHeadAttention` is Keras' `MultiHeadAttention` with every
projection (query, key, value, the gate if any, and the output) an
`AffineLikeEinsumDense`; `NormLikeMultiHeadAttention` uses
`NormLikeEinsumDense`. The attention itself (scores, softmax, dropout,
masks, caches) is Keras', unchanged; so are the arguments, the weights'
names and shapes and the config. The projections' kernel initialiser
defaults to the package's, `RandomNormal(stddev=0.5)`, instead of Keras'
`GlorotUniform`.
"""

import keras

from keras_affine_div import _keras_internals
from keras_affine_div import _stand_in
from keras_affine_div.layers import _base
from keras_affine_div.layers.affine_like_einsum_dense import (
    AffineLikeEinsumDense,
)
from keras_affine_div.layers.norm_like_einsum_dense import NormLikeEinsumDense

# Keras' own class, bound when the package is imported: inside a
# `layers_of` block `keras.layers.EinsumDense` is a stand-in.
_EINSUM_DENSE = keras.layers.EinsumDense


class _DivergenceMultiHeadAttention(keras.layers.MultiHeadAttention):
    """Builds Keras' attention with `_PROJECTION` for its projections."""

    _PROJECTION = None

    def __init__(self, num_heads, key_dim, kernel_initializer=None, **kwargs):
        if kernel_initializer is None:
            kernel_initializer = _base.default_kernel_initializer()
        super().__init__(
            num_heads, key_dim, kernel_initializer=kernel_initializer, **kwargs
        )

    def build(self, query_shape, value_shape, key_shape=None):
        projection = _stand_in.stand_in(
            _EINSUM_DENSE, self._PROJECTION, keep_initializer=True
        )
        with _keras_internals.attention_projections(projection):
            super().build(query_shape, value_shape, key_shape)


@keras.saving.register_keras_serializable(package="keras_affine_div")
class AffineLikeMultiHeadAttention(_DivergenceMultiHeadAttention):
    """`MultiHeadAttention` with `AffineLikeEinsumDense` projections.

    Takes every argument of `keras.layers.MultiHeadAttention`; its query,
    key, value (and gate) projections and its output projection are
    `AffineLikeEinsumDense` layers, each dividing its `W x + b` by
    `sqrt(|x|^2 + 1)` over the axes it contracts (a token's features for
    the first three, a token's heads and head features for the output).

    Args:
        num_heads: Number of attention heads.
        key_dim: Size of each attention head for query and key.
        kernel_initializer: Initializer of the projections' kernels.
            Defaults to `None`: the package's `RandomNormal(stddev=0.5)`.
        **kwargs: Every other argument of
            `keras.layers.MultiHeadAttention`.

    Example:

    >>> import numpy as np
    >>> from keras_affine_div.layers import AffineLikeMultiHeadAttention
    >>> layer = AffineLikeMultiHeadAttention(num_heads=2, key_dim=4)
    >>> x = np.ones((1, 3, 8), "float32")
    >>> tuple(layer(x, x).shape)
    (1, 3, 8)
    >>> type(layer.query_dense).__name__
    'AffineLikeEinsumDense'
    """

    _PROJECTION = AffineLikeEinsumDense


@keras.saving.register_keras_serializable(package="keras_affine_div")
class NormLikeMultiHeadAttention(_DivergenceMultiHeadAttention):
    """`MultiHeadAttention` with `NormLikeEinsumDense` projections.

    As `AffineLikeMultiHeadAttention`, with each projection feeding its
    kernel `x / sqrt(|x|^2 + epsilon)` (`NormLikeEinsumDense`'s default
    `epsilon`).

    Example:

    >>> import numpy as np
    >>> from keras_affine_div.layers import NormLikeMultiHeadAttention
    >>> layer = NormLikeMultiHeadAttention(num_heads=2, key_dim=4)
    >>> x = np.ones((1, 3, 8), "float32")
    >>> tuple(layer(x, x).shape)
    (1, 3, 8)
    >>> type(layer.output_dense).__name__
    'NormLikeEinsumDense'
    """

    _PROJECTION = NormLikeEinsumDense
