"""The results folder of a study being run: what is done, and each piece
written as it lands.

`ResultsState` reads a study's results folder (`tuning.schema` names its
files and columns) and keeps it current as the run goes: a search trial's
`search_progress.csv` row when the trial ends, a cell's `search_trials.csv`
rows and `cells.csv` row when its search ends, a seed's `curves.csv` and
`trials.csv` rows when the seed ends. It also says which searches go on
(`reopen`), which setting each cell chose (`chosen_row`), and sets aside
the seeds of a reopened search that chose another trial
(`reconcile_seeds`).
"""

import numbers
import os
import time

from tuning import records
from tuning import schema
from tuning.console import log
from tuning.errors import SweepError


class ResultsState:
    """The results folder of a study being run: what is done, and writing
    each piece as it lands.

    Args:
        study: the `Study` being run.
        out_dir: its results folder.
        backend: the Keras backend of the run.

    Raises:
        SweepError: if `trials.csv` holds runs of another backend.
    """

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
            and not records.is_true(cell["bracketed"])
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
            schema.write_rows(
                self.out_dir,
                self.study,
                schema.SEARCH_PROGRESS_CSV,
                self.progress,
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
        if previous.get("chosen_trial_id") and same_trial(
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
        schema.write_rows(
            self.out_dir, self.study, schema.SEARCH_TRIALS_CSV, self.search_rows
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
        schema.write_rows(
            self.out_dir, self.study, schema.CURVES_CSV, self.curves.values()
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
            and not same_trial(r["search_trial_id"], chosen["trial_id"])
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
        schema.write_rows(dest, self.study, schema.TRIALS_CSV, stale)
        schema.write_rows(dest, self.study, schema.CURVES_CSV, curves)
        old = stale[0]
        supersede.write_record(
            dest,
            self.study,
            [arm],
            (
                f"The search was reopened with max_trials "
                f"{self.study.search['max_trials']} and chose trial "
                f"{chosen['trial_id']} (learning_rate "
                f"{chosen[schema.LEARNING_RATE]}), not trial "
                f"{old['search_trial_id']} (learning_rate "
                f"{old[schema.LEARNING_RATE]}) that these seeds were "
                "retrained from; the seeds run again at the new choice."
            ),
            rows={
                schema.TRIALS_CSV: len(stale),
                schema.CURVES_CSV: len(curves),
            },
            condition=name,
        )
        for key in keys:
            self.runs.pop(key)
        for key in [k for k in self.curves if k[:3] in keys]:
            self.curves.pop(key)
        schema.write_rows(
            self.out_dir, self.study, schema.CURVES_CSV, self.curves.values()
        )
        self._write_runs()
        cell = self.cells[name, arm]
        for k in ("seeds", "seeds_wall_time_s"):
            cell.pop(k, None)
        self._write_cells()
        self.changed = True
        return os.path.relpath(dest, self.out_dir)

    def _write_runs(self):
        schema.write_rows(
            self.out_dir, self.study, schema.TRIALS_CSV, self.runs.values()
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
        schema.write_rows(
            self.out_dir, self.study, schema.CELLS_CSV, self.cells.values()
        )


def same_trial(a, b):
    """Whether two trial IDs name one trial: `"07"` is `"7"` (the padding
    of KerasTuner's counters depends on `max_trials`)."""
    a, b = str(a).strip(), str(b).strip()
    if a.isdigit() and b.isdigit():
        return int(a) == int(b)
    return a == b


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
