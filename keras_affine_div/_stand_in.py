"""Stand-ins for Keras layer classes (private).

`stand_in(original, target)` returns a class-like object that, called as
`original` is, builds a `target` layer from the same arguments instead,
with the package's kernel initialiser unless told to keep the one given
(a kernel meant for an undivided layer would shrink a divided layer's
outputs by about `sqrt(fan_in)`; `convert` does the same). Where `target`
refuses the arguments (a quantized layer, say), it builds `original` and
records why. `isinstance(layer, stand_in)` is true of instances of both
classes, so code that checks a layer's class while it is rebound still
sees a `Dense` as a `Dense`.
"""

import inspect


class _StandInMeta(type):
    """The metaclass of stand-ins: calling one builds its target."""

    def __new__(mcs, name, bases, namespace, **kwargs):
        if any(isinstance(base, _StandInMeta) for base in bases):
            raise TypeError(
                f"Cannot subclass {bases[0].__name__} while "
                "keras_affine_div.layers_of(...) is active: it stands for "
                "keras_affine_div's layer there. Define the subclass outside "
                "the `with` block."
            )
        return super().__new__(mcs, name, bases, namespace)

    def __call__(cls, *args, **kwargs):
        return cls._build(*args, **kwargs)

    def __instancecheck__(cls, obj):
        return isinstance(obj, (cls._original, cls._target))

    def __subclasscheck__(cls, sub):
        return issubclass(sub, (cls._original, cls._target))

    def __repr__(cls):
        return (
            f"<stand-in of {cls._original.__name__}: builds "
            f"{cls._target.__name__}>"
        )


def keyword_arguments(cls, args, kwargs):
    """`cls(*args, **kwargs)`'s arguments as keywords of `cls.__init__`.

    Raises:
        TypeError: as `cls(*args, **kwargs)` would, for arguments its
            `__init__` does not take.
    """
    signature = inspect.signature(cls.__init__)
    bound = signature.bind(None, *args, **kwargs)
    out = {}
    for name, value in list(bound.arguments.items())[1:]:
        kind = signature.parameters[name].kind
        if kind is inspect.Parameter.VAR_KEYWORD:
            out.update(value)
        elif kind is inspect.Parameter.VAR_POSITIONAL:
            if value:
                raise TypeError(
                    f"{cls.__name__} got extra positional arguments: {value}"
                )
        else:
            out[name] = value
    return out


def stand_in(original, target, keep_initializer=False, on_build=None):
    """A stand-in for the Keras class `original` that builds `target`.

    Args:
        original: the Keras layer class stood in for.
        target: the package's layer class built instead; it takes
            `original`'s arguments.
        keep_initializer: whether the `kernel_initializer` given is kept;
            by default the target's own default replaces it.
        on_build: optional `fn(layer, reason)` called with each layer
            built: `reason` is `None` for a `target` layer, else why an
            `original` one was built.

    Returns:
        A class-like object: calling it builds a layer.
    """

    def build(*args, **kwargs):
        arguments = keyword_arguments(original, args, kwargs)
        ours = dict(arguments)
        if not keep_initializer:
            ours["kernel_initializer"] = None
        try:
            layer = target(**ours)
        except (TypeError, ValueError) as e:
            layer = original(**arguments)
            reason = f"{target.__name__} refused its arguments: {e}"
        else:
            reason = None
        if on_build is not None:
            on_build(layer, reason)
        return layer

    return _StandInMeta(
        original.__name__,
        (),
        {
            "_original": original,
            "_target": target,
            "_build": staticmethod(build),
            "_affine_div_stand_in": True,
            "__doc__": f"Builds {target.__name__} in place of "
            f"{original.__name__}.",
        },
    )
