#!/usr/bin/env bash
# Client fidelity of `gauntlet bench` against the pacing server (see crates/gauntlet/benches/client_fidelity.rs).
#   scripts/bench-client.sh                          concurrency 1, 16, 64, 256 and 512
#   GAUNTLET_FIDELITY_LEVELS=1,16 scripts/bench-client.sh
# Prints a table and writes target/client-fidelity.json.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
cargo build --release --locked -q -p gauntlet-fake-server --bin gauntlet-pacer
exec cargo bench --locked -q -p gauntlet --bench client_fidelity
