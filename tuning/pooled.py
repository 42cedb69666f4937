"""One difference per (our arm, comparator), pooled over conditions.

    python -m tuning.pooled STUDY [STUDY ...] [--by KEY ...]
        [--results-dir DIR] [--out FILE]

A study's `report.md` tests each condition on its own. This view asks the
question across them: over the conditions of one or more finished studies
(their `trials.csv` and `summary.json`), what is our arm's test accuracy
minus each comparator's on average, and do the conditions agree? Each
condition gives one Welch difference of means with its standard error
(`statistics.welch` on the seeds); `meta_analysis.random_effects` combines them with
DerSimonian–Laird random effects and a Hartung–Knapp interval, and reports
Cochran's Q, I² and tau.

`--by depth` (any keys of the runs' columns, e.g. `depth`, `activation`,
`optimizers`, `width`) pools within each value of those keys separately.
Conditions are (study, condition) pairs, so studies that split one
question across files (an optimizer each, say) pool as one. The
comparators of each study are those it declares
(`tuning.comparisons.read_protocol`); a pair is pooled over the conditions
that have both arms with two or more seeds.

The pooled interval describes the average over these conditions; the
per-condition verdicts, Holm-adjusted, stay in each study's `report.md`.
Every number comes from the result files.
"""

import argparse
import math
import os
import sys

from tuning import cli
from tuning import comparisons
from tuning import markdown
from tuning import meta_analysis
from tuning import result_rows
from tuning import schema
from tuning import statistics

CONFIDENCE = comparisons.CONFIDENCE


class PooledError(Exception):
    """Missing results or a bad request: one line on stderr, exit 2."""


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m tuning.pooled",
        description="Pools our arms' differences over the conditions of "
        "finished studies.",
    )
    parser.add_argument(
        "studies", nargs="+", metavar="STUDY", help="results folder names"
    )
    parser.add_argument(
        "--by",
        nargs="+",
        default=(),
        metavar="KEY",
        help="pool separately for each value of these run columns (e.g. depth)",
    )
    parser.add_argument("--results-dir", default=schema.DEFAULT_RESULTS_DIR)
    parser.add_argument(
        "--out", help="write the Markdown here (default: standard output)"
    )
    args = parser.parse_args(argv)
    try:
        studies = [
            load_results(os.path.join(args.results_dir, name))
            for name in args.studies
        ]
        text = render(studies, by=tuple(args.by))
    except PooledError as e:
        return cli.fail(e)
    cli.emit(text, args.out)
    return 0


def load_results(out_dir):
    """The rows and summary of one finished study's results folder.

    Returns:
        dict: `name` (str), `runs` (list of dicts of str, `trials.csv`),
        `summary` (dict, `summary.json` or `{}`).

    Raises:
        PooledError: if `trials.csv` is missing or empty.
    """
    try:
        runs, _, summary = result_rows.read_results(out_dir)
    except result_rows.ReportError as e:
        raise PooledError(str(e)) from e
    return {
        "name": os.path.basename(os.path.normpath(out_dir)),
        "runs": runs,
        "summary": summary,
    }


def condition_differences(studies, by=()):
    """Every (group, our arm, comparator, condition) difference.

    Args:
        studies: list of dicts from `load_results`.
        by: tuple of str, run columns that define the groups.

    Returns:
        list of dicts: `group` (tuple of str, the values of `by`), `arm`,
        `comparator`, `study`, `condition` (str), `diff`, `se` (floats,
        `se` `nan` where the seeds cannot give one), in the order of the
        studies, their conditions, our arms and the comparators.

    Raises:
        PooledError: if a key of `by` is not a column of some study's runs.
    """
    out = []
    for study in studies:
        runs = study["runs"]
        missing = [key for key in by if key not in runs[0]]
        if missing:
            raise PooledError(
                f"Expected --by keys among the columns of {study['name']}'s "
                f"trials.csv. Received: --by {' '.join(missing)}"
            )
        protocol = comparisons.read_protocol(runs, study["summary"])
        for condition in result_rows.conditions(runs):
            rows = result_rows.of_condition(runs, condition)
            group = tuple(rows[0][key] for key in by)
            for arm, comparator in comparisons.pairs(rows, protocol):
                w = statistics.welch(
                    result_rows.accuracies(rows, arm),
                    result_rows.accuracies(rows, comparator),
                    CONFIDENCE,
                )
                out.append(
                    {
                        "group": group,
                        "arm": arm,
                        "comparator": comparator,
                        "study": study["name"],
                        "condition": condition,
                        "diff": w["diff"],
                        "se": w["se"],
                    }
                )
    return out


def pool(differences):
    """`meta_analysis.random_effects` of each (group, arm, comparator).

    Args:
        differences: list of dicts from `condition_differences`.

    Returns:
        list of dicts: `group`, `arm`, `comparator`, `conditions` (the
        differences pooled), `left_out` (int, conditions without a usable
        standard error) and the keys of `meta_analysis.random_effects`, in first-seen
        order.
    """
    keys = result_rows.ordered_unique(
        (d["group"], d["arm"], d["comparator"]) for d in differences
    )
    pooled = []
    for group, arm, comparator in keys:
        rows = [
            d
            for d in differences
            if (d["group"], d["arm"], d["comparator"])
            == (group, arm, comparator)
        ]
        usable = [d for d in rows if _usable(d["se"])]
        result = meta_analysis.random_effects(
            [d["diff"] for d in usable], [d["se"] for d in usable], CONFIDENCE
        )
        pooled.append(
            {
                "group": group,
                "arm": arm,
                "comparator": comparator,
                "conditions": usable,
                "left_out": len(rows) - len(usable),
                **result,
            }
        )
    return pooled


def describe(result, margin):
    """Where the pooled interval lies, in words, against 0 and the margin."""
    low, high = result["low"], result["high"]
    if math.isnan(low):
        return "n/a"
    if low > 0:
        return "above 0"
    if low > -margin:
        return f"above -{margin:g}"
    if high < -margin:
        return f"below -{margin:g}"
    if high < 0:
        return "below 0"
    return "spans 0"


def render(studies, by=()):
    """The pooled view as Markdown.

    Args:
        studies: list of dicts from `load_results`.
        by: tuple of str, run columns that define the groups.

    Returns:
        str: the Markdown text.
    """
    margins = {
        comparisons.read_protocol(s["runs"], s["summary"]).margin
        for s in studies
    }
    margin = max(margins)
    differences = condition_differences(studies, by)
    results = pool(differences)
    names = ", ".join(f"`{s['name']}`" for s in studies)
    commits = ", ".join(
        f"`{str(s['summary'].get('git_commit') or 'n/a')[:10]}`"
        for s in studies
    )
    command = "python -m tuning.pooled " + " ".join(s["name"] for s in studies)
    if by:
        command += " --by " + " ".join(by)
    lines = [
        f"# Pooled over conditions: {names}",
        "",
        f"Commits: {commits}. Written by `{command}` from each study's "
        "`trials.csv` and `summary.json`.",
        "",
        "Each condition gives our arm's mean test accuracy minus the "
        "comparator's, with its Welch standard error from the seeds; the "
        "conditions are pooled by DerSimonian–Laird random effects with a "
        f"Hartung–Knapp {CONFIDENCE:.0%} interval (t on k - 1 df, never "
        "narrower than the normal-theory one). Q and its p-value test "
        "whether the conditions agree; I² is the share of their spread "
        "beyond the seeds' noise, tau the between-condition standard "
        "deviation of the difference. The interval is compared with 0 and "
        f"the non-inferiority margin {margin:g}; the per-condition "
        "verdicts are in each study's `report.md`.",
        "",
    ]
    if len(margins) > 1:
        lines += [
            f"(The studies declare different margins, {sorted(margins)}; "
            f"the largest, {margin:g}, is used here.)",
            "",
        ]
    for group in result_rows.ordered_unique(r["group"] for r in results):
        if by:
            label = ", ".join(f"{k} = {v}" for k, v in zip(by, group))
            lines += [f"## {label}", ""]
        lines += [
            "| our arm | comparator | conditions | pooled difference "
            f"({CONFIDENCE:.0%} CI) | p | interval | fixed effect | I² "
            "| Q (p) | tau | per condition |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for r in (r for r in results if r["group"] == group):
            per = ", ".join(f"{d['diff']:+.3f}" for d in r["conditions"])
            k = f"{r['k']}" + (
                f" (+{r['left_out']} without spread)" if r["left_out"] else ""
            )
            lines.append(
                f"| {r['arm']} | {r['comparator']} | {k} "
                f"| {_signed(r['diff'])} [{_signed(r['low'])}, "
                f"{_signed(r['high'])}] | {_p(r['p'])} "
                f"| {describe(r, margin)} | {_signed(r['fixed'])} "
                f"| {_percent(r['i2'])} "
                f"| {markdown.num(r['q'], '.1f')} ({_p(r['p_heterogeneity'])}) "
                f"| {markdown.num(_sqrt(r['tau2']), '.3f')} | {per} |"
            )
        lines.append("")
    lines += _conditions_table(differences, by)
    return "\n".join(lines).rstrip() + "\n"


def _conditions_table(differences, by):
    lines = [
        "## The conditions",
        "",
        "| study | condition | "
        + "".join(f"{k} | " for k in by)
        + "our arm | comparator | difference | se |",
        "|---|---|" + "---|" * len(by) + "---|---|---|---|",
    ]
    for d in differences:
        lines.append(
            f"| {d['study']} | {d['condition'] or '(none)'} | "
            + "".join(f"{v} | " for v in d["group"])
            + f"{d['arm']} | {d['comparator']} | {_signed(d['diff'])} "
            f"| {markdown.num(d['se'], '.4f')} |"
        )
    return lines + [""]


def _usable(se):
    return not math.isnan(se) and 0 < se < math.inf


def _sqrt(value):
    return math.sqrt(value) if not math.isnan(value) else math.nan


def _signed(value):
    return "n/a" if math.isnan(value) else f"{value:+.4f}"


def _percent(value):
    return "n/a" if math.isnan(value) else f"{value:.0%}"


def _p(value):
    if math.isnan(value):
        return "n/a"
    return f"{value:.2g}" if value >= 1e-4 else "<1e-4"


if __name__ == "__main__":
    sys.exit(main())
