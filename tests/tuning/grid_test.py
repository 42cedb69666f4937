"""Studies with a `[grid]`: every condition times every arm."""

import json

import pytest

from tests.tuning import common
from tuning import records
from tuning import study as study_module
from tuning import sweep

# Nothing here depends on the Keras backend: run once (conftest.py).
pytestmark = pytest.mark.backend_independent

ARMS = ("dense", "affine_like")
CONDITIONS = ("width-4", "width-8")


def test_grid_study_end_to_end_and_rerun(tmp_path, capsys):
    data_dir = common.write_image_folder(tmp_path / "cifar10")
    study = common.write_study(
        tmp_path / "tiny.toml", max_trials=1, grid="width = [4, 8]"
    )
    args = common.sweep_args(study, data_dir, tmp_path, "--seeds", "1")
    proc = common.run_sweep(tmp_path, *args)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = tmp_path / "results" / "tiny"

    expected = [(c, arm, "0") for c in CONDITIONS for arm in ARMS]
    runs = records.read_csv(out / "trials.csv")
    assert [(r["condition"], r["arm"], r["seed"]) for r in runs] == expected
    # The grid value overrides the fixed `width = 8` row by row.
    assert [r["width"] for r in runs] == ["4"] * 2 + ["8"] * 2
    search = records.read_csv(out / "search_trials.csv")
    assert [(r["condition"], r["width"], r["arm"]) for r in search] == [
        (c, c[-1], arm) for c in CONDITIONS for arm in ARMS
    ]
    curves = records.read_csv(out / "curves.csv")
    assert sorted(
        (r["condition"], r["arm"], r["seed"]) for r in curves
    ) == sorted(expected)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["config"]["grid"] == {"width": [4, 8]}
    assert list(summary["conditions"]) == list(CONDITIONS)
    assert summary["conditions"]["width-4"]["values"] == {"width": 4}
    assert summary["conditions"]["width-8"]["arms"]["dense"]["seeds"] == 1
    assert "arms" not in summary
    # One KerasTuner project per (condition, arm).
    for c in CONDITIONS:
        assert sorted(
            p.name
            for p in (tmp_path / "runs" / "tiny" / c).iterdir()
            if p.is_dir()
        ) == sorted(ARMS)
    assert (
        "[search] condition 2/2 width-8 arm 2/2 affine_like: trial 1 of 1 done"
    ) in proc.stdout
    assert (
        "[seeds] condition 1/2 width-4 arm 1/2 dense seed 1/1: "
        "test_accuracy" in proc.stdout
    )

    # A rerun redoes nothing and duplicates no row.
    before = {
        name: (out / name).read_text()
        for name in ("trials.csv", "curves.csv", "search_trials.csv")
    }
    argv = [str(a) for a in args]
    assert sweep.main(argv) == 0
    again = capsys.readouterr().out
    assert "started" not in again
    assert again.count("already done (test_accuracy") == 4
    assert {name: (out / name).read_text() for name in before} == before

    # --reproduce needs the condition of a grid study.
    assert sweep.main([*argv, "--reproduce", "dense", "0"]) == 2
    assert capsys.readouterr().err == (
        "error: study 'tiny' has a [grid]: pass --condition NAME, one of "
        "['width-4', 'width-8']. Received: condition=None\n"
    )
    row = runs[2]
    assert (
        sweep.main(
            [*argv, "--reproduce", "dense", "0", "--condition", "width-8"]
        )
        == 0
    )
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert f"(recorded {float(row['test_accuracy']):.4f}" in last


def _grid_study(tmp_path, grid, extra=""):
    path = common.write_study(tmp_path / "bad.toml", grid=grid)
    if extra:
        with open(path, "a") as f:
            f.write(extra)
    return path


def test_conditions_and_optimizers_grid(tmp_path):
    path = _grid_study(
        tmp_path,
        'optimizers = ["sgd", "adam"]\nactivation = ["tanh", "leaky_relu"]',
    )
    study = study_module.load_study(path)
    # Named in the order of the [fixed] keys, whatever the file's order.
    assert [c.name for c in study.conditions()] == [
        "activation-tanh_optimizers-sgd",
        "activation-tanh_optimizers-adam",
        "activation-leaky-relu_optimizers-sgd",
        "activation-leaky-relu_optimizers-adam",
    ]
    at = study.at(study.condition("activation-leaky-relu_optimizers-adam"))
    assert at.search["optimizers"] == ["adam"]
    assert at.fixed["activation"] == "leaky_relu"
    assert study.fixed["activation"] == "tanh"
    with pytest.raises(
        study_module.StudyError,
        match=r"Unknown condition .* Received: condition='x'",
    ):
        study.condition("x")
    # No grid: one unnamed condition.
    plain = study_module.load_study(common.write_study(tmp_path / "p.toml"))
    assert [c.name for c in plain.conditions()] == [""]
    assert "grid" not in plain.config()


def test_grid_key_may_be_left_out_of_fixed_and_overridden(tmp_path):
    path = common.write_study(tmp_path / "g.toml", grid="depth = [1, 2, 3]")
    text = open(path).read().replace("depth = 1\n", "")
    text = text.replace("[quick]\n", "[quick]\ngrid.depth = [1]\n")
    text += "\n[full]\nmax_trials = 7\n[full.grid]\ndepth = [4, 8]\n"
    open(path, "w").write(text)
    assert len(study_module.load_study(path).conditions()) == 3
    quick = study_module.load_study(path, quick=True)
    assert [c.name for c in quick.conditions()] == ["depth-1"]
    full = study_module.load_study(path, full=True)
    assert full.results_name == "g-full"
    assert full.search["max_trials"] == 7
    assert [c.name for c in full.conditions()] == ["depth-4", "depth-8"]
    with pytest.raises(study_module.StudyError, match=r"exclude each other"):
        study_module.load_study(path, quick=True, full=True)


@pytest.mark.parametrize(
    "grid,extra,match",
    [
        (
            "bogus = [1, 2]",
            "",
            r"unknown keys in \[grid\]; expected only \[.*'optimizers'\]. "
            r"Received: bogus=\[1, 2\]",
        ),
        (
            "depth = []",
            "",
            r"every \[grid\] key must map to a non-empty list of distinct "
            r"values. Received: depth=\[\]",
        ),
        (
            "depth = 3",
            "",
            r"non-empty list of distinct values. Received: depth=3",
        ),
        ("depth = [1, 1]", "", r"distinct values. Received: depth=\[1, 1\]"),
        (
            "learning_rate = [0.1, 1.0]",
            "",
            r"\[grid\] keys must be \[fixed\] keys of a mlp study \(but `seeds`\)"
            r" or `optimizers`; \['learning_rate'\] are not. "
            r"Received: learning_rate=\[0.1, 1.0\]",
        ),
        (
            "filters = [4, 8]",
            "",
            r"\['filters'\] are not. Received: filters=\[4, 8\]",
        ),
        ("seeds = [1, 2]", "", r"\['seeds'\] are not"),
        (
            'optimizers = ["sgd", "lion"]',
            "",
            r"`optimizers` in \[grid\] must list names from \('sgd', 'adam'\), "
            r"one searched per condition. Received: "
            r"optimizers=\['sgd', 'lion'\]",
        ),
        (
            "depth = [1, 0]",
            "",
            r"`depth` must be an integer >= 1. Received: depth=0",
        ),
        (
            "depth = [1, 2]",
            "[full]\ndepth = 3\n",
            r"\['depth'\] are \[grid\] keys; override them in `\[full.grid\]`. "
            r"Received: depth=3",
        ),
        (
            "depth = [1, 2]",
            "[full.grid]\nwidth = [3]\n",
            r"`\[full.grid\]` may only override \[grid\] keys \['depth'\]. "
            r"Received: width=\[3\]",
        ),
    ],
    ids=[
        "unknown",
        "empty",
        "not_a_list",
        "repeated",
        "search_key",
        "other_family",
        "seeds",
        "optimizer",
        "bad_value",
        "gridded_override",
        "override_not_in_grid",
    ],
)
def test_malformed_grid(tmp_path, grid, extra, match):
    path = _grid_study(tmp_path, grid, extra)
    with pytest.raises(
        study_module.StudyError,
        match=r"^Malformed study file .*bad\.toml: .*" + match,
    ):
        study_module.load_study(path)
