"""Statistics of a finished study, written from its result files.

    python -m tuning.report STUDY [--results-dir DIR]

Reads `--results-dir/<study>/trials.csv` and `search_trials.csv` (written by
`tuning.sweep`) and writes `report.md` next to them, with, per condition:

- test accuracy per arm: mean +- sample standard deviation over the seeds,
  and every per-seed value, with the hyperparameters the search chose and
  whether the chosen learning rate is the lowest or highest one the search
  tried (a best value at the edge of what was tried means the search range
  or its sampling may have cut it off);
- a Welch t-test of each of our arms against the best built-in normaliser of
  that condition (the one with the highest mean test accuracy): the
  difference of means with its 95% Welch interval, t, degrees of freedom
  and the two-sided p-value;
- for a study whose grid varies `batch_size`: per arm, the least-squares
  slope of test accuracy against `log2(batch_size)` over every seed of every
  batch size, with its 95% interval.

Every number comes from the CSV files; nothing is typed by hand.
"""

import argparse
import math
import os
import sys

from tuning import records

DEFAULT_RESULTS_DIR = os.path.join(records.REPO_ROOT, "tuning", "results")
REPORT_MD = "report.md"
OUR_ARMS = ("affine_like", "norm_like", "patch_norm", "affine_like_conv")
NORMALISER_ARMS = ("batch_norm", "layer_norm", "rms_norm", "group_norm")


class ReportError(Exception):
    """Missing or unreadable results: one line on stderr, exit status 2."""


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m tuning.report",
        description="Writes report.md for a finished study.",
    )
    parser.add_argument("study", help="the study's results folder name")
    parser.add_argument("--results-dir", default=DEFAULT_RESULTS_DIR)
    args = parser.parse_args(argv)
    try:
        path = write_report(os.path.join(args.results_dir, args.study))
    except ReportError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"wrote {path}")
    return 0


def write_report(out_dir):
    """Writes `report.md` in a study's results folder; returns its path.

    Raises:
        ReportError: if `trials.csv` is missing or empty.
    """
    runs = records.read_csv(os.path.join(out_dir, "trials.csv"))
    if not runs:
        raise ReportError(
            "Expected a finished study with rows in trials.csv. Received: "
            f"results folder={out_dir!r}"
        )
    search = records.read_csv(os.path.join(out_dir, "search_trials.csv"))
    summary = records.read_json(os.path.join(out_dir, "summary.json")) or {}
    text = render(runs, search, summary)
    path = os.path.join(out_dir, REPORT_MD)
    records.write_atomic(path, text)
    return path


def render(runs, search, summary):
    """The report as Markdown, from the rows of the two CSV files."""
    lines = [f"# {summary.get('study', runs[0].get('study', 'study'))}", ""]
    dataset = runs[0].get("dataset_label", "")
    lines += [
        f"Dataset: {dataset}. Backend: {runs[0].get('backend', '')}. "
        f"Commit: `{str(summary.get('git_commit', ''))[:10]}`"
        + (" (dirty tree)" if summary.get("git_dirty") else "")
        + f". Wall time: {_minutes(summary.get('wall_time_s'))}.",
        "",
        f"Command: `{summary.get('command', '')}`",
        "",
        "Written by `python -m tuning.report` from `trials.csv` and "
        "`search_trials.csv`.",
        "",
    ]
    conditions = _ordered_unique(r.get("condition", "") for r in runs)
    for condition in conditions:
        rows = [r for r in runs if r.get("condition", "") == condition]
        trials = [t for t in search if t.get("condition", "") == condition]
        if condition:
            lines += [f"## {condition}", ""]
        lines += _accuracy_table(rows, trials)
        lines += _welch_table(rows)
    if "batch_size" in _grid_keys(summary) or _varies(runs, "batch_size"):
        lines += _slope_table(runs)
    return "\n".join(lines).rstrip() + "\n"


def welch(a, b):
    """Welch's t-test of mean(a) - mean(b).

    Returns:
        dict: `diff`, `low`, `high` (95% interval of the difference), `t`,
        `df` and the two-sided `p`; `nan` entries where a sample has fewer
        than two values or no spread.
    """
    from scipy import stats

    na, nb = len(a), len(b)
    diff = _mean(a) - _mean(b)
    nan = {"diff": diff, "low": math.nan, "high": math.nan, "t": math.nan,
           "df": math.nan, "p": math.nan}
    if na < 2 or nb < 2:
        return nan
    va, vb = _var(a) / na, _var(b) / nb
    se = math.sqrt(va + vb)
    if se == 0:
        return nan
    df = (va + vb) ** 2 / (va**2 / (na - 1) + vb**2 / (nb - 1))
    t = diff / se
    half = stats.t.ppf(0.975, df) * se
    return {"diff": diff, "low": diff - half, "high": diff + half, "t": t,
            "df": df, "p": 2 * stats.t.sf(abs(t), df)}


def slope(x, y):
    """Least-squares slope of `y` on `x` with its 95% interval.

    Returns:
        dict: `slope`, `low`, `high`, `n`.
    """
    from scipy import stats

    n = len(x)
    if n < 3 or len(set(x)) < 2:
        return {"slope": math.nan, "low": math.nan, "high": math.nan, "n": n}
    fit = stats.linregress(x, y)
    half = stats.t.ppf(0.975, n - 2) * fit.stderr
    return {"slope": fit.slope, "low": fit.slope - half,
            "high": fit.slope + half, "n": n}


def _accuracy_table(rows, trials):
    lines = [
        "| arm | test accuracy, mean ± std | per seed | learning rate "
        "| optimizer | kernel scale | lr at edge of tried |",
        "|---|---|---|---|---|---|---|",
    ]
    for arm in _ordered_unique(r["arm"] for r in rows):
        accs = _accs(rows, arm)
        first = next(r for r in rows if r["arm"] == arm)
        lr = float(first["learning_rate"])
        tried = [float(t["learning_rate"]) for t in trials
                 if t["arm"] == arm and t.get("learning_rate")]
        edge = ""
        if tried and lr <= min(tried):
            edge = "lowest"
        elif tried and lr >= max(tried):
            edge = "highest"
        lines.append(
            f"| {arm} | {_mean(accs):.4f} ± {_std(accs):.4f} "
            f"| {', '.join(f'{a:.4f}' for a in accs)} | {lr:.3g} "
            f"| {first.get('optimizer', '')} "
            f"| {first.get('kernel_scale', '') or '-'} | {edge or 'no'} |"
        )
    return lines + [""]


def _welch_table(rows):
    arms = _ordered_unique(r["arm"] for r in rows)
    ours = [a for a in arms if a in OUR_ARMS]
    normalisers = [a for a in arms if a in NORMALISER_ARMS]
    if not ours or not normalisers:
        return []
    best = max(normalisers, key=lambda a: _mean(_accs(rows, a)))
    lines = [
        f"Welch t-test against the best built-in normaliser here, "
        f"`{best}`:",
        "",
        "| arm | difference | 95% interval | t | df | p |",
        "|---|---|---|---|---|---|",
    ]
    for arm in ours:
        w = welch(_accs(rows, arm), _accs(rows, best))
        lines.append(
            f"| {arm} - {best} | {w['diff']:+.4f} "
            f"| [{w['low']:+.4f}, {w['high']:+.4f}] | {w['t']:.2f} "
            f"| {w['df']:.1f} | {w['p']:.3g} |"
        )
    return lines + [""]


def _slope_table(runs):
    lines = [
        "## Test accuracy against log2(batch size)",
        "",
        "Least-squares slope over every seed of every batch size (accuracy "
        "per doubling of the batch):",
        "",
        "| arm | slope | 95% interval | runs |",
        "|---|---|---|---|",
    ]
    for arm in _ordered_unique(r["arm"] for r in runs):
        rows = [r for r in runs if r["arm"] == arm]
        s = slope([math.log2(float(r["batch_size"])) for r in rows],
                  [float(r["test_accuracy"]) for r in rows])
        lines.append(
            f"| {arm} | {s['slope']:+.4f} | [{s['low']:+.4f}, "
            f"{s['high']:+.4f}] | {s['n']} |"
        )
    return lines + [""]


def _accs(rows, arm):
    return [float(r["test_accuracy"]) for r in rows if r["arm"] == arm]


def _grid_keys(summary):
    return tuple((summary.get("config") or {}).get("grid") or ())


def _varies(runs, key):
    return len({r.get(key) for r in runs}) > 1


def _ordered_unique(values):
    seen = []
    for v in values:
        if v not in seen:
            seen.append(v)
    return seen


def _mean(values):
    return sum(values) / len(values) if values else math.nan


def _var(values):
    m = _mean(values)
    return sum((v - m) ** 2 for v in values) / (len(values) - 1)


def _std(values):
    return math.sqrt(_var(values)) if len(values) > 1 else math.nan


def _minutes(seconds):
    if seconds in (None, ""):
        return "n/a"
    return f"{float(seconds) / 60:.1f} min"


if __name__ == "__main__":
    sys.exit(main())
