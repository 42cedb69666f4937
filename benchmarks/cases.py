"""The benchmark's cases and its candidate models, by name.

A *candidate* is a named factory of the layers that follow the input scale
in a one-layer model (`Registry`); `CANDIDATES` holds the benchmark's own.
A profiling script times rewrites of the layers by registering them in a
copy of it (`CANDIDATES.copy()`) and building its own cases from it
(`dataclasses.replace(case, candidates=...)`).

A *case* (`Case`) is one shape and the candidates timed on it, the
baseline first: `CASES["default"]` for the full and quick runs,
`CASES["smoke"]` tiny shapes under the same names for the tests. `MODES`
holds the settings of each mode (rounds, warm-up, memory).
"""

import dataclasses
import re

import keras

from benchmarks import layers as bench_layers
from keras_affine_div import layers as kad_layers

# The learning rate of every model's SGD (the JAX memory analysis replays
# the same update).
LEARNING_RATE = 1e-4

# Every convolution of the benchmark: 3x3, same padding.
CONV = dict(kernel_size=3, padding="same")


class Registry:
    """Candidate models by name: a factory of each one's layers.

    A factory takes the case's `units` (the units of a dense layer, the
    filters of a convolution) and returns the list of new layers that follow
    the input scale.

    Example:

    >>> registry = Registry()
    >>> registry.register("Dense", lambda units: [keras.layers.Dense(units)])
    >>> [type(layer).__name__ for layer in registry.layers("Dense", 4)]
    ['Dense']
    """

    def __init__(self, factories=None):
        self._factories = dict(factories or {})

    def register(self, name, factory):
        """Adds the candidate `name`, built by `factory(units)`.

        Args:
            name: str, the candidate's name in the results.
            factory: callable, `units` to a list of new layers.

        Raises:
            ValueError: if a candidate of that name is registered already.
        """
        if name in self._factories:
            raise ValueError(
                "Received an invalid value for argument `name`. Expected a "
                "name not registered yet. Received: name="
                f"{name!r}"
            )
        self._factories[name] = factory

    def layers(self, name, units):
        """Builds the layers of the candidate `name`.

        Args:
            name: a registered name.
            units: the units of a dense layer, the filters of a convolution.

        Returns:
            list: new Keras layers.

        Raises:
            ValueError: for a name not registered.
        """
        if name not in self._factories:
            raise ValueError(
                "Received an invalid value for argument `name`. Expected one "
                f"of {list(self._factories)}. Received: name={name!r}"
            )
        return list(self._factories[name](units))

    def names(self):
        """The registered names, in the order of registration (tuple)."""
        return tuple(self._factories)

    def copy(self):
        """A new `Registry` holding the same candidates."""
        return Registry(self._factories)

    def __contains__(self, name):
        return name in self._factories


@dataclasses.dataclass(frozen=True)
class Case:
    """One shape and the candidates timed on it.

    Attributes:
        name: the case's name in the results, e.g. `"dense_3072_1024"`.
        family: `"dense"` or `"conv"`.
        batch_size: the batch of every step.
        input_shape: tuple, one sample's shape.
        units: the units of a dense layer, the filters of a convolution.
        candidates: tuple of candidate names, the baseline first.
    """

    name: str
    family: str
    batch_size: int
    input_shape: tuple
    units: int
    candidates: tuple

    @property
    def baseline(self):
        return self.candidates[0]

    def record(self):
        """The case as its result record describes it (dict)."""
        size = "units" if self.family == "dense" else "filters"
        return {
            "name": self.name,
            "family": self.family,
            "batch_size": self.batch_size,
            "input_shape": list(self.input_shape),
            size: self.units,
        }


def _naive(kind):
    cls = bench_layers.NAIVE_PATCH_NORMS[kind]
    return lambda filters: [cls(filters, **CONV)]


# The benchmark's candidates.
CANDIDATES = Registry(
    {
        "Dense": lambda units: [keras.layers.Dense(units)],
        "AffineLikeDense": lambda units: [kad_layers.AffineLikeDense(units)],
        "NormLikeDense": lambda units: [kad_layers.NormLikeDense(units)],
        "Dense+LayerNormalization": lambda units: [
            keras.layers.Dense(units),
            keras.layers.LayerNormalization(),
        ],
        "Dense+BatchNormalization": lambda units: [
            keras.layers.Dense(units),
            keras.layers.BatchNormalization(),
        ],
        "UnitNormalization+Dense": lambda units: [
            keras.layers.UnitNormalization(),
            keras.layers.Dense(units),
        ],
        "Conv2D": lambda filters: [keras.layers.Conv2D(filters, **CONV)],
        "PatchNormConv2D": lambda filters: [
            kad_layers.PatchNormConv2D(filters, **CONV)
        ],
        "AffineLikeConv2D": lambda filters: [
            kad_layers.AffineLikeConv2D(filters, **CONV)
        ],
        "Conv2D+BatchNormalization": lambda filters: [
            keras.layers.Conv2D(filters, **CONV),
            keras.layers.BatchNormalization(),
        ],
        "Conv2D+GroupNormalization": lambda filters: [
            keras.layers.Conv2D(filters, **CONV),
            keras.layers.GroupNormalization(min(32, filters)),
        ],
        "NaivePatchNorm(extract_patches)": _naive("extract_patches"),
        "NaivePatchNorm(slices)": _naive("slices"),
    }
)

# The candidates of each family's cases, the baseline first.
DENSE_CANDIDATES = (
    "Dense",
    "AffineLikeDense",
    "NormLikeDense",
    "Dense+LayerNormalization",
    "Dense+BatchNormalization",
    "UnitNormalization+Dense",
)
CONV_CANDIDATES = (
    "Conv2D",
    "PatchNormConv2D",
    "AffineLikeConv2D",
    "Conv2D+BatchNormalization",
    "Conv2D+GroupNormalization",
    "NaivePatchNorm(extract_patches)",
    "NaivePatchNorm(slices)",
)


def _dense(name, batch_size, input_dim, units):
    return Case(
        name, "dense", batch_size, (input_dim,), units, DENSE_CANDIDATES
    )


def _conv(name, batch_size, input_shape, filters):
    return Case(name, "conv", batch_size, input_shape, filters, CONV_CANDIDATES)


# Run settings per mode. `round_seconds` is the time one model runs per
# round; `max_steps` caps the steps that fill it; `memory` says which
# models of the conv cases get their memory measured (True: all).
MODES = {
    "full": dict(
        rounds=15, warmup_steps=3, round_seconds=0.3, max_steps=20, memory=True
    ),
    "quick": dict(
        rounds=5, warmup_steps=1, round_seconds=0.0, max_steps=1, memory=False
    ),
    "smoke": dict(
        rounds=1,
        warmup_steps=1,
        round_seconds=0.0,
        max_steps=1,
        memory=("Conv2D", "PatchNormConv2D"),
    ),
}

# The cases of each mode. The smoke mode runs one case per family, with tiny
# shapes under the same names.
CASES = {
    "default": (
        _dense("dense_3072_1024", 256, 3072, 1024),
        _dense("dense_512_512", 256, 512, 512),
        _conv("conv_32x32x64_64", 64, (32, 32, 64), 64),
        _conv("conv_16x16x128_128", 64, (16, 16, 128), 128),
    ),
    "smoke": (
        _dense("dense_3072_1024", 4, 24, 8),
        _conv("conv_32x32x64_64", 2, (6, 6, 4), 4),
    ),
}


def cases_for(mode):
    """The `Case`s a run in `mode` times (tuple)."""
    return CASES["smoke" if mode == "smoke" else "default"]


def case_named(name, mode="full"):
    """The `Case` called `name` among those of `mode`.

    Args:
        name: the case's name.
        mode: `"full"`, `"quick"` or `"smoke"`. Defaults to `"full"`.

    Returns:
        Case: the case.

    Raises:
        ValueError: for a name that is not one of them.
    """
    for case in cases_for(mode):
        if case.name == name:
            return case
    raise ValueError(
        "Received an invalid value for argument `name`. Expected one of "
        f"{[case.name for case in cases_for(mode)]}. Received: name={name!r}"
    )


def make_model(case, candidate, registry=CANDIDATES):
    """A compiled one-layer model and a batch for it.

    Args:
        case: the `Case`.
        candidate: the name of a candidate in `registry`.
        registry: the `Registry` that builds it. Defaults to `CANDIDATES`.

    Returns:
        tuple: the model (`Input -> InputScale -> the candidate's layers`,
        compiled with SGD, MSE and `jit_compile="auto"`), and `x`, `y`,
        backend tensors.
    """
    model = keras.Sequential(
        [
            keras.Input(case.input_shape),
            bench_layers.InputScale(name="input_scale"),
        ]
        + registry.layers(candidate, case.units),
        name=re.sub(r"\W+", "_", candidate),
    )
    model.compile(
        optimizer=keras.optimizers.SGD(learning_rate=LEARNING_RATE),
        loss="mse",
        jit_compile="auto",
    )
    rng = keras.random.SeedGenerator(0)
    x = keras.random.normal(
        (case.batch_size,) + tuple(case.input_shape), seed=rng
    )
    y = keras.random.normal(
        (case.batch_size,) + tuple(model.output_shape[1:]), seed=rng
    )
    return model, x, y
