import math

import numpy as np
import pytest
from scipy import stats

from tuning import statistics

# Nothing here depends on the Keras backend: run once (conftest.py).
pytestmark = pytest.mark.backend_independent

A = [0.41, 0.43, 0.40, 0.45, 0.42]
B = [0.47, 0.46, 0.49]


def test_welch_matches_scipy_and_hand_interval():
    w = statistics.welch(A, B)
    ref = stats.ttest_ind(A, B, equal_var=False)
    assert w["t"] == pytest.approx(ref.statistic)
    assert w["p"] == pytest.approx(ref.pvalue)
    va, vb = np.var(A, ddof=1) / len(A), np.var(B, ddof=1) / len(B)
    se = math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va**2 / (len(A) - 1) + vb**2 / (len(B) - 1))
    diff = np.mean(A) - np.mean(B)
    half = stats.t.ppf(0.975, df) * se
    assert w["diff"] == pytest.approx(diff)
    assert w["se"] == pytest.approx(se)
    assert w["df"] == pytest.approx(df)
    assert w["low"] == pytest.approx(diff - half)
    assert w["high"] == pytest.approx(diff + half)


def test_welch_confidence_sets_the_interval():
    w = statistics.welch(A, B, confidence=0.9)
    half = stats.t.ppf(0.95, w["df"]) * w["se"]
    assert w["high"] - w["diff"] == pytest.approx(half)
    assert w["high"] - w["low"] < (
        statistics.welch(A, B)["high"] - statistics.welch(A, B)["low"]
    )


@pytest.mark.parametrize(
    "a, b",
    [([0.5], [0.4, 0.6]), ([0.4, 0.6], []), ([0.5, 0.5], [0.4, 0.4])],
    ids=["one_value", "empty", "no_spread"],
)
def test_welch_undefined_is_nan(a, b):
    w = statistics.welch(a, b)
    for key in ("df", "low", "high", "t", "p"):
        assert math.isnan(w[key])
    assert math.isnan(statistics.superiority(a, b))
    assert math.isnan(statistics.non_inferiority(a, b, 0.01))
    assert math.isnan(statistics.inferiority(a, b, 0.01))
    assert math.isnan(statistics.detectable_difference(a, b))


def test_welch_no_spread_keeps_the_difference():
    w = statistics.welch([0.5, 0.5], [0.4, 0.4])
    assert w["diff"] == pytest.approx(0.1)
    assert w["se"] == 0.0


@pytest.mark.parametrize("margin", [0.0, 0.01, 0.05])
def test_one_sided_tests_match_scipy_on_shifted_samples(margin):
    shifted = np.add(A, margin)
    assert statistics.non_inferiority(A, B, margin) == pytest.approx(
        stats.ttest_ind(
            shifted, B, equal_var=False, alternative="greater"
        ).pvalue
    )
    assert statistics.inferiority(A, B, margin) == pytest.approx(
        stats.ttest_ind(shifted, B, equal_var=False, alternative="less").pvalue
    )
    assert statistics.superiority(A, B) == pytest.approx(
        stats.ttest_ind(A, B, equal_var=False, alternative="greater").pvalue
    )


def test_non_inferiority_and_inferiority_are_complements():
    # Same statistic, opposite tails.
    p_ni = statistics.non_inferiority(A, B, 0.03)
    p_inf = statistics.inferiority(A, B, 0.03)
    assert p_ni + p_inf == pytest.approx(1.0)


def test_holm_hand_case():
    adjusted = statistics.holm([0.01, 0.04, 0.03, 0.005])
    assert adjusted == pytest.approx([0.03, 0.06, 0.06, 0.02])


def test_holm_levels_step_down():
    levels = statistics.holm_levels([0.01, math.nan, 0.04, 0.03, 0.005])
    # Sorted: 0.005 (alpha/4), 0.01 (alpha/3), 0.03 (alpha/2), 0.04 (alpha).
    assert levels[0] == pytest.approx(0.05 / 3)
    assert math.isnan(levels[1])
    assert levels[2:] == pytest.approx([0.05, 0.05 / 2, 0.05 / 4])
    # A p-value passes Holm exactly when it and every smaller one are below
    # their levels.
    p = [0.01, 0.04, 0.03, 0.005]
    adjusted = statistics.holm(p)
    levels = statistics.holm_levels(p)
    for i in range(len(p)):
        smaller = [j for j in range(len(p)) if p[j] <= p[i]]
        assert (adjusted[i] < 0.05) == all(p[j] < levels[j] for j in smaller)


def test_holm_leaves_nan_out_and_caps_at_one():
    adjusted = statistics.holm([0.01, math.nan, 0.04, 0.03, 0.005, 0.9])
    assert math.isnan(adjusted[1])
    # m = 5: 0.005*5, 0.01*4, 0.03*3, 0.04*2, 0.9*1.
    assert [adjusted[i] for i in (0, 2, 3, 4, 5)] == pytest.approx(
        [0.04, 0.09, 0.09, 0.025, 0.9]
    )
    assert statistics.holm([0.5, 0.6]) == pytest.approx([1.0, 1.0])
    assert statistics.holm([]) == []


def test_holm_is_monotone_in_p():
    rng = np.random.default_rng(0)
    p = list(rng.uniform(size=20))
    adjusted = statistics.holm(p)
    order = np.argsort(p)
    assert np.all(np.diff(np.asarray(adjusted)[order]) >= 0)
    assert all(a >= q for a, q in zip(adjusted, p))


def test_detectable_difference_hand_case():
    a, b = [0.40, 0.42, 0.44], [0.50, 0.51, 0.52]
    se = math.sqrt(0.0004 / 3 + 0.0001 / 3)
    df = 0.25 / 0.085  # (v_a + v_b)**2 / (v_a**2 / 2 + v_b**2 / 2)
    expected = (stats.t.ppf(0.95, df) + stats.t.ppf(0.8, df)) * se
    assert statistics.detectable_difference(a, b) == pytest.approx(expected)
    assert (
        statistics.detectable_difference(a, b, alpha=0.01, power=0.9) > expected
    )


def test_detectable_difference_has_about_the_power_asked():
    # Samples whose spread matches the population's: a true difference of
    # the detectable size is found about `power` of the time.
    sigma, n = 0.01, 8
    base = stats.norm.ppf((np.arange(n) + 0.5) / n)
    base = base / np.std(base, ddof=1) * sigma
    delta = statistics.detectable_difference(list(base), list(base))
    rng = np.random.default_rng(0)
    a = rng.normal(delta, sigma, size=(4000, n))
    b = rng.normal(0.0, sigma, size=(4000, n))
    p = stats.ttest_ind(
        a, b, axis=1, equal_var=False, alternative="greater"
    ).pvalue
    assert 0.75 < np.mean(p < 0.05) < 0.85


def test_interaction_hand_case():
    ours_small, ours_large = [0.40, 0.42], [0.38, 0.40]
    comp_small, comp_large = [0.45, 0.47], [0.40, 0.44]
    i = statistics.interaction(ours_small, ours_large, comp_small, comp_large)
    # (0.39 - 0.41) - (0.42 - 0.46); var/n = 1e-4, 1e-4, 1e-4, 4e-4.
    se = math.sqrt(7e-4)
    df = 4.9e-7 / (3 * 1e-8 + 1.6e-7)
    half = stats.t.ppf(0.975, df) * se
    assert i["diff"] == pytest.approx(0.02)
    assert i["se"] == pytest.approx(se)
    assert i["df"] == pytest.approx(df)
    assert i["low"] == pytest.approx(0.02 - half)
    assert i["high"] == pytest.approx(0.02 + half)
    assert i["t"] == pytest.approx(0.02 / se)
    assert i["p"] == pytest.approx(2 * stats.t.sf(0.02 / se, df))


def test_interaction_of_two_cells_is_welch():
    # With constant small-batch cells (no variance, same mean), the
    # interaction is the Welch test of the large-batch cells.
    zero = [0.5, 0.5, 0.5]
    i = statistics.interaction(zero, A, zero, B)
    w = statistics.welch(A, B)
    for key in ("diff", "se", "df", "low", "high", "p"):
        assert i[key] == pytest.approx(w[key])


@pytest.mark.parametrize("alternative", ["less", "greater"])
def test_one_sided_p_values_match_scipy(alternative):
    w = statistics.welch(A, B)
    expected = stats.ttest_ind(A, B, equal_var=False, alternative=alternative)
    key = "p_below" if alternative == "less" else "p_above"
    assert w[key] == pytest.approx(expected.pvalue)
    assert w["p_below"] + w["p_above"] == pytest.approx(1.0)
    assert 2 * min(w["p_below"], w["p_above"]) == pytest.approx(w["p"])


def test_interaction_one_sided_p_values():
    ours_small, ours_large = [0.40, 0.42], [0.38, 0.40]
    comp_small, comp_large = [0.45, 0.47], [0.40, 0.44]
    i = statistics.interaction(ours_small, ours_large, comp_small, comp_large)
    assert i["p_below"] == pytest.approx(stats.t.cdf(i["t"], i["df"]))
    assert i["p_above"] == pytest.approx(stats.t.sf(i["t"], i["df"]))
    assert i["p_above"] < 0.5 < i["p_below"]  # the estimate is +0.02


def test_detectable_is_the_power_of_a_one_sided_t_test():
    se, df = 0.01, 7.0
    d = statistics.detectable(se, df)
    # A true effect d: the one-sided test rejects when t > t.ppf(0.95, df),
    # with t ~ noncentral t (df, d / se); its probability is the power.
    power = stats.nct.sf(stats.t.ppf(0.95, df), df, d / se)
    assert power == pytest.approx(0.8, abs=0.02)
    assert statistics.detectable_difference(A, B) == pytest.approx(
        statistics.detectable(
            statistics.welch(A, B)["se"], statistics.welch(A, B)["df"]
        )
    )
    assert math.isnan(statistics.detectable(math.nan, df))
    assert math.isnan(statistics.detectable(0.0, df))
    with pytest.raises(ValueError, match="power"):
        statistics.detectable(se, df, power=1.0)


@pytest.mark.parametrize(
    "p_below, p_above, expected",
    [
        (0.01, 1.0, "falls"),
        (0.01, 0.01, "falls"),
        (1.0, 0.049, "rises"),
        (0.05, 0.05, "inconclusive (could detect >= 0.012)"),
        (math.nan, math.nan, "inconclusive (could detect >= 0.012)"),
    ],
    ids=["below", "both", "above", "neither", "nan"],
)
def test_direction_verdict(p_below, p_above, expected):
    got = statistics.direction_verdict(
        p_below, p_above, 0.0123, below="falls", above="rises"
    )
    assert got == expected


def test_direction_verdict_rejects_a_bad_alpha():
    with pytest.raises(ValueError, match="alpha"):
        statistics.direction_verdict(0.1, 0.1, 0.01, "a", "b", alpha=0.0)


def test_interaction_undefined_is_nan():
    i = statistics.interaction([0.5], [0.4, 0.5], [0.5, 0.6], [0.4, 0.5])
    assert math.isnan(i["p"]) and math.isnan(i["low"])


@pytest.mark.parametrize(
    "p_superior, p_non_inferior, p_inferior, expected",
    [
        (0.01, 0.001, 1.0, "superior"),
        (0.2, 0.04, 1.0, "non-inferior"),
        (1.0, 1.0, 0.049, "inferior"),
        (0.05, 0.05, 0.05, "inconclusive (could detect >= 0.025)"),
        (math.nan, math.nan, math.nan, "inconclusive (could detect >= 0.025)"),
    ],
    ids=["superior", "non_inferior", "inferior", "inconclusive", "nan"],
)
def test_verdict_branches(p_superior, p_non_inferior, p_inferior, expected):
    assert (
        statistics.verdict(p_superior, p_non_inferior, p_inferior, 0.0251)
        == expected
    )


def test_verdict_without_detectable_difference():
    assert statistics.verdict(1.0, 1.0, 1.0, math.nan) == (
        "inconclusive (could detect >= n/a)"
    )
    assert statistics.verdict(0.08, 1.0, 1.0, 0.01, alpha=0.1) == "superior"


@pytest.mark.parametrize(
    "call, match",
    [
        (
            lambda: statistics.welch(A, B, confidence=1.0),
            r"`confidence`.*Received: confidence=1\.0",
        ),
        (
            lambda: statistics.interaction(A, A, B, B, confidence=0),
            "Received: confidence=0",
        ),
        (
            lambda: statistics.detectable_difference(A, B, alpha=0),
            "Received: alpha=0",
        ),
        (
            lambda: statistics.detectable_difference(A, B, power=1.5),
            r"Received: power=1\.5",
        ),
        (
            lambda: statistics.verdict(1, 1, 1, 0.1, alpha=-0.1),
            r"Received: alpha=-0\.1",
        ),
        (
            lambda: statistics.non_inferiority(A, B, -0.01),
            r"non-negative.*Received: margin=-0\.01",
        ),
        (
            lambda: statistics.inferiority(A, B, math.inf),
            "Received: margin=inf",
        ),
    ],
    ids=[
        "confidence",
        "interaction_confidence",
        "alpha",
        "power",
        "verdict_alpha",
        "margin_negative",
        "margin_infinite",
    ],
)
def test_invalid_arguments(call, match):
    with pytest.raises(ValueError, match=match):
        call()
