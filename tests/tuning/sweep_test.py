"""The runner end to end, on a tiny synthetic CIFAR-10 image folder."""

import dataclasses
import json
import os
import re
import shutil
import signal
import subprocess

import keras
import pytest

from tests.tuning import common
from tuning import lock
from tuning import patches
from tuning import progress
from tuning import records
from tuning import runner
from tuning import study as study_module
from tuning import sweep

ARMS = ("dense", "affine_like")
# The runner's rules, its errors and its other end-to-end cases run on one
# backend; `test_end_to_end` and `test_reproduce` run a sweep on each.
ONE_BACKEND = pytest.mark.requires_backend("torch")
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """The tiny study run once to completion: (tmp dir, args, process)."""
    tmp = tmp_path_factory.mktemp("sweep")
    data_dir = common.write_image_folder(tmp / "cifar10")
    study = common.write_study(tmp / "tiny.toml")
    args = common.sweep_args(study, data_dir, tmp)
    proc = common.run_sweep(tmp, *args)
    return tmp, args, proc


def test_end_to_end(finished):
    tmp, _, proc = finished
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = tmp / "results" / "tiny"

    runs = records.read_csv(out / "trials.csv")
    assert [(r["arm"], r["seed"]) for r in runs] == [
        (arm, str(seed)) for arm in ARMS for seed in (0, 1)
    ]
    for column in (
        "arm",
        "seed",
        "test_accuracy",
        "val_accuracy",
        "final_train_loss",
        "epochs",
        "wall_time_s",
        "learning_rate",
        "optimizer",
        "kernel_scale",
        "dataset",
        "train_samples",
        "val_samples",
        "test_samples",
        "depth",
        "width",
        "activation",
        "batch_size",
        "backend",
    ):
        assert column in runs[0], column
    for row in runs:
        assert 0.0 <= float(row["test_accuracy"]) <= 1.0
        assert 1e-4 <= float(row["learning_rate"]) <= 1.0
        assert row["optimizer"] in ("sgd", "adam")
        assert row["epochs"] == "1"
        assert row["train_samples"] == "40" and row["test_samples"] == "20"
        assert row["backend"] == keras.backend.backend()
        assert (row["kernel_scale"] != "") == (row["arm"] == "affine_like")
    # Every seed of an arm reruns the same, best setting of its search.
    for arm in ARMS:
        assert len({r["learning_rate"] for r in runs if r["arm"] == arm}) == 1

    search = records.read_csv(out / "search_trials.csv")
    assert [(r["arm"], r["trial_id"]) for r in search] == [
        (arm, trial) for arm in ARMS for trial in ("0", "1")
    ]
    assert {r["status"] for r in search} == {"COMPLETED"}
    assert all(r["val_accuracy"] and r["learning_rate"] for r in search)

    curves = records.read_csv(out / "curves.csv")
    assert len(curves) == 4 and {c["epoch"] for c in curves} == {"1"}

    summary = json.loads((out / "summary.json").read_text())
    assert summary["dataset"]["label"] == "CIFAR-10 (JPEG copy)"
    assert summary["backend"] == keras.backend.backend()
    assert summary["config"]["compare"]["arms"] == list(ARMS)
    assert summary["config"]["fixed"]["epochs"] == 1
    assert {
        "python",
        "keras",
        "keras_tuner",
        "numpy",
        keras.backend.backend(),
    } <= set(summary["versions"])
    assert len(summary["git_commit"]) == 40
    assert isinstance(summary["git_dirty"], bool)
    assert summary["command"].startswith("python -m tuning.sweep ")
    assert "--data-dir" in summary["command"]
    assert summary["arms"]["affine_like"]["seeds"] == 2
    assert set(summary["arms"]["affine_like"]["best_hyperparameters"]) == {
        "learning_rate",
        "optimizer",
        "kernel_scale",
    }

    for name in (
        "accuracy.png",
        "learning_curves.png",
        "val_accuracy_vs_learning_rate.png",
    ):
        assert (out / name).read_bytes()[:8] == PNG_MAGIC, name
    assert not list(out.glob("*.tmp"))

    # Progress a person can follow.
    assert "[search] arm 2/2 affine_like: trial 2 of 2 done" in proc.stdout
    assert "best so far" in proc.stdout and "elapsed" in proc.stdout
    # One KerasTuner project per arm.
    assert sorted(
        p.name for p in (tmp / "runs" / "tiny").iterdir() if p.is_dir()
    ) == sorted(ARMS)


@ONE_BACKEND
def test_reproduce(finished):
    tmp, args, proc = finished
    assert proc.returncode == 0
    row = [
        r
        for r in records.read_csv(tmp / "results/tiny/trials.csv")
        if r["arm"] == "affine_like" and r["seed"] == "1"
    ][0]
    again = common.run_sweep(tmp, *args, "--reproduce", "affine_like", "1")
    assert again.returncode == 0, again.stderr
    last = again.stdout.strip().splitlines()[-1]
    assert f"(recorded {float(row['test_accuracy']):.4f}" in last
    reproduced = float(last.split()[1])
    # Same backend, same seed and hyperparameters: the same model, up to
    # floating-point noise on 20 test images.
    assert abs(reproduced - float(row["test_accuracy"])) <= 0.05 + 1e-9
    assert "usable core(s)" not in again.stdout


@ONE_BACKEND
def test_reproduce_notes_another_core_count(finished, tmp_path):
    tmp, args, _ = finished
    results = tmp_path / "results"
    shutil.copytree(tmp / "results", results)
    path = results / "tiny" / "summary.json"
    summary = json.loads(path.read_text())
    assert summary["machine"]["cpus_usable"] >= 1
    summary["machine"]["cpus_usable"] = 64
    path.write_text(json.dumps(summary))
    args = [str(a) for a in args]
    args[args.index("--results-dir") + 1] = str(results)
    again = common.run_sweep(tmp, *args, "--reproduce", "dense", "0")
    assert again.returncode == 0, again.stderr
    assert (
        "note: the study's summary was written by a process on 64 usable "
        "core(s); this one has "
    ) in again.stdout


@pytest.mark.requires_backend("torch")
def test_killed_runs_resume_without_redoing_work(tmp_path):
    data_dir = common.write_image_folder(tmp_path / "cifar10")
    study = common.write_study(
        tmp_path / "tiny.toml", max_trials=3, epochs=2, tuner="bracket"
    )
    args = common.sweep_args(study, data_dir, tmp_path)
    out = tmp_path / "results" / "tiny"

    # Killed during the first cell's search, after its first trial.
    _run_until(tmp_path, args, "dense: trial 1 of 3 done")
    assert not (out / "trials.csv").exists()
    assert not (out / "cells.csv").exists()
    # Killed during the first cell's seed reruns, after its first row.
    second = _run_until(tmp_path, args, "dense seed 1/2: test_accuracy")
    assert "dense: trial 1 of 3 started" not in second
    assert "resuming, 1 of 3 trials already done" in second
    rows = records.read_csv(out / "trials.csv")
    assert [(r["arm"], r["seed"]) for r in rows] == [("dense", "0")]
    # The finished search of the cell is in the results already.
    assert [c["arm"] for c in records.read_csv(out / "cells.csv")] == ["dense"]
    # That seed's time, made long enough to tell apart from the next
    # sitting's own.
    rows[0]["wall_time_s"] = "1000.0"
    records.write_csv(str(out / "trials.csv"), list(rows[0]), rows)

    final = common.run_sweep(tmp_path, *args)
    assert final.returncode == 0, final.stdout + final.stderr
    assert "dense: trial" not in final.stdout  # no search trial redone
    assert "dense: search already done (3 trials), skipped" in final.stdout
    assert "dense seed 1/2: already done" in final.stdout
    rows = records.read_csv(out / "trials.csv")
    assert [(r["arm"], r["seed"]) for r in rows] == [
        (arm, str(seed)) for arm in ARMS for seed in (0, 1)
    ]
    search = records.read_csv(out / "search_trials.csv")
    assert [(r["arm"], r["trial_id"]) for r in search] == [
        (arm, t) for arm in ARMS for t in ("0", "1", "2")
    ] and {r["status"] for r in search} == {"COMPLETED"}
    # The bracketing search tried its initial grid, as far as the budget
    # went: 3 trials are too few to bracket, and the runner says so.
    assert sorted({float(r["learning_rate"]) for r in search}) == pytest.approx(
        [0.01, 10**-1.5, 0.1]
    )
    assert {r["bracketed"] for r in search} == {"False"}
    assert "cells are NOT bracketed" in final.stdout
    assert len(records.read_csv(out / "curves.csv")) == 8
    # The seed the killed sitting finished counts in the cell's wall time.
    seed_times = {
        r["seed"]: float(r["wall_time_s"]) for r in rows if r["arm"] == "dense"
    }
    assert seed_times["0"] == 1000.0
    cell = next(
        c for c in records.read_csv(out / "cells.csv") if c["arm"] == "dense"
    )
    wall = float(cell["seeds_wall_time_s"])
    assert 1000.0 + seed_times["1"] <= wall < 1000.0 + 300.0

    # Done: a rerun changes nothing; --overwrite starts again.
    before = (out / "trials.csv").read_text()
    again = common.run_sweep(tmp_path, *args, "--seeds", "2")
    assert again.returncode == 0 and "started" not in again.stdout
    assert (out / "trials.csv").read_text() == before


@pytest.mark.requires_backend("torch")
def test_a_search_whose_project_is_lost_resumes_from_the_results(tmp_path):
    data_dir = common.write_image_folder(tmp_path / "cifar10")
    study = common.write_study(
        tmp_path / "tiny.toml", max_trials=3, epochs=2, tuner="bracket"
    )
    args = common.sweep_args(study, data_dir, tmp_path)
    out = tmp_path / "results" / "tiny"

    # Killed during the first cell's search, after its first trial, which
    # the results folder holds as it ended.
    _run_until(tmp_path, args, "dense: trial 1 of 3 done")
    progress = records.read_csv(out / "search_progress.csv")
    assert [(r["arm"], r["trial_id"]) for r in progress] == [("dense", "0")]
    # Without that file (as an older runner left its results), the next
    # sitting resumes from the project and records the trial it reloaded.
    (out / "search_progress.csv").unlink()
    second = _run_until(tmp_path, args, "dense: trial 2 of 3 done")
    assert "dense: resuming, 1 of 3 trials already done\n" in second
    # Killed after the second trial: both are in the results folder.
    progress = records.read_csv(out / "search_progress.csv")
    assert [(r["arm"], r["trial_id"], r["status"]) for r in progress] == [
        ("dense", "0", "COMPLETED"),
        ("dense", "1", "COMPLETED"),
    ]
    assert not (out / "search_trials.csv").exists()
    # A fresh machine: no KerasTuner project. The two trials' times, made
    # long enough to tell apart from the next sitting's own.
    shutil.rmtree(tmp_path / "runs")
    for r in progress:
        r["wall_time_s"] = "1000.0"
    records.write_csv(
        str(out / "search_progress.csv"), list(progress[0]), progress
    )

    final = common.run_sweep(tmp_path, *args)
    assert final.returncode == 0, final.stdout + final.stderr
    assert "dense: resuming, 2 of 3 trials already done (2 replayed" in (
        final.stdout
    )
    assert "dense: trial 1 of 3 started" not in final.stdout
    assert "dense: trial 2 of 3 started" not in final.stdout
    assert "dense: trial 3 of 3 started" in final.stdout
    search = records.read_csv(out / "search_trials.csv")
    dense = [r for r in search if r["arm"] == "dense"]
    assert [r["trial_id"] for r in dense] == ["0", "1", "2"]
    # The replayed trials are the recorded ones, metrics and all, and the
    # search went on with the rate it would have tried third.
    for kept, recorded in zip(dense, progress):
        for name in ("learning_rate", "val_accuracy", "val_loss", "diverged"):
            assert kept[name] == recorded[name], name
    assert [float(r["learning_rate"]) for r in dense] == pytest.approx(
        [0.01, 10**-1.5, 0.1]
    )
    # Their time counts in the cell's search time; the file is gone once
    # every search is over.
    cell = next(
        c for c in records.read_csv(out / "cells.csv") if c["arm"] == "dense"
    )
    assert 2000.0 < float(cell["search_wall_time_s"]) < 2000.0 + 300.0
    assert not (out / "search_progress.csv").exists()


def _searched_with_two_trials(tmp_path, seeds):
    """The tiny bracketing study run with 2 of its 3 trials: `(args, out)`,
    the runner's arguments (less `--max-trials`) and its results folder."""
    data_dir = common.write_image_folder(tmp_path / "cifar10")
    study = common.write_study(
        tmp_path / "tiny.toml", max_trials=3, epochs=2, tuner="bracket"
    )
    args = common.sweep_args(study, data_dir, tmp_path, "--seeds", str(seeds))
    first = common.run_sweep(tmp_path, *args, "--max-trials", "2")
    assert first.returncode == 0, first.stdout + first.stderr
    return args, tmp_path / "results" / "tiny"


@pytest.mark.requires_backend("torch")
def test_more_trials_reopen_a_search_without_retraining_it(tmp_path):
    args, out = _searched_with_two_trials(tmp_path, seeds=1)
    before = records.read_csv(out / "search_trials.csv")
    before_runs = records.read_csv(out / "trials.csv")
    cells = {c["arm"]: c for c in records.read_csv(out / "cells.csv")}
    assert {c["bracketed"] for c in cells.values()} == {"False"}
    # On a fresh machine, with one more trial allowed: each cell's two
    # trials are replayed from search_trials.csv, and only the third runs.
    shutil.rmtree(tmp_path / "runs")
    final = common.run_sweep(tmp_path, *args, "--max-trials", "3")
    assert final.returncode == 0, final.stdout + final.stderr
    for arm in ARMS:
        assert (
            f"{arm}: resuming, 2 of 3 trials already done (2 replayed"
        ) in final.stdout
        assert f"{arm}: trial 1 of 3 started" not in final.stdout
        assert f"{arm}: trial 3 of 3 started" in final.stdout
    after = records.read_csv(out / "search_trials.csv")
    assert [(r["arm"], r["trial_id"]) for r in after] == [
        (arm, t) for arm in ARMS for t in ("0", "1", "2")
    ]
    kept = [r for r in after if r["trial_id"] != "2"]
    for old, new in zip(before, kept):
        for name in ("learning_rate", "val_accuracy", "wall_time_s"):
            assert new[name] == old[name], name
    # The first search's time is counted once, with the third trial's.
    for c in records.read_csv(out / "cells.csv"):
        first_time = float(cells[c["arm"]]["search_wall_time_s"])
        assert first_time < float(c["search_wall_time_s"]) < first_time + 300
    # Each cell's seed counts as done, and its row names the reopened
    # search's outcome; a seed of an unchanged choice was not retrained.
    runs = {r["arm"]: r for r in records.read_csv(out / "trials.csv")}
    old_runs = {r["arm"]: r for r in before_runs}
    for c in records.read_csv(out / "cells.csv"):
        arm = c["arm"]
        assert c["seeds"] == "1"
        assert runs[arm]["search_trial_id"] == c["chosen_trial_id"]
        for name in ("search_trials", "bracketed", "lr_below_factor"):
            assert runs[arm][name] == c[name], name
        if c["chosen_trial_id"] == cells[arm]["chosen_trial_id"]:
            assert f"{arm} seed 1/1: already done" in final.stdout
            assert runs[arm]["test_accuracy"] == old_runs[arm]["test_accuracy"]
            assert c["seeds_wall_time_s"] == cells[arm]["seeds_wall_time_s"]


@pytest.mark.requires_backend("torch")
def test_a_reopened_search_that_changes_its_choice_retrains_its_seeds(
    tmp_path,
):
    args, out = _searched_with_two_trials(tmp_path, seeds=2)
    cells = {c["arm"]: c for c in records.read_csv(out / "cells.csv")}
    old_runs = records.read_csv(out / "trials.csv")
    old_curves = records.read_csv(out / "curves.csv")
    # Make each cell's other trial the best (a trained one), as a reopened
    # search finds a better rate: a fresh machine replays the recorded
    # trials.
    search = records.read_csv(out / "search_trials.csv")
    other = {}
    for r in search:
        if r["trial_id"] != cells[r["arm"]]["chosen_trial_id"]:
            r.update(val_accuracy="0.999", diverged="False")
            r.update(loss="1.0", val_loss="1.0")
            other[r["arm"]] = r
    assert set(other) == set(ARMS)
    records.write_csv(str(out / "search_trials.csv"), list(search[0]), search)
    shutil.rmtree(tmp_path / "runs")

    final = common.run_sweep(tmp_path, *args, "--max-trials", "3")
    assert final.returncode == 0, final.stdout + final.stderr
    runs = records.read_csv(out / "trials.csv")
    curves = records.read_csv(out / "curves.csv")
    summary = json.loads((out / "summary.json").read_text())
    for arm in ARMS:
        new = other[arm]
        cell = next(
            c for c in records.read_csv(out / "cells.csv") if c["arm"] == arm
        )
        assert cell["chosen_trial_id"] == new["trial_id"]
        assert cell["seeds"] == "2"
        assert float(cell["seeds_wall_time_s"]) > 0
        # Both seeds retrained from the new choice.
        mine = [r for r in runs if r["arm"] == arm]
        assert [r["seed"] for r in mine] == ["0", "1"]
        for r in mine:
            assert r["search_trial_id"] == new["trial_id"]
            assert r["learning_rate"] == new["learning_rate"]
            assert r["search_val_accuracy"] == "0.999"
            assert r["search_trials"] == cell["search_trials"]
        assert f"{arm} seed 1/2: test_accuracy" in final.stdout
        assert len([r for r in curves if r["arm"] == arm]) == 2 * 2
        assert summary["arms"][arm]["best_search_trial"] == new["trial_id"]
        # The old seeds are set aside, whole, with the reason.
        aside = out / "superseded" / f"reopened-{arm}"
        assert f"set aside in superseded/reopened-{arm} and retrained" in (
            final.stdout
        )
        kept = records.read_csv(aside / "trials.csv")
        assert kept == [r for r in old_runs if r["arm"] == arm]
        assert records.read_csv(aside / "curves.csv") == [
            r for r in old_curves if r["arm"] == arm
        ]
        record = json.loads((aside / "superseded.json").read_text())
        assert record["arms"] == [arm]
        assert record["rows"] == {"trials.csv": 2, "curves.csv": 4}
        assert f"chose trial {new['trial_id']}" in record["reason"]
    entries = progress.set_aside(str(out))
    assert [(e["name"], e["cells"], e["runs"]) for e in entries] == [
        (f"reopened-{arm}", 0, 2) for arm in sorted(ARMS)
    ]
    # Run again: nothing is retrained or set aside.
    again = common.run_sweep(tmp_path, *args, "--max-trials", "3")
    assert again.returncode == 0, again.stdout + again.stderr
    assert "seed 1/2: test_accuracy" not in again.stdout
    assert "set aside" not in again.stdout
    assert records.read_csv(out / "trials.csv") == runs
    assert len(list((out / "superseded").iterdir())) == len(ARMS)


def _run_until(tmp_path, args, line_part, timeout=300):
    """Runs the runner until it writes a line containing `line_part`, where
    it kills itself (SIGKILL); returns its output."""
    proc = subprocess.run(
        common.sweep_command_killed_after(line_part, *args),
        cwd=common.REPO_ROOT,
        env=common.sweep_env(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=timeout,
    )
    if proc.returncode != -signal.SIGKILL or line_part not in proc.stdout:
        pytest.fail(
            f"runner ended ({proc.returncode}) without being killed at "
            f"{line_part!r}:\n{proc.stdout}"
        )
    return proc.stdout


# Bad input: one line on stderr, exit status 2, no traceback.


def _main(capsys, *argv):
    code = sweep.main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.err


@ONE_BACKEND
def test_unknown_study_lists_the_valid_ones(capsys):
    code, err = _main(capsys, "no_such_study")
    assert code == 2
    assert err == (
        f"error: Unknown study. Expected one of {study_module.list_studies()}"
        " or a path to a `.toml` study file. Received: "
        "study='no_such_study'\n"
    )
    assert "smoke" in study_module.list_studies()


@ONE_BACKEND
def test_unknown_arm(tmp_path, capsys):
    study = common.write_study(tmp_path / "bad.toml")
    text = open(study).read().replace('"affine_like"]', '"resnet"]')
    open(study, "w").write(text)
    code, err = _main(capsys, study)
    assert code == 2
    assert err.startswith("error: Malformed study file")
    assert "Received: arms=['dense', 'resnet']" in err


@ONE_BACKEND
def test_malformed_study_file(tmp_path, capsys):
    study = tmp_path / "broken.toml"
    study.write_text("[compare\nfamily = 'mlp'\n")
    code, err = _main(capsys, study)
    assert code == 2
    assert err.startswith(
        f"error: Malformed study file {study}: not valid TOML"
    )
    assert err.count("\n") == 1


@ONE_BACKEND
def test_missing_data_dir(tmp_path, capsys):
    study = common.write_study(tmp_path / "tiny.toml")
    code, err = _main(
        capsys,
        study,
        "--data-dir",
        tmp_path / "nowhere",
        "--results-dir",
        tmp_path,
        "--runs-dir",
        tmp_path,
    )
    assert code == 2
    assert err.startswith(
        "error: cannot load the data: The CIFAR-10 image folder does not exist."
    )
    assert f"Received: data_dir='{tmp_path / 'nowhere'}'" in err


@ONE_BACKEND
def test_wrongly_laid_out_data_dir(tmp_path, capsys):
    (tmp_path / "flat" / "train").mkdir(parents=True)
    study = common.write_study(tmp_path / "tiny.toml")
    code, err = _main(
        capsys,
        study,
        "--data-dir",
        tmp_path / "flat",
        "--results-dir",
        tmp_path,
        "--runs-dir",
        tmp_path,
    )
    assert code == 2
    assert "it lacks test/" in err and "Received: data_dir=" in err


@ONE_BACKEND
@pytest.mark.parametrize(
    "train_samples,test_samples,match",
    [
        # 6 training images of each of 10 classes: 60 in all.
        (50, 20, r"train_samples=50 \+ val_samples=20 = 70 images"),
        (40, 30, r"test_samples=30: .*`max_test_samples`. Expected at most 20"),
    ],
)
def test_a_study_asking_for_more_images_than_exist(
    tmp_path, capsys, train_samples, test_samples, match
):
    # The split used to give what it had (here 60 training images: 43
    # training and 17 validation) and the study trained on that.
    data_dir = common.write_image_folder(tmp_path / "cifar10")
    study = common.write_study(tmp_path / "tiny.toml", train_samples=40)
    text = open(study).read()
    text = text.replace(
        "train_samples = 40", f"train_samples = {train_samples}"
    )
    text = text.replace("test_samples = 20", f"test_samples = {test_samples}")
    open(study, "w").write(text)
    code, err = _main(
        capsys, *common.sweep_args(study, data_dir, tmp_path / "out")
    )
    assert code == 2
    assert err.startswith("error: cannot load the data: the study declares ")
    assert re.search(match, err), err
    assert err.count("\n") == 1
    assert not (tmp_path / "out" / "results" / "tiny" / "trials.csv").exists()


@ONE_BACKEND
def test_load_data_checks_the_sizes_it_got(tmp_path, monkeypatch):
    from keras_affine_div import datasets

    data_dir = common.write_image_folder(tmp_path / "cifar10")
    study = study_module.load_study(common.write_study(tmp_path / "t.toml"))
    data = runner.load_data(study, data_dir)
    sizes = (len(data.x_train), len(data.x_val), len(data.x_test))
    assert sizes == (40, 20, 20)
    real = datasets.load

    def short(*args, **kwargs):
        d = real(*args, **kwargs)
        return dataclasses.replace(d, x_val=d.x_val[:2], y_val=d.y_val[:2])

    monkeypatch.setattr(datasets, "load", short)
    with pytest.raises(
        runner.SweepError,
        match=r"but the split gave 40 training, 2 validation and 20 test "
        r"images; nothing was trained",
    ):
        runner.load_data(study, data_dir)


@ONE_BACKEND
def test_data_unavailable(tmp_path, capsys, monkeypatch):
    from keras_affine_div import datasets

    def offline(*args, **kwargs):
        raise datasets.DataUnavailableError(
            "CIFAR-10 is not prepared. Received: tfds_data_dir='x'"
        )

    monkeypatch.setattr(datasets, "load", offline)
    study = common.write_study(tmp_path / "tiny.toml")
    code, err = _main(
        capsys, study, "--results-dir", tmp_path, "--runs-dir", tmp_path
    )
    assert code == 2
    assert err == (
        "error: cannot load the data: CIFAR-10 is not prepared. "
        "Received: tfds_data_dir='x'\n"
    )


@ONE_BACKEND
def test_reproduce_before_the_study_ran(tmp_path, capsys):
    code, err = _main(
        capsys, "smoke", "--results-dir", tmp_path, "--reproduce", "dense", "0"
    )
    assert code == 2
    assert "no finished runs to reproduce" in err
    assert err.endswith("Received: study='smoke'\n")


@ONE_BACKEND
def test_reproduce_an_unknown_run(finished, capsys):
    tmp, args, proc = finished
    code, err = _main(capsys, *args, "--reproduce", "dense", "7")
    assert code == 2
    assert (
        "expected one of affine_like 0, affine_like 1, dense 0, dense 1" in err
    )
    assert err.endswith("Received: arm='dense', seed='7'\n")


@ONE_BACKEND
def test_a_changed_study_needs_overwrite(finished, tmp_path, capsys):
    tmp, args, proc = finished
    study = common.write_study(tmp_path / "tiny.toml", epochs=2)
    code, err = _main(capsys, study, *args[1:])
    assert code == 2
    assert "the study changed since its runs" in err
    assert "pass --overwrite" in err


@ONE_BACKEND
def test_incomplete_distributed_environment(capsys, monkeypatch):
    monkeypatch.setenv("KERASTUNER_ORACLE_IP", "127.0.0.1")
    monkeypatch.delenv("KERASTUNER_ORACLE_PORT", raising=False)
    monkeypatch.delenv("KERASTUNER_TUNER_ID", raising=False)
    code, err = _main(capsys, "smoke")
    assert code == 2
    assert err == (
        "error: distributed mode needs KERASTUNER_TUNER_ID, "
        "KERASTUNER_ORACLE_IP and KERASTUNER_ORACLE_PORT; "
        "KERASTUNER_ORACLE_PORT, KERASTUNER_TUNER_ID not set. "
        "Received: KERASTUNER_ORACLE_IP='127.0.0.1'\n"
    )


@ONE_BACKEND
def test_bad_port(capsys, monkeypatch):
    monkeypatch.setenv("KERASTUNER_ORACLE_IP", "127.0.0.1")
    monkeypatch.setenv("KERASTUNER_ORACLE_PORT", "http")
    monkeypatch.setenv("KERASTUNER_TUNER_ID", "chief")
    code, err = _main(capsys, "smoke")
    assert code == 2
    assert err == (
        "error: KERASTUNER_ORACLE_PORT must be a port number. "
        "Received: KERASTUNER_ORACLE_PORT='http'\n"
    )


@ONE_BACKEND
def test_bad_input_from_the_command_line(tmp_path):
    proc = common.run_sweep(tmp_path, "no_such_study", timeout=300)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"error: Unknown study. Expected one of {study_module.list_studies()}"
        " or a path to a `.toml` study file. Received: study='no_such_study'"
    ]
    assert "Traceback" not in proc.stdout + proc.stderr
    proc = common.run_sweep(tmp_path, "smoke", "--seeds", "0", timeout=300)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "--seeds: expected a positive integer. Received: '0'" in (
        proc.stderr
    )


@ONE_BACKEND
def test_keras_tuner_state_is_written_atomically(tmp_path, monkeypatch):
    from keras_tuner.src import utils as kt_utils
    from keras_tuner.src.engine import stateful

    assert patches.atomic_keras_tuner_writes()
    # KerasTuner's writers call it through the module: they get ours.
    assert stateful.utils.save_json is kt_utils.save_json
    assert kt_utils.save_json._atomic
    path = tmp_path / "oracle.json"
    kt_utils.save_json(str(path), {"state": 1})
    assert kt_utils.load_json(str(path)) == {"state": 1}

    def killed(*args):
        raise KeyboardInterrupt("killed mid-write")

    monkeypatch.setattr(os, "replace", killed)
    with pytest.raises(KeyboardInterrupt):
        kt_utils.save_json(str(path), {"state": 2})
    # The old state is intact and no temporary file is left behind.
    assert kt_utils.load_json(str(path)) == {"state": 1}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["oracle.json"]


# Resuming from the committed results alone.


@ONE_BACKEND
def test_a_fresh_clone_of_finished_results_trains_nothing(
    finished, tmp_path, capsys
):
    tmp, args, proc = finished
    assert proc.returncode == 0
    # A fresh clone: the results folder as committed, no runs folder.
    results = tmp_path / "clone" / "results"
    shutil.copytree(tmp / "results", results)
    before = {
        p.name: p.read_bytes()
        for p in (results / "tiny").iterdir()
        if p.name != lock.LOCK_NAME
    }
    argv = [
        args[0],
        "--data-dir",
        args[2],
        "--results-dir",
        results,
        "--runs-dir",
        tmp_path / "clone" / "runs",
    ]
    assert sweep.main(argv) == 0
    out = capsys.readouterr().out
    assert "started" not in out
    assert out.count("search already done (2 trials), skipped") == 2
    assert out.count("already done (test_accuracy") == 4
    assert "nothing was trained" in out
    # Not a byte changed, the summary and its wall time included.
    after = {
        p.name: p.read_bytes()
        for p in (results / "tiny").iterdir()
        if p.name != lock.LOCK_NAME
    }
    assert after == before


@ONE_BACKEND
def test_results_of_an_older_runner_are_not_resumed(tmp_path, capsys):
    study = common.write_study(tmp_path / "tiny.toml")
    out = tmp_path / "results" / "tiny"
    out.mkdir(parents=True)
    (out / "trials.csv").write_text("study,arm,seed\ntiny,dense,0\n")
    code, err = _main(
        capsys,
        study,
        "--results-dir",
        tmp_path / "results",
        "--runs-dir",
        tmp_path / "runs",
    )
    assert code == 2
    assert "written by an earlier version of the runner" in err
    assert err.endswith("Received: study='tiny'\n")


# One runner per study.


@ONE_BACKEND
def test_a_second_runner_is_refused_and_a_stale_lock_taken_over(
    tmp_path, capsys
):
    study = common.write_study(tmp_path / "tiny.toml")
    data_dir = common.write_image_folder(tmp_path / "cifar10")
    runs = tmp_path / "runs" / "tiny"
    (runs / "keep").mkdir(parents=True)
    argv = common.sweep_args(
        study, data_dir, tmp_path, "--max-trials", "1", "--seeds", "1"
    )
    holder = common.hold_lock(runs)
    try:
        code, err = _main(capsys, *argv)
        assert code == 2
        assert err.startswith(
            "error: another runner is using this study: "
            f"the lock {runs / lock.LOCK_NAME} is held by "
            f"process {holder.pid} on "
        )
        assert err.endswith(f"Received: lock='{runs / lock.LOCK_NAME}'\n")
        # --overwrite never deletes under a running process.
        code, err = _main(capsys, *argv, "--overwrite")
        assert code == 2 and "another runner is using this study" in err
        assert (runs / "keep").is_dir()
    finally:
        holder.kill()
        holder.wait()
    # The holder was killed: its lock file stays, and is taken over.
    assert (runs / lock.LOCK_NAME).exists()
    assert sweep.main(argv) == 0
    out = capsys.readouterr().out
    assert (
        f"lock {runs / lock.LOCK_NAME}: taken over from process "
        f"{holder.pid} on "
    ) in out
    assert (
        len(records.read_csv(tmp_path / "results" / "tiny" / "trials.csv")) == 2
    )


@ONE_BACKEND
def test_lock_takes_over_a_dead_holder_and_refuses_a_live_one(tmp_path):
    folder = tmp_path / "study"
    folder.mkdir()
    # What a killed runner leaves behind: a lock file naming it, unlocked.
    (folder / lock.LOCK_NAME).write_text(
        json.dumps({"pid": 999999, "host": "h", "command": "c", "since": "t"})
        + "\n"
    )
    said = []
    with lock.StudyLock([folder], log=said.append):
        assert len(said) == 1 and "taken over from process 999999" in said[0]
        holder = json.loads((folder / lock.LOCK_NAME).read_text())
        assert holder["pid"] == os.getpid()
        with pytest.raises(
            lock.LockedError, match=rf"held by process {os.getpid()} on "
        ):
            with lock.StudyLock([folder]):
                pass
    # Released on exit: the file is emptied, and taken again at once with
    # nothing to take over.
    assert (folder / lock.LOCK_NAME).read_text() == ""
    said.clear()
    with lock.StudyLock([folder], log=said.append):
        assert said == []
    assert said == []


# The Bayesian tuner (scikit-learn) and the Python API.


@ONE_BACKEND
def test_bayesian_tuner_runs(tmp_path):
    data_dir = common.write_image_folder(tmp_path / "cifar10")
    path = common.write_study(tmp_path / "tiny.toml", max_trials=2)
    text = open(path).read().replace('tuner = "random"', 'tuner = "bayesian"')
    open(path, "w").write(text)
    arguments = sweep.Arguments(
        study=path,
        options=runner.Options(
            data_dir=data_dir,
            results_dir=str(tmp_path / "results"),
            runs_dir=str(tmp_path / "runs"),
        ),
        seeds=1,
    )
    summary = sweep.execute(arguments)
    assert summary["config"]["search"]["tuner"] == "bayesian"
    search = records.read_csv(
        tmp_path / "results" / "tiny" / "search_trials.csv"
    )
    assert [r["status"] for r in search] == ["COMPLETED"] * 4
    assert summary["arms"]["affine_like"]["seeds"] == 1


@ONE_BACKEND
def test_tfds_data_dir_reaches_the_loader(tmp_path, capsys, monkeypatch):
    from keras_affine_div import datasets

    seen = []

    def load(*args, **kwargs):
        seen.append(kwargs)
        raise datasets.DataUnavailableError("offline. Received: x=1")

    monkeypatch.setattr(datasets, "load", load)
    study = common.write_study(tmp_path / "tiny.toml")
    code, err = _main(
        capsys,
        study,
        "--tfds-data-dir",
        tmp_path / "tfds",
        "--results-dir",
        tmp_path,
        "--runs-dir",
        tmp_path,
    )
    assert code == 2 and err.startswith("error: cannot load the data: ")
    assert seen[0]["tfds_data_dir"] == str(tmp_path / "tfds")
    assert seen[0]["data_dir"] is None


@ONE_BACKEND
@pytest.mark.parametrize(
    "a, b, same",
    [
        ("07", "7", True),
        ("10", "10", True),
        ("07", "10", False),
        (" 3", "03", True),
        ("a1b2", "a1b2", True),
        ("a1b2", "12", False),
    ],
)
def test_trial_ids_are_compared_as_counters(a, b, same):
    from tuning import runner

    assert runner._same_trial(a, b) is same


@ONE_BACKEND
def test_overwrite_keeps_the_lock_and_the_written_discussion(tmp_path):
    for name in ("trials.csv", "report.md", "README.md", lock.LOCK_NAME):
        (tmp_path / name).write_text("x")
    (tmp_path / "repeats" / "search-seed-1").mkdir(parents=True)
    runner._empty_but_lock(tmp_path)
    assert sorted(os.listdir(tmp_path)) == sorted(["README.md", lock.LOCK_NAME])


def test_sigterm_stops_saying_how_to_resume(tmp_path):
    data_dir = common.write_image_folder(tmp_path / "cifar10")
    study = common.write_study(
        tmp_path / "tiny.toml", max_trials=3, epochs=2, tuner="bracket"
    )
    args = common.sweep_args(study, data_dir, tmp_path)
    proc = subprocess.Popen(
        common.sweep_command(*args),
        cwd=common.REPO_ROOT,
        env={**common.sweep_env(tmp_path), "PYTHONUNBUFFERED": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        for line in proc.stdout:
            if "dense: trial 1 of 3 done" in line:
                proc.send_signal(signal.SIGTERM)
                break
        _, stderr = proc.communicate(timeout=300)
    finally:
        proc.kill()
    assert proc.returncode == 128 + signal.SIGTERM, stderr
    assert stderr.strip().splitlines()[-1] == (
        "terminated (SIGTERM); run the same command again to resume"
    )
    assert "Traceback" not in stderr
    again = common.run_sweep(tmp_path, *args)
    assert again.returncode == 0, again.stderr
    assert "resuming" in again.stdout
