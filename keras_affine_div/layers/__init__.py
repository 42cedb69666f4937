"""Public layers of keras-affine-div."""

from keras_affine_div.layers.affine_like_conv2d import AffineLikeConv2D
from keras_affine_div.layers.affine_like_dense import AffineLikeDense
from keras_affine_div.layers.norm_like_dense import NormLikeDense
from keras_affine_div.layers.patch_norm_conv2d import PatchNormConv2D

__all__ = [
    "AffineLikeConv2D",
    "AffineLikeDense",
    "NormLikeDense",
    "PatchNormConv2D",
]
