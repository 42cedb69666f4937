"""A learning-rate search that stops once the best rate is bracketed.

The search works on a log scale. It first tries the *initial grid*: the
rates `low * 10**(k * step)` from `low` up to `high` (every half decade by
default). Then it refines around the *best* rate, the completed,
non-diverged trial with the highest score (ties go to the lowest rate):

- where nothing was tried on one side of the best, it extends the search by
  one grid step past the best, within `limits`;
- where the nearest rate tried on one side is more than a factor
  `BRACKET_FACTOR` (2) away, it tries the best times (or divided by) 2;
- where the nearest rate on one side is within a factor 2 but diverged or
  failed, it tries their geometric midpoint, as long as the two halves stay
  wider than `min_factor` (2 ** (1 / 8) by default); closer than that, the
  best sits against a cliff and the search stops.

The best rate is *bracketed* when its nearest completed, non-diverged
neighbour on each side is within a factor 2 and, being the best, scores no
higher: the optimum then lies between the two neighbours, and the chosen
rate is within a factor 2 of it on a smooth objective. A search stops
unbracketed when the best sits at one of `limits` (the objective still
improves towards it), against a diverging neighbour, or when it runs out of
trials.

Every decision is a function of the points tried so far only, never of the
order in which they arrived or of the time, so that a search reloaded from
its trials, or shared by several workers, makes the same decisions. Rates
still running are waited for before any refinement.

Example:

>>> grid = initial_grid(1e-2, 1.0)
>>> [round(lr, 4) for lr in grid]
[0.01, 0.0316, 0.1, 0.3162, 1.0]
>>> points = [Point(lr, "ok", score=1.0 - abs(lr - 0.1)) for lr in grid]
>>> next_action(points, 1e-2, 1.0)
Action(kind='try', learning_rate=0.05, bracketed=None)
"""

import dataclasses
import math
import numbers

DEFAULT_STEP = 0.5
DEFAULT_LIMITS = (1e-6, 100.0)
DEFAULT_MIN_FACTOR = 2 ** (1 / 8)
BRACKET_FACTOR = 2.0

STATUSES = ("ok", "diverged", "failed", "pending")
ACTION_KINDS = ("try", "wait", "stop")

# Two rates within this relative distance are the same rate.
_SAME_RATE_RTOL = 1e-9
# The slack of "within a factor `BRACKET_FACTOR`".
_BRACKET_RTOL = 1e-6


@dataclasses.dataclass(frozen=True)
class Point:
    """One learning rate tried, with its outcome.

    Args:
        learning_rate: positive float, the rate tried.
        status: one of `"ok"` (completed and not diverged), `"diverged"`,
            `"failed"` or `"pending"` (still running).
        score: float, the objective of an `"ok"` point (higher is better);
            required for `"ok"` and ignored otherwise. Defaults to `None`.

    Raises:
        ValueError: if `learning_rate` is not a positive finite number,
            `status` is unknown, or an `"ok"` point has no finite score.
    """

    learning_rate: float
    status: str
    score: float | None = None

    def __post_init__(self):
        _check_positive("learning_rate", self.learning_rate)
        if self.status not in STATUSES:
            raise ValueError(
                "Received an invalid value for argument `status`. Expected "
                f"one of {STATUSES}. Received: status={self.status!r}"
            )
        if self.status == "ok" and (
            isinstance(self.score, bool)
            or not isinstance(self.score, numbers.Real)
            or not math.isfinite(self.score)
        ):
            raise ValueError(
                "Received an invalid value for argument `score`. Expected a "
                "finite number for a point with status 'ok'. Received: "
                f"score={self.score!r}, learning_rate={self.learning_rate!r}"
            )


@dataclasses.dataclass(frozen=True)
class Action:
    """What the search does next.

    Args:
        kind: `"try"` (run `learning_rate`), `"wait"` (for the pending points)
            or `"stop"` (the search is over).
        learning_rate: float, the rate to try, for `"try"`. Defaults to
            `None`.
        bracketed: bool, for `"stop"`: whether the best rate is bracketed.
            Defaults to `None`.

    Raises:
        ValueError: if `kind` is unknown.
    """

    kind: str
    learning_rate: float | None = None
    bracketed: bool | None = None

    def __post_init__(self):
        if self.kind not in ACTION_KINDS:
            raise ValueError(
                "Received an invalid value for argument `kind`. Expected one "
                f"of {ACTION_KINDS}. Received: kind={self.kind!r}"
            )


def check_arguments(
    low,
    high,
    step=DEFAULT_STEP,
    limits=DEFAULT_LIMITS,
    min_factor=DEFAULT_MIN_FACTOR,
    names=None,
):
    """Checks the settings of a search.

    Args:
        low: positive float, the lowest rate of the initial grid.
        high: positive float, the highest rate of the initial grid.
        step: positive float, the grid step in decades. Defaults to
            `DEFAULT_STEP`.
        limits: pair of positive floats `(min, max)` with
            `min <= low < high <= max`, the range the search may extend to.
            Defaults to `DEFAULT_LIMITS`.
        min_factor: float greater than 1, the closest two refined rates may
            be. Defaults to `DEFAULT_MIN_FACTOR`.
        names: optional dict mapping `"low"`, `"high"`, `"step"`, `"limits"`
            and `"min_factor"` to the argument names the errors should
            quote (a caller's own names). Defaults to `None`: these names.

    Returns:
        tuple: `(low, high, step, (limit_low, limit_high), min_factor)`, as
        floats.

    Raises:
        TypeError: if a setting is not a number, or `limits` not a pair.
        ValueError: if a setting is out of range.
    """
    names = {
        **{n: n for n in ("low", "high", "step", "limits", "min_factor")},
        **(names or {}),
    }
    low = _check_positive(names["low"], low)
    high = _check_positive(names["high"], high)
    step = _check_positive(names["step"], step)
    if low >= high:
        raise ValueError(
            f"Received invalid values for arguments `{names['low']}` and "
            f"`{names['high']}`. Expected `{names['low']} < {names['high']}`."
            f" Received: {names['low']}={low!r}, {names['high']}={high!r}"
        )
    if (
        isinstance(limits, (str, bytes))
        or not hasattr(limits, "__len__")
        or len(limits) != 2
    ):
        raise TypeError(
            f"Received an invalid value for argument `{names['limits']}`. "
            "Expected a pair `(min, max)`. Received: "
            f"{names['limits']}={limits!r}"
        )
    limit_low = _check_positive(names["limits"], limits[0], value=limits)
    limit_high = _check_positive(names["limits"], limits[1], value=limits)
    if not limit_low <= low < high <= limit_high:
        raise ValueError(
            f"Received an invalid value for argument `{names['limits']}`. "
            f"Expected `{names['limits']}[0] <= {names['low']} < "
            f"{names['high']} <= {names['limits']}[1]`. Received: "
            f"{names['limits']}={limits!r}, {names['low']}={low!r}, "
            f"{names['high']}={high!r}"
        )
    name = names["min_factor"]
    if isinstance(min_factor, bool) or not isinstance(min_factor, numbers.Real):
        raise TypeError(
            f"Received an invalid type for argument `{name}`. Expected a "
            f"number greater than 1. Received: {name}={min_factor!r}"
        )
    if not (math.isfinite(min_factor) and min_factor > 1):
        raise ValueError(
            f"Received an invalid value for argument `{name}`. Expected a "
            f"finite number greater than 1. Received: {name}={min_factor!r}"
        )
    return low, high, step, (limit_low, limit_high), float(min_factor)


def initial_grid(low, high, step=DEFAULT_STEP):
    """The rates a search tries first: every `step` decades from `low`.

    Args:
        low: positive float, the first rate.
        high: positive float greater than `low`, the last rate at most
            (with a relative tolerance of 1e-9).
        step: positive float, the spacing in decades. Defaults to
            `DEFAULT_STEP` (half a decade).

    Returns:
        tuple: floats `low * 10 ** (k * step)` for `k = 0, 1, ...`, in
        ascending order; `low` always included.

    Raises:
        TypeError: if an argument is not a number.
        ValueError: if an argument is not positive and finite, or
            `low >= high`.

    Example:

    >>> initial_grid(1e-3, 1e-1, step=1.0)
    (0.001, 0.01, 0.1)
    """
    low, high, step, _, _ = check_arguments(low, high, step)
    grid = []
    k = 0
    while True:
        lr = low * 10 ** (k * step)
        if lr > high * (1 + _SAME_RATE_RTOL):
            break
        grid.append(lr)
        k += 1
    return tuple(grid)


def ranking_key(point):
    """The sort key that puts the best `"ok"` point first.

    The highest score first; among equal scores, the lowest learning rate.

    Args:
        point: a `Point` with status `"ok"`.

    Returns:
        tuple: `(-score, learning_rate)`.
    """
    return (-point.score, point.learning_rate)


def next_action(
    points,
    low,
    high,
    step=DEFAULT_STEP,
    limits=DEFAULT_LIMITS,
    min_factor=DEFAULT_MIN_FACTOR,
):
    """Decides the next step of a search from the points tried so far.

    In order: the untried rates of `initial_grid(low, high, step)`,
    ascending; "wait" while any point is pending; with no `"ok"` point yet,
    one step below the lowest rate tried; then the refinement of each side
    of the best point, below first (see the module docstring).

    Args:
        points: iterable of `Point`, every rate tried so far, in any order.
        low: positive float, the lowest rate of the initial grid.
        high: positive float, the highest rate of the initial grid.
        step: positive float, the grid step in decades. Defaults to
            `DEFAULT_STEP`.
        limits: pair of positive floats `(min, max)`, the range the search
            may extend to, with `min <= low < high <= max`. Defaults to
            `DEFAULT_LIMITS`.
        min_factor: float greater than 1, the closest a refined rate may come
            to a diverged or failed one. Defaults to `DEFAULT_MIN_FACTOR`.

    Returns:
        Action: `Action("try", learning_rate=lr)`, `Action("wait")` or
        `Action("stop", bracketed=b)`.

    Raises:
        TypeError: if a point is not a `Point`, or a setting not a number.
        ValueError: if a setting is out of range.
    """
    grid = initial_grid(low, high, step)
    _, _, step, (limit_low, limit_high), min_factor = check_arguments(
        low, high, step, limits, min_factor
    )
    points = _sorted_points(points)

    def propose(lr):
        # Never propose a rate tried already: stop instead of looping.
        if any(_same_rate(lr, p.learning_rate) for p in points):
            return Action("stop", bracketed=False)
        return Action("try", learning_rate=lr)

    for lr in grid:
        if not any(_same_rate(lr, p.learning_rate) for p in points):
            return Action("try", learning_rate=lr)
    if any(p.status == "pending" for p in points):
        return Action("wait")

    best = _best(points)
    if best is None:
        lowest = points[0].learning_rate
        if _at_or_below(lowest, limit_low):
            return Action("stop", bracketed=False)
        return propose(max(lowest / 10**step, limit_low))

    b = best.learning_rate
    for side in (-1, 1):
        if side < 0:
            q = _nearest_below(points, b)
            at_limit = _at_or_below(b, limit_low)
        else:
            q = _nearest_above(points, b)
            at_limit = _at_or_below(limit_high, b)
        if q is None:
            if at_limit:
                return Action("stop", bracketed=False)
            return propose(
                _clamp(b * 10 ** (side * step), limit_low, limit_high)
            )
        ratio = max(b, q.learning_rate) / min(b, q.learning_rate)
        if not _within_bracket(ratio):
            return propose(
                _clamp(b * BRACKET_FACTOR**side, limit_low, limit_high)
            )
        if q.status == "ok":
            continue
        if ratio >= min_factor**2 * (1 - _SAME_RATE_RTOL):
            return propose(math.sqrt(b * q.learning_rate))
        return Action("stop", bracketed=False)
    return Action("stop", bracketed=True)


def summarize(points):
    """The outcome of a search: the chosen rate and whether it is bracketed.

    Args:
        points: iterable of `Point`, the rates tried, in any order.

    Returns:
        dict: `"chosen"` (float, the rate of the best `"ok"` point, or
        `None`), `"score"` (its score, or `None`), `"below"` (float, the
        chosen rate over its nearest `"ok"` neighbour below, or `None`),
        `"above"` (float, the nearest `"ok"` neighbour above over the chosen
        rate, or `None`) and `"bracketed"` (bool: both neighbours exist and
        are within a factor `BRACKET_FACTOR`).

    Raises:
        TypeError: if a point is not a `Point`.

    Example:

    >>> summarize([Point(0.5, "ok", 0.7), Point(1.0, "ok", 0.9),
    ...            Point(2.0, "diverged")])
    {'chosen': 1.0, 'score': 0.9, 'below': 2.0, 'above': None,
     'bracketed': False}
    """
    points = _sorted_points(points)
    best = _best(points)
    if best is None:
        return {
            "chosen": None,
            "score": None,
            "below": None,
            "above": None,
            "bracketed": False,
        }
    return {"chosen": best.learning_rate, "score": best.score} | bracket_of(
        points, best.learning_rate
    )


def bracket_of(points, learning_rate):
    """How closely the `"ok"` points enclose a rate.

    Args:
        points: iterable of `Point`, the rates tried, in any order.
        learning_rate: positive float, the rate (the one chosen).

    Returns:
        dict: `"below"` (float, the rate over its nearest `"ok"` neighbour
        below, or `None`), `"above"` (the nearest `"ok"` neighbour above
        over the rate, or `None`) and `"bracketed"` (bool: both exist and
        are within a factor `BRACKET_FACTOR`).

    Example:

    >>> bracket_of([Point(0.5, "ok", 0.7), Point(1.0, "ok", 0.9)], 0.5)
    {'below': None, 'above': 2.0, 'bracketed': False}
    """
    ok = [p for p in _sorted_points(points) if p.status == "ok"]
    below = _nearest_below(ok, learning_rate)
    above = _nearest_above(ok, learning_rate)
    below = None if below is None else learning_rate / below.learning_rate
    above = None if above is None else above.learning_rate / learning_rate
    bracketed = (
        below is not None
        and above is not None
        and _within_bracket(below)
        and _within_bracket(above)
    )
    return {"below": below, "above": above, "bracketed": bracketed}


def _check_positive(name, number, value=None):
    """Returns `number` as a float if it is positive and finite."""
    value = number if value is None else value
    if isinstance(number, bool) or not isinstance(number, numbers.Real):
        raise TypeError(
            f"Received an invalid type for argument `{name}`. Expected a "
            f"positive number. Received: {name}={value!r}"
        )
    if not number > 0:
        raise ValueError(
            f"Received an invalid value for argument `{name}`. Expected a "
            f"positive number. Received: {name}={value!r}"
        )
    if not math.isfinite(number):
        raise ValueError(
            f"Received an invalid value for argument `{name}`. Expected a "
            f"finite number. Received: {name}={value!r}"
        )
    return float(number)


def _sorted_points(points):
    """The points in a total order, whatever order they came in."""
    points = list(points)
    for i, p in enumerate(points):
        if not isinstance(p, Point):
            raise TypeError(
                "Received an invalid value for argument `points`. Expected "
                f"`Point` instances. Received: points[{i}]={p!r}"
            )
    return sorted(points, key=lambda p: (p.learning_rate, *_order(p)))


def _order(point):
    """Orders points at one rate: "ok" first (the best score first), then
    "diverged", "failed" and "pending"."""
    return (
        STATUSES.index(point.status),
        -point.score if point.status == "ok" else 0.0,
    )


def _best(points):
    ok = [p for p in points if p.status == "ok"]
    return min(ok, key=ranking_key) if ok else None


def _same_rate(a, b):
    return abs(a - b) <= _SAME_RATE_RTOL * max(a, b)


def _at_or_below(a, b):
    return a < b or _same_rate(a, b)


def _within_bracket(ratio):
    return ratio <= BRACKET_FACTOR * (1 + _BRACKET_RTOL)


def _nearest_below(points, lr):
    """The point nearest below `lr`, or `None`."""
    below = [
        p
        for p in points
        if p.learning_rate < lr and not _same_rate(p.learning_rate, lr)
    ]
    return _pick(below, max(p.learning_rate for p in below)) if below else None


def _nearest_above(points, lr):
    """The point nearest above `lr`, or `None`."""
    above = [
        p
        for p in points
        if p.learning_rate > lr and not _same_rate(p.learning_rate, lr)
    ]
    return _pick(above, min(p.learning_rate for p in above)) if above else None


def _pick(points, lr):
    """The point at `lr`; a rate tried twice counts as its worst outcome."""
    return max(
        (p for p in points if _same_rate(p.learning_rate, lr)), key=_order
    )


def _clamp(lr, limit_low, limit_high):
    return min(max(lr, limit_low), limit_high)
