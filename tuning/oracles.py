"""KerasTuner oracles of the studies.

`BracketOracle` searches the learning rate until the best one is bracketed
(`tuning.bracketing`); every other hyperparameter stays at its default.
`extended` is the one way the project adds to an oracle class (its own or
KerasTuner's): mixins in front of it, such as `search.RecordingOracleMixin`
(every cell) and `distributed.RecoveringOracleMixin` (a distributed
chief).
"""

import functools
import math
import numbers
import time

import keras_tuner
from keras_tuner.engine import hyperparameters as hp_module
from keras_tuner.engine import trial as trial_module

from tuning import bracketing

# The metric a trial reports, > 0 when its training diverged.
DIVERGED_METRIC = "diverged"

_STATUS = trial_module.TrialStatus


@functools.cache
def extended(cls, *mixins):
    """The oracle class `cls` with `mixins` in front of it (each calls
    `super()`), made once per combination.

    >>> class CountingOracleMixin:
    ...     pass
    >>> extended(BracketOracle, CountingOracleMixin).__name__
    'CountingBracketOracle'
    """
    prefix = "".join(m.__name__.removesuffix("OracleMixin") for m in mixins)
    return type(
        prefix + cls.__name__,
        (*mixins, cls),
        {
            "__doc__": f"`{cls.__name__}` with {', '.join(m.__name__ for m in mixins)}."
        },
    )


class BracketOracle(keras_tuner.Oracle):
    """Searches the learning rate until the best rate is bracketed.

    Tries the rates of `bracketing.initial_grid(*learning_rate, lr_step)`,
    then refines around the best one (see `tuning.bracketing`) and stops
    once its nearest completed neighbours on both sides are within a factor
    2, or when the best cannot be bracketed (it sits at one of
    `learning_rate_limits`, or against a diverging rate), or after
    `max_trials`. Every other hyperparameter of the space takes its default
    value.

    A trial that reports a metric `"diverged"` whose last value is > 0 is
    never chosen, whatever its score; nor is a failed trial. The decisions
    depend on the trials only, so that a search reloaded from its project
    directory, or shared by distributed workers, continues as it would have.
    A worker that asks for a trial while others are still running, once the
    initial grid is handed out, waits: it is told "IDLE" and asks again.

    The values the oracle proposes can be anywhere in
    `learning_rate_limits`: the hypermodel must declare the learning rate
    over exactly that range, as in
    `hp.Float("learning_rate", 1e-6, 100.0, sampling="log")` for the
    default limits (KerasTuner does not check that a value lies in the
    declared range; this oracle raises when the declared range is narrower).

    Args:
        objective: a string or `keras_tuner.Objective`, the objective of
            the trials (e.g. `"val_accuracy"`). Defaults to `None`
            (KerasTuner's default objective).
        max_trials: optional int, the most trials to run. Defaults to
            `None`: until the search stops by itself.
        learning_rate: pair of positive floats `(low, high)`, the range of
            the initial grid. Defaults to `(1e-3, 1.0)`.
        lr_step: positive float, the spacing of the initial grid, and of
            an extension past its ends, in decades. Defaults to `0.5`.
        learning_rate_limits: pair of positive floats `(min, max)` with
            `min <= low < high <= max`, the range the search may extend to.
            Defaults to `(1e-6, 100.0)`.
        hyperparameter: str, the name of the learning-rate hyperparameter.
            Defaults to `"learning_rate"`.
        wait_s: non-negative float, the seconds a worker told to wait
            sleeps before it asks again. Defaults to `0.5`.
        **kwargs: passed to `keras_tuner.Oracle` (e.g. `hyperparameters`,
            `max_retries_per_trial`).

    Example:

    ```python
    def build(hp):
        lr = hp.Float("learning_rate", 1e-6, 100.0, sampling="log")
        ...

    tuner = keras_tuner.Tuner(
        oracle=BracketOracle(objective="val_accuracy", max_trials=30),
        hypermodel=build,
        directory="runs",
        project_name="lr",
    )
    tuner.search(x, y, validation_data=(x_val, y_val))
    tuner.oracle.summary()  # {"chosen": ..., "bracketed": True, ...}
    ```
    """

    def __init__(
        self,
        objective=None,
        max_trials=None,
        learning_rate=(1e-3, 1.0),
        lr_step=bracketing.DEFAULT_STEP,
        learning_rate_limits=bracketing.DEFAULT_LIMITS,
        hyperparameter="learning_rate",
        wait_s=0.5,
        **kwargs,
    ):
        if (
            isinstance(learning_rate, (str, bytes))
            or not hasattr(learning_rate, "__len__")
            or len(learning_rate) != 2
        ):
            raise TypeError(
                "Received an invalid value for argument `learning_rate`. "
                "Expected a pair `(low, high)`. Received: "
                f"learning_rate={learning_rate!r}"
            )
        low, high, lr_step, learning_rate_limits, _ = (
            bracketing.check_arguments(
                learning_rate[0],
                learning_rate[1],
                lr_step,
                learning_rate_limits,
                names={
                    "low": "learning_rate[0]",
                    "high": "learning_rate[1]",
                    "step": "lr_step",
                    "limits": "learning_rate_limits",
                },
            )
        )
        if not isinstance(hyperparameter, str) or not hyperparameter:
            raise ValueError(
                "Received an invalid value for argument `hyperparameter`. "
                "Expected a non-empty string. Received: "
                f"hyperparameter={hyperparameter!r}"
            )
        if (
            isinstance(wait_s, bool)
            or not isinstance(wait_s, numbers.Real)
            or not (math.isfinite(wait_s) and wait_s >= 0)
        ):
            raise ValueError(
                "Received an invalid value for argument `wait_s`. Expected a "
                f"non-negative number. Received: wait_s={wait_s!r}"
            )
        super().__init__(objective=objective, max_trials=max_trials, **kwargs)
        self.learning_rate = (low, high)
        self.lr_step = lr_step
        self.learning_rate_limits = learning_rate_limits
        self.hyperparameter = hyperparameter
        self.wait_s = float(wait_s)

    def populate_space(self, trial_id):
        """Fills the hyperparameter space with the next learning rate.

        Args:
            trial_id: str, the ID of the trial to fill.

        Returns:
            dict: `{"status": "RUNNING", "values": values}` with the rate to
            try and every other hyperparameter at its default,
            `{"status": "IDLE"}` while trials still running must land first,
            or `{"status": "STOPPED"}` once the search is over.

        Raises:
            ValueError: if the hypermodel declares the learning rate over a
                range narrower than `learning_rate_limits`, or not as a
                `Float`.
        """
        self._check_declared_range()
        action = bracketing.next_action(
            self.points(),
            *self.learning_rate,
            step=self.lr_step,
            limits=self.learning_rate_limits,
        )
        if action.kind == "stop":
            return {"status": _STATUS.STOPPED, "values": None}
        if action.kind == "wait":
            return {"status": _STATUS.IDLE, "values": None}
        return {
            "status": _STATUS.RUNNING,
            "values": self._values(action.learning_rate),
        }

    def create_trial(self, tuner_id):
        """Creates the next trial for `tuner_id`; see `keras_tuner.Oracle`.

        A tuner told to wait ("IDLE") sleeps `wait_s` first, outside the
        oracle's lock, so that running trials can still end meanwhile.

        Args:
            tuner_id: str, the ID of the tuner asking.

        Returns:
            keras_tuner.engine.trial.Trial: the trial, whose status is
            `"RUNNING"`, `"IDLE"` or `"STOPPED"`.
        """
        trial = super().create_trial(tuner_id)
        if trial.status == _STATUS.IDLE and self.wait_s > 0:
            time.sleep(self.wait_s)
        return trial

    def get_best_trials(self, num_trials=1):
        """The best completed, non-diverged trials.

        The highest score first (the lowest, for an objective to minimise);
        among equal scores, the lower learning rate first, as
        `bracketing.summarize` chooses.

        Args:
            num_trials: int, how many trials at most. Defaults to 1.

        Returns:
            list: `keras_tuner.engine.trial.Trial`s, best first; fewer than
            `num_trials` when fewer trials qualify.
        """
        ranked = sorted(
            (
                (trial, point)
                for trial, point in self._trial_points()
                if point.status == "ok"
            ),
            key=lambda pair: (
                bracketing.ranking_key(pair[1]),
                pair[0].trial_id,
            ),
        )
        return [trial for trial, _ in ranked[:num_trials]]

    def points(self):
        """The learning rates tried so far, with their outcomes.

        Returns:
            list: `bracketing.Point`s, one per trial, in the order of the
            trial IDs. The score of an objective to minimise is negated, so
            that higher is better.
        """
        return [point for _, point in self._trial_points()]

    def summary(self):
        """The outcome of the search so far.

        Returns:
            dict: `bracketing.summarize` of `points()` (`"chosen"`,
            `"score"`, `"below"`, `"above"`, `"bracketed"`), with `"score"`
            the objective value of the chosen trial.
        """
        summary = bracketing.summarize(self.points())
        if summary["score"] is not None:
            summary["score"] = summary["score"] * self._sign()
        return summary

    def _sign(self):
        return 1.0 if self.objective.direction == "max" else -1.0

    def _trial_points(self):
        """Yields `(trial, Point)` for every trial, by trial ID."""
        sign = self._sign()
        # Trial IDs are zero-padded counters, padded more when `max_trials`
        # grows on a reload: order them as numbers.
        for trial_id in sorted(self.trials, key=_trial_order):
            trial = self.trials[trial_id]
            lr = trial.hyperparameters.values.get(self.hyperparameter)
            if lr is None:
                raise ValueError(
                    f"Expected every trial to have a value of "
                    f"`{self.hyperparameter}`. Received: trial_id={trial_id!r}"
                    f", values={trial.hyperparameters.values!r}"
                )
            if trial.status == _STATUS.COMPLETED:
                metrics = trial.metrics
                if (
                    metrics.exists(DIVERGED_METRIC)
                    and metrics.get_last_value(DIVERGED_METRIC) > 0
                ):
                    point = bracketing.Point(lr, "diverged")
                else:
                    point = bracketing.Point(
                        lr, "ok", sign * float(trial.score)
                    )
            elif trial.status in (_STATUS.FAILED, _STATUS.INVALID):
                point = bracketing.Point(lr, "failed")
            else:
                point = bracketing.Point(lr, "pending")
            yield trial, point

    def _values(self, learning_rate):
        """The active values of the space: defaults, and the rate."""
        hps = keras_tuner.HyperParameters()
        for hp in self.hyperparameters.space:
            hps.merge([hp])
            if hps.is_active(hp):
                hps.values[hp.name] = hp.default
        hps.values[self.hyperparameter] = learning_rate
        return hps.values

    def _check_declared_range(self):
        limit_low, limit_high = self.learning_rate_limits
        for hp in self.hyperparameters.space:
            if hp.name != self.hyperparameter:
                continue
            if not isinstance(hp, hp_module.Float) or not (
                hp.min_value <= limit_low * (1 + 1e-9)
                and hp.max_value >= limit_high * (1 - 1e-9)
            ):
                raise ValueError(
                    f"Expected the hypermodel to declare `{hp.name}` as a "
                    "`Float` over at least `learning_rate_limits`, e.g. "
                    f"`hp.Float({hp.name!r}, {limit_low!r}, {limit_high!r}, "
                    'sampling="log")`. Received: '
                    f"{hp.name}={hp.get_config()!r}, "
                    f"learning_rate_limits={self.learning_rate_limits!r}"
                )


def _trial_order(trial_id):
    return (int(trial_id) if trial_id.isdigit() else math.inf, trial_id)
