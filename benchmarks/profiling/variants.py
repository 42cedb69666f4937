"""Interleaved timing of rewrites of the layers (profiling, not run in CI).

The rewrites behind the numbers in benchmarks/README.md ("How the layers
keep the cost down", "Targets missed, and why"), timed with the
benchmark's own machinery (`benchmarks.timing.run_case`: same models,
rounds and median per-round ratios) next to `Dense`/`Conv2D`, the library
layers and BatchNorm. Each rewrite is a candidate of `REGISTRY`, a copy of
`benchmarks.cases.CANDIDATES` with the rewrites registered:

- `PNConv[plain|cg|cgplain]`: PatchNorm with the squared norms as
  `sum(square(x))`, as the library computes them
  (`keras_affine_div._backend.squared_norm`: on TensorFlow and PyTorch the
  one-pass norm with the custom gradient `x * 2u`), or as `sum(square(x))`
  with that custom gradient (`AffOut[...]` and
  `NormOut[...]`: the dense layers dividing the matmul's output);
- `ALConv*`, `ALNoBiasEps`, `PNStop`, `PNeps1`: rewrites of
  `AffineLikeConv2D` and `PatchNormConv2D` (see each class);
- `<model>+Scale`: a trainable per-channel scale after the model's layer.

Usage, from the repository root (the backend from KERAS_BACKEND):

    python -m benchmarks.profiling.variants conv --squared-norms plain,cg \
        [--extra ALConvA,ALConvB] [--cases 1] [--rounds 9]
    python -m benchmarks.profiling.variants dense --squared-norms plain,cg

`--smoke` runs the tiny shapes for one round (the tests).
"""

import argparse
import dataclasses
import sys

import keras
from keras import ops

from benchmarks import cases as bench_cases
from benchmarks import timing
from keras_affine_div import _backend
from keras_affine_div import layers as kad


def sqnorm_plain(x, axis):
    return ops.sum(ops.square(x), axis=axis, keepdims=True)


def _gradient_2xu(x):
    """The exact gradient of `sum(x**2, axis=-1)`: `x * 2u`."""

    def grad(*args, upstream=None):
        if upstream is None:
            (upstream,) = args
        return x * (2.0 * upstream)

    return grad


@ops.custom_gradient
def _sqnorm_last_plain_fwd(x):
    return ops.sum(ops.square(x), axis=-1, keepdims=True), _gradient_2xu(x)


SQ = {
    "plain": sqnorm_plain,
    "cg": _backend.squared_norm,
    "cgplain": lambda x, axis: _sqnorm_last_plain_fwd(x),
}


class _ChosenSquaredNorms:
    """A rewrite that computes its squared norms as `SQ[squared_norms]`."""

    def __init__(self, *args, squared_norms="plain", **kwargs):
        super().__init__(*args, **kwargs)
        self.squared_norms = squared_norms

    def get_config(self):
        return {**super().get_config(), "squared_norms": self.squared_norms}

    def _chosen_squared_norms(self, inputs):
        return SQ[self.squared_norms](inputs, -1)


class AffOut(_ChosenSquaredNorms, kad.AffineLikeDense):
    def call(self, inputs):
        s = ops.rsqrt(self._chosen_squared_norms(inputs) + 1.0)
        out = ops.matmul(inputs, self.kernel) + self.bias
        return out * s


class NormOut(_ChosenSquaredNorms, kad.NormLikeDense):
    def call(self, inputs):
        s = ops.rsqrt(self._chosen_squared_norms(inputs) + self.epsilon)
        return ops.matmul(inputs, self.kernel) * s + self.bias


class PNConv(_ChosenSquaredNorms, kad.PatchNormConv2D):
    def call(self, inputs):
        out = self._convolution(inputs)
        sq = self._chosen_squared_norms(inputs)
        ones = ops.ones(self.kernel_size + (1, 1), dtype=inputs.dtype)
        n = ops.conv(sq, ones, strides=self.strides, padding=self.padding)
        return out * ops.rsqrt(n + self.epsilon) + self.bias


class ALConvA(kad.AffineLikeConv2D):
    def call(self, inputs):
        out = self._convolution(inputs)
        return (out + self.bias) * self._inverse_patch_norm(inputs, 1.0)


class ALConvB(kad.AffineLikeConv2D):
    def call(self, inputs):
        out = self._convolution(inputs)
        s = self._inverse_patch_norm(inputs, 1.0)
        return out * s + s * self.bias


class ALConvC(kad.AffineLikeConv2D):
    def call(self, inputs):
        out = ops.conv(inputs, self.kernel, padding="same") + self.bias
        return out * self._inverse_patch_norm(inputs, 1.0)


class ALConvNoBias(kad.AffineLikeConv2D):
    def call(self, inputs):
        return self._convolution(inputs) * self._inverse_patch_norm(inputs, 1.0)


class ALConvCG(kad.AffineLikeConv2D):
    def call(self, inputs):
        out = self._convolution(inputs) + self.bias
        sq = _sqnorm_last_plain_fwd(inputs)
        ones = ops.ones(self.kernel_size + (1, 1), dtype=inputs.dtype)
        n = ops.conv(sq, ones, strides=self.strides, padding=self.padding)
        return out * ops.rsqrt(n + 1.0)


class ALConvStop(kad.AffineLikeConv2D):
    """bias gradient path isolated: s without gradient (timing only)."""

    def call(self, inputs):
        out = self._convolution(inputs) + self.bias
        return out * ops.stop_gradient(self._inverse_patch_norm(inputs, 1.0))


class PNStop(kad.PatchNormConv2D):
    def call(self, inputs):
        out = self._convolution(inputs)
        return (
            out
            * ops.stop_gradient(self._inverse_patch_norm(inputs, self.epsilon))
            + self.bias
        )


class PNeps1(kad.PatchNormConv2D):
    def __init__(self, *a, **k):
        super().__init__(*a, epsilon=1.0, **k)


class ALNoBiasEps(kad.AffineLikeConv2D):
    def call(self, inputs):
        return self._convolution(inputs) * self._inverse_patch_norm(
            inputs, 1e-3
        )


class _Scale(keras.layers.Layer):
    """A trainable per-channel scale after the measured layer."""

    def build(self, input_shape):
        self.s = self.add_weight(shape=(input_shape[-1],), initializer="ones")

    def call(self, x):
        return x * self.s


# The conv rewrites of this module, and the benchmark's conv candidates
# that get a `_Scale` after them: the names `--extra` may give (`EXTRA`).
CONV_REWRITES = (
    ALConvA,
    ALConvB,
    ALConvC,
    ALConvNoBias,
    ALConvCG,
    ALConvStop,
    PNStop,
    PNeps1,
    ALNoBiasEps,
)
SCALED = ("Conv2D", "PatchNormConv2D", "AffineLikeConv2D")
EXTRA = tuple(cls.__name__ for cls in CONV_REWRITES) + tuple(
    f"{base}+Scale" for base in SCALED
)


def _layer(cls, **kwargs):
    """A factory of one `cls(units, **kwargs)` layer."""
    return lambda units: [cls(units, **kwargs)]


def _scaled(base):
    """A factory of the benchmark's candidate `base`, then `_Scale`."""
    return lambda units: bench_cases.CANDIDATES.layers(base, units) + [_Scale()]


def _registry():
    """The benchmark's candidates and every rewrite (a `Registry`)."""
    registry = bench_cases.CANDIDATES.copy()
    conv = bench_cases.CONV
    for sq in SQ:
        registry.register(f"AffOut[{sq}]", _layer(AffOut, squared_norms=sq))
        registry.register(f"NormOut[{sq}]", _layer(NormOut, squared_norms=sq))
        registry.register(
            f"PNConv[{sq}]", _layer(PNConv, squared_norms=sq, **conv)
        )
    for cls in CONV_REWRITES:
        registry.register(cls.__name__, _layer(cls, **conv))
    for base in SCALED:
        registry.register(f"{base}+Scale", _scaled(base))
    return registry


REGISTRY = _registry()

# The candidates of each family's cases, before the chosen rewrites.
BASE_CANDIDATES = {
    "dense": (
        "Dense",
        "AffineLikeDense",
        "NormLikeDense",
        "Dense+LayerNormalization",
    ),
    "conv": (
        "Conv2D",
        "PatchNormConv2D",
        "AffineLikeConv2D",
        "Conv2D+BatchNormalization",
    ),
}


def variant_cases(family, squared_norms, extra, mode="full"):
    """The benchmark's cases of `family`, with the rewrites as candidates.

    Args:
        family: `"dense"` or `"conv"`.
        squared_norms: names of `SQ`, the squared norms of the `AffOut` and
            `NormOut` rewrites (dense) or of `PNConv` (conv).
        extra: names of `EXTRA` (conv only).
        mode: the mode whose shapes are used. Defaults to `"full"`.

    Returns:
        list: the `benchmarks.cases.Case`s, every candidate in `REGISTRY`.
    """
    if family == "dense":
        rewrites = [
            f"{n}[{s}]" for n in ("AffOut", "NormOut") for s in squared_norms
        ]
    else:
        rewrites = [f"PNConv[{s}]" for s in squared_norms] + list(extra)
    candidates = BASE_CANDIDATES[family] + tuple(rewrites)
    return [
        dataclasses.replace(case, candidates=candidates)
        for case in bench_cases.cases_for(mode)
        if case.family == family
    ]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("family", choices=("dense", "conv"))
    parser.add_argument(
        "--squared-norms",
        default=",".join(SQ),
        help="comma-separated, of " + ", ".join(SQ),
    )
    parser.add_argument(
        "--extra",
        default="",
        help="comma-separated names of more conv rewrites: " + ", ".join(EXTRA),
    )
    parser.add_argument(
        "--cases",
        type=int,
        default=2,
        help="how many cases of the family, in order",
    )
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args(argv)
    sqs = [s for s in args.squared_norms.split(",") if s]
    extra = [e for e in args.extra.split(",") if e]
    unknown = sorted(set(sqs) - set(SQ)) + sorted(set(extra) - set(EXTRA))
    if unknown:
        parser.error(f"unknown variants: {unknown}")
    mode = "smoke" if args.smoke else "full"
    settings = dict(
        bench_cases.MODES[mode], rounds=1 if args.smoke else args.rounds
    )
    cases = variant_cases(args.family, sqs, extra, mode)
    for case in cases[: args.cases]:
        record = timing.run_case(case, settings, lambda m: None, REGISTRY)
        print(case.name)
        for name, e in record["candidates"].items():
            t, i = e["train"], e["inference"]
            print(
                f"  {name:28s} train {t['median_ratio']:.3f} "
                f"({t['median_time_s'] * 1e3:.1f} ms)  infer "
                f"{i['median_ratio']:.3f} "
                f"({i['median_time_s'] * 1e3:.1f} ms)"
            )
        sys.stdout.flush()


if __name__ == "__main__":
    main()
