#!/usr/bin/env bash
# gauntlet's fuzz targets (fuzz/, cargo-fuzz on the nightly toolchain; built under $GAUNTLET_HOME/fuzz-target).
#
#   scripts/fuzz.sh build                  build every target
#   scripts/fuzz.sh replay                 run every target over its corpus (fuzz/corpus/<target>) once
#   scripts/fuzz.sh smoke [SECONDS]        fuzz every target for SECONDS (default 5), new inputs kept outside the repo
#   scripts/fuzz.sh ci                     build, replay and smoke: the step scripts/test.sh runs
#   scripts/fuzz.sh run TARGET [ARGS…]     fuzz one target; ARGS go to libFuzzer, e.g. -runs=10000000; new inputs
#                                          go to fuzz/target/corpus-new/TARGET
#   scripts/fuzz.sh minimize TARGET        merge those into fuzz/corpus/TARGET and minimize it (cargo fuzz cmin)
#   scripts/fuzz.sh list                   the targets
#
# Every target is built the same way (no sanitizer: the parsers are safe Rust, and a panic is what we look for;
# debug assertions and overflow checks on, so arithmetic that wraps is a crash too). A crash leaves its input in
# fuzz/artifacts/<target>/; keep it in the corpus once fixed. GAUNTLET_FUZZ=off skips the `ci` step (say why).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo/fuzz"

say() { printf 'fuzz: %s\n' "$*" >&2; }
TARGETS=(sse_stream chat_completion manifest kernel_log records store bundle_verify report_run metrics_values lm_eval save_result field_inputs aiperf_export)
# Built outside the checkout, under $GAUNTLET_HOME, so that a fresh clone (CI) rebuilds only what changed.
FUZZ_TARGET_DIR=${GAUNTLET_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/gauntlet}/fuzz-target
BUILD=(-s none --debug-assertions --target-dir "$FUZZ_TARGET_DIR")
# Each run is bounded in memory and per input; a slow input is a finding too.
LIMITS=(-rss_limit_mb=2048 -timeout=10)

need_tools() {
  if ! cargo +nightly --version >/dev/null 2>&1; then
    say "no nightly Rust toolchain (\`cargo +nightly --version\` fails): \`rustup toolchain install nightly --profile minimal\`"
    say "(scripts/setup.sh --test tries that; GAUNTLET_FUZZ=off skips the fuzz step of scripts/test.sh)"
    exit 1
  fi
  if ! cargo fuzz --version >/dev/null 2>&1; then
    say "cargo-fuzz is not installed: \`cargo install --locked cargo-fuzz\` (scripts/setup.sh --test does)"
    exit 1
  fi
}

build() { cargo +nightly fuzz build "${BUILD[@]}"; }

replay() {
  for t in "${TARGETS[@]}"; do
    say "replaying fuzz/corpus/$t ($(find "corpus/$t" -type f | wc -l) inputs)"
    cargo +nightly fuzz run "${BUILD[@]}" "$t" "corpus/$t" -- -runs=0 "${LIMITS[@]}"
  done
}

smoke() {
  local seconds=${1:-5} scratch
  scratch=$(mktemp -d)
  trap 'rm -rf "$scratch"' RETURN
  for t in "${TARGETS[@]}"; do
    # New inputs go to the first folder (outside the repo); the corpus is only read.
    mkdir -p "$scratch/$t"
    say "fuzzing $t for ${seconds}s"
    if ! cargo +nightly fuzz run "${BUILD[@]}" "$t" "$scratch/$t" "corpus/$t" -- \
      -max_total_time="$seconds" "${LIMITS[@]}" -print_final_stats=1 >"$scratch/$t.log" 2>&1; then
      tail -n 60 "$scratch/$t.log" >&2
      say "$t failed: the input is in fuzz/artifacts/$t/"
      return 1
    fi
    grep -E '^stat::(number_of_executed_units|average_exec_per_sec)' "$scratch/$t.log" | tr '\n' ' ' >&2
    echo >&2
  done
}

case "${1:-}" in
  build) need_tools; build ;;
  replay) need_tools; replay ;;
  smoke) need_tools; smoke "${2:-5}" ;;
  ci)
    if [ "${GAUNTLET_FUZZ:-on}" = off ]; then
      say "skipped: GAUNTLET_FUZZ=off"
      exit 0
    fi
    need_tools
    build
    replay
    smoke 5
    ;;
  run)
    need_tools
    t=${2:?usage: scripts/fuzz.sh run TARGET [libFuzzer args…]}
    shift 2
    mkdir -p "target/corpus-new/$t"
    exec cargo +nightly fuzz run "${BUILD[@]}" "$t" "target/corpus-new/$t" "corpus/$t" -- \
      "${LIMITS[@]}" -print_final_stats=1 "$@"
    ;;
  minimize)
    need_tools
    t=${2:?usage: scripts/fuzz.sh minimize TARGET}
    if [ -d "target/corpus-new/$t" ]; then
      find "target/corpus-new/$t" -type f -exec cp -n -t "corpus/$t" {} +
    fi
    cargo +nightly fuzz cmin "${BUILD[@]}" "$t" "corpus/$t" -- "${LIMITS[@]}"
    rm -rf "target/corpus-new/$t"
    ;;
  list) printf '%s\n' "${TARGETS[@]}" ;;
  *) sed -n '2,15p' "$repo/scripts/fuzz.sh" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
