"""The search of one (condition, arm) cell: its oracle, tuner and project.

Every cell has its own KerasTuner project, `runs_dir/[<condition>/]<arm>/`,
searched by the study's tuner: `"bracket"` (`tuning.oracles.BracketOracle`,
protocol v2), `"random"` or `"bayesian"` (KerasTuner's oracles). Trials are
trained by `tuning.training.train`, seeded `search_seed * TRIAL_SEED_BASE +
trial number`. On a distributed chief the oracle is a recovering one
(`tuning.distributed`), served on the cell's own port.

A search survives the loss of its project too. The oracle hands every
trial that ends to `on_trial_end` (the runner writes it to the results
folder's `search_progress.csv`), and a search that starts with an empty
project replays the trials recorded so: each is asked of the oracle
again, checked against what was recorded, and ended with the recorded
metrics, so that the search goes on from where it stopped, with the same
trials and the same seeds, instead of from its first trial.
"""

import contextlib
import os
import time

import keras_tuner

from tuning import distributed
from tuning import oracles
from tuning import outcomes
from tuning import patches
from tuning import records
from tuning import schema
from tuning import training
from tuning.study import trial_seed

# Written in a cell's project once its search is over; restarted workers
# skip such cells instead of waiting for an oracle that no longer runs.
SEARCH_DONE_JSON = "search_done.json"
# The tuner ID under which recorded trials are replayed.
REPLAY_TUNER_ID = "replay"


class RecordingOracleMixin:
    """Hands every trial that ends to `on_trial_end`, if set.

    Mixed into the oracle of every cell (`make_oracle`): on a distributed
    chief, trials end in the oracle, not in a tuner of the chief's.

    Attributes:
        on_trial_end: a function of one `keras_tuner.engine.trial.Trial`,
            called under the oracle's lock once the trial is ended and
            saved, or `None`.
    """

    on_trial_end = None

    @keras_tuner.synchronized
    def end_trial(self, trial):
        super().end_trial(trial)
        if self.on_trial_end is not None:
            self.on_trial_end(self.trials[trial.trial_id])


def recording(cls):
    """`cls` (an oracle class) with `RecordingOracleMixin` in front."""
    return oracles.extended(cls, RecordingOracleMixin)


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
            seed=trial_seed(self.search_seed, trial.trial_id),
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
            + failure(self._last, self.data.num_classes, " ({})")
            + f" (best so far {best_score:.4f}), "
            f"{self._last['wall_time_s']:.1f} s; elapsed "
            f"{elapsed(self.start)}"
        )


def failure(result, num_classes, template):
    """`template` filled with how a failed run failed; `""` for a run that
    trained."""
    if not result["diverged"]:
        return ""
    found = outcomes.outcome(result["loss"], num_classes)
    return template.format(found if found != outcomes.OK else "diverged")


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
    mixins = (RecordingOracleMixin,)
    if role == "chief":
        mixins += (distributed.RecoveringOracleMixin,)
    return oracles.extended(cls, *mixins)(
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
    recorded=(),
    on_trial_end=None,
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
        recorded: rows of `search_trials.csv`'s columns, the trials of
            this search that an earlier sitting ended; replayed (`replay`)
            if the project holds no trial. Defaults to `()`.
        on_trial_end: a function of one trial, called as each trial of
            this sitting ends, and for each ended trial of a reloaded
            project that `recorded` lacks (not on a worker). Defaults to
            `None`.

    Returns:
        keras_tuner.Tuner or None: the cell's tuner, whose oracle holds the
        trials and whose `resumed_trials` are the IDs of those that an
        earlier sitting ended (replayed, or reloaded from the project); on
        a worker, a tuner with a client of the chief's oracle, or `None` if
        the cell's search was already over.
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
        tuner.resumed_trials = ()
        if role != "worker":
            replayed = replay(tuner.oracle, recorded, label, log)
            # The trials an earlier sitting ended, replayed or reloaded;
            # those of a reloaded project that `recorded` lacks are
            # recorded now, so that they survive the project too.
            ended = [
                t
                for t in tuner.oracle.trials.values()
                if t.status in ("COMPLETED", "FAILED")
            ]
            tuner.resumed_trials = tuple(t.trial_id for t in ended)
            if on_trial_end is not None:
                known = {int(r["trial_id"]) for r in recorded}
                for trial in ended:
                    if int(trial.trial_id) not in known:
                        on_trial_end(trial)
            completed = count_completed(tuner.oracle)
            if completed:
                log(
                    f"{label}: resuming, {completed} of {s['max_trials']} "
                    "trials already done"
                    + (
                        f" ({replayed} replayed from the results)"
                        if replayed
                        else ""
                    )
                )
            tuner.oracle.on_trial_end = on_trial_end
        with distributed.Liveness(
            role, tuner.oracle, project_dir, worker_timeout, label, log
        ):
            tuner.search(verbose=1 if (verbose or role == "chief") else 0)
    if role != "worker":
        # Here, not in the tuner's `on_search_end`: on a distributed chief
        # KerasTuner's `search` serves the oracle and returns without
        # calling that hook, and the chief is the one that must write it.
        records.write_json(done_path, {"max_trials": s["max_trials"]})
    return tuner


def replay(oracle, rows, label, log):
    """Ends, in an oracle with no trial yet, the trials recorded in `rows`.

    Trial by trial, in the order of their IDs, the oracle is asked for its
    next trial as a tuner would ask; where it proposes the recorded trial
    (the same number and hyperparameter values), that trial is ended with
    the recorded status and metrics without training. The first trial it
    does not propose ends the replay: that trial goes back to the oracle,
    to be trained next, and the later rows are dropped (and logged).

    Args:
        oracle: a `keras_tuner.Oracle` of the cell, reloaded from its
            project.
        rows: dicts of str with `search_trials.csv`'s columns.
        label: the prefix of the log lines.
        log: a function of one string.

    Returns:
        int: the number of trials replayed; `0` if the oracle held any
        trial already (its project is further on than `rows`, or level).
    """
    if oracle.trials or not rows:
        return 0
    rows = sorted(rows, key=lambda r: int(r["trial_id"]))
    n = 0
    for row in rows:
        trial = oracle.create_trial(REPLAY_TUNER_ID)
        if trial.status != "RUNNING" or not _proposes(trial, row):
            if trial.status == "RUNNING":
                oracle.ongoing_trials.pop(REPLAY_TUNER_ID, None)
                patches.requeue(oracle, trial.trial_id)
                oracle.save()
            log(
                f"{label}: recorded trial {int(row['trial_id']) + 1} is not "
                "what the oracle proposes now ("
                + (
                    format_hps(trial.hyperparameters.values)
                    if trial.status == "RUNNING"
                    else f"status {trial.status}"
                )
                + f"); replayed {n} of {len(rows)} recorded trials, the "
                "rest are searched again"
            )
            break
        metrics = _recorded_metrics(row)
        # A trial that failed reported nothing (its row may hold no
        # objective), and KerasTuner takes no metrics without one.
        if schema.OBJECTIVE in metrics:
            oracle.update_trial(trial.trial_id, metrics)
        trial.status = row["status"]
        oracle.end_trial(trial)
        n += 1
    oracle.tuner_ids.discard(REPLAY_TUNER_ID)
    return n


def _proposes(trial, row):
    """Whether a created trial is the recorded one of `row`: its number,
    and each of its values as `search_trials.csv` writes it."""
    if int(trial.trial_id) != int(row["trial_id"]):
        return False
    return all(
        row.get(name, "") == _as_cell(value)
        for name, value in trial.hyperparameters.values.items()
    )


def _as_cell(value):
    """A value as `tuning.records` writes it (and so reads it back)."""
    if isinstance(value, float):
        return repr(value)
    return str(value)


def _recorded_metrics(row):
    metrics = {}
    for name in schema.TRIAL_METRICS:
        cell = row.get(name, "")
        if cell in ("", None):
            continue
        if cell in ("True", "False"):
            metrics[name] = 1.0 if records.is_true(cell) else 0.0
        else:
            metrics[name] = float(cell)
    return metrics


def trial_seconds(trial):
    """The training time a trial reported (`0.0` if none)."""
    if trial.metrics.exists("wall_time_s"):
        return float(trial.metrics.get_last_value("wall_time_s"))
    return 0.0


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
