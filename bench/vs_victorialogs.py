#!/usr/bin/env python3
"""sediment beside VictoriaLogs: the same corpus, the same queries, every answer checked.

Builds nothing. Uses <build-dir>/src/cli/sediment and <build-dir>/bench/sediment-gen (and
sediment-benchutil when there is no zstd command), and a VictoriaLogs binary that it installs
once with `go install` into a cache folder outside the repository (--cache-dir). One run:
  1. corpus: sediment-gen writes web access logs (apache) and JSON application logs, half the
     bytes each, both spread over the same 24 h ending ~30 min ago, with a needle planted ~5
     times in each. Every line is parsed once into events with the same fields for both servers:
     sediment gets humio-structured batches (tag `source`, log time, the parsed fields,
     @rawstring = the line), VictoriaLogs gets /insert/jsonline (`_time`, `_msg` = the line,
     `source` as its stream field, the same fields). The parse also counts the truth of every
     query (per status, per 5 min, per url, per regex group, needles).
  2. ingest, one server at a time (the other idle): events/s until the last 200 and until
     `count()` sees every event, the server's CPU seconds per raw GB until searchable and until
     settled (its data dir stops changing: flushes and merges done), peak RSS (VmHWM).
  3. stored bytes: sediment's segment files and whole data dir; VictoriaLogs' partitions and
     whole data dir; beside zstd -3 of the raw files.
  4. queries, interleaved (sediment, VictoriaLogs, sediment, ...), best of --runs each, with the
     server's CPU seconds; every answer checked against the truth and against the other side.
     Peak RSS of each server during the high-cardinality groupBy (VmHWM reset before it).
  5. sediment alone restarted with --query-threads 1: the same queries, speedup N threads / 1.
Exits non-zero when a step fails or any answer differs (naming the query); speed never fails a
run. Without Go or VictoriaLogs it says so and runs sediment alone, still checking every answer
against the truth. Only loopback addresses are contacted; both servers are stopped by pid.
"""

import argparse
import calendar
import collections
import heapq
import json
import multiprocessing
import os
import platform
import re
import secrets
import shutil
import signal
import subprocess
import sys
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run_benchmarks as rb  # noqa: E402 (bench/run_benchmarks.py: server, ingest, CPU helpers)
from run_benchmarks import BenchError, human_bytes, log  # noqa: E402

VL_MODULE = "github.com/VictoriaMetrics/VictoriaLogs/app/victoria-logs"
VL_VERSION = "v1.52.1"
DAY_MS = 86_400_000
SPAN_MS = 300_000  # timeChart span (5m)
TOP_K = 10  # rows of the high-cardinality groupBy's top
TAIL = 100
# Query-time extraction: the 3 digits after a closing quote and a space (the access log status).
SED_REGEX = r'regex("\" (?<code>\d{3}) ") | groupBy(code)'
VL_REGEX = r'* | extract_regexp `" (?P<code>\d{3}) ` | stats by (code) count() as _count'
PY_REGEX = re.compile(r'" (\d{3}) ')
JSON_FIELDS = ("level", "service", "host", "trace_id", "span_id", "duration_ms", "message")
APACHE_FIELDS = [f for f in rb.APACHE_FIELDS if f]


# ---------------------------------------------------------------------------------------------
# VictoriaLogs: install (idempotent) and server


def default_cache_dir():
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "sediment-bench")


def find_go(explicit):
    """The go command: `explicit` (--go) only when given, else $GO, PATH, the usual places."""
    if explicit:
        return explicit if os.access(explicit, os.X_OK) else None
    for cand in (os.environ.get("GO"), shutil.which("go"), "/usr/local/go/bin/go",
                 "/usr/lib/go/bin/go"):
        if cand and os.access(cand, os.X_OK):
            return cand
    return None


def install_victorialogs(cache_dir, version, go, allow_install, timeout):
    """Returns (binary or None, note). The binary lives in <cache_dir>/victoria-logs-<version>/;
    an existing one is reused (idempotent). allow_install=False never runs `go install`."""
    bindir = os.path.join(cache_dir, f"victoria-logs-{version}")
    binary = os.path.join(bindir, "victoria-logs")
    if os.access(binary, os.X_OK):
        return binary, f"cached in {bindir}"
    if not allow_install:
        return None, f"not installed in {bindir} and --install never"
    if not go:
        return None, "no Go toolchain found (--go, $GO, PATH)"
    os.makedirs(bindir, exist_ok=True)
    cmd = [go, "install", f"{VL_MODULE}@{version}"]
    log(f"installing VictoriaLogs {version}: GOBIN={bindir} {' '.join(cmd)}")
    t0 = time.monotonic()
    try:
        # cwd outside any module: `go install pkg@version` ignores the current module anyway.
        res = subprocess.run(cmd, cwd=cache_dir, env=dict(os.environ, GOBIN=bindir),
                             capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, f"go install did not finish within {timeout}s"
    if res.returncode != 0 or not os.access(binary, os.X_OK):
        return None, f"go install failed ({res.returncode}): {res.stderr.strip()[-600:]}"
    return binary, f"installed in {bindir} in {time.monotonic() - t0:.0f}s"


def binary_module_version(go, binary):
    """`go version -m`'s module line of the binary ('path version'), or None."""
    if not go:
        return None
    res = subprocess.run([go, "version", "-m", binary], capture_output=True, text=True,
                         timeout=60)
    for line in res.stdout.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[0] == "mod":
            return f"{parts[1]} {parts[2]}"
    return None


class VictoriaLogs(rb.Server):
    """One victoria-logs child process on a free loopback port with its own data dir; started,
    awaited and stopped by pid exactly as rb.Server (only the command and readiness differ)."""

    def __init__(self, binary, data_dir, log_path):
        super().__init__(binary, data_dir, log_path, "unused", "unused")
        self.ingest_tokens = {"vl": "unused"}  # rb.ingest_batches sends it; VL ignores it

    def command(self):
        return [self.binary, f"-storageDataPath={self.data_dir}",
                f"-httpListenAddr={rb.HOST}:{self.port}", "-retentionPeriod=100y",
                "-loggerLevel=WARN"]

    def ready(self):
        status, _ = rb.http_request(self.port, "GET", "/health", None, {}, timeout=2)
        return status == 200


def iso_ms(ms):
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms // 1000)) + f".{ms % 1000:03d}Z"


def parse_iso_ms(text):
    """'YYYY-MM-DDTHH:MM:SS[.fraction]Z' -> epoch ms (fraction truncated to ms)."""
    m = re.fullmatch(r"(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:\.(\d+))?Z", text)
    if not m:
        raise BenchError(f"bad RFC 3339 time {text!r}")
    secs = calendar.timegm(tuple(int(x) for x in m.groups()[:6]))
    frac = (m.group(7) or "0")[:3].ljust(3, "0")
    return secs * 1000 + int(frac)


def vl_query(vl, q, rng, timeout=600):
    """Rows (dicts) of a LogsQL query over [rng[0], rng[1]] ms."""
    body = urllib.parse.urlencode({"query": q, "start": iso_ms(rng[0]),
                                   "end": iso_ms(rng[1])}).encode()
    status, data = rb.http_request(vl.port, "POST", "/select/logsql/query", body,
                                   {"Content-Type": "application/x-www-form-urlencoded"},
                                   timeout=timeout)
    if status != 200:
        raise BenchError(f"LogsQL {q!r}: HTTP {status}: {data[:500]!r}")
    try:
        return [json.loads(line) for line in data.splitlines() if line.strip()]
    except ValueError as e:
        raise BenchError(f"LogsQL {q!r}: bad JSON line ({e}): {data[:300]!r}") from e


def vl_count(vl, rng):
    return rb.single_count(vl_query(vl, "* | stats count() as _count", rng), "VL count")


VL_BUSY_METRICS = re.compile(
    rb'^(vl_pending_rows|vl_storage_rows\{type="storage/inmemory"\}|vl_active_merges'
    rb'|vl_active_force_merges)\S* (\S+)$', re.M)


def vl_busy(vl):
    """True while VictoriaLogs holds rows not yet on disk (pending rows, in-memory parts: both
    searchable; they are written out after -inmemoryDataFlushInterval) or merges parts."""
    status, data = rb.http_request(vl.port, "GET", "/metrics", None, {}, timeout=30)
    if status != 200:
        raise BenchError(f"VictoriaLogs /metrics: HTTP {status}")
    found = VL_BUSY_METRICS.findall(data)
    if not found:
        raise BenchError("VictoriaLogs /metrics: no pending/in-memory/merge figures")
    return any(float(v) > 0 for _, v in found)


def sed_query(server, q, rng):
    return rb.query(server, q, rng[0], rng[1])


# ---------------------------------------------------------------------------------------------
# Corpus: generation, the one parse into both servers' bodies, and the truth


def gen_line_bytes(gen, fmt, work):
    """Average bytes per line of `fmt` (2000-line sample)."""
    out = os.path.join(work, f"sample-{fmt}.log")
    res = subprocess.run([gen, "--format", fmt, "--lines", "2000", "--out", out],
                         capture_output=True, text=True, timeout=120)
    if res.returncode != 0:
        raise BenchError(f"sediment-gen failed: {res.stderr}")
    size = os.path.getsize(out)
    os.unlink(out)
    return size / 2000


def generate(gen, fmt, path, nbytes, lines_estimate, seed, start_ms, needle, per_file_needles):
    cmd = [gen, "--format", fmt, "--bytes", str(nbytes), "--seed", str(seed),
           "--start-ms", str(start_ms), "--rate", repr(lines_estimate / 86_400.0),
           "--needle", needle, "--needle-every",
           str(max(1, lines_estimate // per_file_needles)), "--out", path]
    t0 = time.monotonic()
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
    if res.returncode != 0:
        raise BenchError(f"sediment-gen failed ({res.returncode}): {res.stderr}")
    m = re.search(r"lines=(\d+) bytes=(\d+) needles=(\d+)", res.stderr)
    if not m:
        raise BenchError(f"sediment-gen: no count line in {res.stderr!r}")
    lines, size, needles = (int(x) for x in m.groups())
    log(f"generated {fmt}: {lines} lines, {human_bytes(size)}, {needles} needles in "
        f"{time.monotonic() - t0:.1f}s")
    return {"format": fmt, "path": path, "lines": lines, "bytes": size, "needles": needles}


def batch_spans(path, batch_lines):
    """[(offset, length, lines)] of consecutive batch_lines-line chunks of the file."""
    with open(path, "rb") as f:
        data = f.read()
    out, pos, n = [], 0, len(data)
    while pos < n:
        end, k = pos, 0
        while k < batch_lines and end < n:
            nl = data.find(b"\n", end)
            end = n if nl < 0 else nl + 1
            k += 1
        out.append((pos, end - pos, k))
        pos = end
    return out


_FDS = {}
_STAMPS = {}


def _apache_time(stamp):
    v = _STAMPS.get(stamp)
    if v is None:
        ms = rb.apache_time_ms(stamp)
        v = _STAMPS[stamp] = (ms, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ms // 1000)))
    return v


def _iso_time(text):
    sec = _STAMPS.get(text[:19])
    if sec is None:
        sec = _STAMPS[text[:19]] = parse_iso_ms(text[:19] + "Z")
    return sec + (int(text[20:23]) if len(text) > 23 and text[19] == "." else 0)


def _worker_signals():
    """Pool workers: default SIGTERM (the driver's handler raises KeyboardInterrupt, which can
    leave a worker stuck on the task queue's lock when the pool is stopped), ignore Ctrl-C (the
    driver stops the pool)."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def encode_batch(task):
    """Worker: one batch of one file -> (sediment body, VL body, lines, raw bytes, truth)."""
    fmt, path, off, length, needle = task
    fd = _FDS.get(path)
    if fd is None:
        fd = _FDS[path] = os.open(path, os.O_RDONLY)
    raw = os.pread(fd, length, off)
    source = "access" if fmt == "apache" else "app"
    sed_events, vl_lines = [], []
    t = {"status": collections.Counter(), "bucket": collections.Counter(),
         "url": collections.Counter(), "code": collections.Counter(), "needle_lines": []}
    for line in raw.decode("utf-8").splitlines():
        if fmt == "apache":
            m = rb.APACHE_LINE.fullmatch(line)
            if not m:
                raise BenchError(f"not an Apache combined line: {line[:200]!r}")
            ms, vl_time = _apache_time(m.group(4))
            attrs = {name: v for name, v in zip(rb.APACHE_FIELDS, m.groups()) if name}
            t["status"][attrs["status"]] += 1
            t["url"][attrs["url"]] += 1
        else:
            obj = json.loads(line)
            vl_time = obj["timestamp"]
            ms = _iso_time(vl_time)
            attrs = {k: str(obj[k]) for k in JSON_FIELDS}
        t["bucket"][ms // SPAN_MS * SPAN_MS] += 1
        rm = PY_REGEX.search(line)
        if rm:
            t["code"][rm.group(1)] += 1
        if needle in line:
            t["needle_lines"].append(line)
        sed_events.append({"timestamp": ms, "attributes": attrs, "rawstring": line})
        vl = {"_time": vl_time, "_msg": line, "source": source}
        vl.update(attrs)
        vl_lines.append(json.dumps(vl, separators=(",", ":")))
    sed_body = json.dumps([{"tags": {"source": source}, "events": sed_events}],
                          separators=(",", ":")).encode()
    vl_body = ("\n".join(vl_lines) + "\n").encode()
    return sed_body, vl_body, len(sed_events), length, t


class Body:
    """A pre-encoded request body in a file. len() is the raw corpus bytes it carries, which is
    what rb.ingest_batches counts as "bytes"; read() is what is sent."""
    __slots__ = ("fd", "off", "n", "raw")

    def __init__(self, fd, off, n, raw):
        self.fd, self.off, self.n, self.raw = fd, off, n, raw

    def __len__(self):
        return self.raw

    def read(self):
        return os.pread(self.fd, self.n, self.off)


def encode_corpus(files, batch_lines, needle, work, procs):
    """Parses every line once (procs processes) into both bodies, written to two files; returns
    ({"sediment": [(Body, k)], "vl": [(Body, k)]}, truth, seconds)."""
    tasks = []
    spans = {f["format"]: batch_spans(f["path"], batch_lines) for f in files}
    # Alternate the formats so that both sources arrive all along the ingest.
    iters = [((f["format"], f["path"]), iter(spans[f["format"]])) for f in files]
    while iters:
        for it in list(iters):
            try:
                off, length, _ = next(it[1])
                tasks.append((it[0][0], it[0][1], off, length, needle))
            except StopIteration:
                iters.remove(it)
    truth = {"events": 0, "status": collections.Counter(), "bucket": collections.Counter(),
             "url": collections.Counter(), "code": collections.Counter(), "needle_lines": []}
    paths = {"sediment": os.path.join(work, "bodies-sediment.bin"),
             "vl": os.path.join(work, "bodies-vl.bin")}
    outs = {k: open(p, "wb") for k, p in paths.items()}
    pos = {"sediment": 0, "vl": 0}
    spans_out = {"sediment": [], "vl": []}
    t0 = time.monotonic()
    pool = multiprocessing.get_context("fork").Pool(procs, initializer=_worker_signals)
    try:
        for sed_body, vl_body, k, raw_len, t in pool.imap(encode_batch, tasks, chunksize=4):
            for key, body in (("sediment", sed_body), ("vl", vl_body)):
                outs[key].write(body)
                spans_out[key].append((pos[key], len(body), raw_len, k))
                pos[key] += len(body)
            truth["events"] += k
            for name in ("status", "bucket", "url", "code"):
                truth[name].update(t[name])
            truth["needle_lines"] += t["needle_lines"]
        pool.close()  # every result is in: the workers exit on their own
    finally:
        pool.terminate()  # after close(): only reaps; on an error: stops the workers
        pool.join()
    secs = time.monotonic() - t0
    batches = {}
    for key, f in outs.items():
        f.close()
        fd = os.open(paths[key], os.O_RDONLY)
        batches[key] = [(Body(fd, off, n, raw), k) for off, n, raw, k in spans_out[key]]
    truth["wire_bytes"] = dict(pos)
    return batches, truth, secs, paths


def tail_truth(files, tail):
    """The newest `tail` events over both files (each file's times are non-decreasing): sorted
    list of (ms, line), newest first."""
    cands = []
    for f in files:
        with open(f["path"], "rb") as fh:
            fh.seek(max(0, f["bytes"] - 4096 * tail))
            lines = fh.read().decode("utf-8").splitlines()[-tail:]
        for line in lines:
            if f["format"] == "apache":
                ms = rb.apache_time_ms(rb.APACHE_LINE.fullmatch(line).group(4))
            else:
                ms = _iso_time(json.loads(line)["timestamp"])
            cands.append((ms, line))
    return heapq.nlargest(tail, cands)


# ---------------------------------------------------------------------------------------------
# Measurement helpers


def proc_status_kb(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def reset_peak_rss(pid):
    """Resets VmHWM to the current RSS (Linux >= 4.0); False when not permitted."""
    try:
        with open(f"/proc/{pid}/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def disk_state(server, kind):
    if kind == "sediment":
        seg, nseg, _ = rb.segment_bytes(server.data_dir)
    else:
        seg, nseg = rb.dir_bytes(os.path.join(server.data_dir, "partitions"))
    total, files = rb.dir_bytes(server.data_dir)
    return seg, nseg, total, files


def wait_settled(server, kind, settle, timeout, busy=None):
    """Waits until the segments (bytes and files: sediment's segment files, VictoriaLogs'
    partitions) stay unchanged for `settle` s: flushes and merges done. (The rest of sediment's
    data dir keeps changing while idle: cluster chatter, Global snapshots.) Returns (server CPU
    seconds at the last change, monotonic time of it, disk_state at the end). While busy()
    (when given) is True the segments count as changing."""
    pid = server.proc.pid
    deadline = time.monotonic() + timeout
    last = disk_state(server, kind)
    since, cpu_at = time.monotonic(), rb.process_cpu_seconds(pid)
    while True:
        time.sleep(0.5)
        cur = disk_state(server, kind)
        now = time.monotonic()
        if cur[:2] != last[:2] or (busy and busy()):
            last, since, cpu_at = cur, now, rb.process_cpu_seconds(pid)
        elif now - since >= settle:
            return cpu_at, since, cur
        if now > deadline:
            log(f"{kind}: data dir still changing after {timeout}s; settled figures are a bound")
            return rb.process_cpu_seconds(pid), now, cur


def merge_counters(server):
    """sediment's merge counters (GET /api/v1/cluster, replication.merges): cumulative since the
    server started, so after one ingest they are that ingest's merges."""
    status, data = rb.http_request(server.port, "GET", "/api/v1/cluster", None,
                                   {"Authorization": f"Bearer {server.api_token}"}, timeout=30)
    if status != 200:
        raise BenchError(f"sediment /api/v1/cluster: HTTP {status}")
    merges = json.loads(data).get("replication", {}).get("merges")
    if not isinstance(merges, dict):
        raise BenchError("sediment /api/v1/cluster: no replication.merges")
    return {k: int(merges.get(k, 0)) for k in ("merge_bytes_read", "merge_bytes_written",
                                                "merge_blocks_copied", "merge_blocks_reencoded",
                                                "merge_cpu_micros")}


def ingest(server, kind, batches, clients, path, expected, rng, count, args, raw_bytes,
           busy=None):
    """Sends every batch, waits until count() sees all (searchable), then until the segments
    settle (and busy() is False); figures of the server process from the first request."""
    pid = server.proc.pid
    cpu0 = rb.process_cpu_seconds(pid)
    t0, secs, st = rb.ingest_batches(server, batches, clients, repo=next(iter(
        server.ingest_tokens)), path=path, encode=Body.read)
    if st["events"] != expected:
        raise BenchError(f"{kind}: acknowledged {st['events']} events, sent {expected}")
    t_s = rb.wait_searchable(server, expected, rng[0], rng[1], args.searchable_timeout,
                             count=count)
    cpu_s = rb.process_cpu_seconds(pid)
    cpu_settled, t_settled, state = wait_settled(server, kind, args.settle, args.settle_timeout,
                                                 busy)
    gb = raw_bytes / 1e9
    r = {
        "events": expected, "raw_bytes": raw_bytes, "wire_bytes": st["wire_bytes"],
        "retries": st["retries"], "seconds_to_last_ack": secs,
        "events_per_s_acked": expected / secs,
        "seconds_to_searchable": t_s - t0, "events_per_s_searchable": expected / (t_s - t0),
        "cpu_seconds_searchable": cpu_s - cpu0,
        "cpu_s_per_gb_searchable": (cpu_s - cpu0) / gb,
        "seconds_to_settled": max(t_settled, t_s) - t0,
        "cpu_seconds_settled": max(cpu_settled, cpu_s) - cpu0,
        "cpu_s_per_gb_settled": (max(cpu_settled, cpu_s) - cpu0) / gb,
        "segment_bytes": state[0], "segment_files": state[1], "data_dir_bytes": state[2],
        "data_dir_files": state[3], "peak_rss_ingest_kb": proc_status_kb(pid, "VmHWM"),
    }
    if kind == "sediment":
        # Write amplification: bytes the merges wrote over the bytes ingested (raw), and over the
        # segment bytes finally stored (how often the stored data was written again).
        r.update(merge_counters(server))
        r["merge_written_per_raw_byte"] = r["merge_bytes_written"] / raw_bytes
        r["merge_written_per_segment_byte"] = r["merge_bytes_written"] / max(r["segment_bytes"], 1)
        # What compaction itself cost: the merge thread's CPU, per GB and beside the whole
        # server's CPU until searchable (the rest of "settled" is flushing what was still
        # buffered when it became searchable, and the idle server waiting out the merge age).
        r["merge_cpu_s_per_gb"] = r["merge_cpu_micros"] / 1e6 / gb
        r["merge_cpu_per_searchable_cpu"] = r["merge_cpu_s_per_gb"] / max(
            r["cpu_s_per_gb_searchable"], 1e-9)
        log(f"{kind}: merges read {human_bytes(r['merge_bytes_read'])}, wrote "
            f"{human_bytes(r['merge_bytes_written'])} = {r['merge_written_per_raw_byte']:.3f} x "
            f"the raw bytes ingested, {r['merge_written_per_segment_byte']:.2f} x the segment "
            f"bytes stored; blocks copied {r['merge_blocks_copied']}, re-encoded "
            f"{r['merge_blocks_reencoded']}; merge CPU {r['merge_cpu_micros'] / 1e6:.2f} s")
    log(f"{kind}: {r['events_per_s_acked']:,.0f} events/s acked, searchable after "
        f"{r['seconds_to_searchable']:.1f}s, settled after {r['seconds_to_settled']:.1f}s, "
        f"CPU-s/GB {r['cpu_s_per_gb_searchable']:.1f} / {r['cpu_s_per_gb_settled']:.1f}, "
        f"segments {human_bytes(r['segment_bytes'])}, data dir "
        f"{human_bytes(r['data_dir_bytes'])}, VmHWM {r['peak_rss_ingest_kb'] / 1024:.0f} MiB")
    return r


# ---------------------------------------------------------------------------------------------
# Queries: each normalises both answers to one comparable value and checks it against the truth


def rows_list(rows, what):
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise BenchError(f"{what}: unexpected answer {str(rows)[:300]}")
    return rows


def counts_by(rows, field, what, drop_empty=False):
    got = {}
    for r in rows_list(rows, what):
        if "_count" not in r:
            raise BenchError(f"{what}: row without _count: {str(r)[:300]}")
        k = r.get(field, "")
        k = "" if k is None else str(k)
        if drop_empty and k == "":
            continue
        if k in got:
            raise BenchError(f"{what}: group {field}={k!r} twice")
        got[k] = rb.as_int(r["_count"], "_count")
    return got


def first_diff(a, b):
    if isinstance(a, dict) and isinstance(b, dict):
        keys = sorted(set(a) | set(b), key=str)
        d = [f"{k}: {a.get(k)} vs {b.get(k)}" for k in keys if a.get(k) != b.get(k)]
        return f"{len(d)} differ: " + ", ".join(d[:6])
    return f"{str(a)[:300]} vs {str(b)[:300]}"


def make_queries(truth, needle, tail_rows):
    """[(name, sediment query, LogsQL, normalise_sediment, normalise_vl, check_truth)]; the
    normalised values of both sides must be equal, and check_truth(value) raises if wrong."""

    def raw_lines(rows, key, what):
        out = []
        for r in rows_list(rows, what):
            if key not in r:
                raise BenchError(f"{what}: event without {key}: {str(r)[:300]}")
            out.append(r[key])
        return sorted(out)

    def check_needle(v):
        want = sorted(truth["needle_lines"])
        if v != want:
            raise BenchError(f"needle events differ from the {len(want)} planted lines: "
                             f"got {len(v)}")

    def check_eq(want):
        def check(v):
            if v != want:
                raise BenchError(f"answer differs from the generator's truth: "
                                 f"{first_diff(v, want)}")
        return check

    def buckets_sed(rows):
        got = {}
        for r in rows_list(rows, "timeChart"):
            b, n = rb.as_int(r.get("_bucket"), "_bucket"), rb.as_int(r.get("_count"), "_count")
            if n:
                got[b] = got.get(b, 0) + n
        return got

    def buckets_vl(rows):
        got = {}
        for r in rows_list(rows, "stats by (_time:5m)"):
            b = parse_iso_ms(r["_time"])
            got[b] = got.get(b, 0) + rb.as_int(r["_count"], "_count")
        return {k: v for k, v in got.items() if v}

    top = sorted(truth["url"].values(), reverse=True)[:TOP_K]

    def top_norm(field):
        def norm(rows):
            got = counts_by(rows, field, "top urls")
            # Ties at the K-th count may pick other urls: compare the counts, check the urls.
            return {"counts": sorted(got.values(), reverse=True), "rows": got}
        return norm

    def check_top(v):
        if v["counts"] != top:
            raise BenchError(f"top {TOP_K} counts {v['counts']} != truth {top}")
        bad = {k: n for k, n in v["rows"].items() if truth["url"].get(k) != n}
        if bad:
            raise BenchError(f"url counts differ from the truth: "
                             + ", ".join(f"{k}: {n} vs {truth['url'].get(k)}"
                                         for k, n in list(bad.items())[:5]))

    tail_ms = [ms for ms, _ in tail_rows]
    boundary = tail_ms[-1] if tail_ms else 0

    def tail_norm(ts_key, ts_parse, raw_key):
        def norm(rows):
            rows = rows_list(rows, "tail")
            ts = sorted((ts_parse(r[ts_key]) for r in rows), reverse=True)
            # Events at the oldest time kept may tie with ones left out: compare those by time.
            above = sorted(r[raw_key] for r in rows if ts_parse(r[ts_key]) > boundary)
            return {"times": ts, "raw_above_boundary": above}
        return norm

    tail_want = {"times": tail_ms,
                 "raw_above_boundary": sorted(line for ms, line in tail_rows if ms > boundary)}
    status500 = truth["status"].get("500", 0)
    return [
        ("needle", needle, needle,
         lambda r: raw_lines(r, "@rawstring", "needle"), lambda r: raw_lines(r, "_msg", "needle"),
         check_needle),
        ("status=500 | count()", "status=500 | count()",
         "status:=500 | stats count() as _count",
         lambda r: rb.single_count(r, "count"), lambda r: rb.single_count(r, "count"),
         check_eq(status500)),
        ("groupBy(status)", "groupBy(status)", "status:* | stats by (status) count() as _count",
         lambda r: counts_by(r, "status", "groupBy"),
         lambda r: counts_by(r, "status", "stats by (status)", drop_empty=True),
         check_eq(dict(truth["status"]))),
        ("timeChart(span=5m)", "timeChart(span=5m)", "* | stats by (_time:5m) count() as _count",
         buckets_sed, buckets_vl, check_eq(dict(truth["bucket"]))),
        ("regex | groupBy", SED_REGEX, VL_REGEX,
         lambda r: counts_by(r, "code", "regex groupBy"),
         lambda r: counts_by(r, "code", "extract_regexp stats", drop_empty=True),
         check_eq(dict(truth["code"]))),
        ("groupBy(url) top 10", f"groupBy(url, limit=max) | sort(_count, order=desc, "
                                f"limit={TOP_K})",
         f"url:* | stats by (url) count() as _count | sort by (_count desc) limit {TOP_K}",
         top_norm("url"), top_norm("url"), check_top),
        ("count()", "count()", "* | stats count() as _count",
         lambda r: rb.single_count(r, "count"), lambda r: rb.single_count(r, "count"),
         check_eq(truth["events"])),
        (f"tail({TAIL})", f"tail({TAIL})", f"* | first {TAIL} by (_time desc)",
         tail_norm("@timestamp", lambda v: rb.as_int(v, "@timestamp"), "@rawstring"),
         tail_norm("_time", parse_iso_ms, "_msg"), check_eq(tail_want)),
    ]


HIGHCARD = "groupBy(url) top 10"


def timed(fn, pid):
    c0, t0 = rb.process_cpu_seconds(pid), time.monotonic()
    res = fn()
    return time.monotonic() - t0, rb.process_cpu_seconds(pid) - c0, res


def run_queries(queries, sed, vl, rng, runs, label):
    """Each query: runs x (sediment, VictoriaLogs), best time of each, answers checked."""
    out = []
    for name, sq, vq, sed_norm, vl_norm, check in queries:
        e = {"name": name, "sediment_query": sq, "vl_query": vq if vl else None}
        sides = [("sediment", sed, lambda: sed_query(sed, sq, rng), sed_norm)]
        if vl:
            sides.append(("vl", vl, lambda: vl_query(vl, vq, rng), vl_norm))
        if name == HIGHCARD:
            for _, srv, _, _ in sides:
                e.setdefault("peak_rss_reset", {})[srv.proc.pid] = reset_peak_rss(srv.proc.pid)
        values, errors = {}, []
        for _ in range(runs):
            for key, srv, fn, norm in sides:
                if key in errors:
                    continue
                try:
                    secs, cpu, rows = timed(fn, srv.proc.pid)
                    if f"{key}_seconds" not in e or secs < e[f"{key}_seconds"]:
                        e[f"{key}_seconds"], e[f"{key}_cpu_seconds"] = secs, cpu
                    v = norm(rows)
                    if key in values and values[key] != v:
                        raise BenchError("answer changed between runs")
                    values[key] = v
                except BenchError as ex:
                    errors.append(key)
                    e.setdefault("errors", []).append(f"{key}: {ex}")
        for key, v in values.items():
            try:
                check(v)
            except BenchError as ex:
                e.setdefault("errors", []).append(f"{key}: {ex}")
        if len(values) == 2 and values["sediment"] != values["vl"]:
            e.setdefault("errors", []).append(
                "sediment and VictoriaLogs differ: " + first_diff(values["sediment"], values["vl"]))
        if name == HIGHCARD:
            e["peak_rss_kb"] = {key: proc_status_kb(srv.proc.pid, "VmHWM")
                                for key, srv, _, _ in sides}
            e.pop("peak_rss_reset", None)
        if "sediment_seconds" in e and "vl_seconds" in e:
            e["ratio_sediment_vs_vl"] = e["sediment_seconds"] / max(e["vl_seconds"], 1e-9)
        e["verified"] = not e.get("errors")
        msg = "  ".join(f"{k} {e[k + '_seconds']:.3f}s" for k in ("sediment", "vl")
                        if k + "_seconds" in e)
        log(f"  [{label}] {name}: {msg}" + ("" if e["verified"] else
                                             f"  FAILED: {'; '.join(e['errors'])[:400]}"))
        out.append(e)
    return out


# ---------------------------------------------------------------------------------------------
# Main


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build-dir", default="build")
    ap.add_argument("--server-bin", help="default <build-dir>/src/cli/sediment")
    ap.add_argument("--tools-dir", help="where sediment-gen/-benchutil are; default "
                                        "<build-dir>/bench")
    ap.add_argument("--size", type=rb.parse_size, default=rb.parse_size("1G"),
                    help="raw corpus bytes, half access log, half JSON (default 1G)")
    ap.add_argument("--smoke", action="store_true", help="4 MB corpus, every query and check")
    ap.add_argument("--work-dir", help="default <build-dir>/bench-vl-work")
    ap.add_argument("--report", help="JSON report; default <work-dir>/report-vl.json")
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--batch-lines", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--runs", type=int, default=3, help="best of N per query and side")
    ap.add_argument("--query-threads", type=int, default=os.cpu_count() or 1,
                    help="sediment's --query-threads for the comparison (default: all CPUs); "
                         "the scaling part runs 1 beside it")
    ap.add_argument("--settle", type=float, default=75,
                    help="seconds the segments must stay unchanged to count as settled (default "
                         "75: longer than sediment's --merge-min-age-ms 60 s plus "
                         "--merge-interval-ms 5 s, so that a pending merge is not missed)")
    ap.add_argument("--settle-timeout", type=float, default=600)
    ap.add_argument("--searchable-timeout", type=float, default=900)
    ap.add_argument("--server-timeout", type=float, default=60)
    ap.add_argument("--cache-dir", default=os.environ.get("SEDIMENT_BENCH_CACHE"),
                    help="where VictoriaLogs is installed (default $SEDIMENT_BENCH_CACHE or "
                         "~/.cache/sediment-bench); keep it outside the repository")
    ap.add_argument("--vl-version", default=VL_VERSION)
    ap.add_argument("--vl-bin", help="use this victoria-logs binary (no install)")
    ap.add_argument("--go", help="the go command (default $GO, PATH, /usr/local/go/bin/go)")
    ap.add_argument("--install", choices=("auto", "never"), default="auto",
                    help="never: only use an already installed VictoriaLogs")
    ap.add_argument("--install-timeout", type=float, default=1200)
    ap.add_argument("--no-peer", action="store_true", help="sediment alone")
    ap.add_argument("--keep", action="store_true", help="keep data dirs, corpus and bodies")
    ap.add_argument("--ingest-only", action="store_true",
                    help="steps 1-3 only (corpus, ingest, stored bytes): no queries, no scaling")
    args = ap.parse_args()
    if args.smoke:
        args.size = rb.parse_size("4M")
        args.settle = min(args.settle, 2)
        args.settle_timeout = min(args.settle_timeout, 30)
        args.searchable_timeout = min(args.searchable_timeout, 60)

    build = os.path.abspath(args.build_dir)
    server_bin = os.path.abspath(args.server_bin or os.path.join(build, "src", "cli", "sediment"))
    tools = os.path.abspath(args.tools_dir or os.path.join(build, "bench"))
    gen = os.path.join(tools, "sediment-gen")
    benchutil = os.path.join(tools, "sediment-benchutil")
    work = os.path.abspath(args.work_dir or os.path.join(build, "bench-vl-work"))
    report_path = args.report or os.path.join(work, "report-vl.json")
    for path in (server_bin, gen):
        if not os.access(path, os.X_OK):
            print(f"vs_victorialogs: missing executable {path} (build it first)", file=sys.stderr)
            return 2
    os.makedirs(work, exist_ok=True)
    report = {
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {"cpus": os.cpu_count(), "kernel": platform.release(),
                    "load_average": rb.load_average()},
        "params": {"size": args.size, "smoke": args.smoke, "runs": args.runs,
                   "clients": args.clients, "batch_lines": args.batch_lines, "seed": args.seed,
                   "query_threads": args.query_threads, "settle": args.settle},
        "ok": False,
    }
    ctx = {"servers": [], "dirs": [], "files": []}

    def on_term(signum, frame):
        raise KeyboardInterrupt()

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    rc = 1
    try:
        run(args, ctx, server_bin, gen, benchutil, work, report)
        report["ok"] = True
        rc = 0
    except BenchError as e:
        report["error"] = str(e)
        print(f"\nBENCH FAILED: {e}", file=sys.stderr)
    except KeyboardInterrupt:
        report["error"] = "interrupted"
        print("\ninterrupted", file=sys.stderr)
        rc = 130
    finally:
        for srv in ctx["servers"]:
            if srv.proc is not None:
                was = srv.alive()
                srv.stop()
                if was:
                    log(f"{os.path.basename(srv.binary)} pid {srv.proc.pid} stopped "
                        f"(exit {srv.proc.returncode})")
        with open(report_path, "w") as f:
            json.dump(report, f, indent=2)
        log(f"report written to {report_path}")
        if not args.keep:
            for d in ctx["dirs"]:
                shutil.rmtree(d, ignore_errors=True)
            for p in ctx["files"]:
                try:
                    os.unlink(p)
                except OSError:
                    pass
    return rc


def run(args, ctx, server_bin, gen, benchutil, work, report):
    # --- the peer
    vl_bin, peer_note = None, "disabled (--no-peer)"
    go = find_go(args.go)
    if args.vl_bin:
        vl_bin, peer_note = os.path.abspath(args.vl_bin), "given with --vl-bin"
    elif not args.no_peer:
        cache = os.path.abspath(args.cache_dir or default_cache_dir())
        os.makedirs(cache, exist_ok=True)
        vl_bin, peer_note = install_victorialogs(cache, args.vl_version, go,
                                                 args.install == "auto", args.install_timeout)
    peer = {"binary": vl_bin, "note": peer_note, "requested_version": args.vl_version,
            "module": binary_module_version(go, vl_bin) if vl_bin else None}
    report["peer"] = peer
    if vl_bin:
        log(f"VictoriaLogs: {vl_bin} ({peer['module'] or 'module version unknown'}; "
            f"{peer_note})")
    else:
        log(f"VictoriaLogs SKIPPED: {peer_note}; sediment alone, answers checked against the "
            f"generator's truth")

    # --- corpus: two files over the same 24 h, ending ~30 min ago; 5-minute aligned
    now_ms = int(time.time() * 1000)
    start_ms = (now_ms - DAY_MS - 1_800_000) // SPAN_MS * SPAN_MS
    rng = (start_ms - 3_600_000, -(-(start_ms + DAY_MS + 3_600_000) // SPAN_MS) * SPAN_MS)
    needle = "zq" + secrets.token_hex(6) + "needle"
    files = []
    for i, fmt in enumerate(("apache", "json")):
        nbytes = args.size // 2
        per_line = gen_line_bytes(gen, fmt, work)
        path = os.path.join(work, f"corpus-{fmt}.log")
        ctx["files"].append(path)
        files.append(generate(gen, fmt, path, nbytes, max(1, int(nbytes / per_line)),
                              args.seed + i, start_ms, needle, 5))
    raw_bytes = sum(f["bytes"] for f in files)
    events = sum(f["lines"] for f in files)
    report["corpus"] = {"files": files, "raw_bytes": raw_bytes, "events": events,
                        "start_ms": start_ms, "query_range_ms": list(rng), "needle": needle}
    procs = max(1, os.cpu_count() or 1)
    batches, truth, enc_secs, body_paths = encode_corpus(files, args.batch_lines, needle, work,
                                                         procs)
    ctx["files"] += list(body_paths.values())
    if truth["events"] != events:
        raise BenchError(f"parsed {truth['events']} events, generated {events}")
    if len(truth["needle_lines"]) != sum(f["needles"] for f in files):
        raise BenchError(f"{len(truth['needle_lines'])} lines hold the needle, planted "
                         f"{sum(f['needles'] for f in files)}")
    if len(truth["url"]) > 1_000_000:
        raise BenchError(f"{len(truth['url'])} distinct urls: above groupBy's limit=max")
    tail_rows = tail_truth(files, TAIL)
    report["corpus"].update({"encode_seconds": enc_secs, "wire_bytes": truth["wire_bytes"],
                             "distinct_urls": len(truth["url"]),
                             "status_500": truth["status"].get("500", 0)})
    log(f"corpus: {events} events, {human_bytes(raw_bytes)} raw, encoded for both in "
        f"{enc_secs:.1f}s ({procs} processes); bodies: sediment "
        f"{human_bytes(truth['wire_bytes']['sediment'])}, VictoriaLogs "
        f"{human_bytes(truth['wire_bytes']['vl'])}; {len(truth['url'])} distinct urls")
    zs = [rb.zstd_size(f["path"], work, benchutil) for f in files]
    report["zstd3_bytes"], report["zstd_method"] = sum(z[0] for z in zs), zs[0][1]

    # --- sediment: ingest
    sed_dir = os.path.join(work, "sediment-data")
    shutil.rmtree(sed_dir, ignore_errors=True)
    os.makedirs(sed_dir)
    ctx["dirs"].append(sed_dir)
    tokens = ("ingest-" + secrets.token_hex(12), "api-" + secrets.token_hex(12))

    def sediment_server(threads):
        s = rb.Server(server_bin, sed_dir, os.path.join(work, f"sediment-{threads}.log"), *tokens,
                      extra_args=["--query-threads", str(threads)])
        ctx["servers"].append(s)
        s.start(args.server_timeout)
        return s

    sed = sediment_server(args.query_threads)
    log(f"sediment ingest: {events} events, {len(batches['sediment'])} batches, "
        f"{args.clients} clients, /api/v1/ingest/humio-structured")
    report["sediment_ingest"] = ingest(
        sed, "sediment", batches["sediment"], args.clients, "/api/v1/ingest/humio-structured",
        events, rng, None, args, raw_bytes)

    # --- VictoriaLogs: ingest (sediment idle)
    vl = None
    if vl_bin:
        vl_dir = os.path.join(work, "vl-data")
        shutil.rmtree(vl_dir, ignore_errors=True)
        ctx["dirs"].append(vl_dir)
        vl = VictoriaLogs(vl_bin, vl_dir, os.path.join(work, "victoria-logs.log"))
        ctx["servers"].append(vl)
        vl.start(args.server_timeout)
        log(f"VictoriaLogs ingest: {events} events, /insert/jsonline")
        report["vl_ingest"] = ingest(
            vl, "VictoriaLogs", batches["vl"], args.clients,
            "/insert/jsonline?_stream_fields=source&_time_field=_time&_msg_field=_msg", events,
            rng, lambda: vl_count(vl, rng), args, raw_bytes, busy=lambda: vl_busy(vl))

    if args.ingest_only:
        report["queries"], report["scaling"] = [], []
        report["load_average_after"] = rb.load_average()
        print_report(report)
        return

    # --- queries, interleaved
    queries = make_queries(truth, needle, tail_rows)
    log(f"queries: best of {args.runs}, interleaved; sediment --query-threads "
        f"{args.query_threads}")
    report["queries"] = run_queries(queries, sed, vl, rng, args.runs, "compare")

    # --- sediment query scaling: restarted with one query thread on the same data
    sed.stop()
    sed1 = sediment_server(1)
    rb.wait_searchable(sed1, events, rng[0], rng[1], args.searchable_timeout)
    one = run_queries(queries, sed1, None, rng, args.runs, "1 thread")
    sed1.stop()
    scaling = []
    for a, b in zip(report["queries"], one):
        s = {"name": a["name"], "threads": args.query_threads,
             "seconds_1_thread": b.get("sediment_seconds"),
             "seconds_n_threads": a.get("sediment_seconds"), "verified": b["verified"]}
        if s["seconds_1_thread"] and s["seconds_n_threads"]:
            s["speedup"] = s["seconds_1_thread"] / s["seconds_n_threads"]
        if b.get("errors"):
            s["errors"] = b["errors"]
        scaling.append(s)
    report["scaling"] = scaling
    report["load_average_after"] = rb.load_average()
    print_report(report)
    failed = [q for q in report["queries"] + scaling if q.get("errors")]
    if failed:
        raise BenchError("; ".join(f"{q['name']}: {' / '.join(q['errors'])[:500]}"
                                   for q in failed))


def print_report(r):
    s, v = r["sediment_ingest"], r.get("vl_ingest")
    peer = r["peer"]
    c = r["corpus"]
    mib = lambda kb: f"{kb / 1024:.0f} MiB"  # noqa: E731

    def row(label, sv, vv, ratio=None):
        rs = f"{ratio:8.2f}" if ratio is not None else f"{'':>8}"
        return f"  {label:<44} {sv:>14} {vv if vv is not None else '-':>14} {rs}"

    def ratio(a, b):
        return a / b if v and b else None

    lines = [
        "",
        "sediment vs VictoriaLogs" + (" (smoke: sizes too small for meaningful speed)"
                                      if r["params"]["smoke"] else ""),
        "=" * 84,
        f"corpus {human_bytes(c['raw_bytes'])} raw, {c['events']} events "
        f"({c['files'][0]['lines']} access log + {c['files'][1]['lines']} JSON app log) over 24 h;"
        f" {r['machine']['cpus']} CPUs",
        f"peer: {peer['module'] or peer['binary'] or 'none'} ({peer['note']})",
        f"  {'':<44} {'sediment':>14} {'VictoriaLogs':>14} {'sed/VL':>8}",
        row("ingest events/s until last 200", f"{s['events_per_s_acked']:,.0f}",
            f"{v['events_per_s_acked']:,.0f}" if v else None,
            ratio(s["events_per_s_acked"], v["events_per_s_acked"]) if v else None),
        row("ingest events/s until searchable", f"{s['events_per_s_searchable']:,.0f}",
            f"{v['events_per_s_searchable']:,.0f}" if v else None,
            ratio(s["events_per_s_searchable"], v["events_per_s_searchable"]) if v else None),
        row("ingest CPU-s per GB until searchable", f"{s['cpu_s_per_gb_searchable']:.1f}",
            f"{v['cpu_s_per_gb_searchable']:.1f}" if v else None,
            ratio(s["cpu_s_per_gb_searchable"], v["cpu_s_per_gb_searchable"]) if v else None),
        row("ingest CPU-s per GB until settled", f"{s['cpu_s_per_gb_settled']:.1f}",
            f"{v['cpu_s_per_gb_settled']:.1f}" if v else None,
            ratio(s["cpu_s_per_gb_settled"], v["cpu_s_per_gb_settled"]) if v else None),
        row("merge bytes written / raw bytes ingested",
            f"{s['merge_written_per_raw_byte']:.3f}" if "merge_written_per_raw_byte" in s
            else "-", None),
        row("merge bytes written / segment bytes stored",
            f"{s['merge_written_per_segment_byte']:.2f}" if "merge_written_per_segment_byte" in s
            else "-", None),
        row("merge CPU-s per GB (x CPU until searchable)",
            f"{s['merge_cpu_s_per_gb']:.2f} ({s['merge_cpu_per_searchable_cpu']:.3f}x)"
            if "merge_cpu_s_per_gb" in s else "-", None),
        row("seconds until searchable / settled",
            f"{s['seconds_to_searchable']:.1f} / {s['seconds_to_settled']:.1f}",
            f"{v['seconds_to_searchable']:.1f} / {v['seconds_to_settled']:.1f}" if v else None),
        row(f"segments on disk (zstd -3: {human_bytes(r['zstd3_bytes'])})",
            human_bytes(s["segment_bytes"]), human_bytes(v["segment_bytes"]) if v else None,
            ratio(s["segment_bytes"], v["segment_bytes"]) if v else None),
        row("whole data dir", human_bytes(s["data_dir_bytes"]),
            human_bytes(v["data_dir_bytes"]) if v else None,
            ratio(s["data_dir_bytes"], v["data_dir_bytes"]) if v else None),
        row("  segments / zstd -3", f"{s['segment_bytes'] / r['zstd3_bytes']:.2f}",
            f"{v['segment_bytes'] / r['zstd3_bytes']:.2f}" if v else None),
        row("peak RSS during ingest (VmHWM)", mib(s["peak_rss_ingest_kb"]),
            mib(v["peak_rss_ingest_kb"]) if v else None),
    ]
    hc = next((q for q in r["queries"] if q["name"] == HIGHCARD), {})
    rss = hc.get("peak_rss_kb", {})
    if rss:
        lines.append(row(f"peak RSS during {HIGHCARD}", mib(rss["sediment"]),
                         mib(rss["vl"]) if "vl" in rss else None))
    lines += ["", f"  {'query (best of ' + str(r['params']['runs']) + ', seconds)':<44} "
                  f"{'sediment':>14} {'VictoriaLogs':>14} {'sed/VL':>8}  check  "
                  f"server CPU-s sed / VL"]
    for q in r["queries"]:
        cpu = " / ".join(f"{q[k + '_cpu_seconds']:.2f}" for k in ("sediment", "vl")
                         if k + "_cpu_seconds" in q)
        lines.append(row(q["name"], f"{q['sediment_seconds']:.3f}" if "sediment_seconds" in q
                         else "-", f"{q['vl_seconds']:.3f}" if "vl_seconds" in q else None,
                         q.get("ratio_sediment_vs_vl"))
                     + ("  ok    " if q["verified"] else "  FAILED") + f"  {cpu}")
    lines.append(f"  load average at the end {r['load_average_after']} ({r['machine']['cpus']} "
                 f"CPUs, shared: other work shows in the wall times first)")
    lines += ["", f"  sediment query scaling: --query-threads 1 vs {r['params']['query_threads']}"
                  f"  {'1 thread':>10} {str(r['params']['query_threads']) + ' threads':>10} "
                  f"{'speedup':>8}"]
    for sc in r["scaling"]:
        one = f"{sc['seconds_1_thread']:.3f}" if sc["seconds_1_thread"] else "-"
        n = f"{sc['seconds_n_threads']:.3f}" if sc["seconds_n_threads"] else "-"
        sp = f"{sc['speedup']:.2f}" if "speedup" in sc else "-"
        lines.append(f"  {sc['name']:<54} {one:>10} {n:>10} {sp:>8}"
                     + ("" if sc["verified"] else "  FAILED"))
    lines += ["", "  sed/VL: sediment's figure / VictoriaLogs' (times, CPU, bytes: < 1 = sediment "
                  "better; events/s: > 1 = sediment better)", ""]
    print("\n".join(lines), flush=True)


if __name__ == "__main__":
    sys.exit(main())
