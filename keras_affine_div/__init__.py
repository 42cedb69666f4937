"""Keras 3 layers that cancel the affine divergence.

One plain SGD step on an affine layer `z = W x + b` moves the activation of
the sample it was computed on by `-eta (|x|^2 + 1) dL/dz` instead of
`-eta dL/dz`. The layers in `keras_affine_div.layers` cancel that factor;
`keras_affine_div.ops` holds the norms they divide by.
"""

from keras_affine_div import callbacks
from keras_affine_div import diagnostics
from keras_affine_div import layers
from keras_affine_div.version import __version__

__all__ = ["callbacks", "diagnostics", "layers", "__version__"]
