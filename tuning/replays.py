"""Which seeds a study's reruns trained from, which replay the search's
chosen trial, and the verdicts with fresh seeds in their place.

Under protocol 2 a seed rerun that trains from the chosen search trial's
seed replays the run that won the search on validation, bit for bit
(`replaying_rows`); `python -m tuning.fresh_seeds` trains a fresh seed for
each (`fresh_seeds.csv`). Pure functions of the rows;
`tuning.report_seeds` renders them.
"""

from tuning import comparisons
from tuning import result_rows
from tuning import study as study_module


def replaying_rows(runs, config):
    """The rows of `trials.csv` that replay their cell's chosen search trial.

    A rerun replays it when it trained from the chosen trial's seed (its
    learning rate is the chosen one by construction): under protocol 2 with
    search seed 0, rerun `i` of a cell whose search chose trial `i`.

    Args:
        runs: the rows of `trials.csv` (dicts of str).
        config: the study's config (`summary.json`'s `config`, or
            `Study.config()`).

    Returns:
        list: the replaying rows, in the order of `runs`.
    """
    protocol = config.get("protocol", study_module.DEFAULT_PROTOCOL)
    search_seed = (config.get("search") or {}).get("seed")
    if search_seed is None:
        return []
    return [
        r
        for r in runs
        if str(r.get("search_trial_id", "")).strip().isdigit()
        and study_module.rerun_seed(protocol, r["seed"])
        == study_module.trial_seed(search_seed, r["search_trial_id"])
    ]


def _cell(row):
    return (row.get("condition", ""), row["arm"])


def seed_use(runs, summary, fresh):
    """The seeds of every (condition, arm) cell of a study.

    Args:
        runs: the rows of `trials.csv`.
        summary: dict, the content of `summary.json`.
        fresh: the rows of `fresh_seeds.csv`.

    Returns:
        dict or None: `version` (the seeding protocol), `search_seed`,
        `replayed` (how many cells have a rerun that replays its search)
        and `cells`, per cell in the order of `runs`: `cell` (`(condition,
        arm)`), `indices` (the reruns' seed indices, sorted), `trained`
        (the seeds they trained from), `trial` (the chosen search trial's
        id, str) and `trial_seed` (its seed; `None` where the id is not a
        number), `replay` (the rerun that replays it, or `None`) and
        `fresh` (its fresh seed's row, or `None`). `None` for a study
        whose summary records no search seed.
    """
    config = summary.get("config") or {}
    search_seed = (config.get("search") or {}).get("seed")
    if search_seed is None:
        return None
    version = config.get("protocol", study_module.DEFAULT_PROTOCOL)
    replayed = {_cell(r): r for r in replaying_rows(runs, config)}
    fresh = {_cell(r): r for r in fresh}
    cells = []
    for cell in result_rows.ordered_unique(_cell(r) for r in runs):
        rows = [r for r in runs if _cell(r) == cell]
        indices = sorted(int(r["seed"]) for r in rows)
        trial = rows[0].get("search_trial_id", "")
        cells.append(
            {
                "cell": cell,
                "indices": indices,
                "trained": [
                    study_module.rerun_seed(version, i) for i in indices
                ],
                "trial": trial,
                "trial_seed": (
                    study_module.trial_seed(search_seed, trial)
                    if str(trial).strip().isdigit()
                    else None
                ),
                "replay": replayed.get(cell),
                "fresh": fresh.get(cell),
            }
        )
    return {
        "version": version,
        "search_seed": search_seed,
        "replayed": len(replayed),
        "cells": cells,
    }


def fresh_seed_verdicts(runs, summary, fresh, cells):
    """Every verdict again with each replayed seed replaced by its fresh one.

    Args:
        runs: the rows of `trials.csv`.
        summary: dict, the content of `summary.json`.
        fresh: the rows of `fresh_seeds.csv`.
        cells: the study's `comparisons.cell_verdicts`.

    Returns:
        dict or None: `replayed` (the reruns that replay their search),
        `done` (how many of them have a fresh seed) and `pairs`, per cell of
        `cells`, `(as run, with fresh seeds)` (`[]` without fresh seeds);
        `None` for a study with no replayed rerun or no comparison.
    """
    replayed = replaying_rows(runs, summary.get("config") or {})
    if not replayed or not cells:
        return None
    if not fresh:
        return {"replayed": len(replayed), "done": 0, "pairs": []}
    replaced = result_rows.with_fresh_seeds(runs, fresh)
    again = {
        (c["condition"], c["arm"], c["comparator"]): c
        for c in comparisons.cell_verdicts(replaced, summary)
    }
    return {
        "replayed": len(replayed),
        "done": sum(r is not s for r, s in zip(runs, replaced)),
        "pairs": [
            (c, again[(c["condition"], c["arm"], c["comparator"])])
            for c in cells
        ],
    }
