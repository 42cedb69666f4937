"""Fresh seeds for the reruns that replayed their search's choice.

    python -m tuning.fresh_seeds STUDY [--data-dir DIR] [--results-dir DIR]
        [--conditions NAME ...] [--arms ARM ...] [--dry-run]

Under protocol 2 with search seed 0, search trial `i` and seed rerun `i`
of a cell train from the same seed; where the search chose trial `i`,
rerun `i` is a bit-identical replay of the run that won the search on
validation, not an independent seed (`replays.replaying_rows` finds them). For
every such rerun this trains the chosen setting once more, from seed
`study.RERUN_SEED_BASE + i` (the seed protocol 3 gives rerun `i`: apart
from every search trial's and every other rerun's), evaluates it on test,
and writes the row to `fresh_seeds.csv` in the study's results folder:
the columns of `trials.csv` (`seed` the seed it trained from) and
`replaces_seed`, the rerun it stands in for. The report then gives every
verdict twice: as run, and with each replayed seed replaced by its fresh
one (`tuning.report`).

Each row is written as its run ends; a second run of the command skips
the rows already there, so it resumes where it stopped. `--dry-run` lists
what would be trained. Refused while a runner holds the study.
"""

import argparse
import dataclasses
import os
import shlex
import sys
import time

from tuning import cli
from tuning import lock
from tuning import records
from tuning import replays
from tuning import schema
from tuning import study as study_module


class FreshSeedsError(ValueError):
    """What was asked cannot be done: one line on stderr, exit status 2."""


@dataclasses.dataclass(frozen=True)
class Options:
    """What `run` needs besides the study.

    Attributes:
        results_dir: the folder holding `<study>/`.
        data_dir: the CIFAR-10 image folder, or `None` (see `runner`).
        tfds_data_dir: TensorFlow Datasets' data directory, or `None`.
        conditions: names of conditions to do, or `None` for all.
        arms: arms to do, or `None` for all.
        dry_run: list what would be trained, train nothing.
    """

    results_dir: str = schema.DEFAULT_RESULTS_DIR
    data_dir: str = None
    tfds_data_dir: str = None
    conditions: tuple = None
    arms: tuple = None
    dry_run: bool = False


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m tuning.fresh_seeds",
        description="Retrains, on a fresh seed, every seed rerun of a study "
        "that replayed its search's chosen trial.",
    )
    parser.add_argument("study", help="a study name or .toml path")
    parser.add_argument("--results-dir", default=schema.DEFAULT_RESULTS_DIR)
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--tfds-data-dir", default=None)
    parser.add_argument("--conditions", nargs="+", default=None)
    parser.add_argument("--arms", nargs="+", default=None)
    parser.add_argument("--dry-run", action="store_true")
    args = parser.parse_args(argv)
    try:
        study = study_module.load_study(args.study)
        run(
            study,
            Options(
                results_dir=args.results_dir,
                data_dir=args.data_dir,
                tfds_data_dir=args.tfds_data_dir,
                conditions=tuple(args.conditions) if args.conditions else None,
                arms=tuple(args.arms) if args.arms else None,
                dry_run=args.dry_run,
            ),
            command=shlex.join(["python", "-m", "tuning.fresh_seeds"] + argv)
            if argv is not None
            else shlex.join(["python"] + sys.argv),
        )
    except (study_module.StudyError, FreshSeedsError) as e:
        return cli.fail(e)
    return 0


def pending(study, out_dir, conditions=None, arms=None):
    """The replaying reruns of a study that have no fresh row yet.

    Args:
        study: a `tuning.study.Study`.
        out_dir: the study's results folder.
        conditions: names of conditions to keep, or `None` for all.
        arms: arms to keep, or `None` for all.

    Returns:
        list: the `trials.csv` rows to stand in for, in study order.

    Raises:
        FreshSeedsError: for a study with no `trials.csv`, or unknown
            conditions or arms.
    """
    runs = records.read_csv(os.path.join(out_dir, schema.TRIALS_CSV))
    if not runs:
        raise FreshSeedsError(
            f"no seed reruns in {out_dir}: run the study first. "
            f"Received: study={study.results_name!r}"
        )
    names = [c.name for c in study.conditions()]
    unknown = sorted(set(conditions or ()) - set(names))
    if unknown:
        raise FreshSeedsError(
            f"Unknown conditions; expected some of {names}. "
            f"Received: conditions={unknown}"
        )
    unknown = sorted(set(arms or ()) - set(study.arms))
    if unknown:
        raise FreshSeedsError(
            f"Unknown arms; expected some of {list(study.arms)}. "
            f"Received: arms={unknown}"
        )
    done = {
        (r.get("condition", ""), r["arm"], r["replaces_seed"])
        for r in records.read_csv(os.path.join(out_dir, schema.FRESH_SEEDS_CSV))
    }
    return [
        r
        for r in replays.replaying_rows(runs, study.config())
        if (conditions is None or r.get("condition", "") in conditions)
        and (arms is None or r["arm"] in arms)
        and (r.get("condition", ""), r["arm"], r["seed"]) not in done
    ]


def run(study, options, command=""):
    """Trains a fresh seed for every replaying rerun not yet done.

    Returns:
        list: the rows written (dicts of str).

    Raises:
        FreshSeedsError: see `pending`; or a runner holds the study.
    """
    out_dir = os.path.join(options.results_dir, study.results_name)
    todo = pending(study, out_dir, options.conditions, options.arms)
    _log(
        f"{study.results_name}: {len(todo)} replaying rerun(s) without a "
        "fresh seed" + (f"; {command}" if command else "")
    )
    for row in todo:
        _log(
            f"  {_name(row)}: rerun {row['seed']} replays search trial "
            f"{row['search_trial_id']}"
        )
    if options.dry_run or not todo:
        return []
    try:
        with lock.StudyLock([out_dir]):
            return _train(study, options, out_dir, todo)
    except lock.LockedError as e:
        raise FreshSeedsError(str(e)) from None


def _train(study, options, out_dir, todo):
    from tuning import runner
    from tuning import training

    path = os.path.join(out_dir, schema.FRESH_SEEDS_CSV)
    rows = records.read_csv(path)
    columns = schema.fresh_seed_columns(study)
    datas = {}
    written = []
    start = time.perf_counter()
    for row in todo:
        at = (
            study.at(study.condition(row["condition"])) if study.grid else study
        )
        key = tuple(at.fixed[k] for k in schema.DATA_KEYS)
        if key not in datas:
            datas[key] = runner.load_data(
                at, options.data_dir, options.tfds_data_dir
            )
        seed = study_module.rerun_seed(3, row["seed"])
        result = training.train_and_evaluate(
            at, row["arm"], schema.hyperparameters(row), datas[key], seed
        )
        fresh = dict(row, seed=str(seed), replaces_seed=row["seed"])
        fresh.update(
            {k: result[k] for k in schema.RUN_METRICS + schema.RUN_EXTRAS}
        )
        rows.append(fresh)
        records.write_csv(path, columns, rows)
        written.append(fresh)
        _log(
            f"  {_name(row)}: seed {seed} test_accuracy "
            f"{result['test_accuracy']:.4f} (replayed seed {row['seed']}: "
            f"{float(row['test_accuracy']):.4f}) in "
            f"{result['wall_time_s']:.1f} s; elapsed "
            f"{(time.perf_counter() - start) / 60:.1f} min"
        )
    return written


def _name(row):
    condition = row.get("condition", "")
    return f"{condition} {row['arm']}" if condition else row["arm"]


def _log(message):
    print(message, flush=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
