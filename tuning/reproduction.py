"""Reproducing one recorded row of a study (`reproduce`).

The row's (condition, arm, seed) is retrained with the hyperparameters
`trials.csv` recorded for it, and both test accuracies are printed.
"""

import os

from tuning import provenance
from tuning import records
from tuning import schema
from tuning import search
from tuning import training
from tuning.console import log
from tuning.data_loading import load_data
from tuning.errors import SweepError


def reproduce(study, options, arm, seed, condition=None):
    """Retrains one recorded (condition, arm, seed) and prints both test
    accuracies.

    Returns:
        dict: what `training.train_and_evaluate` returns.

    Raises:
        SweepError: for a run that is not recorded.
    """
    import keras

    condition = _condition(study, condition)
    out_dir = os.path.join(options.results_dir, study.results_name)
    trials_csv = os.path.join(out_dir, schema.TRIALS_CSV)
    row = _recorded_row(study, trials_csv, condition, arm, seed)
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


def _condition(study, name):
    """The condition named `name` (`None` for a study without a grid)."""
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
    return study.condition(name) if study.grid else study.conditions()[0]


def _recorded_row(study, trials_csv, condition, arm, seed):
    """The `trials.csv` row of (condition, arm, seed); the last if several."""
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
    return matches[-1]
