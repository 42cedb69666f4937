"""Tests of keras_affine_div/callbacks.py: `AlignmentMonitor` inside `fit`.

Each test trains a small MLP (a `Dense`, an `AffineLikeDense` and a `Dense`
head) for a few epochs on random data, with helper callbacks placed around
the monitor that see the same weights and `logs` it does.
"""

import csv
import math

import keras
import numpy as np
import pytest

from keras_affine_div import callbacks
from keras_affine_div import diagnostics
from keras_affine_div.layers import AffineLikeDense

NUM_CLASSES = 3
LOSS = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
LAYER_NAMES = ("hidden", "affine", "logits")
SUMMARIES = (
    "median_scale",
    "q10_scale",
    "q90_scale",
    "spread_scale",
    "mean_scale",
    "mean_cosine",
)


def _data(num_samples=48, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((num_samples, 6)).astype("float32")
    y = rng.integers(0, NUM_CLASSES, size=(num_samples,))
    return x, y


def _model(learning_rate=0.05, seed=0):
    keras.utils.set_random_seed(seed)
    model = keras.Sequential(
        [
            keras.Input((6,)),
            keras.layers.Dense(8, activation="tanh", name="hidden"),
            AffineLikeDense(8, activation="tanh", name="affine"),
            keras.layers.Dense(NUM_CLASSES, name="logits"),
        ]
    )
    model.compile(
        optimizer=keras.optimizers.SGD(learning_rate, momentum=0.9),
        loss=LOSS,
    )
    return model


def _fit(model, callback_list, epochs=3, seed=0):
    x, y = _data()
    keras.utils.set_random_seed(seed)
    return model.fit(
        x, y, batch_size=16, epochs=epochs, callbacks=callback_list, verbose=0
    )


def _probe():
    x, y = _data(num_samples=10, seed=1)
    return x, y


def _keys(names=LAYER_NAMES):
    return sorted(
        f"alignment/{name}/{summary}" for name in names for summary in SUMMARIES
    )


def _alignment_logs(logs):
    return {k: v for k, v in logs.items() if k.startswith("alignment/")}


def _snapshot(model):
    return [
        np.array(keras.ops.convert_to_numpy(v))
        for v in model.weights + list(model.optimizer.variables)
    ]


def _assert_bitwise_equal(a, b):
    assert len(a) == len(b)
    for u, v in zip(a, b):
        np.testing.assert_array_equal(u, v, strict=True)


class _Recorder(keras.callbacks.Callback):
    """Records, per epoch, the logs it sees and a direct report on them."""

    def __init__(self, x, y, loss=None, layers=None):
        super().__init__()
        self.x, self.y, self.loss, self.layers = x, y, loss, layers
        self.logs = {}
        self.expected = {}
        self.learning_rates = {}

    def on_epoch_end(self, epoch, logs=None):
        self.logs[epoch] = _alignment_logs(logs)
        learning_rate = float(
            keras.ops.convert_to_numpy(self.model.optimizer.learning_rate)
        )
        self.learning_rates[epoch] = learning_rate
        loss = self.loss if self.loss is not None else self.model.loss
        if self.layers is None:
            rows = diagnostics.alignment_report(
                self.model, self.x, self.y, loss, learning_rate=learning_rate
            )
        else:
            rows = [
                diagnostics.activation_update_alignment(
                    self.model,
                    layer,
                    self.x,
                    self.y,
                    loss,
                    learning_rate=learning_rate,
                ).summary()
                for layer in self.layers
            ]
        self.expected[epoch] = {
            f"alignment/{row['layer']}/{summary}": row[summary]
            for row in rows
            for summary in SUMMARIES
        }


class _WeightGuard(keras.callbacks.Callback):
    """Placed before and after the monitor: its weights, bitwise, per epoch."""

    def __init__(self):
        super().__init__()
        self.snapshots = []

    def on_epoch_end(self, epoch, logs=None):
        self.snapshots.append(_snapshot(self.model))


def _tempered_crossentropy(y_true, y_pred):
    """A loss other than the compiled one: cross-entropy at temperature 2."""
    return keras.losses.sparse_categorical_crossentropy(
        y_true, 0.5 * y_pred, from_logits=True
    )


CASES = {
    # kwargs of the monitor, the layers it measures
    "defaults": ({}, LAYER_NAMES),
    "loss": ({"loss": _tempered_crossentropy}, LAYER_NAMES),
    "layers": ({"layers": ["affine", "hidden"]}, ("affine", "hidden")),
}


@pytest.mark.parametrize("kwargs,names", CASES.values(), ids=CASES.keys())
def test_logs_equal_a_direct_report_on_the_same_weights(kwargs, names):
    x, y = _probe()
    model = _model()
    monitor = callbacks.AlignmentMonitor(x, y, **kwargs)
    recorder = _Recorder(
        x, y, loss=kwargs.get("loss"), layers=kwargs.get("layers")
    )
    history = _fit(model, [monitor, recorder])
    assert sorted(recorder.logs) == [0, 1, 2]
    for epoch, logs in recorder.logs.items():
        assert sorted(logs) == _keys(names)
        assert all(type(value) is float for value in logs.values())
        expected = recorder.expected[epoch]
        assert sorted(expected) == sorted(logs)
        for key, value in logs.items():
            np.testing.assert_array_equal(value, expected[key])
    for key in _keys(names):
        assert history.history[key] == [
            recorder.logs[epoch][key] for epoch in range(3)
        ]
    # As the theory says: the Dense multiplier (about |x|^2 + 1 = 7 on the
    # diagonal) is far above the AffineLikeDense one (1 on the diagonal).
    affine = recorder.logs[2]["alignment/affine/mean_scale"]
    hidden = recorder.logs[2]["alignment/hidden/mean_scale"]
    assert hidden > 2 * affine > 0


def test_layers_by_object_and_by_name_are_the_same():
    x, y = _probe()
    by_name = _Recorder(x, y)
    model = _model()
    _fit(model, [callbacks.AlignmentMonitor(x, y, layers=["affine"]), by_name])
    by_object = _Recorder(x, y)
    model = _model()
    monitor = callbacks.AlignmentMonitor(
        x, y, layers=[model.get_layer("affine")]
    )
    _fit(model, [monitor, by_object])
    assert by_name.logs == by_object.logs
    assert sorted(by_name.logs[0]) == _keys(["affine"])


def test_learning_rate_is_the_optimizers_current_one(monkeypatch):
    seen = []
    report = diagnostics.alignment_report

    def spy(*args, learning_rate, **kwargs):
        seen.append(learning_rate)
        return report(*args, learning_rate=learning_rate, **kwargs)

    monkeypatch.setattr(diagnostics, "alignment_report", spy)
    schedule = keras.optimizers.schedules.ExponentialDecay(
        0.1, decay_steps=1, decay_rate=0.8
    )
    model = _model(learning_rate=schedule)
    x, y = _probe()
    recorder = _Recorder(x, y)
    _fit(model, [callbacks.AlignmentMonitor(x, y), recorder])
    # 48 samples in batches of 16: 3 steps per epoch.
    expected = [0.1 * 0.8 ** (3 * (epoch + 1)) for epoch in range(3)]
    assert all(type(lr) is float for lr in seen)
    # The spy saw the monitor's calls and the recorder's, in turn.
    np.testing.assert_allclose(seen[0::2], expected, rtol=1e-6)
    assert seen[0::2] == [recorder.learning_rates[e] for e in range(3)]


def test_the_monitor_leaves_weights_bitwise_unchanged():
    x, y = _probe()
    before, after = _WeightGuard(), _WeightGuard()
    model = _model()
    _fit(model, [before, callbacks.AlignmentMonitor(x, y), after])
    assert len(before.snapshots) == len(after.snapshots) == 3
    for a, b in zip(before.snapshots, after.snapshots):
        _assert_bitwise_equal(a, b)


def test_training_with_and_without_the_monitor_gives_the_same_weights():
    x, y = _probe()
    with_monitor = _model(seed=3)
    history = _fit(with_monitor, [callbacks.AlignmentMonitor(x, y)], seed=4)
    assert _keys()[0] in history.history
    without = _model(seed=3)
    _fit(without, [], seed=4)
    _assert_bitwise_equal(_snapshot(with_monitor), _snapshot(without))


def test_every_n_epochs_writes_only_on_every_nth_epoch():
    x, y = _probe()
    recorder = _Recorder(x, y)
    model = _model()
    monitor = callbacks.AlignmentMonitor(x, y, every_n_epochs=2)
    history = _fit(model, [monitor, recorder], epochs=5)
    measured = [epoch for epoch, logs in recorder.logs.items() if logs]
    assert measured == [1, 3]  # the 2nd and the 4th epoch
    for key in _keys():
        assert history.history[key] == [
            recorder.expected[epoch][key] for epoch in measured
        ]
    assert len(history.history["loss"]) == 5


def test_lands_in_history_and_in_a_csv_logger_after_it(tmp_path):
    x, y = _probe()
    path = tmp_path / "log.csv"
    model = _model()
    history = _fit(
        model,
        [callbacks.AlignmentMonitor(x, y), keras.callbacks.CSVLogger(path)],
    )
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 3
    for key in _keys():
        assert key in rows[0]
        assert len(history.history[key]) == 3
        from_csv = [float(row[key]) for row in rows]
        # The CSV holds the floats as written (repr), so they round-trip.
        np.testing.assert_array_equal(from_csv, history.history[key])


def test_callbacks_before_the_monitor_do_not_see_the_keys():
    x, y = _probe()
    early = _Recorder(x, y)
    model = _model()
    _fit(model, [early, callbacks.AlignmentMonitor(x, y)], epochs=1)
    assert early.logs == {0: {}}


def test_a_learning_rate_that_is_not_positive_skips_the_epoch():
    x, y = _probe()
    model = _model(learning_rate=0.0)
    with pytest.warns(
        UserWarning, match=r"learning rate at the end of epoch 1 is 0\.0"
    ):
        history = _fit(model, [callbacks.AlignmentMonitor(x, y)], epochs=1)
    assert not _alignment_logs(history.history)


def test_the_monitor_works_outside_fit():
    x, y = _probe()
    model = _model()
    monitor = callbacks.AlignmentMonitor(x, y, layers=["logits"])
    monitor.set_model(model)
    logs = {"loss": 1.0}
    monitor.on_epoch_end(0, logs)
    assert sorted(logs) == _keys(["logits"]) + ["loss"]
    assert all(math.isfinite(logs[key]) for key in _keys(["logits"]))


def test_logs_the_quantiles_of_the_per_sample_multipliers():
    x, y = _probe()
    model = _model()
    monitor = callbacks.AlignmentMonitor(x, y)
    history = _fit(model, [monitor], epochs=1)
    learning_rate = float(
        keras.ops.convert_to_numpy(model.optimizer.learning_rate)
    )
    for name in LAYER_NAMES:
        scale = diagnostics.activation_update_alignment(
            model, name, x, y, LOSS, learning_rate=learning_rate
        ).scale
        q10, median, q90 = np.quantile(scale, [0.1, 0.5, 0.9])
        logged = {
            summary: history.history[f"alignment/{name}/{summary}"][0]
            for summary in SUMMARIES
        }
        np.testing.assert_allclose(
            [logged["q10_scale"], logged["median_scale"], logged["q90_scale"]],
            [q10, median, q90],
            rtol=1e-6,
        )
        np.testing.assert_allclose(logged["spread_scale"], q90 - q10, rtol=1e-6)
        np.testing.assert_allclose(
            logged["mean_scale"], np.mean(scale), rtol=1e-6
        )
        assert f"alignment/{name}/cv_scale" not in history.history


def test_logs_stay_readable_when_the_mean_multiplier_is_near_zero(monkeypatch):
    # The user's report: a probe batch whose multipliers average almost 0
    # (half the samples step against the ideal) logged a cv_scale of ~900.
    # Every logged multiplier summary must stay within the per-sample values.
    scale = np.array([-3.0, -1.2, -0.4, 0.2, 0.9, 3.5009])
    assert abs(scale.mean()) < 1e-3

    def near_zero_mean(model, layer, *args, learning_rate, **kwargs):
        return diagnostics.ActivationUpdateAlignment(
            layer.name, "Dense", learning_rate, scale, np.ones(6), np.ones(6)
        )

    monkeypatch.setattr(
        diagnostics, "activation_update_alignment", near_zero_mean
    )
    x, y = _probe()
    model = _model()
    monitor = callbacks.AlignmentMonitor(x, y, layers=["hidden"])
    logs = {}
    monitor.set_model(model)
    monitor.on_epoch_end(0, logs)
    assert sorted(logs) == _keys(["hidden"])
    q10, median, q90 = np.quantile(scale, [0.1, 0.5, 0.9])
    assert logs["alignment/hidden/q10_scale"] == pytest.approx(q10)
    assert logs["alignment/hidden/median_scale"] == pytest.approx(median)
    assert logs["alignment/hidden/q90_scale"] == pytest.approx(q90)
    assert logs["alignment/hidden/spread_scale"] == pytest.approx(q90 - q10)
    for summary in ("q10_scale", "median_scale", "q90_scale", "mean_scale"):
        value = logs[f"alignment/hidden/{summary}"]
        assert scale.min() <= value <= scale.max()
    spread = logs["alignment/hidden/spread_scale"]
    assert 0 < spread <= scale.max() - scale.min()


# Argument errors: each pins its message.
BAD_ARGUMENTS = {
    "every_n_epochs_zero": (
        {"every_n_epochs": 0},
        ValueError,
        r"Expected a positive integer\. Received: every_n_epochs=0",
    ),
    "every_n_epochs_negative": (
        {"every_n_epochs": -2},
        ValueError,
        r"Expected a positive integer\. Received: every_n_epochs=-2",
    ),
    "every_n_epochs_float": (
        {"every_n_epochs": 2.0},
        TypeError,
        r"Expected a positive integer\. Received: every_n_epochs=2\.0",
    ),
    "every_n_epochs_bool": (
        {"every_n_epochs": True},
        TypeError,
        r"Expected a positive integer\. Received: every_n_epochs=True",
    ),
    "layers_str": (
        {"layers": "hidden"},
        TypeError,
        r"Expected `None` or a list of layers or layer names \(str\)\. "
        r"Received: layers='hidden' of type str$",
    ),
    "layers_empty": (
        {"layers": []},
        ValueError,
        r"Expected `None` or at least one layer\. Received: layers=\[\]$",
    ),
    "layers_bad_entry": (
        {"layers": ["hidden", 3]},
        TypeError,
        r"Expected `None` or a list of layers or layer names \(str\)\. "
        r"Received: layers=\['hidden', 3\] of type list$",
    ),
    "layers_twice": (
        {"layers": ["hidden", "hidden"]},
        ValueError,
        r"Expected each layer at most once\. "
        r"Received: layers=\['hidden', 'hidden'\]$",
    ),
    "loss_unknown": (
        {"loss": "nope"},
        ValueError,
        r"Expected the name of a Keras loss.*Received: loss='nope'$",
    ),
    "loss_type": (
        {"loss": 3},
        TypeError,
        r"Expected a loss name.*Received: loss=3$",
    ),
}


@pytest.mark.parametrize(
    "kwargs,error,match", BAD_ARGUMENTS.values(), ids=BAD_ARGUMENTS.keys()
)
def test_rejects_bad_arguments(kwargs, error, match):
    x, y = _probe()
    with pytest.raises(error, match=match):
        callbacks.AlignmentMonitor(x, y, **kwargs)


@pytest.mark.parametrize(
    "x_shape,y_shape,match",
    [
        ((4, 6), (5,), r"Received: x\.shape=\(4, 6\), y\.shape=\(5,\)$"),
        ((0, 6), (0,), r"Received: x\.shape=\(0, 6\), y\.shape=\(0,\)$"),
    ],
    ids=["mismatched", "empty"],
)
def test_rejects_bad_probe_batches(x_shape, y_shape, match):
    with pytest.raises(
        ValueError,
        match=r"Expected `x` and `y` to hold the same number of samples, at "
        r"least one .*" + match,
    ):
        callbacks.AlignmentMonitor(np.zeros(x_shape), np.zeros(y_shape))


def test_rejects_an_unknown_layer_when_training_starts():
    x, y = _probe()
    model = _model()
    monitor = callbacks.AlignmentMonitor(x, y, layers=["hidden", "nope"])
    with pytest.raises(
        ValueError,
        match=r"Expected the name of a layer of model `.*`, one of "
        r"\['hidden', 'affine', 'logits'\]\. Received: layer='nope'$",
    ):
        _fit(model, [monitor], epochs=1)


def test_rejects_a_model_without_a_single_compiled_loss():
    x, y = _probe()
    uncompiled = keras.Sequential(
        [keras.Input((6,)), keras.layers.Dense(NUM_CLASSES)]
    )
    monitor = callbacks.AlignmentMonitor(x, y)
    monitor.set_model(uncompiled)
    with pytest.raises(
        ValueError,
        match=r"Expected `loss`, or a model compiled with a single loss .*"
        r"Received: loss=None, model\.loss=None$",
    ):
        monitor.on_train_begin()


def test_a_probe_the_model_cannot_take_fails_before_training():
    x, y = _data(num_samples=10, seed=1)
    model = _model()
    before = model.get_weights()
    monitor = callbacks.AlignmentMonitor(x[:, :4], y)
    with pytest.raises(ValueError, match="AlignmentMonitor: the model") as e:
        _fit(model, [monitor], epochs=2)
    message = str(e.value)
    assert "\n" not in message
    assert "(10, 4)" in message and "nothing was trained" in message
    for weight, old in zip(model.get_weights(), before):
        np.testing.assert_array_equal(weight, old)


@pytest.mark.parametrize("reader", ["tensorboard", "csv_logger"])
def test_a_log_reader_listed_before_the_monitor_is_warned_of(reader, tmp_path):
    x, y = _probe()
    make = {
        "tensorboard": lambda: keras.callbacks.TensorBoard(str(tmp_path)),
        "csv_logger": lambda: keras.callbacks.CSVLogger(tmp_path / "l.csv"),
    }[reader]
    with pytest.warns(UserWarning, match="AlignmentMonitor is listed after"):
        _fit(_model(), [make(), callbacks.AlignmentMonitor(x, y)], epochs=1)


def test_tensorboard_after_the_monitor_gets_its_scalars(tmp_path, recwarn):
    x, y = _probe()
    _fit(
        _model(),
        [
            callbacks.AlignmentMonitor(x, y),
            keras.callbacks.TensorBoard(str(tmp_path)),
        ],
        epochs=1,
    )
    assert not [
        w for w in recwarn if "AlignmentMonitor is listed" in str(w.message)
    ]
    events = b"".join(
        p.read_bytes() for p in tmp_path.rglob("events.out.tfevents.*")
    )
    for key in _keys():
        assert key.encode() in events, key
