"""A study run as shares (`--arms`, `--conditions`) and merged
(`tuning.merge`) gives what one run of it gives."""

import json
import os
import shutil

import pytest

from tests.tuning import common
from tuning import merge
from tuning import records
from tuning import study as study_module
from tuning import supersede
from tuning import sweep

# Nothing here depends on the Keras backend: run once (conftest.py).
pytestmark = pytest.mark.backend_independent

GRID = "width = [4, 8]"
CELLS = [
    ("width-4", "dense"),
    ("width-4", "affine_like"),
    ("width-8", "dense"),
    ("width-8", "affine_like"),
]
ROW_FILES = ("cells.csv", "search_trials.csv", "trials.csv", "curves.csv")
# Columns that differ between two runs of the same cell.
CLOCKS = {
    "wall_time_s",
    "search_wall_time_s",
    "seeds_wall_time_s",
    "finished_at",
    "git_commit",
    "git_dirty",
}


def _measured(path):
    """A results file's rows less the clock and commit columns."""
    return [
        {k: v for k, v in r.items() if k not in CLOCKS}
        for r in records.read_csv(path)
    ]


def _cells(path):
    return [(r["condition"], r["arm"]) for r in records.read_csv(path)]


def _share_of(whole, dest, conditions):
    """Writes what a share of `conditions` leaves: `whole`'s results folder
    with only those conditions' rows, and no summary, report or plot."""
    shutil.copytree(whole, dest)
    folder = dest / "tiny"
    for name in ROW_FILES:
        rows = records.read_csv(folder / name)
        records.write_csv(
            folder / name,
            list(rows[0]),
            [r for r in rows if r["condition"] in conditions],
        )
    for path in folder.iterdir():
        if path.name in ("summary.json", "report.md") or path.suffix == ".png":
            path.unlink()


@pytest.fixture(scope="module")
def shares(tmp_path_factory):
    """The tiny grid study run whole once, and one share of it.

    Share `b` (`--conditions width-8 --arms affine_like`) is run; share
    `a` (`--conditions width-4`) is the whole run's results folder cut down
    to its cells (`_share_of`): the merged shares are checked against the
    whole run, which also checks that `b` measured what the whole run did.

    Returns `(tmp, args_of, outputs)`: `args_of(root, *extra)` are the
    runner's arguments with results under `root`; `outputs` the runs'
    standard output by name.
    """
    tmp = tmp_path_factory.mktemp("merge")
    data_dir = common.write_image_folder(tmp / "cifar10")
    study = common.write_study(tmp / "tiny.toml", max_trials=1, grid=GRID)

    def args_of(root, *extra):
        return [
            str(a)
            for a in common.sweep_args(
                study, data_dir, root, "--seeds", "1", *extra
            )
        ]

    outputs = {}

    def run(name, *args):
        proc = common.run_sweep(tmp, *args)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        outputs[name] = proc.stdout

    run("whole", *args_of(tmp / "whole"))
    run(
        "b",
        *args_of(tmp / "b", "--conditions", "width-8", "--arms", "affine_like"),
    )
    _share_of(tmp / "whole" / "results", tmp / "a" / "results", {"width-4"})
    return tmp, args_of, outputs


def test_a_share_runs_only_its_cells_and_writes_no_summary(shares):
    tmp, _, outputs = shares
    b = tmp / "b" / "results" / "tiny"
    assert _cells(b / "cells.csv") == [("width-8", "affine_like")]
    assert [
        (r["condition"], r["arm"]) for r in records.read_csv(b / "trials.csv")
    ] == [("width-8", "affine_like")]
    assert not (b / "summary.json").exists()
    assert not (b / "report.md").exists()
    assert (
        "a share of the study: 1 of its 4 cells (arms affine_like; "
        "conditions width-8)" in outputs["b"]
    )
    assert "share done: 1 of the study's 4 cells are complete" in outputs["b"]
    assert "width-8 arm 1/2 dense" not in outputs["b"]
    assert "width-4" not in outputs["b"]
    # The share's rows are the whole run's (the same seeds on the same
    # backend: the same numbers).
    whole = tmp / "whole" / "results" / "tiny"
    for name in ROW_FILES:
        alone = [
            r
            for r in _measured(whole / name)
            if (r["condition"], r["arm"]) == ("width-8", "affine_like")
        ]
        assert _measured(b / name) == alone, name


def test_merged_shares_give_what_one_run_gives(shares, tmp_path, capsys):
    tmp, args_of, _ = shares
    root = tmp_path / "merged"
    shutil.copytree(tmp / "a", root)
    dest = root / "results"
    out = dest / "tiny"
    study = study_module.load_study(str(tmp / "tiny.toml"))

    record = merge.merge(study, str(tmp / "b" / "results"), str(dest))
    assert record["added"] == {
        "cells.csv": 1,
        "search_trials.csv": 1,
        "search_progress.csv": 0,
        "trials.csv": 1,
        "curves.csv": 1,
    }
    assert record["cells"] == [("width-8", "affine_like")]
    assert _cells(out / "cells.csv") == [CELLS[0], CELLS[1], CELLS[3]]
    # Merged again: nothing more, and no file rewritten.
    before = {n: (out / n).read_text() for n in ROW_FILES}
    again = merge.merge(study, str(tmp / "b" / "results"), str(dest))
    assert not any(again["added"].values())
    assert {n: (out / n).read_text() for n in ROW_FILES} == before

    # The study's own command trains only the cell neither share ran
    # (width-8 dense), then writes the summary.
    assert sweep.main(args_of(root)) == 0
    log = capsys.readouterr().out
    assert log.count("search already done") == 3
    assert "[search] condition 2/2 width-8 arm 1/2 dense: trial 1 of 1" in log
    assert log.count("test_accuracy") >= 1
    assert "[seeds] condition 2/2 width-8 arm 1/2 dense seed 1/1: " in log
    assert "condition 1/2 width-4 arm 1/2 dense seed 1/1: already done" in log
    summary = json.loads((out / "summary.json").read_text())
    assert summary["conditions"]["width-8"]["arms"]["dense"]["seeds"] == 1
    assert (out / "report.md").exists()

    # The same rows as the study run whole (the same seeds on the same
    # backend: the same numbers), in the same order (curves in the order
    # their runs ended).
    whole = tmp / "whole" / "results" / "tiny"
    for name in ROW_FILES:
        merged, alone = _measured(out / name), _measured(whole / name)
        if name == "curves.csv":
            merged, alone = (
                sorted(tuple(sorted(r.items())) for r in x)
                for x in (merged, alone)
            )
        assert merged == alone, name


def test_rows_that_disagree_are_refused_and_nothing_is_written(
    shares, tmp_path
):
    tmp, _, _ = shares
    study = study_module.load_study(str(tmp / "tiny.toml"))
    dest = tmp_path / "dest"
    shutil.copytree(tmp / "a" / "results", dest)
    source = tmp_path / "source"
    shutil.copytree(tmp / "whole" / "results", source)
    path = source / "tiny" / "trials.csv"
    rows = records.read_csv(path)
    rows[0]["test_accuracy"] = "0.123"
    records.write_csv(path, list(rows[0]), rows)
    before = {n: (dest / "tiny" / n).read_text() for n in ROW_FILES}

    with pytest.raises(merge.MergeError, match="seed 0 of cell width-4 dense"):
        merge.merge(study, str(source), str(dest))
    assert {n: (dest / "tiny" / n).read_text() for n in ROW_FILES} == before

    # A cell searched on both sides with other trials.
    shutil.copytree(tmp / "whole" / "results", source, dirs_exist_ok=True)
    path = source / "tiny" / "search_trials.csv"
    rows = records.read_csv(path)
    rows[1]["val_accuracy"] = "0.999"
    records.write_csv(path, list(rows[0]), rows)
    with pytest.raises(
        merge.MergeError, match="cell width-4 affine_like was searched in both"
    ):
        merge.merge(study, str(source), str(dest))

    # Another study file.
    shutil.copytree(tmp / "whole" / "results", source, dirs_exist_ok=True)
    fingerprint = json.loads((source / "tiny" / "study.json").read_text())
    fingerprint["fixed"]["width"] = 16
    records.write_json(source / "tiny" / "study.json", fingerprint)
    with pytest.raises(
        merge.MergeError, match="another version of the study file"
    ):
        merge.merge(study, str(source), str(dest))
    assert {n: (dest / "tiny" / n).read_text() for n in ROW_FILES} == before

    # Two runs of the same cells that measured the same (at other speeds)
    # agree: the destination keeps its rows and gains the others.
    shutil.copytree(tmp / "whole" / "results", source, dirs_exist_ok=True)
    record = merge.merge(study, str(source), str(dest))
    assert record["added"]["trials.csv"] == 2
    assert _cells(dest / "tiny" / "cells.csv") == CELLS
    kept = records.read_csv(dest / "tiny" / "trials.csv")[:2]
    assert kept == records.read_csv(
        tmp / "a" / "results" / "tiny" / "trials.csv"
    )


def test_a_search_going_on_is_merged_and_dropped_once_done(shares, tmp_path):
    tmp, _, _ = shares
    study = study_module.load_study(str(tmp / "tiny.toml"))
    source = tmp_path / "source"
    shutil.copytree(tmp / "b" / "results", source)
    folder = source / "tiny"
    # As a runner stopped in the middle of the search of width-8
    # affine_like leaves it: the ended trials in search_progress.csv.
    search = records.read_csv(folder / "search_trials.csv")
    columns = list(search[0])
    os.replace(folder / "search_trials.csv", folder / "search_progress.csv")
    for name in ("cells.csv", "trials.csv", "curves.csv"):
        (folder / name).unlink()
    dest = tmp_path / "dest"
    shutil.copytree(tmp / "a" / "results", dest)
    (dest / "tiny" / "summary.json").write_text("{}")

    record = merge.merge(study, str(source), str(dest))
    assert record["added"]["search_progress.csv"] == 1
    assert record["removed"] == ["summary.json"]
    assert records.read_csv(dest / "tiny" / "search_progress.csv") == search
    assert _cells(dest / "tiny" / "cells.csv") == CELLS[:2]

    # Once the other share's search is done, its progress rows go.
    records.write_csv(folder / "search_trials.csv", columns, search)
    shutil.copy(tmp / "b" / "results" / "tiny" / "cells.csv", folder)
    (folder / "search_progress.csv").unlink()
    merge.merge(study, str(source), str(dest))
    assert not (dest / "tiny" / "search_progress.csv").exists()
    assert _cells(dest / "tiny" / "cells.csv") == [CELLS[0], CELLS[1], CELLS[3]]


def test_bad_input(shares, tmp_path, capsys):
    tmp, args_of, _ = shares
    study_path = str(tmp / "tiny.toml")
    study = study_module.load_study(study_path)
    with pytest.raises(merge.MergeError, match="no results of study 'tiny'"):
        merge.merge(study, str(tmp_path / "nowhere"), str(tmp_path))
    with pytest.raises(merge.MergeError, match="the same folder"):
        merge.merge(
            study, str(tmp / "a" / "results"), str(tmp / "a" / "results")
        )
    dest = tmp_path / "dest"
    shutil.copytree(tmp / "a" / "results", dest)
    holder = common.hold_lock(dest / "tiny")
    try:
        with pytest.raises(
            merge.MergeError, match="another runner is using this study"
        ):
            merge.merge(study, str(tmp / "b" / "results"), str(dest))
    finally:
        holder.kill()
        holder.wait()

    # The command line: errors on stderr, exit status 2.
    assert (
        merge.main(
            [study_path, "--from", tmp_path / "nowhere", "--results-dir", dest]
        )
        == 2
    )
    assert capsys.readouterr().err.startswith("error: no results of study")
    assert (
        merge.main(
            [study_path, "--from", tmp / "b" / "results", "--results-dir", dest]
        )
        == 0
    )
    assert capsys.readouterr().out.startswith(
        "merged into tiny: 1 cells.csv, 1 search_trials.csv, 1 trials.csv, "
        "1 curves.csv rows"
    )

    # The runner's share options.
    argv = args_of(tmp_path / "bad")
    assert sweep.main([*argv, "--arms", "rms_norm"]) == 2
    assert capsys.readouterr().err == (
        "error: Received an invalid value for `arms`. Expected arms of study "
        "'tiny': dense, affine_like. Received: arms=['rms_norm']\n"
    )
    assert sweep.main([*argv, "--conditions", "width-5"]) == 2
    assert "Expected conditions of study 'tiny': width-4, width-8" in (
        capsys.readouterr().err
    )
    assert (
        sweep.main([*argv, "--arms", "dense", "--reproduce", "dense", "0"]) == 2
    )
    assert "--reproduce takes its arm" in capsys.readouterr().err
    flat = common.write_study(tmp_path / "flat.toml")
    assert sweep.main([flat, *argv[1:], "--conditions", "width-4"]) == 2
    assert "study 'flat' has no [grid]" in capsys.readouterr().err
    assert not (tmp_path / "bad" / "results" / "tiny" / "trials.csv").exists()


def test_rows_set_aside_do_not_come_back(shares, tmp_path):
    tmp, _, _ = shares
    study = study_module.load_study(str(tmp / "tiny.toml"))
    dest = tmp_path / "dest"
    shutil.copytree(tmp / "whole" / "results", dest)
    supersede.supersede(
        study, ["affine_like"], "old", "a test", str(dest), str(tmp_path)
    )
    kept = {n: (dest / "tiny" / n).read_text() for n in ROW_FILES}
    # A share made before the setting aside still holds those rows.
    record = merge.merge(study, str(tmp / "whole" / "results"), str(dest))
    assert not any(record["added"].values())
    assert {n: (dest / "tiny" / n).read_text() for n in ROW_FILES} == kept

    # The other way round: a source that set rows aside the destination
    # still holds is refused.
    source = tmp_path / "source"
    shutil.copytree(dest, source)
    stale = tmp_path / "stale"
    shutil.copytree(tmp / "whole" / "results", stale)
    with pytest.raises(merge.MergeError, match="set them aside here too"):
        merge.merge(study, str(source), str(stale))


def test_trial_ids_as_counters_and_runs_caught_between_writes(shares, tmp_path):
    tmp, _, _ = shares
    study = study_module.load_study(str(tmp / "tiny.toml"))
    source = tmp_path / "source"
    shutil.copytree(tmp / "whole" / "results", source)
    folder = source / "tiny"
    for name, column in (
        ("search_trials.csv", "trial_id"),
        ("trials.csv", "search_trial_id"),
        ("cells.csv", "chosen_trial_id"),
    ):
        rows = records.read_csv(folder / name)
        for r in rows:
            r[column] = "0" + r[column]
        records.write_csv(folder / name, list(rows[0]), rows)
    # A seed row whose curves a running source has not written yet.
    curves = records.read_csv(folder / "curves.csv")
    records.write_csv(
        folder / "curves.csv",
        list(curves[0]),
        [r for r in curves if (r["condition"], r["arm"]) != CELLS[3]],
    )
    dest = tmp_path / "dest"
    shutil.copytree(tmp / "a" / "results", dest)

    record = merge.merge(study, str(source), str(dest))
    assert record["added"]["cells.csv"] == 2
    assert record["added"]["trials.csv"] == 1
    runs = records.read_csv(dest / "tiny" / "trials.csv")
    assert [(r["condition"], r["arm"]) for r in runs] == CELLS[:3]


def test_a_share_may_not_overwrite_and_drops_a_stale_summary(
    shares, tmp_path, capsys
):
    tmp, args_of, _ = shares
    root = tmp_path / "root"
    shutil.copytree(tmp / "whole", root)
    out = root / "results" / "tiny"
    assert (out / "summary.json").exists()
    share = ["--conditions", "width-4", "--arms", "dense"]
    assert sweep.main([*args_of(root), *share, "--overwrite"]) == 2
    assert "--overwrite empties the whole study" in capsys.readouterr().err
    assert (out / "summary.json").exists()

    # One more seed in a share: the summary no longer holds, and goes.
    # (The last --seeds wins.)
    assert sweep.main([*args_of(root), "--seeds", "2", *share]) == 0
    assert "seed 2/2: test_accuracy" in capsys.readouterr().out
    assert not (out / "summary.json").exists()
    assert not (out / "report.md").exists()
