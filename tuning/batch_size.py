"""How each arm's accuracy changes with the batch size, and whether ours
changes differently from a comparator's.

For a study whose grid varies `batch_size`: per value of the other grid
keys, each arm's change of test accuracy from the smallest to the largest
batch size (`changes`) and per (our arm, comparator) the interaction, our
arm's change minus the comparator's (`interactions`), each (arm, batch
size) cell being its own independently trained seeds; one-sided tests both
ways, Holm-adjusted over all of the study's changes (interactions) at once
(`analyse`); and where seeds diverged, the same estimates without them
(`without_diverged`, descriptive). Pure functions of the rows;
`tuning.report_batch_size` renders them.
"""

import collections
import math

from tuning import comparisons
from tuning import records
from tuning import result_rows
from tuning import statistics


def varies(runs, summary):
    """Whether the study's grid, or its rows, vary the batch size."""
    return "batch_size" in result_rows.grid_keys(summary) or result_rows.varies(
        runs, "batch_size"
    )


def analyse(runs, summary, protocol):
    """The changes and interactions of every group of a study.

    Returns:
        list of `(key, by_size, changes, interactions)`, one per value of
        the other grid keys (`groups`): the rows of `changes(by_size)` and
        of `interactions(by_size, protocol)`, with `p_below_adj` and
        `p_above_adj` Holm-adjusted over all the study's changes, and over
        all its interactions.
    """
    groups = _groups(runs, summary)
    changes_ = [changes(by_size) for _, by_size in groups]
    interactions_ = [interactions(by_size, protocol) for _, by_size in groups]
    comparisons.holm_both_ways([r for rows in changes_ for r in rows])
    comparisons.holm_both_ways([r for rows in interactions_ for r in rows])
    return [
        (key, by_size, change, interaction)
        for (key, by_size), change, interaction in zip(
            groups, changes_, interactions_
        )
    ]


def _groups(runs, summary):
    """`[(key, {batch size: rows})]`, one per value of the other grid keys."""
    others = [k for k in result_rows.grid_keys(summary) if k != "batch_size"]
    groups = {}
    for condition in result_rows.conditions(runs):
        rows = result_rows.of_condition(runs, condition)
        key = tuple((k, rows[0].get(k, "")) for k in others)
        by_size = groups.setdefault(key, {})
        for r in rows:
            by_size.setdefault(int(float(r["batch_size"])), []).append(r)
    return list(groups.items())


def _extremes(by_size):
    sizes = sorted(by_size)
    return by_size[sizes[0]], by_size[sizes[-1]]


def changes(by_size):
    """Per arm, the Welch test of its accuracy at the largest batch size
    minus that at the smallest."""
    if len(by_size) < 2:
        return []
    small, large = _extremes(by_size)
    rows = []
    for arm in result_rows.ordered_unique(r["arm"] for r in small + large):
        a = result_rows.accuracies(large, arm)
        b = result_rows.accuracies(small, arm)
        if a and b:
            w = statistics.welch(a, b, confidence=comparisons.CONFIDENCE)
            rows.append(
                {"arm": arm, **w, "detectable": comparisons.detectable(w)}
            )
    return rows


def interactions(by_size, protocol):
    """Per (our arm, comparator), `statistics.interaction` of the extremes."""
    if len(by_size) < 2:
        return []
    small, large = _extremes(by_size)
    arms = [
        a
        for a in result_rows.ordered_unique(r["arm"] for r in small + large)
        if result_rows.accuracies(small, a) and result_rows.accuracies(large, a)
    ]
    rows = []
    for arm in arms:
        if arm not in comparisons.OUR_ARMS:
            continue
        for comparator in protocol.comparators:
            if comparator not in arms or comparator == arm:
                continue
            samples = (
                result_rows.accuracies(small, arm),
                result_rows.accuracies(large, arm),
                result_rows.accuracies(small, comparator),
                result_rows.accuracies(large, comparator),
            )
            i = statistics.interaction(
                *samples, confidence=comparisons.CONFIDENCE
            )
            rows.append(
                {
                    "arm": arm,
                    "comparator": comparator,
                    "ours": statistics.mean(samples[1])
                    - statistics.mean(samples[0]),
                    "theirs": statistics.mean(samples[3])
                    - statistics.mean(samples[2]),
                    **i,
                    "detectable": comparisons.detectable(i),
                }
            )
    return rows


def without_diverged(by_size, protocol):
    """The changes and interactions that diverged seeds enter, without them.

    A diverged seed is an outcome of the chosen setting and stays in the
    tests; this says how much of an estimate it makes.

    Returns:
        dict or None: `dropped` (`[((arm, batch size), count)]` of the
        diverged seeds at the extremes), `changes` and `interactions` (the
        rows of `changes` and `interactions` without them, for the arms
        they touch); `None` without two batch sizes or diverged seeds.
    """
    if len(by_size) < 2:
        return None
    small, large = _extremes(by_size)
    dropped = [r for r in small + large if records.is_true(r.get("diverged"))]
    if not dropped:
        return None
    kept = {
        size: [r for r in rows if r.get("diverged") != "True"]
        for size, rows in by_size.items()
    }
    arms = set(r["arm"] for r in dropped)
    counts = collections.Counter(
        (r["arm"], int(float(r["batch_size"]))) for r in dropped
    )
    return {
        "dropped": list(counts.items()),
        "changes": [r for r in changes(kept) if r["arm"] in arms],
        "interactions": [
            r
            for r in interactions(kept, protocol)
            if {r["arm"], r["comparator"]} & arms
        ],
    }


def steps(cell, batch_size):
    """The optimizer steps of a cell's reruns, as text: their recorded
    `steps` (`"/"`-joined where they differ), else epochs times the batches
    of the training samples, else `"n/a"`."""
    recorded = result_rows.ordered_unique(r.get("steps", "") for r in cell)
    if all(recorded):
        return "/".join(recorded)
    epochs = result_rows.to_float(cell[0].get("epochs"))
    samples = result_rows.to_float(cell[0].get("train_samples"))
    if math.isnan(epochs) or math.isnan(samples):
        return "n/a"
    return str(int(epochs) * math.ceil(samples / batch_size))
