"""Build any model with the package's layers inside: `layers_of`.

`convert` rebuilds a Sequential or functional model it can see layer by
layer. Layers that build other layers in their own code (Keras'
`MultiHeadAttention`, KerasHub's transformer layers and backbones, a
subclassed model) are out of its reach; `layers_of` works the other way
round: inside its `with` block, the Keras classes code asks for by their
public name (`keras.layers.Dense`, `keras.layers.EinsumDense`,
`keras.layers.Conv1D/2D/3D`, `keras.layers.MultiHeadAttention`) build the
package's layers instead, and `MultiHeadAttention` and every subclass of it
build their projections with the package's einsum layers. Outside the
block, Keras is as it was.
"""

import contextlib
import dataclasses

import keras

from keras_affine_div import _keras_internals
from keras_affine_div import _stand_in
from keras_affine_div import _validation
from keras_affine_div import layers as affine_div_layers
from keras_affine_div.convert import _TARGETS as _CONVERT_TARGETS
from keras_affine_div.convert import KINDS

# The kinds of layer `layers_of` builds, and what each builds in place of
# each Keras class (names in `keras_affine_div.layers`): `convert`'s, and
# the attention layers.
_TARGETS = {
    kind: {
        **_CONVERT_TARGETS[kind],
        "MultiHeadAttention": prefix + "MultiHeadAttention",
    }
    for kind, prefix in (
        ("affine_like", "AffineLike"),
        ("norm_like", "NormLike"),
    )
}
# Keras' own classes, bound when the package is imported (inside a block
# `keras.layers` holds stand-ins).
_CLASSES = {name: getattr(keras.layers, name) for name in _TARGETS[KINDS[0]]}
# What `MultiHeadAttention` builds its projections with, per kind.
_PROJECTIONS = {
    "affine_like": "AffineLikeEinsumDense",
    "norm_like": "NormLikeEinsumDense",
}


@dataclasses.dataclass
class BuildRecord:
    """What was built inside a `layers_of` block.

    Attributes:
        kind: `"affine_like"` or `"norm_like"`.
        built: list of `(layer name, class name)` of each layer of the
            package built in place of a Keras one, in order.
        left: dict, the name of each Keras layer built as asked because
            the package's layer refused its arguments, to the reason.
    """

    kind: str
    built: list = dataclasses.field(default_factory=list)
    left: dict = dataclasses.field(default_factory=dict)

    def __str__(self):
        lines = [
            f"Built {len(self.built)} layer(s) of keras_affine_div "
            f"({self.kind}); left {len(self.left)} Keras layer(s) as asked."
        ]
        lines += [f"  {name}: {cls}" for name, cls in self.built]
        lines += [f"  {name}: left, {why}" for name, why in self.left.items()]
        return "\n".join(lines)


@contextlib.contextmanager
def layers_of(kind="affine_like", layers=None):
    """Within the block, Keras' affine layers are built as the package's.

    Inside `with keras_affine_div.layers_of(kind):`, a layer built as
    `keras.layers.Dense(...)`, `EinsumDense(...)`, `Conv1D/2D/3D(...)` or
    `MultiHeadAttention(...)` (by any code: a model function, a subclassed
    model, a KerasHub backbone) is the package's layer of that shape
    (the table of `keras_affine_div.convert`), and every
    `MultiHeadAttention`, subclasses included, builds its query, key,
    value, gate and output projections with the package's einsum layer.
    Each takes the arguments given except the kernel initialiser: the
    package's default, `RandomNormal(stddev=0.5)`, replaces it (a kernel
    meant for an undivided layer would shrink a divided one's outputs by
    about `sqrt(fan_in)`), as in `convert`. A layer whose arguments the
    package's layer refuses (a quantized one) is built as Keras' and
    listed in the record's `left`.

    What the block cannot reach: code that imported a class before the
    block (`from keras.layers import Dense` at a module's top) builds that
    class, and a layer built after the block ends (a layer created in the
    block but built lazily later keeps the class it was created with: the
    package's; `MultiHeadAttention`'s projections are built with its first
    call, so a plain `MultiHeadAttention` subclass created inside the
    block must also be called, or its model built, inside it). The model's
    output layer is converted too: build it outside the block to keep it
    plain. Models whose layers build their sublayers in their own `build`
    or `__init__` (KerasHub's) rebuild those sublayers when loaded: load
    them inside the same block (`keras.saving.load_model` in `with
    layers_of(kind):`). Rebinding is global while the block runs: do not
    build other models in other threads meanwhile.

    Args:
        kind: `"affine_like"` or `"norm_like"`. Defaults to
            `"affine_like"`.
        layers: Which Keras classes to build as the package's: `None` (all
            of `Dense`, `EinsumDense`, `Conv1D`, `Conv2D`, `Conv3D` and
            `MultiHeadAttention`), or one of those classes or a tuple of
            them (`MultiHeadAttention` stands for its projections, in its
            subclasses too). Defaults to `None`.

    Yields:
        BuildRecord: filled in as the block builds layers.

    Raises:
        ValueError: if `kind` is unknown or `layers` names another class.

    Example:

    >>> import keras
    >>> import keras_affine_div
    >>> with keras_affine_div.layers_of("affine_like") as record:
    ...     inputs = keras.Input((4, 8))
    ...     x = keras.layers.MultiHeadAttention(2, 4, name="mha")(
    ...         inputs, inputs
    ...     )
    ...     x = keras.layers.Dense(16, name="hidden")(x)
    >>> outputs = keras.layers.Dense(3, name="logits")(x)
    >>> model = keras.Model(inputs, outputs)
    >>> [type(layer).__name__ for layer in model.layers[1:]]
    ['AffineLikeMultiHeadAttention', 'AffineLikeDense', 'Dense']
    >>> type(model.get_layer("mha").query_dense).__name__
    'AffineLikeEinsumDense'
    """
    kind = _validation.one_of(kind, KINDS, "kind")
    chosen = _chosen(layers)
    record = BuildRecord(kind)

    def on_build(layer, reason):
        if reason is None:
            record.built.append((layer.name, type(layer).__name__))
        else:
            record.left[layer.name] = reason

    stand_ins = {
        name: _stand_in.stand_in(
            _CLASSES[name],
            getattr(affine_div_layers, _TARGETS[kind][name]),
            on_build=on_build,
        )
        for name in chosen
    }
    saved = {}
    with contextlib.ExitStack() as stack:
        if "MultiHeadAttention" in chosen:
            projection = _stand_in.stand_in(
                _CLASSES["EinsumDense"],
                getattr(affine_div_layers, _PROJECTIONS[kind]),
                on_build=on_build,
            )
            stack.enter_context(
                _keras_internals.attention_projections(projection)
            )
        for alias in dir(keras.layers):
            value = getattr(keras.layers, alias)
            for name in chosen:
                if _stands_for(value, _CLASSES[name]):
                    saved[alias] = value
                    setattr(keras.layers, alias, stand_ins[name])
        try:
            yield record
        finally:
            for alias, value in saved.items():
                setattr(keras.layers, alias, value)


def _stands_for(value, cls):
    """Whether `value` is `cls` or an outer block's stand-in for it."""
    return value is cls or (
        getattr(value, "_affine_div_stand_in", False) and value._original is cls
    )


def _chosen(layers):
    """The names of `_CLASSES` that `layers` chooses, checked."""
    if layers is None:
        return tuple(_CLASSES)
    classes = tuple(layers) if isinstance(layers, (list, tuple)) else (layers,)
    names = [n for n, cls in _CLASSES.items() if cls in classes]
    if not classes or len(names) != len(set(classes)):
        raise ValueError(
            "Received an invalid value for argument `layers`. Expected None "
            "or Keras layer classes among "
            f"{', '.join(_CLASSES)}. Received: layers={layers!r}"
        )
    return tuple(names)
