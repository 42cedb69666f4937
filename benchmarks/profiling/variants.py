"""Interleaved timing of rewrites of the layers (profiling, not run in CI).

The rewrites behind the numbers in benchmarks/README.md ("How the layers
keep the cost down", "Targets missed, and why"), timed with the machinery
of `layer_overhead.py` (same models, rounds and median per-round ratios)
next to `Dense`/`Conv2D`, the library layers and BatchNorm:

- `PNConv[plain|cg|cgplain]`: PatchNorm with the squared norms as
  `sum(square(x))`, as the library computes them
  (`keras_affine_div._backend.squared_norm`: on TensorFlow and PyTorch the
  one-pass norm with the custom gradient `x * 2u`), or as `sum(square(x))`
  with that custom gradient (`AffOut[...]` and
  `NormOut[...]`: the dense layers dividing the matmul's output);
- `ALConv*`, `ALNoBiasEps`, `PNStop`, `PNeps1`: rewrites of
  `AffineLikeConv2D` and `PatchNormConv2D` (see each class);
- `<model>+Scale`: a trainable per-channel scale after the model's layer.

Usage (the backend from KERAS_BACKEND):

    python benchmarks/profiling/variants.py conv --squared-norms plain,cg \
        [--extra ALConvA,ALConvB] [--cases 1] [--rounds 9]
    python benchmarks/profiling/variants.py dense --squared-norms plain,cg

`--smoke` runs the tiny shapes for one round (the tests).
"""

import argparse
import pathlib
import sys

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT))
sys.path.insert(0, str(REPO_ROOT / "benchmarks"))

import keras  # noqa: E402
import layer_overhead as lo  # noqa: E402
from keras import ops  # noqa: E402

from keras_affine_div import _backend  # noqa: E402
from keras_affine_div import layers as kad  # noqa: E402

backend = keras.backend.backend()


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


class AffOut(kad.AffineLikeDense):
    sq = "plain"

    def call(self, inputs):
        s = ops.rsqrt(SQ[self.sq](inputs, -1) + 1.0)
        out = ops.matmul(inputs, self.kernel) + self.bias
        return out * s


class NormOut(kad.NormLikeDense):
    sq = "plain"

    def call(self, inputs):
        s = ops.rsqrt(SQ[self.sq](inputs, -1) + self.epsilon)
        return ops.matmul(inputs, self.kernel) * s + self.bias


class PNConv(kad.PatchNormConv2D):
    sq = "plain"

    def call(self, inputs):
        out = self._convolution(inputs)
        sq = SQ[self.sq](inputs, -1)
        ones = ops.ones(self.kernel_size + (1, 1), dtype=inputs.dtype)
        n = ops.conv(sq, ones, strides=self.strides, padding=self.padding)
        return out * ops.rsqrt(n + self.epsilon) + self.bias


class ALConvA(kad.AffineLikeConv2D):
    sq = "plain"

    def call(self, inputs):
        out = self._convolution(inputs)
        return (out + self.bias) * self._inverse_patch_norm(inputs, 1.0)


class ALConvB(kad.AffineLikeConv2D):
    sq = "plain"

    def call(self, inputs):
        out = self._convolution(inputs)
        s = self._inverse_patch_norm(inputs, 1.0)
        return out * s + s * self.bias


class ALConvC(kad.AffineLikeConv2D):
    sq = "plain"

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


def mk(cls, sq):
    return type(f"{cls.__name__}_{sq}", (cls,), {"sq": sq})


EXTRA = {}
for sq in SQ:
    EXTRA[f"AffOut[{sq}]"] = (mk(AffOut, sq), "dense")
    EXTRA[f"NormOut[{sq}]"] = (mk(NormOut, sq), "dense")
    EXTRA[f"PNConv[{sq}]"] = (mk(PNConv, sq), "conv")

for c in (
    ALConvA,
    ALConvB,
    ALConvC,
    ALConvNoBias,
    ALConvCG,
    ALConvStop,
    PNStop,
    PNeps1,
    ALNoBiasEps,
):
    EXTRA[c.__name__] = (c, "conv")


class _Scale(keras.layers.Layer):
    """A trainable per-channel scale after the measured layer."""

    def build(self, input_shape):
        self.s = self.add_weight(shape=(input_shape[-1],), initializer="ones")

    def call(self, x):
        return x * self.s


for base in ("Conv2D", "PatchNormConv2D", "AffineLikeConv2D"):
    EXTRA[base + "+Scale"] = (base, "scale")


def build_layers(keras_, kad_, candidate, units, _library=lo.build_layers):
    if candidate in EXTRA and EXTRA[candidate][1] == "scale":
        return _library(keras_, kad_, EXTRA[candidate][0], units) + [_Scale()]
    if candidate in EXTRA:
        cls, family = EXTRA[candidate]
        if family == "conv":
            return [cls(units, kernel_size=3, padding="same")]
        return [cls(units)]
    return _library(keras_, kad_, candidate, units)


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
        help="comma-separated names of more conv rewrites",
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
    lo.build_layers = build_layers
    if args.family == "dense":
        lo.DENSE_CANDIDATES = (
            "Dense",
            "AffineLikeDense",
            "NormLikeDense",
            "Dense+LayerNormalization",
        ) + tuple(f"{n}[{s}]" for n in ("AffOut", "NormOut") for s in sqs)
    else:
        lo.CONV_CANDIDATES = (
            (
                "Conv2D",
                "PatchNormConv2D",
                "AffineLikeConv2D",
                "Conv2D+BatchNormalization",
            )
            + tuple(f"PNConv[{s}]" for s in sqs)
            + tuple(extra)
        )
    mode = "smoke" if args.smoke else "full"
    settings = dict(lo.MODES[mode], rounds=1 if args.smoke else args.rounds)
    cases = [c for c in lo.cases_for(mode) if c[1] == args.family]
    for case in cases[: args.cases]:
        record = lo.run_case(keras, kad, case, settings, lambda m: None)
        print(case[0])
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
