"""What the Python drivers of the benchmarks (bench/serve/run.py,
bench/web/run.py) share: progress on stderr, and a free loopback port
for a server they start."""

import socket
import sys


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
