"""How far repeating a study's searches moves its results and verdicts.

A repeated search (`python -m tuning.sweep STUDY --search-seed N`, rows in
`repeats/search-seed-N/`, read by `result_rows.read_repeats`) chooses its
own rate and trains its own seeds. The root mean square of the repeats'
differences from the study is its selection noise; a verdict is *fragile*
when it flips with a repeated cell in place of the study's, or when its
difference lies within the selection noise of its boundary. Pure
functions of the rows; `tuning.report_seeds` renders them.
"""

import collections
import math

from tuning import comparisons
from tuning import result_rows
from tuning import statistics


def _key(row):
    return (row.get("condition", ""), row["arm"])


def _comparison_key(c):
    return (c["condition"], c["arm"], c["comparator"])


def selection_noise(runs, summary, repeats, margin):
    """How far repeated searches move a study's results and verdicts.

    Args:
        runs: the rows of `trials.csv` (replayed seeds already replaced by
            their fresh ones, where there are any).
        summary: dict, the content of `summary.json`.
        repeats: dict, search seed to a repeated search's `trials.csv` rows.
        margin: float, the non-inferiority margin.

    Returns:
        dict: `cells` (per repeated (condition, arm, search seed): `rate`
        and `repeat_rate` chosen, `mean` and `repeat_mean` test accuracy,
        `diff` = repeat minus study), `noise` (the root mean square of the
        `diff`s: the study-level selection noise, seed noise included;
        `nan` without repeats), and `verdicts` (per comparison of
        `cell_verdicts`: `verdict`, `diff`, `boundary` (0 for
        "superior", -margin otherwise), `repeated` (the verdict with every
        repeated cell replaced by each repeat, one per search seed that
        repeats one of its arms), and `fragile`, the reasons it is: it
        flips under a repeat, or its difference lies within `noise` of its
        boundary; an inconclusive verdict is never a finding, so never
        fragile).
    """
    cells = _repeated_cells(runs, repeats)
    diffs = [c["diff"] for c in cells if not math.isnan(c["diff"])]
    noise = (
        math.sqrt(sum(d * d for d in diffs) / len(diffs)) if diffs else math.nan
    )
    again = _verdicts_with_repeats(runs, summary, repeats)
    verdicts = []
    for c in comparisons.cell_verdicts(runs, summary):
        name = comparisons.verdict_word(c["verdict"])
        boundary = 0.0 if name == "superior" else -margin
        repeated = {
            seed: verdicts_[_comparison_key(c)]
            for seed, (replaced, verdicts_) in again.items()
            if {(c["condition"], c["arm"]), (c["condition"], c["comparator"])}
            & replaced
        }
        verdicts.append(
            {
                "condition": c["condition"],
                "arm": c["arm"],
                "comparator": c["comparator"],
                "verdict": c["verdict"],
                "diff": c["diff"],
                "boundary": boundary,
                "repeated": repeated,
                "fragile": _fragile(name, c["diff"], boundary, repeated, noise),
            }
        )
    return {"cells": cells, "noise": noise, "verdicts": verdicts}


def _repeated_cells(runs, repeats):
    """Per repeated (condition, arm, search seed), the study's and the
    repeat's chosen rates and mean test accuracies."""
    by_cell = collections.defaultdict(list)
    for r in runs:
        by_cell[_key(r)].append(r)
    cells = []
    for seed, rows in repeats.items():
        by_repeat = collections.defaultdict(list)
        for r in rows:
            by_repeat[_key(r)].append(r)
        for cell, repeat in by_repeat.items():
            if cell not in by_cell:
                continue
            ours = [
                result_rows.to_float(r["test_accuracy"]) for r in by_cell[cell]
            ]
            theirs = [result_rows.to_float(r["test_accuracy"]) for r in repeat]
            cells.append(
                {
                    "condition": cell[0],
                    "arm": cell[1],
                    "search_seed": seed,
                    "rate": result_rows.to_float(
                        by_cell[cell][0].get("learning_rate")
                    ),
                    "repeat_rate": result_rows.to_float(
                        repeat[0].get("learning_rate")
                    ),
                    "mean": statistics.mean(ours),
                    "repeat_mean": statistics.mean(theirs),
                    "diff": statistics.mean(theirs) - statistics.mean(ours),
                    "seeds": (len(ours), len(theirs)),
                }
            )
    return cells


def _verdicts_with_repeats(runs, summary, repeats):
    """Per search seed, `(the cells it repeats, {comparison: verdict})`
    with its rows in place of the study's for those cells."""
    again = {}
    for seed, rows in repeats.items():
        replaced = {_key(r) for r in rows}
        substituted = [r for r in runs if _key(r) not in replaced] + list(rows)
        again[seed] = (
            replaced,
            {
                _comparison_key(c): c["verdict"]
                for c in comparisons.cell_verdicts(substituted, summary)
            },
        )
    return again


def _fragile(name, diff, boundary, repeated, noise):
    """Why a verdict named `name` is fragile (`[]` if it is not)."""
    fragile = []
    if name == "inconclusive":
        return fragile
    flips = [
        seed
        for seed, v in repeated.items()
        if comparisons.verdict_word(v) != name
    ]
    if flips:
        fragile.append(
            "flips under the repeat from search seed "
            + ", ".join(str(s) for s in flips)
        )
    if not math.isnan(noise) and abs(diff - boundary) < noise:
        fragile.append(
            f"within the selection noise ({noise:.4f}) of {boundary:+g}"
        )
    return fragile
