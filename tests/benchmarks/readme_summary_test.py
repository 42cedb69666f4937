"""The cost table of the top-level README agrees with the committed runs.

Its ranges are over the committed full runs,
`benchmarks/results/cpu-2core-{tensorflow,jax,torch}.json` (every backend
and both shapes of a family); a rerun that changes them fails here until
the README is updated.
"""

import json
import re

import pytest

from benchmarks import report
from tuning import provenance

# Nothing here depends on the Keras backend: run once (conftest.py).
pytestmark = pytest.mark.backend_independent

# The committed full runs (a local --quick run writes `-quick.json` files
# next to them, which the README does not describe).
RESULTS = [
    report.RESULTS_DIR / f"cpu-2core-{backend}.json"
    for backend in ("tensorflow", "jax", "torch")
]

# README row label -> (candidates, reference or None for the baseline).
ROWS = {
    "`AffineLikeDense`, `NormLikeDense`": (
        ("AffineLikeDense", "NormLikeDense"),
        None,
    ),
    "`Dense`+`LayerNormalization`": (("Dense+LayerNormalization",), None),
    "`PatchNormConv2D`, `AffineLikeConv2D`": (
        ("PatchNormConv2D", "AffineLikeConv2D"),
        None,
    ),
    "`Conv2D`+`BatchNormalization`": (("Conv2D+BatchNormalization",), None),
    "a naive PatchNorm built from extracted patches, against "
    "`PatchNormConv2D`": (
        ("NaivePatchNorm(extract_patches)",),
        "PatchNormConv2D",
    ),
}


def _ranges(candidates, reference):
    values = {"train": [], "inference": []}
    for path in RESULTS:
        result = json.loads(path.read_text())
        if reference is None:
            for case in result["cases"]:
                for name in candidates:
                    if name in case["candidates"]:
                        for phase in values:
                            values[phase].append(
                                case["candidates"][name][phase]["median_ratio"]
                            )
        else:
            for target in result["targets"]:
                if (
                    target["candidate"] in candidates
                    and target["reference"] == reference
                ):
                    values[target["phase"]].append(target["median_ratio"])
    return values


def _format(values, places):
    return f"{min(values):.{places}f}x to {max(values):.{places}f}x"


def test_readme_cost_table_matches_committed_results():
    for path in RESULTS:
        assert json.loads(path.read_text())["mode"] == "full", path
    readme = (provenance.REPO_ROOT / "README.md").read_text()
    for label, (candidates, reference) in ROWS.items():
        match = re.search(
            r"^\| " + re.escape(label) + r" \| (.+?) \| (.+?) \|$",
            readme,
            re.MULTILINE,
        )
        assert match, label
        values = _ranges(candidates, reference)
        places = 1 if reference else 2
        assert match.group(1) == _format(values["train"], places), label
        assert match.group(2) == _format(values["inference"], places), label


def test_benchmarks_readme_before_after_table_matches_the_two_runs():
    results = report.RESULTS_DIR
    before = json.loads(
        (results / "archive" / "cpu-2core-tensorflow-3223dd0.json").read_text()
    )
    after = json.loads((results / "cpu-2core-tensorflow.json").read_text())
    assert before["git"]["commit"].startswith("3223dd0")
    assert after["git"]["commit"].startswith("8198b04")
    readme = report.README.read_text()
    rows = re.findall(
        r"^\| (\w+) \| `(\w+)` \| ([\d.]+)x \| ([\d.]+)x \| ([\d.]+)x \| "
        r"([\d.]+)x \|$",
        readme,
        re.MULTILINE,
    )
    assert len(rows) == 8
    for case_name, layer, *cells in rows:
        expected = []
        for phase in ("train", "inference"):
            for result in (before, after):
                case = next(
                    c for c in result["cases"] if c["name"] == case_name
                )
                ratio = case["candidates"][layer][phase]["median_ratio"]
                expected.append(f"{ratio:.2f}")
        assert cells == expected, (case_name, layer)
