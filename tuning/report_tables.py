"""The per-condition sections of `report.md`, as lists of Markdown lines.

"At a glance" (every condition on one line), per condition the arms'
accuracies, settings and searches and the tests of our arms against their
comparators, the learning-rate brackets, and the count of verdicts. The
numbers come from `tuning.comparisons` and the rows (`tuning.result_rows`).
"""

from tuning import comparisons
from tuning import markdown
from tuning import outcomes
from tuning import records
from tuning import result_rows
from tuning import statistics

_num = markdown.num


def glance_section(runs, cells):
    """Every condition on one line: accuracies, then verdicts."""
    conditions = result_rows.conditions(runs)
    if len(conditions) < 2:
        return []
    arms = result_rows.ordered_unique(r["arm"] for r in runs)
    lines = [
        "## At a glance",
        "",
        "Test accuracy, mean ± std over the seeds (chosen learning rate); "
        "the sections below give every seed, the search and the tests.",
        "",
        "| condition | " + " | ".join(arms) + " |",
        "|---|" + "---|" * len(arms),
    ]
    for condition in conditions:
        rows = result_rows.of_condition(runs, condition)
        entries = [_glance_entry(rows, arm) for arm in arms]
        lines.append(f"| {condition} | " + " | ".join(entries) + " |")
    lines.append("")
    if not cells:
        return lines
    pairs = result_rows.ordered_unique(
        (c["arm"], c["comparator"]) for c in cells
    )
    verdicts = {
        (c["condition"], c["arm"], c["comparator"]): comparisons.verdict_word(
            c["verdict"]
        )
        for c in cells
    }
    lines += [
        "Verdict of our arm against each comparator (Holm-adjusted over "
        "the whole study):",
        "",
        "| condition | " + " | ".join(f"{a} - {c}" for a, c in pairs) + " |",
        "|---|" + "---|" * len(pairs),
    ]
    for condition in conditions:
        lines.append(
            f"| {condition} | "
            + " | ".join(verdicts.get((condition, a, c), "-") for a, c in pairs)
            + " |"
        )
    return lines + [""]


def _glance_entry(rows, arm):
    """`mean ± std (rate)` of an arm in one condition, `-` if it has none."""
    cell = [r for r in rows if r["arm"] == arm]
    if not cell:
        return "-"
    accs = result_rows.accuracies(rows, arm)
    rate = _num(result_rows.to_float(cell[0].get("learning_rate")), ".2g")
    return (
        f"{_num(statistics.mean(accs), '.4f')} ± "
        f"{_num(statistics.std(accs), '.4f')} ({rate})"
    )


def arm_table(rows, trials):
    """Per arm of one condition: its accuracies, settings and search."""
    lines = [
        "| arm | test accuracy, mean ± std | per seed | learning rate "
        "| optimizer | kernel scale | search trials | below | above "
        "| bracketed | diverged seeds |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for arm in result_rows.ordered_unique(r["arm"] for r in rows):
        cell = [r for r in rows if r["arm"] == arm]
        accs = result_rows.accuracies(rows, arm)
        below, above, bracketed = bracket_cells(cell[0])
        searched = search_count(cell[0], [t for t in trials if t["arm"] == arm])
        rate = result_rows.to_float(cell[0].get("learning_rate"))
        lines.append(
            f"| {arm} | {_num(statistics.mean(accs), '.4f')} ± "
            f"{_num(statistics.std(accs), '.4f')} "
            f"| {', '.join(_num(a, '.4f') for a in accs)} "
            f"| {_num(rate, '.3g')} "
            f"| {cell[0].get('optimizer') or '-'} "
            f"| {cell[0].get('kernel_scale') or '-'} "
            f"| {searched} | {below} | {above} | {bracketed} "
            f"| {diverged(cell)} |"
        )
    return lines + [""]


def tests_table(cells, rows, protocol):
    """The tests of one condition's comparisons (`cells`)."""
    arms = result_rows.ordered_unique(r["arm"] for r in rows)
    lines = []
    if any(a in comparisons.OUR_ARMS for a in arms):
        missing = [c for c in protocol.comparators if c not in arms]
        if missing:
            lines += [
                f"No runs here of the comparators {markdown.names(missing)}.",
                "",
            ]
    if not cells:
        return lines
    lines += [
        "Our arm minus the comparator, test accuracy (p-values "
        "Holm-adjusted over the whole study):",
        "",
        f"| comparison | difference | {comparisons.CONFIDENCE:.0%} interval "
        f"| p non-inferior (margin {protocol.margin:g}) | p superior "
        f"| p inferior | detectable at {comparisons.ALPHA:g} "
        "| Holm level applied | detectable at it | verdict |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in cells:
        lines.append(
            f"| {c['arm']} - {c['comparator']} | {_num(c['diff'], '+.4f')} "
            f"| [{_num(c['low'], '+.4f')}, {_num(c['high'], '+.4f')}] "
            f"| {_num(c['p_non_inferior'], '.3g')} "
            f"| {_num(c['p_superior'], '.3g')} "
            f"| {_num(c['p_inferior'], '.3g')} "
            f"| {_num(c['detectable'], '.4f')} | {_num(c['level'], '.2g')} "
            f"| {_num(c['detectable_at_level'], '.4f')} | {c['verdict']} |"
        )
    return lines + [""]


def bracket_section(runs):
    """The cells whose chosen learning rate is not bracketed."""
    if not any(r.get("bracketed") for r in runs):
        return []
    lines = [
        "## Learning-rate brackets",
        "",
        "A run *diverged* when its training loss became non-finite or ended "
        f"above {outcomes.EXPLODED_FACTOR:g} times a uniform guess's, and "
        "*did not learn* when it ended above a uniform guess's (the search "
        "trials and diverged seeds columns count both); neither bounds a "
        "bracket.",
        "",
    ]
    cells = result_rows.ordered_unique(
        (r.get("condition", ""), r["arm"])
        for r in runs
        if r.get("bracketed") and r["bracketed"] != "True"
    )
    if not cells:
        return lines + [
            "Every (condition, arm) cell is bracketed: its chosen learning "
            "rate has a completed search trial that trained below and "
            "above it.",
            "",
        ]
    lines += [
        "Cells whose chosen learning rate lacks a completed search trial "
        "that trained on one side (the best rate may lie beyond what was "
        "tried):",
        "",
    ]
    for condition, arm in cells:
        row = next(
            r
            for r in runs
            if (r.get("condition", ""), r["arm"]) == (condition, arm)
        )
        sides = [
            side
            for side, key in (
                ("below", "lr_below_factor"),
                ("above", "lr_above_factor"),
            )
            if not row.get(key)
        ]
        where = f"`{condition}`, " if condition else ""
        why = f"nothing {' or '.join(sides)}" if sides else "not bracketed"
        lines.append(f"- {where}`{arm}`: {why}.")
    return lines + [""]


def verdict_counts(cells):
    """Per (our arm, comparator), how many conditions give each verdict."""
    if not cells:
        return []
    kinds = ("superior", "non-inferior", "inferior", "inconclusive")
    lines = [
        "## Verdicts",
        "",
        "Conditions per verdict:",
        "",
        "| comparison | " + " | ".join(kinds) + " |",
        "|---|" + "---|" * len(kinds),
    ]
    for arm, comparator in result_rows.ordered_unique(
        (c["arm"], c["comparator"]) for c in cells
    ):
        verdicts = [
            comparisons.verdict_word(c["verdict"])
            for c in cells
            if (c["arm"], c["comparator"]) == (arm, comparator)
        ]
        lines.append(
            f"| {arm} - {comparator} | "
            + " | ".join(str(verdicts.count(k)) for k in kinds)
            + " |"
        )
    return lines + [""]


def bracket_cells(row):
    """`(below, above, bracketed)` cells of a run row, `n/a` for old rows."""
    if not row.get("bracketed"):
        return "n/a", "n/a", "n/a"
    below = row.get("lr_below_factor")
    above = row.get("lr_above_factor")
    return (
        f"/{float(below):.2f}" if below else "none",
        f"x{float(above):.2f}" if above else "none",
        "yes" if records.is_true(row["bracketed"]) else "no",
    )


def search_count(row, trials):
    """The search trials of a cell, with its failures where they are known."""
    count = row.get("search_trials") or str(len(trials))
    if not any(t.get("diverged") for t in trials):
        return count
    found = outcomes.counts(trials, outcomes.classes_of(row.get("dataset")))
    return f"{count} ({_failures(found)})"


def diverged(cell):
    """The seeds of a cell that diverged or did not learn, as fractions."""
    if not any(r.get("diverged") for r in cell):
        return "n/a"
    found = outcomes.counts(cell, outcomes.classes_of(cell[0].get("dataset")))
    return _failures(found, of=len(cell))


def _failures(found, of=None):
    """`"1 diverged"`, `"0 diverged, 2 did not learn"`; with `of`, as
    fractions: `"1/5"`, `"0/5, 2/5 did not learn"`."""
    total = "" if of is None else f"/{of}"
    text = f"{found[outcomes.DIVERGED]}{total}"
    if of is None:
        text += " diverged"
    if found[outcomes.DID_NOT_LEARN]:
        text += f", {found[outcomes.DID_NOT_LEARN]}{total} did not learn"
    return text
