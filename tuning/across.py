"""How each arm changes from one study's condition to another's.

    python -m tuning.across STUDY:CONDITION STUDY:CONDITION [...]
        [--results-dir DIR] [--out FILE]

The arguments come in pairs, `FROM TO`: a condition of one study and the
condition of another (or the same) study that differs from it in one
setting, e.g. width 256 and width 1024 of an MLP otherwise alike. For
every pair and every arm that both hold, the change of mean test accuracy
(`TO` minus `FROM`, Welch, two independently trained cells); for every
(our arm, comparator) of the `TO` study, the interaction: our arm's change
minus the comparator's (`statistics.interaction`). A negative interaction
means our arm gains less from the change than the comparator. The
p-values of the changes and those of the interactions are Holm-adjusted,
each family over both directions of all its rows; "detectable" is what a
one-sided test finds with 80% power from the seeds' spreads, at 0.05 and
at the Holm level the row was held to (the one an inconclusive verdict
quotes).
Replayed seeds (`replays.replaying_rows`) are replaced by their fresh ones where a
study has them.

A condition is `STUDY:NAME` (a `condition` of its `trials.csv`), or
`STUDY` for a study without a grid. `--out` writes the Markdown (which
names its command) to a file; without it, it is printed.
"""

import argparse
import os
import shlex
import sys

from tuning import cli
from tuning import comparisons
from tuning import markdown
from tuning import result_rows
from tuning import schema
from tuning import statistics

ALPHA = comparisons.ALPHA
POWER = comparisons.POWER
_num = markdown.num


class AcrossError(ValueError):
    """Missing results or bad arguments: one line on stderr, exit 2."""


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = argparse.ArgumentParser(
        prog="python -m tuning.across",
        description="Each arm's change between conditions of studies, and "
        "our arms' change against each comparator's.",
    )
    parser.add_argument("cells", nargs="+", metavar="STUDY[:CONDITION]")
    parser.add_argument("--results-dir", default=schema.DEFAULT_RESULTS_DIR)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    command = shlex.join(["python", "-m", "tuning.across", *argv])
    try:
        text = render(load(args.cells, args.results_dir), command)
    except AcrossError as e:
        return cli.fail(e)
    cli.emit(text, args.out)
    return 0


def load(cells, results_dir):
    """The rows and summaries of each `STUDY[:CONDITION]`, in pairs.

    Returns:
        list of `(from, to)`, each a dict: `name` (the argument), `rows`
        (its `trials.csv` rows, fresh seeds in place of replays),
        `summary`.

    Raises:
        AcrossError: for an odd number of arguments, a study without
            results, or a condition it does not have.
    """
    if len(cells) % 2:
        raise AcrossError(
            "Expected pairs of conditions, FROM TO. "
            f"Received: {len(cells)} arguments, {cells}"
        )
    loaded = []
    for name in cells:
        study, _, condition = name.partition(":")
        out_dir = os.path.join(results_dir, study)
        try:
            runs, _, summary = result_rows.read_results(out_dir)
        except result_rows.ReportError as e:
            raise AcrossError(str(e)) from None
        runs = result_rows.with_fresh_seeds(
            runs, result_rows.read_fresh(out_dir)
        )
        rows = result_rows.of_condition(runs, condition)
        if not rows:
            names = result_rows.conditions(runs)
            raise AcrossError(
                f"No runs of that condition in {out_dir}; expected one of "
                f"{[f'{study}:{n}' if n else study for n in names]}. "
                f"Received: {name!r}"
            )
        loaded.append({"name": name, "rows": rows, "summary": summary})
    return list(zip(loaded[::2], loaded[1::2]))


def changes(pairs):
    """Every arm's change, and every (our arm, comparator) interaction.

    Returns:
        tuple: `(changes, interactions)`, lists of dicts with `pair` (the
        `FROM -> TO` text), `arm` (and `comparator`), the `welch` or
        `interaction` fields, `detectable`, and the Holm-adjusted
        `p_below` and `p_above`.
    """
    rows_changes, rows_interactions = [], []
    for before, after in pairs:
        label = f"{before['name']} -> {after['name']}"
        arms = [
            a
            for a in result_rows.ordered_unique(r["arm"] for r in after["rows"])
            if any(r["arm"] == a for r in before["rows"])
        ]
        acc = {
            (side, arm): result_rows.accuracies(cell["rows"], arm)
            for side, cell in (("from", before), ("to", after))
            for arm in arms
        }
        for arm in arms:
            w = statistics.welch(acc["to", arm], acc["from", arm])
            rows_changes.append(
                dict(
                    w,
                    pair=label,
                    arm=arm,
                    mean_from=statistics.mean(acc["from", arm]),
                    mean_to=statistics.mean(acc["to", arm]),
                    detectable=statistics.detectable(w["se"], w["df"]),
                )
            )
        comparators = comparisons.read_protocol(
            after["rows"], after["summary"]
        ).comparators
        for arm in (a for a in arms if a in comparisons.OUR_ARMS):
            for comparator in (c for c in comparators if c in arms):
                r = statistics.interaction(
                    acc["from", arm],
                    acc["to", arm],
                    acc["from", comparator],
                    acc["to", comparator],
                )
                rows_interactions.append(
                    dict(
                        r,
                        pair=label,
                        arm=arm,
                        comparator=comparator,
                        detectable=statistics.detectable(r["se"], r["df"]),
                    )
                )
    for family in (rows_changes, rows_interactions):
        raw = [r[k] for r in family for k in ("p_below", "p_above")]
        adjusted = iter(statistics.holm(raw))
        levels = iter(statistics.holm_levels(raw, ALPHA))
        for r in family:
            r["p_below"], r["p_above"] = next(adjusted), next(adjusted)
            _detectable_at_level(r, next(levels), next(levels))
    return rows_changes, rows_interactions


def _detectable_at_level(row, level_below, level_above):
    """Adds `level`, the Holm level the row's first-judged test (the
    direction with the smaller p-value) was held to, and
    `detectable_at_level`, what its seeds could detect at that level."""
    levels = [x for x in (level_below, level_above) if x == x]
    row["level"] = min(levels) if levels else float("nan")
    row["detectable_at_level"] = (
        statistics.detectable(row["se"], row["df"], row["level"], POWER)
        if levels
        else float("nan")
    )


def render(pairs, command=""):
    """The Markdown of `changes(pairs)`."""
    rows_changes, rows_interactions = changes(pairs)
    lines = [
        "# Across conditions",
        "",
        f"Written by `{command}` from the studies' `trials.csv` (and "
        "`fresh_seeds.csv` where a study has one). Test accuracy; "
        "intervals 95% Welch; p-values one-sided, Holm-adjusted over both "
        "directions of every row of a table; detectable at 0.05 with power "
        "0.8, and at the Holm level that applied to the row's first-judged "
        "test (its direction with the smaller p-value), the level its "
        "verdict was actually held to.",
        "",
        "## Each arm's change (to minus from)",
        "",
        "| from -> to | arm | from | to | change | 95% interval "
        "| p falls | p rises | detectable at 0.05 | Holm level applied "
        "| detectable at it | verdict |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows_changes:
        lines.append(
            f"| {r['pair']} | {r['arm']} | {_num(r['mean_from'], '.4f')} "
            f"| {_num(r['mean_to'], '.4f')} " + _tested(r, "falls", "rises")
        )
    lines += [
        "",
        "## Our arm's change minus the comparator's",
        "",
        "| from -> to | comparison | interaction | 95% interval "
        "| p ours gains less | p ours gains more | detectable at 0.05 "
        "| Holm level applied | detectable at it | verdict |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows_interactions:
        lines.append(
            f"| {r['pair']} | {r['arm']} - {r['comparator']} "
            + _tested(r, "ours gains less", "ours gains more")
        )
    return "\n".join(lines) + "\n"


def _tested(r, below, above):
    """The cells of a row from its estimate on: the estimate, its interval,
    both p-values, what it could detect and the verdict."""
    verdict = statistics.direction_verdict(
        r["p_below"],
        r["p_above"],
        r["detectable_at_level"],
        below,
        above,
        ALPHA,
    )
    return (
        f"| {_num(r['diff'], '+.4f')} "
        f"| [{_num(r['low'], '+.4f')}, "
        f"{_num(r['high'], '+.4f')}] "
        f"| {_num(r['p_below'], '.3g')} "
        f"| {_num(r['p_above'], '.3g')} "
        f"| {_num(r['detectable'], '.4f')} "
        f"| {_num(r['level'], '.2g')} "
        f"| {_num(r['detectable_at_level'], '.4f')} | {verdict} |"
    )


if __name__ == "__main__":
    sys.exit(main())
