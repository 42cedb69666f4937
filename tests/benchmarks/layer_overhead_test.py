"""The layer-overhead benchmark's command line: its tiny mode runs, as the
README says, and writes well-formed results; `--report` renders them.

No assertion here is about speed: the machine running the tests is not the
machine the results describe.
"""

import json
import math
import os
import subprocess
import sys

import keras
import pytest

from benchmarks import cases
from benchmarks import layer_overhead
from benchmarks import report
from benchmarks import runner
from tuning import provenance


def _strict_json(text):
    """Parses JSON, refusing NaN and infinities (not valid JSON)."""

    def refuse(name):
        raise ValueError(f"non-finite number in JSON: {name}")

    return json.loads(text, parse_constant=refuse)


def _positive_finite(value):
    return isinstance(value, float) and math.isfinite(value) and value > 0


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    """One `--smoke` run: (output directory, JSON path, parsed result)."""
    output = tmp_path_factory.mktemp("benchmark")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.layer_overhead",
            "--smoke",
            "--output",
            str(output),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env=dict(os.environ, KERAS_BACKEND=keras.backend.backend()),
        cwd=provenance.REPO_ROOT,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    paths = sorted(output.glob("*.json"))
    assert len(paths) == 1, paths
    return output, paths[0], _strict_json(paths[0].read_text())


@pytest.mark.slow
def test_smoke_run_writes_the_result_file(smoke):
    output, path, result = smoke
    backend = keras.backend.backend()
    assert path == report.result_path(
        output, result["machine"], backend, "smoke"
    )
    assert path.name == f"{result['machine']}-{backend}-smoke.json"
    assert result["machine"] == provenance.machine_name()
    assert result["backend"] == backend
    assert result["mode"] == "smoke"
    assert result["benchmark"] == "layer_overhead"
    assert result["schema_version"] == runner.SCHEMA_VERSION
    assert result["command"][1:] == [
        "-m",
        "benchmarks.layer_overhead",
        "--smoke",
        "--output",
        str(output),
    ]
    assert result["versions"]["keras"] == keras.__version__
    assert set(result["git"]) == {"commit", "dirty"}
    assert set(result["platform"]) >= {"system", "cpu_count", "accelerator"}
    assert result["settings"]["rounds"] == 1
    assert len(result["load_average"]["start"]) == 3


@pytest.mark.slow
def test_smoke_run_times_every_model_against_its_baseline(smoke):
    _, _, result = smoke
    rounds = result["settings"]["rounds"]
    families = {case["family"] for case in result["cases"]}
    assert families == {"dense", "conv"}
    for case in result["cases"]:
        expected = cases.case_named(case["name"], "smoke")
        assert case == {**case, **expected.record()}
        assert list(case["candidates"]) == list(expected.candidates)
        assert case["baseline"] == expected.baseline
        assert isinstance(case["jit_compile"], bool)
        for name, entry in case["candidates"].items():
            assert entry["params"] > 0
            assert entry["layers"][0] == "InputScale"
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
        assert list(case["memory"]) == list(cases.MODES["smoke"]["memory"])
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
def test_report_writes_tables_between_the_markers(smoke, tmp_path, capsys):
    output, _, result = smoke
    readme = tmp_path / "README.md"
    readme.write_text(
        f"# Intro\n\n{report.README_BEGIN}\nold\n{report.README_END}\n\nOutro\n"
    )
    layer_overhead.main(["--report", "--output", output, "--readme", readme])
    assert f"wrote 1 result tables into {readme}" in capsys.readouterr().out
    text = readme.read_text()
    assert text.startswith("# Intro\n") and text.endswith("\nOutro\n")
    assert "old" not in text
    assert f"### {result['backend']} on {result['machine']} (smoke)" in text
    assert "| dense_3072_1024 | `AffineLikeDense` |" in text
    assert "| conv_32x32x64_64 | `PatchNormConv2D` |" in text


@pytest.mark.parametrize(
    "argv, mode, rounds",
    [
        ([], "full", None),
        (["--quick"], "quick", None),
        (["--smoke", "--rounds", "3"], "smoke", 3),
        (["--report"], "report", None),
        (["--mode", "quick"], "quick", None),
    ],
    ids=["full", "quick", "smoke_rounds", "report", "hidden_mode"],
)
def test_parse_args_fills_the_options(argv, mode, rounds):
    options = layer_overhead.parse_args(argv)
    assert options.mode == mode
    assert options.rounds == rounds
    assert options.output == str(report.RESULTS_DIR)
    assert options.readme == str(report.README)
    assert list(options.command[len(options.command) - len(argv) :]) == argv


def test_parse_args_refuses_no_rounds(capsys):
    with pytest.raises(SystemExit) as info:
        layer_overhead.parse_args(["--rounds", "0"])
    assert info.value.code == 2
    assert "--rounds must be >= 1. Received: 0" in capsys.readouterr().err


def test_parse_args_refuses_two_modes(capsys):
    with pytest.raises(SystemExit) as info:
        layer_overhead.parse_args(["--quick", "--report"])
    assert info.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err


def test_provenance_comes_from_the_shared_module(monkeypatch):
    monkeypatch.setattr(provenance, "git_state", lambda: ("abc123", True))
    origin = runner.provenance()
    assert origin["git"] == {"commit": "abc123", "dirty": True}
    assert origin["versions"] == provenance.library_versions()
    assert origin["platform"] == provenance.machine()
    assert origin["machine"] == provenance.machine_name()
