"""KerasTuner's distributed mode on loopback: one chief, two workers."""

import os
import signal
import socket
import subprocess
import time

import pytest

from tests.tuning import common
from tuning import records

ARMS = ("dense", "affine_like")


def _free_port_pair():
    """A port `p` such that `p` and `p + 1` are free (one oracle per arm)."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port >= 65535:
            continue
        try:
            with socket.socket() as s:
                s.bind(("127.0.0.1", port + 1))
        except OSError:
            continue
        return port
    pytest.skip("no two consecutive free ports on loopback")


def _start(tmp_path, args, tuner_id, port, log):
    env = common.sweep_env(
        tmp_path,
        KERASTUNER_TUNER_ID=tuner_id,
        KERASTUNER_ORACLE_IP="127.0.0.1",
        KERASTUNER_ORACLE_PORT=str(port),
    )
    return subprocess.Popen(
        common.sweep_command(*args),
        cwd=common.REPO_ROOT,
        env=env,
        stdout=open(log, "w"),
        stderr=subprocess.STDOUT,
    )


def _wait_for(log, text, procs, timeout=300):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        content = log.read_text() if log.exists() else ""
        if text in content:
            return content
        if any(p.poll() is not None for p in procs):
            break
        time.sleep(0.05)
    pytest.fail(
        f"{text!r} never appeared in {log}:\n"
        + (log.read_text() if log.exists() else "")
    )


@pytest.mark.slow
@pytest.mark.requires_backend("torch")
def test_chief_and_two_workers_survive_a_killed_worker(tmp_path):
    data_dir = common.write_image_folder(tmp_path / "cifar10")
    # The bracketing search: its initial grid of 3 rates is the budget.
    study = common.write_study(
        tmp_path / "tiny.toml", max_trials=3, epochs=2, tuner="bracket"
    )
    args = common.sweep_args(
        study, data_dir, tmp_path, "--worker-timeout", "20"
    )
    port = _free_port_pair()
    logs = {
        name: tmp_path / f"{name}.log"
        for name in ("chief", "worker0", "worker1")
    }
    procs = {}
    try:
        procs["chief"] = _start(tmp_path, args, "chief", port, logs["chief"])
        for name in ("worker0", "worker1"):
            procs[name] = _start(tmp_path, args, name, port, logs[name])

        # Kill worker0 in the middle of its first trial (of either arm), for
        # good: it is never restarted.
        content = _wait_for(logs["worker0"], "started", [procs["worker0"]])
        procs["worker0"].send_signal(signal.SIGKILL)
        procs["worker0"].wait(timeout=60)
        started = [line for line in content.splitlines() if "started" in line]
        # "[search] arm 1/2 dense: trial 2 of 3 started: ..."
        killed = started[-1].split("] arm ")[1].split(" ", 1)[1]
        killed = killed.split(" started")[0]  # "dense: trial 2 of 3"
        assert f"{killed} done" not in content, content

        # The chief hands the dead worker's trial to worker1; nothing stalls.
        # The timeout is long enough for worker1 to have asked for a trial
        # past `max_trials` before the handover: it must wait, not leave.
        for name in ("chief", "worker1"):
            assert procs[name].wait(timeout=600) == 0, logs[name].read_text()
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()

    chief = logs["chief"].read_text()
    assert "worker worker0 silent for" in chief, chief
    survivor = logs["worker1"].read_text()
    assert f"{killed} started" in survivor
    assert f"{killed} done" in survivor
    assert "the chief retrains the best settings" in survivor

    out = tmp_path / "results" / "tiny"
    search = records.read_csv(out / "search_trials.csv")
    assert sorted((r["arm"], r["trial_id"]) for r in search) == sorted(
        (arm, str(t)) for arm in ARMS for t in range(3)
    )
    assert {r["status"] for r in search} == {"COMPLETED"}
    runs = records.read_csv(out / "trials.csv")
    assert [(r["arm"], r["seed"]) for r in runs] == [
        (arm, str(seed)) for arm in ARMS for seed in (0, 1)
    ]
    summary = records.read_json(out / "summary.json")
    assert summary["distributed"] is True
    # Only the chief writes results; the workers ran every trial.
    assert "started" not in chief and "[seeds]" in chief
    done = survivor.count("of 3 done") + logs["worker0"].read_text().count(
        "of 3 done"
    )
    assert done == 6
    assert not os.path.exists(tmp_path / "results" / "tiny-quick")
