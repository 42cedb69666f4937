import subprocess
import sys

import keras
import keras_tuner
import numpy as np
import pytest

from keras_affine_div import hypermodels
from keras_affine_div import models

MLP_KWARGS = {
    "input_shape": (4, 4, 3),
    "num_classes": 5,
    "depth": 1,
    "width": 8,
}
CNN_KWARGS = {
    "input_shape": (8, 8, 3),
    "num_classes": 5,
    "depth": 1,
    "filters": 4,
}


def _space(hypermodel):
    hp = keras_tuner.HyperParameters()
    model = hypermodel.build(hp)
    return hp, model


def _configs(hp):
    return {p.name: p.get_config() for p in hp.space}


@pytest.mark.parametrize(
    "cls,variants,ours,kwargs",
    [
        (
            hypermodels.MLPHyperModel,
            models.MLP_VARIANTS,
            models.OUR_MLP_VARIANTS,
            MLP_KWARGS,
        ),
        (
            hypermodels.CNNHyperModel,
            models.CNN_VARIANTS,
            models.OUR_CNN_VARIANTS,
            CNN_KWARGS,
        ),
    ],
    ids=["mlp", "cnn"],
)
def test_every_arm_builds_with_the_same_nuisance_space(
    cls, variants, ours, kwargs
):
    spaces = {}
    for variant in variants:
        hp, model = _space(cls(variant, **kwargs))
        assert isinstance(model, keras.Model)
        assert model.output_shape == (None, kwargs["num_classes"])
        expected = ["learning_rate", "optimizer"]
        if variant in ours:
            expected.append("kernel_scale")
        assert [p.name for p in hp.space] == expected, variant
        spaces[variant] = _configs(hp)
    shared = {
        name: config
        for name, config in spaces[variants[0]].items()
        if name != "kernel_scale"
    }
    for variant, space in spaces.items():
        assert {k: v for k, v in space.items() if k != "kernel_scale"} == (
            shared
        ), variant
    scales = [spaces[v]["kernel_scale"] for v in ours]
    assert all(s == scales[0] for s in scales)


def test_default_search_space():
    hp, _ = _space(hypermodels.MLPHyperModel("affine_like", **MLP_KWARGS))
    configs = _configs(hp)
    lr = configs["learning_rate"]
    # Several decades, at least 1e-4 to 1: our layers change the effective
    # step size by orders of magnitude compared with Dense.
    assert lr["min_value"] <= 1e-4 and lr["max_value"] >= 1.0
    assert lr["sampling"] == "log"
    assert configs["optimizer"]["values"] == ["sgd", "adam"]
    scales = configs["kernel_scale"]["values"]
    assert min(scales) == 0.25 and max(scales) == 4.0
    ratios = {b / a for a, b in zip(scales, scales[1:])}
    assert ratios == {2.0}  # log-spaced


@pytest.mark.parametrize(
    "optimizer,cls,momentum",
    [("sgd", keras.optimizers.SGD, 0.9), ("adam", keras.optimizers.Adam, None)],
)
def test_compiles_with_the_chosen_optimizer(optimizer, cls, momentum):
    hypermodel = hypermodels.MLPHyperModel("dense", **MLP_KWARGS)
    hp = keras_tuner.HyperParameters()
    hypermodel.declare_hyperparameters(hp)
    hp.values.update(learning_rate=0.0123, optimizer=optimizer)
    model = hypermodel.build(hp)
    assert isinstance(model.optimizer, cls)
    assert float(
        keras.ops.convert_to_numpy(model.optimizer.learning_rate)
    ) == pytest.approx(0.0123)
    if momentum is not None:
        assert model.optimizer.momentum == momentum
    assert isinstance(model.loss, keras.losses.SparseCategoricalCrossentropy)
    assert model.loss.get_config()["from_logits"] is True
    x = np.random.default_rng(0).normal(size=(8, 4, 4, 3)).astype("float32")
    y = np.arange(8, dtype="int32") % 5
    history = model.fit(x, y, epochs=1, batch_size=4, verbose=0)
    assert set(history.history) == {"loss", "accuracy"}


@pytest.mark.parametrize(
    "cls,builder,variant,kwargs",
    [
        (hypermodels.MLPHyperModel, "mlp", "affine_like", MLP_KWARGS),
        (hypermodels.MLPHyperModel, "mlp", "dense", MLP_KWARGS),
        (hypermodels.CNNHyperModel, "cnn", "patch_norm", CNN_KWARGS),
        (hypermodels.CNNHyperModel, "cnn", "batch_norm", CNN_KWARGS),
    ],
    ids=["mlp_ours", "mlp_baseline", "cnn_ours", "cnn_baseline"],
)
def test_passes_the_model_size_and_kernel_scale_to_the_builder(
    cls, builder, variant, kwargs, monkeypatch
):
    calls = []
    real = getattr(models, builder)

    def spy(*args, **kw):
        calls.append((args, kw))
        return real(*args, **kw)

    monkeypatch.setattr(models, builder, spy)
    hypermodel = cls(variant, activation="relu", **kwargs)
    hp = keras_tuner.HyperParameters()
    hypermodel.declare_hyperparameters(hp)
    if hypermodel.searches_kernel_scale:
        hp.values["kernel_scale"] = 2.0
    hypermodel.build(hp)
    ((args, kw),) = calls
    assert args == (variant, kwargs["input_shape"], kwargs["num_classes"])
    size = {
        k: v for k, v in kwargs.items() if k in ("depth", "width", "filters")
    }
    assert kw == dict(
        size,
        activation="relu",
        kernel_scale=2.0 if hypermodel.searches_kernel_scale else None,
    )


@pytest.mark.parametrize(
    "cls,builder,variant,kwargs",
    [
        (hypermodels.MLPHyperModel, "mlp", "dense", MLP_KWARGS),
        (hypermodels.CNNHyperModel, "cnn", "conv", CNN_KWARGS),
    ],
    ids=["dense", "conv"],
)
def test_baseline_kernel_scale_reaches_the_plain_baseline(
    cls, builder, variant, kwargs, monkeypatch
):
    calls = []
    real = getattr(models, builder)

    def spy(*args, **kw):
        calls.append(kw["kernel_scale"])
        return real(*args, **kw)

    monkeypatch.setattr(models, builder, spy)
    hypermodel = cls(variant, baseline_kernel_scale=2.0, **kwargs)
    hp, _ = _space(hypermodel)
    # A fixed setting, not a hyperparameter.
    assert [p.name for p in hp.space] == ["learning_rate", "optimizer"]
    assert calls == [2.0]


@pytest.mark.parametrize(
    "cls,variant,kwargs",
    [
        (hypermodels.MLPHyperModel, "affine_like", MLP_KWARGS),
        (hypermodels.MLPHyperModel, "batch_norm", MLP_KWARGS),
        (hypermodels.CNNHyperModel, "group_norm", CNN_KWARGS),
    ],
    ids=["ours", "batch_norm", "group_norm"],
)
def test_baseline_kernel_scale_for_another_arm(cls, variant, kwargs):
    with pytest.raises(
        ValueError,
        match=r"Expected None except for the plain baseline \((dense|conv)\).*"
        rf"Received: variant='{variant}', baseline_kernel_scale=2.0",
    ):
        cls(variant, baseline_kernel_scale=2.0, **kwargs)


def test_bad_baseline_kernel_scale():
    with pytest.raises(ValueError, match=r"baseline_kernel_scale=-1"):
        hypermodels.MLPHyperModel(
            "dense", baseline_kernel_scale=-1, **MLP_KWARGS
        )


def test_kernel_scales_none_keeps_the_default_initialisation():
    hypermodel = hypermodels.MLPHyperModel(
        "norm_like", kernel_scales=None, **MLP_KWARGS
    )
    hp, _ = _space(hypermodel)
    assert [p.name for p in hp.space] == ["learning_rate", "optimizer"]


def test_hyperparameter_names_are_stable():
    assert hypermodels.HYPERPARAMETER_NAMES == (
        "learning_rate",
        "optimizer",
        "kernel_scale",
    )


@pytest.mark.parametrize(
    "kwargs,error,match",
    [
        (
            {"variant": "conv"},
            ValueError,
            r"Expected one of 'dense', 'affine_like', .* Received: variant='conv'",
        ),
        (
            {"optimizers": "sgd"},
            TypeError,
            r"Expected a list or tuple .* Received: optimizers='sgd'",
        ),
        (
            {"optimizers": ("sgd", "rmsprop")},
            ValueError,
            r"distinct names .* Received: optimizers=\('sgd', 'rmsprop'\)",
        ),
        ({"optimizers": ()}, ValueError, r"Received: optimizers=\(\)"),
        (
            {"lr_range": (1.0, 1e-3)},
            ValueError,
            r"`\(low, high\)` with `0 < low < high`. "
            r"Received: lr_range=\(1.0, 0.001\)",
        ),
        ({"lr_range": (0, 1.0)}, ValueError, r"Received: lr_range=\(0, 1.0\)"),
        ({"lr_range": 0.1}, ValueError, r"Received: lr_range=0.1"),
        (
            {"kernel_scales": (1.0, -2.0)},
            ValueError,
            r"positive numbers or None. Received: kernel_scales=\(1.0, -2.0\)",
        ),
        ({"kernel_scales": ()}, ValueError, r"Received: kernel_scales=\(\)"),
        (
            {"schedule": "step"},
            ValueError,
            r"Expected one of 'constant', 'cosine'. Received: "
            r"schedule='step'",
        ),
        (
            {"warmup_epochs": -1},
            ValueError,
            r"non-negative integer. Received: warmup_epochs=-1",
        ),
        (
            {"momentum": 1.0},
            ValueError,
            r"a number in \[0, 1\). Received: momentum=1.0",
        ),
    ],
    ids=[
        "variant",
        "optimizers_type",
        "optimizers_name",
        "optimizers_empty",
        "lr_order",
        "lr_zero",
        "lr_scalar",
        "scales_negative",
        "scales_empty",
        "schedule",
        "warmup",
        "momentum",
    ],
)
def test_invalid_arguments(kwargs, error, match):
    arguments = dict(MLP_KWARGS, variant="dense")
    arguments.update(kwargs)
    with pytest.raises(error, match=match):
        hypermodels.MLPHyperModel(**arguments)


def test_invalid_cnn_variant():
    with pytest.raises(
        ValueError,
        match=r"Expected one of 'conv', 'patch_norm', .* "
        r"Received: variant='affine_like'",
    ):
        hypermodels.CNNHyperModel("affine_like", **CNN_KWARGS)


def test_make_optimizer_rejects_an_unknown_name():
    with pytest.raises(
        ValueError,
        match=r"Expected one of 'sgd', 'adam'."
        r" Received: optimizer='rmsprop'",
    ):
        hypermodels.make_optimizer("rmsprop", 0.1)


def test_keras_tuner_is_optional_for_the_library():
    # Without KerasTuner the layers import, and the hypermodels say which
    # extra to install.
    code = (
        "import sys; sys.modules['keras_tuner'] = None\n"
        "import keras_affine_div, keras_affine_div.layers\n"
        "try:\n"
        "    import keras_affine_div.hypermodels\n"
        "except ImportError as e:\n"
        "    print(e)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.stdout.strip() == (
        "`keras_affine_div.hypermodels` requires KerasTuner. Install it with "
        '`pip install "keras-affine-div[tuning]"`.'
    ), out.stderr


def test_cosine_schedule_values():
    schedule = hypermodels.cosine_schedule(0.2, total_steps=12, warmup_steps=4)
    values = [float(schedule(step)) for step in range(13)]
    # Linear warm-up from 0, then a half cosine from the peak to 0.
    expected = [0.2 * s / 4 for s in range(4)] + [
        0.1 * (1 + np.cos(np.pi * (s - 4) / 8)) for s in range(4, 13)
    ]
    np.testing.assert_allclose(values, expected, atol=1e-6)
    plain = hypermodels.cosine_schedule(0.2, total_steps=10)
    assert float(plain(0)) == pytest.approx(0.2)
    with pytest.raises(
        ValueError,
        match=r"Expected `0 <= warmup_steps < "
        r"total_steps`. Received: total_steps=4, "
        r"warmup_steps=4",
    ):
        hypermodels.cosine_schedule(0.1, total_steps=4, warmup_steps=4)


def _tiny_data(n=48, features=4):
    rng = np.random.default_rng(0)
    return (
        rng.standard_normal((n, features)).astype("float32"),
        np.arange(n) % 3,
    )


def test_fit_runs_the_cosine_schedule_over_the_whole_run():
    x, y = _tiny_data()
    hypermodel = hypermodels.MLPHyperModel(
        "affine_like",
        (4,),
        3,
        depth=1,
        width=8,
        optimizers=("sgd",),
        kernel_scales=(0.5,),
        schedule="cosine",
        warmup_epochs=1,
        momentum=0.5,
    )
    hp = keras_tuner.HyperParameters()
    model = hypermodel.build(hp)
    assert float(model.optimizer.momentum) == 0.5
    seen = []

    class Rates(keras.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):
            seen.append(
                float(
                    keras.ops.convert_to_numpy(
                        self.model.optimizer.learning_rate
                    )
                )
            )

    hypermodel.fit(
        hp, model, x, y, epochs=3, batch_size=16, callbacks=[Rates()], verbose=0
    )
    lr = hp.get("learning_rate")
    # 3 steps per epoch: warm-up over the first epoch, then down to 0.
    expected = [
        float(hypermodels.cosine_schedule(lr, 9, 3)(s)) for s in range(9)
    ]
    np.testing.assert_allclose(seen, expected, rtol=1e-5, atol=1e-9)
    assert seen[0] == 0.0 and max(seen) == pytest.approx(lr)
    # A run no longer than the warm-up: warm-up over its first half.
    seen.clear()
    hypermodel.fit(
        hp,
        hypermodel.build(hp),
        x,
        y,
        epochs=1,
        batch_size=4,
        callbacks=[Rates()],
        verbose=0,
    )
    expected = [
        float(hypermodels.cosine_schedule(lr, 12, 6)(s)) for s in range(12)
    ]
    np.testing.assert_allclose(seen, expected, rtol=1e-5, atol=1e-9)
    # Resumed from epoch 2 of 4 (a later Hyperband rung): the schedule
    # covers the 2 epochs this call trains.
    seen.clear()
    hypermodel.fit(
        hp,
        hypermodel.build(hp),
        x,
        y,
        epochs=4,
        initial_epoch=2,
        batch_size=16,
        callbacks=[Rates()],
        verbose=0,
    )
    expected = [
        float(hypermodels.cosine_schedule(lr, 6, 3)(s)) for s in range(6)
    ]
    np.testing.assert_allclose(seen, expected, rtol=1e-5, atol=1e-9)
    with pytest.raises(
        ValueError,
        match=r"Expected more epochs than `initial_epoch`. "
        r"Received: epochs=2, initial_epoch=2",
    ):
        hypermodel.fit(
            hp, hypermodel.build(hp), x, y, epochs=2, initial_epoch=2
        )


@pytest.mark.parametrize(
    "warmup_epochs,epochs,steps,expected",
    [
        (0, 1, 7, 0),
        (1, 15, 100, 100),
        (2, 3, 5, 10),
        (1, 1, 7, 3),
        (3, 2, 5, 5),
    ],
)
def test_warmup_steps(warmup_epochs, epochs, steps, expected):
    assert hypermodels.warmup_steps(warmup_epochs, epochs, steps) == expected


# KerasTuner's own loop on one backend; the schedule itself runs on every
# backend (test_fit_runs_the_cosine_schedule_over_the_whole_run).
@pytest.mark.requires_backend("torch")
def test_stock_hyperband_with_the_cosine_schedule(tmp_path):
    # Hyperband's first rung trains 1 epoch, no longer than the warm-up;
    # later rungs resume from `initial_epoch`. Every trial must train.
    x, y = _tiny_data(n=32)
    hypermodel = hypermodels.MLPHyperModel(
        "affine_like",
        (4,),
        3,
        depth=1,
        width=8,
        optimizers=("sgd",),
        lr_range=(0.01, 0.1),
        kernel_scales=(0.5,),
        schedule="cosine",
        warmup_epochs=1,
    )
    tuner = keras_tuner.Hyperband(
        hypermodel,
        objective="val_accuracy",
        max_epochs=3,
        factor=3,
        hyperband_iterations=1,
        seed=0,
        directory=tmp_path,
        project_name="hyperband",
    )
    tuner.search(x, y, validation_data=(x, y), batch_size=8, verbose=0)
    trials = list(tuner.oracle.trials.values())
    assert len(trials) >= 3
    assert all(t.status == "COMPLETED" for t in trials), [
        (t.trial_id, t.status, t.message) for t in trials
    ]
    rungs = {t.hyperparameters.values["tuner/epochs"] for t in trials}
    assert 1 in rungs and max(rungs) == 3
    assert all(np.isfinite(t.score) for t in trials)


def test_fit_stops_a_diverging_run_at_once():
    x, y = _tiny_data()
    x[20] = np.nan  # in the second batch of the first epoch
    hypermodel = hypermodels.MLPHyperModel(
        "dense",
        (4,),
        3,
        depth=2,
        width=8,
        optimizers=("sgd",),
    )
    hp = keras_tuner.HyperParameters()
    model = hypermodel.build(hp)
    history = hypermodel.fit(
        hp, model, x, y, epochs=5, batch_size=16, shuffle=False, verbose=0
    )
    # TerminateOnNaN ends training in the epoch that met a non-finite loss.
    assert len(history.history["loss"]) == 1
    assert int(keras.ops.convert_to_numpy(model.optimizer.iterations)) == 2
    assert not np.isfinite(history.history["loss"][-1])


def test_fit_trains_only_on_the_declared_data():
    x, y = _tiny_data()
    hypermodel = hypermodels.MLPHyperModel(
        "dense", (4,), 3, depth=1, width=8, optimizers=("sgd",)
    )
    hp = keras_tuner.HyperParameters()
    model = hypermodel.build(hp)
    with pytest.raises(
        ValueError,
        match=r"Expected samples of shape \(4,\), the hypermodel's "
        r"`input_shape`. Received: x.shape=\(48, 5\)",
    ):
        hypermodel.fit(hp, model, np.zeros((48, 5), "float32"), y)
    with pytest.raises(
        ValueError,
        match=r"Expected one label per sample of `x` \(48\). "
        r"Received: len\(y\)=47",
    ):
        hypermodel.fit(hp, model, x, y[:47])
    assert int(keras.ops.convert_to_numpy(model.optimizer.iterations)) == 0
