"""Protected secrets (issue 15; DESIGN section 11) against the real binary:

1. no secret at rest: a node started without tokens generates an ingest token, an API token and
   the cluster secret; restarted with flag tokens it adds those. After ingesting with every
   ingest token and querying with every API token, no byte sequence of any token or of the cluster
   secret is in any file of the data dir (commit logs, Global snapshots, segments) nor in any
   object of the bucket (moto, loopback), except credentials.txt and cluster-secret, which exist
   for them and are 0600 in a 0700 data dir.
2. a node given another cluster secret on that data dir refuses to start, naming the flag.
3. the internal routes answer an API token (or an ingest token) 401/403/404, the cluster secret
   only; status and cluster pages need an API token; the health routes answer without one.
4. authentication before the body: a request announcing a 32 MiB body with a wrong token is
   answered 401 while the client is still sending; the bytes the server let in are printed.
5. a data dir readable by others is tightened to 0700 with a warning.
"""

from __future__ import annotations

import os
import select
import shutil
import socket
import stat
import subprocess
import time
from pathlib import Path

import pytest
import requests

from conftest import commit_log
from harness import S3_ENV, bucket_args, new_bucket_name, running_moto, s3_get, s3_list, wait_until

REPO_FLAG = "flagrepo"
FLAG_INGEST = "flag-ingest-token-5d1c8e0f27"
FLAG_API = "flag-api-token-9a7b3c2e41"

# Every internal route and its method (src/api: the query fan-out, the Global snapshot, the
# segment file peers copy).
INTERNAL_ROUTES = [
    ("POST", "/internal/v1/query/buffers"),
    ("POST", "/internal/v1/query/segments"),
    ("POST", "/internal/v1/query/partial"),
    ("POST", "/internal/v1/query/cancel"),
    ("GET", "/internal/v1/global/snapshot"),
    ("GET", "/internal/v1/segment-file?name=x.seg"),
]


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    yield from running_moto(tmp_path_factory.mktemp("s3"))


def read_credentials(data_dir: Path) -> dict[str, str]:
    out = {}
    for line in (data_dir / "credentials.txt").read_text().splitlines():
        if "=" in line:
            k, v = line.split("=", 1)
            out[k.strip()] = v.strip()
    return out


def mode(p: Path) -> int:
    return stat.S_IMODE(p.stat().st_mode)


def files_holding(root: Path, needles: dict[str, bytes], skip: set[str]) -> list[str]:
    """'<file>: <needle name>' for every file under root (but the `skip` names) holding a needle."""
    found = []
    for p in sorted(root.rglob("*")):
        if not p.is_file() or p.name in skip:
            continue
        data = p.read_bytes()
        found += [f"{p.relative_to(root)}: {name}" for name, n in needles.items() if n in data]
    return found


def global_topic_bytes(s) -> bytes:
    """Every record value of the server's Kafka global topic (kcat), concatenated."""
    kcat = shutil.which("kcat")
    assert kcat, "kcat is needed to read the global topic"
    r = subprocess.run([kcat, "-C", "-b", s.kafka_brokers, "-t", f"{s.kafka_topic_prefix}global", "-o", "beginning",
                        "-e", "-q", "-f", "%s\n"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    assert r.stdout, "the global topic is empty"
    return r.stdout


@commit_log("the global log carries the token hashes: on Kafka its topic is searched too")
def test_tokens_and_the_cluster_secret_are_never_stored_in_clear(server_factory, s3):
    bucket = new_bucket_name()
    s = server_factory(name="secrets", tokens=False, cluster_secret=None, flush_age_ms=300,
                       extra_args=[*bucket_args(s3.endpoint(), bucket), "--maintenance-interval-ms", "500"],
                       extra_env=S3_ENV)
    creds = read_credentials(s.data_dir)
    secret_file = s.data_dir / "cluster-secret"
    assert secret_file.exists(), s.describe()
    cluster_secret = secret_file.read_text().strip()
    assert len(cluster_secret) >= 32
    needles = {"generated ingest token": creds["ingest_token"], "generated API token": creds["api_token"],
               "flag ingest token": FLAG_INGEST, "flag API token": FLAG_API, "cluster secret": cluster_secret}

    # Restarted with flag tokens: they are added (hashed) next to the generated ones.
    def snapshots() -> set[str]:
        return {k for k in s3_list(s3.endpoint(), bucket, "global/")}

    before = snapshots()
    s.stop()
    s.args += ["--ingest-token", f"{REPO_FLAG}:{FLAG_INGEST}", "--api-token", FLAG_API]
    s.start()
    assert (s.data_dir / "cluster-secret").read_text().strip() == cluster_secret, "the file is kept"
    for token, repo in ((creds["ingest_token"], "sandbox"), (FLAG_INGEST, REPO_FLAG)):
        r = s.ingest("/api/v1/ingest/raw", f"secret-check line for {repo}\n", token=token)
        assert r.status_code == 200, r.text
    for api in (creds["api_token"], FLAG_API):
        for repo in ("sandbox", REPO_FLAG):
            s.api_token, s.repo = api, repo
            wait_until(lambda: s.count("secret-check") == 1, timeout=20, what=f"the {repo} event with {api}")
    # The segments and a Global snapshot taken after the flag tokens were added reach the bucket.
    wait_until(lambda: snapshots() - before, timeout=30, what="a new bucket snapshot")
    wait_until(lambda: any(k.startswith("segments/") for k in s3_list(s3.endpoint(), bucket)), timeout=30,
               what="segments in the bucket")
    s.stop()

    as_bytes = {name: v.encode() for name, v in needles.items()}
    leaks = files_holding(s.data_dir, as_bytes, skip={"credentials.txt", "cluster-secret"})
    keys = s3_list(s3.endpoint(), bucket)
    for key in keys:
        data = s3_get(s3.endpoint(), bucket, key)
        leaks += [f"bucket {key}: {name}" for name, n in as_bytes.items() if n in data]
    if s.uses_kafka:
        topic = global_topic_bytes(s)
        leaks += [f"Kafka global topic: {name}" for name, n in as_bytes.items() if n in topic]
        print(f"\nsecrets: the Kafka global topic ({len(topic)} bytes) searched too")
    print(f"\nsecrets: {len(list(s.data_dir.rglob('*')))} data-dir entries and {len(keys)} bucket objects "
          f"searched for {len(needles)} secrets: {len(leaks)} found")
    assert not leaks, f"secrets stored in clear: {leaks}"
    assert mode(s.data_dir) == 0o700, oct(mode(s.data_dir))
    assert mode(s.data_dir / "credentials.txt") == 0o600
    assert mode(secret_file) == 0o600
    snaps = list((s.data_dir / "global-snapshots").glob("snapshot-*.bin"))
    assert snaps and all(mode(p) & 0o077 == 0 for p in snaps), [oct(mode(p)) for p in snaps]

    # Another secret on this cluster: refused, naming the flag.
    s.args += ["--cluster-secret", "not-the-cluster-secret"]
    rc, out, _ = s.start_expect_exit(timeout=60)
    assert rc != 0 and "--cluster-secret" in out, out[-2000:]


def test_internal_routes_take_only_the_cluster_secret(server):
    s = server
    assert s.cluster_secret
    for method, path in INTERNAL_ROUTES:
        for who, token in (("API token", s.api_token), ("ingest token", s.ingest_token), ("none", None)):
            h = {"Authorization": f"Bearer {token}"} if token else {}
            r = requests.request(method, s.url + path, headers=h, data="{}", timeout=10)
            assert r.status_code in (401, 403, 404), f"{method} {path} with {who}: {r.status_code} {r.text[:200]}"
        r = requests.request(method, s.url + path, headers={"Authorization": f"Bearer {s.cluster_secret}"},
                             data="{}", timeout=10)
        assert r.status_code not in (401, 403), f"{method} {path} with the cluster secret: {r.status_code}"
    r = requests.get(s.url + "/internal/v1/global/snapshot", headers={"Authorization": f"Bearer {s.cluster_secret}"},
                     timeout=10)
    assert r.status_code == 200 and r.content.startswith(b"GSNP"), r.status_code
    for secret in (s.api_token, s.ingest_token, s.cluster_secret):
        assert secret.encode() not in r.content, "the snapshot peers fetch holds a secret in clear"


def test_status_pages_need_an_api_token_and_health_does_not(server):
    s = server
    for path in ("/api/v1/status", "/api/v1/cluster", "/api/v1/cluster/segments"):
        for token in (None, s.ingest_token, "wrong"):
            h = {"Authorization": f"Bearer {token}"} if token else {}
            r = requests.get(s.url + path, headers=h, timeout=10)
            assert r.status_code == 401, f"{path} with {token}: {r.status_code} {r.text[:200]}"
        r = requests.get(s.url + path, headers={"Authorization": f"Bearer {s.api_token}"}, timeout=10)
        assert r.status_code == 200, f"{path}: {r.status_code}"
    r = requests.get(s.url + "/api/v1/health", timeout=10)
    assert r.status_code == 200 and r.json() == {"status": "OK"}, r.text
    r = requests.get(s.url + "/services/collector/health", timeout=10)
    assert r.status_code == 200 and r.json() == {"text": "HEC is healthy", "code": 17}, r.text


def send_until_answered(port: int, header: bytes, total: int, chunk: int = 64 << 10,
                        timeout: float = 20.0) -> tuple[int, bytes]:
    """Sends `header`, then up to `total` body bytes in `chunk`s, reading whenever the server has
    something to say. Returns (body bytes the server accepted, what it answered) once an answer
    arrives or the connection fails."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    sent = 0
    answer = b""
    try:
        sock.sendall(header)
        sock.setblocking(False)
        block = b"x" * chunk
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            readable, writable, _ = select.select([sock], [sock] if sent < total else [], [], 0.5)
            if readable:
                try:
                    data = sock.recv(65536)
                except OSError:
                    break
                answer += data
                if not data or b"\r\n\r\n" in answer:
                    break
                continue
            if writable:
                try:
                    sent += sock.send(block[: min(chunk, total - sent)])
                except BlockingIOError:
                    continue
                except OSError:
                    break
    finally:
        sock.close()
    return sent, answer


@pytest.mark.parametrize("path,scheme,want", [
    ("/api/v1/ingest/raw", "Bearer", 401),
    ("/services/collector/raw", "Splunk", 403),  # HEC answers an unknown token 403
    ("/api/v1/no-such-endpoint", "Bearer", 404),  # nothing serves it: answered from the header too
])
def test_a_32_mib_body_with_a_wrong_token_is_refused_before_it_is_read(server, path, scheme, want):
    total = 32 << 20
    header = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: {scheme} wrong-token\r\n"
              f"Content-Type: text/plain\r\nContent-Length: {total}\r\n\r\n").encode()
    sent, answer = send_until_answered(server.port, header, total)
    status = answer.split(b"\r\n", 1)[0].decode(errors="replace")
    print(f"\n{path}: announced {total} bytes with a wrong token; the server accepted {sent} "
          f"({sent / total:.1%}) before answering {status!r}")
    assert status.startswith(f"HTTP/1.1 {want}"), f"answered {answer[:300]!r} after {sent} bytes"
    assert sent < total // 4, f"the server read {sent} of {total} bytes before refusing"
    # The server is still fine.
    assert server.ingest("/api/v1/ingest/raw", "after the refusal\n").status_code == 200


def test_a_data_dir_readable_by_others_is_tightened(server_factory, tmp_path):
    s = server_factory(name="loose", start=False)
    s.data_dir.mkdir(parents=True)
    os.chmod(s.data_dir, 0o755)
    s.start()
    assert mode(s.data_dir) == 0o700
    assert "permissions are now 0700" in s.log_text(), s.describe()
