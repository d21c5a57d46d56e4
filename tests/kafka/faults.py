"""Helpers for the broker-fault tests: timestamped ingest clients and the exactly-once checker.

Every request a client sends is recorded with its monotonic start and end time, its answer (HTTP
status or exception name) and the event ids it carried, so a test can ask "which requests started
after the broker was killed and were answered 200 before it came back".

Event ids are `<run>-<client>-<seq>`, each sent once: a batch that failed is never retried with the
same ids, so an unacknowledged event may or may not be stored, and must be stored at most once.
"""

from __future__ import annotations

import json
import random
import re
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

import requests

from harness import SedimentServer, wait_until


@dataclass
class Sent:
    start: float  # time.monotonic() before the request
    end: float  # time.monotonic() when the answer (or the error) arrived
    status: int | str  # HTTP status, or the exception class name
    ids: list[str]
    retry_after: str | None = None
    body: str = ""


class IngestClient(threading.Thread):
    """Sends humio-structured batches of 1..5 uniquely numbered events until stopped, spread over
    a few datasources (tags) and so over several partitions. Thread-safe reads of `sent` go through
    snapshot()."""

    def __init__(self, server: SedimentServer, run: str, idx: int, stop: threading.Event, *,
                 http_timeout: float, pause: float = 0.01, datasources: int = 4):
        super().__init__(name=f"ingest-client-{idx}", daemon=True)
        self.server, self.run_id, self.idx, self.stop_event = server, run, idx, stop
        self.http_timeout, self.pause, self.datasources = http_timeout, pause, datasources
        self.rng = random.Random(idx)
        self.seq = 0
        self._mu = threading.Lock()
        self._sent: list[Sent] = []

    def snapshot(self) -> list[Sent]:
        with self._mu:
            return list(self._sent)

    def _batch(self) -> tuple[list[str], str]:
        n = self.rng.randint(1, 5)
        ids = [f"{self.run_id}-{self.idx}-{self.seq + i}" for i in range(n)]
        self.seq += n
        ds = str(self.rng.randrange(self.datasources))
        body = [{"tags": {"client": str(self.idx), "ds": ds},
                 "events": [{"timestamp": int(time.time() * 1000), "rawstring": f"id={i} fault test"} for i in ids]}]
        return ids, json.dumps(body)

    def run(self) -> None:
        session = requests.Session()
        headers = {"Authorization": f"Bearer {self.server.ingest_token}", "Content-Type": "application/json"}
        url = self.server.url + "/api/v1/ingest/humio-structured"
        while not self.stop_event.is_set():
            ids, body = self._batch()
            t0 = time.monotonic()
            try:
                r = session.post(url, data=body.encode(), headers=headers, timeout=self.http_timeout)
                rec = Sent(t0, time.monotonic(), r.status_code, ids, r.headers.get("Retry-After"),
                           "" if r.status_code == 200 else r.text[:300])
            except requests.RequestException as e:
                rec = Sent(t0, time.monotonic(), type(e).__name__, ids)
                session.close()
                session = requests.Session()
            with self._mu:
                self._sent.append(rec)
            time.sleep(self.pause)
        session.close()


class ClientPool:
    """N IngestClients against one server; `records()` merges their histories."""

    def __init__(self, server: SedimentServer, run: str, n: int, *, http_timeout: float, pause: float = 0.01):
        self.stop_event = threading.Event()
        self.clients = [IngestClient(server, run, i, self.stop_event, http_timeout=http_timeout, pause=pause)
                        for i in range(n)]

    def __enter__(self) -> "ClientPool":
        for c in self.clients:
            c.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop(timeout=60)

    def stop(self, timeout: float = 60) -> None:
        self.stop_event.set()
        deadline = time.monotonic() + timeout
        for c in self.clients:
            c.join(timeout=max(0.1, deadline - time.monotonic()))
        alive = [c.name for c in self.clients if c.is_alive()]
        assert not alive, f"client threads did not stop: {alive}"

    def records(self) -> list[Sent]:
        out = [rec for c in self.clients for rec in c.snapshot()]
        out.sort(key=lambda r: r.start)
        return out

    def acked_ids(self, before: float | None = None) -> set[str]:
        """Ids of events answered 200 (whose answer arrived before `before`, if given)."""
        return {i for r in self.records() if r.status == 200 and (before is None or r.end <= before) for i in r.ids}

    def attempted_ids(self) -> set[str]:
        return {i for r in self.records() for i in r.ids}

    def wait_for_ok_started_after(self, t: float, timeout: float, what: str) -> Sent:
        """Waits until a request that started after monotonic time `t` was answered 200."""
        def find():
            return next((r for r in self.records() if r.start > t and r.status == 200), None)
        return wait_until(find, timeout=timeout, interval=0.1, what=what)


def summarize(records: list[Sent], t0: float, marks: dict[str, float]) -> str:
    """Per-second status counts relative to t0 (by request start) with the marks, for failure messages."""
    by_sec: dict[int, Counter] = {}
    for r in records:
        by_sec.setdefault(int(r.start - t0), Counter())[r.status] += 1
    lines = [f"marks (s): {', '.join(f'{k}={v - t0:.2f}' for k, v in marks.items())}"]
    for sec in sorted(by_sec):
        lines.append(f"  t={sec:3d}s {dict(by_sec[sec])}")
    return "\n".join(lines)


ID_RE = re.compile(r"id=(\S+)")


def query_ids(s: SedimentServer, run: str) -> tuple[Counter, list[str]]:
    """(occurrences of each event id found by a query for `run`, X-Sediment-Warning values)."""
    end = int(time.time() * 1000) + 3_600_000
    r = s.query_raw(run, 0, end, ndjson=True)
    assert r.status_code == 200, f"query: {r.status_code} {r.text[:500]}"
    warnings = [v for k, v in r.headers.items() if k.lower() == "x-sediment-warning"]
    found: Counter = Counter()
    for line in r.text.splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        m = ID_RE.search(row["@rawstring"])
        assert m, f"unexpected event {row}"
        found[m.group(1)] += 1
    return found, warnings


def wait_all_found(s: SedimentServer, run: str, ids: set[str], timeout: float) -> Counter:
    """Polls until every id in `ids` is found (other ingest may go on). Returns the last answer."""
    last: dict = {}

    def ok():
        found, _ = query_ids(s, run)
        last["found"] = found
        return ids <= set(found)

    try:
        wait_until(ok, timeout=timeout, interval=0.5, what=f"{len(ids)} acknowledged events found")
    except AssertionError:
        found = last.get("found", Counter())
        missing = sorted(ids - set(found))
        raise AssertionError(f"{len(missing)} of {len(ids)} acknowledged events not found within {timeout}s, "
                             f"e.g. {missing[:10]}\n{s.describe()}")
    return last["found"]


def check_exactly_once(s: SedimentServer, run: str, acked: set[str], attempted: set[str], label: str,
                       settle_timeout: float = 60) -> dict:
    """After ingest stopped: waits for the digest to reach the log end, then every acknowledged
    event must be found exactly once, unacknowledged ones at most once, nothing unknown."""
    wait_until(s.digested, timeout=settle_timeout, interval=0.2, what=f"{label}: digest caught up with the log end")
    found, warnings = query_ids(s, run)
    dups = sorted(i for i, n in found.items() if n > 1)
    missing = sorted(acked - set(found))
    unknown = sorted(set(found) - attempted)
    report = {"label": label, "acked": len(acked), "attempted": len(attempted), "found": sum(found.values()),
              "unacked_found": len(set(found) - acked), "duplicates": len(dups), "missing": len(missing),
              "unknown": len(unknown)}
    print(f"exactly-once check: {report}")
    assert not warnings, f"{label}: query warnings {warnings}"
    assert not missing, f"{label}: {len(missing)} acknowledged events lost, e.g. {missing[:10]}; {report}"
    assert not dups, f"{label}: {len(dups)} events stored more than once, e.g. {dups[:10]}; {report}"
    assert not unknown, f"{label}: events nobody sent: {unknown[:10]}"
    return report


@dataclass
class Window:
    """A fault interval in monotonic time: `begin` when the fault was complete (broker process
    gone), `end` when recovery began (the broker was launched again)."""
    begin: float
    end: float = field(default=float("inf"))

    def acked_inside(self, records: list[Sent]) -> list[Sent]:
        """200 answers to requests that started after the fault and were answered before recovery
        began: nothing can have acknowledged those events."""
        return [r for r in records if r.status == 200 and r.start > self.begin and r.end < self.end]
