"""Pooling one comparison's differences over conditions: a random-effects
meta-analysis (DerSimonian–Laird, with the Hartung–Knapp interval).

`tuning.pooled` gives each (group, arm, comparator) of a study the
average of its per-condition Welch differences and how much the
conditions disagree; the per-condition tests are `tuning.statistics`'.
"""

import math

from scipy import stats

from tuning import statistics


def random_effects(diffs, ses, confidence=0.95):
    """Pools independent differences across conditions, with heterogeneity.

    A random-effects meta-analysis of `k` independent estimates `d_i` with
    standard errors `se_i` (one (our arm, comparator) difference per
    condition, from separately trained seeds):

    - fixed effect: weights `w_i = 1 / se_i**2`, `d_F = sum(w d) / sum(w)`;
    - heterogeneity: Cochran's `Q = sum(w (d - d_F)**2)` on `k - 1` degrees
      of freedom with `p_Q = chi2.sf(Q, k - 1)`, `I2 = max(0, (Q - (k - 1))
      / Q)` (the share of the spread between conditions not explained by
      the seeds' noise), and the DerSimonian–Laird between-condition
      variance `tau2 = max(0, (Q - (k - 1)) / (sum(w) - sum(w**2) /
      sum(w)))`;
    - random effects: weights `w*_i = 1 / (se_i**2 + tau2)`, `d_R = sum(w*
      d) / sum(w*)`, with the Hartung–Knapp interval `d_R -+ t.ppf((1 +
      confidence) / 2, k - 1) * se_R`, `se_R = sqrt(max(1, q) / sum(w*))`,
      `q = sum(w* (d - d_R)**2) / (k - 1)` (never narrower than the
      normal-theory interval, which the `max(1, q)` ensures), and its
      two-sided p-value.

    `d_R` estimates the average difference over conditions like these; with
    a large `I2` the conditions disagree, and the average says less than
    the per-condition rows.

    Args:
        diffs: list of floats, one difference per condition.
        ses: list of floats, their standard errors (each finite and > 0).
        confidence: float in (0, 1), the coverage of the interval. Defaults
            to `0.95`.

    Returns:
        dict: `k` (int), `fixed`, `diff` (the random-effects estimate),
        `se`, `low`, `high`, `p`, `q`, `p_heterogeneity`, `i2`, `tau2`
        (floats). With `k < 2` everything but `k`, `fixed` and `diff` is
        `nan`.

    Raises:
        ValueError: if `confidence` is not in (0, 1), the lists differ in
            length, or a standard error is not finite and positive.
    """
    statistics.check_probability("confidence", confidence)
    d, se = [float(x) for x in diffs], [float(x) for x in ses]
    if len(d) != len(se):
        raise ValueError(
            "Expected as many standard errors as differences. Received: "
            f"len(diffs)={len(d)}, len(ses)={len(se)}"
        )
    if not all(math.isfinite(s) and s > 0 for s in se):
        raise ValueError(
            f"Expected finite, positive standard errors. Received: ses={ses!r}"
        )
    k = len(d)
    nan = math.nan
    result = dict(
        k=k, fixed=nan, diff=nan, se=nan, low=nan, high=nan, p=nan,
        q=nan, p_heterogeneity=nan, i2=nan, tau2=nan,
    )  # fmt: skip
    if k == 0:
        return result
    w = [1 / s**2 for s in se]
    fixed = math.fsum(wi * di for wi, di in zip(w, d)) / math.fsum(w)
    result.update(fixed=fixed, diff=fixed if k == 1 else nan)
    if k < 2:
        return result
    q = math.fsum(wi * (di - fixed) ** 2 for wi, di in zip(w, d))
    c = math.fsum(w) - math.fsum(wi**2 for wi in w) / math.fsum(w)
    tau2 = max(0.0, (q - (k - 1)) / c)
    w_r = [1 / (s**2 + tau2) for s in se]
    d_r = math.fsum(wi * di for wi, di in zip(w_r, d)) / math.fsum(w_r)
    q_hk = math.fsum(wi * (di - d_r) ** 2 for wi, di in zip(w_r, d)) / (k - 1)
    se_r = math.sqrt(max(1.0, q_hk) / math.fsum(w_r))
    half = float(stats.t.ppf((1 + confidence) / 2, k - 1)) * se_r
    result.update(
        diff=d_r,
        se=se_r,
        low=d_r - half,
        high=d_r + half,
        p=float(2 * stats.t.sf(abs(d_r / se_r), k - 1)),
        q=q,
        p_heterogeneity=float(stats.chi2.sf(q, k - 1)),
        i2=max(0.0, (q - (k - 1)) / q) if q > 0 else 0.0,
        tau2=tau2,
    )
    return result
