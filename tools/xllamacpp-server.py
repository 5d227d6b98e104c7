# gauntlet's launcher for llama.cpp's server as embedded by the xllamacpp wheel.
# It takes the llama-server flags gauntlet's profiles use, serves HTTP until SIGTERM or SIGINT, and exits non-zero
# when the model cannot be loaded. scripts/setup.sh installs it with the python of its venv under GAUNTLET_HOME as interpreter.
import argparse
import signal
import sys

import xllamacpp


def main() -> int:
    ap = argparse.ArgumentParser(prog="xllamacpp-server", allow_abbrev=False)
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8080)
    ap.add_argument("-c", "--ctx-size", type=int, default=4096)
    ap.add_argument("-t", "--threads", type=int, default=0)
    ap.add_argument("-np", "--parallel", type=int, default=1)
    ap.add_argument("-s", "--seed", type=int, default=None)
    ap.add_argument("--alias", default=None)
    # llama-server serves Prometheus text on /metrics only when asked (`--metrics`), as here.
    ap.add_argument("--metrics", action="store_true")
    args = ap.parse_args()

    # Block the stop signals before the server's threads start, so they all inherit the mask and the main
    # thread alone receives them through sigwait.
    stop = {signal.SIGTERM, signal.SIGINT}
    signal.pthread_sigmask(signal.SIG_BLOCK, stop)

    params = xllamacpp.CommonParams()
    params.model.path = args.model
    params.hostnames = [args.host]
    params.port = args.port
    params.n_ctx = args.ctx_size
    params.n_parallel = args.parallel
    if args.threads > 0:
        params.cpuparams.n_threads = args.threads
        params.cpuparams_batch.n_threads = args.threads
    if args.seed is not None:
        params.sampling.seed = args.seed
    if args.alias:
        params.model_alias = args.alias
    if args.metrics:
        params.endpoint_metrics = True
    try:
        server = xllamacpp.Server(params)
    except Exception as exc:  # the binding raises on a model it cannot load
        print(f"xllamacpp-server: cannot start: {exc}", file=sys.stderr, flush=True)
        return 1
    print(f"xllamacpp-server: listening on {server.listening_address}", file=sys.stderr, flush=True)
    signal.sigwait(stop)
    print("xllamacpp-server: stopping", file=sys.stderr, flush=True)
    del server
    return 0


if __name__ == "__main__":
    sys.exit(main())
