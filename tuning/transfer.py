"""Claim (d)'s endpoints: where each arm's learning-rate curve peaks, how
wide its basin is, and what tuning at the small end costs at the large.

The rules are those declared in
`tuning/results/cifar10-mlp-transfer-width/README.md`:

- `basin(points, tolerance)`: the contiguous grid rates around the best
  whose validation accuracy is within `tolerance` of it, as decades,
  censored where the basin reaches the last rate tried on a side;
- `peak(rates, means, step)`: the maximum of the parabola in
  `log10(rate)` through three points (the best of them where it opens
  upwards), no further than `step` decades beyond them;
- `drift_interval(small, large, step, ...)`: `log2` of the ratio of the
  two ends' peaks, with percentile bootstrap bounds resampling the seeds
  within each point.
"""

import dataclasses
import math

import numpy as np

STATUS_OK = "ok"


@dataclasses.dataclass(frozen=True)
class Basin:
    low: float
    high: float
    censored_low: bool
    censored_high: bool

    @property
    def decades(self):
        return math.log10(self.high / self.low)

    def __str__(self):
        censored = self.censored_low or self.censored_high
        return f"{'>=' if censored else ''}{self.decades:.2f}"


def basin(points, tolerance=0.01):
    """The basin of a curve: `points` are `(rate, accuracy or None)`,
    `None` for a run that diverged or did not learn."""
    points = sorted(points)
    scored = [(r, a) for r, a in points if a is not None]
    if not scored:
        raise ValueError("Expected at least one run that learned.")
    best_rate, best = max(scored, key=lambda p: (p[1], -p[0]))
    i = next(k for k, (r, _) in enumerate(points) if r == best_rate)
    lo = hi = i
    while lo > 0 and _inside(points[lo - 1], best, tolerance):
        lo -= 1
    while hi < len(points) - 1 and _inside(points[hi + 1], best, tolerance):
        hi += 1
    return Basin(points[lo][0], points[hi][0], lo == 0, hi == len(points) - 1)


def _inside(point, best, tolerance):
    return point[1] is not None and point[1] >= best - tolerance - 1e-12


def peak(rates, means, step):
    """The rate where the parabola in `log10(rate)` through the three
    points `(rates[k], means[k])` peaks, clipped to `step` decades beyond
    the outer ones; the best point's rate where it opens upwards."""
    x = np.log10(np.asarray(rates, "float64"))
    y = np.asarray(means, "float64")
    if x.shape != (3,) or y.shape != (3,):
        raise ValueError("Expected three rates and three means.")
    a, b, _ = np.polyfit(x, y, 2)
    if not a < 0:
        return float(rates[int(np.argmax(y))])
    vertex = -b / (2 * a)
    vertex = min(max(vertex, x.min() - step), x.max() + step)
    return float(10**vertex)


def drift_interval(small, large, step, resamples=2000, seed=0, level=0.95):
    """`log2(peak(large) / peak(small))` and its bootstrap interval.

    `small` and `large` map each of three rates to the validation
    accuracies of its seeds.
    """
    rng = np.random.default_rng(seed)

    def estimate(cell, draw):
        rates = sorted(cell)
        means = [np.mean(draw(np.asarray(cell[r], "float64"))) for r in rates]
        return peak(rates, means, step)

    def same(values):
        return values

    def resample(values):
        return values[rng.integers(0, len(values), len(values))]

    point = math.log2(estimate(large, same) / estimate(small, same))
    draws = np.array(
        [
            math.log2(estimate(large, resample) / estimate(small, resample))
            for _ in range(resamples)
        ]
    )
    tail = (1 - level) / 2
    low, high = np.quantile(draws, [tail, 1 - tail])
    return point, float(low), float(high)


def verdict(low, high, bound=1.0):
    """`transfers` inside [-bound, bound], `drifts` wholly outside."""
    if -bound <= low and high <= bound:
        return "transfers"
    if high < -bound or low > bound:
        return "drifts"
    return "inconclusive"
