"""Running a study, cell by cell, and reproducing one of its rows.

`run(study, options)` takes every (condition, arm) *cell* of the study in
order: the search of the cell's learning rate (and, for the random and
Bayesian tuners, whatever else they search) on the validation split, then
the chosen setting retrained on `seeds` seeds and evaluated on test. Each
step lands in the results folder as soon as it is over (`tuning.schema`):
a cell's search rows and its `cells.csv` row when its search ends, each
seed's row when it ends. A run resumes from those files alone: a cell
with a `cells.csv` row is not searched again, and a (condition, arm, seed)
in `trials.csv` is not retrained, even in a fresh clone with no
`tuning/runs/`. An interrupted search resumes from its KerasTuner project,
or, where that is gone, by replaying the trials `search_progress.csv`
recorded as they ended (`tuning.search.replay`); the time those trials
took counts in the cell's search time.
On a distributed chief every search comes first (the workers train the
trials), then the reruns.

`reproduce(study, options, arm, seed, condition)` retrains one recorded
row and prints both test accuracies.
"""

import dataclasses
import functools
import math
import numbers
import os
import shutil
import time

from tuning import distributed
from tuning import lock
from tuning import provenance
from tuning import records
from tuning import schema
from tuning import search
from tuning import training


class SweepError(Exception):
    """Bad input: printed as one line on stderr, exit status 2."""


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

    role = _role()
    _check_share(study, options, role)
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
    writes_results = role != "worker"
    if options.overwrite and writes_results:
        for path in (runs_dir, out_dir):
            _empty_but_lock(path)
        log(f"overwrite: emptied {runs_dir} and {out_dir}")
    if writes_results:
        _check_same_study(study, runs_dir, out_dir, backend)
        for folder in (runs_dir, out_dir):
            records.write_json(
                os.path.join(folder, schema.STUDY_JSON),
                schema.fingerprint(study),
            )

    state = _State(study, out_dir, backend)
    datas, loaded = {}, {}
    cells = [
        (c, condition, i, arm)
        for c, condition in enumerate(conditions)
        for i, arm in enumerate(study.arms)
    ]
    share = options.arms is not None or options.conditions is not None
    selected = {(c, i) for c, _, i, _ in _shared(cells, options)}
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
    for index, (c, condition, i, arm) in enumerate(cells):
        if (c, i) not in selected:
            continue
        at = study.at(condition)
        if condition.name not in datas:
            datas[condition.name] = _data_of(
                at, options.data_dir, loaded, options.tfds_data_dir
            )
        data = datas[condition.name]
        label = _label(study, condition, c, i, arm)
        if (condition.name, arm) not in state.cells or state.reopen(
            condition.name, arm
        ):
            t0 = time.perf_counter()
            tuner = search.search_cell(
                at,
                arm,
                data,
                schema.project_dir(runs_dir, condition.name, arm),
                "[search] " + label,
                log,
                start,
                role=role,
                port=distributed.cell_port(port, index) if role else None,
                worker_timeout=options.worker_timeout,
                callbacks=options.callbacks,
                verbose=options.verbose,
                tensorboard=_tensorboard_dir(options, study),
                run_prefix=(condition.name, arm),
                recorded=state.recorded(condition.name, arm),
                on_trial_end=(
                    functools.partial(state.record_trial, condition, arm)
                    if writes_results
                    else None
                ),
            )
            if writes_results:
                # The trials earlier sittings of this search ended count
                # with their own time (a reopened cell's first search is
                # in its `search_wall_time_s` already).
                counted = {
                    int(r["trial_id"])
                    for r in state.rows_of(condition.name, arm)
                }
                earlier = math.fsum(
                    search.trial_seconds(tuner.oracle.trials[t])
                    for t in tuner.resumed_trials
                    if int(t) not in counted
                )
                state.record_search(
                    at,
                    condition,
                    arm,
                    tuner,
                    time.perf_counter() - t0 + earlier,
                    git_at_start,
                )
                cell = state.cells[condition.name, arm]
                log(
                    f"[search] {label}: search done, "
                    f"{cell['search_trials']} trials; chosen "
                    f"learning_rate {float(cell['learning_rate']):.3g} "
                    f"(val_accuracy "
                    f"{float(state.chosen[condition.name, arm]['val_accuracy']):.4f}), "
                    + _bracket_words(cell)
                    + f"; elapsed {search.elapsed(start)}"
                )
        elif role != "worker":
            log(
                f"[search] {label}: search already done "
                f"({state.cells[condition.name, arm]['search_trials']} "
                "trials), skipped"
            )
        if role is None:
            _seeds(state, at, condition, c, i, arm, data, options, start)
    if not writes_results:
        log(
            "worker: searches done; the chief retrains the best settings "
            "and writes the results"
        )
        return None
    if share:
        if state.changed:
            from tuning import merge

            # What the whole folder's files said no longer holds; the
            # study's command writes them again.
            merge.remove_study_wide(out_dir)
        done = sum(
            1
            for _, condition, _, arm in cells
            if (condition.name, arm) in state.cells
            and state.cells[condition.name, arm].get("seeds")
        )
        if study.repeat_of is not None:
            log(
                f"repeated search done: {done} of the study's {len(cells)} "
                f"cells are complete in {out_dir}; `python -m tuning.report "
                f"{study.name}` carries them into the study's report; "
                f"elapsed {search.elapsed(start)}"
            )
            return None
        log(
            f"share done: {done} of the study's {len(cells)} cells are "
            f"complete in {out_dir}. Bring the shares together with "
            "`python -m tuning.merge`; then the study's command without "
            "--arms/--conditions writes summary.json and the report "
            f"(training only what is left); elapsed {search.elapsed(start)}"
        )
        return None
    if role == "chief":
        for c, condition, i, arm in cells:
            _seeds(
                state,
                study.at(condition),
                condition,
                c,
                i,
                arm,
                datas[condition.name],
                options,
                start,
            )
    return _finish(
        state, datas, backend, role, start, git_at_start, options, out_dir
    )


def _seeds(state, study, condition, c, i, arm, data, options, start):
    """Retrains the chosen setting of one cell on every seed not yet
    done."""
    label = "[seeds] " + _label(state.study, condition, c, i, arm)
    chosen = state.chosen_row(condition.name, arm)
    hp_values = schema.hyperparameters(chosen)
    cell = state.cells[condition.name, arm]
    n = study.fixed["seeds"]
    state.reconcile_seeds(condition, arm, chosen, label)
    t0 = time.perf_counter()
    trained = False
    # `cells.csv` counts a cell's seed time when its seeds end; seeds that
    # a stopped sitting finished are counted from their `trials.csv` rows.
    counted = int(cell.get("seeds") or 0)
    earlier = 0.0
    # A selection study chooses on validation: its console shows no test.
    shown = "val_accuracy" if study.selects else "test_accuracy"
    for seed in range(n):
        key = (condition.name, arm, str(seed))
        if key in state.runs:
            if seed >= counted:
                earlier += float(state.runs[key].get("wall_time_s") or 0.0)
            log(
                f"{label} seed {seed + 1}/{n}: already done ({shown} "
                f"{float(state.runs[key][shown]):.4f}), skipped"
            )
            continue
        callbacks = list(options.callbacks)
        if options.tensorboard:
            from tuning import tensorboard

            callbacks += tensorboard.callbacks(
                _tensorboard_dir(options, state.study),
                tensorboard.run_name(condition.name, arm, "seed", seed),
                {
                    **hp_values,
                    "arm": arm,
                    "seed": seed,
                    **schema.condition_cells(state.study, condition),
                },
            )
        result = training.train_and_evaluate(
            study,
            arm,
            hp_values,
            data,
            study.rerun_seed(seed),
            callbacks=callbacks,
            verbose=1 if options.verbose else 0,
        )
        trained = True
        state.record_run(
            study, condition, arm, seed, hp_values, chosen, cell, data, result
        )
        log(
            f"{label} seed {seed + 1}/{n}: "
            + (
                f"val_accuracy {result['val_accuracy']:.4f} (a selection "
                "study: chosen on validation"
                if study.selects
                else f"test_accuracy {result['test_accuracy']:.4f} (val "
                f"{result['val_accuracy']:.4f}"
            )
            + search.failure(result, data.num_classes, ", {}")
            + f") in {result['wall_time_s']:.1f} s; elapsed "
            f"{search.elapsed(start)}"
        )
    if trained:
        state.record_seeds(
            condition, arm, n, time.perf_counter() - t0 + earlier
        )
    elif (
        earlier
        and not cell.get("seeds")
        and all(
            (condition.name, arm, str(seed)) in state.runs for seed in range(n)
        )
    ):
        # Every seed was done, but the cell's row lost its count (a search
        # reopened by a runner before `record_search` kept it): count them
        # again from their own rows.
        state.changed = True
        state.record_seeds(condition, arm, n, earlier)


class _State:
    """The results folder of a study being run: what is done, and writing
    each piece as it lands."""

    def __init__(self, study, out_dir, backend):
        self.study = study
        self.out_dir = out_dir
        self.backend = backend
        try:
            self.runs = schema.read_runs(out_dir, backend)
        except ValueError as e:
            raise SweepError(str(e)) from None
        self.curves = schema.read_keyed(
            self._path(schema.CURVES_CSV), "condition", "arm", "seed", "epoch"
        )
        self.search_rows = records.read_csv(
            self._path(schema.SEARCH_TRIALS_CSV)
        )
        # Less the rows of finished searches (left by a kill between the
        # writes of `record_search`), which `search_trials.csv` holds.
        finished = {
            (r.get("condition", ""), r["arm"], int(r["trial_id"]))
            for r in self.search_rows
        }
        self.progress = [
            r
            for r in records.read_csv(self._path(schema.SEARCH_PROGRESS_CSV))
            if (r.get("condition", ""), r["arm"], int(r["trial_id"]))
            not in finished
        ]
        self.cells = schema.read_keyed(
            self._path(schema.CELLS_CSV), "condition", "arm"
        )
        self.chosen = {}
        # Whether this run added anything to the results.
        self.changed = False

    def _path(self, name):
        return os.path.join(self.out_dir, name)

    def reopen(self, name, arm):
        """Whether a searched cell's search goes on: `max_trials` was raised
        since, and the search had ended by its budget, not by itself."""
        cell = self.cells[name, arm]
        budget = int(cell["max_trials"])
        return (
            self.study.search["max_trials"] > budget
            and int(cell["search_trials"]) >= budget
            and not schema._true(cell["bracketed"])
        )

    def rows_of(self, name, arm):
        return [
            r
            for r in self.search_rows
            if r.get("condition", "") == name and r["arm"] == arm
        ]

    def progress_of(self, name, arm):
        """The `search_progress.csv` rows of one cell's search."""
        return [
            r
            for r in self.progress
            if r.get("condition", "") == name and r["arm"] == arm
        ]

    def recorded(self, name, arm):
        """The trials of one cell's search that earlier sittings ended: its
        `search_trials.csv` rows if it is reopened, and then its
        `search_progress.csv` rows, by trial number."""
        rows = {int(r["trial_id"]): r for r in self.rows_of(name, arm)}
        rows.update(
            (int(r["trial_id"]), r) for r in self.progress_of(name, arm)
        )
        return [rows[k] for k in sorted(rows)]

    def record_trial(self, condition, arm, trial):
        """Writes one ended search trial to `search_progress.csv`."""
        row = {
            k: _cell(v)
            for k, v in schema.trial_row(
                self.study, condition, arm, trial
            ).items()
        }
        self.progress = [
            r
            for r in self.progress
            if (r.get("condition", ""), r["arm"], int(r["trial_id"]))
            != (condition.name, arm, int(trial.trial_id))
        ] + [row]
        self._write_progress()

    def _write_progress(self):
        path = self._path(schema.SEARCH_PROGRESS_CSV)
        if self.progress:
            records.write_csv(
                path,
                schema.search_columns(self.study),
                schema.ordered(self.study, self.progress, "trial_id"),
            )
        elif os.path.exists(path):
            os.remove(path)

    def chosen_row(self, name, arm):
        if (name, arm) not in self.chosen:
            row = schema.chosen_row(
                self.rows_of(name, arm), self.study.search["tuner"]
            )
            if row is None:
                raise SweepError(
                    f"no search trial of arm {arm!r}"
                    + (f" in condition {name}" if name else "")
                    + " completed; see the trial errors above. "
                    f"Received: arm={arm!r}"
                )
            self.chosen[name, arm] = row
        return self.chosen[name, arm]

    def record_search(self, study, condition, arm, tuner, wall_time, git):
        """Writes the search rows and the `cells.csv` row of one cell."""
        self.changed = True
        trials = [tuner.oracle.trials[t] for t in sorted(tuner.oracle.trials)]
        rows = [
            {
                k: _cell(v)
                for k, v in schema.trial_row(
                    self.study, condition, arm, t
                ).items()
            }
            for t in trials
        ]
        self.chosen.pop((condition.name, arm), None)
        self.search_rows = [
            r
            for r in self.search_rows
            if (r.get("condition", ""), r["arm"]) != (condition.name, arm)
        ] + rows
        chosen = self.chosen_row(condition.name, arm)
        b = schema.bracket(rows, chosen)
        for r in rows:
            r["bracketed"] = str(b["bracketed"])
        previous = self.cells.get((condition.name, arm), {})
        wall = wall_time + float(previous.get("search_wall_time_s") or 0.0)
        # A reopened search that keeps its choice keeps the seeds retrained
        # from it; one that changes it leaves them to `reconcile_seeds`.
        kept = {}
        if previous.get("chosen_trial_id") and _same_trial(
            previous["chosen_trial_id"], chosen["trial_id"]
        ):
            kept = {
                k: previous[k]
                for k in ("seeds", "seeds_wall_time_s")
                if previous.get(k)
            }
        self.cells[condition.name, arm] = {
            k: _cell(v)
            for k, v in {
                **schema.condition_cells(self.study, condition),
                "arm": arm,
                "search_trials": len(rows),
                "max_trials": study.search["max_trials"],
                "chosen_trial_id": chosen["trial_id"],
                schema.LEARNING_RATE: chosen[schema.LEARNING_RATE],
                **b,
                "search_wall_time_s": wall,
                **kept,
                "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                "git_commit": git[0],
                "git_dirty": git[1],
            }.items()
        }
        records.write_csv(
            self._path(schema.SEARCH_TRIALS_CSV),
            schema.search_columns(self.study),
            schema.ordered(self.study, self.search_rows, "trial_id"),
        )
        self._write_cells()
        # Last: until the cell's row is in `cells.csv`, its progress rows
        # are what a resumed search replays. Rows of other finished cells
        # (left by a kill between these writes) go too.
        self.progress = [
            r
            for r in self.progress
            if (r.get("condition", ""), r["arm"]) not in self.cells
        ]
        self._write_progress()

    def record_run(
        self, study, condition, arm, seed, hp_values, chosen, cell, data, result
    ):
        key = (condition.name, arm, str(seed))
        self.changed = True
        for epoch, metrics in enumerate(result["history"], start=1):
            self.curves[key + (str(epoch),)] = dict(
                metrics,
                arm=arm,
                seed=seed,
                epoch=epoch,
                **schema.condition_cells(self.study, condition),
            )
        # Curves first: a row in trials.csv means the run is complete.
        records.write_csv(
            self._path(schema.CURVES_CSV),
            schema.curve_columns(self.study),
            self.curves.values(),
        )
        self.runs[key] = {
            k: _cell(v)
            for k, v in schema.run_row(
                study,
                arm,
                seed,
                hp_values,
                chosen,
                cell,
                data,
                result,
                self.backend,
                condition,
            ).items()
        }
        self._write_runs()

    def reconcile_seeds(self, condition, arm, chosen, label):
        """Makes a cell's recorded seeds agree with its search's choice.

        A search reopened with more trials (`reopen`) may choose another
        trial than the one the cell's seeds were retrained from: those
        seeds no longer measure the cell, so their `trials.csv` and
        `curves.csv` rows are set aside in
        `superseded/reopened-<condition>-<arm>/` (with a
        `superseded.json`, as `tuning.supersede` writes) and the seeds run
        again. Seeds of an unchanged choice stay; their copies of the
        search's outcome (trial count, bracket) are brought up to date.
        """
        name = condition.name
        rows = [
            r for (c, a, _), r in self.runs.items() if (c, a) == (name, arm)
        ]
        stale = [
            r
            for r in rows
            if r.get("search_trial_id")
            and not _same_trial(r["search_trial_id"], chosen["trial_id"])
        ]
        if stale:
            where = self._set_aside_seeds(condition, arm, chosen, stale)
            log(
                f"{label}: the reopened search chose trial "
                f"{chosen['trial_id']} (learning_rate "
                f"{float(chosen[schema.LEARNING_RATE]):.3g}), not trial "
                f"{stale[0]['search_trial_id']} (learning_rate "
                f"{float(stale[0][schema.LEARNING_RATE]):.3g}) that its "
                f"{len(stale)} recorded seed(s) were retrained from: they "
                f"are set aside in {where} and retrained"
            )
        cell = self.cells[name, arm]
        current = {
            "search_val_accuracy": chosen[schema.OBJECTIVE],
            "search_trials": cell["search_trials"],
            **{k: cell[k] for k in schema.BRACKET_COLUMNS},
        }
        outdated = [
            r
            for r in rows
            if r not in stale and any(r.get(k) != v for k, v in current.items())
        ]
        for r in outdated:
            r.update(current)
        if outdated:
            self.changed = True
            self._write_runs()

    def _set_aside_seeds(self, condition, arm, chosen, stale):
        from tuning import supersede

        name = condition.name
        keys = {(name, arm, r["seed"]) for r in stale}
        curves = [r for k, r in self.curves.items() if k[:3] in keys]
        base = os.path.join(
            self.out_dir,
            supersede.SUPERSEDED_DIR,
            "reopened-" + "-".join(p for p in (name, arm) if p),
        )
        dest, n = base, 1
        while os.path.exists(dest):
            n += 1
            dest = f"{base}-{n}"
        os.makedirs(dest)
        # First the copies, then the originals: killed halfway, nothing is
        # lost (and the seeds, still in `trials.csv`, are set aside again).
        records.write_csv(
            os.path.join(dest, schema.TRIALS_CSV),
            schema.run_columns(self.study),
            stale,
        )
        records.write_csv(
            os.path.join(dest, schema.CURVES_CSV),
            schema.curve_columns(self.study),
            curves,
        )
        old = stale[0]
        commit, dirty = provenance.git_state()
        records.write_json(
            os.path.join(dest, supersede.SUPERSEDED_JSON),
            {
                "study": self.study.results_name,
                "arms": [arm],
                "condition": name,
                "reason": (
                    f"The search was reopened with max_trials "
                    f"{self.study.search['max_trials']} and chose trial "
                    f"{chosen['trial_id']} (learning_rate "
                    f"{chosen[schema.LEARNING_RATE]}), not trial "
                    f"{old['search_trial_id']} (learning_rate "
                    f"{old[schema.LEARNING_RATE]}) that these seeds were "
                    "retrained from; the seeds run again at the new choice."
                ),
                "superseded_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                "git_commit": commit,
                "git_dirty": dirty,
                "command": "",
                "rows": {
                    schema.TRIALS_CSV: len(stale),
                    schema.CURVES_CSV: len(curves),
                },
                "study_wide_files": [],
            },
        )
        for key in keys:
            self.runs.pop(key)
        for key in [k for k in self.curves if k[:3] in keys]:
            self.curves.pop(key)
        records.write_csv(
            self._path(schema.CURVES_CSV),
            schema.curve_columns(self.study),
            self.curves.values(),
        )
        self._write_runs()
        cell = self.cells[name, arm]
        for k in ("seeds", "seeds_wall_time_s"):
            cell.pop(k, None)
        self._write_cells()
        self.changed = True
        return os.path.relpath(dest, self.out_dir)

    def _write_runs(self):
        records.write_csv(
            self._path(schema.TRIALS_CSV),
            schema.run_columns(self.study),
            schema.ordered(self.study, self.runs.values(), "seed"),
        )

    def record_seeds(self, condition, arm, seeds, wall_time):
        cell = self.cells[condition.name, arm]
        previous = float(cell.get("seeds_wall_time_s") or 0.0)
        cell.update(
            seeds=str(seeds),
            seeds_wall_time_s=str(previous + wall_time),
            finished_at=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        )
        self._write_cells()

    def _write_cells(self):
        records.write_csv(
            self._path(schema.CELLS_CSV),
            schema.cell_columns(self.study),
            schema.ordered(self.study, self.cells.values()),
        )


def _finish(state, datas, backend, role, start, git_at_start, options, out_dir):
    from tuning import plots
    from tuning import report

    study = state.study
    runs = schema.ordered(study, state.runs.values(), "seed")
    conditions = study.conditions()
    summary_path = os.path.join(out_dir, schema.SUMMARY_JSON)
    if not state.changed and os.path.isfile(summary_path):
        # Nothing new: the results, their summary and report stay as the
        # runs that made them wrote them.
        log(f"results: {out_dir}, already complete; nothing was trained")
        _log_results(state, records.read_json(summary_path), start)
        return records.read_json(summary_path)
    labels = {d.label for d in datas.values()}
    paths = plots.plot_all(
        out_dir,
        f"{study.results_name}: {', '.join(sorted(labels))}, {backend}",
        study.arms,
        runs,
        list(state.curves.values()),
        state.search_rows,
        conditions=[c.name for c in conditions] if study.grid else None,
        metric="val_accuracy" if study.selects else "test_accuracy",
    )
    summary = schema.summary(
        study,
        datas,
        backend,
        options.command,
        runs,
        state.cells,
        role,
        time.perf_counter() - start,
        git_at_start=git_at_start,
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
    _log_results(state, summary, start)
    return summary


def _log_results(state, summary, start):
    """The last lines of a run: the bracketing table, the accuracies, the
    unbracketed cells."""
    study = state.study
    conditions = study.conditions()
    log(
        "bracketing: chosen learning rate, nearest completed non-diverged "
        "neighbours below and above"
    )
    for condition in conditions:
        for arm in study.arms:
            cell = state.cells[condition.name, arm]
            log(
                f"  {condition.name + ' ' if condition.name else ''}{arm}: "
                f"{float(cell['learning_rate']):.3g} " + _bracket_words(cell)
            )
    for condition in conditions:
        arms = (
            summary["conditions"][condition.name]["arms"]
            if study.grid
            else summary["arms"]
        )
        for arm, s in arms.items():
            name = f"{condition.name + ' ' if condition.name else ''}{arm}"
            if study.selects:
                vals = [
                    float(r["val_accuracy"])
                    for (c, a, _), r in state.runs.items()
                    if (c, a) == (condition.name, arm)
                ]
                log(
                    f"{name}: val_accuracy "
                    f"{sum(vals) / max(len(vals), 1):.4f} over {len(vals)} "
                    "seeds (a selection study: report.md ranks on it)"
                )
                continue
            log(
                f"{name}: test_accuracy {s['test_accuracy_mean']:.4f} +- "
                f"{s['test_accuracy_std']:.4f} over {s['seeds']} seeds"
            )
    unbracketed = [
        {"condition": name, "arm": arm}
        for (name, arm), cell in state.cells.items()
        if not schema._true(cell["bracketed"])
    ]
    if unbracketed:
        log(
            f"{len(unbracketed)} of {len(conditions) * len(study.arms)} "
            "cells are NOT bracketed (their chosen rate lacks a completed, "
            "non-diverged neighbour within a factor of 2 on some side): "
            + ", ".join(
                f"{u['condition'] + ' ' if u['condition'] else ''}{u['arm']}"
                for u in unbracketed
            )
        )
    else:
        log("every cell is bracketed")
    log(f"done in {search.elapsed(start)}")


def _bracket_words(cell):
    below = cell.get("lr_below_factor") or ""
    above = cell.get("lr_above_factor") or ""
    return (
        (f"below /{float(below):.2f}" if below else "nothing below")
        + ", "
        + (f"above x{float(above):.2f}" if above else "nothing above")
        + (
            ", bracketed"
            if schema._true(cell["bracketed"])
            else ", NOT bracketed"
        )
    )


def reproduce(study, options, arm, seed, condition=None):
    """Retrains one recorded (condition, arm, seed) and prints both test
    accuracies.

    Returns:
        dict: what `training.train_and_evaluate` returns.

    Raises:
        SweepError: for a run that is not recorded.
    """
    import keras

    name = condition
    if study.grid and name is None:
        raise SweepError(
            f"study {study.results_name!r} has a [grid]: pass --condition "
            f"NAME, one of {[c.name for c in study.conditions()]}. "
            "Received: condition=None"
        )
    if not study.grid and name is not None:
        raise SweepError(
            f"study {study.results_name!r} has no [grid], hence no "
            f"conditions; leave --condition out. Received: condition={name!r}"
        )
    condition = study.condition(name) if study.grid else study.conditions()[0]
    out_dir = os.path.join(options.results_dir, study.results_name)
    trials_csv = os.path.join(out_dir, schema.TRIALS_CSV)
    rows = records.read_csv(trials_csv)
    if not rows:
        raise SweepError(
            f"no finished runs to reproduce: {trials_csv} is missing or "
            "empty; run the study first. Received: "
            f"study={study.results_name!r}"
        )
    rows = [r for r in rows if r.get("condition", "") == condition.name]
    matches = [r for r in rows if r["arm"] == arm and r["seed"] == str(seed)]
    if not matches:
        available = sorted({(r["arm"], int(r["seed"])) for r in rows})
        where = f" of condition {condition.name}" if condition.name else ""
        raise SweepError(
            f"no recorded run for this arm and seed{where} in "
            f"{trials_csv}; expected one of "
            f"{', '.join(f'{a} {s}' for a, s in available)}. "
            f"Received: arm={arm!r}, seed={str(seed)!r}"
            + (f", condition={condition.name!r}" if condition.name else "")
        )
    row = matches[-1]
    backend = keras.backend.backend()
    if row.get("backend") and row["backend"] != backend:
        log(
            f"note: recorded with backend {row['backend']}, reproducing "
            f"with {backend}; expect small differences"
        )
    summary = records.read_json(os.path.join(out_dir, schema.SUMMARY_JSON))
    cores = ((summary or {}).get("machine") or {}).get("cpus_usable")
    if cores and cores != provenance.usable_cpus():
        log(
            f"note: the study's summary was written by a process on {cores} "
            f"usable core(s); this one has {provenance.usable_cpus()}. "
            "XLA's CPU convolutions can round differently with the number "
            "of cores: to match, run on as many (`taskset -c 0` for one)"
        )
    hp_values = schema.hyperparameters(row)
    study = study.at(condition)
    data = load_data(study, options.data_dir, options.tfds_data_dir)
    log(
        f"reproducing {study.results_name} "
        + (f"condition {condition.name} " if condition.name else "")
        + f"arm {arm} seed {seed} with {search.format_hps(hp_values)} on "
        f"{data.label}"
    )
    result = training.train_and_evaluate(
        study,
        arm,
        hp_values,
        data,
        study.rerun_seed(seed),
        callbacks=options.callbacks,
    )
    recorded = float(row["test_accuracy"])
    print(
        f"test_accuracy {result['test_accuracy']:.4f} (recorded "
        f"{recorded:.4f}, difference "
        f"{result['test_accuracy'] - recorded:+.4f})",
        flush=True,
    )
    return result


def load_data(study, data_dir, tfds_data_dir=None):
    """Loads the study's dataset subsets.

    Raises:
        SweepError: if the data is missing, badly laid out or unavailable.
    """
    from keras_affine_div import datasets

    f = study.fixed
    n = f["train_samples"] + f["val_samples"]
    declared = (
        f"the study declares train_samples={f['train_samples']} + "
        f"val_samples={f['val_samples']} = {n} images of the training split "
        f"and test_samples={f['test_samples']}"
    )
    try:
        data = datasets.load(
            f["dataset"],
            data_dir=data_dir,
            tfds_data_dir=tfds_data_dir,
            validation_split=f["val_samples"] / n,
            seed=0,
            max_train_samples=n,
            max_test_samples=f["test_samples"],
        )
    except ValueError as e:
        raise SweepError(f"cannot load the data: {declared}: {e}") from None
    except (
        TypeError,
        FileNotFoundError,
        datasets.DataUnavailableError,
    ) as e:
        raise SweepError(f"cannot load the data: {e}") from None
    got = (len(data.x_train), len(data.x_val), len(data.x_test))
    want = (f["train_samples"], f["val_samples"], f["test_samples"])
    if got != want:
        # Never train on other data than the study says.
        raise SweepError(
            f"cannot load the data: {declared}, but the split gave "
            f"{got[0]} training, {got[1]} validation and {got[2]} test "
            "images; nothing was trained"
        )
    return data


def _data_of(study, data_dir, loaded, tfds_data_dir=None):
    """The data of a (condition-resolved) study, loaded once per subset."""
    key = tuple(study.fixed[k] for k in schema.DATA_KEYS)
    if key in loaded:
        return loaded[key]
    data = load_data(study, data_dir, tfds_data_dir)
    log(
        f"data: {data.label}, {len(data.x_train)} train / {len(data.x_val)} "
        f"val / {len(data.x_test)} test images of shape {data.input_shape}"
    )
    loaded[key] = data
    return data


def _tensorboard_dir(options, study):
    if not options.tensorboard:
        return None
    return os.path.join(options.tensorboard, study.results_name)


def _same_trial(a, b):
    """Whether two trial IDs name one trial: `"07"` is `"7"` (the padding
    of KerasTuner's counters depends on `max_trials`)."""
    a, b = str(a).strip(), str(b).strip()
    if a.isdigit() and b.isdigit():
        return int(a) == int(b)
    return a == b


def _label(study, condition, c, i, arm):
    where = (
        f"condition {c + 1}/{len(study.conditions())} {condition.name} "
        if study.grid
        else ""
    )
    return f"{where}arm {i + 1}/{len(study.arms)} {arm}"


def _shared(cells, options):
    """The cells of `cells` that `options.arms`/`conditions` select."""
    return [
        (c, condition, i, arm)
        for c, condition, i, arm in cells
        if (options.arms is None or arm in options.arms)
        and (options.conditions is None or condition.name in options.conditions)
    ]


def _check_share(study, options, role):
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


def _role():
    try:
        return distributed.role()
    except distributed.DistributedError as e:
        raise SweepError(str(e)) from None


def _check_same_study(study, runs_dir, out_dir, backend):
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


def _cell(value):
    """A value as it reads back from a CSV (so that fresh rows and rows
    read from the files compare alike)."""
    if value is None:
        return ""
    if isinstance(value, (list, tuple)):
        return " ".join(str(v) for v in value)
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return str(int(value))
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        return repr(float(value))
    return str(value)


def log(message):
    print(message, flush=True)
