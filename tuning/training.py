"""One seeded training function, for search trials and seed reruns alike.

Every run of a study, a search trial or a rerun of the chosen setting on a
seed, goes through `train`: the arm's `HyperModel` builds and compiles the
model from the hyperparameter values, `keras.utils.set_random_seed(seed)`
seeds it, and `HyperModel.fit` trains it with the study's protocol (the
schedule, and `keras.callbacks.TerminateOnNaN`).

A run has *failed* (the `diverged` flag of the result tables) when its
training loss became non-finite (training then stops at once) or its final
training loss is above that of a uniform guess, `ln(num_classes)`;
`outcomes` tells a run that diverged from one that did not learn.
"""

import math
import time

import keras
import keras_tuner

from keras_affine_div import hypermodels
from keras_affine_div import models
from tuning import schema

EVAL_BATCH_SIZE = 512


def make_hypermodel(study, arm, data):
    """Returns the `HyperModel` of one arm of the study.

    `study` is resolved at its condition (`Study.at`). For the bracketing
    search, the learning rate is declared over `learning_rate_limits`
    (where the search may go) and `kernel_scale`, when fixed, is the one
    value of our arms' choice; `baseline_kernel_scale` reaches the plain
    baseline only (the normalised ones divide the scale out).
    """
    s, f = study.search, study.fixed
    cls = hypermodels.HYPERMODELS[study.family]
    if s["tuner"] == "bracket":
        lr_range = tuple(s["learning_rate_limits"])
    else:
        lr_range = tuple(s["learning_rate"])
    scale = f["kernel_scale"]
    if isinstance(scale, dict):
        # One scale per arm of ours; an arm it leaves out keeps its default.
        kernel_scales = (scale[arm],) if arm in scale else None
    elif scale is not None:
        kernel_scales = (scale,)
    elif s["kernel_scales"] is not None:
        kernel_scales = tuple(s["kernel_scales"])
    else:
        kernel_scales = None
    arm_ = models.get_arm(study.family, arm)
    baseline_kernel_scale = (
        f.get("baseline_kernel_scale")
        if arm_.scale_sensitive and not arm_.ours
        else None
    )
    return cls(
        arm,
        data.input_shape,
        data.num_classes,
        optimizers=tuple(s["optimizers"]),
        lr_range=lr_range,
        kernel_scales=kernel_scales,
        schedule=f["schedule"],
        warmup_epochs=f["warmup_epochs"],
        momentum=f["momentum"],
        baseline_kernel_scale=baseline_kernel_scale,
        **study.model_kwargs,
    )


def diverged(losses, num_classes):
    """Whether a run with these per-epoch training losses failed: it
    diverged or did not learn (`outcomes.outcome` tells which).

    Args:
        losses: the training loss of every epoch run.
        num_classes: the number of classes (a uniform guess has loss
            `ln(num_classes)`).

    Returns:
        bool: a non-finite loss, or a final loss above `ln(num_classes)`.
    """
    if not losses or not all(math.isfinite(v) for v in losses):
        return True
    return losses[-1] > math.log(num_classes)


def train(
    hypermodel,
    hp,
    data,
    epochs,
    batch_size,
    seed,
    test=False,
    callbacks=(),
    verbose=0,
    inspect=None,
):
    """Builds, seeds and trains one model; evaluates it on test if asked.

    Args:
        hypermodel: the arm's `HyperModel`.
        hp: the `keras_tuner.HyperParameters` of the run.
        data: a `keras_affine_div.datasets.Dataset`.
        epochs: positive int.
        batch_size: positive int.
        seed: int, given to `keras.utils.set_random_seed`.
        test: whether to evaluate on the test split. Defaults to `False`.
        callbacks: more Keras callbacks for `fit`. Defaults to `()`.
        verbose: `fit`'s verbosity. Defaults to `0`.
        inspect: optional function `inspect(model, phase)`, called with
            `phase="init"` before training and `"trained"` after it.

    Returns:
        dict: `val_accuracy`, `val_loss`, `loss`, `accuracy` (last epoch),
        `final_train_loss`, `final_train_accuracy`, `epochs` (run),
        `steps` (optimizer steps), `diverged`, `wall_time_s`, `history` (a
        list of per-epoch dicts), and with `test`, `test_accuracy` and
        `test_loss`.
    """
    keras.backend.clear_session()
    keras.utils.set_random_seed(int(seed))
    model = hypermodel.build(hp)
    if inspect is not None:
        inspect(model, "init")
    t0 = time.perf_counter()
    history = hypermodel.fit(
        hp,
        model,
        data.x_train,
        data.y_train,
        validation_data=(data.x_val, data.y_val),
        epochs=epochs,
        batch_size=batch_size,
        callbacks=list(callbacks),
        verbose=verbose,
    )
    wall_time = time.perf_counter() - t0
    if inspect is not None:
        inspect(model, "trained")
    h = history.history
    result = {
        schema.OBJECTIVE: float(h[schema.OBJECTIVE][-1]),
        "val_loss": float(h["val_loss"][-1]),
        "loss": float(h["loss"][-1]),
        "accuracy": float(h["accuracy"][-1]),
        "final_train_loss": float(h["loss"][-1]),
        "final_train_accuracy": float(h["accuracy"][-1]),
        "epochs": len(h["loss"]),
        "steps": int(keras.ops.convert_to_numpy(model.optimizer.iterations)),
        "diverged": diverged([float(v) for v in h["loss"]], data.num_classes),
        "wall_time_s": wall_time,
        "history": [
            {name: float(h[name][e]) for name in schema.CURVE_COLUMNS[3:]}
            for e in range(len(h["loss"]))
        ],
    }
    if test:
        test_loss, test_accuracy = model.evaluate(
            data.x_test, data.y_test, batch_size=EVAL_BATCH_SIZE, verbose=0
        )
        result.update(
            test_accuracy=float(test_accuracy), test_loss=float(test_loss)
        )
    return result


def train_and_evaluate(
    study, arm, hp_values, data, seed, inspect=None, callbacks=(), verbose=0
):
    """Trains one arm from scratch with fixed hyperparameters and one seed,
    and evaluates it on test.

    Args:
        study: a `Study`, resolved at its condition.
        arm: the arm (model variant).
        hp_values: dict of hyperparameter values (`learning_rate`,
            `optimizer`, and `kernel_scale` for our arms where set).
        data: a `datasets.Dataset`.
        seed: int, given to `keras.utils.set_random_seed`.
        inspect: see `train`.
        callbacks: more Keras callbacks for `fit`. Defaults to `()`.
        verbose: `fit`'s verbosity. Defaults to `0`.

    Returns:
        dict: what `train` returns, with `test_accuracy` and `test_loss`.
    """
    hypermodel = make_hypermodel(study, arm, data)
    hp = keras_tuner.HyperParameters()
    hypermodel.declare_hyperparameters(hp)
    hp.values.update(hp_values)
    return train(
        hypermodel,
        hp,
        data,
        study.fixed["epochs"],
        study.fixed["batch_size"],
        seed,
        test=True,
        callbacks=callbacks,
        verbose=verbose,
        inspect=inspect,
    )
