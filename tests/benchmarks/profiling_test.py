"""The profiling scripts behind benchmarks/README.md run and print every row.

Smoke tests only: no assertion is about speed. The scripts run as the
README says, `python -m benchmarks.profiling.<script>` from the root.
"""

import os
import subprocess
import sys

import keras
import pytest

from benchmarks import cases
from benchmarks.profiling import variants
from tuning import provenance

# The variant timings run on one backend: the rewrites and the command line
# do not depend on it (the benchmark itself runs on each, in
# tests/benchmarks/layer_overhead_test.py).
ONE_BACKEND = pytest.mark.requires_backend("jax")


def _run(script, *args):
    return subprocess.run(
        [sys.executable, "-m", f"benchmarks.profiling.{script}", *args],
        capture_output=True,
        text=True,
        timeout=600,
        env=dict(os.environ, KERAS_BACKEND=keras.backend.backend()),
        cwd=provenance.REPO_ROOT,
    )


def _output(script, *args):
    result = _run(script, *args)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


@ONE_BACKEND
def test_variants_time_every_rewrite():
    out = _output(
        "variants", "conv", "--smoke", "--extra", ",".join(variants.EXTRA)
    )
    for name in [
        "Conv2D",
        "PatchNormConv2D",
        "PNConv[plain]",
        "PNConv[cg]",
        *variants.EXTRA,
    ]:
        assert f"  {name} " in out, name
    out = _output("variants", "dense", "--smoke")
    for name in ["AffOut[cg]", "NormOut[plain]", "NormOut[cgplain]"]:
        assert f"  {name} " in out, name


@ONE_BACKEND
def test_variants_rejects_an_unknown_rewrite():
    result = _run("variants", "conv", "--extra", "NoSuchLayer")
    assert result.returncode == 2
    assert "unknown variants: ['NoSuchLayer']" in result.stderr


def test_variants_register_their_rewrites_beside_the_benchmarks():
    for name in cases.CANDIDATES.names():
        assert name in variants.REGISTRY
    for name in variants.EXTRA:
        assert name in variants.REGISTRY and name not in cases.CANDIDATES
    conv = variants.variant_cases("conv", ["plain"], ["PNStop"], "smoke")
    assert [case.name for case in conv] == ["conv_32x32x64_64"]
    assert conv[0].candidates[0] == "Conv2D"
    assert conv[0].candidates[-2:] == ("PNConv[plain]", "PNStop")
    for candidate in conv[0].candidates:
        assert candidate in variants.REGISTRY, candidate


@pytest.mark.requires_backend("tensorflow")
def test_tf_components_prints_every_component():
    out = _output("tf_components", "--calls", "1")
    for name in [
        "conv 32x32x64->64",
        "multiply + bias add under XLA",
        "PatchNorm forward, tail under XLA",
        "x * (2u)",
    ]:
        assert f"  {name} " in out, name


@pytest.mark.requires_backend("torch")
def test_torch_profile_prints_a_table_per_model():
    out = _output("torch_profile", "--steps", "1")
    assert "===== Conv2D, 1 steps" in out
    assert "===== PatchNormConv2D, 1 steps" in out
    assert "aten::convolution_backward" in out
