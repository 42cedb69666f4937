"""Running a study, cell by cell.

`run(study, options)` takes every (condition, arm) *cell* of the study in
order: the search of the cell's learning rate (and, for the random and
Bayesian tuners, whatever else they search) on the validation split, then
the chosen setting retrained on `seeds` seeds and evaluated on test. Each
step lands in the results folder as soon as it is over
(`tuning.results_state`, in the files `tuning.schema` names): a cell's
search rows and its `cells.csv` row when its search ends, each seed's row
when it ends. A run resumes from those files alone: a cell with a
`cells.csv` row is not searched again, and a (condition, arm, seed) in
`trials.csv` is not retrained, even in a fresh clone with no
`tuning/runs/`. An interrupted search resumes from its KerasTuner project,
or, where that is gone, by replaying the trials `search_progress.csv`
recorded as they ended (`tuning.search.replay`); the time those trials
took counts in the cell's search time.
On a distributed chief every search comes first (the workers train the
trials), then the reruns.

`reproduce(study, options, arm, seed, condition)` (`tuning.reproduction`)
retrains one recorded row and prints both test accuracies; `load_data`
(`tuning.data_loading`), `log` (`tuning.console`) and `SweepError`
(`tuning.errors`) are importable from here too.
"""

import dataclasses
import functools
import math
import os
import shutil
import time

from tuning import distributed
from tuning import lock
from tuning import provenance
from tuning import records
from tuning import reruns
from tuning import result_rows
from tuning import run_checks
from tuning import run_summary
from tuning import schema
from tuning import search
from tuning.console import bracket_words
from tuning.console import log
from tuning.console import log_results
from tuning.data_loading import data_of
from tuning.data_loading import load_data
from tuning.errors import SweepError
from tuning.reproduction import reproduce
from tuning.results_state import ResultsState
from tuning.results_state import same_trial as _same_trial  # noqa: F401
from tuning.sitting import Sitting
from tuning.sitting import cells_of

__all__ = [
    "KEPT_ON_OVERWRITE",
    "Options",
    "SweepError",
    "load_data",
    "log",
    "reproduce",
    "run",
]


@dataclasses.dataclass(frozen=True)
class Options:
    """How to run a study (the command line's options, as plain values).

    Attributes:
        data_dir: a local copy of the dataset, or `None`.
        tfds_data_dir: the TensorFlow Datasets data directory where CIFAR-10
            comes from tfds, or `None` for tfds' own.
        results_dir: where `<study>/` results are written.
        runs_dir: where `<study>/` KerasTuner projects are kept.
        overwrite: whether to delete the study's runs and results first.
        worker_timeout: distributed chief: seconds of silence after which a
            worker's trial is handed to another.
        verbose: whether to show Keras' and KerasTuner's own progress.
        callbacks: Keras callbacks added to every search trial's and seed
            rerun's `fit`.
        tensorboard: a folder for TensorBoard logs (see
            `tuning.tensorboard`), or `None`.
        command: the command line, recorded in `summary.json`.
        arms: run only the cells of these arms (a sequence of str), or
            `None` for every arm.
        conditions: run only the cells of these conditions (names, as in
            the `condition` column), or `None` for every condition.
    """

    data_dir: str = None
    tfds_data_dir: str = None
    results_dir: str = schema.DEFAULT_RESULTS_DIR
    runs_dir: str = schema.DEFAULT_RUNS_DIR
    overwrite: bool = False
    worker_timeout: int = distributed.DEFAULT_WORKER_TIMEOUT_S
    verbose: bool = False
    callbacks: tuple = ()
    tensorboard: str = None
    command: str = ""
    arms: tuple = None
    conditions: tuple = None


def run(study, options=Options()):
    """Searches and retrains every cell of `study`; writes the results.

    Args:
        study: a `Study`.
        options: `Options`.

    With `options.arms` or `options.conditions`, only those cells are
    searched and retrained: a share of the study, which another process
    (with its own results folder) may run beside this one, and
    `tuning.merge` brings together. Such a run writes no `summary.json`
    and no report; the study's own command, run once every cell is done,
    writes them (and trains nothing).

    Returns:
        dict: the summary written to `summary.json` (`None` on a worker or
        for a share of the study).

    Raises:
        SweepError: for bad input, a study that changed since its runs, or
            a study another runner holds.
    """
    import keras

    role = run_checks.distributed_role()
    run_checks.check_share(study, options, role)
    backend = keras.backend.backend()
    runs_dir = os.path.join(options.runs_dir, study.results_name)
    out_dir = os.path.join(options.results_dir, study.results_name)
    if role == "worker":
        if options.overwrite:
            log("--overwrite is left to the chief; this worker resumes")
        return _run(study, options, role, backend, runs_dir, out_dir)
    try:
        with lock.StudyLock([runs_dir, out_dir], log=log):
            return _run(study, options, role, backend, runs_dir, out_dir)
    except lock.LockedError as e:
        raise SweepError(str(e)) from None


def _run(study, options, role, backend, runs_dir, out_dir):
    """`run`, in folders this process holds (or, on a worker, shares)."""
    git_at_start = provenance.git_state()
    conditions = study.conditions()
    start = time.perf_counter()
    log(
        f"study {study.results_name}: "
        + (
            f"{len(conditions)} conditions ({', '.join(study.grid)}) x "
            if study.grid
            else ""
        )
        + f"{len(study.arms)} arms ({', '.join(study.arms)}), "
        f"{study.search['tuner']} search of up to "
        f"{study.search['max_trials']} trials and {study.fixed['seeds']} "
        f"seeds each; backend {backend}"
        + (f"; distributed {role}" if role else "")
    )
    if role != "worker":
        _prepare_folders(study, options, backend, runs_dir, out_dir)
    sitting = Sitting(
        study,
        options,
        role,
        backend,
        runs_dir,
        out_dir,
        git_at_start,
        start,
        ResultsState(study, out_dir, backend),
    )
    cells = cells_of(study)
    selected = _shared(cells, options)
    share = options.arms is not None or options.conditions is not None
    if share:
        log(
            f"a share of the study: {len(selected)} of its "
            f"{len(cells)} cells ("
            + "; ".join(
                f"{name} {', '.join(values)}"
                for name, values in (
                    ("arms", options.arms),
                    ("conditions", options.conditions),
                )
                if values is not None
            )
            + ")"
        )
    port = distributed.base_port() if role else None
    for cell in selected:
        if cell.condition.name not in sitting.datas:
            sitting.datas[cell.condition.name] = data_of(
                cell.at, options.data_dir, sitting.loaded, options.tfds_data_dir
            )
        _search(sitting, cell, port)
        if role is None:
            reruns.rerun_seeds(sitting, cell)
    if role == "worker":
        log(
            "worker: searches done; the chief retrains the best settings "
            "and writes the results"
        )
        return None
    if share:
        return _end_share(sitting, cells)
    if role == "chief":
        for cell in cells:
            reruns.rerun_seeds(sitting, cell)
    return _finish(sitting)


def _prepare_folders(study, options, backend, runs_dir, out_dir):
    """Empties the study's folders on `--overwrite`, refuses to resume
    another study's, and writes the study's fingerprint in both."""
    if options.overwrite:
        for path in (runs_dir, out_dir):
            _empty_but_lock(path)
        log(f"overwrite: emptied {runs_dir} and {out_dir}")
    run_checks.check_same_study(study, runs_dir, out_dir, backend)
    for folder in (runs_dir, out_dir):
        records.write_json(
            os.path.join(folder, schema.STUDY_JSON),
            schema.fingerprint(study),
        )


def _shared(cells, options):
    """The cells of `cells` that `options.arms`/`conditions` select."""
    return [
        cell
        for cell in cells
        if (options.arms is None or cell.arm in options.arms)
        and (
            options.conditions is None
            or cell.condition.name in options.conditions
        )
    ]


def _search(sitting, cell, port):
    """Searches one cell, unless its search is done and not reopened."""
    state = sitting.state
    label = cell.label
    if cell.key in state.cells and not state.reopen(*cell.key):
        if sitting.role != "worker":
            log(
                f"[search] {label}: search already done "
                f"({state.cells[cell.key]['search_trials']} "
                "trials), skipped"
            )
        return
    writes_results = sitting.role != "worker"
    options = sitting.options
    t0 = time.perf_counter()
    tuner = search.search_cell(
        cell.at,
        cell.arm,
        sitting.datas[cell.condition.name],
        schema.project_dir(sitting.runs_dir, cell.condition.name, cell.arm),
        "[search] " + label,
        log,
        sitting.start,
        role=sitting.role,
        port=distributed.cell_port(port, cell.index) if sitting.role else None,
        worker_timeout=options.worker_timeout,
        callbacks=options.callbacks,
        verbose=options.verbose,
        tensorboard=sitting.tensorboard_dir,
        run_prefix=cell.key,
        recorded=state.recorded(*cell.key),
        on_trial_end=(
            functools.partial(state.record_trial, cell.condition, cell.arm)
            if writes_results
            else None
        ),
    )
    if writes_results:
        _record_search(sitting, cell, tuner, t0, label)


def _record_search(sitting, cell, tuner, t0, label):
    """Records the search of one cell that began at `t0`, and says what it
    chose."""
    state = sitting.state
    # The trials earlier sittings of this search ended count with their own
    # time (a reopened cell's first search is in its `search_wall_time_s`
    # already).
    counted = {int(r["trial_id"]) for r in state.rows_of(*cell.key)}
    earlier = math.fsum(
        search.trial_seconds(tuner.oracle.trials[t])
        for t in tuner.resumed_trials
        if int(t) not in counted
    )
    state.record_search(
        cell.at,
        cell.condition,
        cell.arm,
        tuner,
        time.perf_counter() - t0 + earlier,
        sitting.git_at_start,
    )
    row = state.cells[cell.key]
    log(
        f"[search] {label}: search done, "
        f"{row['search_trials']} trials; chosen "
        f"learning_rate {float(row['learning_rate']):.3g} "
        f"(val_accuracy "
        f"{float(state.chosen[cell.key]['val_accuracy']):.4f}), "
        + bracket_words(row)
        + f"; elapsed {search.elapsed(sitting.start)}"
    )


def _end_share(sitting, cells):
    """The end of a run of a share of the study: says how far the study is,
    and what brings the shares together."""
    state, study, out_dir = sitting.state, sitting.study, sitting.out_dir
    if state.changed:
        from tuning import merge

        # What the whole folder's files said no longer holds; the study's
        # command writes them again.
        merge.remove_study_wide(out_dir)
    done = sum(
        1
        for cell in cells
        if cell.key in state.cells and state.cells[cell.key].get("seeds")
    )
    if study.repeat_of is not None:
        log(
            f"repeated search done: {done} of the study's {len(cells)} "
            f"cells are complete in {out_dir}; `python -m tuning.report "
            f"{study.name}` carries them into the study's report; "
            f"elapsed {search.elapsed(sitting.start)}"
        )
        return None
    log(
        f"share done: {done} of the study's {len(cells)} cells are "
        f"complete in {out_dir}. Bring the shares together with "
        "`python -m tuning.merge`; then the study's command without "
        "--arms/--conditions writes summary.json and the report "
        f"(training only what is left); elapsed {search.elapsed(sitting.start)}"
    )
    return None


def _finish(sitting):
    """Writes the plots, `summary.json` and the report of a finished study
    (unless nothing changed since they were written), and logs the
    results."""
    from tuning import plots
    from tuning import report

    state, study, out_dir = sitting.state, sitting.study, sitting.out_dir
    start = sitting.start
    runs = schema.ordered(study, state.runs.values(), "seed")
    conditions = study.conditions()
    summary_path = os.path.join(out_dir, schema.SUMMARY_JSON)
    if not state.changed and os.path.isfile(summary_path):
        # Nothing new: the results, their summary and report stay as the
        # runs that made them wrote them.
        log(f"results: {out_dir}, already complete; nothing was trained")
        log_results(state, records.read_json(summary_path), start)
        return records.read_json(summary_path)
    labels = {d.label for d in sitting.datas.values()}
    paths = plots.plot_all(
        out_dir,
        f"{study.results_name}: {', '.join(sorted(labels))}, {sitting.backend}",
        study.arms,
        runs,
        list(state.curves.values()),
        state.search_rows,
        conditions=[c.name for c in conditions] if study.grid else None,
        metric="val_accuracy" if study.selects else "test_accuracy",
        joined=result_rows.read_extended(
            out_dir, {"config": study.config()}, runs
        ),
    )
    summary = run_summary.summary(
        study,
        sitting.datas,
        sitting.backend,
        sitting.options.command,
        runs,
        state.cells,
        sitting.role,
        time.perf_counter() - start,
        git_at_start=sitting.git_at_start,
    )
    records.write_json(summary_path, summary)
    report_path = report.write_report(out_dir)
    log(
        f"results: {out_dir} ({schema.TRIALS_CSV}, "
        f"{schema.SEARCH_TRIALS_CSV}, {schema.CELLS_CSV}, "
        f"{schema.CURVES_CSV}, {schema.SUMMARY_JSON}, "
        f"{os.path.basename(report_path)}, "
        f"{', '.join(os.path.basename(p) for p in paths)})"
    )
    log_results(state, summary, start)
    return summary


# What `--overwrite` keeps in a study's folders: the lock (which a running
# runner would otherwise lose) and the study's written discussion.
KEPT_ON_OVERWRITE = (lock.LOCK_NAME, "README.md")


def _empty_but_lock(path):
    """Deletes everything in `path` but `KEPT_ON_OVERWRITE`."""
    if not os.path.isdir(path):
        return
    for name in os.listdir(path):
        if name in KEPT_ON_OVERWRITE:
            continue
        full = os.path.join(path, name)
        if os.path.isdir(full) and not os.path.islink(full):
            shutil.rmtree(full)
        else:
            os.remove(full)
