"""TensorBoard logs of a study: one run folder per search trial and rerun.

With `--tensorboard DIR` (or `runner.Options(tensorboard=DIR)`), every
search trial writes to `DIR/<study>/<condition>_<arm>_trial-<id>/` and
every seed rerun to `DIR/<study>/<condition>_<arm>_seed-<n>/` (without the
condition for a study without a grid): Keras' own
`keras.callbacks.TensorBoard` logs (per-epoch loss and accuracy), and the
run's hyperparameters through TensorBoard's HParams API, so that
TensorBoard's HParams tab lines the runs up. Open with
`tensorboard --logdir DIR/<study>`.

Keras' `TensorBoard` callback writes through `tf.summary` on every Keras
backend: TensorFlow must be installed (`pip install tensorflow-cpu` next to
JAX or PyTorch).
"""

import os
import re

import keras


def run_name(condition, arm, kind, index):
    """The run folder's name: `[<condition>_]<arm>_<kind>-<index>`."""
    parts = [condition] if condition else []
    parts.append(f"{arm}_{kind}-{index}")
    return re.sub(r"[^A-Za-z0-9._+-]+", "-", "_".join(parts))


def callbacks(root, name, hparams):
    """The callbacks that log one run into `root/name`.

    Args:
        root: the study's TensorBoard folder.
        name: the run's folder name (`run_name`).
        hparams: dict of the run's hyperparameters (numbers, strings,
            booleans).

    Returns:
        list: a `keras.callbacks.TensorBoard` and an `HParams` callback.
    """
    log_dir = os.path.join(root, name)
    return [
        keras.callbacks.TensorBoard(log_dir=log_dir),
        HParams(log_dir, hparams),
    ]


class HParams(keras.callbacks.Callback):
    """Writes a run's hyperparameters with TensorBoard's HParams API when
    training begins.

    Args:
        log_dir: the run's folder.
        hparams: dict of hyperparameter values.
    """

    def __init__(self, log_dir, hparams):
        super().__init__()
        self.log_dir = log_dir
        self.hparams = {
            k: v
            for k, v in hparams.items()
            if isinstance(v, (bool, int, float, str))
        }

    def on_train_begin(self, logs=None):
        import tensorflow as tf
        from tensorboard.plugins.hparams import api as hparams_api

        writer = tf.summary.create_file_writer(self.log_dir)
        with writer.as_default():
            hparams_api.hparams(self.hparams)
        writer.flush()
        writer.close()
