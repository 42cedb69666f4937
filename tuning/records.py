"""Result files that survive a kill at any point.

Every file is written whole through `keras_affine_div._files.write_atomic`
(a temporary name in the same directory, flushed and renamed over the old
one), so a reader sees either the old or the new content, never a partial
file. The library is imported at the first write, not with this module, so
that the tools that only read results (and `tuning.schema`) do not import
Keras. The provenance a result records (commit, library versions, machine)
comes from `tuning.provenance`, shared with the benchmarks.
"""

import csv
import io
import json
import math
import os


def write_atomic(path, data):
    """Writes `data` (str or bytes) to `path` whole or not at all
    (`keras_affine_div._files.write_atomic`)."""
    from keras_affine_div import _files

    _files.write_atomic(path, data)


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


# Reading the cells back: every CSV cell is a string.


def is_true(value):
    """Whether a cell holds a true boolean (`"True"`, as `write_csv`
    writes `True`; also `"true"`, `"1"`, `"1.0"`, `"yes"`)."""
    return str(value).strip().lower() in ("true", "1", "1.0", "yes")


def is_finite(value):
    """Whether a cell holds a finite number (`False` for `""`, `"nan"`,
    `"inf"` or text)."""
    try:
        return math.isfinite(float(value))
    except (TypeError, ValueError):
        return False


def float_or_none(row, key):
    """`row[key]` as a float, `None` where the row or the cell is empty."""
    if not row or row.get(key) in (None, ""):
        return None
    return float(row[key])
