"""Replaying recorded search trials into an oracle whose project is gone."""

import pytest

from tests.tuning.bracketing_test import CLIFF
from tests.tuning.bracketing_test import PEAKS
from tests.tuning.bracketing_test import drive
from tests.tuning.bracketing_test import make_oracle
from tests.tuning.bracketing_test import report
from tuning import oracles
from tuning import search

# Nothing here depends on the Keras backend: run once (conftest.py).
pytestmark = pytest.mark.backend_independent

OBJECTIVES = {**PEAKS, "cliff": CLIFF}


def recording_oracle(tmp_path, name, **kwargs):
    """A `make_oracle` oracle with `RecordingOracleMixin` and its rows."""
    oracle = make_oracle(tmp_path / name, **kwargs)
    oracle.__class__ = search.recording(oracles.BracketOracle)
    rows = []
    oracle.on_trial_end = lambda trial: rows.append(row_of(trial))
    return oracle, rows


def row_of(trial):
    """The `search_trials.csv` row of a trial, as `tuning.runner` writes
    it (values as strings)."""
    row = {
        "arm": "arm",
        "trial_id": trial.trial_id,
        "status": trial.status,
        "wall_time_s": "1.5",
    }
    for name, value in trial.hyperparameters.values.items():
        row[name] = search._as_cell(value)
    if trial.metrics.exists("val_accuracy"):
        row["val_accuracy"] = repr(
            float(trial.metrics.get_last_value("val_accuracy"))
        )
        row["diverged"] = str(
            bool(trial.metrics.get_last_value(oracles.DIVERGED_METRIC))
        )
    return row


def drive_for(oracle, objective, n):
    for _ in range(n):
        trial = oracle.create_trial("tuner0")
        assert trial.status == "RUNNING"
        report(oracle, trial, objective)


@pytest.mark.parametrize("name", list(OBJECTIVES))
def test_a_replayed_search_goes_on_as_if_never_stopped(tmp_path, name):
    objective = OBJECTIVES[name]
    whole = make_oracle(tmp_path / "whole")
    rates = drive(whole, objective)
    assert len(rates) > 4
    # A search stopped after 4 trials, its project lost: only the rows it
    # recorded as its trials ended are left.
    stopped, rows = recording_oracle(tmp_path, "stopped")
    drive_for(stopped, objective, 4)
    assert [r["trial_id"] for r in rows] == [
        t for t in sorted(whole.trials)[:4]
    ]
    fresh = make_oracle(tmp_path / "fresh")
    logs = []
    assert search.replay(fresh, rows, "cell", logs.append) == 4
    assert logs == []
    assert search.count_completed(fresh) == 4
    # It proposes the trials the uninterrupted search ran next, and ends
    # where that one ended.
    assert drive(fresh, objective) == rates[4:]
    assert fresh.points() == whole.points()
    assert fresh.summary() == whole.summary()
    assert fresh.tuner_ids == whole.tuner_ids
    # Its project now holds every trial, as if they had all run in it.
    reloaded = make_oracle(tmp_path / "fresh")
    reloaded.reload()
    assert reloaded.points() == whole.points()


def test_replay_stops_at_a_trial_the_oracle_does_not_propose(tmp_path):
    objective = PEAKS[next(iter(PEAKS))]
    whole = make_oracle(tmp_path / "whole")
    rates = drive(whole, objective)
    stopped, rows = recording_oracle(tmp_path, "stopped")
    drive_for(stopped, objective, 4)
    # The third recorded trial is not the oracle's: another rate.
    rows[2]["learning_rate"] = repr(float(rows[2]["learning_rate"]) * 3)
    fresh = make_oracle(tmp_path / "fresh")
    logs = []
    assert search.replay(fresh, rows, "cell", logs.append) == 2
    assert len(logs) == 1
    assert logs[0].startswith("cell: recorded trial 3 is not what the oracle")
    assert "replayed 2 of 4 recorded trials" in logs[0]
    assert search.count_completed(fresh) == 2
    # The trial it proposed instead is the next one any tuner gets, and
    # the search then runs as the uninterrupted one did.
    trial = fresh.create_trial("tuner0")
    assert trial.trial_id == sorted(whole.trials)[2]
    assert trial.hyperparameters.get("learning_rate") == rates[2]
    report(fresh, trial, objective)
    assert drive(fresh, objective) == rates[3:]
    assert fresh.points() == whole.points()


def test_replayed_failures_and_divergences_stay_what_they_were(tmp_path):
    objective = CLIFF
    stopped, rows = recording_oracle(tmp_path, "stopped")
    drive_for(stopped, objective, 3)
    # One trial failed (an exception in training): no metrics.
    failed = stopped.create_trial("tuner0")
    failed.status = "FAILED"
    stopped.end_trial(failed)
    assert rows[-1]["status"] == "FAILED" and "val_accuracy" not in rows[-1]
    fresh = make_oracle(tmp_path / "fresh")
    assert search.replay(fresh, rows, "cell", print) == 4
    assert fresh.points() == stopped.points()
    assert [p.status for p in fresh.points()][-1] == "failed"


def test_replay_leaves_an_oracle_with_trials_alone(tmp_path):
    objective = PEAKS[next(iter(PEAKS))]
    stopped, rows = recording_oracle(tmp_path, "stopped")
    drive_for(stopped, objective, 3)
    # Its own project, reloaded, is as far on as the rows or further.
    reloaded = make_oracle(tmp_path / "stopped")
    reloaded.reload()
    before = reloaded.points()
    assert search.replay(reloaded, rows[:2], "cell", print) == 0
    assert reloaded.points() == before
    assert search.replay(make_oracle(tmp_path / "empty"), [], "", print) == 0


def test_the_recording_oracle_hands_over_every_ended_trial(tmp_path):
    oracle, rows = recording_oracle(tmp_path, "o")
    drive_for(oracle, PEAKS[next(iter(PEAKS))], 2)
    assert [(r["trial_id"], r["status"]) for r in rows] == [
        (t, "COMPLETED") for t in sorted(oracle.trials)
    ]
    assert search.recording(oracles.BracketOracle) is search.recording(
        oracles.BracketOracle
    )
    assert issubclass(
        search.recording(oracles.BracketOracle), oracles.BracketOracle
    )
