"""`tuning/README.md`'s protocol v2 results agree with the result files.

The chain is README <- `report.md` <- `trials.csv`: every table row of a
study's subsection under "Protocol v2 studies" is a line of that study's
committed `report.md`, `divergence.md` or pooled view (`pooled*.md`);
the committed `report.md` of every finished bracketed study is what
`tuning.report` writes from its result files now, every v2 study's
`divergence.md` what `tuning.divergence` renders from its
`divergence.csv`, and every pooled view what the `tuning.pooled` command
it names writes now. A rerun, a report change or a hand edit that breaks
the chain fails here until the file is rewritten and the README's rows
are copied from it.
"""

import json
import re

import pytest

from tuning import divergence
from tuning import pooled
from tuning import provenance
from tuning import records
from tuning import report
from tuning import study as study_module

# Nothing here depends on the Keras backend: run once (conftest.py).
pytestmark = pytest.mark.backend_independent

TUNING = provenance.REPO_ROOT / "tuning"
RESULTS = TUNING / "results"
V2_HEADING = "## Protocol v2 studies"
POOLED_GLOB = "pooled*.md"
DIVERGENCE_MD = "divergence.md"
POOLED_COMMAND = re.compile(r"Written by `python -m tuning\.pooled ([^`]+)`")


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
    sources = [path, *sorted((RESULTS / study).glob(POOLED_GLOB))]
    if (RESULTS / study / DIVERGENCE_MD).is_file():
        sources.append(RESULTS / study / DIVERGENCE_MD)
    lines = {
        line.strip()
        for source in sources
        for line in source.read_text().splitlines()
    }
    missing = [row for row in rows if row not in lines]
    names = ", ".join(str(source) for source in sources)
    assert not missing, f"rows not in {names}: {missing}"


@pytest.mark.parametrize("study", _finished_bracketed_studies())
def test_committed_report_is_what_the_files_give(study):
    out_dir = str(RESULTS / study)
    text = report.render_folder(out_dir)
    assert text == (RESULTS / study / report.REPORT_MD).read_text()


def _pooled_command(text):
    """`(studies, by)` of the `tuning.pooled` command a pooled view names."""
    match = POOLED_COMMAND.search(text)
    assert match, "a pooled view names the command that wrote it"
    words = match.group(1).split()
    if "--by" not in words:
        return words, ()
    at = words.index("--by")
    return words[:at], tuple(words[at + 1 :])


@pytest.mark.parametrize(
    "path",
    sorted(RESULTS.glob(f"*/{POOLED_GLOB}")),
    ids=lambda path: f"{path.parent.name}/{path.name}",
)
def test_committed_pooled_view_is_what_its_command_gives(path):
    text = path.read_text()
    studies, by = _pooled_command(text)
    loaded = [pooled.load_study(str(RESULTS / name)) for name in studies]
    assert pooled.render(loaded, by=by) == text


def test_pooled_command_is_read_from_the_view():
    text = "Written by `python -m tuning.pooled a b --by depth width` from"
    assert _pooled_command(text) == (["a", "b"], ("depth", "width"))
    assert _pooled_command("Written by `python -m tuning.pooled a`") == (
        ["a"],
        (),
    )


@pytest.mark.parametrize(
    "study",
    sorted(
        s for s in _v2_sections() if (RESULTS / s / DIVERGENCE_MD).is_file()
    ),
)
def test_committed_divergence_table_is_what_its_csv_gives(study):
    rows = records.read_csv(str(RESULTS / study / "divergence.csv"))
    assert rows and all(row.get("command") for row in rows)
    text = divergence.render(rows, study_module.load_study(study), "", "")
    assert text == (RESULTS / study / DIVERGENCE_MD).read_text()
