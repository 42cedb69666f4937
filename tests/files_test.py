"""Files written whole or not at all (`keras_affine_div._files`)."""

import os
import stat

import pytest

from keras_affine_div import _files

# Nothing here depends on the Keras backend: run once (conftest.py).
pytestmark = pytest.mark.backend_independent


def test_write_atomic_text_and_bytes(tmp_path):
    path = tmp_path / "sub" / "a.txt"
    _files.write_atomic(path, "one\r\ntwo\n")
    assert path.read_bytes() == b"one\r\ntwo\n"  # no newline translation
    _files.write_atomic(path, b"\x00\x01")
    assert path.read_bytes() == b"\x00\x01"
    assert os.listdir(path.parent) == ["a.txt"]


def test_a_failed_write_leaves_the_old_file(tmp_path):
    path = tmp_path / "a.txt"
    path.write_text("old")
    with pytest.raises(RuntimeError, match="stop"):
        with _files.atomic_open(path) as f:
            f.write("new, half written")
            raise RuntimeError("stop")
    assert path.read_text() == "old"
    assert os.listdir(tmp_path) == ["a.txt"]


def test_permissions_follow_the_umask(tmp_path):
    umask = os.umask(0o022)
    try:
        _files.write_atomic(tmp_path / "a.txt", "x")
    finally:
        os.umask(umask)
    mode = stat.S_IMODE(os.stat(tmp_path / "a.txt").st_mode)
    assert mode == 0o644


def test_bad_mode(tmp_path):
    with pytest.raises(ValueError, match=r"Expected one of 'w', 'wb'"):
        with _files.atomic_open(tmp_path / "a.txt", "a"):
            pass
