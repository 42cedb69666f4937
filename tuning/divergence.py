"""The affine divergence of each arm of a finished MLP study, measured.

    python -m tuning.divergence STUDY [--condition NAME ...] [--data-dir DIR]
        [--results-dir DIR] [--seed N] [--batch N]

For each (condition, arm) of a finished study, retrains the arm's recorded
best setting with one seed (as `tuning.sweep` did) and, at initialisation and
after training, runs `keras_affine_div.diagnostics.alignment_report` on one
batch of validation images: one plain SGD step per layer, the effective
learning-rate multiplier `scale` of every sample against the ideal step,
summarised per layer by its mean, its coefficient of variation (the sample
dependence the theory is about) and the mean cosine. Writes
`divergence.csv` (one row per layer and phase) and `divergence.md` (one row
per arm and phase: the hidden layers averaged, the output layer apart) into
the study's results folder; the (condition, arm, seed) cells of earlier runs
that this one does not measure are kept.
"""

import argparse
import os
import shlex
import sys

from tuning import cli
from tuning import markdown
from tuning import records
from tuning import schema
from tuning import study as study_module

COLUMNS = (
    "condition",
    "arm",
    "seed",
    "phase",
    "layer",
    "class",
    "position",
    "mean_scale",
    "std_scale",
    "cv_scale",
    "mean_cosine",
    "batch",
    "test_accuracy",
    "backend",
    "command",
)
# The command of rows written before rows named theirs.
NOT_RECORDED = "(earlier run, not recorded)"


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = argparse.ArgumentParser(prog="python -m tuning.divergence")
    cli.add_measuring_arguments(parser, schema.DEFAULT_RESULTS_DIR)
    parser.add_argument(
        "--batch",
        type=int,
        default=None,
        help="diagnostic batch size (default: the study's)",
    )
    args = parser.parse_args(argv)
    command = " ".join(
        shlex.quote(a) for a in ["python", "-m", "tuning.divergence", *argv]
    )
    from tuning import runner

    try:
        run(args, command)
    except (runner.SweepError, study_module.StudyError) as e:
        return cli.fail(e)
    return 0


def run(args, command):
    import keras

    from keras_affine_div import diagnostics
    from tuning import run_checks
    from tuning import runner
    from tuning import training

    study = study_module.load_study(args.study)
    if study.family != "mlp":
        raise runner.SweepError(
            "Expected an MLP study. Received: "
            f"study={study.name!r}, family={study.family!r}"
        )
    out_dir, runs, conditions = run_checks.recorded_runs(
        study, args.results_dir, args.condition
    )
    backend = keras.backend.backend()
    rows = []
    cells = run_checks.recorded_cells(
        study, runs, conditions, args.data_dir, "divergence", seed=args.seed
    )
    for condition, at, data, arm, recorded in cells:
        hp_values = schema.hyperparameters(recorded)
        batch = args.batch or at.fixed["batch_size"]
        x, y = data.x_val[:batch], data.y_val[:batch]
        measured = []

        def inspect(model, phase, x=x, y=y, measured=measured):
            report = diagnostics.alignment_report(model, x, y, model.loss)
            for position, row in enumerate(report):
                measured.append({**row, "phase": phase, "position": position})

        result = training.train_and_evaluate(
            at, arm, hp_values, data, args.seed, inspect=inspect
        )
        for m in measured:
            rows.append(
                {
                    "condition": condition.name,
                    "arm": arm,
                    "seed": args.seed,
                    "layer": m["layer"],
                    "class": m["class"],
                    "phase": m["phase"],
                    "position": m["position"],
                    "mean_scale": m["mean_scale"],
                    "std_scale": m["std_scale"],
                    "cv_scale": m["cv_scale"],
                    "mean_cosine": m["mean_cosine"],
                    "batch": batch,
                    "test_accuracy": result["test_accuracy"],
                    "backend": backend,
                    "command": command,
                }
            )
        runner.log(
            f"[divergence] {condition.name or study.name} {arm}: "
            f"test accuracy {result['test_accuracy']:.4f} "
            f"(recorded {float(recorded['test_accuracy']):.4f})"
        )
    path = os.path.join(out_dir, "divergence.csv")
    rows = merge(records.read_csv(path), rows, study)
    records.write_csv(path, COLUMNS, rows)
    records.write_atomic(
        os.path.join(out_dir, "divergence.md"),
        render(rows, study, command, backend),
    )
    runner.log(f"wrote {os.path.join(out_dir, 'divergence.md')}")


def merge(old, new, study):
    """The rows of `divergence.csv` after a run measured `new`.

    A run measures some conditions; the rows of other (condition, arm,
    seed) cells that an earlier run wrote are kept, so that conditions can
    be measured one at a time as a long study finishes them.

    Args:
        old: list of dicts, the rows already in `divergence.csv`.
        new: list of dicts, the rows just measured.
        study: `tuning.study.Study`, for the order of the rows.

    Returns:
        list of dicts: the rows of `new` and the rows of `old` whose
        (condition, arm, seed) `new` does not have, in the order of the
        study's conditions and arms, each cell's layers as measured.
    """

    def cell(row):
        return (row.get("condition", ""), row["arm"], str(row["seed"]))

    measured = {cell(r) for r in new}
    rows = [r for r in old if cell(r) not in measured] + list(new)
    conditions = [c.name for c in study.conditions()]

    def order(row):
        condition, arm, seed = cell(row)
        return (
            conditions.index(condition)
            if condition in conditions
            else len(conditions),
            study.arms.index(arm) if arm in study.arms else len(study.arms),
            int(seed),
        )

    return sorted(rows, key=order)


def render(rows, study, command, backend):
    """`divergence.md`: per (condition, arm, phase, seed), hidden layers
    averaged.

    `command` and `backend` are the run's; rows kept from earlier runs name
    theirs (older rows without a `command` say it was not recorded).
    """
    commands = list(
        dict.fromkeys(r.get("command") or NOT_RECORDED for r in rows)
    ) or [command]
    backends = list(
        dict.fromkeys(r.get("backend") or backend for r in rows)
    ) or [backend]
    lines = [
        f"# Affine divergence per arm: {study.results_name}",
        "",
        markdown.commands(commands)
        + f" (backend {', '.join(backends)}). Each arm's recorded best "
        "setting, retrained on the seed shown, one batch of validation "
        "images; one SGD step per "
        "layer. `scale`: the effective learning-rate multiplier of a sample "
        "(1 = the ideal step); `cv`: its coefficient of variation across the "
        "batch; `cos`: the cosine between the actual and the ideal step. "
        "Hidden layers are averaged; the output layer (a plain `Dense`, "
        "or `AffineLikeDense` in `affine_like_head`) is shown apart.",
        "",
        "| condition | arm | phase | seed | hidden: mean scale | hidden: cv | "
        "hidden: cos | output layer | output: mean scale | output: cv |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]

    def key(r):
        return (r["condition"], r["arm"], r["phase"], str(r["seed"]))

    for condition, arm, phase, seed in dict.fromkeys(key(r) for r in rows):
        layers = [r for r in rows if key(r) == (condition, arm, phase, seed)]
        hidden, head = layers[:-1], layers[-1]
        lines.append(
            f"| {condition or '-'} | {arm} | {phase} | {seed} "
            f"| {_mean(r['mean_scale'] for r in hidden):.3g} "
            f"| {_mean(r['cv_scale'] for r in hidden):.3g} "
            f"| {_mean(r['mean_cosine'] for r in hidden):.3f} "
            f"| {head['class']} "
            f"| {float(head['mean_scale']):.3g} "
            f"| {float(head['cv_scale']):.3g} |"
        )
    return "\n".join(lines) + "\n"


def _mean(values):
    values = [float(v) for v in values]
    return sum(values) / len(values) if values else float("nan")


if __name__ == "__main__":
    sys.exit(main())
