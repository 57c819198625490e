#!/usr/bin/env python3
"""Server time per call of the sliding log's script against a plain Lua token bucket script, on
admission-heavy loads.

    W=60000000 L=256 python3 benches/redis_log_probe.py [ROUNDS] [SCRIPT.lua ...]

Starts its own redis-server on a free loopback port (`--save "" --appendonly no`), then, per
round, runs the plain token bucket script (`PLAIN_BUCKET_SCRIPT`, read from
benches/redis_speed.rs: HMGET of the tokens and the last update, refill, HSET, EXPIRE; whole-second
client time, capacity BUCKET_LIMIT (default 10), 2 per second) and each SCRIPT (a script's body,
run after src/distributed/prologue.lua as the limiter builds it; default:
src/distributed/sliding_log.lua) for 2 s each: 50 pipelined EVALSHA calls at a time over 10,000
keys, on the server's clock, the log with window W microseconds (default 5,000,000) and limit L
(default 10), after `FLUSHALL` and a short warm-up. Prints calls per second, the share admitted
and `usec_per_call` from `INFO commandstats` (server time per call, the commands a script runs
included), and the best of the rounds. Another version of a script compares the same way, for
example `git show REV:src/distributed/sliding_log.lua > /tmp/other.lua`. With the default
capacity the plain script refuses most calls (a refusal writes its hash but sets no expiry);
`BUCKET_LIMIT=1000000000` makes it admit every call too, for a comparison of admissions alone.

    MIX=benchmark [RATE=130000] [KEYS=10000] python3 benches/redis_log_probe.py [ROUNDS] [SCRIPT.lua ...]

reproduces instead the mix of `cargo bench --features redis --bench redis_speed` at 50 tasks
(benches/redis_speed.rs; W and L are ignored): the log at 10 per 5 s with both keys the limiter
passes (`tollgate:{IP}:log2`, and `tollgate:{IP}:log` as KEYS[2]), the plain script's time
argument moving with the clock's whole seconds, and at most RATE calls per second (default
130,000, about the benchmark's rate for these two rows), so that each of the 10,000 keys is asked
as often as there: within the 2.2 s after `FLUSHALL`, 10 admissions per key then refusals, no
record leaving its window. Prints the same lines; compare `calls/s` with RATE (a slower client,
on a loaded machine, asks each key less often: then halve RATE and KEYS together, which keeps
each key's rate) and `admitted` with the benchmark's mix (about 0.3 for the log). WARMUP=6 warms
up for 6 s instead of 0.2: past the first window, in the steady state the benchmark would reach
if it ran longer, where records leave the window between admissions (admitted about 0.15).
"""

import os
import re
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def encode(*args):
    out = [b"*%d\r\n" % len(args)]
    for arg in args:
        if isinstance(arg, str):
            arg = arg.encode()
        out += [b"$%d\r\n" % len(arg), arg, b"\r\n"]
    return b"".join(out)


class Connection:
    """A minimal RESP client: enough for EVALSHA replies, INFO and errors."""

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""

    def _fill(self):
        data = self.sock.recv(1 << 20)
        if not data:
            raise EOFError("redis-server closed the connection")
        self.buf += data

    def _line(self):
        while b"\r\n" not in self.buf:
            self._fill()
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def reply(self):
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            while len(self.buf) < n + 2:
                self._fill()
            value, self.buf = self.buf[:n], self.buf[n + 2 :]
            return value
        if kind == b"*":
            return [self.reply() for _ in range(int(rest))]
        if kind == b":":
            return int(rest)
        if kind == b"-":
            raise RuntimeError(rest.decode())
        return rest.decode()

    def admitted(self, n, signed=False):
        """Reads `n` replies and counts those that admit (a packed reply whose first field is 1;
        an integer 1, or with `signed` one >= 0, as tollgate's scripts reply); a faster path
        than `reply` for 32-byte packed replies and integers, so that the client keeps up with
        the benchmark's rate."""
        count = 0
        for _ in range(n):
            buf = self.buf
            if buf[:5] == b"$32\r\n" and len(buf) >= 39:
                count += buf[5] == 1
                self.buf = buf[39:]
            elif buf[:1] == b":" and b"\r\n" in buf[:24]:
                line, self.buf = buf.split(b"\r\n", 1)
                count += line[1:2] != b"-" if signed else line == b":1"
            else:
                count += admits(self.reply(), signed)
        return count

    def call(self, *args):
        self.sock.sendall(encode(*args))
        return self.reply()


def admits(answer, signed=False):
    """Whether a reply admits: a packed reply whose first field is 1; an integer 1 (the plain
    bucket script), or with `signed` any integer >= 0 (tollgate's scripts: a refusal is negative)."""
    if isinstance(answer, bytes):
        return answer[0] == 1
    return answer >= 0 if signed else answer == 1


def plain_bucket_script():
    """The plain Lua token bucket script of benches/redis_speed.rs (`PLAIN_BUCKET_SCRIPT`)."""
    source = open(os.path.join(ROOT, "benches", "redis_speed.rs")).read()
    match = re.search(r'const PLAIN_BUCKET_SCRIPT: &str = r#"(.*?)"#;', source, re.S)
    if not match:
        raise RuntimeError("PLAIN_BUCKET_SCRIPT not found in benches/redis_speed.rs")
    return match.group(1)


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start_server():
    binary = os.environ.get("TOLLGATE_REDIS_SERVER") or shutil.which("redis-server")
    if not binary:
        raise RuntimeError("redis-server is needed (apt-get install -y redis-server)")
    port, workdir = free_port(), tempfile.mkdtemp()
    server = subprocess.Popen(
        [binary, "--port", str(port), "--save", "", "--appendonly", "no", "--dir", workdir],
        stdout=subprocess.DEVNULL,
    )
    for _ in range(200):
        try:
            if Connection(port).call("PING") == "PONG":
                return server, port
        except OSError:
            time.sleep(0.05)
    server.kill()
    raise RuntimeError("redis-server did not answer")


def measure(port, source, request, name, seconds=2.0, batch=50, keys=10_000, prepare=None, rate=None, signed=False, warmup=None):
    """Runs `source` for `seconds` (after a tenth of that to warm up), `batch` pipelined EVALSHA
    calls at a time, `request(sha, key)` for keys 0 to `keys - 1` in turn, after FLUSHALL and
    `prepare(conn)` if given (`warmup` seconds instead if given); prints and returns
    `usec_per_call`. With `rate` (calls per second),
    sends no faster than that, rebuilds the requests at each new whole second of the clock (the
    plain script's time argument), and reads replies by the faster `Connection.admitted`.
    `signed`: an integer reply admits if >= 0 (tollgate's scripts), not only if 1 (the plain
    script's)."""
    conn = Connection(port)
    conn.call("FLUSHALL")
    if prepare is not None:
        prepare(conn)
    sha = conn.call("SCRIPT", "LOAD", source).decode()
    built = int(time.time())
    requests = [request(sha, key) for key in range(keys)]

    def drive(duration):
        nonlocal built, requests
        sent = admitted = 0
        start = time.time()
        while time.time() - start < duration:
            if rate is not None:
                now = time.time()
                if int(now) != built:
                    built = int(now)
                    requests = [request(sha, key) for key in range(keys)]
                ahead = sent / rate - (now - start)
                if ahead > 0:
                    time.sleep(ahead)
            conn.sock.sendall(b"".join(requests[(sent + j) % keys] for j in range(batch)))
            if rate is not None:
                admitted += conn.admitted(batch, signed)
            else:
                for _ in range(batch):
                    admitted += admits(conn.reply(), signed)
            sent += batch
        return sent, admitted, time.time() - start

    drive(seconds / 10 if warmup is None else warmup)
    conn.call("CONFIG", "RESETSTAT")
    calls, admitted, elapsed = drive(seconds)
    stats = conn.call("INFO", "commandstats").decode()
    line = next(l for l in stats.splitlines() if l.startswith("cmdstat_evalsha:"))
    usec = float(line.split("usec_per_call=")[1].split(",")[0])
    print(
        f"{name:28} calls/s {calls / elapsed:9.0f}  admitted {admitted / calls:5.3f}  "
        f"usec_per_call {usec:.2f}",
        flush=True,
    )
    return usec


def main(args):
    rounds = int(args[0]) if args else 3
    scripts = args[1:] or [os.path.join(ROOT, "src", "distributed", "sliding_log.lua")]
    prologue = open(os.path.join(ROOT, "src", "distributed", "prologue.lua")).read()
    benchmark = os.environ.get("MIX") == "benchmark"
    # The benchmark's mix: its quota (10/5s), its two keys per call, its rate.
    window = 5_000_000 if benchmark else int(os.environ.get("W", "5000000"))
    limit = 10 if benchmark else int(os.environ.get("L", "10"))
    rate = float(os.environ.get("RATE", "130000")) if benchmark else None
    keys = int(os.environ.get("KEYS", "10000")) if benchmark else 10_000
    warmup = float(os.environ["WARMUP"]) if benchmark and "WARMUP" in os.environ else None
    bucket_limit = os.environ.get("BUCKET_LIMIT", "10")
    packed = struct.pack("<qqq", 1, window, limit)  # cost 1, w, limit; the server's clock
    bucket = plain_bucket_script()

    def bucket_request(sha, key):
        now = str(int(time.time()))
        return encode("EVALSHA", sha, "1", f"bucket:10.0.{key // 256}.{key % 256}", bucket_limit, now, "2")

    def log_request(sha, key):
        if benchmark:
            # As RedisLimiter calls it: the log's key and the other encoding's (KEYS[2]).
            name = f"tollgate:{{10.0.{key // 256}.{key % 256}}}"
            return encode("EVALSHA", sha, "2", f"{name}:log2", f"{name}:log", packed)
        return encode("EVALSHA", sha, "1", f"tollgate:{{10.0.{key // 256}.{key % 256}}}:probe", packed)

    server, port = start_server()
    try:
        best = {}
        for _ in range(rounds):
            best.setdefault("plain Lua token bucket", []).append(measure(port, bucket, bucket_request, "plain Lua token bucket", keys=keys, rate=rate, warmup=warmup))
            for path in scripts:
                name = os.path.basename(path)
                source = prologue + open(path).read()
                best.setdefault(name, []).append(measure(port, source, log_request, name, keys=keys, rate=rate, signed=True, warmup=warmup))
        mix = f"the benchmark's mix, {keys} keys at {rate:.0f} calls/s" if benchmark else "one key per call"
        print(f"W={window} us, L={limit}, {mix}; best usec_per_call of {rounds} rounds:")
        for name, values in best.items():
            print(f"  {name:28} {min(values):.2f}")
    finally:
        server.kill()
        server.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
