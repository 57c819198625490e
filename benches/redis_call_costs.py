#!/usr/bin/env python3
"""Server time of one `redis.call` of each command a limiter script makes, inside a Lua script.

    python3 benches/redis_call_costs.py [ROUNDS]

Starts its own redis-server on a free loopback port (as benches/redis_log_probe.py does), fills
10,000 keys (strings of 200 bytes with a TTL, or hashes of two fields), then, per script below,
runs 50 pipelined EVALSHA calls at a time over those keys for 1.5 s and reads `usec_per_call`
from `INFO commandstats`. Each script makes one call (or none: `return 1`, the cost of EVALSHA
and the interpreter alone); the difference from `return 1` is what that call adds. Prints the
best of ROUNDS rounds (default 2).
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import redis_log_probe as probe  # noqa: E402

KEYS = 10_000
VALUE = "x" * 200

# name: (key kind, script)
SCRIPTS = {
    "return 1": ("string", "return 1"),
    "TIME": ("string", "local t = redis.call('TIME') return 1"),
    "GET (200 bytes)": ("string", "local v = redis.call('GET', KEYS[1]) return 1"),
    "SETRANGE (20 bytes at 0)": ("string", "redis.call('SETRANGE', KEYS[1], '0', 'abcdefghijklmnopqrst') return 1"),
    "SET ... KEEPTTL (52 bytes)": ("string", "redis.call('SET', KEYS[1], string.rep('a', 52), 'KEEPTTL') return 1"),
    "PSETEX (52 bytes)": ("string", "redis.call('PSETEX', KEYS[1], '60000', string.rep('a', 52)) return 1"),
    "PEXPIRE": ("string", "redis.call('PEXPIRE', KEYS[1], '60000') return 1"),
    "EXPIRE": ("string", "redis.call('EXPIRE', KEYS[1], '3600') return 1"),
    "HMGET (2 fields)": ("hash", "local d = redis.call('HMGET', KEYS[1], 'tokens', 'last_updated') return 1"),
    "HSET (2 fields)": ("hash", "redis.call('HSET', KEYS[1], 'tokens', '9.5', 'last_updated', '1764000000') return 1"),
}


def filler(kind):
    """Fills the keys with `kind` values: the `prepare` step of `redis_log_probe.measure`."""

    def fill(conn):
        for key in range(KEYS):
            if kind == "string":
                command = probe.encode("SET", f"k{key}", VALUE, "PX", "100000")
            else:
                command = probe.encode("HSET", f"k{key}", "tokens", "10", "last_updated", "1764000000")
            conn.sock.sendall(command)
        for _ in range(KEYS):
            conn.reply()

    return fill


def request(sha, key):
    return probe.encode("EVALSHA", sha, "1", f"k{key}")


def main(args):
    rounds = int(args[0]) if args else 2
    server, port = probe.start_server()
    try:
        best = {}
        for _ in range(rounds):
            for name, (kind, source) in SCRIPTS.items():
                usec = probe.measure(port, source, request, name, seconds=1.5, keys=KEYS, prepare=filler(kind))
                best.setdefault(name, []).append(usec)
        base = min(best["return 1"])
        print(f"| script's one call | µs/call (best of {rounds}) | over `return 1` |")
        print("|---|---:|---:|")
        for name, values in best.items():
            print(f"| {name} | {min(values):.2f} | {min(values) - base:+.2f} |")
    finally:
        server.kill()
        server.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
