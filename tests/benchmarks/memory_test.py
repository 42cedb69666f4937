"""The memory measurement's ratios and its process' command line."""

import pytest

from benchmarks import memory

# Nothing here depends on the Keras backend: run once (conftest.py).
pytestmark = pytest.mark.backend_independent


def test_memory_ratio_needs_a_baseline_above_the_floor():
    floor = memory.MEMORY_RATIO_FLOOR_MIB
    base = {"first_step_peak_increase_mib": 2 * floor}
    entry = {"first_step_peak_increase_mib": 3 * floor}
    assert memory.memory_ratio(entry, base, "first_step_peak_increase_mib") == (
        1.5
    )
    small = {"first_step_peak_increase_mib": floor / 2}
    assert (
        memory.memory_ratio(entry, small, "first_step_peak_increase_mib")
        is None
    )
    assert memory.memory_ratio({}, base, "first_step_peak_increase_mib") is None


def test_memory_process_refuses_a_model_not_of_the_case(capsys):
    with pytest.raises(SystemExit) as info:
        memory.main(["dense_3072_1024", "Conv2D", "--mode", "smoke"])
    assert info.value.code == 2
    assert "'Conv2D' is not a model of dense_3072_1024" in (
        capsys.readouterr().err
    )


def test_memory_process_refuses_an_unknown_case(capsys):
    with pytest.raises(SystemExit) as info:
        memory.main(["conv_1x1", "Conv2D"])
    assert info.value.code == 2
    assert "Received: name='conv_1x1'" in capsys.readouterr().err
