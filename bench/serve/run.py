#!/usr/bin/env python3
"""The RESP server against Smyte's bucket as a Lua script on Redis.

Run by scripts/bench-serve (which installs what is missing and builds);
see the top of that script. For each run and each target, in an order
that rotates from run to run, and for each pipeline depth, this starts
fresh processes (so every case begins with no buckets):

- the server under test on CPU 1 (`taskset -c 1`): ours with `--threads
  1` (and memcached `-t 1`, also on CPU 1, when the buckets live there),
  or redis-server with the Lua script loaded (SCRIPT LOAD);
- checks a few replies by hand (10, 9, ..., 1, 0, 0 on a fresh key);
- reads the CPU time of every server process (/proc/PID/stat, utime +
  stime), runs redis-benchmark on CPU 0 (`taskset -c 0`, under
  `timeout`; its CPU time from getrusage(RUSAGE_CHILDREN)), reads them
  again, and checks with INFO that the server ran exactly the requests
  sent, without errors.

Tables (markdown) go to stdout, progress to stderr, raw results to
$OUT/results.json.
"""

import argparse
import json
import os
import resource
import signal
import socket
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from loopback import free_port, log  # noqa: E402
TICK = os.sysconf("SC_CLK_TCK")
KEYSPACE = 100_000
CLIENTS = 50


def cpu_seconds(pid):
    """utime + stime of every thread of `pid`, in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # fields[0] is the state (field 3); utime and stime are fields 14, 15.
    return (int(fields[11]) + int(fields[12])) / TICK


def cpu_ticks():
    """Per CPU: (user + nice + system + steal ticks, all ticks), from /proc/stat.
    Interrupt time is left out: most of it is the benchmark's own loopback
    traffic."""
    out = {}
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith("cpu") and line[3].isdigit():
                name, *v = line.split()
                v = [int(x) for x in v]
                out[int(name[3:])] = (v[0] + v[1] + v[2] + v[7], sum(v[:8]))
    return out


def wait_quiet(limit_s, threshold=0.15):
    """Waits (at most `limit_s`) until neither CPU was busier than
    `threshold` over one second: other work on a shared machine (builds,
    tests) would share the CPUs of the measurement. Returns the seconds
    waited and the busiest share seen last."""
    started = time.monotonic()
    while True:
        a = cpu_ticks()
        time.sleep(1)
        b = cpu_ticks()
        busiest = max((b[c][0] - a[c][0]) / max(1, b[c][1] - a[c][1]) for c in a)
        waited = time.monotonic() - started
        if busiest <= threshold or waited >= limit_s:
            return waited, busiest


def cpus_allowed(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("Cpus_allowed_list:"):
                return line.split(":", 1)[1].strip()
    return "?"


class Resp:
    """A minimal RESP client, for the checks and INFO."""

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.buf = b""

    def close(self):
        self.sock.close()

    def _line(self):
        while b"\r\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("connection closed")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _exact(self, n):
        while len(self.buf) < n + 2:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("connection closed")
            self.buf += chunk
        data, self.buf = self.buf[:n], self.buf[n + 2:]
        return data

    def _reply(self):
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            return RuntimeError(rest.decode())
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            return None if n < 0 else self._exact(n).decode()
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self._reply() for _ in range(n)]
        raise ValueError(f"unexpected reply {line!r}")

    def call(self, *args):
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            a = str(a).encode()
            out.append(b"$%d\r\n%s\r\n" % (len(a), a))
        self.sock.sendall(b"".join(out))
        reply = self._reply()
        if isinstance(reply, RuntimeError):
            raise reply
        return reply


def wait_port(port, proc, what, seconds=10):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with status {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"{what} did not listen on {port} within {seconds} s")


def stop(proc):
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


class Target:
    def __init__(self, name, kind, command, memcached=False, check=None, script=None,
                 serve_args=()):
        self.name = name
        self.serve_args = list(serve_args)  # ours: extra `serve` flags
        self.script = script  # for redis: the Lua script's text
        self.kind = kind  # "ours" or "redis"
        self.command = command  # the benchmark's command, with __rand_int__
        self.memcached = memcached
        self.check = check  # a function (Resp, key) raising on a wrong reply


def check_reduce(conn, args_of):
    """A fresh key replies 10, 9, ..., 1, then 0, 0 (max 10 per 60 s)."""
    got = [conn.call(*args_of("check:reduce")) for _ in range(12)]
    want = list(range(10, 0, -1)) + [0, 0]
    if got != want:
        raise RuntimeError(f"replies {got}, expected {want}")
    return got


def check_throttle(conn, args_of):
    got = [conn.call(*args_of("check:throttle"))[0] for _ in range(12)]
    want = [0] * 10 + [1, 1]
    if got != want:
        raise RuntimeError(f"limited flags {got}, expected {want}")
    return got


def check_window(conn, args_of):
    got = [conn.call(*args_of("check:window"))[0] for _ in range(12)]
    want = [1] * 10 + [0, 0]
    if got != want:
        raise RuntimeError(f"allowed flags {got}, expected {want}")
    return got


class Case:
    """The processes of one target, started fresh."""

    def __init__(self, target, args, workdir):
        self.target = target
        self.args = args
        self.workdir = workdir
        self.memcached = None
        self.server = None
        self.port = free_port()
        self.mport = None
        self.sha = None
        self.logs = []

    def _log_file(self, name):
        path = os.path.join(self.workdir, name)
        f = open(path, "w")
        self.logs.append(f)
        return f

    def start(self):
        t = self.target
        if t.memcached:
            self.mport = free_port()
            user = ["-u", "nobody"] if os.geteuid() == 0 else []
            self.memcached = subprocess.Popen(
                ["taskset", "-c", "1", self.args.memcached, "-l", "127.0.0.1",
                 "-p", str(self.mport), "-t", "1", "-m", "1024", "-c", "4096",
                 "-U", "0", *user],
                stdout=subprocess.DEVNULL, stderr=self._log_file("memcached.log"))
            wait_port(self.mport, self.memcached, "memcached")
        if t.kind == "ours":
            cmd = ["taskset", "-c", "1", self.args.binary, "serve",
                   "--listen", f"127.0.0.1:{self.port}", "--threads", "1"]
            if t.memcached:
                cmd += ["--servers", f"127.0.0.1:{self.mport}", "--protocol", "meta"]
            cmd += t.serve_args
            errpath = os.path.join(self.workdir, "serve.log")
            self.server = subprocess.Popen(
                cmd, stdout=subprocess.DEVNULL, stderr=self._log_file("serve.log"))
            deadline = time.time() + 20
            while True:
                if self.server.poll() is not None:
                    raise RuntimeError(
                        f"the server exited ({self.server.returncode}): "
                        + open(errpath).read()[-2000:])
                if "serving RESP" in open(errpath).read():
                    break
                if time.time() > deadline:
                    raise RuntimeError("the server did not log 'serving RESP' in 20 s")
                time.sleep(0.05)
        else:
            self.server = subprocess.Popen(
                ["taskset", "-c", "1", self.args.redis_server, "--port", str(self.port),
                 "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                 "--daemonize", "no"],
                stdout=self._log_file("redis.log"), stderr=subprocess.STDOUT)
            wait_port(self.port, self.server, "redis-server")
            conn = Resp(self.port)
            self.sha = conn.call("SCRIPT", "LOAD", self.target.script)
            conn.close()

    def command(self):
        return [self.sha if a == "<sha>" else a for a in self.target.command]

    def check(self):
        cmd = self.command()
        key_index = cmd.index("key:__rand_int__")

        def args_of(key):
            c = list(cmd)
            c[key_index] = key
            return c

        conn = Resp(self.port)
        try:
            return self.target.check(conn, args_of)
        finally:
            conn.close()

    def calls(self):
        """(commands run, failed) for the benchmark's command, from INFO."""
        conn = Resp(self.port)
        try:
            if self.target.kind == "redis":
                info = conn.call("INFO", "commandstats")
                for line in info.splitlines():
                    if line.startswith("cmdstat_evalsha:"):
                        kv = dict(x.split("=") for x in line.split(":", 1)[1].split(","))
                        return {"calls": int(kv["calls"]),
                                "errors": int(kv.get("failed_calls", 0))
                                + int(kv.get("rejected_calls", 0))}
                return {"calls": 0, "errors": 0}
            info = conn.call("INFO", "decisions")
            name = "decisions_" + self.target.command[0].lower().replace(".", "_")
            for line in info.splitlines():
                if line.startswith(name + ":"):
                    kv = dict(x.split("=") for x in line.split(":", 1)[1].split(","))
                    return {k: int(v) for k, v in kv.items()}
            return {"calls": 0, "errors": 0}
        finally:
            conn.close()

    def memcached_stats(self):
        if not self.memcached:
            return {}
        with socket.create_connection(("127.0.0.1", self.mport), timeout=10) as s:
            s.sendall(b"stats\r\n")
            buf = b""
            while not buf.endswith(b"END\r\n"):
                buf += s.recv(65536)
        stats = {}
        for line in buf.decode().splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[0] == "STAT":
                stats[parts[1]] = parts[2]
        return stats

    def pids(self):
        out = {"server": self.server.pid}
        if self.memcached:
            out["memcached"] = self.memcached.pid
        return out

    def stop(self):
        stop(self.server)
        stop(self.memcached)
        for f in self.logs:
            f.close()


def memcached_commands(before, after):
    """Commands memcached ran between two `stats`: gets, sets, CAS, touches,
    increments and decrements, deletes."""
    keys = ["cmd_get", "cmd_set", "cmd_touch", "incr_misses", "incr_hits",
            "decr_misses", "decr_hits", "delete_misses", "delete_hits"]
    return sum(int(after.get(k, 0)) - int(before.get(k, 0)) for k in keys)


def run_case(target, pipeline, requests, args, run, workdir):
    case = Case(target, args, workdir)
    try:
        case.start()
        checked = case.check()
        before_calls = case.calls()
        pids = case.pids()
        placement = {name: cpus_allowed(pid) for name, pid in pids.items()}
        mstats0 = case.memcached_stats()
        waited, busiest = wait_quiet(args.quiet_wait)
        cpu0 = {name: cpu_seconds(pid) for name, pid in pids.items()}
        sys0 = cpu_ticks()
        ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        bench = ["timeout", str(args.timeout), "taskset", "-c", "0", args.redis_benchmark,
                 "-h", "127.0.0.1", "-p", str(case.port), "-c", str(CLIENTS),
                 "-n", str(requests), "-r", str(KEYSPACE), "-P", str(pipeline), "--csv",
                 *case.command()]
        t0 = time.monotonic()
        proc = subprocess.run(bench, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wall = time.monotonic() - t0
        ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu1 = {name: cpu_seconds(pid) for name, pid in pids.items()}
        sys1 = cpu_ticks()
        mstats1 = case.memcached_stats()
        after_calls = case.calls()
        if proc.returncode != 0:
            raise RuntimeError(
                f"redis-benchmark exited with {proc.returncode}"
                + (" (timed out)" if proc.returncode == 124 else "")
                + f": {proc.stderr.strip()[-500:]}")
        rps = None
        for line in proc.stdout.splitlines():
            cells = [c.strip('"') for c in line.split('","')]
            if len(cells) >= 2 and cells[0] != "test":
                rps = float(cells[1])
        if rps is None:
            raise RuntimeError(f"no rps in redis-benchmark's output: {proc.stdout!r}")
        calls = {k: after_calls.get(k, 0) - before_calls.get(k, 0) for k in after_calls}
        if calls.get("calls") != requests or calls.get("errors", 0) != 0:
            raise RuntimeError(f"the server counted {calls}, expected {requests} calls "
                               "and no errors")
        cpu = {name: cpu1[name] - cpu0[name] for name in pids}
        cpu["redis-benchmark"] = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
        # CPU time on each CPU that none of the measured processes took:
        # other work on the machine (and steal time under a hypervisor).
        busy = {c: (sys1[c][0] - sys0[c][0]) / TICK for c in sys0}
        ours_on = {0: cpu["redis-benchmark"], 1: sum(v for k, v in cpu.items()
                                                     if k != "redis-benchmark")}
        others = {c: max(0.0, busy.get(c, 0) - ours_on[c]) / wall for c in (0, 1)}
        result = {
            "target": target.name, "pipeline": pipeline, "run": run,
            "requests": requests, "rps": rps, "wall_s": wall,
            "cpu_s": cpu,
            "cpu_us_per_decision": {k: v / requests * 1e6 for k, v in cpu.items()},
            "cpu_share": {k: v / wall for k, v in cpu.items()},
            "placement": {**placement, "redis-benchmark": "0"},
            "checked": checked,
            "quiet_wait_s": waited, "busiest_before": busiest,
            "others_share": others,
            "calls": calls,
        }
        if mstats0:
            result["memcached_commands_per_decision"] = (
                memcached_commands(mstats0, mstats1) / requests)
        return result
    finally:
        case.stop()


def targets(others, lua, lua_string):
    reduce_cmd = ["key:__rand_int__", "10", "60"]
    out = [
        Target("ours, embedded store", "ours", ["RL.REDUCE", *reduce_cmd], check=check_reduce),
        # memcached runs -t 1: one worker thread serves every connection,
        # so the server keeps one batch in flight, and lets it grow.
        Target("ours, memcached (meta)", "ours", ["RL.REDUCE", *reduce_cmd], memcached=True,
               check=check_reduce,
               serve_args=["--pipeline-depth", "1", "--pipeline-batch", "1024"]),
        Target("ours, memcached (meta), default pipeline", "ours", ["RL.REDUCE", *reduce_cmd],
               memcached=True, check=check_reduce),
        Target("Redis + Lua, hash (EVALSHA)", "redis", ["EVALSHA", "<sha>", "1", *reduce_cmd],
               check=check_reduce, script=lua),
    ]
    if lua_string:
        out.append(Target("Redis + Lua, packed string (EVALSHA)", "redis",
                          ["EVALSHA", "<sha>", "1", *reduce_cmd], check=check_reduce,
                          script=lua_string))
    if others:
        out += [
            Target("ours, embedded: CL.THROTTLE", "ours",
                   ["CL.THROTTLE", "key:__rand_int__", "9", "10", "60"], check=check_throttle),
            Target("ours, embedded: RL.WINDOW", "ours",
                   ["RL.WINDOW", "key:__rand_int__", "10", "60"], check=check_window),
        ]
    return out


def fmt_int(x):
    return f"{x:,.0f}"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--binary", required=True)
    p.add_argument("--lua", required=True, help="the script's text is read from this file")
    p.add_argument("--lua-string", help="a second script (another way to store the "
                   "bucket), measured as another target; ratios stay to --lua's")
    p.add_argument("--out", required=True)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--pipelines", default="1,16")
    p.add_argument("--requests", default="1:200000,16:2000000",
                   help="requests per case at each pipeline depth, depth:count,...")
    p.add_argument("--timeout", type=int, default=180, help="seconds per case at most")
    p.add_argument("--no-others", action="store_true",
                   help="leave out CL.THROTTLE and RL.WINDOW")
    p.add_argument("--quiet-wait", type=float, default=120,
                   help="before each case, wait up to this many seconds for both CPUs "
                        "to be idle (under 15%% busy over 1 s)")
    p.add_argument("--max-other-load", type=float, default=0.10,
                   help="a case during which other work took more than this share of "
                        "either CPU is measured again")
    p.add_argument("--attempts", type=int, default=3,
                   help="measurements of a case at most (see --max-other-load)")
    p.add_argument("--memcached", default="memcached")
    p.add_argument("--redis-server", default="redis-server")
    p.add_argument("--redis-benchmark", default="redis-benchmark")
    p.add_argument("--report-from", metavar="RESULTS_JSON",
                   help="print the report of an earlier run's results.json, measuring "
                        "nothing (the other options must match that run's)")
    args = p.parse_args()
    with open(args.lua) as f:
        args.lua = f.read()
    if args.lua_string:
        with open(args.lua_string) as f:
            args.lua_string = f.read()
    pipelines = [int(x) for x in args.pipelines.split(",")]
    requests = {int(k): int(v) for k, v in (x.split(":") for x in args.requests.split(","))}
    ts = targets(not args.no_others, args.lua, args.lua_string)
    if args.report_from:
        with open(args.report_from) as f:
            saved = json.load(f)
        for r in saved["results"]:
            if "others_share" in r:  # JSON made the CPU numbers strings
                r["others_share"] = {int(k): v for k, v in r["others_share"].items()}
        args.out = os.path.dirname(args.report_from)
        report(saved["results"], ts, pipelines, args, 0, len(saved["discarded"]))
        return
    os.makedirs(args.out, exist_ok=True)
    started = time.monotonic()

    results = []
    retried = []
    for run in range(args.runs):
        # Rotate the order of the targets from run to run, to spread noise.
        order = ts[run % len(ts):] + ts[:run % len(ts)]
        for target in order:
            for pipeline in pipelines:
                n = requests.get(pipeline, 200_000)
                workdir = os.path.join(args.out, f"run{run + 1}")
                os.makedirs(workdir, exist_ok=True)
                r = None
                for attempt in range(1, args.attempts + 1):
                    try:
                        r = run_case(target, pipeline, n, args, run + 1, workdir)
                    except Exception as e:  # noqa: BLE001 -- reported, the run goes on
                        log(f"[{time.monotonic() - started:6.0f} s] run {run + 1}, "
                            f"{target.name}, P{pipeline}: FAILED: {e}")
                        r = {"target": target.name, "pipeline": pipeline,
                             "run": run + 1, "error": str(e)}
                        break
                    r["attempt"] = attempt
                    worst = max(r["others_share"].values())
                    if worst <= args.max_other_load or attempt == args.attempts:
                        break
                    log(f"[{time.monotonic() - started:6.0f} s] run {run + 1}, "
                        f"{target.name}, P{pipeline}: other work took {worst * 100:.0f}% "
                        f"of a CPU ({r['rps']:,.0f}/s); measured again")
                    retried.append(r)
                results.append(r)
                if "error" in r:
                    continue
                cpu = ", ".join(f"{k} {v:.2f}" for k, v in r["cpu_us_per_decision"].items())
                log(f"[{time.monotonic() - started:6.0f} s] run {run + 1}, {target.name}, "
                    f"P{pipeline}: {r['rps']:,.0f}/s in {r['wall_s']:.1f} s; "
                    f"CPU µs/decision: {cpu}; others on CPU 0, 1: "
                    f"{r['others_share'][0] * 100:.0f}%, {r['others_share'][1] * 100:.0f}%"
                    + (f"; waited {r['quiet_wait_s']:.0f} s for quiet CPUs"
                       if r['quiet_wait_s'] > 1.5 else ""))
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump({"results": results, "discarded": retried}, f, indent=1)
    report(results, ts, pipelines, args, time.monotonic() - started, len(retried))


def report(results, ts, pipelines, args, elapsed, discarded):
    ok = [r for r in results if "error" not in r]
    failed = [r for r in results if "error" in r]

    def of(target, pipeline):
        return [r for r in ok if r["target"] == target and r["pipeline"] == pipeline]

    def med(rs, f):
        vals = [f(r) for r in rs]
        return statistics.median(vals) if vals else None

    lua = next(t.name for t in ts if t.kind == "redis")
    lua_med = {pl: med(of(lua, pl), lambda r: r["rps"]) for pl in pipelines}

    print(f"- redis-benchmark: {CLIENTS} clients, {KEYSPACE:,} random keys "
          f"(`-r {KEYSPACE}`), requests per case: "
          + ", ".join(f"P{pl} {r:,}" for pl, r in
                      sorted({int(k): int(v) for k, v in
                              (x.split(':') for x in args.requests.split(','))}.items()))
          + f"; {args.runs} runs, targets in a rotating order; every case starts fresh "
          "processes")
    print("- placement: the server (ours `--threads 1`, or redis-server) on CPU 1, with "
          "memcached (`-t 1`) also on CPU 1 when it holds the buckets; redis-benchmark on "
          "CPU 0 (read back: " + ", ".join(sorted({
              f"{k} {v}" for r in ok for k, v in r["placement"].items()})) + ")")
    for t in ts:
        if t.serve_args:
            print(f"- {t.name}: `serve {' '.join(t.serve_args)}`")
    print()
    print("| target | P1 decisions/s | P1 / Lua | P16 decisions/s | P16 / Lua "
          "| P1 per run | P16 per run |")
    print("|---|---:|---:|---:|---:|---|---|")
    for t in ts:
        cells = [t.name]
        per_run = []
        for pl in pipelines:
            rs = sorted(of(t.name, pl), key=lambda r: r["run"])
            m = med(rs, lambda r: r["rps"])
            cells.append(fmt_int(m) if m else "failed")
            ratio = (m / lua_med[pl]) if (m and lua_med[pl]) else None
            cells.append(f"**{ratio:.2f}×**" if ratio and t.name != lua else
                         ("1.00×" if t.name == lua and m else "–"))
            per_run.append(", ".join(fmt_int(r["rps"]) for r in rs))
        print("| " + " | ".join(cells + per_run) + " |")
    print()
    print("CPU time per decision, µs (median of the runs), and in brackets the share of "
          "one CPU the process used while the benchmark ran:")
    print()
    print("| target | P | server | memcached | redis-benchmark | server + memcached "
          "| CPU 1 per decision: Lua / this | other load on CPU 0, CPU 1 |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for t in ts:
        for pl in pipelines:
            rs = of(t.name, pl)
            if not rs:
                continue

            def cell(proc):
                if proc not in rs[0]["cpu_us_per_decision"]:
                    return "–"
                us = med(rs, lambda r: r["cpu_us_per_decision"][proc])
                share = med(rs, lambda r: r["cpu_share"][proc])
                return f"{us:.2f} ({share * 100:.0f}%)"

            total = med(rs, lambda r: r["cpu_us_per_decision"]["server"]
                        + r["cpu_us_per_decision"].get("memcached", 0))
            lua_rs = of(lua, pl)
            lua_us = med(lua_rs, lambda r: r["cpu_us_per_decision"]["server"]) if lua_rs else None
            per_cpu = f"{lua_us / total:.2f}×" if lua_us and total else "–"
            o0 = med(rs, lambda r: r["others_share"][0]) * 100
            o1 = med(rs, lambda r: r["others_share"][1]) * 100
            print(f"| {t.name} | {pl} | {cell('server')} | {cell('memcached')} "
                  f"| {cell('redis-benchmark')} | {total:.2f} | {per_cpu} "
                  f"| {o0:.0f}%, {o1:.0f}% |")
    print()
    for t in ts:
        for pl in pipelines:
            rs = of(t.name, pl)
            if rs and "allowed" in rs[0]["calls"]:
                allowed = sum(r["calls"]["allowed"] for r in rs)
                denied = sum(r["calls"]["denied"] for r in rs)
                extra = ""
                if "memcached_commands_per_decision" in rs[0]:
                    mc = med(rs, lambda r: r["memcached_commands_per_decision"])
                    extra = f"; memcached commands per decision {mc:.3f}"
                print(f"- {t.name}, P{pl}: {allowed:,} allowed, {denied:,} denied "
                      f"({denied / max(1, allowed + denied) * 100:.1f}% denied){extra}")
    print()
    print("Other load: CPU time on that CPU that none of the measured processes took "
          "(other work on the machine, steal time), as a share of the case's wall time, "
          "median; before each case the run waited for both CPUs to be under 15% busy "
          f"(at most {args.quiet_wait:.0f} s"
          + (f"; {sum(1 for r in ok if r['busiest_before'] > 0.15)} case(s) started "
             "without it" if any(r["busiest_before"] > 0.15 for r in ok) else "")
          + f"); a case during which other work took more than "
          f"{args.max_other_load * 100:.0f}% of either CPU was measured again (at most "
          f"{args.attempts} times; {discarded} measurement(s) discarded"
          + (f", {sum(1 for r in ok if max(r['others_share'].values()) > args.max_other_load)}"
             " case(s) kept above it" if any(max(r['others_share'].values()) >
                                              args.max_other_load for r in ok) else "")
          + ").")
    print()
    goals = [("ours, embedded store", 2.5), ("ours, memcached (meta)", 1.2)]
    for name, goal in goals:
        m = med(of(name, 16), lambda r: r["rps"])
        for t in ts:
            if t.kind != "redis":
                continue
            base = med(of(t.name, 16), lambda r: r["rps"])
            if m and base:
                ratio = m / base
                print(f"- goal at P16: {name} ≥ {goal}× {t.name}: {ratio:.2f}× — "
                      + ("**met**" if ratio >= goal else "**not met**"))
    if failed:
        print()
        for r in failed:
            print(f"- FAILED: run {r['run']}, {r['target']}, P{r['pipeline']}: {r['error']}")
    print()
    if elapsed:
        print(f"Measured in {elapsed:.0f} s; raw results in `{args.out}/results.json`.")
    else:
        print(f"Reported again from `{args.out}/results.json`.")


if __name__ == "__main__":
    main()
