"""The plots of a study, drawn from its CSV files (matplotlib, Agg)."""

import math
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ACCURACY_PNG = "accuracy.png"
LEARNING_CURVES_PNG = "learning_curves.png"
LR_SWEEP_PNG = "val_accuracy_vs_learning_rate.png"


def plot_all(out_dir, title, arms, runs, curves, search_trials):
    """Writes the three plots of a study into `out_dir`.

    Args:
        out_dir: the study's results directory.
        title: str, the first line of every plot title.
        arms: the arms, in study order.
        runs: rows of `trials.csv` (dicts of str).
        curves: rows of `curves.csv`.
        search_trials: rows of `search_trials.csv`.

    Returns:
        list: the paths written.
    """
    return [
        plot_accuracy(os.path.join(out_dir, ACCURACY_PNG), title, arms, runs),
        plot_learning_curves(
            os.path.join(out_dir, LEARNING_CURVES_PNG), title, arms, curves
        ),
        plot_lr_sweep(
            os.path.join(out_dir, LR_SWEEP_PNG), title, arms, search_trials
        ),
    ]


def plot_accuracy(path, title, arms, runs):
    """Test accuracy per arm: one point per seed, and their mean."""
    fig, ax = plt.subplots(figsize=(1.6 * len(arms) + 2.5, 4))
    for i, arm in enumerate(arms):
        accs = [float(r["test_accuracy"]) for r in runs if r["arm"] == arm]
        if not accs:
            continue
        offsets = [
            (j - (len(accs) - 1) / 2) * 0.06 for j in range(len(accs))
        ]
        ax.scatter([i + o for o in offsets], accs, color="C0", alpha=0.7,
                   label="one seed" if i == 0 else None, zorder=3)
        mean = sum(accs) / len(accs)
        ax.hlines(mean, i - 0.25, i + 0.25, color="k",
                  label="mean" if i == 0 else None, zorder=4)
        ax.annotate(f"{mean:.3f} (n={len(accs)})", (i, mean),
                    textcoords="offset points", xytext=(0, 8),
                    ha="center", fontsize=8)
    ax.set_xticks(range(len(arms)), arms)
    ax.set_xlim(-0.6, len(arms) - 0.4)
    ax.set_ylabel("test accuracy")
    ax.set_title(f"{title}\ntest accuracy of the best setting, per seed")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    return _save(fig, path)


def plot_learning_curves(path, title, arms, curves):
    """Training loss and validation accuracy per epoch, per arm and seed."""
    fig, (ax_loss, ax_acc) = plt.subplots(1, 2, figsize=(10, 4))
    for i, arm in enumerate(arms):
        seeds = sorted({r["seed"] for r in curves if r["arm"] == arm}, key=int)
        for j, seed in enumerate(seeds):
            rows = sorted(
                (r for r in curves if r["arm"] == arm and r["seed"] == seed),
                key=lambda r: int(r["epoch"]),
            )
            epochs = [int(r["epoch"]) for r in rows]
            label = arm if j == 0 else None
            ax_loss.plot(epochs, [float(r["loss"]) for r in rows], "o-",
                         color=f"C{i}", alpha=0.6, label=label)
            ax_acc.plot(epochs, [float(r["val_accuracy"]) for r in rows],
                        "o-", color=f"C{i}", alpha=0.6, label=label)
    for ax, name in ((ax_loss, "training loss"),
                     (ax_acc, "validation accuracy")):
        ax.set_xlabel("epoch")
        ax.set_ylabel(name)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    ax_loss.set_title("training loss (one line per seed)")
    ax_acc.set_title("validation accuracy (one line per seed)")
    fig.suptitle(title)
    return _save(fig, path)


def plot_lr_sweep(path, title, arms, search_trials):
    """Validation accuracy of every search trial against its learning rate."""
    fig, ax = plt.subplots(figsize=(7, 4.5))
    markers = {"sgd": "o", "adam": "s"}
    for i, arm in enumerate(arms):
        for optimizer, marker in markers.items():
            rows = [
                r for r in search_trials
                if r["arm"] == arm and r["optimizer"] == optimizer
                and r.get("val_accuracy") not in ("", None)
                and math.isfinite(float(r["val_accuracy"]))
            ]
            if not rows:
                continue
            ax.scatter([float(r["learning_rate"]) for r in rows],
                       [float(r["val_accuracy"]) for r in rows],
                       color=f"C{i}", marker=marker, alpha=0.75,
                       label=f"{arm}, {optimizer}")
    ax.set_xscale("log")
    ax.set_xlabel("learning rate")
    ax.set_ylabel("validation accuracy")
    ax.set_title(f"{title}\nsearch trials: validation accuracy vs learning "
                 "rate")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return _save(fig, path)


def _save(fig, path):
    tmp = path + ".tmp.png"
    fig.tight_layout()
    fig.savefig(tmp, dpi=110)
    plt.close(fig)
    os.replace(tmp, path)
    return path
