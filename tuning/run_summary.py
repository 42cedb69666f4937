"""`summary.json`: what a run of a study was and what it found.

The study's config, data, backend, library versions, machine, commit and
command, and per (condition, arm) cell the test accuracies over seeds, the
chosen hyperparameters and the cell's bracket; `tuning.runner` writes it
at the end of every run (`schema` names the file).
"""

import statistics
import time

from tuning import provenance
from tuning import records
from tuning import schema


def summary(
    study,
    datas,
    backend,
    command,
    runs,
    cells,
    role,
    wall_time,
    git_at_start=None,
):
    """summary.json; per arm, or per condition and arm with a grid.

    `git_commit` and `git_dirty` are the repository's state when the run
    started (the code that ran); `git_commit_at_end` is added when the
    repository moved during the run.
    """
    commit_at_end, dirty_at_end = provenance.git_state()
    commit, dirty = git_at_start or (commit_at_end, dirty_at_end)
    conditions = {}
    for condition in study.conditions():
        arms = {}
        for arm in study.arms:
            arms[arm] = _cell_summary(
                [
                    r
                    for r in runs
                    if r["arm"] == arm
                    and r.get("condition", "") == condition.name
                ],
                cells.get((condition.name, arm)),
            )
        conditions[condition.name] = {"values": condition.values, "arms": arms}
    data = next(iter(datas.values()))
    out = {
        "study": study.results_name,
        "config": study.config(),
        "dataset": {
            "name": data.name,
            "label": data.label,
            "train_samples": len(data.x_train),
            "val_samples": len(data.x_val),
            "test_samples": len(data.x_test),
            "input_shape": list(data.input_shape),
            "num_classes": data.num_classes,
        },
        "backend": backend,
        "versions": provenance.library_versions(),
        "machine": provenance.machine(),
        "git_commit": commit,
        "git_dirty": dirty,
        **(
            {"git_commit_at_end": commit_at_end}
            if commit_at_end != commit
            else {}
        ),
        "command": command,
        "distributed": role is not None,
    }
    if study.grid:
        out["conditions"] = conditions
    else:
        out["arms"] = conditions[""]["arms"]
    unbracketed = [
        {"condition": name, "arm": arm}
        for name, c in conditions.items()
        for arm, s in c["arms"].items()
        if not s["bracketed"]
    ]
    cell_times = [
        float(c.get(k) or 0.0)
        for c in cells.values()
        for k in ("search_wall_time_s", "seeds_wall_time_s")
    ]
    out.update(
        unbracketed=unbracketed,
        # This run's time, and that of every cell, over all the runs that
        # made them (a study may be resumed many times).
        wall_time_s=wall_time,
        cells_wall_time_s=sum(cell_times),
        commits=sorted(
            {c["git_commit"] for c in cells.values() if c.get("git_commit")}
        ),
        finished_at=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    )
    return out


def _cell_summary(runs, cell):
    accs = [float(r["test_accuracy"]) for r in runs]
    first = runs[0] if runs else {}
    return {
        "seeds": len(accs),
        "test_accuracy_mean": statistics.fmean(accs) if accs else None,
        "test_accuracy_std": statistics.stdev(accs) if len(accs) > 1 else 0.0,
        "test_accuracies": accs,
        "best_hyperparameters": schema.hyperparameters(first)
        if first
        else None,
        "best_search_trial": first.get("search_trial_id"),
        "best_val_accuracy": (
            float(first["search_val_accuracy"]) if first else None
        ),
        "search_trials_completed": int(cell["search_trials"]) if cell else 0,
        "bracketed": bool(cell) and records.is_true(cell["bracketed"]),
        "lr_below_factor": records.float_or_none(cell, "lr_below_factor"),
        "lr_above_factor": records.float_or_none(cell, "lr_above_factor"),
        "search_wall_time_s": records.float_or_none(cell, "search_wall_time_s"),
        "seeds_wall_time_s": records.float_or_none(cell, "seeds_wall_time_s"),
    }
