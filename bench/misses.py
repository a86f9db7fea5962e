"""memcached's CPU for an increment and N reads of absent keys in one
round trip, with the reads in three forms: plain meta gets (`mg k v`, an
`EN` each), quiet ones (`mg k v q`, closed by `mn`) and one classic
`get k1 … kN`. A sliding window of many sub-windows reads the ones that
sealed while its client was away, mostly absent, beside its increment:
this tells whether the form of those reads matters to memcached.

    python3 bench/misses.py [--keys 12] [--batches 20000] [--rounds 2]

memcached (`-t 1`) runs on CPU 0 and this client on CPU 1; each form's
figure is memcached's user and system CPU (from /proc) per batch."""

import argparse
import os
import shutil
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from loopback import log, start_memcached  # noqa: E402


def cpu_seconds(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def batch(keys, i, form):
    """The bytes of batch `i` in `form`, and the reply's last bytes."""
    out = f"ma counter{i % 1000} v N60 J1\r\n".encode()
    names = [f"absent{i}_{k}" for k in range(keys)]
    if form == "increment alone":
        return out, None
    if form == "plain mg":
        return out + b"".join(f"mg {n} v\r\n".encode() for n in names), b"EN\r\n" * keys
    if form == "quiet mg, mn":
        return out + b"".join(f"mg {n} v q\r\n".encode() for n in names) + b"mn\r\n", b"MN\r\n"
    return out + ("get " + " ".join(names) + "\r\n").encode(), b"END\r\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keys", type=int, default=12)
    parser.add_argument("--batches", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    if args.keys < 1 or args.batches < 1 or args.rounds < 1:
        parser.error("--keys, --batches and --rounds must be at least 1")
    if shutil.which("memcached") is None:
        sys.exit("memcached is not installed: apt-get install memcached")
    os.sched_setaffinity(0, {1})
    server, address = start_memcached()
    try:
        host, port = address.rsplit(":", 1)
        conn = socket.create_connection((host, int(port)))
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        forms = ["increment alone", "plain mg", "quiet mg, mn", "classic get"]
        print("| round | form | memcached CPU µs/batch | wall µs/batch |")
        print("|---|---|---:|---:|")
        for round_ in range(1, args.rounds + 1):
            for form in forms:
                before, start = cpu_seconds(server.pid), time.time()
                for i in range(args.batches):
                    request, end = batch(args.keys, round_ * args.batches + i, form)
                    conn.sendall(request)
                    reply = b""
                    while not (reply.endswith(end) if end else reply.endswith(b"\r\n")):
                        chunk = conn.recv(65536)
                        if not chunk:
                            sys.exit("memcached closed the connection")
                        reply += chunk
                cpu = (cpu_seconds(server.pid) - before) / args.batches * 1e6
                wall = (time.time() - start) / args.batches * 1e6
                print(f"| {round_} | {form} | {cpu:.2f} | {wall:.1f} |", flush=True)
        log(f"{args.keys} absent keys a batch, {args.batches} batches a form and round")
    finally:
        server.kill()


if __name__ == "__main__":
    main()
