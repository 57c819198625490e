#!/usr/bin/env python3
"""Writes docs/benchmarks.md, the whole page, and its pictures, from one run of `benches/run`.

    python3 benches/report.py RESULTS_DIR DOC IMG_DIR

The page is: the machine and the command (RESULTS_DIR/machine.json), the targets with their
verdicts, one section per results file, then how far to trust a row. Each section is one small
function below reading one results file (listed in `SECTIONS`); a section whose file is missing
is left out, with a line on stderr, never filled with older figures. A section returns its text,
its pictures, the targets its rows are measured against and what it measured of the run's
noise; the targets table and the last section gather those. Every ratio divides two rows of the
same run. Pictures docs/img/bench-*.svg that this run did not draw are deleted.

A new section: a function `NAME(data) -> Section` here, a line in `SECTIONS`, and a function
`section_NAME` in benches/run that writes RESULTS_DIR/NAME.json.
"""

import json
import math
import re
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import svg  # noqa: E402
from report_fleet import TITLE as LEASE_FLEET_TITLE  # noqa: E402
from report_fleet import lease_fleet, lease_fleet_targets, tower_lease_rows, tower_lease_targets  # noqa: E402

CLOCKS = ["precise", "coarse"]
PAGE_LINES = 300


@dataclass
class Target:
    """A bound on one measured value: met when `value <= bound`."""

    what: str
    row: str
    clock: str | None
    value: float
    bound: float
    shown: str
    noise: float | None = None
    points: bool = False

    def verdict(self):
        if self.value <= self.bound:
            return "met"
        if self.points:
            return f"**missed by {self.value - self.bound:.1f} percentage points**"
        excess = (self.value / self.bound - 1) * 100
        return f"**missed by {excess:.2f}%**" if excess < 1 else f"**missed by {excess:.1f}%**"

    def cell(self):
        noise = f" ±{self.noise * 100:.1f}%" if self.noise is not None else ""
        return f"{self.shown}{noise}: {self.verdict()}"


@dataclass
class Section:
    """One section of the page: its title, Markdown lines, pictures (file name: SVG), targets and
    noise (lines for "How far to trust a row")."""

    title: str
    lines: list
    pictures: dict = field(default_factory=dict)
    targets: list = field(default_factory=list)
    noise: list = field(default_factory=list)


# Formatting ------------------------------------------------------------------------------------


def ns(value):
    if value is None:
        return "-"
    return f"{value:.2f}" if value < 100 else f"{value:,.1f}" if value < 1000 else f"{value:,.0f}"


def times(a, b):
    return f"{a / b:.2f}x" if a is not None and b else "-"


def shown_ratio(ratio, bound):
    """A ratio to two decimals, or three when two would print the bound itself beside a miss."""
    text = f"{ratio:.2f}"
    if float(text) == bound and ratio != bound:
        text = f"{ratio:.3f}"
    return f"{text}x"


def spread(row):
    """The half-width of criterion's 95% confidence interval of a row's median, over the median."""
    return (row["high"] - row["low"]) / 2 / row["ns"] if row else None


def ratio_noise(a, b):
    return spread(a) + spread(b) if a and b else None


def value(row):
    return row["ns"] if row else None


def instructions(counts, key):
    found = counts.get(key)
    return f"{found:.0f}" if found is not None else "-"


def table(head, rows, align=None):
    align = align or ["---"] + ["---:"] * (len(head) - 1)
    return ["| " + " | ".join(head) + " |", "|" + "|".join(align) + "|"] + [
        "| " + " | ".join(str(cell) for cell in row) + " |" for row in rows
    ]


def picture_line(pictures, alt):
    """The pictures side by side, each described by `alt` and its file name."""
    return " ".join(
        f"![{alt}: {name.removeprefix('bench-').removesuffix('.svg').replace('-', ', ')}](img/{name})"
        for name in pictures
    )


def noise_summary(name, groups):
    """One line on the spread of criterion's confidence intervals over every row of `groups`."""
    spreads = sorted(
        (spread(row), f"{group.split('/', 1)[1]}/{key}")
        for group, rows in groups.items()
        for key, row in rows.items()
        if row and row["ns"]
    )
    if not spreads:
        return []
    middle = statistics.median(value for value, _ in spreads)
    widest, where = spreads[-1]
    return [
        f"{name}: criterion's 95% confidence interval of a row's median is ±{middle * 100:.1f}% for "
        f"the median row, ±{widest * 100:.1f}% for the widest (`{where}`), over {len(spreads)} rows."
    ]


# Direct limiters -------------------------------------------------------------------------------

TOLLGATE_DIRECT = [
    "tollgate_token_bucket",
    "tollgate_leaky_bucket",
    "tollgate_fixed_window",
    "tollgate_fixed_window_wide",
    "tollgate_sliding_window",
    "tollgate_sliding_window_wide",
    "tollgate_sliding_log",
]
# A window whose limit does not fit one word beside its index takes a 128-bit state; its row is
# shown against the one-word row of the same algorithm (no target: the targets are the one-word
# decisions').
WIDE_OF = {
    "tollgate_fixed_window_wide": "tollgate_fixed_window",
    "tollgate_sliding_window_wide": "tollgate_sliding_window",
}
# Each single-cell algorithm's stripped reference (benches/peers/src/minimal_*.rs); the sliding
# log has none.
REFERENCE = {
    "tollgate_token_bucket": "minimal_gcra",
    "tollgate_leaky_bucket": "minimal_gcra",
    "tollgate_fixed_window": "minimal_fixed_window",
    "tollgate_sliding_window": "minimal_sliding_window",
}
REFERENCES = ["minimal_gcra", "minimal_fixed_window", "minimal_sliding_window"]
DIRECT_PEERS = ["governor", "ratelimit", "ratelimit_std", "mutex_f64_bucket"]
FLOOR = "floor/clock_read+load+cas"
FLOORS = {
    "floor/clock_read": "one clock read",
    FLOOR: "a clock read, one load and one CAS of an 8-byte word: what no direct decision skips",
    "floor/std_instant_now": "`std::time::Instant::now()`",
    "floor/governor_clock_read": "a read of governor's clock, as its decision makes it",
    "floor/clock_read+hash+load16+cas16": "a clock read, a key's hash, one 16-byte load and CAS",
    "floor/clock_read+hash+place+load16+cas16": "the same, the slot placed by the hash among 65,536",
    "floor/clock_read+hash+load8x2+cas8": "a two-word slot (tag, state): two loads, an 8-byte CAS",
    "floor/clock_read+hash+place+load8x2+cas8": "the same, placed, the tag read again",
}
DIRECT_TARGET_REFERENCE = 1.1
DIRECT_TARGET_GOVERNOR = 1.05


def direct(data):
    groups, counts = data["groups"], data["instructions"]
    rows = {clock: groups.get(f"direct/{clock}", {}) for clock in CLOCKS}
    lines = [
        "Nanoseconds per decision (criterion's median) and instructions per decision (callgrind) of "
        "one limiter on one thread: `allowed` admits every decision, `denied` refuses every one. "
        "Every row runs through the same never-inlined loop "
        "(`benches/peers/src/timing.rs`); ratios divide this row's time by the named row's, same "
        "clock, same path. The references (`minimal_*`) are each algorithm's decision stripped "
        "of what a real limiter adds (`benches/peers/src/minimal_gcra.rs`, `minimal_windows.rs`); "
        "a `_wide` row (a limit too large for one word: a 128-bit state) is divided by the "
        "one-word row of its algorithm instead.",
        "",
    ]
    floor_rows = []
    for name, what in FLOORS.items():
        if any(name in rows[clock] for clock in CLOCKS):
            cells = [name, what]
            for clock in CLOCKS:
                cells += [ns(value(rows[clock].get(name))), instructions(counts, f"direct/{clock}/{name}")]
            floor_rows.append(cells)
    lines += table(
        ["floor", "what it does", "precise ns", "instr.", "coarse ns", "instr."],
        floor_rows,
        ["---", "---", "---:", "---:", "---:", "---:"],
    )
    lines.append("")
    limiter_rows, targets = [], []
    for limiter in TOLLGATE_DIRECT + REFERENCES + DIRECT_PEERS:
        for path in ["allowed", "denied"]:
            if not any(f"{limiter}/{path}" in rows[clock] for clock in CLOCKS):
                continue
            cells = [limiter, path]
            for clock in CLOCKS:
                this = rows[clock].get(f"{limiter}/{path}")
                reference = rows[clock].get(f"{REFERENCE.get(limiter, WIDE_OF.get(limiter))}/{path}")
                governor = rows[clock].get(f"governor/{path}")
                cells += [
                    ns(value(this)),
                    instructions(counts, f"direct/{clock}/{limiter}/{path}"),
                    times(value(this), value(reference)),
                    times(value(this), value(governor)) if limiter != "governor" else "",
                    times(value(this), value(rows[clock].get(FLOOR))),
                ]
                if limiter in REFERENCE and this:
                    targets += direct_targets(limiter, path, clock, this, reference, governor)
            limiter_rows.append(cells)
    # The reference targets first, then governor's.
    targets.sort(key=lambda target: "governor" in target.what)
    head = ["limiter", "path"]
    for clock in CLOCKS:
        head += [f"{clock} ns", "instr.", "÷ reference", "÷ governor", "÷ floor"]
    lines += table(head, limiter_rows, ["---", "---"] + ["---:"] * 10)
    loop = counts.get("direct/loop/nothing")
    if loop is not None:
        lines += ["", f"Instruction counts include the timed loop's own {loop:.0f} per decision."]
    pictures = {}
    for clock in CLOCKS:
        names = [name for name in TOLLGATE_DIRECT + REFERENCES + DIRECT_PEERS if f"{name}/allowed" in rows[clock]]
        if names:
            pictures[f"bench-direct-{clock}.svg"] = svg.bar_chart(
                f"Direct limiters, one thread ({clock} clock)",
                "ns per decision (median)",
                names,
                [(path, [value(rows[clock].get(f"{name}/{path}")) for name in names]) for path in ["allowed", "denied"]],
            )
    if pictures:
        lines += ["", picture_line(pictures, "ns per decision")]
    return Section("Direct limiters", lines, pictures, targets, noise_summary("Direct limiters", groups))


def direct_targets(limiter, path, clock, this, reference, governor):
    row = f"`{limiter}`, {path}"
    targets = []
    if reference:
        targets.append(
            Target(
                f"within {DIRECT_TARGET_REFERENCE}x of `{REFERENCE[limiter]}`",
                row,
                clock,
                this["ns"] / reference["ns"],
                DIRECT_TARGET_REFERENCE,
                shown_ratio(this["ns"] / reference["ns"], DIRECT_TARGET_REFERENCE),
                ratio_noise(this, reference),
            )
        )
    if governor:
        bound = DIRECT_TARGET_GOVERNOR
        targets.append(
            Target(
                "at most 5% slower than governor",
                row,
                clock,
                this["ns"] / governor["ns"],
                bound,
                shown_ratio(this["ns"] / governor["ns"], bound),
                ratio_noise(this, governor),
            )
        )
    return targets


# Keyed limiters --------------------------------------------------------------------------------

KEY_COUNTS = [1_000, 10_000, 100_000, 1_000_000]
KEYED = ["tollgate", "governor", "floor"]
HOT_KEY_TARGET_FLOOR = 1.3


def keyed_scenarios(groups, clock):
    """[(scenario, keys, {implementation: row}, instruction-count key with {} for the name)]."""
    out = []
    hot = groups.get(f"keyed/{clock}/hot_key", {})
    out.append(("hot key", 1, {name: hot.get(f"{name}/1_key") for name in KEYED}, f"keyed/{clock}/hot_key/{{}}"))
    for order in ["round_robin", "zipf"]:
        rows = groups.get(f"keyed/{clock}/{order}", {})
        for keys in KEY_COUNTS:
            found = {name: rows.get(f"{name}/{keys}") for name in KEYED}
            out.append((order.replace("_", "-"), keys, found, f"keyed/{clock}/{order}/{{}}/{keys}"))
    insert = groups.get(f"keyed/{clock}/insert", {})
    found = {name: insert.get(f"{name}/fill_1000000") for name in KEYED}
    out.append(("insert, per new key", 1_000_000, found, f"keyed/{clock}/insert/{{}}"))
    return [scenario for scenario in out if any(scenario[2].values())]


def keyed(data):
    groups, counts = data["groups"], data["instructions"]
    lines = [
        "A `KeyedLimiter<u64, TokenBucket>` beside governor's keyed limiter (its DashMap store, "
        "pre-sized, its default SipHash hasher) and beside the keyed floor of a table of the same "
        "size (a hash, a clock read, one 16-byte load and CAS of the key's home slot: "
        "`benches/peers/src/keyed_floor.rs`). Every decision is admitted. The hot key is one key "
        "of a table built for 10,000; round-robin and Zipf (exponent 0.99) run over tables "
        "holding exactly their keys; an insert fills a table built for 1,000,000 from empty, "
        "its build included. Ratios divide tollgate's time by the named row's.",
    ]
    targets, pictures = [], {}
    worst_keyed = {}
    for clock in CLOCKS:
        scenarios = keyed_scenarios(groups, clock)
        if not scenarios:
            continue
        rows = []
        for label, keys, found, key in scenarios:
            ours, theirs, floor = (found.get(name) for name in KEYED)
            rows.append(
                [label, f"{keys:,}", ns(value(ours)), ns(value(theirs)), ns(value(floor))]
                + [times(value(ours), value(theirs)), times(value(ours), value(floor))]
                + [instructions(counts, key.format(name)) for name in KEYED]
            )
            if ours and theirs:
                # One target per scenario: its worst size (the largest ratio) on this clock.
                where = label if label != "round-robin" and label != "zipf" else f"{label}, 1,000 to 1,000,000 keys"
                if label.startswith("insert"):
                    where = f"{label}, {keys:,} keys"
                ratio = ours["ns"] / theirs["ns"]
                worst = worst_keyed.get((where, clock))
                if worst is None or ratio > worst.value:
                    worst_keyed[(where, clock)] = Target(
                        "ahead of governor (every size)", f"keyed {where}", clock, ratio, 1.0,
                        shown_ratio(ratio, 1.0) + ("" if keys == 1 else f" at {keys:,}"), ratio_noise(ours, theirs),
                    )
            if label == "hot key" and ours and floor:
                targets.append(
                    Target(
                        f"within {HOT_KEY_TARGET_FLOOR}x of the keyed floor",
                        "keyed hot key",
                        clock,
                        ours["ns"] / floor["ns"],
                        HOT_KEY_TARGET_FLOOR,
                        shown_ratio(ours["ns"] / floor["ns"], HOT_KEY_TARGET_FLOOR),
                        ratio_noise(ours, floor),
                    )
                )
        lines += ["", f"{clock.capitalize()} clocks, ns per decision (median):", ""]
        lines += table(
            ["scenario", "keys", "tollgate", "governor", "floor", "÷ governor", "÷ floor", "instr. tollgate",
             "governor", "floor"],
            rows,
        )
        try:
            pictures[f"bench-keys-{clock}.svg"] = keys_chart(groups, clock)
        except ValueError as error:
            print(f"no keys picture: {error}", file=sys.stderr)
    lines += keyed_wide_lines(groups)
    if pictures:
        lines += ["", picture_line(pictures, "Keyed decision cost against live keys")]
    targets = list(worst_keyed.values()) + targets
    return Section("Keyed limiters", lines, pictures, targets, noise_summary("Keyed limiters", groups))


KEYED_WIDE = ["tollgate_sliding_window_wide", "tollgate_fixed_window_wide"]


def keyed_wide_lines(groups):
    """The windows with a 128-bit state (the locked table), beside the token bucket's lock-free
    rows of the same scenarios."""
    rows = []
    for clock in CLOCKS:
        for group, key, label in [("hot_key", "1_key", "hot key"), ("round_robin", "1000", "1,000 keys"),
                                  ("round_robin", "10000", "10,000 keys")]:
            found = groups.get(f"keyed/{clock}/{group}", {})
            bucket = found.get(f"tollgate/{key}")
            cells = [clock, label, ns(value(bucket))]
            for name in KEYED_WIDE:
                wide = found.get(f"{name}/{key}")
                cells += [ns(value(wide)), times(value(wide), value(bucket))]
            if any(cell != "-" for cell in cells[3:]):
                rows.append(cells)
    if not rows:
        return []
    return [
        "",
        "Window limits too large for one word (a 128-bit state per key, in a table under a short "
        "per-key lock; `u32::MAX` per 1,000 s), beside the lock-free token bucket's row:",
        "",
    ] + table(["clock", "scenario", "token bucket", "sliding, wide", "÷ bucket", "fixed, wide", "÷ bucket"], rows)


def keys_chart(groups, clock):
    series = []
    for color, name in enumerate(KEYED):
        for order, dashed in [("round_robin", False), ("zipf", True)]:
            rows = groups.get(f"keyed/{clock}/{order}", {})
            points = [(keys, rows[f"{name}/{keys}"]["ns"]) for keys in KEY_COUNTS if f"{name}/{keys}" in rows]
            if points:
                series.append((f"{name}, {order.replace('_', '-')}", points, dashed, color))
    return svg.line_chart(
        f"Keyed decision cost against live keys ({clock} clock)", "live keys (log scale)", "ns per decision (median)",
        series, log_x=True,
    )


# Memory per key --------------------------------------------------------------------------------

MEMORY_TARGET = 24


def memory(data):
    ours = data.get("tollgate")
    rows = [
        [found["label"], f"{found['added_mib']:.1f} MiB", f"{found['bytes_per_key']:.1f}",
         times(found["bytes_per_key"], ours["bytes_per_key"]) if ours else "-"]
        for found in data.values()
    ]
    lines = [
        "Resident memory a keyed limiter adds to its process, built for and then holding 1,000,000 "
        "live keys (`benches/peers/src/bin/keyed_memory.rs`, one process per limiter).",
        "",
    ] + table(["limiter", "RSS added", "bytes per key", "÷ tollgate"], rows)
    targets = []
    if ours:
        targets.append(
            Target("at most 24 bytes per key at 1,000,000 keys", "keyed memory", None, ours["bytes_per_key"],
                   MEMORY_TARGET, f"{ours['bytes_per_key']:.1f} B")
        )
    return Section("Memory per key", lines, targets=targets)


# Churn -----------------------------------------------------------------------------------------


def churn(data):
    rows = [
        [f"{row['round']:.0f}", f"{row['new_ns']:.0f}", f"{row['present_ns']:.0f}", f"{row['len']:,.0f}",
         f"{row['active']:,.0f}", f"{row['active_us']:,.0f}"]
        for index, row in enumerate(data["rows"])
        # The first rounds, where the table fills, and every fourth after, and the last.
        if index < 3 or index % 4 == 0 or index == len(data["rows"]) - 1
    ]
    lines = [
        f"A table built for {data['capacity']:,} keys sees {data['per_round']:,} keys it has never "
        "seen each round, then the same keys again; ten seconds (of a manual clock) then pass and "
        "every key is idle, so the next round's keys take idle keys' slots "
        "(`benches/peers/src/bin/churn.rs`). Mean ns per decision over each pass.",
        "",
    ] + table(["round", "new key ns", "present key ns", "`len()`", "`active()`", "µs for `active()`"], rows)
    return Section("Churn", lines)


# Threads ---------------------------------------------------------------------------------------

THREADS = [1, 2, 4]
SCENARIOS = ["direct_shared", "direct_distinct", "keyed_shared", "keyed_distinct"]
IMPLEMENTATIONS = ["tollgate", "governor", "ratelimit", "mutex_f64_bucket"]


def implementation(name):
    return "tollgate" if name.startswith("tollgate") else name


def per_second(row):
    """Millions of decisions per second, all threads together."""
    return 1e3 / row["ns"] if row else None


def threads(data):
    groups, cores = data["groups"], data.get("cores")
    lines = [
        "Millions of decisions per second, all threads together, with every thread on one shared "
        "limiter or key (`shared`), or on its own limiter or its own 1,000 keys of one table "
        f"(`distinct`); this machine has {cores} logical CPUs, so more threads than that take "
        "turns (`benches/peers/benches/contention.rs`). The direct rows run the token bucket. "
        "Ratios here divide rates: above 1 is better.",
    ]
    pictures = {}
    rows = []
    for scenario in SCENARIOS:
        found = {clock: groups.get(f"contention/{clock}/{scenario}", {}) for clock in CLOCKS}
        names = sorted({key.split("/")[0] for clock in CLOCKS for key in found[clock]},
                       key=lambda n: IMPLEMENTATIONS.index(implementation(n)))
        for name in names:
            cells = [scenario.replace("_", ", "), implementation(name)]
            for clock in CLOCKS:
                rates = {t: per_second(found[clock].get(f"{name}/{t}")) for t in THREADS}
                governor_two = per_second(found[clock].get("governor/2"))
                cells += [" / ".join(f"{rates[t]:.1f}" if rates[t] else "-" for t in THREADS),
                          times(rates[2], governor_two) if name != "governor" else ""]
            rows.append(cells)
    if rows:
        lines += [""]
        lines += table(
            ["scenario", "implementation", "precise: 1 / 2 / 4 threads", "2 ÷ governor",
             "coarse: 1 / 2 / 4 threads", "2 ÷ governor"],
            rows,
            ["---", "---", "---:", "---:", "---:", "---:"],
        )
    for clock in CLOCKS:
        for kind in ["direct", "keyed"]:
            try:
                pictures[f"bench-threads-{kind}-{clock}.svg"] = threads_chart(groups, clock, kind, cores)
            except ValueError as error:
                print(f"no threads picture: {error}", file=sys.stderr)
    if pictures:
        lines += ["", picture_line(pictures, "Decisions per second by threads")]
    return Section("Threads", lines, pictures, noise=noise_summary("Threads", groups))


def threads_chart(groups, clock, kind, cores):
    series = []
    for scenario, dashed in [(f"{kind}_shared", False), (f"{kind}_distinct", True)]:
        found = groups.get(f"contention/{clock}/{scenario}", {})
        for name in sorted({key.split("/")[0] for key in found}, key=lambda n: IMPLEMENTATIONS.index(implementation(n))):
            points = [(t, per_second(found[f"{name}/{t}"])) for t in THREADS if f"{name}/{t}" in found]
            label = implementation(name)
            series.append((f"{label}, {scenario.split('_')[1]}", points, dashed, IMPLEMENTATIONS.index(label)))
    return svg.line_chart(
        f"{kind.capitalize()} limiters: decisions/s by threads ({clock} clock)",
        f"threads ({cores} logical CPUs)",
        "millions of decisions per second",
        series,
    )


# Redis -----------------------------------------------------------------------------------------

PLAIN_SCRIPT = "plain Lua token bucket"


def redis(data):
    lines = [
        "Each tollgate script through `RedisLimiter`, beside `SET` and a plain Lua token bucket "
        "script (`PLAIN_BUCKET_SCRIPT` in `benches/redis_speed.rs`: HMGET of the tokens and the "
        "last update, refill, HSET, EXPIRE), all at 2/s with a burst of 10 (windows 10 per 5 s), "
        "over 10,000 keys in turn. Server µs per call is Redis' own "
        "`usec_per_call` (`INFO commandstats`), the script's commands included; `÷ plain` divides "
        "it by the plain script's at the same tasks.",
    ]
    noise = []
    for found in data["tables"]:
        plain = {row["tasks"]: row["server_us"] for row in found["rows"] if row["operation"] == PLAIN_SCRIPT}
        # One row per operation, its runs at each number of tasks side by side.
        by_operation, tasks = {}, []
        for row in found["rows"]:
            by_operation.setdefault(row["operation"], {})[row["tasks"]] = row
            if row["tasks"] not in tasks:
                tasks.append(row["tasks"])

        def cells(runs, field, form):
            return " / ".join(form.format(runs[t][field]) if t in runs else "-" for t in tasks)

        rows = [
            [operation, cells(runs, "per_second", "{:,.0f}"), cells(runs, "p50_us", "{:.1f}"),
             cells(runs, "p99_us", "{:.1f}"), cells(runs, "server_us", "{:.2f}"),
             " / ".join(times(runs[t]["server_us"], plain.get(t)) if t in runs else "-" for t in tasks)]
            for operation, runs in by_operation.items()
        ]
        shown = " / ".join(f"{t:.0f}" for t in tasks)
        lines += ["", f"{found['title']}; each cell at {shown} tasks:" if found["title"] else "", ""]
        lines += table(["operation", "calls/s", "p50 µs", "p99 µs", "server µs/call", "÷ plain"], rows,
                       ["---", "---:", "---:", "---:", "---:", "---:"])
        rounds = re.search(r"best of (\d+)", found["title"] or "")
        if rounds:
            noise.append(
                f"Redis: each row is the best of {rounds.group(1)} interleaved rounds; the spread between "
                "rounds is not recorded."
            )
    return Section("Redis", lines, noise=noise)


# Redis Cluster ---------------------------------------------------------------------------------


def redis_cluster(data):
    rows = data["rows"]
    by = {(row["operation"], row["target"], row["tasks"]): row for row in rows}
    operations = list(dict.fromkeys(row["operation"] for row in rows))
    lines = [
        f"Each script through `RedisLimiter` on one Redis and on a Redis Cluster of three masters "
        f"(each with a replica) on this machine, over {data['keys']:,} keys, at 1 and 50 concurrent "
        f"tasks of one client (best of {data['rounds']} rounds of {data['seconds_per_row']:g} s). "
        "`server µs` is Redis' own time per call (`INFO commandstats`), over every master for the "
        "cluster; `masters` gives each master's. `WAIT 1` rows wait for one replica after each call.",
        "",
    ]
    table_rows = []
    for operation in operations:
        cells = [operation]
        for target in ["single", "cluster"]:
            for tasks in [1, 50]:
                row = by.get((operation, target, tasks))
                cells.append(f"{row['decisions_per_second']:,.0f}" if row else "-")
        single = by.get((operation, "single", 50))
        cluster = by.get((operation, "cluster", 50))
        cells.append(f"{single['server_us_per_call']:.2f}" if single else "-")
        cells.append(f"{cluster['server_us_per_call']:.2f}" if cluster else "-")
        cells.append(
            ", ".join(f"{node['server_us_per_call']:.2f}" for node in cluster["nodes"]) if cluster else "-"
        )
        table_rows.append(cells)
    lines += table(
        ["operation", "one Redis, 1 task/s", "50 tasks/s", "cluster, 1 task/s", "50 tasks/s",
         "server µs, one", "cluster", "masters"],
        table_rows,
    )
    lines += [
        "",
        "On this machine the client, the masters and their replicas share its cores: the 50-task "
        "rows measure the machine, not a master. What one master can serve is about "
        "1,000,000 / (server µs per call) calls a second, and a cluster of N masters on N "
        "machines about N times that (a computation from the per-master column, not a measurement).",
    ]
    return Section("Redis Cluster", lines)


# The tower layer -------------------------------------------------------------------------------

TOWER_TARGET_COST = 5.0


def tower(data):
    rounds = data["rounds"]

    def median(key):
        return statistics.median(row[key] for row in rounds)

    rows = [
        ["no layer", f"{median('none'):,.0f}", f"{median('none_cpu'):.2f}", "", ""],
        ["layer, RateLimit fields on every response", f"{median('every'):,.0f}", f"{median('every_cpu'):.2f}",
         f"{data['every']['cost_percent']:.1f}%", f"{(data['every']['cpu_ratio'] - 1) * 100:+.1f}%"],
        ["layer, fields on refusals only", f"{median('refusals'):,.0f}", f"{median('refusals_cpu'):.2f}",
         f"{data['refusals']['cost_percent']:.1f}%", f"{(data['refusals']['cpu_ratio'] - 1) * 100:+.1f}%"],
    ] + tower_lease_rows(data)
    lines = [
        "The gateway's built-in upstream, with and without the rate-limit layer, under wrk "
        f"({data['settings']}); every request is admitted, so each one takes the layer's longest "
        f"path (`benches/gateway_load.sh`). Medians of {len(rounds)} rounds, each running the three "
        "gateways back to back; the cost is the median of the rounds' throughput ratios. The leased "
        "rows (each gateway on units leased from a redis-server of the script's own, 1,000 keys each "
        "far below the quota) are divided by a local gateway of the same algorithm in the same round.",
        "",
    ] + table(["gateway", "requests/s", "gateway CPU µs per request", "throughput cost", "CPU per request"], rows)
    costs = [(1 - row["refusals"] / row["none"]) * 100 for row in rounds]
    targets = [
        Target(
            "the tower layer costs at most 5% of the gateway's throughput (fields on refusals only)",
            "tower layer", None, data["refusals"]["cost_percent"], TOWER_TARGET_COST,
            f"{data['refusals']['cost_percent']:.1f}%", points=True,
        )
    ] + tower_lease_targets(data, Target)
    noise = [
        f"Tower layer: the rounds' costs (fields on refusals only) range from {min(costs):.1f}% to "
        f"{max(costs):.1f}% over {len(rounds)} rounds."
    ]
    return Section("The tower layer under load", lines, targets=targets, noise=noise)


def leases(data):
    # lease_fleet() starts with its heading and a blank line; main() writes the heading itself.
    return Section(LEASE_FLEET_TITLE, lease_fleet(data)[2:], targets=lease_fleet_targets(data, Target))


# Live quotas, policy sets and metrics ------------------------------------------------------------

# A row in a `Live` (its quota can change while it runs), divided by the plain row of the same
# algorithm (benches/peers/src/changeable.rs).
LIVE_OF = {
    "tollgate_token_bucket_live": "tollgate_token_bucket",
    "tollgate_fixed_window_live": "tollgate_fixed_window",
    "tollgate_sliding_window_live": "tollgate_sliding_window",
    "tollgate_sliding_log_live": "tollgate_sliding_log",
}
# A policy set of one, two or three policies, divided by one plain token bucket.
DIRECT_SETS = ["tollgate_policy_set_1", "tollgate_policy_set_2", "tollgate_policy_set_3"]
KEYED_CHANGEABLE = ["tollgate_live", "tollgate_policy_set_2", "tollgate_policy_set_3"]
METRICS_HOT_KEY_BOUND = 1.05
METRICS_DISTINCT_BOUND = 1.0


def operations(loaded):
    """Live quotas and policy sets (rows of the direct and keyed sections' runs) and metrics on
    and off (the metrics section's run); `None` when none of their rows was measured."""
    lines, targets = [], []
    direct = (loaded.get("direct.json") or {}).get("groups", {}).get("direct/precise", {})
    rows = []
    for name, plain in list(LIVE_OF.items()) + [(name, "tollgate_token_bucket") for name in DIRECT_SETS]:
        paths = [(direct.get(f"{name}/{path}"), direct.get(f"{plain}/{path}")) for path in ["allowed", "denied"]]
        if any(this for this, _ in paths):
            cells = [f"`{name}`", f"`{plain}`"]
            for this, base in paths:
                cells += [f"{ns(value(this))} / {ns(value(base))}", times(value(this), value(base))]
            rows.append(cells)
    keyed = (loaded.get("keyed.json") or {}).get("groups", {}).get("keyed/precise/hot_key", {})
    base = keyed.get("tollgate/1_key")
    for name in KEYED_CHANGEABLE:
        this = keyed.get(f"{name}/1_key")
        if this:
            rows.append([f"`{name}` (keyed, one hot key)", "`tollgate` (keyed)",
                         f"{ns(value(this))} / {ns(value(base))}", times(value(this), value(base)), "-", "-"])
    if rows:
        lines += [
            "A quota that can change while it runs (`Live`: one snapshot read more per decision) and "
            "policy sets decided all or nothing (a `denied` set refuses at its last policy and gives "
            "the others' units back), one thread, precise clock, ns beside the plain limiter's in the "
            "same run (`benches/peers/src/changeable.rs`).",
            "",
        ]
        lines += table(["limiter", "beside", "allowed ns", "ratio", "denied ns", "ratio"], rows,
                       ["---", "---", "---:", "---:", "---:", "---:"])
    metrics = loaded.get("metrics.json")
    if metrics:
        groups = metrics["groups"]
        off = (loaded.get("keyed.json") or {}).get("groups", {}).get("keyed/precise/hot_key", {}).get("tollgate/1_key")
        hot = groups.get("keyed/precise/hot_key", {})
        unnamed, named = hot.get("tollgate/1_key"), hot.get("tollgate_metered/1_key")
        distinct = groups.get("contention/precise/keyed_distinct", {})
        d_unnamed, d_named = distinct.get("tollgate/2"), distinct.get("tollgate_metered/2")
        lines += [
            "",
            "Metrics (feature `metrics`): the keyed hot key on one thread and distinct keys on two "
            "threads, tollgate built with the feature, unnamed (nothing counted) and named (every "
            "decision counted on its thread's lane), and, for the hot key, built without the feature "
            "(the keyed section's row). Thread rows are ns per decision of both threads together.",
            "",
        ]
        lines += table(
            ["scenario", "without the feature", "with it, unnamed", "named (counted)", "named ÷ unnamed"],
            [
                ["hot key, 1 thread", ns(value(off)), ns(value(unnamed)), ns(value(named)), times(value(named), value(unnamed))],
                ["distinct keys, 2 threads", "", ns(value(d_unnamed)), ns(value(d_named)), times(value(d_named), value(d_unnamed))],
            ],
            ["---", "---:", "---:", "---:", "---:"],
        )
        if named and unnamed:
            ratio = value(named) / value(unnamed)
            targets.append(Target("metrics cost, keyed hot key, one thread (named ÷ unnamed)", "`tollgate_metered`", "precise", ratio, METRICS_HOT_KEY_BOUND, f"{ratio:.2f}x ≤ {METRICS_HOT_KEY_BOUND}x"))
        if d_named and d_unnamed:
            ratio = value(d_named) / value(d_unnamed)
            noise = ratio_noise(d_named, d_unnamed)
            targets.append(Target("metrics cost, distinct keys, two threads (no loss of throughput)", "`tollgate_metered`", "precise", ratio, METRICS_DISTINCT_BOUND + (noise or 0), f"{ratio:.2f}x ≤ 1x", noise))
    if not lines:
        return None
    return Section("Live quotas, policy sets and metrics", lines, targets=targets)


# The page --------------------------------------------------------------------------------------

# (results file, section), in the page's order.
SECTIONS = [
    ("direct.json", direct),
    ("keyed.json", keyed),
    ("memory.json", memory),
    ("churn.json", churn),
    ("threads.json", threads),
    ("redis.json", redis),
    ("redis-cluster.json", redis_cluster),
    ("tower.json", tower),
    ("lease-fleet.json", leases),
]


def machine_lines(machine):
    def load(values):
        return " ".join(f"{v:.2f}" for v in values) if values else "?"

    redis_version = (machine.get("redis") or "").split(" v=")[-1].split()[0] if machine.get("redis") else None
    tools = [machine.get("rustc"), machine.get("valgrind"), redis_version and f"Redis {redis_version}", machine.get("wrk")]
    sections = ", ".join(
        f"{s['name']} {s['seconds']} s" + ("" if s["status"] == "ok" else " (failed)")
        for s in machine["sections"]
        if "seconds" in s
    )
    return [
        f"- CPU: {machine['cpu']}, {machine['logical_cpus']} logical CPUs"
        + (f", a {machine['hypervisor']} guest" if machine.get("hypervisor") else ""),
        f"- memory {machine['memory_gib']} GiB; kernel {machine['kernel']}; {machine['os']}",
        "- " + "; ".join(tool for tool in tools if tool),
        f"- tollgate commit {machine['commit']}, measured {machine['date']}",
        f"- load average (1, 5, 15 min): {load(machine.get('load_start'))} before, "
        f"{load(machine.get('load_end'))} after",
        f"- sections: {sections}",
        "",
        "```sh",
        machine["command"],
        "```",
    ]


def targets_lines(targets):
    by_clock, clockless = {}, []
    for target in targets:
        if target.clock is None:
            clockless.append(target)
        else:
            by_clock.setdefault((target.what, target.row), {})[target.clock] = target
    lines = [
        "Each target is measured against rows of this run. `missed by X%`: the measured value is X% "
        "above what the target allows. `±`: the half-width of criterion's 95% confidence "
        "intervals of the two rows' medians, added."
    ]
    if any("minimal_" in target.what for target in targets):
        lines[0] += (
            " The direct targets apply to the four single-cell algorithms, allowed and denied; each "
            "is measured against the stripped reference of its own algorithm on the same path (each "
            "reference refuses as tollgate does: no CAS, the retry-after computed)."
        )
    lines.append("")
    rows = [[what, row] + [found[c].cell() if c in found else "-" for c in CLOCKS] for (what, row), found in by_clock.items()]
    if rows:
        lines += table(["target", "row", "precise clock", "coarse clock"], rows, ["---", "---", "---", "---"])
    if clockless:
        lines += [""] + table(["target", "measured", "verdict"], [[t.what, t.shown, t.verdict()] for t in clockless],
                              ["---", "---:", "---"])
    return lines


def trust_lines(machine, sections, loaded):
    lines = ["Measured in this run:", ""]
    lines += [f"- {line}" for section in sections for line in section.noise]
    lines += [f"- {line}" for line in same_loop_drift(loaded)]
    busiest = max((load[0] for load in (machine.get("load_start"), machine.get("load_end")) if load), default=0)
    if busiest > machine["logical_cpus"] / 2:
        lines.append(
            f"- The machine was busy: a load average of {busiest:.2f} (1 min) on {machine['logical_cpus']} "
            "logical CPUs, so other work shared the cores with the rows and moved them."
        )
    steal = ", ".join(f"{s['name']} {s['steal_percent']:.1f}%" for s in machine["sections"] if "steal_percent" in s)
    lines.append(
        f"- CPU time the hypervisor gave to other guests (steal, /proc/stat): {machine.get('steal_percent', 0):.1f}% "
        f"over the run; by section: {steal}."
    )
    tsc = ", ".join(machine.get("tsc_flags") or []) or "none"
    frequency = machine.get("frequency_governor")
    lines += [
        "",
        "What the machine hides:",
        "",
        f"- Frequency: {'the cpufreq governor is ' + frequency if frequency else 'the guest sees no frequency control (no cpufreq)'}; "
        "turbo and the host's power states move every row and are not visible here.",
        f"- Neighbours: {'a ' + machine['hypervisor'] + ' guest' if machine.get('hypervisor') else 'a machine'} "
        f"of {machine['logical_cpus']} logical CPUs; other guests on the same host share caches and memory "
        "bandwidth, which steal time does not show.",
        f"- Time: clock source `{machine.get('clocksource')}`, TSC flags {tsc}; the precise clocks read the TSC, "
        "whose cost under a hypervisor depends on the host.",
        "- Instruction counts (callgrind) do not vary between runs, but they do not see cache misses, branch "
        "mispredictions or contention. A verdict whose margin is inside its `±` can change between runs.",
    ]
    return lines


def same_loop_drift(loaded):
    """The threads bench's one-thread rows against the single-thread rows of the same loop."""
    threads_data = loaded.get("threads.json")
    if not threads_data:
        return []
    ratios = []
    for clock in CLOCKS:
        for scenario in SCENARIOS[:3]:
            for key, row in threads_data["groups"].get(f"contention/{clock}/{scenario}", {}).items():
                name, count = key.split("/")
                if count != "1":
                    continue
                if scenario.startswith("direct") and loaded.get("direct.json"):
                    twin = loaded["direct.json"]["groups"].get(f"direct/{clock}", {}).get(f"{name}/allowed")
                elif scenario == "keyed_shared" and loaded.get("keyed.json"):
                    twin = loaded["keyed.json"]["groups"].get(f"keyed/{clock}/hot_key", {}).get(f"{name}/1_key")
                else:
                    twin = None
                if twin:
                    ratios.append((row["ns"] / twin["ns"], f"{clock}/{scenario}/{name}"))
    if not ratios:
        return []
    ratios.sort()
    farthest = max(ratios, key=lambda found: abs(math.log(found[0])))
    return [
        f"The same loop timed twice, by two benchmark binaries of this run: the threads bench's "
        f"one-thread rows take {ratios[0][0]:.2f}x to {ratios[-1][0]:.2f}x the time of the same "
        f"limiter's single-thread row (median {statistics.median(r for r, _ in ratios):.2f}x, "
        f"{len(ratios)} rows; farthest from 1: `{farthest[1]}`)."
    ]


def write_pictures(img, sections):
    img.mkdir(parents=True, exist_ok=True)
    drawn = {name: text for section in sections for name, text in section.pictures.items()}
    for name, text in drawn.items():
        (img / name).write_text(text)
    for old in img.glob("bench-*.svg"):
        if old.name not in drawn:
            old.unlink()
            print(f"deleted {old}: this run did not draw it", file=sys.stderr)
    return drawn


def main(args):
    if len(args) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    results, doc, img = Path(args[0]), Path(args[1]), Path(args[2])
    machine_path = results / "machine.json"
    if not machine_path.exists():
        print(f"no {machine_path}: run benches/run", file=sys.stderr)
        return 1
    machine = json.loads(machine_path.read_text())
    loaded, sections = {}, []
    for name, section in SECTIONS:
        path = results / name
        if not path.exists():
            print(f"left out: {section.__name__} (no {path})", file=sys.stderr)
            continue
        try:
            data = json.loads(path.read_text())
            sections.append(section(data))
        except (ValueError, KeyError, TypeError, ZeroDivisionError) as error:
            print(f"left out: {section.__name__} ({path} does not read: {error!r})", file=sys.stderr)
            continue
        loaded[name] = data
    # Read from the other sections' results, and the metrics section's own.
    for name in ["metrics.json"]:
        if (results / name).exists():
            loaded[name] = json.loads((results / name).read_text())
    extra = operations(loaded)
    if extra:
        sections.append(extra)
    if not sections:
        print(f"no results under {results}: nothing to write", file=sys.stderr)
        return 1
    targets = [target for section in sections for target in section.targets]
    lines = [
        "# tollgate: benchmarks",
        "",
        "Written whole by `benches/run` from the run it had just made: every figure is from that "
        "run, on the machine below, and every ratio divides two rows of it. Times are per decision; "
        "lower is better, and so is a ratio of times below 1.",
        "",
        "## Machine and command",
        "",
    ] + machine_lines(machine)
    if targets:
        lines += ["", "## Targets", ""] + targets_lines(targets)
    for section in sections:
        lines += ["", f"## {section.title}", ""] + section.lines
    lines += ["", "## How far to trust a row", ""] + trust_lines(machine, sections, loaded)
    doc.write_text("\n".join(line for line in collapse_blank(lines)) + "\n")
    drawn = write_pictures(img, sections)
    count = len(doc.read_text().splitlines())
    print(f"wrote {doc} ({count} lines) and {len(drawn)} pictures in {img}")
    if count > PAGE_LINES:
        print(f"{doc} has {count} lines, more than {PAGE_LINES}", file=sys.stderr)
    return 0


def collapse_blank(lines):
    """The lines without runs of blank lines."""
    previous = None
    for line in lines:
        if line == "" and previous == "":
            continue
        previous = line
        yield line


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
