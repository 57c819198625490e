"""The section of docs/benchmarks.md on leases: a fleet of processes sharing one quota, from
RESULTS_DIR/lease-fleet.json (written by `cargo bench -p tollgate --features redis --bench
lease_fleet`; its schema is in the doc comment of `benches/lease_fleet.rs`).

    lease_fleet(data) -> list[str]           the section's Markdown lines, its heading first
    lease_fleet_targets(data, Target) -> list  the targets, as `benches/report.py`'s `Target`s

and the leased gateway's rows of the tower section, from RESULTS_DIR/tower.json's optional
"lease" (`benches/gateway_load.sh`, `benches/collect.py tower`):

    tower_lease_rows(data) -> list[list[str]]  rows for the tower section's table (none without it)
    tower_lease_targets(data, Target) -> list  leased at least 0.9x the local gateway's throughput

None imports `report.py` (it passes its `Target` class in).
"""

import statistics

TITLE = "Leases: a fleet sharing one quota"
COMMAND = "cargo bench -p tollgate --features redis --bench lease_fleet"
# Targets, shown against the hot key at 0.5x and 10x its quota.
MAX_CALLS_PER_DECISION = 0.05
MAX_EXTRA_REFUSALS = 0.01
TARGET_WORKLOADS = ["hot key at 0.5x", "hot key at 10x"]


def _verdict(value, bound, shown):
    return "yes" if value <= bound else f"no, by {shown(value - bound)}"


def _calls_cell(workload):
    return f"{workload['leased']['calls_per_decision']:.4f} / {workload['exact']['calls_per_decision']:.2f}"


def lease_fleet(data):
    """The section: heading, one sentence, one table (one row per workload)."""
    rows = []
    for workload in data["workloads"]:
        leased, exact = workload["leased"], workload["exact"]
        over = max(leased["over_admission"], exact["over_admission"])
        targeted = workload["name"] in TARGET_WORKLOADS
        calls_ok = (
            _verdict(leased["calls_per_decision"], MAX_CALLS_PER_DECISION, lambda d: f"{d:.4f}") if targeted else "-"
        )
        extra_ok = (
            _verdict(workload["extra_refusals"], MAX_EXTRA_REFUSALS, lambda d: f"{d * 100:.2f} points")
            if targeted
            else "-"
        )
        rows.append(
            [
                workload["name"],
                f"{workload['quota']}, {workload['offered_per_second']:,.0f}/s offered"
                + (" while on" if " on, " in workload["pattern"] else ""),
                _calls_cell(workload),
                f"{leased['admitted']:,} / {exact['admitted']:,}",
                f"{workload['extra_refusals'] * 100:.2f}%",
                f"{leased['worst_window']['excess'] if leased['worst_window'] else '-'} / "
                f"{exact['worst_window']['excess'] if exact['worst_window'] else '-'}",
                "yes" if over == 0 else f"no, by {over}",
                calls_ok,
                extra_ok,
            ]
        )
    head = [
        "workload",
        "quota per key",
        "Redis calls per decision, leased / exact",
        "admitted, leased / exact",
        "extra refusals (leased)",
        "worst window, admitted - allowed",
        "no over-admission",
        f"≤ {MAX_CALLS_PER_DECISION} calls",
        f"≤ {MAX_EXTRA_REFUSALS:.0%} extra refusals",
    ]
    lines = [
        f"## {TITLE}",
        "",
        f"{data['processes']} processes, each with its own connection, replay the same seeded trace for "
        f"{data['seconds_per_run']:g} s through `LeasedLimiter` and through the exact `RedisLimiter` "
        f"(`{COMMAND}`); calls are the limiters' round trips, windows every [t, t + 100 ms or 1 s) of "
        "one key against burst + W × rate, and the call and refusal targets apply to the hot key at "
        "0.5x and 10x.",
        "",
        "| " + " | ".join(head) + " |",
        "|---|---|---:|---:|---:|---:|---|---|---|",
    ]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return lines


def lease_fleet_targets(data, target_class):
    """The targets as `report.py`'s `Target(what, row, clock, value, bound, shown)`: zero
    over-admission in every workload, and on the hot key at 0.5x and 10x at most 0.05 Redis calls
    per decision and at most 1% extra refusals."""
    by_name = {workload["name"]: workload for workload in data["workloads"]}
    # Over-admission as a share of what its window allows, in percentage points (a bound of 0
    # units cannot be a ratio).
    over = max(
        run["over_admission"] / run["worst_window"]["allowed"] * 100 if run["worst_window"] else 0.0
        for workload in data["workloads"]
        for run in (workload["leased"], workload["exact"])
    )
    targets = [
        target_class("no over-admission in any workload (admitted beyond a window's bound, % of the bound)",
                     "lease fleet", None, over, 0.0, f"{over:.2f}%", points=True)
    ]
    for name in TARGET_WORKLOADS:
        workload = by_name.get(name)
        if workload is None:
            continue
        calls = workload["leased"]["calls_per_decision"]
        extra = workload["extra_refusals"] * 100
        targets += [
            target_class(f"leases: at most {MAX_CALLS_PER_DECISION} Redis calls per decision ({name})",
                         "lease fleet", None, calls, MAX_CALLS_PER_DECISION, f"{calls:.4f}"),
            target_class(f"leases: at most {MAX_EXTRA_REFUSALS:.0%} extra refusals ({name})",
                         "lease fleet", None, extra, MAX_EXTRA_REFUSALS * 100, f"{extra:.2f}%", points=True),
        ]
    return targets


# The leased gateway under wrk ------------------------------------------------------------------

MIN_LEASE_RATIO = 0.9


LEASED_ALGORITHMS = {"token": "token bucket", "fixed": "fixed window (`--algorithm fixed`)"}


def tower_lease_rows(data):
    """Rows [gateway, requests/s, CPU µs per request, throughput cost, CPU per request] for
    report.py's tower table: each leased gateway against the local one of the same rounds and
    algorithm."""
    rows = []
    for algorithm, lease in (data.get("lease") or {}).items():
        rounds = lease["rounds"]
        leased = statistics.median(row["leased"] for row in rounds)
        leased_cpu = statistics.median(row["leased_cpu"] for row in rounds)
        rows.append(
            [
                f"layer on leases from Redis (`--redis URL --lease`), {LEASED_ALGORITHMS.get(algorithm, algorithm)}, "
                "against the local layer of the same algorithm",
                f"{leased:,.0f}",
                f"{leased_cpu:.2f}",
                f"{(1 - lease['ratio']) * 100:.1f}% (ratio {lease['ratio']:.3f}x)",
                f"{(lease['cpu_ratio'] - 1) * 100:+.1f}%",
            ]
        )
    return rows


def tower_lease_targets(data, target_class):
    """Leased at least 0.9x the local gateway's throughput, for each algorithm: as a cost of at
    most 10 points."""
    targets = []
    for algorithm, lease in (data.get("lease") or {}).items():
        cost = (1 - lease["ratio"]) * 100
        name = LEASED_ALGORITHMS.get(algorithm, algorithm).split(" (")[0]
        targets.append(
            target_class(
                f"the gateway on leases ({name}) serves at least {MIN_LEASE_RATIO}x the local layer's "
                f"throughput (measured {lease['ratio']:.3f}x)",
                f"tower layer, leased {name}", None, cost, (1 - MIN_LEASE_RATIO) * 100, f"{cost:.1f}% cost",
                points=True,
            )
        )
    return targets
