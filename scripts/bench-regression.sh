#!/usr/bin/env bash
# Does `gauntlet bench` call a real slowdown on the real server, and only a real one?
#   1. a baseline bench of the native llama-server (scripts/setup.sh --native),
#   2. the same again, unchanged: must not be a regression,
#   3. the same with every core shared with busy loops (the server's command, and so its identity, unchanged):
#      a real slowdown, must be a regression.
# Prints each verdict and its comparisons; exits non-zero when a call is wrong.
#   GAUNTLET_REGRESSION_REPS=10 (measured batches per run), GAUNTLET_REGRESSION_HOGS=$(nproc) (busy loops),
#   GAUNTLET_REGRESSION_PROFILE=native
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
cargo build --release --locked -q -p gauntlet
bin=$repo/target/release/gauntlet
profile=${GAUNTLET_REGRESSION_PROFILE:-native}
reps=${GAUNTLET_REGRESSION_REPS:-10}
work=$(mktemp -d)
hogs=()
cleanup() {
  for pid in "${hogs[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT INT TERM

bench() { # $1 = folder, rest = extra arguments; prints the verdict
  local out=$work/$1; shift
  set +e
  "$bin" bench --profile "$profile" --concurrency 1 --max-tokens 32 --warmups 1 --samples "$reps" \
    --out "$out" "$@" > "$out.txt" 2>&1
  set -e
  sed -n 's/^gauntlet bench [^:]*: \([A-Z]*\).*/\1/p' "$out.txt"
}

echo "baseline: $(bench base)"
first=$(bench same --baseline "$work/base/bench.json")
echo "unchanged: $first"; grep -E '^ +c1 ' "$work/same.txt" || true
hogs_n=${GAUNTLET_REGRESSION_HOGS:-$(nproc)}
for _ in $(seq "$hogs_n"); do timeout 600 sh -c 'while :; do :; done' & hogs+=($!); done
second=$(bench slow --baseline "$work/base/bench.json")
echo "cores shared with $hogs_n busy loop(s): $second"; grep -E '^ +c1 ' "$work/slow.txt" || true
[ "$first" != REGRESSION ] && [ "$second" = REGRESSION ]
