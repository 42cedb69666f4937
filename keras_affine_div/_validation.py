"""Argument checks shared by the layers and the ops (private).

Messages follow Keras: what was expected, then `Received: name=value`.
"""

import math
import numbers


def positive_int(value, name):
    """Returns `value` as an `int`, or raises if it is not a positive integer.

    Args:
        value: the argument to check.
        name: the argument's name, used in the error message.

    Returns:
        int: `value`.

    Raises:
        TypeError: if `value` is not an integer (booleans included).
        ValueError: if `value` is not positive.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(
            f"Received an invalid type for argument `{name}`. Expected a "
            f"positive integer. Received: {name}={value!r} "
            f"of type {type(value).__name__}"
        )
    if value <= 0:
        raise ValueError(
            f"Received an invalid value for argument `{name}`. Expected a "
            f"positive integer. Received: {name}={value!r}"
        )
    return int(value)


def int_tuple(value, n, name):
    """Returns `value` as a tuple of `n` positive ints.

    Args:
        value: an integer (repeated `n` times) or a sequence of `n` integers.
        n: the length of the tuple.
        name: the argument's name, used in the error message.

    Returns:
        tuple: `n` positive Python ints.

    Raises:
        TypeError: if `value` is neither an integer nor a sequence of them.
        ValueError: if the sequence has the wrong length or an entry is not
            positive.
    """
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        values = (value,) * n
    elif isinstance(value, (list, tuple)):
        values = tuple(value)
    else:
        raise TypeError(
            f"Received an invalid type for argument `{name}`. Expected an "
            f"integer or a tuple of {n} integers. Received: {name}={value!r}"
        )
    if len(values) != n or any(
        isinstance(v, bool) or not isinstance(v, numbers.Integral)
        for v in values
    ):
        raise ValueError(
            f"Received an invalid value for argument `{name}`. Expected an "
            f"integer or a tuple of {n} integers. Received: {name}={value!r}"
        )
    if any(v <= 0 for v in values):
        raise ValueError(
            f"Received an invalid value for argument `{name}`. Expected "
            f"positive integers. Received: {name}={value!r}"
        )
    return tuple(int(v) for v in values)


def positive_float(value, name):
    """Returns `value` as a `float`, or raises if it is not finite and > 0.

    Args:
        value: the argument to check.
        name: the argument's name, used in the error message.

    Returns:
        float: `value`.

    Raises:
        TypeError: if `value` is not a real number.
        ValueError: if `value` is not finite and strictly positive.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(
            f"Received an invalid type for argument `{name}`. Expected a "
            f"positive float. Received: {name}={value!r} "
            f"of type {type(value).__name__}"
        )
    if not math.isfinite(value) or value <= 0:
        raise ValueError(
            f"Received an invalid value for argument `{name}`. Expected a "
            f"finite float > 0. Received: {name}={value!r}"
        )
    return float(value)


def one_of(value, allowed, name):
    """Returns `value` lower-cased if it is one of `allowed`, else raises.

    Args:
        value: a string argument.
        allowed: the valid (lower-case) values.
        name: the argument's name, used in the error message.

    Returns:
        str: the lower-cased `value`.

    Raises:
        ValueError: if `value` is not a string in `allowed`.
    """
    if isinstance(value, str) and value.lower() in allowed:
        return value.lower()
    raise ValueError(
        f"Received an invalid value for argument `{name}`. Expected one of "
        f"{sorted(allowed)}. Received: {name}={value!r}"
    )
