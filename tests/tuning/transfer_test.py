"""The endpoints of claim (d): basin, parabola peak, bootstrap drift."""

import math

import numpy as np
import pytest

from tuning import transfer

pytestmark = pytest.mark.backend_independent


def test_peak_recovers_the_vertex_of_a_parabola():
    rates = [0.1, 0.1778, 0.3162]
    x = np.log10(rates)
    means = -((x - math.log10(0.2)) ** 2)
    assert transfer.peak(rates, means, 0.25) == pytest.approx(0.2, rel=1e-9)


def test_peak_opening_upwards_takes_the_best_point():
    assert transfer.peak([1, 2, 4], [0.5, 0.4, 0.45], 0.25) == 1


def test_peak_is_clipped_one_step_beyond():
    rates = [1.0, 10.0, 100.0]
    means = [0.1, 0.5, 0.6]  # still rising: the vertex lies far above
    assert transfer.peak(rates, means, 1.0) <= 1000.0 * (1 + 1e-9)


def test_basin_and_censoring():
    points = [(0.01, 0.40), (0.03, 0.47), (0.1, 0.48), (0.3, 0.475), (1, None)]
    b = transfer.basin(points)
    assert (b.low, b.high) == (0.03, 0.3)
    assert not b.censored_low and not b.censored_high
    assert b.decades == pytest.approx(1.0)
    b = transfer.basin([(0.1, 0.5), (0.3, 0.495), (1.0, 0.3)])
    assert b.censored_low and str(b).startswith(">=")


def test_drift_of_identical_ends_is_zero_and_of_a_shift_its_log2():
    cell = {0.1: [0.4, 0.41], 0.1778: [0.45, 0.46], 0.3162: [0.42, 0.43]}
    point, low, high = transfer.drift_interval(cell, cell, 0.25, resamples=200)
    assert point == 0
    shifted = {r * 4: v for r, v in cell.items()}
    point, low, high = transfer.drift_interval(
        cell, shifted, 0.25, resamples=200
    )
    assert point == pytest.approx(2.0)
    assert low <= point <= high
    assert transfer.verdict(low, high) in ("drifts", "inconclusive")
    assert transfer.verdict(-0.5, 0.5) == "transfers"
    assert transfer.verdict(1.5, 2.5) == "drifts"
