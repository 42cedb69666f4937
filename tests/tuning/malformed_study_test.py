"""Malformed study files: every value is refused when the file is read.

A table of malformed files, one case at least for every key a study file
takes (top level, `[compare]`, `[search]`, `[fixed]`, `[grid]`, and the
`[quick]` and `[full]` overrides with their `grid` tables), each fed to the
runner's command line in-process: exit status 2, one line naming the key
and the value received, no traceback, and nothing written. The runner
itself is never reached (no data loads, nothing trains).
"""

import datetime
import json
import math

import pytest

from tuning import runner
from tuning import study as study_module
from tuning import sweep

# Nothing here depends on the Keras backend: run once (conftest.py).
pytestmark = pytest.mark.backend_independent

# Three valid studies the cases spoil, one key at a time: the bracketing
# search of an MLP, the random search of one, and a CNN.
BASES = {
    "bracket": {
        "description": "A malformed-file check.",
        "protocol": 3,
        "compare": {
            "family": "mlp",
            "arms": ["dense", "affine_like"],
            "comparators": ["dense"],
            "margin": 0.01,
        },
        "search": {
            "tuner": "bracket",
            "max_trials": 4,
            "learning_rate": [0.01, 1.0],
            "lr_step": 1.0,
            "learning_rate_limits": [1e-6, 100.0],
            "optimizers": ["sgd"],
            "seed": 0,
        },
        "fixed": {
            "dataset": "cifar10",
            "train_samples": 512,
            "val_samples": 256,
            "test_samples": 256,
            "depth": 2,
            "width": 16,
            "activation": "tanh",
            "epochs": 2,
            "batch_size": 64,
            "seeds": 2,
            "schedule": "cosine",
            "warmup_epochs": 1,
            "momentum": 0.9,
            "kernel_scale": {"affine_like": 0.5},
            "baseline_kernel_scale": 0.5,
        },
        "quick": {"max_trials": 2, "seeds": 1},
        "full": {"max_trials": 8, "seeds": 3},
    },
    "random": {
        "description": "A malformed-file check.",
        "compare": {"family": "mlp", "arms": ["dense", "affine_like"]},
        "search": {
            "tuner": "random",
            "max_trials": 4,
            "learning_rate": [1e-4, 1.0],
            "optimizers": ["sgd", "adam"],
            "kernel_scales": [0.5, 1.0, 2.0],
            "seed": 0,
        },
        "fixed": {
            "dataset": "cifar10",
            "train_samples": 512,
            "val_samples": 256,
            "test_samples": 256,
            "depth": 2,
            "width": 16,
            "activation": "tanh",
            "epochs": 2,
            "batch_size": 64,
            "seeds": 2,
        },
        "quick": {"max_trials": 2, "seeds": 1},
        "full": {"max_trials": 8, "seeds": 3},
    },
    "cnn": {
        "description": "A malformed-file check.",
        "compare": {"family": "cnn", "arms": ["conv", "patch_norm"]},
        "search": {
            "tuner": "bracket",
            "max_trials": 4,
            "learning_rate": [0.01, 1.0],
            "optimizers": ["sgd"],
            "seed": 0,
        },
        "fixed": {
            "dataset": "cifar10",
            "train_samples": 512,
            "val_samples": 256,
            "test_samples": 256,
            "depth": 2,
            "filters": 4,
            "activation": "relu",
            "epochs": 2,
            "batch_size": 64,
            "seeds": 2,
            "kernel_scale": 0.5,
        },
        "quick": {"max_trials": 2, "seeds": 1},
        "full": {"max_trials": 8, "seeds": 3},
    },
}

REMOVE = object()


def case(table, key, value, base="bracket", extra=None, received=None):
    """One malformed file: `BASES[base]`, changed by `extra` (a dict of
    table to `{key: value}`, `REMOVE` deleting a key), then with `key` of
    `table` (`None`: the top level) set to `value`.

    `received` is what the message must say was received (default:
    `key=value`)."""
    return {
        "table": table,
        "key": key,
        "value": value,
        "base": base,
        "extra": extra or {},
        "received": received or f"{key}={value!r}",
    }


GRID = {"grid": {"depth": [2, 3]}}
SEARCH_AND_FIXED = [
    # [search]
    case("search", "tuner", "brackets"),
    case("search", "tuner", 1),
    case("search", "max_trials", 0),
    case("search", "max_trials", 100_001),
    case("search", "max_trials", 2.0),
    case("search", "max_trials", True),
    case("search", "max_trials", "2"),
    case("search", "learning_rate", [1.0, 0.01]),
    case("search", "learning_rate", [0.01, math.inf]),
    case("search", "learning_rate", [0.01, True]),
    case("search", "learning_rate", "0.1"),
    case(
        "search",
        "learning_rate",
        {"sgd": [1.0, 0.1]},
        received="learning_rate=[1.0, 0.1]",
    ),
    case(
        "search",
        "learning_rate",
        {"sgd": {"low": 0.1}},
        received="learning_rate={'low': 0.1}",
    ),
    case("search", "learning_rate", {"sgd": [0.01, 1.0], "adam": [0.1, 1]}),
    case("search", "optimizers", ["sdg"]),
    case("search", "optimizers", "sgd"),
    case("search", "optimizers", [["sgd"]]),
    case("search", "optimizers", []),
    case("search", "optimizers", ["sgd", "adam"]),
    case(
        "search",
        "optimizers",
        5,
        extra={"search": {"learning_rate": {"sgd": [0.01, 1.0]}}},
    ),
    # A value that a [grid] key replaces is checked all the same.
    case(
        "search",
        "optimizers",
        ["lion"],
        extra={"grid": {"optimizers": ["sgd"]}},
    ),
    case("fixed", "depth", "x", extra=GRID),
    case("search", "kernel_scales", [0.5], base="bracket"),
    case("search", "kernel_scales", [0.0], base="random"),
    case("search", "kernel_scales", [math.inf], base="random"),
    case("search", "kernel_scales", [0.5, 0.5], base="random"),
    case("search", "kernel_scales", "0.5", base="random"),
    case("search", "kernel_scales", [False], base="random"),
    case("search", "seed", -1),
    case("search", "seed", 10_000),
    case("search", "seed", 42_949, extra={None: {"protocol": 2}}),
    case("search", "seed", 0.5),
    case("search", "seed", True),
    case("search", "lr_step", 0),
    case("search", "lr_step", math.inf),
    case("search", "lr_step", "1"),
    case("search", "learning_rate_limits", "x"),
    case("search", "learning_rate_limits", "x", base="random"),
    case("search", "learning_rate_limits", [100.0, 1e-6]),
    case("search", "learning_rate_limits", [1e-6, math.inf]),
    case("search", "learning_rate_limits", [0.05, 1.0]),
    # [fixed]
    case("fixed", "dataset", "cifar100"),
    case("fixed", "dataset", 10),
    case(
        "fixed",
        "dataset",
        "fashion_mnist",
        base="cnn",
        extra={"fixed": {"depth": 5}},
    ),
    case("fixed", "train_samples", 0),
    case("fixed", "train_samples", 1.5),
    case("fixed", "train_samples", True),
    case("fixed", "train_samples", 60_000),
    case("fixed", "val_samples", "256"),
    case("fixed", "val_samples", 49_900),
    case("fixed", "test_samples", 0),
    case("fixed", "test_samples", 10_001),
    case("fixed", "test_samples", [256]),
    case("fixed", "depth", 0),
    case("fixed", "depth", 2.0),
    case("fixed", "depth", 6, base="cnn"),
    # Refused at once, not after computing 2 ** depth.
    case("fixed", "depth", 10**15, base="cnn"),
    case("fixed", "width", 0),
    case("fixed", "width", "16"),
    case("fixed", "filters", 0, base="cnn"),
    case("fixed", "filters", 4.5, base="cnn"),
    case("fixed", "activation", "tanhh"),
    case("fixed", "activation", "Tanh"),
    case("fixed", "activation", ""),
    case("fixed", "activation", 1),
    case("fixed", "activation", "relux", base="cnn"),
    case("fixed", "epochs", 0),
    case("fixed", "epochs", 1.5),
    case("fixed", "epochs", datetime.date(1979, 5, 27)),
    case("fixed", "epochs", 1),
    case("fixed", "batch_size", 0),
    case("fixed", "batch_size", "64"),
    case("fixed", "seeds", 0),
    case("fixed", "seeds", True),
    case("fixed", "seeds", 2.5),
    case("fixed", "schedule", "cosin"),
    case("fixed", "schedule", 1),
    case("fixed", "warmup_epochs", -1),
    case("fixed", "warmup_epochs", 1.0),
    case("fixed", "warmup_epochs", 2),
    case("fixed", "momentum", 1.0),
    case("fixed", "momentum", -0.1),
    case("fixed", "momentum", math.nan),
    case("fixed", "momentum", "0.9"),
    case("fixed", "kernel_scale", 0),
    case("fixed", "kernel_scale", math.inf),
    case("fixed", "kernel_scale", "0.5"),
    case("fixed", "kernel_scale", {}),
    case("fixed", "kernel_scale", {"afine_like": 0.5}),
    case("fixed", "kernel_scale", {"dense": 0.5}),
    case("fixed", "kernel_scale", {"affine_like": 0}),
    case("fixed", "kernel_scale", {"affine_like": "0.5"}),
    case("fixed", "kernel_scale", {"affine_like": 0.5}, base="cnn"),
    case("fixed", "kernel_scale", 0.5, base="random"),
    case("fixed", "baseline_kernel_scale", 0),
    case("fixed", "baseline_kernel_scale", math.inf),
    case("fixed", "baseline_kernel_scale", True),
    case("fixed", "baseline_kernel_scale", "0.5"),
]

# The same values in the `[quick]` and `[full]` overrides: refused whether
# or not the run asks for that table.
OVERRIDES = [
    dict(c, table=table)
    for table in study_module.OVERRIDE_TABLES
    for c in SEARCH_AND_FIXED
]


def grid_cases(key, bad, base="bracket", good=None):
    """A bad grid value of `key` in `[grid]`, `[quick.grid]` and
    `[full.grid]` (over a `[grid]` of `good`, the base's value)."""
    good = BASES[base]["fixed"].get(key) if good is None else good
    received = f"{key}={[bad]!r}" if key == "optimizers" else f"{key}={bad!r}"
    cases = [case("grid", key, [bad], base=base, received=received)]
    for table in study_module.OVERRIDE_TABLES:
        cases.append(
            case(
                f"{table}.grid",
                key,
                [bad],
                base=base,
                extra={"grid": {key: [good]}},
                received=received,
            )
        )
    return cases


GRIDS = [
    *grid_cases("dataset", "cifar100"),
    *grid_cases("train_samples", 60_000),
    *grid_cases("val_samples", "256"),
    *grid_cases("test_samples", 0),
    *grid_cases("depth", 6, base="cnn"),
    *grid_cases("depth", True),
    *grid_cases("width", 2.5),
    *grid_cases("filters", 0, base="cnn"),
    *grid_cases("activation", "tanhh"),
    *grid_cases("epochs", 1),
    *grid_cases("batch_size", "64"),
    *grid_cases("schedule", "cosin"),
    *grid_cases("warmup_epochs", -1),
    *grid_cases("momentum", 1.0),
    *grid_cases("kernel_scale", "0.5", good=0.5),
    *grid_cases("baseline_kernel_scale", 0),
    *grid_cases("optimizers", "lion", good="sgd"),
]

OTHERS = [
    # The top level.
    case(None, "description", 1),
    case(None, "description", ["A study."]),
    case(None, "protocol", 4),
    case(None, "protocol", 3.0),
    case(None, "protocol", True),
    case(None, "protocol", "3"),
    case(None, "comparison", {"family": "mlp"}),
    *(case(None, t, 3) for t in ("compare", "search", "fixed", "grid")),
    *(case(None, t, 3) for t in study_module.OVERRIDE_TABLES),
    # [compare]
    case("compare", "family", "rnn"),
    case("compare", "family", 1),
    case("compare", "arms", ["dense", "afine_like"]),
    case("compare", "arms", ["dense", "conv"]),
    case("compare", "arms", "dense"),
    case("compare", "arms", [["dense"], "affine_like"]),
    case("compare", "arms", ["dense", "dense"]),
    case("compare", "comparators", ["dens"]),
    case("compare", "comparators", ["affine_like"]),
    case("compare", "comparators", "dense"),
    case("compare", "comparators", [["dense"]]),
    case("compare", "margin", -0.01),
    case("compare", "margin", 1.5),
    case("compare", "margin", math.nan),
    case("compare", "margin", "0.01"),
    case("compare", "margin", True),
    case("compare", "selects", ["depht"], extra=GRID),
    case("compare", "selects", "depth", extra=GRID),
    case("compare", "selects", [["depth"]], extra=GRID),
    case("compare", "selects", ["depth", "depth"], extra=GRID),
    case("compare", "extends", "smok"),
    case("compare", "extends", 3),
    case("compare", "familly", "mlp"),
    # Unknown and missing keys.
    case("search", "optimiser", "sgd"),
    case("fixed", "learning_rate_decay", 0.1),
    case("quick", "bogus", 1),
    case("full", "bogus", 1),
    case("quick", "filters", 4),
    case("grid", "bogus", [1, 2]),
    case("grid", "seeds", [1, 2]),
    case("grid", "learning_rate", [0.1, 1.0]),
    case("quick.grid", "width", [8]),
    case("full.grid", "depth", [2], received="depth=[2]"),
    case("fixed", "seeds", REMOVE, received="missing=['seeds']"),
    case("search", "tuner", REMOVE, received="missing=['tuner']"),
    case("compare", "arms", REMOVE, received="missing=['arms']"),
    # The `grid` of the override tables, and a [grid] key in the table.
    case("quick", "grid", 3),
    case("full", "grid", [1]),
    case("quick", "depth", 3, extra=GRID, received="depth=3"),
]

CASES = SEARCH_AND_FIXED + OVERRIDES + GRIDS + OTHERS


def _id(c):
    where = "top" if c["table"] is None else c["table"]
    value = "removed" if c["value"] is REMOVE else repr(c["value"])
    return f"{c['base']}:{where}.{c['key']}={value}"


def _inline(value):
    """`value` as a TOML value (inline tables for dicts)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, (int, float, datetime.date)):
        return str(value)
    if isinstance(value, list):
        return "[" + ", ".join(_inline(v) for v in value) + "]"
    if isinstance(value, dict):
        items = ", ".join(f"{k} = {_inline(v)}" for k, v in value.items())
        return "{" + items + "}"
    raise TypeError(f"no TOML for {value!r}")


def _toml(study):
    """The study (a dict of tables) as a TOML file."""
    tables = {k: v for k, v in study.items() if isinstance(v, dict)}
    lines = [f"{k} = {_inline(v)}" for k, v in study.items() if k not in tables]
    for name, table in tables.items():
        lines += ["", f"[{name}]"]
        lines += [f"{k} = {_inline(v)}" for k, v in table.items()]
    return "\n".join(lines) + "\n"


def _set(study, table, key, value):
    if table is None:
        target = study
    else:
        target = study
        for part in table.split("."):
            target = target.setdefault(part, {})
    if value is REMOVE:
        del target[key]
    else:
        target[key] = value


def _study(c):
    study = json.loads(json.dumps(BASES[c["base"]]))
    for table, changes in c["extra"].items():
        for key, value in changes.items():
            _set(study, table, key, value)
    _set(study, c["table"], c["key"], c["value"])
    return study


@pytest.fixture(autouse=True)
def _no_run(monkeypatch):
    """A study that passed the read-time checks would reach the runner."""

    def refuse(*args, **kwargs):
        raise AssertionError("the malformed study reached the runner")

    monkeypatch.setattr(runner, "run", refuse)
    monkeypatch.setattr(runner, "reproduce", refuse)


@pytest.mark.parametrize("name", sorted(BASES))
def test_the_bases_are_valid(tmp_path, name):
    path = tmp_path / f"{name}.toml"
    path.write_text(_toml(BASES[name]))
    for quick, full in ((False, False), (True, False), (False, True)):
        study = study_module.load_study(path, quick=quick, full=full)
        assert study.conditions()


# Each case as the plain command reads it, and a case of an override table
# also with the flag that applies it.
RUNS = [(c, None) for c in CASES] + [
    (c, f"--{table}")
    for c in CASES
    for table in study_module.OVERRIDE_TABLES
    if (c["table"] or "").split(".")[0] == table
]


@pytest.mark.parametrize(
    "c, flag",
    RUNS,
    ids=[_id(c) + (f" {flag}" if flag else "") for c, flag in RUNS],
)
def test_a_malformed_study_file_is_refused_when_read(tmp_path, capsys, c, flag):
    path = tmp_path / "bad.toml"
    path.write_text(_toml(_study(c)))
    results, runs = tmp_path / "results", tmp_path / "runs"
    argv = [
        path,
        "--results-dir",
        results,
        "--runs-dir",
        runs,
        "--data-dir",
        tmp_path / "no-data",
    ]
    code = sweep.main([*argv, *([flag] if flag else [])])
    captured = capsys.readouterr()
    err = captured.err
    assert code == 2, err
    assert err.startswith(f"error: Malformed study file {path}"), err
    assert err.count("\n") == 1 and err.endswith("\n"), err
    assert "Traceback" not in err and not captured.out
    assert "Received: " in err, err
    received = err.split("Received: ", 1)[1]
    assert c["received"] in received, err
    assert not results.exists() and not runs.exists()


def _keys_of_a_study_file():
    """Every (table, key) study.py takes; `None`: the top level."""
    families = tuple(study_module.FIXED_KEYS)
    fixed = {k for keys in study_module.FIXED_KEYS.values() for k in keys}
    grid = {k for f in families for k in study_module.grid_keys(f)}
    keys = {(None, k) for k in study_module.TABLES}
    keys |= {("compare", k) for k in study_module.COMPARE_KEYS}
    keys |= {("search", k) for k in study_module.SEARCH_KEYS}
    keys |= {("fixed", k) for k in fixed}
    keys |= {("grid", k) for k in grid}
    for table in study_module.OVERRIDE_TABLES:
        keys |= {(table, k) for k in study_module.SEARCH_KEYS}
        keys |= {(table, k) for k in fixed}
        keys |= {(table, "grid")}
        keys |= {(f"{table}.grid", k) for k in grid}
    return keys


def test_the_table_covers_every_key_of_a_study_file():
    covered = {(c["table"], c["key"]) for c in CASES}
    assert _keys_of_a_study_file() - covered == set()


# Keys whose values are names: a misspelt one is in the table too.
NAMES = {
    ("compare", "family"): "rnn",
    ("compare", "arms"): ["dense", "afine_like"],
    ("compare", "comparators"): ["dens"],
    ("compare", "selects"): ["depht"],
    ("compare", "extends"): "smok",
    ("search", "tuner"): "brackets",
    ("search", "optimizers"): ["sdg"],
    ("fixed", "dataset"): "cifar100",
    ("fixed", "activation"): "tanhh",
    ("fixed", "schedule"): "cosin",
    ("fixed", "kernel_scale"): {"afine_like": 0.5},
    ("grid", "optimizers"): ["lion"],
    ("grid", "activation"): ["tanhh"],
}


def test_the_table_has_a_misspelt_value_for_every_name():
    values = {}
    for c in CASES:
        values.setdefault((c["table"], c["key"]), []).append(c["value"])
    for key, misspelt in NAMES.items():
        assert misspelt in values[key], key


def test_the_names_are_those_the_runner_takes():
    from keras_affine_div import datasets
    from keras_affine_div import hypermodels
    from keras_affine_div import models

    assert study_module.OPTIMIZERS == hypermodels.OPTIMIZERS
    assert study_module.SCHEDULES == hypermodels.SCHEDULES
    assert study_module.DATASETS == datasets.NAMES
    assert tuple(study_module.DATASET_SIZES) == study_module.DATASETS
    assert tuple(study_module.FIXED_KEYS) == models.FAMILIES


@pytest.mark.parametrize("name", study_module.list_studies())
def test_every_shipped_study_loads_with_each_override_table(name):
    for quick, full in ((False, False), (True, False), (False, True)):
        study = study_module.load_study(name, quick=quick, full=full)
        assert study.conditions()
