"""The cells of the Markdown tables that the reports and views write."""

import math


def num(value, spec):
    """`value` formatted by `spec`, or `"n/a"` where it is `nan`."""
    return "n/a" if math.isnan(value) else format(value, spec)


def names(values):
    """`` `a`, `b` ``, or `"none"` for no values."""
    return ", ".join(f"`{n}`" for n in values) or "none"
