"""Checks of a study's values, against what the runner takes later.

`check_value` checks one `[search]` or `[fixed]` value alone: its type
and range (names of arms, optimisers, schedules, datasets and Keras
activations; integers that are not booleans or floats; finite numbers; a
`seed` whose trial seeds stay within `MAX_SEED`). `check_values` checks
the values of a study together: the learning-rate windows and the
optimisers, the bracketing search, the warm-up and the run, the kernel
scales, the subsets and the dataset's splits, a CNN's depth and its
images. A bad value raises `StudyError`, one line naming the key, the
value received and what the key takes.
"""

import itertools
import math

from tuning.study_keys import DATASET_SIZES
from tuning.study_keys import DATASETS
from tuning.study_keys import MAX_SEARCH_SEED
from tuning.study_keys import OPTIMIZERS
from tuning.study_keys import RERUN_SEED_BASE
from tuning.study_keys import SCHEDULES
from tuning.study_keys import TRIAL_SEED_BASE
from tuning.study_keys import TUNERS
from tuning.study_keys import StudyError
from tuning.study_keys import arm_names


def check_values(study, where):
    """Checks the values of `study.search` and `study.fixed`.

    Each value alone (`check_value`), then the values together: the
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
        check_value(key, value, study.family, where)
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
    # `depth > bit_length - 1` is `2 ** depth > side`, without computing a
    # power that a huge depth would make take all memory.
    if study.family == "cnn" and f["depth"] > size["side"].bit_length() - 1:
        raise StudyError(
            f"{where}: the `depth` of a CNN must be at most "
            f"{size['side'].bit_length() - 1}, one 2x2 pooling per stage of "
            f"the {size['side']}x{size['side']} {dataset} images. "
            f"Received: depth={f['depth']!r}, dataset={dataset!r}"
        )


def check_value(key, value, family, where, table=None):
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
            and all(is_number(v) and math.isfinite(v) for v in value)
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
    if is_number(value) and 0 <= value < 1:
        return None
    return "a number in [0, 1)"


def _kernel_scale(value, family):
    ours = arm_names(family, ours=True)
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
# it takes, else what it takes (see `check_value`).
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
        and all(is_number(v) and math.isfinite(v) for v in limits)
        and 0 < limits[0] <= lr[0] < lr[1] <= limits[1]
    ):
        raise StudyError(
            f"{where}: `learning_rate_limits` must be `[min, max]` with "
            "0 < min <= the learning_rate window <= max. Received: "
            f"learning_rate_limits={limits!r}, learning_rate={lr!r}"
        )


def is_number(value):
    """An `int` or a `float`, not a `bool`."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _is_positive(value):
    """A finite number above 0."""
    return is_number(value) and math.isfinite(value) and value > 0
