"""Keras callbacks that watch the affine divergence during training.

`AlignmentMonitor` runs `diagnostics.alignment_report` on a fixed probe
batch at the end of every n-th epoch, with the optimizer's learning rate of
the moment, and writes each measured layer's summaries into the epoch's
`logs`:

```
alignment/<layer name>/median_scale  the typical effective step multiplier
alignment/<layer name>/q10_scale     its 10th percentile over the probe batch
alignment/<layer name>/q90_scale     its 90th percentile
alignment/<layer name>/spread_scale  q90_scale - q10_scale
alignment/<layer name>/mean_scale    its mean (pulled by outlying samples)
alignment/<layer name>/mean_cosine   the mean cosine of actual and ideal step
```

so that `History`, `CSVLogger` and `TensorBoard` record them next to the
loss. The model's weights are read, never assigned.
"""

import math
import warnings

import keras
import numpy as np

from keras_affine_div import _keras_internals
from keras_affine_div import _validation
from keras_affine_div import diagnostics

LOG_PREFIX = "alignment"
LOG_SUMMARIES = (
    "median_scale",
    "q10_scale",
    "q90_scale",
    "spread_scale",
    "mean_scale",
    "mean_cosine",
)


class AlignmentMonitor(keras.callbacks.Callback):
    """Logs the activation-update alignment of a model's layers per epoch.

    At the end of every `every_n_epochs`-th epoch (the 2nd, 4th, ... for
    `every_n_epochs=2`: those whose `epoch + 1` is a multiple of
    `every_n_epochs`, with Keras' `epoch` index, which counts from 0, or
    from `initial_epoch`), measures one plain SGD step of size `eta` (the
    optimizer's current learning rate) on each layer, on the probe batch
    `(x, y)`, as `diagnostics.alignment_report` does, and writes into that
    epoch's `logs`, for each measured layer:

    ```
    alignment/<layer name>/median_scale = median_i scale_i
    alignment/<layer name>/q10_scale    = 10th percentile_i scale_i
    alignment/<layer name>/q90_scale    = 90th percentile_i scale_i
    alignment/<layer name>/spread_scale = q90_scale - q10_scale
    alignment/<layer name>/mean_scale   = mean_i scale_i
    alignment/<layer name>/mean_cosine  = mean_i cosine_i
    scale_i  = <dz_i, -eta g_i> / |eta g_i|^2
    cosine_i = <dz_i, -eta g_i> / (|dz_i| |eta g_i|)
    ```

    with `dz_i` the change of probe sample `i`'s pre-activation output and
    `g_i = dL/dz_i` (see `diagnostics.ActivationUpdateAlignment`). The
    values are Python floats, `nan` where undefined.

    How to read them: `scale_i` is sample `i`'s effective learning-rate
    multiplier, 1 being the step the loss asked for. `median_scale` is the
    typical sample's: about 1 for the affine-like layers of this package,
    about 2 for the norm-like ones, about `|x|^2 + 1` of the layer's input
    for a plain `Dense` or `Conv*D` (3000 and more on raw image pixels).
    About 80% of the probe samples get a multiplier between `q10_scale` and
    `q90_scale`; a `q10_scale <= 0` means that at least about 10% of them
    moved against the asked step. `spread_scale` is 0 when every sample
    gets the same multiplier and grows with the cross-sample terms of the
    batch. The quantiles always lie between the smallest and the largest
    `scale_i`, whatever the mean; `mean_scale` does not (one sample with an
    almost zero gradient can give a huge `scale_i`), and the coefficient of
    variation `std / |mean|`, meaningless when the mean is near 0, is not
    logged (`ActivationUpdateAlignment.cv_scale` still computes it).

    The `logs` dict is changed in place, so only the callbacks placed
    *after* the monitor in `fit(callbacks=[...])` see the new keys: put
    `keras.callbacks.CSVLogger`, `keras.callbacks.TensorBoard` and any
    callback that reads them after it (the monitor warns, when training
    starts, of a `TensorBoard` or `CSVLogger` listed before it, and of a
    callback before it monitoring an `alignment/...` key). When training
    starts it also runs the model on one probe sample, and raises a
    one-line `ValueError` if the model cannot take the probe batch, before
    any epoch is trained. The `History` that `fit` adds (and
    returns) comes after every callback passed, so `history.history` holds
    one list per key, with one entry per measured epoch: with
    `every_n_epochs > 1` those lists are shorter than the loss's, as the
    `val_` lists are with `validation_freq > 1`. `CSVLogger` takes its
    columns from the first epoch's logs, so with `every_n_epochs > 1` its
    file has no alignment columns; `History` and `TensorBoard` (which shows
    them as `epoch_alignment/...` scalars of the train run) do not have
    that limit.

    The learning rate is read from `model.optimizer.learning_rate` at the
    end of the epoch (the value of a `LearningRateSchedule` at the current
    step) and converted to a Python float. For the Dense-like, Conv-like
    and EinsumDense-like layers the multipliers do not depend on it (they
    are affine in their weights); it sets the size of the trial step, whose
    round-off is relatively larger at small rates (under a mixed-precision
    policy it can dominate: see `diagnostics.activation_update_alignment`).
    An epoch whose rate is not a finite float > 0 (a schedule decayed to 0)
    is not measured: the monitor warns and writes nothing for it.

    Cost: for each measured layer, `diagnostics.activation_update_alignment`
    runs, eagerly (not compiled) and in inference mode, two forward passes
    and one backward pass of the whole model on the probe batch, plus three
    forward passes and one backward pass of that layer alone. Measuring `L`
    layers thus costs about `2 L` forward and `L` backward passes of the
    model on `len(x)` samples per measured epoch; keep the probe batch
    small (tens to hundreds of samples) or raise `every_n_epochs`. The
    model's weights and the optimizer's state are read, never assigned:
    training with or without the monitor gives the same weights.

    Args:
        x: the inputs of the probe batch, as the model takes them (a NumPy
            array or tensor, or a structure of them). It is measured as one
            batch.
        y: the targets of the probe batch, as `loss` takes them, with as
            many samples as `x`.
        loss: a Keras loss name (e.g. `"mse"`), a `keras.losses.Loss` or a
            function `loss(y_true, y_pred)`. Defaults to `None`: the
            model's compiled loss, `model.loss`.
        layers: a list of layers of the model (nested models included), as
            layer objects or names, each with trainable weights and called
            once per forward pass. Defaults to `None`: the layers
            `diagnostics.alignment_report` measures, every trainable
            Dense-like, Conv-like and EinsumDense-like layer.
        every_n_epochs: positive int, measure at the end of every n-th
            epoch. Defaults to `1`.

    Raises:
        TypeError: if `layers` is not a list of layers or names,
            `every_n_epochs` is not an int, or `loss` is not a loss.
        ValueError: if `x` and `y` do not hold the same number of samples
            (at least one), `layers` is empty or names a layer twice,
            `every_n_epochs` is not positive, or `loss` is an unknown name.
            When training starts: if a layer is not in the model, or there
            is no `loss` and the model was not compiled with a single one.

    Example:

    >>> import numpy as np
    >>> import keras
    >>> from keras_affine_div.callbacks import AlignmentMonitor
    >>> from keras_affine_div.layers import AffineLikeDense
    >>> rng = np.random.default_rng(0)
    >>> x = rng.standard_normal((32, 4)).astype("float32")
    >>> y = rng.integers(0, 2, size=(32,))
    >>> model = keras.Sequential([
    ...     keras.Input((4,)),
    ...     AffineLikeDense(8, activation="tanh", name="hidden"),
    ...     keras.layers.Dense(2, name="logits"),
    ... ])
    >>> model.compile(
    ...     optimizer=keras.optimizers.SGD(0.1),
    ...     loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    ... )
    >>> monitor = AlignmentMonitor(x[:8], y[:8])
    >>> history = model.fit(x, y, epochs=2, callbacks=[monitor], verbose=0)
    >>> keys = [k for k in history.history if k.startswith("alignment/")]
    >>> for key in sorted(keys):
    ...     print(key, len(history.history[key]))
    alignment/hidden/mean_cosine 2
    alignment/hidden/mean_scale 2
    alignment/hidden/median_scale 2
    alignment/hidden/q10_scale 2
    alignment/hidden/q90_scale 2
    alignment/hidden/spread_scale 2
    alignment/logits/mean_cosine 2
    alignment/logits/mean_scale 2
    alignment/logits/median_scale 2
    alignment/logits/q10_scale 2
    alignment/logits/q90_scale 2
    alignment/logits/spread_scale 2
    """

    def __init__(self, x, y, loss=None, layers=None, every_n_epochs=1):
        _validation.same_samples(x, y)
        if loss is not None:
            diagnostics._get_loss(loss)
        layers = _validation.layer_list(layers)
        every_n_epochs = _validation.positive_int(
            every_n_epochs, "every_n_epochs"
        )
        super().__init__()
        self.x = x
        self.y = y
        self.loss = loss
        self.layers = layers
        self.every_n_epochs = every_n_epochs
        self._loss = None
        self._layers = None

    def on_train_begin(self, logs=None):
        self._warn_of_readers_before()
        self._loss = self._resolve_loss()
        self._layers = self._resolve_layers()
        self._check_probe()

    def _warn_of_readers_before(self):
        """Warns of callbacks listed before the monitor that read its keys."""
        before = _keras_internals.callbacks_before(self)
        readers = [
            type(c).__name__
            for c in before or ()
            if isinstance(c, _LOG_WRITERS)
            or str(getattr(c, "monitor", "")).startswith("alignment/")
        ]
        if readers:
            warnings.warn(
                f"AlignmentMonitor is listed after {', '.join(readers)} in "
                "`fit(callbacks=[...])`: those read an epoch's logs before "
                "the monitor adds its `alignment/...` keys, so they will "
                "never see them. List the AlignmentMonitor first.",
                stacklevel=3,
            )

    def _check_probe(self):
        """Raises, in one line, unless the model takes the probe batch."""
        first = keras.tree.map_structure(lambda a: a[:1], self.x)
        try:
            self.model(first, training=False)
        except Exception as e:  # noqa: BLE001 (any error of the model's call)
            shapes = keras.tree.map_structure(
                lambda a: tuple(np.shape(a)), self.x
            )
            expected = getattr(self.model, "input_shape", None)
            reason = str(e).strip().splitlines()[0] if str(e).strip() else ""
            raise ValueError(
                "AlignmentMonitor: the model cannot take the probe batch `x` "
                f"of shape {shapes} (the model's input shape: {expected}); "
                f"nothing was trained. Its call said: {type(e).__name__}: "
                f"{reason}"
            ) from None

    def on_epoch_end(self, epoch, logs=None):
        if logs is None or (epoch + 1) % self.every_n_epochs:
            return
        if self._loss is None:
            # Called outside `fit`, which calls `on_train_begin` first.
            self.on_train_begin()
        learning_rate = self._current_learning_rate()
        if not (math.isfinite(learning_rate) and learning_rate > 0):
            warnings.warn(
                f"AlignmentMonitor: the optimizer's learning rate at the end "
                f"of epoch {epoch + 1} is {learning_rate!r}, not a finite "
                "float > 0; the epoch is not measured.",
                stacklevel=2,
            )
            return
        logs.update(_to_logs(self._report(learning_rate)))

    def _report(self, learning_rate):
        """The rows of `alignment_report` for the layers to measure."""
        if self._layers is None:
            return diagnostics.alignment_report(
                self.model,
                self.x,
                self.y,
                self._loss,
                learning_rate=learning_rate,
            )
        return [
            diagnostics.activation_update_alignment(
                self.model,
                layer,
                self.x,
                self.y,
                self._loss,
                learning_rate=learning_rate,
            ).summary()
            for layer in self._layers
        ]

    def _current_learning_rate(self):
        learning_rate = self.model.optimizer.learning_rate
        return float(np.asarray(keras.ops.convert_to_numpy(learning_rate)))

    def _resolve_loss(self):
        if self.loss is not None:
            return self.loss
        loss = getattr(self.model, "loss", None)
        if not (isinstance(loss, str) or callable(loss)):
            raise ValueError(
                "Expected `loss`, or a model compiled with a single loss (a "
                "name, a `keras.losses.Loss` or a function). Received: "
                f"loss=None, model.loss={loss!r}"
            )
        diagnostics._get_loss(loss)
        return loss

    def _resolve_layers(self):
        if self.layers is None:
            return None
        return [
            diagnostics._find_layer(self.model, layer) for layer in self.layers
        ]


# Callbacks that read every key of an epoch's logs.
_LOG_WRITERS = (keras.callbacks.TensorBoard, keras.callbacks.CSVLogger)


def _to_logs(rows):
    """`{"alignment/<layer>/<summary>": float}` from the report's rows."""
    return {
        f"{LOG_PREFIX}/{row['layer']}/{summary}": float(row[summary])
        for row in rows
        for summary in LOG_SUMMARIES
    }
