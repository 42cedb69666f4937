"""Measure the affine divergence of any layer in any model.

One plain SGD step of size `eta` on the weights of a layer `z = f(W, x)`
moves the layer's output on sample `i` by `dz_i`, while the step the loss
asks of that activation is `-eta g_i`, with `g_i = dL/dz_i`. For an affine
layer `z = W x + b` and a batch of one, `dz = -eta (|x|^2 + 1) g`: the
sample's effective learning rate is `eta (|x|^2 + 1)`. With a batch of `B`
samples the shared step adds cross terms,

```
dz_i = -eta sum_j K_ij g_j,    K_ij = x_i . x_j + 1
```

(`K_ij = (x_i . x_j + 1) / (n_i n_j)` with `n_i = sqrt(|x_i|^2 + 1)` for
`AffineLikeDense`, whose diagonal is exactly 1). This module measures
`dz_i` against the ideal `-eta g_i` in a real model on a real batch:

- `activation_update_alignment` does it for one layer and returns, per
  sample, the effective learning-rate multiplier `scale` and the `cosine`
  between the two steps, with their summaries (the median and the 10th
  and 90th percentiles of `scale`, which read as multipliers whatever the
  mean).
- `alignment_report` does it for every Dense-like, Conv-like and
  EinsumDense-like layer of a model, one summary row per layer.

For a Dense-like, Conv-like or EinsumDense-like layer, `z` is the
pre-activation output (the affine output the theory speaks of): a layer
built with an `activation` is
measured as if the activation were the next layer of the model, so `g` is
the gradient with respect to its input. Any other layer with trainable
weights is measured at its output.

The weights of the model are never assigned: the functions read them,
evaluate the layer with trial weights in a `keras.StatelessScope` and leave
every variable bitwise as it was, on success and on error.
"""

import dataclasses
import functools
import math
import warnings

import keras
import numpy as np
from keras import ops

from keras_affine_div import _probe
from keras_affine_div import _validation
from keras_affine_div._probe import CONV_LIKE
from keras_affine_div._probe import DENSE_LIKE
from keras_affine_div._probe import EINSUM_LIKE
from keras_affine_div._probe import find_layer as _find_layer
from keras_affine_div._probe import get_loss as _get_loss


@dataclasses.dataclass(frozen=True, eq=False)
class ActivationUpdateAlignment:
    """How one SGD step moved a layer's activations, sample by sample.

    ```
    scale_i  = <dz_i, -eta g_i> / |eta g_i|^2
    cosine_i = <dz_i, -eta g_i> / (|dz_i| |eta g_i|)
    ```

    with `dz_i` the change of sample `i`'s pre-activation output (the output
    for a layer that is neither Dense-like nor Conv-like), flattened over
    positions and channels, and `-eta g_i` its ideal step. `scale` is
    the effective learning-rate multiplier: 1 for every sample means the
    step is exactly aligned; a spread across samples is the affine
    divergence. Entries are `nan` where they are undefined (a sample whose
    ideal step, or actual step for `cosine`, is zero); the summaries skip
    them.

    How to read the summaries of `scale` (all in units of the multiplier,
    so that `eta * median_scale` is the typical sample's effective
    learning rate):

    - `median_scale`: the typical sample's multiplier. 1 is the ideal step.
      On a batch of one, a plain `Dense` or `Conv*D` layer gives its
      nominal `|x|^2 + 1` (`|P|^2 + 1` for a patch: about 3000 for a
      standardised CIFAR-10 image), `AffineLikeDense` and
      `AffineLikeConv*D` give exactly 1, `NormLikeDense` and
      `PatchNormConv*D` about 2.
    - `q10_scale`, `q90_scale`: the 10th and 90th percentiles; about 80%
      of the samples get a multiplier between the two. `q10_scale <= 0`
      means that at least about 10% of the samples' activations moved
      against (or across) the step the loss asked for.
    - `spread_scale = q90_scale - q10_scale`: how much the multiplier
      differs from sample to sample, >= 0. It is 0 when every sample gets
      the same multiplier (any layer on a batch of one, `Dense` included:
      read `median_scale` for the level), and grows with the cross-sample
      terms of a larger batch. `spread_scale / median_scale` is a
      relative spread only when `q10_scale > 0`.

    The quantiles are NumPy's (`np.nanquantile`, linear interpolation
    between the sorted per-sample values): they lie between the smallest
    and the largest `scale_i` whatever the mean, and one outlier moves
    them by at most one rank. `mean_scale`, `std_scale` and `cv_scale`
    remain for continuity but do not have these properties: `scale_i`
    divides by `|eta g_i|^2`, so one sample with an almost zero gradient
    can give a huge value of either sign that drags the mean, and
    `cv_scale = std_scale / |mean_scale|` is meaningless when the mean is
    near 0 (multipliers between -3 and 3 can give a `cv_scale` of 1000).

    Attributes:
        layer_name: str, the name of the layer.
        layer_class: str, the class name of the layer.
        learning_rate: float, the SGD step size `eta`.
        scale: read-only float64 NumPy array of shape `(batch_size,)`.
        cosine: read-only float64 NumPy array of shape `(batch_size,)`.
        input_sq_norm: read-only float64 NumPy array of shape
            `(batch_size,)`: for a Conv-like layer, the mean over output
            positions (and channel groups) of the squared patch norm
            `|P_p|^2` (window x the input channels of a group: what the
            layers of this package divide by); for an EinsumDense-like
            layer, the mean over the positions it keeps of `|x_c|^2`, the
            squared norm of the input entries its equation contracts (what
            the einsum layers of this package divide by); for any other
            layer, `|x_i|^2` of its input over the last axis (averaged over
            the other axes for inputs of rank > 2).

    Example:

    >>> import numpy as np
    >>> from keras_affine_div.diagnostics import ActivationUpdateAlignment
    >>> result = ActivationUpdateAlignment(
    ...     "dense", "Dense", 1e-3, scale=np.array([1.0, 2.0, 3.0, 4.0, 5.0]),
    ...     cosine=np.array([1.0, 0.5, 1.0, 0.5, 1.0]),
    ...     input_sq_norm=np.zeros(5))
    >>> result.median_scale, result.q10_scale, result.q90_scale
    (3.0, 1.4, 4.6)
    >>> result.spread_scale
    3.2
    >>> result.mean_cosine
    0.8

    With a mean multiplier near 0 the quantiles still read as multipliers,
    while `cv_scale` explodes:

    >>> result = ActivationUpdateAlignment(
    ...     "dense", "Dense", 1e-3, scale=np.array([-3.0, -1.0, 1.0, 3.004]),
    ...     cosine=np.ones(4), input_sq_norm=np.zeros(4))
    >>> result.q10_scale, result.median_scale, result.q90_scale
    (-2.4, 0.0, 2.4028)
    >>> round(result.cv_scale)
    2237
    """

    layer_name: str
    layer_class: str
    learning_rate: float
    scale: np.ndarray
    cosine: np.ndarray
    input_sq_norm: np.ndarray

    def __post_init__(self):
        for name in ("scale", "cosine", "input_sq_norm"):
            value = np.array(getattr(self, name), dtype="float64")
            value.setflags(write=False)
            object.__setattr__(self, name, value)

    @property
    def median_scale(self):
        """float: the median of `scale` over the samples where it is defined.

        The typical sample's multiplier: 1 is the ideal step.
        """
        return _nan_summary(np.nanmedian, self.scale)

    @property
    def q10_scale(self):
        """float: the 10th percentile of `scale` (`np.nanquantile`)."""
        return _nan_summary(
            functools.partial(np.nanquantile, q=0.1), self.scale
        )

    @property
    def q90_scale(self):
        """float: the 90th percentile of `scale` (`np.nanquantile`)."""
        return _nan_summary(
            functools.partial(np.nanquantile, q=0.9), self.scale
        )

    @property
    def spread_scale(self):
        """float: `q90_scale - q10_scale`, the 10-90 percentile range, >= 0.

        In units of the multiplier: 0 when every sample gets the same one.
        """
        return self.q90_scale - self.q10_scale

    @property
    def mean_scale(self):
        """float: the mean of `scale` over the samples where it is defined.

        Sensitive to outliers: prefer `median_scale`.
        """
        return _nan_summary(np.nanmean, self.scale)

    @property
    def std_scale(self):
        """float: the (population) standard deviation of `scale`."""
        return _nan_summary(np.nanstd, self.scale)

    @property
    def cv_scale(self):
        """float: the coefficient of variation `std_scale / |mean_scale|`.

        Meaningless when `mean_scale` is near 0, where it grows without
        bound: prefer `spread_scale` and the quantiles.
        """
        mean = self.mean_scale
        if mean == 0:
            return math.nan
        return self.std_scale / abs(mean)

    @property
    def mean_cosine(self):
        """float: the mean of `cosine` over the samples where it is defined."""
        return _nan_summary(np.nanmean, self.cosine)

    def summary(self):
        """The summary numbers as one row of `alignment_report`.

        Returns:
            dict: `layer`, `class` (str), then the floats `median_scale`,
            `q10_scale`, `q90_scale`, `spread_scale`, `mean_cosine`,
            `mean_scale`, `std_scale` and `cv_scale`, in that order (see
            the class docstring for how to read them).
        """
        return {
            "layer": self.layer_name,
            "class": self.layer_class,
            "median_scale": self.median_scale,
            "q10_scale": self.q10_scale,
            "q90_scale": self.q90_scale,
            "spread_scale": self.spread_scale,
            "mean_cosine": self.mean_cosine,
            "mean_scale": self.mean_scale,
            "std_scale": self.std_scale,
            "cv_scale": self.cv_scale,
        }


def activation_update_alignment(model, layer, x, y, loss, learning_rate=1e-3):
    """Measures how one SGD step on `layer` moves its activations.

    On the batch `(x, y)`: computes the layer's output `z` (before its
    activation for a Dense-like, Conv-like or EinsumDense-like layer) and
    the gradient `g = dL/dz` of the model's mean loss `L`, takes one plain
    SGD step of size `learning_rate` on that layer's own trainable weights
    only (the single-layer view of the theory), recomputes `z'`, and
    compares `dz = z' - z` with the ideal step `-learning_rate * g`, sample
    by sample. In formulas, with `x_l` the layer's input:

    ```
    dL/dW = grad_W <g, layer(W, x_l)>
    z'    = layer(W - learning_rate * dL/dW, x_l)
    ```

    `L` is `mean(loss(y, model(x, training=False)))`: inference mode (so
    that dropout and batch statistics do not move), no sample weights, no
    regularisation losses. A `Loss` object reduces with its own reduction
    first (the batch mean by default); the scale of `L` cancels in `scale`
    and `cosine`.

    For a layer that is affine in its weights (`Dense`, `Conv2D` and the
    layers of this package, without LoRA), `dz` is exactly linear in
    `learning_rate`, so `scale` and `cosine` do not depend on it; a larger
    step only reduces the float32 rounding in `z' - z`. Under a mixed or
    low-precision dtype policy `z` and `z'` are in the compute dtype (e.g.
    float16), whose rounding dominates `dz` at small steps: measure a
    float32 copy of the model, or take a larger step.

    Args:
        model: a built `keras.Model` that calls `layer` once per forward
            pass.
        layer: a layer of `model` (nested models included) with trainable
            weights, or its name.
        x: the inputs of a batch, as `model` takes them.
        y: the targets of the same batch, as `loss` takes them.
        loss: a Keras loss name (e.g. `"mse"`), a `keras.losses.Loss` or a
            function `loss(y_true, y_pred)`.
        learning_rate: positive float, the SGD step size. Defaults to
            `1e-3`.

    Returns:
        ActivationUpdateAlignment: the per-sample `scale`, `cosine` and
        `input_sq_norm`, and their summaries.

    Raises:
        TypeError: if `model` is not a `keras.Model`, `layer` is neither a
            layer nor a string, `loss` is not a loss, or `learning_rate` is
            not a number.
        ValueError: if `layer` is not in `model`, has no trainable weights,
            or is not called exactly once by `model(x)`; if `x` and `y` do
            not hold the same number of samples (at least one); if `loss` is
            an unknown name; if `learning_rate` is not finite and > 0.

    Example:

    >>> import numpy as np
    >>> import keras
    >>> from keras_affine_div.diagnostics import activation_update_alignment
    >>> model = keras.Sequential([
    ...     keras.Input((4,)),
    ...     keras.layers.Dense(8, name="hidden"),
    ...     keras.layers.Activation("tanh"),
    ...     keras.layers.Dense(2, name="head"),
    ... ])
    >>> x = np.ones((1, 4), "float32")  # |x|^2 = 4
    >>> y = np.zeros((1, 2), "float32")
    >>> result = activation_update_alignment(model, "hidden", x, y, "mse")
    >>> round(float(result.scale[0]), 2), round(float(result.cosine[0]), 2)
    (5.0, 1.0)
    >>> float(result.input_sq_norm[0])
    4.0
    """
    if not isinstance(model, keras.Model):
        raise TypeError(
            "Received an invalid type for argument `model`. Expected a "
            f"`keras.Model`. Received: model={model!r}"
        )
    layer = _find_layer(model, layer)
    if not layer.trainable_weights:
        raise ValueError(
            "Expected a layer with trainable weights (built, with "
            "`trainable=True`). Received: "
            f"layer={layer.name!r} of class {type(layer).__name__}"
        )
    loss_fn = _get_loss(loss)
    learning_rate = _validation.positive_float(learning_rate, "learning_rate")
    _validation.same_samples(x, y)
    step = _probe.sgd_step(model, layer, x, y, loss_fn, learning_rate)

    batch_size = step.grad.shape[0]
    z = np.asarray(ops.convert_to_numpy(ops.cast(step.z, "float32")), "float64")
    z_new = np.asarray(
        ops.convert_to_numpy(ops.cast(step.z_new, "float32")), "float64"
    )
    dz = (z_new - z).reshape(batch_size, -1)
    ideal = -learning_rate * np.asarray(step.grad, "float64")
    ideal = ideal.reshape(batch_size, -1)
    dot = np.sum(dz * ideal, axis=1)
    ideal_sq = np.sum(np.square(ideal), axis=1)
    dz_norm = np.sqrt(np.sum(np.square(dz), axis=1))
    return ActivationUpdateAlignment(
        layer_name=layer.name,
        layer_class=type(layer).__name__,
        learning_rate=learning_rate,
        scale=_ratio(dot, ideal_sq),
        cosine=_ratio(dot, dz_norm * np.sqrt(ideal_sq)),
        input_sq_norm=_probe.input_sq_norm(layer, step.inputs),
    )


def alignment_report(model, x, y, loss, learning_rate=1e-3):
    """Runs `activation_update_alignment` over the layers of a model.

    Every trainable Dense-like (`Dense`, `AffineLikeDense`, `NormLikeDense`),
    Conv-like (`Conv1D`, `Conv2D`, `Conv3D` and the `AffineLikeConv*D`
    and `PatchNormConv*D` layers of this package) and EinsumDense-like
    (`EinsumDense`, `AffineLikeEinsumDense`, `NormLikeEinsumDense`) layer
    of `model`, nested models included, in the order of `model.layers`,
    and the layers another layer holds (the projections inside a
    `MultiHeadAttention` or a KerasHub transformer layer), named by their
    path (`"mha/query"`); frozen layers are skipped. A quick health check of a whole network: an
    aligned layer has `median_scale` near its nominal multiplier (1 for
    the affine-like layers, `|x|^2 + 1` for a plain `Dense`), a
    `spread_scale` small next to it and `mean_cosine` near 1 (see
    `ActivationUpdateAlignment` for how to read each summary). A layer
    applied at several positions of a sample (a convolution, an
    `EinsumDense` per token) shares one step between them as between the
    samples of a batch: its multiplier is the nominal one only where a
    sample has one position.

    Args:
        model: a built `keras.Model` that calls each of those layers once
            per forward pass.
        x: the inputs of a batch, as `model` takes them.
        y: the targets of the same batch, as `loss` takes them.
        loss: a Keras loss name, a `keras.losses.Loss` or a function
            `loss(y_true, y_pred)`.
        learning_rate: positive float, the SGD step size. Defaults to
            `1e-3`.

    Returns:
        list: one dict per layer (see `ActivationUpdateAlignment.summary`),
        with keys `layer`, `class`, `median_scale`, `q10_scale`,
        `q90_scale`, `spread_scale`, `mean_cosine`, `mean_scale`,
        `std_scale` and `cv_scale`.

    Raises:
        TypeError: as `activation_update_alignment`.
        ValueError: if `model` has no trainable Dense-like, Conv-like or
            EinsumDense-like layer, and as `activation_update_alignment`.

    Example:

    >>> import numpy as np
    >>> import keras
    >>> from keras_affine_div.diagnostics import alignment_report
    >>> from keras_affine_div.layers import AffineLikeDense
    >>> model = keras.Sequential([
    ...     keras.Input((4,)),
    ...     keras.layers.Dense(8, activation="tanh", name="hidden"),
    ...     AffineLikeDense(2, name="head"),
    ... ])
    >>> x = np.ones((1, 4), "float32")  # |x|^2 = 4
    >>> y = np.zeros((1, 2), "float32")
    >>> for row in alignment_report(model, x, y, "mse"):
    ...     print(row["layer"], row["class"], round(row["median_scale"], 2),
    ...           round(row["spread_scale"], 2))
    hidden Dense 5.0 0.0
    head AffineLikeDense 1.0 0.0
    """
    if not isinstance(model, keras.Model):
        raise TypeError(
            "Received an invalid type for argument `model`. Expected a "
            f"`keras.Model`. Received: model={model!r}"
        )
    targets = [
        (name, layer)
        for name, layer in _probe.named_layers(model)
        if isinstance(layer, DENSE_LIKE + CONV_LIKE + EINSUM_LIKE)
        and layer.trainable_weights
    ]
    if not targets:
        raise ValueError(
            "Expected a model with at least one trainable Dense-like, "
            "Conv-like or EinsumDense-like layer. Received: model with "
            "layers "
            f"{[layer.name for layer in _probe.walk_layers(model)]}"
        )
    rows = []
    for name, layer in targets:
        row = activation_update_alignment(
            model, layer, x, y, loss, learning_rate=learning_rate
        ).summary()
        row["layer"] = name
        rows.append(row)
    return rows


def _ratio(numerator, denominator):
    """`numerator / denominator`, `nan` where the denominator is 0."""
    defined = denominator > 0
    safe = np.where(defined, denominator, 1.0)
    return np.where(defined, numerator / safe, np.nan)


def _nan_summary(fn, values):
    """`fn` over the non-`nan` entries as a float, `nan` if there are none."""
    if np.all(np.isnan(values)):
        return math.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return float(fn(values))
