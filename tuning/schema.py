"""The result files of a study: their names, columns and rows.

One place for what `tuning.runner` writes and `tuning.report`,
`tuning.plots` and `tuning.divergence` read, in `tuning/results/<study>/`:

- `search_trials.csv`: one row per search trial of every (condition, arm)
  cell, written when the cell's search is over;
- `search_progress.csv`: the same rows for the search under way, written
  as each trial ends and emptied of a cell's rows when its search is over
  (no such file once every search is): what a search resumes from when
  its KerasTuner project is gone;
- `cells.csv`: one row per cell whose search is over: the chosen trial, its
  bracket, how long the search and the seed reruns took;
- `trials.csv`: one row per (condition, arm, seed) rerun, written as each
  finishes;
- `curves.csv`: the per-epoch metrics of the reruns;
- `study.json`: the study as it was run (what may not change on resume);
- `summary.json`: the study's config, data, backend, versions, commit and
  command, and per cell the accuracies over seeds (`tuning.run_summary`
  builds it).

A cell is *searched* once it has a row in `cells.csv`, and *done* once
`trials.csv` holds every seed of it: a run resumes from these files alone,
without the KerasTuner projects of `tuning/runs/`, an unfinished search
included.
"""

import json
import math
import os

from tuning import bracketing
from tuning import provenance
from tuning import records
from tuning import study as study_module

DEFAULT_RESULTS_DIR = str(provenance.REPO_ROOT / "tuning" / "results")
DEFAULT_RUNS_DIR = str(provenance.REPO_ROOT / "tuning" / "runs")
TRIALS_CSV = "trials.csv"
SEARCH_TRIALS_CSV = "search_trials.csv"
SEARCH_PROGRESS_CSV = "search_progress.csv"
CELLS_CSV = "cells.csv"
CURVES_CSV = "curves.csv"
SUMMARY_JSON = "summary.json"
REPORT_MD = "report.md"
# In the runs and results folders: what the study was when they were made.
STUDY_JSON = "study.json"
# Seeds trained afresh for the reruns that replayed their search's choice
# (`tuning.fresh_seeds`).
FRESH_SEEDS_CSV = "fresh_seeds.csv"

# The names of the hyperparameters in the result tables: those the
# HyperModels declare (`keras_affine_div.hypermodels`, which imports Keras;
# tests/tuning/schema_test.py checks that they agree).
LEARNING_RATE = "learning_rate"
OPTIMIZER = "optimizer"
KERNEL_SCALE = "kernel_scale"
HYPERPARAMETER_NAMES = (LEARNING_RATE, OPTIMIZER, KERNEL_SCALE)
OBJECTIVE = "val_accuracy"

RUN_METRICS = (
    "test_accuracy",
    "test_loss",
    "val_accuracy",
    "val_loss",
    "final_train_loss",
    "final_train_accuracy",
    "epochs",
    "wall_time_s",
)
# Of a run, after RUN_METRICS: whether it diverged, its optimizer steps.
RUN_EXTRAS = ("diverged", "steps")
TRIAL_METRICS = (
    "val_accuracy",
    "val_loss",
    "loss",
    "accuracy",
    "wall_time_s",
    "diverged",
)
CURVE_COLUMNS = (
    "arm",
    "seed",
    "epoch",
    "loss",
    "accuracy",
    "val_loss",
    "val_accuracy",
)
BRACKET_COLUMNS = ("bracketed", "lr_below_factor", "lr_above_factor")
CELL_COLUMNS = (
    "arm",
    "search_trials",
    "max_trials",
    "chosen_trial_id",
    LEARNING_RATE,
    *BRACKET_COLUMNS,
    "search_wall_time_s",
    "seeds",
    "seeds_wall_time_s",
    "finished_at",
    "git_commit",
    "git_dirty",
)
# The columns of a search trial or a seed run that say how fast, not what.
CLOCKS = ("wall_time_s",)
# The key of a row, by file: what no two rows of the file share.
ROW_KEYS = {
    CELLS_CSV: ("condition", "arm"),
    SEARCH_TRIALS_CSV: ("condition", "arm", "trial_id"),
    SEARCH_PROGRESS_CSV: ("condition", "arm", "trial_id"),
    TRIALS_CSV: ("condition", "arm", "seed"),
    CURVES_CSV: ("condition", "arm", "seed", "epoch"),
}
# What a condition can change of the data: one load per distinct value.
DATA_KEYS = ("dataset", "train_samples", "val_samples", "test_samples")


def project_dir(runs_dir, condition_name, arm):
    """The KerasTuner project of a cell: `<runs_dir>/[<condition>/]<arm>`
    (`runs_dir` the study's own folder of runs)."""
    if condition_name:
        return os.path.join(runs_dir, condition_name, arm)
    return os.path.join(runs_dir, arm)


def grid_columns(study):
    """The leading columns of a study with a grid: condition and its keys."""
    return ("condition", *study.grid) if study.grid else ()


def condition_cells(study, condition):
    """The `condition` column and the grid values of a result row."""
    if not study.grid:
        return {}
    return {"condition": condition.name, **condition.values}


def curve_columns(study):
    return (*grid_columns(study), *CURVE_COLUMNS)


def search_columns(study=None):
    return (
        *(grid_columns(study) if study is not None else ()),
        "arm",
        "trial_id",
        "status",
        TRIAL_METRICS[0],
        *HYPERPARAMETER_NAMES,
        *TRIAL_METRICS[1:],
        "bracketed",
    )


def cell_columns(study):
    return (*grid_columns(study), *CELL_COLUMNS)


def run_columns(study):
    columns = (
        "study",
        "arm",
        "seed",
        *RUN_METRICS,
        *RUN_EXTRAS,
        *HYPERPARAMETER_NAMES,
        "search_trial_id",
        "search_val_accuracy",
        "search_trials",
        *BRACKET_COLUMNS,
        "family",
        "dataset",
        "dataset_label",
        "train_samples",
        "val_samples",
        "test_samples",
        *study_module.MODEL_KEYS[study.family],
        "batch_size",
        "tuner",
        "max_trials",
        "lr_low",
        "lr_high",
        "optimizers",
        "kernel_scales",
        "lr_step",
        "learning_rate_limits",
        "schedule",
        "warmup_epochs",
        "momentum",
        "backend",
    )
    if not study.grid:
        return columns
    # The grid values are columns already (as fixed settings, or as the
    # `optimizers` searched); the condition goes after the study.
    return (
        columns[0],
        "condition",
        *columns[1:],
        *(k for k in study.grid if k not in columns),
    )


# Search trials.


# The columns of each file whose rows a cell adds, by file name.
COLUMNS = {
    CURVES_CSV: curve_columns,
    TRIALS_CSV: run_columns,
    SEARCH_TRIALS_CSV: search_columns,
    SEARCH_PROGRESS_CSV: search_columns,
    CELLS_CSV: cell_columns,
}


def trial_row(study, condition, arm, trial):
    """One row of search_trials.csv from a KerasTuner trial."""
    row = {
        "arm": arm,
        "trial_id": trial.trial_id,
        "status": trial.status,
        **condition_cells(study, condition),
    }
    row.update(trial.hyperparameters.values)
    for name in TRIAL_METRICS:
        if trial.metrics.exists(name):
            row[name] = trial.metrics.get_last_value(name)
    if "diverged" in row:
        row["diverged"] = bool(row["diverged"])
    return row


def points(rows):
    """The `bracketing.Point`s of the search rows of one cell."""
    out = []
    for r in rows:
        if not r.get(LEARNING_RATE):
            continue
        lr = float(r[LEARNING_RATE])
        if r["status"] != "COMPLETED":
            out.append(bracketing.Point(lr, "failed"))
        elif _diverged(r):
            out.append(bracketing.Point(lr, "diverged"))
        else:
            out.append(bracketing.Point(lr, "ok", float(r[OBJECTIVE])))
    return out


def chosen_row(rows, tuner):
    """The search row of one cell whose setting is retrained.

    The bracketing search chooses as `bracketing.summarize` does (the best
    completed, non-diverged trial, ties to the lower rate); the random and
    Bayesian searches as KerasTuner does (the best completed trial, ties to
    the earlier one).

    Returns:
        dict or None: the row, or `None` if no trial completed.
    """
    completed = [
        r
        for r in rows
        if r["status"] == "COMPLETED" and records.is_finite(r.get(OBJECTIVE))
    ]
    if tuner == "bracket":
        chosen = bracketing.summarize(points(rows))["chosen"]
        if chosen is None:
            return None
        return next(
            r
            for r in completed
            if not _diverged(r)
            and math.isclose(float(r[LEARNING_RATE]), chosen, rel_tol=1e-12)
        )
    if not completed:
        return None
    return max(completed, key=lambda r: float(r[OBJECTIVE]))


def bracket(rows, chosen):
    """The bracket of the chosen rate among the search rows of its cell.

    Returns:
        dict: `bracketed` (bool), `lr_below_factor` (the chosen rate over
        its nearest completed, non-diverged neighbour below) and
        `lr_above_factor` (that neighbour above over the chosen rate),
        `None` where there is none.
    """
    b = bracketing.bracket_of(points(rows), float(chosen[LEARNING_RATE]))
    return {
        "bracketed": b["bracketed"],
        "lr_below_factor": b["below"],
        "lr_above_factor": b["above"],
    }


def hyperparameters(row):
    """The hyperparameter values of a search or trials row."""
    values = {
        LEARNING_RATE: float(row[LEARNING_RATE]),
        OPTIMIZER: row[OPTIMIZER],
    }
    if row.get(KERNEL_SCALE) not in (None, ""):
        values[KERNEL_SCALE] = float(row[KERNEL_SCALE])
    return values


# Reruns.


def run_row(
    study,
    arm,
    seed,
    hp_values,
    chosen,
    cell,
    data,
    result,
    backend,
    condition=None,
):
    """One row of trials.csv; `study` is resolved at `condition`, so that
    the fixed settings in the row are the condition's."""
    s, f = study.search, study.fixed
    row = {"study": study.results_name, "arm": arm, "seed": seed}
    if condition is not None and condition.name:
        row["condition"] = condition.name
        # Every grid value, those the columns below leave out included
        # (`baseline_kernel_scale`).
        row.update(
            {k: v for k, v in condition.values.items() if k != "optimizers"}
        )
    row.update({k: result[k] for k in RUN_METRICS + RUN_EXTRAS})
    row.update(hp_values)
    row.update(
        search_trial_id=chosen["trial_id"],
        search_val_accuracy=chosen[OBJECTIVE],
        search_trials=cell["search_trials"],
        **{k: cell[k] for k in BRACKET_COLUMNS},
        family=study.family,
        dataset=f["dataset"],
        dataset_label=data.label,
        train_samples=len(data.x_train),
        val_samples=len(data.x_val),
        test_samples=len(data.x_test),
        batch_size=f["batch_size"],
        tuner=s["tuner"],
        max_trials=s["max_trials"],
        lr_low=s["learning_rate"][0],
        lr_high=s["learning_rate"][1],
        optimizers=s["optimizers"],
        kernel_scales=s["kernel_scales"],
        lr_step=s["lr_step"],
        learning_rate_limits=s["learning_rate_limits"],
        schedule=f["schedule"],
        warmup_epochs=f["warmup_epochs"],
        momentum=f["momentum"],
        backend=backend,
        **study.model_kwargs,
    )
    baseline = f.get("baseline_kernel_scale")
    if row.get(KERNEL_SCALE) is None and baseline is not None:
        from keras_affine_div import models

        arm_ = models.get_arm(study.family, arm)
        if arm_.scale_sensitive and not arm_.ours:
            # The plain baseline's multiplier on its default kernel, as
            # `models.mlp`'s `kernel_scale` means it.
            row[KERNEL_SCALE] = baseline
    return row


def fresh_seed_columns(study):
    """The columns of `fresh_seeds.csv`: those of `trials.csv` (`seed` the
    seed trained from), then `replaces_seed`."""
    return (*run_columns(study), "replaces_seed")


def read_runs(out_dir, backend):
    """The rows of trials.csv by (condition, arm, seed).

    Raises:
        ValueError: if a row was made with another backend.
    """
    runs = {}
    for row in records.read_csv(os.path.join(out_dir, TRIALS_CSV)):
        if row.get("backend") not in (None, "", backend):
            raise ValueError(
                f"{os.path.join(out_dir, TRIALS_CSV)} holds runs made with "
                f"the {row['backend']} backend; set KERAS_BACKEND to it or "
                f"pass --overwrite. Received: backend={backend!r}"
            )
        runs[row.get("condition", ""), row["arm"], row["seed"]] = row
    return runs


def read_keyed(path, *keys):
    """The rows of a CSV by the values of `keys` (`condition` may be
    absent)."""
    return {
        tuple(r.get(k, "") for k in keys): r for r in records.read_csv(path)
    }


def by_key(rows, *keys):
    """`rows` by the values of `keys` (`condition` may be absent); trial
    ids, seeds and epochs as counters (`"07"` is 7)."""
    out = {}
    for r in rows:
        key = tuple(
            int(r[k]) if k in ("trial_id", "seed", "epoch") else r.get(k, "")
            for k in keys
        )
        out[key] = r
    return out


def without_clocks(row):
    """A row less its `CLOCKS`, trial ids as counters: two runs that
    measured the same say the same."""
    out = {c: v for c, v in row.items() if c not in CLOCKS}
    for c in ("trial_id", "search_trial_id"):
        if out.get(c):
            out[c] = str(int(out[c]))
    return out


def row_fingerprint(file_name, row):
    """A row of `file_name` as a hashable value, clocks left out."""
    return (file_name, tuple(sorted(without_clocks(row).items())))


def ordered(study, rows, *extra):
    """`rows` in study order: condition, arm, then the int columns
    `extra`."""
    names = [c.name for c in study.conditions()]

    def key(r):
        condition = r.get("condition", "")
        return (
            names.index(condition) if condition in names else len(names),
            study.arms.index(r["arm"])
            if r["arm"] in study.arms
            else len(study.arms),
            *(int(r[k]) for k in extra),
        )

    return sorted(rows, key=key)


def write_rows(folder, study, file_name, rows):
    """Writes the rows of one of the files a cell adds to (`ROW_KEYS`),
    whole: the file's columns, its rows in study order (condition, arm,
    then the rest of the file's key)."""
    records.write_csv(
        os.path.join(folder, file_name),
        COLUMNS[file_name](study),
        ordered(study, rows, *ROW_KEYS[file_name][2:]),
    )


def fingerprint(study):
    """What must not change between a run of `study` and its resumption
    (written to `study.json`)."""
    config = study.config()
    config["search"].pop("max_trials")
    config["fixed"].pop("seeds")
    config.pop("description")
    return config


def same_study(previous, current):
    """Whether two `study.json` fingerprints describe the same runs:
    equal but for what only the report reads (`compare.selects`)."""
    if previous is None or current is None:
        return previous is current

    def runs_part(config):
        config = json.loads(json.dumps(config))
        config.get("compare", {}).pop("selects", None)
        return config

    return runs_part(previous) == runs_part(current)


def _diverged(row):
    value = row.get("diverged", "")
    if value not in ("", None):
        return records.is_true(value)
    # Rows written before divergence was recorded: a non-finite loss.
    return not records.is_finite(row.get("loss")) if row.get("loss") else False
