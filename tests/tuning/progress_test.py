import csv
import shutil

import pytest

from tuning import progress
from tuning import provenance
from tuning import study as study_module
from tuning import supersede

# Nothing here depends on the Keras backend: run once (conftest.py).
pytestmark = pytest.mark.backend_independent

SMOKE = provenance.REPO_ROOT / "tuning" / "results" / "smoke"


def _grid_study(tmp_path):
    path = tmp_path / "g.toml"
    path.write_text(
        """
description = "two conditions"
[compare]
family = "mlp"
arms = ["dense", "affine_like"]
comparators = ["dense"]
[search]
tuner = "bracket"
max_trials = 4
learning_rate = [0.01, 0.1]
optimizers = ["sgd"]
seed = 0
[fixed]
dataset = "cifar10"
train_samples = 64
val_samples = 32
test_samples = 32
width = 8
activation = "tanh"
epochs = 1
batch_size = 32
seeds = 3
[grid]
depth = [1, 2]
"""
    )
    return study_module.load_study(str(path))


def _write(path, columns, rows):
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)


def test_states_and_time_of_a_grid_study(tmp_path):
    study = _grid_study(tmp_path)
    out = tmp_path / "results" / study.results_name
    out.mkdir(parents=True)
    _write(
        out / "cells.csv",
        ["condition", "arm", "search_wall_time_s", "seeds_wall_time_s"],
        [
            {
                "condition": "depth-1",
                "arm": "dense",
                "search_wall_time_s": "100",
                "seeds_wall_time_s": "20",
            },
            {
                "condition": "depth-1",
                "arm": "affine_like",
                "search_wall_time_s": "200",
                "seeds_wall_time_s": "40",
            },
            {
                "condition": "depth-2",
                "arm": "dense",
                "search_wall_time_s": "300",
                "seeds_wall_time_s": "",
            },
        ],
    )
    seeds = [("depth-1", "dense", s) for s in range(3)]
    seeds += [("depth-1", "affine_like", s) for s in range(3)]
    # A fourth seed of a run with more seeds does not count as one of 3.
    seeds += [("depth-2", "dense", 0), ("depth-2", "dense", 5)]
    _write(
        out / "trials.csv",
        ["condition", "arm", "seed", "test_accuracy", "wall_time_s"],
        [
            {
                "condition": c,
                "arm": a,
                "seed": str(s),
                "test_accuracy": "0.5",
                "wall_time_s": "40",
            }
            for c, a, s in seeds
        ],
    )
    cells = progress.progress(study, str(out))
    states = {(c["condition"], c["arm"]): c for c in cells}
    assert [k for k in states] == [
        ("depth-1", "dense"),
        ("depth-1", "affine_like"),
        ("depth-2", "dense"),
        ("depth-2", "affine_like"),
    ]
    assert states["depth-1", "dense"]["state"] == "done"
    assert states["depth-1", "affine_like"]["wall_time_s"] == 240.0
    searched = states["depth-2", "dense"]
    assert (searched["state"], searched["seeds_done"]) == ("searched", 1)
    # Its search, and the one seed that counts (not the 6th of another run).
    assert searched["wall_time_s"] == 340.0
    assert states["depth-2", "affine_like"]["state"] == "not started"
    text = progress.render(study, cells)
    assert text.startswith(
        "g: 2 of 4 cells done, 1 searched with seeds to run, 1 not started."
    )
    assert "| depth-1 | done | done |" in text
    assert "| depth-2 | seeds 1/3 | - |" in text
    # Done cells take the seeds' time from cells.csv: 120 + 240 + 340 s
    # spent; the 2 cells left at the done mean of 180 s.
    assert "Wall time of the cells so far: 12 min." in text
    assert "Left: 2 cells; at the done cells' mean of 3.0 min, about 6 min" in (
        text
    )
    # With one seed per cell, the searched cell is done.
    one = progress.progress(study, str(out), seeds=1)
    assert [c["state"] for c in one].count("done") == 3


def test_a_cell_being_searched(tmp_path):
    study = _grid_study(tmp_path)
    out = tmp_path / "results" / study.results_name
    out.mkdir(parents=True)
    _write(
        out / "cells.csv",
        ["condition", "arm", "search_wall_time_s", "seeds_wall_time_s"],
        [
            {
                "condition": "depth-1",
                "arm": "dense",
                "search_wall_time_s": "100",
                "seeds_wall_time_s": "20",
            }
        ],
    )
    _write(
        out / "trials.csv",
        ["condition", "arm", "seed", "test_accuracy", "wall_time_s"],
        [
            {
                "condition": "depth-1",
                "arm": "dense",
                "seed": str(s),
                "test_accuracy": "0.5",
                "wall_time_s": "40",
            }
            for s in range(3)
        ],
    )
    # Two trials of the next cell's search ended, and one row left behind
    # by the finished cell (a kill between its writes) that does not count.
    _write(
        out / "search_progress.csv",
        ["condition", "arm", "trial_id", "status", "wall_time_s"],
        [
            {
                "condition": c,
                "arm": a,
                "trial_id": t,
                "status": "COMPLETED",
                "wall_time_s": "30",
            }
            for c, a, t in [
                ("depth-1", "dense", "0"),
                ("depth-1", "affine_like", "0"),
                ("depth-1", "affine_like", "1"),
            ]
        ],
    )
    cells = progress.progress(study, str(out))
    states = {(c["condition"], c["arm"]): c for c in cells}
    assert states["depth-1", "dense"]["state"] == "done"
    assert states["depth-1", "dense"]["wall_time_s"] == 120.0
    searching = states["depth-1", "affine_like"]
    assert (searching["state"], searching["trials_done"]) == ("searching", 2)
    assert searching["wall_time_s"] == 60.0
    text = progress.render(study, cells)
    assert text.startswith(
        "g: 1 of 4 cells done, 0 searched with seeds to run, 1 being "
        "searched, 2 not started."
    )
    assert "| depth-1 | done | trials 2/4 |" in text
    assert "Wall time of the cells so far: 3 min." in text


def test_committed_smoke_results_are_done(tmp_path, capsys):
    shutil.copytree(
        SMOKE, tmp_path / "smoke", ignore=shutil.ignore_patterns(".runner.lock")
    )
    assert progress.main(["smoke", "--results-dir", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    assert text.startswith("smoke: 2 of 2 cells done")
    assert "| (no grid) | done | done |" in text
    assert "Every cell is done." in text


def test_cells_set_aside_count_as_not_started_and_are_named(tmp_path, capsys):
    shutil.copytree(
        SMOKE, tmp_path / "smoke", ignore=shutil.ignore_patterns(".runner.lock")
    )
    arms = study_module.load_study("smoke").arms
    assert (
        supersede.main(
            [
                "smoke",
                "--arms",
                arms[-1],
                "--as",
                "old-code",
                "--reason",
                "made before a fix",
                "--results-dir",
                str(tmp_path),
                "--runs-dir",
                str(tmp_path / "runs"),
            ]
        )
        == 0
    )
    capsys.readouterr()
    aside = progress.set_aside(str(tmp_path / "smoke"))
    assert [(s["name"], s["arms"], s["cells"]) for s in aside] == [
        ("old-code", [arms[-1]], 1)
    ]
    assert aside[0]["reason"] == "made before a fix"
    assert progress.main(["smoke", "--results-dir", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    assert text.startswith("smoke: 1 of 2 cells done, 0 searched with seeds")
    assert "1 not started." in text.splitlines()[0]
    assert (
        f"1 cell of {arms[-1]}, in superseded/old-code/; reason: made "
        "before a fix"
    ) in text
    # Nothing set aside: no such line.
    assert progress.set_aside(str(tmp_path / "nowhere")) == []


def test_no_results_folder_and_bad_input(tmp_path, capsys):
    assert progress.main(["smoke", "--results-dir", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    assert "0 of 2 cells done, 0 searched with seeds to run, 2 not started" in (
        text
    )
    assert "Wall time of the cells so far: 0 s." in text
    assert progress.main(["nope"]) == 2
    assert "Received: study='nope'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        progress.main(["smoke", "--seeds", "0"])
