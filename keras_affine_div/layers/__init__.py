"""Public layers of keras-affine-div."""

from keras_affine_div.layers.affine_like_conv1d import AffineLikeConv1D
from keras_affine_div.layers.affine_like_conv2d import AffineLikeConv2D
from keras_affine_div.layers.affine_like_conv3d import AffineLikeConv3D
from keras_affine_div.layers.affine_like_dense import AffineLikeDense
from keras_affine_div.layers.affine_like_einsum_dense import (
    AffineLikeEinsumDense,
)
from keras_affine_div.layers.multi_head_attention import (
    AffineLikeMultiHeadAttention,
)
from keras_affine_div.layers.multi_head_attention import (
    NormLikeMultiHeadAttention,
)
from keras_affine_div.layers.norm_like_dense import NormLikeDense
from keras_affine_div.layers.norm_like_einsum_dense import NormLikeEinsumDense
from keras_affine_div.layers.patch_norm_conv1d import PatchNormConv1D
from keras_affine_div.layers.patch_norm_conv2d import PatchNormConv2D
from keras_affine_div.layers.patch_norm_conv3d import PatchNormConv3D

__all__ = [
    "AffineLikeConv1D",
    "AffineLikeConv2D",
    "AffineLikeConv3D",
    "AffineLikeDense",
    "AffineLikeEinsumDense",
    "AffineLikeMultiHeadAttention",
    "NormLikeDense",
    "NormLikeEinsumDense",
    "NormLikeMultiHeadAttention",
    "PatchNormConv1D",
    "PatchNormConv2D",
    "PatchNormConv3D",
]
