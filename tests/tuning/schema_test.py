"""The result schema: choosing and bracketing a cell from its search rows;
divergence; the distributed helpers."""

import math
import subprocess
import sys

import pytest

from tuning import distributed
from tuning import records
from tuning import schema
from tuning import training

# Nothing here depends on the Keras backend: run once (conftest.py).
pytestmark = pytest.mark.backend_independent


def _row(trial_id, lr, acc, status="COMPLETED", diverged="False", loss="1.0"):
    return {
        "trial_id": str(trial_id),
        "learning_rate": repr(lr),
        "val_accuracy": repr(acc),
        "status": status,
        "diverged": diverged,
        "loss": loss,
        "optimizer": "sgd",
        "kernel_scale": "",
    }


ROWS = [
    _row(0, 0.01, 0.30),
    _row(1, 0.1, 0.40),
    _row(2, 1.0, 0.45, diverged="True"),  # the best score, but diverged
    _row(3, 0.05, 0.35),
    _row(4, 0.2, 0.38),
]


def test_the_bracketing_search_never_chooses_a_diverged_trial():
    chosen = schema.chosen_row(ROWS, "bracket")
    assert chosen["trial_id"] == "1"
    b = schema.bracket(ROWS, chosen)
    assert b == {
        "bracketed": True,
        "lr_below_factor": pytest.approx(2.0),
        "lr_above_factor": pytest.approx(2.0),
    }
    assert schema.hyperparameters(chosen) == {
        "learning_rate": 0.1,
        "optimizer": "sgd",
    }


def test_the_random_search_chooses_as_keras_tuner_does():
    # The best completed trial, ties to the earlier one.
    rows = [_row(0, 0.01, 0.3), _row(1, 0.1, 0.4), _row(2, 0.2, 0.4)]
    assert schema.chosen_row(rows, "random")["trial_id"] == "1"
    assert (
        schema.chosen_row([_row(0, 0.1, 0.3, status="FAILED")], "random")
        is None
    )


def test_unbracketed_and_legacy_rows():
    rows = [_row(0, 0.01, 0.30), _row(1, 0.1, 0.40)]
    b = schema.bracket(rows, rows[1])
    assert b["bracketed"] is False
    assert b["lr_below_factor"] == pytest.approx(10.0)
    assert b["lr_above_factor"] is None
    # Rows written before divergence was recorded: a non-finite loss.
    legacy = [
        dict(_row(0, 0.1, 0.5, loss="nan"), diverged=""),
        dict(_row(1, 0.01, 0.2), diverged=""),
    ]
    assert [p.status for p in schema.points(legacy)] == ["diverged", "ok"]
    assert schema.chosen_row(legacy, "bracket")["trial_id"] == "1"


def test_diverged():
    assert training.diverged([2.0, 1.5], 10) is False
    assert training.diverged([2.0, math.nan], 10) is True
    assert training.diverged([2.0, math.inf], 10) is True
    # Above the loss of a uniform guess, ln(10) = 2.303.
    assert training.diverged([2.0, 2.31], 10) is True
    assert training.diverged([], 10) is True


def test_distributed_role_ports_and_serving(monkeypatch):
    assert distributed.role({}) is None
    env = {
        "KERASTUNER_ORACLE_IP": "127.0.0.1",
        "KERASTUNER_ORACLE_PORT": "8000",
        "KERASTUNER_TUNER_ID": "chief",
    }
    assert distributed.role(env) == "chief"
    assert distributed.role(dict(env, KERASTUNER_TUNER_ID="w1")) == "worker"
    with pytest.raises(
        distributed.DistributedError,
        match=r"must be a port number. Received: "
        r"KERASTUNER_ORACLE_PORT='x'",
    ):
        distributed.role(dict(env, KERASTUNER_ORACLE_PORT="x"))
    assert distributed.base_port(env) == 8000
    assert [distributed.cell_port(8000, i) for i in range(3)] == [
        8000,
        8001,
        8002,
    ]
    monkeypatch.setenv("KERASTUNER_ORACLE_PORT", "8000")
    import os

    with distributed.serving(8005):
        assert os.environ["KERASTUNER_ORACLE_PORT"] == "8005"
    assert os.environ["KERASTUNER_ORACLE_PORT"] == "8000"


@pytest.mark.parametrize(
    "cell, expected",
    [("True", True), ("true", True), ("1", True), ("yes", True)]
    + [("False", False), ("", False), ("0", False), (None, False)],
)
def test_a_boolean_cell_reads_back(cell, expected):
    assert records.is_true(cell) is expected


def test_what_write_csv_writes_reads_back(tmp_path):
    path = str(tmp_path / "t.csv")
    rows = [
        {"flag": True, "x": 0.1 + 0.2, "loss": float("nan")},
        {"flag": False, "x": None, "loss": "inf"},
    ]
    records.write_csv(path, ("flag", "x", "loss"), rows)
    first, second = records.read_csv(path)
    assert records.is_true(first["flag"]) and not records.is_true(
        second["flag"]
    )
    assert records.float_or_none(first, "x") == 0.1 + 0.2
    assert records.float_or_none(second, "x") is None
    assert records.float_or_none(None, "x") is None
    assert not records.is_finite(first["loss"])
    assert not records.is_finite(second["loss"])
    assert records.is_finite(first["x"]) and not records.is_finite(second["x"])


def test_the_hyperparameter_names_are_the_hypermodels():
    from keras_affine_div import hypermodels

    assert schema.LEARNING_RATE == hypermodels.LEARNING_RATE
    assert schema.OPTIMIZER == hypermodels.OPTIMIZER
    assert schema.KERNEL_SCALE == hypermodels.KERNEL_SCALE
    assert schema.HYPERPARAMETER_NAMES == hypermodels.HYPERPARAMETER_NAMES
    assert schema.OBJECTIVE == hypermodels.OBJECTIVE


def test_our_arms_are_the_registry_s():
    from keras_affine_div import models
    from tuning import comparisons

    assert comparisons.OUR_ARMS == models.arm_names(ours=True)


def test_reading_results_imports_no_keras():
    # In a fresh process: this one has Keras already.
    code = (
        "import sys\n"
        "from tuning import bracketing, progress, records, schema, statistics\n"
        "from tuning import pooled, report, study\n"
        "print(sorted(m for m in ('keras', 'keras_tuner', 'keras_affine_div',"
        " 'tensorflow', 'jax', 'torch') if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    ).stdout
    assert out.strip() == "[]"
