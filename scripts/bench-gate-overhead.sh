#!/usr/bin/env bash
# gauntlet's fixed cost per gate: runs `gauntlet run` N times on a profile and prints, per run and as
# median / max, the external wall time, the load (spawn → ready), the requests' own seconds (Σ case seconds) and
# what is left: the fixed cost = wall − load − Σ case seconds (identity, GPU wait, bracket, spawn, stop, kernel
# grace, checks, writing the outputs). Of that it also shows the server's own exit (stop request → reaped exit,
# from the run's events) and gauntlet's own share (fixed − that). Writes a JSON summary.
#
#   scripts/bench-gate-overhead.sh [-n N] [--profile P] [--manifest FILE] [--bin GAUNTLET] [--json OUT]
#                                  [--fake FAKE_SERVER [--device nvidia:N]]
#
# Defaults: 10 runs of the embedded `default` profile with target/release/gauntlet, summary in
# gauntlet-out/gate-overhead.json. Baselines go to a scratch store, so runs do not compare with each other.
# --fake runs a scratch manifest around the scripted fake server (the embedded suite, instant answers) instead:
# where a real model is slow (a busy CPU), its load and requests take almost no time and the fixed cost shows.
# --device binds that profile to a GPU, so the GPU's own costs (NVML, the busy wait) are in the fixed cost.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
runs=10
profile=default
manifest=
bin=$repo/target/release/gauntlet
json=gauntlet-out/gate-overhead.json
fake=
device=cpu
while [ $# -gt 0 ]; do
  case $1 in
    -n) runs=$2; shift 2 ;;
    --profile) profile=$2; shift 2 ;;
    --manifest) manifest=$2; shift 2 ;;
    --bin) bin=$2; shift 2 ;;
    --json) json=$2; shift 2 ;;
    --fake) fake=$2; shift 2 ;;
    --device) device=$2; shift 2 ;;
    *) echo "usage: $0 [-n N] [--profile P] [--manifest FILE] [--bin GAUNTLET] [--json OUT]" >&2; exit 2 ;;
  esac
done
[ -x "$bin" ] || { echo "bench-gate-overhead: $bin is not built (cargo build --release -p gauntlet)" >&2; exit 2; }
case $runs in ''|*[!0-9]*|0) echo "bench-gate-overhead: -n must be a positive integer" >&2; exit 2 ;; esac

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
export GAUNTLET_STORE=$scratch/store
if [ -n "$fake" ]; then
  [ -x "$fake" ] || { echo "bench-gate-overhead: --fake $fake is not executable" >&2; exit 2; }
  root=$scratch/fake
  mkdir -p "$root/bin" "$root/models"
  ln -s "$(cd "$(dirname "$fake")" && pwd)/$(basename "$fake")" "$root/bin/fake-server"
  printf 'GGUF fake weights' >"$root/models/tiny.gguf"
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  manifest=$root/gauntlet.toml
  profile=fake
  cat >"$manifest" <<TOML
version = 1
[models.tiny]
path = "models/tiny.gguf"
[servers.fake]
binary = "bin/fake-server"
[profiles.fake]
model = "tiny"
server = "fake"
port = $port
server_arguments = ["--lifetime-s", "120"]
load_timeout = "20s"
request_timeout = "10s"
device = "$device"
TOML
fi
args=(run --profile "$profile")
[ -n "$manifest" ] && args+=(--manifest "$manifest")

for i in $(seq 1 "$runs"); do
  out=$scratch/run-$i
  start=$(date +%s.%N)
  code=0
  "$bin" "${args[@]}" --out "$out" >"$scratch/stdout-$i" 2>"$scratch/stderr-$i" || code=$?
  end=$(date +%s.%N)
  echo "$i $start $end $code $out" >>"$scratch/times"
  if ! [ -f "$out/run.json" ]; then
    echo "bench-gate-overhead: run $i wrote no run.json (exit $code):" >&2
    tail -5 "$scratch/stderr-$i" >&2
    exit 1
  fi
done

mkdir -p "$(dirname "$json")"
python3 - "$scratch/times" "$json" "$profile" "$bin" <<'PY'
import json, statistics, sys

times, out, profile, binary = sys.argv[1:5]
rows = []
for line in open(times):
    i, start, end, code, run_dir = line.split()
    rec = json.load(open(f"{run_dir}/run.json"))
    wall = float(end) - float(start)
    load = rec["server"].get("load_seconds") or 0.0
    cases = sum(c.get("seconds") or 0.0 for c in rec["cases"])
    # The server's own exit: from the stop request (just after the suite, or after the GPU check) to its reaped
    # exit (`stopped`). Part of the fixed cost as defined; shown apart because it is the server's time, not ours.
    at = {e["kind"]: e["at"] for e in rec["server"].get("events", [])}
    asked = at.get("gpu-use-checked", at.get("suite-finished"))
    stop = (at["stopped"] - asked) if asked is not None and "stopped" in at else 0.0
    fixed = wall - load - cases
    rows.append({"run": int(i), "exit": int(code), "wall_seconds": wall, "load_seconds": load,
                 "cases_seconds": cases, "fixed_seconds": fixed, "server_stop_seconds": stop,
                 "own_seconds": fixed - stop,
                 "recorded_wall_seconds": rec["wall_seconds"], "verdict": rec["verdict"]})
cols = ("wall_seconds", "load_seconds", "cases_seconds", "fixed_seconds", "server_stop_seconds", "own_seconds")
print(f"{'run':>3} {'exit':>4} {'wall s':>8} {'load s':>8} {'Σ cases s':>10} {'fixed s':>8} {'stop s':>7} {'own s':>7}")
for r in rows:
    print(f"{r['run']:>3} {r['exit']:>4} " + " ".join(f"{r[k]:>{w}.3f}" for k, w in zip(cols, (8, 8, 10, 8, 7, 7))))
summary = {}
for key in cols:
    values = [r[key] for r in rows]
    summary[key] = {"median": statistics.median(values), "max": max(values)}
for name in ("median", "max"):
    print(f"{name:>8} " + " ".join(f"{summary[k][name]:>{w}.3f}" for k, w in zip(cols, (8, 8, 10, 8, 7, 7))))
json.dump({"profile": profile, "binary": binary, "runs": rows, "summary": summary}, open(out, "w"), indent=2)
print(f"summary: {out}")
PY
