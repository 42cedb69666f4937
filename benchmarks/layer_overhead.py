"""What our layers cost next to Dense, Conv2D and the built-in normalisers.

Times a training step (`model.train_on_batch`, `jit_compile="auto"`) and
an inference step (`model.predict_on_batch`) of one-layer models, every
model of a case interleaved round by round in one process, and reports the
median per-round ratio to the baseline (`Dense` or `Conv2D`); measures the
peak memory of a training step of the conv models, in a fresh process
each. benchmarks/README.md says what is measured, how, and what it found;
its "Layout" section says which module does what.

Usage, from the repository root (the backend comes from `KERAS_BACKEND`):

    python -m benchmarks.layer_overhead [--quick | --smoke] [--output DIR]
        [--rounds N]
    python -m benchmarks.layer_overhead --report [--output DIR] [--readme F]

Writes `<machine>-<backend>.json` (`-quick`, `-smoke` for the short modes)
under `--output` (default `benchmarks/results`) and prints a table.
`--report` rewrites the tables of `benchmarks/README.md` from the JSON files.
"""

import argparse
import dataclasses
import pathlib
import sys

from benchmarks import cases
from benchmarks import report
from benchmarks import runner


@dataclasses.dataclass
class Options:
    """What to do, from the command line.

    Attributes:
        mode: `"full"`, `"quick"`, `"smoke"` (a run) or `"report"`.
        output: the folder of the result files.
        readme: the file `--report` rewrites.
        rounds: timed rounds per case, or `None` for the mode's.
        command: the command line, recorded in the result.
    """

    mode: str = "full"
    output: str = str(report.RESULTS_DIR)
    readme: str = str(report.README)
    rounds: int | None = None
    command: tuple = ()


def _command(argv):
    """The command line as typed: `python -m <module>` or the file's path."""
    program = ["-m", __spec__.name] if __spec__ else sys.argv[:1]
    return (pathlib.Path(sys.executable).name, *program, *argv)


def parse_args(argv=None):
    """Parses the command line into `Options`.

    Args:
        argv: the arguments, without the program. Defaults to
            `sys.argv[1:]`.

    Returns:
        Options: the options.
    """
    argv = sys.argv[1:] if argv is None else [str(arg) for arg in argv]
    parser = argparse.ArgumentParser(
        description="Train-step and inference cost of the keras-affine-div "
        "layers next to Dense, Conv2D and the Keras normalisers "
        "(backend from KERAS_BACKEND).",
    )
    mode = parser.add_mutually_exclusive_group()
    for flag, help_text in (
        ("quick", "a short run (about a minute)"),
        ("smoke", "tiny shapes, one round (tests)"),
        ("report", "write the README tables from the JSON files"),
    ):
        mode.add_argument(
            f"--{flag}",
            dest="mode",
            action="store_const",
            const=flag,
            help=help_text,
        )
    mode.add_argument(
        "--mode",
        dest="mode",
        choices=sorted(cases.MODES),
        help=argparse.SUPPRESS,
    )
    parser.add_argument(
        "--output",
        default=Options.output,
        help="directory of the JSON results (default: benchmarks/results)",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=None,
        help="timed rounds per case (default: 15 full, 5 quick, 1 smoke)",
    )
    parser.add_argument(
        "--readme",
        default=Options.readme,
        help="the file --report rewrites",
    )
    args = parser.parse_args(argv)
    if args.rounds is not None and args.rounds < 1:
        parser.error(f"--rounds must be >= 1. Received: {args.rounds}")
    return Options(
        mode=args.mode or "full",
        output=args.output,
        readme=args.readme,
        rounds=args.rounds,
        command=_command(argv),
    )


def main(argv=None):
    options = parse_args(argv)
    if options.mode == "report":
        count = report.write_report(options.output, options.readme)
        print(f"wrote {count} result tables into {options.readme}")
    else:
        runner.run_benchmark(
            options.mode, options.output, options.rounds, options.command
        )


if __name__ == "__main__":
    main()
