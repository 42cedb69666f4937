"""Loading the dataset subsets a study declares.

`load_data` loads the training, validation and test images of a
(condition-resolved) study and refuses any other split than the study's;
`data_of` loads each distinct subset of a run once.
"""

from tuning import schema
from tuning.console import log
from tuning.errors import SweepError


def load_data(study, data_dir, tfds_data_dir=None):
    """Loads the study's dataset subsets.

    Raises:
        SweepError: if the data is missing, badly laid out or unavailable.
    """
    from keras_affine_div import datasets

    f = study.fixed
    n = f["train_samples"] + f["val_samples"]
    declared = (
        f"the study declares train_samples={f['train_samples']} + "
        f"val_samples={f['val_samples']} = {n} images of the training split "
        f"and test_samples={f['test_samples']}"
    )
    try:
        data = datasets.load(
            f["dataset"],
            data_dir=data_dir,
            tfds_data_dir=tfds_data_dir,
            validation_split=f["val_samples"] / n,
            seed=0,
            max_train_samples=n,
            max_test_samples=f["test_samples"],
        )
    except ValueError as e:
        raise SweepError(f"cannot load the data: {declared}: {e}") from None
    except (
        TypeError,
        FileNotFoundError,
        datasets.DataUnavailableError,
    ) as e:
        raise SweepError(f"cannot load the data: {e}") from None
    got = (len(data.x_train), len(data.x_val), len(data.x_test))
    want = (f["train_samples"], f["val_samples"], f["test_samples"])
    if got != want:
        # Never train on other data than the study says.
        raise SweepError(
            f"cannot load the data: {declared}, but the split gave "
            f"{got[0]} training, {got[1]} validation and {got[2]} test "
            "images; nothing was trained"
        )
    return data


def data_of(study, data_dir, loaded, tfds_data_dir=None):
    """The data of a (condition-resolved) study, loaded once per subset.

    Args:
        study: a `Study` at one condition (`Study.at`).
        data_dir: a local copy of the dataset, or `None`.
        loaded: dict, the subsets loaded so far, by their `DATA_KEYS`
            values; the new one is added to it.
        tfds_data_dir: the TensorFlow Datasets data directory, or `None`.

    Returns:
        what `load_data` returns.
    """
    key = tuple(study.fixed[k] for k in schema.DATA_KEYS)
    if key in loaded:
        return loaded[key]
    data = load_data(study, data_dir, tfds_data_dir)
    log(
        f"data: {data.label}, {len(data.x_train)} train / {len(data.x_val)} "
        f"val / {len(data.x_test)} test images of shape {data.input_shape}"
    )
    loaded[key] = data
    return data
