"""TensorBoard logs of a study, read back with TensorBoard's own reader."""

import os

import pytest

from tests.tuning import common
from tuning import runner
from tuning import sweep
from tuning import tensorboard

# Nothing here depends on the Keras backend: run once (conftest.py).
pytestmark = pytest.mark.backend_independent


def test_run_names():
    assert tensorboard.run_name("", "dense", "trial", "0") == "dense_trial-0"
    assert (
        tensorboard.run_name("width-4", "affine_like", "seed", 1)
        == "width-4_affine_like_seed-1"
    )


def test_a_study_writes_one_run_per_trial_and_seed(tmp_path):
    pytest.importorskip("tensorflow")
    from tensorboard.backend.event_processing import event_accumulator
    from tensorboard.plugins.hparams import plugin_data_pb2

    data_dir = common.write_image_folder(tmp_path / "cifar10")
    study = common.write_study(
        tmp_path / "tiny.toml", max_trials=2, epochs=2, tuner="bracket"
    )
    logs = tmp_path / "tb"
    sweep.execute(
        sweep.Arguments(
            study=study,
            options=runner.Options(
                data_dir=data_dir,
                results_dir=str(tmp_path / "res"),
                runs_dir=str(tmp_path / "runs"),
                tensorboard=str(logs),
            ),
            seeds=1,
        )
    )
    runs = sorted(os.listdir(logs / "tiny"))
    assert runs == sorted(
        f"{arm}_{kind}"
        for arm in ("dense", "affine_like")
        for kind in ("trial-0", "trial-1", "seed-0")
    )
    for run in runs:
        train = event_accumulator.EventAccumulator(
            str(logs / "tiny" / run / "train")
        )
        train.Reload()
        # Keras' per-epoch metrics (as tensors in TF2 summaries).
        assert "epoch_loss" in train.Tags()["tensors"], run
        hparams = event_accumulator.EventAccumulator(
            str(logs / "tiny" / run),
            size_guidance={event_accumulator.TENSORS: 0},
        )
        hparams.Reload()
        content = hparams.PluginTagToContent("hparams")
        assert content, run
        session = next(iter(content.values()))
        data = plugin_data_pb2.HParamsPluginData.FromString(session)
        values = dict(data.session_start_info.hparams)
        arm, kind = run.rsplit("_", 1)
        assert values["arm"].string_value == arm
        if kind.startswith("trial-"):
            assert values["trial"].number_value == int(kind[6:])
        else:
            assert values["seed"].number_value == int(kind[5:])
        assert values["learning_rate"].number_value > 0
        assert values["optimizer"].string_value == "adam"
