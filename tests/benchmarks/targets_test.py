"""The targets' verdicts: the committed runs hold what they compute."""

import json

import pytest

from benchmarks import report
from benchmarks import targets

# Nothing here depends on the Keras backend: run once (conftest.py).
pytestmark = pytest.mark.backend_independent


@pytest.mark.parametrize("backend", ["tensorflow", "jax", "torch"])
def test_evaluate_targets_reproduces_the_committed_verdicts(backend):
    result = json.loads(
        (report.RESULTS_DIR / f"cpu-2core-{backend}.json").read_text()
    )
    assert targets.evaluate_targets(result["cases"]) == result["targets"]


def test_a_target_is_judged_by_its_bound():
    at_most = targets.Target("A", "B", "<=", 1.1, ("case",), "A <= 1.1x B")
    at_least = targets.Target("A", "B", ">=", 5.0, ("case",), "A >= 5x B")
    assert at_most.met(1.1) and not at_most.met(1.2)
    assert at_least.met(5.0) and not at_least.met(4.9)


def test_a_target_of_a_missing_case_is_left_out():
    assert targets.evaluate_targets([]) == []
