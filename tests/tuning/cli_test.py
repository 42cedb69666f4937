"""`tuning.cli`: what the command-line tools share, and that they share it."""

import argparse
import pathlib

import pytest

from tuning import cli

# Nothing here depends on the Keras backend: run once (conftest.py).
pytestmark = pytest.mark.backend_independent

TUNING = pathlib.Path(cli.__file__).parent


def test_fail_is_one_line_on_stderr_and_exit_status_2(capsys):
    assert cli.fail(ValueError("no such study. Received: 'x'")) == 2
    captured = capsys.readouterr()
    assert captured.err == "error: no such study. Received: 'x'\n"
    assert captured.out == ""


def test_study_size_flags_exclude_each_other(capsys):
    parser = argparse.ArgumentParser()
    cli.add_study_size(parser)
    assert vars(parser.parse_args(["--quick"])) == {
        "quick": True,
        "full": False,
    }
    assert vars(parser.parse_args([])) == {"quick": False, "full": False}
    with pytest.raises(SystemExit):
        parser.parse_args(["--quick", "--full"])
    assert "not allowed with argument" in capsys.readouterr().err


@pytest.mark.parametrize(
    "text, owner",
    [
        ('print(f"error: ', "cli.py"),
        ('os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL"', "__init__.py"),
    ],
    ids=["error_line", "tensorflow_preamble"],
)
def test_no_tool_repeats_what_one_module_holds(text, owner):
    found = sorted(
        path.name for path in TUNING.glob("*.py") if text in path.read_text()
    )
    assert found == [owner]


def test_a_view_is_printed_or_written_whole(tmp_path, capsys):
    cli.emit("# A view\n")
    assert capsys.readouterr().out == "# A view\n"
    path = tmp_path / "view.md"
    cli.emit("# A view\n", str(path))
    assert path.read_text() == "# A view\n"
    assert capsys.readouterr().out == f"wrote {path}\n"
