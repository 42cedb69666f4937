"""The alignment of activation steps against the batch size (claim (b))."""

import keras
import numpy as np
import pytest

from keras_affine_div import layers
from tests.tuning import common
from tuning import alignment
from tuning import records


def _model():
    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [
            keras.Input((6,)),
            keras.layers.Dense(5, activation="tanh", name="dense"),
            layers.AffineLikeDense(5, activation="tanh", name="affine_like"),
            keras.layers.Dense(3, name="logits"),
        ]
    )
    model.compile(
        "sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    )
    return model


def test_one_sample_steps_are_exact_and_batches_spread_them():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((16, 6)).astype("float32")
    y = np.arange(16) % 3
    rows = alignment.measure(_model(), x, y, batch_sizes=(1, 8), samples=16)
    by = {(r["batch"], r["layer"]): r for r in rows}
    assert len(rows) == 2 * 3
    assert all(r["samples"] == 16 for r in rows)
    # One sample: the plain layer's multiplier is exactly |x|^2 + 1, the
    # affine-like layer's exactly 1, both with the ideal direction.
    q10, median, q90 = np.quantile((x**2).sum(axis=1) + 1, (0.1, 0.5, 0.9))
    one = by[(1, "dense")]
    np.testing.assert_allclose(
        [one["q10_scale"], one["median_scale"], one["q90_scale"]],
        [q10, median, q90],
        rtol=1e-4,
    )
    np.testing.assert_allclose(one["mean_cosine"], 1.0, atol=1e-5)
    ideal = by[(1, "affine_like")]
    np.testing.assert_allclose(
        [ideal["q10_scale"], ideal["median_scale"], ideal["q90_scale"]],
        1.0,
        atol=2e-3,  # float32 steps
    )
    # A batch of 8: the cross-sample terms move each sample's step away
    # from its own ideal step.
    eight = by[(8, "affine_like")]
    assert eight["q90_scale"] - eight["q10_scale"] > 1e-2
    assert eight["mean_cosine"] < 0.999


# The tool end to end on one backend: what it measures is checked on every
# backend by the exact one-sample steps above.
@pytest.mark.requires_backend("torch")
def test_a_study_measured_at_initialisation(tmp_path, capsys):
    data_dir = common.write_image_folder(tmp_path / "cifar10")
    study = common.write_study(tmp_path / "tiny.toml")
    out = tmp_path / "results" / "tiny"
    out.mkdir(parents=True)
    records.write_csv(
        out / "trials.csv",
        ("arm", "seed", "learning_rate", "optimizer", "kernel_scale"),
        [
            {
                "arm": arm,
                "seed": "0",
                "learning_rate": "0.1",
                "optimizer": "sgd",
            }
            for arm in ("dense", "affine_like")
        ],
    )
    argv = [
        study,
        "--data-dir",
        data_dir,
        "--results-dir",
        str(tmp_path / "results"),
        "--batch-sizes",
        "1",
        "4",
        "--samples",
        "8",
    ]
    assert alignment.main(argv) == 0
    rows = records.read_csv(out / alignment.CSV)
    # Two arms, one phase, two batch sizes, two layers each (one hidden
    # block of the tiny study and the output layer).
    assert len(rows) == 2 * 2 * 2
    assert {r["phase"] for r in rows} == {"init"}
    hidden = {
        (r["arm"], r["batch"]): float(r["median_scale"])
        for r in rows
        if r["position"] == "0"
    }
    assert abs(hidden[("affine_like", "1")] - 1.0) < 1e-3
    assert hidden[("dense", "1")] > 100  # |x|^2 + 1 of 3072 pixels
    text = (out / alignment.MARKDOWN).read_text()
    assert "| - | affine_like | init | 0 | 1 | 1 |" in text
    assert (out / alignment.PLOT).stat().st_size > 0
    # More samples than one batch of the largest size: refused.
    assert alignment.main([*argv[:-1], "2"]) == 2
    assert "at least one batch of the largest size" in capsys.readouterr().err


def test_alignment_needs_a_finished_study(tmp_path, capsys):
    assert alignment.main(["smoke", "--results-dir", str(tmp_path)]) == 2
    assert "Expected a finished study" in capsys.readouterr().err
