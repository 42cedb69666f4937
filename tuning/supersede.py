"""Sets aside the results of some arms of a study, so that they run again.

    python -m tuning.supersede STUDY --arms ARM [ARM ...] --as NAME
        --reason TEXT [--quick | --full] [--results-dir DIR] [--runs-dir DIR]

For a study whose results for some arms were made by code since found
wrong: every row of those arms (`cells.csv`, `trials.csv`,
`search_trials.csv`, `search_progress.csv`, `curves.csv`,
`divergence.csv`) moves from `tuning/results/<study>/` into
`tuning/results/<study>/superseded/<NAME>/`, under the same file names,
with the study-wide files made from them (`summary.json`, `report.md`,
`divergence.md`, pooled views, plots) and a `superseded.json` saying what,
why, when and at which commit. The study-wide files leave the results
folder (the runner writes them again once every cell is done), and the
arms' KerasTuner projects are deleted from the runs folder. The same
`tuning.sweep` command then searches and retrains those cells again, and
leaves the other arms' cells as they are. Nothing is deleted from the
results: what was set aside stays, labelled, beside what replaces it.

Refused while a runner holds the study, for an arm the study does not
have, for a name already used, and where no row of the arms is left to
set aside.
"""

import argparse
import csv
import glob
import os
import shlex
import shutil
import sys
import time

from tuning import cli
from tuning import lock
from tuning import provenance
from tuning import records
from tuning import schema
from tuning import study as study_module

SUPERSEDED_DIR = "superseded"
SUPERSEDED_JSON = "superseded.json"
DIVERGENCE_CSV = "divergence.csv"
# The files with one row per arm (and more), split between what stays
# and what is set aside.
ROW_FILES = (
    schema.CELLS_CSV,
    schema.TRIALS_CSV,
    schema.SEARCH_TRIALS_CSV,
    schema.SEARCH_PROGRESS_CSV,
    schema.CURVES_CSV,
    DIVERGENCE_CSV,
)
# The files made from every arm's rows: they go with the set-aside rows.
STUDY_WIDE = (
    schema.SUMMARY_JSON,
    schema.REPORT_MD,
    "divergence.md",
    "pooled*.md",
    "*.png",
)


class SupersedeError(ValueError):
    """What was asked cannot be set aside."""


def supersede(study, arms, name, reason, results_dir, runs_dir, command=""):
    """Sets aside every result of `arms` in `study` (see the module doc).

    Args:
        study: a `tuning.study.Study`.
        arms: sequence of str, arms of the study.
        name: str, the name of the set-aside folder, e.g. `"tied-kernels"`.
        reason: str, why, written to `superseded.json`.
        results_dir: the folder holding `<study>/`.
        runs_dir: the folder holding the study's KerasTuner projects.
        command: str, the command line, for `superseded.json`.

    Returns:
        dict: what `superseded.json` records, with `rows` per file moved.

    Raises:
        SupersedeError: for an unknown arm, a bad or used name, no rows of
            `arms`, or a study a runner holds.
    """
    arms = list(dict.fromkeys(arms))
    unknown = [a for a in arms if a not in study.arms]
    if not arms or unknown:
        raise SupersedeError(
            "Received an invalid value for argument `arms`. Expected arms "
            f"of study {study.results_name!r}: {', '.join(study.arms)}. "
            f"Received: arms={arms}"
        )
    if not name or os.sep in name or name in (".", ".."):
        raise SupersedeError(
            "Received an invalid value for argument `name`. Expected a "
            f"folder name. Received: name={name!r}"
        )
    if not reason.strip():
        raise SupersedeError(
            "Received an invalid value for argument `reason`. Expected a "
            f"non-empty text. Received: reason={reason!r}"
        )
    out_dir = os.path.join(results_dir, study.results_name)
    study_runs = os.path.join(runs_dir, study.results_name)
    dest = os.path.join(out_dir, SUPERSEDED_DIR, name)
    if os.path.exists(dest):
        raise SupersedeError(
            f"{dest} exists: each setting-aside needs a name of its own. "
            f"Received: name={name!r}"
        )
    try:
        with lock.StudyLock([study_runs, out_dir]):
            return _supersede(
                study, arms, name, reason, out_dir, study_runs, dest, command
            )
    except lock.LockedError as e:
        raise SupersedeError(str(e)) from None


def _supersede(study, arms, name, reason, out_dir, study_runs, dest, command):
    splits = {}
    for file_name in ROW_FILES:
        path = os.path.join(out_dir, file_name)
        if not os.path.isfile(path):
            continue
        columns = _columns(path)
        rows = records.read_csv(path)
        moved = [r for r in rows if r.get("arm") in arms]
        kept = [r for r in rows if r.get("arm") not in arms]
        splits[file_name] = (path, columns, moved, kept)
    if not any(moved for _, _, moved, _ in splits.values()):
        raise SupersedeError(
            f"no row of {', '.join(arms)} in {out_dir}: nothing to set "
            f"aside. Received: arms={arms}"
        )
    os.makedirs(dest)
    # First the copies, then the originals: killed halfway, nothing is lost.
    for file_name, (_, columns, moved, _) in splits.items():
        if moved:
            records.write_csv(os.path.join(dest, file_name), columns, moved)
    study_wide = sorted(
        {
            path
            for pattern in STUDY_WIDE
            for path in glob.glob(os.path.join(out_dir, pattern))
        }
    )
    for path in study_wide:
        shutil.copy2(path, dest)
    record = write_record(
        dest,
        study,
        arms,
        reason,
        rows={f: len(moved) for f, (_, _, moved, _) in splits.items()},
        command=command,
        study_wide_files=[os.path.basename(p) for p in study_wide],
    )
    for path, columns, moved, kept in splits.values():
        if moved:
            records.write_csv(path, columns, kept)
    for path in study_wide:
        os.remove(path)
    for condition in study.conditions():
        for arm in arms:
            project = schema.project_dir(study_runs, condition.name, arm)
            if os.path.isdir(project):
                shutil.rmtree(project)
    return record


def write_record(
    dest,
    study,
    arms,
    reason,
    rows,
    command="",
    condition=None,
    study_wide_files=(),
):
    """Writes `superseded.json` into the set `dest` and returns it: what
    was set aside (the study, the arms, the condition where one alone,
    the rows per file, the study-wide files), why, when and at which
    commit. The one writer of that record: `supersede` and a reopened
    search's seeds (`tuning.results_state`) both use it."""
    commit, dirty = provenance.git_state()
    record = {
        "study": study.results_name,
        "arms": list(arms),
        **({"condition": condition} if condition is not None else {}),
        "reason": reason,
        "superseded_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "git_commit": commit,
        "git_dirty": dirty,
        "command": command,
        "rows": dict(rows),
        "study_wide_files": list(study_wide_files),
    }
    records.write_json(os.path.join(dest, SUPERSEDED_JSON), record)
    return record


def _columns(path):
    """The header of a CSV, in its order."""
    with open(path, newline="") as f:
        return tuple(next(csv.reader(f), ()))


# Reading the sets back (`tuning.merge`).


def set_aside_rows(folder, name=None):
    """The `schema.row_fingerprint`s of the rows in `folder`'s
    `superseded/` sets (only set `name` if given). A search trial set
    aside counts for `search_progress.csv` too."""
    base = os.path.join(folder, SUPERSEDED_DIR)
    names = (
        [name]
        if name
        else (sorted(os.listdir(base)) if os.path.isdir(base) else [])
    )
    searches = (schema.SEARCH_TRIALS_CSV, schema.SEARCH_PROGRESS_CSV)
    out = set()
    for set_name in names:
        where = os.path.join(base, set_name)
        for file_name in schema.ROW_KEYS:
            for r in records.read_csv(os.path.join(where, file_name)):
                out.add(schema.row_fingerprint(file_name, r))
                if file_name in searches:
                    other = searches[1 - searches.index(file_name)]
                    out.add(schema.row_fingerprint(other, r))
    return out


def sets_missing(source, out_dir):
    """The `superseded/` sets of results folder `source` that `out_dir`
    lacks."""
    where = os.path.join(source, SUPERSEDED_DIR)
    if not os.path.isdir(where):
        return []
    return sorted(
        name
        for name in os.listdir(where)
        if os.path.isdir(os.path.join(where, name))
        and not os.path.exists(os.path.join(out_dir, SUPERSEDED_DIR, name))
    )


def copy_set(source, out_dir, name):
    """Copies `source`'s set `name` into `out_dir` whole: under a temporary
    name, then renamed."""
    dest = os.path.join(out_dir, SUPERSEDED_DIR, name)
    partial = dest + ".merging"
    if os.path.exists(partial):
        shutil.rmtree(partial)
    shutil.copytree(os.path.join(source, SUPERSEDED_DIR, name), partial)
    os.replace(partial, dest)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else [str(a) for a in argv]
    parser = argparse.ArgumentParser(
        prog="python -m tuning.supersede",
        description="Sets aside the results of some arms of a study.",
    )
    parser.add_argument("study", help="a study name or a .toml path")
    parser.add_argument("--arms", nargs="+", required=True)
    parser.add_argument("--as", dest="name", required=True)
    parser.add_argument("--reason", required=True)
    cli.add_study_size(parser)
    parser.add_argument("--results-dir", default=schema.DEFAULT_RESULTS_DIR)
    parser.add_argument("--runs-dir", default=schema.DEFAULT_RUNS_DIR)
    args = parser.parse_args(argv)
    command = " ".join(
        shlex.quote(a) for a in ["python", "-m", "tuning.supersede", *argv]
    )
    try:
        study = study_module.load_study(
            args.study, quick=args.quick, full=args.full
        )
        record = supersede(
            study,
            args.arms,
            args.name,
            args.reason,
            args.results_dir,
            args.runs_dir,
            command=command,
        )
    except (study_module.StudyError, SupersedeError) as e:
        return cli.fail(e)
    moved = ", ".join(f"{n} {f}" for f, n in record["rows"].items() if n)
    print(
        f"set aside {', '.join(record['arms'])} of {record['study']} as "
        f"{args.name!r}: {moved} rows; run the same tuning.sweep command "
        "to search and retrain them again"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
