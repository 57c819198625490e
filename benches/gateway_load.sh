#!/usr/bin/env bash
# Load test of the rate-limit layer: tollgate-gateway's built-in upstream, with and without
# the layer, driven by wrk with 1,000 distinct client keys (the x-api-key header).
#
#   benches/gateway_load.sh            # 3 alternating rounds of 10 s each, then medians and ratios
#   ROUNDS=5 DURATION=20s benches/gateway_load.sh
#   LEASE=0 benches/gateway_load.sh    # without the leased rows
#
# The quota is large enough that every request is admitted: the measured path is the layer's
# most expensive one (key extraction, a keyed decision, the RateLimit fields on the response).
# On a machine with 2 or more cores the gateway (one tokio worker) and wrk run on separate
# cores (taskset), so they do not take turns on one.
#
# Leased rows (unless LEASE=0; they need redis-server): each round also runs the gateway with
# its keys' quotas in a redis-server of this script's own (free loopback port, no persistence),
# decided on leases (`--redis URL --lease`, the same keys and quota), beside the same gateway
# deciding on its local table (the same flags but the store): the ratio is leased / local, per
# round, and its median. Once for each algorithm that leases: the token bucket (beside the
# round's "layer" gateway) and the fixed window (`--algorithm fixed`, beside a local fixed
# window run in the same round).
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-10s}
CONNECTIONS=${CONNECTIONS:-32}
ROUNDS=${ROUNDS:-3}
KEYS=${KEYS:-1000}
QUOTA=${QUOTA:-1000000/s}
PORT=${PORT:-18090}
LEASE=${LEASE:-1}

if ! command -v wrk >/dev/null; then
    echo "wrk not found: installing it with apt-get" >&2
    if [ "$(id -u)" -eq 0 ]; then apt-get update && apt-get install -y wrk; else sudo apt-get update && sudo apt-get install -y wrk; fi
fi

cargo build --release -p tollgate-gateway
gateway="${CARGO_TARGET_DIR:-target}/release/tollgate-gateway"

lua=$(mktemp --suffix=.lua)
redis_pid="" redis_dir=""
cleanup() {
    rm -f "$lua"
    if [ -n "$redis_pid" ]; then kill "$redis_pid" 2>/dev/null || true; wait "$redis_pid" 2>/dev/null || true; fi
    if [ -n "$redis_dir" ]; then rm -rf "$redis_dir"; fi
}
trap cleanup EXIT
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

# A redis-server of this script's own, for the leased rows: sets redis_url.
start_redis() {
    local port
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    redis_dir=$(mktemp -d)
    redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --dir "$redis_dir" >/dev/null &
    redis_pid=$!
    for _ in $(seq 100); do
        redis-cli -p "$port" ping 2>/dev/null | grep -q PONG && break
        sleep 0.1
    done
    redis-cli -p "$port" ping | grep -q PONG || { echo "redis-server on port $port did not answer" >&2; exit 1; }
    redis_url="redis://127.0.0.1:$port/"
}

median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
echo "wrk: 1 thread, $CONNECTIONS connections, $DURATION per run, $KEYS keys; quota $QUOTA (token bucket)"
# Each round runs the three gateways back to back, so they share the machine's conditions: no
# layer, the layer as the gateway configures it by default (RateLimit fields on every response), and
# the layer as the library configures it by default (fields on refusals only). The cost is the
# median of the per-round ratios to the gateway without the layer.
limited_flags=(--key header:x-api-key --quota "$QUOTA" --capacity 100000)
ratios=() cpu_ratios=() quiet_ratios=() quiet_cpu_ratios=()
declare -A lease_ratios=() lease_cpu_ratios=()
if [ "$LEASE" != 0 ]; then
    if command -v redis-server >/dev/null && command -v redis-cli >/dev/null; then
        start_redis
        echo "leased: the same gateway with --redis $redis_url --lease (token bucket and fixed window, quota $QUOTA, $KEYS keys)"
    else
        echo "redis-server or redis-cli not found: the leased rows are left out (install redis, or LEASE=0)" >&2
        LEASE=0
    fi
fi
for round in $(seq "$ROUNDS"); do
    read -r b bc < <(measure --no-limit)
    read -r l lc < <(measure "${limited_flags[@]}")
    read -r q qc < <(measure "${limited_flags[@]}" --no-admitted-fields)
    ratios+=("$(awk -v b="$b" -v l="$l" 'BEGIN { print l / b }')")
    cpu_ratios+=("$(awk -v b="$bc" -v l="$lc" 'BEGIN { print l / b }')")
    quiet_ratios+=("$(awk -v b="$b" -v l="$q" 'BEGIN { print l / b }')")
    quiet_cpu_ratios+=("$(awk -v b="$bc" -v l="$qc" 'BEGIN { print l / b }')")
    echo "round $round: req/s (gateway CPU µs/req): no layer $b ($bc), layer $l ($lc), layer without admitted fields $q ($qc)"
    if [ "$LEASE" != 0 ]; then
        for algorithm in token fixed; do
            if [ "$algorithm" = token ]; then
                local_rps=$l local_cpu=$lc
            else
                read -r local_rps local_cpu < <(measure "${limited_flags[@]}" --algorithm fixed)
            fi
            # A fresh quota for each leased gateway: the keys' state of the last one is gone.
            redis-cli -u "$redis_url" flushall >/dev/null
            # A reply past the deadline on a busy machine is admitted (and counted on the
            # gateway's stderr), not refused: a refusal would end the run.
            read -r e ec < <(measure --key header:x-api-key --quota "$QUOTA" --algorithm "$algorithm" \
                --redis "$redis_url" --lease --when-redis-away admit)
            lease_ratios[$algorithm]+=" $(awk -v l="$local_rps" -v e="$e" 'BEGIN { print e / l }')"
            lease_cpu_ratios[$algorithm]+=" $(awk -v l="$local_cpu" -v e="$ec" 'BEGIN { print e / l }')"
            echo "lease round $round ($algorithm): req/s (gateway CPU µs/req): local $local_rps ($local_cpu), leased $e ($ec)"
        done
    fi
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
if [ "$LEASE" != 0 ]; then
    for algorithm in token fixed; do
        # shellcheck disable=SC2086 # the ratios are a space-separated list
        awk -v a="$algorithm" -v r="$(printf '%s\n' ${lease_ratios[$algorithm]} | median)" \
            -v rc="$(printf '%s\n' ${lease_cpu_ratios[$algorithm]} | median)" 'BEGIN {
            printf "leased against local (%s): median throughput ratio %.4f, median CPU per request ratio %.4f\n", a, r, rc
        }'
    done
fi
