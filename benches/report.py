#!/usr/bin/env python3
"""Turns one run of the comparison into the tables of docs/benchmarks.md and its pictures.

    python3 benches/report.py CRITERION_DIR RESULTS_DIR DOC IMG_DIR

Reads criterion's medians (CRITERION_DIR/**/new/{benchmark,estimates}.json), the instruction
counts (RESULTS_DIR/instructions.json, from benches/instructions.py), the memory probe's output
(RESULTS_DIR/memory-*.txt), the churn run's table (RESULTS_DIR/churn.md, from the `churn` binary)
and the machine's description (RESULTS_DIR/machine.md). Replaces, in
DOC, the text between each `<!-- generated:NAME -->` and `<!-- /generated:NAME -->` pair with the
fresh table NAME (all tables also go to RESULTS_DIR/tables.md), and writes IMG_DIR/bench-*.svg.
Every ratio divides two rows of the same run. `benches/run` runs all of it.
"""

import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import svg  # noqa: E402

CLOCKS = ["precise", "coarse"]
KEY_COUNTS = [1_000, 10_000, 100_000, 1_000_000]
# The insert row: its time counts building the table (see benches/peers/benches/keyed.rs).
INSERT_LABEL = "insert (per new key: a new table built, then filled from empty to 1,000,000)"
THREADS = [1, 2, 4]
TOLLGATE_DIRECT = [
    "tollgate_token_bucket",
    "tollgate_leaky_bucket",
    "tollgate_fixed_window",
    "tollgate_sliding_window",
    "tollgate_sliding_log",
]
# References, not limiters: a window's admission without what a real limiter adds
# (benches/peers/src/minimal_windows.rs), timed as the windows are.
MINIMAL_DIRECT = ["minimal_fixed_window", "minimal_sliding_window"]
DIRECT_PEERS = ["governor", "ratelimit", "ratelimit_std", "mutex_f64_bucket"]
FLOORS = [
    "floor/clock_read",
    "floor/clock_read+load+cas",
    "floor/clock_read+hash+load16+cas16",
    "floor/clock_read+hash+load8x2+cas8",
    "floor/clock_read+hash+place+load16+cas16",
    "floor/clock_read+hash+place+load8x2+cas8",
    "floor/minimal_gcra",
    "floor/std_instant_now",
    "floor/governor_clock_read",
]
FLOOR = "floor/clock_read+load+cas"


def load_criterion(root):
    """{group: {row: ns per element}}, the median of each benchmark divided by its elements."""
    groups = {}
    for bench in Path(root).glob("**/new/benchmark.json"):
        meta = json.loads(bench.read_text())
        estimates = json.loads((bench.parent / "estimates.json").read_text())
        elements = (meta.get("throughput") or {}).get("Elements", 1) or 1
        row = meta["function_id"] + (("/" + meta["value_str"]) if meta.get("value_str") else "")
        groups.setdefault(meta["group_id"], {})[row] = estimates["median"]["point_estimate"] / elements
    return groups


def ratio(a, b):
    return f"{a / b:.2f}x" if a is not None and b else "-"


def ns(value):
    return f"{value:.2f}" if value is not None else "-"


def instr(counts, key):
    value = counts.get(key)
    return f"{value:.0f}" if value is not None else "-"


def direct_table(groups, counts, clock):
    rows = groups.get(f"direct/{clock}", {})
    peers = [peer for peer in ["governor", "ratelimit", "mutex_f64_bucket"] if f"{peer}/allowed" in rows]
    head = "| limiter | path | median ns | instructions | ÷ floor |" + "".join(f" ÷ {p} |" for p in peers)
    lines = [head, "|---|---|---:|---:|---:|" + "---:|" * len(peers)]
    for floor in FLOORS:
        if floor in rows:
            lines.append(
                f"| {floor} | | {ns(rows[floor])} | {instr(counts, f'direct/{clock}/{floor}')} | "
                f"{ratio(rows[floor], rows.get(FLOOR))} |" + " |" * len(peers)
            )
    for limiter in TOLLGATE_DIRECT + MINIMAL_DIRECT + DIRECT_PEERS:
        for path in ["allowed", "denied"]:
            value = rows.get(f"{limiter}/{path}")
            if value is None:
                continue
            cells = "".join(
                f" {ratio(value, rows.get(f'{peer}/{path}')) if peer != limiter else ''} |" for peer in peers
            )
            lines.append(
                f"| {limiter} | {path} | {ns(value)} | {instr(counts, f'direct/{clock}/{limiter}/{path}')} | "
                f"{ratio(value, rows.get(FLOOR))} |{cells}"
            )
    loop = counts.get("direct/loop/nothing")
    note = f"\n\nInstructions include the timed loop's own {loop:.0f} per decision." if loop is not None else ""
    return "\n".join(lines) + note


def keyed_rows(groups, clock):
    """[(label, keys, tollgate ns, governor ns, instruction-count key suffix)]"""
    out = []
    hot = groups.get(f"keyed/{clock}/hot_key", {})
    out.append(("hot key", 1, hot.get("tollgate/1_key"), hot.get("governor/1_key"), "hot_key/{}"))
    for order in ["round_robin", "zipf"]:
        rows = groups.get(f"keyed/{clock}/{order}", {})
        for keys in KEY_COUNTS:
            out.append(
                (
                    order.replace("_", "-"),
                    keys,
                    rows.get(f"tollgate/{keys}"),
                    rows.get(f"governor/{keys}"),
                    f"{order}/{{}}/{keys}",
                )
            )
    insert = groups.get(f"keyed/{clock}/insert", {})
    out.append(
        (
            INSERT_LABEL,
            1_000_000,
            insert.get("tollgate/fill_1000000"),
            insert.get("governor/fill_1000000"),
            "insert/{}",
        )
    )
    return out


def keyed_table(groups, counts, clock):
    lines = [
        "| scenario | keys | tollgate ns | governor ns | governor ÷ tollgate | tollgate instr. | governor instr. |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for label, keys, ours, theirs, key in keyed_rows(groups, clock):
        if ours is None and theirs is None:
            continue
        lines.append(
            f"| {label} | {keys:,} | {ns(ours)} | {ns(theirs)} | {ratio(theirs, ours)} | "
            f"{instr(counts, f'keyed/{clock}/' + key.format('tollgate'))} | "
            f"{instr(counts, f'keyed/{clock}/' + key.format('governor'))} |"
        )
    return "\n".join(lines)


def implementation_order(name):
    """tollgate first, then the peers in a fixed order."""
    order = ["tollgate", "governor", "ratelimit", "mutex_f64_bucket"]
    base = "tollgate" if name.startswith("tollgate") else name
    return order.index(base) if base in order else len(order)


def per_second(ns_per_decision):
    """Millions of decisions per second, all threads together."""
    return 1e3 / ns_per_decision if ns_per_decision else None


# A direct or shared-key row at 1 thread runs the same loop, on the same limiter, as a single-thread row of
# another benchmark binary, and since the loops are compiled once, in tollgate-peers
# (benches/peers/src/timing.rs), the same machine code too (benches/loop_code.py shows it). Past
# this ratio either way, something besides the code moved that implementation's row between the
# two binaries (a spawned thread, the machine's load; or the code after all, were the crate built
# with LTO or twice): its thread rows do not compare with the single-thread tables nor, fairly,
# with a peer's. Before the loops were compiled once, governor's direct rows drifted 1.3x to 2.1x.
SAME_LOOP_TOLERANCE = 1.25


def single_thread_twin(groups, clock, scenario, name):
    """ns per decision of the single-thread row whose loop `scenario`'s 1-thread row runs."""
    if scenario in ("direct_shared", "direct_distinct"):
        return groups.get(f"direct/{clock}", {}).get(f"{name}/allowed")
    if scenario == "keyed_shared":
        return groups.get(f"keyed/{clock}/hot_key", {}).get(f"{name}/1_key")
    return None


def loop_drift(groups, clock, scenario, name):
    """The 1-thread row's time over its single-thread twin's, or None."""
    one = groups.get(f"contention/{clock}/{scenario}", {}).get(f"{name}/1")
    alone = single_thread_twin(groups, clock, scenario, name)
    return one / alone if one and alone else None


def drifted(drift):
    return drift is not None and not 1 / SAME_LOOP_TOLERANCE <= drift <= SAME_LOOP_TOLERANCE


def contention_table(groups, clock):
    lines = [
        "| scenario | implementation | 1 thread | 2 threads | 4 threads | 2 threads ÷ 1 | ÷ governor at 2 "
        "| 1 thread ÷ single-thread row (time) |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for scenario in ["direct_shared", "direct_distinct", "keyed_shared", "keyed_distinct"]:
        rows = groups.get(f"contention/{clock}/{scenario}", {})
        names = sorted({row.split("/")[0] for row in rows}, key=implementation_order)
        for name in names:
            rates = {t: per_second(rows.get(f"{name}/{t}")) for t in THREADS}
            governor_2 = per_second(rows.get(f"governor/2"))
            cells = " | ".join(f"{rates[t]:.1f}" if rates[t] else "-" for t in THREADS)
            drift = loop_drift(groups, clock, scenario, name)
            drift_cell = "" if drift is None else f"{drift:.2f}x" + (" **(drifted)**" if drifted(drift) else "")
            lines.append(
                f"| {scenario.replace('_', ', ')} | {name} | {cells} | {ratio(rates[2], rates[1])} | "
                f"{ratio(rates[2], governor_2) if name != 'governor' else ''} | {drift_cell} |"
            )
    return "\n".join(lines)


def memory_table(results):
    lines = ["| limiter | RSS added, 1,000,000 live keys | bytes per key |", "|---|---:|---:|"]
    found = {}
    for path in sorted(Path(results).glob("memory-*.txt")):
        text = path.read_text()
        name = text.splitlines()[0].split(":")[0]
        added = re.search(r"RSS after filling .*\(\+([0-9.]+) MiB\)", text)
        per_key = re.search(r"bytes per key\s+([0-9.]+)", text)
        if added and per_key:
            found[path.stem.removeprefix("memory-")] = float(per_key.group(1))
            lines.append(f"| {name} | {added.group(1)} MiB | {per_key.group(1)} |")
    return "\n".join(lines), found


def check(met):
    if met == "unsettled":
        return "**not settled**"
    return "met" if met else "**missed**"


def ratio_text(ratio, threshold):
    """A ratio to two decimals, or three when two would print the threshold itself (1.2034
    against 1.2 reads "1.20x" next to "missed" otherwise)."""
    text = f"{ratio:.2f}"
    if float(text) == threshold and ratio != threshold:
        text = f"{ratio:.3f}"
    return f"{text}x"


def targets_table(groups, memory):
    lines = ["| target | clock | measured | verdict |", "|---|---|---|---|"]

    def add(target, clock, measured, met):
        if met is not None:
            lines.append(f"| {target} | {clock} | {measured} | {check(met)} |")

    for clock in CLOCKS:
        rows = groups.get(f"direct/{clock}", {})
        floor = rows.get(FLOOR)
        for limiter in TOLLGATE_DIRECT:
            for path in ["allowed", "denied"]:
                value = rows.get(f"{limiter}/{path}")
                if value is None or not floor:
                    continue
                add(f"{limiter} {path} within 1.2x the floor", clock, ratio_text(value / floor, 1.2), value <= 1.2 * floor)
                governor = rows.get(f"governor/{path}")
                if governor:
                    add(
                        f"{limiter} {path} no slower than governor",
                        clock,
                        f"{value:.2f} vs {governor:.2f} ns",
                        value <= governor,
                    )
    for clock, fast, large in [("coarse", 4.0, 3.0), ("precise", 2.5, 2.0)]:
        keyed = {(label, keys): (ours, theirs) for label, keys, ours, theirs, _ in keyed_rows(groups, clock)}
        for label, keys, need in [("hot key", 1, fast), ("round-robin", 10_000, fast), ("round-robin", 1_000_000, large)]:
            ours, theirs = keyed.get((label, keys), (None, None))
            if ours and theirs:
                where = label if keys == 1 else f"{label}, {keys:,} keys"
                add(
                    f"keyed {where}: at least {need:g}x faster than governor (issue 3)",
                    clock,
                    ratio_text(theirs / ours, need),
                    theirs >= need * ours,
                )
        hot = keyed.get(("hot key", 1), (None, None))[0]
        direct = groups.get(f"direct/{clock}", {}).get("tollgate_token_bucket/allowed")
        if hot and direct:
            add("keyed hot key at most 1.2x the direct decision (keyed-table brief)", clock, ratio_text(hot / direct, 1.2), hot <= 1.2 * direct)
        ours, theirs = keyed.get((INSERT_LABEL, 1_000_000), (None, None))
        if ours and theirs:
            add("insert at most 150 ns per key (issue 3)", clock, f"{ours:.0f} ns", ours <= 150)
            add("insert at least 2x faster than governor (issue 3)", clock, ratio_text(theirs / ours, 2.0), theirs >= 2 * ours)
        rows = groups.get(f"contention/{clock}/keyed_distinct", {})
        one, two = rows.get("tollgate/1"), rows.get("tollgate/2")
        if one and two:
            add("keyed, 2 threads on distinct keys: at least 1.6x one thread (issue 3)", clock, ratio_text(one / two, 1.6), one / two >= 1.6)
        for scenario, need, source in [("keyed_shared", 2.0, "issue 3"), ("keyed_shared", 1.0, "issue 4"), ("direct_shared", 1.0, "issue 4")]:
            rows = groups.get(f"contention/{clock}/{scenario}", {})
            name = "tollgate" if "tollgate/2" in rows else "tollgate_token_bucket"
            ours = rows.get(f"{name}/2")
            theirs = rows.get("governor/2")
            if ours and theirs:
                # A one-thread row off its single-thread row (see SAME_LOOP_TOLERANCE) settles
                # nothing against the other.
                apart = [
                    f"{who}'s one-thread row is {drift:.2f}x its single-thread row"
                    for who, drift in [(name, loop_drift(groups, clock, scenario, name)), ("governor", loop_drift(groups, clock, scenario, "governor"))]
                    if drifted(drift)
                ]
                add(
                    f"{scenario.replace('_', ', ')} key, 2 threads: at least {need:g}x governor's decisions/s ({source})",
                    clock,
                    ratio_text(theirs / ours, need) + (f" ({'; '.join(apart)})" if apart else ""),
                    "unsettled" if apart else theirs >= need * ours,
                )
    if "tollgate" in memory:
        add("at most 24 bytes per key at 1,000,000 live keys (issue 3)", "-", f"{memory['tollgate']:.1f} B", memory["tollgate"] <= 24)
    return "\n".join(lines)


def keys_chart(groups, clock):
    series = []
    for color, name in enumerate(["tollgate", "governor"]):
        for order, dashed in [("round_robin", False), ("zipf", True)]:
            rows = groups.get(f"keyed/{clock}/{order}", {})
            points = [(keys, rows[f"{name}/{keys}"]) for keys in KEY_COUNTS if f"{name}/{keys}" in rows]
            if points:
                series.append((f"{name}, {order.replace('_', '-')}", points, dashed, color))
    return svg.line_chart(
        f"Keyed decision cost against live keys ({clock} clock)", "live keys (log scale)", "ns per decision (median)", series, log_x=True
    )


def threads_chart(groups, clock, kind):
    series = []
    colors = {"tollgate": 0, "governor": 1, "ratelimit": 2, "mutex f64 bucket": 3}
    for scenario, dashed in [(f"{kind}_shared", False), (f"{kind}_distinct", True)]:
        rows = groups.get(f"contention/{clock}/{scenario}", {})
        for name in sorted({row.split("/")[0] for row in rows}, key=implementation_order):
            points = [(t, per_second(rows[f"{name}/{t}"])) for t in THREADS if f"{name}/{t}" in rows]
            label = "tollgate" if name.startswith("tollgate") else name.replace("_f64_", " f64 ")
            series.append((f"{label}, {scenario.split('_')[1]}", points, dashed, colors.get(label, 4)))
    return svg.line_chart(
        f"{kind.capitalize()} limiters: decisions/s by threads ({clock} clock)",
        "threads (2 cores: 4 threads oversubscribe)",
        "millions of decisions per second",
        series,
    )


def replace_sections(doc, sections):
    text = doc.read_text()
    missing = []
    for name, body in sections.items():
        pattern = re.compile(rf"(<!-- generated:{re.escape(name)} -->)\n.*?(<!-- /generated:{re.escape(name)} -->)", re.S)
        if pattern.search(text):
            text = pattern.sub(lambda m: f"{m.group(1)}\n{body}\n{m.group(2)}", text)
        else:
            missing.append(name)
    doc.write_text(text)
    return missing


def main(args):
    if len(args) != 4:
        print(__doc__)
        return 2
    criterion, results, doc, img = Path(args[0]), Path(args[1]), Path(args[2]), Path(args[3])
    groups = load_criterion(criterion)
    if not groups:
        print(f"no criterion results under {criterion}: run the benchmarks first", file=sys.stderr)
        return 1
    counts_path = results / "instructions.json"
    counts = json.loads(counts_path.read_text())["per_decision"] if counts_path.exists() else {}
    memory, memory_found = memory_table(results)
    machine = results / "machine.md"
    sections = {"machine": machine.read_text().strip() if machine.exists() else "(not recorded)"}
    for clock in CLOCKS:
        sections[f"direct-{clock}"] = direct_table(groups, counts, clock)
        sections[f"keyed-{clock}"] = keyed_table(groups, counts, clock)
        sections[f"contention-{clock}"] = contention_table(groups, clock)
    sections["memory"] = memory
    sections["targets"] = targets_table(groups, memory_found)
    churn = results / "churn.md"
    if churn.exists():
        sections["churn"] = churn.read_text().strip()

    img.mkdir(parents=True, exist_ok=True)
    written = []
    for clock in CLOCKS:
        charts = {
            f"bench-keys-{clock}.svg": lambda: keys_chart(groups, clock),
            f"bench-threads-direct-{clock}.svg": lambda: threads_chart(groups, clock, "direct"),
            f"bench-threads-keyed-{clock}.svg": lambda: threads_chart(groups, clock, "keyed"),
        }
        for name, draw in charts.items():
            try:
                (img / name).write_text(draw())
                written.append(img / name)
            except ValueError as error:
                print(f"skipped {name}: {error}", file=sys.stderr)

    tables = results / "tables.md"
    tables.write_text("".join(f"## {name}\n\n{body}\n\n" for name, body in sections.items()))
    missing = replace_sections(doc, sections)
    for name in missing:
        print(f"{doc} has no <!-- generated:{name} --> section; the table is in {tables}", file=sys.stderr)
    print(f"tables: {doc} (and {tables})")
    for path in written:
        print(f"picture: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
