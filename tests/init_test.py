"""The package's top level (`keras_affine_div/__init__.py`)."""

import subprocess
import sys

import keras_affine_div


def test_all_lists_the_public_modules():
    assert sorted(keras_affine_div.__all__) == [
        "__version__",
        "callbacks",
        "convert",
        "datasets",
        "diagnostics",
        "layers",
        "layers_of",
        "models",
        "ops",
    ]
    for name in keras_affine_div.__all__:
        assert hasattr(keras_affine_div, name), name


def test_one_import_reaches_the_documented_paths():
    # In a fresh interpreter, where no test has imported the submodules:
    # `import keras_affine_div` alone gives the paths the README uses, and
    # imports neither KerasTuner nor TensorFlow Datasets.
    code = (
        "import sys\n"
        "import keras_affine_div\n"
        "print(keras_affine_div.models.mlp.__name__,\n"
        "      keras_affine_div.models.cnn.__name__,\n"
        "      keras_affine_div.ops.squared_norm.__name__,\n"
        "      keras_affine_div.ops.patch_squared_norms.__name__,\n"
        "      keras_affine_div.datasets.load.__name__)\n"
        "print(sorted(m for m in ('keras_tuner', 'tensorflow_datasets')\n"
        "             if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.stdout.splitlines() == [
        "mlp cnn squared_norm patch_squared_norms load",
        "[]",
    ], out.stderr
