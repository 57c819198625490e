#!/usr/bin/env python3
"""Instructions per decision of every single-threaded scenario, counted by callgrind.

    python3 benches/instructions.py PATH/TO/instructions OUT.json [--decisions N] [PREFIX ...]

Runs `instructions list`, then, for each scenario (each that starts with one of the PREFIXes, if
any are given, e.g. `direct/` or `keyed/`), `valgrind --tool=callgrind` with collection
switched on only inside the benchmarks' timed loops (`tollgate_peers::timing::decide_*`), and
divides the instructions collected (Ir) by the number of decisions (N, default 100,000; an insert
scenario inserts 1,000,000 fresh keys into a table built for that many, as the timed insert rows
do). Writes
{scenario: instructions per decision} to OUT.json. Instruction counts do not drift with the noise
of a shared machine; they do not see cache misses, branch mispredictions or contention either.
"""

import json
import os
import subprocess
import sys
import tempfile

# Keys an insert scenario puts into an empty table built for them, as the timed insert rows do.
INSERT_FILL = 1_000_000


def count(binary, scenario, decisions, workdir):
    out = os.path.join(workdir, "callgrind.out")
    subprocess.run(
        [
            "valgrind",
            "--tool=callgrind",
            f"--callgrind-out-file={out}",
            "--collect-atstart=no",
            "--toggle-collect=tollgate_peers::timing::decide_*",
            binary,
            scenario,
            str(decisions),
        ],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    with open(out) as profile:
        for line in profile:
            if line.startswith("totals:"):
                return int(line.split()[1]) / decisions
    raise RuntimeError(f"no totals line in callgrind's output for {scenario}")


def main(args):
    if len(args) < 2:
        print(__doc__)
        return 2
    binary, out_path, rest = args[0], args[1], args[2:]
    decisions = 100_000
    if rest[:1] == ["--decisions"]:
        decisions, rest = int(rest[1]), rest[2:]
    listed = subprocess.run([binary, "list"], check=True, capture_output=True, text=True).stdout.split()
    scenarios = [name for name in listed if not rest or name.startswith(tuple(rest))]
    results = {}
    with tempfile.TemporaryDirectory() as workdir:
        for scenario in scenarios:
            # An insert scenario fills a table built for that many keys: the fill of the timed
            # insert rows, 1,000,000, however many decisions the others count.
            n = INSERT_FILL if "/insert/" in scenario else decisions
            results[scenario] = count(binary, scenario, n, workdir)
            print(f"{scenario:55} {results[scenario]:8.1f} instructions per decision", flush=True)
    with open(out_path, "w") as out:
        json.dump({"decisions": decisions, "per_decision": results}, out, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
