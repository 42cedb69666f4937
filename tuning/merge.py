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
import shutil
import sys

# Before TensorFlow is imported (through the hypermodels `schema` names).
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

from tuning import lock  # noqa: E402
from tuning import records  # noqa: E402
from tuning import schema  # noqa: E402
from tuning import study as study_module  # noqa: E402
from tuning import supersede  # noqa: E402

# The files that describe the whole folder: deleted when rows are added.
STUDY_WIDE = (
    schema.SUMMARY_JSON,
    schema.REPORT_MD,
    "pooled*.md",
    "*.png",
)
# What tells two runs of one seed apart when they measured the same thing.
# The columns of a search trial or a seed run that say how fast, not what.
CLOCKS = ("wall_time_s",)
RUN_MEASURES = tuple(
    c
    for c in ("learning_rate", "search_trial_id", *schema.RUN_METRICS)
    if c not in CLOCKS
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
    # The runner's order of writing, read the other way round (see the
    # module doc).
    theirs = {}
    for name in (
        schema.CELLS_CSV,
        schema.SEARCH_TRIALS_CSV,
        schema.SEARCH_PROGRESS_CSV,
        schema.TRIALS_CSV,
        schema.CURVES_CSV,
    ):
        theirs[name] = records.read_csv(os.path.join(source, name))
    ours = {
        name: records.read_csv(os.path.join(out_dir, name)) for name in theirs
    }
    _check_backends(ours[schema.TRIALS_CSV], theirs[schema.TRIALS_CSV])
    # Rows either folder set aside do not come back (nor do their copies,
    # left in the other folder by a share that ran before the setting
    # aside); and a set copied from the source must not leave its rows
    # here.
    to_copy = _superseded_to_copy(source, out_dir)
    set_aside = _set_aside_rows(out_dir, None) | _set_aside_rows(source, None)
    for name in to_copy:
        still = _set_aside_rows(source, name) & _fingerprints(ours)
        if still:
            raise MergeError(
                f"{source} set aside its rows as {name!r} "
                f"({supersede.SUPERSEDED_DIR}/{name}), but {out_dir} still "
                f"holds {len(still)} of them: set them aside here too "
                "(`python -m tuning.supersede`), then merge. Received: "
                f"superseded={name!r}"
            )
    theirs = {
        name: [r for r in rows if _fingerprint(name, r) not in set_aside]
        for name, rows in theirs.items()
    }

    cells = _by(ours[schema.CELLS_CSV], "condition", "arm")
    cells_theirs = _by(theirs[schema.CELLS_CSV], "condition", "arm")
    search = _by(ours[schema.SEARCH_TRIALS_CSV], "condition", "arm", "trial_id")
    search_theirs = _by(
        theirs[schema.SEARCH_TRIALS_CSV], "condition", "arm", "trial_id"
    )
    runs = _by(ours[schema.TRIALS_CSV], "condition", "arm", "seed")
    runs_theirs = _by(theirs[schema.TRIALS_CSV], "condition", "arm", "seed")
    curves = _by(ours[schema.CURVES_CSV], "condition", "arm", "seed", "epoch")
    curves_theirs = _by(
        theirs[schema.CURVES_CSV], "condition", "arm", "seed", "epoch"
    )
    progress = _by(
        ours[schema.SEARCH_PROGRESS_CSV], "condition", "arm", "trial_id"
    )
    progress_theirs = _by(
        theirs[schema.SEARCH_PROGRESS_CSV], "condition", "arm", "trial_id"
    )

    added = dict.fromkeys(theirs, 0)
    # Searches: a cell searched on both sides must have the same trials.
    for cell in sorted(
        {k[:2] for k in search_theirs} & {k[:2] for k in search}
    ):
        mine = {k: r for k, r in search.items() if k[:2] == cell}
        other = {k: r for k, r in search_theirs.items() if k[:2] == cell}
        if _measured(mine) != _measured(other):
            raise MergeError(
                f"cell {_name(cell)} was searched in both folders with "
                "different trials; merge one share of it only. Received: "
                f"{len(mine)} trials here, {len(other)} in {source}"
            )
    for key, row in search_theirs.items():
        if key not in search:
            search[key] = row
            added[schema.SEARCH_TRIALS_CSV] += 1
    # Cells: the same choice on both sides; the row with more seeds wins.
    changed_cells = []
    for key, row in cells_theirs.items():
        mine = cells.get(key)
        if mine is not None and not _same_choice(mine, row):
            raise MergeError(
                f"cell {_name(key)} chose trial {mine['chosen_trial_id']} "
                f"here and trial {row['chosen_trial_id']} in {source}. "
                f"Received: cell={_name(key)!r}"
            )
        if mine is None or _seeds(row) > _seeds(mine):
            cells[key] = row
            changed_cells.append(key)
            added[schema.CELLS_CSV] += 1
    # Seed runs, each with its own curves, each of its cell's choice.
    for key, row in runs_theirs.items():
        mine = runs.get(key)
        if mine is not None:
            if _run_measures(mine) != _run_measures(row):
                raise MergeError(
                    f"seed {key[2]} of cell {_name(key[:2])} has different "
                    f"results here and in {source} (test_accuracy "
                    f"{mine.get('test_accuracy')} and "
                    f"{row.get('test_accuracy')}). Received: "
                    f"seed={key[2]!r}"
                )
            continue
        own_curves = {k: c for k, c in curves_theirs.items() if k[:3] == key}
        if not own_curves:
            # Caught between two writes of a running source: the next
            # merge takes it.
            continue
        cell = cells.get(key[:2])
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
    # Searches going on: their ended trials, unless the cell is searched.
    for key, row in progress_theirs.items():
        if key[:2] in cells:
            continue
        mine = progress.get(key)
        if mine is not None and _measured({0: mine}) != _measured({0: row}):
            raise MergeError(
                f"trial {key[2]} of the search of cell {_name(key[:2])} "
                f"ended differently here and in {source}; merge one share "
                f"of it only. Received: trial_id={key[2]!r}"
            )
        if mine is None:
            progress[key] = row
            added[schema.SEARCH_PROGRESS_CSV] += 1
    progress = {k: r for k, r in progress.items() if k[:2] not in cells}

    removed = []
    if any(added.values()) or to_copy:
        os.makedirs(out_dir, exist_ok=True)
        # First the files that describe the whole folder, which no longer
        # will: killed halfway, none of them is left to be taken for new.
        removed = remove_study_wide(out_dir)
        if ours_study is None:
            records.write_json(
                os.path.join(out_dir, schema.STUDY_JSON), theirs_study
            )
        for name in to_copy:
            dest = os.path.join(out_dir, supersede.SUPERSEDED_DIR, name)
            partial = dest + ".merging"
            if os.path.exists(partial):
                shutil.rmtree(partial)
            shutil.copytree(
                os.path.join(source, supersede.SUPERSEDED_DIR, name), partial
            )
            os.replace(partial, dest)
        _write(out_dir, study, runs, curves, search, cells, progress)
    return {
        "added": added,
        "cells": changed_cells,
        "superseded": to_copy,
        "removed": removed,
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


def _write(out_dir, study, runs, curves, search, cells, progress):
    """Writes the merged rows in the runner's order of writing: a seed's
    curves before its row, a cell's search trials before its row."""

    def path(name):
        return os.path.join(out_dir, name)

    records.write_csv(
        path(schema.CURVES_CSV),
        schema.curve_columns(study),
        schema.ordered(study, curves.values(), "seed", "epoch"),
    )
    records.write_csv(
        path(schema.TRIALS_CSV),
        schema.run_columns(study),
        schema.ordered(study, runs.values(), "seed"),
    )
    records.write_csv(
        path(schema.SEARCH_TRIALS_CSV),
        schema.search_columns(study),
        schema.ordered(study, search.values(), "trial_id"),
    )
    records.write_csv(
        path(schema.CELLS_CSV),
        schema.cell_columns(study),
        schema.ordered(study, cells.values()),
    )
    if progress:
        records.write_csv(
            path(schema.SEARCH_PROGRESS_CSV),
            schema.search_columns(study),
            schema.ordered(study, progress.values(), "trial_id"),
        )
    elif os.path.exists(path(schema.SEARCH_PROGRESS_CSV)):
        os.remove(path(schema.SEARCH_PROGRESS_CSV))


def _by(rows, *keys):
    """`rows` by the values of `keys`; trial ids, seeds and epochs as
    counters ("07" is 7)."""
    out = {}
    for r in rows:
        key = tuple(
            int(r[k]) if k in ("trial_id", "seed", "epoch") else r.get(k, "")
            for k in keys
        )
        out[key] = r
    return out


def _measured(rows):
    """Search trials by key, less the columns that are clocks (trial ids as
    counters): two runs of one search that measured the same say the
    same."""
    return {k: _without_clocks(r) for k, r in rows.items()}


def _without_clocks(row):
    out = {c: v for c, v in row.items() if c not in CLOCKS}
    for c in ("trial_id", "search_trial_id"):
        if out.get(c):
            out[c] = str(int(out[c]))
    return out


def _run_measures(row):
    return {c: _without_clocks(row).get(c) for c in RUN_MEASURES}


def _same_trial(a, b):
    return bool(a) and bool(b) and int(a) == int(b)


# The keys of a row, by file, and what identifies its content.
_KEYS = {
    schema.CELLS_CSV: ("condition", "arm"),
    schema.SEARCH_TRIALS_CSV: ("condition", "arm", "trial_id"),
    schema.SEARCH_PROGRESS_CSV: ("condition", "arm", "trial_id"),
    schema.TRIALS_CSV: ("condition", "arm", "seed"),
    schema.CURVES_CSV: ("condition", "arm", "seed", "epoch"),
}


def _fingerprint(name, row):
    """A row as a hashable value, clocks left out: a file name and the
    sorted items."""
    return (name, tuple(sorted(_without_clocks(row).items())))


def _fingerprints(files):
    return {_fingerprint(name, r) for name, rows in files.items() for r in rows}


def _set_aside_rows(folder, name):
    """The fingerprints of the rows in `folder`'s `superseded/` sets (only
    set `name` if given). A search trial set aside counts for
    `search_progress.csv` too."""
    base = os.path.join(folder, supersede.SUPERSEDED_DIR)
    names = (
        [name]
        if name
        else (sorted(os.listdir(base)) if os.path.isdir(base) else [])
    )
    out = set()
    for set_name in names:
        where = os.path.join(base, set_name)
        for file_name in _KEYS:
            for r in records.read_csv(os.path.join(where, file_name)):
                out.add(_fingerprint(file_name, r))
                if file_name in (
                    schema.SEARCH_TRIALS_CSV,
                    schema.SEARCH_PROGRESS_CSV,
                ):
                    other = (
                        schema.SEARCH_PROGRESS_CSV
                        if file_name == schema.SEARCH_TRIALS_CSV
                        else schema.SEARCH_TRIALS_CSV
                    )
                    out.add(_fingerprint(other, r))
    return out


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


def _superseded_to_copy(source, out_dir):
    """The `superseded/` sets of `source` that `out_dir` lacks."""
    where = os.path.join(source, supersede.SUPERSEDED_DIR)
    if not os.path.isdir(where):
        return []
    return sorted(
        name
        for name in os.listdir(where)
        if os.path.isdir(os.path.join(where, name))
        and not os.path.exists(
            os.path.join(out_dir, supersede.SUPERSEDED_DIR, name)
        )
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
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true")
    size.add_argument("--full", action="store_true")
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
        print(f"error: {e}", file=sys.stderr)
        return 2
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
