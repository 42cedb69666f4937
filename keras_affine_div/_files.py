"""Files written whole or not at all (private).

Every file the project writes for later reading (result tables, JSON
records, the datasets' decoded caches, benchmark results) goes through
`atomic_open`: the content is written to a temporary name in the same
directory, flushed to disk and renamed over the old file (`os.replace` is
atomic), so that a reader, or a run resumed after a kill, sees either the
old content or the new, never a partial file.
"""

import contextlib
import os
import tempfile


@contextlib.contextmanager
def atomic_open(path, mode="w"):
    """Opens a temporary file that replaces `path` when the block succeeds.

    Args:
        path: the file to write; its directory is created if needed.
        mode: `"w"` (text, no newline translation) or `"wb"` (binary).

    Yields:
        The open file object. If the block raises, the temporary file is
        removed and `path` is left as it was.

    Raises:
        ValueError: for another `mode`.
    """
    if mode not in ("w", "wb"):
        raise ValueError(
            "Received an invalid value for argument `mode`. Expected one of "
            f"'w', 'wb'. Received: mode={mode!r}"
        )
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(
        dir=directory, prefix=os.path.basename(path) + ".", suffix=".tmp"
    )
    try:
        newline = {} if mode == "wb" else {"newline": ""}
        with os.fdopen(fd, mode, **newline) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        # `mkstemp` makes the file private; give it the usual permissions.
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def write_atomic(path, data):
    """Writes `data` (str or bytes) to `path` atomically.

    Args:
        path: the file to write; its directory is created if needed.
        data: str (written as text) or bytes.
    """
    with atomic_open(path, "wb" if isinstance(data, bytes) else "w") as f:
        f.write(data)
