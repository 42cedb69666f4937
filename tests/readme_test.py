"""The README's snippets do what it says: each Python block runs in a fresh
interpreter and prints exactly the output shown after it; each command of
the tools is accepted as written; a committed study's command trains
nothing, as the README says.

The snippets set their own backend (JAX), so they run once, in the JAX pass
of the suite.
"""

import os
import pathlib
import re
import shlex
import subprocess
import sys

import pytest

from tests import testing

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
README = REPO_ROOT / "README.md"

pytestmark = pytest.mark.requires_backend("jax")


def _blocks():
    """`(language, code, shown output or None)` of every fenced block; a
    Python block's output is the next block without a language, when the
    text between the two says it prints."""
    text = README.read_text()
    found = list(re.finditer(r"```(\w*)\n(.*?)```", text, re.S))
    blocks = []
    for i, m in enumerate(found):
        language, code = m.group(1), m.group(2)
        shown = None
        if language == "python" and i + 1 < len(found):
            nxt = found[i + 1]
            between = text[m.end() : nxt.start()]
            if nxt.group(1) == "" and "prints" in between:
                shown = nxt.group(2)
        blocks.append((language, code, shown))
    return blocks


PYTHON_BLOCKS = [
    (code, shown) for lang, code, shown in _blocks() if lang == "python"
]
BASH_LINES = [
    line.split("#")[0].strip()
    for lang, code, _ in _blocks()
    if lang == "bash"
    for line in code.splitlines()
    if line.split("#")[0].strip()
]


def _env():
    env = dict(os.environ)
    env.pop("KERAS_BACKEND", None)
    env.update(TF_CPP_MIN_LOG_LEVEL="2", TF_ENABLE_ONEDNN_OPTS="0")
    return env


def test_the_readme_has_snippets_to_check():
    assert len(PYTHON_BLOCKS) >= 2
    assert sum(shown is not None for _, shown in PYTHON_BLOCKS) >= 1
    assert any("tuning.sweep" in line for line in BASH_LINES)


@pytest.mark.slow
@pytest.mark.parametrize(
    "code,shown",
    PYTHON_BLOCKS,
    ids=[f"block{i}" for i in range(len(PYTHON_BLOCKS))],
)
def test_python_snippet_prints_what_the_readme_shows(code, shown, tmp_path):
    # Every snippet names its backend: it must not depend on the caller's.
    assert 'os.environ["KERAS_BACKEND"]' in code
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout == (shown or "")


def _tool_commands():
    commands = []
    for line in BASH_LINES:
        words = shlex.split(line)
        while words and "=" in words[0]:
            words = words[1:]
        if words[:2] == ["python", "-m"]:
            commands.append(words[2:])
    return commands


def test_every_tool_command_is_accepted_as_written():
    from tuning import study as study_module
    from tuning import sweep

    commands = _tool_commands()
    assert commands
    for module, *args in commands:
        assert module == "tuning.sweep", module
        arguments = sweep.parser().parse_args(args)
        # The study it names exists, with its quick and full variants.
        study_module.load_study(arguments.study)


def test_a_committed_study_trains_nothing_as_the_readme_says(tmp_path):
    data_dir = testing.CIFAR10_JPEG_COPY
    if not os.path.isdir(data_dir):
        pytest.skip(f"no local CIFAR-10 copy at {data_dir}")
    command = next(
        c
        for c in _tool_commands()
        if "--data-dir" in c and "--results-dir" not in c
    )
    args = [
        a if a != "../shared/datasets/cifar10-jpeg" else data_dir
        for a in command
    ]
    out = subprocess.run(
        [sys.executable, "-m", *args],
        cwd=REPO_ROOT,
        env={**_env(), "KERAS_BACKEND": "jax"},
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert "already complete; nothing was trained" in out.stdout
    assert "results: " in README.read_text()
