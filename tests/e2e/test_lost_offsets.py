"""P1 alarm (issue 13, window 3): commit-log records deleted before the digest stored them (Kafka
retention, an outside DeleteRecords) are reported as lost offsets, never skipped silently.

On the embedded log the deletion is simulated offline by advancing the partition's START file
(src/log/FORMAT.md) while the node is stopped and the events are still only in the log."""

from __future__ import annotations

import struct
import subprocess

import pytest

from conftest import SedimentServer, marker, wait_until
from harness import clean_env

LONG_FLUSH_MS = 600_000


def _crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def write_start_file(s: SedimentServer, partition: int, start: int) -> None:
    """START: magic, u32 version 1, u64 start offset, u32 CRC32C of the first 20 bytes (LE)."""
    body = b"SEDLOGST" + struct.pack("<IQ", 1, start)
    path = s.data_dir / "log" / "ingest" / f"p-{partition:05d}" / "START"
    path.write_bytes(body + struct.pack("<I", _crc32c(body)))


@pytest.mark.embedded_log_only("edits the embedded commit log's START file; Kafka's log is not there")
def test_records_deleted_before_they_were_digested_are_reported_lost(server_factory):
    s = server_factory(flush_age_ms=LONG_FLUSH_MS, partitions=1)
    m = marker()
    for i in range(5):  # one request, one record: offsets 0..4
        assert s.ingest("/api/v1/ingest/raw", f"{m} event {i}").status_code == 200
    wait_until(lambda: s.count(m) == 5, timeout=15, what="events searchable from the buffers")
    st = s.status()
    assert st["health"] == "ok", st
    assert st["lostOffsets"] == {"offsets": 0, "partitions": []}, st["lostOffsets"]
    (p0,) = st["partitions"]
    assert p0["logEnd"] == 5 and p0["replayPoint"] == 0, p0
    s.kill()  # a crash: the buffers are not flushed (a graceful stop would), the events are only in the log

    write_start_file(s, 0, 3)  # "retention" deletes offsets 0..2 behind sediment's back
    s.start()
    wait_until(lambda: s.status()["health"] == "degraded", timeout=15, what="status degraded")
    st = s.status()
    lost = st["lostOffsets"]
    assert lost["offsets"] == 3, lost
    (lp,) = lost["partitions"]
    assert lp["partition"] == 0 and lp["rangeCount"] == 1 and lp["offsets"] == 3, lp
    (r,) = lp["ranges"]
    assert (r["first"], r["end"], r["offsets"]) == (0, 3, 3) and r["detectedMs"] > 0, r
    (p0,) = st["partitions"]
    assert p0["lost"]["offsets"] == 3 and p0["lost"]["ranges"][0]["first"] == 0, p0
    assert "lost" in p0["error"], p0

    cluster = s.get_json("/api/v1/cluster")
    assert cluster["health"] == "degraded" and cluster["lostOffsets"] == 3, cluster
    (cp,) = cluster["partitions"]
    assert [(x["first"], x["end"], x["offsets"], x["reportedBy"]) for x in cp["lostRanges"]] == [
        (0, 3, 3, [st["node"]])], cp
    assert any("partition 0" in w and "lost" in w for w in cluster["warnings"]), cluster["warnings"]
    r = subprocess.run([s.bin, "status", "--url", s.url, "--token", s.api_token, "--cluster"], capture_output=True, text=True,
                       timeout=30, env=clean_env())
    assert r.returncode == 0 and "HEALTH DEGRADED: 3 commit-log offsets" in r.stdout, (r.stdout, r.stderr)

    # The records after the gap are digested; the lost ones are gone (not silently "found").
    wait_until(lambda: s.count(m) == 2, timeout=15, what="events after the gap searchable")
    assert "were deleted from the commit log before they were digested" in s.log_text()
