#!/usr/bin/env bash
# Evidence for #19: how often a paired bench and a stored-baseline bench call a real decode slowdown, and how often
# they call one that is not there, on the real llama-server (scripts/setup.sh) with SmolLM2-135M.
#
# The slowdown is injected by the delaying proxy (`gauntlet-fake-server --proxy-to URL --event-delay-us N`), not by
# a CPU quota: it adds N µs to every streamed token, N = slowdown × the server's own per-token time measured at the
# start, so the size of the slowdown is known. The proxy also rewrites the llama.cpp `timings` it forwards as that
# slower server would report them, so the slowdown shows on the server's clock too. Every profile goes through a proxy (delay 0 for "unchanged"), so both
# members of a comparison pay the proxy's own cost. One llama-server serves everything, one request at a time.
#
# Per trial, per slowdown s in GAUNTLET_DETECT_SLOWDOWNS (0 = the false-alarm case) and per size n in
# GAUNTLET_DETECT_SIZES:
#   paired:  gauntlet bench --profile slow --paired-with base --pairs n      (A and B interleaved, ABBA)
#   stored:  gauntlet bench --profile base --samples n (the baseline), then the same profile with the proxy
#            restarted at delay s, --baseline the first (one request per batch: n samples a side)
# A call is "detected" when the decode metric (paired: decode_tokens_per_second; stored: tpot_mean) is a regression.
# Each row also keeps the bench's exit code (paired: 0 = every deciding metric "no change", 4 = inconclusive), and
# for paired benches the decode period effect (first request of a pair against the second, relative).
# Writes target/detection.csv (one row per run, with the load average when it ended and the bench's own estimate of
# the per-token time's change) and prints the table;
# `scripts/bench-detection.sh table [CSV …]` prints the table of CSVs so far (a run may be stopped between rows).
#   GAUNTLET_DETECT_TRIALS=2  GAUNTLET_DETECT_SIZES="5 10 20"  GAUNTLET_DETECT_SLOWDOWNS="0 5 10 20"
#   GAUNTLET_DETECT_TOKENS=24  (max_tokens, with ignore_eos in paired mode)  GAUNTLET_DETECT_BUILD=release|debug
#   GAUNTLET_DETECT_BIN_DIR=DIR  (prebuilt gauntlet and gauntlet-fake-server: no cargo build)
#   GAUNTLET_DETECT_SERVER=PATH  (a llama-server binary; default the embedded default's xllamacpp launcher)
#   GAUNTLET_DETECT_SERVER_ARGS="-ngl 99"  (more arguments for the server, e.g. to put it on a GPU)
#   GAUNTLET_DETECT_HOLD_MS=N  (a hop that holds every other streamed answer N ms, then bursts it; where it sits is
#                               GAUNTLET_DETECT_HOP:)
#   GAUNTLET_DETECT_HOP=shared  (#30's scenario: one hop in front of the server that both members go through, each
#                               member's delaying proxy in front of it, so it holds the 1st, 3rd, … answer of the
#                               whole bench: in ABBA order the first request of every pair, whichever member)
#   GAUNTLET_DETECT_HOP=each    (the default: each member's own proxy holds every other answer of its own, so both
#                               members of pair 1 are held, neither of pair 2, … : not a first-of-pair effect)
# Decode is judged on the server's own clock (llama-server's `timings.predicted_per_second`) when both sides' every
# request carries it, as gauntlet does by default; the `clock` column says which clock decided each row.
#   GAUNTLET_DETECT_MODEL=PATH  GAUNTLET_DETECT_CSV=PATH  (default target/detection.csv)
# The server gets one thread per CPU this script may run on (`nproc`), so `taskset -c 0,1 scripts/…` is a 2-core
# machine inside a larger one: several such runs side by side are independent trials.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
table() { # CSV files (one per run side by side) → the Markdown table of detections and false alarms
python3 - "$@" <<'PY'
import csv, sys, collections
rows = [r for f in sys.argv[1:] for r in csv.DictReader(open(f))]
cells = collections.defaultdict(list)
passed = collections.defaultdict(list)
for r in rows:
    cells[(r["method"], int(r["size"]), int(r["slowdown_pct"]))].append(r["call"] == "regression")
    if int(r["slowdown_pct"]) == 0 and r.get("exit", "") != "":
        passed[(r["method"], int(r["size"]))].append(r["exit"] == "0")
sizes = sorted({int(r["size"]) for r in rows}); slows = sorted({int(r["slowdown_pct"]) for r in rows})
print("| method | pairs / samples | unchanged: exit 0 | " + " | ".join(("false alarms (0 %)" if s == 0 else f"caught at {s} %") for s in slows) + " |")
print("|---|---:|---:|" + "---:|" * len(slows))
for method in ("paired", "stored"):
    for n in sizes:
        out = []
        for s in slows:
            v = cells[(method, n, s)]
            out.append(f"{sum(v)} of {len(v)}")
        p = passed[(method, n)]
        print(f"| {method} | {n} | {sum(p)} of {len(p)} | " + " | ".join(out) + " |")
# Each bench's own estimate (a column since 2026-12-06) of how much longer a token took, the per-token time's relative
# change (paired: from its decode rate's median change; stored: TPOT's): what the injected slowdown arrived as.
est = collections.defaultdict(list)
for r in rows:
    if r.get("estimate") not in (None, "", "-"):
        est[(r["method"], int(r["slowdown_pct"]))].append(float(r["estimate"]))
if est:
    print("\nper-token time's change as each bench estimated it (median, range) per injected slowdown:")
    for (method, s), v in sorted(est.items()):
        v.sort()
        print(f"  {method} {s} %: {v[len(v) // 2]:+.1%} ({v[0]:+.1%} to {v[-1]:+.1%}, {len(v)} benches)")
periods = [float(r["period"]) for r in rows if r.get("period") not in (None, "", "-")]
if periods:
    print(f"\ndecode period effect (first request of a pair against the second): {min(periods):+.1%} to {max(periods):+.1%}")
clocks = collections.Counter(r.get("clock") or "client (before the clock column)" for r in rows)
print("\ndecode clock per run: " + ", ".join(f"{k} {v}" for k, v in sorted(clocks.items())))
hops = collections.Counter(r.get("hop") or "unrecorded" for r in rows)
print("hop (hold ms-where): " + ", ".join(f"{k} {v}" for k, v in sorted(hops.items())))
loads = [float(r["load1"]) for r in rows if r.get("load1")]
if loads:
    print(f"\n{len(rows)} runs; load average (1 min) at the end of a run: {min(loads):.1f} to {max(loads):.1f}")
PY
}
if [ "${1:-}" = table ]; then shift; if [ $# -eq 0 ]; then set -- "$repo/target/detection.csv"; fi; table "$@"; exit 0; fi
# GAUNTLET_DETECT_BUILD=debug uses the debug binaries (no release build on a busy machine).
build=${GAUNTLET_DETECT_BUILD:-release}
bin_dir=${GAUNTLET_DETECT_BIN_DIR:-}
if [ -z "$bin_dir" ]; then
  bin_dir=$repo/target/$build
  if [ "$build" = release ]; then
    cargo build --release --locked -q -p gauntlet -p gauntlet-fake-server
  else
    cargo build --locked -q -p gauntlet -p gauntlet-fake-server
  fi
fi
bin=$bin_dir/gauntlet
proxy_bin=$bin_dir/gauntlet-fake-server
home=${GAUNTLET_HOME:-$HOME/.cache/gauntlet}
model=${GAUNTLET_DETECT_MODEL:-$home/models/SmolLM2-135M-Instruct.Q4_1.gguf}
server_bin=${GAUNTLET_DETECT_SERVER:-$home/bin/xllamacpp-server}
trials=${GAUNTLET_DETECT_TRIALS:-2}
sizes=${GAUNTLET_DETECT_SIZES:-5 10 20}
slowdowns=${GAUNTLET_DETECT_SLOWDOWNS:-0 5 10 20}
tokens=${GAUNTLET_DETECT_TOKENS:-24}
work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT INT TERM

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
wait_health() { # $1 = port; 120 s at most
  for _ in $(seq 1200); do
    curl -sf "http://127.0.0.1:$1/health" > /dev/null && return 0
    sleep 0.1
  done
  echo "no server on port $1" >&2; exit 3
}

server_port=$(free_port)
# shellcheck disable=SC2086 # the extra arguments are words
"$server_bin" -m "$model" --host 127.0.0.1 --port "$server_port" -c 2048 -np 1 -t "$(nproc)" \
  ${GAUNTLET_DETECT_SERVER_ARGS:-} > "$work/server.log" 2>&1 &
pids+=($!)
wait_health "$server_port"

declare -A proxy_pid
hop=${GAUNTLET_DETECT_HOP:-each}
case $hop in each|shared) ;; *) echo "GAUNTLET_DETECT_HOP must be each or shared, not $hop" >&2; exit 2 ;; esac
hold=${GAUNTLET_DETECT_HOLD_MS:-0}
upstream=http://127.0.0.1:$server_port
if [ "$hop" = shared ] && [ "$hold" != 0 ]; then
  # The one hop both members go through, in front of the server: it counts the streams of the whole bench.
  hop_port=$(free_port)
  "$proxy_bin" --proxy-to "$upstream" --port "$hop_port" --hold-first-ms "$hold" --lifetime-s 7200 2> /dev/null &
  pids+=($!)
  wait_health "$hop_port"
  upstream=http://127.0.0.1:$hop_port
  own_hold=0
else
  own_hold=$hold
fi
echo "hop: ${hold} ms, $hop"
start_proxy() { # $1 = name, $2 = port, $3 = delay µs
  if [ -n "${proxy_pid[$1]:-}" ]; then kill "${proxy_pid[$1]}" 2>/dev/null || true; wait "${proxy_pid[$1]}" 2>/dev/null || true; fi
  "$proxy_bin" --proxy-to "$upstream" --port "$2" --event-delay-us "$3" --lifetime-s 7200 \
    --hold-first-ms "$own_hold" 2> /dev/null &
  proxy_pid[$1]=$!
  pids+=($!)
  wait_health "$2"
}
base_port=$(free_port)
slow_port=$(free_port)
printf 'id = "detect"\nversion = 1\n[[cases]]\nid = "a"\nmax_tokens = 8\nmessages = [{ role = "user", content = "Say a." }]\n' \
  > "$work/suite.toml"
for name in base slow; do
  port=$base_port; [ $name = slow ] && port=$slow_port
  printf '[profiles.%s]\nbase_url = "http://127.0.0.1:%s"\nsuite = "suite.toml"\nload_timeout = "60s"\nrequest_timeout = "120s"\n[profiles.%s.bench]\nmax_tokens = %s\nwarmups = 1\n' \
    "$name" "$port" "$name" "$tokens"
done > "$work/profiles.toml"
{ echo 'version = 1'; cat "$work/profiles.toml"; } > "$work/gauntlet.toml"
manifest=$work/gauntlet.toml

measure() { # the server's per-token time now (p50 of 5 batches through the undelayed proxy) → $tpot
  start_proxy base "$base_port" 0
  "$bin" bench --manifest "$manifest" --profile base --concurrency 1 --samples 5 --out "$work/measure" > /dev/null 2>&1 || true
  tpot=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["levels"][0]["metrics"]["tpot"]["p50"])' "$work/measure/bench.json")
  echo "server per-token time (p50 of 5 batches): $(python3 -c "print(round($tpot*1000, 2))") ms; $(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg)"
}
csv=${GAUNTLET_DETECT_CSV:-$repo/target/detection.csv}
mkdir -p "$(dirname "$csv")"
echo "trial,slowdown_pct,size,method,call,decided_pairs,mde,exit,period,load1,clock,hop,estimate" > "$csv"
decode_call() { # $1 = record, $2 = method → "call decided_pairs mde period clock estimate" (clock: server or client)
  python3 - "$1" "$2" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
word = lambda c: "server" if (c or "").startswith("server clock") else "client"
if sys.argv[2] == "paired":
    m = next((m for m in r.get("metrics", []) if m["metric"] == "decode_tokens_per_second"), None)
    pe = next((e for e in r.get("period_effects", []) if e["metric"] == "decode_tokens_per_second"), None)
    print(m["call"] if m else "none", len(r.get("pairs", [])), m.get("mde") if m else "-", pe["change"] if pe else "-",
          word(r.get("decode_clock")), 1 / (1 + m["median_change"]) - 1 if m and m.get("median_change", -1) > -1 else "-")
else:
    c = next((c for l in r.get("levels", []) for c in l.get("comparisons", []) if c["metric"] == "tpot_mean"), None)
    print(c["call"] if c else "none", "-", c.get("mde", "-") if c else "-", "-", word(c.get("clock") if c else None),
          c.get("change", "-") if c else "-")
PY
}
started=$(date +%s)
for trial in $(seq "$trials"); do
  # The delay is a share of the per-token time measured at the start of each trial, so a machine whose load changed
  # between trials still gets the slowdown it is told.
  measure
  for s in $slowdowns; do
    delay=$(python3 -c "print(round($tpot * $s / 100 * 1e6))")
    for n in $sizes; do
      start_proxy base "$base_port" 0
      start_proxy slow "$slow_port" "$delay"
      out=$work/p-$trial-$s-$n
      code=0
      "$bin" bench --manifest "$manifest" --profile slow --paired-with base --pairs "$n" --out "$out" > /dev/null 2>&1 || code=$?
      read -r call pairs mde period clock estimate < <(decode_call "$out/paired.json" paired)
      echo "$trial,$s,$n,paired,$call,$pairs,$mde,$code,$period,$(cut -d' ' -f1 /proc/loadavg),$clock,$hold-$hop,$estimate" >> "$csv"
      # Stored: the baseline through the proxy at delay 0, then the candidate through the same port at delay s.
      out=$work/s-$trial-$s-$n
      "$bin" bench --manifest "$manifest" --profile base --concurrency 1 --samples "$n" --out "$out-base" > /dev/null 2>&1 || true
      start_proxy base "$base_port" "$delay"
      code=0
      "$bin" bench --manifest "$manifest" --profile base --concurrency 1 --samples "$n" \
        --baseline "$out-base/bench.json" --out "$out" > /dev/null 2>&1 || code=$?
      read -r call pairs mde period clock estimate < <(decode_call "$out/bench.json" stored)
      echo "$trial,$s,$n,stored,$call,$pairs,$mde,$code,$period,$(cut -d' ' -f1 /proc/loadavg),$clock,$hold-$hop,$estimate" >> "$csv"
      echo "trial $trial, slowdown $s %, $n: $(tail -2 "$csv" | cut -d, -f4,5 | tr '\n' ' ') ($(( $(date +%s) - started )) s)"
    done
  done
done
table "$csv"
