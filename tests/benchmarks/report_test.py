"""The benchmark's report: the README's tables come from the JSON files.

The committed full runs rewrite the committed README section to the letter,
so that the README is what `--report` writes, and `--report` still writes
what the README holds.
"""

import json
import shutil

import pytest

from benchmarks import report

# Nothing here depends on the Keras backend: run once (conftest.py).
pytestmark = pytest.mark.backend_independent

# The committed full runs (a local --quick run writes `-quick.json` files
# next to them, which the README does not show).
COMMITTED = [
    report.RESULTS_DIR / f"cpu-2core-{backend}.json"
    for backend in ("tensorflow", "jax", "torch")
]


def _committed_copy(tmp_path):
    results = tmp_path / "results"
    results.mkdir()
    for path in COMMITTED:
        shutil.copy(path, results / path.name)
    return results


def _section(text):
    return text[
        text.index(report.README_BEGIN) : text.index(report.README_END)
        + len(report.README_END)
    ]


def test_committed_runs_rewrite_the_committed_readme_section(tmp_path):
    results = _committed_copy(tmp_path)
    readme = tmp_path / "README.md"
    shutil.copy(report.README, readme)
    assert report.write_report(results, readme) == len(COMMITTED)
    assert readme.read_text() == report.README.read_text()


def test_report_orders_the_backends(tmp_path):
    results = report.load_results(_committed_copy(tmp_path))
    assert [r["backend"] for r in results] == ["tensorflow", "jax", "torch"]


def test_report_appends_the_section_without_markers(tmp_path):
    results = _committed_copy(tmp_path)
    readme = tmp_path / "README.md"
    readme.write_text("# Intro\n")
    report.write_report(results, readme)
    text = readme.read_text()
    assert text.startswith("# Intro\n\n" + report.README_BEGIN)
    assert text.endswith(report.README_END + "\n")
    assert _section(text) == _section(report.README.read_text())


def test_report_without_results_says_so(tmp_path):
    readme = tmp_path / "README.md"
    assert report.write_report(tmp_path, readme) == 0
    assert readme.read_text() == (
        f"{report.README_BEGIN}\n\nNo results yet.\n\n{report.README_END}\n"
    )


def test_format_tables_prints_every_model_and_target():
    result = json.loads(COMMITTED[1].read_text())
    text = report.format_tables(result)
    assert text.startswith("backend jax on cpu-2core (full, 15 rounds")
    for case in result["cases"]:
        for name in case["candidates"]:
            assert f"  {name} " in text
    assert text.count("MET   ") + text.count("MISSED") == len(result["targets"])
    # Memory rows: first step, later steps and XLA buffers, each with its
    # ratio to the baseline.
    assert "    Conv2D" in text and "1.00x" in text


def test_result_path_names_the_mode_except_full(tmp_path):
    assert report.result_path(tmp_path, "cpu-2core", "jax", "full") == (
        tmp_path / "cpu-2core-jax.json"
    )
    assert report.result_path(tmp_path, "gpu-h200", "torch", "quick") == (
        tmp_path / "gpu-h200-torch-quick.json"
    )
