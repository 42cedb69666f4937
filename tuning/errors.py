"""The error the tuning tools raise for bad input (`SweepError`).

Every command of `tuning/` prints it as one line on stderr and exits with
status 2; this module imports nothing, so any tool can raise it.
"""


class SweepError(Exception):
    """Bad input: printed as one line on stderr, exit status 2."""
