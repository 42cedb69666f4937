"""The layer-overhead benchmark: its tiny mode runs and writes well-formed
results, its report renders them, and its naive baselines compute PatchNorm.

No assertion here is about speed: the machine running the tests is not the
machine the results describe.
"""

import json
import math
import os
import pathlib
import subprocess
import sys

import keras
import numpy as np
import pytest

from benchmarks import layer_overhead
from keras_affine_div.layers import PatchNormConv2D

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = REPO_ROOT / "benchmarks" / "layer_overhead.py"


def _strict_json(text):
    """Parses JSON, refusing NaN and infinities (not valid JSON)."""

    def refuse(name):
        raise ValueError(f"non-finite number in JSON: {name}")

    return json.loads(text, parse_constant=refuse)


def _run(*args):
    env = dict(os.environ, KERAS_BACKEND=keras.backend.backend())
    return subprocess.run(
        [sys.executable, str(SCRIPT), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        cwd=REPO_ROOT,
    )


def _positive_finite(value):
    return isinstance(value, float) and math.isfinite(value) and value > 0


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    """One `--smoke` run: (output directory, JSON path, parsed result)."""
    output = tmp_path_factory.mktemp("benchmark")
    proc = _run("--smoke", "--output", output)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    paths = sorted(output.glob("*.json"))
    assert len(paths) == 1, paths
    return output, paths[0], _strict_json(paths[0].read_text())


@pytest.mark.slow
def test_smoke_run_writes_the_result_file(smoke):
    _, path, result = smoke
    backend = keras.backend.backend()
    assert path.name == f"{result['machine']}-{backend}-smoke.json"
    assert result["backend"] == backend
    assert result["mode"] == "smoke"
    assert result["benchmark"] == "layer_overhead"
    assert result["schema_version"] == layer_overhead.SCHEMA_VERSION
    assert result["versions"]["keras"] == keras.__version__
    assert set(result["git"]) == {"commit", "dirty"}
    assert result["settings"]["rounds"] == 1
    assert len(result["load_average"]["start"]) == 3


@pytest.mark.slow
def test_smoke_run_times_every_model_against_its_baseline(smoke):
    _, _, result = smoke
    rounds = result["settings"]["rounds"]
    families = {case["family"] for case in result["cases"]}
    assert families == {"dense", "conv"}
    for case in result["cases"]:
        expected = layer_overhead.candidates_of(case["family"])
        assert list(case["candidates"]) == list(expected)
        assert case["baseline"] == expected[0]
        assert isinstance(case["jit_compile"], bool)
        for name, entry in case["candidates"].items():
            assert entry["params"] > 0
            assert entry["layers"]
            for phase in ("train", "inference"):
                record = entry[phase]
                assert len(record["round_times_s"]) == rounds
                assert len(record["ratios"]) == rounds
                assert record["steps_per_round"] >= 1
                values = (
                    record["round_times_s"]
                    + record["ratios"]
                    + record["cpu_ratios"]
                    + record["ratio_quartiles"]
                    + [
                        record["median_ratio"],
                        record["median_cpu_ratio"],
                        record["median_time_s"],
                    ]
                )
                assert all(_positive_finite(v) for v in values), (
                    name,
                    phase,
                    record,
                )
        baseline = case["candidates"][case["baseline"]]
        assert baseline["train"]["median_ratio"] == 1.0


@pytest.mark.slow
def test_smoke_run_measures_conv_memory_and_targets(smoke):
    _, _, result = smoke
    conv = [case for case in result["cases"] if case["family"] == "conv"]
    assert conv and all(case.get("memory") for case in conv)
    for case in conv:
        for entry in case["memory"].values():
            for key in (
                "first_step_peak_increase_mib",
                "step_peak_increase_mib",
            ):
                assert math.isfinite(entry[key]) and entry[key] >= 0, entry
            if keras.backend.backend() == "jax":
                assert entry["xla_total_mib"] > 0
    assert result["targets"]
    for target in result["targets"]:
        assert isinstance(target["met"], bool)
        assert _positive_finite(target["median_ratio"])
        assert target["bound"] in ("<=", ">=")


@pytest.mark.slow
def test_report_writes_tables_between_the_markers(smoke, tmp_path):
    output, _, result = smoke
    readme = tmp_path / "README.md"
    readme.write_text(
        "# Intro\n\n"
        f"{layer_overhead.README_BEGIN}\nold\n{layer_overhead.README_END}\n"
        "\nOutro\n"
    )
    proc = _run("--report", "--output", output, "--readme", readme)
    assert proc.returncode == 0, proc.stderr[-3000:]
    text = readme.read_text()
    assert text.startswith("# Intro\n") and text.endswith("\nOutro\n")
    assert "old" not in text
    assert f"### {result['backend']} on {result['machine']} (smoke)" in text
    assert "| dense_3072_1024 | `AffineLikeDense` |" in text


@pytest.mark.parametrize("kind", ["extract_patches", "slices"])
@pytest.mark.parametrize("padding", ["same", "valid"])
def test_naive_patch_norm_computes_patch_norm_conv2d(kind, padding):
    naive_cls = layer_overhead.naive_patch_norm_layers(keras)[kind]
    x = np.random.default_rng(0).normal(size=(2, 7, 6, 3)).astype("float32")
    ours = PatchNormConv2D(4, 3, padding=padding)
    naive = naive_cls(4, 3, padding=padding)
    expected = ours(x)
    naive(x)
    naive.kernel.assign(ours.kernel)
    naive.bias.assign(keras.random.normal((4,), seed=1))
    ours.bias.assign(naive.bias)
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(naive(x)),
        keras.ops.convert_to_numpy(ours(x)),
        rtol=1e-4,
        atol=1e-5,
    )
    assert tuple(expected.shape) == tuple(naive(x).shape)


def test_git_commit_is_modified_only_by_code(tmp_path, monkeypatch):
    def git(*args):
        subprocess.run(
            ["git", *args], cwd=tmp_path, check=True, capture_output=True
        )

    git("init", "-q")
    for path in (
        "keras_affine_div/core.py",
        "benchmarks/bench.py",
        "benchmarks/README.md",
        "benchmarks/results/run.json",
    ):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("original\n")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "c")
    monkeypatch.setattr(layer_overhead, "REPO_ROOT", tmp_path)
    assert layer_overhead.git_commit()["dirty"] is False
    # A run rewrites results, and the README may be edited meanwhile.
    (tmp_path / "benchmarks/results/run.json").write_text("new\n")
    (tmp_path / "benchmarks/README.md").write_text("new\n")
    assert layer_overhead.git_commit()["dirty"] is False
    for path in ("benchmarks/bench.py", "keras_affine_div/core.py"):
        (tmp_path / path).write_text("changed\n")
        assert layer_overhead.git_commit()["dirty"] is True
        git("checkout", "--", path)
