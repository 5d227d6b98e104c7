"""gauntlet bench and GuideLLM, side by side, against the same pacing server (run by scripts/bench-peer.sh).

For each concurrency, each client runs against a fresh `gauntlet-pacer` (same schedule and seed), and both are
judged the same way from the pacer's own write records (CLOCK_MONOTONIC around every write):
  - TTFT error: |client TTFT - (first token write, after - request read)|, on open connections (warm) and on a
    request's new connection (cold);
  - mean-gap error: |client (last - first token) / (n - 1) - server (last - first write) / (n - 1)| per request,
    the finest inter-token figure GuideLLM records (it keeps first and last token times only);
  - the most streams the server saw in flight.
Matching: GuideLLM records the chunk id (`response_id`), gauntlet the token text; both carry the pacer's request id.
Usage: bench_peer.py GAUNTLET PACER PEER_PYTHON TOKENIZER_DIR OUT_JSON LEVELS (PEER_PYTHON has guidellm installed)
"""

import json
import os
import subprocess
import sys
import tempfile
import urllib.request

TTFT_MS, GAP_MS, JITTER_MS, TOKENS, BATCHES = "50", "10", "2", 32, 5


def pacer(binary):
    p = subprocess.Popen(
        [binary, "--port", "0", "--ttft-ms", TTFT_MS, "--gap-ms", GAP_MS, "--jitter-ms", JITTER_MS, "--seed", "7",
         "--lifetime-s", "900"],
        stdout=subprocess.PIPE, text=True)
    port = int(p.stdout.readline().split()[-1])
    return p, port


def pacer_log(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/pacer/log", timeout=30) as r:
        return json.load(r)


def percentile(values, q):
    if not values:
        return None
    v = sorted(values)
    h = (len(v) - 1) * q
    lo, hi = int(h), min(int(h) + 1, len(v) - 1)
    return v[lo] + (h - lo) * (v[hi] - v[lo])


def summary(values):
    return {"n": len(values), "p50_ms": percentile(values, 0.5), "p99_ms": percentile(values, 0.99),
            "max_ms": max(values) if values else None}


def judge(per_request, log):
    """per_request: [(pacer id, client ttft s, client mean gap s or None)] -> errors in ms."""
    server = {r["id"]: r for r in log["requests"]}
    warm, cold, gaps, unmatched = [], [], [], 0
    peak = 0
    for rid, ttft, gap in per_request:
        s = server.get(rid)
        if s is None or not s["writes"]:
            unmatched += 1
            continue
        peak = max(peak, s["in_flight_at_read"])
        writes = s["writes"]
        # From the request's arrival (the kernel's receive stamp; its read where there is none) to the first token.
        server_ttft = (writes[0][1] - (s.get("arrived_ns") or s["read_ns"])) / 1e9
        (cold if s["nth_on_connection"] == 0 else warm).append(abs(ttft - server_ttft) * 1e3)
        tokens = sum(w[3] for w in writes)
        if gap is not None and tokens > 1 and len(writes) > 1:
            server_gap = (writes[-1][1] - writes[0][1]) / 1e9 / (tokens - 1)
            gaps.append(abs(gap - server_gap) * 1e3)
    return {"ttft_error_all": summary(warm + cold), "ttft_error_warm": summary(warm),
            "ttft_error_cold": summary(cold), "mean_gap_error": summary(gaps),
            "server_in_flight_peak": peak, "unmatched": unmatched}


def run_gauntlet(gauntlet, port, c, scratch):
    manifest = os.path.join(scratch, f"pace-{c}.toml")
    with open(manifest, "w") as f:
        f.write(f'version = 1\n[profiles.pace]\nbase_url = "http://127.0.0.1:{port}"\n'
                'load_timeout = "30s"\nrequest_timeout = "300s"\n')
    out = os.path.join(scratch, f"gauntlet-{c}")
    subprocess.run([gauntlet, "bench", "--manifest", manifest, "--profile", "pace", "--concurrency", str(c),
                    "--max-tokens", str(TOKENS), "--warmups", "0", "--samples", str(BATCHES), "--out", out],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=600)
    with open(os.path.join(out, "bench.json")) as f:
        bench = json.load(f)
    rows = []
    for batch in bench["levels"][0]["batches"]:
        for r in batch["requests"]:
            events = [(t, text) for t, text, _ in r["events"] if text.strip()]
            if not events:
                continue
            rid = int(events[0][1].split()[0][1:].split(":")[0])
            n = r.get("completion_tokens") or 0
            gap = (events[-1][0] - events[0][0]) / (n - 1) if n > 1 else None
            rows.append((rid, events[0][0], gap))
    return rows


def run_guidellm(python, tokenizer, port, c, scratch):
    out = os.path.join(scratch, f"guidellm-{c}.json")
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    subprocess.run([python, "-m", "guidellm", "run", "--backend", f"kind=openai_http,target=http://127.0.0.1:{port}",
                    "--profile", f"kind=concurrent,streams={c}",
                    "--constraint", f"kind=max_requests,count={BATCHES * c}",
                    "--tokenizer", f"kind=hf_auto,model={tokenizer}",
                    "--data", f"kind=synthetic_text,prompt_tokens=16,output_tokens={TOKENS}",
                    "--output", f"kind=json,path={out}", "--disable-console"],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, timeout=900)
    with open(out) as f:
        report = json.load(f)
    rows = []
    for r in report["benchmarks"][0]["requests"]["successful"]:
        t = r["info"]["timings"]
        n = t.get("token_iterations") or 0
        if not r.get("response_id") or t.get("first_token_iteration") is None:
            continue
        ttft = t["first_token_iteration"] - t["request_start"]
        gap = (t["last_token_iteration"] - t["first_token_iteration"]) / (n - 1) if n > 1 else None
        rows.append((int(r["response_id"][1:]), ttft, gap))
    return rows


def main():
    gauntlet, pacer_bin, peer_python, tokenizer, out_json, levels = sys.argv[1:7]
    results = []
    with tempfile.TemporaryDirectory() as scratch:
        for c in [int(x) for x in levels.split(",")]:
            for name, run in (("gauntlet", lambda port: run_gauntlet(gauntlet, port, c, scratch)),
                              ("guidellm", lambda port: run_guidellm(peer_python, tokenizer, port, c, scratch))):
                proc, port = pacer(pacer_bin)
                try:
                    rows = run(port)
                    judged = judge(rows, pacer_log(port))
                except Exception as e:  # a failed peer run is a row that says so, not a lost comparison
                    judged = {"error": f"{type(e).__name__}: {e}"}
                finally:
                    proc.kill()
                    proc.wait()
                judged.update({"client": name, "streams": c})
                results.append(judged)
                print(json.dumps(judged), flush=True)
    with open(out_json, "w") as f:
        json.dump({"pacer": {"ttft_ms": TTFT_MS, "gap_ms": GAP_MS, "jitter_ms": JITTER_MS, "tokens": TOKENS},
                   "results": results}, f, indent=1)
    fmt = lambda v: "-" if v is None else f"{v:.3f}"
    print("| streams | client | in flight (server) | TTFT err all p50 / p99 / max ms | on a new connection | "
          "warm TTFT err p99 ms | mean-gap err p50 / p99 ms |")
    print("|---:|---|---:|---|---:|---:|---|")
    for r in results:
        if "error" in r:
            print(f"| {r['streams']} | {r['client']} | - | failed: {r['error']} | - | - |")
            continue
        a, g = r["ttft_error_all"], r["mean_gap_error"]
        print(f"| {r['streams']} | {r['client']} | {r['server_in_flight_peak']} | {fmt(a['p50_ms'])} / "
              f"{fmt(a['p99_ms'])} / {fmt(a['max_ms'])} | {r['ttft_error_cold']['n']} of {a['n']} | "
              f"{fmt(r['ttft_error_warm']['p99_ms'])} | {fmt(g['p50_ms'])} / {fmt(g['p99_ms'])} |")


if __name__ == "__main__":
    main()
