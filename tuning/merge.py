"""Brings into a study's results folder the cells another run of it made.

    python -m tuning.merge STUDY --from DIR [--quick | --full]
        [--results-dir DIR]

A study can run as shares: `python -m tuning.sweep STUDY --arms ...` or
`--conditions ...` in several processes or on several machines, each
writing its own results folder (a worktree, a clone, a Colab runtime).
This copies into `--results-dir/<study>/` every row of `DIR/<study>/` that
it lacks: the `cells.csv` row of a searched cell, its search trials, the
seed runs and their curves, the trials of a search still going on
(`search_progress.csv`), and the `superseded/` sets. The study's own
command then resumes from the merged folder as from its own: it searches
and retrains only what neither share did, and, once every cell is done,
writes `summary.json` and the report.

Nothing is overwritten. A row both folders hold must say the same thing
(the same search trials for a cell, the same measurements for a seed run;
the time they took may differ), and a seed run must come from its cell's
chosen trial, else the merge is refused and nothing is written; where they
agree, the destination's row stays. Rows either folder set aside
(`tuning.supersede`, or a reopened search's seeds) do not come back from a
share made before; a source that set aside rows the destination still
holds is refused. Both folders must hold the study file as it reads now. Of one cell's seed runs,
each comes with its own curves; of its two `cells.csv` rows, the one that
counts more finished seeds is kept. When anything is added, the files
made from the whole folder (`summary.json`, `report.md`, pooled views,
plots) are deleted, since they no longer describe it; `divergence.*` is
left as it is.

The source may be a running study's folder: every file is written whole,
and it is read in the order the runner writes it (a `trials.csv` row only
with its curves, a `cells.csv` row only with its search trials). The
destination is locked like a runner's; refused while a runner holds it.
"""

import argparse
import glob
import json
import os
import sys

from tuning import cli
from tuning import lock
from tuning import records
from tuning import schema
from tuning import study as study_module
from tuning import supersede

# The files that describe the whole folder: deleted when rows are added.
STUDY_WIDE = (
    schema.SUMMARY_JSON,
    schema.REPORT_MD,
    "pooled*.md",
    "*.png",
)
# What a seed run measured: two runs of one seed that did say the same.
RUN_MEASURES = tuple(
    c
    for c in ("learning_rate", "search_trial_id", *schema.RUN_METRICS)
    if c not in schema.CLOCKS
)
# The files merged, in the order they are read: the runner's order of
# writing, read the other way round (see the module doc).
_FILES = (
    schema.CELLS_CSV,
    schema.SEARCH_TRIALS_CSV,
    schema.SEARCH_PROGRESS_CSV,
    schema.TRIALS_CSV,
    schema.CURVES_CSV,
)


class MergeError(ValueError):
    """The two folders cannot be merged."""


def merge(study, source_dir, results_dir):
    """Copies the rows `source_dir/<study>/` has and `results_dir/<study>/`
    lacks (see the module doc).

    Args:
        study: a `tuning.study.Study`.
        source_dir: the results folder (holding `<study>/`) to merge from.
        results_dir: the results folder (holding `<study>/`) to merge into.

    Returns:
        dict: `added` (rows added, per file), `cells` (the `(condition,
        arm)` cells whose `cells.csv` row was added or replaced),
        `superseded` (set-aside folders copied) and `removed` (study-wide
        files deleted).

    Raises:
        MergeError: for a missing source, the same folder twice, another
            study or backend, rows that disagree, or a destination a
            runner holds.
    """
    source = os.path.join(source_dir, study.results_name)
    out_dir = os.path.join(results_dir, study.results_name)
    if not os.path.isdir(source):
        raise MergeError(
            f"no results of study {study.results_name!r} in {source_dir}. "
            f"Received: source_dir={source_dir!r}"
        )
    if os.path.realpath(source) == os.path.realpath(out_dir):
        raise MergeError(
            "the source and the destination are the same folder. Received: "
            f"source_dir={source_dir!r}, results_dir={results_dir!r}"
        )
    try:
        with lock.StudyLock([out_dir]):
            return _merge(study, source, out_dir)
    except lock.LockedError as e:
        raise MergeError(str(e)) from None


def _merge(study, source, out_dir):
    theirs_study = _check_study_files(study, source, out_dir)
    theirs = {
        name: records.read_csv(os.path.join(source, name)) for name in _FILES
    }
    ours = {
        name: records.read_csv(os.path.join(out_dir, name)) for name in _FILES
    }
    _check_backends(ours[schema.TRIALS_CSV], theirs[schema.TRIALS_CSV])
    to_copy = supersede.sets_missing(source, out_dir)
    theirs = _without_set_aside(source, out_dir, ours, theirs, to_copy)
    mine = {
        name: schema.by_key(rows, *schema.ROW_KEYS[name])
        for name, rows in ours.items()
    }
    other = {
        name: schema.by_key(rows, *schema.ROW_KEYS[name])
        for name, rows in theirs.items()
    }
    added = dict.fromkeys(_FILES, 0)
    _merge_searches(mine, other, added, source)
    changed_cells = _merge_cells(mine, other, added, source)
    _merge_runs(mine, other, added, source)
    _merge_progress(mine, other, added, source)

    removed = []
    if any(added.values()) or to_copy:
        os.makedirs(out_dir, exist_ok=True)
        # First the files that describe the whole folder, which no longer
        # will: killed halfway, none of them is left to be taken for new.
        removed = remove_study_wide(out_dir)
        if records.read_json(os.path.join(out_dir, schema.STUDY_JSON)) is None:
            records.write_json(
                os.path.join(out_dir, schema.STUDY_JSON), theirs_study
            )
        for name in to_copy:
            supersede.copy_set(source, out_dir, name)
        _write(out_dir, study, mine)
    return {
        "added": added,
        "cells": changed_cells,
        "superseded": to_copy,
        "removed": removed,
    }


def _check_study_files(study, source, out_dir):
    """Both folders' `study.json` match the study as it reads now; returns
    the source's."""
    theirs_study = records.read_json(os.path.join(source, schema.STUDY_JSON))
    ours_study = records.read_json(os.path.join(out_dir, schema.STUDY_JSON))
    if theirs_study is None:
        raise MergeError(
            f"{source} has no {schema.STUDY_JSON}: not a study's results "
            f"folder. Received: source={source!r}"
        )
    # As `study.json` reads back.
    expected = json.loads(json.dumps(schema.fingerprint(study)))
    for where, fingerprint in ((source, theirs_study), (out_dir, ours_study)):
        if fingerprint is not None and not schema.same_study(
            fingerprint, expected
        ):
            raise MergeError(
                f"the runs in {where} were made with another version of the "
                f"study file (its {schema.STUDY_JSON} differs from "
                f"{study.results_name!r} as it reads now): they cannot be "
                f"merged. Received: study={study.results_name!r}"
            )
    return theirs_study


def _without_set_aside(source, out_dir, ours, theirs, to_copy):
    """The source's rows less those either folder set aside (and their
    copies, left in the other folder by a share that ran before the
    setting aside); refuses a set copied from the source whose rows are
    still here."""
    set_aside = supersede.set_aside_rows(out_dir) | supersede.set_aside_rows(
        source
    )
    for name in to_copy:
        still = supersede.set_aside_rows(source, name) & _fingerprints(ours)
        if still:
            raise MergeError(
                f"{source} set aside its rows as {name!r} "
                f"({supersede.SUPERSEDED_DIR}/{name}), but {out_dir} still "
                f"holds {len(still)} of them: set them aside here too "
                "(`python -m tuning.supersede`), then merge. Received: "
                f"superseded={name!r}"
            )
    return {
        name: [
            r for r in rows if schema.row_fingerprint(name, r) not in set_aside
        ]
        for name, rows in theirs.items()
    }


def _merge_searches(mine, other, added, source):
    """A cell searched on both sides must have the same trials."""
    search = mine[schema.SEARCH_TRIALS_CSV]
    search_theirs = other[schema.SEARCH_TRIALS_CSV]
    for cell in sorted(
        {k[:2] for k in search_theirs} & {k[:2] for k in search}
    ):
        here = {k: r for k, r in search.items() if k[:2] == cell}
        there = {k: r for k, r in search_theirs.items() if k[:2] == cell}
        if _measured(here) != _measured(there):
            raise MergeError(
                f"cell {_name(cell)} was searched in both folders with "
                "different trials; merge one share of it only. Received: "
                f"{len(here)} trials here, {len(there)} in {source}"
            )
    for key, row in search_theirs.items():
        if key not in search:
            search[key] = row
            added[schema.SEARCH_TRIALS_CSV] += 1


def _merge_cells(mine, other, added, source):
    """The same choice on both sides; the row with more seeds wins.
    Returns the cells whose row was added or replaced."""
    cells = mine[schema.CELLS_CSV]
    changed = []
    for key, row in other[schema.CELLS_CSV].items():
        here = cells.get(key)
        if here is not None and not _same_choice(here, row):
            raise MergeError(
                f"cell {_name(key)} chose trial {here['chosen_trial_id']} "
                f"here and trial {row['chosen_trial_id']} in {source}. "
                f"Received: cell={_name(key)!r}"
            )
        if here is None or _seeds(row) > _seeds(here):
            cells[key] = row
            changed.append(key)
            added[schema.CELLS_CSV] += 1
    return changed


def _merge_runs(mine, other, added, source):
    """Seed runs, each with its own curves, each of its cell's choice."""
    runs, curves = mine[schema.TRIALS_CSV], mine[schema.CURVES_CSV]
    curves_theirs = other[schema.CURVES_CSV]
    for key, row in other[schema.TRIALS_CSV].items():
        here = runs.get(key)
        if here is not None:
            if _run_measures(here) != _run_measures(row):
                raise MergeError(
                    f"seed {key[2]} of cell {_name(key[:2])} has different "
                    f"results here and in {source} (test_accuracy "
                    f"{here.get('test_accuracy')} and "
                    f"{row.get('test_accuracy')}). Received: "
                    f"seed={key[2]!r}"
                )
            continue
        own_curves = {k: c for k, c in curves_theirs.items() if k[:3] == key}
        if not own_curves:
            # Caught between two writes of a running source: the next
            # merge takes it.
            continue
        cell = mine[schema.CELLS_CSV].get(key[:2])
        if cell is not None and not _same_trial(
            row.get("search_trial_id"), cell["chosen_trial_id"]
        ):
            raise MergeError(
                f"seed {key[2]} of cell {_name(key[:2])} in {source} was "
                f"retrained from trial {row.get('search_trial_id')}, but the "
                f"cell chose trial {cell['chosen_trial_id']}. Received: "
                f"seed={key[2]!r}"
            )
        runs[key] = row
        added[schema.TRIALS_CSV] += 1
        for k in [k for k in curves if k[:3] == key]:
            curves.pop(k)
        curves.update(own_curves)
        added[schema.CURVES_CSV] += len(own_curves)


def _merge_progress(mine, other, added, source):
    """Searches going on: their ended trials, unless the cell is searched."""
    cells, progress = mine[schema.CELLS_CSV], mine[schema.SEARCH_PROGRESS_CSV]
    for key, row in other[schema.SEARCH_PROGRESS_CSV].items():
        if key[:2] in cells:
            continue
        here = progress.get(key)
        if here is not None and _measured({0: here}) != _measured({0: row}):
            raise MergeError(
                f"trial {key[2]} of the search of cell {_name(key[:2])} "
                f"ended differently here and in {source}; merge one share "
                f"of it only. Received: trial_id={key[2]!r}"
            )
        if here is None:
            progress[key] = row
            added[schema.SEARCH_PROGRESS_CSV] += 1
    mine[schema.SEARCH_PROGRESS_CSV] = {
        k: r for k, r in progress.items() if k[:2] not in cells
    }


def remove_study_wide(out_dir):
    """Deletes the files made from a whole results folder (`STUDY_WIDE`);
    returns their names."""
    removed = sorted(
        {
            os.path.basename(path)
            for pattern in STUDY_WIDE
            for path in glob.glob(os.path.join(out_dir, pattern))
        }
    )
    for name in removed:
        os.remove(os.path.join(out_dir, name))
    return removed


def _write(out_dir, study, rows):
    """Writes the merged rows (`rows`: file name to rows by key) in the
    runner's order of writing: a seed's curves before its row, a cell's
    search trials before its row."""
    for name in (
        schema.CURVES_CSV,
        schema.TRIALS_CSV,
        schema.SEARCH_TRIALS_CSV,
        schema.CELLS_CSV,
    ):
        schema.write_rows(out_dir, study, name, rows[name].values())
    progress = rows[schema.SEARCH_PROGRESS_CSV]
    if progress:
        schema.write_rows(
            out_dir, study, schema.SEARCH_PROGRESS_CSV, progress.values()
        )
    elif os.path.exists(os.path.join(out_dir, schema.SEARCH_PROGRESS_CSV)):
        os.remove(os.path.join(out_dir, schema.SEARCH_PROGRESS_CSV))


def _measured(rows):
    """Search trials by key, less the columns that are clocks (trial ids as
    counters): two runs of one search that measured the same say the
    same."""
    return {k: schema.without_clocks(r) for k, r in rows.items()}


def _run_measures(row):
    return {c: schema.without_clocks(row).get(c) for c in RUN_MEASURES}


def _same_trial(a, b):
    return bool(a) and bool(b) and int(a) == int(b)


def _fingerprints(files):
    return {
        schema.row_fingerprint(name, r)
        for name, rows in files.items()
        for r in rows
    }


def _same_choice(a, b):
    return (
        int(a["chosen_trial_id"]) == int(b["chosen_trial_id"])
        and a["search_trials"] == b["search_trials"]
        and a[schema.LEARNING_RATE] == b[schema.LEARNING_RATE]
    )


def _seeds(cell):
    return int(cell.get("seeds") or 0)


def _name(cell):
    condition, arm = cell
    return f"{condition} {arm}" if condition else arm


def _check_backends(ours, theirs):
    backends = {r.get("backend") for r in ours + theirs} - {None, ""}
    if len(backends) > 1:
        raise MergeError(
            "the two folders hold runs of different Keras backends "
            f"({', '.join(sorted(backends))}); a study keeps one. Received: "
            f"backends={sorted(backends)}"
        )


def main(argv=None):
    argv = sys.argv[1:] if argv is None else [str(a) for a in argv]
    parser = argparse.ArgumentParser(
        prog="python -m tuning.merge",
        description=(
            "Copies into a study's results folder the cells, searches and "
            "seed runs another results folder of the same study holds."
        ),
    )
    parser.add_argument("study", help="a study name or a .toml path")
    parser.add_argument(
        "--from",
        dest="source",
        required=True,
        metavar="DIR",
        help="the results folder (holding <study>/) to merge from",
    )
    cli.add_study_size(parser)
    parser.add_argument(
        "--results-dir",
        default=schema.DEFAULT_RESULTS_DIR,
        help="the results folder to merge into (default: tuning/results)",
    )
    args = parser.parse_args(argv)
    try:
        study = study_module.load_study(
            args.study, quick=args.quick, full=args.full
        )
        record = merge(study, args.source, args.results_dir)
    except (study_module.StudyError, MergeError) as e:
        return cli.fail(e)
    added = ", ".join(f"{n} {f}" for f, n in record["added"].items() if n)
    if not added and not record["superseded"]:
        print(f"nothing to merge: {args.results_dir} has every row already")
        return 0
    print(
        f"merged into {study.results_name}: {added or 'no'} rows"
        + (
            f"; superseded sets {', '.join(record['superseded'])}"
            if record["superseded"]
            else ""
        )
        + (
            f"; removed {', '.join(record['removed'])} (the study's command "
            "writes them again once every cell is done)"
            if record["removed"]
            else ""
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
