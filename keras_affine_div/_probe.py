"""Probe one layer of a model (private): one SGD step seen at its output.

`sgd_step` runs the model on a batch with a `LayerProbe` on one layer:
it records the layer's input, reads the gradient of the model's loss with
respect to the layer's output `z` (the pre-activation output for a
Dense-like, Conv-like or EinsumDense-like layer), takes one plain SGD step on the layer's own
weights and evaluates `z` again. `keras_affine_div.diagnostics` compares
the two outputs with the ideal step; the helpers here find the layer, the
loss and the input norms that it reports.

Nothing is assigned: trial weights are evaluated in a
`keras.StatelessScope`, and every variable and attribute of the layer is
left as it was, on success and on error.
"""

import dataclasses

import keras
import numpy as np
from keras import ops

from keras_affine_div import _backend
from keras_affine_div import _keras_internals
from keras_affine_div import ops as affine_div_ops
from keras_affine_div.layers import AffineLikeConv1D
from keras_affine_div.layers import AffineLikeConv2D
from keras_affine_div.layers import AffineLikeConv3D
from keras_affine_div.layers import AffineLikeDense
from keras_affine_div.layers import AffineLikeEinsumDense
from keras_affine_div.layers import NormLikeDense
from keras_affine_div.layers import NormLikeEinsumDense
from keras_affine_div.layers import PatchNormConv1D
from keras_affine_div.layers import PatchNormConv2D
from keras_affine_div.layers import PatchNormConv3D
from keras_affine_div.layers._einsum_equation import contracted_axes

DENSE_LIKE = (keras.layers.Dense, AffineLikeDense, NormLikeDense)
CONV_LIKE = (
    keras.layers.Conv1D,
    keras.layers.Conv2D,
    keras.layers.Conv3D,
    AffineLikeConv1D,
    AffineLikeConv2D,
    AffineLikeConv3D,
    PatchNormConv1D,
    PatchNormConv2D,
    PatchNormConv3D,
)
EINSUM_LIKE = (
    keras.layers.EinsumDense,
    AffineLikeEinsumDense,
    NormLikeEinsumDense,
)
# The layers measured before their activation: affine maps of their input
# (for the package's layers, of their divided input) followed by it.
AFFINE_MAPS = DENSE_LIKE + CONV_LIKE + EINSUM_LIKE


@dataclasses.dataclass(frozen=True, eq=False)
class ProbedStep:
    """One SGD step on one layer, seen at the layer's output.

    Attributes:
        inputs: the layer's first call argument `x_l`, as the model passed
            it.
        z: tensor, the layer's output `z` with its current weights.
        z_new: tensor, its output `z'` after the step.
        grad: NumPy array of the shape of `z`, `g = dL/dz`.
    """

    inputs: object
    z: object
    z_new: object
    grad: np.ndarray


def sgd_step(model, layer, x, y, loss_fn, learning_rate):
    """Takes one plain SGD step on `layer` alone and evaluates it again.

    `L` is `mean(loss_fn(y, model(x, training=False)))` in float32, and

    ```
    g     = dL/dz
    dL/dW = grad_W <g, layer(W, x_l)>
    z'    = layer(W - learning_rate * dL/dW, x_l)
    ```

    with `W` the layer's trainable weights and `x_l` its input in the
    model's forward pass.

    Args:
        model: a built `keras.Model`.
        layer: a layer of `model` with trainable weights.
        x: the inputs of a batch, as `model` takes them.
        y: the targets of the same batch, as `loss_fn` takes them.
        loss_fn: a function `loss(y_true, y_pred)`.
        learning_rate: float, the SGD step size.

    Returns:
        ProbedStep: `x_l`, `z`, `z'` and `g`.

    Raises:
        ValueError: if `model(x)` does not call `layer` exactly once.
    """
    y = keras.tree.map_structure(ops.convert_to_tensor, y)
    variables = list(layer.trainable_variables)
    weights = [np.array(ops.convert_to_numpy(v)) for v in variables]

    with LayerProbe(layer) as probe:
        # The layer's input x_l and call arguments, from one forward pass.
        probe.in_model = True
        probe.recording = True
        try:
            with keras.StatelessScope():
                model(x, training=False)
        finally:
            probe.in_model = False
            probe.recording = False
        if len(probe.calls) != 1:
            raise ValueError(
                "Expected a layer that the model calls exactly once per "
                f"forward pass. Received: layer={layer.name!r}, "
                f"calls={len(probe.calls)}"
            )
        args, kwargs = probe.calls[0]

        def z_of(weight_values):
            mapping = list(zip(variables, weight_values))
            with keras.StatelessScope(state_mapping=mapping):
                return layer(*args, **kwargs)

        z = z_of([ops.convert_to_tensor(w) for w in weights])

        # g = dL/dz, through a zero probe added to z inside the model.
        def mean_loss(offset):
            probe.offset = offset
            probe.in_model = True
            try:
                with keras.StatelessScope():
                    y_pred = model(x, training=False)
                return ops.mean(ops.cast(loss_fn(y, y_pred), "float32"))
            finally:
                probe.in_model = False
                probe.offset = None

        _, (g,) = _backend.value_and_gradients(mean_loss, [ops.zeros_like(z)])

        # dL/dW = grad_W <g, z(W)>, then one SGD step on this layer only.
        g_tensor = ops.convert_to_tensor(g)

        def linear_in_z(*weight_values):
            z_w = ops.cast(z_of(weight_values), "float32")
            return ops.sum(z_w * ops.cast(g_tensor, "float32"))

        _, grads = _backend.value_and_gradients(linear_in_z, weights)
        stepped = [
            ops.convert_to_tensor(w - np.asarray(learning_rate, w.dtype) * dw)
            for w, dw in zip(weights, grads)
        ]
        z_new = z_of(stepped)
    return ProbedStep(inputs=args[0], z=z, z_new=z_new, grad=g)


class LayerProbe:
    """Rewires a layer for the measurement, and restores it on exit.

    While active, `layer.call` returns `z`: the pre-activation output for a
    Dense-like, Conv-like or EinsumDense-like layer (its `activation` is set to linear), the
    output for any other layer. Inside the model's forward pass
    (`in_model=True`) the wrapper also adds `offset` (the probe
    differentiated against) to `z` and applies the original activation, so
    that the model computes exactly what it computes without the probe; with
    `recording=True` it records the call's arguments.
    """

    def __init__(self, layer):
        self.layer = layer
        self.in_model = False
        self.recording = False
        self.offset = None
        self.calls = []

    def __enter__(self):
        layer = self.layer
        self._own_call = "call" in vars(layer)
        self._call = layer.call
        self._activation = None
        if isinstance(layer, AFFINE_MAPS):
            self._activation = layer.activation

        def call(*args, **kwargs):
            outputs = self._call(*args, **kwargs)
            if not self.in_model:
                return outputs
            if self.recording:
                self.calls.append((args, kwargs))
            if self.offset is not None:
                outputs = outputs + self.offset
            if self._activation is not None:
                outputs = self._activation(outputs)
            return outputs

        try:
            if self._activation is not None:
                layer.activation = keras.activations.linear
            layer.call = call
        except BaseException:
            self._restore()
            raise
        return self

    def __exit__(self, *exc_info):
        self._restore()
        return False

    def _restore(self):
        layer = self.layer
        if self._own_call:
            layer.call = self._call
        elif "call" in vars(layer):
            del layer.call
        if self._activation is not None:
            layer.activation = self._activation


def find_layer(model, layer):
    """The layer object of `model` that `layer` (an object or name) means.

    A name is a layer's name or, for a layer held inside another layer
    (the projections of a `MultiHeadAttention`), its path
    (`"mha/query"`, see `named_layers`).
    """
    named = named_layers(model)
    if isinstance(layer, str):
        for name, candidate in named:
            if name == layer:
                return candidate
        for _, candidate in named:
            if candidate.name == layer:
                return candidate
        raise ValueError(
            f"Expected the name of a layer of model `{model.name}`, one of "
            f"{[name for name, _ in named]}. "
            f"Received: layer={layer!r}"
        )
    if not isinstance(layer, keras.layers.Layer):
        raise TypeError(
            "Received an invalid type for argument `layer`. Expected a "
            "`keras.layers.Layer` or a layer name (str). "
            f"Received: layer={layer!r}"
        )
    if not any(candidate is layer for _, candidate in named):
        raise ValueError(
            f"Expected a layer of model `{model.name}`. Received: "
            f"layer={layer.name!r} of class {type(layer).__name__}, which "
            "the model does not hold"
        )
    return layer


def named_layers(model):
    """`(name, layer)` of every layer of `model`, each once, in order.

    The model's layers and those of nested models by their names; a layer
    held inside another layer (not a model) by its path below the
    model's layer that holds it: `"mha/query"`, `"encoder/mha/query"`.
    """
    seen, found = set(), []

    def visit(layer, name):
        if id(layer) in seen:
            return
        seen.add(id(layer))
        found.append((name, layer))
        if isinstance(layer, keras.Model):
            for sub in layer.layers:
                visit(sub, sub.name)
        else:
            for sub in _keras_internals.sublayers(layer):
                visit(sub, f"{name}/{sub.name}")

    for layer in model.layers:
        visit(layer, layer.name)
    return found


def walk_layers(model):
    """The layers of `model` (see `named_layers`), each once."""
    return [layer for _, layer in named_layers(model)]


def get_loss(loss):
    """A callable `loss(y_true, y_pred)` from a name, object or function."""
    if isinstance(loss, str):
        try:
            return keras.losses.get(loss)
        except ValueError:
            raise ValueError(
                "Received an invalid value for argument `loss`. Expected the "
                "name of a Keras loss, such as 'mse' or "
                f"'sparse_categorical_crossentropy'. Received: loss={loss!r}"
            ) from None
    if not callable(loss):
        raise TypeError(
            "Received an invalid type for argument `loss`. Expected a loss "
            "name, a `keras.losses.Loss` or a function "
            f"`loss(y_true, y_pred)`. Received: loss={loss!r}"
        )
    return loss


def input_sq_norm(layer, inputs):
    """The squared norm of what a layer's output is affine in, per sample.

    Computed in float32, and averaged per sample over the positions it
    takes:

    - a Conv-like layer: the patch norms `|P_p|^2` it divides by
      (`keras_affine_div.ops.patch_squared_norms` with the layer's kernel
      size, strides, padding, dilation and groups), one per output position
      and group;
    - an EinsumDense-like layer: `|x_c|^2` of the input entries its
      equation contracts, one per position along the other input axes
      (the entry itself squared where nothing is contracted);
    - any other layer: `|x|^2` over the input's last axis.
    """
    x = ops.cast(inputs, "float32")
    if isinstance(layer, CONV_LIKE):
        sq_norms = affine_div_ops.patch_squared_norms(
            x,
            layer.kernel_size,
            strides=layer.strides,
            padding=layer.padding,
            data_format=layer.data_format,
            dilation_rate=layer.dilation_rate,
            groups=layer.groups,
        )
    elif isinstance(layer, EINSUM_LIKE):
        axes = contracted_axes(layer.equation, len(x.shape))
        sq_norms = ops.sum(ops.square(x), axis=axes) if axes else ops.square(x)
    else:
        sq_norms = ops.sum(ops.square(x), axis=-1)
    sq_norms = np.asarray(ops.convert_to_numpy(sq_norms), "float64")
    return sq_norms.reshape(sq_norms.shape[0], -1).mean(axis=1)
