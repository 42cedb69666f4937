"""The runner end to end, on a tiny synthetic CIFAR-10 image folder."""

import json
import os
import signal
import subprocess
import threading

import keras
import pytest

from tests.tuning import common
from tuning import records
from tuning import study as study_module
from tuning import sweep

ARMS = ("dense", "affine_like")
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """The tiny study run once to completion: (tmp dir, args, process)."""
    tmp = tmp_path_factory.mktemp("sweep")
    data_dir = common.write_image_folder(tmp / "cifar10")
    study = common.write_study(tmp / "tiny.toml")
    args = (study, "--data-dir", data_dir, "--results-dir", tmp / "results",
            "--runs-dir", tmp / "runs")
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
    for column in ("arm", "seed", "test_accuracy", "val_accuracy",
                   "final_train_loss", "epochs", "wall_time_s",
                   "learning_rate", "optimizer", "kernel_scale", "dataset",
                   "train_samples", "val_samples", "test_samples", "depth",
                   "width", "activation", "batch_size", "backend"):
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
    assert {"python", "keras", "keras_tuner", "numpy",
            keras.backend.backend()} <= set(summary["versions"])
    assert len(summary["git_commit"]) == 40
    assert isinstance(summary["git_dirty"], bool)
    assert summary["command"].startswith("python -m tuning.sweep ")
    assert "--data-dir" in summary["command"]
    assert summary["arms"]["affine_like"]["seeds"] == 2
    assert set(summary["arms"]["affine_like"]["best_hyperparameters"]) == {
        "learning_rate", "optimizer", "kernel_scale"
    }

    for name in ("accuracy.png", "learning_curves.png",
                 "val_accuracy_vs_learning_rate.png"):
        assert (out / name).read_bytes()[:8] == PNG_MAGIC, name
    assert not list(out.glob("*.tmp"))

    # Progress a person can follow.
    assert "[search] arm 2/2 affine_like: trial 2 of 2 done" in proc.stdout
    assert "best so far" in proc.stdout and "elapsed" in proc.stdout
    # One KerasTuner project per arm.
    assert sorted(p.name for p in (tmp / "runs" / "tiny").iterdir()
                  if p.is_dir()) == sorted(ARMS)


def test_reproduce(finished):
    tmp, args, proc = finished
    assert proc.returncode == 0
    row = [r for r in records.read_csv(tmp / "results/tiny/trials.csv")
           if r["arm"] == "affine_like" and r["seed"] == "1"][0]
    again = common.run_sweep(tmp, *args, "--reproduce", "affine_like", "1")
    assert again.returncode == 0, again.stderr
    last = again.stdout.strip().splitlines()[-1]
    assert f"(recorded {float(row['test_accuracy']):.4f}" in last
    reproduced = float(last.split()[1])
    # Same backend, same seed and hyperparameters: the same model, up to
    # floating-point noise on 20 test images.
    assert abs(reproduced - float(row["test_accuracy"])) <= 0.05 + 1e-9


@pytest.mark.requires_backend("torch")
def test_killed_runs_resume_without_redoing_work(tmp_path):
    data_dir = common.write_image_folder(tmp_path / "cifar10")
    study = common.write_study(tmp_path / "tiny.toml", max_trials=3)
    args = (study, "--data-dir", data_dir, "--results-dir",
            tmp_path / "results", "--runs-dir", tmp_path / "runs")
    out = tmp_path / "results" / "tiny"

    # Killed during the search, after its first trial.
    first = _run_until(tmp_path, args, "dense: trial 1 of 3 done")
    assert not (out / "trials.csv").exists()
    # Killed during the seed reruns, after the first row was written.
    second = _run_until(tmp_path, args, "dense seed 1/2: test_accuracy")
    assert "dense: trial 1 of 3 started" not in second
    assert "resuming, 1 of 3 trials already done" in second
    rows = records.read_csv(out / "trials.csv")
    assert [(r["arm"], r["seed"]) for r in rows] == [("dense", "0")]

    final = common.run_sweep(tmp_path, *args)
    assert final.returncode == 0, final.stdout + final.stderr
    assert "started" not in final.stdout  # no search trial redone
    assert "dense seed 1/2: already done" in final.stdout
    rows = records.read_csv(out / "trials.csv")
    assert [(r["arm"], r["seed"]) for r in rows] == [
        (arm, str(seed)) for arm in ARMS for seed in (0, 1)
    ]
    search = records.read_csv(out / "search_trials.csv")
    assert [(r["arm"], r["trial_id"]) for r in search] == [
        (arm, t) for arm in ARMS for t in ("0", "1", "2")
    ] and {r["status"] for r in search} == {"COMPLETED"}
    assert len(records.read_csv(out / "curves.csv")) == 4

    # Done: a rerun changes nothing; --overwrite starts again.
    before = (out / "trials.csv").read_text()
    again = common.run_sweep(tmp_path, *args, "--seeds", "2")
    assert again.returncode == 0 and "started" not in again.stdout
    assert (out / "trials.csv").read_text() == before


def _run_until(tmp_path, args, line_part, timeout=300):
    """Starts the runner, SIGKILLs it once a line contains `line_part`."""
    proc = subprocess.Popen(
        common.sweep_command(*args),
        cwd=common.REPO_ROOT,
        env=common.sweep_env(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines = []
    watchdog = threading.Timer(timeout, proc.kill)
    watchdog.start()
    try:
        for line in proc.stdout:
            lines.append(line)
            if line_part in line:
                break
        else:
            pytest.fail(f"runner ended before {line_part!r}:\n"
                        + "".join(lines))
    finally:
        watchdog.cancel()
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
        proc.stdout.close()
    return "".join(lines)


# Bad input: one line on stderr, exit status 2, no traceback.


def _main(capsys, *argv):
    code = sweep.main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.err


def test_unknown_study_lists_the_valid_ones(capsys):
    code, err = _main(capsys, "no_such_study")
    assert code == 2
    assert err == (
        f"error: Unknown study. Expected one of {study_module.list_studies()}"
        " or a path to a `.toml` study file. Received: "
        "study='no_such_study'\n"
    )
    assert "smoke" in study_module.list_studies()


def test_unknown_arm(tmp_path, capsys):
    study = common.write_study(tmp_path / "bad.toml")
    text = open(study).read().replace('"affine_like"]', '"resnet"]')
    open(study, "w").write(text)
    code, err = _main(capsys, study)
    assert code == 2
    assert err.startswith("error: Malformed study file")
    assert "Received: arms=['dense', 'resnet']" in err


def test_malformed_study_file(tmp_path, capsys):
    study = tmp_path / "broken.toml"
    study.write_text("[compare\nfamily = 'mlp'\n")
    code, err = _main(capsys, study)
    assert code == 2
    assert err.startswith(f"error: Malformed study file {study}: not valid "
                          "TOML")
    assert err.count("\n") == 1


def test_missing_data_dir(tmp_path, capsys):
    study = common.write_study(tmp_path / "tiny.toml")
    code, err = _main(capsys, study, "--data-dir", tmp_path / "nowhere",
                      "--results-dir", tmp_path, "--runs-dir", tmp_path)
    assert code == 2
    assert err.startswith("error: cannot load the data: The CIFAR-10 image "
                          "folder does not exist.")
    assert f"Received: data_dir='{tmp_path / 'nowhere'}'" in err


def test_wrongly_laid_out_data_dir(tmp_path, capsys):
    (tmp_path / "flat" / "train").mkdir(parents=True)
    study = common.write_study(tmp_path / "tiny.toml")
    code, err = _main(capsys, study, "--data-dir", tmp_path / "flat",
                      "--results-dir", tmp_path, "--runs-dir", tmp_path)
    assert code == 2
    assert "it lacks test/" in err and "Received: data_dir=" in err


def test_data_unavailable(tmp_path, capsys, monkeypatch):
    from keras_affine_div import datasets

    def offline(*args, **kwargs):
        raise datasets.DataUnavailableError(
            "CIFAR-10 is not prepared. Received: tfds_data_dir='x'"
        )

    monkeypatch.setattr(datasets, "load", offline)
    study = common.write_study(tmp_path / "tiny.toml")
    code, err = _main(capsys, study, "--results-dir", tmp_path,
                      "--runs-dir", tmp_path)
    assert code == 2
    assert err == ("error: cannot load the data: CIFAR-10 is not prepared. "
                   "Received: tfds_data_dir='x'\n")


def test_reproduce_before_the_study_ran(tmp_path, capsys):
    code, err = _main(capsys, "smoke", "--results-dir", tmp_path,
                      "--reproduce", "dense", "0")
    assert code == 2
    assert "no finished runs to reproduce" in err
    assert err.endswith("Received: study='smoke'\n")


def test_reproduce_an_unknown_run(finished, capsys):
    tmp, args, proc = finished
    code, err = _main(capsys, *args, "--reproduce", "dense", "7")
    assert code == 2
    assert "expected one of affine_like 0, affine_like 1, dense 0, dense 1" \
        in err
    assert err.endswith("Received: arm='dense', seed='7'\n")


def test_a_changed_study_needs_overwrite(finished, tmp_path, capsys):
    tmp, args, proc = finished
    study = common.write_study(tmp_path / "tiny.toml", epochs=2)
    code, err = _main(capsys, study, *args[1:])
    assert code == 2
    assert "the study changed since its runs" in err
    assert "pass --overwrite" in err


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


def test_bad_port(capsys, monkeypatch):
    monkeypatch.setenv("KERASTUNER_ORACLE_IP", "127.0.0.1")
    monkeypatch.setenv("KERASTUNER_ORACLE_PORT", "http")
    monkeypatch.setenv("KERASTUNER_TUNER_ID", "chief")
    code, err = _main(capsys, "smoke")
    assert code == 2
    assert err == ("error: KERASTUNER_ORACLE_PORT must be a port number. "
                   "Received: KERASTUNER_ORACLE_PORT='http'\n")


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


def test_keras_tuner_state_is_written_atomically(tmp_path, monkeypatch):
    from keras_tuner.src import utils as kt_utils
    from keras_tuner.src.engine import stateful

    sweep._atomic_keras_tuner_writes()
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
