"""A study's results folder read into rows, and the accessors of rows.

The rows are the dicts of str of `trials.csv`, `search_trials.csv`,
`fresh_seeds.csv` and the `repeats/` folders (see `tuning.schema`), as
`tuning.records` reads them; every analysis of a study (`comparisons`,
`batch_size`, `replays`, `selection_study`, `repeated_searches`) starts from
them.
"""

import math
import os

from tuning import records
from tuning import schema
from tuning import study as study_module


class ReportError(Exception):
    """Missing or unreadable results: one line on stderr, exit status 2."""


def read_results(out_dir):
    """The result files of a study, as `tuning.report.render` takes them.

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


def read_fresh(out_dir):
    """The rows of a study's `fresh_seeds.csv` (`[]` if absent)."""
    return records.read_csv(os.path.join(out_dir, schema.FRESH_SEEDS_CSV))


def read_extended(out_dir, summary, runs):
    """The rows of the study a study extends (`[compare] extends`), at the
    conditions the extending study ran.

    Read from the sibling results folder of that study at the same size
    (`<study>-quick` for a `--quick` run, `<study>-full` for `--full`),
    with fresh seeds in place of the reruns that replayed their search.

    Returns:
        dict: `name`, `runs`, `search` and `curves` (lists of rows; empty
        where the extended study has no results in that folder), `arms`
        (that study's arms with rows here, in its order) and `repeats`
        (`read_repeats` of that study, at the same conditions); `{}` for a
        study that extends none.
    """
    config = summary.get("config") or {}
    parent = (config.get("compare") or {}).get("extends")
    if not parent:
        return {}
    # A quick run is compared with the other study's quick run, never with
    # its full results.
    if config.get("quick"):
        parent = f"{parent}-quick"
    elif config.get("full"):
        parent = f"{parent}-full"
    folder = os.path.join(os.path.dirname(os.path.normpath(out_dir)), parent)
    try:
        theirs, search, their_summary = read_results(folder)
    except ReportError:
        return {
            "name": parent,
            "runs": [],
            "search": [],
            "curves": [],
            "arms": [],
            "repeats": {},
        }
    fresh = read_fresh(folder)
    wanted = {r.get("condition", "") for r in runs}

    def here(rows):
        return [r for r in rows if r.get("condition", "") in wanted]

    theirs = here(with_fresh_seeds(theirs, fresh))
    repeats = {seed: here(rows) for seed, rows in read_repeats(folder).items()}
    return {
        "name": parent,
        "runs": theirs,
        "search": here(search),
        "curves": here(
            records.read_csv(os.path.join(folder, schema.CURVES_CSV))
        ),
        "arms": _arms_in_order(
            (their_summary.get("config") or {}).get("compare", {}).get("arms"),
            theirs,
        ),
        "repeats": {seed: rows for seed, rows in repeats.items() if rows},
    }


def _arms_in_order(declared, runs):
    """The arms of `runs`: those `declared` first, in that order, then any
    other in the order the rows give them."""
    present = ordered_unique(r["arm"] for r in runs)
    declared = [a for a in declared or () if a in present]
    return declared + [a for a in present if a not in declared]


def merge_repeats(*repeats):
    """`read_repeats` dicts of several studies as one: by search seed, the
    rows of each in the order given."""
    merged = {}
    for each in repeats:
        for seed, rows in each.items():
            merged.setdefault(seed, []).extend(rows)
    return dict(sorted(merged.items()))


def read_repeats(out_dir):
    """The seed reruns of a study's repeated searches.

    Returns:
        dict: search seed (int) to the rows of its `trials.csv`, for every
        `repeats/search-seed-<N>/` folder with rows, by seed: the rows of
        its finished cells only (those whose `cells.csv` row counts their
        seeds, which it does once the last one is trained), so that a cell
        still searching or training its seeds does not enter the selection
        noise.
    """
    folder = os.path.join(out_dir, study_module.REPEATS_DIR)
    if not os.path.isdir(folder):
        return {}
    repeats = {}
    for name in os.listdir(folder):
        prefix = "search-seed-"
        if not name.startswith(prefix) or not name[len(prefix) :].isdigit():
            continue
        path = os.path.join(folder, name)
        finished = {
            (c.get("condition", ""), c["arm"])
            for c in records.read_csv(os.path.join(path, schema.CELLS_CSV))
            if c.get("seeds")
        }
        rows = [
            r
            for r in records.read_csv(os.path.join(path, schema.TRIALS_CSV))
            if (r.get("condition", ""), r["arm"]) in finished
        ]
        if rows:
            repeats[int(name[len(prefix) :])] = rows
    return dict(sorted(repeats.items()))


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


def accuracies(rows, arm):
    """The test accuracies (floats, `nan` where empty) of `arm`'s rows."""
    return [to_float(r.get("test_accuracy")) for r in rows if r["arm"] == arm]


def to_float(value):
    """A row's value as a float, `nan` where it is empty or absent."""
    return float(value) if value not in (None, "") else math.nan


def ordered_unique(values):
    """`values` without repeats, in order of first appearance."""
    return list(dict.fromkeys(values))


def conditions(runs):
    """The conditions of `runs`, in order of first appearance."""
    return ordered_unique(r.get("condition", "") for r in runs)


def of_condition(runs, condition):
    """The rows of `runs` at `condition`."""
    return [r for r in runs if r.get("condition", "") == condition]


def grid_keys(summary):
    """The grid keys of a study, from its config or its conditions."""
    grid = (summary.get("config") or {}).get("grid")
    if grid:
        return tuple(grid)
    for condition in (summary.get("conditions") or {}).values():
        return tuple(condition.get("values") or ())
    return ()


def varies(runs, key):
    """Whether `runs` hold more than one value of `key`."""
    return len({r.get(key) for r in runs}) > 1
