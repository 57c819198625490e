#!/usr/bin/env python3
"""Prints criterion's medians as Markdown tables, with ratios to a baseline row measured in the
same run.

    python3 benches/summarize.py GROUP[=BASELINE] ...

GROUP is a criterion group id (for example `direct/precise`); BASELINE is the full id of the row
the others are divided by, relative to the group (for example `floor/clock_read+load+cas`). Reads
target/criterion/**/new/{benchmark,estimates}.json: run the benchmarks first.
"""

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "target" / "criterion"


def rows(group):
    found = {}
    for bench in ROOT.glob("**/new/benchmark.json"):
        meta = json.loads(bench.read_text())
        if meta["group_id"] != group:
            continue
        estimates = json.loads((bench.parent / "estimates.json").read_text())
        name = meta["function_id"] + (("/" + meta["value_str"]) if meta.get("value_str") else "")
        found[name] = estimates["median"]["point_estimate"]
    return found


def main(args):
    if not args:
        print(__doc__)
        return 2
    for arg in args:
        group, _, baseline = arg.partition("=")
        medians = rows(group)
        if not medians:
            print(f"no results for group {group!r} under {ROOT}", file=sys.stderr)
            return 1
        print(f"\n**{group}**\n")
        if baseline:
            print(f"| benchmark | median ns | ratio to `{baseline}` |")
            print("|---|---:|---:|")
        else:
            print("| benchmark | median ns |")
            print("|---|---:|")
        base = medians.get(baseline)
        for name in sorted(medians):
            ns = medians[name]
            if baseline and base:
                print(f"| {name} | {ns:.2f} | {ns / base:.2f}x |")
            else:
                print(f"| {name} | {ns:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
