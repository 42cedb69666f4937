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
"""

import argparse
import collections
import dataclasses
import math
import os
import sys

from keras_affine_div import models
from tuning import outcomes
from tuning import records
from tuning import schema
from tuning import statistics
from tuning import study as study_module

REPORT_MD = schema.REPORT_MD
# The layers under test; every other arm is a comparator candidate.
OUR_ARMS = models.arm_names(ours=True)
ALPHA = 0.05
CONFIDENCE = 0.95
POWER = 0.8
# The non-inferiority margin of studies that do not declare one.
DEFAULT_MARGIN = 0.01
# The p-values of one (condition, our arm, comparator), in Holm order.
TESTS = ("p_non_inferior", "p_superior", "p_inferior")


class ReportError(Exception):
    """Missing or unreadable results: one line on stderr, exit status 2."""


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
    """

    comparators: tuple
    margin: float
    comparators_declared: bool
    margin_declared: bool
    tuner: str
    schedule: str


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
    except ReportError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
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
        ReportError: if `trials.csv` is missing or empty.
    """
    text = render_folder(out_dir)
    path = os.path.join(out_dir, REPORT_MD)
    records.write_atomic(path, text)
    return path


def render_folder(out_dir):
    """The report of a study's results folder, as `write_report` writes it.

    Raises:
        ReportError: if `trials.csv` is missing or empty.
    """
    runs, search, summary = read_results(out_dir)
    fresh = records.read_csv(os.path.join(out_dir, schema.FRESH_SEEDS_CSV))
    joined = read_extended(out_dir, summary, runs)
    return render(
        runs, search, summary, fresh, read_repeats(out_dir), joined=joined
    )


def read_extended(out_dir, summary, runs):
    """The rows of the study a study extends (`[compare] extends`), at the
    conditions the extending study ran.

    Read from the sibling results folder of that study, with fresh seeds in
    place of the reruns that replayed their search.

    Returns:
        dict: `name`, `runs` and `search` (lists of rows; empty where the
        extended study has no results in that folder); `{}` for a study
        that extends none.
    """
    compare = (summary.get("config") or {}).get("compare") or {}
    parent = compare.get("extends")
    if not parent:
        return {}
    folder = os.path.join(os.path.dirname(os.path.normpath(out_dir)), parent)
    try:
        theirs, search, _ = read_results(folder)
    except ReportError:
        return {"name": parent, "runs": [], "search": []}
    fresh = records.read_csv(os.path.join(folder, schema.FRESH_SEEDS_CSV))
    conditions = {r.get("condition", "") for r in runs}
    return {
        "name": parent,
        "runs": [
            r
            for r in with_fresh_seeds(theirs, fresh)
            if r.get("condition", "") in conditions
        ],
        "search": [t for t in search if t.get("condition", "") in conditions],
    }


def read_repeats(out_dir):
    """The seed reruns of a study's repeated searches.

    Returns:
        dict: search seed (int) to the rows of its `trials.csv`, for every
        `repeats/search-seed-<N>/` folder with rows, by seed.
    """
    folder = os.path.join(out_dir, study_module.REPEATS_DIR)
    if not os.path.isdir(folder):
        return {}
    repeats = {}
    for name in os.listdir(folder):
        prefix = "search-seed-"
        if not name.startswith(prefix) or not name[len(prefix) :].isdigit():
            continue
        rows = records.read_csv(os.path.join(folder, name, schema.TRIALS_CSV))
        if rows:
            repeats[int(name[len(prefix) :])] = rows
    return dict(sorted(repeats.items()))


def read_results(out_dir):
    """The result files of a study, as `render` takes them.

    Args:
        out_dir: str, the study's results folder.

    Returns:
        tuple: `(runs, search, summary)`: the rows of `trials.csv` and of
        `search_trials.csv` (lists of dicts of str; `search` is `[]` if the
        file is absent) and the content of `summary.json` (`{}` if absent).

    Raises:
        ReportError: if `trials.csv` is missing or empty.
    """
    runs = records.read_csv(os.path.join(out_dir, schema.TRIALS_CSV))
    if not runs:
        raise ReportError(
            "Expected a finished study with rows in trials.csv. Received: "
            f"results folder={out_dir!r}"
        )
    search = records.read_csv(os.path.join(out_dir, schema.SEARCH_TRIALS_CSV))
    summary = records.read_json(os.path.join(out_dir, schema.SUMMARY_JSON))
    return runs, search, summary or {}


def render(runs, search, summary, fresh=(), repeats=None, joined=None):
    """The report as Markdown.

    Args:
        runs: list of dicts of str, the rows of `trials.csv`.
        search: list of dicts of str, the rows of `search_trials.csv`.
        summary: dict, the content of `summary.json` (`{}` if none).
        fresh: list of dicts of str, the rows of `fresh_seeds.csv` (the
            fresh seeds of replaying reruns). Defaults to `()`.
        repeats: dict, search seed to the `trials.csv` rows of a repeated
            search (`read_repeats`). Defaults to `None` (none).
        joined: for a study that extends another, `read_extended`'s dict:
            that study's rows join this one's in the tables and tests (the
            seeds, fresh seeds and selection noise are this study's own).
            Defaults to `None`.

    Returns:
        str: the Markdown text.
    """
    selects = selected_keys(summary, runs[0].get("study"))
    if selects:
        return _render_selection(runs, search, summary, fresh, selects)
    own = runs
    if joined:
        runs = list(joined["runs"]) + list(runs)
        search = list(joined["search"]) + list(search)
    protocol = read_protocol(runs, summary)
    cells = cell_verdicts(runs, summary)
    lines = _header(runs, summary, protocol, cells)
    if joined and not joined["runs"]:
        lines += [
            f"This study adds arms to `{joined['name']}`, whose results are "
            "not in the same results folder: only this study's rows are "
            "here.",
            "",
        ]
    elif joined:
        arms = ordered_unique(r["arm"] for r in joined["runs"])
        lines += [
            f"This study adds arms to `{joined['name']}`: the rows of "
            f"{_names(arms)} are that study's, at the same conditions and "
            "settings (with fresh seeds where a rerun replayed its search), "
            "read from its results folder.",
            "",
        ]
    lines += _glance_section(runs, cells)
    for condition in ordered_unique(r.get("condition", "") for r in runs):
        rows = [r for r in runs if r.get("condition", "") == condition]
        trials = [t for t in search if t.get("condition", "") == condition]
        if condition:
            lines += [f"## {condition}", ""]
        lines += _arm_table(rows, trials)
        lines += _tests_table(
            [c for c in cells if c["condition"] == condition],
            rows,
            protocol,
        )
    lines += _bracket_section(runs)
    lines += _seeds_section(own, summary, fresh)
    if not joined:
        lines += _fresh_seeds_section(runs, summary, fresh, cells)
        lines += _selection_noise_section(
            with_fresh_seeds(runs, fresh), summary, repeats or {}, protocol
        )
    if _batch_size_varies(runs, summary):
        lines += _batch_size_section(runs, summary, protocol)
    lines += _verdict_counts(cells)
    return "\n".join(lines).rstrip() + "\n"


def selected_keys(summary, name=None):
    """The settings a selection study (a pilot) chooses: `[compare]
    selects` of its config, else of its study file (`summary`'s study, or
    `name`: for results written before studies declared it); `()` for a
    comparison."""
    compare = (summary.get("config") or {}).get("compare") or {}
    if "selects" in compare:
        return tuple(compare["selects"])
    name = summary.get("study") or name
    if not name or name not in study_module.list_studies():
        return ()
    try:
        return study_module.load_study(name).selects
    except study_module.StudyError:
        return ()


def choices(runs, summary, selects):
    """What a selection study chooses, on validation only.

    Cells are grouped by arm and by the grid values outside `selects`; in
    each group, the value of `selects` whose seed reruns have the highest
    mean validation accuracy (at the cell's chosen learning rate) is the
    choice. Test accuracy plays no part.

    Args:
        runs: the rows of `trials.csv`.
        summary: dict, the content of `summary.json`.
        selects: the grid keys chosen.

    Returns:
        list of dicts, one per group in the order of `runs`: `group` (str:
        the arm and the other grid values), `options` (list of dicts:
        `value`, `learning_rate`, `bracketed`, `search_val_accuracy` of the
        chosen trial, `val_accuracy` mean over the seeds, `seeds`), and
        `chosen` (the `value` chosen).
    """
    grid = [k for k in _grid_keys(summary) or selects if k not in selects]
    conditions = summary.get("conditions") or {}

    def setting(row, key):
        # The row's own column, else the condition's value in the summary
        # (rows written before the runner wrote every grid key).
        if row.get(key) not in (None, ""):
            return row[key]
        values = (conditions.get(row.get("condition", "")) or {}).get(
            "values"
        ) or {}
        return values.get(key, "")

    groups = {}
    for row in runs:
        group = " ".join(
            [row["arm"]] + [f"{k}={setting(row, k)}" for k in grid]
        )
        value = ", ".join(f"{k}={setting(row, k)}" for k in selects)
        groups.setdefault(group, {}).setdefault(value, []).append(row)
    out = []
    for group, values in groups.items():
        options = []
        for value, rows in values.items():
            val = [_float(r["val_accuracy"]) for r in rows]
            options.append(
                {
                    "value": value,
                    "learning_rate": _float(rows[0].get("learning_rate")),
                    "bracketed": rows[0].get("bracketed", ""),
                    "search_val_accuracy": _float(
                        rows[0].get("search_val_accuracy")
                    ),
                    "val_accuracy": _mean(val),
                    "seeds": len(rows),
                }
            )
        best = max(
            (o for o in options if not math.isnan(o["val_accuracy"])),
            key=lambda o: o["val_accuracy"],
            default=None,
        )
        out.append(
            {
                "group": group,
                "options": options,
                "chosen": best["value"] if best else None,
            }
        )
    return out


def _render_selection(runs, search, summary, fresh, selects):
    """The report of a selection study: validation only, no test number."""
    lines = _opening(runs, summary) + [
        "## Choice, on validation only",
        "",
        f"A selection study: it chooses {_names(selects)} for each arm "
        "(and each value of the other grid keys). Each value searched its "
        "own learning rate on the validation split; its chosen rate was "
        "then retrained on the seeds, whose mean validation accuracy ranks "
        "the values. The search's own best validation accuracy is shown "
        "too, but it is the maximum over the trials, biased upward, and "
        "does not rank. Test accuracy is recorded in `trials.csv` and "
        "shown nowhere here: no setting is chosen on it.",
        "",
    ]
    for choice in choices(runs, summary, selects):
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
    lines += _bracket_section(runs)
    lines += _seeds_section(runs, summary, fresh, metric="val_accuracy")
    replayed = schema.replays(runs, summary.get("config") or {})
    if replayed:
        lines += [
            f"{len(replayed)} of the reruns above replay their search's "
            "chosen trial: their validation accuracy is the search's best, "
            "selection-biased, and ranks those values higher than a fresh "
            "seed would.",
            "",
        ]
    return "\n".join(lines).rstrip() + "\n"


def with_fresh_seeds(runs, fresh):
    """`runs` with every replaying rerun that has a fresh seed replaced by
    it (`fresh_seeds.csv` rows, matched on condition, arm and
    `replaces_seed`)."""
    by_key = {
        (r.get("condition", ""), r["arm"], r["replaces_seed"]): r for r in fresh
    }
    return [
        by_key.get((r.get("condition", ""), r["arm"], r["seed"]), r)
        for r in runs
    ]


def _seeds_section(runs, summary, fresh, metric="test_accuracy"):
    """Which seeds each cell's reruns trained from, and which replay the
    search's chosen trial (with the fresh seed's `metric`)."""
    config = summary.get("config") or {}
    search_seed = (config.get("search") or {}).get("seed")
    if search_seed is None:
        return []
    version = config.get("protocol", study_module.DEFAULT_PROTOCOL)
    replayed = {
        (r.get("condition", ""), r["arm"]): r
        for r in schema.replays(runs, config)
    }
    fresh = {(r.get("condition", ""), r["arm"]): r for r in fresh}
    cells = ordered_unique((r.get("condition", ""), r["arm"]) for r in runs)
    base = study_module.RERUN_SEED_BASE
    lines = ["## Seeds", ""]
    if version == 2:
        lines.append(
            "Protocol 2: seed rerun i of a cell trains from seed i, search "
            f"trial t from seed {search_seed} * "
            f"{study_module.TRIAL_SEED_BASE} + t. A rerun that trains from "
            "the chosen trial's seed replays the run that won the search on "
            "validation, bit for bit: "
            f"{len(replayed)} of {len(cells)} cells here."
        )
    else:
        lines.append(
            f"Protocol {version}: seed rerun i of a cell trains from seed "
            f"{base} + i, apart from every search trial's (seed "
            f"{search_seed} * {study_module.TRIAL_SEED_BASE} + t): no rerun "
            "replays a search trial."
        )
    lines += [
        "",
        "| cell | reruns | trained from seeds | chosen search trial (its "
        f"seed) | replayed by rerun | fresh seed: {metric.replace('_', ' ')} "
        "(replayed) |",
        "|---|---|---|---|---|---|",
    ]
    for cell in cells:
        rows = [r for r in runs if (r.get("condition", ""), r["arm"]) == cell]
        indices = sorted(int(r["seed"]) for r in rows)
        trained = [study_module.rerun_seed(version, i) for i in indices]
        trial = rows[0].get("search_trial_id", "")
        chosen = (
            f"{trial} ({study_module.trial_seed(search_seed, trial)})"
            if str(trial).strip().isdigit()
            else "-"
        )
        replay = replayed.get(cell)
        new = fresh.get(cell)
        lines.append(
            f"| {' '.join(c for c in cell if c)} "
            f"| {_ranges(indices)} | {_ranges(trained)} | {chosen} "
            f"| {replay['seed'] if replay else 'none'} "
            + (
                f"| {new['seed']}: {_num(_float(new[metric]), '.4f')} "
                f"({_num(_float(replay[metric]), '.4f')}) |"
                if new and replay
                else ("| not yet |" if replay else "| - |")
            )
        )
    return lines + [""]


def _fresh_seeds_section(runs, summary, fresh, cells):
    """Every verdict again with each replayed seed replaced by its fresh
    one."""
    replayed = schema.replays(runs, summary.get("config") or {})
    if not replayed or not cells:
        return []
    lines = ["## Verdicts with fresh seeds", ""]
    if not fresh:
        return lines + [
            f"{len(replayed)} rerun(s) replay their search's choice and none "
            "has a fresh seed yet: `python -m tuning.fresh_seeds STUDY` "
            "trains them.",
            "",
        ]
    replaced = with_fresh_seeds(runs, fresh)
    again = {
        (c["condition"], c["arm"], c["comparator"]): c
        for c in cell_verdicts(replaced, summary)
    }
    done = sum(r is not s for r, s in zip(runs, replaced))
    lines += [
        f"Each replayed rerun replaced by a fresh seed ({done} of "
        f"{len(replayed)} have one, `fresh_seeds.csv`), tests Holm-adjusted "
        "over the study as above:",
        "",
        "| condition | comparison | difference as run | verdict as run "
        "| difference, fresh | verdict, fresh |",
        "|---|---|---|---|---|---|",
    ]
    changed = []
    for c in cells:
        key = (c["condition"], c["arm"], c["comparator"])
        f = again[key]
        lines.append(
            f"| {c['condition'] or '-'} | {c['arm']} - {c['comparator']} "
            f"| {_num(c['diff'], '+.4f')} | {c['verdict']} "
            f"| {_num(f['diff'], '+.4f')} | {f['verdict']} |"
        )
        if _word(c["verdict"]) != _word(f["verdict"]):
            changed.append(
                f"{_comparison(c)}: {_word(c['verdict'])} -> "
                f"{_word(f['verdict'])}"
            )
    lines += [
        "",
        "Verdicts that change with fresh seeds: "
        + ("; ".join(changed) if changed else "none")
        + ".",
        "",
    ]
    return lines


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

    def key(r):
        return (r.get("condition", ""), r["arm"])

    by_cell = collections.defaultdict(list)
    for r in runs:
        by_cell[key(r)].append(r)
    cells = []
    for seed, rows in repeats.items():
        by_repeat = collections.defaultdict(list)
        for r in rows:
            by_repeat[key(r)].append(r)
        for cell, repeat in by_repeat.items():
            if cell not in by_cell:
                continue
            ours = [_float(r["test_accuracy"]) for r in by_cell[cell]]
            theirs = [_float(r["test_accuracy"]) for r in repeat]
            cells.append(
                {
                    "condition": cell[0],
                    "arm": cell[1],
                    "search_seed": seed,
                    "rate": _float(by_cell[cell][0].get("learning_rate")),
                    "repeat_rate": _float(repeat[0].get("learning_rate")),
                    "mean": _mean(ours),
                    "repeat_mean": _mean(theirs),
                    "diff": _mean(theirs) - _mean(ours),
                    "seeds": (len(ours), len(theirs)),
                }
            )
    diffs = [c["diff"] for c in cells if not math.isnan(c["diff"])]
    noise = (
        math.sqrt(sum(d * d for d in diffs) / len(diffs)) if diffs else math.nan
    )
    verdicts = []
    base = cell_verdicts(runs, summary)
    again = {}
    for seed, rows in repeats.items():
        replaced = {key(r) for r in rows}
        substituted = [r for r in runs if key(r) not in replaced] + list(rows)
        again[seed] = (
            replaced,
            {
                (c["condition"], c["arm"], c["comparator"]): c["verdict"]
                for c in cell_verdicts(substituted, summary)
            },
        )
    for c in base:
        name = c["verdict"].split(" ")[0]
        boundary = 0.0 if name == "superior" else -margin
        repeated = {
            seed: verdicts_[(c["condition"], c["arm"], c["comparator"])]
            for seed, (replaced, verdicts_) in again.items()
            if {(c["condition"], c["arm"]), (c["condition"], c["comparator"])}
            & replaced
        }
        fragile = []
        if name != "inconclusive":
            flips = [
                seed for seed, v in repeated.items() if v.split(" ")[0] != name
            ]
            if flips:
                fragile.append(
                    "flips under the repeat from search seed "
                    + ", ".join(str(s) for s in flips)
                )
            if not math.isnan(noise) and abs(c["diff"] - boundary) < noise:
                fragile.append(
                    f"within the selection noise ({noise:.4f}) of {boundary:+g}"
                )
        verdicts.append(
            {
                "condition": c["condition"],
                "arm": c["arm"],
                "comparator": c["comparator"],
                "verdict": c["verdict"],
                "diff": c["diff"],
                "boundary": boundary,
                "repeated": repeated,
                "fragile": fragile,
            }
        )
    return {"cells": cells, "noise": noise, "verdicts": verdicts}


def _selection_noise_section(runs, summary, repeats, protocol):
    if not repeats:
        return []
    result = selection_noise(runs, summary, repeats, protocol.margin)
    lines = [
        "## Selection noise",
        "",
        "Cells whose search was repeated from another search seed (`python "
        "-m tuning.sweep STUDY --search-seed N`, results in "
        f"`{study_module.REPEATS_DIR}/search-seed-N/`; its seed reruns "
        "train from protocol 3's seeds): the rate each search chose and "
        "the test accuracy of its reruns (this study's with fresh seeds "
        "where a rerun replayed its search).",
        "",
        "| cell | search seed | chosen rate | repeat's rate | mean test "
        "accuracy | repeat's | repeat minus study |",
        "|---|---|---|---|---|---|---|",
    ]
    for c in result["cells"]:
        lines.append(
            f"| {' '.join(x for x in (c['condition'], c['arm']) if x)} "
            f"| {c['search_seed']} | {_num(c['rate'], '.3g')} "
            f"| {_num(c['repeat_rate'], '.3g')} "
            f"| {_num(c['mean'], '.4f')} | {_num(c['repeat_mean'], '.4f')} "
            f"| {_num(c['diff'], '+.4f')} |"
        )
    lines += [
        "",
        f"Selection noise, the root mean square of the {len(result['cells'])} "
        f"differences: {_num(result['noise'], '.4f')} (seed noise "
        "included). A verdict is *fragile* when it flips with a repeated "
        "cell in place of the study's, or when its difference lies within "
        "the selection noise of its boundary (0 for superior, "
        f"-{protocol.margin:g} otherwise): a fragile verdict is not a "
        "finding.",
        "",
        "| condition | comparison | verdict | difference | with a repeat in "
        "place | fragile |",
        "|---|---|---|---|---|---|",
    ]
    fragile = []
    for v in result["verdicts"]:
        repeated = (
            "; ".join(
                f"seed {seed}: {verdict.split(' ')[0]}"
                for seed, verdict in v["repeated"].items()
            )
            or "-"
        )
        reasons = "; ".join(v["fragile"]) or "no"
        lines.append(
            f"| {v['condition'] or '-'} | {v['arm']} - {v['comparator']} "
            f"| {v['verdict'].split(' ')[0]} | {_num(v['diff'], '+.4f')} "
            f"| {repeated} | {reasons} |"
        )
        if v["fragile"]:
            fragile.append(f"{_comparison(v)} ({_word(v['verdict'])})")
    lines += [
        "",
        "Fragile verdicts: "
        + ("; ".join(fragile) if fragile else "none")
        + ".",
        "",
    ]
    return lines


def _comparison(c):
    """`"[condition ]arm - comparator"` of a comparison."""
    where = f"{c['condition']} " if c["condition"] else ""
    return f"{where}{c['arm']} - {c['comparator']}"


def _word(verdict):
    """A verdict's first word (`"inconclusive"` without its detectable)."""
    return verdict.split(" ")[0]


def _ranges(values):
    """`0, 1, 2, 3, 4` as `0-4`; other sets listed."""
    values = list(values)
    if len(values) > 2 and values == list(
        range(values[0], values[0] + len(values))
    ):
        return f"{values[0]}-{values[-1]}"
    return ", ".join(str(v) for v in values)


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
        arms = compare.get("arms") or ordered_unique(r["arm"] for r in runs)
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
    )


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
    for condition in ordered_unique(r.get("condition", "") for r in runs):
        rows = [r for r in runs if r.get("condition", "") == condition]
        arms = ordered_unique(r["arm"] for r in rows)
        for arm in (a for a in arms if a in OUR_ARMS):
            for comparator in protocol.comparators:
                if comparator == arm or comparator not in arms:
                    continue
                a, b = accuracies(rows, arm), accuracies(rows, comparator)
                w = statistics.welch(a, b, CONFIDENCE)
                cells.append(
                    {
                        "samples": (a, b),
                        "condition": condition,
                        "arm": arm,
                        "comparator": comparator,
                        "diff": w["diff"],
                        "low": w["low"],
                        "high": w["high"],
                        "p_non_inferior": statistics.non_inferiority(
                            a, b, protocol.margin
                        ),
                        "p_superior": statistics.superiority(a, b),
                        "p_inferior": statistics.inferiority(
                            a, b, protocol.margin
                        ),
                        "detectable": statistics.detectable_difference(
                            a, b, ALPHA, POWER
                        ),
                    }
                )
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
    return cells


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
    tests = sum(not math.isnan(c[k]) for c in cells for k in TESTS)
    ours = ordered_unique(r["arm"] for r in runs if r["arm"] in OUR_ARMS)
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
    lines += [
        f"- One-sided Welch tests of our arm minus the comparator: "
        f"non-inferiority (difference > -{protocol.margin:g}), superiority "
        f"(> 0), inferiority (< -{protocol.margin:g}); alpha {ALPHA:g}, "
        f"Holm–Bonferroni over all {tests} p-values of the study at once "
        f"({len(TESTS)} tests for each of {len(cells)} comparison"
        f"{'' if len(cells) == 1 else 's'}, undefined ones left out).",
        f"- Intervals: {CONFIDENCE:.0%} Welch. Detectable: the smallest "
        f"true difference a one-sided Welch test finds with power "
        f"{POWER:g}, from the seeds' spreads, at {ALPHA:g} and at the level "
        "Holm applied to the comparison (that of its smallest p-value, "
        f"between {ALPHA:g}/{max(tests, 1)} and {ALPHA:g}); an "
        "inconclusive verdict names the latter.",
        "",
    ]
    return lines


def _glance_section(runs, cells):
    """Every condition on one line: accuracies, then verdicts."""
    conditions = ordered_unique(r.get("condition", "") for r in runs)
    if len(conditions) < 2:
        return []
    arms = ordered_unique(r["arm"] for r in runs)
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
        rows = [r for r in runs if r.get("condition", "") == condition]
        entries = []
        for arm in arms:
            cell = [r for r in rows if r["arm"] == arm]
            if not cell:
                entries.append("-")
                continue
            accs = accuracies(rows, arm)
            rate = _num(_float(cell[0].get("learning_rate")), ".2g")
            entries.append(
                f"{_num(_mean(accs), '.4f')} ± {_num(_std(accs), '.4f')} "
                f"({rate})"
            )
        lines.append(f"| {condition} | " + " | ".join(entries) + " |")
    lines.append("")
    if not cells:
        return lines
    pairs = ordered_unique((c["arm"], c["comparator"]) for c in cells)
    verdicts = {
        (c["condition"], c["arm"], c["comparator"]): c["verdict"].split(" ")[0]
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


def _arm_table(rows, trials):
    lines = [
        "| arm | test accuracy, mean ± std | per seed | learning rate "
        "| optimizer | kernel scale | search trials | below | above "
        "| bracketed | diverged seeds |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for arm in ordered_unique(r["arm"] for r in rows):
        cell = [r for r in rows if r["arm"] == arm]
        accs = accuracies(rows, arm)
        below, above, bracketed = _bracket(cell[0])
        searched = _search_count(
            cell[0], [t for t in trials if t["arm"] == arm]
        )
        lines.append(
            f"| {arm} | {_num(_mean(accs), '.4f')} ± "
            f"{_num(_std(accs), '.4f')} "
            f"| {', '.join(_num(a, '.4f') for a in accs)} "
            f"| {_num(_float(cell[0].get('learning_rate')), '.3g')} "
            f"| {cell[0].get('optimizer') or '-'} "
            f"| {cell[0].get('kernel_scale') or '-'} "
            f"| {searched} | {below} | {above} | {bracketed} "
            f"| {_diverged(cell)} |"
        )
    return lines + [""]


def _tests_table(cells, rows, protocol):
    arms = ordered_unique(r["arm"] for r in rows)
    lines = []
    if any(a in OUR_ARMS for a in arms):
        missing = [c for c in protocol.comparators if c not in arms]
        if missing:
            lines += [f"No runs here of the comparators {_names(missing)}.", ""]
    if not cells:
        return lines
    lines += [
        "Our arm minus the comparator, test accuracy (p-values "
        "Holm-adjusted over the whole study):",
        "",
        f"| comparison | difference | {CONFIDENCE:.0%} interval "
        f"| p non-inferior (margin {protocol.margin:g}) | p superior "
        f"| p inferior | detectable at {ALPHA:g} | Holm level applied "
        "| detectable at it | verdict |",
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


def _bracket_section(runs):
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
    cells = ordered_unique(
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


def _batch_size_section(runs, summary, protocol):
    groups = _batch_size_groups(runs, summary)
    changes = [_changes(by_size) for _, by_size in groups]
    interactions = [_interactions(by_size, protocol) for _, by_size in groups]
    _holm_both_ways([r for rows in changes for r in rows])
    _holm_both_ways([r for rows in interactions for r in rows])
    lines = ["## Batch size", ""]
    for (key, by_size), change, interaction in zip(
        groups, changes, interactions
    ):
        if key:
            lines += ["### " + ", ".join(f"{k} {v}" for k, v in key), ""]
        lines += _steps_table(runs, by_size)
        lines += _change_table(change, sorted(by_size), len(changes))
        lines += _interaction_table(
            interaction, sorted(by_size), len(interactions)
        )
        lines += _without_diverged_table(by_size, protocol)
    return lines


def _batch_size_groups(runs, summary):
    """`[(key, {batch size: rows})]`, one per value of the other grid keys."""
    others = [k for k in _grid_keys(summary) if k != "batch_size"]
    groups = {}
    for condition in ordered_unique(r.get("condition", "") for r in runs):
        rows = [r for r in runs if r.get("condition", "") == condition]
        key = tuple((k, rows[0].get(k, "")) for k in others)
        by_size = groups.setdefault(key, {})
        for r in rows:
            by_size.setdefault(int(float(r["batch_size"])), []).append(r)
    return list(groups.items())


def _steps_table(runs, by_size):
    lines = [
        "| arm | batch size | learning rate | below | above | steps "
        "| test accuracy, mean |",
        "|---|---|---|---|---|---|---|",
    ]
    for arm in ordered_unique(r["arm"] for r in runs):
        for size in sorted(by_size):
            cell = [r for r in by_size[size] if r["arm"] == arm]
            if not cell:
                continue
            below, above, _ = _bracket(cell[0])
            lines.append(
                f"| {arm} | {size} "
                f"| {_num(_float(cell[0].get('learning_rate')), '.3g')} "
                f"| {below} | {above} | {_steps(cell, size)} "
                f"| {_num(_mean(accuracies(cell, arm)), '.4f')} |"
            )
    return lines + [""]


def _extremes(by_size):
    sizes = sorted(by_size)
    return by_size[sizes[0]], by_size[sizes[-1]]


def _changes(by_size):
    """Per arm, the Welch test of its accuracy at the largest batch size
    minus that at the smallest."""
    if len(by_size) < 2:
        return []
    small, large = _extremes(by_size)
    rows = []
    for arm in ordered_unique(r["arm"] for r in small + large):
        a, b = accuracies(large, arm), accuracies(small, arm)
        if a and b:
            w = statistics.welch(a, b, confidence=CONFIDENCE)
            rows.append({"arm": arm, **w, "detectable": _detectable(w)})
    return rows


def _interactions(by_size, protocol):
    """Per (our arm, comparator), `statistics.interaction` of the extremes."""
    if len(by_size) < 2:
        return []
    small, large = _extremes(by_size)
    arms = [
        a
        for a in ordered_unique(r["arm"] for r in small + large)
        if accuracies(small, a) and accuracies(large, a)
    ]
    rows = []
    for arm in arms:
        if arm not in OUR_ARMS:
            continue
        for comparator in protocol.comparators:
            if comparator not in arms or comparator == arm:
                continue
            samples = (
                accuracies(small, arm),
                accuracies(large, arm),
                accuracies(small, comparator),
                accuracies(large, comparator),
            )
            i = statistics.interaction(*samples, confidence=CONFIDENCE)
            rows.append(
                {
                    "arm": arm,
                    "comparator": comparator,
                    "ours": _mean(samples[1]) - _mean(samples[0]),
                    "theirs": _mean(samples[3]) - _mean(samples[2]),
                    **i,
                    "detectable": _detectable(i),
                }
            )
    return rows


def _detectable(result):
    return statistics.detectable(
        result["se"], result["df"], alpha=ALPHA, power=POWER
    )


def _holm_both_ways(rows):
    """Adds `p_below_adj`, `p_above_adj`: Holm over both tails of all rows."""
    raw = [r["p_below"] for r in rows] + [r["p_above"] for r in rows]
    adjusted = statistics.holm(raw)
    for k, r in enumerate(rows):
        r["p_below_adj"] = adjusted[k]
        r["p_above_adj"] = adjusted[len(rows) + k]


def _holm_scope(n_groups, what):
    scope = f"all {what} of the study" if n_groups > 1 else f"all {what}"
    return f"Holm–Bonferroni over both one-sided tests of {scope}"


def _change_table(rows, sizes, n_groups):
    if not rows:
        return []
    small, large = sizes[0], sizes[-1]
    lines = [
        f"Each arm's test accuracy at batch size {large} minus at {small} "
        f"(independent seeds; {CONFIDENCE:.0%} Welch interval); one-sided "
        f"tests that it falls or rises, p-values adjusted by "
        f"{_holm_scope(n_groups, 'these changes')}:",
        "",
        f"| arm | {large} - {small} | {CONFIDENCE:.0%} interval "
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
        alpha=ALPHA,
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
        f"cells are independent seeds; {CONFIDENCE:.0%} interval; one-sided "
        "tests of a negative and of a positive interaction, p-values "
        f"adjusted by {_holm_scope(n_groups, 'these interactions')}:",
        "",
        f"| comparison | ours {large} - {small} "
        f"| comparator {large} - {small} | interaction "
        f"| {CONFIDENCE:.0%} interval | p ours worse | p ours better "
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
    """The changes and interactions that diverged seeds enter, without them.

    A diverged seed is an outcome of the chosen setting and stays in the
    tests; this says how much of an estimate it makes.
    """
    if len(by_size) < 2:
        return []
    sizes = sorted(by_size)
    small, large = _extremes(by_size)
    dropped = [r for r in small + large if r.get("diverged") == "True"]
    if not dropped:
        return []
    kept = {
        size: [r for r in rows if r.get("diverged") != "True"]
        for size, rows in by_size.items()
    }
    arms = set(r["arm"] for r in dropped)
    counts = ", ".join(
        f"`{arm}` at {size}: {n}"
        for (arm, size), n in collections.Counter(
            (r["arm"], int(float(r["batch_size"]))) for r in dropped
        ).items()
    )
    lines = [
        f"Without the diverged seeds ({counts}): a diverged seed is an "
        "outcome of the chosen rate and stays in the tests above; this is "
        "how much of the estimate it makes (descriptive, no test):",
        "",
        f"| estimate | value | {CONFIDENCE:.0%} interval |",
        "|---|---|---|",
    ]
    rows = [
        (f"{r['arm']} {sizes[-1]} - {sizes[0]}", r)
        for r in _changes(kept)
        if r["arm"] in arms
    ] + [
        (f"interaction {r['arm']} - {r['comparator']}", r)
        for r in _interactions(kept, protocol)
        if {r["arm"], r["comparator"]} & arms
    ]
    for label, r in rows:
        lines.append(
            f"| {label} | {_num(r['diff'], '+.4f')} "
            f"| [{_num(r['low'], '+.4f')}, {_num(r['high'], '+.4f')}] |"
        )
    return lines + [""]


def _verdict_counts(cells):
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
    for arm, comparator in ordered_unique(
        (c["arm"], c["comparator"]) for c in cells
    ):
        verdicts = [
            c["verdict"].split(" ")[0]
            for c in cells
            if (c["arm"], c["comparator"]) == (arm, comparator)
        ]
        lines.append(
            f"| {arm} - {comparator} | "
            + " | ".join(str(verdicts.count(k)) for k in kinds)
            + " |"
        )
    return lines + [""]


def _bracket(row):
    """`(below, above, bracketed)` cells of a run row, `n/a` for old rows."""
    if not row.get("bracketed"):
        return "n/a", "n/a", "n/a"
    below = row.get("lr_below_factor")
    above = row.get("lr_above_factor")
    return (
        f"/{float(below):.2f}" if below else "none",
        f"x{float(above):.2f}" if above else "none",
        "yes" if row["bracketed"] == "True" else "no",
    )


def _search_count(row, trials):
    count = row.get("search_trials") or str(len(trials))
    if not any(t.get("diverged") for t in trials):
        return count
    found = outcomes.counts(trials, outcomes.classes_of(row.get("dataset")))
    return f"{count} ({_failures(found)})"


def _diverged(cell):
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


def _steps(cell, batch_size):
    steps = ordered_unique(r.get("steps", "") for r in cell)
    if all(steps):
        return "/".join(steps)
    epochs = _float(cell[0].get("epochs"))
    samples = _float(cell[0].get("train_samples"))
    if math.isnan(epochs) or math.isnan(samples):
        return "n/a"
    return str(int(epochs) * math.ceil(samples / batch_size))


def _batch_size_varies(runs, summary):
    return "batch_size" in _grid_keys(summary) or _varies(runs, "batch_size")


def _grid_keys(summary):
    """The grid keys of a study, from its config or its conditions."""
    grid = (summary.get("config") or {}).get("grid")
    if grid:
        return tuple(grid)
    for condition in (summary.get("conditions") or {}).values():
        return tuple(condition.get("values") or ())
    return ()


def _varies(runs, key):
    return len({r.get(key) for r in runs}) > 1


def accuracies(rows, arm):
    """The test accuracies (floats, `nan` where empty) of `arm`'s rows."""
    return [_float(r.get("test_accuracy")) for r in rows if r["arm"] == arm]


def _float(value):
    return float(value) if value not in (None, "") else math.nan


def _num(value, spec):
    return "n/a" if math.isnan(value) else format(value, spec)


def _names(names):
    return ", ".join(f"`{n}`" for n in names) or "none"


def ordered_unique(values):
    """`values` without repeats, in order of first appearance."""
    return list(dict.fromkeys(values))


def _mean(values):
    return math.fsum(values) / len(values) if values else math.nan


def _std(values):
    if len(values) < 2:
        return math.nan
    m = _mean(values)
    return math.sqrt(
        math.fsum((v - m) ** 2 for v in values) / (len(values) - 1)
    )


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
