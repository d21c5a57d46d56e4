"""The harness's own readiness checks (no server needed): a status page whose commit-log offsets
are unknown or old must never count as "caught up" — that false positive once let a fault test query
before the digest had read the events acknowledged after a broker restart."""

from harness import SedimentServer


def status(age_ms, parts):
    return {"logOffsetsAgeMs": age_ms, "ingestPartitions": max(1, len(parts)),
            "partitions": [{"logEnd": e, "nextOffset": n, "bufferedEvents": b} for e, n, b in parts]}


def test_caught_up_needs_known_fresh_log_ends():
    ok = status(10, [(5, 5, 0), (0, 0, 0)])
    assert SedimentServer._caught_up(ok, need_flushed=False)
    assert SedimentServer._caught_up(ok, need_flushed=True)
    # Unknown log end (the server could not ask the log) is not caught up.
    assert not SedimentServer._caught_up(status(10, [(5, 5, 0), (-1, 0, 0)]), need_flushed=False)
    # No reading yet, or an old one.
    assert not SedimentServer._caught_up(status(-1, [(5, 5, 0)]), need_flushed=False)
    assert not SedimentServer._caught_up(status(60_000, [(5, 5, 0)]), need_flushed=False)
    # Behind, or consumed but still buffered.
    assert not SedimentServer._caught_up(status(10, [(6, 5, 0)]), need_flushed=False)
    assert SedimentServer._caught_up(status(10, [(5, 5, 3)]), need_flushed=False)
    assert not SedimentServer._caught_up(status(10, [(5, 5, 3)]), need_flushed=True)
    # No partition assigned yet, or one still being claimed.
    assert not SedimentServer._caught_up(status(10, []), need_flushed=False)
    some = status(10, [(5, 5, 0)])
    some["ingestPartitions"] = 2
    assert not SedimentServer._caught_up(some, need_flushed=False)
    claiming = status(10, [(5, 5, 0)])
    claiming["partitions"][0]["claimed"] = False
    assert not SedimentServer._caught_up(claiming, need_flushed=False)
