#!/usr/bin/env python3
"""How many of LogScale's documentation example queries sediment runs (issue 17).

Starts ONE real `sediment server` (binary from $SEDIMENT_BIN or --bin; tests/e2e/harness.py's
SedimentServer, loopback only), ingests the small generic dataset docs/events.ndjson into the
repository `docs` and uploads the lookup files of docs/files/ (the ones the examples name), runs every example of docs/examples.jsonl once and classifies the answer:

- `ran`     HTTP 200 (whatever the rows: the events are generic, the examples' fields mostly absent)
- `refused` HTTP 4xx other than 408: the engine declined the query (unknown function, syntax,
            bad argument); the reason is the error message without its position, with quoted
            text other than a function name replaced by `…`, so that alike refusals group
- `error`   HTTP 5xx, 408 (the query timed out), no answer within --timeout seconds, or the
            server process gone (a crash): a bug, never an acceptable outcome

Prints the share that ran, a table by source page and a table by refusal reason; `--json PATH`
writes the same figures (and each example's outcome). Exit status: 0, or 1 when any example
ended in `error` (test_docs_report.py asserts the same and the floor in docs/floor.txt).

    SEDIMENT_BIN=build/src/cli/sediment python3 tests/query/docs_report.py [--json out.json]

Contract: the server is started on a fresh temporary data dir and stopped by pid at the end
(also after a crash: the report restarts it once per crash, re-ingests, and goes on).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
DOCS_DIR = HERE / "docs"
EXAMPLES = DOCS_DIR / "examples.jsonl"
EVENTS = DOCS_DIR / "events.ndjson"
FILES = DOCS_DIR / "files"  # lookup files the examples name (users.csv, ...), uploaded to `docs`
FLOOR = DOCS_DIR / "floor.txt"
REPO = "docs"
INGEST_TOKEN = "docs-report-ingest-0123456789"
# Every example runs over the dataset's day (its events lie between 00:00 and 03:00).
RANGE = ("2024-01-01T00:00:00Z", "2024-01-02T00:00:00Z")
DEFAULT_TIMEOUT = 20.0

if str(HERE.parent / "e2e") not in sys.path:
    sys.path.append(str(HERE.parent / "e2e"))
if str(HERE) not in sys.path:
    sys.path.append(str(HERE))


@dataclass
class Example:
    source: str  # the documentation page the query is from (its address)
    function: str  # the function the page documents, or "(syntax)"
    query: str
    line: int = 0  # line of examples.jsonl (1-based)


@dataclass
class Outcome:
    line: int
    source: str
    function: str
    kind: str  # ran | refused | error
    status: int  # HTTP status, 0 when there was no answer
    reason: str = ""  # refused/error: normalized message
    detail: str = ""  # refused/error: the message as answered (first 300 characters)


@dataclass
class Report:
    outcomes: list[Outcome] = field(default_factory=list)

    def count(self, kind: str) -> int:
        return sum(1 for o in self.outcomes if o.kind == kind)

    @property
    def total(self) -> int:
        return len(self.outcomes)

    @property
    def ran_share(self) -> float:
        return self.count("ran") / self.total if self.total else 0.0

    def errors(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.kind == "error"]

    def by_source(self) -> dict[str, Counter]:
        out: dict[str, Counter] = defaultdict(Counter)
        for o in self.outcomes:
            out[o.source][o.kind] += 1
        return dict(out)

    def by_reason(self) -> Counter:
        return Counter(o.reason for o in self.outcomes if o.kind == "refused")

    def figures(self) -> dict:
        return {
            "total": self.total,
            "ran": self.count("ran"),
            "refused": self.count("refused"),
            "error": self.count("error"),
            "ran_percent": round(100.0 * self.ran_share, 1),
            "by_source": {s: dict(c) for s, c in sorted(self.by_source().items())},
            "by_reason": dict(self.by_reason().most_common()),
            "outcomes": [asdict(o) for o in self.outcomes],
        }


def load_examples(path: Path = EXAMPLES) -> list[Example]:
    """Examples of an examples.jsonl: one JSON object {source, function, query} per line; a
    malformed line raises ValueError naming it."""
    out = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            d = json.loads(line)
            ex = Example(source=str(d["source"]), function=str(d["function"]), query=str(d["query"]), line=n)
        except (ValueError, KeyError, TypeError) as e:
            raise ValueError(f"{path.name}:{n}: {e}") from None
        if not ex.query.strip():
            raise ValueError(f"{path.name}:{n}: empty query")
        out.append(ex)
    return out


_POSITION_RE = re.compile(r"\s*\(?at (position|line) \d+(:\d+)?\)?\s*$")
_QUOTED_RE = re.compile(r"'[^']*'|\"[^\"]*\"")


def refusal_reason(message: str) -> str:
    """The grouping key of a refusal: the message without its trailing position; in messages
    other than "unknown function 'X'" quoted text longer than three characters becomes `…`
    (so "expected a value but found 'foo'" and "... 'bar'" group, while "unexpected ':'" and
    "unexpected ','" stay apart: the token is the information there)."""
    m = _POSITION_RE.sub("", message.strip())
    if m.startswith("unknown function"):
        return m
    m = _QUOTED_RE.sub(lambda q: q.group(0) if len(q.group(0)) <= 5 else "…", m)
    return re.sub(r"\b\d+\b", "N", m)


def error_message(body: str) -> str:
    try:
        d = json.loads(body)
        if isinstance(d, dict) and isinstance(d.get("error"), str):
            return d["error"]
    except ValueError:
        pass
    return body.strip()[:300]


class DocsServer:
    """A SedimentServer with the generic dataset ingested and searchable."""

    def __init__(self, root: Path, storage: str = "segments") -> None:
        from harness import API_TOKEN, SedimentServer  # noqa: PLC0415 (needs the sys.path above)
        import corpus as corpus_lib  # noqa: PLC0415

        self.corpus_lib = corpus_lib
        self.events = corpus_lib.load_dataset(EVENTS)
        self.storage = storage
        self.server = SedimentServer(root / "data", root / "logs",
                                     ingest_tokens=[f"{REPO}:{INGEST_TOKEN}"], api_tokens=[API_TOKEN],
                                     flush_age_ms=100 if storage == "segments" else 3_600_000)

    def start(self) -> None:
        from harness import wait_until  # noqa: PLC0415

        s = self.server
        s.start()
        r = s.ingest("/api/v1/ingest/humio-structured", self.corpus_lib.humio_structured_body(self.events),
                     token=INGEST_TOKEN)
        if r.status_code != 200:
            raise RuntimeError(f"ingest of {EVENTS.name}: {r.status_code} {r.text}\n{s.describe()}")
        for f in sorted(FILES.glob("*")):
            r = s.session.post(f"{s.url}/api/v1/repositories/{REPO}/files", params={"name": f.name},
                               data=f.read_bytes(), headers={"Authorization": f"Bearer {s.api_token}"},
                               timeout=15)
            if r.status_code != 200:
                raise RuntimeError(f"upload of lookup file {f.name}: {r.status_code} {r.text}")
        if self.storage == "segments":
            wait_until(s.quiet, timeout=20, what="every buffer flushed to segments")
        else:
            wait_until(s.digested, timeout=20, what="digest caught up")
        lo, hi = (self.corpus_lib.parse_time(t) for t in RANGE)
        deadline = time.monotonic() + 20
        while True:
            r = s.query_raw("count()", lo, hi, repo=REPO)
            if r.status_code == 200 and r.json() and int(r.json()[0].get("_count", -1)) == len(self.events):
                return
            if time.monotonic() >= deadline:
                raise RuntimeError(f"count() never answered {len(self.events)}: {r.status_code} {r.text[:300]}")
            time.sleep(0.1)

    def alive(self) -> bool:
        p = self.server.proc
        return p is not None and p.poll() is None

    def restart(self) -> None:
        self.server.kill()
        self.server.start()

    def stop(self) -> None:
        self.server.cleanup()


def run_example(ds: DocsServer, ex: Example, timeout: float) -> Outcome:
    import requests  # noqa: PLC0415

    lo, hi = (ds.corpus_lib.parse_time(t) for t in RANGE)
    s = ds.server
    body = json.dumps({"queryString": ex.query, "start": lo, "end": hi, "isLive": False})
    base = dict(line=ex.line, source=ex.source, function=ex.function)
    try:
        r = s.session.post(f"{s.url}/api/v1/repositories/{REPO}/query", data=body, timeout=timeout,
                           headers={"Content-Type": "application/json", "Authorization": f"Bearer {s.api_token}"})
    except requests.Timeout:
        return Outcome(**base, kind="error", status=0, reason=f"no answer within {timeout:g} s")
    except requests.RequestException as e:
        crashed = not ds.alive()
        return Outcome(**base, kind="error", status=0,
                       reason="server crashed" if crashed else "connection failed", detail=str(e)[:300])
    if r.status_code == 200:
        try:
            ok = isinstance(r.json(), list)
        except ValueError:
            ok = False
        if ok:
            return Outcome(**base, kind="ran", status=200)
        return Outcome(**base, kind="error", status=200, reason="200 without a JSON array",
                       detail=r.text[:300])
    msg = error_message(r.text)
    if r.status_code >= 500 or r.status_code == 408:
        return Outcome(**base, kind="error", status=r.status_code, reason=f"HTTP {r.status_code}",
                       detail=msg[:300])
    return Outcome(**base, kind="refused", status=r.status_code, reason=refusal_reason(msg), detail=msg[:300])


def run_report(examples: list[Example], *, storage: str = "segments", timeout: float = DEFAULT_TIMEOUT,
               root: Path | None = None) -> Report:
    """Runs every example against a fresh server (stopped before returning)."""
    with tempfile.TemporaryDirectory(prefix="docs-report-") as tmp:
        ds = DocsServer(Path(root or tmp), storage)
        rep = Report()
        try:
            ds.start()
            for ex in examples:
                o = run_example(ds, ex, timeout)
                rep.outcomes.append(o)
                if o.kind == "error" and not ds.alive():
                    o.reason = "server crashed"
                    o.detail = (o.detail + "\n" + ds.server.describe(tail=2000))[:4000]
                    ds.restart()
        finally:
            ds.stop()
    return rep


def short_source(url: str) -> str:
    return re.sub(r"^https?://", "", url)


def render(rep: Report) -> str:
    out = [f"docs examples: {rep.total}  ran {rep.count('ran')} ({100 * rep.ran_share:.1f}%)  "
           f"refused {rep.count('refused')}  error {rep.count('error')}", ""]
    rows = sorted(rep.by_source().items(), key=lambda kv: (-sum(kv[1].values()), kv[0]))
    w = max([len(short_source(s)) for s, _ in rows] + [6])
    out.append(f"{'source':<{w}}  total  ran  refused  error")
    for s, c in rows:
        out.append(f"{short_source(s):<{w}}  {sum(c.values()):>5}  {c['ran']:>3}  {c['refused']:>7}  {c['error']:>5}")
    out.append("")
    out.append("refusals by reason:")
    for reason, n in rep.by_reason().most_common():
        out.append(f"  {n:>4}  {reason}")
    errs = rep.errors()
    if errs:
        out.append("")
        out.append("ERRORS (bugs):")
        for o in errs:
            out.append(f"  examples.jsonl:{o.line} {short_source(o.source)}: {o.reason} {o.detail[:200]}")
    return "\n".join(out)


def read_floor(path: Path = FLOOR) -> float:
    """The lowest acceptable ran-share in percent: the first number in floor.txt (comment lines
    start with #)."""
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            return float(line.split()[0])
    raise ValueError(f"{path}: no number")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", type=Path, help="write the figures (and every outcome) here")
    ap.add_argument("--bin", help="sediment binary (default: $SEDIMENT_BIN)")
    ap.add_argument("--examples", type=Path, default=EXAMPLES)
    ap.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, help="seconds per query")
    ap.add_argument("--storage", choices=["segments", "buffers"],
                    default=os.environ.get("QUERY_CORPUS_STORAGE", "segments"))
    args = ap.parse_args(argv)
    if args.bin:
        os.environ["SEDIMENT_BIN"] = args.bin
    rep = run_report(load_examples(args.examples), storage=args.storage, timeout=args.timeout)
    print(render(rep))
    if args.json:
        args.json.write_text(json.dumps(rep.figures(), indent=1) + "\n", encoding="utf-8")
    return 1 if rep.errors() else 0


if __name__ == "__main__":
    sys.exit(main())
