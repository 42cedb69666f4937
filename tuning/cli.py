"""What the command-line tools of `tuning/` share.

Every tool parses its arguments, runs, and prints; bad input (a study that
does not exist, results that are missing, flags that contradict) is one
line on stderr, `error: ...`, and exit status `EXIT_BAD_INPUT`, with no
traceback. (TensorFlow's start-up messages are silenced by the package's
`__init__`, before any tool imports it.)
"""

import sys

from tuning import records

EXIT_BAD_INPUT = 2


def fail(error):
    """Prints `error` as one line on stderr; returns `EXIT_BAD_INPUT`."""
    print(f"error: {error}", file=sys.stderr)
    return EXIT_BAD_INPUT


def add_study_size(parser):
    """`--quick` or `--full`: the study's `[quick]` or `[full]` overrides."""
    size = parser.add_mutually_exclusive_group()
    size.add_argument(
        "--quick",
        action="store_true",
        help="apply the study's [quick] overrides (results in <study>-quick)",
    )
    size.add_argument(
        "--full",
        action="store_true",
        help=(
            "apply the study's [full] overrides, for a GPU or Colab (results "
            "in <study>-full)"
        ),
    )


def add_measuring_arguments(parser, results_dir):
    """The arguments of a tool that measures a finished study's networks
    again (`tuning.divergence`, `tuning.alignment`): the study, the
    conditions, the data, the results folder and the seed."""
    parser.add_argument("study")
    parser.add_argument(
        "--condition",
        action="append",
        metavar="NAME",
        help="only this condition (repeatable)",
    )
    parser.add_argument("--data-dir")
    parser.add_argument("--results-dir", default=results_dir)
    parser.add_argument("--seed", type=int, default=0)


def emit(text, out=None):
    """Writes a view's Markdown to the file `out` (whole, or not at all)
    and says so, or prints it where `out` is `None`."""
    if out:
        records.write_atomic(out, text)
        print(f"wrote {out}")
    else:
        sys.stdout.write(text)
