#!/usr/bin/env bash
# Measures the test suite's two fixed costs on this machine, as docs/validation/2026-12-02-test-suite-time.md states them:
#   1. link time: `cargo build --workspace --tests` after touching the engine (every test binary relinks),
#   2. wall time of the parallel suite (everything but the real-server tests).
# Prints the machine's load beside each figure: other builds running at the same time slow both.
# Needs a warm target directory (it builds once first) and cargo-nextest.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"

cargo build --workspace --tests --locked >/dev/null 2>&1
touch crates/gauntlet-engine/src/lib.rs
echo "load before link: $(uptime | sed 's/.*load average: //')"
start=$(date +%s.%N)
cargo build --workspace --tests --locked >/dev/null 2>&1
end=$(date +%s.%N)
echo "link every test binary: $(echo "$end - $start" | bc) s (load $(uptime | sed 's/.*load average: //'))"

echo "tests: $(cargo nextest list --workspace --locked 2>/dev/null | grep -c ' ')"
start=$(date +%s.%N)
cargo nextest run --workspace --locked --no-fail-fast -E "${GAUNTLET_FAST_FILTER:-not test(/^real_server::/)}" >/dev/null 2>&1 || true
end=$(date +%s.%N)
echo "parallel suite: $(echo "$end - $start" | bc) s (load $(uptime | sed 's/.*load average: //'))"
