#!/usr/bin/env python3
# Measures what the near-tie threshold (gauntlet_schema::tokens::NEAR_TIE_NATS) rests on, against a running
# llama.cpp server: per default-suite case, the top-1/top-2 logprob gap of every greedy token (24 tokens), and how far
# the same tokens' logprobs move when the request is repeated, sent with `cache_prompt: false` and streamed.
# Usage: measure-token-gaps.py BASE_URL SUITE_TOML OUT_JSONL (one JSON line per case and variant, appended).
import json, sys, tomllib, urllib.request
url = sys.argv[1]
suite = tomllib.load(open(sys.argv[2], "rb"))
out = open(sys.argv[3], "a")
def ask(case, **extra):
    body = {"model": "m", "messages": case["messages"], "max_tokens": 24, "temperature": 0,
            "logprobs": True, "top_logprobs": 5}
    body.update(extra)
    req = urllib.request.Request(url + "/v1/chat/completions", json.dumps(body).encode(), {"content-type": "application/json"})
    if body.get("stream"):
        toks = []
        for line in urllib.request.urlopen(req, timeout=900):
            line = line.decode().strip()
            if line.startswith("data: {"):
                for c in json.loads(line[6:]).get("choices", []):
                    toks += (c.get("logprobs") or {}).get("content") or []
        return toks
    return json.load(urllib.request.urlopen(req, timeout=900))["choices"][0]["logprobs"]["content"]
for case in suite["cases"]:
    if case.get("tools") or case.get("repeat_of"): continue
    base = ask(case)
    gaps = [t["top_logprobs"][0]["logprob"] - t["top_logprobs"][1]["logprob"] for t in base if len(t["top_logprobs"]) > 1]
    out.write(json.dumps({"case": case["id"], "gaps": gaps}) + "\n"); out.flush()
    for name, extra in [("repeat", {}), ("cold", {"cache_prompt": False}), ("stream", {"stream": True})]:
        other = ask(case, **extra)
        d, flip = [], None
        for i, (a, b) in enumerate(zip(base, other)):
            if a["id"] != b["id"]: flip = i; break
            d.append(abs(a["logprob"] - b["logprob"]))
        out.write(json.dumps({"case": case["id"], "variant": name, "deltas": d, "flip": flip}) + "\n"); out.flush()
