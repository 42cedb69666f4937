"""The profiling scripts behind benchmarks/README.md run and print every row.

Smoke tests only: no assertion is about speed.
"""

import os
import pathlib
import subprocess
import sys

import keras
import pytest

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
PROFILING = REPO_ROOT / "benchmarks" / "profiling"


def _run(script, *args):
    env = dict(os.environ, KERAS_BACKEND=keras.backend.backend())
    result = subprocess.run(
        [sys.executable, str(PROFILING / script), *args],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        cwd=REPO_ROOT,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def test_variants_time_every_rewrite():
    from benchmarks.profiling import variants

    conv_extra = sorted(
        name
        for name, (_, kind) in variants.EXTRA.items()
        if kind in ("conv", "scale") and not name.startswith("PNConv")
    )
    out = _run(
        "variants.py", "conv", "--smoke", "--extra", ",".join(conv_extra)
    )
    for name in [
        "Conv2D",
        "PatchNormConv2D",
        "PNConv[plain]",
        "PNConv[cg]",
        *conv_extra,
    ]:
        assert f"  {name} " in out, name
    out = _run("variants.py", "dense", "--smoke")
    for name in ["AffOut[cg]", "NormOut[plain]", "NormOut[cgplain]"]:
        assert f"  {name} " in out, name


def test_variants_rejects_an_unknown_rewrite():
    env = dict(os.environ, KERAS_BACKEND=keras.backend.backend())
    result = subprocess.run(
        [
            sys.executable,
            str(PROFILING / "variants.py"),
            "conv",
            "--extra",
            "NoSuchLayer",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        cwd=REPO_ROOT,
    )
    assert result.returncode == 2
    assert "unknown variants: ['NoSuchLayer']" in result.stderr


@pytest.mark.requires_backend("tensorflow")
def test_tf_components_prints_every_component():
    out = _run("tf_components.py", "--calls", "1")
    for name in [
        "conv 32x32x64->64",
        "multiply + bias add under XLA",
        "PatchNorm forward, tail under XLA",
        "x * (2u)",
    ]:
        assert f"  {name} " in out, name


@pytest.mark.requires_backend("torch")
def test_torch_profile_prints_a_table_per_model():
    out = _run("torch_profile.py", "--steps", "1")
    assert "===== Conv2D, 1 steps" in out
    assert "===== PatchNormConv2D, 1 steps" in out
    assert "aten::convolution_backward" in out
