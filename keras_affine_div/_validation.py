"""The argument checks of the whole package (private).

Every public function and class of `keras_affine_div` checks its arguments
here, so that one kind of mistake always reads the same. Messages follow
Keras: what was expected, then `Received: name=value`. A wrong type raises
`TypeError` where the value cannot be the right kind of thing at all, a
wrong value `ValueError`; each check returns the value normalised (a Python
`int`, `float`, tuple or list), so callers store what they checked.
"""

import math
import numbers

import keras
import numpy as np

# The smallest `epsilon` the layers accept: `2**-84`, about 5.17e-26 (see
# `epsilon`). From float32's largest exponent, 128: `epsilon**-1.5` stays
# at most `2**126`.
MIN_EPSILON = 2.0 ** -(2 * (np.finfo("float32").maxexp - 2) // 3)


def _is_int(value):
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _is_real(value):
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _invalid_value(name, expected, value):
    return ValueError(
        f"Received an invalid value for argument `{name}`. Expected "
        f"{expected}. Received: {name}={value!r}"
    )


def _invalid_type(name, expected, value):
    return TypeError(
        f"Received an invalid type for argument `{name}`. Expected "
        f"{expected}. Received: {name}={value!r} of type "
        f"{type(value).__name__}"
    )


def _or_none(expected, allow_none):
    return f"{expected} or None" if allow_none else expected


def positive_int(value, name, allow_none=False):
    """Returns `value` as an `int`, or raises if it is not a positive integer.

    Args:
        value: the argument to check.
        name: the argument's name, used in the error message.
        allow_none: whether `None` is accepted (and returned).

    Returns:
        int: `value` (or `None`).

    Raises:
        TypeError: if `value` is not an integer (booleans included).
        ValueError: if `value` is not positive.
    """
    if value is None and allow_none:
        return None
    expected = _or_none("a positive integer", allow_none)
    if not _is_int(value):
        raise _invalid_type(name, expected, value)
    if value <= 0:
        raise _invalid_value(name, expected, value)
    return int(value)


def non_negative_int(value, name):
    """Returns `value` as an `int`, or raises unless it is an integer >= 0.

    Args:
        value: the argument to check.
        name: the argument's name, used in the error message.

    Returns:
        int: `value`.

    Raises:
        TypeError: if `value` is not an integer (booleans included).
        ValueError: if `value` is negative.
    """
    expected = "a non-negative integer"
    if not _is_int(value):
        raise _invalid_type(name, expected, value)
    if value < 0:
        raise _invalid_value(name, expected, value)
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
    expected = f"an integer or a tuple of {n} integers"
    if _is_int(value):
        values = (value,) * n
    elif isinstance(value, (list, tuple)):
        values = tuple(value)
    else:
        raise _invalid_type(name, expected, value)
    if len(values) != n or not all(_is_int(v) for v in values):
        raise _invalid_value(name, expected, value)
    if any(v <= 0 for v in values):
        raise _invalid_value(name, "positive integers", value)
    return tuple(int(v) for v in values)


def positive_float(value, name, allow_none=False):
    """Returns `value` as a `float`, or raises if it is not finite and > 0.

    Args:
        value: the argument to check.
        name: the argument's name, used in the error message.
        allow_none: whether `None` is accepted (and returned).

    Returns:
        float: `value` (or `None`).

    Raises:
        TypeError: if `value` is not a real number.
        ValueError: if `value` is not finite and strictly positive.
    """
    if value is None and allow_none:
        return None
    if not _is_real(value):
        raise _invalid_type(
            name, _or_none("a positive float", allow_none), value
        )
    if not math.isfinite(value) or value <= 0:
        raise _invalid_value(
            name, _or_none("a finite float > 0", allow_none), value
        )
    return float(value)


def epsilon(value, name="epsilon"):
    """Returns `value` as a `float` if the layers stay finite with it.

    The layers compute `1 / sqrt(s + epsilon)` in float32, `s` a squared
    norm. At `x = 0` (`s = 0`) its derivative, `-epsilon**-1.5 / 2`, must
    stay finite, else the gradient is `0 * inf = NaN` there. The largest
    float32 is just under `2**128`, so `epsilon >= MIN_EPSILON = 2**-84`
    (about 5.17e-26) keeps `epsilon**-1.5 <= 2**126`, a factor 4 below it
    (the exact limit is about 2.05e-26). The value itself, `epsilon**-0.5`,
    is then far from overflowing. (Under a float16 policy the input
    gradient at `x = 0`, of the order of `epsilon**-0.5`, also needs
    `epsilon` above about 1e-9 to fit in float16; that is not checked.)

    Args:
        value: the argument to check.
        name: the argument's name, used in the error message.

    Returns:
        float: `value`.

    Raises:
        TypeError: if `value` is not a real number.
        ValueError: if `value` is not finite, or smaller than
            `MIN_EPSILON`.
    """
    value = positive_float(value, name)
    if value < MIN_EPSILON:
        raise _invalid_value(
            name,
            f"a finite float >= {MIN_EPSILON:.8g} (2**-84): below it the "
            "gradient at x = 0 overflows float32 (the derivative of "
            "1 / sqrt(|x|^2 + epsilon) there is -epsilon**-1.5 / 2) and "
            "becomes NaN",
            value,
        )
    return value


def number_in(value, name, low, high, closed=(False, False)):
    """Returns `value` as a `float` if it lies in an interval, else raises.

    Args:
        value: the argument to check.
        name: the argument's name, used in the error message.
        low: the lower end of the interval.
        high: the upper end of the interval.
        closed: `(low_closed, high_closed)`, whether each end belongs to
            the interval. Defaults to `(False, False)`, the open interval.

    Returns:
        float: `value`.

    Raises:
        ValueError: if `value` is not a real number in the interval.
    """
    left = "[" if closed[0] else "("
    right = "]" if closed[1] else ")"
    expected = f"a number in {left}{low}, {high}{right}"
    if (
        not _is_real(value)
        or not math.isfinite(value)
        or not (low <= value if closed[0] else low < value)
        or not (value <= high if closed[1] else value < high)
    ):
        raise _invalid_value(name, expected, value)
    return float(value)


def one_of(value, allowed, name, lower=False):
    """Returns `value` if it is one of `allowed`, else raises.

    Args:
        value: the argument to check.
        allowed: the valid values, in the order the message lists them.
        name: the argument's name, used in the error message.
        lower: whether a string is lower-cased before the check (as Keras
            does for `padding` and `data_format`).

    Returns:
        `value` (lower-cased if `lower`).

    Raises:
        ValueError: if `value` is not in `allowed`.
    """
    key = value.lower() if lower and isinstance(value, str) else value
    if isinstance(key, str) and key in allowed:
        return key
    listed = ", ".join(repr(v) for v in allowed)
    raise _invalid_value(name, f"one of {listed}", value)


def distinct_names(values, allowed, name):
    """Returns `values` as a tuple of distinct names from `allowed`.

    Args:
        values: a list or tuple of strings.
        allowed: the valid names.
        name: the argument's name, used in the error message.

    Returns:
        tuple: `values`.

    Raises:
        TypeError: if `values` is a string or not a list or tuple.
        ValueError: if it is empty, repeats a name or holds another one.
    """
    listed = ", ".join(repr(v) for v in allowed)
    if isinstance(values, str) or not isinstance(values, (list, tuple)):
        raise _invalid_type(
            name, f"a list or tuple of names from {listed}", values
        )
    if (
        not values
        or any(value not in allowed for value in values)
        or len(set(values)) != len(values)
    ):
        raise _invalid_value(
            name, f"a non-empty list of distinct names from {listed}", values
        )
    return tuple(values)


def positive_range(value, name):
    """Returns `(low, high)` as floats if `0 < low < high`, else raises.

    Args:
        value: a pair of finite numbers.
        name: the argument's name, used in the error message.

    Returns:
        tuple: `(float(low), float(high))`.

    Raises:
        ValueError: if `value` is not such a pair.
    """
    if (
        not isinstance(value, (list, tuple))
        or len(value) != 2
        or not all(_is_real(v) and math.isfinite(v) for v in value)
        or not 0 < value[0] < value[1]
    ):
        raise _invalid_value(name, "`(low, high)` with `0 < low < high`", value)
    return (float(value[0]), float(value[1]))


def positive_floats(values, name, allow_none=False):
    """Returns `values` as a tuple of floats if each is finite and > 0.

    Args:
        values: a non-empty list or tuple of numbers.
        name: the argument's name, used in the error message.
        allow_none: whether `None` is accepted (returned as `()`).

    Returns:
        tuple: the values as floats (`()` for an accepted `None`).

    Raises:
        ValueError: if `values` is not a non-empty list of positive numbers.
    """
    if values is None and allow_none:
        return ()
    if (
        not isinstance(values, (list, tuple))
        or not values
        or not all(_is_real(v) and math.isfinite(v) and v > 0 for v in values)
    ):
        expected = _or_none("a non-empty list of positive numbers", allow_none)
        raise _invalid_value(name, expected, values)
    return tuple(float(v) for v in values)


def shape(value, name, min_rank=0, max_rank=None):
    """Returns `value` as a tuple of positive ints of an allowed length.

    Args:
        value: a tuple or list of positive integers.
        name: the argument's name, used in the error message.
        min_rank: the fewest entries allowed.
        max_rank: the most entries allowed; `None` for no limit.

    Returns:
        tuple: `value` as Python ints.

    Raises:
        ValueError: if `value` is not such a tuple.
    """
    valid = isinstance(value, (tuple, list)) and all(
        _is_int(d) and d > 0 for d in value
    )
    if not valid or not (
        min_rank <= len(value) <= (len(value) if max_rank is None else max_rank)
    ):
        if max_rank == min_rank:
            expected = f"a tuple of {min_rank} positive integers"
        else:
            expected = f"a tuple of at least {min_rank} positive integers"
        raise _invalid_value(
            name,
            f"{expected} (the shape of one sample, without the batch axis)",
            value,
        )
    return tuple(int(d) for d in value)


def activation(value, name="activation"):
    """Returns `value` if Keras knows it as an activation, else raises.

    Args:
        value: an activation name, a callable or `None`.
        name: the argument's name, used in the error message.

    Returns:
        `value`, unchanged (the layers resolve it themselves).

    Raises:
        ValueError: if `keras.activations.get` does not accept it.
    """
    try:
        keras.activations.get(value)
    except (ValueError, TypeError):
        raise _invalid_value(
            name,
            "a Keras activation name (e.g. 'tanh', 'relu', 'leaky_relu'), "
            "a callable or None",
            value,
        ) from None
    return value


def same_samples(x, y):
    """Raises unless every array of `x` and `y` holds the same samples.

    Args:
        x: an array or a nest of arrays.
        y: an array or a nest of arrays.

    Raises:
        ValueError: if the arrays disagree on their first axis, or hold no
            sample.
    """
    x_shapes = [_array_shape(array) for array in keras.tree.flatten(x)]
    y_shapes = [_array_shape(array) for array in keras.tree.flatten(y)]
    sizes = {s[0] if s else None for s in x_shapes + y_shapes}
    if len(sizes) != 1 or None in sizes or 0 in sizes:
        x_shapes = x_shapes[0] if len(x_shapes) == 1 else x_shapes
        y_shapes = y_shapes[0] if len(y_shapes) == 1 else y_shapes
        raise ValueError(
            "Expected `x` and `y` to hold the same number of samples, at "
            "least one (the same size on the first axis of every array). "
            f"Received: x.shape={x_shapes}, y.shape={y_shapes}"
        )


def _array_shape(array):
    if hasattr(array, "shape"):
        return tuple(array.shape)
    return tuple(np.shape(array))


def layer_list(layers, name="layers"):
    """Returns `layers` as a list, `None` as `None`, or raises.

    Args:
        layers: `None`, or a non-empty list of distinct layers or layer
            names (str).
        name: the argument's name, used in the error message.

    Returns:
        list or None.

    Raises:
        TypeError: if `layers` is not a list of layers or names.
        ValueError: if it is empty or names a layer twice.
    """
    if layers is None:
        return None
    expected = "`None` or a list of layers or layer names (str)"
    if isinstance(layers, (str, keras.layers.Layer)) or not isinstance(
        layers, (list, tuple)
    ):
        raise _invalid_type(name, expected, layers)
    if not layers:
        raise _invalid_value(name, "`None` or at least one layer", layers)
    for layer in layers:
        if not isinstance(layer, (str, keras.layers.Layer)):
            raise _invalid_type(name, expected, layers)
    names = [
        layer if isinstance(layer, str) else layer.name for layer in layers
    ]
    if len(set(names)) != len(names):
        raise _invalid_value(name, "each layer at most once", names)
    return list(layers)


def boolean(value, name):
    """Returns `value` if it is a `bool`, else raises.

    Args:
        value: the argument to check.
        name: the argument's name, used in the error message.

    Returns:
        bool: `value`.

    Raises:
        TypeError: if `value` is not a `bool`.
    """
    if not isinstance(value, bool):
        raise _invalid_type(name, "a bool", value)
    return value
