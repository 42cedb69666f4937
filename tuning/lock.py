"""One runner per study: an exclusive lock on its runs and results folders.

`StudyLock(paths)` takes an advisory `flock` on a `.runner.lock` file in
each folder, and writes the holder's process id, host and command into it.
A second runner on the same study is refused with a `LockedError` that
names the lock file and the process holding it. The operating system drops
the lock of a process that dies, however it dies, so a lock file left by a
killed run is simply taken over (and said so); a clean exit empties the
file, so the next run has nothing to take over.
"""

import fcntl
import json
import os
import socket
import sys
import time

LOCK_NAME = ".runner.lock"


class LockedError(RuntimeError):
    """Another live process holds the lock."""


class StudyLock:
    """Exclusive locks on a study's folders, as a context manager.

    Args:
        paths: the folders to lock (created if missing).
        log: a function of one string, told when a stale lock is taken over.
            Defaults to `None` (silent).
    """

    def __init__(self, paths, log=None):
        # Once each: the runs and results folders may be one folder.
        self.paths = list(dict.fromkeys(os.path.abspath(p) for p in paths))
        self.log = log
        self._files = []

    def __enter__(self):
        try:
            for path in self.paths:
                self._files.append(self._take(path))
        except BaseException:
            self.release()
            raise
        return self

    def __exit__(self, *exc_info):
        self.release()
        return False

    def release(self):
        while self._files:
            f = self._files.pop()
            try:
                # A clean release leaves an empty file: only a holder that
                # died leaves its name behind, to be reported as taken over.
                f.seek(0)
                f.truncate()
                f.flush()
                fcntl.flock(f, fcntl.LOCK_UN)
            finally:
                f.close()

    def _take(self, folder):
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, LOCK_NAME)
        f = open(path, "a+")
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read(f)
            f.close()
            raise LockedError(
                "another runner is using this study: the lock "
                f"{path} is held by {_describe(holder)}; wait for it to "
                "finish or stop it. Received: "
                f"lock={path!r}"
            ) from None
        previous = _read(f)
        if previous and self.log is not None:
            self.log(
                f"lock {path}: taken over from {_describe(previous)}, "
                "which is no longer running"
            )
        f.seek(0)
        f.truncate()
        f.write(
            json.dumps(
                {
                    "pid": os.getpid(),
                    "host": socket.gethostname(),
                    "command": " ".join(sys.argv),
                    "since": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                }
            )
            + "\n"
        )
        f.flush()
        return f


def _read(f):
    f.seek(0)
    try:
        return json.loads(f.read() or "null")
    except ValueError:
        return None


def _describe(holder):
    if not holder:
        return "an unknown process"
    return (
        f"process {holder.get('pid')} on {holder.get('host')} "
        f"({holder.get('command')!r}, since {holder.get('since')})"
    )
