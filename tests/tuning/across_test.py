"""`tuning.across`: each arm's change between conditions, and the
interaction of our arms' change with each comparator's."""

import re

import pytest
from scipy import stats

from tests.tuning import common
from tuning import across
from tuning import records
from tuning import statistics

# Nothing here depends on the Keras backend: run once (conftest.py).
pytestmark = pytest.mark.backend_independent

RESULTS = common.REPO_ROOT / "tuning" / "results"
COMMAND = re.compile(r"Written by `python -m tuning\.across ([^`]+)`")


def _write(folder, rows):
    folder.mkdir(parents=True)
    columns = ["study", "condition", "arm", "seed", "test_accuracy"]
    records.write_csv(str(folder / "trials.csv"), columns, rows)


def _rows(condition, arm, accs):
    return [
        {
            "study": "s",
            "condition": condition,
            "arm": arm,
            "seed": str(i),
            "test_accuracy": str(a),
        }
        for i, a in enumerate(accs)
    ]


def test_changes_and_interactions_against_welch(tmp_path):
    small = _rows("w-1", "affine_like", [0.50, 0.51, 0.52]) + _rows(
        "w-1", "dense", [0.40, 0.41, 0.42]
    )
    large = _rows("w-2", "affine_like", [0.51, 0.52, 0.53]) + _rows(
        "w-2", "dense", [0.45, 0.46, 0.47]
    )
    _write(tmp_path / "a", small)
    _write(tmp_path / "b", large)
    pairs = across.load(["a:w-1", "b:w-2"], str(tmp_path))
    changes, interactions = across.changes(pairs)
    assert [c["arm"] for c in changes] == ["affine_like", "dense"]
    assert changes[0]["diff"] == pytest.approx(0.01)
    assert changes[1]["diff"] == pytest.approx(0.05)
    (r,) = interactions
    expected = statistics.interaction(
        [0.50, 0.51, 0.52],
        [0.51, 0.52, 0.53],
        [0.40, 0.41, 0.42],
        [0.45, 0.46, 0.47],
    )
    assert r["diff"] == pytest.approx(-0.04)
    assert (r["low"], r["high"]) == pytest.approx(
        (expected["low"], expected["high"])
    )
    text = across.render(pairs, "python -m tuning.across a:w-1 b:w-2")
    assert "| a:w-1 -> b:w-2 | affine_like - dense | -0.0400 |" in text
    assert "ours gains less" in text


def test_detectable_at_the_holm_level_each_row_was_held_to(tmp_path):
    # Two arms, so the changes' family holds four one-sided p-values.
    # `dense` rises by 5 points over a small spread: its "rises" p-value is
    # the smallest of the four and Holm holds it to 0.05 / 4;
    # `affine_like`'s smaller p-value is the second smallest, held to
    # 0.05 / 3. The detectable difference at a level is the one-sided t
    # quantile at that level plus the power quantile, times the se.
    _write(
        tmp_path / "a",
        _rows("w-1", "affine_like", [0.50, 0.51, 0.53])
        + _rows("w-1", "dense", [0.40, 0.41, 0.42]),
    )
    _write(
        tmp_path / "b",
        _rows("w-2", "affine_like", [0.51, 0.52, 0.535])
        + _rows("w-2", "dense", [0.45, 0.46, 0.47]),
    )
    changes, _ = across.changes(across.load(["a:w-1", "b:w-2"], str(tmp_path)))
    affine_like, dense = changes
    assert dense["level"] == pytest.approx(0.05 / 4)
    assert affine_like["level"] == pytest.approx(0.05 / 3)
    for row in changes:
        expected = (
            stats.t.ppf(1 - row["level"], row["df"])
            + stats.t.ppf(0.8, row["df"])
        ) * row["se"]
        assert row["detectable_at_level"] == pytest.approx(expected)
        assert row["detectable_at_level"] > row["detectable"]
    text = across.render(
        across.load(["a:w-1", "b:w-2"], str(tmp_path)),
        "python -m tuning.across a:w-1 b:w-2",
    )
    assert (
        "| detectable at 0.05 | Holm level applied | detectable at it |" in text
    )
    assert (
        f"| {dense['detectable']:.4f} | 0.013 | {dense['detectable_at_level']:.4f} "
        "| rises |"
    ) in text


@pytest.mark.parametrize(
    "cells, match",
    [
        (["a:w-1"], r"Expected pairs of conditions"),
        (["a:w-1", "b:w-9"], r"expected one of \['b:w-2'\]. Received: 'b:w-9'"),
        (["a:w-1", "c:w-2"], r"Expected a finished study"),
    ],
    ids=["odd", "unknown_condition", "no_results"],
)
def test_bad_arguments(tmp_path, cells, match, capsys):
    _write(tmp_path / "a", _rows("w-1", "dense", [0.4, 0.5]))
    _write(tmp_path / "b", _rows("w-2", "dense", [0.4, 0.5]))
    with pytest.raises(across.AcrossError, match=match):
        across.load(cells, str(tmp_path))
    assert across.main([*cells, "--results-dir", str(tmp_path)]) == 2
    assert "error: " in capsys.readouterr().err


# Every committed view `tuning.across` wrote (it names its command).
VIEWS = sorted(
    p for p in RESULTS.glob("*/*.md") if COMMAND.search(p.read_text())
)


def test_the_committed_views_are_found():
    assert {p.name for p in VIEWS} >= {"width.md", "batch_size.md"}


@pytest.mark.parametrize(
    "path", VIEWS, ids=lambda p: f"{p.parent.name}/{p.name}"
)
def test_committed_view_is_what_its_command_gives(path):
    text = path.read_text()
    words = COMMAND.search(text).group(1).split()
    at = words.index("--out")
    cells = words[:at]
    pairs = across.load(cells, str(RESULTS))
    command = "python -m tuning.across " + " ".join(words)
    assert across.render(pairs, command) == text
