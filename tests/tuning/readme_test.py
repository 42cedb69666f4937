"""The studies' READMEs agree with the result files, and every link of
the repository's Markdown points at something it holds.

The chain is README <- `report.md` <- `trials.csv`: every table row of a
comparison study's `tuning/results/<study>/README.md` is a line of that
study's committed `report.md`, `divergence.md`, alignment table,
pooled view (`pooled*.md`) or `tuning.across` view; the committed `report.md` of every finished bracketed
study is what `tuning.report` writes from its result files now, every
MLP study's `divergence.md` what `tuning.divergence` renders from its
`divergence.csv`, and every pooled view what the `tuning.pooled` command
it names writes now. A rerun, a report change or a hand edit that breaks
the chain fails here until the file is rewritten and the README's rows
are copied from it.

The links: every relative link of a Markdown file (and of a notebook's
Markdown cells) points at a file or folder of the repository, and a
`#anchor` into a Markdown file at one of its headings, as GitHub slugs
them. So no document cites one the repository does not hold, and moving
a section breaks the test until its links follow.
"""

import json
import os
import pathlib
import re

import pytest

from tuning import alignment
from tuning import divergence
from tuning import pooled
from tuning import provenance
from tuning import records
from tuning import report
from tuning import study as study_module

# Nothing here depends on the Keras backend: run once (conftest.py).
pytestmark = pytest.mark.backend_independent

ROOT = provenance.REPO_ROOT
TUNING = ROOT / "tuning"
RESULTS = TUNING / "results"
STUDIES = TUNING / "studies"
README_MD = "README.md"
POOLED_GLOB = "pooled*.md"
DIVERGENCE_MD = "divergence.md"
POOLED_COMMAND = re.compile(r"Written by `python -m tuning\.pooled ([^`]+)`")
ACROSS_COMMAND = re.compile(r"Written by `python -m tuning\.across ([^`]+)`")
V2_COMPARISONS = (
    "cifar10-mlp-v2",
    "cifar10-mlp-wide-v2",
    "cifar10-batch-size-v2",
    "cifar10-cnn-v2",
)
# Studies whose README tables are not lines of one report: `smoke` (a
# pipeline check, no README), the v1 studies (their tables are read off
# the v1 report's prose and tests) and the selection studies (their
# tables gather several pilots' reports into one).
PIPELINE_CHECKS = ("smoke",)
# Folders the links test does not read: not the project's documents.
NOT_DOCUMENTS = {".git", ".venv", ".venv-ci", "build", "runs", "node_modules"}


def _study_files():
    return sorted(
        path.stem
        for path in STUDIES.glob("*.toml")
        if path.stem not in PIPELINE_CHECKS
    )


def _study_config(name):
    return study_module.load_study(name)


def _is_comparison(name):
    """A bracketed study that compares arms (not v1, not a pilot)."""
    config = _study_config(name)
    return config.search.get("tuner") == "bracket" and not config.selects


def _table_rows(path):
    return [
        line.strip()
        for line in path.read_text().splitlines()
        if line.lstrip().startswith("|")
    ]


def _finished_bracketed_studies():
    studies = []
    for summary in sorted(RESULTS.glob("*/summary.json")):
        config = json.loads(summary.read_text()).get("config") or {}
        if (config.get("search") or {}).get("tuner") == "bracket":
            studies.append(summary.parent.name)
    return studies


def test_every_study_has_a_readme_in_its_results_folder():
    missing = [
        name
        for name in _study_files()
        if not (RESULTS / name / README_MD).is_file()
    ]
    assert not missing, f"no tuning/results/<study>/README.md: {missing}"


def test_every_results_folder_is_a_study_with_a_readme():
    for folder in sorted(p for p in RESULTS.iterdir() if p.is_dir()):
        assert (STUDIES / f"{folder.name}.toml").is_file(), folder.name
        if folder.name not in PIPELINE_CHECKS:
            assert (folder / README_MD).is_file(), folder.name


def test_the_index_names_every_study_and_its_readme():
    text = (RESULTS / README_MD).read_text()
    for name in _study_files():
        assert f"]({name}/README.md)" in text, name


def test_the_v2_comparisons_are_comparisons():
    for name in V2_COMPARISONS:
        assert _is_comparison(name), name
        assert (RESULTS / name / README_MD).is_file(), name


@pytest.mark.parametrize(
    "study", [s for s in _study_files() if _is_comparison(s)]
)
def test_readme_rows_are_lines_of_the_report(study):
    folder = RESULTS / study
    rows = _table_rows(folder / README_MD)
    if (folder / "summary.json").is_file():
        # A finished study's README shows its tables.
        assert rows, f"{study} is finished: its README needs tables"
    if not rows:
        return
    sources = [folder / report.REPORT_MD, *sorted(folder.glob(POOLED_GLOB))]
    for name in (DIVERGENCE_MD, alignment.MARKDOWN):
        if (folder / name).is_file():
            sources.append(folder / name)
    sources += [
        path
        for path in sorted(folder.glob("*.md"))
        if ACROSS_COMMAND.search(path.read_text())
    ]
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
    loaded = [pooled.load_results(str(RESULTS / name)) for name in studies]
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
        path.parent.name
        for path in RESULTS.glob(f"*/{DIVERGENCE_MD}")
        if _is_comparison(path.parent.name)
    ),
)
def test_committed_divergence_table_is_what_its_csv_gives(study):
    rows = records.read_csv(str(RESULTS / study / "divergence.csv"))
    assert rows and all(row.get("command") for row in rows)
    text = divergence.render(rows, study_module.load_study(study), "", "")
    assert text == (RESULTS / study / DIVERGENCE_MD).read_text()


@pytest.mark.parametrize(
    "study",
    sorted(
        path.parent.name for path in RESULTS.glob(f"*/{alignment.MARKDOWN}")
    ),
)
def test_committed_alignment_table_is_what_its_csv_gives(study):
    rows = records.read_csv(str(RESULTS / study / alignment.CSV))
    assert rows and all(row.get("command") for row in rows)
    text = alignment.render(rows, study)
    assert text == (RESULTS / study / alignment.MARKDOWN).read_text()


# ---------------------------------------------------------------- links

# `[text](target)` and `![alt](target)` (an optional title after the
# target); `<a href="...">` too. Reference-style links (`[text][ref]`)
# are not read: the repository has none.
_LINK = re.compile(
    r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)"
)
_HREF = re.compile(r"""<a\s[^>]*href=["']([^"']+)["']""", re.I)
_FENCE = re.compile(r"^\s*(```|~~~)")
# A code span: the same run of backticks on both sides, within a paragraph.
_CODE_SPAN = re.compile(r"(`+)(?:(?!\n[ \t]*\n).)+?\1", re.S)
_HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.I)  # http:, mailto:, ...


def _prose(text):
    """The text outside fenced code blocks, code spans removed."""
    fenced = False
    kept = []
    for line in text.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            kept.append("")
        else:
            kept.append("" if fenced else line)
    return _CODE_SPAN.sub("", "\n".join(kept))


def slug(heading):
    """GitHub's anchor of a heading: its text (links and code as their
    text, inline HTML dropped), lowercased, every character but letters,
    digits, spaces, '-' and '_' dropped, spaces to '-'."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = re.sub(r"<[^>]+>", "", text)
    text = text.replace("`", "").lower()
    text = "".join(c for c in text if c.isalnum() or c in " -_")
    return text.replace(" ", "-")


def anchors(text):
    """The anchors of a Markdown text's headings (`-1`, `-2`, ... after a
    repeated one), and of its explicit `<a name=...>` / `id=...`."""
    seen = {}
    found = set()
    fenced = False
    for line in text.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            continue
        match = None if fenced else _HEADING.match(line)
        if match:
            base = slug(match.group(2))
            n = seen.get(base, 0)
            seen[base] = n + 1
            found.add(base if n == 0 else f"{base}-{n}")
    found.update(re.findall(r"""<a\s[^>]*(?:name|id)=["']([^"']+)["']""", text))
    return found


def links(text):
    """The link targets of a Markdown text, outside code."""
    prose = _prose(text)
    return _LINK.findall(prose) + _HREF.findall(prose)


def _documents():
    """The repository's Markdown files and notebooks, with the Markdown
    each holds."""
    paths = []
    for folder, dirs, files in os.walk(ROOT):
        dirs[:] = sorted(
            d for d in dirs if d not in NOT_DOCUMENTS and not d.startswith(".")
        )
        paths += [pathlib.Path(folder) / name for name in sorted(files)]
    for path in paths:
        if path.suffix == ".md":
            yield path, path.read_text()
        elif path.suffix == ".ipynb":
            cells = json.loads(path.read_text()).get("cells", [])
            yield (
                path,
                "\n\n".join(
                    "".join(cell.get("source", []))
                    for cell in cells
                    if cell.get("cell_type") == "markdown"
                ),
            )


def _broken(path, text, root=ROOT):
    """The link targets of `text`, a document at `path`, that point at
    nothing `root` holds."""
    root = pathlib.Path(root).resolve()
    broken = []
    for target in links(text):
        if _EXTERNAL.match(target) or target.startswith("//"):
            continue
        file_part, _, anchor = target.partition("#")
        dest = (path.parent / file_part).resolve() if file_part else path
        if file_part and not dest.exists():
            broken.append(f"{target} (no such file)")
            continue
        if file_part and root not in (dest, *dest.parents):
            broken.append(f"{target} (outside the repository)")
            continue
        if anchor and dest.suffix == ".md":
            dest_text = text if dest == path else dest.read_text()
            if anchor not in anchors(dest_text):
                broken.append(f"{target} (no heading #{anchor})")
    return broken


def test_every_relative_link_points_at_what_the_repository_holds():
    documents = list(_documents())
    assert any(p.name == "DESIGN.md" for p, _ in documents)
    broken = {
        str(path.relative_to(ROOT)): found
        for path, text in documents
        if (found := _broken(path, text))
    }
    assert not broken, broken


def test_slugs_follow_github():
    assert slug('The bracketing search (`tuner = "bracket"`)') == (
        "the-bracketing-search-tuner--bracket"
    )
    assert slug("cifar10-mlp-v2: does the affine-like layer match?") == (
        "cifar10-mlp-v2-does-the-affine-like-layer-match"
    )
    assert slug("Fresh seeds: `tuning.fresh_seeds`") == (
        "fresh-seeds-tuningfresh_seeds"
    )
    assert slug("Pooled over [conditions](x.md)") == "pooled-over-conditions"
    assert anchors("# A\n\n## A\n\n```\n# not a heading\n```\n") == {
        "a",
        "a-1",
    }


def test_links_are_read_outside_code(tmp_path):
    text = (
        '[a](a.md) ![b](img/b.png) [c](c.md#x "title")\n'
        "`[not](a link)`\n```\n[not](either)\n```\n"
        "`a code span\nover [two](lines)` and a [link\nover two](lines.md)\n"
        '<a href="d.md">d</a> [e](https://example.com)\n'
    )
    assert sorted(links(text)) == [
        "a.md",
        "c.md#x",
        "d.md",
        "https://example.com",
        "img/b.png",
        "lines.md",
    ]
    (tmp_path / "a.md").write_text("# Here\n")
    page = tmp_path / "page.md"
    assert _broken(
        page, "[a](a.md#here) [b](a.md#there) [c](c.md)", tmp_path
    ) == ["a.md#there (no heading #there)", "c.md (no such file)"]
    assert _broken(page, "# Top\n\n[t](#top) [u](#up)", tmp_path) == [
        "#up (no heading #up)"
    ]
    (tmp_path / "inside").mkdir()
    assert _broken(tmp_path / "inside" / "p.md", "[a](../a.md)", tmp_path) == []
    assert _broken(
        tmp_path / "inside" / "p.md", "[a](../a.md)", tmp_path / "inside"
    ) == ["../a.md (outside the repository)"]
