#!/usr/bin/env bash
# gauntlet bench's peak memory at concurrency 32 (VmHWM of the gauntlet process, from /usr/bin/time -v):
#   1. against the pacer (attached): 32 streams of 64 tokens, 1 warm-up and 5 measured batches, the ordinary case;
#   2. against the scripted fake server's `--fault flood` (spawned): every one of the 32 streams is 12 MiB of
#      one-character token events, past every response cap, the worst a server can send per byte.
#
#   scripts/bench-memory.sh [--bin DIR]   (DIR holds gauntlet, gauntlet-pacer and gauntlet-fake-server;
#                                          default target/release; build: cargo build --release --workspace)
# Prints one line per case. The target is < 200 MB of gauntlet RSS at concurrency 32 (docs/src/development.md, Benchmarks).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bin=$repo/target/release
while [ $# -gt 0 ]; do
  case $1 in
    --bin) bin=$2; shift 2 ;;
    *) echo "usage: $0 [--bin DIR]" >&2; exit 2 ;;
  esac
done
bin=$(cd "$bin" && pwd)
for b in gauntlet gauntlet-pacer gauntlet-fake-server; do
  [ -x "$bin/$b" ] || { echo "bench-memory: $bin/$b is not built (cargo build --release --workspace)" >&2; exit 2; }
done
[ -x /usr/bin/time ] || { echo "bench-memory: needs /usr/bin/time (Debian package time)" >&2; exit 2; }

scratch=$(mktemp -d)
pacer=
cleanup() {
  # Only the pacer this script started, by its id.
  if [ -n "$pacer" ]; then kill "$pacer" 2>/dev/null || true; wait "$pacer" 2>/dev/null || true; fi
  [ -n "${KEEP_SCRATCH:-}" ] || rm -rf "$scratch"
}
trap cleanup EXIT

peak() { # $1 = label, rest = gauntlet arguments
  local label=$1; shift
  local rc=0
  GAUNTLET_HOME=$scratch/home GAUNTLET_STORE=$scratch/store /usr/bin/time -v -o "$scratch/time.txt" \
    "$bin/gauntlet" "$@" >"$scratch/out.txt" 2>&1 || rc=$?
  local kib
  kib=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$scratch/time.txt")
  # A bench exits 1 when a request failed (the flood's all do); anything else is shown.
  if [ "$rc" != 0 ] && [ "$rc" != 1 ]; then tail -5 "$scratch/out.txt" >&2; fi
  awk -v l="$label" -v k="$kib" -v rc="$rc" 'BEGIN { printf "%-62s peak RSS %6.1f MiB (exit %s)\n", l, k / 1024, rc }'
}

# 1. The pacer, attached.
"$bin/gauntlet-pacer" --port 0 --lifetime-s 600 >"$scratch/pacer.txt" 2>/dev/null &
pacer=$!
for _ in $(seq 100); do grep -q '^listening on' "$scratch/pacer.txt" 2>/dev/null && break; sleep 0.05; done
port=$(sed -n 's/^listening on //p' "$scratch/pacer.txt")
[ -n "$port" ] || { echo "bench-memory: the pacer did not start" >&2; exit 1; }
cat >"$scratch/pacer.toml" <<EOF
version = 1
[profiles.pacer]
base_url = "http://127.0.0.1:$port"
request_timeout = "60s"
EOF
peak "pacer, 32 streams x 64 tokens, 1+5 batches" bench --manifest "$scratch/pacer.toml" --concurrency 32 \
  --max-tokens 64 --warmups 1 --samples 5 --out "$scratch/pacer-out"

# 2. The flood, spawned.
mkdir -p "$scratch/flood/bin" "$scratch/flood/models"
ln -s "$bin/gauntlet-fake-server" "$scratch/flood/bin/fake-server"
echo "GGUF fake weights" >"$scratch/flood/models/tiny.gguf"
fport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat >"$scratch/flood/gauntlet.toml" <<EOF
version = 1
[models.tiny]
path = "models/tiny.gguf"
[servers.fake]
binary = "bin/fake-server"
[profiles.flood]
model = "tiny"
server = "fake"
port = $fport
server_arguments = ["--fault", "flood", "--lifetime-s", "300"]
request_timeout = "60s"
stop_grace = "2s"
EOF
peak "fake server flood, 32 streams x 12 MiB of 1-char events, 1+2" bench --manifest "$scratch/flood/gauntlet.toml" \
  --concurrency 32 --max-tokens 64 --warmups 1 --samples 2 --out "$scratch/flood-out"
