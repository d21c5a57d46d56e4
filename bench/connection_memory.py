#!/usr/bin/env python3
"""Connections held per GiB of server memory (issue 15).

Starts `sediment server` (--server-bin) on a free 127.0.0.1 port with a fresh data dir, reads its
VmRSS and thread count (/proc/PID/status), opens --connections keep-alive connections (each
sends one GET /api/v1/status and reads the answer, then stays open and idle; spread over
127.0.0.2.. so that --max-connections-per-address 1000 is not reached), reads VmRSS and threads
again, and prints the memory one idle connection costs and how many fit in a GiB. Then closes
every socket and stops the server by pid (SIGTERM, then SIGKILL after 15 s), also on error or
Ctrl-C. Python 3 standard library only; loopback only.

    python3 bench/connection_memory.py --server-bin build/src/cli/sediment --connections 5000

A thread-per-connection server (before issue 15) refuses beyond 512 connections: measure it with
--connections 500.
"""

import argparse
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

REQUEST = b"GET /api/v1/status HTTP/1.1\r\nHost: bench\r\n\r\n"


def status_of(pid):
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            out[key] = value.strip()
    return int(out["VmRSS"].split()[0]) * 1024, int(out["Threads"])


def read_answer(sock):
    """Reads one answer with a Content-Length body; returns its status line."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            raise RuntimeError(f"connection closed; got {data[:200]!r}")
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(body) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        body += chunk
    return head.split(b"\r\n")[0].decode()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--server-bin", default="build/src/cli/sediment")
    ap.add_argument("--connections", type=int, default=5000)
    ap.add_argument("--settle", type=float, default=2.0, help="seconds to wait before each reading")
    args = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = args.connections + 256
    if soft != resource.RLIM_INFINITY and soft < need:
        if hard != resource.RLIM_INFINITY and hard < need:
            sys.exit(f"open file hard limit {hard} < {need}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))
    work = tempfile.mkdtemp(prefix="sediment-connmem-")
    port = free_port()
    log = open(os.path.join(work, "server.log"), "wb")
    proc = subprocess.Popen(
        [args.server_bin, "server", "--data-dir", os.path.join(work, "data"), "--listen",
         f"127.0.0.1:{port}", "--api-token", "connmem-api-token", "--ingest-token",
         "bench:connmem-ingest-token"],
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    socks = []
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
                    s.sendall(REQUEST)
                    if read_answer(s).split()[1] == "200":
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("server did not become ready")
            time.sleep(0.1)
        time.sleep(args.settle)
        rss0, threads0 = status_of(proc.pid)
        refused = 0
        t0 = time.monotonic()
        for i in range(args.connections):
            s = socket.socket()
            s.bind((f"127.0.0.{2 + i % 200}", 0))
            s.connect(("127.0.0.1", port))
            s.sendall(REQUEST)
            if read_answer(s).split()[1] != "200":
                refused += 1
            socks.append(s)
        opened = time.monotonic() - t0
        time.sleep(args.settle)
        rss1, threads1 = status_of(proc.pid)
        held = args.connections - refused
        per = (rss1 - rss0) / max(held, 1)
        print(f"server: {args.server_bin}")
        print(f"connections: {held} held idle after one request each ({refused} refused), "
              f"opened in {opened:.1f} s")
        print(f"VmRSS: {rss0 / 2**20:.1f} MiB before, {rss1 / 2**20:.1f} MiB with them: "
              f"{per / 1024:.1f} KiB per connection")
        print(f"threads: {threads0} before, {threads1} with them")
        if per > 0:
            print(f"connections per GiB of RSS: {2**30 / per:,.0f}")
    finally:
        for s in socks:
            s.close()
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
