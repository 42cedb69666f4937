"""KerasTuner `HyperModel`s over the MLP and CNN builders of `models`.

A study compares *arms* (one model variant each: a baseline such as `dense`
or `batch_norm`, or one of our layers) and searches the *nuisance*
hyperparameters for every arm alike, the baseline included:

- `learning_rate`: log-uniform over `lr_range`, several decades wide by
  default (`1e-5` to `10`). Our layers divide each activation step by
  `|x|^2 + 1`, which changes the effective step size by orders of magnitude
  compared with `Dense`: a range tuned for `Dense` can starve them.
- `optimizer`: one of `optimizers` (`"sgd"` is SGD with momentum
  `momentum`, 0.9 by default; `"adam"` is Adam).
- `kernel_scale`: for our variants only, a choice over `kernel_scales`
  (the standard deviation of their `RandomNormal` kernel). A
  study that fixes it passes one value.

The arm itself is fixed per `HyperModel`, never searched. The names above
are stable: they become column names of the result tables.

The learning-rate schedule is part of the training protocol, the same for
every arm: `schedule="constant"`, or `"cosine"` (Keras' `CosineDecay` over
the whole run of `HyperModel.fit`, after `warmup_epochs` of linear warm-up
from 0, shortened to half the run when the run is not longer than it:
`warmup_steps`). `fit` also adds `keras.callbacks.TerminateOnNaN`, so that a
diverging trial stops at once.

This module needs KerasTuner (`pip install "keras-affine-div[tuning]"`); the
rest of the package does not import it.
"""

import math

import keras

try:
    import keras_tuner
except ImportError as e:  # pragma: no cover - exercised in a subprocess test
    raise ImportError(
        "`keras_affine_div.hypermodels` requires KerasTuner. Install it with "
        '`pip install "keras-affine-div[tuning]"`.'
    ) from e

from keras_affine_div import _validation
from keras_affine_div import models

LEARNING_RATE = "learning_rate"
OPTIMIZER = "optimizer"
KERNEL_SCALE = "kernel_scale"
HYPERPARAMETER_NAMES = (LEARNING_RATE, OPTIMIZER, KERNEL_SCALE)

OPTIMIZERS = ("sgd", "adam")
SCHEDULES = ("constant", "cosine")
SGD_MOMENTUM = 0.9
DEFAULT_LR_RANGE = (1e-5, 10.0)
DEFAULT_KERNEL_SCALES = (0.25, 0.5, 1.0, 2.0, 4.0)
OBJECTIVE = "val_accuracy"


def make_optimizer(name, learning_rate, momentum=SGD_MOMENTUM):
    """Returns the optimiser a study means by `name`.

    Args:
        name: `"sgd"` (SGD with momentum `momentum`) or `"adam"`.
        learning_rate: positive float, or a
            `keras.optimizers.schedules.LearningRateSchedule`.
        momentum: the momentum of SGD, a float in `[0, 1)`. Defaults to
            `0.9`.

    Returns:
        keras.optimizers.Optimizer: a new optimiser.

    Raises:
        ValueError: for another name.
    """
    name = _validation.one_of(name, OPTIMIZERS, "optimizer")
    if name == "sgd":
        return keras.optimizers.SGD(
            learning_rate=learning_rate, momentum=momentum
        )
    return keras.optimizers.Adam(learning_rate=learning_rate)


def warmup_steps(warmup_epochs, epochs, steps_per_epoch):
    """The warm-up steps of `fit`'s cosine schedule.

    `warmup_epochs * steps_per_epoch` when the run is longer than the
    warm-up; otherwise the warm-up is shortened to the first half of the
    run's steps (rounded down), so that any epoch count trains and the
    rate still reaches its peak before it decays.

    Args:
        warmup_epochs: non-negative int, the warm-up asked for.
        epochs: positive int, the epochs of the run.
        steps_per_epoch: positive int.

    Returns:
        int: the warm-up steps, in `[0, epochs * steps_per_epoch)`.

    Example:

    >>> warmup_steps(1, 15, 100)
    100
    >>> warmup_steps(1, 1, 100)  # a first Hyperband rung of one epoch
    50
    """
    if warmup_epochs < epochs:
        return warmup_epochs * steps_per_epoch
    return (epochs * steps_per_epoch) // 2


def cosine_schedule(learning_rate, total_steps, warmup_steps=0):
    """Cosine decay to 0 over `total_steps`, after a linear warm-up.

    The rate rises linearly from 0 to `learning_rate` over `warmup_steps`
    optimizer steps, then follows a half cosine down to 0 at `total_steps`.

    Args:
        learning_rate: positive float, the peak rate.
        total_steps: positive int, the optimizer steps of the whole run.
        warmup_steps: int in `[0, total_steps)`. Defaults to `0`.

    Returns:
        keras.optimizers.schedules.CosineDecay: the schedule.

    Example:

    >>> from keras_affine_div.hypermodels import cosine_schedule
    >>> schedule = cosine_schedule(0.1, total_steps=10, warmup_steps=2)
    >>> [round(float(schedule(step)), 4) for step in (0, 1, 2, 6, 10)]
    [0.0, 0.05, 0.1, 0.05, 0.0]
    """
    total_steps = int(total_steps)
    warmup_steps = int(warmup_steps)
    if total_steps < 1 or not 0 <= warmup_steps < total_steps:
        raise ValueError(
            "Received invalid values for arguments `total_steps` and "
            "`warmup_steps`. Expected `0 <= warmup_steps < total_steps`. "
            f"Received: total_steps={total_steps}, "
            f"warmup_steps={warmup_steps}"
        )
    if warmup_steps == 0:
        return keras.optimizers.schedules.CosineDecay(
            learning_rate, decay_steps=total_steps
        )
    return keras.optimizers.schedules.CosineDecay(
        0.0,
        decay_steps=total_steps - warmup_steps,
        warmup_target=learning_rate,
        warmup_steps=warmup_steps,
    )


class _ClassifierHyperModel(keras_tuner.HyperModel):
    """Shared search space and compile step of the MLP and CNN hypermodels.

    Subclasses set `_FAMILY`, a family of `models.FAMILIES`, whose builder
    is the function of that name (`models.mlp`, `models.cnn`); the arms and
    which of them are ours come from the registry `models.ARMS`.
    """

    _FAMILY = ""

    def __init__(
        self,
        variant,
        input_shape,
        num_classes,
        model_kwargs,
        optimizers=OPTIMIZERS,
        lr_range=DEFAULT_LR_RANGE,
        kernel_scales=DEFAULT_KERNEL_SCALES,
        name=None,
        tunable=True,
        schedule="constant",
        warmup_epochs=0,
        momentum=SGD_MOMENTUM,
        baseline_kernel_scale=None,
    ):
        self.arm = models.get_arm(self._FAMILY, variant)
        if baseline_kernel_scale is not None:
            if self.arm.ours or not self.arm.scale_sensitive:
                plain = [
                    a.name
                    for a in models.ARMS
                    if a.family == self._FAMILY
                    and a.scale_sensitive
                    and not a.ours
                ]
                raise ValueError(
                    "Received an invalid value for argument "
                    "`baseline_kernel_scale`. Expected None except for the "
                    f"plain baseline ({', '.join(plain)}): our variants take "
                    "`kernel_scales`, and the normalised baselines divide "
                    f"the scale out. Received: variant={variant!r}, "
                    f"baseline_kernel_scale={baseline_kernel_scale!r}"
                )
            baseline_kernel_scale = _validation.positive_float(
                baseline_kernel_scale, "baseline_kernel_scale"
            )
        self.baseline_kernel_scale = baseline_kernel_scale
        self.variant = self.arm.name
        self.input_shape = tuple(input_shape)
        self.num_classes = num_classes
        self.model_kwargs = dict(model_kwargs)
        self.optimizers = _validation.distinct_names(
            optimizers, OPTIMIZERS, "optimizers"
        )
        self.lr_range = _validation.positive_range(lr_range, "lr_range")
        self.kernel_scales = _validation.positive_floats(
            kernel_scales, "kernel_scales", allow_none=True
        )
        self.schedule = _validation.one_of(schedule, SCHEDULES, "schedule")
        self.warmup_epochs = _validation.non_negative_int(
            warmup_epochs, "warmup_epochs"
        )
        self.momentum = _validation.number_in(
            momentum, "momentum", 0, 1, closed=(True, False)
        )
        super().__init__(
            name=name or f"{self._FAMILY}_{variant}", tunable=tunable
        )

    @property
    def searches_kernel_scale(self):
        """Whether `kernel_scale` is part of this arm's search space."""
        return self.arm.ours and bool(self.kernel_scales)

    def declare_hyperparameters(self, hp):
        hp.Float(
            LEARNING_RATE,
            min_value=self.lr_range[0],
            max_value=self.lr_range[1],
            sampling="log",
        )
        hp.Choice(OPTIMIZER, list(self.optimizers))
        if self.searches_kernel_scale:
            hp.Choice(KERNEL_SCALE, list(self.kernel_scales))

    def build(self, hp):
        self.declare_hyperparameters(hp)
        if self.searches_kernel_scale:
            kernel_scale = hp.get(KERNEL_SCALE)
        else:
            kernel_scale = self.baseline_kernel_scale
        builder = getattr(models, self._FAMILY)
        model = builder(
            self.variant,
            self.input_shape,
            self.num_classes,
            kernel_scale=kernel_scale,
            **self.model_kwargs,
        )
        model.compile(
            optimizer=make_optimizer(
                hp.get(OPTIMIZER), hp.get(LEARNING_RATE), self.momentum
            ),
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            metrics=["accuracy"],
        )
        return model

    def fit(
        self,
        hp,
        model,
        x,
        y=None,
        epochs=1,
        batch_size=32,
        callbacks=None,
        **kwargs,
    ):
        """Trains `model` with the hypermodel's schedule.

        With `schedule="cosine"`, the optimiser's rate becomes
        `cosine_schedule(learning_rate, span * steps_per_epoch,
        warmup_steps(warmup_epochs, span, steps_per_epoch))` before
        training, with `steps_per_epoch = ceil(len(x) / batch_size)` and
        `span = epochs - initial_epoch`, the epochs this call trains. Any
        epoch count a tuner hands over trains: when the run is not longer
        than the warm-up (a first Hyperband rung of 1 epoch with
        `warmup_epochs=1`), the warm-up is shortened to the first half of
        the run's steps (see `warmup_steps`). A tuner that resumes a model
        (Hyperband's `initial_epoch`) builds a new optimiser, whose
        schedule then covers the epochs of this call. A
        `keras.callbacks.TerminateOnNaN` is added to `callbacks`.

        Args:
            hp: the trial's `HyperParameters`.
            model: a model returned by `build(hp)`.
            x: the training inputs, an array.
            y: the training labels. Defaults to `None`.
            epochs: positive int. Defaults to `1`.
            batch_size: positive int. Defaults to `32`.
            callbacks: optional list of Keras callbacks.
            **kwargs: passed to `model.fit`.

        Returns:
            keras.callbacks.History: what `model.fit` returns.

        Raises:
            ValueError: if `x`'s samples are not of the hypermodel's
                `input_shape`, or `y` has not one label per sample.
        """
        self._check_data(x, y)
        if self.schedule == "cosine":
            steps = math.ceil(len(x) / batch_size)
            span = epochs - kwargs.get("initial_epoch", 0)
            if span < 1:
                raise ValueError(
                    "Received an invalid value for argument `epochs`. "
                    "Expected more epochs than `initial_epoch`. Received: "
                    f"epochs={epochs}, "
                    f"initial_epoch={kwargs.get('initial_epoch')}"
                )
            model.optimizer.learning_rate = cosine_schedule(
                hp.get(LEARNING_RATE),
                span * steps,
                warmup_steps(self.warmup_epochs, span, steps),
            )
        callbacks = [keras.callbacks.TerminateOnNaN(), *(callbacks or [])]
        return model.fit(
            x,
            y,
            epochs=epochs,
            batch_size=batch_size,
            callbacks=callbacks,
            **kwargs,
        )

    def _check_data(self, x, y):
        """Trains on the data the hypermodel was declared for, or says so."""
        shape = getattr(x, "shape", None)
        if shape is not None and tuple(shape[1:]) != self.input_shape:
            raise ValueError(
                "Received an invalid value for argument `x`. Expected "
                f"samples of shape {self.input_shape}, the hypermodel's "
                f"`input_shape`. Received: x.shape={tuple(shape)}"
            )
        if (
            y is not None
            and hasattr(x, "__len__")
            and hasattr(y, "__len__")
            and len(x) != len(y)
        ):
            raise ValueError(
                "Received an invalid value for argument `y`. Expected one "
                f"label per sample of `x` ({len(x)}). Received: "
                f"len(y)={len(y)}"
            )


class MLPHyperModel(_ClassifierHyperModel):
    """A KerasTuner `HyperModel` of one MLP arm (`models.mlp`).

    The search space is the same for every arm: `learning_rate` (log-uniform
    over `lr_range`) and `optimizer` (a choice over `optimizers`); our
    variants (`models.OUR_MLP_VARIANTS`) add `kernel_scale` (a choice over
    `kernel_scales`). Models are compiled with
    `SparseCategoricalCrossentropy(from_logits=True)` and the `accuracy`
    metric; tune them on `"val_accuracy"`.

    Args:
        variant: one of `models.MLP_VARIANTS`, the arm.
        input_shape: tuple, the shape of one sample.
        num_classes: positive integer.
        depth: number of hidden layers. Defaults to `3`.
        width: units per hidden layer. Defaults to `512`.
        activation: hidden activation. Defaults to `"tanh"`.
        optimizers: sequence of `"sgd"` (momentum 0.9) and `"adam"`, the
            optimisers searched. Defaults to `("sgd", "adam")`.
        lr_range: `(low, high)`, the log-uniform learning-rate range.
            Defaults to `(1e-5, 10.0)`.
        kernel_scales: sequence of positive floats searched as
            `kernel_scale` for our variants, or `None` to keep their default
            initialisation. Defaults to `(0.25, 0.5, 1.0, 2.0, 4.0)`.
        name: optional name of the hypermodel. Defaults to `None`
            (`"mlp_<variant>"`).
        tunable: whether the hyperparameters are tunable. Defaults to `True`.
        schedule: `"constant"` or `"cosine"`, the learning-rate schedule of
            `fit` (see the module docstring). Defaults to `"constant"`.
        warmup_epochs: non-negative int, the linear warm-up of the
            `"cosine"` schedule. Defaults to `0`.
        momentum: the momentum of `"sgd"`, in `[0, 1)`. Defaults to `0.9`.
        baseline_kernel_scale: positive float or `None`, for the plain
            baseline (`"dense"`) only: a fixed multiplier on the limit of
            its `GlorotUniform` hidden kernels (`models.mlp`'s
            `kernel_scale`), not searched. Defaults to `None` (Keras'
            default).

    Example:

    >>> import keras_tuner
    >>> from keras_affine_div.hypermodels import MLPHyperModel
    >>> hypermodel = MLPHyperModel("affine_like", (4, 4, 3), 10, depth=1,
    ...                            width=8)
    >>> hp = keras_tuner.HyperParameters()
    >>> model = hypermodel.build(hp)
    >>> sorted(hp.values)
    ['kernel_scale', 'learning_rate', 'optimizer']
    >>> model.output_shape
    (None, 10)
    """

    _FAMILY = "mlp"

    def __init__(
        self,
        variant,
        input_shape,
        num_classes,
        depth=3,
        width=512,
        activation="tanh",
        **kwargs,
    ):
        self.depth = depth
        self.width = width
        self.activation = activation
        super().__init__(
            variant,
            input_shape,
            num_classes,
            dict(depth=depth, width=width, activation=activation),
            **kwargs,
        )


class CNNHyperModel(_ClassifierHyperModel):
    """A KerasTuner `HyperModel` of one CNN arm (`models.cnn`).

    The search space is that of `MLPHyperModel`: `learning_rate`,
    `optimizer`, and `kernel_scale` for our variants
    (`models.OUR_CNN_VARIANTS`).

    Args:
        variant: one of `models.CNN_VARIANTS`, the arm.
        input_shape: tuple, the shape of one image (`(height, width,
            channels)`).
        num_classes: positive integer.
        depth: number of convolution blocks. Defaults to `3`.
        filters: filters of the first block. Defaults to `32`.
        activation: hidden activation. Defaults to `"relu"`.
        optimizers: sequence of `"sgd"` (momentum 0.9) and `"adam"`, the
            optimisers searched. Defaults to `("sgd", "adam")`.
        lr_range: `(low, high)`, the log-uniform learning-rate range.
            Defaults to `(1e-5, 10.0)`.
        kernel_scales: sequence of positive floats searched as
            `kernel_scale` for our variants, or `None` to keep their default
            initialisation. Defaults to `(0.25, 0.5, 1.0, 2.0, 4.0)`.
        name: optional name of the hypermodel. Defaults to `None`
            (`"cnn_<variant>"`).
        tunable: whether the hyperparameters are tunable. Defaults to `True`.
        schedule: `"constant"` or `"cosine"`, the learning-rate schedule of
            `fit` (see the module docstring). Defaults to `"constant"`.
        warmup_epochs: non-negative int, the linear warm-up of the
            `"cosine"` schedule. Defaults to `0`.
        momentum: the momentum of `"sgd"`, in `[0, 1)`. Defaults to `0.9`.
        baseline_kernel_scale: positive float or `None`, for the plain
            baseline (`"conv"`) only: a fixed multiplier on the limit of
            its `GlorotUniform` hidden kernels (`models.cnn`'s
            `kernel_scale`), not searched. Defaults to `None` (Keras'
            default).

    Example:

    >>> import keras_tuner
    >>> from keras_affine_div.hypermodels import CNNHyperModel
    >>> hypermodel = CNNHyperModel("conv", (8, 8, 3), 10, depth=1, filters=4)
    >>> hp = keras_tuner.HyperParameters()
    >>> model = hypermodel.build(hp)
    >>> sorted(hp.values)
    ['learning_rate', 'optimizer']
    """

    _FAMILY = "cnn"

    def __init__(
        self,
        variant,
        input_shape,
        num_classes,
        depth=3,
        filters=32,
        activation="relu",
        **kwargs,
    ):
        self.depth = depth
        self.filters = filters
        self.activation = activation
        super().__init__(
            variant,
            input_shape,
            num_classes,
            dict(depth=depth, filters=filters, activation=activation),
            **kwargs,
        )


HYPERMODELS = {"mlp": MLPHyperModel, "cnn": CNNHyperModel}
