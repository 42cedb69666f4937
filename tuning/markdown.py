"""The cells of the Markdown tables that the reports and views write."""

import math


def num(value, spec):
    """`value` formatted by `spec`, or `"n/a"` where it is `nan`."""
    return "n/a" if math.isnan(value) else format(value, spec)


def names(values):
    """`` `a`, `b` ``, or `"none"` for no values."""
    return ", ".join(f"`{n}`" for n in values) or "none"


def commands(values):
    """`` Command: `a` ``, or `` Commands: `a`; `b` `` for several."""
    values = list(values)
    return (
        "Command"
        + ("s" if len(values) > 1 else "")
        + ": "
        + "; ".join(f"`{c}`" for c in values)
    )


def listing(title, items):
    """The lines of one sentence: `title: a; b.`, or `title: none.`."""
    return [
        "",
        f"{title}: " + ("; ".join(items) if items else "none") + ".",
        "",
    ]
