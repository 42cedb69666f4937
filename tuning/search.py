"""The search of one (condition, arm) cell: its oracle, tuner and project.

Every cell has its own KerasTuner project, `runs_dir/[<condition>/]<arm>/`,
searched by the study's tuner: `"bracket"` (`tuning.oracles.BracketOracle`,
protocol v2), `"random"` or `"bayesian"` (KerasTuner's oracles). Trials are
trained by `tuning.training.train`, seeded `search_seed * TRIAL_SEED_BASE +
trial number`. On a distributed chief the oracle is a recovering one
(`tuning.distributed`), served on the cell's own port.
"""

import contextlib
import os
import time

import keras_tuner

from tuning import distributed
from tuning import oracles
from tuning import patches
from tuning import records
from tuning import schema
from tuning import training

# Offsets the seed of search trial `i` from the study's search seed.
TRIAL_SEED_BASE = 100_000
# Written in a cell's project once its search is over; restarted workers
# skip such cells instead of waiting for an oracle that no longer runs.
SEARCH_DONE_JSON = "search_done.json"


class ArmTuner(keras_tuner.Tuner):
    """Trains each trial of one cell with a seed of its own, and logs.

    Args:
        data: the `Dataset` the trials train on.
        epochs: positive int.
        batch_size: positive int.
        search_seed: the study's search seed.
        label: the prefix of the log lines.
        log: a function of one string.
        start: `time.perf_counter()` at the start of the study.
        callbacks: more Keras callbacks for every trial's `fit`. Defaults to
            `()`.
        fit_verbose: `fit`'s verbosity. Defaults to `0`.
        tensorboard: a folder for the TensorBoard logs of every trial
            (`tuning.tensorboard`), or `None`. Defaults to `None`.
        run_prefix: `(condition name, arm)`, the start of the trials'
            TensorBoard run names. Defaults to `("", "")`.
        **kwargs: for `keras_tuner.Tuner`.
    """

    def __init__(
        self,
        data,
        epochs,
        batch_size,
        search_seed,
        label,
        log,
        start,
        callbacks=(),
        fit_verbose=0,
        tensorboard=None,
        run_prefix=("", ""),
        **kwargs,
    ):
        self.data = data
        self.epochs = epochs
        self.batch_size = batch_size
        self.search_seed = search_seed
        self.label = label
        self.log = log
        self.start = start
        self.extra_callbacks = tuple(callbacks)
        self.fit_verbose = fit_verbose
        self.tensorboard = tensorboard
        self.run_prefix = tuple(run_prefix)
        self._last = None
        super().__init__(**kwargs)

    def run_trial(self, trial, *args, **kwargs):
        callbacks = list(self.extra_callbacks)
        if self.tensorboard:
            from tuning import tensorboard

            condition, arm = self.run_prefix
            callbacks += tensorboard.callbacks(
                self.tensorboard,
                tensorboard.run_name(condition, arm, "trial", trial.trial_id),
                {
                    **trial.hyperparameters.values,
                    "arm": arm,
                    "trial": int(trial.trial_id),
                },
            )
        result = training.train(
            self.hypermodel,
            trial.hyperparameters,
            self.data,
            self.epochs,
            self.batch_size,
            seed=self.search_seed * TRIAL_SEED_BASE + int(trial.trial_id),
            callbacks=callbacks,
            verbose=self.fit_verbose,
        )
        self._last = {
            name: float(result[name]) for name in schema.TRIAL_METRICS
        }
        return dict(self._last)

    def on_trial_begin(self, trial):
        super().on_trial_begin(trial)
        self._last = None
        self.log(
            f"{self.label}: trial {int(trial.trial_id) + 1} of "
            f"{self.oracle.max_trials} started: "
            f"{format_hps(trial.hyperparameters.values)}"
        )

    def on_trial_end(self, trial):
        super().on_trial_end(trial)
        n = int(trial.trial_id) + 1
        of = self.oracle.max_trials
        if self._last is None:
            message = (trial.message or "").strip().splitlines()
            self.log(
                f"{self.label}: trial {n} of {of} {trial.status}: "
                f"{message[-1] if message else ''}"
            )
            return
        best = self.oracle.get_best_trials(1)
        best_score = (
            best[0].score
            if best and best[0].score is not None
            else self._last[schema.OBJECTIVE]
        )
        self.log(
            f"{self.label}: trial {n} of {of} done: val_accuracy "
            f"{self._last[schema.OBJECTIVE]:.4f}"
            + (" (diverged)" if self._last["diverged"] else "")
            + f" (best so far {best_score:.4f}), "
            f"{self._last['wall_time_s']:.1f} s; elapsed "
            f"{elapsed(self.start)}"
        )


def make_oracle(study, role):
    """The oracle of one cell (`study` resolved at its condition)."""
    s = study.search
    objective = keras_tuner.Objective(schema.OBJECTIVE, direction="max")
    if s["tuner"] == "bracket":
        cls = oracles.BracketOracle
        kwargs = {
            "learning_rate": tuple(s["learning_rate"]),
            "lr_step": s["lr_step"],
            "learning_rate_limits": tuple(s["learning_rate_limits"]),
        }
    elif s["tuner"] == "random":
        cls, kwargs = keras_tuner.oracles.RandomSearchOracle, {}
    else:
        cls, kwargs = keras_tuner.oracles.BayesianOptimizationOracle, {}
    if role == "chief":
        cls = distributed.RECOVERING[cls]
    return cls(
        objective=objective,
        max_trials=s["max_trials"],
        seed=s["seed"] + 1,
        **kwargs,
    )


def search_cell(
    study,
    arm,
    data,
    project_dir,
    label,
    log,
    start,
    role=None,
    port=None,
    worker_timeout=distributed.DEFAULT_WORKER_TIMEOUT_S,
    callbacks=(),
    verbose=False,
    tensorboard=None,
    run_prefix=("", ""),
):
    """Runs (or resumes, or joins) the search of one cell.

    Args:
        study: the `Study`, resolved at the cell's condition.
        arm: the cell's arm.
        data: the `Dataset`.
        project_dir: the cell's KerasTuner project folder.
        label: the prefix of the log lines.
        log: a function of one string.
        start: `time.perf_counter()` at the start of the study.
        role: `"chief"`, `"worker"` or `None`.
        port: the cell's oracle port when distributed.
        worker_timeout: seconds; see `distributed.Liveness`.
        callbacks: more Keras callbacks for every trial's `fit`.
        verbose: whether to show Keras' and KerasTuner's own progress.
        tensorboard: a folder for TensorBoard logs, or `None`.
        run_prefix: `(condition name, arm)`, for the TensorBoard run names.

    Returns:
        keras_tuner.Tuner or None: the cell's tuner, whose oracle holds the
        trials; on a worker, a tuner with a client of the chief's oracle, or
        `None` if the cell's search was already over.
    """
    patches.atomic_keras_tuner_writes()
    s = study.search
    done_path = os.path.join(project_dir, SEARCH_DONE_JSON)
    if role == "worker":
        done = records.read_json(done_path)
        if done is not None and done["max_trials"] >= s["max_trials"]:
            log(f"{label}: search already done, skipped")
            return None
    if role is not None:
        log(
            f"{label}: oracle at {os.environ[distributed.ORACLE_IP_ENV]}:{port}"
        )
    with distributed.serving(port) if role else contextlib.nullcontext():
        tuner = ArmTuner(
            data=data,
            epochs=study.fixed["epochs"],
            batch_size=study.fixed["batch_size"],
            search_seed=s["seed"],
            label=label,
            log=log,
            start=start,
            callbacks=callbacks,
            fit_verbose=1 if verbose else 0,
            tensorboard=tensorboard,
            run_prefix=run_prefix,
            oracle=make_oracle(study, role),
            hypermodel=training.make_hypermodel(study, arm, data),
            directory=os.path.dirname(project_dir),
            project_name=os.path.basename(project_dir),
            overwrite=False,
        )
        if role != "worker":
            completed = count_completed(tuner.oracle)
            if completed:
                log(
                    f"{label}: resuming, {completed} of {s['max_trials']} "
                    "trials already done"
                )
        with distributed.Liveness(
            role, tuner.oracle, project_dir, worker_timeout, label, log
        ):
            tuner.search(verbose=1 if (verbose or role == "chief") else 0)
    if role != "worker":
        records.write_json(done_path, {"max_trials": s["max_trials"]})
    return tuner


def count_completed(oracle):
    return sum(1 for t in oracle.trials.values() if t.status == "COMPLETED")


def format_hps(values):
    parts = []
    for key in sorted(values):
        value = values[key]
        parts.append(
            f"{key}={value:.3g}"
            if isinstance(value, float)
            else f"{key}={value}"
        )
    return ", ".join(parts)


def elapsed(start):
    seconds = int(time.perf_counter() - start)
    return f"{seconds // 60}m{seconds % 60:02d}s"
