"""What a run of a study prints on the console.

`log` prints one line at once; `log_results` prints the last lines of a
run (the bracketing table, the accuracies, the unbracketed cells);
`bracket_words` says in words how a cell's chosen learning rate is
bracketed.
"""

from tuning import records
from tuning import search


def log(message):
    """Prints `message` on stdout, flushed at once."""
    print(message, flush=True)


def log_results(state, summary, start):
    """The last lines of a run: the bracketing table, the accuracies, the
    unbracketed cells.

    Args:
        state: the `results_state.ResultsState` of the run.
        summary: dict, the run's `summary.json`.
        start: the `time.perf_counter()` at which the run started.
    """
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
                f"{float(cell['learning_rate']):.3g} " + bracket_words(cell)
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
        if not records.is_true(cell["bracketed"])
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


def bracket_words(cell):
    """How a cell's chosen learning rate is bracketed, in words.

    Args:
        cell: dict, the cell's `cells.csv` row.

    Returns:
        str: e.g. `"below /2.00, nothing above, NOT bracketed"`.
    """
    below = cell.get("lr_below_factor") or ""
    above = cell.get("lr_above_factor") or ""
    return (
        (f"below /{float(below):.2f}" if below else "nothing below")
        + ", "
        + (f"above x{float(above):.2f}" if above else "nothing above")
        + (
            ", bracketed"
            if records.is_true(cell["bracketed"])
            else ", NOT bracketed"
        )
    )
