#!/usr/bin/env python3
"""Instructions per request of an axum "hello" service, bare or rate limited.

Run by scripts/bench-web (which installs what is missing and builds); see
the top of that script. For each run and each case:

- starts a fresh memcached when the case needs one (`-t 1`, loopback,
  on CPU 0 with the load) and the service under callgrind on CPU 1
  (`target/release/web-service`: one tokio worker; it decides once for
  every client the load will name before it listens);
- warms the service up with wrk for a few seconds;
- reads how many requests it has answered (GET /__bench/count, outside
  the rate limit), zeroes callgrind's counters (`callgrind_control -z`),
  runs wrk (16 connections, one thread, clients drawn at random from
  `client-1` ... `client-<keys>` in an `x-api-key` header,
  bench/web/keys.lua), dumps the counters (`callgrind_control -d`) and
  reads the count again;
- divides the instructions counted by the requests answered in between,
  and checks that wrk saw no error and no status but 200.

callgrind counts the instructions of every thread of the service
(`--trace-children=no`: memcached and wrk run outside it), which gives
the same figure on a noisy machine; the requests per second it reaches
under callgrind mean nothing and are not reported.

Tables (markdown) go to stdout, progress to stderr, raw results to
$OUT/results.json.
"""

import argparse
import glob
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from loopback import log, start_memcached  # noqa: E402
ROOT = os.path.dirname(os.path.dirname(HERE))
SERVICE = os.path.join(ROOT, "target", "release", "web-service")
MANY = 100_000

# The layer's service: sliding window n = 4 with 15-minute sub-windows, so
# that a run of a few seconds crosses no sub-window's end (after one, for
# the allowed clock skew and the deadline, every decision reads the bucket
# just closed again, and a run's count would depend on when it began).
LAYER = ["--variant", "layer", "--quota", "1000000000/hour"]

# (name, service arguments, keys the load names, needs memcached)
CASES = [
    ("bare service", ["--variant", "bare"], 1, False),
    ("bare service with two constant RateLimit fields", ["--variant", "fields"], 1, False),
    ("bare service that waits once per request", ["--variant", "wait"], 1, False),
    ("bare service behind a layer that does nothing", ["--variant", "identity"], 1, False),
    ("tower_governor, 1 key", ["--variant", "governor"], 1, False),
    ("tower_governor, 100,000 keys", ["--variant", "governor"], MANY, False),
    ("layer on MemoryStore, 1 key", LAYER, 1, False),
    ("layer on MemoryStore, 100,000 keys", LAYER, MANY, False),
    ("layer on MemoryStore, ApiKey (hashed), 100,000 keys",
     LAYER + ["--key", "api-key"], MANY, False),
    ("layer on memcached, 1 key", LAYER, 1, True),
    ("layer on memcached, 100,000 keys", LAYER, MANY, True),
    ("MemcachedStore::increment, 1 key", ["--variant", "increment"], 1, True),
    ("MemcachedStore::increment, 100,000 keys", ["--variant", "increment"], MANY, True),
    ("raw socket increment, no client library, 1 key", ["--variant", "raw-increment"], 1, True),
    ("raw socket increment, no client library, 100,000 keys",
     ["--variant", "raw-increment"], MANY, True),
]


def start_service(service, arguments, keys, memcached, out_dir, timeout):
    """The service under callgrind; returns (process, address)."""
    command = ["taskset", "-c", "1", "valgrind", "--tool=callgrind",
               "--trace-children=no", "--dump-instr=no",
               f"--callgrind-out-file={out_dir}/callgrind.%p",
               service, *arguments, "--keys", str(keys)]
    if memcached:
        command += ["--memcached", memcached]
    process = subprocess.Popen(command, stdout=subprocess.PIPE,
                               stderr=open(os.path.join(out_dir, "service.err"), "w"),
                               text=True)
    deadline = time.monotonic() + timeout
    line = ""
    # The first line says where it listens, once the warm-up is done.
    while not line and time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line and process.poll() is not None:
            sys.exit(f"the service exited with {process.returncode}; see {out_dir}/service.err")
    match = re.match(r"listening on (\S+)", line or "")
    if not match:
        process.kill()
        sys.exit(f"the service did not say where it listens: {line!r}")
    return process, match.group(1)


def answered(address):
    with urllib.request.urlopen(f"http://{address}/__bench/count", timeout=30) as reply:
        return int(reply.read())


def wrk(address, keys, seconds, connections):
    env = dict(os.environ, KEYS=str(keys))
    command = ["taskset", "-c", "0", "wrk", "-t", "1", "-c", str(connections),
               "-d", f"{seconds}s", "--timeout", "10s", "-s",
               os.path.join(HERE, "keys.lua"), f"http://{address}/"]
    done = subprocess.run(command, env=env, capture_output=True, text=True,
                          timeout=seconds + 60)
    if done.returncode != 0:
        sys.exit(f"wrk failed ({done.returncode}): {done.stderr}")
    text = done.stdout
    for bad in ("Socket errors", "Non-2xx or 3xx responses"):
        if bad in text:
            sys.exit(f"wrk reported {bad!r}:\n{text}")
    requests = re.search(r"(\d+) requests in", text)
    return int(requests.group(1)) if requests else 0


def callgrind_control(flag, pid):
    done = subprocess.run(["callgrind_control", flag, str(pid)],
                          capture_output=True, text=True, timeout=120)
    if done.returncode != 0 or "OK" not in done.stdout:
        sys.exit(f"callgrind_control {flag} {pid} failed: {done.stdout} {done.stderr}")


def dumped_instructions(out_dir, pid):
    """The Ir total of the newest dump callgrind wrote for `pid`."""
    dumps = sorted(glob.glob(f"{out_dir}/callgrind.{pid}.*"),
                   key=lambda path: int(path.rsplit(".", 1)[1]))
    if not dumps:
        sys.exit(f"callgrind wrote no dump for {pid} in {out_dir}")
    with open(dumps[-1]) as f:
        for line in f:
            if line.startswith("totals:") or line.startswith("summary:"):
                return int(line.split()[1])
    sys.exit(f"no total in {dumps[-1]}")


def measure(case, args, out_dir):
    name, arguments, keys, needs_memcached = case
    memcached = None
    address = None
    if needs_memcached:
        memcached, address = start_memcached()
    service = None
    try:
        service, service_address = start_service(
            args.service, arguments, keys, address, out_dir, args.start_timeout)
        wrk(service_address, keys, args.warm_up, args.connections)
        before = answered(service_address)
        pid = service.pid
        callgrind_control("-z", pid)
        sent = wrk(service_address, keys, args.seconds, args.connections)
        callgrind_control("-d", pid)
        after = answered(service_address)
        instructions = dumped_instructions(out_dir, pid)
        requests = after - before
        if requests <= 0:
            sys.exit(f"{name}: no request was answered")
        return {"case": name, "keys": keys, "requests": requests, "wrk_requests": sent,
                "instructions": instructions, "per_request": instructions / requests}
    finally:
        for process in (service, memcached):
            if process is not None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    process.kill()


def table(results, runs):
    by_case = {}
    for result in results:
        by_case.setdefault(result["case"], []).append(result["per_request"])
    bare = statistics.median(by_case["bare service"]) if "bare service" in by_case else None
    lines = [
        f"Instructions per request under callgrind, median of {runs} run(s); "
        "'added' is over the bare service of the same run.",
        "",
        "| case | instructions per request | added over bare | runs |",
        "|---|---|---|---|",
    ]
    for name, *_ in CASES:
        if name not in by_case:
            continue
        values = by_case[name]
        median = statistics.median(values)
        added = "" if bare is None or name == "bare service" else f"{median - bare:,.0f}"
        spread = ", ".join(f"{v:,.0f}" for v in values)
        lines.append(f"| {name} | {median:,.0f} | {added} | {spread} |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--warm-up", type=int, default=2)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--start-timeout", type=float, default=300)
    parser.add_argument("--only", help="only the cases whose name contains this")
    parser.add_argument("--out", required=True)
    parser.add_argument("--service", default=SERVICE,
                        help="the web-service binary (default: this checkout's release build)")
    args = parser.parse_args()
    if args.runs < 1 or args.seconds <= 0 or args.connections < 1:
        parser.error("--runs, --seconds and --connections must be positive")
    cases = [c for c in CASES if not args.only or args.only.lower() in c[0].lower()]
    if not cases:
        parser.error(f"no case matches {args.only!r}; the cases: {[c[0] for c in CASES]}")
    if args.only and "bare service" not in [c[0] for c in cases]:
        cases.insert(0, CASES[0])
    os.makedirs(args.out, exist_ok=True)
    results = []
    for run in range(args.runs):
        # Rotate the order from run to run.
        order = cases[run % len(cases):] + cases[:run % len(cases)]
        for case in order:
            log(f"run {run + 1}/{args.runs}: {case[0]}")
            case_dir = os.path.join(args.out, f"run{run + 1}", re.sub(r"\W+", "-", case[0]))
            os.makedirs(case_dir, exist_ok=True)
            result = measure(case, args, case_dir)
            log(f"  {result['per_request']:,.0f} instructions per request "
                f"({result['requests']} requests)")
            results.append(result)
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    print(table(results, args.runs))


if __name__ == "__main__":
    main()
