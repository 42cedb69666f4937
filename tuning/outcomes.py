"""What became of a run: it trained, it diverged, or it did not learn.

Two different failures, told apart by the final training loss against the
loss of a uniform guess, `ln(num_classes)`:

- *diverged*: the loss became non-finite (`TerminateOnNaN` then stops the
  run, so the last loss is the non-finite one) or ended above
  `EXPLODED_FACTOR` times a uniform guess's: the rate is too high.
- *did not learn*: a finite final loss above a uniform guess's, at most
  `EXPLODED_FACTOR` times it: the run did no better than guessing, usually
  because the rate is too low to learn in the epochs given.

Either failure sets the `diverged` column of the result tables (its name
kept from the first results: "failed to train"), and the bracketing search
treats both alike; this module tells them apart from the recorded final
loss, so that results written before the distinction read the same way.

Example:

>>> outcome(float("nan"), 10)
'diverged'
>>> outcome(2.40, 10)  # ln(10) = 2.30
'did not learn'
>>> outcome(1.2, 10)
'ok'
"""

import math

OK = "ok"
DIVERGED = "diverged"
DID_NOT_LEARN = "did not learn"
FAILURES = (DIVERGED, DID_NOT_LEARN)

# A final loss above this many times a uniform guess's has exploded.
EXPLODED_FACTOR = 2.0

# The classes of the datasets a study can name.
NUM_CLASSES = {"cifar10": 10, "fashion_mnist": 10}


def outcome(final_loss, num_classes):
    """The outcome of a run that ended with training loss `final_loss`.

    Args:
        final_loss: float, the training loss of the last epoch run
            (`nan` or `inf` when training stopped on a non-finite loss).
        num_classes: int, the number of classes.

    Returns:
        str: `OK`, `DIVERGED` or `DID_NOT_LEARN`.
    """
    guess = math.log(num_classes)
    if not math.isfinite(final_loss) or final_loss > EXPLODED_FACTOR * guess:
        return DIVERGED
    if final_loss > guess:
        return DID_NOT_LEARN
    return OK


def of_row(row, num_classes):
    """The outcome of a row of `trials.csv` or `search_trials.csv`.

    The row's `diverged` flag says whether it failed; its final training
    loss (`final_train_loss`, or `loss` in `search_trials.csv`) says how.
    A failed row without a readable loss counts as diverged.

    Args:
        row: a dict of str (or of values), as the result tables hold.
        num_classes: int, the number of classes of the study's dataset.

    Returns:
        str: `OK`, `DIVERGED` or `DID_NOT_LEARN`.
    """
    if str(row.get("diverged", "")) != "True":
        return OK
    loss = row.get("final_train_loss", row.get("loss"))
    try:
        loss = float(loss)
    except (TypeError, ValueError):
        return DIVERGED
    failed = outcome(loss, num_classes)
    return failed if failed != OK else DIVERGED


def classes_of(dataset):
    """The number of classes of a dataset a study names (10 for every one
    of them today, which is also the answer for rows that predate the
    `dataset` column)."""
    return NUM_CLASSES.get(dataset, 10)


def counts(rows, num_classes):
    """How many of `rows` diverged and how many did not learn."""
    found = [of_row(r, num_classes) for r in rows]
    return {name: found.count(name) for name in FAILURES}


def describe(found):
    """`"2 diverged, 1 did not learn"` from `counts`' dict (zeros left
    out); `""` when nothing failed."""
    return ", ".join(f"{n} {name}" for name, n in found.items() if n)
