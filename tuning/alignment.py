"""The alignment of each arm's activation steps against the batch size.

    python -m tuning.alignment STUDY [--condition NAME ...] [--data-dir DIR]
        [--batch-sizes N ...] [--samples N] [--trained] [--seed N]
        [--results-dir DIR]

The paper's mechanism for claim (b): with a batch of `B` samples, one SGD
step on an affine layer moves sample `i`'s activation by
`-eta sum_j (x_i . x_j + 1) dL/dz_j`; the per-sample correction of our
layers cancels the `j = i` term only, so the cross-sample terms, which grow
with `B`, are left, and the prediction is that the correcting layers'
alignment with the ideal step `-eta dL/dz_i` degrades as `B` grows while
the baselines' does not (they never had it).

This measures it directly, training nothing unless `--trained` is given:
for each (condition, arm) of a study with finished runs, the arm's model
at its recorded setting (learning rate, optimiser, kernel scale), at
initialisation (seeded by `--seed`) and, with `--trained`, after training
that setting once on that seed (as `tuning.divergence` does). For each
batch size, `--samples` validation images are cut into disjoint batches of
that size; each batch gets one plain SGD step per layer
(`keras_affine_div.diagnostics.activation_update_alignment`), and the
per-sample multipliers and cosines of all the batches are pooled: their
median, 10th and 90th percentiles and the mean cosine, per layer. Writes
`alignment_vs_batch.csv` (one row per layer, batch size and phase),
`alignment_vs_batch.md` (hidden layers averaged) and
`alignment_vs_batch.png` into the study's results folder, replacing the
rows of the cells it measures and keeping the others.
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

CSV = "alignment_vs_batch.csv"
MARKDOWN = "alignment_vs_batch.md"
PLOT = "alignment_vs_batch.png"
DEFAULT_BATCH_SIZES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
DEFAULT_SAMPLES = 512
COLUMNS = (
    "condition",
    "arm",
    "seed",
    "phase",
    "batch",
    "layer",
    "class",
    "position",
    "samples",
    "median_scale",
    "q10_scale",
    "q90_scale",
    "mean_cosine",
    "backend",
    "command",
)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = argparse.ArgumentParser(
        prog="python -m tuning.alignment",
        description="The alignment of each arm's activation steps with the "
        "ideal step, against the batch size (claim (b)'s mechanism).",
    )
    cli.add_measuring_arguments(parser, schema.DEFAULT_RESULTS_DIR)
    parser.add_argument(
        "--batch-sizes",
        type=int,
        nargs="+",
        default=list(DEFAULT_BATCH_SIZES),
        metavar="N",
        help="the batch sizes measured (default: 1 to 512, powers of 2)",
    )
    parser.add_argument(
        "--samples",
        type=int,
        default=DEFAULT_SAMPLES,
        help="validation images per batch size, cut into batches "
        f"(default: {DEFAULT_SAMPLES}; at least the largest batch)",
    )
    parser.add_argument(
        "--trained",
        action="store_true",
        help="also measure after training the recorded setting once",
    )
    args = parser.parse_args(argv)
    command = " ".join(
        shlex.quote(a) for a in ["python", "-m", "tuning.alignment", *argv]
    )
    from tuning import runner

    try:
        _check(args)
        run(args, command)
    except (runner.SweepError, study_module.StudyError) as e:
        return cli.fail(e)
    return 0


def _check(args):
    from tuning import runner

    if any(b < 1 for b in args.batch_sizes) or args.seed < 0:
        raise runner.SweepError(
            "Expected positive batch sizes and a non-negative seed. "
            f"Received: batch_sizes={args.batch_sizes}, seed={args.seed}"
        )
    if args.samples < max(args.batch_sizes):
        raise runner.SweepError(
            "Expected --samples to hold at least one batch of the largest "
            f"size. Received: samples={args.samples}, "
            f"batch_sizes={args.batch_sizes}"
        )


def measure(model, x, y, batch_sizes, samples):
    """Pooled alignment of every measured layer of `model`, per batch size.

    Args:
        model: a compiled Keras model.
        x, y: at least `samples` inputs and labels.
        batch_sizes: the batch sizes.
        samples: how many of `x` each batch size uses, cut into
            `samples // batch` disjoint batches.

    Returns:
        list of dicts: one per (batch size, layer): `batch`, `layer`,
        `class`, `position`, `samples` (pooled), `median_scale`,
        `q10_scale`, `q90_scale`, `mean_cosine`.
    """
    import numpy as np

    from keras_affine_div import diagnostics

    # The layers `alignment_report` measures (the studies' models are
    # flat): every trainable Dense-like and Conv-like layer, in order.
    layers = [
        layer
        for layer in model.layers
        if isinstance(layer, diagnostics.DENSE_LIKE + diagnostics.CONV_LIKE)
        and layer.trainable_weights
    ]
    rows = []
    for batch in batch_sizes:
        count = samples // batch
        scales = [[] for _ in layers]
        cosines = [[] for _ in layers]
        for k in range(count):
            xs = x[k * batch : (k + 1) * batch]
            ys = y[k * batch : (k + 1) * batch]
            for i, layer in enumerate(layers):
                a = diagnostics.activation_update_alignment(
                    model, layer, xs, ys, model.loss
                )
                scales[i].append(np.asarray(a.scale, np.float64))
                cosines[i].append(np.asarray(a.cosine, np.float64))
        for i, layer in enumerate(layers):
            s = np.concatenate(scales[i])
            c = np.concatenate(cosines[i])
            q10, median, q90 = _quantiles(s)
            rows.append(
                {
                    "batch": batch,
                    "layer": layer.name,
                    "class": type(layer).__name__,
                    "position": i,
                    "samples": int(np.isfinite(s).sum()),
                    "median_scale": median,
                    "q10_scale": q10,
                    "q90_scale": q90,
                    "mean_cosine": float(np.nanmean(c))
                    if np.isfinite(c).any()
                    else float("nan"),
                }
            )
    return rows


def _quantiles(values):
    import numpy as np

    finite = values[np.isfinite(values)]
    if not finite.size:
        return (float("nan"),) * 3
    return tuple(float(q) for q in np.quantile(finite, (0.1, 0.5, 0.9)))


def run(args, command):
    import keras
    import keras_tuner

    from tuning import run_checks
    from tuning import runner
    from tuning import training

    study = study_module.load_study(args.study)
    out_dir, runs, conditions = run_checks.recorded_runs(
        study, args.results_dir, args.condition
    )
    backend = keras.backend.backend()
    rows = []
    cells = run_checks.recorded_cells(
        study, runs, conditions, args.data_dir, "alignment"
    )
    for condition, at, data, arm, recorded in cells:
        hp_values = schema.hyperparameters(recorded)
        if len(data.x_val) < args.samples:
            raise runner.SweepError(
                f"Expected at least {args.samples} validation images. "
                f"Received: {len(data.x_val)} in the study's data"
            )
        x, y = data.x_val[: args.samples], data.y_val[: args.samples]
        measured = []

        def inspect(model, phase, x=x, y=y, measured=measured):
            for row in measure(model, x, y, args.batch_sizes, args.samples):
                measured.append({**row, "phase": phase})

        if args.trained:
            training.train_and_evaluate(
                at, arm, hp_values, data, args.seed, inspect=inspect
            )
        else:
            hypermodel = training.make_hypermodel(at, arm, data)
            hp = keras_tuner.HyperParameters()
            hypermodel.declare_hyperparameters(hp)
            hp.values.update(hp_values)
            keras.backend.clear_session()
            keras.utils.set_random_seed(args.seed)
            inspect(hypermodel.build(hp), "init")
        for m in measured:
            rows.append(
                {
                    "condition": condition.name,
                    "arm": arm,
                    "seed": args.seed,
                    **m,
                    "backend": backend,
                    "command": command,
                }
            )
        runner.log(
            f"[alignment] {condition.name or study.name} {arm}: "
            f"{len(measured)} rows"
        )
    path = os.path.join(out_dir, CSV)
    rows = merge(records.read_csv(path), rows)
    records.write_csv(path, COLUMNS, rows)
    records.write_atomic(
        os.path.join(out_dir, MARKDOWN), render(rows, study.results_name)
    )
    plot(os.path.join(out_dir, PLOT), rows, study.results_name)
    runner.log(f"wrote {os.path.join(out_dir, MARKDOWN)}")


def merge(old, new):
    """The rows of `new`, and those of `old` whose (condition, arm, seed,
    phase) `new` does not measure."""

    def cell(row):
        return (
            row.get("condition", ""),
            row["arm"],
            str(row["seed"]),
            row["phase"],
        )

    measured = {cell(r) for r in new}
    return [r for r in old if cell(r) not in measured] + list(new)


def summarize(rows):
    """Per (condition, arm, phase, seed, batch): the hidden layers' median
    multiplier, 10-90 range over the median, and mean cosine, averaged over
    the hidden layers (every measured layer but the last, the output)."""
    import numpy as np

    groups = {}
    for r in rows:
        key = (r["condition"], r["arm"], r["phase"], str(r["seed"]))
        groups.setdefault(key, {}).setdefault(int(r["batch"]), []).append(r)
    out = []
    for key, by_batch in groups.items():
        for batch, layers in sorted(by_batch.items()):
            layers = sorted(layers, key=lambda r: int(r["position"]))
            hidden = layers[:-1] or layers
            median = np.mean([float(r["median_scale"]) for r in hidden])
            spread = np.mean(
                [
                    (float(r["q90_scale"]) - float(r["q10_scale"]))
                    / abs(float(r["median_scale"]))
                    for r in hidden
                ]
            )
            cosine = np.mean([float(r["mean_cosine"]) for r in hidden])
            out.append((*key, batch, median, spread, cosine))
    return out


def render(rows, name):
    commands = list(dict.fromkeys(r.get("command", "") for r in rows))
    lines = [
        f"# Alignment against batch size: {name}",
        "",
        markdown.commands(commands)
        + ". One plain SGD step per layer on disjoint batches of "
        "validation images, the per-sample multipliers and cosines of all "
        "the batches pooled. `median`: the median multiplier of the ideal "
        "step (1 = the ideal step; `|x|^2 + 1` for a plain affine layer on "
        "one sample); `spread`: `(q90 - q10) / |median|`, the sample "
        "dependence; `cos`: the mean cosine between the actual and the "
        "ideal step. Hidden layers averaged (the output layer left out).",
        "",
        "| condition | arm | phase | seed | batch | median | spread | cos |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for condition, arm, phase, seed, batch, median, spread, cos in summarize(
        rows
    ):
        lines.append(
            f"| {condition or '-'} | {arm} | {phase} | {seed} | {batch} "
            f"| {median:.3g} | {spread:.3g} | {cos:.3f} |"
        )
    return "\n".join(lines) + "\n"


def plot(path, rows, name):
    """The hidden layers' mean cosine and spread against the batch size,
    one line per (condition, arm, phase)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lines = {}
    for condition, arm, phase, _seed, batch, _, spread, cos in summarize(rows):
        label = " ".join(p for p in (condition, arm, phase) if p)
        lines.setdefault(label, []).append((batch, cos, spread))
    fig, (ax_cos, ax_spread) = plt.subplots(1, 2, figsize=(12, 4.5))
    for i, (label, points) in enumerate(lines.items()):
        batches, cosines, spreads = zip(*points)
        style = "--" if label.endswith("trained") else "-"
        ax_cos.plot(batches, cosines, style, marker="o", color=f"C{i % 10}")
        ax_spread.plot(
            batches, spreads, style, marker="o", color=f"C{i % 10}", label=label
        )
    for ax, ylabel in (
        (ax_cos, "mean cosine with the ideal step"),
        (ax_spread, "multiplier spread (q90 - q10) / |median|"),
    ):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("batch size")
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
    ax_spread.legend(fontsize=7)
    fig.suptitle(f"{name}: alignment of the activation step against batch size")
    fig.tight_layout()
    tmp = path + ".tmp.png"
    fig.savefig(tmp, dpi=110)
    plt.close(fig)
    os.replace(tmp, path)
    return path


if __name__ == "__main__":
    sys.exit(main())
