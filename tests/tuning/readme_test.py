"""`tuning/README.md`'s protocol v2 results agree with the result files.

The chain is README <- `report.md` <- `trials.csv`: every table row of a
study's subsection under "Protocol v2 studies" is a line of that study's
committed `report.md`, and the committed `report.md` of every finished
bracketed study is what `tuning.report` writes from its result files now.
A rerun, a report change or a hand edit that breaks the chain fails here
until the report is rewritten and the README's rows are copied from it.
"""

import json
import re

import pytest

from keras_affine_div import _provenance
from tuning import report

TUNING = _provenance.REPO_ROOT / "tuning"
RESULTS = TUNING / "results"
V2_HEADING = "## Protocol v2 studies"


def _v2_sections():
    """`{study: [table lines]}` of the README's protocol v2 subsections."""
    text = (TUNING / "README.md").read_text()
    assert V2_HEADING in text
    section = text.split(V2_HEADING, 1)[1]
    section = re.split(r"^## ", section, maxsplit=1, flags=re.M)[0]
    studies = {}
    study = None
    for line in section.splitlines():
        heading = re.match(r"^### (\S+): ", line)
        if heading:
            study = heading.group(1)
            studies[study] = []
        elif study and line.lstrip().startswith("|"):
            studies[study].append(line.strip())
    return studies


def _finished_bracketed_studies():
    studies = []
    for summary in sorted(RESULTS.glob("*/summary.json")):
        config = json.loads(summary.read_text()).get("config") or {}
        if (config.get("search") or {}).get("tuner") == "bracket":
            studies.append(summary.parent.name)
    return studies


def test_the_v2_section_names_the_v2_studies():
    sections = _v2_sections()
    assert {
        "cifar10-mlp-v2",
        "cifar10-mlp-wide-v2",
        "cifar10-batch-size-v2",
        "cifar10-cnn-v2",
    } <= set(sections)
    for study in sections:
        assert (TUNING / "studies" / f"{study}.toml").is_file(), study


@pytest.mark.parametrize("study", sorted(_v2_sections()))
def test_readme_rows_are_lines_of_the_report(study):
    rows = _v2_sections()[study]
    path = RESULTS / study / report.REPORT_MD
    if (RESULTS / study / "summary.json").is_file():
        # A finished study's section shows its tables.
        assert rows, f"{study} is finished: its README section needs tables"
    if not rows:
        return
    lines = {line.strip() for line in path.read_text().splitlines()}
    missing = [row for row in rows if row not in lines]
    assert not missing, f"rows not in {path}: {missing}"


@pytest.mark.parametrize("study", _finished_bracketed_studies())
def test_committed_report_is_what_the_files_give(study):
    out_dir = str(RESULTS / study)
    text = report.render(*report.read_results(out_dir))
    assert text == (RESULTS / study / report.REPORT_MD).read_text()
