"""KerasTuner's distributed mode: roles, ports, liveness, recovery.

With `KERASTUNER_TUNER_ID`, `KERASTUNER_ORACLE_IP` and
`KERASTUNER_ORACLE_PORT` set, the runner is KerasTuner's distributed chief
(a tuner id containing `"chief"`), which serves one oracle per (condition,
arm) cell, or a worker, which runs the trials. This module holds what the
runner adds to KerasTuner's own mode:

- `role()`: which one this process is;
- `cell_port(base_port, cell_index)` and `serving(port)`: one port per
  cell, set in KerasTuner's variable only while that cell's tuner runs;
- `Liveness`: heartbeats from the workers, and a watchdog on the chief that
  hands the trial of a silent worker to the next one that asks;
- `RecoveringOracleMixin`, mixed into the chief's oracle
  (`oracles.extended`): it takes a trial back from a dead worker and does
  not send a worker away while another worker's trial may yet come back.
"""

import contextlib
import os
import threading
import time

import keras_tuner

from tuning import patches

TUNER_ENV = "KERASTUNER_TUNER_ID"
ORACLE_IP_ENV = "KERASTUNER_ORACLE_IP"
ORACLE_PORT_ENV = "KERASTUNER_ORACLE_PORT"
# Every worker touches `<cell project>/heartbeats/<tuner id>`; the chief
# hands the trial of a worker silent for `--worker-timeout` seconds to the
# next worker that asks for one.
HEARTBEAT_DIR = "heartbeats"
DEFAULT_WORKER_TIMEOUT_S = 600
# How long the chief's oracle pauses a worker told to wait for a trial.
IDLE_PAUSE_S = 0.5


class DistributedError(ValueError):
    """Incomplete or malformed distributed settings."""


def role(environ=None):
    """Returns `"chief"`, `"worker"` or `None` (not distributed).

    KerasTuner's distributed mode is on when `KERASTUNER_ORACLE_IP` is set;
    the tuner whose `KERASTUNER_TUNER_ID` contains `"chief"` runs the oracle.

    Args:
        environ: the environment to read. Defaults to `None` (`os.environ`).

    Raises:
        DistributedError: if the variables are incomplete.
    """
    env = os.environ if environ is None else environ
    if ORACLE_IP_ENV not in env:
        return None
    missing = [v for v in (ORACLE_PORT_ENV, TUNER_ENV) if v not in env]
    if missing:
        raise DistributedError(
            f"distributed mode needs {TUNER_ENV}, {ORACLE_IP_ENV} and "
            f"{ORACLE_PORT_ENV}; {', '.join(missing)} not set. Received: "
            f"{ORACLE_IP_ENV}={env[ORACLE_IP_ENV]!r}"
        )
    port = env[ORACLE_PORT_ENV]
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise DistributedError(
            f"{ORACLE_PORT_ENV} must be a port number. Received: "
            f"{ORACLE_PORT_ENV}={port!r}"
        )
    return "chief" if "chief" in env[TUNER_ENV] else "worker"


def base_port(environ=None):
    """The port of the first cell's oracle (`KERASTUNER_ORACLE_PORT`)."""
    env = os.environ if environ is None else environ
    return int(env[ORACLE_PORT_ENV])


def cell_port(first_port, cell_index):
    """The port of the oracle of cell `cell_index` (0-based, in study
    order: condition by condition, arm by arm)."""
    return first_port + cell_index


@contextlib.contextmanager
def serving(port):
    """KerasTuner reads the oracle's port from its variable when a tuner
    starts: sets it to `port` for the block, then restores it."""
    previous = os.environ.get(ORACLE_PORT_ENV)
    os.environ[ORACLE_PORT_ENV] = str(port)
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(ORACLE_PORT_ENV, None)
        else:
            os.environ[ORACLE_PORT_ENV] = previous


class RecoveringOracleMixin:
    """What the chief's oracle adds to KerasTuner's: recovery of the trial
    of a dead worker."""

    @keras_tuner.synchronized
    def create_trial(self, tuner_id):
        """As KerasTuner's, but a worker is not sent away too early.

        Once the search is over (`max_trials` reached, or the oracle has
        stopped), KerasTuner stops every worker that asks for another trial.
        While a trial of another worker is still running, that worker may
        yet die and its trial come back to the retry queue: the asking
        worker is then told to wait (`IDLE`, after a short pause) instead
        of stopped, so that someone is left to take the trial over.
        """
        trial = super().create_trial(tuner_id)
        waiting_for = [t for t in self.ongoing_trials if t != tuner_id]
        if trial.status == "STOPPED" and waiting_for:
            self.tuner_ids.add(tuner_id)
            trial.status = "IDLE"
            time.sleep(IDLE_PAUSE_S)
        return trial

    @keras_tuner.synchronized
    def release_trial_of(self, tuner_id):
        """Requeues the ongoing trial of `tuner_id`; returns its id.

        This is what KerasTuner's own `Oracle.reload()` does to every
        ongoing trial when a chief restarts: the trial goes to the retry
        queue, which `create_trial` serves first, to any worker.
        """
        trial = self.ongoing_trials.pop(tuner_id, None)
        if trial is None:
            return None
        patches.requeue(self, trial.trial_id)
        self.tuner_ids.discard(tuner_id)
        self.save()
        return trial.trial_id


class Liveness:
    """Heartbeats on a worker; on the chief, a watchdog over the workers.

    A worker touches `<cell project>/heartbeats/<tuner id>` every few
    seconds from a daemon thread (training releases the GIL, so it beats
    during long epochs too). The chief checks the workers that hold a trial:
    one whose heartbeat is older than `timeout` seconds (or that never beat
    since the chief saw its trial start) is taken as dead, and its trial is
    handed to the next worker that asks for one. Heartbeats compare file
    modification times with the chief's clock: on several hosts the clocks
    must agree to well within `timeout`.

    Args:
        role: `"chief"`, `"worker"` or `None` (then it does nothing).
        oracle: the cell's oracle (on the chief, a recovering one).
        project_dir: the cell's KerasTuner project folder.
        timeout: seconds of silence after which a worker is taken as dead.
        label: the prefix of the log lines.
        log: a function of one string.
    """

    def __init__(self, role, oracle, project_dir, timeout, label, log):
        self.role = role
        self.oracle = oracle
        self.dir = os.path.join(project_dir, HEARTBEAT_DIR)
        self.timeout = timeout
        self.label = label
        self.log = log
        self.interval = max(0.2, min(5.0, timeout / 5))
        self.stop = threading.Event()
        self.thread = None

    def __enter__(self):
        if self.role == "worker":
            target = self._beat
        elif self.role == "chief" and hasattr(self.oracle, "release_trial_of"):
            target = self._watch
        else:
            return self
        os.makedirs(self.dir, exist_ok=True)
        self.thread = threading.Thread(target=target, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc_info):
        self.stop.set()
        if self.thread is not None:
            self.thread.join(timeout=10)
        return False

    def _beat(self):
        path = os.path.join(self.dir, os.environ[TUNER_ENV])
        while True:
            with open(path, "w") as f:
                f.write(f"{time.time()}\n")
            if self.stop.wait(self.interval):
                return

    def _watch(self):
        first_seen = {}
        while not self.stop.wait(self.interval):
            now = time.time()
            ongoing = {
                tuner_id: trial.trial_id
                for tuner_id, trial in list(self.oracle.ongoing_trials.items())
            }
            first_seen = {
                key: first_seen.get(key, now) for key in ongoing.items()
            }
            for tuner_id, trial_id in ongoing.items():
                path = os.path.join(self.dir, tuner_id)
                try:
                    last = os.path.getmtime(path)
                except OSError:
                    last = 0.0
                silent = now - max(last, first_seen[(tuner_id, trial_id)])
                if silent <= self.timeout:
                    continue
                released = self.oracle.release_trial_of(tuner_id)
                if released is not None:
                    self.log(
                        f"{self.label}: worker {tuner_id} silent for "
                        f"{silent:.0f} s; trial {int(released) + 1} "
                        "goes to the next worker"
                    )
