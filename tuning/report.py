"""The statistics of a finished study, written from its result files.

    python -m tuning.report STUDY [--results-dir DIR]

Reads `--results-dir/<study>/trials.csv`, `search_trials.csv` and
`summary.json` (see `tuning.schema`) and writes `report.md` next to them:

- the protocol, as the study declared it before any run: the tuner, the
  schedule, the comparators of our arms and the non-inferiority margin
  (`[compare]`); studies written before comparators were declared compare
  our arms with every other arm of `[compare] arms`, with a margin of 0.01,
  and the report says so. A comparator is never picked from the results;
- for a study with several conditions, "At a glance": per condition, every
  arm's mean test accuracy ± std (chosen rate), and the verdict of every
  (our arm, comparator);
- per condition, per arm: test accuracy mean ± sample std over the seeds
  and every per-seed value, the chosen learning rate, optimizer and kernel
  scale, and its search bracket (the chosen rate over its nearest
  completed, non-diverged search neighbour below, that neighbour above over
  the chosen rate);
- per condition, per (our arm, comparator): the difference of mean test
  accuracy with its 95% Welch interval, the one-sided Welch p-values of
  non-inferiority (within the margin), superiority and inferiority (beyond
  the margin), Holm-adjusted all at once over every such test of the study,
  the difference the test could detect with 80% power, and the verdict;
- the cells whose chosen rate is not bracketed;
- for a study whose grid varies `batch_size`: per arm and batch size the
  chosen rate, its bracket and the optimizer steps; per arm the change of
  accuracy from the smallest to the largest batch size, and per (our arm,
  comparator) the interaction (our arm's change minus the comparator's),
  each with its 95% interval, one-sided tests in both directions
  Holm-adjusted over all of the study's changes (interactions) at once,
  the effect they could detect with 80% power, and the verdict (each (arm,
  batch size) cell is its own independently trained seeds); where seeds
  diverged, the same estimates without them (descriptive).

Every number comes from the result files; nothing is typed by hand.

This module writes the Markdown; the numbers are computed, with no
Markdown, in `result_rows` (the result files read into rows),
`comparisons` (the protocol, the tests, Holm, detectable differences and
the verdicts), `batch_size`, `replays` (seeds and fresh seeds),
`repeated_searches` (selection noise, fragile verdicts) and
`selection_study` (what a pilot chooses). The sections are rendered here
and in `report_tables`, `report_batch_size` and `report_seeds`.
"""

import argparse
import math
import os
import sys

from tuning import cli
from tuning import comparisons
from tuning import markdown
from tuning import records
from tuning import repeated_searches
from tuning import replays
from tuning import report_batch_size
from tuning import report_seeds
from tuning import report_tables
from tuning import result_rows
from tuning import schema
from tuning import selection_study

REPORT_MD = schema.REPORT_MD

# Read by other modules and tests as `report.<name>`.
with_fresh_seeds = result_rows.with_fresh_seeds
read_repeats = result_rows.read_repeats
selected_keys = selection_study.selected_keys
choices = selection_study.choices
selection_noise = repeated_searches.selection_noise
_search_count = report_tables.search_count
_diverged = report_tables.diverged

_num = markdown.num
_names = markdown.names


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m tuning.report",
        description="Writes report.md for a finished study.",
    )
    parser.add_argument("study", help="the study's results folder name")
    parser.add_argument("--results-dir", default=schema.DEFAULT_RESULTS_DIR)
    args = parser.parse_args(argv)
    try:
        path = write_report(os.path.join(args.results_dir, args.study))
    except result_rows.ReportError as e:
        return cli.fail(e)
    print(f"wrote {path}")
    return 0


def write_report(out_dir):
    """Writes `report.md` in a study's results folder.

    Args:
        out_dir: str, the folder holding `trials.csv`, `search_trials.csv`
            and `summary.json`.

    Returns:
        str: the path of `report.md`.

    Raises:
        result_rows.ReportError: if `trials.csv` is missing or empty.
    """
    text = render_folder(out_dir)
    path = os.path.join(out_dir, REPORT_MD)
    records.write_atomic(path, text)
    return path


def render_folder(out_dir):
    """The report of a study's results folder, as `write_report` writes it.

    Raises:
        result_rows.ReportError: if `trials.csv` is missing or empty.
    """
    runs, search, summary = result_rows.read_results(out_dir)
    fresh = result_rows.read_fresh(out_dir)
    joined = result_rows.read_extended(out_dir, summary, runs)
    return render(
        runs,
        search,
        summary,
        fresh,
        result_rows.read_repeats(out_dir),
        joined=joined,
    )


def render(runs, search, summary, fresh=(), repeats=None, joined=None):
    """The report as Markdown.

    Args:
        runs: list of dicts of str, the rows of `trials.csv`.
        search: list of dicts of str, the rows of `search_trials.csv`.
        summary: dict, the content of `summary.json` (`{}` if none).
        fresh: list of dicts of str, the rows of `fresh_seeds.csv` (the
            fresh seeds of replaying reruns). Defaults to `()`.
        repeats: dict, search seed to the `trials.csv` rows of a repeated
            search (`result_rows.read_repeats`). Defaults to `None` (none).
        joined: for a study that extends another,
            `result_rows.read_extended`'s dict: that study's rows join this
            one's in the tables and tests, and its repeated searches join
            this one's in the selection noise (the seeds and fresh seeds
            are this study's own). Defaults to `None`.

    Returns:
        str: the Markdown text.
    """
    selects = selection_study.selected_keys(summary, runs[0].get("study"))
    if selects:
        return _render_selection(runs, search, summary, fresh, selects, joined)
    own = runs
    if joined:
        runs = list(joined["runs"]) + list(runs)
        search = list(joined["search"]) + list(search)
    protocol = comparisons.read_protocol(runs, summary)
    cells = comparisons.cell_verdicts(runs, summary)
    lines = _header(runs, summary, protocol, cells) + _joined_note(joined)
    lines += report_tables.glance_section(runs, cells)
    for condition in result_rows.conditions(runs):
        rows = result_rows.of_condition(runs, condition)
        trials = result_rows.of_condition(search, condition)
        if condition:
            lines += [f"## {condition}", ""]
        lines += report_tables.arm_table(rows, trials)
        lines += report_tables.tests_table(
            [c for c in cells if c["condition"] == condition], rows, protocol
        )
    lines += report_tables.bracket_section(runs)
    lines += report_seeds.seeds_section(own, summary, fresh)
    if joined:
        # The other study's repeated searches measure the selection noise
        # at the settings the two share: it carries to this study's tests.
        lines += report_seeds.selection_noise_section(
            list(joined["runs"]) + result_rows.with_fresh_seeds(own, fresh),
            summary,
            result_rows.merge_repeats(
                joined.get("repeats") or {}, repeats or {}
            ),
            protocol,
            source=joined["name"],
        )
    else:
        lines += report_seeds.fresh_seeds_section(runs, summary, fresh, cells)
        lines += report_seeds.selection_noise_section(
            result_rows.with_fresh_seeds(runs, fresh),
            summary,
            repeats or {},
            protocol,
        )
    lines += report_batch_size.section(runs, summary, protocol)
    lines += report_tables.verdict_counts(cells)
    return "\n".join(lines).rstrip() + "\n"


def _joined_note(joined):
    """Where the rows of the study this one extends come from."""
    if joined and not joined["runs"]:
        return [
            f"This study adds arms to `{joined['name']}`, whose results are "
            "not in the same results folder: only this study's rows are "
            "here.",
            "",
        ]
    if joined:
        arms = result_rows.ordered_unique(r["arm"] for r in joined["runs"])
        return [
            f"This study adds arms to `{joined['name']}`: the rows of "
            f"{_names(arms)} are that study's, at the same conditions and "
            "settings (with fresh seeds where a rerun replayed its search), "
            "read from its results folder.",
            "",
        ]
    return []


def _render_selection(runs, search, summary, fresh, selects, joined=None):
    """The report of a selection study: validation only, no test number.
    The rows of a study it extends join its choices (`render`)."""
    own = runs
    if joined:
        runs = list(joined["runs"]) + list(runs)
    lines = _opening(own, summary) + _joined_note(joined)
    lines += [
        "## Choice, on validation only",
        "",
        "A selection study: it chooses "
        + (
            "among the nets built on each layer of ours, the arm and its "
            "stem and head variants, for each value of the other grid keys."
            if selection_study.ARM in selects
            else f"{_names(selects)} for each arm (and each value of the "
            "other grid keys)."
        )
        + " Each value searched its "
        "own learning rate on the validation split; its chosen rate was "
        "then retrained on the seeds, whose mean validation accuracy ranks "
        "the values. The search's own best validation accuracy is shown "
        "too, but it is the maximum over the trials, biased upward, and "
        "does not rank. Test accuracy is recorded in `trials.csv` and "
        "shown nowhere here: no setting is chosen on it.",
        "",
    ]
    for choice in selection_study.choices(runs, summary, selects):
        lines += [
            f"### {choice['group']}",
            "",
            "| value | learning rate | bracketed | search's best val "
            "accuracy | seed reruns' val accuracy (mean) | seeds | choice |",
            "|---|---|---|---|---|---|---|",
        ]
        for o in choice["options"]:
            lines.append(
                f"| {o['value']} | {_num(o['learning_rate'], '.3g')} "
                f"| {o['bracketed'] or '-'} "
                f"| {_num(o['search_val_accuracy'], '.4f')} "
                f"| {_num(o['val_accuracy'], '.4f')} | {o['seeds']} "
                f"| {'**chosen**' if o['value'] == choice['chosen'] else ''} |"
            )
        lines.append("")
    lines += report_tables.bracket_section(runs)
    lines += report_seeds.seeds_section(
        own, summary, fresh, metric="val_accuracy"
    )
    replayed = replays.replaying_rows(runs, summary.get("config") or {})
    if replayed:
        lines += [
            f"{len(replayed)} of the reruns above replay their search's "
            "chosen trial: their validation accuracy is the search's best, "
            "selection-biased, and ranks those values higher than a fresh "
            "seed would.",
            "",
        ]
    return "\n".join(lines).rstrip() + "\n"


def _opening(runs, summary):
    """The title, data, backend, commit, wall time and command lines."""
    first = runs[0]
    dataset = (summary.get("dataset") or {}).get("label") or first.get(
        "dataset_label", ""
    )
    backend = summary.get("backend") or first.get("backend", "")
    commit = str(summary.get("git_commit") or "")[:10] or "n/a"
    return [
        f"# {summary.get('study') or first.get('study', 'study')}",
        "",
        f"Dataset: {dataset}. Backend: {backend}. Commit: `{commit}`"
        + (" (dirty tree)" if summary.get("git_dirty") else "")
        + f". Wall time: {_wall_time(summary)}.",
        "",
        f"Command: `{summary.get('command', '')}`",
        "",
        "Written by `python -m tuning.report` from `trials.csv`, "
        "`search_trials.csv` and `summary.json`.",
        "",
    ]


def _header(runs, summary, protocol, cells):
    tests = sum(not math.isnan(c[k]) for c in cells for k in comparisons.TESTS)
    ours = result_rows.ordered_unique(
        r["arm"] for r in runs if r["arm"] in comparisons.OUR_ARMS
    )
    lines = _opening(runs, summary) + [
        "## Protocol",
        "",
        f"- Learning rate searched by the `{protocol.tuner}` tuner on the "
        f"validation split; schedule: `{protocol.schedule}`.",
        f"- Our arms: {_names(ours)}.",
    ]
    if protocol.comparators_declared:
        lines.append(
            f"- Comparators, declared by the study: "
            f"{_names(protocol.comparators)}."
        )
    else:
        lines.append(
            "- Comparators: not declared in these files (written before "
            "studies declared them), so every compared arm that is not one "
            f"of ours: {_names(protocol.comparators)}."
        )
    margin = f"{protocol.margin:g} (accuracy)"
    lines.append(
        f"- Non-inferiority margin: {margin}, declared by the study."
        if protocol.margin_declared
        else f"- Non-inferiority margin: not declared in these files; {margin} "
        "assumed."
    )
    alpha, n_tests = comparisons.ALPHA, len(comparisons.TESTS)
    lines += [
        f"- One-sided Welch tests of our arm minus the comparator: "
        f"non-inferiority (difference > -{protocol.margin:g}), superiority "
        f"(> 0), inferiority (< -{protocol.margin:g}); alpha {alpha:g}, "
        f"Holm–Bonferroni over all {tests} p-values of the study at once "
        f"({n_tests} tests for each of {len(cells)} comparison"
        f"{'' if len(cells) == 1 else 's'}, undefined ones left out).",
        f"- Intervals: {comparisons.CONFIDENCE:.0%} Welch. Detectable: the "
        "smallest true difference a one-sided Welch test finds with power "
        f"{comparisons.POWER:g}, from the seeds' spreads, at {alpha:g} and "
        "at the level Holm applied to the comparison (that of its smallest "
        f"p-value, between {alpha:g}/{max(tests, 1)} and {alpha:g}); an "
        "inconclusive verdict names the latter.",
        "",
    ]
    return lines


def _wall_time(summary):
    """The last sitting's wall time and, where known, the cells' sum."""
    last = _minutes(summary.get("wall_time_s"))
    cells = summary.get("cells_wall_time_s")
    if not cells:
        return last
    return (
        f"{_minutes(cells)} summed over the cells' searches and seed "
        f"reruns (every sitting that finished them); {last} the last sitting"
    )


def _minutes(seconds):
    if seconds in (None, ""):
        return "n/a"
    return f"{float(seconds) / 60:.1f} min"


if __name__ == "__main__":
    sys.exit(main())
