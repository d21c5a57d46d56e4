"""Shared harness for the end-to-end suites (tests/e2e, tests/kafka): runs the real `sediment
server` binary on loopback. Importable without pytest's conftest machinery:

    sys.path.insert(0, "<repo>/tests/e2e"); from harness import SedimentServer, wait_until

Contract:
- The binary comes from $SEDIMENT_BIN (default /work/main/build/src/cli/sediment).
- Every server runs on 127.0.0.1 with its own data dir; output (stdout and stderr) goes to a log
  file per start in `log_dir`; `describe()` gives the tail for failure messages.
- Processes are signalled only by the pid this object started (SIGTERM, then SIGKILL). Children
  get PR_SET_PDEATHSIG=SIGKILL, so a killed pytest does not leave servers behind; start servers
  from the main test thread only (the signal fires when the forking thread exits).
- Commit log: the embedded log unless `kafka_brokers` is given. With Kafka every SedimentServer
  object gets its own topic prefix (`e2e-<random>-` unless given), kept across restarts of the
  same object, because the data dir holds Global's snapshot that belongs to those topics.
  `SEDIMENT_E2E_KAFKA` (bootstrap servers) is read by `e2e_kafka_brokers()`; the e2e fixtures use it
  as the default for every server they make.
- Child processes never see the caller's SEDIMENT_* variables (`clean_env`).
- TLS: `make_test_certs(dir)` makes a test CA and a server certificate for 127.0.0.1/localhost
  with the `openssl` command; `SedimentServer(tls=files)` starts the server with `--tls-cert`,
  `--tls-key` and `--tls-ca` and its `url` is `https://`. Python's `requests` verifies such a
  server only when pointed at the CA: the `tls_files` fixtures (tests/e2e and tests/cluster
  conftest) set `REQUESTS_CA_BUNDLE` for the test, which every session and bare call honours.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import socket
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

import pytest
import requests

DEFAULT_BIN = "/work/main/build/src/cli/sediment"
REPO = "e2e"
INGEST_TOKEN = "e2e-ingest-token-0123456789"
API_TOKEN = "e2e-api-token-abcdef"
CLUSTER_SECRET = "e2e-cluster-secret-fedcba9876543210"
HTTP_TIMEOUT = 15.0
TEST_TIMEOUT = float(os.environ.get("E2E_TEST_TIMEOUT", "180"))
# Ingest partitions of a Kafka-backed server when the test does not choose (fewer = faster start).
KAFKA_DEFAULT_PARTITIONS = 4


def e2e_kafka_brokers() -> str | None:
    """Bootstrap servers from SEDIMENT_E2E_KAFKA, or None (embedded log)."""
    v = os.environ.get("SEDIMENT_E2E_KAFKA", "").strip()
    return v or None


def new_kafka_topic_prefix() -> str:
    """A fresh topic prefix (Kafka topic names allow [a-zA-Z0-9._-])."""
    return f"e2e-{uuid.uuid4().hex[:12]}-"


def sediment_bin() -> str:
    path = os.environ.get("SEDIMENT_BIN", DEFAULT_BIN)
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        pytest.fail(f"sediment binary not found at {path}: build it or set SEDIMENT_BIN", pytrace=False)
    return path


def clean_env() -> dict[str, str]:
    """The environment for child processes: no SEDIMENT_* settings leak in from the caller."""
    return {k: v for k, v in os.environ.items() if not k.startswith("SEDIMENT_")}


_libc = ctypes.CDLL(None, use_errno=True)


def _die_with_parent() -> None:
    _libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(pred: Callable[[], Any], timeout: float = 10.0, interval: float = 0.05, what: str = "") -> Any:
    """Polls pred() until it returns a truthy value (returned) or fails with AssertionError after
    `timeout` seconds. Exceptions raised by pred count as 'not yet'; the last one is reported."""
    deadline = time.monotonic() + timeout
    last_exc: BaseException | None = None
    last_val: Any = None
    while True:
        try:
            last_val = pred()
            if last_val:
                return last_val
        except Exception as e:  # noqa: BLE001 - reported below
            last_exc = e
        if time.monotonic() >= deadline:
            detail = f"last value {last_val!r}" if last_exc is None else f"last error {last_exc!r}"
            raise AssertionError(f"timed out after {timeout}s waiting for {what or pred}: {detail}")
        time.sleep(interval)


@dataclass(frozen=True)
class TlsFiles:
    """PEM files of a test CA and of a server certificate it signed."""
    ca: Path
    cert: Path
    key: Path


def make_test_certs(dir: Path, names: Iterable[str] = ("127.0.0.1", "localhost")) -> TlsFiles:
    """Makes in `dir` a test CA (ca.pem) and a server certificate (server.pem, server.key) whose
    subjectAltName lists `names` (IP literals as IP, others as DNS), P-256 keys valid 2 days, with
    the `openssl` command (a fraction of a second). Skips the test when openssl is missing."""
    import shutil
    if not shutil.which("openssl"):
        pytest.skip("needs the openssl command")
    dir = Path(dir)
    dir.mkdir(parents=True, exist_ok=True)
    san = ",".join(("IP:" if _is_ip(n) else "DNS:") + n for n in names)
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    steps = [
        ["openssl", "req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
         "-subj", "/CN=sediment test CA", "-addext", "basicConstraints=critical,CA:TRUE",
         "-addext", "keyUsage=critical,keyCertSign"],
        ["openssl", "req", *ec, "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=sediment test server"],
        ["openssl", "x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
         "-days", "2", "-extfile", "server.ext", "-out", "server.pem"],
    ]
    (dir / "server.ext").write_text(f"subjectAltName={san}\nbasicConstraints=CA:FALSE\n")
    for cmd in steps:
        r = subprocess.run(cmd, cwd=dir, capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, f"{' '.join(cmd)}: {r.stderr}"
    return TlsFiles(ca=dir / "ca.pem", cert=dir / "server.pem", key=dir / "server.key")


@pytest.fixture
def tls_files(tmp_path, monkeypatch) -> TlsFiles:
    """A test CA and a certificate for 127.0.0.1/localhost (make_test_certs); for the test,
    REQUESTS_CA_BUNDLE points `requests` at the CA, so https:// servers of the harness verify.
    Imported by the e2e and cluster conftests."""
    files = make_test_certs(tmp_path / "tls")
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(files.ca))
    return files


def _is_ip(name: str) -> bool:
    try:
        socket.inet_pton(socket.AF_INET6 if ":" in name else socket.AF_INET, name)
        return True
    except OSError:
        return False


def marker(prefix: str = "mk") -> str:
    return f"{prefix}{uuid.uuid4().hex[:16]}"


class SedimentServer:
    """One `sediment server` process over a data dir that survives restarts."""

    def __init__(
        self,
        data_dir: Path,
        log_dir: Path,
        *,
        tokens: bool = True,
        ingest_tokens: Iterable[str] | None = None,
        api_tokens: Iterable[str] | None = None,
        flush_age_ms: int | None = None,
        max_body_bytes: int | None = None,
        max_event_bytes: int | None = None,
        partitions: int | None = None,
        kafka_brokers: str | None = None,
        kafka_topic_prefix: str | None = None,
        kafka_replication_factor: int | None = None,
        kafka_min_insync_replicas: int | None = None,
        kafka_produce_timeout_ms: int | None = None,
        extra_args: Iterable[str] = (),
        extra_env: dict[str, str] | None = None,
        tls: TlsFiles | None = None,
        cluster_secret: str | None = CLUSTER_SECRET,
    ) -> None:
        self.bin = sediment_bin()
        # With TLS the listener speaks HTTPS only and peers are called over HTTPS (--tls-ca).
        self.tls = tls
        # Added to the child's environment (after clean_env()), e.g. AWS_* credentials.
        self.extra_env = dict(extra_env or {})
        self.data_dir = Path(data_dir)
        self.log_dir = Path(log_dir)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.ingest_token = INGEST_TOKEN
        self.api_token = API_TOKEN
        if api_tokens:
            self.api_token = list(api_tokens)[0]
        self.repo = REPO
        # Without token flags the server generates tokens on its first start (credentials.txt).
        self.generated_tokens = not tokens
        args = ["server", "--data-dir", str(self.data_dir), "--listen", f"127.0.0.1:{self.port}"]
        if tokens:
            for spec in ingest_tokens if ingest_tokens is not None else [f"{REPO}:{INGEST_TOKEN}"]:
                args += ["--ingest-token", spec]
            for t in api_tokens if api_tokens is not None else [API_TOKEN]:
                args += ["--api-token", t]
        self.kafka_brokers = kafka_brokers or None
        self.kafka_topic_prefix: str | None = None
        if self.kafka_brokers:
            self.kafka_topic_prefix = kafka_topic_prefix or new_kafka_topic_prefix()
            if partitions is None:
                partitions = KAFKA_DEFAULT_PARTITIONS
            args += ["--kafka-brokers", self.kafka_brokers, "--kafka-topic-prefix", self.kafka_topic_prefix]
        else:
            assert not (kafka_topic_prefix or kafka_replication_factor or kafka_min_insync_replicas
                        or kafka_produce_timeout_ms), "Kafka settings without kafka_brokers"
        for flag, value in (
            ("--kafka-replication-factor", kafka_replication_factor),
            ("--kafka-min-insync-replicas", kafka_min_insync_replicas),
            ("--kafka-produce-timeout-ms", kafka_produce_timeout_ms),
            ("--flush-age-ms", flush_age_ms),
            ("--max-body-bytes", max_body_bytes),
            ("--max-event-bytes", max_event_bytes),
            ("--partitions", partitions),
        ):
            if value is not None:
                args += [flag, str(value)]
        if tls is not None:
            args += ["--tls-cert", str(tls.cert), "--tls-key", str(tls.key), "--tls-ca", str(tls.ca)]
        extra_args = list(extra_args)
        # Every harness server gets the same cluster secret (the nodes of a cluster, a node
        # recovering another's bucket must share it) unless the test passes its own, or None (and
        # no token flags): then the server generates one into <data-dir>/cluster-secret.
        self.cluster_secret = cluster_secret
        if "--cluster-secret" in extra_args:
            self.cluster_secret = extra_args[extra_args.index("--cluster-secret") + 1]
        elif cluster_secret is not None and tokens:
            args += ["--cluster-secret", cluster_secret]
        else:
            self.cluster_secret = None
        args += extra_args
        self.args = args
        self.proc: subprocess.Popen | None = None
        self.starts = 0
        self.log_path: Path | None = None
        self.session = requests.Session()

    # ---- process control ----

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}"

    @property
    def uses_kafka(self) -> bool:
        return self.kafka_brokers is not None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def launch(self) -> None:
        """Starts the process without waiting for it to serve."""
        assert self.proc is None or self.proc.poll() is not None, "server already running"
        self.starts += 1
        self.log_path = self.log_dir / f"server-{self.port}-{self.starts}.log"
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                [self.bin, *self.args],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**clean_env(), **self.extra_env},
                preexec_fn=_die_with_parent,
            )
        self.session = requests.Session()

    def api_headers(self) -> dict[str, str]:
        """The Authorization header of an API-token holder (status, cluster pages): the harness's
        token, or the one the server generated into credentials.txt (until then none)."""
        token = self.api_token
        if self.generated_tokens:
            token = ""
            try:
                for line in (self.data_dir / "credentials.txt").read_text().splitlines():
                    if line.startswith("api_token="):
                        token = line.split("=", 1)[1].strip()
            except OSError:
                pass
        return {"Authorization": f"Bearer {token}"} if token else {}

    def serving(self) -> bool:
        """Whether the server answers /api/v1/status with 200 now (2 s bound)."""
        try:
            return requests.get(self.url + "/api/v1/status", headers=self.api_headers(),
                                timeout=2).status_code == 200
        except requests.RequestException:
            return False

    def start(self, timeout: float = 30.0) -> None:
        """Launches and waits until /api/v1/status answers 200; AssertionError (with the log tail)
        when the process exits first or is not ready within `timeout` (then it is killed)."""
        self.launch()
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise AssertionError(
                    f"sediment server exited with {self.proc.returncode} during start\n{self.describe()}"
                )
            if self.serving():
                return
            if time.monotonic() >= deadline:
                out = self.describe()
                self.kill()
                raise AssertionError(f"sediment server not ready within {timeout}s\n{out}")
            time.sleep(0.05)

    def start_expect_exit(self, timeout: float = 30.0) -> tuple[int, str, float]:
        """Launches a server that is expected to refuse to start. Returns (exit code, its output,
        seconds until it exited). AssertionError when it is still running after `timeout` (it is
        killed) or when it came up and serves."""
        self.launch()
        assert self.proc is not None
        t0 = time.monotonic()
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            serving = self.serving()
            out = self.describe()
            self.kill()
            raise AssertionError(f"server still running {timeout}s after start (serving: {serving})\n{out}")
        return rc, self.log_text(), time.monotonic() - t0

    def stop(self, timeout: float = 20.0) -> int | None:
        """SIGTERM, then SIGKILL after `timeout`. Returns the exit code (None if not running)."""
        p = self.proc
        if p is None or p.poll() is not None:
            return None if p is None else p.returncode
        p.send_signal(signal.SIGTERM)
        try:
            return p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=10)
            raise AssertionError(f"server did not stop within {timeout}s of SIGTERM\n{self.describe()}")

    def kill(self) -> None:
        """SIGKILL (a crash): no shutdown code runs."""
        p = self.proc
        if p is not None and p.poll() is None:
            p.kill()
            p.wait(timeout=10)

    def restart(self, hard: bool = False) -> None:
        if hard:
            self.kill()
        else:
            self.stop()
        self.start()

    def cleanup(self) -> None:
        try:
            self.stop(timeout=10)
        except AssertionError:
            pass
        self.kill()
        self.session.close()

    def log_text(self, all_runs: bool = False) -> str:
        paths = sorted(self.log_dir.glob(f"server-{self.port}-*.log")) if all_runs else [self.log_path]
        out = []
        for p in paths:
            if p and p.exists():
                out.append(p.read_text(errors="replace"))
        return "\n".join(out)

    def describe(self, tail: int = 6000) -> str:
        text = self.log_text()
        return f"--- server log ({self.log_path}) ---\n{text[-tail:]}\n--- end of log ---"

    # ---- HTTP helpers ----

    def status(self) -> dict:
        return self.get_json("/api/v1/status")

    def get_json(self, path: str) -> dict:
        """GET `path` as an API-token holder; asserts 200."""
        r = self.session.get(self.url + path, headers=self.api_headers(), timeout=HTTP_TIMEOUT)
        assert r.status_code == 200, f"{path}: {r.status_code} {r.text}"
        return r.json()

    def commit_log(self, timeout: float = HTTP_TIMEOUT) -> dict:
        """The status page's commitLog object: {type, brokers (Kafka only), health}."""
        r = self.session.get(self.url + "/api/v1/status", headers=self.api_headers(), timeout=timeout)
        assert r.status_code == 200, f"status: {r.status_code} {r.text}"
        return r.json()["commitLog"]

    def log_end_sum(self) -> int:
        return sum(p["logEnd"] for p in self.status()["partitions"])

    def buffered_events(self) -> int:
        return sum(p["bufferedEvents"] for p in self.status()["partitions"])

    def digested(self) -> bool:
        """True when the digest has consumed every partition up to the log end. A log end the
        server could not read (-1, e.g. while Kafka reconnects) or an old reading never counts as
        caught up."""
        return self._caught_up(self.status(), need_flushed=False)

    def quiet(self) -> bool:
        """Everything consumed and flushed to segments."""
        return self._caught_up(self.status(), need_flushed=True)

    @staticmethod
    def _caught_up(st: dict, need_flushed: bool) -> bool:
        age = st.get("logOffsetsAgeMs", 0)
        if age is None or age < 0 or age > 5000:
            return False
        if len(st["partitions"]) < st.get("ingestPartitions", 1):
            return False  # not every partition assigned here yet (a Kafka node joining its group)
        for p in st["partitions"]:
            if not p.get("claimed", True) or p["logEnd"] < 0 or p["nextOffset"] < p["logEnd"]:
                return False
            if need_flushed and p["bufferedEvents"] != 0:
                return False
        return True

    def ingest(
        self,
        path: str,
        body: str | bytes | Any,
        token: str | None = "",
        *,
        scheme: str = "Bearer",
        params: dict | None = None,
        method: str = "POST",
        headers: dict | None = None,
        timeout: float = HTTP_TIMEOUT,
    ) -> requests.Response:
        """POSTs `body` (str/bytes as is, anything else as JSON) to `path`. token "" means the
        server's ingest token, None means no Authorization header."""
        if token == "":
            token = self.ingest_token
        h = dict(headers or {})
        if token is not None:
            h["Authorization"] = f"{scheme} {token}"
        if not isinstance(body, (str, bytes)):
            body = json.dumps(body)
            h.setdefault("Content-Type", "application/json")
        if isinstance(body, str):
            body = body.encode()
        return self.session.request(method, self.url + path, data=body, headers=h, params=params, timeout=timeout)

    def query_raw(
        self,
        q: str,
        start: Any = "1d",
        end: Any = None,
        *,
        ndjson: bool = False,
        repo: str | None = None,
        token: str | None = "",
        body: Any = None,
    ) -> requests.Response:
        if token == "":
            token = self.api_token
        h = {"Content-Type": "application/json"}
        if token is not None:
            h["Authorization"] = f"Bearer {token}"
        if ndjson:
            h["Accept"] = "application/x-ndjson"
        if body is None:
            payload: dict[str, Any] = {"queryString": q, "isLive": False}
            if start is not None:
                payload["start"] = start
            if end is not None:
                payload["end"] = end
            body = json.dumps(payload)
        return self.session.post(
            f"{self.url}/api/v1/repositories/{repo or self.repo}/query", data=body, headers=h, timeout=60
        )

    def query(self, q: str, start: Any = "1d", end: Any = None, *, ndjson: bool = False, repo: str | None = None) -> list[dict]:
        r = self.query_raw(q, start, end, ndjson=ndjson, repo=repo)
        assert r.status_code == 200, f"query {q!r}: {r.status_code} {r.text[:2000]}"
        if ndjson:
            return [json.loads(line) for line in r.text.splitlines() if line.strip()]
        rows = r.json()
        assert isinstance(rows, list), f"query {q!r}: expected a JSON array, got {r.text[:500]}"
        return rows

    def count(self, q: str = "", start: Any = 0, end: Any = None) -> int:
        """count() of `q`; the default range is everything from the epoch to an hour from now."""
        if end is None:
            end = int(time.time() * 1000) + 3_600_000
        rows = self.query(f"{q} | count()", start, end)
        assert len(rows) == 1 and "_count" in rows[0], f"count() answered {rows}"
        return int(rows[0]["_count"])




# ---------------------------------------------------------------------------------------------
# Bucket storage (issue 6): a local S3 server (scripts/s3/moto.py) and helpers to look into it
# ---------------------------------------------------------------------------------------------
#
# Contract:
# - moto runs on 127.0.0.1 (its own venv, see scripts/s3/moto.py) and is stopped by the pid its
#   MotoServer recorded. It checks no signatures (moto.py's default), so the tests read, list and
#   delete objects with plain HTTP carrying a dummy Authorization header (moto answers 403 to an
#   anonymous GET of a private object).
# - Servers get the credentials through the environment (S3_ENV), as an operator would.

S3_SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "s3" / "moto.py"
S3_ENV = {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test"}
# A binary must list these to run the bucket tests.
BUCKET_FLAGS = ("--bucket-endpoint", "--bucket-snapshot-interval-ms", "--cache-max-bytes", "--recover-from-bucket")
# Any value: moto does not verify it, but only a request with an Authorization header may read a
# private object.
S3_DUMMY_AUTH = ("AWS4-HMAC-SHA256 Credential=test/20000101/us-east-1/s3/aws4_request, "
                 "SignedHeaders=host, Signature=0")
S3_NS = "{http://s3.amazonaws.com/doc/2006-03-01/}"

_moto_mod = None


def moto_module():
    """scripts/s3/moto.py, loaded under the name `sediment_s3_moto` (so it neither shadows nor is
    shadowed by the real moto package)."""
    global _moto_mod
    if _moto_mod is None:
        import importlib.util
        import sys

        spec = importlib.util.spec_from_file_location("sediment_s3_moto", S3_SCRIPT)
        mod = importlib.util.module_from_spec(spec)
        sys.modules["sediment_s3_moto"] = mod
        spec.loader.exec_module(mod)
        _moto_mod = mod
    return _moto_mod


def moto_server(dir: Path):
    """A MotoServer (persistent: stop() keeps the objects, start() restores them) for `dir` on a
    port chosen now and kept across its restarts (MotoServer without a port draws a new one at
    every start, and the sediment servers keep the endpoint they were given). The caller starts
    it and must stop it (kill()) by its pid, e.g. in a fixture's finally."""
    mod = moto_module()
    return mod.MotoServer(Path(dir), port=mod.free_port())


def running_moto(dir: Path):
    """Generator for a module-scoped pytest fixture: one running moto server (moto_server) in
    `dir`, killed by pid at the end. Fails the module when the binary lacks bucket storage."""
    import pytest

    reason = bucket_support()
    if reason:
        pytest.fail(f"the sediment binary does not support bucket storage: {reason}")
    srv = moto_server(dir)
    try:
        srv.start()
        yield srv
    finally:
        srv.kill()


def bucket_support(binary: str | None = None) -> str | None:
    """None when `sediment server --help` lists the bucket flags, else why the bucket tests
    cannot run."""
    binary = binary or sediment_bin()
    try:
        out = subprocess.run([binary, "server", "--help"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True, timeout=30, env=clean_env()).stdout
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"{binary} server --help failed: {e}"
    missing = [f for f in BUCKET_FLAGS if f not in out]
    return f"{binary} has no bucket storage (server --help lacks {', '.join(missing)})" if missing else None


def new_bucket_name() -> str:
    """A fresh S3 bucket name (3-63 characters, lowercase)."""
    return f"sed-{uuid.uuid4().hex[:12]}"


def bucket_args(endpoint: str, bucket: str, prefix: str = "", *, create: bool = True,
                upload_interval_ms: int | None = 200, snapshot_interval_ms: int | None = 1000,
                cache_max_bytes: int | None = None, recover: bool = False, **more: Any) -> list[str]:
    """`sediment server` flags for bucket storage on `endpoint` (each flag once). The server
    prepends `prefix` to every key as is (src/bucket/README.md): end it with "/" to get
    `<prefix>/segments/...` and `<prefix>/global/...`. `more` maps
    further flags, full name with underscores for dashes, to values (bucket_snapshots_kept=2 ->
    --bucket-snapshots-kept 2)."""
    args = ["--bucket-endpoint", endpoint, "--bucket-name", bucket]
    if prefix:
        args += ["--bucket-prefix", prefix]
    if create:
        args.append("--bucket-create")
    for flag, value in (("--upload-interval-ms", upload_interval_ms),
                        ("--bucket-snapshot-interval-ms", snapshot_interval_ms),
                        ("--cache-max-bytes", cache_max_bytes)):
        if value is not None:
            args += [flag, str(value)]
    for k, v in more.items():
        args += ["--" + k.replace("_", "-"), str(v)]
    if recover:
        args.append("--recover-from-bucket")
    return args


def _s3(method: str, url: str, timeout: float = 30.0) -> requests.Response:
    return requests.request(method, url, headers={"Authorization": S3_DUMMY_AUTH}, timeout=timeout)


def s3_list(endpoint: str, bucket: str, prefix: str = "") -> dict[str, int]:
    """key -> size of every object whose key starts with `prefix` (ListObjectsV2, all pages)."""
    import urllib.parse
    import xml.etree.ElementTree as ET

    out: dict[str, int] = {}
    token = None
    while True:
        url = f"{endpoint}/{bucket}?list-type=2&prefix={urllib.parse.quote(prefix, safe='')}"
        if token:
            url += "&continuation-token=" + urllib.parse.quote(token, safe="")
        r = _s3("GET", url)
        assert r.status_code == 200, f"S3 list {url}: {r.status_code} {r.text[:300]}"
        root = ET.fromstring(r.content)
        for c in root.iter(S3_NS + "Contents"):
            out[c.find(S3_NS + "Key").text] = int(c.find(S3_NS + "Size").text)
        if (root.findtext(S3_NS + "IsTruncated") or "false") != "true":
            return out
        token = root.findtext(S3_NS + "NextContinuationToken")


def s3_get(endpoint: str, bucket: str, key: str) -> bytes:
    r = _s3("GET", f"{endpoint}/{bucket}/{key}")
    assert r.status_code == 200, f"S3 GET {key}: {r.status_code} {r.text[:300]}"
    return r.content


def s3_delete(endpoint: str, bucket: str, key: str) -> None:
    r = _s3("DELETE", f"{endpoint}/{bucket}/{key}")
    assert r.status_code in (200, 204), f"S3 DELETE {key}: {r.status_code} {r.text[:300]}"


def bucket_status(s: SedimentServer) -> dict:
    """The status page's "bucket" object."""
    st = s.status()
    assert "bucket" in st, f"/api/v1/status has no bucket object: {sorted(st)}"
    return st["bucket"]


def api_get(s: SedimentServer, path: str, timeout: float = HTTP_TIMEOUT) -> dict:
    """GET `path` with the API token; AssertionError unless 200."""
    r = requests.get(s.url + path, headers={"Authorization": f"Bearer {s.api_token}"}, timeout=timeout)
    assert r.status_code == 200, f"{path}: {r.status_code} {r.text[:300]}"
    return r.json()


def bucket_fetches(r: requests.Response) -> tuple[int, int]:
    """(segments fetched from the bucket, bytes) from a query answer's X-Sediment-Bucket-Fetches /
    X-Sediment-Bucket-Fetched-Bytes headers (0 when absent)."""
    return (int(r.headers.get("X-Sediment-Bucket-Fetches", "0") or 0),
            int(r.headers.get("X-Sediment-Bucket-Fetched-Bytes", "0") or 0))


def local_segment_bytes(data_dir: Path) -> tuple[int, int]:
    """(files, bytes) of the segment files (*.seg) in `<data_dir>/segments`."""
    files = size = 0
    d = Path(data_dir) / "segments"
    try:
        for e in os.scandir(d):
            if e.name.endswith(".seg"):
                try:
                    size += e.stat().st_size
                    files += 1
                except FileNotFoundError:
                    pass
    except FileNotFoundError:
        pass
    return files, size


# ---------------------------------------------------------------------------------------------
# Query jobs and live queries (issue 7): LogScale's query-job API and isLive streaming
# ---------------------------------------------------------------------------------------------
#
# Contract:
# - Every helper uses the server's API token unless given another; `repo` defaults to the
#   server's repository.
# - LiveStream reads a streaming response on a thread of its own and keeps every line with the
#   monotonic time it arrived; close() ends the connection (the server notices and stops the
#   query) and joins the thread.


def query_jobs_path(s: SedimentServer, repo: str | None = None, job_id: str | None = None) -> str:
    path = f"{s.url}/api/v1/repositories/{repo or s.repo}/queryjobs"
    return path + f"/{job_id}" if job_id else path


def _api_headers(s: SedimentServer, token: str | None = "") -> dict:
    h = {"Content-Type": "application/json"}
    token = s.api_token if token == "" else token
    if token is not None:
        h["Authorization"] = f"Bearer {token}"
    return h


def query_job_create(s: SedimentServer, q: str, start: Any = "1d", end: Any = None, *, live: bool | None = None,
                     repo: str | None = None, token: str | None = "", body: Any = None) -> requests.Response:
    """POST .../queryjobs with {queryString, start, end, isLive} (or the raw `body`)."""
    if body is None:
        payload: dict[str, Any] = {"queryString": q}
        if start is not None:
            payload["start"] = start
        if end is not None:
            payload["end"] = end
        if live is not None:
            payload["isLive"] = live
        body = json.dumps(payload)
    return requests.post(query_jobs_path(s, repo), data=body, headers=_api_headers(s, token), timeout=HTTP_TIMEOUT)


def query_job_poll(s: SedimentServer, job_id: str, *, repo: str | None = None, token: str | None = "") -> requests.Response:
    return requests.get(query_jobs_path(s, repo, job_id), headers=_api_headers(s, token), timeout=HTTP_TIMEOUT)


def query_job_delete(s: SedimentServer, job_id: str, *, repo: str | None = None, token: str | None = "") -> requests.Response:
    return requests.delete(query_jobs_path(s, repo, job_id), headers=_api_headers(s, token), timeout=HTTP_TIMEOUT)


def query_job_start(s: SedimentServer, q: str, start: Any = "1d", end: Any = None, **kw) -> str:
    """Creates a query job and returns its id (AssertionError unless 200 with an id)."""
    r = query_job_create(s, q, start, end, **kw)
    assert r.status_code == 200, f"create query job {q!r}: {r.status_code} {r.text[:500]}"
    job_id = r.json().get("id")
    assert isinstance(job_id, str) and job_id, r.text
    return job_id


def query_job_wait(s: SedimentServer, job_id: str, timeout: float = 60.0, *, repo: str | None = None) -> dict:
    """Polls until `done` (honouring metaData.pollAfter) and returns that poll's JSON; every poll
    must answer 200."""
    deadline = time.monotonic() + timeout
    while True:
        r = query_job_poll(s, job_id, repo=repo)
        assert r.status_code == 200, f"poll {job_id}: {r.status_code} {r.text[:500]}"
        body = r.json()
        if body.get("done"):
            return body
        assert time.monotonic() < deadline, f"query job {job_id} not done within {timeout}s: {body.get('metaData')}"
        time.sleep(min(max(body.get("metaData", {}).get("pollAfter", 100), 20), 1000) / 1000.0)


class LiveStream:
    """A live query (isLive: true) on the streaming endpoint, read as NDJSON lines (or raw text
    with ndjson=False) on a background thread."""

    def __init__(self, s: SedimentServer, q: str, start: Any = "5m", *, ndjson: bool = True, body: Any = None) -> None:
        import threading

        headers = _api_headers(s)
        if ndjson:
            headers["Accept"] = "application/x-ndjson"
        payload = body if body is not None else json.dumps({"queryString": q, "start": start, "isLive": True})
        self.response = requests.post(f"{s.url}/api/v1/repositories/{s.repo}/query", data=payload, headers=headers,
                                      stream=True, timeout=(HTTP_TIMEOUT, 120))
        self.status_code = self.response.status_code
        # The socket, to end the connection from another thread: Response.close() would wait for
        # the reader thread's blocked read (urllib3 2.x keeps the connection on `_connection`).
        conn = getattr(self.response.raw, "_connection", None)
        self._sock = getattr(conn, "sock", None)
        self.lines: list[tuple[float, str]] = []  # (monotonic arrival time, line)
        self.raw: list[bytes] = []
        self.error: BaseException | None = None
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._read, daemon=True)
        if self.status_code == 200:
            self._thread.start()

    def _read(self) -> None:
        buf = b""
        try:
            for piece in self.response.iter_content(chunk_size=None):
                now = time.monotonic()
                with self._lock:
                    self.raw.append(piece)
                buf += piece
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    with self._lock:
                        self.lines.append((now, line.decode()))
        except Exception as e:  # noqa: BLE001 - the connection closed under us (close())
            self.error = e

    def rows(self) -> list[Any]:
        """Every NDJSON line so far, decoded."""
        with self._lock:
            return [json.loads(line) for _, line in self.lines if line.strip()]

    def text(self) -> str:
        with self._lock:
            return b"".join(self.raw).decode()

    def close(self) -> None:
        if self._sock is not None:
            try:
                self._sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        if self._thread.is_alive():
            self._thread.join(timeout=10)
        try:
            self.response.close()
        except Exception:  # noqa: BLE001
            pass


HUMIOLIB_VERSION = "0.2.6"
ELASTICSEARCH_VERSION = "9.5.1"  # the `elasticsearch` client (PyPI) of tests/e2e/test_elastic_bulk.py


def humiolib_python() -> tuple[Path | None, str]:
    """(python of a virtualenv with humiolib==HUMIOLIB_VERSION, "") — made and filled on first use
    (pip_venv_python) — or (None, why it could not be installed)."""
    return pip_venv_python("humiolib-venv", {"humiolib": HUMIOLIB_VERSION})


def elasticsearch_python() -> tuple[Path | None, str]:
    """(python of a virtualenv with elasticsearch==ELASTICSEARCH_VERSION, "") — made and filled on
    first use (pip_venv_python) — or (None, why it could not be installed)."""
    return pip_venv_python("elasticsearch-venv", {"elasticsearch": ELASTICSEARCH_VERSION})


def pip_venv_python(venv: str, pins: dict[str, str]) -> tuple[Path | None, str]:
    """(python of the virtualenv ${SEDIMENT_CACHE:-~/.cache/sediment}/VENV holding exactly the
    pinned versions `pins` {package: version}, "") — the venv is made and filled with pip (the
    Python package index) when it is missing or holds other versions — or (None, why not)."""
    import sys

    base = os.environ.get("SEDIMENT_CACHE")
    vdir = (Path(base) if base else Path.home() / ".cache" / "sediment") / venv
    py = vdir / "bin" / "python"
    want = " ".join(pins.values())
    check = [str(py), "-c", "import importlib.metadata as m; print(*(m.version(p) for p in %r))" % list(pins)]
    specs = [f"{p}=={v}" for p, v in pins.items()]
    try:
        if py.exists():
            got = subprocess.run(check, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, timeout=60)
            if got.returncode == 0 and got.stdout.strip() == want:
                return py, ""
        vdir.parent.mkdir(parents=True, exist_ok=True)
        made = subprocess.run([sys.executable, "-m", "venv", "--clear", str(vdir)], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, timeout=300)
        if made.returncode != 0:
            return None, f"python -m venv failed: {made.stdout[-1000:]}"
        pip = subprocess.run([str(py), "-m", "pip", "install", "--disable-pip-version-check", "-q", *specs],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)
        if pip.returncode != 0:
            return None, f"pip install {' '.join(specs)} failed: {pip.stdout[-1500:]}"
        got = subprocess.run(check, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60)
        if got.returncode != 0 or got.stdout.strip() != want:
            return None, f"after pip install the venv reports {got.stdout.strip()[-1000:]!r}"
        return py, ""
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, f"installing {' '.join(specs)} failed: {e}"


def import_pinned(module: str, venv: str, pins: dict[str, str]) -> str | None:
    """Makes `module` importable in this interpreter: None when it already imports (the
    interpreter's own packages, e.g. Debian's python3-* when it is the system python3), else after
    adding the site-packages of the cached venv `venv` holding `pins` (pip_venv_python; made with
    this interpreter, so the same Python version) to sys.path; otherwise why not."""
    import importlib
    import sys

    try:
        importlib.import_module(module)
        return None
    except ImportError:
        pass
    py, why = pip_venv_python(venv, pins)
    if py is None:
        return f"no {module}: {why}"
    purelib = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             stdout=subprocess.PIPE, text=True, timeout=60).stdout.strip()
    if purelib not in sys.path:
        sys.path.insert(0, purelib)
    try:
        importlib.import_module(module)
        return None
    except ImportError as e:
        return f"{module} from {purelib} does not import: {e}"


# prometheus_client: Debian's python3-prometheus-client (scripts/install-deps.sh --test) when the
# interpreter is the system one, else this version in a cached venv.
PROMETHEUS_CLIENT_PIN = {"prometheus-client": "0.16.0"}


class Metrics:
    """A /metrics answer parsed by the real Prometheus parser (`prometheus_client`, Debian
    python3-prometheus-client): `families` by name (a counter's without `_total`, as the parser
    names it) and every sample."""

    def __init__(self, text: str) -> None:
        why = import_pinned("prometheus_client", "prometheus-client", PROMETHEUS_CLIENT_PIN)
        assert why is None, why
        from prometheus_client.parser import text_string_to_metric_families

        self.text = text
        self.families = {f.name: f for f in text_string_to_metric_families(text)}
        self.samples = [(s.name, dict(s.labels), s.value) for f in self.families.values() for s in f.samples]

    def get(self, name: str, default: float | None = 0.0, **labels: str) -> float | None:
        """The value of the sample `name` with exactly these labels; `default` when absent (a
        labelled counter not incremented yet has no sample)."""
        for n, ls, v in self.samples:
            if n == name and ls == labels:
                return v
        return default

    def sum(self, name: str, **labels: str) -> float:
        """The sum over the samples `name` whose labels include these."""
        return sum(v for n, ls, v in self.samples if n == name and all(ls.get(k) == x for k, x in labels.items()))

    def select(self, name: str) -> list[tuple[dict, float]]:
        return [(ls, v) for n, ls, v in self.samples if n == name]


def scrape_metrics(s: SedimentServer, headers: dict | None = None) -> Metrics:
    """GET /metrics of `s` (with its API token unless `headers` is given); asserts 200."""
    r = requests.get(s.url + "/metrics", headers=s.api_headers() if headers is None else headers,
                     timeout=HTTP_TIMEOUT)
    assert r.status_code == 200, f"GET /metrics: {r.status_code} {r.text[:500]}"
    assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4"), r.headers["Content-Type"]
    return Metrics(r.text)
