"""What a study compares, and the tests and verdicts of the comparisons.

The protocol (the comparators of our arms and the non-inferiority margin,
as the study declared them before any run: `read_protocol`), and per
(condition, our arm, comparator) the Welch difference of test accuracy,
its one-sided tests Holm-adjusted over the whole study, the difference it
could detect and the verdict (`cell_verdicts`). Pure functions of the rows
(`tuning.result_rows`); `tuning.report` renders them.
"""

import dataclasses
import math

from tuning import result_rows
from tuning import statistics

# The layers under test, as `keras_affine_div.models.arm_names(ours=True)`
# lists them (a test checks it; the report imports no Keras); every other
# arm is a comparator candidate.
OUR_ARMS = (
    "affine_like",
    "norm_like",
    "affine_like_head",
    "patch_norm",
    "affine_like_conv",
    "patch_norm_stem",
    "patch_norm_head",
    "patch_norm_stem_head",
    "affine_like_conv_stem",
    "affine_like_conv_head",
    "affine_like_conv_stem_head",
)
ALPHA = 0.05
CONFIDENCE = 0.95
POWER = 0.8
# The non-inferiority margin of studies that do not declare one.
DEFAULT_MARGIN = 0.01
# The p-values of one (condition, our arm, comparator), in Holm order.
TESTS = ("p_non_inferior", "p_superior", "p_inferior")


@dataclasses.dataclass(frozen=True)
class Protocol:
    """What a study compares, as declared in its `summary.json`.

    Attributes:
        comparators: tuple of str, the arms each of ours is tested against.
        margin: float, the non-inferiority margin in accuracy.
        comparators_declared: bool, whether the study declared them (else
            every arm that is not one of ours).
        margin_declared: bool, whether the study declared the margin (else
            `DEFAULT_MARGIN`).
        tuner: str, the search's tuner.
        schedule: str, the learning-rate schedule.
        extends: str, the study this one adds arms to, or `None`.
        own_arms: tuple of str, the arms the study itself runs (for a study
            that extends another, its tests are those with one of them).
    """

    comparators: tuple
    margin: float
    comparators_declared: bool
    margin_declared: bool
    tuner: str
    schedule: str
    extends: str = None
    own_arms: tuple = ()


def read_protocol(runs, summary):
    """The comparators, margin, tuner and schedule of a study.

    Args:
        runs: list of dicts of str, the rows of `trials.csv`.
        summary: dict, the content of `summary.json`.

    Returns:
        Protocol: from `summary["config"]`; for files without
        `compare.comparators`, every arm of `compare.arms` (or, without
        those, of `runs`) that is not in `OUR_ARMS`; without
        `compare.margin`, `DEFAULT_MARGIN`.
    """
    config = summary.get("config") or {}
    compare = config.get("compare") or {}
    if "comparators" in compare:
        comparators = tuple(compare["comparators"])
    else:
        arms = compare.get("arms") or result_rows.ordered_unique(
            r["arm"] for r in runs
        )
        comparators = tuple(a for a in arms if a not in OUR_ARMS)
    first = runs[0] if runs else {}
    return Protocol(
        comparators=comparators,
        margin=float(compare.get("margin", DEFAULT_MARGIN)),
        comparators_declared="comparators" in compare,
        margin_declared="margin" in compare,
        tuner=(config.get("search") or {}).get("tuner")
        or first.get("tuner")
        or "not recorded",
        schedule=(config.get("fixed") or {}).get("schedule")
        or first.get("schedule")
        or "not recorded",
        extends=compare.get("extends"),
        own_arms=tuple(compare.get("arms") or ()),
    )


def pairs(rows, protocol):
    """The `(our arm, comparator)` pairs of one condition's rows: each arm
    of `OUR_ARMS` with rows and each of its declared comparators with rows,
    in the order of the arms and the comparators.

    For a study that extends another (`protocol.extends`), whose rows join
    that study's, only the pairs with an arm of its own: the other study's
    arms of ours against the comparators it adds, and the arms of ours it
    adds against every comparator it declares (its own or the other
    study's). The other study's own pairs are that study's tests."""
    arms = result_rows.ordered_unique(r["arm"] for r in rows)
    return [
        (arm, comparator)
        for arm in arms
        if arm in OUR_ARMS
        for comparator in protocol.comparators
        if comparator != arm
        and comparator in arms
        and (
            protocol.extends is None
            or arm in protocol.own_arms
            or comparator in protocol.own_arms
        )
    ]


def cell_verdicts(runs, summary):
    """The tests of every (condition, our arm, comparator) of a study.

    For each condition, each arm of `OUR_ARMS` with runs in it and each
    declared comparator (see `read_protocol`) with runs in it: the Welch
    difference of mean test accuracy (ours minus comparator) and its 95%
    interval, the one-sided p-values of non-inferiority within the margin,
    superiority and inferiority beyond the margin, Holm-adjusted together
    over every test of every cell of the study, the difference detectable at
    `ALPHA` with power `POWER`, and `statistics.verdict` of those.

    Args:
        runs: list of dicts of str, the rows of `trials.csv`.
        summary: dict, the content of `summary.json`.

    Returns:
        list of dicts: `condition`, `arm`, `comparator` (str), `diff`,
        `low`, `high`, `p_non_inferior`, `p_superior`, `p_inferior`
        (adjusted), `detectable` (at one-sided `ALPHA`), `level` (the Holm
        level of the comparison's smallest p-value), `detectable_at_level`
        (floats) and `verdict` (str; an inconclusive one names
        `detectable_at_level`), in the order of the conditions, our arms
        and the comparators.
    """
    protocol = read_protocol(runs, summary)
    cells = []
    for condition in result_rows.conditions(runs):
        rows = result_rows.of_condition(runs, condition)
        for arm, comparator in pairs(rows, protocol):
            cell = {
                "condition": condition,
                "arm": arm,
                "comparator": comparator,
            }
            cells.append(_welch_cell(cell, rows, protocol.margin))
    _adjust(cells)
    return cells


def _welch_cell(cell, rows, margin):
    """`cell` (condition, arm, comparator) with its unadjusted tests."""
    a = result_rows.accuracies(rows, cell["arm"])
    b = result_rows.accuracies(rows, cell["comparator"])
    w = statistics.welch(a, b, CONFIDENCE)
    return {
        "samples": (a, b),
        **cell,
        "diff": w["diff"],
        "low": w["low"],
        "high": w["high"],
        "p_non_inferior": statistics.non_inferiority(a, b, margin),
        "p_superior": statistics.superiority(a, b),
        "p_inferior": statistics.inferiority(a, b, margin),
        "detectable": statistics.detectable_difference(a, b, ALPHA, POWER),
    }


def _adjust(cells):
    """Holm over every test of `cells` at once, in place: the adjusted
    p-values, `level`, `detectable_at_level` and `verdict`."""
    raw = [c[k] for c in cells for k in TESTS]
    adjusted = iter(statistics.holm(raw))
    levels = iter(statistics.holm_levels(raw, ALPHA))
    for c in cells:
        # The level Holm held the comparison's first-judged test (its
        # smallest p-value) to: what its seeds could detect at the level
        # actually applied.
        own = [(c[k], next(levels)) for k in TESTS]
        own = [(p, level) for p, level in own if not math.isnan(p)]
        c["level"] = min(own)[1] if own else math.nan
        a, b = c.pop("samples")
        c["detectable_at_level"] = (
            statistics.detectable_difference(a, b, c["level"], POWER)
            if own
            else math.nan
        )
        for k in TESTS:
            c[k] = next(adjusted)
        c["verdict"] = statistics.verdict(
            c["p_superior"],
            c["p_non_inferior"],
            c["p_inferior"],
            c["detectable_at_level"],
            ALPHA,
        )


def detectable(result):
    """The effect a one-sided test at `ALPHA` finds with power `POWER`,
    from a `statistics.welch` or `statistics.interaction` result."""
    return statistics.detectable(
        result["se"], result["df"], alpha=ALPHA, power=POWER
    )


def holm_both_ways(rows):
    """Adds `p_below_adj`, `p_above_adj`: Holm over both tails of all rows."""
    raw = [r["p_below"] for r in rows] + [r["p_above"] for r in rows]
    adjusted = statistics.holm(raw)
    for k, r in enumerate(rows):
        r["p_below_adj"] = adjusted[k]
        r["p_above_adj"] = adjusted[len(rows) + k]


def verdict_word(verdict):
    """A verdict's first word (`"inconclusive"` without its detectable)."""
    return verdict.split(" ")[0]
