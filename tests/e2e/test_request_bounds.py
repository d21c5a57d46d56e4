"""Bounded work per request: a small JSON body that would expand when flattened is refused with 413
naming the bound, without the server's memory growing with the expansion; plain queries beyond
--max-concurrent-queries are refused with 429 and Retry-After."""
from __future__ import annotations

import concurrent.futures
import re
from pathlib import Path

import pytest

from conftest import marker, wait_until

STRUCTURED = "/api/v1/ingest/humio-structured"
HEC = "/services/collector/event"


def vm_kib(pid: int, key: str) -> int:
    text = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(rf"^{key}:\s+(\d+) kB", text, re.M).group(1))


def nested(depth: int, key_bytes: int, leaves_per_level: int) -> str:
    """JSON text of an object nested `depth` levels under keys of `key_bytes` bytes, with small
    leaves on every level: every field's name repeats the keys above it, so the flattened event is
    ~depth/2 times the body (before the flattener kept a running count, a 411 KB body built a
    200 MB event). Built as text: Python's json module cannot nest 1000 levels."""
    key = "k" * key_bytes
    leaves = "".join(f'"l{i}":1,' for i in range(leaves_per_level))
    return ("{" + leaves + f'"{key}":') * depth + "1" + "}" * depth


@pytest.fixture(scope="module")
def srv(module_server_factory):
    return module_server_factory(name="bounds", extra_args=["--max-concurrent-queries", "1"])


@pytest.mark.parametrize("shape,depth,key_bytes,leaves,bound", [
    ("deep", 1000, 400, 0, "--max-json-depth"),
    ("long-keys", 60, 6000, 10, "--max-event-bytes"),
    ("wide", 1, 1, 5000, "--max-fields-per-event"),
])
def test_amplifying_json_is_413_and_memory_stays_flat(srv, shape, depth, key_bytes, leaves, bound):
    attrs = nested(depth, key_bytes, leaves)
    bodies = {
        STRUCTURED: '[{"events":[{"attributes":' + attrs + "}]}]",
        HEC: '{"event":' + attrs + "}",
    }
    hwm_before = vm_kib(srv.pid, "VmHWM")
    for path, body in bodies.items():
        r = srv.ingest(path, body, headers={"Content-Type": "application/json"})
        assert r.status_code == 413, f"{shape} {path}: {r.status_code} {r.text[:500]}"
        assert bound in r.text, f"{shape} {path}: the answer must name the bound: {r.text[:500]}"
    grown_mib = (vm_kib(srv.pid, "VmHWM") - hwm_before) / 1024
    print(f"{shape}: bodies of {len(bodies[STRUCTURED]) / 1024:.0f} KB answered 413 naming {bound}; "
          f"peak RSS grew by {grown_mib:.1f} MiB")
    assert grown_mib < 64, f"{shape}: peak RSS grew by {grown_mib:.1f} MiB"
    # Nothing of it reached the log, and the server keeps serving.
    assert srv.ingest("/api/v1/ingest/raw", f"{marker()} after {shape}\n").status_code == 200


def test_queries_beyond_the_concurrency_bound_are_429(srv):
    m = marker()
    lines = "".join(f"{m} event {i} status={200 + i % 7} path=/p/{i % 101}\n" for i in range(150_000))
    assert srv.ingest("/api/v1/ingest/raw", lines, timeout=60).status_code == 200
    wait_until(lambda: srv.count(m) == 150_000, timeout=60, what="events visible")

    def one(_):
        r = srv.query_raw(f"{m} | regex(\"path=/p/(?<p>\\\\d+)\") | groupBy(p, function=count())", "1d")
        return r.status_code, r.headers.get("Retry-After"), r.text[:300]

    answers = []
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        for _ in range(3):
            answers += list(pool.map(one, range(8)))
            if any(a[0] == 429 for a in answers):
                break
    codes = sorted(a[0] for a in answers)
    print(f"8 concurrent queries with --max-concurrent-queries 1: status codes {codes}")
    assert set(codes) <= {200, 429}, answers
    assert 200 in codes, answers
    busy = [a for a in answers if a[0] == 429]
    assert busy, f"no query was refused: {codes}"
    assert all(a[1] == "1" and "--max-concurrent-queries" in a[2] for a in busy), busy
    # Once they ended, a query runs again.
    assert srv.query_raw(f"{m} | count()").status_code == 200
