"""`tuning.across`: each arm's change between conditions, and the
interaction of our arms' change with each comparator's."""

import re

import pytest

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


@pytest.mark.parametrize(
    "path", sorted(RESULTS.glob("*/width.md")), ids=lambda p: p.parent.name
)
def test_committed_view_is_what_its_command_gives(path):
    text = path.read_text()
    words = COMMAND.search(text).group(1).split()
    at = words.index("--out")
    cells = words[:at]
    pairs = across.load(cells, str(RESULTS))
    command = "python -m tuning.across " + " ".join(words)
    assert across.render(pairs, command) == text
