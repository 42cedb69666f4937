"""Result files that survive a kill at any point.

Every file is written whole to a temporary name in the same directory,
flushed to disk and renamed over the old one (`os.replace` is atomic), so a
reader sees either the old or the new content, never a partial file.
"""

import csv
import io
import json
import os
import platform
import subprocess
import tempfile

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def write_atomic(path, text):
    """Writes `text` to `path` atomically.

    Args:
        path: the file to write; its directory is created if needed.
        text: str, the whole content.
    """
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(
        dir=directory, prefix=os.path.basename(path) + ".", suffix=".tmp"
    )
    try:
        with os.fdopen(fd, "w", newline="") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes it private
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def write_json(path, data):
    """Writes `data` as indented JSON, atomically."""
    write_atomic(path, json.dumps(data, indent=2, sort_keys=False) + "\n")


def read_json(path):
    """Returns the JSON content of `path`, or `None` if it does not exist."""
    if not os.path.isfile(path):
        return None
    with open(path) as f:
        return json.load(f)


def write_csv(path, columns, rows):
    """Writes `rows` (dicts) as a CSV with `columns`, atomically.

    Values missing from a row are written as empty cells; floats keep their
    full `repr`, so that they read back exactly.
    """
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, extrasaction="ignore")
    writer.writeheader()
    for row in rows:
        writer.writerow({c: _cell(row.get(c)) for c in columns})
    write_atomic(path, buffer.getvalue())


def read_csv(path):
    """Returns the rows of a CSV as a list of dicts of str (`[]` if absent)."""
    if not os.path.isfile(path):
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def _cell(value):
    if value is None:
        return ""
    if isinstance(value, (list, tuple)):
        return " ".join(str(v) for v in value)
    return value


def git_state():
    """Returns `(commit, dirty)` of the repository, or `(None, None)`."""
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
        ).stdout.strip()
        status = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None, None
    return commit, bool(status.strip())


def library_versions(backend):
    """Returns the versions of Python and the libraries a result depends on.

    Args:
        backend: the Keras backend name; its library's version is included.

    Returns:
        dict: name to version string.
    """
    import keras
    import keras_tuner
    import numpy

    versions = {
        "python": platform.python_version(),
        "keras": keras.__version__,
        "keras_tuner": keras_tuner.__version__,
        "numpy": numpy.__version__,
    }
    if backend == "tensorflow":
        import tensorflow

        versions["tensorflow"] = tensorflow.__version__
    elif backend == "jax":
        import jax

        versions["jax"] = jax.__version__
    elif backend == "torch":
        import torch

        versions["torch"] = torch.__version__
    from keras_affine_div import version

    versions["keras_affine_div"] = version.__version__
    return versions
