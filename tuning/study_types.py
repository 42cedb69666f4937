"""`Study` and `Condition`: a study as read from its file.

A `Study` holds the values of its file and answers what they imply: its
conditions, the study at one of them, its results folder, the seeds its
search trials (`trial_seed`) and seed reruns (`rerun_seed`) train from, a
repeat of its search from another seed, and its JSON config.
"""

import dataclasses
import itertools
import re

from tuning.study_keys import DEFAULT_MARGIN
from tuning.study_keys import DEFAULT_PROTOCOL
from tuning.study_keys import MODEL_KEYS
from tuning.study_keys import REPEATS_DIR
from tuning.study_keys import RERUN_SEED_BASE
from tuning.study_keys import TRIAL_SEED_BASE
from tuning.study_keys import StudyError
from tuning.study_keys import arm_names

# Defaults that a study's config leaves out, so that the config, and the
# fingerprint of a study written before they existed, stay as they were.
_UNWRITTEN_DEFAULTS = {"baseline_kernel_scale": None}


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
            # `study_checks.check_values`, which reports a missing one).
            (optimizer,) = search["optimizers"]
            if optimizer in windows:
                search["learning_rate"] = windows[optimizer]
        return dataclasses.replace(self, search=search, fixed=fixed)

    @property
    def our_arms(self):
        """The arms of the study that are layers of ours."""
        ours = arm_names(self.family, ours=True)
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


def _slug(value):
    text = str(value).lower() if isinstance(value, bool) else str(value)
    return re.sub(r"[^A-Za-z0-9.+]+", "-", text).strip("-") or "none"


def _jsonable(table):
    return {k: list(v) if isinstance(v, tuple) else v for k, v in table.items()}
