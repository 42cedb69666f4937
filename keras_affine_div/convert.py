"""Rebuild a Keras model with this package's layers in its affine maps.

`convert` is `keras.models.clone_model` with a `clone_function` that puts
`AffineLikeDense` (or `NormLikeDense`) in place of each `Dense`, the
matching `AffineLikeConv*D` (or `PatchNormConv*D`) in place of each
`Conv1D`, `Conv2D` and `Conv3D`, and `AffineLikeEinsumDense` (or
`NormLikeEinsumDense`) in place of each `EinsumDense`. The other layers are
cloned with their weights.
"""

import dataclasses
import warnings

import keras

from keras_affine_div import _graph
from keras_affine_div import _validation
from keras_affine_div import layers as affine_div_layers

# The two corrections `convert` can put in place of Keras' affine maps.
KINDS = ("affine_like", "norm_like")

# Keras' affine maps `convert` replaces, by class name.
_SOURCES = {
    "Dense": keras.layers.Dense,
    "EinsumDense": keras.layers.EinsumDense,
    "Conv1D": keras.layers.Conv1D,
    "Conv2D": keras.layers.Conv2D,
    "Conv3D": keras.layers.Conv3D,
}
# What each kind puts in their place: names in `keras_affine_div.layers`,
# looked up when `convert` runs; a name the package lacks leaves the layer
# as it is, with the reason in the report.
_TARGETS = {
    "affine_like": {
        "Dense": "AffineLikeDense",
        "EinsumDense": "AffineLikeEinsumDense",
        "Conv1D": "AffineLikeConv1D",
        "Conv2D": "AffineLikeConv2D",
        "Conv3D": "AffineLikeConv3D",
    },
    "norm_like": {
        "Dense": "NormLikeDense",
        "EinsumDense": "NormLikeEinsumDense",
        "Conv1D": "PatchNormConv1D",
        "Conv2D": "PatchNormConv2D",
        "Conv3D": "PatchNormConv3D",
    },
}
# Keras' other affine maps, which the package has no layer for: `convert`
# leaves them, and says so.
_UNMATCHED = tuple(
    getattr(keras.layers, name)
    for name in (
        "DepthwiseConv1D",
        "DepthwiseConv2D",
        "SeparableConv1D",
        "SeparableConv2D",
        "Conv1DTranspose",
        "Conv2DTranspose",
        "Conv3DTranspose",
    )
)
_AFFINE_MAPS = tuple(_SOURCES.values()) + _UNMATCHED
# The normalisation layers `drop_following_norm` replaces by `Identity`.
_NORMALIZATIONS = (
    keras.layers.BatchNormalization,
    keras.layers.LayerNormalization,
    keras.layers.GroupNormalization,
    keras.layers.UnitNormalization,
    keras.layers.RMSNormalization,
)


@dataclasses.dataclass(frozen=True)
class ConversionReport:
    """What `convert` did, layer by layer.

    Layers are named as in the model; a layer of a nested model is named
    `"<nested model>/<layer>"`.

    Attributes:
        kind: `"affine_like"` or `"norm_like"`.
        converted: dict, the name of each converted layer to the name of
            its new class (`"AffineLikeConv2D"`, ...), in model order.
        dropped: tuple of the names of the normalisation layers replaced by
            `keras.layers.Identity` (`drop_following_norm=True`).
        skipped: dict, the name of each `Dense`, `EinsumDense` or `Conv*D`
            layer (or subclass of one) left as it was, to the reason.
    """

    kind: str
    converted: dict
    dropped: tuple
    skipped: dict

    def __str__(self):
        lines = [
            f"Converted {len(self.converted)} layer(s) ({self.kind}), "
            f"dropped {len(self.dropped)} normalisation layer(s), left "
            f"{len(self.skipped)} as they were."
        ]
        lines += [f"  {n}: -> {cls}" for n, cls in self.converted.items()]
        lines += [f"  {n}: dropped (Identity)" for n in self.dropped]
        lines += [f"  {n}: left, {why}" for n, why in self.skipped.items()]
        return "\n".join(lines)


def convert(
    model,
    kind="affine_like",
    layers=None,
    include_output=False,
    drop_following_norm=False,
):
    """A copy of `model` with this package's layers in its affine maps.

    Rebuilds a Sequential or functional model with
    `keras.models.clone_model`, nested Sequential and functional models
    included. Each chosen `Dense`, `EinsumDense`, `Conv1D`, `Conv2D` and
    `Conv3D` layer becomes:

    | Keras layer | `kind="affine_like"` | `kind="norm_like"` |
    |---|---|---|
    | `Dense` | `AffineLikeDense` | `NormLikeDense` |
    | `Conv1D/2D/3D` | `AffineLikeConv1D/2D/3D` | `PatchNormConv1D/2D/3D` |
    | `EinsumDense` | `AffineLikeEinsumDense` | `NormLikeEinsumDense` |

    A converted layer keeps every argument of the Keras layer (name,
    units or filters, window, activation, bias initialiser, regularizers,
    constraints, dtype policy, `trainable`) except its kernel initialiser:
    it gets the package's default, `RandomNormal(stddev=0.5)`, and fresh
    weights, since a kernel (or initialiser) meant for an undivided layer
    would shrink its outputs by about `sqrt(fan_in)`. Every other layer is
    cloned with its weights (a copy: training the new model leaves
    `model` as it was), and the graph, names, input and output shapes,
    masks and dtype policies stay as they were.

    Only the model's own layers are replaced, by exact class: a subclass
    of `Dense` or `Conv2D` and layers inside another layer
    (`MultiHeadAttention`'s projections, a `TimeDistributed` layer) stay as
    they are. A chosen layer is also left as it is, with the reason in the
    report, when it is quantized, has LoRA enabled (its frozen kernel is
    what LoRA adapts, and `convert` does not copy kernels), or takes a
    sparse or ragged input (the package's layers take dense inputs).

    Args:
        model: A built `keras.Sequential` or functional `keras.Model`.
        kind: `"affine_like"` (divide the whole affine map,
            `(W x + b) / sqrt(|x|^2 + 1)`) or `"norm_like"` (feed it
            `x / sqrt(|x|^2 + epsilon)`, patch by patch for convolutions).
            Defaults to `"affine_like"`.
        layers: Which layers to convert among the model's `Dense`,
            `EinsumDense` and `Conv*D` layers: `None` (all of them), one of
            those Keras classes or a tuple of them, a layer name or a list
            of names (`"<nested model>/<layer>"` for a layer of a nested
            model), or a callable `fn(layer) -> bool` called on each
            candidate. Defaults to `None`.
        include_output: Boolean, whether the layers producing the model's
            outputs (the last layer of a Sequential model, the layer behind
            each output of a functional one, looking inside a nested model
            that produces an output, and behind a `Flatten`, `Reshape`,
            `Activation`, `Softmax` or `Dropout` layer after it: a `Conv2D`
            classifier followed by `Flatten` and `Activation` is the output
            map) are converted too.
            Defaults to `False`: a classifier keeps a plain `Dense` head.
        drop_following_norm: Boolean, whether a `BatchNormalization`,
            `LayerNormalization`, `GroupNormalization`, `UnitNormalization`
            or `RMSNormalization` layer directly after a converted layer,
            and its only consumer, is replaced by a `keras.layers.Identity`
            of the same name (which keeps the graph and the names). A
            normalisation layer shared between calls, fed by a layer called
            more than once, or fed by a tensor that is also a model output
            or feeds another layer, is kept. Defaults to `False`.

    Returns:
        tuple: `(new_model, report)`: a new `keras.Sequential` or
        functional `keras.Model` (compiled as `model` was, if it was), and
        a `ConversionReport` of what was converted, dropped and left.

    Raises:
        TypeError: if `model` is not a Sequential or functional
            `keras.Model` (a subclassed model cannot be cloned layer by
            layer), or `layers` is of none of the accepted types.
        ValueError: if `kind` is unknown, `model` is an unbuilt Sequential
            model, `layers` names a class other than `Dense`,
            `EinsumDense` and `Conv*D` or a layer the model does not have
            among those.

    Example:

    >>> import keras
    >>> import keras_affine_div
    >>> model = keras.Sequential([
    ...     keras.Input((8, 8, 3)),
    ...     keras.layers.Conv2D(4, 3, name="conv"),
    ...     keras.layers.BatchNormalization(name="bn"),
    ...     keras.layers.Flatten(),
    ...     keras.layers.Dense(16, activation="relu", name="hidden"),
    ...     keras.layers.Dense(10, name="logits"),
    ... ])
    >>> new_model, report = keras_affine_div.convert(
    ...     model, drop_following_norm=True
    ... )
    >>> [type(layer).__name__ for layer in new_model.layers]
    ['AffineLikeConv2D', 'Identity', 'Flatten', 'AffineLikeDense', 'Dense']
    >>> report.skipped
    {'logits': 'an output layer of the model (include_output=False)'}
    """
    kind = _validation.one_of(kind, KINDS, "kind")
    include_output = _validation.boolean(include_output, "include_output")
    drop_following_norm = _validation.boolean(
        drop_following_norm, "drop_following_norm"
    )
    _check_model(model)
    leaves = _graph.leaf_layers(model)
    chosen = _selector(layers, leaves)
    kept_outputs = set() if include_output else _graph.output_layer_ids(model)
    replacements, converted, skipped = _plan(kind, leaves, chosen, kept_outputs)

    dropped_ids = {}
    if drop_following_norm:
        for prefix, submodel in _graph.graph_models(model):
            for layer in _graph.following_layers(
                submodel, replacements, _NORMALIZATIONS
            ):
                dropped_ids[id(layer)] = prefix + layer.name

    copies = []  # (original, clone) of the layers cloned with weights
    identities = set()  # ids of the `Identity` layers put in

    def clone_function(layer):
        if id(layer) in replacements:
            return _converted(layer, replacements[id(layer)])
        if id(layer) in dropped_ids:
            # The policy by name: `Identity` saves its arguments as given.
            identity = keras.layers.Identity(
                name=layer.name, dtype=layer.dtype_policy.name
            )
            identities.add(id(identity))
            return identity
        # As `clone_model`'s default; the graph's operations that are not
        # layers (a mask's `not_equal`, ...) have no weights.
        clone = layer.__class__.from_config(layer.get_config())
        if isinstance(layer, keras.layers.Layer):
            copies.append((layer, clone))
        return clone

    def call_function(layer, *args, **kwargs):
        # A normalisation layer's call took `training` and `mask`, which
        # `Identity` does not (the mask still reaches it, with the input).
        if id(layer) in identities:
            return layer(*args)
        return layer(*args, **kwargs)

    new_model = keras.models.clone_model(
        model,
        clone_function=clone_function,
        # Sequential models take no `call_function` (nor need one: they
        # call each layer on the previous output alone).
        call_function=(
            None if isinstance(model, keras.Sequential) else call_function
        ),
        recursive=True,
    )
    for original, clone in copies:
        clone.set_weights(original.get_weights())
    report = ConversionReport(
        kind=kind,
        converted=converted,
        dropped=tuple(name for _, name in _sorted_by(dropped_ids, leaves)),
        skipped=skipped,
    )
    if not converted:
        warnings.warn(
            f"`convert` converted no layer of model {model.name!r}: "
            f"{len(skipped)} affine map(s) left (see the report's `skipped`)",
            stacklevel=2,
        )
    return new_model, report


def _plan(kind, leaves, chosen, kept_outputs):
    """Which of `leaves` become which class, and why the others stay.

    Args:
        kind: `"affine_like"` or `"norm_like"`.
        leaves: the `(name, layer)` pairs of `_graph.leaf_layers`.
        chosen: the `fn(name, layer) -> bool` of `_selector`.
        kept_outputs: the ids of the output layers left as they are.

    Returns:
        tuple: `(replacements, converted, skipped)`: id of a layer to the
        class it becomes, name to that class's name, and name to the
        reason a candidate is kept.
    """
    targets = {
        source: getattr(affine_div_layers, target, None)
        for source, target in _TARGETS[kind].items()
    }

    replacements = {}  # id(layer) -> the class it becomes
    converted, skipped = {}, {}
    for name, layer in leaves:
        source = _source_name(layer)
        if source is None:
            parent = _parent_source(layer)
            if parent is not None:
                skipped[name] = (
                    f"a subclass of {parent} ({type(layer).__name__}), "
                    "whose additions a conversion would lose"
                )
            elif isinstance(layer, _UNMATCHED):
                skipped[name] = (
                    f"keras_affine_div has no counterpart of "
                    f"{type(layer).__name__}: an affine map left as Keras'"
                )
            for path, nested in _graph.nested_layers(layer, _AFFINE_MAPS):
                nested_class = type(nested).__name__
                article = "an" if nested_class[0] in "AEIOU" else "a"
                skipped[f"{name}/{path}"] = (
                    f"{article} {nested_class} inside "
                    f"{type(layer).__name__} '{layer.name}', which `convert` "
                    "cannot rebuild: build the model inside "
                    "`keras_affine_div.layers_of(...)` to reach it"
                )
            continue
        reason = _reason_to_keep(
            layer,
            chosen(name, layer),
            id(layer) in kept_outputs,
        )
        if reason is None and targets[source] is None:
            reason = (
                "keras_affine_div.layers has no "
                f"{_TARGETS[kind][source]} in this version"
            )
        if reason is not None:
            skipped[name] = reason
            continue
        replacements[id(layer)] = targets[source]
        converted[name] = targets[source].__name__
    return replacements, converted, skipped


def _sorted_by(named_ids, leaves):
    """The `(id, name)` pairs of `named_ids` in the order of `leaves`."""
    order = {id(layer): i for i, (_, layer) in enumerate(leaves)}
    return sorted(named_ids.items(), key=lambda item: order[item[0]])


def _check_model(model):
    """Raises unless `model` is a built Sequential or functional model."""
    if not isinstance(model, keras.Model):
        raise TypeError(
            "Received an invalid type for argument `model`. Expected a "
            "`keras.Sequential` or functional `keras.Model`. Received: "
            f"model={model!r} of type {type(model).__name__}"
        )
    if not _graph.is_graph_model(model):
        raise TypeError(
            "`convert` rebuilds Sequential and functional models layer by "
            "layer through `keras.models.clone_model`, which cannot see the "
            "layers a subclassed model uses in its `call`. Build that model "
            "with `keras_affine_div.layers` in place of `Dense` and "
            "`Conv*D` (they take the same arguments), or write it as a "
            "functional model and convert that. Received: "
            f"model={model.name!r} of type {type(model).__name__}"
        )
    if isinstance(model, keras.Sequential) and not model.built:
        raise ValueError(
            "`convert` needs a built model: give the Sequential model a "
            "`keras.Input` as its first layer or call "
            f"`model.build(input_shape)`. Received: model={model.name!r} "
            f"with model.built={model.built}"
        )


def _source_name(layer):
    """`"Dense"`, `"Conv2D"`, ... for a layer of exactly that class."""
    for name, cls in _SOURCES.items():
        if type(layer) is cls:
            return name
    return None


def _parent_source(layer):
    """The name of the Keras class of `_SOURCES` `layer` subclasses."""
    for name, cls in _SOURCES.items():
        if isinstance(layer, cls):
            return name
    return None


def _selector(layers, leaves):
    """`layers` as a function `(name, layer) -> bool`, checked."""
    if layers is None:
        return lambda name, layer: True
    candidates = [(n, l) for n, l in leaves if _source_name(l) is not None]
    classes = tuple(layers) if isinstance(layers, (list, tuple)) else (layers,)
    if classes and all(isinstance(cls, type) for cls in classes):
        unknown = [cls for cls in classes if cls not in _SOURCES.values()]
        if unknown:
            raise ValueError(
                "Received an invalid value for argument `layers`. Expected "
                "Keras layer classes among "
                f"{', '.join(_SOURCES)}. Received: layers={layers!r}"
            )
        return lambda name, layer: type(layer) in classes
    names = [layers] if isinstance(layers, str) else layers
    if isinstance(names, (list, tuple)) and all(
        isinstance(n, str) for n in names
    ):
        known = {n for n, _ in candidates} | {l.name for _, l in candidates}
        unknown = [n for n in names if n not in known]
        for n in unknown:
            _graph.refuse_a_container(n, leaves, _AFFINE_MAPS)
        if unknown:
            raise ValueError(
                "Received an invalid value for argument `layers`. Expected "
                "names of the model's "
                f"{', '.join(_SOURCES)} layers; not among them: {unknown}. "
                f"Received: layers={layers!r}"
            )
        names = set(names)
        return lambda name, layer: name in names or layer.name in names
    if callable(layers):
        return lambda name, layer: bool(layers(layer))
    raise TypeError(
        "Received an invalid type for argument `layers`. Expected None, a "
        "Keras layer class or a tuple of them, a layer name or a list of "
        "names, or a callable `fn(layer) -> bool`. Received: "
        f"layers={layers!r} of type {type(layers).__name__}"
    )


def _reason_to_keep(layer, chosen, excluded_output):
    """Why a candidate layer stays as it is, or `None` to convert it."""
    if not chosen:
        return "not chosen by `layers`"
    if excluded_output:
        return "an output layer of the model (include_output=False)"
    if layer.quantization_mode is not None or (
        getattr(layer, "quantization_config", None) is not None
    ):
        return (
            f"quantized (dtype={layer.dtype_policy.name!r}); the package's "
            "layers do not implement quantization"
        )
    if getattr(layer, "lora_enabled", False) or getattr(
        layer, "lora_rank", None
    ):
        return (
            f"LoRA is enabled (lora_rank={layer.lora_rank}): its frozen "
            "kernel is what LoRA adapts, and `convert` does not copy kernels"
        )
    inputs = _graph.first_call_inputs(layer)
    if any(getattr(x, "sparse", False) for x in inputs):
        return "its input is sparse; the package's layers take dense inputs"
    if any(getattr(x, "ragged", False) for x in inputs):
        return "its input is ragged; the package's layers take dense inputs"
    return None


def _converted(layer, target):
    """The layer of class `target` taking `layer`'s place.

    Built from `layer`'s config (which `target` accepts whole) with the
    package's kernel initialiser: `quantization_config`, checked to be
    `None` before, is left out.
    """
    config = layer.get_config()
    config.pop("quantization_config", None)
    config["kernel_initializer"] = None
    return target.from_config(config)
