#!/usr/bin/env python3
"""Turns one measurement's raw output into the results file `benches/report.py` reads for its
section (JSON, in RESULTS_DIR). `benches/run` calls it after each measurement:

    python3 benches/collect.py criterion OUT.json CRITERION_DIR GROUP_PREFIX [INSTRUCTIONS.json]
    python3 benches/collect.py memory OUT.json PROBE_OUTPUT...
    python3 benches/collect.py churn OUT.json CHURN_OUTPUT
    python3 benches/collect.py redis OUT.json REDIS_SPEED_OUTPUT
    python3 benches/collect.py tower OUT.json GATEWAY_LOAD_OUTPUT

- `criterion`: every benchmark under CRITERION_DIR whose group starts with GROUP_PREFIX, as
  {group: {row: {"ns", "low", "high"}}}: criterion's median per element (per decision; per insert
  for an insert row; per decision of all threads together for a thread row) and the bounds of its
  95% confidence interval; with the instruction counts of benches/instructions.py beside them.
- `memory`: the `keyed_memory` probe's output, one file per limiter.
- `churn`: the `churn` probe's table.
- `redis`: the markdown tables `cargo bench --features redis --bench redis_speed` prints, each
  with the line that describes it.
- `tower`: the rounds and medians `benches/gateway_load.sh` prints; with its leased rows, also
  "lease": {ALGORITHM: {"rounds": [{"round", "local", "local_cpu", "leased", "leased_cpu"}],
  "ratio", "cpu_ratio"}} (leased / local: throughput, and CPU per request), ALGORITHM `token`
  and `fixed`.

Fails (exit status 1) when the output holds nothing it recognizes, so that a section whose
measurement printed something unexpected is left out of the page rather than shown empty.
"""

import json
import os
import re
import sys
from pathlib import Path


def criterion(criterion_dir, prefix, instructions=None):
    groups = {}
    for bench in sorted(Path(criterion_dir).glob("**/new/benchmark.json")):
        meta = json.loads(bench.read_text())
        if not meta["group_id"].startswith(prefix):
            continue
        estimates = json.loads((bench.parent / "estimates.json").read_text())
        elements = (meta.get("throughput") or {}).get("Elements", 1) or 1
        median = estimates["median"]
        interval = median["confidence_interval"]
        row = meta["function_id"] + (("/" + meta["value_str"]) if meta.get("value_str") else "")
        groups.setdefault(meta["group_id"], {})[row] = {
            "ns": median["point_estimate"] / elements,
            "low": interval["lower_bound"] / elements,
            "high": interval["upper_bound"] / elements,
        }
    if not groups:
        raise ValueError(f"no criterion results for groups {prefix}* under {criterion_dir}")
    counts = {}
    if instructions and Path(instructions).exists():
        counts = json.loads(Path(instructions).read_text())["per_decision"]
    return {"cores": os.cpu_count(), "groups": groups, "instructions": counts}


def memory(*paths):
    found = {}
    for path in paths:
        text = Path(path).read_text()
        added = re.search(r"RSS after filling .*\(\+([0-9.]+) MiB\)", text)
        per_key = re.search(r"bytes per key\s+([0-9.]+)", text)
        if added and per_key:
            found[Path(path).stem.removeprefix("memory-")] = {
                "label": text.splitlines()[0].split(":")[0],
                "added_mib": float(added.group(1)),
                "bytes_per_key": float(per_key.group(1)),
            }
    if not found:
        raise ValueError(f"no memory probe output in {paths}")
    return found


def table_rows(lines):
    """The cells of a markdown table's rows, header and rule excluded."""
    rows = []
    for line in lines:
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if set("".join(cells)) <= set("-: "):
            continue
        rows.append(cells)
    return rows[1:]


def number(text):
    return float(text.replace(",", "").rstrip("x"))


def churn(path):
    text = Path(path).read_text()
    head = re.search(r"table for (\d+) keys, (\d+) new keys a round", text)
    lines = [line for line in text.splitlines() if line.startswith("|")]
    rows = [
        dict(zip(["round", "new_ns", "present_ns", "len", "active", "active_us"], map(number, cells)))
        for cells in table_rows(lines)
    ]
    if not head or not rows:
        raise ValueError(f"no churn table in {path}")
    return {"capacity": int(head.group(1)), "per_round": int(head.group(2)), "rows": rows}


def redis(path):
    """Each table of redis_speed's output, titled by the last non-table line before it."""
    tables, title, lines = [], None, []
    for line in Path(path).read_text().splitlines() + [""]:
        if line.startswith("|"):
            lines.append(line)
            continue
        if lines:
            tables.append({"title": title, "rows": redis_rows(lines)})
            lines = []
        if line.strip():
            title = line.strip()
    tables = [table for table in tables if table["rows"]]
    if not tables:
        raise ValueError(f"no table in redis_speed's output {path}")
    return {"tables": tables}


def redis_rows(lines):
    header = [cell.strip() for cell in lines[0].strip().strip("|").split("|")]
    wanted = {"operation": "operation", "tasks": "tasks", "decisions/s": "per_second", "p50 µs": "p50_us",
              "p99 µs": "p99_us", "server µs/call": "server_us"}
    if not set(wanted) <= set(header):
        return []
    rows = []
    for cells in table_rows(lines):
        row = {wanted[name]: cells[header.index(name)] for name in wanted}
        rows.append({key: (value if key == "operation" else number(value)) for key, value in row.items()})
    return rows


ROUND = re.compile(
    r"round (\d+): req/s \(gateway CPU µs/req\): no layer ([0-9.]+) \(([0-9.]+)\), layer ([0-9.]+) "
    r"\(([0-9.]+)\), layer without admitted fields ([0-9.]+) \(([0-9.]+)\)"
)
SUMMARY = re.compile(
    r"layer \(fields on (every response|refusals only)\): median throughput ratio ([0-9.]+) "
    r"\(cost (-?[0-9.]+)%\), median CPU per request ratio ([0-9.]+)"
)

LEASE_ROUND = re.compile(
    r"lease round (\d+) \((\w+)\): req/s \(gateway CPU µs/req\): local ([0-9.]+) \(([0-9.]+)\), "
    r"leased ([0-9.]+) \(([0-9.]+)\)"
)
LEASE_SUMMARY = re.compile(
    r"leased against local \((\w+)\): median throughput ratio ([0-9.]+), median CPU per request ratio ([0-9.]+)"
)


def tower_lease(text):
    """The leased rows of gateway_load.sh's output by algorithm, or None when it ran without them."""
    leases = {}
    for algorithm, ratio, cpu_ratio in LEASE_SUMMARY.findall(text):
        rounds = [
            dict(zip(["round", "local", "local_cpu", "leased", "leased_cpu"], map(float, numbers)))
            for (number, which, *rest) in LEASE_ROUND.findall(text)
            if which == algorithm
            for numbers in [[number, *rest]]
        ]
        if rounds:
            leases[algorithm] = {"rounds": rounds, "ratio": float(ratio), "cpu_ratio": float(cpu_ratio)}
    return leases or None


def tower(path):
    text = Path(path).read_text()
    rounds = [
        dict(zip(["round", "none", "none_cpu", "every", "every_cpu", "refusals", "refusals_cpu"], map(float, match)))
        for match in ROUND.findall(text)
    ]
    summaries = {
        ("every" if which == "every response" else "refusals"): {
            "ratio": float(ratio),
            "cost_percent": float(cost),
            "cpu_ratio": float(cpu),
        }
        for which, ratio, cost, cpu in SUMMARY.findall(text)
    }
    settings = re.search(r"^wrk: (.*)$", text, re.M)
    if not rounds or len(summaries) != 2:
        raise ValueError(f"no rounds or medians in gateway_load.sh's output {path}")
    lease = tower_lease(text)
    return {
        "settings": settings.group(1) if settings else None,
        "rounds": rounds,
        **summaries,
        **({"lease": lease} if lease else {}),
    }


KINDS = {"criterion": criterion, "memory": memory, "churn": churn, "redis": redis, "tower": tower}


def main(args):
    if len(args) < 3 or args[0] not in KINDS:
        print(__doc__, file=sys.stderr)
        return 2
    kind, out = args[0], Path(args[1])
    try:
        results = KINDS[kind](*args[2:])
    except (OSError, ValueError, KeyError, IndexError) as error:
        print(f"collect {kind}: {error}", file=sys.stderr)
        return 1
    out.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
