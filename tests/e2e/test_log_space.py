"""The embedded commit log gives back its space on a single node (issue 16, item 6): once the
digest has stored every event in segments and truncated the log below the safe offset, each
partition's active file is sealed by age (--log-file-age-ms) and deleted, so the log part of the
data dir shrinks to (nearly) nothing. Before, each partition's one active file was never cut and
kept every digested record until it reached --log-file-bytes."""

from __future__ import annotations

import os
import random
import time
from pathlib import Path

import pytest

from harness import local_segment_bytes, marker, wait_until

pytestmark = pytest.mark.embedded_log_only("reads the embedded log's files under the data dir")


def dir_bytes(d: Path) -> int:
    total = 0
    for root, _, names in os.walk(d):
        for n in names:
            try:
                total += os.stat(os.path.join(root, n)).st_size
            except FileNotFoundError:
                pass
    return total


def test_digested_log_files_are_deleted_after_settling(server_factory):
    s = server_factory(flush_age_ms=200, extra_args=["--log-file-age-ms", "500",
                                                     "--safe-offset-interval-ms", "300"])
    run = marker("logspace")
    rng = random.Random(16)
    words = ["GET", "POST", "/api/v1/items", "/login", "200", "404", "500", "user", "session",
             "timeout", "retry", "cache", "miss", "hit"]
    now = int(time.time() * 1000)
    sent = sent_bytes = 0
    # ~6 MB over 8 datasources (so most partitions get records), 30 requests.
    for k in range(30):
        tag = f"h{k % 8}"
        events = []
        for i in range(800):
            raw = f"{run} {tag} {k}-{i} " + " ".join(rng.choice(words) for _ in range(30))
            events.append({"timestamp": now + k * 1000 + i, "rawstring": raw})
            sent_bytes += len(raw)
        r = s.ingest("/api/v1/ingest/humio-structured", [{"tags": {"host": tag}, "events": events}])
        assert r.status_code == 200, r.text
        sent += len(events)
    log_dir = Path(s.data_dir) / "log"
    log_after_ingest = dir_bytes(log_dir)
    wait_until(lambda: s.quiet() and s.count(run, start=0) == sent, timeout=60,
               what=f"{sent} events in segments")
    # Settled: the ingest log holds no record any more, only empty active files and START files
    # (with --log-file-age-ms 0, as before the age roll, it keeps ~1.5 MB: every record).
    wait_until(lambda: dir_bytes(log_dir / "ingest") < 4096, timeout=60,
               what=f"the ingest log to shrink (now {dir_bytes(log_dir / 'ingest')} bytes)")
    _, seg = local_segment_bytes(s.data_dir)
    total = dir_bytes(Path(s.data_dir))
    print(f"sent {sent_bytes} raw bytes; log after ingest {log_after_ingest}, after settling "
          f"{dir_bytes(log_dir)} (ingest {dir_bytes(log_dir / 'ingest')}); segments {seg}; "
          f"data dir {total} ({total / max(seg, 1):.2f}x segments)")
    assert s.count(run, start=0) == sent
    assert total < 1.2 * seg + (1 << 20), "data dir over 1.2x the segments (+1 MiB of Global)"
