"""Study files: what a study compares, searches and fixes.

A study is a TOML file (data, never code) in `tuning/studies/`, or any path
ending in `.toml`. It has four tables:

- `[compare]`: `family` (`"mlp"` or `"cnn"`) and `arms`, the model variants
  compared (the scientific choice, one KerasTuner project per arm);
  optionally `comparators`, the arms our arms are tested against (declared
  before any data; default: every arm that is not one of ours), and
  `margin`, the non-inferiority margin in accuracy (default `0.01`).
- `[search]`: the nuisance hyperparameters, searched alike for every arm:
  `tuner` (`"bracket"`, `"random"` or `"bayesian"`), `max_trials` per arm,
  `learning_rate` (`[low, high]`: the initial log grid of `"bracket"`, the
  log-uniform range of the others), `optimizers`, and the oracle `seed`.
  `learning_rate` may also be a table of one window per optimiser
  (`{sgd = [0.03, 0.3], adam = [1e-3, 1e-2]}`) where each condition
  searches one optimiser, as the bracketing search does.
  `"bracket"` (protocol v2) searches the learning rate alone, with
  `lr_step` (decades between grid points, default `0.5`) and
  `learning_rate_limits` (how far it may extend, default `[1e-6, 100]`);
  each condition then names one optimiser. `"random"` and `"bayesian"` may
  also search `kernel_scales` (our arms only).
- `[fixed]`: `dataset`, the subset sizes `train_samples`, `val_samples`,
  `test_samples`, the model size (`depth` and `width` for MLPs, `depth` and
  `filters` for CNNs), `activation`, `epochs`, `batch_size`, and `seeds`,
  the number of seeds the best setting of each arm is retrained on;
  optionally the training protocol, the same for every arm: `schedule`
  (`"constant"`, the default, or `"cosine"`), `warmup_epochs` (default 0),
  `momentum` of SGD (default 0.9), `kernel_scale`, the fixed kernel
  scale of our arms (a number for all of them, or a table of one per arm,
  `{affine_like = 0.125, norm_like = 0.25}`; default: the layers' own
  initialiser), and
  `baseline_kernel_scale`, a fixed multiplier on the Glorot kernels of the
  plain baseline (`dense`, `conv`; default: Keras' own).
- `[grid]` (optional): the conditions. Each key is a `[fixed]` key (other
  than `seeds`) or `optimizers`, mapped to a list of values; the study runs
  every combination of them (a *condition*) for every arm, each (condition,
  arm) with its own search. A grid value replaces the `[fixed]` one (which
  may then be left out); an `optimizers` value is one optimiser name, the
  only one that condition searches. Without `[grid]`, the study has one
  implicit condition.
- `[quick]` and `[full]` (optional): overrides of `[search]` and `[fixed]`
  keys used by `--quick` (a pipeline check in minutes) and `--full` (a GPU
  or Colab: the full data, more epochs and trials). Grid values are
  overridden in a `[quick.grid]` or `[full.grid]` table, key by key.

Two top-level keys besides `description`:

- `protocol` (`2`, the default, or `3`): under protocol 3 the seed reruns
  of a cell train from seeds `RERUN_SEED_BASE + i` (`i` = 0, 1, ...), apart
  from every search trial's (`seed * TRIAL_SEED_BASE + trial`), so that no
  rerun replays the trial that won the search; under protocol 2 rerun `i`
  trains from seed `i`, which is search trial `i`'s seed when the search
  seed is 0.
- `selects` in `[compare]`: the `[grid]` keys a *selection study* (a pilot)
  chooses. Its report ranks their values on validation accuracy only and
  shows no test number.
- `extends` in `[compare]`: another study whose cells this one adds arms
  to (say, a comparator it lacked), with the same `[search]`, `[fixed]`
  (but `seeds`) and conditions it runs. Its report tests the other
  study's arms of ours against its own comparators, on both studies' rows.

Every value of the file is checked when it is read, before any data loads,
against what the runner takes later: each value alone (its type and range:
names of arms, optimisers, schedules, datasets and Keras activations;
integers that are not booleans or floats; finite numbers; a `seed` whose
trial seeds stay within `MAX_SEED`), also a `[fixed]` or `[search]` value
that the grid replaces, every grid value, and the overrides of `[quick]`
and `[full]` whether or not they are applied; then the values together, for
the study as written and with each override table (a warm-up shorter than
the run, subsets that fit in the dataset's splits, a CNN no deeper than its
images allow, ...). A bad value raises `StudyError`, one line naming the
key, the value received and what the key takes.
"""

import dataclasses
import itertools
import math
import pathlib
import re
import tomllib

STUDIES_DIR = pathlib.Path(__file__).resolve().parent / "studies"

TUNERS = ("bracket", "random", "bayesian")
SCHEDULES = ("constant", "cosine")
DATASETS = ("cifar10", "fashion_mnist")
OPTIMIZERS = ("sgd", "adam")
TABLES = (
    "description",
    "protocol",
    "compare",
    "search",
    "fixed",
    "grid",
    "quick",
    "full",
)
OVERRIDE_TABLES = ("quick", "full")
COMPARE_KEYS = (
    "family",
    "arms",
    "comparators",
    "margin",
    "selects",
    "extends",
)
PROTOCOLS = (2, 3)
DEFAULT_PROTOCOL = 2
# Search trial `t` of a study with search seed `s` trains from seed
# `s * TRIAL_SEED_BASE + t`; under protocol 3, seed rerun `i` from
# `RERUN_SEED_BASE + i`, which no search seed below
# `RERUN_SEED_BASE // TRIAL_SEED_BASE` reaches.
TRIAL_SEED_BASE = 100_000
RERUN_SEED_BASE = 1_000_000_000
# `keras.utils.set_random_seed` takes seeds up to `MAX_SEED` (NumPy's);
# with at most `TRIAL_SEED_BASE` trials per search, every trial seed of a
# search seed up to `MAX_SEARCH_SEED` stays within it.
MAX_SEED = 2**32 - 1
MAX_SEARCH_SEED = (MAX_SEED + 1) // TRIAL_SEED_BASE - 1
# The images of each dataset: its training split (which the validation
# samples come from), its test split, and the side of its square images (a
# CNN pools each side by 2 per stage).
DATASET_SIZES = {
    "cifar10": {"train": 50_000, "test": 10_000, "side": 32},
    "fashion_mnist": {"train": 60_000, "test": 10_000, "side": 28},
}
# Where a study's repeated searches go, inside its results and runs folders.
REPEATS_DIR = "repeats"
COMPARE_REQUIRED = ("family", "arms")
DEFAULT_MARGIN = 0.01
SEARCH_KEYS = (
    "tuner",
    "max_trials",
    "learning_rate",
    "optimizers",
    "kernel_scales",
    "seed",
    "lr_step",
    "learning_rate_limits",
)
# Keys that may be left out, with their defaults (`None`: not set).
SEARCH_DEFAULTS = {
    "kernel_scales": None,
    "lr_step": 0.5,
    "learning_rate_limits": [1e-6, 100.0],
}
FIXED_DEFAULTS = {
    "schedule": "constant",
    "warmup_epochs": 0,
    "momentum": 0.9,
    "kernel_scale": None,
    "baseline_kernel_scale": None,
}
# Defaults that a study's config leaves out, so that the config, and the
# fingerprint of a study written before they existed, stay as they were.
_UNWRITTEN_DEFAULTS = {"baseline_kernel_scale": None}
FIXED_KEYS = {
    "mlp": (
        "dataset",
        "train_samples",
        "val_samples",
        "test_samples",
        "depth",
        "width",
        "activation",
        "epochs",
        "batch_size",
        "seeds",
        *FIXED_DEFAULTS,
    ),
    "cnn": (
        "dataset",
        "train_samples",
        "val_samples",
        "test_samples",
        "depth",
        "filters",
        "activation",
        "epochs",
        "batch_size",
        "seeds",
        *FIXED_DEFAULTS,
    ),
}
MODEL_KEYS = {
    "mlp": ("depth", "width", "activation"),
    "cnn": ("depth", "filters", "activation"),
}


def grid_keys(family):
    """The keys a `[grid]` may vary: `[fixed]` keys but `seeds`, and
    `optimizers`."""
    return tuple(k for k in FIXED_KEYS[family] if k != "seeds") + (
        "optimizers",
    )


class StudyError(ValueError):
    """A study that cannot be found or read."""


@dataclasses.dataclass(frozen=True)
class Condition:
    """One combination of the values of a study's `[grid]`.

    Attributes:
        name: a name made of the keys and values
            (`"activation-tanh_depth-3"`), also the folder of its
            KerasTuner projects; `""` for a study without `[grid]`.
        values: dict, grid key to value, in the grid's order.
    """

    name: str
    values: dict


@dataclasses.dataclass(frozen=True)
class Study:
    """One study, as read from its file.

    Attributes:
        name: the study's name (its file name without `.toml`).
        path: the file it was read from.
        description: one line saying what the study asks.
        family: `"mlp"` or `"cnn"`.
        arms: the model variants compared.
        search: dict of the `[search]` table.
        fixed: dict of the `[fixed]` table.
        grid: dict of the `[grid]` table (key to list of values), `{}`
            without one.
        comparators: the arms our arms are tested against.
        margin: the non-inferiority margin, in accuracy.
        quick: whether `[quick]` overrides were applied.
        full: whether `[full]` overrides were applied.
        protocol: `2` or `3`; under 3 the seed reruns train from seeds
            apart from the search trials' (`rerun_seed`).
        selects: the `[grid]` keys a selection study chooses on
            validation; `()` for a comparison.
        repeat_of: for a repeated search (`repeat`), the search seed of
            the study it repeats; `None` otherwise.
        extends: the name of the study this one adds arms to, or `None`.
    """

    name: str
    path: str
    description: str
    family: str
    arms: tuple
    search: dict
    fixed: dict
    grid: dict = dataclasses.field(default_factory=dict)
    quick: bool = False
    full: bool = False
    comparators: tuple = ()
    margin: float = DEFAULT_MARGIN
    protocol: int = DEFAULT_PROTOCOL
    selects: tuple = ()
    repeat_of: int = None
    extends: str = None

    def rerun_seed(self, index):
        """The seed rerun `index` (0, 1, ...) of a cell trains from."""
        return rerun_seed(self.protocol, index)

    def trial_seed(self, trial_id):
        """The seed search trial `trial_id` trains from."""
        return trial_seed(self.search["seed"], trial_id)

    @property
    def results_name(self):
        """Folder name of the study's results and runs (for a repeated
        search, `<study>/repeats/search-seed-<seed>`)."""
        if self.quick:
            name = f"{self.name}-quick"
        else:
            name = f"{self.name}-full" if self.full else self.name
        if self.repeat_of is not None:
            name = f"{name}/{REPEATS_DIR}/search-seed-{self.search['seed']}"
        return name

    def repeat(self, search_seed):
        """The same study searched again from another search seed.

        Every cell's search then draws its trials from `search_seed`, and
        its seed reruns train from protocol 3's seeds (apart from both
        searches' trials); the results go to
        `<study>/repeats/search-seed-<search_seed>/`. How far the two
        searches' choices lie apart is the selection noise the report
        carries.

        Raises:
            StudyError: for the study's own search seed, a repeat of a
                repeat, or a seed protocol 3 does not allow.
        """
        if self.repeat_of is not None:
            raise StudyError(
                "A repeated search is repeated from its study, not from "
                f"another repeat. Received: study={self.results_name!r}"
            )
        own = self.search["seed"]
        if (
            isinstance(search_seed, bool)
            or not isinstance(search_seed, int)
            or search_seed < 0
            or search_seed == own
            or (search_seed + 1) * TRIAL_SEED_BASE > RERUN_SEED_BASE
        ):
            raise StudyError(
                "A repeated search needs a search seed other than the "
                f"study's ({own}): an integer from 0 to "
                f"{RERUN_SEED_BASE // TRIAL_SEED_BASE - 1}. "
                f"Received: search_seed={search_seed!r}"
            )
        return dataclasses.replace(
            self.replace(search={"seed": search_seed}),
            protocol=3,
            repeat_of=own,
        )

    def conditions(self):
        """Returns every combination of the grid values, in grid order.

        Returns:
            tuple: of `Condition`; one unnamed condition without `[grid]`.
        """
        keys = list(self.grid)
        return tuple(
            Condition(
                name="_".join(f"{k}-{_slug(v)}" for k, v in zip(keys, values)),
                values=dict(zip(keys, values)),
            )
            for values in itertools.product(*self.grid.values())
        )

    def condition(self, name):
        """Returns the condition called `name`.

        Raises:
            StudyError: if the study has no such condition.
        """
        for condition in self.conditions():
            if condition.name == name:
                return condition
        raise StudyError(
            f"Unknown condition of study {self.results_name!r}. Expected "
            f"one of {[c.name for c in self.conditions()]}. "
            f"Received: condition={name!r}"
        )

    def at(self, condition):
        """Returns the study with the values of `condition` applied.

        `optimizers` becomes the one optimiser of the condition; every other
        grid key replaces its `[fixed]` value.
        """
        search, fixed = dict(self.search), dict(self.fixed)
        for key, value in condition.values.items():
            if key == "optimizers":
                search[key] = [value]
            else:
                fixed[key] = value
        windows = search.get("learning_rate")
        if isinstance(windows, dict) and len(search["optimizers"]) == 1:
            # One window per optimiser: the condition's (checked in
            # `check_values`, which reports a missing one).
            (optimizer,) = search["optimizers"]
            if optimizer in windows:
                search["learning_rate"] = windows[optimizer]
        return dataclasses.replace(self, search=search, fixed=fixed)

    @property
    def our_arms(self):
        """The arms of the study that are layers of ours."""
        ours = _arm_names(self.family, ours=True)
        return tuple(arm for arm in self.arms if arm in ours)

    @property
    def model_kwargs(self):
        """Keyword arguments of the hypermodel that set the model size."""
        return {key: self.fixed[key] for key in MODEL_KEYS[self.family]}

    def replace(self, **changes):
        """Returns a copy with `search` or `fixed` entries changed."""
        search = dict(self.search, **changes.get("search", {}))
        fixed = dict(self.fixed, **changes.get("fixed", {}))
        return dataclasses.replace(self, search=search, fixed=fixed)

    def config(self):
        """Returns the study as a JSON-serialisable dict."""
        config = {
            "name": self.name,
            "description": self.description,
            "quick": self.quick,
            "compare": {
                "family": self.family,
                "arms": list(self.arms),
                "comparators": list(self.comparators),
                "margin": self.margin,
            },
            "search": _jsonable(self.search),
            "fixed": _jsonable(self.fixed),
        }
        # Only where used, so that the config of an older study is unchanged.
        if self.full:
            config["full"] = True
        if self.grid:
            config["grid"] = _jsonable(self.grid)
        if self.protocol != DEFAULT_PROTOCOL:
            config["protocol"] = self.protocol
        if self.selects:
            config["compare"]["selects"] = list(self.selects)
        if self.repeat_of is not None:
            config["repeat_of"] = self.repeat_of
        if self.extends is not None:
            config["compare"]["extends"] = self.extends
        for key, value in _UNWRITTEN_DEFAULTS.items():
            if key in config["fixed"] and config["fixed"][key] == value:
                del config["fixed"][key]
        return config


def rerun_seed(protocol, index):
    """The seed that seed rerun `index` (0, 1, ...) of a cell trains from:
    `index` under protocol 2, `RERUN_SEED_BASE + index` under protocol 3."""
    index = int(index)
    return index if int(protocol) == 2 else RERUN_SEED_BASE + index


def trial_seed(search_seed, trial_id):
    """The seed search trial `trial_id` trains from, for the study's search
    seed `search_seed`."""
    return int(search_seed) * TRIAL_SEED_BASE + int(trial_id)


def list_studies():
    """Returns the names of the studies shipped in `tuning/studies/`.

    Returns:
        list: sorted study names.
    """
    return sorted(p.stem for p in STUDIES_DIR.glob("*.toml"))


def load_study(name_or_path, quick=False, full=False):
    """Reads and checks a study.

    Args:
        name_or_path: a study name from `list_studies()`, or a path to a
            `.toml` study file.
        quick: whether to apply the study's `[quick]` overrides.
        full: whether to apply the study's `[full]` overrides.

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
    return studies[(quick, full)]


def _parse(data, path, quick, full):
    where = f"Malformed study file {path}"
    for table, applied in zip(OVERRIDE_TABLES, (quick, full)):
        if applied and table in data:
            # What the overrides make of the study, not the file's values.
            where = f"{where} (with its [{table}] overrides)"
    _check_keys(data, TABLES, "top level", where)
    for table in ("compare", "search", "fixed"):
        if not isinstance(data.get(table), dict):
            raise StudyError(
                f"{where}: expected a `[{table}]` table. "
                f"Received: {table}={data.get(table)!r}"
            )
    compare = data["compare"]
    _check_keys(
        compare,
        COMPARE_KEYS,
        "[compare]",
        where,
        required=True,
        optional=set(COMPARE_KEYS) - set(COMPARE_REQUIRED),
    )
    family = compare["family"]
    families = _families()
    if family not in families:
        raise StudyError(
            f"{where}: `family` must be one of {families}. "
            f"Received: family={family!r}"
        )
    arms = compare["arms"]
    variants = _arm_names(family)
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
    ours = _arm_names(family, ours=True)
    comparators = compare.get(
        "comparators", [arm for arm in arms if arm not in ours]
    )
    if (
        not isinstance(comparators, list)
        or any(arm not in arms or arm in ours for arm in comparators)
        or len(set(comparators)) != len(comparators)
    ):
        raise StudyError(
            f"{where}: `comparators` must be a list of distinct arms of the "
            f"study that are not ours ({', '.join(ours)}). "
            f"Received: comparators={comparators!r}, arms={arms!r}"
        )
    margin = compare.get("margin", DEFAULT_MARGIN)
    if not (_is_number(margin) and math.isfinite(margin) and margin >= 0):
        raise StudyError(
            f"{where}: `margin` must be a number >= 0 (accuracy). "
            f"Received: margin={margin!r}"
        )
    if margin >= 1:
        raise StudyError(
            f"{where}: `margin` must be a number below 1 (a difference of "
            f"accuracies). Received: margin={margin!r}"
        )
    search = dict(data["search"])
    fixed = dict(data["fixed"])
    grid = _parse_grid(data.get("grid", {}), family, "[grid]", where)
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
    selects = compare.get("selects", [])
    if (
        not isinstance(selects, list)
        or any(not isinstance(key, str) or key not in grid for key in selects)
        or len(set(selects)) != len(selects)
    ):
        raise StudyError(
            f"{where}: `selects` must be a list of distinct [grid] keys, the "
            f"settings the study chooses ({list(grid)}). "
            f"Received: selects={selects!r}"
        )
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
        _check_value(key, value, family, where)
    for table in OVERRIDE_TABLES:
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
            _check_value(key, value, family, where, f"[{table}]")
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
    for condition in study.conditions():
        check_values(study.at(condition), where)
    return study


def _check_extends(study, where):
    """A study that adds arms to another runs exactly its settings."""
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
    if other.extends is not None:
        raise StudyError(
            f"{where}: `extends` must name a study that extends none. "
            f"Received: extends={parent!r}, which extends {other.extends!r}"
        )
    shared = sorted(set(study.arms) & set(other.arms))
    if shared:
        raise StudyError(
            f"{where}: the arms added to {parent!r} must be new to it. "
            f"Received: arms={shared}"
        )

    def settings(s):
        search = {k: v for k, v in s.search.items() if k != "max_trials"}
        fixed = {k: v for k, v in s.fixed.items() if k != "seeds"}
        return s.family, search, fixed, list(s.grid)

    theirs = {c.name for c in other.conditions()}
    missing = [c.name for c in study.conditions() if c.name not in theirs]
    if settings(study) != settings(other) or missing:
        raise StudyError(
            f"{where}: a study that extends {parent!r} must have its family, "
            "[search] (but max_trials), [fixed] (but seeds) and [grid] keys, "
            "and only conditions it has. Received: "
            + (f"conditions={missing}" if missing else "other settings")
        )


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
                _check_value(key, value, family, where, table)
    # In the order of the grid keys, so that condition names do not depend
    # on the order of the file.
    return {key: list(grid[key]) for key in allowed if key in grid}


def check_values(study, where):
    """Checks the values of `study.search` and `study.fixed`.

    Each value alone (`_check_value`), then the values together: the
    learning-rate windows and the optimisers, the bracketing search, the
    warm-up and the run, the kernel scales, the subset sizes and the
    dataset, a CNN's depth and the image size.

    Args:
        study: a `Study`.
        where: the start of the error message (the file, or the flag).

    Raises:
        StudyError: for a value out of range or of the wrong type.
    """
    s, f = study.search, study.fixed
    for key, value in itertools.chain(s.items(), f.items()):
        _check_value(key, value, study.family, where)
    if (
        study.protocol >= 3
        and (s["seed"] + 1) * TRIAL_SEED_BASE > RERUN_SEED_BASE
    ):
        raise StudyError(
            f"{where}: under protocol 3 the search trials' seeds "
            f"(seed * {TRIAL_SEED_BASE} + trial) must stay below the seed "
            f"reruns' ({RERUN_SEED_BASE} + i); `seed` must be below "
            f"{RERUN_SEED_BASE // TRIAL_SEED_BASE}. "
            f"Received: seed={s['seed']!r}"
        )
    lr = s["learning_rate"]
    if isinstance(lr, dict):
        if len(s["optimizers"]) != 1:
            raise StudyError(
                f"{where}: a `learning_rate` table (one window per "
                "optimiser) needs one optimiser per condition; list the "
                "optimisers in `[grid]`. Received: "
                f"learning_rate={lr!r}, optimizers={s['optimizers']!r}"
            )
        raise StudyError(
            f"{where}: the `learning_rate` table must name every optimiser "
            f"of the study. Received: learning_rate={lr!r}, "
            f"optimizers={s['optimizers']!r}"
        )
    if s["tuner"] == "bracket":
        _check_bracket(s, f, where)
    if f["schedule"] == "cosine" and f["warmup_epochs"] >= f["epochs"]:
        raise StudyError(
            f"{where}: the warm-up must be shorter than the run. Received: "
            f"warmup_epochs={f['warmup_epochs']!r}, epochs={f['epochs']!r}"
        )
    scale, scales = f["kernel_scale"], s["kernel_scales"]
    if scale is not None and scales is not None:
        raise StudyError(
            f"{where}: set either `kernel_scale` in [fixed] or "
            "`kernel_scales` in [search], not both. Received: "
            f"kernel_scale={scale!r}, kernel_scales={scales!r}"
        )
    _check_sizes(study, where)


def _check_sizes(study, where):
    """The subsets fit in the dataset's splits, a CNN in its images."""
    f = study.fixed
    dataset = f["dataset"]
    size = DATASET_SIZES[dataset]
    if f["train_samples"] + f["val_samples"] > size["train"]:
        raise StudyError(
            f"{where}: `train_samples` + `val_samples` must be at most the "
            f"{size['train']} images of the {dataset} training split. "
            f"Received: train_samples={f['train_samples']!r}, "
            f"val_samples={f['val_samples']!r}, dataset={dataset!r}"
        )
    if f["test_samples"] > size["test"]:
        raise StudyError(
            f"{where}: `test_samples` must be at most the {size['test']} "
            f"images of the {dataset} test split. "
            f"Received: test_samples={f['test_samples']!r}, "
            f"dataset={dataset!r}"
        )
    if study.family == "cnn" and 2 ** f["depth"] > size["side"]:
        raise StudyError(
            f"{where}: the `depth` of a CNN must be at most "
            f"{size['side'].bit_length() - 1}, one 2x2 pooling per stage of "
            f"the {size['side']}x{size['side']} {dataset} images. "
            f"Received: depth={f['depth']!r}, dataset={dataset!r}"
        )


def _check_value(key, value, family, where, table=None):
    """Checks the value of one `[search]` or `[fixed]` key alone, its type
    and range, as the runner will take it (each window of a `learning_rate`
    table, one by one).

    Args:
        key: a key of `SEARCH_KEYS` or `FIXED_KEYS[family]`.
        value: its value (`None` for a default that sets nothing).
        family: the study's family (`"mlp"` or `"cnn"`).
        where: the start of the error message.
        table: the table the value is in, named in the message (`None`:
            `[search]`, `[fixed]` or `[grid]`, which the key says).

    Raises:
        StudyError: saying what the key takes.
    """
    if key == "learning_rate" and isinstance(value, dict):
        values = list(value.values())
    else:
        values = [value]
    for one in values:
        expected = _VALUE_CHECKS[key](one, family)
        if expected is not None:
            in_table = f" in {table}" if table else ""
            raise StudyError(
                f"{where}: `{key}`{in_table} must be {expected}. "
                f"Received: {key}={one!r}"
            )


def _choice(choices):
    def check(value, family):
        return None if value in choices else f"one of {choices}"

    return check


def _integer(minimum, maximum=None):
    def check(value, family):
        if not _is_int(value) or value < minimum:
            return f"an integer >= {minimum}"
        if maximum is not None and value > maximum:
            return f"an integer from {minimum} to {maximum}"
        return None

    return check


def _window(low_high, inside):
    """`[low, high]` of finite numbers with `0 < low < high`."""

    def check(value, family):
        if (
            isinstance(value, list)
            and len(value) == 2
            and all(_is_number(v) and math.isfinite(v) for v in value)
            and 0 < value[0] < value[1]
        ):
            return None
        return f"`{low_high}` with {inside}"

    return check


def _optimizers(value, family):
    if (
        isinstance(value, list)
        and value
        and all(o in OPTIMIZERS for o in value)
        and len(set(value)) == len(value)
    ):
        return None
    return f"a non-empty list of distinct names from {OPTIMIZERS}"


def _kernel_scales(value, family):
    if value is None or (
        isinstance(value, list)
        and value
        and all(_is_positive(v) for v in value)
        and len(set(value)) == len(value)
    ):
        return None
    return "a non-empty list of distinct finite positive numbers"


def _lr_step(value, family):
    return None if _is_positive(value) else "a positive number of decades"


def _activation(value, family):
    if not isinstance(value, str):
        return "a string"
    import keras

    try:
        keras.activations.get(value)
    except (ValueError, TypeError):
        return (
            "a Keras activation name (such as 'tanh', 'relu' or 'leaky_relu')"
        )
    return None


def _momentum(value, family):
    if _is_number(value) and 0 <= value < 1:
        return None
    return "a number in [0, 1)"


def _kernel_scale(value, family):
    ours = _arm_names(family, ours=True)
    if (
        value is None
        or _is_positive(value)
        or (
            isinstance(value, dict)
            and value
            and all(arm in ours for arm in value)
            and all(_is_positive(v) for v in value.values())
        )
    ):
        return None
    return (
        "a positive number, or a table of one for each of some of our arms "
        f"({', '.join(ours)})"
    )


def _baseline_kernel_scale(value, family):
    if value is None or _is_positive(value):
        return None
    return "a positive number"


# What each `[search]` and `[fixed]` key takes, alone: `None` for a value
# it takes, else what it takes (see `_check_value`).
_VALUE_CHECKS = {
    "tuner": _choice(TUNERS),
    "max_trials": _integer(1, TRIAL_SEED_BASE),
    "learning_rate": _window("[low, high]", "0 < low < high"),
    "optimizers": _optimizers,
    "kernel_scales": _kernel_scales,
    "seed": _integer(0, MAX_SEARCH_SEED),
    "lr_step": _lr_step,
    "learning_rate_limits": _window("[min, max]", "0 < min < max"),
    "dataset": _choice(DATASETS),
    "train_samples": _integer(1),
    "val_samples": _integer(1),
    "test_samples": _integer(1),
    "depth": _integer(1),
    "width": _integer(1),
    "filters": _integer(1),
    "activation": _activation,
    "epochs": _integer(1),
    "batch_size": _integer(1),
    "seeds": _integer(1),
    "schedule": _choice(SCHEDULES),
    "warmup_epochs": _integer(0),
    "momentum": _momentum,
    "kernel_scale": _kernel_scale,
    "baseline_kernel_scale": _baseline_kernel_scale,
}


def _check_bracket(search, fixed, where):
    """The bracketing search varies the learning rate alone."""
    if len(search["optimizers"]) != 1:
        raise StudyError(
            f"{where}: the bracketing search varies the learning rate "
            "alone; give one optimiser, or make `optimizers` a [grid] key. "
            f"Received: optimizers={search['optimizers']!r}"
        )
    if search["kernel_scales"] is not None:
        raise StudyError(
            f"{where}: the bracketing search varies the learning rate "
            "alone; fix `kernel_scale` in [fixed] (or make it a [grid] "
            "key) instead of searching `kernel_scales`. "
            f"Received: kernel_scales={search['kernel_scales']!r}"
        )
    limits, lr = search["learning_rate_limits"], search["learning_rate"]
    if not (
        isinstance(limits, list)
        and len(limits) == 2
        and all(_is_number(v) and math.isfinite(v) for v in limits)
        and 0 < limits[0] <= lr[0] < lr[1] <= limits[1]
    ):
        raise StudyError(
            f"{where}: `learning_rate_limits` must be `[min, max]` with "
            "0 < min <= the learning_rate window <= max. Received: "
            f"learning_rate_limits={limits!r}, learning_rate={lr!r}"
        )


def _families():
    from keras_affine_div import models

    return models.FAMILIES


def _arm_names(family, ours=None):
    # Imported here so that reading a study does not import Keras.
    from keras_affine_div import models

    return models.arm_names(family, ours=ours)


def _check_keys(table, allowed, name, where, required=False, optional=()):
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


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_positive(value):
    """A finite number above 0."""
    return _is_number(value) and math.isfinite(value) and value > 0


def _slug(value):
    text = str(value).lower() if isinstance(value, bool) else str(value)
    return re.sub(r"[^A-Za-z0-9.+]+", "-", text).strip("-") or "none"


def _jsonable(table):
    return {k: list(v) if isinstance(v, tuple) else v for k, v in table.items()}
