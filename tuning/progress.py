"""How far a study has got, read from its result files alone.

    python -m tuning.progress STUDY [--quick | --full] [--seeds N]
        [--results-dir DIR]

Prints, per (condition, arm) cell, whether it is done (searched, and
`trials.csv` holds every seed), searched with some seeds still to run,
being searched (trials in `search_progress.csv`), or not started; then
the cells' wall time so far (`cells.csv`: search plus seed reruns) and a
rough estimate of what is left: the cells not done times the mean wall
time of the done cells, which under-counts where the cells left are
bigger (deeper, wider) than the done ones; and the sets of cells set
aside by `tuning.supersede`, which count as not started until they are
rerun. Trains nothing and needs no data: it is how a long study, run over
several sittings, says where it stands.
"""

import argparse
import glob
import math
import os
import sys

from tuning import cli
from tuning import records
from tuning import schema
from tuning import study as study_module
from tuning import supersede

DONE = "done"
NOT_STARTED = "-"


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m tuning.progress",
        description="Prints how far a study has got, from its result files.",
    )
    parser.add_argument("study", help="a study name or a .toml path")
    cli.add_study_size(parser)
    parser.add_argument(
        "--seeds",
        type=int,
        default=None,
        help="the seeds per cell, if the run overrides the study's",
    )
    parser.add_argument("--results-dir", default=schema.DEFAULT_RESULTS_DIR)
    args = parser.parse_args(argv)
    if args.seeds is not None and args.seeds < 1:
        parser.error(f"--seeds must be at least 1. Received: {args.seeds}")
    try:
        study = study_module.load_study(
            args.study, quick=args.quick, full=args.full
        )
    except study_module.StudyError as e:
        return cli.fail(e)
    out_dir = os.path.join(args.results_dir, study.results_name)
    sys.stdout.write(
        render(
            study,
            progress(study, out_dir, args.seeds),
            set_aside=set_aside(out_dir),
        )
    )
    return 0


def progress(study, out_dir, seeds=None):
    """The state of every cell of `study` in its results folder.

    Args:
        study: `tuning.study.Study`.
        out_dir: str, the study's results folder (it may not exist).
        seeds: int, the seeds per cell; `None` for the study's.

    Returns:
        list of dicts, in study order: `condition`, `arm` (str), `state`
        (`"done"`, `"searched"`, `"searching"` or `"not started"`),
        `seeds_done`, `seeds`, `trials_done` (int: the search trials
        recorded in `search_progress.csv`, for a cell being searched) and
        `wall_time_s` (float: the search plus the seed reruns so far, from
        `cells.csv` once the seeds are done and from their `trials.csv`
        rows until then; for a cell being searched, its recorded trials'
        time; `nan` for a cell not started).
    """
    seeds = seeds or study.fixed["seeds"]
    cells = schema.read_keyed(
        os.path.join(out_dir, schema.CELLS_CSV), "condition", "arm"
    )
    runs = records.read_csv(os.path.join(out_dir, schema.TRIALS_CSV))
    searching = {}
    for row in records.read_csv(
        os.path.join(out_dir, schema.SEARCH_PROGRESS_CSV)
    ):
        key = (row.get("condition", ""), row["arm"])
        searching.setdefault(key, []).append(row)
    done_seeds, seed_times = {}, {}
    for row in runs:
        if int(row["seed"]) < seeds:
            key = (row.get("condition", ""), row["arm"])
            done_seeds.setdefault(key, set()).add(row["seed"])
            seed_times[key] = seed_times.get(key, 0.0) + _seconds(
                row.get("wall_time_s")
            )
    result = []
    for condition in study.conditions():
        for arm in study.arms:
            key = (condition.name, arm)
            cell = cells.get(key)
            count = len(done_seeds.get(key, ()))
            trials = searching.get(key, []) if cell is None else []
            if trials:
                state = "searching"
                wall = math.fsum(_seconds(r.get("wall_time_s")) for r in trials)
            elif cell is None:
                state, wall = "not started", math.nan
            else:
                state = DONE if count >= seeds else "searched"
                # `cells.csv` has the seeds' time once they are all done;
                # until then, the seeds' own rows.
                seeds_time = cell.get("seeds_wall_time_s")
                wall = _seconds(cell.get("search_wall_time_s")) + (
                    _seconds(seeds_time)
                    if seeds_time not in (None, "")
                    else seed_times.get(key, 0.0)
                )
            result.append(
                {
                    "condition": condition.name,
                    "arm": arm,
                    "state": state,
                    "seeds_done": count,
                    "seeds": seeds,
                    "trials_done": len(trials),
                    "wall_time_s": wall,
                }
            )
    return result


def set_aside(out_dir):
    """The sets of cells set aside in a results folder by `tuning.supersede`.

    Args:
        out_dir: str, the study's results folder (it may not exist).

    Returns:
        list of dicts, one per `superseded/<name>/superseded.json`, sorted
        by name: `name`, `arms` (list of str), `cells` (int, the rows of
        `cells.csv` set aside), `runs` (int, the rows of `trials.csv`),
        `superseded_at` and `reason` (str).
    """
    sets = []
    pattern = os.path.join(
        out_dir, supersede.SUPERSEDED_DIR, "*", supersede.SUPERSEDED_JSON
    )
    for path in sorted(glob.glob(pattern)):
        record = records.read_json(path)
        sets.append(
            {
                "name": os.path.basename(os.path.dirname(path)),
                "arms": list(record.get("arms") or []),
                "cells": int(
                    (record.get("rows") or {}).get(schema.CELLS_CSV, 0)
                ),
                "runs": int(
                    (record.get("rows") or {}).get(schema.TRIALS_CSV, 0)
                ),
                "superseded_at": record.get("superseded_at", ""),
                "reason": record.get("reason", ""),
            }
        )
    return sets


def render(study, cells, set_aside=()):
    """`progress`'s cells as text: a headline, a table and the time.

    `set_aside`, `set_aside()`'s list, adds a line per set of cells set
    aside.
    """
    conditions = list(dict.fromkeys(c["condition"] for c in cells))
    done = [c for c in cells if c["state"] == DONE]
    searched = [c for c in cells if c["state"] == "searched"]
    searching = [c for c in cells if c["state"] == "searching"]
    waiting = len(cells) - len(done) - len(searched) - len(searching)
    lines = [
        f"{study.results_name}: {len(done)} of {len(cells)} cells done, "
        f"{len(searched)} searched with seeds to run, "
        + (f"{len(searching)} being searched, " if searching else "")
        + f"{waiting} not started.",
        "",
        "| condition | " + " | ".join(study.arms) + " |",
        "|---|" + "---|" * len(study.arms),
    ]
    for condition in conditions:
        row = [c for c in cells if c["condition"] == condition]
        lines.append(
            f"| {condition or '(no grid)'} | "
            + " | ".join(_entry(c, study.search["max_trials"]) for c in row)
            + " |"
        )
    spent = math.fsum(
        c["wall_time_s"] for c in cells if not math.isnan(c["wall_time_s"])
    )
    lines += ["", f"Wall time of the cells so far: {_hours(spent)}."]
    left = len(cells) - len(done)
    if done and left:
        mean = math.fsum(c["wall_time_s"] for c in done) / len(done)
        lines.append(
            f"Left: {left} cells; at the done cells' mean of "
            f"{mean / 60:.1f} min, about {_hours(left * mean)} more (less "
            "for the searched cells, more where the cells left are bigger)."
        )
    elif not left:
        lines.append("Every cell is done.")
    for entry in set_aside:
        # A reopened search's old seeds are set aside without their cell.
        count, unit = entry["cells"], "cell"
        if not count and entry.get("runs"):
            count, unit = entry["runs"], "seed run"
        lines.append(
            f"Set aside as '{entry['name']}' ({entry['superseded_at']}): "
            f"{count} {unit}{'' if count == 1 else 's'} of "
            f"{', '.join(entry['arms'])}, in "
            f"{supersede.SUPERSEDED_DIR}/{entry['name']}/; "
            f"reason: {entry['reason']}"
        )
    return "\n".join(lines) + "\n"


def _entry(cell, max_trials):
    if cell["state"] == DONE:
        return DONE
    if cell["state"] == "searched":
        return f"seeds {cell['seeds_done']}/{cell['seeds']}"
    if cell["state"] == "searching":
        return f"trials {cell['trials_done']}/{max_trials}"
    return NOT_STARTED


def _seconds(value):
    return float(value) if value not in (None, "") else 0.0


def _hours(seconds):
    if seconds < 60:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


if __name__ == "__main__":
    sys.exit(main())
