"""What a run of a study checks before it trains anything.

`distributed_role` is the process' part in a distributed search;
`check_share` refuses a share of the study (`--arms`, `--conditions`)
that cannot run; `check_same_study` refuses to resume results that
another study, an older runner or another backend wrote; `recorded_runs`
and `recorded_cells` are what the tools that measure a finished study's
networks again (`tuning.divergence`, `tuning.alignment`) start from.
"""

import os

from tuning import distributed
from tuning import records
from tuning import schema
from tuning.errors import SweepError


def distributed_role():
    """This process' part in a distributed search (`distributed.role`).

    Raises:
        SweepError: for a bad distributed set-up.
    """
    try:
        return distributed.role()
    except distributed.DistributedError as e:
        raise SweepError(str(e)) from None


def check_share(study, options, role):
    """Refuses an `arms`/`conditions` selection the study cannot run."""
    if options.arms is None and options.conditions is None:
        return
    if options.overwrite:
        raise SweepError(
            "--overwrite empties the whole study's runs and results, not a "
            "share of them; set the share's arms aside with "
            "`python -m tuning.supersede` instead. Received: overwrite=True, "
            f"arms={options.arms!r}, conditions={options.conditions!r}"
        )
    if role is not None:
        raise SweepError(
            "--arms and --conditions run a share of a study in a plain "
            "process, not as a distributed chief or worker. Received: "
            f"KERASTUNER_TUNER_ID role {role!r}"
        )
    if options.arms is not None:
        unknown = [a for a in options.arms if a not in study.arms]
        if not options.arms or unknown:
            raise SweepError(
                f"Received an invalid value for `arms`. Expected arms of "
                f"study {study.results_name!r}: {', '.join(study.arms)}. "
                f"Received: arms={list(options.arms)}"
            )
    if options.conditions is not None:
        names = [c.name for c in study.conditions()]
        if not study.grid:
            raise SweepError(
                f"study {study.results_name!r} has no [grid], so no "
                "conditions to choose from. Received: "
                f"conditions={list(options.conditions)}"
            )
        unknown = [c for c in options.conditions if c not in names]
        if not options.conditions or unknown:
            raise SweepError(
                "Received an invalid value for `conditions`. Expected "
                f"conditions of study {study.results_name!r}: "
                f"{', '.join(names)}. Received: "
                f"conditions={list(options.conditions)}"
            )


def check_same_study(study, runs_dir, out_dir, backend):
    """Refuses to resume a study whose file changed since its runs.

    The study's fingerprint is kept in both folders: in a fresh clone with
    no runs folder, the committed results folder says what the study was.
    """
    fingerprint = schema.fingerprint(study)
    for folder in (runs_dir, out_dir):
        previous = records.read_json(os.path.join(folder, schema.STUDY_JSON))
        if previous is not None and not schema.same_study(
            previous, fingerprint
        ):
            raise SweepError(
                f"the study changed since its runs in {folder} were made "
                "(only max_trials and seeds may change on resume); pass "
                "--overwrite to start again. Received: "
                f"study={study.results_name!r}"
            )
    has = {
        name: os.path.isfile(os.path.join(out_dir, name))
        for name in (schema.TRIALS_CSV, schema.CELLS_CSV)
    }
    if has[schema.TRIALS_CSV] and not has[schema.CELLS_CSV]:
        raise SweepError(
            f"the results in {out_dir} were written by an earlier version of "
            f"the runner (no {schema.CELLS_CSV}) and cannot be resumed; pass "
            "--overwrite to start again, or use another --results-dir. "
            f"Received: study={study.results_name!r}"
        )
    summary = records.read_json(os.path.join(out_dir, schema.SUMMARY_JSON))
    if summary is not None and summary.get("backend") != backend:
        raise SweepError(
            f"the results in {out_dir} were made with the "
            f"{summary.get('backend')} backend; set KERAS_BACKEND to it or "
            f"pass --overwrite. Received: backend={backend!r}"
        )


def recorded_runs(study, results_dir, condition_names=None):
    """The rows of a study's `trials.csv` and the conditions to measure.

    Args:
        study: a `Study`.
        results_dir: the results folder holding `<study>/`.
        condition_names: the names of the conditions to keep, or `None`
            (or empty) for all of them.

    Returns:
        tuple: `(out_dir, runs, conditions)`, the study's results folder,
        the rows of its `trials.csv` and its `Condition`s selected.

    Raises:
        SweepError: for a study with no rows, or a selection that names no
            condition of it.
    """
    out_dir = os.path.join(results_dir, study.results_name)
    runs = records.read_csv(os.path.join(out_dir, schema.TRIALS_CSV))
    if not runs:
        raise SweepError(
            "Expected a finished study (rows in trials.csv). Received: "
            f"results folder={out_dir!r}"
        )
    conditions = [
        c
        for c in study.conditions()
        if not condition_names or c.name in condition_names
    ]
    if not conditions:
        raise SweepError(
            "Expected conditions of the study. Received: "
            f"condition={condition_names!r}"
        )
    return out_dir, runs, conditions


def recorded_cells(study, runs, conditions, data_dir, tool, seed=None):
    """Each recorded cell of `conditions`, with its condition's data.

    The data are loaded once a condition (`data_loading.load_data`); a
    cell with no row in `runs` (with no row of `seed`, where given) is
    logged as skipped.

    Args:
        study: a `Study`.
        runs: the rows of its `trials.csv` (`recorded_runs`).
        conditions: the `Condition`s to go through.
        data_dir: the image folder, or `None` for the download.
        tool: str, the name the log lines start with.
        seed: int, the seed whose run is wanted, or `None` for any.

    Yields:
        tuple: `(condition, at, data, arm, row)`: the condition, the
        study resolved at it, its `Data`, the arm and its first recorded
        run's row.
    """
    from tuning.console import log
    from tuning.data_loading import load_data

    for condition in conditions:
        at = study.at(condition)
        data = load_data(at, data_dir)
        for arm in study.arms:
            recorded = [
                r
                for r in runs
                if r.get("condition", "") == condition.name
                and r["arm"] == arm
                and (seed is None or r["seed"] == str(seed))
            ]
            if not recorded:
                which = "" if seed is None else f" with seed {seed}"
                log(f"[{tool}] {condition.name} {arm}: no run{which}, skipped")
                continue
            yield condition, at, data, arm, recorded[0]
