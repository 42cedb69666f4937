"""The seed sections of `report.md`, as Markdown lines.

"Seeds" (which seeds each cell's reruns trained from and which replay the
search's choice), "Verdicts with fresh seeds" (every verdict again with
the replayed seeds replaced) and "Selection noise" (how far repeated
searches move the results, and which verdicts are fragile). The numbers
come from `tuning.replays` and `tuning.repeated_searches`.
"""

from tuning import comparisons
from tuning import markdown
from tuning import repeated_searches
from tuning import replays
from tuning import result_rows
from tuning import study as study_module

_num = markdown.num
_word = comparisons.verdict_word


def seeds_section(runs, summary, fresh, metric="test_accuracy"):
    """Which seeds each cell's reruns trained from, and which replay the
    search's chosen trial (with the fresh seed's `metric`)."""
    use = replays.seed_use(runs, summary, fresh)
    if use is None:
        return []
    version, search_seed = use["version"], use["search_seed"]
    lines = ["## Seeds", ""]
    if version == 2:
        lines.append(
            "Protocol 2: seed rerun i of a cell trains from seed i, search "
            f"trial t from seed {search_seed} * "
            f"{study_module.TRIAL_SEED_BASE} + t. A rerun that trains from "
            "the chosen trial's seed replays the run that won the search on "
            "validation, bit for bit: "
            f"{use['replayed']} of {len(use['cells'])} cells here."
        )
    else:
        lines.append(
            f"Protocol {version}: seed rerun i of a cell trains from seed "
            f"{study_module.RERUN_SEED_BASE} + i, apart from every search "
            f"trial's (seed {search_seed} * {study_module.TRIAL_SEED_BASE} "
            "+ t): no rerun replays a search trial."
        )
    lines += [
        "",
        "| cell | reruns | trained from seeds | chosen search trial (its "
        f"seed) | replayed by rerun | fresh seed: {metric.replace('_', ' ')} "
        "(replayed) |",
        "|---|---|---|---|---|---|",
    ]
    for c in use["cells"]:
        lines.append(_seeds_row(c, metric))
    return lines + [""]


def _seeds_row(c, metric):
    chosen = (
        f"{c['trial']} ({c['trial_seed']})"
        if c["trial_seed"] is not None
        else "-"
    )
    replay, new = c["replay"], c["fresh"]
    if new and replay:
        last = (
            f"| {new['seed']}: "
            f"{_num(result_rows.to_float(new[metric]), '.4f')} "
            f"({_num(result_rows.to_float(replay[metric]), '.4f')}) |"
        )
    else:
        last = "| not yet |" if replay else "| - |"
    return (
        f"| {' '.join(x for x in c['cell'] if x)} "
        f"| {_ranges(c['indices'])} | {_ranges(c['trained'])} | {chosen} "
        f"| {replay['seed'] if replay else 'none'} " + last
    )


def fresh_seeds_section(runs, summary, fresh, cells):
    """Every verdict again with each replayed seed replaced by its fresh
    one."""
    found = replays.fresh_seed_verdicts(runs, summary, fresh, cells)
    if found is None:
        return []
    lines = ["## Verdicts with fresh seeds", ""]
    if not fresh:
        return lines + [
            f"{found['replayed']} rerun(s) replay their search's choice and "
            "none has a fresh seed yet: `python -m tuning.fresh_seeds STUDY` "
            "trains them.",
            "",
        ]
    lines += [
        f"Each replayed rerun replaced by a fresh seed ({found['done']} of "
        f"{found['replayed']} have one, `fresh_seeds.csv`), tests "
        "Holm-adjusted over the study as above:",
        "",
        "| condition | comparison | difference as run | verdict as run "
        "| difference, fresh | verdict, fresh |",
        "|---|---|---|---|---|---|",
    ]
    changed = []
    for c, f in found["pairs"]:
        lines.append(
            f"| {c['condition'] or '-'} | {c['arm']} - {c['comparator']} "
            f"| {_num(c['diff'], '+.4f')} | {c['verdict']} "
            f"| {_num(f['diff'], '+.4f')} | {f['verdict']} |"
        )
        if _word(c["verdict"]) != _word(f["verdict"]):
            changed.append(
                f"{_comparison(c)}: {_word(c['verdict'])} -> "
                f"{_word(f['verdict'])}"
            )
    return lines + markdown.listing(
        "Verdicts that change with fresh seeds", changed
    )


def selection_noise_section(runs, summary, repeats, protocol, source=None):
    """The repeated searches' cells, the selection noise and the verdicts
    it makes fragile; `[]` for a study without repeats.

    `source` names the study a study extends, whose repeated searches
    (in `repeats`, with this one's) measure the noise carried here."""
    if not repeats:
        return []
    result = repeated_searches.selection_noise(
        runs, summary, repeats, protocol.margin
    )
    carried = (
        [
            f"The repeated searches of `{source}`, the study this one "
            "extends, at its conditions, join this study's own: they measure "
            "the selection noise at the settings the two share, which "
            "carries to the tests here.",
            "",
        ]
        if source
        else []
    )
    lines = [
        "## Selection noise",
        "",
        "Cells whose search was repeated from another search seed (`python "
        "-m tuning.sweep STUDY --search-seed N`, results in "
        f"`{study_module.REPEATS_DIR}/search-seed-N/`; its seed reruns "
        "train from protocol 3's seeds): the rate each search chose and "
        "the test accuracy of its reruns (this study's with fresh seeds "
        "where a rerun replayed its search).",
        "",
        *carried,
        "| cell | search seed | chosen rate | repeat's rate | mean test "
        "accuracy | repeat's | repeat minus study |",
        "|---|---|---|---|---|---|---|",
    ]
    for c in result["cells"]:
        lines.append(
            f"| {' '.join(x for x in (c['condition'], c['arm']) if x)} "
            f"| {c['search_seed']} | {_num(c['rate'], '.3g')} "
            f"| {_num(c['repeat_rate'], '.3g')} "
            f"| {_num(c['mean'], '.4f')} | {_num(c['repeat_mean'], '.4f')} "
            f"| {_num(c['diff'], '+.4f')} |"
        )
    return lines + _fragile_table(result, protocol)


def _fragile_table(result, protocol):
    lines = [
        "",
        f"Selection noise, the root mean square of the {len(result['cells'])} "
        f"differences: {_num(result['noise'], '.4f')} (seed noise "
        "included). A verdict is *fragile* when it flips with a repeated "
        "cell in place of the study's, or when its difference lies within "
        "the selection noise of its boundary (0 for superior, "
        f"-{protocol.margin:g} otherwise): a fragile verdict is not a "
        "finding.",
        "",
        "| condition | comparison | verdict | difference | with a repeat in "
        "place | fragile |",
        "|---|---|---|---|---|---|",
    ]
    fragile = []
    for v in result["verdicts"]:
        repeated = (
            "; ".join(
                f"seed {seed}: {_word(verdict)}"
                for seed, verdict in v["repeated"].items()
            )
            or "-"
        )
        reasons = "; ".join(v["fragile"]) or "no"
        lines.append(
            f"| {v['condition'] or '-'} | {v['arm']} - {v['comparator']} "
            f"| {_word(v['verdict'])} | {_num(v['diff'], '+.4f')} "
            f"| {repeated} | {reasons} |"
        )
        if v["fragile"]:
            fragile.append(f"{_comparison(v)} ({_word(v['verdict'])})")
    return lines + markdown.listing("Fragile verdicts", fragile)


def _comparison(c):
    """`"[condition ]arm - comparator"` of a comparison."""
    where = f"{c['condition']} " if c["condition"] else ""
    return f"{where}{c['arm']} - {c['comparator']}"


def _ranges(values):
    """`0, 1, 2, 3, 4` as `0-4`; other sets listed."""
    values = list(values)
    if len(values) > 2 and values == list(
        range(values[0], values[0] + len(values))
    ):
        return f"{values[0]}-{values[-1]}"
    return ", ".join(str(v) for v in values)
