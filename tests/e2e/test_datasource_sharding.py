"""Datasource autosharding (src/ingest/README.md, DESIGN section 3): one busy datasource is spread over
several ingest partitions, and a query still finds every event of it exactly once, from the owners'
buffers and from the segments of every partition, before and after a restart."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter

import pytest

from conftest import SedimentServer, marker, wait_until

CLIENTS = 8
REQUESTS = 30
EVENTS = 5
MAX_SHARDS = 4


def ingest_concurrently(s: SedimentServer, run: str) -> set[str]:
    """CLIENTS threads each send REQUESTS requests of EVENTS events of one datasource (#host=busy),
    spread over about 3 s so that several of the sharder's 1 s windows close. Returns the ids sent
    (all acknowledged)."""
    sent: set[str] = set()
    errors: list[str] = []
    lock = threading.Lock()

    def client(c: int) -> None:
        for r in range(REQUESTS):
            ids = [f"{run}-c{c}-r{r}-e{e}" for e in range(EVENTS)]
            body = [{"tags": {"host": "busy"}, "events": [{"rawstring": f"sharded {i}"} for i in ids]}]
            resp = s.ingest("/api/v1/ingest/humio-structured", body)
            with lock:
                if resp.status_code != 200:
                    errors.append(f"{resp.status_code} {resp.text[:200]}")
                else:
                    sent.update(ids)
            time.sleep(0.1)

    threads = [threading.Thread(target=client, args=(c,)) for c in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, f"ingest failed: {errors[:5]}"
    assert len(sent) == CLIENTS * REQUESTS * EVENTS
    return sent


def check_every_event_once(s: SedimentServer, run: str, sent: set[str], label: str) -> set[int]:
    """Every sent event found once (by its id and by @id); returns the partitions of their @id."""
    end = int(time.time() * 1000) + 3_600_000
    r = s.query_raw(run, 0, end, ndjson=True)
    assert r.status_code == 200, f"{label}: {r.status_code} {r.text[:500]}"
    warnings = [v for k, v in r.headers.items() if k.lower() == "x-sediment-warning"]
    assert not warnings, f"{label}: query warnings {warnings}"
    rows = [json.loads(line) for line in r.text.splitlines() if line.strip()]
    found = Counter(row["@rawstring"].split(" ", 1)[1] for row in rows)
    dups = [i for i, n in found.items() if n > 1]
    assert not dups, f"{label}: {len(dups)} events found twice, e.g. {dups[:5]}"
    missing = sorted(sent - set(found))
    assert not missing, f"{label}: {len(missing)} of {len(sent)} events missing, e.g. {missing[:5]}"
    assert set(found) == sent, f"{label}: unexpected events {sorted(set(found) - sent)[:5]}"
    assert len(rows) == len(sent)
    event_ids = Counter(row["@id"] for row in rows)
    assert all(n == 1 for n in event_ids.values()), f"{label}: duplicate @id values"
    assert s.count(run, 0, end) == len(sent), f"{label}: count() disagrees"
    # @id = <partition>-<offset>-<index>
    partitions = {int(i.split("-")[0]) for i in event_ids}
    print(f"{label}: {len(rows)} events in partitions {sorted(partitions)}")
    return partitions


@pytest.mark.commit_log("one datasource appended to several ingest partitions and read back from all of them")
def test_busy_datasource_is_sharded_and_queried_exactly_once(server_factory):
    s = server_factory(
        partitions=8,
        flush_age_ms=500,
        extra_args=["--datasource-shard-bytes-per-second", "1", "--max-datasource-shards", str(MAX_SHARDS)],
    )
    run = marker("shard")
    sent = ingest_concurrently(s, run)

    sharded = s.status()["shardedDatasources"]
    assert len(sharded) == 1, sharded
    assert sharded[0]["repo"] == s.repo and sharded[0]["tags"] == {"#host": "busy"}
    assert 1 < sharded[0]["shards"] <= MAX_SHARDS

    # Right away (buffers and segments), once digested, and once everything is in segments.
    partitions = check_every_event_once(s, run, sent, "after ingest")
    assert len(partitions) > 1, f"one busy datasource stayed in partitions {partitions}"
    assert len(partitions) <= MAX_SHARDS
    wait_until(s.digested, timeout=30, what="digest caught up with the log end")
    assert check_every_event_once(s, run, sent, "digested") == partitions
    wait_until(s.quiet, timeout=30, what="all buffers flushed")
    assert check_every_event_once(s, run, sent, "flushed") == partitions
    segments = s.get_json("/api/v1/cluster/segments")
    seg_partitions = {seg["partition"] for seg in segments["segments"]}
    assert partitions <= seg_partitions, f"segments of partitions {seg_partitions}"

    # After a restart the events come from the segments of every partition.
    s.restart()
    wait_until(s.quiet, timeout=60, what="digest caught up after the restart")
    assert check_every_event_once(s, run, sent, "after restart") == partitions
    # A restarted node starts every datasource at one shard again.
    assert s.status()["shardedDatasources"] == []


@pytest.mark.parametrize("args", [[], ["--datasource-shard-bytes-per-second", "0"]],
                         ids=["default", "zero"])
def test_sharding_off_keeps_a_datasource_in_one_partition(server_factory, args):
    # Off by default: on one broker, spreading a datasource cost more than it saved.
    s = server_factory(partitions=8, extra_args=args)
    run = marker("noshard")
    sent = ingest_concurrently(s, run)
    assert s.status()["shardedDatasources"] == []
    assert len(check_every_event_once(s, run, sent, "sharding off")) == 1
