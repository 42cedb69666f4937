"""Every use of a KerasTuner private, in one place, behind a version guard.

KerasTuner 1.4.8 writes `oracle.json`, `tuner0.json` and every `trial.json`
in place (`keras_tuner.src.utils.save_json`, which every one of its writers
calls through the module): a SIGKILL in the middle of a write leaves an
empty or truncated file that the next run cannot reload.
`atomic_keras_tuner_writes` routes local writes through a temporary file
and `os.replace`, so a file is always either the old or the new state.
Remote paths (`gs://...`) keep KerasTuner's own writer.

`requeue` hands a trial an oracle has given out back to its retry queue,
which `create_trial` serves first: what KerasTuner's own `Oracle.reload`
does to every ongoing trial when a chief restarts, for one trial. The
oracle has no public way to do it.

The patch is applied only to the KerasTuner versions it was written for
(`PATCHED_VERSIONS`); on another version it is left out with a warning, and
KerasTuner's own writer stays. `requeue` refuses another version.
"""

import json
import warnings

from tuning import records

PATCHED_VERSIONS = ("1.4.",)


def keras_tuner_is_patchable():
    """Whether the installed KerasTuner is one the patches were made for."""
    import keras_tuner

    return keras_tuner.__version__.startswith(PATCHED_VERSIONS)


def atomic_keras_tuner_writes():
    """Makes KerasTuner write its JSON state atomically (idempotent).

    Returns:
        bool: whether the patch is in place.
    """
    import keras_tuner

    if not keras_tuner_is_patchable():
        warnings.warn(
            f"KerasTuner {keras_tuner.__version__} is not one of the "
            f"versions {PATCHED_VERSIONS} whose state writes are made "
            "atomic; a run killed mid-write may leave a broken project.",
            stacklevel=2,
        )
        return False
    from keras_tuner.src import utils as kt_utils

    original = kt_utils.save_json
    if getattr(original, "_atomic", False):
        return True

    def save_json(path, obj):
        if "://" in str(path):
            return original(path, obj)
        text = json.dumps(obj)
        records.write_atomic(str(path), text)
        return text

    save_json._atomic = True
    kt_utils.save_json = save_json
    return True


def requeue(oracle, trial_id):
    """Puts trial `trial_id` back in `oracle`'s retry queue (the caller
    takes it out of `oracle.ongoing_trials` and saves the oracle).

    Raises:
        RuntimeError: on a KerasTuner version `PATCHED_VERSIONS` does not
            name (its oracle may keep the queue elsewhere).
    """
    import keras_tuner

    if not keras_tuner_is_patchable():
        raise RuntimeError(
            f"KerasTuner {keras_tuner.__version__} is not one of the "
            f"versions {PATCHED_VERSIONS} whose oracle's retry queue this "
            "project knows; a trial cannot be handed back."
        )
    oracle._retry_queue.append(trial_id)
