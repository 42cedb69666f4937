"""A run that diverged and one that did not learn are told apart."""

import math

import matplotlib
import pytest

from tuning import outcomes
from tuning import plots
from tuning import report
from tuning import search

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

# Nothing here depends on the Keras backend: run once (conftest.py).
pytestmark = pytest.mark.backend_independent

GUESS = math.log(10)


@pytest.mark.parametrize(
    "loss,expected",
    [
        (float("nan"), outcomes.DIVERGED),
        (float("inf"), outcomes.DIVERGED),
        (2 * GUESS + 1e-3, outcomes.DIVERGED),
        (2 * GUESS, outcomes.DID_NOT_LEARN),
        # The smoke run's rate of 1e-3: validation 0.148, still learning.
        (GUESS + 0.01, outcomes.DID_NOT_LEARN),
        (GUESS, outcomes.OK),
        (0.4, outcomes.OK),
    ],
)
def test_outcome(loss, expected):
    assert outcomes.outcome(loss, 10) == expected


@pytest.mark.parametrize(
    "row,expected",
    [
        ({"diverged": "False", "loss": "2.5"}, outcomes.OK),
        ({"diverged": "True", "loss": "2.4"}, outcomes.DID_NOT_LEARN),
        ({"diverged": "True", "loss": "nan"}, outcomes.DIVERGED),
        ({"diverged": "True", "final_train_loss": "9.1"}, outcomes.DIVERGED),
        ({"diverged": "True", "final_train_loss": "2.35"}, "did not learn"),
        # A failed row with no readable loss counts as diverged.
        ({"diverged": "True", "loss": ""}, outcomes.DIVERGED),
        ({"diverged": True, "loss": 2.4}, outcomes.DID_NOT_LEARN),
        ({}, outcomes.OK),
    ],
)
def test_of_row(row, expected):
    assert outcomes.of_row(row, 10) == expected


def test_the_console_names_the_failure():
    slow = {"diverged": 1.0, "loss": 2.35}
    assert search.failure(slow, 10, " ({})") == " (did not learn)"
    assert search.failure(
        {"diverged": 1.0, "loss": float("nan")}, 10, ", {}"
    ) == (", diverged")
    assert search.failure({"diverged": 0.0, "loss": 0.9}, 10, " ({})") == ""


def _trials():
    return [
        {"arm": "dense", "diverged": "False", "loss": "1.1"},
        {"arm": "dense", "diverged": "True", "loss": "2.40"},
        {"arm": "dense", "diverged": "True", "loss": "nan"},
        {"arm": "dense", "diverged": "True", "loss": "2.33"},
    ]


def test_the_report_counts_each_failure():
    row = {"search_trials": "4", "dataset": "cifar10"}
    assert report._search_count(row, _trials()) == (
        "4 (1 diverged, 2 did not learn)"
    )
    # Without a slow run, the report reads as it always did.
    assert report._search_count(row, _trials()[:3:2]) == "4 (1 diverged)"
    seeds = [
        {"diverged": "False", "final_train_loss": "1.0"},
        {"diverged": "True", "final_train_loss": "2.4"},
    ]
    assert report._diverged(seeds) == "0/2, 1/2 did not learn"
    assert report._diverged(seeds[:1]) == "0/1"


def test_the_learning_rate_plot_marks_failures_and_the_choice(tmp_path):
    trials = [
        {
            "arm": "dense",
            "optimizer": "sgd",
            "learning_rate": lr,
            "val_accuracy": acc,
            "diverged": failed,
            "loss": loss,
        }
        for lr, acc, failed, loss in [
            ("0.001", "0.148", "True", "2.35"),
            ("0.01", "0.41", "False", "1.6"),
            ("0.1", "0.45", "False", "1.4"),
            ("1.0", "nan", "True", "nan"),
        ]
    ]
    runs = [
        {
            "arm": "dense",
            "learning_rate": "0.1",
            "search_val_accuracy": "0.45",
            "dataset": "cifar10",
        }
    ]
    fig, ax = plt.subplots()
    plots._draw_lr_sweep(ax, ["dense"], trials, runs)
    labelled = {c.get_label(): c.get_offsets().tolist() for c in ax.collections}
    plt.close(fig)
    assert labelled["dense, sgd"] == [[0.01, 0.41], [0.1, 0.45]]
    assert labelled["dense: did not learn"] == [[0.001, 0.148]]
    # A diverged trial has no accuracy to show: drawn at 0.
    assert labelled["dense: diverged"] == [[1.0, 0.0]]
    assert labelled["dense: chosen rate"] == [[0.1, 0.45]]
    path = plots.plot_lr_sweep(
        str(tmp_path / "lr.png"), "t", ["dense"], trials, runs=runs
    )
    assert (tmp_path / "lr.png").stat().st_size > 0 and path.endswith("lr.png")
