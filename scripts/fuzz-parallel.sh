#!/bin/bash
# Fuzz every target on many cores (used on the H200 machine, which has 16). `start [SECONDS]` launches detached
# libFuzzer processes (each its own seed and output folder, reading the repo's corpus) and waits SECONDS; `collect
# [SECONDS]` waits (bounded) for them to end and sums the executions per target from libFuzzer's final stats.
# The binaries come from $FUZZ_BIN (default .gpu-f/, which the device tool carries): `scripts/fuzz.sh build`, then
# `strip -o` each of $GAUNTLET_HOME/fuzz-target/x86_64-unknown-linux-gnu/release/<target>. Results go to $OUT.
# FUZZ_PLAN names the processes per target ("TARGET:N …"; by default every target, weighted by its speed) and
# FUZZ_SECONDS how long each runs (default 1050).
set -u
F=/tmp/fz
T=${FUZZ_SECONDS:-1050}
PLAN=${FUZZ_PLAN:-chat_completion:1 sse_stream:1 records:1 manifest:2 kernel_log:3 store:4 bundle_verify:2 report_run:1 metrics_values:1 lm_eval:1 save_result:1 field_inputs:1 aiperf_export:1}
case $1 in
start)
  rm -rf "$F"; mkdir -p "$F/bin" "$F/new" "$F/logs" "$F/corpus"
  # Each target of the plan from $FUZZ_BIN, as it is or xz-compressed (NAME.xz, unpacked by python's lzma).
  for p in $PLAN; do
    t=${p%%:*}; src=${FUZZ_BIN:-.gpu-f}/$t
    if [ -f "$src.xz" ]; then
      python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' \
        "$src.xz" "$F/bin/$t"
    else cp "$src" "$F/bin/$t"; fi
  done
  chmod +x "$F"/bin/*
  cp -r fuzz/corpus/. "$F/corpus/"
  nproc; grep -m1 "model name" /proc/cpuinfo
  launch() {
    for i in $(seq 1 "$2"); do
      mkdir -p "$F/new/$1-$i"
      setsid nohup "$F/bin/$1" -max_total_time="$T" -seed=$((1000 + i)) -rss_limit_mb=2048 -timeout=10 \
        -print_final_stats=1 -artifact_prefix="$F/crash-$1-$i-" "$F/new/$1-$i" "$F/corpus/$1" \
        >"$F/logs/$1-$i.log" 2>&1 </dev/null &
    done
  }
  for p in $PLAN; do launch "${p%%:*}" "${p##*:}"; done
  sleep 5; pgrep -c -f "$F/bin/" ; date
  sleep "${2:-550}"
  grep -h "^#.*exec/s" "$F"/logs/*.log | tail -3
  ;;
collect)
  for _ in $(seq 1 "${2:-540}"); do pgrep -f "$F/bin/" >/dev/null || break; sleep 1; done
  pkill -INT -f "$F/bin/"; sleep 3
  for t in sse_stream chat_completion manifest kernel_log records store bundle_verify report_run metrics_values lm_eval \
    save_result field_inputs aiperf_export; do
    total=0; n=0
    for l in "$F"/logs/"$t"-*.log; do
      [ -e "$l" ] || continue
      u=$(grep -o "stat::number_of_executed_units: [0-9]*" "$l" | grep -o "[0-9]*$")
      total=$((total + ${u:-0})); n=$((n + 1))
    done
    crashes=$(find "$F" -maxdepth 1 -name "crash-$t-*" | wc -l)
    echo "$t processes=$n executions=$total crashes=$crashes"
  done | tee "$OUT/fuzz-totals.txt"
  for l in "$F"/logs/*.log; do echo "== $l"; grep -E "stat::|Done|ERROR|panicked" "$l" | head -5; done >"$OUT/fuzz-logs.txt"
  mkdir -p "$OUT/crashes"; find "$F" -maxdepth 1 -name "crash-*" -exec cp {} "$OUT/crashes/" \;
  ;;
esac
