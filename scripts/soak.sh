#!/usr/bin/env bash
# Soak: ONE long-lived gauntlet process working against the real embedded-default server (llama.cpp +
# SmolLM2-135M) for an hour, its resident memory and open file descriptors sampled every 10 s into a CSV, then a
# verdict: flat within 5 % (the median of the first 10-minute window after the warm-up against the median of the
# last one) for its anonymous resident memory (RssAnon: what a leak grows; the file-backed part of VmRSS, the
# binary's own pages, comes and goes with the page cache on a busy machine) and its open descriptors.
#
#   scripts/soak.sh [--minutes 60] [--warmup 5] [--window 10] [--every 10] [--quota 50] [--bin GAUNTLET]
#                   [--out DIR] [--concurrency 2] [--max-tokens 32] [--port 18590] [--manifest FILE]
#
# The process is `gauntlet bench` with one concurrency and more measured batches than the hour can hold: a bench
# is the one command that repeats the same work (connections, streamed answers, SSE parsing, per-request records,
# metrics) in one process for as long as asked; a gate is one process per run, and a qualification's stages each
# do different work, so neither would show a slow leak as a trend. At the end of the hour the bench is interrupted
# (SIGINT, the Ctrl-C path: gauntlet writes what it measured, stops its server group and exits 130) and the
# script checks that the server is gone too. The bench spills every batch and request to its requests.jsonl and
# allocates its numbers' bounds before the first batch (each distribution's 256 exact values and its buckets, 512
# samples per compared metric: bench/summary.rs, bench/samples.rs), so nothing it holds should grow with the hour:
# a leak of connections, buffers or descriptors would show as a trend.
# The binary allocates with jemalloc (crates/gauntlet/src/allocator.rs): under glibc's malloc the fragmentation of its
# per-thread arenas alone grew the resident memory by 6 to 8 % an hour (docs/validation/2026-12-04-memory-and-soak.md).
#
# The server runs under a cgroup-v1 CPU quota (default 50 % of one core) so that it does not starve other work
# on the machine: the script moves it into /sys/fs/cgroup/cpu/gauntlet-soak-PID as soon as gauntlet spawned it.
# `--manifest FILE` benches that manifest's (default) profile instead of the embedded default: e.g. a profile attached
# to `gauntlet-pacer`, whose fast, steady answers put thousands of requests through the bench in minutes.
# Output: DIR/samples.csv, DIR/bench/ (the bench's folder), DIR/verdict.txt; DIR defaults to
# /work/notes/soak when that exists, else gauntlet-out/soak.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
minutes=60
warmup=5
window=10
every=10
quota=50
concurrency=2
max_tokens=32
port=18590
bin=$repo/target/release/gauntlet
out=
manifest=
while [ $# -gt 0 ]; do
  case $1 in
    --minutes) minutes=$2; shift 2 ;;
    --warmup) warmup=$2; shift 2 ;;
    --window) window=$2; shift 2 ;;
    --every) every=$2; shift 2 ;;
    --quota) quota=$2; shift 2 ;;
    --concurrency) concurrency=$2; shift 2 ;;
    --max-tokens) max_tokens=$2; shift 2 ;;
    --port) port=$2; shift 2 ;;
    --bin) bin=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --manifest) manifest=$2; shift 2 ;;
    *) echo "usage: $0 [--minutes N] [--warmup N] [--window N] [--every S] [--quota PCT] [--bin G] [--out DIR] [--manifest F]" >&2
       exit 2 ;;
  esac
done
for n in "$minutes" "$warmup" "$window" "$every" "$quota" "$concurrency" "$max_tokens" "$port"; do
  case $n in ''|*[!0-9]*|0) echo "soak: every number must be a positive integer (got '$n')" >&2; exit 2 ;; esac
done
if [ $((warmup + 2 * window)) -gt "$minutes" ]; then
  echo "soak: --minutes must hold the warm-up and two windows" >&2; exit 2
fi
[ -x "$bin" ] || { echo "soak: $bin is not built (cargo build --release -p gauntlet)" >&2; exit 2; }
if [ -z "$out" ]; then
  if [ -d /work/notes ]; then out=/work/notes/soak; else out=$repo/gauntlet-out/soak; fi
fi
mkdir -p "$out"
rm -rf "$out/bench"
csv=$out/samples.csv

cg=
if [ -d /sys/fs/cgroup/cpu ] && [ -w /sys/fs/cgroup/cpu ]; then
  cg=/sys/fs/cgroup/cpu/gauntlet-soak-$$
  mkdir -p "$cg"
  echo 100000 >"$cg/cpu.cfs_period_us"
  echo $((quota * 1000)) >"$cg/cpu.cfs_quota_us"
else
  echo "soak: no writable cgroup-v1 cpu controller: the server runs without a quota" >&2
fi

gpid=
# shellcheck disable=SC2317  # invoked by the trap
cleanup() {
  # Only the process this script started, by its id; its own signal forwarding stops its server group.
  if [ -n "$gpid" ] && kill -0 "$gpid" 2>/dev/null; then
    kill -INT "$gpid" 2>/dev/null || true
    for _ in $(seq 300); do kill -0 "$gpid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$gpid" 2>/dev/null || true
  fi
  if [ -n "$cg" ] && [ -d "$cg" ]; then
    for _ in $(seq 100); do rmdir "$cg" 2>/dev/null && break; sleep 0.1; done
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# More batches than the hour holds (the most a bench takes: about 0.4 s per batch would be needed to finish);
# the hour ends the bench.
target=(--port "$port")
[ -z "$manifest" ] || target=(--manifest "$manifest")
"$bin" bench --concurrency "$concurrency" --max-tokens "$max_tokens" --warmups 1 --samples 10000 \
  "${target[@]}" --out "$out/bench" >"$out/gauntlet.stdout" 2>"$out/gauntlet.stderr" &
gpid=$!
echo "soak: gauntlet pid $gpid, $minutes min, samples every ${every}s into $csv" >&2

echo "t_s,gauntlet_rss_kib,gauntlet_anon_kib,gauntlet_hwm_kib,gauntlet_fds,gauntlet_threads,server_pid,server_rss_kib" >"$csv"
start=$(date +%s)
end=$((start + minutes * 60))
server=
while kill -0 "$gpid" 2>/dev/null && [ "$(date +%s)" -lt "$end" ]; do
  if [ -z "$server" ]; then
    server=$(ps -o pid= --ppid "$gpid" 2>/dev/null | head -n1 | tr -d ' ' || true)
    if [ -n "$server" ] && [ -n "$cg" ]; then
      echo "$server" >"$cg/cgroup.procs" 2>/dev/null || echo "soak: cannot move server $server into $cg" >&2
    fi
  fi
  now=$(date +%s)
  rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$gpid/status" 2>/dev/null || true)
  anon=$(awk '/^RssAnon:/ {print $2}' "/proc/$gpid/status" 2>/dev/null || true)
  hwm=$(awk '/^VmHWM:/ {print $2}' "/proc/$gpid/status" 2>/dev/null || true)
  threads=$(awk '/^Threads:/ {print $2}' "/proc/$gpid/status" 2>/dev/null || true)
  fds=$(find "/proc/$gpid/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l)
  srss=
  [ -n "$server" ] && srss=$(awk '/^VmRSS:/ {print $2}' "/proc/$server/status" 2>/dev/null || true)
  [ -n "$rss" ] && echo "$((now - start)),$rss,$anon,$hwm,$fds,$threads,$server,$srss" >>"$csv"
  sleep "$every"
done

ended_early=0
if kill -0 "$gpid" 2>/dev/null; then
  kill -INT "$gpid"
  for _ in $(seq 600); do kill -0 "$gpid" 2>/dev/null || break; sleep 0.1; done
  # Should SIGINT not end it (a background job of a script starts with SIGINT ignored, and a bench only handles
  # it once it measures), SIGTERM does (exit 143).
  if kill -0 "$gpid" 2>/dev/null; then
    kill -TERM "$gpid"
    for _ in $(seq 100); do kill -0 "$gpid" 2>/dev/null || break; sleep 0.1; done
  fi
else
  ended_early=1
fi
rc=0
wait "$gpid" 2>/dev/null || rc=$?
gpid=
survivor=no
if [ -n "$server" ] && kill -0 "$server" 2>/dev/null && [ "$(ps -o stat= -p "$server" | cut -c1)" != Z ]; then
  survivor=yes
fi

status=0
python3 - "$csv" "$warmup" "$window" "$minutes" "$ended_early" "$rc" "$survivor" >"$out/verdict.txt" <<'EOF' || status=$?
import csv, statistics, sys
path, warmup, window, minutes, early, rc, survivor = sys.argv[1], *map(int, sys.argv[2:7]), sys.argv[7]
rows = [r for r in csv.DictReader(open(path))]
def win(lo, hi, key):
    return [int(r[key]) for r in rows if lo * 60 <= int(r["t_s"]) < hi * 60 and r[key]]
lines, flat = [], True
last_end = max(int(r["t_s"]) for r in rows) / 60 if rows else 0
for key, what in (("gauntlet_anon_kib", "anonymous RSS KiB"), ("gauntlet_fds", "open fds")):
    a = win(warmup, warmup + window, key)
    b = win(last_end - window, last_end + 1, key)
    if not a or not b:
        lines.append(f"{what}: not enough samples"); flat = False; continue
    ma, mb = statistics.median(a), statistics.median(b)
    change = (mb - ma) / ma * 100 if ma else float("inf")
    ok = abs(change) <= 5
    flat &= ok
    lines.append(f"{what}: first window median {ma:g} ({len(a)} samples), last window median {mb:g} "
                 f"({len(b)} samples), change {change:+.2f} % -> {'flat' if ok else 'NOT flat'}")
hwm = max((int(r["gauntlet_hwm_kib"]) for r in rows if r["gauntlet_hwm_kib"]), default=0)
rss = [int(r["gauntlet_rss_kib"]) for r in rows if r["gauntlet_rss_kib"]]
lines.append(f"peak RSS (VmHWM) {hwm} KiB; RSS (with file pages) from {min(rss, default=0)} to {max(rss, default=0)} "
             f"KiB; {len(rows)} samples over {last_end:.1f} min")
if early:
    lines.append(f"gauntlet ended before the hour (exit {rc}): the soak is incomplete"); flat = False
else:
    lines.append(f"gauntlet interrupted at the end of the soak, exit {rc} (130 expected; 143 after SIGTERM)")
lines.append(f"server left running after gauntlet exited: {survivor}")
if survivor == "yes":
    flat = False
lines.append("verdict: " + ("flat within 5 %" if flat else "NOT flat within 5 % (or incomplete)"))
print("\n".join(lines))
sys.exit(0 if flat else 1)
EOF
cat "$out/verdict.txt"
exit $status
