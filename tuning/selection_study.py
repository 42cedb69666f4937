"""What a selection study (a pilot) chooses, on validation only.

A selection study declares `[compare] selects`: the grid keys it chooses
(e.g. `epochs`) for each arm and each value of the other grid keys, or
`"arm"`, a choice among its arms: the nets built on one layer of ours (an
arm and its variants, named `<arm>_stem`, `<arm>_head`, `<arm>_stem_head`)
form one group. The value whose seed reruns have the highest mean
validation accuracy is the choice; test accuracy plays no part. Pure
functions of the rows; `tuning.report` renders them.
"""

import math

from tuning import result_rows
from tuning import statistics
from tuning import study as study_module

ARM = study_module.ARM
# The suffixes of an arm's variants (`keras_affine_div.models`: a plain
# stem, a corrected head, both), longest first.
VARIANT_SUFFIXES = ("_stem_head", "_stem", "_head")


def base_arm(arm):
    """The arm a variant is built from: `"patch_norm"` for
    `"patch_norm_stem_head"`; an arm that is no variant is its own."""
    for suffix in VARIANT_SUFFIXES:
        if arm.endswith(suffix) and len(arm) > len(suffix):
            return arm[: -len(suffix)]
    return arm


def selected_keys(summary, name=None):
    """The settings a selection study (a pilot) chooses: `[compare]
    selects` of its config, else of its study file (`summary`'s study, or
    `name`: for results written before studies declared it); `()` for a
    comparison."""
    compare = (summary.get("config") or {}).get("compare") or {}
    if "selects" in compare:
        return tuple(compare["selects"])
    name = summary.get("study") or name
    if not name or name not in study_module.list_studies():
        return ()
    try:
        return study_module.load_study(name).selects
    except study_module.StudyError:
        return ()


def choices(runs, summary, selects):
    """What a selection study chooses, on validation only.

    Cells are grouped by arm (by `base_arm` where `selects` holds
    `"arm"`) and by the grid values outside `selects`; in each group, the
    value of `selects` whose seed reruns have the highest mean validation
    accuracy (at the cell's chosen learning rate) is the choice. Test
    accuracy plays no part.

    Args:
        runs: the rows of `trials.csv`.
        summary: dict, the content of `summary.json`.
        selects: the grid keys chosen, or `"arm"`.

    Returns:
        list of dicts, one per group in the order of `runs`: `group` (str:
        the arm and the other grid values), `options` (list of dicts:
        `value`, `learning_rate`, `bracketed`, `search_val_accuracy` of the
        chosen trial, `val_accuracy` mean over the seeds, `seeds`), and
        `chosen` (the `value` chosen).
    """
    by_arm = ARM in selects
    grid = [
        k
        for k in result_rows.grid_keys(summary) or selects
        if k not in selects and k != ARM
    ]
    conditions = summary.get("conditions") or {}

    def setting(row, key):
        # The row's own column, else the condition's value in the summary
        # (rows written before the runner wrote every grid key).
        if key == ARM:
            return row["arm"]
        if row.get(key) not in (None, ""):
            return row[key]
        values = (conditions.get(row.get("condition", "")) or {}).get(
            "values"
        ) or {}
        return values.get(key, "")

    groups = {}
    for row in runs:
        arm = base_arm(row["arm"]) if by_arm else row["arm"]
        group = " ".join([arm] + [f"{k}={setting(row, k)}" for k in grid])
        value = ", ".join(f"{k}={setting(row, k)}" for k in selects)
        groups.setdefault(group, {}).setdefault(value, []).append(row)
    out = []
    for group, values in groups.items():
        options = [_option(value, rows) for value, rows in values.items()]
        best = max(
            (o for o in options if not math.isnan(o["val_accuracy"])),
            key=lambda o: o["val_accuracy"],
            default=None,
        )
        out.append(
            {
                "group": group,
                "options": options,
                "chosen": best["value"] if best else None,
            }
        )
    return out


def _option(value, rows):
    """One value of a group: its chosen trial and its seeds' validation."""
    val = [result_rows.to_float(r["val_accuracy"]) for r in rows]
    return {
        "value": value,
        "learning_rate": result_rows.to_float(rows[0].get("learning_rate")),
        "bracketed": rows[0].get("bracketed", ""),
        "search_val_accuracy": result_rows.to_float(
            rows[0].get("search_val_accuracy")
        ),
        "val_accuracy": statistics.mean(val),
        "seeds": len(rows),
    }
