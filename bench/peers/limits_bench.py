"""Decisions/s and latency of Python `limits` (5.x) on memcached.

One `MemcachedStorage` (`memcached://HOST:PORT`, pymemcache underneath: a
`PooledClient` per thread) and a `FixedWindowRateLimiter` or a
`SlidingWindowCounterRateLimiter` with a limit so high that every hit is
allowed. `--threads` threads each call `hit()` in a closed loop (the next
call as soon as the previous one returns) for `--seconds`; one hot key, or
each call picks one of 100,000 keys uniformly at random (`--mode many`).

Before each run every thread makes one decision on a key of its own (so
its connection is open), then `flush_all` empties memcached and the clock
starts. Per run, one JSON line on stdout: decisions/s (decisions answered
over the run's wall time, threads joined), p50 and p99 latency in µs, and
allowed / denied / error counts. Progress goes to stderr.

Run by `bench/peers/run`, which installs `limits` and `pymemcache` into a
scratch venv.
"""

import argparse
import json
import random
import socket
import sys
import threading
import time
from importlib.metadata import version

from limits import RateLimitItemPerMinute, storage, strategies

MANY_KEYS = 100_000
LIMIT = 1_000_000_000
STRATEGIES = {
    "FixedWindowRateLimiter": strategies.FixedWindowRateLimiter,
    "SlidingWindowCounterRateLimiter": strategies.SlidingWindowCounterRateLimiter,
}


def flush_all(host, port):
    with socket.create_connection((host, port), timeout=10) as conn:
        conn.sendall(b"flush_all\r\n")
        reply = b""
        while not reply.endswith(b"\r\n"):
            chunk = conn.recv(64)
            if not chunk:
                break
            reply += chunk
    if reply != b"OK\r\n":
        raise RuntimeError(f"flush_all answered {reply!r}")


def quantile(sorted_values, q):
    if not sorted_values:
        return float("nan")
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


def one_run(limiter, item, args, host, port, seed):
    threads = args.threads
    ready = threading.Barrier(threads + 1)
    go = threading.Barrier(threads + 1)
    shared = {}
    results = [None] * threads

    def worker(index):
        rng = random.Random(seed * 1_000_003 + index)
        limiter.hit(item, f"warmup{index}")  # opens this thread's connection
        ready.wait()
        go.wait()
        end = shared["end"]
        allowed = denied = errors = 0
        first_error = None
        latencies = []
        clock = time.perf_counter_ns
        hot = args.mode == "hot"
        while clock() < end:
            key = "hot" if hot else f"c{rng.randrange(MANY_KEYS)}"
            start = clock()
            try:
                ok = limiter.hit(item, key)
            except Exception as error:  # counted, never hidden
                errors += 1
                first_error = first_error or repr(error)
                continue
            latencies.append(clock() - start)
            if ok:
                allowed += 1
            else:
                denied += 1
        results[index] = (allowed, denied, errors, first_error, latencies)

    pool = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    for thread in pool:
        thread.start()
    ready.wait()
    flush_all(host, port)
    start = time.perf_counter_ns()
    shared["end"] = start + int(args.seconds * 1e9)
    go.wait()
    for thread in pool:
        thread.join()
    elapsed = (time.perf_counter_ns() - start) / 1e9

    allowed = sum(r[0] for r in results)
    denied = sum(r[1] for r in results)
    errors = sum(r[2] for r in results)
    first_error = next((r[3] for r in results if r[3]), None)
    latencies = sorted(x for r in results for x in r[4])
    return {
        "per_second": (allowed + denied) / elapsed,
        "p50_us": quantile(latencies, 0.5) / 1e3,
        "p99_us": quantile(latencies, 0.99) / 1e3,
        "allowed": allowed,
        "denied": denied,
        "errors": errors,
        "first_error": first_error,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", required=True, help="HOST:PORT of memcached")
    parser.add_argument("--strategy", required=True, choices=sorted(STRATEGIES))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--mode", choices=["hot", "many"], default="hot")
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args()
    host, port = args.server.rsplit(":", 1)
    port = int(port)

    store = storage.storage_from_string(f"memcached://{host}:{port}")
    limiter = STRATEGIES[args.strategy](store)
    item = RateLimitItemPerMinute(LIMIT)
    for run in range(args.runs):
        result = one_run(limiter, item, args, host, port, args.seed + run)
        line = {
            "peer": f"limits {version('limits')} (Python {sys.version.split()[0]})",
            "algorithm": args.strategy,
            "concurrency": f"{args.threads} thread{'s' if args.threads > 1 else ''}",
            "level": args.threads,
            "mode": args.mode,
            "run": run + 1,
            **result,
        }
        print(json.dumps(line), flush=True)
        print(
            f"limits {args.strategy} {args.mode} threads {args.threads} run {run + 1}: "
            f"{result['per_second']:.0f}/s p50 {result['p50_us']:.1f} "
            f"p99 {result['p99_us']:.1f} µs, allowed {result['allowed']} "
            f"denied {result['denied']} errors {result['errors']}"
            + (
                f" (first error: {result['first_error']})"
                if result["first_error"]
                else ""
            ),
            file=sys.stderr,
            flush=True,
        )


if __name__ == "__main__":
    main()
