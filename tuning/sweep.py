"""The command line of the runner: parses, then calls `tuning.runner`.

    python -m tuning.sweep STUDY [--quick | --full] [--data-dir DIR]
        [--results-dir DIR] [--runs-dir DIR] [--overwrite] [--seeds N]
        [--max-trials N] [--worker-timeout SECONDS] [--verbose]
        [--tensorboard DIR] [--arms ARM [ARM ...]]
        [--conditions NAME [NAME ...]]
    python -m tuning.sweep STUDY --reproduce ARM SEED [--condition NAME]

For every (condition, arm) cell of the study, a KerasTuner search on the
validation split, in its own project under
`--runs-dir/<study>/[<condition>/]<arm>/`; then the chosen setting of the
cell retrained from scratch on `--seeds` seeds and evaluated on the test
split. Results go to `--results-dir/<study>/`, cell by cell as they finish
(see `tuning.schema`), and `report.md` at the end. With `--arms` or
`--conditions`, only those cells run: a share of the study, for one of
several processes or machines, each with its own results folder, which
`python -m tuning.merge` brings together.

Killed at any point, the same command resumes, from the results folder
alone if need be (a fresh clone with no runs folder). One runner per study
at a time: a second one is refused. With `KERASTUNER_TUNER_ID`,
`KERASTUNER_ORACLE_IP` and `KERASTUNER_ORACLE_PORT` set, the same command
runs as KerasTuner's distributed chief (a tuner id containing "chief") or
as a worker: see `tuning/README.md`.
"""

import argparse
import dataclasses
import shlex
import signal
import sys
import threading

from tuning import cli
from tuning import distributed
from tuning import schema
from tuning import study as study_module

DEFAULT_WORKER_TIMEOUT_S = distributed.DEFAULT_WORKER_TIMEOUT_S


@dataclasses.dataclass(frozen=True)
class Arguments:
    """The parsed command line, as plain values: how to run
    (`tuning.runner.Options`) and what only this command decides.

    Attributes:
        study: a study name or the path of a `.toml` file.
        options: a `tuning.runner.Options` (data, folders, overwrite,
            worker timeout, verbosity, TensorBoard, the command line, the
            cells of a share), or `None` for its defaults.
        quick: whether to apply the study's `[quick]` overrides.
        full: whether to apply the study's `[full]` overrides.
        seeds: the number of seeds, or `None` for the study's.
        max_trials: search trials per cell, or `None` for the study's.
        reproduce: `(arm, seed)` to retrain one recorded row, or `None`.
        condition: with `reproduce`, the row's condition.
        search_seed: repeat the study's searches from this search seed
            (`Study.repeat`), or `None`.
    """

    study: str
    options: object = None
    quick: bool = False
    full: bool = False
    seeds: int = None
    max_trials: int = None
    reproduce: tuple = None
    condition: str = None
    search_seed: int = None


def main(argv=None):
    """Runs the command line; returns the exit status."""
    argv = sys.argv[1:] if argv is None else [str(a) for a in argv]
    namespace = parser().parse_args(argv)
    command = " ".join(
        shlex.quote(a) for a in ["python", "-m", "tuning.sweep", *argv]
    )
    from tuning import runner

    # Each flag to the one of the two that holds it (lists as tuples).
    values = {
        k: tuple(v) if isinstance(v, list) else v
        for k, v in vars(namespace).items()
    }
    option_names = {f.name for f in dataclasses.fields(runner.Options)}
    arguments = Arguments(
        options=runner.Options(
            command=command,
            **{k: v for k, v in values.items() if k in option_names},
        ),
        **{k: v for k, v in values.items() if k not in option_names},
    )
    previous = _stop_on_sigterm()
    try:
        execute(arguments)
    except (runner.SweepError, study_module.StudyError) as e:
        return cli.fail(e)
    except _Terminated:
        print(
            "terminated (SIGTERM); run the same command again to resume",
            file=sys.stderr,
        )
        return 128 + signal.SIGTERM
    except KeyboardInterrupt:
        print(
            "interrupted; run the same command again to resume", file=sys.stderr
        )
        return 130
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    return 0


class _Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the runner is, so that it stops as on
    Ctrl-C (each results file is written whole or not at all) and says how
    to resume."""


def _stop_on_sigterm():
    """Makes SIGTERM raise `_Terminated`; returns the handler it replaced
    (`None` off the main thread, where no handler can be set)."""

    def handler(signum, frame):
        raise _Terminated()

    if threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signal.SIGTERM, handler)


def execute(arguments):
    """Runs or reproduces what `arguments` say (no argparse below here)."""
    from tuning import runner

    study = study_module.load_study(
        arguments.study,
        quick=arguments.quick,
        full=arguments.full,
        max_trials=arguments.max_trials,
        seeds=arguments.seeds,
    )
    if arguments.search_seed is not None:
        study = study.repeat(arguments.search_seed)
    options = arguments.options or runner.Options()
    if arguments.condition is not None and not arguments.reproduce:
        raise runner.SweepError(
            "--condition goes with --reproduce. Received: "
            f"condition={arguments.condition!r}"
        )
    if arguments.reproduce and (options.arms or options.conditions):
        raise runner.SweepError(
            "--arms and --conditions choose the cells a run searches and "
            "retrains; --reproduce takes its arm and --condition. Received: "
            f"arms={options.arms!r}, conditions={options.conditions!r}"
        )
    if arguments.reproduce:
        arm, seed = arguments.reproduce
        return runner.reproduce(study, options, arm, seed, arguments.condition)
    return runner.run(study, options)


def parser():
    """The argument parser of `python -m tuning.sweep`."""
    p = argparse.ArgumentParser(
        prog="python -m tuning.sweep",
        description=(
            "Runs a study: for every (condition, arm) cell, a KerasTuner "
            "search on the validation split, then the chosen setting "
            "retrained on several seeds and evaluated on test. Rerun the "
            "same command to resume."
        ),
    )
    p.add_argument(
        "study",
        help=(
            "a study name (a file in tuning/studies/, e.g. `smoke`) or a path "
            "to a .toml study file"
        ),
    )
    cli.add_study_size(p)
    _add_folder_arguments(p)
    _add_run_arguments(p)
    _add_which_arguments(p)
    return p


def _add_folder_arguments(p):
    """Where the data come from and the runs and results go."""
    p.add_argument(
        "--data-dir",
        help=(
            "local copy of the dataset (CIFAR-10: an image folder); defaults "
            "to $KERAS_AFFINE_DIV_CIFAR10_DIR, else tfds"
        ),
    )
    p.add_argument(
        "--tfds-data-dir",
        metavar="DIR",
        help=(
            "the TensorFlow Datasets data directory, where CIFAR-10 comes "
            "from tfds (default: tfds' own)"
        ),
    )
    p.add_argument(
        "--results-dir",
        default=schema.DEFAULT_RESULTS_DIR,
        help="where <study>/ results are written (default: tuning/results)",
    )
    p.add_argument(
        "--runs-dir",
        default=schema.DEFAULT_RUNS_DIR,
        help=(
            "KerasTuner projects, one per cell under <study>/ (default: "
            "tuning/runs); shared by the chief and workers when distributed"
        ),
    )


def _add_run_arguments(p):
    """How the study's cells run."""
    p.add_argument(
        "--overwrite",
        action="store_true",
        help="delete the study's runs and results and start again "
        "(default: resume)",
    )
    p.add_argument(
        "--seeds",
        type=_positive_int,
        metavar="N",
        help="number of seeds the chosen settings are retrained on "
        "(default: the study's)",
    )
    p.add_argument(
        "--max-trials",
        type=_positive_int,
        metavar="N",
        help="search trials per cell at most (default: the study's)",
    )
    p.add_argument(
        "--worker-timeout",
        type=_positive_int,
        metavar="SECONDS",
        default=DEFAULT_WORKER_TIMEOUT_S,
        help=(
            "distributed chief: a trial whose worker has sent no heartbeat "
            "for this long is handed to another worker (default: "
            f"{DEFAULT_WORKER_TIMEOUT_S})"
        ),
    )
    p.add_argument(
        "--verbose",
        action="store_true",
        help="show Keras' per-epoch progress and KerasTuner's trial tables "
        "(default: one line per trial)",
    )
    p.add_argument(
        "--tensorboard",
        metavar="DIR",
        help=(
            "write TensorBoard logs (per-epoch metrics and the HParams of "
            "every search trial and seed rerun) under DIR/<study>/"
        ),
    )


def _add_which_arguments(p):
    """Which runs: a reproduced row, a repeated search, a share of cells."""
    p.add_argument(
        "--reproduce",
        nargs=2,
        metavar=("ARM", "SEED"),
        help=(
            "retrain one (arm, seed) of a finished study with its recorded "
            "hyperparameters and print its test accuracy"
        ),
    )
    p.add_argument(
        "--condition",
        metavar="NAME",
        help=(
            "with --reproduce, for a study with a [grid]: the condition of "
            "the run (the `condition` column of trials.csv)"
        ),
    )
    p.add_argument(
        "--search-seed",
        type=int,
        default=None,
        metavar="N",
        help=(
            "repeat the study's searches from search seed N (seed reruns "
            "apart from both searches'), into "
            "<results>/<study>/repeats/search-seed-N/; with --arms and "
            "--conditions, only those cells. The study's report then "
            "carries the selection noise (default: the study itself)"
        ),
    )
    p.add_argument(
        "--arms",
        nargs="+",
        metavar="ARM",
        help=(
            "run only these arms' cells: a share of the study, merged with "
            "the others' by `python -m tuning.merge` (default: every arm)"
        ),
    )
    p.add_argument(
        "--conditions",
        nargs="+",
        metavar="NAME",
        help=(
            "run only these conditions' cells (names as in the `condition` "
            "column), a share like --arms (default: every condition)"
        ),
    )


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


if __name__ == "__main__":
    sys.exit(main())
