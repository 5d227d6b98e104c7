#!/usr/bin/env bash
# The main job on a fresh machine: install the embedded default (llama.cpp via xllamacpp + SmolLM2-135M) and
# run the gate on it. Extra arguments go to `gauntlet run` (e.g. --write-baseline base.json, --baseline base.json).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$repo/scripts/setup.sh"
exec "$repo/target/release/gauntlet" run "$@"
