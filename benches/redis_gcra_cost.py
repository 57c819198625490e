#!/usr/bin/env python3
"""Server time of one `gcra.lua` decision, this tree's script against another revision's.

    python3 benches/redis_gcra_cost.py REV [ROUNDS]

Starts its own redis-server on a free loopback port (benches/redis_log_probe.py), and per round
(the order alternating) runs each script for 1 s, 50 pipelined EVALSHA calls at a time over
10,000 keys, reading `usec_per_call` from `INFO commandstats`: REV's script and this tree's for
a bucket whose interval is whole microseconds (10000/s burst 10: the 24-byte argument, 8-byte
state), and this tree's for one whose interval is not (30000/s burst 10: T = 33 1/3 µs, the
48-byte argument, 24-byte state). Prints the best and the median of ROUNDS (default 10).
"""

import os
import statistics
import struct
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import redis_log_probe as probe  # noqa: E402

PARTS = ["prologue.lua", "gcra_state.lua", "gcra.lua"]


def source(rev):
    """The script as algorithm.rs builds it, from `rev` (None: this tree); a part the revision
    lacks (gcra_state.lua before it existed) is left out."""
    text = ""
    for part in PARTS:
        path = os.path.join("src", "distributed", part)
        if rev is None:
            text += open(os.path.join(ROOT, path)).read()
        else:
            shown = subprocess.run(["git", "-C", ROOT, "show", f"{rev}:{path}"], capture_output=True, text=True)
            text += shown.stdout if shown.returncode == 0 else ""
    return text


def request(argument):
    return lambda sha, key: probe.encode("EVALSHA", sha, "1", f"k{key}", argument)


def main(args):
    rev = args[0]
    rounds = int(args[1]) if len(args) > 1 else 10
    whole = struct.pack("<qqq", 1, 100, 1000)
    fine = struct.pack("<qqqqqq", 1, 33, 333, 1, 1, 3)
    runs = [
        (f"{rev}, T whole µs", source(rev), whole),
        ("this tree, T whole µs", source(None), whole),
        ("this tree, T = 100/3 µs", source(None), fine),
    ]
    server, port = probe.start_server()
    results = {name: [] for name, _, _ in runs}
    try:
        for number in range(rounds):
            for name, text, argument in runs if number % 2 == 0 else runs[::-1]:
                usec = probe.measure(port, text, request(argument), name, seconds=1.0, signed=True)
                results[name].append(usec)
    finally:
        server.kill()
        server.wait()
    print(f"| script | best µs/call | median µs/call (of {rounds}) |")
    print("|---|---:|---:|")
    for name, values in results.items():
        print(f"| {name} | {min(values):.2f} | {statistics.median(values):.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
