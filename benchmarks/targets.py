"""The benchmark's targets, and their verdicts on a run.

A target bounds the median per-round ratio of a candidate's step time to a
reference's (both ran in the same rounds), on some cases, for the training
step and for inference separately.
"""

import dataclasses
import statistics

from benchmarks.timing import PHASES

_DENSE = ("dense_3072_1024", "dense_512_512")
_CONV = ("conv_32x32x64_64", "conv_16x16x128_128")


@dataclasses.dataclass(frozen=True)
class Target:
    """`candidate / reference` (median per-round ratio) `bound` `threshold`.

    Attributes:
        candidate: the name of the candidate judged.
        reference: the name of the candidate it is compared to.
        bound: `"<="` or `">="`.
        threshold: float.
        cases: tuple of the case names it applies to.
        text: what it checks, in words (the report's first column).
    """

    candidate: str
    reference: str
    bound: str
    threshold: float
    cases: tuple
    text: str

    def met(self, ratio):
        """Whether `ratio` meets the target (bool)."""
        if self.bound == "<=":
            return ratio <= self.threshold
        return ratio >= self.threshold


TARGETS = (
    Target(
        "AffineLikeDense",
        "Dense",
        "<=",
        1.05,
        ("dense_3072_1024",),
        "AffineLikeDense <= 1.05x Dense at 3072->1024",
    ),
    Target(
        "NormLikeDense",
        "Dense",
        "<=",
        1.05,
        ("dense_3072_1024",),
        "NormLikeDense <= 1.05x Dense at 3072->1024",
    ),
    Target(
        "AffineLikeDense",
        "Dense+LayerNormalization",
        "<=",
        1.0,
        _DENSE,
        "AffineLikeDense no slower than Dense+LayerNormalization",
    ),
    Target(
        "NormLikeDense",
        "Dense+LayerNormalization",
        "<=",
        1.0,
        _DENSE,
        "NormLikeDense no slower than Dense+LayerNormalization",
    ),
    Target(
        "PatchNormConv2D",
        "Conv2D",
        "<=",
        1.10,
        _CONV,
        "PatchNormConv2D <= 1.10x Conv2D",
    ),
    Target(
        "AffineLikeConv2D",
        "Conv2D",
        "<=",
        1.10,
        _CONV,
        "AffineLikeConv2D <= 1.10x Conv2D",
    ),
    Target(
        "PatchNormConv2D",
        "Conv2D+BatchNormalization",
        "<=",
        1.0,
        _CONV,
        "PatchNormConv2D no slower than Conv2D+BatchNormalization",
    ),
    Target(
        "AffineLikeConv2D",
        "Conv2D+BatchNormalization",
        "<=",
        1.0,
        _CONV,
        "AffineLikeConv2D no slower than Conv2D+BatchNormalization",
    ),
    Target(
        "NaivePatchNorm(extract_patches)",
        "PatchNormConv2D",
        ">=",
        5.0,
        _CONV,
        "naive (extract_patches) PatchNorm >= 5x slower than PatchNormConv2D",
    ),
)


def _median_ratio(candidate, reference):
    return statistics.median(c / r for c, r in zip(candidate, reference))


def evaluate_targets(cases, targets=TARGETS):
    """Each target in each of its cases and phases: median ratio and verdict.

    A ratio between two non-baseline candidates is the median over rounds
    of their per-round ratio (both ran in the same rounds).

    Args:
        cases: list of the run's case records (`benchmarks.timing.run_case`);
            a target's case that is missing is left out.
        targets: the `Target`s. Defaults to `TARGETS`.

    Returns:
        list: one dict per target, case and phase: `target` (its text),
        `case`, `phase`, `candidate`, `reference`, `median_ratio`,
        `median_cpu_ratio`, `bound`, `threshold` and `met` (bool).
    """
    by_name = {case["name"]: case for case in cases}
    out = []
    for target in targets:
        for case_name in target.cases:
            case = by_name.get(case_name)
            if case is None:
                continue
            for phase in PHASES:
                cand = case["candidates"][target.candidate][phase]
                ref = case["candidates"][target.reference][phase]
                ratio = _median_ratio(
                    cand["round_times_s"], ref["round_times_s"]
                )
                out.append(
                    {
                        "target": target.text,
                        "case": case_name,
                        "phase": phase,
                        "candidate": target.candidate,
                        "reference": target.reference,
                        "median_ratio": ratio,
                        "median_cpu_ratio": _median_ratio(
                            cand["round_cpu_times_s"], ref["round_cpu_times_s"]
                        ),
                        "bound": target.bound,
                        "threshold": target.threshold,
                        "met": bool(target.met(ratio)),
                    }
                )
    return out
