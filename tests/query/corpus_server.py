"""The fixture of the query corpus (imported by test_corpus.py; not a conftest.py, so that this
directory and tests/e2e, whose tests import their conftest by name, run in one pytest session):
ONE real `sediment server` (binary from $SEDIMENT_BIN, see
tests/e2e/harness.py) on a fresh data dir, with every dataset of data/ ingested into its own
repository (the dataset's file stem) through /api/v1/ingest/humio-structured.

Contract:
- `corpus` (session scope) is a `Corpus`: the server plus `expected_counts` (repo -> events) and
  `setup_notes` (problems seen while waiting for the data; the cases report them on failure).
  Setup waits until the data is in place (next point) and until `count()` over each repository answers the
  number of events ingested (at most SEARCHABLE_TIMEOUT seconds; after that the cases run anyway).
- Where the events are read from is fixed, not left to timing: by default (QUERY_CORPUS_STORAGE
  unset or `segments`) every buffer is flushed to segment files before the cases run; with
  QUERY_CORPUS_STORAGE=buffers nothing is flushed (the digest's in-memory buffers answer).
- The server is stopped by pid at the end of the session (SedimentServer.cleanup).
- `bounded_test` (autouse where imported) bounds each test with faulthandler (E2E_TEST_TIMEOUT,
  as in tests/e2e).
"""

from __future__ import annotations

import faulthandler
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
if str(HERE.parent / "e2e") not in sys.path:
    sys.path.append(str(HERE.parent / "e2e"))

from harness import API_TOKEN, TEST_TIMEOUT, SedimentServer, wait_until  # noqa: E402
import corpus as corpus_lib  # noqa: E402

DATA_DIR = HERE / "data"
SEARCHABLE_TIMEOUT = 20.0
STORAGE = os.environ.get("QUERY_CORPUS_STORAGE", "segments")


def ingest_token(repo: str) -> str:
    return f"query-corpus-{repo}-0123456789"


@dataclass
class Corpus:
    server: SedimentServer
    expected_counts: dict[str, int] = field(default_factory=dict)
    setup_notes: list[str] = field(default_factory=list)


@pytest.fixture(autouse=True)
def bounded_test():
    faulthandler.dump_traceback_later(TEST_TIMEOUT, exit=True)
    yield
    faulthandler.cancel_dump_traceback_later()


@pytest.fixture(scope="session")
def corpus(tmp_path_factory) -> Corpus:
    datasets = {p.stem: corpus_lib.load_dataset(p) for p in sorted(DATA_DIR.glob("*.ndjson"))}
    if STORAGE not in ("segments", "buffers"):
        pytest.fail(f"QUERY_CORPUS_STORAGE={STORAGE!r}: want segments or buffers", pytrace=False)
    root = tmp_path_factory.mktemp("query-corpus")
    s = SedimentServer(root / "data", root / "logs",
                       ingest_tokens=[f"{repo}:{ingest_token(repo)}" for repo in datasets],
                       api_tokens=[API_TOKEN],
                       flush_age_ms=100 if STORAGE == "segments" else 3_600_000)
    try:
        s.start()
        c = Corpus(server=s)
        for repo, events in datasets.items():
            r = s.ingest("/api/v1/ingest/humio-structured", corpus_lib.humio_structured_body(events),
                         token=ingest_token(repo))
            assert r.status_code == 200, f"ingest of dataset {repo}: {r.status_code} {r.text}\n{s.describe()}"
            c.expected_counts[repo] = len(events)
        if STORAGE == "segments":
            wait_until(s.quiet, timeout=SEARCHABLE_TIMEOUT, what="every buffer flushed to segments")
        else:
            wait_until(s.digested, timeout=SEARCHABLE_TIMEOUT, what="digest caught up")
            assert s.buffered_events() == sum(len(e) for e in datasets.values()), \
                f"events were flushed despite the flush age\n{s.describe()}"
        deadline = time.monotonic() + SEARCHABLE_TIMEOUT
        for repo, events in datasets.items():
            lo = min(e["@timestamp"] for e in events)
            hi = max(e["@timestamp"] for e in events) + 1
            last = None
            while True:
                r = s.query_raw("count()", lo, hi, repo=repo)
                last = f"{r.status_code} {r.text[:300]}"
                if r.status_code == 200:
                    try:
                        rows = r.json()
                        if len(rows) == 1 and int(rows[0].get("_count", -1)) == len(events):
                            break
                    except (ValueError, TypeError, AttributeError):
                        pass
                if time.monotonic() >= deadline:
                    c.setup_notes.append(f"count() over repository {repo} never answered "
                                         f"{len(events)} events (last answer: {last})")
                    break
                time.sleep(0.1)
        yield c
    finally:
        s.cleanup()
