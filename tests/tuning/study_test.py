import pytest

from tests.tuning import common
from tuning import study as study_module

# Nothing here depends on the Keras backend: run once (conftest.py).
pytestmark = pytest.mark.backend_independent


def test_smoke_study():
    study = study_module.load_study("smoke")
    assert study.name == "smoke" and study.results_name == "smoke"
    assert study.family == "mlp"
    assert study.arms == ("dense", "affine_like")
    # Protocol v2: the bracketing search, one schedule, comparators.
    assert study.search["tuner"] == "bracket"
    assert study.search["optimizers"] == ["sgd"]
    assert study.search["kernel_scales"] is None
    assert study.search["learning_rate_limits"] == [1e-6, 100.0]
    assert study.comparators == ("dense",) and study.margin == 0.01
    assert study.our_arms == ("affine_like",)
    f = study.fixed
    assert (
        f["dataset"],
        f["train_samples"],
        f["val_samples"],
        f["test_samples"],
        f["epochs"],
        f["seeds"],
    ) == ("cifar10", 512, 256, 256, 2, 2)
    assert (f["schedule"], f["warmup_epochs"], f["momentum"]) == (
        "cosine",
        1,
        0.9,
    )
    assert study.model_kwargs == {
        "depth": 2,
        "width": 128,
        "activation": "tanh",
    }
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
        "tiny",
        5,
        2,
    )
    assert (
        quick.results_name,
        quick.search["max_trials"],
        quick.fixed["seeds"],
    ) == ("tiny-quick", 1, 1)
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
        (
            'family = "mlp"',
            'family = "rnn"',
            r"`family` must be one of \('mlp', 'cnn'\). Received: family='rnn'",
        ),
        (
            'arms = ["dense", "affine_like"]',
            "arms = []",
            r"`arms` must be a non-empty list .* Received: arms=\[\]",
        ),
        (
            'arms = ["dense", "affine_like"]',
            'arms = ["dense", "dense"]',
            r"distinct mlp variants .* Received: arms=\['dense', 'dense'\]",
        ),
        (
            'tuner = "random"',
            'tuner = "grid"',
            r"`tuner` must be one of \('bracket', 'random', 'bayesian'\). "
            r"Received: tuner='grid'",
        ),
        (
            "max_trials = 2",
            "max_trials = 0",
            r"`max_trials` must be an integer >= 1. Received: max_trials=0",
        ),
        ("max_trials = 2", 'max_trials = "2"', r"Received: max_trials='2'"),
        (
            "learning_rate = [1e-4, 1.0]",
            "learning_rate = [1.0, 1e-4]",
            r"0 < low < high. Received: learning_rate=\[1.0, 0.0001\]",
        ),
        (
            'optimizers = ["sgd", "adam"]',
            'optimizers = ["lion"]',
            r"`optimizers` must be .* Received: optimizers=\['lion'\]",
        ),
        (
            "kernel_scales = [0.5, 1.0, 2.0]",
            "kernel_scales = [0.0]",
            r"positive numbers. Received: kernel_scales=\[0.0\]",
        ),
        (
            'dataset = "cifar10"',
            'dataset = "imagenet"',
            r"`dataset` must be one of \('cifar10', 'fashion_mnist'\). "
            r"Received: dataset='imagenet'",
        ),
        (
            "epochs = 1",
            "epochs = 1.5",
            r"`epochs` must be an integer >= 1. Received: epochs=1.5",
        ),
        (
            'activation = "tanh"',
            "activation = 3",
            r"`activation` must be a string. Received: activation=3",
        ),
        (
            "seeds = 2",
            "seeds = 2\nlearning_rate_decay = 0.1",
            r"unknown keys in \[fixed\]; expected only .* "
            r"Received: learning_rate_decay=0.1",
        ),
        (
            "seeds = 2",
            "",
            r"\[fixed\] must set .* Received: missing=\['seeds'\]",
        ),
        (
            "max_trials = 1\n",
            "max_trials = 1\nwidth = 3\nbogus = 1\n",
            r"unknown keys in \[quick\].* Received: bogus=1",
        ),
        (
            'description = "The smoke study, shrunk for the tests."',
            "description = 1",
            r"`description` must be a string. "
            r"Received: description=1",
        ),
        (
            "[compare]\n",
            "[comparison]\n",
            r"unknown keys in top level; .* Received: comparison=",
        ),
    ],
    ids=[
        "family",
        "no_arms",
        "repeated_arm",
        "tuner",
        "max_trials_zero",
        "max_trials_str",
        "lr_order",
        "optimizer",
        "kernel_scale",
        "dataset",
        "epochs_float",
        "activation",
        "unknown_fixed",
        "missing_fixed",
        "unknown_quick",
        "description",
        "unknown_table",
    ],
)
def test_malformed_study_files(tmp_path, old, new, match):
    path = _edit(tmp_path, old, new)
    with pytest.raises(
        study_module.StudyError,
        match=r"^Malformed study file .*bad\.toml: .*" + match,
    ):
        study_module.load_study(path)


def test_missing_table(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text(
        'description = "x"\n[compare]\nfamily = "mlp"\narms = ["dense"]\n'
    )
    with pytest.raises(
        study_module.StudyError,
        match=r"expected a `\[search\]` table. "
        r"Received: search=None",
    ):
        study_module.load_study(path)


def test_cnn_study_takes_filters_not_width(tmp_path):
    path = _edit(
        tmp_path,
        'family = "mlp"\narms = ["dense", "affine_like"]',
        'family = "cnn"\narms = ["conv", "patch_norm"]',
    )
    with pytest.raises(
        study_module.StudyError,
        match=r"unknown keys in \[fixed\]; expected only "
        r"\[.*'filters'.*\]. Received: width=8",
    ):
        study_module.load_study(path)
    text = open(path).read().replace("width = 8", "filters = 4")
    open(path, "w").write(
        text.replace("max_trials = 1\n", "max_trials = 1\nfilters = 2\n")
    )
    study = study_module.load_study(path, quick=True)
    assert study.arms == ("conv", "patch_norm")
    assert study.model_kwargs == {
        "depth": 1,
        "filters": 2,
        "activation": "tanh",
    }


def test_missing_study_file(tmp_path):
    with pytest.raises(
        study_module.StudyError,
        match=r"Study file not found. Expected an existing "
        r"`.toml` file. Received: study='.*nowhere.toml'",
    ):
        study_module.load_study(tmp_path / "nowhere.toml")


def test_unknown_study():
    with pytest.raises(
        study_module.StudyError,
        match=r"Unknown study. Expected one of \[.*'smoke'.*\]"
        r" or a path to a `.toml` study file. "
        r"Received: study='nope'",
    ):
        study_module.load_study("nope")


def test_v1_study_gets_the_protocol_defaults(tmp_path):
    study = study_module.load_study(common.write_study(tmp_path / "v1.toml"))
    assert study.search["kernel_scales"] == [0.5, 1.0, 2.0]
    assert study.search["lr_step"] == 0.5
    assert (
        study.fixed["schedule"],
        study.fixed["warmup_epochs"],
        study.fixed["momentum"],
        study.fixed["kernel_scale"],
    ) == ("constant", 0, 0.9, None)
    # Undeclared comparators: every arm that is not ours.
    assert study.comparators == ("dense",)
    config = study.config()
    assert config["compare"]["comparators"] == ["dense"]
    assert config["compare"]["margin"] == 0.01


def test_bracket_study(tmp_path):
    path = common.write_study(tmp_path / "v2.toml", tuner="bracket", epochs=2)
    study = study_module.load_study(path)
    assert study.search["tuner"] == "bracket"
    assert study.fixed["kernel_scale"] == 0.5
    assert study.fixed["schedule"] == "cosine"


def _edit_v2(tmp_path, old, new):
    path = common.write_study(tmp_path / "bad.toml", tuner="bracket", epochs=2)
    text = open(path).read()
    assert old in text, old
    open(path, "w").write(text.replace(old, new, 1))
    return path


@pytest.mark.parametrize(
    "old, new, match",
    [
        (
            'optimizers = ["adam"]',
            'optimizers = ["adam", "sgd"]',
            r"the bracketing search varies the learning rate alone; give one "
            r"optimiser.* Received: optimizers=\['adam', 'sgd'\]",
        ),
        (
            'optimizers = ["adam"]',
            'optimizers = ["adam"]\nkernel_scales = [1.0, 2.0]',
            r"fix `kernel_scale` in \[fixed\] .* instead of searching "
            r"`kernel_scales`. Received: kernel_scales=\[1.0, 2.0\]",
        ),
        ("kernel_scale = 0.5\n", "", None),
        (
            "lr_step = 0.5",
            "lr_step = 0",
            r"`lr_step` must be a positive number of decades. "
            r"Received: lr_step=0",
        ),
        (
            "lr_step = 0.5",
            "lr_step = 0.5\nlearning_rate_limits = [0.05, 1]",
            r"`learning_rate_limits` must be `\[min, max\]` .* Received: "
            r"learning_rate_limits=\[0.05, 1\], learning_rate=\[0.01, 0.1\]",
        ),
        (
            'schedule = "cosine"',
            'schedule = "step"',
            r"`schedule` must be one of \('constant', 'cosine'\). "
            r"Received: schedule='step'",
        ),
        (
            "warmup_epochs = 1",
            "warmup_epochs = 2",
            r"the warm-up must be shorter than the run. Received: "
            r"warmup_epochs=2, epochs=2",
        ),
        (
            "warmup_epochs = 1",
            "warmup_epochs = 1\nmomentum = 1.0",
            r"`momentum` must be a number in \[0, 1\). Received: momentum=1.0",
        ),
        (
            "kernel_scale = 0.5",
            "kernel_scale = -1",
            r"`kernel_scale` must be a positive number, or a table of one for "
            r"each of some of our arms \(affine_like, norm_like, "
            r"affine_like_head\). "
            r"Received: kernel_scale=-1",
        ),
        (
            'family = "mlp"',
            'family = "mlp"\ncomparators = ["affine_like"]',
            r"`comparators` must be a list of distinct arms of the study that "
            r"are not ours .* Received: comparators=\['affine_like'\]",
        ),
        (
            'family = "mlp"',
            'family = "mlp"\ncomparators = ["batch_norm"]',
            r"Received: comparators=\['batch_norm'\], "
            r"arms=\['dense', 'affine_like'\]",
        ),
        (
            'family = "mlp"',
            'family = "mlp"\nmargin = -0.01',
            r"`margin` must be a number >= 0 \(accuracy\). "
            r"Received: margin=-0.01",
        ),
    ],
    ids=[
        "two_optimizers",
        "kernel_scales_and_scale",
        "no_kernel_scale",
        "lr_step",
        "limits",
        "schedule",
        "warmup",
        "momentum",
        "kernel_scale",
        "comparator_ours",
        "comparator_not_an_arm",
        "margin",
    ],
)
def test_malformed_v2_study_files(tmp_path, old, new, match):
    path = _edit_v2(tmp_path, old, new)
    if match is None:
        # Leaving the kernel scale out is allowed: the layers' default.
        assert study_module.load_study(path).fixed["kernel_scale"] is None
        return
    with pytest.raises(
        study_module.StudyError,
        match=r"^Malformed study file .*bad\.toml: .*" + match,
    ):
        study_module.load_study(path)


def test_kernel_scale_fixed_and_searched(tmp_path):
    path = common.write_study(tmp_path / "bad.toml")
    text = (
        open(path)
        .read()
        .replace("seeds = 2\n", "seeds = 2\nkernel_scale = 1.0\n", 1)
    )
    open(path, "w").write(text)
    with pytest.raises(
        study_module.StudyError,
        match=r"set either `kernel_scale` in \[fixed\] or "
        r"`kernel_scales` in \[search\], not both. Received: "
        r"kernel_scale=1.0, kernel_scales=\[0.5, 1.0, 2.0\]",
    ):
        study_module.load_study(path)


def _windows_study(tmp_path, windows, grid='optimizers = ["sgd", "adam"]'):
    path = common.write_study(
        tmp_path / "w.toml", tuner="bracket", epochs=2, grid=grid
    )
    text = open(path).read()
    text = text.replace("learning_rate = [0.01, 0.1]", windows, 1)
    text = text.replace('optimizers = ["adam"]\n', "", 1)
    open(path, "w").write(text)
    return path


def test_learning_rate_window_per_optimizer(tmp_path):
    path = _windows_study(
        tmp_path, "learning_rate = { sgd = [0.03, 0.3], adam = [1e-3, 1e-2] }"
    )
    study = study_module.load_study(path)
    by_optimizer = {
        c.values["optimizers"]: study.at(c).search for c in study.conditions()
    }
    assert by_optimizer["sgd"]["learning_rate"] == [0.03, 0.3]
    assert by_optimizer["adam"]["learning_rate"] == [1e-3, 1e-2]
    assert by_optimizer["adam"]["optimizers"] == ["adam"]
    # The study's config keeps the table, as declared.
    assert study.config()["search"]["learning_rate"] == {
        "sgd": [0.03, 0.3],
        "adam": [1e-3, 1e-2],
    }
    # A window of one optimiser is checked like a plain one.
    bad = _windows_study(
        tmp_path, "learning_rate = { sgd = [0.3, 0.03], adam = [1e-3, 1e-2] }"
    )
    with pytest.raises(
        study_module.StudyError,
        match=r"`learning_rate` must be `\[low, high\]` with 0 < low < high. "
        r"Received: learning_rate=\[0.3, 0.03\]",
    ):
        study_module.load_study(bad)


@pytest.mark.parametrize(
    "windows, match",
    [
        (
            "learning_rate = { sgd = [0.03, 0.3] }",
            r"one window for each optimiser the study searches, "
            r"\['sgd', 'adam'\], and no other",
        ),
        (
            "learning_rate = { sgd = [0.03, 0.3], adam = [1e-3, 1e-2], "
            "rmsprop = [1e-3, 1e-2] }",
            r"and no other. Received: learning_rate=\{'sgd'",
        ),
    ],
    ids=["missing", "extra"],
)
def test_learning_rate_windows_must_match_the_optimizers(
    tmp_path, windows, match
):
    path = _windows_study(tmp_path, windows)
    with pytest.raises(study_module.StudyError, match=match):
        study_module.load_study(path)


def test_learning_rate_windows_need_one_optimizer_per_condition(tmp_path):
    path = common.write_study(tmp_path / "r.toml")  # random: sgd and adam
    text = (
        open(path)
        .read()
        .replace(
            "learning_rate = [1e-4, 1.0]",
            "learning_rate = { sgd = [0.03, 0.3], adam = [1e-3, 1e-2] }",
            1,
        )
    )
    open(path, "w").write(text)
    with pytest.raises(
        study_module.StudyError,
        match=r"needs one optimiser per condition; list the optimisers in "
        r"`\[grid\]`",
    ):
        study_module.load_study(path)
