"""A full disk (issue 13): on a real small tmpfs holding the data dir, ingest answers 503 with
Retry-After while the commit log cannot write (never 200 for an event that is not durable, never a
crash), the status says "degraded", and everything resumes by itself once space returns: every
acknowledged event is found exactly once. Needs root to mount the tmpfs; skipped with the reason
where mounting is refused."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from conftest import SedimentServer, embedded_log_only, marker, wait_until

FS_BYTES = 48 << 20


@pytest.fixture
def small_fs(tmp_path):
    mnt = tmp_path / "small"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={FS_BYTES}", "tmpfs", str(mnt)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({r.stderr.strip() or r.returncode}); the disk-full test "
                    "needs root and mount rights")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def fill(path: Path) -> int:
    """Writes `path` until the file system is full; returns the bytes written."""
    written = 0
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        for chunk in (1 << 20, 64 << 10, 4 << 10, 512, 16, 1):
            block = b"\0" * chunk
            while True:
                try:
                    n = os.write(fd, block)
                except OSError:
                    break
                written += n
                if n < chunk:
                    break
    finally:
        os.close(fd)
    return written


@embedded_log_only("fills the file system under the embedded commit log")
def test_full_disk_answers_503_and_resumes_by_itself(small_fs, tmp_path):
    s = SedimentServer(small_fs / "data", tmp_path / "logs", partitions=2, flush_age_ms=300)
    try:
        s.start()
        m = marker()
        acked: list[str] = []

        def send(i: int) -> int:
            line = f"{m} event {i} " + "x" * 2000
            r = s.ingest("/api/v1/ingest/raw", line)
            assert r.status_code in (200, 503), (r.status_code, r.text)
            if r.status_code == 200:
                acked.append(line)
            else:
                assert r.headers.get("Retry-After"), r.headers
            return r.status_code

        for i in range(5):
            assert send(i) == 200
        wait_until(lambda: s.count(m) == 5 and s.quiet(), timeout=15, what="first events in segments")

        filler = small_fs / "filler"
        assert fill(filler) > 0
        # Appends that still fit in pages the log file already has may succeed (they are durable);
        # within a few hundred KB the file system must refuse.
        codes = [send(100 + i) for i in range(200)]
        assert 503 in codes, f"no 503 with the file system full: {codes}"
        assert s.proc is not None and s.proc.poll() is None, "the server exited on a full disk"
        st = s.status()
        assert st["health"] == "degraded", st
        # The node keeps answering queries.
        assert s.count(m) >= 5

        filler.unlink()
        deadline = time.monotonic() + 30
        while send(1000) != 200:
            assert time.monotonic() < deadline, "ingest did not resume within 30 s of space returning"
            time.sleep(0.2)
        for i in range(5):
            assert send(2000 + i) == 200
        def found() -> list[str]:
            return [r["@rawstring"] for r in s.query(m, 0, int(time.time() * 1000) + 3_600_000)]

        wait_until(lambda: set(acked) <= set(found()) and s.quiet(), timeout=30,
                   what="every acknowledged event searchable")
        raws = found()
        assert len(raws) == len(set(raws)), "duplicates"
        wait_until(lambda: s.status()["health"] == "ok", timeout=30, what="health back to ok")
    finally:
        s.cleanup()
