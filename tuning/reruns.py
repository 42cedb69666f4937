"""Retraining a searched cell's chosen setting on the study's seeds.

`rerun_seeds(sitting, cell)` trains every seed of the cell that its
results folder does not hold yet (from `Study.rerun_seed`), evaluates
each on test, and records each seed's run as soon as it ends.
"""

import time

from tuning import schema
from tuning import search
from tuning import training
from tuning.console import log


def rerun_seeds(sitting, cell):
    """Retrains the chosen setting of one cell on every seed not yet
    done.

    Args:
        sitting: the run's `sitting.Sitting`.
        cell: a searched `sitting.Cell`.
    """
    state, study = sitting.state, cell.at
    name, arm = cell.key
    label = "[seeds] " + cell.label
    chosen = state.chosen_row(name, arm)
    row = state.cells[cell.key]
    n = study.fixed["seeds"]
    state.reconcile_seeds(cell.condition, arm, chosen, label)
    t0 = time.perf_counter()
    trained = False
    # `cells.csv` counts a cell's seed time when its seeds end; seeds that
    # a stopped sitting finished are counted from their `trials.csv` rows.
    counted = int(row.get("seeds") or 0)
    earlier = 0.0
    # A selection study chooses on validation: its console shows no test.
    shown = "val_accuracy" if study.selects else "test_accuracy"
    for seed in range(n):
        key = (name, arm, str(seed))
        if key in state.runs:
            if seed >= counted:
                earlier += float(state.runs[key].get("wall_time_s") or 0.0)
            log(
                f"{label} seed {seed + 1}/{n}: already done ({shown} "
                f"{float(state.runs[key][shown]):.4f}), skipped"
            )
            continue
        _train_seed(sitting, cell, seed, chosen, row, label)
        trained = True
    if trained:
        state.record_seeds(
            cell.condition, arm, n, time.perf_counter() - t0 + earlier
        )
    elif (
        earlier
        and not row.get("seeds")
        and all((name, arm, str(seed)) in state.runs for seed in range(n))
    ):
        # Every seed was done, but the cell's row lost its count (a search
        # reopened by a runner before `record_search` kept it): count them
        # again from their own rows.
        state.changed = True
        state.record_seeds(cell.condition, arm, n, earlier)


def _train_seed(sitting, cell, seed, chosen, row, label):
    """Retrains a cell's chosen setting (`chosen`, its search row; `row`,
    its `cells.csv` row) on one seed, and records the run."""
    study, options = cell.at, sitting.options
    hp_values = schema.hyperparameters(chosen)
    data = sitting.datas[cell.condition.name]
    callbacks = list(options.callbacks)
    if options.tensorboard:
        from tuning import tensorboard

        callbacks += tensorboard.callbacks(
            sitting.tensorboard_dir,
            tensorboard.run_name(cell.condition.name, cell.arm, "seed", seed),
            {
                **hp_values,
                "arm": cell.arm,
                "seed": seed,
                **schema.condition_cells(sitting.study, cell.condition),
            },
        )
    result = training.train_and_evaluate(
        study,
        cell.arm,
        hp_values,
        data,
        study.rerun_seed(seed),
        callbacks=callbacks,
        verbose=1 if options.verbose else 0,
    )
    sitting.state.record_run(
        study,
        cell.condition,
        cell.arm,
        seed,
        hp_values,
        chosen,
        row,
        data,
        result,
    )
    log(
        f"{label} seed {seed + 1}/{study.fixed['seeds']}: "
        + (
            f"val_accuracy {result['val_accuracy']:.4f} (a selection "
            "study: chosen on validation"
            if study.selects
            else f"test_accuracy {result['test_accuracy']:.4f} (val "
            f"{result['val_accuracy']:.4f}"
        )
        + search.failure(result, data.num_classes, ", {}")
        + f") in {result['wall_time_s']:.1f} s; elapsed "
        f"{search.elapsed(sitting.start)}"
    )
