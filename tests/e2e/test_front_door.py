"""Issue 15, the front door: thousands of slow or idle connections cost no thread each and do not
keep legitimate clients out.

5,000 sockets from other loopback addresses (127.0.0.2-11, 500 each, under the default
--max-connections-per-address 1000) are held open: half connected and silent (idle keep-alive),
half trickling a header one byte a second (slowloris). Meanwhile 4 clients on 127.0.0.1 ingest
and query: every request must answer 200 within 2 s. The server's thread count (/proc/PID/status)
is printed and must stay bounded. The trickling sockets get 408 once the header timeout (here
8 s) passed since their first byte; the idle ones are never answered.

Bounded: about 20 s; every socket is closed in a finally, the server is stopped by pid (fixture).
"""

from __future__ import annotations

import json
import resource
import socket
import threading
import time

import pytest
import requests

from conftest import API_TOKEN, INGEST_TOKEN, marker, wait_until

IDLE = 2500
SLOW = 2500
ADDRESSES = [f"127.0.0.{i}" for i in range(2, 12)]
HEADER_TIMEOUT_MS = 8000
LOAD_SECONDS = 6.0
CLIENTS = 4
BOUND = 2.0  # seconds a legitimate request may take


def threads_of(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("Threads:"):
                return int(line.split()[1])
    raise AssertionError("no Threads line")


def open_from(address: str, port: int) -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind((address, 0))
    s.connect(("127.0.0.1", port))
    return s


def test_thousands_of_slow_and_idle_sockets_leave_room_for_clients(server_factory):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = IDLE + SLOW + 512
    if hard != resource.RLIM_INFINITY and hard < need:
        pytest.skip(f"open file hard limit {hard} < {need}")
    if soft != resource.RLIM_INFINITY and soft < need:
        resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))
    srv = server_factory(extra_args=["--http-header-timeout-ms", str(HEADER_TIMEOUT_MS)])
    base_threads = threads_of(srv.pid)
    idle: list[socket.socket] = []
    slow: list[socket.socket] = []
    stop = threading.Event()
    samples: list[int] = []
    try:
        t_open = time.monotonic()
        for i in range(IDLE):
            idle.append(open_from(ADDRESSES[i % len(ADDRESSES)], srv.port))
        header = b"POST /api/v1/ingest/raw HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 200
        for i in range(SLOW):
            s = open_from(ADDRESSES[i % len(ADDRESSES)], srv.port)
            s.sendall(header[:1])
            slow.append(s)
        t_first_byte = time.monotonic()
        opened = t_first_byte - t_open

        def trickle() -> None:
            pos = 1
            while not stop.wait(1.0) and pos < len(header):
                for s in slow:
                    try:
                        s.send(header[pos:pos + 1], socket.MSG_DONTWAIT)
                    except OSError:
                        pass  # answered 408 and closed: checked below
                pos += 1

        def sample() -> None:
            while not stop.wait(0.2):
                samples.append(threads_of(srv.pid))

        latencies: list[float] = []
        failures: list[str] = []
        lock = threading.Lock()

        def client(n: int) -> None:
            session = requests.Session()
            end = time.monotonic() + LOAD_SECONDS
            i = 0
            while time.monotonic() < end:
                m = marker(f"fd{n}x{i}")
                body = json.dumps([{"messages": [f"{m} line"]}])
                t0 = time.monotonic()
                try:
                    r = session.post(f"{srv.url}/api/v1/ingest/humio-unstructured", data=body,
                                     headers={"Authorization": f"Bearer {INGEST_TOKEN}"}, timeout=10)
                    what = f"ingest {r.status_code}"
                    ok = r.status_code == 200
                    t1 = time.monotonic()
                    q = json.dumps({"queryString": f"{m} | count()", "start": "1h", "isLive": False})
                    r = session.post(f"{srv.url}/api/v1/repositories/e2e/query", data=q,
                                     headers={"Authorization": f"Bearer {API_TOKEN}",
                                              "Content-Type": "application/json"}, timeout=10)
                    t2 = time.monotonic()
                    ok = ok and r.status_code == 200
                    what += f", query {r.status_code}"
                except requests.RequestException as e:
                    t1 = t2 = time.monotonic()
                    ok, what = False, repr(e)
                with lock:
                    latencies.extend([t1 - t0, t2 - t1])
                    if not ok or t1 - t0 > BOUND or t2 - t1 > BOUND:
                        failures.append(f"client {n} request {i}: {what} in {t1 - t0:.2f} s / {t2 - t1:.2f} s")
                i += 1
            session.close()

        helpers = [threading.Thread(target=trickle), threading.Thread(target=sample)]
        clients = [threading.Thread(target=client, args=(n,)) for n in range(CLIENTS)]
        for t in helpers + clients:
            t.start()
        for t in clients:
            t.join(timeout=LOAD_SECONDS + 30)
        held = threads_of(srv.pid)

        # The idle sockets are held: nothing was answered, none was closed.
        answered_idle = 0
        for s in idle:
            try:
                if s.recv(1, socket.MSG_DONTWAIT | socket.MSG_PEEK) is not None:
                    answered_idle += 1  # data or EOF
            except BlockingIOError:
                pass
        # The trickling ones get 408 once the header timeout passed since their first byte.
        wait_until(lambda: time.monotonic() - t_first_byte > HEADER_TIMEOUT_MS / 1000 + 2,
                   timeout=HEADER_TIMEOUT_MS / 1000 + 5, what="the header timeout")
        stop.set()
        for t in helpers:
            t.join(timeout=5)
        got_408 = 0
        for s in slow:
            try:
                if s.recv(12, socket.MSG_DONTWAIT) == b"HTTP/1.1 408":
                    got_408 += 1
            except OSError:
                pass
        peak = max(samples + [held])
        print(f"\nfront door: {IDLE} idle + {SLOW} trickling sockets opened in {opened:.1f} s; "
              f"{len(latencies)} requests by {CLIENTS} clients, slowest {max(latencies):.3f} s; "
              f"server threads {base_threads} before, peak {peak}; trickling sockets answered 408: "
              f"{got_408}/{SLOW}")
        assert not failures, failures[:10]
        assert len(latencies) >= 4 * CLIENTS
        assert answered_idle == 0
        assert got_408 == SLOW
        # One thread per connection would be thousands; the I/O and handler pools are a few.
        assert peak < base_threads + 64, (base_threads, peak)
    finally:
        stop.set()
        for s in idle + slow:
            s.close()
