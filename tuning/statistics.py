"""Tests of a study's per-seed accuracies: Welch, Holm, power, verdicts.

Pure functions on lists of floats (one value per seed of one arm in one
condition). Every test is Welch's unequal-variance t-test: the difference of
means `d = mean(a) - mean(b)`, its standard error
`se = sqrt(var(a) / n_a + var(b) / n_b)` with the sample variances
(`ddof=1`), and the Welch–Satterthwaite degrees of freedom

    df = (v_a + v_b)**2 / (v_a**2 / (n_a - 1) + v_b**2 / (n_b - 1)),
    v_x = var(x) / n_x.

Where a sample has fewer than two values, or `se == 0` (no spread at all),
nothing can be said: the statistics are `nan`, and `nan` p-values are left
out of `holm` and never pass a threshold in `verdict`.

`mean` and `std` (the sample standard deviation) are the one mean and
spread of the seeds that the reports and views show.
"""

import math

from scipy import stats


def welch(a, b, confidence=0.95):
    """Welch's two-sample t-test of `mean(a) - mean(b)`.

    Returns the difference `d`, its standard error `se`, the
    Welch–Satterthwaite `df`, the two-sided interval
    `d -+ t.ppf((1 + confidence) / 2, df) * se`, the statistic `t = d / se`
    and the two-sided p-value `2 * t.sf(|t|, df)`, the same `t` and `p` as
    `scipy.stats.ttest_ind(a, b, equal_var=False)`.

    Args:
        a: list of floats, the first sample.
        b: list of floats, the second sample.
        confidence: float in (0, 1), the coverage of the interval. Defaults
            to `0.95`.

    Returns:
        dict: `diff`, `se`, `df`, `low`, `high`, `t`, `p` (floats), and the
        one-sided p-values `p_below = t.cdf(t, df)` (of a true difference
        below 0) and `p_above = t.sf(t, df)` (above 0). `diff` is `nan`
        only for an empty sample; `se` is `nan` where a sample has fewer
        than two values (and `0.0` where neither has any spread); `df`,
        `low`, `high`, `t` and the p-values are `nan` in both cases.

    Raises:
        ValueError: if `confidence` is not in (0, 1).
    """
    check_probability("confidence", confidence)
    a, b = _floats(a), _floats(b)
    diff = mean(a) - mean(b)
    se, df = _welch_se_df([a, b])
    return _t_summary(diff, se, df, confidence)


def non_inferiority(a, b, margin):
    """One-sided Welch p-value of non-inferiority of `a` to `b`.

    H0: `mean(a) - mean(b) <= -margin`; H1: `mean(a) - mean(b) > -margin`.
    The p-value is `t.sf((d + margin) / se, df)`, that of
    `scipy.stats.ttest_ind(a + margin, b, equal_var=False,
    alternative="greater")`.

    Args:
        a: list of floats, the sample under test.
        b: list of floats, the comparator's sample.
        margin: non-negative float, how much lower `a` may be and still
            count as not worse (in the units of the samples).

    Returns:
        float: the p-value, `nan` where `welch` has no `se`.

    Raises:
        ValueError: if `margin` is negative or not finite.
    """
    _check_margin(margin)
    return _welch_tail(a, b, margin, upper=True)


def superiority(a, b):
    """One-sided Welch p-value of superiority of `a` over `b`.

    H0: `mean(a) - mean(b) <= 0`; H1: `mean(a) - mean(b) > 0`. The p-value
    is `t.sf(d / se, df)`, that of `scipy.stats.ttest_ind(a, b,
    equal_var=False, alternative="greater")`.

    Args:
        a: list of floats, the sample under test.
        b: list of floats, the comparator's sample.

    Returns:
        float: the p-value, `nan` where `welch` has no `se`.
    """
    return _welch_tail(a, b, 0.0, upper=True)


def inferiority(a, b, margin):
    """One-sided Welch p-value of inferiority of `a` to `b` beyond `margin`.

    H0: `mean(a) - mean(b) >= -margin`; H1: `mean(a) - mean(b) < -margin`.
    The p-value is `t.cdf((d + margin) / se, df)`, that of
    `scipy.stats.ttest_ind(a + margin, b, equal_var=False,
    alternative="less")`.

    Args:
        a: list of floats, the sample under test.
        b: list of floats, the comparator's sample.
        margin: non-negative float, the same margin as `non_inferiority`.

    Returns:
        float: the p-value, `nan` where `welch` has no `se`.

    Raises:
        ValueError: if `margin` is negative or not finite.
    """
    _check_margin(margin)
    return _welch_tail(a, b, margin, upper=False)


def _welch_tail(a, b, shift, upper):
    """`P(T > t)` (upper) or `P(T < t)`, `t = (d + shift) / se`, Welch's df."""
    d, se, df = _d_se_df(a, b)
    if not _usable(se):
        return math.nan
    t = (d + shift) / se
    return float(stats.t.sf(t, df) if upper else stats.t.cdf(t, df))


def holm(p_values):
    """Holm–Bonferroni adjusted p-values, in the order given.

    With the `m` non-`nan` p-values sorted ascending,
    `p_(1) <= ... <= p_(m)`, the adjusted value of `p_(i)` is
    `min(1, max_{j <= i} (m - j + 1) * p_(j))`: monotone in `p`, and
    rejecting the adjusted values below `alpha` controls the family-wise
    error rate at `alpha`. `nan` entries stay `nan` and do not count in `m`.

    Args:
        p_values: list of floats in [0, 1] or `nan`.

    Returns:
        list of floats: the adjusted p-values, same length and order.
    """
    p_values = [float(p) for p in p_values]
    order = sorted(
        (i for i, p in enumerate(p_values) if not math.isnan(p)),
        key=lambda i: p_values[i],
    )
    m = len(order)
    adjusted = [math.nan] * len(p_values)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted


def holm_levels(p_values, alpha=0.05):
    """The level each p-value is held to in Holm's step-down procedure.

    With the `m` non-`nan` p-values sorted ascending, `p_(i)` (from 1) is
    compared with `alpha / (m - i + 1)` once every smaller one has passed:
    `alpha / m` for the smallest, `alpha` for the largest. Ties take the
    order given.

    Args:
        p_values: list of floats in [0, 1] or `nan`.
        alpha: float in (0, 1), the family-wise level. Defaults to `0.05`.

    Returns:
        list of floats: the levels, same length and order (`nan` for `nan`).

    Raises:
        ValueError: if `alpha` is not in (0, 1).
    """
    check_probability("alpha", alpha)
    p_values = [float(p) for p in p_values]
    order = sorted(
        (i for i, p in enumerate(p_values) if not math.isnan(p)),
        key=lambda i: p_values[i],
    )
    levels = [math.nan] * len(p_values)
    for rank, i in enumerate(order):
        levels[i] = alpha / (len(order) - rank)
    return levels


def detectable_difference(a, b, alpha=0.05, power=0.8):
    """The smallest true difference a one-sided Welch test would detect.

    From the observed seed spreads: `(t.ppf(1 - alpha, df) + t.ppf(power,
    df)) * se`, with `se` and `df` of `welch(a, b)`. A true
    `mean(a) - mean(b)` this large is found significant at `alpha` by a
    one-sided test with probability about `power`, for samples of these
    sizes and spreads.

    Args:
        a: list of floats, the first sample.
        b: list of floats, the second sample.
        alpha: float in (0, 1), the one-sided level. Defaults to `0.05`.
        power: float in (0, 1), the probability of detection. Defaults to
            `0.8`.

    Returns:
        float: the difference, in the units of the samples; `nan` where
        `welch` has no `se`.

    Raises:
        ValueError: if `alpha` or `power` is not in (0, 1).
    """
    _, se, df = _d_se_df(a, b)
    return detectable(se, df, alpha=alpha, power=power)


def detectable(se, df, alpha=0.05, power=0.8):
    """The smallest true effect a one-sided t-test of this `se` detects.

    `(t.ppf(1 - alpha, df) + t.ppf(power, df)) * se`: an estimate with
    standard error `se` on `df` degrees of freedom (a `welch` or
    `interaction` result) whose true value is this far from 0 is found
    significant at `alpha` by a one-sided test with probability about
    `power`.

    Args:
        se: float, the standard error of the estimate.
        df: float, its degrees of freedom.
        alpha: float in (0, 1), the one-sided level. Defaults to `0.05`.
        power: float in (0, 1), the probability of detection. Defaults to
            `0.8`.

    Returns:
        float: the effect, in the units of the estimate; `nan` where `se`
        is `nan` or 0.

    Raises:
        ValueError: if `alpha` or `power` is not in (0, 1).
    """
    check_probability("alpha", alpha)
    check_probability("power", power)
    if not _usable(se):
        return math.nan
    return float((stats.t.ppf(1 - alpha, df) + stats.t.ppf(power, df)) * se)


def interaction(
    ours_small, ours_large, comp_small, comp_large, confidence=0.95
):
    """Difference of the batch-size effects of two arms, with its interval.

    The estimate is
    `(mean(ours_large) - mean(ours_small))
    - (mean(comp_large) - mean(comp_small))`: how much more (positive) or
    less accuracy our arm keeps than the comparator when the batch grows.
    The four lists are independent samples (the seeds of four separately
    trained cells), so `se = sqrt(sum_k var(x_k) / n_k)` and the
    Satterthwaite `df = (sum_k v_k)**2 / sum_k (v_k**2 / (n_k - 1))`,
    `v_k = var(x_k) / n_k`; the interval is
    `estimate -+ t.ppf((1 + confidence) / 2, df) * se`, the two-sided
    p-value `2 * t.sf(|estimate / se|, df)`.

    Args:
        ours_small: list of floats, our arm at the smallest batch size.
        ours_large: list of floats, our arm at the largest batch size.
        comp_small: list of floats, the comparator at the smallest batch
            size.
        comp_large: list of floats, the comparator at the largest batch
            size.
        confidence: float in (0, 1), the coverage of the interval. Defaults
            to `0.95`.

    Returns:
        dict: `diff` (the estimate), `se`, `df`, `low`, `high`, `t`, `p`,
        `p_below` (one-sided, of a true interaction below 0: our arm loses
        more, or gains less, than the comparator as the batch grows) and
        `p_above` (floats), `nan` as in `welch`.

    Raises:
        ValueError: if `confidence` is not in (0, 1).
    """
    check_probability("confidence", confidence)
    samples = [
        _floats(x) for x in (ours_small, ours_large, comp_small, comp_large)
    ]
    means = [mean(x) for x in samples]
    diff = (means[1] - means[0]) - (means[3] - means[2])
    se, df = _welch_se_df(samples)
    return _t_summary(diff, se, df, confidence)


def verdict(p_superior, p_non_inferior, p_inferior, detectable, alpha=0.05):
    """The conclusion of one comparison, from its adjusted p-values.

    The first that holds of: `"superior"` if `p_superior < alpha`;
    `"non-inferior"` if `p_non_inferior < alpha`; `"inferior"` if
    `p_inferior < alpha`; otherwise `"inconclusive (could detect >= X)"`
    with `X` the detectable difference in accuracy (a fraction, so `0.025`
    is 2.5 percentage points) to three decimals, or `n/a` where it is
    `nan`. `nan` p-values never pass.

    Args:
        p_superior: float, the (Holm-adjusted) p-value of `superiority`.
        p_non_inferior: float, the (Holm-adjusted) p-value of
            `non_inferiority`.
        p_inferior: float, the (Holm-adjusted) p-value of `inferiority`.
        detectable: float, the `detectable_difference` of the comparison.
        alpha: float in (0, 1), the level. Defaults to `0.05`.

    Returns:
        str: the verdict.

    Raises:
        ValueError: if `alpha` is not in (0, 1).
    """
    return _first_passing(
        alpha,
        detectable,
        (p_superior, "superior"),
        (p_non_inferior, "non-inferior"),
        (p_inferior, "inferior"),
    )


def direction_verdict(p_below, p_above, detectable, below, above, alpha=0.05):
    """The conclusion of a test of an effect against 0, both directions.

    `below` if `p_below < alpha`, else `above` if `p_above < alpha`, else
    `"inconclusive (could detect >= X)"` as in `verdict`. `nan` p-values
    never pass.

    Args:
        p_below: float, the (Holm-adjusted) one-sided p-value of an effect
            below 0 (`p_below` of `welch` or `interaction`).
        p_above: float, the same for an effect above 0.
        detectable: float, the `detectable` effect.
        below: str, the verdict for an effect below 0.
        above: str, the verdict for an effect above 0.
        alpha: float in (0, 1), the level. Defaults to `0.05`.

    Returns:
        str: the verdict.

    Raises:
        ValueError: if `alpha` is not in (0, 1).
    """
    return _first_passing(alpha, detectable, (p_below, below), (p_above, above))


def _first_passing(alpha, detectable, *tests):
    """The name of the first `(p, name)` of `tests` with `p < alpha`, else
    `"inconclusive (could detect >= X)"`; `nan` never passes."""
    check_probability("alpha", alpha)
    for p, name in tests:
        if p < alpha:
            return name
    size = "n/a" if math.isnan(detectable) else f"{detectable:.3f}"
    return f"inconclusive (could detect >= {size})"


def _d_se_df(a, b):
    a, b = _floats(a), _floats(b)
    se, df = _welch_se_df([a, b])
    return mean(a) - mean(b), se, df


def _welch_se_df(samples):
    """`se` of a sum of independent means and its Satterthwaite `df`."""
    if any(len(x) < 2 for x in samples):
        return math.nan, math.nan
    v = [_var(x) / len(x) for x in samples]
    se = math.sqrt(sum(v))
    if se == 0:
        return se, math.nan
    df = sum(v) ** 2 / sum(vk**2 / (len(x) - 1) for vk, x in zip(v, samples))
    return se, df


def _t_summary(diff, se, df, confidence):
    result = {
        "diff": diff,
        "se": se,
        "df": df,
        "low": math.nan,
        "high": math.nan,
        "t": math.nan,
        "p": math.nan,
        "p_below": math.nan,
        "p_above": math.nan,
    }
    if not _usable(se):
        return result
    half = float(stats.t.ppf((1 + confidence) / 2, df)) * se
    t = diff / se
    result.update(
        low=diff - half,
        high=diff + half,
        t=t,
        p=float(2 * stats.t.sf(abs(t), df)),
        p_below=float(stats.t.cdf(t, df)),
        p_above=float(stats.t.sf(t, df)),
    )
    return result


def _usable(se):
    return not math.isnan(se) and se > 0


def _floats(values):
    return [float(v) for v in values]


def mean(values):
    """The mean of a list of floats (`math.fsum`); `nan` if it is empty."""
    return math.fsum(values) / len(values) if values else math.nan


def std(values):
    """The sample standard deviation (`ddof=1`) of a list of floats;
    `nan` with fewer than two."""
    return math.sqrt(_var(values)) if len(values) > 1 else math.nan


def _var(values):
    m = mean(values)
    return math.fsum((v - m) ** 2 for v in values) / (len(values) - 1)


def check_probability(name, value):
    """Raises `ValueError` unless `0 < value < 1` (a level, a power, a
    coverage)."""
    if not 0 < value < 1:
        raise ValueError(
            f"Received an invalid value for argument `{name}`. Expected a "
            f"float strictly between 0 and 1. Received: {name}={value!r}"
        )


def _check_margin(margin):
    if not (math.isfinite(margin) and margin >= 0):
        raise ValueError(
            "Received an invalid value for argument `margin`. Expected a "
            f"finite non-negative float. Received: margin={margin!r}"
        )
