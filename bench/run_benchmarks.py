#!/usr/bin/env python3
"""sediment benchmark driver.

Builds nothing. Uses <build-dir>/src/cli/sediment, <build-dir>/bench/sediment-gen and
<build-dir>/bench/sediment-benchutil; starts one server on a free loopback port with a fresh data
dir, and measures in one run:
  (a) ingest: concurrent clients POST the generated Apache log in ~1000-line batches to
      /api/v1/ingest/raw; events/s and MB/s until the last 200 and until `| count()` sees every
      event; beside it the machine's raw append+fdatasync rate of the same batches.
  (b) search: the rest of a >= --size corpus is ingested (repository `bench`), (c) is measured,
      then the whole corpus is ingested again through humio-structured with log timestamps and
      parsed access-log fields (repository `benchf`). Then, best of --runs each: a planted
      needle (and `| count()`), `groupBy(status)`, `timeChart(span=1m)` and a query-time
      `regex(...) | groupBy(status)`, as GB/s of raw data per core (/ min(--query-threads,
      CPUs)), each beside `grep -c` / awk doing the same work on the raw file (one core), with
      the ratio; every answer must equal the grep/awk answer.
  (c) stored size: bytes of segment files under the data dir vs `zstd -3` of the raw file.
With --kafka it measures only (a), with sediment on a Kafka commit log (one local broker started
by scripts/kafka/cluster.py, replication factor 1), and beside it `kcat -P` producing the same
batches as messages (acks=all, idempotent) to a fresh topic with the same partition count; it
prints the ratio of sediment's acknowledged MB/s to kcat's.
Prints a report and writes it as JSON. Exits non-zero when any step fails (HTTP error, count
mismatch, a query answer that differs from grep/awk, server not ready); speed never fails the run.
Only loopback addresses are contacted; the server is stopped by pid on exit, error or Ctrl-C.
"""

import argparse
import calendar
import http.client
import json
import os
import platform
import re
import resource
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

REPO = "bench"  # raw ingest: @rawstring only, @timestamp = ingest time
FIELDS_REPO = "benchf"  # the same corpus via humio-structured: log timestamps and parsed fields
HOST = "127.0.0.1"
KAFKA_SCRIPTS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                             "scripts", "kafka")


class BenchError(Exception):
    """A step failed; the run exits non-zero."""


def parse_size(text):
    m = re.fullmatch(r"(\d+)\s*([kKmMgGtT]?)(i?[bB])?", text.strip())
    if not m:
        raise argparse.ArgumentTypeError(f"bad size {text!r}")
    mult = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}[m.group(2).lower()]
    return int(m.group(1)) * mult


def human_bytes(n):
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024.0
    return str(n)


def log(msg):
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


# ---------------------------------------------------------------------------------------------
# Server process


class Server:
    """One `sediment server` child process. stop() is idempotent and bounded in time."""

    def __init__(self, binary, data_dir, log_path, ingest_token, api_token, extra_args=(),
                 extra_repos=(), parser=None):
        self.binary = binary
        self.parser = parser  # the parser REPO's token is assigned (--ingest-token R:T:PARSER)
        self.extra_args = list(extra_args)
        self.data_dir = data_dir
        self.log_path = log_path
        self.ingest_token = ingest_token
        # repo -> ingest token; REPO plus one random token for each of extra_repos.
        self.ingest_tokens = {REPO: ingest_token}
        for r in extra_repos:
            self.ingest_tokens[r] = "ingest-" + secrets.token_hex(12)
        self.api_token = api_token
        self.port = free_port()
        self.proc = None
        self._log_file = None

    def command(self):
        """The command line that start() runs (subclasses start other servers)."""
        cmd = [
            self.binary, "server",
            "--data-dir", self.data_dir,
            "--listen", f"{HOST}:{self.port}",
            "--api-token", self.api_token,
        ]
        for repo, token in self.ingest_tokens.items():
            spec = f"{repo}:{token}"
            if repo == REPO and self.parser:
                spec += ":" + self.parser
            cmd += ["--ingest-token", spec]
        return cmd + self.extra_args

    def ready(self):
        """True once the server answers; raises OSError while it cannot be reached."""
        status, _ = http_request(self.port, "GET", "/api/v1/status", None,
                                 {"Authorization": f"Bearer {self.api_token}"}, timeout=2)
        return status == 200

    def wait_digesting(self, timeout):
        """Waits until this (single) node's digest holds every ingest partition, as
        /api/v1/status lists them; returns the seconds waited."""
        t0 = time.monotonic()
        deadline = t0 + timeout
        while True:
            status, data = http_request(self.port, "GET", "/api/v1/status", None,
                                        {"Authorization": f"Bearer {self.api_token}"}, timeout=5)
            if status == 200:
                st = json.loads(data)
                claimed = sum(1 for p in st.get("partitions", []) if p.get("claimed"))
                if st.get("ingestPartitions") and claimed == st["ingestPartitions"]:
                    return time.monotonic() - t0
            if time.monotonic() > deadline:
                raise BenchError(f"the digest did not hold every ingest partition within "
                                 f"{timeout}s (last status HTTP {status})")
            time.sleep(0.2)

    def start(self, timeout):
        cmd = self.command()
        log("starting: " + " ".join(cmd))
        self._log_file = open(self.log_path, "wb")
        # Own session: Ctrl-C reaches only the driver, which then stops the server by pid.
        self.proc = subprocess.Popen(cmd, stdout=self._log_file, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise BenchError(f"server exited with {self.proc.returncode} before ready:\n"
                                 + self.log_tail())
            try:
                if self.ready():
                    log(f"server ready on {HOST}:{self.port} (pid {self.proc.pid})")
                    return
            except (OSError, http.client.HTTPException):
                pass
            time.sleep(0.2)
        raise BenchError(f"server not ready after {timeout}s:\n" + self.log_tail())

    def log_tail(self, lines=30):
        try:
            with open(self.log_path, "rb") as f:
                data = f.read()[-20000:].decode("utf-8", "replace")
            return "\n".join(data.splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout=15):
        if self.proc is None:
            return
        if self.proc.poll() is None:
            try:
                os.kill(self.proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                log(f"server pid {self.proc.pid} ignored SIGTERM for {timeout}s; SIGKILL")
                try:
                    os.kill(self.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.proc.wait(timeout=10)
        if self._log_file:
            self._log_file.close()
            self._log_file = None


def http_request(port, method, path, body, headers, timeout=60, conn=None):
    """Returns (status, body bytes). Uses `conn` (keep-alive) when given."""
    own = conn is None
    if own:
        conn = http.client.HTTPConnection(HOST, port, timeout=timeout)
    try:
        conn.request(method, path, body=body, headers=headers)
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        if own:
            conn.close()


def query(server, query_string, start_ms, end_ms, timeout=600, repo=REPO):
    body = json.dumps({"queryString": query_string, "start": start_ms, "end": end_ms,
                       "isLive": False}).encode()
    headers = {"Authorization": f"Bearer {server.api_token}",
               "Content-Type": "application/json", "Accept": "application/json"}
    status, data = http_request(server.port, "POST", f"/api/v1/repositories/{repo}/query", body,
                                headers, timeout=timeout)
    if status != 200:
        raise BenchError(f"query {query_string!r}: HTTP {status}: {data[:500]!r}")
    try:
        return json.loads(data)
    except ValueError as e:
        raise BenchError(f"query {query_string!r}: bad JSON ({e}): {data[:500]!r}") from e


def count_events(server, start_ms, end_ms, repo=REPO):
    rows = query(server, "| count()", start_ms, end_ms, repo=repo)
    if not isinstance(rows, list) or len(rows) != 1 or "_count" not in rows[0]:
        raise BenchError(f"count(): unexpected answer {str(rows)[:300]}")
    return int(rows[0]["_count"])


# ---------------------------------------------------------------------------------------------
# Data


def run_gen(gen, out, size, seed, start_ms, rate, needle=None, needle_every=0):
    cmd = [gen, "--format", "apache", "--bytes", str(size), "--seed", str(seed),
           "--start-ms", str(start_ms), "--rate", str(rate), "--out", out]
    if needle:
        cmd += ["--needle", needle, "--needle-every", str(needle_every)]
    t0 = time.monotonic()
    res = subprocess.run(cmd, stderr=subprocess.PIPE, text=True, timeout=3600)
    secs = time.monotonic() - t0
    if res.returncode != 0:
        raise BenchError(f"sediment-gen failed ({res.returncode}): {res.stderr}")
    m = re.search(r"lines=(\d+) bytes=(\d+) needles=(\d+)", res.stderr)
    if not m:
        raise BenchError(f"sediment-gen: no count line in {res.stderr!r}")
    lines, nbytes, needles = (int(g) for g in m.groups())
    log(f"generated {out}: {lines} lines, {human_bytes(nbytes)} in {secs:.2f}s "
        f"({nbytes / secs / 1e6:.0f} MB/s), needles={needles}")
    return {"lines": lines, "bytes": nbytes, "needles": needles, "gen_seconds": secs}


def split_batches(data, batch_lines):
    """Splits bytes into line-aligned chunks of batch_lines lines: [(bytes, line_count)]."""
    out = []
    pos, n = 0, len(data)
    while pos < n:
        end, k = pos, 0
        while k < batch_lines and end < n:
            nl = data.find(b"\n", end)
            end = n if nl < 0 else nl + 1
            k += 1
        out.append((data[pos:end], k))
        pos = end
    return out


# ---------------------------------------------------------------------------------------------
# Ingest


def ingest_batches(server, batches, clients, max_retries=5, repo=REPO,
                   path="/api/v1/ingest/raw", encode=None):
    """POSTs every batch exactly once per success; returns (start, seconds until last 200,
    stats). With `encode`, the body sent for a batch is encode(raw batch) (JSON) and stats'
    "bytes" still counts the raw batch bytes ("wire_bytes" what was sent)."""
    lock = threading.Lock()
    state = {"next": 0, "errors": [], "retries": 0, "events": 0, "bytes": 0, "wire_bytes": 0}
    headers = {"Authorization": f"Bearer {server.ingest_tokens[repo]}",
               "Content-Type": ("application/json" if encode else "text/plain; charset=utf-8")}

    def worker():
        conn = http.client.HTTPConnection(HOST, server.port, timeout=120)
        try:
            while True:
                with lock:
                    if state["errors"] or state["next"] >= len(batches):
                        return
                    i = state["next"]
                    state["next"] += 1
                raw, k = batches[i]
                try:
                    body = encode(raw) if encode else raw
                except BenchError as e:
                    with lock:
                        state["errors"].append(f"batch {i}: {e}")
                    return
                attempt = 0
                while True:
                    try:
                        status, data = http_request(server.port, "POST", path, body, headers,
                                                    conn=conn)
                    except (OSError, http.client.HTTPException) as e:
                        # The request may or may not have been taken: never resend it.
                        with lock:
                            state["errors"].append(f"batch {i}: connection error: {e}")
                        return
                    if status == 200:
                        with lock:
                            state["events"] += k
                            state["bytes"] += len(raw)
                            state["wire_bytes"] += len(body)
                        break
                    if status in (429, 503) and attempt < max_retries:
                        attempt += 1
                        with lock:
                            state["retries"] += 1
                        time.sleep(0.05 * (2 ** attempt))
                        continue
                    with lock:
                        state["errors"].append(f"batch {i}: HTTP {status}: {data[:300]!r}")
                    return
        finally:
            conn.close()

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(clients)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    secs = time.monotonic() - t0
    if state["errors"]:
        raise BenchError("ingest failed: " + "; ".join(state["errors"][:5]))
    return t0, secs, state


def wait_searchable(server, expected, start_ms, end_ms, timeout, repo=REPO, count=None):
    """Polls `| count()` (or count(), when given) until it equals `expected`. Returns the
    monotonic time it did."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        got = (count() if count else count_events(server, start_ms, end_ms, repo=repo))
        now = time.monotonic()
        if got == expected:
            return now
        if got > expected:
            raise BenchError(f"count() = {got} > {expected} ingested: duplicates")
        if got != last:
            last = got
        if now > deadline:
            raise BenchError(f"count() = {got}, expected {expected} after {timeout}s")
        if not server.alive():
            raise BenchError("server died:\n" + server.log_tail())
        time.sleep(0.25)


def post_batches(benchutil, server, in_path, batch_lines, clients, repo=REPO,
                 path="/api/v1/ingest/raw"):
    """`sediment-benchutil post` of in_path's lines in batch_lines batches over `clients`
    keep-alive connections (the batches split_batches makes): ingest_batches' answer, from a
    native client. The Python clients used 0.6-1.0 CPU-s per 512 MB on the cores the server and
    the broker share, where kcat, which (b) compares with, is native code. stats has
    "client_cpu_seconds" (the client process while it sent)."""
    cmd = [benchutil, "post", "--port", str(server.port), "--token", server.ingest_tokens[repo],
           "--in", in_path, "--path", path, "--batch-lines", str(batch_lines),
           "--clients", str(clients)]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=7200)
    if res.returncode != 0:
        raise BenchError(f"ingest failed: sediment-benchutil post exited {res.returncode}: "
                         f"{res.stderr.strip()[-1000:]}")
    r = json.loads(res.stdout)
    st = {"events": r["events"], "bytes": r["bytes"], "retries": r["retries"],
          "client_cpu_seconds": r["cpu_seconds"]}
    return r["start_monotonic"], r["seconds"], st


def raw_append_fsync(benchutil, in_path, out_path, batch_lines, batches):
    """The machine's append + fdatasync-per-batch rate for the same batches."""
    if benchutil and os.path.exists(benchutil):
        res = subprocess.run([benchutil, "append-fsync", "--in", in_path, "--out", out_path,
                              "--batch-lines", str(batch_lines)],
                             capture_output=True, text=True, timeout=3600)
        if res.returncode != 0:
            raise BenchError(f"sediment-benchutil append-fsync failed: {res.stderr}")
        r = json.loads(res.stdout)
        r["method"] = "sediment-benchutil (Env append + fdatasync per batch)"
    else:
        fd = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        lines = 0
        t0 = time.monotonic()
        try:
            for body, k in batches:
                view = memoryview(body)
                while view:
                    view = view[os.write(fd, view):]
                os.fdatasync(fd)
                lines += k
        finally:
            os.close(fd)
        secs = time.monotonic() - t0
        nbytes = sum(len(b) for b, _ in batches)
        r = {"bytes": nbytes, "lines": lines, "batches": len(batches), "seconds": secs,
             "events_per_s": lines / secs, "mb_per_s": nbytes / secs / 1e6,
             "method": "python os.write + os.fdatasync per batch"}
    os.unlink(out_path)
    return r


# ---------------------------------------------------------------------------------------------
# Baselines for search and size


CLK_TCK = os.sysconf("SC_CLK_TCK")


def process_cpu_seconds(pid):
    """User + system CPU seconds of process `pid` (all its threads) so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime (fields 14, 15)


def children_cpu_seconds():
    """User + system CPU seconds of this process's waited-for children so far."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def own_cpu_seconds():
    """User + system CPU seconds of this process (every thread) so far."""
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def machine_busy_seconds():
    """CPU seconds all CPUs of the machine spent not idle so far (/proc/stat)."""
    with open("/proc/stat") as f:
        vals = [int(x) for x in f.readline().split()[1:]]
    idle = vals[3] + (vals[4] if len(vals) > 4 else 0)  # idle + iowait
    total = sum(vals[:8])  # user nice system idle iowait irq softirq steal (guest is in user)
    return (total - idle) / CLK_TCK


def load_average():
    with open("/proc/loadavg") as f:
        return [float(x) for x in f.read().split()[:3]]


def measure(fn, cpu_of):
    """Calls fn() once. Returns (wall seconds, its result, cpu): `cpu_seconds` (what cpu_of()
    counted: the server process or this driver's children), `machine_busy_seconds` (all CPUs),
    and `other_cores` = CPU seconds of everything else on the machine (other users, the driver
    itself) / wall seconds."""
    c0, m0 = cpu_of(), machine_busy_seconds()
    t0 = time.monotonic()
    result = fn()
    secs = time.monotonic() - t0
    c1, m1 = cpu_of(), machine_busy_seconds()
    return secs, result, {"cpu_seconds": c1 - c0, "machine_busy_seconds": m1 - m0,
                          "other_cores": max(0.0, (m1 - m0) - (c1 - c0)) / max(secs, 1e-9)}


def grep_count(path, needle, ignore_case):
    cmd = ["grep", "-c"] + (["-i"] if ignore_case else []) + ["-F", "--", needle, path]
    env = dict(os.environ, LC_ALL="C")
    res = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=3600)
    if res.returncode not in (0, 1):
        raise BenchError(f"{' '.join(cmd)} failed: {res.stderr}")
    return int(res.stdout.strip() or 0)


# awk programs doing on the raw file what the queries do; each prints "KEY<TAB>COUNT" lines.
# Apache combined: $9 is the status; $4 $5 are "[dd/Mon/yyyy:HH:MM:SS" "+0000]".
AWK_GROUPBY_STATUS = r'{ c[$9]++ } END { for (k in c) printf "%s\t%d\n", k, c[k] }'
AWK_MINUTES = ('{ c[substr($4, 2, 17) " " $5]++ } '
               r'END { for (k in c) printf "%s\t%d\n", k, c[k] }')
AWK_REGEX_STATUS = ('match($0, /" [0-9][0-9][0-9] /) { c[substr($0, RSTART + 2, 3)]++ } '
                    r'END { for (k in c) printf "%s\t%d\n", k, c[k] }')


def awk_binary():
    awk = shutil.which("mawk") or shutil.which("awk")
    if not awk:
        raise BenchError("no awk on PATH")
    return awk


def awk_counts(awk, program, path):
    """{key: count} printed by `awk program path` (LC_ALL=C)."""
    env = dict(os.environ, LC_ALL="C")
    res = subprocess.run([awk, program, path], capture_output=True, text=True, env=env,
                         timeout=3600)
    if res.returncode != 0:
        raise BenchError(f"{awk} {program!r} failed ({res.returncode}): {res.stderr[:500]}")
    out = {}
    for line in res.stdout.splitlines():
        key, _, n = line.rpartition("\t")
        out[key] = int(n)
    return out


MONTHS = {m: i + 1 for i, m in enumerate(
    ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"))}


def apache_time_ms(stamp):
    """'dd/Mon/yyyy:HH:MM[:SS] +hhmm' (brackets allowed) -> epoch ms (UTC)."""
    m = re.fullmatch(r"\[?(\d\d)/(\w{3})/(\d{4}):(\d\d):(\d\d)(?::(\d\d))? ([+-])(\d\d)(\d\d)\]?",
                     stamp)
    if not m or m.group(2) not in MONTHS:
        raise BenchError(f"bad Apache timestamp {stamp!r}")
    d, mon, y, hh, mm, ss, sign, oh, om = m.groups()
    secs = calendar.timegm((int(y), MONTHS[mon], int(d), int(hh), int(mm), int(ss or 0)))
    offset = (int(oh) * 60 + int(om)) * 60
    return (secs - offset if sign == "+" else secs + offset) * 1000


APACHE_LINE = re.compile(
    r'(\S+) (\S+) (\S+) \[([^\]]+)\] "(\S+) (\S+) (\S+)" (\d{3}) (\S+) "([^"]*)" "([^"]*)"')
APACHE_FIELDS = ("client", "ident", "user", None, "method", "url", "httpversion", "status",
                 "size", "referrer", "useragent")


class StructuredEncoder:
    """Raw Apache lines -> a humio-structured body: per line `timestamp` (epoch ms of the log
    time), `rawstring` (the line) and the `attributes` an access-log parser would extract
    (APACHE_FIELDS, strings). Thread-safe (the timestamp cache is a dict of immutable values)."""

    def __init__(self):
        self._stamps = {}

    def __call__(self, raw):
        events = []
        for line in raw.decode("utf-8").splitlines():
            if not line:
                continue
            m = APACHE_LINE.fullmatch(line)
            if not m:
                raise BenchError(f"not an Apache combined line: {line[:200]!r}")
            stamp = m.group(4)
            ms = self._stamps.get(stamp)
            if ms is None:
                ms = self._stamps[stamp] = apache_time_ms(stamp)
            attrs = {name: v for name, v in zip(APACHE_FIELDS, m.groups()) if name}
            events.append({"timestamp": ms, "attributes": attrs, "rawstring": line})
        return json.dumps([{"events": events}], separators=(",", ":")).encode()


def zstd_size(path, work_dir, benchutil):
    zstd = shutil.which("zstd")
    if zstd:
        out = os.path.join(work_dir, "raw.zst")
        t0 = time.monotonic()
        res = subprocess.run([zstd, "-3", "-q", "-f", "-o", out, path], capture_output=True,
                             text=True, timeout=3600)
        if res.returncode != 0:
            raise BenchError(f"zstd -3 failed: {res.stderr}")
        size = os.path.getsize(out)
        os.unlink(out)
        return size, "zstd -3 (CLI)", time.monotonic() - t0
    if benchutil and os.path.exists(benchutil):
        t0 = time.monotonic()
        res = subprocess.run([benchutil, "zstd-size", "--in", path, "--level", "3"],
                             capture_output=True, text=True, timeout=3600)
        if res.returncode != 0:
            raise BenchError(f"sediment-benchutil zstd-size failed: {res.stderr}")
        return (json.loads(res.stdout)["compressed_bytes"], "libzstd level 3 (benchutil)",
                time.monotonic() - t0)
    raise BenchError("neither the zstd command nor sediment-benchutil is available")


def dir_bytes(root, pred=lambda name: True):
    total, files = 0, 0
    for dirpath, _, names in os.walk(root):
        for name in names:
            if pred(name):
                try:
                    total += os.path.getsize(os.path.join(dirpath, name))
                    files += 1
                except OSError:
                    pass  # removed by a concurrent merge
    return total, files


def segment_bytes(data_dir):
    """Bytes of segment files: *.seg anywhere, else everything under a `segments` folder."""
    seg, nseg = dir_bytes(data_dir, lambda n: n.endswith(".seg"))
    if nseg:
        return seg, nseg, "*.seg files"
    total, files, where = 0, 0, []
    for dirpath, dirnames, _ in os.walk(data_dir):
        for d in dirnames:
            if d == "segments":
                b, f = dir_bytes(os.path.join(dirpath, d))
                total, files = total + b, files + f
                where.append(os.path.relpath(os.path.join(dirpath, d), data_dir))
    return total, files, ("files under " + ", ".join(where)) if where else "no segment files found"


def live_segment_bytes(server):
    """Bytes of the segments the server's Global lists (`sediment_segment_bytes`, summed over the
    repositories of /metrics), or None when /metrics does not answer. Files on disk exceed it while
    a merge's inputs wait out their grace before deletion (src/merge: 30 s)."""
    try:
        status, data = http_request(server.port, "GET", "/metrics", None,
                                    {"Authorization": f"Bearer {server.api_token}"}, timeout=10)
    except OSError:
        return None
    if status != 200:
        return None
    total = 0
    for line in data.decode(errors="replace").splitlines():
        m = re.match(r'sediment_segment_bytes\{[^}]*\}\s+([0-9.eE+]+)\s*$', line)
        if m:
            total += int(float(m.group(1)))
    return total


def settle_segments(data_dir, settle, timeout, server=None):
    """Waits until the segment files' bytes stop changing for `settle` seconds (flushes, merges)
    and, with `server`, until they are the bytes of the segments its Global lists (no merged-away
    file left waiting for deletion). Returns (bytes, files, how found, live bytes or None,
    settled: False when `timeout` ran out first)."""
    deadline = time.monotonic() + timeout
    last, since = None, time.monotonic()
    while True:
        cur = segment_bytes(data_dir)
        now = time.monotonic()
        if cur[:2] != (last[:2] if last else None):
            last, since = cur, now
        stable = now - since >= settle
        if stable or now > deadline:
            live = live_segment_bytes(server) if server is not None else None
            settled = stable and (server is None or live == cur[0])
            if settled or now > deadline:
                return (*cur, live, settled)
        time.sleep(0.5)


# ---------------------------------------------------------------------------------------------
# Parsers at ingest (--parsers): the cost of parsing (src/parsers/README.md)

PARSER_RUNS = ("none", "kv", "accesslog")


def run_parsers(args, server_bin, gen, work, report):
    """The first --ingest-size bytes of the Apache corpus POSTed to /api/v1/ingest/raw through a
    token assigned to each parser in turn (`none`: stored as sent; `kv`: the default for raw
    ingest; `accesslog`), each on a fresh server and data dir, the same clients and batches.
    Reports acked events/s of each and accesslog / none, accesslog / kv (target >= 0.7). Checks
    that every event is searchable and, for accesslog, that the events carry their log time and
    `status`."""
    now_ms = int(time.time() * 1000)
    start_ms = (now_ms - 3_600_000) // 60_000 * 60_000
    corpus = os.path.join(work, "parsers.log")
    run_gen(gen, corpus, args.ingest_size, args.seed, start_ms, 1000.0)
    with open(corpus, "rb") as f:
        data = f.read()
    batches = split_batches(data, args.batch_lines)
    events = sum(k for _, k in batches)
    del data
    out = {"events": events, "bytes": sum(len(b) for b, _ in batches), "clients": args.clients,
           "batch_lines": args.batch_lines, "runs": {}}
    report["parser_ingest"] = out
    for parser in PARSER_RUNS:
        data_dir = os.path.join(work, "data-" + parser)
        shutil.rmtree(data_dir, ignore_errors=True)
        os.makedirs(data_dir)
        server = Server(server_bin, data_dir, os.path.join(work, f"server-{parser}.log"),
                        "ingest-" + secrets.token_hex(12), "api-" + secrets.token_hex(12),
                        parser=parser)
        try:
            server.start(args.server_timeout)
            log(f"parser {parser}: {events} events")
            t0, secs, st = ingest_batches(server, batches, args.clients)
            if st["events"] != events:
                raise BenchError(f"parser {parser}: acknowledged {st['events']} of {events}")
            wait_searchable(server, events, start_ms - 86_400_000, now_ms + 86_400_000,
                            args.searchable_timeout)
            if parser == "accesslog":
                # Every event at its log time (the hour before the run), each with a status.
                n = count_events(server, start_ms - 60_000, now_ms + 1)
                s = query(server, "status=* | count()", start_ms - 60_000, now_ms + 1)
                if n != events or s != [{"_count": str(events)}]:
                    raise BenchError(f"accesslog: {n} events in the log-time range, status "
                                     f"on {s}, sent {events}")
            out["runs"][parser] = {"seconds_to_last_ack": secs, "events_per_s_acked": events / secs,
                                   "retries": st["retries"]}
        finally:
            server.stop()
            if not args.keep:
                shutil.rmtree(data_dir, ignore_errors=True)
    if not args.keep:
        os.unlink(corpus)
    runs = out["runs"]
    out["ratio_accesslog_vs_none"] = runs["accesslog"]["events_per_s_acked"] / runs["none"]["events_per_s_acked"]
    out["ratio_accesslog_vs_kv"] = runs["accesslog"]["events_per_s_acked"] / runs["kv"]["events_per_s_acked"]
    out["target"] = "accesslog >= 0.7x raw ingest events/s (none and kv)"
    out["target_met"] = min(out["ratio_accesslog_vs_none"], out["ratio_accesslog_vs_kv"]) >= 0.7
    lines = ["", f"parsers at ingest: {events} events, {human_bytes(out['bytes'])}, "
                 f"{args.clients} clients x {args.batch_lines}-line batches, fresh server each"]
    for parser in PARSER_RUNS:
        lines.append(f"    {parser:<10} {runs[parser]['events_per_s_acked']:>12,.0f} events/s acked "
                     f"({runs[parser]['seconds_to_last_ack']:.2f}s)")
    lines.append(f"    accesslog / none {out['ratio_accesslog_vs_none']:.3f}, accesslog / kv "
                 f"{out['ratio_accesslog_vs_kv']:.3f}; target >= 0.7: "
                 f"{'MET' if out['target_met'] else 'NOT MET'}")
    print("\n".join(lines), flush=True)


# ---------------------------------------------------------------------------------------------
# Main


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build-dir", default="build")
    ap.add_argument("--server-bin", help="default <build-dir>/src/cli/sediment")
    ap.add_argument("--tools-dir", help="where sediment-gen/-benchutil are; default <build-dir>/bench")
    ap.add_argument("--size", type=parse_size, default=parse_size("1G"),
                    help="raw bytes in the search corpus (default 1G)")
    ap.add_argument("--ingest-size", type=parse_size, default=parse_size("256M"),
                    help="raw bytes for the ingest measurement, a prefix of the corpus")
    ap.add_argument("--work-dir", help="default <build-dir>/bench-work")
    ap.add_argument("--report", help="JSON report path; default <work-dir>/report.json")
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--batch-lines", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--runs", type=int, default=3, help="best of N for the timed searches")
    ap.add_argument("--query-threads", type=int, default=2,
                    help="the server's --query-threads (threads per query; default 2); per-core "
                         "figures divide by min(this, CPUs)")
    ap.add_argument("--searchable-timeout", type=float, default=900)
    ap.add_argument("--server-timeout", type=float, default=60)
    ap.add_argument("--settle", type=float, default=10,
                    help="seconds the segment bytes must stay unchanged before sizing them")
    ap.add_argument("--smoke", action="store_true",
                    help="tiny run (5M) to check the driver works; no speed expectations")
    ap.add_argument("--keep", action="store_true", help="keep the data dir and raw files")
    ap.add_argument("--parsers", action="store_true",
                    help="only the parsers' cost: --ingest-size of the corpus ingested raw through "
                         "tokens assigned to none, kv and accesslog, a fresh server each")
    ap.add_argument("--kafka", action="store_true",
                    help="ingest on a local one-broker Kafka (RF 1) beside kcat producing the "
                         "same bytes; measures --ingest-size only (no search or size parts)")
    ap.add_argument("--kafka-partitions", type=int, default=24,
                    help="ingest partitions of sediment's topic and of the kcat topic (24)")
    ap.add_argument("--kafka-timeout", type=float, default=180,
                    help="seconds for the broker to start and for topics to get leaders")
    ap.add_argument("--client", choices=("native", "python"), default="native",
                    help="--kafka: the HTTP clients of (a): sediment-benchutil post (native "
                    "code, as kcat in (b) is; the default) or this driver's Python threads")
    ap.add_argument("--kafka-warmup-rounds", type=int, default=3,
                    help="--kafka: untimed rounds of sediment's ingest and kcat's produce that "
                    "warm the broker up before the timed runs (3; --smoke: 1)")
    ap.add_argument("--kafka-runs", type=int, default=3,
                    help="--kafka: runs of sediment's ingest and of kcat's produce, taking turns, "
                    "each to topics of its own; the fastest of each side counts (3)")
    ap.add_argument("--kcat-property", action="append", default=[], metavar="KEY=VALUE",
                    help="extra librdkafka property for the kcat producer (-X), repeatable")
    args = ap.parse_args()
    if args.kafka_runs < 1:
        ap.error("--kafka-runs must be at least 1")
    if args.kafka_warmup_rounds < 0:
        ap.error("--kafka-warmup-rounds must not be negative")

    if args.kafka:
        missing = kafka_available()
        if missing:
            print(f"run_benchmarks --kafka: missing {missing}; skipped", file=sys.stderr)
            return 77  # ctest SKIP_RETURN_CODE
        if args.size == parse_size("1G"):
            args.size = args.ingest_size
    if args.smoke:
        args.size = parse_size("5M")
        args.ingest_size = parse_size("5M")
        args.settle = min(args.settle, 3)
        args.searchable_timeout = min(args.searchable_timeout, 180)
        args.kafka_runs = 1
        args.kafka_warmup_rounds = min(args.kafka_warmup_rounds, 1)
    args.ingest_size = min(args.ingest_size, args.size)
    build = os.path.abspath(args.build_dir)
    server_bin = os.path.abspath(args.server_bin or os.path.join(build, "src", "cli", "sediment"))
    tools = os.path.abspath(args.tools_dir or os.path.join(build, "bench"))
    gen = os.path.join(tools, "sediment-gen")
    benchutil = os.path.join(tools, "sediment-benchutil")
    work = os.path.abspath(args.work_dir or os.path.join(build, "bench-work"))
    report_path = args.report or os.path.join(
        work, "report-kafka.json" if args.kafka else "report.json")
    for path in (server_bin, gen):
        if not os.access(path, os.X_OK):
            print(f"run_benchmarks: missing executable {path} (build it first)", file=sys.stderr)
            return 2

    os.makedirs(work, exist_ok=True)
    data_dir = os.path.join(work, "data")
    shutil.rmtree(data_dir, ignore_errors=True)
    os.makedirs(data_dir)

    report = {
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {"cpus": os.cpu_count(), "kernel": platform.release(),
                    "python": platform.python_version(), "load_average": load_average()},
        "params": {"size": args.size, "ingest_size": args.ingest_size, "clients": args.clients,
                   "batch_lines": args.batch_lines, "seed": args.seed, "runs": args.runs,
                   "smoke": args.smoke, "kafka": args.kafka,
                   "query_threads": args.query_threads},
        "ok": False,
    }
    # Whatever exists in ctx is stopped by pid in `finally`: the server first (a Kafka client),
    # then the broker.
    ctx = {"server": None, "cluster": None, "kafka_dir": None, "data_dir": data_dir}
    if not args.kafka:
        ctx["server"] = Server(server_bin, data_dir, os.path.join(work, "server.log"),
                               "ingest-" + secrets.token_hex(12), "api-" + secrets.token_hex(12),
                               extra_args=["--query-threads", str(args.query_threads)],
                               extra_repos=[FIELDS_REPO])

    def on_term(signum, frame):
        raise KeyboardInterrupt()

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # even when started with it ignored
    rc = 1
    try:
        if args.kafka:
            run_kafka(args, ctx, server_bin, gen, benchutil, work, report)
        elif args.parsers:
            run_parsers(args, server_bin, gen, work, report)
        else:
            run(args, ctx["server"], gen, benchutil, work, report)
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
        server = ctx["server"]
        if server is not None and server.proc is not None:
            was_running = server.alive()
            server.stop()
            if was_running:
                log(f"server pid {server.proc.pid} stopped (exit {server.proc.returncode})")
        if ctx["cluster"] is not None:
            try:
                ctx["cluster"].stop()
                log(f"Kafka broker stopped ({ctx['kafka_dir']})")
            except Exception as e:  # noqa: BLE001 - report and go on cleaning up
                log(f"stopping the Kafka broker failed: {e}")
                rc = rc or 1
        with open(report_path, "w") as f:
            json.dump(report, f, indent=2)
        log(f"report written to {report_path}")
        if not args.keep:
            shutil.rmtree(data_dir, ignore_errors=True)
            kc = ctx["cluster"]
            if ctx["kafka_dir"] and (kc is None or kc.state is None or not kc.is_running(0)):
                shutil.rmtree(ctx["kafka_dir"], ignore_errors=True)
            for name in ("corpus.log", "ingest.log", "rest.log", "kcat-input.bin"):
                try:
                    os.unlink(os.path.join(work, name))
                except OSError:
                    pass
    return rc


def run(args, server, gen, benchutil, work, report):
    now_ms = int(time.time() * 1000)
    # Event times lie in the hour before the run; queries cover a day either side, so they match
    # whether the server keeps the parsed timestamp or the ingest time.
    start_ms = (now_ms - 3_600_000) // 60_000 * 60_000
    approx_lines = max(1, args.size // 210)
    rate = max(1000.0, approx_lines / 3000.0)  # whole corpus within ~50 minutes of log time
    q_start, q_end = start_ms - 86_400_000, now_ms + 86_400_000
    needle = "zq" + secrets.token_hex(6) + "needle"
    needle_every = max(1, approx_lines // 20)

    corpus = os.path.join(work, "corpus.log")
    g = run_gen(gen, corpus, args.size, args.seed, start_ms, rate, needle, needle_every)
    report["corpus"] = dict(g, path=corpus, needle=needle, needle_every=needle_every)
    with open(corpus, "rb") as f:
        data = f.read()
    if args.ingest_size >= args.size or args.ingest_size >= len(data):
        cut = len(data)
    else:
        cut = data.rfind(b"\n", 0, args.ingest_size) + 1
    ingest_data, rest_data = data[:cut], data[cut:]
    del data
    ingest_path = os.path.join(work, "ingest.log")
    with open(ingest_path, "wb") as f:
        f.write(ingest_data)
    batches = split_batches(ingest_data, args.batch_lines)
    ingest_events = sum(k for _, k in batches)
    del ingest_data

    server.start(args.server_timeout)

    # (a) ingest
    log(f"(a) ingest: {ingest_events} events, {human_bytes(sum(len(b) for b, _ in batches))}, "
        f"{len(batches)} batches, {args.clients} clients")
    t0, secs, st = ingest_batches(server, batches, args.clients)
    if st["events"] != ingest_events:
        raise BenchError(f"acknowledged {st['events']} events, sent {ingest_events}")
    t_searchable = wait_searchable(server, ingest_events, q_start, q_end, args.searchable_timeout)
    secs_searchable = t_searchable - t0
    nbytes = st["bytes"]
    raw = raw_append_fsync(benchutil, ingest_path, os.path.join(work, "fsync.out"),
                           args.batch_lines, batches)
    del batches
    ingest = {
        "events": ingest_events, "bytes": nbytes, "clients": args.clients,
        "batch_lines": args.batch_lines, "retries": st["retries"],
        "avg_event_bytes": nbytes / max(1, ingest_events),
        "seconds_to_last_ack": secs,
        "events_per_s_acked": ingest_events / secs, "mb_per_s_acked": nbytes / secs / 1e6,
        "seconds_to_searchable": secs_searchable,
        "events_per_s_searchable": ingest_events / secs_searchable,
        "mb_per_s_searchable": nbytes / secs_searchable / 1e6,
        "raw_append_fsync": raw,
        "ratio_acked_vs_raw_fsync": (ingest_events / secs) / raw["events_per_s"],
        "target": ">= 100k events/s of ~250 bytes (acked)",
        "target_met": ingest_events / secs >= 100_000,
    }
    report["ingest"] = ingest

    # (b) search: the rest of the corpus, then the needle.
    total_events = g["lines"]
    if rest_data:
        rest_batches = split_batches(rest_data, args.batch_lines)
        log(f"(b) loading the rest of the corpus: {total_events - ingest_events} events, "
            f"{human_bytes(len(rest_data))}")
        del rest_data
        t0, secs, st = ingest_batches(server, rest_batches, args.clients)
        if st["events"] != total_events - ingest_events:
            raise BenchError(f"acknowledged {st['events']} events, sent "
                             f"{total_events - ingest_events}")
        t_all = wait_searchable(server, total_events, q_start, q_end, args.searchable_timeout)
        report["bulk_load"] = {"events": st["events"], "bytes": st["bytes"],
                               "seconds_to_last_ack": secs,
                               "events_per_s_acked": st["events"] / secs,
                               "seconds_to_searchable": t_all - t0}
        del rest_batches
    else:
        del rest_data
    total = count_events(server, q_start, q_end)
    if total != total_events:
        raise BenchError(f"count() = {total}, corpus has {total_events} events")

    # (c) stored size, before the second repository is loaded; waiting for the segment bytes to
    # settle also lets flushes and merges finish before anything is timed.
    log(f"(c) stored size: waiting for segment bytes to stay unchanged for {args.settle}s and to "
        f"be the segments the server lists (a merge's inputs wait out a grace before deletion)")
    t_settle = time.monotonic()
    seg, nseg, how, live, settled = settle_segments(server.data_dir, args.settle,
                                                    timeout=max(240, args.settle * 6),
                                                    server=server)
    settle_secs = time.monotonic() - t_settle
    if seg == 0:
        raise BenchError(f"no segment bytes under {server.data_dir} ({how})")
    if not settled:
        log(f"(c) segment files not settled after {settle_secs:.0f}s: "
            f"{seg} bytes on disk, the server lists {live}")
    z, zhow, zsecs = zstd_size(corpus, work, benchutil)
    data_total, _ = dir_bytes(server.data_dir)
    report["stored"] = {
        "segment_bytes": seg, "segment_files": nseg, "segment_files_found_as": how,
        "live_segment_bytes": live, "settled": settled,
        "settle_seconds": settle_secs,
        "data_dir_bytes": data_total, "raw_bytes": g["bytes"], "zstd3_bytes": z,
        "zstd_method": zhow, "zstd_seconds": zsecs,
        "ratio_segments_vs_zstd3": seg / z, "ratio_raw_vs_segments": g["bytes"] / seg,
        "target": "segments <= 1.1x zstd -3", "target_met": seg / z <= 1.1,
    }

    # The same corpus once more, into FIELDS_REPO through humio-structured: log timestamps and
    # the fields an access-log parser extracts at ingest (as LogScale's parsers do), for the
    # groupBy and timeChart queries.
    log(f"(d) loading the corpus into {FIELDS_REPO!r} via humio-structured "
        f"(log timestamps + {len([f for f in APACHE_FIELDS if f])} parsed fields)")
    with open(corpus, "rb") as f:
        fbatches = split_batches(f.read(), args.batch_lines)
    t0, secs, st = ingest_batches(server, fbatches, args.clients, repo=FIELDS_REPO,
                                  path="/api/v1/ingest/humio-structured",
                                  encode=StructuredEncoder())
    del fbatches
    if st["events"] != total_events:
        raise BenchError(f"{FIELDS_REPO}: acknowledged {st['events']} events, sent "
                         f"{total_events}")
    # Log time: the hour before the run. Minute-aligned so that 1m buckets are whole minutes
    # whichever end the engine aligns them to.
    f_start = (start_ms - 3_600_000) // 60_000 * 60_000
    f_end = -(-(now_ms + 3_600_000) // 60_000) * 60_000
    t_all = wait_searchable(server, total_events, f_start, f_end, args.searchable_timeout,
                            repo=FIELDS_REPO)
    report["fields_load"] = {"repo": FIELDS_REPO, "events": st["events"], "raw_bytes": st["bytes"],
                             "json_bytes": st["wire_bytes"], "seconds_to_last_ack": secs,
                             "events_per_s_acked": st["events"] / secs,
                             "seconds_to_searchable": t_all - t0, "fields": [
                                 f for f in APACHE_FIELDS if f]}
    log(f"waiting for segment bytes to stay unchanged for {args.settle}s before timing queries")
    settle_segments(server.data_dir, args.settle, timeout=max(60, args.settle * 6))

    # (b) queries, each beside grep/awk doing the same work on the raw file.
    report["search"] = search_queries(args, server, corpus, g, total_events, needle,
                                      (q_start, q_end), (f_start, f_end))
    report["decode_floor"] = decode_floor(benchutil, server.data_dir, args.runs)
    regex_ceiling(report["decode_floor"], report["search"])
    print_report(report)
    failed = [q for q in report["search"]["queries"] if q.get("error")]
    if failed:
        raise BenchError("; ".join(f"{q['name']}: {q['error']}" for q in failed))


MIN_CPU_SECONDS = 0.2


def decode_floor(benchutil, data_dir, runs):
    """What reading the segments costs before any query work: sediment-benchutil query runs
    count() over the raw repository's segment files in-process on one thread, and times
    decompressing and decoding every block alone. Any query that reads every event pays at least
    the decode cost."""
    seg_dir = os.path.join(data_dir, "segments")
    if not (benchutil and os.path.exists(benchutil) and os.path.isdir(seg_dir)):
        return {"error": f"needs sediment-benchutil and {seg_dir}"}
    res = subprocess.run([benchutil, "query", "--segments", seg_dir, "--repo", REPO,
                          "--query", "count()", "--threads", "1", "--runs", str(runs)],
                         capture_output=True, text=True, timeout=600)
    if res.returncode != 0:
        raise BenchError(f"sediment-benchutil query failed: {res.stderr.strip()}")
    r = json.loads(res.stdout)
    r["decode_gb_per_cpu_s"] = r["raw_bytes"] / r["decode_cpu_s"] / 1e9 if r["decode_cpu_s"] else 0
    return r


# Issue 16: regex extraction at least this multiple of awk's match() per core.
REGEX_TARGET_VS_AWK = 1.5


def regex_ceiling(floor, search):
    """Adds to `floor` how fast the regex query could be at most against its awk line: a query
    over the raw repository decompresses and decodes every block before any regex runs, so
    decode GB/cpu-s / awk's GB/cpu-s bounds its ratio per core from above."""
    rq = next((q for q in search["queries"] if q["name"] == "regex"), None)
    if "error" in floor or not rq or not rq.get("baseline_gb_per_s"):
        return
    awk_gb_per_cpu_s = rq["baseline_gb_per_s"]  # awk runs on one core: wall = CPU
    floor["regex_baseline_gb_per_cpu_s"] = awk_gb_per_cpu_s
    floor["regex_ceiling_vs_awk"] = floor["decode_gb_per_cpu_s"] / awk_gb_per_cpu_s
    floor["regex_target_vs_awk"] = REGEX_TARGET_VS_AWK


def cores_for(threads):
    return max(1, min(threads, os.cpu_count() or 1))


def search_queries(args, server, corpus, g, total_events, needle, raw_range, fields_range):
    """Runs the needle, groupBy, timeChart and regex queries (best of args.runs) and their
    grep/awk lines; checks every answer against the grep/awk answer. A query that fails (HTTP
    error, wrong answer) is recorded with "error" and the others still run."""
    gb = g["bytes"] / 1e9
    runs = args.runs
    cores = cores_for(args.query_threads)
    awk = awk_binary()
    server_cpu = lambda: process_cpu_seconds(server.proc.pid)  # noqa: E731
    out = {
        "raw_bytes": g["bytes"], "events": total_events, "needle": needle,
        "matches": g["needles"], "query_threads": args.query_threads, "cores": cores,
        "awk": os.path.realpath(awk), "baseline_locale": "LC_ALL=C",
        "load_average_before": load_average(), "queries": [],
    }
    log(f"(b) search: {human_bytes(g['bytes'])}, query threads {args.query_threads} "
        f"(per-core figures divide by {cores}), best of {runs}; load average "
        f"{out['load_average_before']}")
    # Warm the page cache for the baselines (the server's caches warm in its first run).
    grep_count(corpus, needle, False)

    def entry(name, q, repo, rng, baseline_cmd, run_query, run_baseline, check):
        e = {"name": name, "query": q, "repo": repo, "baseline": baseline_cmd}
        log(f"  {name}: {q!r} on {repo!r} vs {baseline_cmd}")
        # The two sides take turns, one call each, `runs` times; the fastest call of each counts.
        # A slow spell of the shared machine then falls on both sides, not on one side's series.
        bsecs = qsecs = None
        try:
            for _ in range(runs):
                try:
                    secs, bres, cpu = measure(run_baseline, children_cpu_seconds)
                except BenchError as ex:
                    raise BenchError(f"baseline: {ex}") from ex
                if bsecs is None or secs < bsecs:
                    bsecs, bcpu = secs, cpu
                secs, qres, cpu = measure(lambda: run_query(q, repo, rng), server_cpu)
                if qsecs is None or secs < qsecs:
                    qsecs, qcpu = secs, cpu
        except BenchError as ex:
            e["error"] = str(ex)
            out["queries"].append(e)
            log(f"    FAILED: {e['error']}")
            return e
        e.update({"baseline_seconds_best": bsecs, "baseline_gb_per_s": gb / bsecs,
                  "baseline_cpu_seconds": bcpu["cpu_seconds"],
                  "baseline_other_cores": bcpu["other_cores"]})
        try:
            e.update({
                "seconds_best": qsecs, "gb_per_s": gb / qsecs,
                "gb_per_s_per_core": gb / qsecs / cores,
                "server_cpu_seconds": qcpu["cpu_seconds"],
                "server_cores_busy": qcpu["cpu_seconds"] / qsecs,
                "other_cores": qcpu["other_cores"],
                "ratio_per_core_vs_baseline": (gb / qsecs / cores) / (gb / bsecs),
                "ratio_wall_vs_baseline": bsecs / qsecs,
            })
            e["target_met"] = e["ratio_per_core_vs_baseline"] >= 1.0
            # CPU-time figures: robust when other work takes the cores (clock-tick resolution,
            # so left out for runs of less than MIN_CPU_SECONDS).
            if qcpu["cpu_seconds"] >= MIN_CPU_SECONDS and bcpu["cpu_seconds"] >= MIN_CPU_SECONDS:
                e["gb_per_cpu_second"] = gb / qcpu["cpu_seconds"]
                e["baseline_gb_per_cpu_second"] = gb / bcpu["cpu_seconds"]
                e["ratio_cpu_vs_baseline"] = bcpu["cpu_seconds"] / qcpu["cpu_seconds"]
            detail = check(qres, bres)
            e.update(detail or {})
            e["verified"] = True
        except BenchError as ex:
            e["error"] = str(ex)
        if e.get("error"):
            log(f"    FAILED: {e['error']}")
        else:
            log(f"    query {e['seconds_best']:.3f}s ({e['gb_per_s_per_core']:.3f} GB/s/core), "
                f"baseline {bsecs:.3f}s ({e['baseline_gb_per_s']:.3f} GB/s), ratio/core "
                f"{e['ratio_per_core_vs_baseline']:.2f}")
        out["queries"].append(e)
        return e

    def rows_of(q, repo, rng):
        return query(server, q, rng[0], rng[1], repo=repo)

    # 1. needle: free text vs grep -c -F. Checked: exactly the planted events.
    def check_needle(rows, gc):
        if gc != g["needles"]:
            raise BenchError(f"grep -c found {gc} lines, planted {g['needles']}")
        if not isinstance(rows, list) or len(rows) != g["needles"]:
            raise BenchError(f"returned {len(rows) if isinstance(rows, list) else rows!r} "
                             f"events, planted {g['needles']}")
        bad = [r for r in rows if needle not in json.dumps(r)]
        if bad:
            raise BenchError(f"returned events without the needle: {str(bad[0])[:300]}")
        return {"matches": len(rows)}

    entry("needle", needle, REPO, raw_range, f"grep -c -F {needle} corpus", rows_of,
          lambda: grep_count(corpus, needle, False), check_needle)

    def check_needle_count(rows, gci):
        if gci != g["needles"]:
            raise BenchError(f"grep -ci found {gci} lines, planted {g['needles']}")
        n = single_count(rows, f"{needle} | count()")
        if n != g["needles"]:
            raise BenchError(f"_count = {n}, planted {g['needles']}")
        return {"matches": n}

    entry("needle_count", f"{needle} | count()", REPO, raw_range,
          f"grep -ci -F {needle} corpus", rows_of,
          lambda: grep_count(corpus, needle, True), check_needle_count)

    # 2. groupBy over a field parsed at ingest vs awk splitting every line.
    def check_groups(field):
        def check(rows, expected):
            got = group_counts(rows, field)
            compare_counts(got, expected, field)
            if sum(got.values()) != total_events:
                raise BenchError(f"groups hold {sum(got.values())} events, corpus "
                                 f"{total_events}")
            return {"groups": len(got)}
        return check

    entry("groupBy", "groupBy(status)", FIELDS_REPO, fields_range,
          f"awk '{AWK_GROUPBY_STATUS}' corpus", rows_of,
          lambda: awk_counts(awk, AWK_GROUPBY_STATUS, corpus), check_groups("status"))

    # 3. timeChart over the log timestamps (stored at ingest) vs awk cutting the minute out of
    # the timestamp text. Every non-empty bucket must hold awk's count of that minute.
    def check_minutes(rows, by_minute):
        expected = {apache_time_ms(k): v for k, v in by_minute.items()}
        if not isinstance(rows, list):
            raise BenchError(f"unexpected answer {str(rows)[:300]}")
        got = {}
        for r in rows:
            if not isinstance(r, dict) or "_bucket" not in r or "_count" not in r:
                raise BenchError(f"row without _bucket/_count: {str(r)[:300]}")
            b, n = as_int(r["_bucket"], "_bucket"), as_int(r["_count"], "_count")
            if b in got:
                raise BenchError(f"bucket {b} twice")
            got[b] = n
        compare_counts({k: v for k, v in got.items() if v}, expected, "_bucket (minute)")
        return {"buckets": len(got), "buckets_non_empty": len(expected)}

    entry("timeChart", "timeChart(span=1m)", FIELDS_REPO, fields_range,
          f"awk '{AWK_MINUTES}' corpus", rows_of,
          lambda: awk_counts(awk, AWK_MINUTES, corpus), check_minutes)

    # 4. regex extraction at query time on the raw repository vs awk's match() + substr().
    entry("regex", REGEX_QUERY, REPO, raw_range, f"awk '{AWK_REGEX_STATUS}' corpus", rows_of,
          lambda: awk_counts(awk, AWK_REGEX_STATUS, corpus), check_groups("status"))

    out["load_average_after"] = load_average()
    done = [q for q in out["queries"] if "target_met" in q and not q.get("error")]
    out["target"] = "every query >= the grep/awk line, per core"
    out["target_met"] = len(done) == len(out["queries"]) and all(q["target_met"] for q in done)
    # Flat keys of the needle figures, as before.
    nq = {q["name"]: q for q in out["queries"]}
    if "seconds_best" in nq["needle"] and "seconds_best" in nq["needle_count"]:
        n, c = nq["needle"], nq["needle_count"]
        out.update({
            "query_seconds_best": n["seconds_best"], "query_gb_per_s": n["gb_per_s"],
            "count_query_seconds_best": c["seconds_best"], "count_query_gb_per_s": c["gb_per_s"],
            "grep_c_seconds_best": n["baseline_seconds_best"],
            "grep_c_gb_per_s": n["baseline_gb_per_s"],
            "grep_ci_seconds_best": c["baseline_seconds_best"],
            "grep_ci_gb_per_s": c["baseline_gb_per_s"],
            "ratio_query_vs_grep_c": n["ratio_wall_vs_baseline"],
            "ratio_query_vs_grep_ci": c["ratio_wall_vs_baseline"],
            "grep_locale": "LC_ALL=C, -F",
        })
    return out


# The regex extraction query: the status after the request's closing quote.
REGEX_QUERY = r'regex("\" (?<status>\d{3}) ") | groupBy(status)'


def as_int(v, what):
    try:
        return int(v)
    except (TypeError, ValueError):
        try:
            f = float(v)
        except (TypeError, ValueError):
            raise BenchError(f"{what} = {v!r} is not a number") from None
        if f != int(f):
            raise BenchError(f"{what} = {v!r} is not an integer")
        return int(f)


def single_count(rows, what):
    if not isinstance(rows, list) or len(rows) != 1 or "_count" not in rows[0]:
        raise BenchError(f"{what}: unexpected answer {str(rows)[:300]}")
    return as_int(rows[0]["_count"], "_count")


def group_counts(rows, field):
    """{value of field: _count} of groupBy rows; fails on a malformed or repeated group."""
    if not isinstance(rows, list):
        raise BenchError(f"unexpected answer {str(rows)[:300]}")
    got = {}
    for r in rows:
        if not isinstance(r, dict) or field not in r or "_count" not in r:
            raise BenchError(f"row without {field}/_count: {str(r)[:300]}")
        k = str(r[field])
        if k in got:
            raise BenchError(f"group {field}={k} twice")
        got[k] = as_int(r["_count"], "_count")
    return got


def compare_counts(got, expected, what):
    if got == expected:
        return
    diff = sorted(set(got) | set(expected), key=str)
    diff = [f"{k}: query {got.get(k, 0)} vs {expected.get(k, 0)}" for k in diff
            if got.get(k, 0) != expected.get(k, 0)]
    raise BenchError(f"counts per {what} differ from grep/awk in {len(diff)} groups: "
                     + ", ".join(diff[:8]))


# ---------------------------------------------------------------------------------------------
# Kafka mode: sediment with a Kafka commit log beside kcat producing the same bytes


KCAT_SEPARATORS = (b"\x1e", b"\x1f", b"\x1d", b"\x1c", b"\x00")


def kcat_run(cmd, timeout, what):
    try:
        res = subprocess.run(cmd, capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        raise BenchError(f"{what}: kcat did not finish within {timeout}s") from e
    if res.returncode != 0:
        raise BenchError(f"{what}: kcat exited {res.returncode}: "
                         f"{res.stderr.decode('utf-8', 'replace')[-2000:]}")
    return res


def kcat_wait_topic(kcat, bootstrap, topic, partitions, timeout, create=False):
    """Waits until `topic` has `partitions` partitions, each with a leader. With create=True the
    metadata request asks the broker to auto-create it (auto.create.topics.enable=true)."""
    deadline = time.monotonic() + timeout
    seen = "no answer"
    while True:
        cmd = [kcat, "-L", "-J", "-q", "-m", "10", "-b", bootstrap, "-t", topic]
        if create:
            cmd += ["-X", "allow.auto.create.topics=true"]
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        if res.returncode == 0:
            try:
                md = json.loads(res.stdout)
                t = [x for x in md.get("topics", []) if x.get("topic") == topic]
                parts = t[0].get("partitions", []) if t else []
                seen = f"{len(parts)} partitions, error {t[0].get('error') if t else 'no topic'}"
                if len(parts) == partitions and all(p.get("leader", -1) >= 0 for p in parts):
                    return
            except (ValueError, KeyError, IndexError) as e:
                seen = f"bad metadata JSON: {e}"
        else:
            seen = res.stderr.strip()[-300:]
        if time.monotonic() > deadline:
            raise BenchError(f"topic {topic} not ready with {partitions} partitions after "
                             f"{timeout}s ({seen})")
        time.sleep(0.3)


def kcat_end_offsets(kcat, bootstrap, topic, partitions):
    """[end offset of partition p for p in 0..partitions-1] (kcat -Q, timestamp -1 = end)."""
    cmd = [kcat, "-Q", "-J", "-m", "30", "-b", bootstrap]
    for p in range(partitions):
        cmd += ["-t", f"{topic}:{p}:-1"]
    res = kcat_run(cmd, 120, f"end offsets of {topic}")
    try:
        d = json.loads(res.stdout)[topic]
        return [int(d[str(p)]["offset"]) for p in range(partitions)]
    except (ValueError, KeyError, TypeError) as e:
        raise BenchError(f"end offsets of {topic}: unexpected kcat -Q output "
                         f"{res.stdout[:500]!r} ({e})") from e


def kcat_message_sizes(kcat, bootstrap, topic, timeout):
    """Payload sizes of every message in `topic`, read from the beginning to the end."""
    res = kcat_run([kcat, "-C", "-q", "-e", "-o", "beginning", "-m", "30", "-b", bootstrap,
                    "-t", topic, "-f", "%S\n"], timeout, f"reading back {topic}")
    return [int(x) for x in res.stdout.split()]


def kafka_available():
    """None when kcat, java and the Kafka scripts are there, else what is missing."""
    missing = [c for c in ("kcat", "java") if not shutil.which(c)]
    if not os.path.exists(os.path.join(KAFKA_SCRIPTS, "cluster.py")):
        missing.append(os.path.join(KAFKA_SCRIPTS, "cluster.py"))
    return ", ".join(missing) or None


# Issue 16: sediment's acknowledged Kafka ingest at least this fraction of kcat's MB/s.
KAFKA_TARGET_RATIO = 0.8


# What every kcat producer here is given: sediment's producer guarantees, no Kafka compression.
KCAT_PROPERTIES = ["acks=all", "enable.idempotence=true", "compression.type=none"]


def kcat_produce_command(kcat, bootstrap, topic, sep, path, props):
    """`kcat -P` of the `sep`-separated messages in `path` into `topic` with -X `props`."""
    cmd = [kcat, "-P", "-b", bootstrap, "-t", topic, "-l", "-D", f"\\x{sep[0]:02x}"]
    for p in props:
        cmd += ["-X", p]
    return cmd + [path]


def kcat_produce(args, kcat, bootstrap, topic, parts, sep, kcat_input, batches, nbytes, events,
                 broker_pid, label):
    """One `kcat -P` of the batches into the fresh topic `topic`; checks that the topic holds
    every message with its size and returns the run's figures."""
    kcat_wait_topic(kcat, bootstrap, topic, parts, args.kafka_timeout, create=True)
    props = KCAT_PROPERTIES + ["linger.ms=5"] + args.kcat_property
    cmd = kcat_produce_command(kcat, bootstrap, topic, sep, kcat_input, props)
    log(f"(b) kcat produce, run {label}: {len(batches)} messages, {human_bytes(nbytes)}: "
        + " ".join(cmd))
    kc0, kb0, km0 = children_cpu_seconds(), process_cpu_seconds(broker_pid), machine_busy_seconds()
    t0 = time.monotonic()
    res = kcat_run(cmd, 3600, "kcat -P")
    ksecs = time.monotonic() - t0
    kc1, kb1, km1 = children_cpu_seconds(), process_cpu_seconds(broker_pid), machine_busy_seconds()
    kstderr = res.stderr.decode("utf-8", "replace")
    # A partition's end offset can trail kcat's last delivery report for a moment on a loaded
    # machine: ask again for up to 10 s before calling a message missing.
    offsets = kcat_end_offsets(kcat, bootstrap, topic, parts)
    deadline = time.monotonic() + 10
    while sum(offsets) < len(batches) and time.monotonic() < deadline:
        time.sleep(0.5)
        offsets = kcat_end_offsets(kcat, bootstrap, topic, parts)
    if sum(offsets) != len(batches):
        raise BenchError(f"kcat: {topic} holds {sum(offsets)} messages, produced "
                         f"{len(batches)}; kcat stderr: {kstderr[-1000:]}")
    sizes = kcat_message_sizes(kcat, bootstrap, topic, args.searchable_timeout)
    if sorted(sizes) != sorted(len(b) for b, _ in batches):
        raise BenchError(f"kcat: message sizes read back ({len(sizes)} messages, "
                         f"{sum(sizes)} bytes) differ from the batches ({len(batches)}, {nbytes})")
    return {
        "messages": len(batches), "bytes": nbytes, "seconds": ksecs,
        "mb_per_s": nbytes / ksecs / 1e6, "events_per_s_equivalent": events / ksecs,
        "topic": topic, "partitions_used": sum(1 for o in offsets if o > 0),
        "command": " ".join(cmd), "stderr_tail": kstderr[-500:],
        "kcat_cpu_seconds": kc1 - kc0, "broker_cpu_seconds": kb1 - kb0,
        "machine_busy_seconds": km1 - km0,
    }


def kcat_warmup(args, kcat, bootstrap, topic, parts, sep, kcat_input, broker_pid):
    """One untimed `kcat -P` of the batches into `topic` and one `kcat -C` of it, so that the
    broker's JVM has compiled its produce and fetch paths before anything is timed. Returns its seconds and the broker's CPU seconds
    (nothing is checked: no figure depends on it)."""
    kcat_wait_topic(kcat, bootstrap, topic, parts, args.kafka_timeout, create=True)
    cmd = kcat_produce_command(kcat, bootstrap, topic, sep, kcat_input, KCAT_PROPERTIES)
    log("warming the broker up (not timed): " + " ".join(cmd))
    b0, t0 = process_cpu_seconds(broker_pid), time.monotonic()
    kcat_run(cmd, 3600, "kcat -P (warm-up)")
    # Its fetch path too: sediment's digest reads the log back while sediment ingests.
    kcat_run([kcat, "-C", "-q", "-e", "-o", "beginning", "-b", bootstrap, "-t", topic,
              "-f", ""], 3600, "kcat -C (warm-up)")
    return {"seconds": time.monotonic() - t0,
            "broker_cpu_seconds": process_cpu_seconds(broker_pid) - b0, "topic": topic}


def sediment_kafka_run(args, ctx, server_bin, benchutil, work, kcat, bootstrap, broker_pid,
                       prefix, name, label, corpus, batches, q_start, q_end):
    """(a) once: a fresh node (data dir and topics `prefix`*) on the broker, the corpus's batches
    POSTed until the last 200, then until `| count()` sees them all; checked and stopped. Returns
    the run's figures."""
    parts = args.kafka_partitions
    events = sum(k for _, k in batches)
    nbytes = sum(len(b) for b, _ in batches)
    shutil.rmtree(ctx["data_dir"], ignore_errors=True)
    os.makedirs(ctx["data_dir"])
    server = Server(server_bin, ctx["data_dir"], os.path.join(work, f"server-{name}.log"),
                    "ingest-" + secrets.token_hex(12), "api-" + secrets.token_hex(12),
                    extra_args=["--kafka-brokers", bootstrap, "--kafka-topic-prefix", prefix,
                                "--kafka-replication-factor", "1",
                                "--kafka-min-insync-replicas", "1",
                                "--ingest-partitions", str(parts)])
    ctx["server"] = server
    server.start(args.server_timeout)
    # Timed from a node in its steady state: its digest has joined its group and holds the
    # partitions (a few seconds after it answers), so the digest's work during the ingest counts.
    waited = server.wait_digesting(args.kafka_timeout)
    log(f"the digest holds every ingest partition ({waited:.1f}s after the server answered)")

    log(f"(a) sediment ingest on Kafka, run {label}: {events} events, {human_bytes(nbytes)}, "
        f"{len(batches)} batches, {args.clients} clients")
    c0, b0, m0, d0 = (process_cpu_seconds(server.proc.pid), process_cpu_seconds(broker_pid),
                      machine_busy_seconds(), own_cpu_seconds())
    load0 = load_average()
    if args.client == "native":
        t0, secs, st = post_batches(benchutil, server, corpus, args.batch_lines, args.clients)
    else:
        t0, secs, st = ingest_batches(server, batches, args.clients)
    # CPU until the last 200 (the digest keeps working after it: not counted).
    c1, b1, m1, d1 = (process_cpu_seconds(server.proc.pid), process_cpu_seconds(broker_pid),
                      machine_busy_seconds(), own_cpu_seconds())
    # The clients' CPU: this driver's threads, or the native client's process.
    client_cpu = st.get("client_cpu_seconds", d1 - d0)
    if st["events"] != events or st["bytes"] != nbytes:
        raise BenchError(f"acknowledged {st['events']} events / {st['bytes']} bytes, sent "
                         f"{events} / {nbytes}")
    t_searchable = wait_searchable(server, events, q_start, q_end, args.searchable_timeout)
    # Until searchable the digest has done its share too: a steadier per-GB figure than the one
    # until the last 200, which holds however much of the digest's work fell before it.
    c2 = process_cpu_seconds(server.proc.pid)
    secs_searchable = t_searchable - t0
    total = count_events(server, q_start, q_end)
    if total != events:
        raise BenchError(f"count() = {total}, sent {events}")
    # The server is stopped before kcat runs so that each has the machine to itself.
    server.stop()
    log(f"server pid {server.proc.pid} stopped (exit {server.proc.returncode})")
    # Only end offsets: sediment deletes records below what its segments hold (DeleteRecords),
    # so the topic cannot be read back whole.
    ingest_topic = prefix + "ingest"
    sed_offsets = kcat_end_offsets(kcat, bootstrap, ingest_topic, parts)
    return {
        "run": label, "digest_ready_seconds": waited, "events": events, "bytes": nbytes,
        "clients": args.clients, "batch_lines": args.batch_lines, "retries": st["retries"],
        "avg_event_bytes": nbytes / max(1, events),
        "seconds_to_last_ack": secs,
        "events_per_s_acked": events / secs, "mb_per_s_acked": nbytes / secs / 1e6,
        "seconds_to_searchable": secs_searchable,
        "events_per_s_searchable": events / secs_searchable,
        "mb_per_s_searchable": nbytes / secs_searchable / 1e6,
        "server_cpu_seconds_to_last_ack": c1 - c0,
        "server_cpu_seconds_per_gb_acked": (c1 - c0) / (nbytes / 1e9),
        "server_cpu_seconds_to_searchable": c2 - c0,
        "server_cpu_seconds_per_gb_searchable": (c2 - c0) / (nbytes / 1e9),
        "broker_cpu_seconds_to_last_ack": b1 - b0,
        "machine_busy_seconds_to_last_ack": m1 - m0,
        # The HTTP clients (this driver's threads or `sediment-benchutil post`): work kcat
        # does itself in (b).
        "client": args.client,
        "client_cpu_seconds_to_last_ack": client_cpu,
        "load_average_before": load0,
        "topic": ingest_topic, "topic_messages": sum(sed_offsets),
        "topic_partitions_used": sum(1 for o in sed_offsets if o > 0),
    }


def kafka_warmup_rounds(args, ctx, server_bin, benchutil, work, kcat, bootstrap, broker_pid,
                        prefix, corpus, batches, kcat_cmd, nbytes):
    """--kafka-warmup-rounds rounds, untimed, of sediment's ingest (one node on topics `prefix`*,
    the corpus POSTed once per round, nothing checked but the 200s) and `kcat_cmd`; returns each
    round's MB/s of both, for the report."""
    rounds = []
    if args.kafka_warmup_rounds == 0:
        return rounds
    shutil.rmtree(ctx["data_dir"], ignore_errors=True)
    os.makedirs(ctx["data_dir"])
    server = Server(server_bin, ctx["data_dir"], os.path.join(work, "server-warmup.log"),
                    "ingest-" + secrets.token_hex(12), "api-" + secrets.token_hex(12),
                    extra_args=["--kafka-brokers", bootstrap, "--kafka-topic-prefix", prefix,
                                "--kafka-replication-factor", "1",
                                "--kafka-min-insync-replicas", "1",
                                "--ingest-partitions", str(args.kafka_partitions)])
    ctx["server"] = server
    server.start(args.server_timeout)
    server.wait_digesting(args.kafka_timeout)
    for i in range(1, args.kafka_warmup_rounds + 1):
        log(f"warm-up round {i}/{args.kafka_warmup_rounds} (not timed): sediment, then kcat")
        if args.client == "native":
            _, secs, _ = post_batches(benchutil, server, corpus, args.batch_lines, args.clients)
        else:
            _, secs, _ = ingest_batches(server, batches, args.clients)
        t0 = time.monotonic()
        kcat_run(kcat_cmd, 3600, "kcat -P (warm-up)")
        rounds.append({"sediment_mb_per_s": nbytes / secs / 1e6,
                       "kcat_mb_per_s": nbytes / (time.monotonic() - t0) / 1e6})
    server.stop()
    log(f"server pid {server.proc.pid} stopped (exit {server.proc.returncode})")
    return rounds


def run_kafka(args, ctx, server_bin, gen, benchutil, work, report):
    """One broker (RF 1), warmed up by kcat and by sediment: sediment's acknowledged ingest and
    `kcat -P` of the same batches as messages to a fresh topic with the same partition count,
    taking turns, the fastest run of each counting. ctx["server"] / ctx["cluster"] are
    set as soon as they exist so that the caller stops them (by pid) whatever happens here."""
    sys.path.insert(0, KAFKA_SCRIPTS)
    from cluster import KafkaCluster, KafkaClusterError  # noqa: E402 (scripts/kafka)

    kcat = shutil.which("kcat") or shutil.which("kafkacat")
    parts = args.kafka_partitions
    now_ms = int(time.time() * 1000)
    start_ms = (now_ms - 3_600_000) // 60_000 * 60_000
    rate = max(1000.0, args.ingest_size // 210 / 3000.0)
    q_start, q_end = start_ms - 86_400_000, now_ms + 86_400_000

    corpus = os.path.join(work, "corpus.log")
    g = run_gen(gen, corpus, args.ingest_size, args.seed, start_ms, rate)
    report["corpus"] = dict(g, path=corpus)
    with open(corpus, "rb") as f:
        data = f.read()
    sep = next((c for c in KCAT_SEPARATORS if c not in data), None)
    if sep is None:
        raise BenchError("every candidate kcat message separator occurs in the corpus")
    batches = split_batches(data, args.batch_lines)
    del data
    events = sum(k for _, k in batches)
    nbytes = sum(len(b) for b, _ in batches)
    kcat_input = os.path.join(work, "kcat-input.bin")
    with open(kcat_input, "wb") as f:
        f.write(sep.join(b for b, _ in batches))  # no trailing separator: exactly len(batches)

    run_id = secrets.token_hex(4)
    prefix = f"bench-{run_id}-"
    kafka_dir = os.path.join(work, f"kafka-{run_id}")
    ctx["kafka_dir"] = kafka_dir
    cluster = KafkaCluster(kafka_dir, brokers=1, extra_props={
        # Only for the kcat topic: kcat cannot create topics. sediment creates its own.
        "auto.create.topics.enable": "true", "num.partitions": str(parts)})
    ctx["cluster"] = cluster
    log(f"starting one Kafka broker in {kafka_dir}")
    try:
        bootstrap = cluster.start(timeout=args.kafka_timeout)
    except KafkaClusterError as e:
        raise BenchError(f"Kafka broker did not start: {e}") from e
    log(f"Kafka ready at {bootstrap} (pid {cluster.node(0)['pid']})")
    broker_pid = cluster.node(0)["pid"]
    # A fresh broker's JVM compiles its hot paths while it takes its first few hundred MB: its
    # compiler threads used 1.5 CPU-s of a 5.4 s sediment run on 2 cores when sediment came first,
    # and kcat, which came after, met a warm broker. One untimed kcat run first, so both meet a
    # warm one.
    report["broker_warmup"] = kcat_warmup(args, kcat, bootstrap, f"{prefix}warmup", parts, sep,
                                          kcat_input, broker_pid)

    # The broker's JVM also compiles the paths only sediment's requests take (one partition per
    # datasource, records of its own size, the digest's fetches, DeleteRecords), and it keeps
    # getting faster for several runs: on one broker sediment's runs went 109, 152, 184, 201 MB/s
    # and after a dozen runs of both 228-340, kcat's 150-231 and then 220-320. So both warm it up
    # together, untimed, for --kafka-warmup-rounds rounds before anything is timed.
    common = (args, ctx, server_bin, benchutil, work, kcat, bootstrap, broker_pid)
    data = (corpus, batches, q_start, q_end)
    report["warmup_rounds"] = kafka_warmup_rounds(*common, f"{prefix}warmup-s-", corpus, batches,
                                                  kcat_produce_command(
                                                      kcat, bootstrap, f"{prefix}warmup", sep,
                                                      kcat_input, KCAT_PROPERTIES),
                                                  nbytes)

    # (a) and (b) take turns, --kafka-runs times each (every run to topics of its own), and the
    # fastest run of each side counts: on a shared 2-core machine one side's speed moves by 2-3x
    # between runs, and a slow spell then falls on both sides alike.
    n = args.kafka_runs
    sed_runs, runs = [], []
    for i in range(1, n + 1):
        sed_runs.append(sediment_kafka_run(*common, f"{prefix}s{i}-", f"run{i}", f"{i}/{n}",
                                           *data))
        runs.append(kcat_produce(args, kcat, bootstrap, f"{prefix}kcat-{i}", parts, sep,
                                 kcat_input, batches, nbytes, events, broker_pid, f"{i}/{n}"))
    sediment = max(sed_runs, key=lambda r: r["mb_per_s_acked"])
    report["sediment"] = sediment
    report["sediment_runs"] = sed_runs
    report["digest_ready_seconds"] = sediment["digest_ready_seconds"]
    kraw = max(runs, key=lambda k: k["mb_per_s"])
    report["kcat"] = kraw
    report["kcat_runs"] = runs
    ratio = sediment["mb_per_s_acked"] / kraw["mb_per_s"]
    report["kafka"] = {
        "brokers": 1, "replication_factor": 1, "partitions": parts, "bootstrap": bootstrap,
        "topic_prefix": prefix, "ratio_sediment_acked_vs_kcat": ratio,
        "target": f"sediment acked ingest >= {KAFKA_TARGET_RATIO}x raw kcat produce",
        "target_met": ratio >= KAFKA_TARGET_RATIO,
    }
    print_kafka_report(report)


def print_kafka_report(r):
    a, k, kf = r["sediment"], r["kcat"], r["kafka"]
    lines = [
        "",
        "sediment on Kafka benchmark" + (" (smoke: sizes too small for meaningful speed)"
                                         if r["params"]["smoke"] else ""),
        "=" * 78,
        f"Kafka: {kf['brokers']} local broker, replication factor {kf['replication_factor']}, "
        f"{kf['partitions']} partitions per ingest topic; warmed up by one untimed kcat run "
        f"of the same bytes ({r['broker_warmup']['seconds']:.2f}s, broker CPU "
        f"{r['broker_warmup']['broker_cpu_seconds']:.1f}s), then {len(r['warmup_rounds'])} "
        f"untimed rounds of both (MB/s sediment/kcat: "
        + ", ".join(f"{x['sediment_mb_per_s']:.0f}/{x['kcat_mb_per_s']:.0f}"
                    for x in r["warmup_rounds"]) + ")",
        f"(a) sediment ingest  {a['events']} events, {human_bytes(a['bytes'])}, avg "
        f"{a['avg_event_bytes']:.0f} B/event, {a['clients']} clients x {a['batch_lines']}-line "
        f"batches",
        f"    until last 200:    {a['events_per_s_acked']:>12,.0f} events/s "
        f"{a['mb_per_s_acked']:>8.1f} MB/s  ({a['seconds_to_last_ack']:.2f}s, fastest of "
        f"{len(r['sediment_runs'])} runs: "
        + ", ".join(f"{x['mb_per_s_acked']:.1f}" for x in r["sediment_runs"])
        + " MB/s)",
        f"    until searchable:  {a['events_per_s_searchable']:>12,.0f} events/s "
        f"{a['mb_per_s_searchable']:>8.1f} MB/s  ({a['seconds_to_searchable']:.2f}s)",
        f"    wrote {a['topic_messages']} messages to {a['topic']} "
        f"({a['topic_partitions_used']} partitions used)",
        f"(b) kcat -P, same bytes as {k['messages']} messages "
        f"(acks=all, idempotent, no compression, linger 5 ms)",
        f"    until kcat exits:  {k['events_per_s_equivalent']:>12,.0f} events/s "
        f"{k['mb_per_s']:>8.1f} MB/s  ({k['seconds']:.2f}s, {k['partitions_used']} partitions "
        f"used; fastest of {len(r['kcat_runs'])} runs: "
        + ", ".join(f"{x['mb_per_s']:.1f}" for x in r["kcat_runs"]) + " MB/s)",
        f"    kcat CPU {k['kcat_cpu_seconds']:.1f}s, broker {k['broker_cpu_seconds']:.1f}s, "
        f"machine busy {k['machine_busy_seconds']:.1f}s",
        f"    server CPU until last 200: {a['server_cpu_seconds_to_last_ack']:.1f}s "
        f"({a['server_cpu_seconds_per_gb_acked']:.1f} CPU-s per GB), broker "
        f"{a['broker_cpu_seconds_to_last_ack']:.1f}s, HTTP clients ({a['client']}) "
        f"{a['client_cpu_seconds_to_last_ack']:.1f}s, machine busy "
        f"{a['machine_busy_seconds_to_last_ack']:.1f}s; load average before "
        + " ".join(f"{x:.2f}" for x in a["load_average_before"]),
        f"    server CPU until searchable: {a['server_cpu_seconds_to_searchable']:.1f}s "
        f"({a['server_cpu_seconds_per_gb_searchable']:.1f} CPU-s per GB)",
        f"ratio sediment acked / kcat produce: {kf['ratio_sediment_acked_vs_kcat']:.3f}",
        f"target ratio >= {KAFKA_TARGET_RATIO}: {'MET' if kf['target_met'] else 'NOT MET'}",
        "",
    ]
    print("\n".join(lines), flush=True)


def print_report(r):
    a, s, c = r["ingest"], r["search"], r["stored"]
    raw = a["raw_append_fsync"]
    met = lambda ok: "MET" if ok else "NOT MET"  # noqa: E731
    lines = [
        "",
        "sediment benchmark report" + (" (smoke: sizes too small for meaningful speed)"
                                       if r["params"]["smoke"] else ""),
        "=" * 78,
        f"(a) ingest  {a['events']} events, {human_bytes(a['bytes'])}, avg "
        f"{a['avg_event_bytes']:.0f} B/event, {a['clients']} clients x {a['batch_lines']}-line "
        f"batches",
        f"    until last 200:    {a['events_per_s_acked']:>12,.0f} events/s "
        f"{a['mb_per_s_acked']:>8.1f} MB/s  ({a['seconds_to_last_ack']:.2f}s)",
        f"    until searchable:  {a['events_per_s_searchable']:>12,.0f} events/s "
        f"{a['mb_per_s_searchable']:>8.1f} MB/s  ({a['seconds_to_searchable']:.2f}s)",
        f"    raw append+fdatasync per batch: {raw['events_per_s']:>12,.0f} events/s "
        f"{raw['mb_per_s']:>8.1f} MB/s",
        f"    ratio acked / raw fsync: {a['ratio_acked_vs_raw_fsync']:.3f}",
        f"    target {a['target']}: {met(a['target_met'])}",
        f"(b) search  {human_bytes(s['raw_bytes'])} raw, {s['events']} events, needle x"
        f"{s['matches']}, best of {r['params']['runs']}; query threads {s['query_threads']} "
        f"(per core = / {s['cores']}); baselines single-core, {s['baseline_locale']}, warm cache",
        f"    {r['fields_load']['repo']}: the corpus again via humio-structured with "
        f"{len(r['fields_load']['fields'])} parsed fields, "
        f"{r['fields_load']['events_per_s_acked']:,.0f} events/s acked, searchable after "
        f"{r['fields_load']['seconds_to_searchable']:.1f}s",
        f"    load average before {s['load_average_before']}, after {s['load_average_after']}; "
        f"'other' = CPU cores busy with other work during the run",
        f"    {'query':<22} {'s':>7} {'GB/s':>6} {'/core':>6} {'srv cores':>9} {'other':>5} | "
        f"{'baseline':<9} {'s':>7} {'GB/s':>6} {'other':>5} | ratio/core | GB/cpu-s: "
        f"{'query':>6} {'base':>6} {'ratio':>5}",
    ]
    for q in s["queries"]:
        base = " ".join(q["baseline"].split()[:2]) if q["baseline"].startswith("grep") else "awk"
        if "baseline_seconds_best" in q:
            bl = (f"{base:<9} {q['baseline_seconds_best']:7.3f} {q['baseline_gb_per_s']:6.3f} "
                  f"{q['baseline_other_cores']:5.2f}")
        else:
            bl = f"{base:<9} {'-':>7} {'-':>6} {'-':>5}"
        if "seconds_best" in q:
            ql = (f"{q['name']:<22} {q['seconds_best']:7.3f} {q['gb_per_s']:6.3f} "
                  f"{q['gb_per_s_per_core']:6.3f} {q['server_cores_busy']:9.2f} "
                  f"{q['other_cores']:5.2f}")
            ratio = f"{q['ratio_per_core_vs_baseline']:6.2f}"
        else:
            ql = f"{q['name']:<22} {'-':>7} {'-':>6} {'-':>6} {'-':>9} {'-':>5}"
            ratio = "     -"
        if "ratio_cpu_vs_baseline" in q:
            cl = (f"{q['gb_per_cpu_second']:6.3f} {q['baseline_gb_per_cpu_second']:6.3f} "
                  f"{q['ratio_cpu_vs_baseline']:5.2f}")
        else:
            cl = f"{'-':>6} {'-':>6} {'-':>5}"
        lines.append(f"    {ql} | {bl} |     {ratio} |           {cl}"
                     + (f"  FAILED: {q['error'][:200]}" if q.get("error") else ""))
    for q in s["queries"]:
        lines.append(f"      {q['name']}: {q['query']}  [{q['repo']}]  vs  {q['baseline']}")
    lines += [
        f"    GB/cpu-s = raw GB / CPU seconds of the server (query) or of grep/awk (base), shown "
        f"when both used >= {MIN_CPU_SECONDS}s",
        f"    target every query >= grep/awk per core: {met(s['target_met'])}",
    ]
    d = r.get("decode_floor", {})
    if "error" in d:
        lines.append(f"    decode floor: not measured ({d['error']})")
    elif d:
        lines.append(
            f"    decode floor ({REPO}, one thread, sediment-benchutil): decompress + decode "
            f"{d['decode_ns_per_event']:.0f} ns/event = {d['decode_gb_per_cpu_s']:.3f} GB/cpu-s; "
            f"count() in-process {d['ns_per_event']:.0f} ns/event = {d['gb_per_cpu_s']:.3f} "
            f"GB/cpu-s ({d['events']} events, {d['blocks']} blocks)")
        if "regex_ceiling_vs_awk" in d:
            lines.append(
                f"    regex ceiling: decoding alone is {d['regex_ceiling_vs_awk']:.2f}x awk's "
                f"match() ({d['regex_baseline_gb_per_cpu_s']:.3f} GB/cpu-s), so no regex query "
                f"over these segments can pass that per core (target "
                f"{d['regex_target_vs_awk']:.1f}x)")
    lines += [
        f"(c) stored  segments {human_bytes(c['segment_bytes'])} ({c['segment_files']} files, "
        f"{c['segment_files_found_as']}); data dir {human_bytes(c['data_dir_bytes'])}",
        f"    settled after {c.get('settle_seconds', 0):.0f}s: " + (
            "the files are the segments the server lists" if c.get("settled") else
            f"NOT SETTLED, the server lists {c.get('live_segment_bytes')} bytes"),
        f"    {c['zstd_method']}: {human_bytes(c['zstd3_bytes'])}; raw "
        f"{human_bytes(c['raw_bytes'])}",
        f"    ratio segments / zstd-3: {c['ratio_segments_vs_zstd3']:.3f}  (raw / segments "
        f"{c['ratio_raw_vs_segments']:.1f}x)  target <= 1.1x: {met(c['target_met'])}",
        "",
    ]
    print("\n".join(lines), flush=True)


if __name__ == "__main__":
    sys.exit(main())
