"""Walking the layers of Sequential and functional models (private).

What `convert` needs to know of a model's graph before `clone_model`
rebuilds it: its nested graph models, the layers `clone_function` will
receive, which layers produce its outputs, and which layers only follow a
given one.
"""

import collections

import keras

from keras_affine_div import _keras_internals


def is_graph_model(obj):
    """Whether `obj` is a Sequential or functional model.

    Functional models, and their subclasses built from inputs and outputs,
    run a graph of layers (`_run_through_graph`); a subclassed model runs
    its own `call`.
    """
    return isinstance(obj, keras.Sequential) or (
        isinstance(obj, keras.Model) and hasattr(obj, "_run_through_graph")
    )


def graph_models(model, prefix=""):
    """`(prefix, model)` for `model` and each graph model nested in it."""
    yield prefix, model
    for layer in model.layers:
        if is_graph_model(layer):
            yield from graph_models(layer, f"{prefix}{layer.name}/")


def leaf_layers(model):
    """`(name, layer)` of every layer `clone_function` will receive.

    The layers of `model` and of the graph models nested in it (which
    `clone_model(recursive=True)` clones model by model), input layers
    excepted; a layer shared between them once.
    """
    leaves, seen = [], set()
    for prefix, submodel in graph_models(model):
        for layer in submodel.layers:
            if (
                isinstance(layer, keras.layers.InputLayer)
                or is_graph_model(layer)
                or id(layer) in seen
            ):
                continue
            seen.add(id(layer))
            leaves.append((prefix + layer.name, layer))
    return leaves


# Layers without weights that only reshape their one input or apply a
# function to it elementwise: the affine map before them still produces
# the model's output.
_PASS_THROUGH = (
    keras.layers.Activation,
    keras.layers.Dropout,
    keras.layers.ELU,
    keras.layers.Flatten,
    keras.layers.Identity,
    keras.layers.LeakyReLU,
    keras.layers.Permute,
    keras.layers.ReLU,
    keras.layers.Reshape,
    keras.layers.Softmax,
)


def output_layer_ids(model):
    """The ids of the layers producing `model`'s outputs.

    A nested graph model producing an output is looked into: its own output
    layers count. Behind a layer of `_PASS_THROUGH` (a `Flatten`, an
    `Activation`, ...) called on one tensor, the layer producing that
    tensor counts too: it is the output map.
    """
    if isinstance(model, keras.Sequential):
        producers = [model.layers[-1]]
        layers = model.layers
        i = len(layers) - 1
        while i > 0 and isinstance(layers[i], _PASS_THROUGH):
            i -= 1
            producers.append(layers[i])
    else:
        producers = []
        for tensor in keras.tree.flatten(model.outputs):
            producers.extend(_producers_behind(tensor))
    ids = set()
    for layer in producers:
        if is_graph_model(layer):
            ids |= output_layer_ids(layer)
        else:
            ids.add(id(layer))
    return ids


def _producers_behind(tensor):
    """The layer making `tensor`, and those behind pass-through layers."""
    found = []
    while True:
        history = tensor._keras_history
        layer = history.operation
        found.append(layer)
        if not isinstance(layer, _PASS_THROUGH):
            return found
        node = layer._inbound_nodes[history.node_index]
        if len(node.input_tensors) != 1:
            return found
        (tensor,) = node.input_tensors
        if getattr(tensor, "_keras_history", None) is None:
            return found


def first_call_inputs(layer):
    """The symbolic input tensors of the first call of `layer`, flat."""
    try:
        return keras.tree.flatten(layer.input)
    except (AttributeError, ValueError):
        return []


def following_layers(model, replacements, classes):
    """The layers of `classes` in `model` that only follow a replaced one.

    Yields each layer of `model`'s own graph (nested models are visited on
    their own) whose type is one of `classes` (a tuple), called once, on a
    single tensor produced by a layer of `replacements` (a set of ids),
    called once, whose output goes nowhere else (not to another layer, not
    to the model's outputs).
    """
    if isinstance(model, keras.Sequential):
        sequence = model.layers
        for previous, layer in zip(sequence, sequence[1:]):
            if type(layer) in classes and id(previous) in replacements:
                yield layer
        return
    nodes = graph_nodes(model)
    calls = collections.Counter(id(node.operation) for node in nodes)
    consumers = collections.Counter(
        id(tensor) for node in nodes for tensor in node.input_tensors
    )
    outputs = {id(tensor) for tensor in keras.tree.flatten(model.outputs)}
    for node in nodes:
        layer = node.operation
        if type(layer) not in classes or calls[id(layer)] != 1:
            continue
        if len(node.input_tensors) != 1:
            continue
        (tensor,) = node.input_tensors
        producer = tensor._keras_history.operation
        if (
            id(producer) in replacements
            and calls[id(producer)] == 1
            and consumers[id(tensor)] == 1
            and id(tensor) not in outputs
        ):
            yield layer


def graph_nodes(model):
    """The nodes (layer calls) of a functional model's own graph.

    Walked from the outputs back to the inputs, through each tensor's
    `_keras_history` (the layer, call and output that made it): a layer's
    calls in other models are not visited.
    """
    inputs = {id(tensor) for tensor in keras.tree.flatten(model.inputs)}
    stack = list(keras.tree.flatten(model.outputs))
    nodes = {}
    while stack:
        tensor = stack.pop()
        if id(tensor) in inputs:
            continue
        history = tensor._keras_history
        node = history.operation._inbound_nodes[history.node_index]
        if id(node) not in nodes:
            nodes[id(node)] = node
            stack.extend(node.input_tensors)
    return list(nodes.values())


def nested_layers(layer, classes, prefix=""):
    """`(path, layer)` of each layer of `classes` nested inside `layer`.

    Paths are the nested layers' names joined by `/`, below `layer`.
    """
    for sub in _keras_internals.sublayers(layer):
        path = f"{prefix}{sub.name}"
        if isinstance(sub, classes):
            yield path, sub
        yield from nested_layers(sub, classes, f"{path}/")


def refuse_a_container(name, leaves, classes):
    """Raises, saying why, if `name` is a layer holding affine maps or
    one nested in such a layer (`classes`: the affine maps)."""
    for leaf_name, leaf in leaves:
        nested = list(nested_layers(leaf, classes))
        if not nested:
            continue
        paths = {f"{leaf_name}/{path}" for path, _ in nested}
        if name in (leaf_name, leaf.name):
            raise ValueError(
                "Received an invalid value for argument `layers`. "
                f"{name!r} is a {type(leaf).__name__}, a layer holding "
                f"{len(nested)} affine map(s) (for example "
                f"{sorted(paths)[0]!r}) that `convert` cannot rebuild: build "
                "the model inside `keras_affine_div.layers_of(...)` to reach "
                f"them. Received: layers={name!r}"
            )
        if name in paths:
            raise ValueError(
                "Received an invalid value for argument `layers`. "
                f"{name!r} is nested inside {type(leaf).__name__} "
                f"{leaf.name!r}, which `convert` cannot rebuild: build the "
                "model inside `keras_affine_div.layers_of(...)` to reach it. "
                f"Received: layers={name!r}"
            )
