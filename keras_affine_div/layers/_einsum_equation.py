"""Parse an `EinsumDense` equation and lay out its shapes (private).

`parse_equation`, `partial_output_shape` and `bias_axes_of` check the
arguments `equation`, `output_shape` and `bias_axes` of the einsum layers
as Keras' `EinsumDense` takes them (Keras' own parser is private). For an
input shape, `layout` gives the output, kernel and bias shapes, the fan
axes of the kernel, and where the squared norm `|x_c|^2` of the contracted
input entries sums and how it is laid out as the output.
"""

import dataclasses
import math
import numbers
import re

# `X,Y->Z`, `...X,Y->...Z` or `X...,Y->Z...`, as Keras' `EinsumDense`.
_EQUATION = re.compile(
    r"(?P<left>\.\.\.)?(?P<inputs>[a-zA-Z]+)(?P<right>\.\.\.)?,"
    r"(?P<kernel>[a-zA-Z]+)->"
    r"(?P<out_left>\.\.\.)?(?P<outputs>[a-zA-Z]+)(?P<out_right>\.\.\.)?"
)
_EQUATION_FORMS = "'X,Y->Z', '...X,Y->...Z' or 'X...,Y->Z...'"


@dataclasses.dataclass(frozen=True)
class Equation:
    """A parsed `EinsumDense` equation.

    Attributes:
        inputs: str, the letters of the input spec (without `...`).
        kernel: str, the letters of the kernel spec.
        outputs: str, the letters of the output spec (without `...`).
        ellipsis: `"left"`, `"right"` or `None`: where `...` stands, on
            both the input and the output.
    """

    inputs: str
    kernel: str
    outputs: str
    ellipsis: object

    @property
    def contracted(self):
        """str: the input letters summed over (not in the output)."""
        return "".join(c for c in self.inputs if c not in self.outputs)

    @property
    def new_outputs(self):
        """str: the output letters the kernel adds (not in the input)."""
        return "".join(c for c in self.outputs if c not in self.inputs)

    def axis_tokens(self, rank):
        """The names of the input and output axes for an input of `rank`.

        Elided axes are named `"...0"`, `"...1"`, ... on both sides.

        Returns:
            tuple: `(input_tokens, output_tokens)`, two lists of str.
        """
        elided = [f"...{i}" for i in range(rank - len(self.inputs))]
        if self.ellipsis == "left":
            return elided + list(self.inputs), elided + list(self.outputs)
        if self.ellipsis == "right":
            return list(self.inputs) + elided, list(self.outputs) + elided
        return list(self.inputs), list(self.outputs)


def parse_equation(equation):
    """Checks an `EinsumDense` equation for the layers and parses it.

    Beyond Keras' form checks, the layers need every contracted input axis
    to be multiplied by the kernel (else the output is affine in a sum of
    inputs, not in the inputs), and, without a left `...`, the first input
    and output letter to be the batch axis.

    Args:
        equation: the equation string.

    Returns:
        Equation: the parsed equation.

    Raises:
        TypeError: if `equation` is not a string.
        ValueError: if it is not of one of the three forms, repeats a
            letter within a spec, has a letter that no other spec
            explains or a contracted letter the kernel does not multiply,
            or (without a leading `...`) does not start the input and the
            output with the batch axis.
    """
    if not isinstance(equation, str):
        raise TypeError(
            "Received an invalid type for argument `equation`. Expected an "
            f"einsum string of the form {_EQUATION_FORMS}. Received: "
            f"equation={equation!r} of type {type(equation).__name__}"
        )
    match = _EQUATION.fullmatch(equation)
    ends = match and tuple(
        bool(match[k]) for k in ("left", "right", "out_left", "out_right")
    )
    if ends not in (
        (False, False, False, False),
        (True, False, True, False),
        (False, True, False, True),
    ):
        raise _invalid_equation(
            f"an einsum string of the form {_EQUATION_FORMS}: '...' at the "
            "same end of the input and the output spec, or nowhere",
            equation,
        )
    parsed = Equation(
        inputs=match["inputs"],
        kernel=match["kernel"],
        outputs=match["outputs"],
        ellipsis="left" if ends[0] else ("right" if ends[1] else None),
    )
    for name, spec in (
        ("input", parsed.inputs),
        ("kernel", parsed.kernel),
        ("output", parsed.outputs),
    ):
        if len(set(spec)) != len(spec):
            raise _invalid_equation(
                f"each letter at most once in the {name} spec '{spec}'",
                equation,
            )
    for c in parsed.outputs:
        if c not in parsed.inputs and c not in parsed.kernel:
            raise _invalid_equation(
                "every output letter in the input or the kernel spec; "
                f"'{c}' is in neither",
                equation,
            )
    for c in parsed.kernel:
        if c not in parsed.inputs and c not in parsed.outputs:
            raise _invalid_equation(
                "every kernel letter in the input or the output spec; "
                f"'{c}' is in neither",
                equation,
            )
    for c in parsed.contracted:
        if c not in parsed.kernel:
            raise _invalid_equation(
                "every contracted input letter (one not in the output) in "
                f"the kernel spec; '{c}' would be summed without the "
                "kernel, and the output would not be an affine map of the "
                "input entries",
                equation,
            )
    if parsed.ellipsis != "left" and (
        parsed.inputs[0] != parsed.outputs[0]
        or parsed.inputs[0] in parsed.kernel
    ):
        raise _invalid_equation(
            "the batch axis first in the input and the output spec, and "
            "not in the kernel spec (without a leading '...')",
            equation,
        )
    return parsed


def contracted_axes(equation, rank):
    """The input axes an `EinsumDense` equation sums over, for `rank`.

    Checks the form of the equation only (`X,Y->Z`, `...X,Y->...Z` or
    `X...,Y->Z...`), not what `parse_equation` asks of it for the layers of
    this package: so that any equation Keras' `EinsumDense` takes gives the
    axes its output is an affine map of (the diagnostics measure those
    layers too).

    Args:
        equation: str, the equation.
        rank: int, the rank of the input, batch axis included.

    Returns:
        tuple: the indices of the input axes whose letters are not in the
        output spec, in increasing order (empty if nothing is contracted).

    Raises:
        ValueError: if `equation` is not of one of the three forms.
    """
    match = _EQUATION.fullmatch(equation)
    if match is None or any(
        bool(match[a]) != bool(match[b])
        for a, b in (("left", "out_left"), ("right", "out_right"))
    ):
        raise _invalid_equation(
            f"an einsum string of the form {_EQUATION_FORMS}", equation
        )
    parsed = Equation(
        inputs=match["inputs"],
        kernel=match["kernel"],
        outputs=match["outputs"],
        ellipsis="left"
        if match["left"]
        else ("right" if match["right"] else None),
    )
    in_tokens, out_tokens = parsed.axis_tokens(rank)
    return tuple(i for i, t in enumerate(in_tokens) if t not in out_tokens)


def partial_output_shape(output_shape, equation):
    """Checks `output_shape` against the parsed `equation`.

    Args:
        output_shape: an integer, or a tuple or list of positive integers
            or `None`: the output shape without the batch axis and the
            elided axes.
        equation: Equation, the parsed equation.

    Returns:
        tuple: `output_shape` as a tuple.

    Raises:
        TypeError: if `output_shape` is neither an integer nor a tuple or
            list.
        ValueError: if an entry is not a positive integer or `None`, or
            its length does not match the output spec.
    """
    if isinstance(output_shape, numbers.Integral) and not isinstance(
        output_shape, bool
    ):
        output_shape = (output_shape,)
    if not isinstance(output_shape, (tuple, list)):
        raise TypeError(
            "Received an invalid type for argument `output_shape`. Expected "
            "an integer or a tuple of integers (or None). Received: "
            f"output_shape={output_shape!r} of type "
            f"{type(output_shape).__name__}"
        )
    if not all(
        d is None
        or (isinstance(d, numbers.Integral) and not isinstance(d, bool))
        and d > 0
        for d in output_shape
    ):
        raise ValueError(
            "Received an invalid value for argument `output_shape`. Expected "
            "positive integers or None. Received: "
            f"output_shape={output_shape!r}"
        )
    letters = _partial_letters(equation)
    if len(output_shape) != len(letters):
        raise ValueError(
            "Received an invalid value for argument `output_shape`. Expected "
            f"{len(letters)} entries, one per output axis '{letters}' of the "
            "equation (without the batch axis and the axes of '...'). "
            f"Received: output_shape={tuple(output_shape)!r}"
        )
    return tuple(None if d is None else int(d) for d in output_shape)


def bias_axes_of(bias_axes, equation, equation_string):
    """Checks `bias_axes` against the parsed `equation`.

    Args:
        bias_axes: `None` or a string of distinct output letters.
        equation: Equation, the parsed equation.
        equation_string: str, the equation as given, for the messages.

    Returns:
        `bias_axes`, unchanged.

    Raises:
        TypeError: if `bias_axes` is neither `None` nor a string.
        ValueError: if it is empty, repeats a letter or names one that is
            not an output axis.
    """
    if bias_axes is None:
        return None
    if not isinstance(bias_axes, str):
        raise TypeError(
            "Received an invalid type for argument `bias_axes`. Expected "
            "None or a string of output letters of the equation. Received: "
            f"bias_axes={bias_axes!r} of type {type(bias_axes).__name__}"
        )
    if (
        not bias_axes
        or len(set(bias_axes)) != len(bias_axes)
        or any(c not in equation.outputs for c in bias_axes)
    ):
        raise ValueError(
            "Received an invalid value for argument `bias_axes`. Expected "
            "None or a non-empty string of distinct letters of the output "
            f"spec '{equation.outputs}'. Received: bias_axes={bias_axes!r}, "
            f"equation={equation_string!r}"
        )
    return bias_axes


@dataclasses.dataclass(frozen=True)
class Layout:
    """The shapes of one einsum layer for one input shape.

    Attributes:
        output_shape: tuple, the full output shape.
        kernel_shape: tuple of ints.
        bias_shape: tuple of ints, or `None` without bias.
        kernel_input_axes: tuple, the kernel axes of input letters (the
            fan-in axes of a `VarianceScaling` initialiser).
        kernel_output_axes: tuple, the kernel axes of output letters.
        contracted_axes: tuple of ints, the input axes the norm sums over.
        norm_transpose: tuple of ints, or `None` for the identity: the
            permutation of the remaining (kept) input axes into the
            output's order.
        norm_expand: tuple of ints, the output axes the kernel adds, where
            the norm has size 1.
        contracted_size: int, the number of entries of `x_c`.
        new_output_size: int, the number of outputs per kept position.
    """

    output_shape: tuple
    kernel_shape: tuple
    bias_shape: object
    kernel_input_axes: tuple
    kernel_output_axes: tuple
    contracted_axes: tuple
    norm_transpose: object
    norm_expand: tuple
    contracted_size: int
    new_output_size: int


def layout(equation, bias_axes, partial_shape, input_shape, layer_name):
    """The `Layout` of a layer for `input_shape`; raises if it has none.

    Args:
        equation: Equation, the parsed equation.
        bias_axes: `None` or str, the checked bias axes.
        partial_shape: tuple, the checked partial output shape.
        input_shape: tuple, the input shape, batch axis included.
        layer_name: str, for the messages.

    Returns:
        Layout.

    Raises:
        ValueError: if the input's rank does not fit the equation, a size
            the weights need is undefined, or an input size disagrees with
            `output_shape`.
    """
    input_shape = tuple(input_shape)
    rank = len(input_shape)
    n = len(equation.inputs)
    fits = {
        None: rank == n,
        "left": rank > n,
        "right": rank >= n,
    }[equation.ellipsis]
    if not fits:
        expected = {
            None: f"rank {n}",
            "left": f"rank > {n} (the batch axis is in '...')",
            "right": f"rank >= {n}",
        }[equation.ellipsis]
        raise ValueError(
            f"Layer `{layer_name}` expects inputs of {expected}, one axis "
            f"per letter of the input spec '{equation.inputs}'. Received: "
            f"input_shape={input_shape}"
        )
    in_tokens, out_tokens = equation.axis_tokens(rank)
    size = dict(zip(in_tokens, input_shape))
    given = dict(zip(_partial_letters(equation), partial_shape))
    for c, d in given.items():
        if c in size and d is not None and size[c] is not None:
            if d != size[c]:
                raise ValueError(
                    f"Layer `{layer_name}`: the input and `output_shape` "
                    f"disagree on the size of axis '{c}'. Received: "
                    f"input_shape={input_shape}, "
                    f"output_shape={partial_shape}"
                )
        if c not in size or size[c] is None:
            size[c] = d
    output_shape = tuple(size.get(t) for t in out_tokens)
    needed = set(equation.kernel) | set(bias_axes or "")
    undefined = sorted(c for c in needed if size.get(c) is None)
    if undefined:
        raise ValueError(
            f"Layer `{layer_name}` needs the size of axis "
            f"{', '.join(repr(c) for c in undefined)} (kernel or bias axes) "
            "to be defined by the input shape or `output_shape`. Received: "
            f"input_shape={input_shape}, output_shape={partial_shape}"
        )
    kernel_shape = tuple(size[c] for c in equation.kernel)
    bias_shape = None
    if bias_axes is not None:
        first = min(equation.outputs.index(c) for c in bias_axes)
        bias_shape = tuple(
            size[c] if c in bias_axes else 1 for c in equation.outputs[first:]
        )
        if equation.ellipsis == "right":
            bias_shape += (1,) * (rank - n)
    kept = [t for t in in_tokens if t in out_tokens]
    transpose = tuple(kept.index(t) for t in out_tokens if t in kept)
    return Layout(
        output_shape=output_shape,
        kernel_shape=kernel_shape,
        bias_shape=bias_shape,
        kernel_input_axes=tuple(
            i for i, c in enumerate(equation.kernel) if c not in out_tokens
        ),
        kernel_output_axes=tuple(
            i for i, c in enumerate(equation.kernel) if c in out_tokens
        ),
        contracted_axes=tuple(
            i for i, t in enumerate(in_tokens) if t not in out_tokens
        ),
        norm_transpose=None
        if transpose == tuple(range(len(transpose)))
        else transpose,
        norm_expand=tuple(
            i for i, t in enumerate(out_tokens) if t not in in_tokens
        ),
        contracted_size=math.prod(size[c] for c in equation.contracted),
        new_output_size=math.prod(size[c] for c in equation.new_outputs),
    )


def _partial_letters(equation):
    """The output letters that `output_shape` gives sizes for."""
    if equation.ellipsis == "left":
        return equation.outputs
    return equation.outputs[1:]


def _invalid_equation(expected, equation):
    return ValueError(
        "Received an invalid value for argument `equation`. Expected "
        f"{expected}. Received: equation={equation!r}"
    )
