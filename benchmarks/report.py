"""The results: their files, the printed tables, the README's tables.

A run writes `<machine>-<backend>.json` (`-quick`, `-smoke` for the short
modes, `result_path`) under `RESULTS_DIR` by default; `write_report`
rewrites the section of benchmarks/README.md between `README_BEGIN` and
`README_END` from every JSON file of a folder.
"""

import json
import pathlib

from benchmarks.memory import MEMORY_KEYS
from benchmarks.memory import MEMORY_RATIO_FLOOR_MIB
from benchmarks.memory import memory_ratio
from benchmarks.timing import PHASES
from keras_affine_div._files import write_atomic
from tuning import provenance

RESULTS_DIR = provenance.REPO_ROOT / "benchmarks" / "results"
README = provenance.REPO_ROOT / "benchmarks" / "README.md"
README_BEGIN = "<!-- results: begin (written by layer_overhead.py --report) -->"
README_END = "<!-- results: end -->"
# The order of the backends in the README.
BACKEND_ORDER = {"tensorflow": 0, "jax": 1, "torch": 2}


def result_path(output, machine, backend, mode):
    """The file of a run's result.

    Args:
        output: the results' folder.
        machine: `provenance.machine_name()`, e.g. `"cpu-2core"`.
        backend: the Keras backend.
        mode: `"full"`, `"quick"` or `"smoke"`.

    Returns:
        pathlib.Path: `output/<machine>-<backend>[-<mode>].json`, without
        the mode for a full run.
    """
    suffix = "" if mode == "full" else f"-{mode}"
    return pathlib.Path(output) / f"{machine}-{backend}{suffix}.json"


def load_results(output):
    """The results in a folder, in the README's order.

    Args:
        output: the folder (its `*.json` files; not its subfolders).

    Returns:
        list: the result dicts, by machine, backend (`BACKEND_ORDER`) and
        mode.
    """
    results = [
        json.loads(path.read_text())
        for path in sorted(pathlib.Path(output).glob("*.json"))
    ]
    return sorted(
        results,
        key=lambda r: (
            r["machine"],
            BACKEND_ORDER.get(r["backend"], 9),
            r["mode"],
        ),
    )


def _ratio(value):
    return "n/a" if value is None else f"{value:.2f}x"


def _memory_rows(case, keys):
    """Per model of a case's memory record: its name, and per key in `keys`
    its figure and ratio text, or `None` where it has no such figure."""
    base = case["memory"][case["baseline"]]
    for name, entry in case["memory"].items():
        yield (
            name,
            [
                (entry[key], _ratio(memory_ratio(entry, base, key)))
                if key in entry
                else None
                for key in keys
            ],
        )


def format_tables(result):
    """Plain-text tables of one run: ratios, times, memory and targets.

    Args:
        result: a run's result dict.

    Returns:
        str: the tables, lines joined by newlines.
    """
    lines = [
        f"backend {result['backend']} on {result['machine']} "
        f"({result['mode']}, {result['settings']['rounds']} rounds, "
        f"jit_compile={result['cases'][0]['jit_compile']}, load average "
        f"{result['load_average']['start'][0]:.2f} -> "
        f"{result['load_average']['end'][0]:.2f})"
    ]
    for case in result["cases"]:
        lines.append("")
        lines.append(
            f"{case['name']} (batch {case['batch_size']}, "
            f"baseline {case['baseline']})"
        )
        lines.append(
            f"  {'model':34s} {'train':>7s} {'(cpu)':>7s} "
            f"{'ms':>9s} {'infer':>7s} {'(cpu)':>7s} {'ms':>9s}"
        )
        for name, entry in case["candidates"].items():
            t, i = entry["train"], entry["inference"]
            lines.append(
                f"  {name:34s} {t['median_ratio']:6.2f}x "
                f"{t['median_cpu_ratio']:6.2f}x "
                f"{t['median_time_s'] * 1e3:9.2f} "
                f"{i['median_ratio']:6.2f}x {i['median_cpu_ratio']:6.2f}x "
                f"{i['median_time_s'] * 1e3:9.2f}"
            )
        if case.get("memory"):
            lines.append(
                "  peak memory increase of a training step (MiB, "
                "ratio): first step, later steps[, XLA buffers]"
            )
            for name, cells in _memory_rows(case, MEMORY_KEYS):
                lines.append(
                    f"    {name:32s} "
                    + "   ".join(
                        f"{value:8.1f} {ratio:>6s}"
                        for value, ratio in filter(None, cells)
                    )
                )
    lines.append("")
    lines.append("targets (median ratio in this run):")
    for target in result["targets"]:
        lines.append(
            f"  {'MET   ' if target['met'] else 'MISSED'} {target['target']}"
            f" [{target['case']}, {target['phase']}]: "
            f"{target['median_ratio']:.3f} {target['bound']} "
            f"{target['threshold']} (cpu time {target['median_cpu_ratio']:.3f})"
        )
    return "\n".join(lines)


def _markdown_heading(result):
    settings = result["settings"]
    load = result["load_average"]
    commit = (result["git"]["commit"] or "unknown")[:10]
    if result["git"].get("dirty"):
        commit += " (modified)"
    libraries = ", ".join(
        f"{k} {result['versions'][k]}"
        for k in ("tensorflow-cpu", "tensorflow", "jax", "torch")
        if k in result["versions"] and k.split("-")[0] == result["backend"]
    )
    return [
        f"### {result['backend']} on {result['machine']}"
        + ("" if result["mode"] == "full" else f" ({result['mode']})"),
        "",
        f"Keras {result['versions'].get('keras')}, {libraries}; "
        f"jit_compile resolved to `{result['cases'][0]['jit_compile']}`; "
        f"{settings['rounds']} rounds; load average "
        f"{load['start'][0]:.2f} at the start, {load['end'][0]:.2f} at "
        f"the end; commit `{commit}`; {result['started_at']}.",
    ]


def _markdown_times(result):
    out = [
        "Median per-round ratio to the baseline (`Dense` or "
        "`Conv2D`), and median time per step:",
        "",
        "| case | model | train | (CPU time) | train ms | "
        "inference | (CPU time) | inference ms |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for case in result["cases"]:
        for name, entry in case["candidates"].items():
            cells = [
                f"{entry[phase]['median_ratio']:.2f}x | "
                f"{entry[phase]['median_cpu_ratio']:.2f}x | "
                f"{entry[phase]['median_time_s'] * 1e3:.1f}"
                for phase in PHASES
            ]
            out.append(f"| {case['name']} | `{name}` | {' | '.join(cells)} |")
    return out


def _markdown_memory(result):
    memory_cases = [c for c in result["cases"] if c.get("memory")]
    if not memory_cases:
        return []
    has_xla = any(
        "xla_total_mib" in e for c in memory_cases for e in c["memory"].values()
    )
    header = (
        "| case | model | first step, MiB | ratio | later steps, MiB | ratio |"
    )
    rule = "|---|---|---:|---:|---:|---:|"
    if has_xla:
        header += " XLA buffers, MiB | ratio |"
        rule += "---:|---:|"
    out = [
        "",
        "Peak memory increase of a training step (see Method; no ratio where "
        f"the baseline's figure is under {MEMORY_RATIO_FLOOR_MIB:.0f} MiB):",
        "",
        header,
        rule,
    ]
    keys = MEMORY_KEYS if has_xla else MEMORY_KEYS[:2]
    for case in memory_cases:
        for name, cells in _memory_rows(case, keys):
            text = [
                "n/a | n/a" if cell is None else f"{cell[0]:.1f} | {cell[1]}"
                for cell in cells
            ]
            out.append(f"| {case['name']} | `{name}` | {' | '.join(text)} |")
    return out


def _markdown_targets(result):
    out = [
        "",
        "Targets:",
        "",
        "| target | case | phase | median ratio | met | (CPU-time ratio) |",
        "|---|---|---|---:|---|---:|",
    ]
    for target in result["targets"]:
        out.append(
            f"| {target['target']} | {target['case']} | "
            f"{target['phase']} | {target['median_ratio']:.3f} "
            f"({target['bound']} {target['threshold']}) | "
            f"{'yes' if target['met'] else '**no**'} | "
            f"{target['median_cpu_ratio']:.3f} |"
        )
    return out


def markdown_report(results):
    """Markdown tables for a list of results (one per backend).

    Args:
        results: list of result dicts.

    Returns:
        str: per result a heading, its versions and settings, the time
        ratios, the memory (where measured) and the targets.
    """
    out = []
    for result in results:
        out += _markdown_heading(result)
        out.append("")
        out += _markdown_times(result)
        out += _markdown_memory(result)
        out += _markdown_targets(result)
        out.append("")
    return "\n".join(out)


def write_report(output, readme):
    """Rewrites the results section of `readme` from the JSON in `output`.

    The section lies between `README_BEGIN` and `README_END`; without them
    it is appended. The file is written whole (`write_atomic`).

    Args:
        output: the results' folder.
        readme: the Markdown file to rewrite.

    Returns:
        int: how many results the section shows.
    """
    results = load_results(output)
    body = markdown_report(results) if results else "No results yet.\n"
    readme = pathlib.Path(readme)
    text = readme.read_text() if readme.exists() else ""
    section = f"{README_BEGIN}\n\n{body}\n{README_END}"
    if README_BEGIN in text and README_END in text:
        head, rest = text.split(README_BEGIN, 1)
        tail = rest.split(README_END, 1)[1]
        text = head + section + tail
    else:
        text = text + ("\n" if text else "") + section + "\n"
    write_atomic(readme, text)
    return len(results)
