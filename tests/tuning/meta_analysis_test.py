"""`tuning.meta_analysis`: the random-effects pooling against statsmodels."""

import math
import warnings

import numpy as np
import pytest
from scipy import stats

from tuning import meta_analysis

# Nothing here depends on the Keras backend: run once (conftest.py).
pytestmark = pytest.mark.backend_independent


def _statsmodels_pooled(diffs, ses):
    """statsmodels' DerSimonian–Laird random effects: the rows of its
    normal-theory ("random effect") and Hartung–Knapp ("random effect wls")
    standard errors, both with t intervals on k - 1 df."""
    meta = pytest.importorskip("statsmodels.stats.meta_analysis")
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = meta.combine_effects(
            np.asarray(diffs), np.asarray(ses) ** 2, method_re="dl", use_t=True
        )
        frame = result.summary_frame()
    return result, frame


@pytest.mark.parametrize(
    "diffs, ses",
    [
        # Conditions that disagree: Hartung–Knapp's scale q > 1.
        ([0.01, 0.03, -0.02, 0.05], [0.01, 0.014, 0.012, 0.01]),
        # Close to each other: q < 1, the normal-theory error is kept.
        ([0.010, 0.012, 0.009, 0.011, 0.010], [0.01, 0.02, 0.015, 0.01, 0.03]),
        # Two conditions, very unequal errors.
        ([-0.004, 0.02], [0.003, 0.009]),
    ],
    ids=["heterogeneous", "homogeneous", "two"],
)
def test_matches_statsmodels(diffs, ses):
    result, frame = _statsmodels_pooled(diffs, ses)
    got = meta_analysis.random_effects(diffs, ses)
    k = len(diffs)
    assert got["k"] == k
    np.testing.assert_allclose(got["fixed"], frame.loc["fixed effect", "eff"])
    np.testing.assert_allclose(got["q"], result.q)
    np.testing.assert_allclose(
        got["p_heterogeneity"], stats.chi2.sf(result.q, k - 1)
    )
    if result.tau2 > 0:
        np.testing.assert_allclose(got["diff"], result.mean_effect_re)
        np.testing.assert_allclose(got["tau2"], result.tau2)
        np.testing.assert_allclose(got["i2"], result.i2)
        # The wider of the random-effects rows: max(1, q) in Hartung–Knapp.
        rows = frame.loc[["random effect", "random effect wls"]]
    else:
        # statsmodels leaves DerSimonian–Laird's tau2 negative where
        # Q < k - 1 (negative weights); truncated at 0, as the estimator
        # is defined, the random effects are the fixed effect, with
        # Hartung–Knapp's q = Q / (k - 1) < 1, so its normal-theory error.
        assert result.q < k - 1
        assert got["tau2"] == 0.0 and got["i2"] == 0.0
        np.testing.assert_allclose(got["diff"], result.mean_effect_fe)
        rows = frame.loc[["fixed effect"]]
    wide = rows.loc[rows["sd_eff"].idxmax()]
    np.testing.assert_allclose(got["se"], wide["sd_eff"])
    np.testing.assert_allclose(got["low"], wide["ci_low"])
    np.testing.assert_allclose(got["high"], wide["ci_upp"])
    t = got["diff"] / got["se"]
    np.testing.assert_allclose(got["p"], 2 * stats.t.sf(abs(t), k - 1))


def test_of_equal_differences_has_no_heterogeneity():
    ses = [0.01, 0.02, 0.01]
    got = meta_analysis.random_effects([0.03, 0.03, 0.03], ses)
    assert got["q"] == pytest.approx(0.0, abs=1e-15)
    assert got["i2"] == 0.0 and got["tau2"] == 0.0
    assert got["diff"] == pytest.approx(0.03)
    assert got["fixed"] == pytest.approx(0.03)
    # Fixed-effect error: 1 / sqrt(sum of the weights), by hand.
    by_hand = 1 / math.sqrt(1 / 0.01**2 + 1 / 0.02**2 + 1 / 0.01**2)
    assert got["se"] == pytest.approx(by_hand)
    half = stats.t.ppf(0.975, 2) * by_hand
    assert got["low"] == pytest.approx(0.03 - half)
    assert got["high"] == pytest.approx(0.03 + half)


def test_heterogeneity_widens_the_interval():
    ses = [0.005] * 4
    close = meta_analysis.random_effects([0.010, 0.011, 0.009, 0.010], ses)
    apart = meta_analysis.random_effects([-0.03, 0.05, -0.02, 0.04], ses)
    assert close["diff"] == pytest.approx(apart["diff"])
    assert apart["tau2"] > 0 and apart["i2"] > 0.9
    assert apart["p_heterogeneity"] < 1e-6 < close["p_heterogeneity"]
    assert apart["high"] - apart["low"] > 5 * (close["high"] - close["low"])


def test_of_fewer_than_two_conditions():
    one = meta_analysis.random_effects([0.02], [0.01])
    assert one["k"] == 1 and one["diff"] == 0.02 and one["fixed"] == 0.02
    assert all(
        math.isnan(one[key])
        for key in ("se", "low", "high", "p", "q", "i2", "tau2")
    )
    none = meta_analysis.random_effects([], [])
    assert none["k"] == 0 and math.isnan(none["diff"])


@pytest.mark.parametrize(
    "diffs, ses, match",
    [
        ([0.1, 0.2], [0.01], r"len\(diffs\)=2, len\(ses\)=1"),
        ([0.1], [0.0], "finite, positive"),
        ([0.1], [math.nan], "finite, positive"),
        ([0.1], [math.inf], "finite, positive"),
    ],
    ids=["lengths", "zero", "nan", "inf"],
)
def test_invalid_arguments(diffs, ses, match):
    with pytest.raises(ValueError, match=match):
        meta_analysis.random_effects(diffs, ses)
    with pytest.raises(ValueError, match="Received: confidence=1"):
        meta_analysis.random_effects([0.1, 0.2], [0.01, 0.01], confidence=1)
