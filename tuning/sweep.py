"""Runs one study: a KerasTuner search per arm, then seed reruns on test.

    python -m tuning.sweep STUDY [--quick | --full] [--data-dir DIR]
        [--results-dir DIR] [--runs-dir DIR] [--overwrite] [--seeds N]
        [--max-trials N]
    python -m tuning.sweep STUDY --reproduce ARM SEED [--condition NAME]

For every condition of the study (a combination of its `[grid]` values, or
the one implicit condition of a study without `[grid]`) and every arm (one
model variant), a KerasTuner search over the nuisance hyperparameters on
the validation split, in its own project under
`--runs-dir/<study>/[<condition>/]<arm>/`; then the best setting of each
(condition, arm) is retrained from scratch on `--seeds` seeds
(`keras.utils.set_random_seed(seed)`) and evaluated on the test split.
Results go to `--results-dir/<study>/`: `trials.csv` (one row per
condition, arm and seed), `search_trials.csv` (one row per search trial),
`curves.csv` (per-epoch metrics of the seed reruns), `summary.json` and the
plots.

Killed at any point, the same command resumes: KerasTuner reloads its
projects (completed trials are kept, the interrupted one is rerun), and the
(condition, arm, seed) rows already in `trials.csv` are not redone.
`--overwrite` starts the study again from nothing.

With `KERASTUNER_TUNER_ID`, `KERASTUNER_ORACLE_IP` and
`KERASTUNER_ORACLE_PORT` set, the same command runs as KerasTuner's
distributed chief (a tuner id containing "chief") or as a worker: see
`tuning/README.md`.
"""

import argparse
import os

# Before TensorFlow is imported (by tensorflow-datasets or the backend).
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

import shlex  # noqa: E402
import shutil  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

from tuning import records  # noqa: E402
from tuning import study as study_module  # noqa: E402

DEFAULT_RESULTS_DIR = os.path.join(records.REPO_ROOT, "tuning", "results")
DEFAULT_RUNS_DIR = os.path.join(records.REPO_ROOT, "tuning", "runs")
TRIALS_CSV = "trials.csv"
SEARCH_TRIALS_CSV = "search_trials.csv"
CURVES_CSV = "curves.csv"
SUMMARY_JSON = "summary.json"
STUDY_JSON = "study.json"
# Written in an arm's project once its search is over; restarted workers
# skip such arms instead of waiting for an oracle that no longer runs.
SEARCH_DONE_JSON = "search_done.json"
# Distributed liveness: every worker touches `<arm>/heartbeats/<tuner id>`
# in the shared runs dir; the chief hands the trial of a worker silent for
# `--worker-timeout` seconds to the next worker that asks for one.
HEARTBEAT_DIR = "heartbeats"
DEFAULT_WORKER_TIMEOUT_S = 600
# How long the chief's oracle pauses a worker told to wait for a trial.
IDLE_PAUSE_S = 0.5
EVAL_BATCH_SIZE = 512
# Offsets the seed of search trial `i` from the study's search seed.
TRIAL_SEED_BASE = 100_000

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
CURVE_COLUMNS = (
    "arm", "seed", "epoch", "loss", "accuracy", "val_loss", "val_accuracy"
)
# What a condition can change of the data: one load per distinct value.
DATA_KEYS = ("dataset", "train_samples", "val_samples", "test_samples")
TUNER_ENV = "KERASTUNER_TUNER_ID"
ORACLE_IP_ENV = "KERASTUNER_ORACLE_IP"
ORACLE_PORT_ENV = "KERASTUNER_ORACLE_PORT"


class SweepError(Exception):
    """Bad input: printed as one line on stderr, exit status 2."""


def main(argv=None):
    """Runs the command line; returns the exit status."""
    argv = sys.argv[1:] if argv is None else list(argv)
    args = _parser().parse_args(argv)
    command = " ".join(
        shlex.quote(a) for a in ["python", "-m", "tuning.sweep", *argv]
    )
    try:
        study = _load_study(args)
        if args.condition is not None and not args.reproduce:
            raise SweepError(
                "--condition goes with --reproduce. Received: "
                f"condition={args.condition!r}"
            )
        if args.reproduce:
            reproduce(study, args)
        else:
            run(study, args, command)
    except (SweepError, study_module.StudyError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted; run the same command again to resume",
              file=sys.stderr)
        return 130
    return 0


def _parser():
    parser = argparse.ArgumentParser(
        prog="python -m tuning.sweep",
        description=(
            "Runs a study: a KerasTuner search per arm on the validation "
            "split, then the best setting of each arm retrained on several "
            "seeds and evaluated on test. Rerun the same command to resume."
        ),
    )
    parser.add_argument(
        "study",
        help=(
            "a study name (a file in tuning/studies/, e.g. `smoke`) or a path "
            "to a .toml study file"
        ),
    )
    size = parser.add_mutually_exclusive_group()
    size.add_argument(
        "--quick", action="store_true",
        help="apply the study's [quick] overrides (results in <study>-quick)",
    )
    size.add_argument(
        "--full", action="store_true",
        help=(
            "apply the study's [full] overrides, for a GPU or Colab (results "
            "in <study>-full)"
        ),
    )
    parser.add_argument(
        "--data-dir",
        help=(
            "local copy of the dataset (CIFAR-10: an image folder); defaults "
            "to $KERAS_AFFINE_DIV_CIFAR10_DIR, else tfds"
        ),
    )
    parser.add_argument(
        "--results-dir", default=DEFAULT_RESULTS_DIR,
        help="where <study>/ results are written (default: tuning/results)",
    )
    parser.add_argument(
        "--runs-dir", default=DEFAULT_RUNS_DIR,
        help=(
            "KerasTuner projects, one per arm under <study>/ (default: "
            "tuning/runs); shared by the chief and workers when distributed"
        ),
    )
    parser.add_argument(
        "--overwrite", action="store_true",
        help="delete the study's runs and results and start again "
        "(default: resume)",
    )
    parser.add_argument(
        "--seeds", type=_positive_int, metavar="N",
        help="number of seeds the best settings are retrained on "
        "(default: the study's)",
    )
    parser.add_argument(
        "--max-trials", type=_positive_int, metavar="N",
        help="search trials per arm (default: the study's)",
    )
    parser.add_argument(
        "--worker-timeout", type=_positive_int, metavar="SECONDS",
        default=DEFAULT_WORKER_TIMEOUT_S,
        help=(
            "distributed chief: a trial whose worker has sent no heartbeat "
            "for this long is handed to another worker (default: "
            f"{DEFAULT_WORKER_TIMEOUT_S})"
        ),
    )
    parser.add_argument(
        "--reproduce", nargs=2, metavar=("ARM", "SEED"),
        help=(
            "retrain one (arm, seed) of a finished study with its recorded "
            "hyperparameters and print its test accuracy"
        ),
    )
    parser.add_argument(
        "--condition", metavar="NAME",
        help=(
            "with --reproduce, for a study with a [grid]: the condition of "
            "the run (the `condition` column of trials.csv)"
        ),
    )
    return parser


def _positive_int(text):
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(
            f"expected a positive integer. Received: {text!r}"
        )
    return value


def _load_study(args):
    study = study_module.load_study(
        args.study, quick=args.quick, full=getattr(args, "full", False)
    )
    search, fixed = {}, {}
    if args.max_trials is not None:
        search["max_trials"] = args.max_trials
    if args.seeds is not None:
        fixed["seeds"] = args.seeds
    return study.replace(search=search, fixed=fixed)


# The run.


def run(study, args, command):
    """Searches every (condition, arm), retrains the best settings, writes
    the results.

    Args:
        study: a `Study`.
        args: the parsed command line.
        command: the command line, recorded in `summary.json`.
    """
    import keras

    git_at_start = records.git_state()
    role = distributed_role()
    backend = keras.backend.backend()
    runs_dir = os.path.join(args.runs_dir, study.results_name)
    out_dir = os.path.join(args.results_dir, study.results_name)
    conditions = study.conditions()
    start = time.perf_counter()
    _log(
        f"study {study.results_name}: "
        + (f"{len(conditions)} conditions ({', '.join(study.grid)}) x "
           if study.grid else "")
        + f"{len(study.arms)} arms "
        f"({', '.join(study.arms)}), {study.search['max_trials']} search "
        f"trials and {study.fixed['seeds']} seeds each; backend {backend}"
        + (f"; distributed {role}" if role else "")
    )
    writes_results = role != "worker"
    if args.overwrite:
        if role == "worker":
            _log("--overwrite is left to the chief; this worker resumes")
        else:
            for path in (runs_dir, out_dir):
                if os.path.isdir(path):
                    shutil.rmtree(path)
            _log(f"overwrite: removed {runs_dir} and {out_dir}")
    if writes_results:
        _check_same_study(study, runs_dir, out_dir, backend)
        records.write_json(os.path.join(runs_dir, STUDY_JSON),
                           _fingerprint(study))

    datas, loaded = {}, {}
    tuners = {}
    for c, condition in enumerate(conditions):
        at = study.at(condition)
        datas[condition.name] = _data_of(at, args.data_dir, loaded)
        for i, arm in enumerate(study.arms):
            tuners[condition.name, arm] = search_arm(
                at, arm, i, datas[condition.name], runs_dir, role, start,
                worker_timeout=getattr(args, "worker_timeout",
                                       DEFAULT_WORKER_TIMEOUT_S),
                condition=condition, condition_index=c,
            )
    if not writes_results:
        _log(
            "worker: searches done; the chief retrains the best settings "
            "and writes the results"
        )
        return

    by_name = {condition.name: condition for condition in conditions}
    search_rows = []
    for (name, arm), tuner in tuners.items():
        search_rows += _search_rows(study, by_name[name], arm, tuner)
    records.write_csv(
        os.path.join(out_dir, SEARCH_TRIALS_CSV),
        _search_columns(study), search_rows,
    )

    runs = _read_runs(out_dir, backend)
    curves = _read_curves(out_dir)
    for c, condition in enumerate(conditions):
        at = study.at(condition)
        data = datas[condition.name]
        for i, arm in enumerate(study.arms):
            best = _best_trial(tuners[condition.name, arm], arm)
            for seed in range(study.fixed["seeds"]):
                key = (condition.name, arm, str(seed))
                label = (
                    "[seeds] "
                    + _condition_label(study, condition, c)
                    + f"arm {i + 1}/{len(study.arms)} {arm} seed "
                    f"{seed + 1}/{study.fixed['seeds']}"
                )
                if key in runs:
                    _log(
                        f"{label}: already done (test_accuracy "
                        f"{float(runs[key]['test_accuracy']):.4f}), skipped"
                    )
                    continue
                hp_values = dict(best.hyperparameters.values)
                result = train_and_evaluate(at, arm, hp_values, data, seed)
                row = _run_row(at, arm, seed, hp_values, best, data, result,
                               backend, condition)
                for epoch, metrics in enumerate(result["history"], start=1):
                    curves[key + (str(epoch),)] = dict(
                        metrics, arm=arm, seed=seed, epoch=epoch,
                        **_condition_cells(study, condition),
                    )
                # Curves first: a row in trials.csv means the run is
                # complete.
                records.write_csv(os.path.join(out_dir, CURVES_CSV),
                                  _curve_columns(study), curves.values())
                runs[key] = row
                records.write_csv(os.path.join(out_dir, TRIALS_CSV),
                                  _run_columns(study), _ordered(study, runs))
                _log(
                    f"{label}: test_accuracy {result['test_accuracy']:.4f} "
                    f"(val {result['val_accuracy']:.4f}) in "
                    f"{result['wall_time_s']:.1f} s; elapsed "
                    f"{_elapsed(start)}"
                )

    runs_list = [
        {k: str(v) for k, v in r.items()} for r in _ordered(study, runs)
    ]
    from tuning import plots

    labels = {d.label for d in datas.values()}
    paths = plots.plot_all(
        out_dir,
        f"{study.results_name}: {', '.join(sorted(labels))}, {backend}",
        study.arms,
        runs_list,
        [{k: str(v) for k, v in r.items()} for r in curves.values()],
        [{k: str(v) for k, v in r.items()} for r in search_rows],
        conditions=[c.name for c in conditions] if study.grid else None,
    )
    summary = _summary(study, datas, backend, command, runs_list, tuners,
                       role, time.perf_counter() - start,
                       git_at_start=git_at_start)
    records.write_json(os.path.join(out_dir, SUMMARY_JSON), summary)
    _log(f"results: {out_dir} ({TRIALS_CSV}, {SEARCH_TRIALS_CSV}, "
         f"{CURVES_CSV}, {SUMMARY_JSON}, "
         f"{', '.join(os.path.basename(p) for p in paths)})")
    if study.grid:
        for name, cs in summary["conditions"].items():
            for arm, s in cs["arms"].items():
                _log(
                    f"{name} {arm}: test_accuracy "
                    f"{s['test_accuracy_mean']:.4f} +- "
                    f"{s['test_accuracy_std']:.4f} over {s['seeds']} seeds"
                )
    else:
        for arm, s in summary["arms"].items():
            _log(
                f"{arm}: test_accuracy {s['test_accuracy_mean']:.4f} +- "
                f"{s['test_accuracy_std']:.4f} over {s['seeds']} seeds"
            )
    _log(f"done in {_elapsed(start)}")


def _data_of(study, data_dir, loaded):
    """The data of a (condition-resolved) study, loaded once per subset."""
    key = tuple(study.fixed[k] for k in DATA_KEYS)
    if key in loaded:
        return loaded[key]
    data = load_data(study, data_dir)
    _log(
        f"data: {data.label}, {len(data.x_train)} train / {len(data.x_val)} "
        f"val / {len(data.x_test)} test images of shape {data.input_shape}"
    )
    loaded[key] = data
    return data


def _condition_label(study, condition, index):
    if not study.grid:
        return ""
    return (f"condition {index + 1}/{len(study.conditions())} "
            f"{condition.name} ")


def _condition_cells(study, condition):
    """The `condition` column and the grid values of a result row."""
    if not study.grid:
        return {}
    return {"condition": condition.name, **condition.values}


def load_data(study, data_dir):
    """Loads the study's dataset subsets.

    Raises:
        SweepError: if the data is missing, badly laid out or unavailable.
    """
    from keras_affine_div import datasets

    f = study.fixed
    n = f["train_samples"] + f["val_samples"]
    try:
        return datasets.load(
            f["dataset"],
            data_dir=data_dir,
            validation_split=f["val_samples"] / n,
            seed=0,
            max_train_samples=n,
            max_test_samples=f["test_samples"],
        )
    except (
        ValueError,
        TypeError,
        FileNotFoundError,
        datasets.DataUnavailableError,
    ) as e:
        raise SweepError(f"cannot load the data: {e}") from None


def make_hypermodel(study, arm, data):
    """Returns the `HyperModel` of one arm of the study."""
    from keras_affine_div import hypermodels

    cls = (
        hypermodels.MLPHyperModel
        if study.family == "mlp"
        else hypermodels.CNNHyperModel
    )
    return cls(
        arm,
        data.input_shape,
        data.num_classes,
        optimizers=tuple(study.search["optimizers"]),
        lr_range=tuple(study.search["learning_rate"]),
        kernel_scales=tuple(study.search["kernel_scales"]),
        **study.model_kwargs,
    )


def search_arm(study, arm, index, data, runs_dir, role, start,
               worker_timeout=DEFAULT_WORKER_TIMEOUT_S, condition=None,
               condition_index=0):
    """Runs (or resumes, or joins) the KerasTuner search of one arm.

    `study` is resolved at `condition` (`Study.at`); the project is
    `runs_dir/<condition>/<arm>/` (`runs_dir/<arm>/` without a grid). When
    distributed, the oracle of arm `index` of condition `condition_index`
    is served on `KERASTUNER_ORACLE_PORT + condition_index * len(arms) +
    index`.

    Returns:
        keras_tuner.Tuner: the arm's tuner, whose oracle holds the trials;
        on a worker, a tuner with a client of the chief's oracle, or `None`
        if the arm's search was already over.
    """
    import keras_tuner

    _atomic_keras_tuner_writes()
    s = study.search
    objective = keras_tuner.Objective("val_accuracy", direction="max")
    oracle_cls = (
        keras_tuner.oracles.RandomSearchOracle
        if s["tuner"] == "random"
        else keras_tuner.oracles.BayesianOptimizationOracle
    )
    if role == "chief":
        oracle_cls = _recovering_oracle_class(oracle_cls)
    oracle = oracle_cls(
        objective=objective, max_trials=s["max_trials"], seed=s["seed"] + 1
    )
    label = (
        "[search] "
        + (_condition_label(study, condition, condition_index)
           if condition is not None else "")
        + f"arm {index + 1}/{len(study.arms)} {arm}"
    )
    if condition is not None and condition.name:
        runs_dir = os.path.join(runs_dir, condition.name)
    done_path = os.path.join(runs_dir, arm, SEARCH_DONE_JSON)
    if role == "worker":
        done = records.read_json(done_path)
        if done is not None and done["max_trials"] >= s["max_trials"]:
            _log(f"{label}: search already done, skipped")
            return None
    base_port = os.environ.get(ORACLE_PORT_ENV)
    if role:
        # One oracle per (condition, arm), served on its own port: base
        # port + condition index * arms + arm index.
        os.environ[ORACLE_PORT_ENV] = str(
            int(base_port) + condition_index * len(study.arms) + index
        )
        _log(f"{label}: oracle at {os.environ[ORACLE_IP_ENV]}:"
             f"{os.environ[ORACLE_PORT_ENV]}")
    try:
        tuner = _make_tuner(
            oracle=oracle,
            hypermodel=make_hypermodel(study, arm, data),
            directory=runs_dir,
            project_name=arm,
            overwrite=False,
            label=label,
            max_trials=s["max_trials"],
            search_seed=s["seed"],
            start=start,
        )
        if role != "worker":
            done = _completed(tuner.oracle)
            if done:
                _log(f"{label}: resuming, {done} of {s['max_trials']} "
                     "trials already done")
        with _Liveness(role, tuner.oracle, os.path.join(runs_dir, arm),
                       worker_timeout, label):
            tuner.search(
                data.x_train,
                data.y_train,
                validation_data=(data.x_val, data.y_val),
                epochs=study.fixed["epochs"],
                batch_size=study.fixed["batch_size"],
                verbose=1 if role == "chief" else 0,
            )
    finally:
        if base_port is not None:
            os.environ[ORACLE_PORT_ENV] = base_port
    if role != "worker":
        records.write_json(done_path, {"max_trials": s["max_trials"]})
        best = _best_trial(tuner, arm)
        _log(f"{label}: search done, best val_accuracy {best.score:.4f} "
             f"with {_format_hps(best.hyperparameters.values)}; elapsed "
             f"{_elapsed(start)}")
    return tuner


def _make_tuner(label, max_trials, search_seed, start, **kwargs):
    import keras
    import keras_tuner

    class ArmTuner(keras_tuner.Tuner):
        """Trains one trial with a seed of its own and prints progress."""

        def run_trial(self, trial, x, y, validation_data, epochs, batch_size,
                      verbose=0, **kwargs):
            keras.backend.clear_session()
            keras.utils.set_random_seed(
                search_seed * TRIAL_SEED_BASE + int(trial.trial_id)
            )
            hp = trial.hyperparameters
            model = self.hypermodel.build(hp)
            t0 = time.perf_counter()
            history = model.fit(x, y, validation_data=validation_data,
                                epochs=epochs, batch_size=batch_size,
                                verbose=verbose)
            h = history.history
            self._last = {
                "val_accuracy": float(h["val_accuracy"][-1]),
                "val_loss": float(h["val_loss"][-1]),
                "loss": float(h["loss"][-1]),
                "accuracy": float(h["accuracy"][-1]),
                "wall_time_s": time.perf_counter() - t0,
            }
            return dict(self._last)

        def on_trial_begin(self, trial):
            super().on_trial_begin(trial)
            self._last = None
            _log(f"{label}: trial {int(trial.trial_id) + 1} of {max_trials} "
                 f"started: {_format_hps(trial.hyperparameters.values)}")

        def on_trial_end(self, trial):
            super().on_trial_end(trial)
            n = int(trial.trial_id) + 1
            if self._last is None:
                message = (trial.message or "").strip().splitlines()
                _log(f"{label}: trial {n} of {max_trials} {trial.status}: "
                     f"{message[-1] if message else ''}")
                return
            best = self.oracle.get_best_trials(1)
            best_score = best[0].score if best and best[0].score is not None \
                else self._last["val_accuracy"]
            _log(f"{label}: trial {n} of {max_trials} done: val_accuracy "
                 f"{self._last['val_accuracy']:.4f} (best so far "
                 f"{best_score:.4f}), {self._last['wall_time_s']:.1f} s; "
                 f"elapsed {_elapsed(start)}")

    return ArmTuner(**kwargs)


def train_and_evaluate(study, arm, hp_values, data, seed, inspect=None):
    """Trains one arm from scratch with fixed hyperparameters and one seed.

    Args:
        study: a `Study`.
        arm: the arm (model variant).
        hp_values: dict of hyperparameter values (`learning_rate`,
            `optimizer`, and `kernel_scale` for our arms).
        data: a `datasets.Dataset`.
        seed: int, given to `keras.utils.set_random_seed`.
        inspect: optional function `inspect(model, phase)`, called with
            `phase="init"` before training and `"trained"` after it.

    Returns:
        dict: the `RUN_METRICS` and `history`, a list of per-epoch dicts.
    """
    import keras
    import keras_tuner

    hypermodel = make_hypermodel(study, arm, data)
    hp = keras_tuner.HyperParameters()
    hypermodel.declare_hyperparameters(hp)
    hp.values.update(hp_values)
    keras.backend.clear_session()
    keras.utils.set_random_seed(int(seed))
    model = hypermodel.build(hp)
    if inspect is not None:
        inspect(model, "init")
    t0 = time.perf_counter()
    history = model.fit(
        data.x_train,
        data.y_train,
        validation_data=(data.x_val, data.y_val),
        epochs=study.fixed["epochs"],
        batch_size=study.fixed["batch_size"],
        verbose=0,
    )
    wall_time = time.perf_counter() - t0
    if inspect is not None:
        inspect(model, "trained")
    test_loss, test_accuracy = model.evaluate(
        data.x_test, data.y_test, batch_size=EVAL_BATCH_SIZE, verbose=0
    )
    h = history.history
    per_epoch = [
        {name: float(h[name][e]) for name in CURVE_COLUMNS[3:]}
        for e in range(len(h["loss"]))
    ]
    return {
        "test_accuracy": float(test_accuracy),
        "test_loss": float(test_loss),
        "val_accuracy": float(h["val_accuracy"][-1]),
        "val_loss": float(h["val_loss"][-1]),
        "final_train_loss": float(h["loss"][-1]),
        "final_train_accuracy": float(h["accuracy"][-1]),
        "epochs": len(h["loss"]),
        "wall_time_s": wall_time,
        "history": per_epoch,
    }


def reproduce(study, args):
    """Retrains one recorded (condition, arm, seed) and prints both test
    accuracies."""
    import keras

    arm, seed_text = args.reproduce
    name = getattr(args, "condition", None)
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
    condition = (
        study.condition(name) if study.grid else study.conditions()[0]
    )
    out_dir = os.path.join(args.results_dir, study.results_name)
    trials_csv = os.path.join(out_dir, TRIALS_CSV)
    rows = records.read_csv(trials_csv)
    if not rows:
        raise SweepError(
            f"no finished runs to reproduce: {trials_csv} is missing or "
            "empty; run the study first. Received: "
            f"study={study.results_name!r}"
        )
    rows = [r for r in rows if r.get("condition", "") == condition.name]
    matches = [r for r in rows if r["arm"] == arm and r["seed"] == seed_text]
    if not matches:
        available = sorted({(r["arm"], int(r["seed"])) for r in rows})
        where = (f" of condition {condition.name}" if condition.name else "")
        raise SweepError(
            f"no recorded run for this arm and seed{where} in "
            f"{os.path.join(out_dir, TRIALS_CSV)}; expected one of "
            f"{', '.join(f'{a} {s}' for a, s in available)}. "
            f"Received: arm={arm!r}, seed={seed_text!r}"
            + (f", condition={condition.name!r}" if condition.name else "")
        )
    row = matches[-1]
    backend = keras.backend.backend()
    if row.get("backend") and row["backend"] != backend:
        _log(f"note: recorded with backend {row['backend']}, reproducing "
             f"with {backend}; expect small differences")
    hp_values = {"learning_rate": float(row["learning_rate"]),
                 "optimizer": row["optimizer"]}
    if row.get("kernel_scale"):
        hp_values["kernel_scale"] = float(row["kernel_scale"])
    study = study.at(condition)
    data = load_data(study, args.data_dir)
    _log(f"reproducing {study.results_name} "
         + (f"condition {condition.name} " if condition.name else "")
         + f"arm {arm} seed {seed_text} with {_format_hps(hp_values)} on "
         f"{data.label}")
    result = train_and_evaluate(study, arm, hp_values, data, int(seed_text))
    recorded = float(row["test_accuracy"])
    print(
        f"test_accuracy {result['test_accuracy']:.4f} (recorded "
        f"{recorded:.4f}, difference "
        f"{result['test_accuracy'] - recorded:+.4f})",
        flush=True,
    )
    return result


def _atomic_keras_tuner_writes():
    """Makes KerasTuner write its JSON state atomically.

    KerasTuner 1.4.8 writes `oracle.json`, `tuner0.json` and every
    `trial.json` in place (`keras_tuner.src.utils.save_json`, which every
    one of its writers calls through the module): a SIGKILL in the middle
    of a write leaves an empty or truncated file that the next run cannot
    reload. This routes local writes through a temporary file and
    `os.replace`, so a file is always either the old or the new state.
    Remote paths (`gs://...`) keep KerasTuner's own writer.
    """
    import json

    from keras_tuner.src import utils as kt_utils

    original = kt_utils.save_json
    if getattr(original, "_atomic", False):
        return

    def save_json(path, obj):
        if "://" in str(path):
            return original(path, obj)
        text = json.dumps(obj)
        records.write_atomic(str(path), text)
        return text

    save_json._atomic = True
    kt_utils.save_json = save_json


# Distributed mode.


def distributed_role():
    """Returns `"chief"`, `"worker"` or `None` (not distributed).

    KerasTuner's distributed mode is on when `KERASTUNER_ORACLE_IP` is set;
    the tuner whose `KERASTUNER_TUNER_ID` contains `"chief"` runs the oracle.

    Raises:
        SweepError: if the variables are incomplete.
    """
    if ORACLE_IP_ENV not in os.environ:
        return None
    missing = [v for v in (ORACLE_PORT_ENV, TUNER_ENV) if v not in os.environ]
    if missing:
        raise SweepError(
            f"distributed mode needs {TUNER_ENV}, {ORACLE_IP_ENV} and "
            f"{ORACLE_PORT_ENV}; {', '.join(missing)} not set. Received: "
            f"{ORACLE_IP_ENV}={os.environ[ORACLE_IP_ENV]!r}"
        )
    port = os.environ[ORACLE_PORT_ENV]
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise SweepError(
            f"{ORACLE_PORT_ENV} must be a port number. Received: "
            f"{ORACLE_PORT_ENV}={port!r}"
        )
    return "chief" if "chief" in os.environ[TUNER_ENV] else "worker"


def _recovering_oracle_class(oracle_cls):
    """`oracle_cls` with a way to take a trial back from a dead worker."""
    import keras_tuner

    class RecoveringOracle(oracle_cls):
        @keras_tuner.synchronized
        def create_trial(self, tuner_id):
            """As KerasTuner's, but a worker is not sent away too early.

            Once `max_trials` trials exist, KerasTuner stops every worker
            that asks for another. While a trial of another worker is still
            running, that worker may yet die and its trial come back to the
            retry queue: the asking worker is then told to wait (`IDLE`,
            after a short pause) instead of stopped, so that someone is left
            to take the trial over.
            """
            trial = super().create_trial(tuner_id)
            waiting_for = [t for t in self.ongoing_trials if t != tuner_id]
            if trial.status == "STOPPED" and waiting_for:
                self.tuner_ids.add(tuner_id)
                trial.status = "IDLE"
                time.sleep(IDLE_PAUSE_S)
            return trial

        @keras_tuner.synchronized
        def release_trial_of(self, tuner_id):
            """Requeues the ongoing trial of `tuner_id`; returns its id.

            This is what KerasTuner's own `Oracle.reload()` does to every
            ongoing trial when a chief restarts: the trial goes to the retry
            queue, which `create_trial` serves first, to any worker.
            """
            trial = self.ongoing_trials.pop(tuner_id, None)
            if trial is None:
                return None
            self._retry_queue.append(trial.trial_id)
            self.tuner_ids.discard(tuner_id)
            self.save()
            return trial.trial_id

    return RecoveringOracle


class _Liveness:
    """Heartbeats on a worker; on the chief, a watchdog over the workers.

    A worker touches `<arm project>/heartbeats/<tuner id>` every few
    seconds from a daemon thread (training releases the GIL, so it beats
    during long epochs too). The chief checks the workers that hold a trial:
    one whose heartbeat is older than `timeout` seconds (or that never beat
    since the chief saw its trial start) is taken as dead, and its trial is
    handed to the next worker that asks for one. Heartbeats compare file
    modification times with the chief's clock: on several hosts the clocks
    must agree to well within `timeout`.
    """

    def __init__(self, role, oracle, project_dir, timeout, label):
        import threading

        self.role = role
        self.oracle = oracle
        self.dir = os.path.join(project_dir, HEARTBEAT_DIR)
        self.timeout = timeout
        self.label = label
        self.interval = max(0.2, min(5.0, timeout / 5))
        self.stop = threading.Event()
        self.thread = None

    def __enter__(self):
        import threading

        if self.role == "worker":
            target = self._beat
        elif self.role == "chief" and hasattr(self.oracle, "release_trial_of"):
            target = self._watch
        else:
            return self
        os.makedirs(self.dir, exist_ok=True)
        self.thread = threading.Thread(target=target, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc_info):
        self.stop.set()
        if self.thread is not None:
            self.thread.join(timeout=10)
        return False

    def _beat(self):
        path = os.path.join(self.dir, os.environ[TUNER_ENV])
        while True:
            with open(path, "w") as f:
                f.write(f"{time.time()}\n")
            if self.stop.wait(self.interval):
                return

    def _watch(self):
        first_seen = {}
        while not self.stop.wait(self.interval):
            now = time.time()
            ongoing = {
                tuner_id: trial.trial_id
                for tuner_id, trial in list(self.oracle.ongoing_trials.items())
            }
            first_seen = {
                key: first_seen.get(key, now) for key in ongoing.items()
            }
            for tuner_id, trial_id in ongoing.items():
                path = os.path.join(self.dir, tuner_id)
                try:
                    last = os.path.getmtime(path)
                except OSError:
                    last = 0.0
                silent = now - max(last, first_seen[(tuner_id, trial_id)])
                if silent <= self.timeout:
                    continue
                released = self.oracle.release_trial_of(tuner_id)
                if released is not None:
                    _log(f"{self.label}: worker {tuner_id} silent for "
                         f"{silent:.0f} s; trial {int(released) + 1} goes to "
                         "the next worker")


# Records.


def _fingerprint(study):
    """What must not change between a run and its resumption."""
    config = study.config()
    config["search"].pop("max_trials")
    config["fixed"].pop("seeds")
    config.pop("description")
    return config


def _check_same_study(study, runs_dir, out_dir, backend):
    previous = records.read_json(os.path.join(runs_dir, STUDY_JSON))
    if previous is not None and previous != _fingerprint(study):
        raise SweepError(
            f"the study changed since its runs in {runs_dir} were made "
            "(only max_trials and seeds may change on resume); pass "
            "--overwrite to start again. Received: "
            f"study={study.results_name!r}"
        )
    summary = records.read_json(os.path.join(out_dir, SUMMARY_JSON))
    if summary is not None and summary.get("backend") != backend:
        raise SweepError(
            f"the results in {out_dir} were made with the "
            f"{summary.get('backend')} backend; set KERAS_BACKEND to it or "
            f"pass --overwrite. Received: backend={backend!r}"
        )


def _completed(oracle):
    return sum(1 for t in oracle.trials.values() if t.status == "COMPLETED")


def _best_trial(tuner, arm):
    trials = [
        t for t in tuner.oracle.get_best_trials(1) if t.status == "COMPLETED"
    ]
    if not trials:
        raise SweepError(
            f"no search trial of arm {arm!r} completed; see the trial errors "
            f"above or in {tuner.project_dir}. Received: arm={arm!r}"
        )
    return trials[0]


def _grid_columns(study):
    """The leading columns of a study with a grid: condition and its keys."""
    return ("condition", *study.grid) if study.grid else ()


def _curve_columns(study):
    return (*_grid_columns(study), *CURVE_COLUMNS)


def _search_columns(study=None):
    from keras_affine_div import hypermodels

    return (
        *(_grid_columns(study) if study is not None else ()),
        "arm", "trial_id", "status", "val_accuracy",
        *hypermodels.HYPERPARAMETER_NAMES,
        "val_loss", "loss", "accuracy", "wall_time_s",
    )


def _search_rows(study, condition, arm, tuner):
    rows = []
    for trial_id in sorted(tuner.oracle.trials):
        trial = tuner.oracle.trials[trial_id]
        row = {"arm": arm, "trial_id": trial_id, "status": trial.status,
               **_condition_cells(study, condition)}
        row.update(trial.hyperparameters.values)
        for name in ("val_accuracy", "val_loss", "loss", "accuracy",
                     "wall_time_s"):
            if trial.metrics.exists(name):
                row[name] = trial.metrics.get_last_value(name)
        rows.append(row)
    return rows


def _run_columns(study):
    from keras_affine_div import hypermodels

    columns = (
        "study", "arm", "seed", *RUN_METRICS,
        *hypermodels.HYPERPARAMETER_NAMES,
        "search_trial_id", "search_val_accuracy",
        "family", "dataset", "dataset_label", "train_samples", "val_samples",
        "test_samples", *study_module.MODEL_KEYS[study.family],
        "batch_size", "tuner", "max_trials", "lr_low", "lr_high",
        "optimizers", "kernel_scales", "backend",
    )
    if not study.grid:
        return columns
    # The grid values are columns already (as fixed settings, or as the
    # `optimizers` searched); the condition goes after the study.
    return (columns[0], "condition", *columns[1:],
            *(k for k in study.grid if k not in columns))


def _run_row(study, arm, seed, hp_values, best, data, result, backend,
             condition=None):
    """One row of trials.csv; `study` is resolved at `condition`, so that
    the fixed settings in the row are the condition's."""
    row = {"study": study.results_name, "arm": arm, "seed": seed}
    if condition is not None and condition.name:
        row["condition"] = condition.name
    row.update({k: result[k] for k in RUN_METRICS})
    row.update(hp_values)
    row.update(
        search_trial_id=best.trial_id,
        search_val_accuracy=best.score,
        family=study.family,
        dataset=study.fixed["dataset"],
        dataset_label=data.label,
        train_samples=len(data.x_train),
        val_samples=len(data.x_val),
        test_samples=len(data.x_test),
        batch_size=study.fixed["batch_size"],
        tuner=study.search["tuner"],
        max_trials=study.search["max_trials"],
        lr_low=study.search["learning_rate"][0],
        lr_high=study.search["learning_rate"][1],
        optimizers=study.search["optimizers"],
        kernel_scales=study.search["kernel_scales"],
        backend=backend,
        **study.model_kwargs,
    )
    return row


def _read_runs(out_dir, backend):
    runs = {}
    for row in records.read_csv(os.path.join(out_dir, TRIALS_CSV)):
        if row.get("backend") not in (None, "", backend):
            raise SweepError(
                f"{os.path.join(out_dir, TRIALS_CSV)} holds runs made with "
                f"the {row['backend']} backend; set KERAS_BACKEND to it or "
                f"pass --overwrite. Received: backend={backend!r}"
            )
        runs[row.get("condition", ""), row["arm"], row["seed"]] = row
    return runs


def _read_curves(out_dir):
    return {
        (r.get("condition", ""), r["arm"], r["seed"], r["epoch"]): r
        for r in records.read_csv(os.path.join(out_dir, CURVES_CSV))
    }


def _ordered(study, runs):
    names = [c.name for c in study.conditions()]

    def key(r):
        condition = r.get("condition", "")
        return (
            names.index(condition) if condition in names else len(names),
            study.arms.index(r["arm"]) if r["arm"] in study.arms
            else len(study.arms),
            int(r["seed"]),
        )

    return sorted(runs.values(), key=key)


def _summary(study, datas, backend, command, runs, tuners, role, wall_time,
             git_at_start=None):
    """summary.json; per arm, or per condition and arm with a grid.

    `git_commit` and `git_dirty` are the repository's state when the run
    started (the code that ran); `git_commit_at_end` is added when the
    repository moved during the run.
    """
    commit_at_end, dirty_at_end = records.git_state()
    commit, dirty = git_at_start or (commit_at_end, dirty_at_end)
    conditions = {}
    for condition in study.conditions():
        arms = {}
        for arm in study.arms:
            arms[arm] = _arm_summary(
                [r for r in runs if r["arm"] == arm
                 and r.get("condition", "") == condition.name],
                tuners[condition.name, arm], arm,
            )
        conditions[condition.name] = {"values": condition.values,
                                      "arms": arms}
    data = next(iter(datas.values()))
    summary = {
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
        "versions": records.library_versions(backend),
        "git_commit": commit,
        "git_dirty": dirty,
        **({"git_commit_at_end": commit_at_end}
           if commit_at_end != commit else {}),
        "command": command,
        "distributed": role is not None,
    }
    if study.grid:
        summary["conditions"] = conditions
    else:
        summary["arms"] = conditions[""]["arms"]
    summary.update(
        wall_time_s=wall_time,
        finished_at=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    )
    return summary


def _arm_summary(runs, tuner, arm):
    import statistics

    accs = [float(r["test_accuracy"]) for r in runs]
    best = _best_trial(tuner, arm)
    return {
        "seeds": len(accs),
        "test_accuracy_mean": statistics.fmean(accs) if accs else None,
        "test_accuracy_std": statistics.stdev(accs) if len(accs) > 1
        else 0.0,
        "test_accuracies": accs,
        "best_hyperparameters": dict(best.hyperparameters.values),
        "best_search_trial": best.trial_id,
        "best_val_accuracy": best.score,
        "search_trials_completed": _completed(tuner.oracle),
    }


def _format_hps(values):
    parts = []
    for key in sorted(values):
        value = values[key]
        parts.append(f"{key}={value:.3g}" if isinstance(value, float)
                     else f"{key}={value}")
    return ", ".join(parts)


def _elapsed(start):
    seconds = int(time.perf_counter() - start)
    return f"{seconds // 60}m{seconds % 60:02d}s"


def _log(message):
    print(message, flush=True)


if __name__ == "__main__":
    sys.exit(main())
