import pytest

from tests.tuning import common
from tuning import study as study_module


def test_smoke_study():
    study = study_module.load_study("smoke")
    assert study.name == "smoke" and study.results_name == "smoke"
    assert study.family == "mlp"
    assert study.arms == ("dense", "affine_like")
    assert study.search["max_trials"] == 2
    lr = study.search["learning_rate"]
    assert lr[0] <= 1e-4 and lr[1] >= 1.0
    f = study.fixed
    assert (f["dataset"], f["train_samples"], f["val_samples"],
            f["test_samples"], f["epochs"], f["seeds"]) == (
        "cifar10", 512, 256, 256, 1, 2)
    assert study.model_kwargs == {"depth": 2, "width": 128,
                                  "activation": "tanh"}
    assert "smoke" in study_module.list_studies()


@pytest.mark.parametrize("name", study_module.list_studies())
def test_every_shipped_study_loads(name):
    for quick in (False, True):
        study = study_module.load_study(name, quick=quick)
        assert study.description
        assert study.config()["compare"]["arms"] == list(study.arms)


def test_quick_overrides_and_path(tmp_path):
    path = common.write_study(tmp_path / "tiny.toml", max_trials=5)
    full = study_module.load_study(path)
    quick = study_module.load_study(path, quick=True)
    assert (full.name, full.search["max_trials"], full.fixed["seeds"]) == (
        "tiny", 5, 2)
    assert (quick.results_name, quick.search["max_trials"],
            quick.fixed["seeds"]) == ("tiny-quick", 1, 1)
    changed = full.replace(search={"max_trials": 9}, fixed={"seeds": 4})
    assert (changed.search["max_trials"], changed.fixed["seeds"]) == (9, 4)
    assert full.search["max_trials"] == 5


def _edit(tmp_path, old, new):
    path = common.write_study(tmp_path / "bad.toml")
    text = open(path).read()
    assert old in text
    open(path, "w").write(text.replace(old, new, 1))
    return path


@pytest.mark.parametrize(
    "old,new,match",
    [
        ('family = "mlp"', 'family = "rnn"',
         r"`family` must be one of \('mlp', 'cnn'\). Received: family='rnn'"),
        ('arms = ["dense", "affine_like"]', 'arms = []',
         r"`arms` must be a non-empty list .* Received: arms=\[\]"),
        ('arms = ["dense", "affine_like"]', 'arms = ["dense", "dense"]',
         r"distinct mlp variants .* Received: arms=\['dense', 'dense'\]"),
        ('tuner = "random"', 'tuner = "grid"',
         r"`tuner` must be one of \('random', 'bayesian'\). "
         r"Received: tuner='grid'"),
        ("max_trials = 2", "max_trials = 0",
         r"`max_trials` must be an integer >= 1. Received: max_trials=0"),
        ("max_trials = 2", 'max_trials = "2"',
         r"Received: max_trials='2'"),
        ("learning_rate = [1e-4, 1.0]", "learning_rate = [1.0, 1e-4]",
         r"0 < low < high. Received: learning_rate=\[1.0, 0.0001\]"),
        ('optimizers = ["sgd", "adam"]', 'optimizers = ["lion"]',
         r"`optimizers` must be .* Received: optimizers=\['lion'\]"),
        ("kernel_scales = [0.5, 1.0, 2.0]", "kernel_scales = [0.0]",
         r"positive numbers. Received: kernel_scales=\[0.0\]"),
        ('dataset = "cifar10"', 'dataset = "imagenet"',
         r"`dataset` must be one of \('cifar10', 'fashion_mnist'\). "
         r"Received: dataset='imagenet'"),
        ("epochs = 1", "epochs = 1.5",
         r"`epochs` must be an integer >= 1. Received: epochs=1.5"),
        ('activation = "tanh"', "activation = 3",
         r"`activation` must be a string. Received: activation=3"),
        ("seeds = 2", "seeds = 2\nlearning_rate_decay = 0.1",
         r"unknown keys in \[fixed\]; expected only .* "
         r"Received: learning_rate_decay=0.1"),
        ("seeds = 2", "",
         r"\[fixed\] must set .* Received: missing=\['seeds'\]"),
        ("max_trials = 1\n", "max_trials = 1\nwidth = 3\nbogus = 1\n",
         r"unknown keys in \[quick\].* Received: bogus=1"),
        ('description = "The smoke study, shrunk for the tests."',
         "description = 1", r"`description` must be a string. "
         r"Received: description=1"),
        ("[compare]\n", "[comparison]\n",
         r"unknown keys in top level; .* Received: comparison="),
    ],
    ids=["family", "no_arms", "repeated_arm", "tuner", "max_trials_zero",
         "max_trials_str", "lr_order", "optimizer", "kernel_scale",
         "dataset", "epochs_float", "activation", "unknown_fixed",
         "missing_fixed", "unknown_quick", "description", "unknown_table"],
)
def test_malformed_study_files(tmp_path, old, new, match):
    path = _edit(tmp_path, old, new)
    with pytest.raises(study_module.StudyError,
                       match=r"^Malformed study file .*bad\.toml: .*" + match):
        study_module.load_study(path)


def test_missing_table(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text('description = "x"\n[compare]\nfamily = "mlp"\n'
                    'arms = ["dense"]\n')
    with pytest.raises(study_module.StudyError,
                       match=r"expected a `\[search\]` table. "
                       r"Received: search=None"):
        study_module.load_study(path)


def test_cnn_study_takes_filters_not_width(tmp_path):
    path = _edit(tmp_path, 'family = "mlp"\narms = ["dense", "affine_like"]',
                 'family = "cnn"\narms = ["conv", "patch_norm"]')
    with pytest.raises(study_module.StudyError,
                       match=r"unknown keys in \[fixed\]; expected only "
                       r"\[.*'filters'.*\]. Received: width=8"):
        study_module.load_study(path)
    text = open(path).read().replace("width = 8", "filters = 4")
    open(path, "w").write(text.replace("max_trials = 1\n",
                                       "max_trials = 1\nfilters = 2\n"))
    study = study_module.load_study(path, quick=True)
    assert study.arms == ("conv", "patch_norm")
    assert study.model_kwargs == {"depth": 1, "filters": 2,
                                  "activation": "tanh"}


def test_missing_study_file(tmp_path):
    with pytest.raises(study_module.StudyError,
                       match=r"Study file not found. Expected an existing "
                       r"`.toml` file. Received: study='.*nowhere.toml'"):
        study_module.load_study(tmp_path / "nowhere.toml")


def test_unknown_study():
    with pytest.raises(study_module.StudyError,
                       match=r"Unknown study. Expected one of \[.*'smoke'.*\]"
                       r" or a path to a `.toml` study file. "
                       r"Received: study='nope'"):
        study_module.load_study("nope")
