"""The provenance every result records (`tuning.provenance`)."""

import os
import shutil
import subprocess

import keras
import pytest

from keras_affine_div import version
from tuning import provenance

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def _git(root, *args):
    subprocess.run(
        ["git", *args],
        cwd=root,
        check=True,
        capture_output=True,
        env={
            **os.environ,
            "GIT_AUTHOR_NAME": "t",
            "GIT_AUTHOR_EMAIL": "t@example.com",
            "GIT_COMMITTER_NAME": "t",
            "GIT_COMMITTER_EMAIL": "t@example.com",
        },
    )


@pytest.fixture
def checkout(tmp_path):
    _git(tmp_path, "init", "-q")
    for name in ("code.py", "study.toml", "notes.md", "results.csv"):
        (tmp_path / name).write_text("a\n")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "commit", "-q", "-m", "first")
    return tmp_path


def _head(root):
    return subprocess.run(
        ["git", "rev-parse", "HEAD"],
        cwd=root,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


@needs_git
def test_a_clean_checkout(checkout):
    assert provenance.git_state(checkout) == (_head(checkout), False)


@needs_git
@pytest.mark.parametrize("name", ["code.py", "study.toml"])
def test_a_changed_code_file_is_dirty(checkout, name):
    (checkout / name).write_text("b\n")
    assert provenance.git_state(checkout) == (_head(checkout), True)


@needs_git
def test_results_docs_and_untracked_files_are_not_dirty(checkout):
    # A study that writes its own results, or a README being edited, does
    # not make the code that ran differ from the commit.
    (checkout / "notes.md").write_text("b\n")
    (checkout / "results.csv").write_text("b\n")
    (checkout / "new.py").write_text("b\n")
    assert provenance.git_state(checkout) == (_head(checkout), False)


def test_outside_a_checkout(tmp_path):
    assert provenance.git_state(tmp_path) == (None, None)


def test_repo_root_is_this_checkout():
    assert (provenance.REPO_ROOT / "keras_affine_div").is_dir()
    assert (provenance.REPO_ROOT / "pyproject.toml").is_file()


def test_library_versions():
    versions = provenance.library_versions()
    assert versions["keras"] == keras.__version__
    assert versions["keras_affine_div"] == version.__version__
    assert {"python", "numpy", keras.backend.backend()} <= set(versions)
    assert all(isinstance(v, str) and v for v in versions.values())


def test_machine():
    machine = provenance.machine()
    assert set(machine) == {
        "system",
        "release",
        "machine",
        "processor",
        "cpu_count",
        "cpus_usable",
        "accelerator",
    }
    assert machine["cpu_count"] == os.cpu_count()
    if hasattr(os, "sched_getaffinity"):
        assert machine["cpus_usable"] == len(os.sched_getaffinity(0))
    assert 1 <= machine["cpus_usable"] <= os.cpu_count()
    name = provenance.machine_name()
    if machine["accelerator"] is None:
        assert name == f"cpu-{os.cpu_count()}core"
    else:
        assert name.startswith("gpu-")
