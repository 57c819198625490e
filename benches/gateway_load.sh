#!/usr/bin/env bash
# Load test of the rate-limit layer: tollgate-gateway's built-in upstream, with and without
# the layer, driven by wrk with 1,000 distinct client keys (the x-api-key header).
#
#   benches/gateway_load.sh            # 3 alternating rounds of 10 s each, then medians and ratios
#   ROUNDS=5 DURATION=20s benches/gateway_load.sh
#
# The quota is large enough that every request is admitted: the measured path is the layer's
# most expensive one (key extraction, a keyed decision, the RateLimit fields on the response).
# On a machine with 2 or more cores the gateway (one tokio worker) and wrk run on separate
# cores (taskset), so they do not take turns on one.
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-10s}
CONNECTIONS=${CONNECTIONS:-32}
ROUNDS=${ROUNDS:-3}
KEYS=${KEYS:-1000}
QUOTA=${QUOTA:-1000000/s}
PORT=${PORT:-18090}

if ! command -v wrk >/dev/null; then
    echo "wrk not found: installing it with apt-get" >&2
    if [ "$(id -u)" -eq 0 ]; then apt-get update && apt-get install -y wrk; else sudo apt-get update && sudo apt-get install -y wrk; fi
fi

cargo build --release -p tollgate-gateway
gateway="${CARGO_TARGET_DIR:-target}/release/tollgate-gateway"

lua=$(mktemp --suffix=.lua)
trap 'rm -f "$lua"' EXIT
cat >"$lua" <<LUA
-- Each request carries one of $KEYS API keys, in turn (formatted once, up front: formatting
-- each request in Lua would make wrk, not the gateway, the bottleneck).
local requests = {}
local n = 0
init = function(args)
    for i = 0, $KEYS - 1 do
        requests[i] = wrk.format(nil, nil, { ["x-api-key"] = "key-" .. i })
    end
end
request = function()
    n = (n + 1) % $KEYS
    return requests[n]
end
LUA

pin_gateway=() pin_wrk=()
if command -v taskset >/dev/null && [ "$(nproc)" -ge 2 ]; then
    pin_gateway=(taskset -c 0) pin_wrk=(taskset -c 1)
fi

# Runs wrk against the gateway started with "$@"; prints requests per second.
measure() {
    TOKIO_WORKER_THREADS=1 "${pin_gateway[@]}" "$gateway" --listen "127.0.0.1:$PORT" "$@" >/dev/null &
    local pid=$!
    for _ in $(seq 100); do
        curl -s -o /dev/null -H 'x-api-key: warm-up' "http://127.0.0.1:$PORT/" && break
        sleep 0.1
    done
    local out before after
    before=$(cpu_ticks "$pid")
    out=$("${pin_wrk[@]}" wrk -t1 -c"$CONNECTIONS" -d"$DURATION" -s "$lua" "http://127.0.0.1:$PORT/")
    after=$(cpu_ticks "$pid")
    kill "$pid"
    wait "$pid" 2>/dev/null || true
    if grep -q "Non-2xx" <<<"$out"; then
        echo "unexpected refusals or errors:" >&2
        echo "$out" >&2
        exit 1
    fi
    # Requests per second, and the gateway's CPU time (user + system) per request in µs.
    awk -v ticks=$((after - before)) -v hz="$(getconf CLK_TCK)" '
        / requests in / { requests = $1 }
        /Requests\/sec/ { rps = $2 }
        END { printf "%s %.2f\n", rps, ticks / hz * 1e6 / requests }' <<<"$out"
}

# User + system CPU time of a process so far, in clock ticks.
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }

median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
echo "wrk: 1 thread, $CONNECTIONS connections, $DURATION per run, $KEYS keys; quota $QUOTA (token bucket)"
# Each round runs the three gateways back to back, so they share the machine's conditions: no
# layer, the layer as the gateway configures it by default (RateLimit fields on every response), and
# the layer as the library configures it by default (fields on refusals only). The cost is the
# median of the per-round ratios to the gateway without the layer.
limited_flags=(--key header:x-api-key --quota "$QUOTA" --capacity 100000)
ratios=() cpu_ratios=() quiet_ratios=() quiet_cpu_ratios=()
for round in $(seq "$ROUNDS"); do
    read -r b bc < <(measure --no-limit)
    read -r l lc < <(measure "${limited_flags[@]}")
    read -r q qc < <(measure "${limited_flags[@]}" --no-admitted-fields)
    ratios+=("$(awk -v b="$b" -v l="$l" 'BEGIN { print l / b }')")
    cpu_ratios+=("$(awk -v b="$bc" -v l="$lc" 'BEGIN { print l / b }')")
    quiet_ratios+=("$(awk -v b="$b" -v l="$q" 'BEGIN { print l / b }')")
    quiet_cpu_ratios+=("$(awk -v b="$bc" -v l="$qc" 'BEGIN { print l / b }')")
    echo "round $round: req/s (gateway CPU µs/req): no layer $b ($bc), layer $l ($lc), layer without admitted fields $q ($qc)"
done
report() {
    local r rc
    r=$(printf '%s\n' "${!2}" | median)
    rc=$(printf '%s\n' "${!3}" | median)
    awk -v name="$1" -v r="$r" -v rc="$rc" 'BEGIN {
        printf "%s: median throughput ratio %.4f (cost %.2f%%), median CPU per request ratio %.4f (+%.2f%%)\n", name, r, (1 - r) * 100, rc, (rc - 1) * 100
    }'
}
report "layer (fields on every response)" 'ratios[@]' 'cpu_ratios[@]'
report "layer (fields on refusals only)" 'quiet_ratios[@]' 'quiet_cpu_ratios[@]'
