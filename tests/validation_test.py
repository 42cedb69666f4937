"""The package's argument checks (`keras_affine_div._validation`)."""

import math
import re

import keras
import numpy as np
import pytest

from keras_affine_div import _validation


def test_positive_int():
    assert _validation.positive_int(3, "n") == 3
    assert type(_validation.positive_int(np.int64(3), "n")) is int
    assert _validation.positive_int(None, "n", allow_none=True) is None
    with pytest.raises(
        TypeError,
        match=r"Received an invalid type for argument `n`. Expected a "
        r"positive integer. Received: n=True of type bool",
    ):
        _validation.positive_int(True, "n")
    with pytest.raises(TypeError, match=r"Received: n=2.0 of type float"):
        _validation.positive_int(2.0, "n")
    with pytest.raises(TypeError, match=r"Received: n=None"):
        _validation.positive_int(None, "n")
    with pytest.raises(
        ValueError,
        match=r"Received an invalid value for argument `n`. Expected a "
        r"positive integer or None. Received: n=0$",
    ):
        _validation.positive_int(0, "n", allow_none=True)


def test_non_negative_int():
    assert _validation.non_negative_int(0, "seed") == 0
    with pytest.raises(ValueError, match=r"non-negative integer. Received: "):
        _validation.non_negative_int(-1, "seed")
    with pytest.raises(TypeError, match=r"Received: seed='1' of type str"):
        _validation.non_negative_int("1", "seed")


def test_int_tuple():
    assert _validation.int_tuple(3, 2, "k") == (3, 3)
    assert _validation.int_tuple([1, 2, 3], 3, "k") == (1, 2, 3)
    with pytest.raises(TypeError, match=r"a tuple of 2 integers"):
        _validation.int_tuple("3", 2, "k")
    with pytest.raises(ValueError, match=r"a tuple of 2 integers"):
        _validation.int_tuple((1, 2, 3), 2, "k")
    with pytest.raises(ValueError, match=r"a tuple of 2 integers"):
        _validation.int_tuple((1, True), 2, "k")
    with pytest.raises(ValueError, match=r"positive integers. Received: k="):
        _validation.int_tuple((1, 0), 2, "k")


@pytest.mark.parametrize("value", [0, -1.0, math.inf, math.nan])
def test_positive_float_rejects_values(value):
    with pytest.raises(ValueError, match=r"Expected a finite float > 0"):
        _validation.positive_float(value, "eps")


def test_positive_float():
    assert _validation.positive_float(1, "eps") == 1.0
    assert type(_validation.positive_float(np.float32(0.5), "eps")) is float
    assert _validation.positive_float(None, "eps", allow_none=True) is None
    with pytest.raises(TypeError, match=r"Received: eps='1' of type str"):
        _validation.positive_float("1", "eps")
    with pytest.raises(TypeError, match=r"of type bool"):
        _validation.positive_float(True, "eps")


def test_epsilon_keeps_the_gradient_at_zero_finite():
    smallest = _validation.MIN_EPSILON
    assert smallest == 2.0**-84
    # d/ds (s + eps)**-0.5 at s = 0 is -eps**-1.5 / 2: finite in float32
    # at the bound, not at about 2.05e-26 below it.
    with np.errstate(over="ignore"):
        assert np.isfinite(np.float32(smallest) ** np.float32(-1.5))
        assert not np.isfinite(np.float32(2e-26) ** np.float32(-1.5))
    assert _validation.epsilon(smallest) == smallest
    assert _validation.epsilon(1e-3) == 1e-3
    tiny = float(np.finfo("float32").tiny)
    just_below = float(np.nextafter(smallest, 0))
    for value in (just_below, 2e-26, tiny, 1e-50, 1e-45):
        with pytest.raises(
            ValueError,
            match=r"Received an invalid value for argument `epsilon`\. "
            r"Expected a finite float >= 5\.1698788e-26 \(2\*\*-84\): below "
            r"it the gradient at x = 0 overflows float32 .*Received: "
            r"epsilon=" + re.escape(repr(value)) + "$",
        ):
            _validation.epsilon(value)
    with pytest.raises(ValueError, match=r"> 0\. Received: epsilon=0"):
        _validation.epsilon(0)
    with pytest.raises(TypeError, match=r"Received: eps='1e-3' of type str"):
        _validation.epsilon("1e-3", "eps")


def test_number_in():
    assert _validation.number_in(0.5, "p", 0, 1) == 0.5
    assert _validation.number_in(0, "m", 0, 1, closed=(True, False)) == 0.0
    for value in (0, 1, -0.1, math.nan, "0.5", True):
        with pytest.raises(
            ValueError, match=r"Expected a number in \(0, 1\). Received: p="
        ):
            _validation.number_in(value, "p", 0, 1)
    with pytest.raises(ValueError, match=r"Expected a number in \[0, 1\)"):
        _validation.number_in(1, "m", 0, 1, closed=(True, False))
    assert _validation.number_in(1, "m", 0, 1, closed=(True, True)) == 1.0


def test_one_of():
    assert _validation.one_of("sgd", ("sgd", "adam"), "opt") == "sgd"
    assert _validation.one_of("SAME", ("same",), "padding", lower=True) == (
        "same"
    )
    with pytest.raises(
        ValueError,
        match=r"Received an invalid value for argument `opt`. Expected one "
        r"of 'sgd', 'adam'. Received: opt='SGD'",
    ):
        _validation.one_of("SGD", ("sgd", "adam"), "opt")
    with pytest.raises(ValueError, match=r"Received: opt=None"):
        _validation.one_of(None, ("sgd",), "opt")


def test_distinct_names():
    allowed = ("sgd", "adam")
    assert _validation.distinct_names(["adam"], allowed, "o") == ("adam",)
    with pytest.raises(TypeError, match=r"a list or tuple of names"):
        _validation.distinct_names("sgd", allowed, "o")
    for values in ([], ["sgd", "sgd"], ["rmsprop"]):
        with pytest.raises(
            ValueError, match=r"a non-empty list of distinct names from"
        ):
            _validation.distinct_names(values, allowed, "o")


def test_positive_range():
    assert _validation.positive_range([1e-3, 1], "r") == (1e-3, 1.0)
    for value in ((1, 1), (0, 1), (2, 1), (1,), "ab", (1, math.inf)):
        with pytest.raises(ValueError, match=r"`0 < low < high`"):
            _validation.positive_range(value, "r")


def test_positive_floats():
    assert _validation.positive_floats([1, 0.5], "s") == (1.0, 0.5)
    assert _validation.positive_floats(None, "s", allow_none=True) == ()
    for value in (None, [], [0.5, 0], [math.nan], 0.5):
        with pytest.raises(ValueError, match=r"list of positive numbers"):
            _validation.positive_floats(value, "s")


def test_shape():
    assert _validation.shape([32, 32, 3], "s", 3, 3) == (32, 32, 3)
    assert _validation.shape((4,), "s", min_rank=1) == (4,)
    with pytest.raises(ValueError, match=r"a tuple of 3 positive integers"):
        _validation.shape((32, 32), "s", 3, 3)
    with pytest.raises(ValueError, match=r"at least 1 positive integers"):
        _validation.shape((), "s", min_rank=1)
    with pytest.raises(ValueError, match=r"without the batch axis"):
        _validation.shape((None, 4), "s", min_rank=1)


def test_activation():
    assert _validation.activation("tanh") == "tanh"
    assert _validation.activation(None) is None
    with pytest.raises(
        ValueError, match=r"a Keras activation name .* Received: "
    ):
        _validation.activation("no_such_activation")


def test_same_samples():
    _validation.same_samples(np.zeros((3, 2)), [np.zeros((3,)), np.arange(3)])
    with pytest.raises(
        ValueError,
        match=r"Received: x.shape=\(3, 2\), y.shape=\(2,\)",
    ):
        _validation.same_samples(np.zeros((3, 2)), np.zeros((2,)))
    with pytest.raises(ValueError, match=r"at least one"):
        _validation.same_samples(np.zeros((0, 2)), np.zeros((0,)))


def test_layer_list():
    dense = keras.layers.Dense(2, name="a")
    assert _validation.layer_list(None) is None
    assert _validation.layer_list((dense, "b")) == [dense, "b"]
    with pytest.raises(TypeError, match=r"Received: layers='a' of type str"):
        _validation.layer_list("a")
    with pytest.raises(TypeError, match=r"a list of layers"):
        _validation.layer_list([dense, 3])
    with pytest.raises(ValueError, match=r"at least one layer"):
        _validation.layer_list([])
    with pytest.raises(
        ValueError, match=r"each layer at most once. Received: layers=\['a'"
    ):
        _validation.layer_list([dense, "a"])


def test_boolean():
    assert _validation.boolean(False, "flag") is False
    with pytest.raises(TypeError, match=r"Expected a bool. Received: flag=1"):
        _validation.boolean(1, "flag")
