"""Reading study files: from a name or a path to a checked `Study`.

`list_studies` names the studies shipped in `tuning/studies/`;
`load_study` reads one (or any `.toml` file) and parses its tables:
`[compare]`, `[search]`, `[fixed]`, the `[grid]` of conditions, the
`[quick]` and `[full]` overrides (each checked whether or not it is
applied) and `extends`, a study that adds arms to another. Every value is
checked (`study_checks`) before the study is returned.
"""

import itertools
import math
import pathlib
import tomllib

from tuning import study_extends
from tuning.study_checks import check_value
from tuning.study_checks import check_values
from tuning.study_checks import is_number
from tuning.study_keys import ARM
from tuning.study_keys import COMPARE_KEYS
from tuning.study_keys import COMPARE_REQUIRED
from tuning.study_keys import DEFAULT_MARGIN
from tuning.study_keys import DEFAULT_PROTOCOL
from tuning.study_keys import FIXED_DEFAULTS
from tuning.study_keys import FIXED_KEYS
from tuning.study_keys import OPTIMIZERS
from tuning.study_keys import OVERRIDE_TABLES
from tuning.study_keys import PROTOCOLS
from tuning.study_keys import SEARCH_DEFAULTS
from tuning.study_keys import SEARCH_KEYS
from tuning.study_keys import TABLES
from tuning.study_keys import StudyError
from tuning.study_keys import arm_names
from tuning.study_keys import families
from tuning.study_keys import grid_keys
from tuning.study_types import Study

STUDIES_DIR = pathlib.Path(__file__).resolve().parent / "studies"


def list_studies():
    """Returns the names of the studies shipped in `tuning/studies/`.

    Returns:
        list: sorted study names.
    """
    return sorted(p.stem for p in STUDIES_DIR.glob("*.toml"))


def load_study(
    name_or_path, quick=False, full=False, max_trials=None, seeds=None
):
    """Reads and checks a study.

    Args:
        name_or_path: a study name from `list_studies()`, or a path to a
            `.toml` study file.
        quick: whether to apply the study's `[quick]` overrides.
        full: whether to apply the study's `[full]` overrides.
        max_trials: search trials per cell in place of the study's (the
            command line's `--max-trials`), or `None`.
        seeds: seeds per cell in place of the study's (`--seeds`), or
            `None`.

    Returns:
        Study: the study.

    Raises:
        StudyError: for an unknown study, a malformed study file, or both
            `quick` and `full`.
    """
    if quick and full:
        raise StudyError(
            "`quick` and `full` exclude each other. "
            f"Received: quick={quick!r}, full={full!r}"
        )
    if str(name_or_path).endswith(".toml"):
        path = pathlib.Path(name_or_path)
        if not path.is_file():
            raise StudyError(
                f"Study file not found. Expected an existing `.toml` file. "
                f"Received: study={str(name_or_path)!r}"
            )
    else:
        path = STUDIES_DIR / f"{name_or_path}.toml"
        if not path.is_file():
            raise StudyError(
                f"Unknown study. Expected one of {list_studies()} or a path "
                f"to a `.toml` study file. Received: study={name_or_path!r}"
            )
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except tomllib.TOMLDecodeError as e:
        raise StudyError(
            f"Malformed study file {path}: not valid TOML ({e}). "
            f"Received: study={str(name_or_path)!r}"
        ) from None
    # Every value of the file is checked, whichever overrides are asked
    # for: the study as written first, then with each override table.
    variants = [(False, False)] + [
        (table == "quick", table == "full")
        for table in OVERRIDE_TABLES
        if table in data
    ]
    if (quick, full) not in variants:
        variants.append((quick, full))
    studies = {v: _parse(data, path, *v) for v in variants}
    search = {} if max_trials is None else {"max_trials": max_trials}
    fixed = {} if seeds is None else {"seeds": seeds}
    return studies[(quick, full)].replace(search=search, fixed=fixed)


def _parse(data, path, quick, full):
    """Reads the tables of a study file into a checked `Study`.

    Args:
        data: dict, the study file as TOML reads it.
        path: `pathlib.Path`, the file.
        quick: whether to apply its `[quick]` overrides.
        full: whether to apply its `[full]` overrides.

    Returns:
        Study: the study.

    Raises:
        StudyError: for a malformed study.
    """
    where = f"Malformed study file {path}"
    for table, applied in zip(OVERRIDE_TABLES, (quick, full)):
        if applied and table in data:
            # What the overrides make of the study, not the file's values.
            where = f"{where} (with its [{table}] overrides)"
    _check_tables(data, where)
    compare = data["compare"]
    family, arms, comparators = _parse_arms(compare, where)
    margin = _parse_margin(compare, where)
    search = dict(data["search"])
    fixed = dict(data["fixed"])
    grid = _parse_grid(data.get("grid", {}), family, "[grid]", where)
    protocol = _parse_protocol(data, where)
    selects = _parse_selects(compare, grid, where)
    _check_search_and_fixed(search, fixed, family, grid, where)
    for table in OVERRIDE_TABLES:
        overrides, grid_overrides = _parse_overrides(
            data, table, family, grid, where
        )
        if (table == "quick" and quick) or (table == "full" and full):
            for key, value in overrides.items():
                (search if key in SEARCH_KEYS else fixed)[key] = value
            grid.update(grid_overrides)
    for key, value in SEARCH_DEFAULTS.items():
        if key not in grid:
            search.setdefault(key, value)
    for key, value in FIXED_DEFAULTS.items():
        if key not in grid:
            fixed.setdefault(key, value)
    description = data.get("description", "")
    if not isinstance(description, str):
        raise StudyError(
            f"{where}: `description` must be a string. "
            f"Received: description={description!r}"
        )
    study = Study(
        name=path.stem,
        path=str(path),
        description=description,
        family=family,
        arms=tuple(arms),
        search=search,
        fixed=fixed,
        grid=grid,
        quick=quick,
        full=full,
        comparators=tuple(comparators),
        margin=float(margin),
        protocol=protocol,
        selects=tuple(selects),
        extends=compare.get("extends"),
    )
    if study.extends is not None:
        _check_extends(study, where)
    _check_windows(search, grid, where)
    for condition in study.conditions():
        check_values(study.at(condition), where)
    return study


def _check_tables(data, where):
    """The top-level keys are known; `[compare]`, `[search]` and `[fixed]`
    are tables."""
    _check_keys(data, TABLES, "top level", where)
    for table in ("compare", "search", "fixed"):
        if not isinstance(data.get(table), dict):
            raise StudyError(
                f"{where}: expected a `[{table}]` table. "
                f"Received: {table}={data.get(table)!r}"
            )


def _parse_arms(compare, where):
    """Checks the keys of `[compare]`, its `family`, `arms` and
    `comparators`; returns `(family, arms, comparators)`."""
    _check_keys(
        compare,
        COMPARE_KEYS,
        "[compare]",
        where,
        required=True,
        optional=set(COMPARE_KEYS) - set(COMPARE_REQUIRED),
    )
    family = compare["family"]
    known = families()
    if family not in known:
        raise StudyError(
            f"{where}: `family` must be one of {known}. "
            f"Received: family={family!r}"
        )
    arms = compare["arms"]
    variants = arm_names(family)
    if (
        not isinstance(arms, list)
        or not arms
        or any(arm not in variants for arm in arms)
        or len(set(arms)) != len(arms)
    ):
        raise StudyError(
            f"{where}: `arms` must be a non-empty list of distinct {family} "
            f"variants from {variants}. Received: arms={arms!r}"
        )
    ours = arm_names(family, ours=True)
    comparators = compare.get(
        "comparators", [arm for arm in arms if arm not in ours]
    )
    # A study that extends another may name that study's arms too
    # (`_check_extends` checks them against it).
    candidates = variants if "extends" in compare else arms
    if (
        not isinstance(comparators, list)
        or any(arm not in candidates or arm in ours for arm in comparators)
        or len(set(comparators)) != len(comparators)
    ):
        raise StudyError(
            f"{where}: `comparators` must be a list of distinct arms of the "
            f"study that are not ours ({', '.join(ours)}). "
            f"Received: comparators={comparators!r}, arms={arms!r}"
        )
    return family, arms, comparators


def _parse_margin(compare, where):
    """The non-inferiority `margin` of `[compare]`, in [0, 1)."""
    margin = compare.get("margin", DEFAULT_MARGIN)
    if not (is_number(margin) and math.isfinite(margin) and margin >= 0):
        raise StudyError(
            f"{where}: `margin` must be a number >= 0 (accuracy). "
            f"Received: margin={margin!r}"
        )
    if margin >= 1:
        raise StudyError(
            f"{where}: `margin` must be a number below 1 (a difference of "
            f"accuracies). Received: margin={margin!r}"
        )
    return margin


def _parse_protocol(data, where):
    """The top-level `protocol`, one of `PROTOCOLS`."""
    protocol = data.get("protocol", DEFAULT_PROTOCOL)
    if (
        isinstance(protocol, bool)
        or not isinstance(protocol, int)
        or protocol not in PROTOCOLS
    ):
        raise StudyError(
            f"{where}: `protocol` must be one of {list(PROTOCOLS)}. "
            f"Received: protocol={protocol!r}"
        )
    return protocol


def _parse_selects(compare, grid, where):
    """The `selects` of `[compare]`: distinct keys of `grid`, or `"arm"`
    (the study chooses among its arms: each layer of ours among the nets
    built on it, `tuning.selection_study`)."""
    selects = compare.get("selects", [])
    if (
        not isinstance(selects, list)
        or any(
            not isinstance(key, str) or (key not in grid and key != ARM)
            for key in selects
        )
        or len(set(selects)) != len(selects)
    ):
        raise StudyError(
            f"{where}: `selects` must be a list of distinct [grid] keys, the "
            f"settings the study chooses ({list(grid)}), or {ARM!r}. "
            f"Received: selects={selects!r}"
        )
    return selects


def _check_search_and_fixed(search, fixed, family, grid, where):
    """The keys of `[search]` and `[fixed]`, and each value as written."""
    # A grid key may be left out of [fixed] and [search]: the grid sets it.
    _check_keys(
        search,
        SEARCH_KEYS,
        "[search]",
        where,
        required=True,
        optional=set(grid) | set(SEARCH_DEFAULTS),
    )
    _check_keys(
        fixed,
        FIXED_KEYS[family],
        "[fixed]",
        where,
        required=True,
        optional=set(grid) | set(FIXED_DEFAULTS),
    )
    # Every value as written, also one that a [grid] key replaces.
    for key, value in itertools.chain(search.items(), fixed.items()):
        check_value(key, value, family, where)


def _parse_overrides(data, table, family, grid, where):
    """Checks the override table `table` (`"quick"` or `"full"`), whether
    or not it is applied.

    Returns:
        tuple: `(overrides, grid_overrides)`, dicts of the `[search]` and
        `[fixed]` values it overrides and of its `[<table>.grid]`.
    """
    if not isinstance(data.get(table, {}), dict):
        raise StudyError(
            f"{where}: `[{table}]` must be a table. "
            f"Received: {table}={data[table]!r}"
        )
    overrides = dict(data.get(table, {}))
    _check_keys(
        overrides,
        SEARCH_KEYS + FIXED_KEYS[family] + ("grid",),
        f"[{table}]",
        where,
    )
    grid_overrides = _parse_grid(
        overrides.pop("grid", {}), family, f"[{table}.grid]", where
    )
    gridded = sorted(set(overrides) & set(grid))
    if gridded:
        raise StudyError(
            f"{where}: {gridded} are [grid] keys; override them in "
            f"`[{table}.grid]`. Received: "
            + ", ".join(f"{k}={overrides[k]!r}" for k in gridded)
        )
    unknown = sorted(set(grid_overrides) - set(grid))
    if unknown:
        raise StudyError(
            f"{where}: `[{table}.grid]` may only override [grid] keys "
            f"{list(grid)}. Received: "
            + ", ".join(f"{k}={grid_overrides[k]!r}" for k in unknown)
        )
    # The overrides of both tables, whichever is applied.
    for key, value in overrides.items():
        check_value(key, value, family, where, f"[{table}]")
    return overrides, grid_overrides


def _check_windows(search, grid, where):
    """A `learning_rate` table has one window per optimiser searched."""
    windows = search.get("learning_rate")
    if isinstance(windows, dict):
        searched = grid.get("optimizers") or search.get("optimizers")
        # A malformed `optimizers` is reported by `check_values`.
        if isinstance(searched, list) and set(windows) != set(searched):
            raise StudyError(
                f"{where}: the `learning_rate` table must have one window "
                f"for each optimiser the study searches, {searched!r}, and "
                f"no other. Received: learning_rate={windows!r}"
            )


def _check_extends(study, where):
    """A study that adds arms to another names one it can extend
    (`study_extends.check_against` checks the rest)."""
    parent = study.extends
    if (
        not isinstance(parent, str)
        or parent == study.name
        or parent not in list_studies()
    ):
        raise StudyError(
            f"{where}: `extends` must name another study of "
            f"{list_studies()}. Received: extends={parent!r}"
        )
    other = load_study(parent, quick=study.quick, full=study.full)
    study_extends.check_against(study, other, where)


def _parse_grid(grid, family, name, where):
    """Checks a `[grid]` table; returns it as a dict of lists."""
    if not isinstance(grid, dict):
        raise StudyError(
            f"{where}: `{name}` must be a table. Received: grid={grid!r}"
        )
    allowed = grid_keys(family)
    known = set(SEARCH_KEYS) | {k for keys in FIXED_KEYS.values() for k in keys}
    unknown = sorted(set(grid) - known)
    if unknown:
        raise StudyError(
            f"{where}: unknown keys in {name}; expected only {list(allowed)}"
            f". Received: {', '.join(f'{k}={grid[k]!r}' for k in unknown)}"
        )
    not_fixed = sorted(set(grid) - set(allowed))
    if not_fixed:
        raise StudyError(
            f"{where}: {name} keys must be [fixed] keys of a {family} study "
            f"(but `seeds`) or `optimizers`; {not_fixed} are not. Received: "
            + ", ".join(f"{k}={grid[k]!r}" for k in not_fixed)
        )
    for key, values in grid.items():
        if (
            not isinstance(values, list)
            or not values
            or any(isinstance(v, (list, dict)) for v in values)
            or len({repr(v) for v in values}) != len(values)
        ):
            raise StudyError(
                f"{where}: every {name} key must map to a non-empty list of "
                f"distinct values. Received: {key}={values!r}"
            )
        if key == "optimizers" and any(v not in OPTIMIZERS for v in values):
            raise StudyError(
                f"{where}: `optimizers` in {name} must list names from "
                f"{OPTIMIZERS}, one searched per condition. "
                f"Received: optimizers={values!r}"
            )
        if key != "optimizers":
            # Each value as the `[fixed]` key takes it.
            table = None if name == "[grid]" else name
            for value in values:
                check_value(key, value, family, where, table)
    # In the order of the grid keys, so that condition names do not depend
    # on the order of the file.
    return {key: list(grid[key]) for key in allowed if key in grid}


def _check_keys(table, allowed, name, where, required=False, optional=()):
    """`table` has only keys of `allowed`; with `required`, all of them
    but those of `optional`."""
    unknown = sorted(set(table) - set(allowed))
    if unknown:
        raise StudyError(
            f"{where}: unknown keys in {name}; expected only {list(allowed)}. "
            f"Received: {', '.join(f'{k}={table[k]!r}' for k in unknown)}"
        )
    missing = (
        [k for k in allowed if k not in table and k not in optional]
        if required
        else []
    )
    if missing:
        raise StudyError(
            f"{where}: {name} must set {list(allowed)}. "
            f"Received: missing={missing}"
        )
