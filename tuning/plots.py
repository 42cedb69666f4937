"""The plots of a study, drawn from its CSV files (matplotlib, Agg).

A study with a `[grid]` gets the same three files, with one panel (one row
of panels for the learning curves) per condition. A study that extends
another (`[compare] extends`) is drawn with that study's arms first, at
the conditions the two share: the arms its tests compare.

The runner draws them when a study finishes; `python -m tuning.plots
STUDY` draws them again from the study's results folder.
"""

import argparse
import math
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib import ticker  # noqa: E402

from tuning import cli  # noqa: E402
from tuning import outcomes  # noqa: E402
from tuning import records  # noqa: E402
from tuning import result_rows  # noqa: E402
from tuning import schema  # noqa: E402

ACCURACY_PNG = "accuracy.png"
LEARNING_CURVES_PNG = "learning_curves.png"
LR_SWEEP_PNG = "val_accuracy_vs_learning_rate.png"


def plot_all(
    out_dir,
    title,
    arms,
    runs,
    curves,
    search_trials,
    conditions=None,
    metric="test_accuracy",
    joined=None,
):
    """Writes the three plots of a study into `out_dir`.

    Args:
        out_dir: the study's results directory.
        title: str, the first line of every plot title.
        arms: the arms, in study order.
        runs: rows of `trials.csv` (dicts of str).
        curves: rows of `curves.csv`.
        search_trials: rows of `search_trials.csv`.
        conditions: the condition names of a study with a grid (rows are
            matched on their `condition` column), one panel each; `None`
            for one plot of all rows.
        metric: the column of `runs` that `accuracy.png` shows:
            `"test_accuracy"`, or `"val_accuracy"` for a selection study
            (which chooses on validation and shows no test number).
        joined: for a study that extends another,
            `result_rows.read_extended`'s dict: that study's arms and rows
            are drawn first. Defaults to `None`.

    Returns:
        list: the paths written.
    """
    if joined and joined.get("runs"):
        arms = list(joined["arms"]) + [
            a for a in arms if a not in joined["arms"]
        ]
        runs = list(joined["runs"]) + list(runs)
        curves = list(joined["curves"]) + list(curves)
        search_trials = list(joined["search"]) + list(search_trials)
        title = f"{title}, with the arms of {joined['name']}"
    return [
        plot_accuracy(
            os.path.join(out_dir, ACCURACY_PNG),
            title,
            arms,
            runs,
            conditions,
            metric,
        ),
        plot_learning_curves(
            os.path.join(out_dir, LEARNING_CURVES_PNG),
            title,
            arms,
            curves,
            conditions,
        ),
        plot_lr_sweep(
            os.path.join(out_dir, LR_SWEEP_PNG),
            title,
            arms,
            search_trials,
            conditions,
            runs=runs,
        ),
    ]


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m tuning.plots",
        description=(
            "Draws the plots of a finished study again from its results "
            "folder (with the arms of the study it extends, if any)."
        ),
    )
    parser.add_argument("study", help="the study's results folder name")
    parser.add_argument("--results-dir", default=schema.DEFAULT_RESULTS_DIR)
    args = parser.parse_args(argv)
    try:
        paths = redraw(os.path.join(args.results_dir, args.study))
    except result_rows.ReportError as e:
        return cli.fail(e)
    for path in paths:
        print(f"wrote {path}")
    return 0


def redraw(out_dir):
    """Draws a finished study's three plots from its results folder, as
    the runner does when the study finishes.

    Args:
        out_dir: str, the study's results folder (`trials.csv`,
            `curves.csv`, `search_trials.csv` and `summary.json`).

    Returns:
        list: the paths written.

    Raises:
        result_rows.ReportError: if `trials.csv` is missing or empty.
    """
    runs, search, summary = result_rows.read_results(out_dir)
    config = summary.get("config") or {}
    compare = config.get("compare") or {}
    # The runner's title: the results folder, the data and the backend.
    labels = {
        r.get("dataset_label") or (summary.get("dataset") or {}).get("label")
        for r in runs
    }
    title = (
        f"{os.path.basename(os.path.normpath(out_dir))}: "
        f"{', '.join(sorted(str(label) for label in labels))}, "
        f"{summary.get('backend') or runs[0].get('backend')}"
    )
    return plot_all(
        out_dir,
        title,
        compare.get("arms")
        or result_rows.ordered_unique(r["arm"] for r in runs),
        runs,
        records.read_csv(os.path.join(out_dir, schema.CURVES_CSV)),
        search,
        conditions=result_rows.conditions(runs) if config.get("grid") else None,
        metric="val_accuracy" if compare.get("selects") else "test_accuracy",
        joined=result_rows.read_extended(out_dir, summary, runs),
    )


def _panels(conditions, rows, panel_size, ncols_max=4, **kwargs):
    """A figure with one panel per condition; yields (ax, name, rows)."""
    names = [None] if conditions is None else list(conditions)
    ncols = min(len(names), ncols_max)
    nrows = math.ceil(len(names) / ncols)
    fig, axes = plt.subplots(
        nrows,
        ncols,
        squeeze=False,
        figsize=(panel_size[0] * ncols, panel_size[1] * nrows),
        **kwargs,
    )
    flat = list(axes.flat)
    for ax in flat[len(names) :]:
        ax.set_visible(False)
    panels = [
        (
            ax,
            name,
            rows
            if name is None
            else [r for r in rows if r.get("condition") == name],
        )
        for ax, name in zip(flat, names)
    ]
    return fig, panels


def plot_accuracy(path, title, arms, runs, conditions=None, metric=None):
    """Test (or validation) accuracy per arm: one point per seed, and their
    mean."""
    metric = metric or "test_accuracy"
    what = metric.split("_")[0]
    what = "validation" if what == "val" else what
    heading = f"{title}\n{what} accuracy of the best setting, per seed"
    if conditions is None:
        fig, ax = plt.subplots(figsize=(1.6 * len(arms) + 2.5, 4))
        _draw_accuracy(ax, arms, runs, metric=metric)
        ax.set_title(heading)
        return _save(fig, path)
    fig, panels = _panels(
        conditions, runs, (0.9 * len(arms) + 1.5, 3.6), sharey=True
    )
    for ax, name, rows in panels:
        _draw_accuracy(ax, arms, rows, rotate=True, metric=metric)
        ax.set_title(name, fontsize=9)
    fig.suptitle(heading)
    return _save(fig, path)


def _draw_accuracy(ax, arms, runs, rotate=False, metric="test_accuracy"):
    for i, arm in enumerate(arms):
        accs = [float(r[metric]) for r in runs if r["arm"] == arm]
        if not accs:
            continue
        offsets = [(j - (len(accs) - 1) / 2) * 0.06 for j in range(len(accs))]
        ax.scatter(
            [i + o for o in offsets],
            accs,
            color="C0",
            alpha=0.7,
            label="one seed" if i == 0 else None,
            zorder=3,
        )
        mean = sum(accs) / len(accs)
        ax.hlines(
            mean,
            i - 0.25,
            i + 0.25,
            color="k",
            label="mean" if i == 0 else None,
            zorder=4,
        )
        ax.annotate(
            f"{mean:.3f} (n={len(accs)})",
            (i, mean),
            textcoords="offset points",
            xytext=(0, 8),
            ha="center",
            fontsize=8,
        )
    ax.set_xticks(
        range(len(arms)),
        arms,
        **({"rotation": 45, "ha": "right"} if rotate else {}),
    )
    ax.set_xlim(-0.6, len(arms) - 0.4)
    # Room above the highest mean for its label.
    ax.margins(y=0.15)
    ax.set_ylabel(metric.replace("val_", "validation ").replace("_", " "))
    ax.grid(axis="y", alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8)


def plot_learning_curves(path, title, arms, curves, conditions=None):
    """Training loss and validation accuracy per epoch, per arm and seed."""
    names = [None] if conditions is None else list(conditions)
    fig, axes = plt.subplots(
        len(names), 2, squeeze=False, figsize=(10, 4 * len(names))
    )
    for (ax_loss, ax_acc), name in zip(axes, names):
        rows = (
            curves
            if name is None
            else [r for r in curves if r.get("condition") == name]
        )
        _draw_curves(ax_loss, ax_acc, arms, rows)
        prefix = "" if name is None else f"{name}: "
        ax_loss.set_title(
            f"{prefix}training loss (one line per seed)",
            fontsize=9 if name else None,
        )
        ax_acc.set_title(
            f"{prefix}validation accuracy (one line per seed)",
            fontsize=9 if name else None,
        )
    fig.suptitle(title)
    return _save(fig, path)


def _draw_curves(ax_loss, ax_acc, arms, curves):
    for i, arm in enumerate(arms):
        seeds = sorted({r["seed"] for r in curves if r["arm"] == arm}, key=int)
        for j, seed in enumerate(seeds):
            rows = sorted(
                (r for r in curves if r["arm"] == arm and r["seed"] == seed),
                key=lambda r: int(r["epoch"]),
            )
            epochs = [int(r["epoch"]) for r in rows]
            label = arm if j == 0 else None
            for ax, key in ((ax_loss, "loss"), (ax_acc, "val_accuracy")):
                ax.plot(
                    epochs,
                    [float(r[key]) for r in rows],
                    "o-",
                    color=f"C{i}",
                    alpha=0.6,
                    label=label,
                )
    for ax, name in (
        (ax_loss, "training loss"),
        (ax_acc, "validation accuracy"),
    ):
        ax.set_xlabel("epoch")
        ax.set_ylabel(name)
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)


def plot_lr_sweep(path, title, arms, search_trials, conditions=None, runs=()):
    """Validation accuracy of every search trial against its learning rate.

    A trained trial is a dot (a square for Adam); a trial that diverged is
    a cross and one that did not learn a triangle (`outcomes`), at its
    validation accuracy, or at 0 where that is not a number. With `runs`
    (rows of `trials.csv`), a star marks each arm's chosen rate at the
    validation accuracy its search trial reached.
    """
    # Room on the right of each panel for its legend.
    fig, panels = _panels(conditions, search_trials, (10, 4.5), sharey=True)
    heading = "search trials: validation accuracy vs learning rate"
    for ax, name, rows in panels:
        chosen = [
            r for r in runs if name is None or r.get("condition", "") == name
        ]
        _draw_lr_sweep(ax, arms, rows, chosen)
        if name is not None:
            ax.set_title(name, fontsize=9)
    if conditions is None:
        panels[0][0].set_title(f"{title}\n{heading}")
    else:
        fig.suptitle(f"{title}\n{heading}")
    return _save(fig, path)


# Above this many rates, the log axis labels its own ticks.
MAX_RATE_TICKS = 12

# The marker of each failure (`outcomes`), drawn in the arm's colour.
FAILURE_MARKERS = {outcomes.DIVERGED: "x", outcomes.DID_NOT_LEARN: "v"}


def _draw_lr_sweep(ax, arms, search_trials, runs=()):
    markers = {"sgd": "o", "adam": "s"}
    num_classes = outcomes.classes_of(next(iter(runs), {}).get("dataset"))
    for i, arm in enumerate(arms):
        mine = [r for r in search_trials if r["arm"] == arm]
        found = {id(r): outcomes.of_row(r, num_classes) for r in mine}
        for optimizer, marker in markers.items():
            rows = [
                r
                for r in mine
                if r["optimizer"] == optimizer
                and found[id(r)] == outcomes.OK
                and _finite(r.get("val_accuracy"))
            ]
            if not rows:
                continue
            ax.scatter(
                [float(r["learning_rate"]) for r in rows],
                [float(r["val_accuracy"]) for r in rows],
                color=f"C{i}",
                marker=marker,
                alpha=0.75,
                label=f"{arm}, {optimizer}",
            )
        for failure, marker in FAILURE_MARKERS.items():
            rows = [r for r in mine if found[id(r)] == failure]
            if rows:
                ax.scatter(
                    [float(r["learning_rate"]) for r in rows],
                    [_accuracy_or_zero(r) for r in rows],
                    color=f"C{i}",
                    marker=marker,
                    s=60,
                    label=f"{arm}: {failure}",
                )
        picked = [r for r in runs if r["arm"] == arm and r.get("learning_rate")]
        if picked and _finite(picked[0].get("search_val_accuracy")):
            ax.scatter(
                [float(picked[0]["learning_rate"])],
                [float(picked[0]["search_val_accuracy"])],
                color=f"C{i}",
                marker="*",
                s=260,
                edgecolors="black",
                linewidths=0.8,
                zorder=3,
                label=f"{arm}: chosen rate",
            )
    ax.set_xscale("log")
    rates = sorted({float(r["learning_rate"]) for r in search_trials})
    if 0 < len(rates) <= MAX_RATE_TICKS:
        # The grid's rates as ticks, in place of the log axis' labels
        # (which crowd where the rates span less than a decade).
        ax.xaxis.set_minor_locator(ticker.NullLocator())
        ax.set_xticks(rates, [f"{rate:.3g}" for rate in rates])
    ax.set_xlabel("learning rate")
    ax.set_ylabel("validation accuracy")
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))


def _finite(value):
    try:
        return math.isfinite(float(value))
    except (TypeError, ValueError):
        return False


def _accuracy_or_zero(row):
    value = row.get("val_accuracy")
    return float(value) if _finite(value) else 0.0


def _save(fig, path):
    """Writes `fig` to `path` whole or not at all: a failed write (a full
    disk) leaves the old plot and no partial file."""
    tmp = path + ".tmp.png"
    try:
        fig.tight_layout()
        fig.savefig(tmp, dpi=110)
        os.replace(tmp, path)
    finally:
        plt.close(fig)
        if os.path.exists(tmp):
            os.remove(tmp)
    return path


if __name__ == "__main__":
    sys.exit(main())
