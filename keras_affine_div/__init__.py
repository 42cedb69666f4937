"""Keras 3 layers that cancel the affine divergence.

One plain SGD step on an affine layer `z = W x + b` moves the activation of
the sample it was computed on by `-eta (|x|^2 + 1) dL/dz` instead of
`-eta dL/dz`. The layers in `keras_affine_div.layers` cancel that factor;
`keras_affine_div.ops` holds the norms they divide by,
`keras_affine_div.models` the MLPs and CNNs built from them and
`keras_affine_div.datasets` the data the studies train on;
`keras_affine_div.convert(model)` rebuilds a Keras model with the package's
layers in place of its `Dense` and `Conv*D` layers, and
`with keras_affine_div.layers_of(kind):` builds any model (attention and
KerasHub backbones included) with them inside. The KerasTuner
hypermodels, `keras_affine_div.hypermodels`, need KerasTuner and are
imported on their own.
"""

from keras_affine_div import callbacks
from keras_affine_div import datasets
from keras_affine_div import diagnostics
from keras_affine_div import layers
from keras_affine_div import models
from keras_affine_div import ops
from keras_affine_div.convert import convert
from keras_affine_div.scope import layers_of
from keras_affine_div.version import __version__

__all__ = [
    "callbacks",
    "convert",
    "datasets",
    "diagnostics",
    "layers",
    "layers_of",
    "models",
    "ops",
    "__version__",
]
