"""Issue 15, TLS: a node started with --tls-cert/--tls-key serves HTTPS only.

The certificates are made at test time with the `openssl` command (harness.make_test_certs: a test
CA and a server certificate for 127.0.0.1 and localhost). Checked:
- ingest and query over https:// with `curl --cacert` (by IP and by the name localhost);
- curl without the CA refuses the certificate (exit 60) and sends nothing;
- plain HTTP to the TLS port fails cleanly: curl gets no HTTP answer (an error exit), and the
  server goes on serving HTTPS;
- the CLI client (`sediment ingest/query --url https://... --cacert`) works, and without the CA it
  fails with the reason (`not trusted`).
The 3-node cluster on TLS (node-to-node calls over HTTPS, failover) is in
tests/cluster/test_cluster_faults.py (`test_kill_owner_failover_over_tls`).
Bounded: a few seconds; the server is stopped by pid (fixture).
"""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from conftest import API_TOKEN, INGEST_TOKEN, REPO, clean_env, marker, sediment_bin, wait_until

pytestmark = pytest.mark.skipif(shutil.which("curl") is None, reason="needs curl")


def curl(*args: str, timeout: float = 20) -> subprocess.CompletedProcess:
    return subprocess.run(["curl", "-sS", "--max-time", "10", *args], capture_output=True, text=True,
                          timeout=timeout)


def curl_ingest(url: str, ca, lines: list[str]) -> subprocess.CompletedProcess:
    return curl("--cacert", str(ca), "-o", "/dev/null", "-w", "%{http_code}", "-X", "POST",
                f"{url}/api/v1/ingest/raw", "-H", f"Authorization: Bearer {INGEST_TOKEN}",
                "--data-binary", "\n".join(lines))


def curl_query(url: str, ca, q: str) -> list[dict]:
    r = curl("--cacert", str(ca), "-X", "POST", f"{url}/api/v1/repositories/{REPO}/query",
             "-H", f"Authorization: Bearer {API_TOKEN}", "-H", "Content-Type: application/json",
             "-d", json.dumps({"queryString": q, "start": "1h"}))
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sediment_bin(), *args], capture_output=True, text=True, timeout=30, env=clean_env())


def test_ingest_and_query_over_https_with_curl_cacert(server_factory, tls_files):
    srv = server_factory(tls=tls_files)
    assert srv.url.startswith("https://")
    mk = marker("tls")
    r = curl_ingest(srv.url, tls_files.ca, [f"{mk} first", f"{mk} second"])
    assert (r.returncode, r.stdout) == (0, "200"), r.stderr
    found = wait_until(lambda: len(curl_query(srv.url, tls_files.ca, mk)) == 2 or None, timeout=15, interval=0.25,
                       what="both events searchable over https")
    assert found
    # The certificate names localhost too.
    by_name = srv.url.replace("127.0.0.1", "localhost")
    r = curl_ingest(by_name, tls_files.ca, [f"{mk} third"])
    assert (r.returncode, r.stdout) == (0, "200"), r.stderr
    wait_until(lambda: len(curl_query(by_name, tls_files.ca, mk)) == 3 or None, timeout=15, interval=0.25,
               what="the third event searchable")
    assert "ready at https://127.0.0.1:" in srv.log_text(), srv.describe()

    # Without the CA curl refuses the certificate (60: peer certificate cannot be authenticated)
    # and sends nothing.
    r = curl("-o", "/dev/null", "-X", "POST", f"{srv.url}/api/v1/ingest/raw", "-H",
             f"Authorization: Bearer {INGEST_TOKEN}", "--data-binary", f"{mk} never")
    assert r.returncode == 60, (r.returncode, r.stderr)
    assert len(curl_query(srv.url, tls_files.ca, mk)) == 3


def test_plain_http_to_the_tls_port_fails_cleanly(server_factory, tls_files):
    srv = server_factory(tls=tls_files)
    plain = srv.url.replace("https://", "http://")
    for path in ("/api/v1/status", "/api/v1/ingest/raw"):
        r = curl("-o", "/dev/null", "-w", "%{http_code}", "-X", "POST", f"{plain}{path}", "-H",
                 f"Authorization: Bearer {INGEST_TOKEN}", "--data-binary", "plain text")
        # No HTTP answer at all (an empty reply or a reset: curl 52 or 56), within the bound.
        assert r.returncode != 0 and r.stdout in ("000", ""), (r.returncode, r.stdout, r.stderr)
        print(f"plain HTTP to the TLS port ({path}): curl exit {r.returncode}: {r.stderr.strip()}")
    assert srv.proc is not None and srv.proc.poll() is None, srv.describe()
    r = curl_ingest(srv.url, tls_files.ca, [marker("after")])
    assert (r.returncode, r.stdout) == (0, "200"), r.stderr


def test_cli_client_over_https_with_cacert(server_factory, tls_files):
    srv = server_factory(tls=tls_files)
    mk = marker("cli")
    p = subprocess.run([sediment_bin(), "ingest", "--url", srv.url, "--cacert", str(tls_files.ca), "--token",
                        INGEST_TOKEN], input=f"{mk} one\n{mk} two\n", capture_output=True, text=True, timeout=30,
                       env=clean_env())
    assert p.returncode == 0, p.stderr
    assert "ingested 2 events, all acknowledged" in p.stderr

    def query():
        q = cli("query", "--url", srv.url, "--cacert", str(tls_files.ca), "--token", API_TOKEN, "--repo", REPO,
                "--start", "1h", "--format", "ndjson", mk)
        assert q.returncode == 0, q.stderr
        rows = [json.loads(line) for line in q.stdout.splitlines() if line.strip()]
        return rows if len(rows) == 2 else None

    rows = wait_until(query, timeout=15, interval=0.25, what="the CLI finds both events over https")
    assert sorted(r["@rawstring"] for r in rows) == [f"{mk} one", f"{mk} two"]

    # Without --cacert the system's CAs do not know the test CA: a clear error, exit 1.
    q = cli("query", "--url", srv.url, "--token", API_TOKEN, "--repo", REPO, mk)
    assert q.returncode == 1, (q.stdout, q.stderr)
    assert "not trusted" in q.stderr, q.stderr
    print(f"CLI without --cacert: {q.stderr.strip()}")
