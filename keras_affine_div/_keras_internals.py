"""The one place the package reaches into Keras' private modules.

Keras' `MultiHeadAttention` builds its query, key, value (and gate) and
output projections with the name `EinsumDense` of its own module,
`keras.src.layers.attention.multi_head_attention`, and takes no argument
to build them with another class. Every subclass of it (KerasHub's
`CachedMultiHeadAttention` among them) builds through that name too. To
put the package's einsum layers there, `attention_projections(factory)`
rebinds that name while a block runs, and restores it after.

`sublayers(layer)` lists the layers a `Layer` holds (Keras has no public
accessor but `Model.layers`), and `callbacks_before(callback)` the
callbacks listed before one in the running `fit`.

`check()` says in one line what moved if a Keras release renames the
module or the name; `tests/keras_internals_test.py` pins both, so that a
Keras upgrade that moves them fails the suite loudly instead of leaving
the attention projections silently plain.
"""

import contextlib
import importlib
import sys
import threading

import keras

# Where `MultiHeadAttention.build` looks its projection class up.
ATTENTION_MODULE = "keras.src.layers.attention.multi_head_attention"
PROJECTION_NAME = "EinsumDense"

# One rebinding at a time: building is not thread-safe while rebound.
_LOCK = threading.RLock()


class KerasInternalsError(RuntimeError):
    """The Keras private name the package rebinds is not where it was."""


def _attention_module():
    try:
        return importlib.import_module(ATTENTION_MODULE)
    except ImportError as e:
        raise KerasInternalsError(
            f"keras {keras.version()} has no module {ATTENTION_MODULE} "
            f"({e}); keras_affine_div cannot put its layers in "
            "MultiHeadAttention's projections with this Keras version"
        ) from None


def check():
    """Raises `KerasInternalsError` unless the rebound name is in place.

    The name must be bound to Keras' public `keras.layers.EinsumDense`, or
    to a stand-in of ours rebound by `attention_projections`.
    """
    module = _attention_module()
    bound = getattr(module, PROJECTION_NAME, None)
    if bound is keras.layers.EinsumDense or getattr(
        bound, "_affine_div_stand_in", False
    ):
        return module
    raise KerasInternalsError(
        f"keras {keras.version()}: {ATTENTION_MODULE}.{PROJECTION_NAME} is "
        f"{bound!r}, not keras.layers.EinsumDense; keras_affine_div cannot "
        "put its layers in MultiHeadAttention's projections with this Keras "
        "version"
    )


@contextlib.contextmanager
def attention_projections(factory):
    """Within the block, `MultiHeadAttention` builds its projections with
    `factory` (called as `EinsumDense` is) instead of `EinsumDense`.

    Nested blocks are allowed; each restores what it found.
    """
    with _LOCK:
        module = check()
        previous = getattr(module, PROJECTION_NAME)
        setattr(module, PROJECTION_NAME, factory)
        try:
            yield
        finally:
            setattr(module, PROJECTION_NAME, previous)


def sublayers(layer):
    """The layers `layer` holds directly (its tracked sublayers), in order.

    Keras 3 has no public accessor for the sublayers of a `Layer` that is
    not a `Model` (`Model.layers` is public); `Layer._flatten_layers` is
    what Keras itself uses for weights and saving.
    """
    if not hasattr(layer, "_flatten_layers"):
        raise KerasInternalsError(
            f"keras {keras.version()}: Layer._flatten_layers is gone; "
            "keras_affine_div cannot list the layers nested in "
            f"{type(layer).__name__} with this Keras version"
        )
    return list(layer._flatten_layers(include_self=False, recursive=False))


def callbacks_before(callback):
    """The callbacks listed before `callback` in the `fit` calling it.

    Called from `callback.on_train_begin`: Keras' `CallbackList` calls
    each callback's `on_train_begin` from its own, whose `self` holds the
    list. Returns `None` where the caller is not a `CallbackList` (a
    callback called by hand, or a Keras release that dispatches
    otherwise): nothing is known then.
    """
    frame = sys._getframe(2)
    while frame is not None:
        caller = frame.f_locals.get("self")
        if isinstance(caller, keras.callbacks.CallbackList):
            listed = list(caller.callbacks)
            if callback in listed:
                return listed[: listed.index(callback)]
            return None
        if caller is not callback:
            return None
        frame = frame.f_back
    return None
