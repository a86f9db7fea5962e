"""What the Python drivers of the benchmarks (bench/serve/run.py,
bench/web/run.py, bench/misses.py) share: progress on stderr, a free
loopback port for a server they start, and memcached started on CPU 0."""

import os
import socket
import subprocess
import sys
import time


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port, process, what, seconds=10):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            sys.exit(f"{what} exited with {process.returncode} before listening")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    sys.exit(f"{what} did not listen on port {port} within {seconds} s")


def start_memcached():
    port = free_port()
    process = subprocess.Popen(
        ["taskset", "-c", "0", "memcached", "-t", "1", "-l", "127.0.0.1",
         "-p", str(port), "-U", "0", "-m", "1024", "-c", "4096"]
        # memcached refuses to run as root unless told which user to be.
        + (["-u", "root"] if os.geteuid() == 0 else []),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for_port(port, process, "memcached")
    return process, f"127.0.0.1:{port}"
