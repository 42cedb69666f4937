"""The "Batch size" section of `report.md`, as Markdown lines.

Per value of the other grid keys: each (arm, batch size) cell's chosen
rate, bracket and optimizer steps; each arm's change of accuracy from the
smallest to the largest batch size; per (our arm, comparator) the
interaction; and the same estimates without diverged seeds. The numbers
come from `tuning.batch_size`.
"""

from tuning import batch_size
from tuning import comparisons
from tuning import markdown
from tuning import report_tables
from tuning import result_rows
from tuning import statistics

_num = markdown.num
_CONFIDENCE = comparisons.CONFIDENCE


def section(runs, summary, protocol):
    """The section, or `[]` for a study whose batch size does not vary."""
    if not batch_size.varies(runs, summary):
        return []
    groups = batch_size.analyse(runs, summary, protocol)
    lines = ["## Batch size", ""]
    for key, by_size, change, interaction in groups:
        if key:
            lines += ["### " + ", ".join(f"{k} {v}" for k, v in key), ""]
        lines += _steps_table(runs, by_size)
        lines += _change_table(change, sorted(by_size), len(groups))
        lines += _interaction_table(interaction, sorted(by_size), len(groups))
        lines += _without_diverged_table(by_size, protocol)
    return lines


def _steps_table(runs, by_size):
    lines = [
        "| arm | batch size | learning rate | below | above | steps "
        "| test accuracy, mean |",
        "|---|---|---|---|---|---|---|",
    ]
    for arm in result_rows.ordered_unique(r["arm"] for r in runs):
        for size in sorted(by_size):
            cell = [r for r in by_size[size] if r["arm"] == arm]
            if not cell:
                continue
            below, above, _ = report_tables.bracket_cells(cell[0])
            rate = result_rows.to_float(cell[0].get("learning_rate"))
            accs = result_rows.accuracies(cell, arm)
            lines.append(
                f"| {arm} | {size} | {_num(rate, '.3g')} "
                f"| {below} | {above} | {batch_size.steps(cell, size)} "
                f"| {_num(statistics.mean(accs), '.4f')} |"
            )
    return lines + [""]


def _holm_scope(n_groups, what):
    scope = f"all {what} of the study" if n_groups > 1 else f"all {what}"
    return f"Holm–Bonferroni over both one-sided tests of {scope}"


def _change_table(rows, sizes, n_groups):
    if not rows:
        return []
    small, large = sizes[0], sizes[-1]
    lines = [
        f"Each arm's test accuracy at batch size {large} minus at {small} "
        f"(independent seeds; {_CONFIDENCE:.0%} Welch interval); one-sided "
        f"tests that it falls or rises, p-values adjusted by "
        f"{_holm_scope(n_groups, 'these changes')}:",
        "",
        f"| arm | {large} - {small} | {_CONFIDENCE:.0%} interval "
        "| p falls | p rises | detectable | verdict |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['arm']} | {_num(r['diff'], '+.4f')} "
            + _two_way_cells(r, below="falls", above="rises")
        )
    return lines + [""]


def _two_way_cells(r, below, above):
    """`| interval | p below | p above | detectable | verdict |` of a row."""
    verdict = statistics.direction_verdict(
        r["p_below_adj"],
        r["p_above_adj"],
        r["detectable"],
        below=below,
        above=above,
        alpha=comparisons.ALPHA,
    )
    return (
        f"| [{_num(r['low'], '+.4f')}, {_num(r['high'], '+.4f')}] "
        f"| {_num(r['p_below_adj'], '.3g')} "
        f"| {_num(r['p_above_adj'], '.3g')} "
        f"| {_num(r['detectable'], '.4f')} | {verdict} |"
    )


def _interaction_table(rows, sizes, n_groups):
    if not rows:
        return []
    small, large = sizes[0], sizes[-1]
    lines = [
        f"Interaction: the change of test accuracy from batch size {small} "
        f"to {large} of our arm minus that of the comparator (negative: "
        "ours fares worse than the comparator as the batch grows); the four "
        f"cells are independent seeds; {_CONFIDENCE:.0%} interval; one-sided "
        "tests of a negative and of a positive interaction, p-values "
        f"adjusted by {_holm_scope(n_groups, 'these interactions')}:",
        "",
        f"| comparison | ours {large} - {small} "
        f"| comparator {large} - {small} | interaction "
        f"| {_CONFIDENCE:.0%} interval | p ours worse | p ours better "
        "| detectable | verdict |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['arm']} - {r['comparator']} | {_num(r['ours'], '+.4f')} "
            f"| {_num(r['theirs'], '+.4f')} | {_num(r['diff'], '+.4f')} "
            + _two_way_cells(
                r, below="ours fares worse", above="ours fares better"
            )
        )
    return lines + [""]


def _without_diverged_table(by_size, protocol):
    """The changes and interactions that diverged seeds enter, without them
    (descriptive: a diverged seed stays in the tests)."""
    found = batch_size.without_diverged(by_size, protocol)
    if found is None:
        return []
    sizes = sorted(by_size)
    counts = ", ".join(
        f"`{arm}` at {size}: {n}" for (arm, size), n in found["dropped"]
    )
    lines = [
        f"Without the diverged seeds ({counts}): a diverged seed is an "
        "outcome of the chosen rate and stays in the tests above; this is "
        "how much of the estimate it makes (descriptive, no test):",
        "",
        f"| estimate | value | {_CONFIDENCE:.0%} interval |",
        "|---|---|---|",
    ]
    rows = [
        (f"{r['arm']} {sizes[-1]} - {sizes[0]}", r) for r in found["changes"]
    ] + [
        (f"interaction {r['arm']} - {r['comparator']}", r)
        for r in found["interactions"]
    ]
    for label, r in rows:
        lines.append(
            f"| {label} | {_num(r['diff'], '+.4f')} "
            f"| [{_num(r['low'], '+.4f')}, {_num(r['high'], '+.4f')}] |"
        )
    return lines + [""]
