"""The management API at run time (api/README.md "Management"): repositories, ingest tokens and API
tokens with permissions, stored in Global; and `sediment admin` as a subprocess."""

from __future__ import annotations

import json
import subprocess

import requests

from conftest import SedimentServer, clean_env, marker, sediment_bin, wait_until

TIMEOUT = 15


def call(s: SedimentServer, method: str, path: str, token: str | None = None, body=None) -> requests.Response:
    """`method path` with `token` (default: the harness's admin API token) and a JSON body."""
    h = {"Authorization": f"Bearer {token or s.api_token}"}
    data = None
    if body is not None:
        h["Content-Type"] = "application/json"
        data = json.dumps(body)
    return requests.request(method, s.url + path, headers=h, data=data, timeout=TIMEOUT)


def query(s: SedimentServer, repo: str, q: str, token: str) -> requests.Response:
    return s.query_raw(q, start=0, end="now", repo=repo, token=token)


def admin_cli(s: SedimentServer, *args: str, token: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sediment_bin(), "admin", "--url", s.url, "--token", token or s.api_token, *args],
                          capture_output=True, text=True, timeout=30, env=clean_env())


def count_in(s: SedimentServer, repo: str, m: str, token: str) -> int:
    r = query(s, repo, f'"{m}" | count()', token)
    if r.status_code != 200:
        return -1
    rows = r.json()
    return int(rows[0]["_count"]) if rows else 0


def test_repository_token_lifecycle_with_permissions(server: SedimentServer):
    s = server
    # The start-up --api-token is an admin.
    who = call(s, "GET", "/api/v1/whoami").json()
    assert who["admin"] is True and who["repositories"].get(s.repo) == ["read", "ingest", "manage"], who

    # Repositories: create (201), again (409), a bad name (400), listed with their fields.
    r = call(s, "POST", "/api/v1/repositories", body={"name": "payments"})
    assert r.status_code == 201 and r.json() == {"name": "payments"}, r.text
    assert call(s, "POST", "/api/v1/repositories", body={"name": "payments"}).status_code == 409
    bad = call(s, "POST", "/api/v1/repositories", body={"name": "no spaces"})
    assert bad.status_code == 400 and "letters" in bad.json()["error"], bad.text
    assert call(s, "POST", "/api/v1/repositories", body={"name": ".hidden"}).status_code == 400
    assert call(s, "POST", "/api/v1/repositories", body=["payments"]).status_code == 400
    repos = {r["name"]: r for r in call(s, "GET", "/api/v1/repositories").json()["repositories"]}
    assert set(repos) >= {"payments", s.repo}, repos
    pay = repos["payments"]
    assert pay["events"] == 0 and pay["bytes"] == 0 and pay["rawBytes"] == 0, pay
    assert pay["retention"] == {"repository": "payments", "retentionMs": 0, "retentionBytes": 0}, pay
    assert isinstance(pay["createdAt"], int) and pay["createdAt"] > 1_600_000_000_000, pay
    assert pay["ingestTokens"] == [], pay
    assert repos[s.repo]["createdAt"] is None  # created by the start-up --ingest-token: no time

    # An ingest token for it: the secret is shown once, then listed without it.
    r = call(s, "POST", "/api/v1/repositories/payments/ingest-tokens", body={"name": "shipper", "parser": None})
    assert r.status_code == 201, r.text
    created = r.json()
    ingest_token = created["token"]
    assert created["name"] == "shipper" and created["parser"] is None and len(ingest_token) == 32, created
    assert call(s, "POST", "/api/v1/repositories/payments/ingest-tokens",
                body={"name": "shipper"}).status_code == 409
    assert call(s, "POST", "/api/v1/repositories/payments/ingest-tokens",
                body={"name": "p2", "parser": "no-such-parser"}).status_code == 400
    listed = call(s, "GET", "/api/v1/repositories/payments/ingest-tokens").json()
    assert [t["name"] for t in listed["tokens"]] == ["shipper"], listed
    assert ingest_token not in json.dumps(listed)

    # Ingest with it: the events land in "payments", not in the harness's repository.
    m = marker()
    r = s.ingest("/api/v1/ingest/raw", f"{m} paid 12\n{m} paid 30\n", token=ingest_token)
    assert r.status_code == 200, r.text
    wait_until(lambda: count_in(s, "payments", m, s.api_token) == 2, timeout=15, what="payments events")
    assert count_in(s, s.repo, m, s.api_token) == 0

    # A read-only API token for "payments".
    r = call(s, "POST", "/api/v1/tokens", body={"name": "auditor", "admin": False,
                                                 "repositories": {"payments": ["read"]}})
    assert r.status_code == 201, r.text
    reader = r.json()["token"]
    assert r.json()["repositories"] == {"payments": ["read"]}, r.text
    assert call(s, "POST", "/api/v1/tokens", body={"name": "auditor"}).status_code == 409
    assert call(s, "POST", "/api/v1/tokens", body={"name": "x", "repositories": {"nope": ["read"]}}).status_code == 400
    assert call(s, "POST", "/api/v1/tokens", body={"name": "x", "repositories": {"payments": ["write"]}}).status_code == 400
    who = call(s, "GET", "/api/v1/whoami", token=reader).json()
    assert who == {"name": "auditor", "admin": False, "repositories": {"payments": ["read"]}}, who
    # It can query its repository...
    assert count_in(s, "payments", m, reader) == 2
    # ... and gets 403 naming the permission on another repository, on writes, on admin routes.
    r = query(s, s.repo, "*", reader)
    assert r.status_code == 403, r.text
    assert "read" in r.json()["error"] and s.repo in r.json()["error"], r.text
    for method, path, body in [
        ("POST", "/api/v1/repositories", {"name": "mine"}),
        ("DELETE", "/api/v1/repositories/payments", None),
        ("GET", "/api/v1/tokens", None),
        ("GET", "/api/v1/cluster", None),
        ("GET", "/api/v1/status", None),
        ("GET", "/api/v1/repositories/payments/ingest-tokens", None),
        ("PUT", "/api/v1/repositories/payments/retention", {"retentionMs": 1}),
        ("PUT", "/api/v1/repositories/payments/parsers/p", {"script": "kvParse()"}),
    ]:
        r = call(s, method, path, token=reader, body=body)
        assert r.status_code == 403, f"{method} {path}: {r.status_code} {r.text}"
        assert "error" in r.json(), r.text
    # Reads it holds: the retention and the repository listing (only its repository).
    assert call(s, "GET", "/api/v1/repositories/payments/retention", token=reader).status_code == 200
    listing = call(s, "GET", "/api/v1/repositories", token=reader).json()["repositories"]
    assert [r["name"] for r in listing] == ["payments"] and "ingestTokens" not in listing[0], listing
    # Counts are of flushed segments: the two events may still be buffered by the digest.
    assert listing[0]["events"] in (0, 2), listing

    # A manage token may list and create ingest tokens of its repository, not of another.
    r = call(s, "POST", "/api/v1/tokens", body={"name": "ops", "repositories": {"payments": ["read", "manage"]}})
    ops = r.json()["token"]
    assert call(s, "GET", "/api/v1/repositories/payments/ingest-tokens", token=ops).status_code == 200
    assert call(s, "GET", f"/api/v1/repositories/{s.repo}/ingest-tokens", token=ops).status_code == 403
    # An API token with `ingest` on a repository may ingest into it with ?repo=.
    r = call(s, "POST", "/api/v1/tokens", body={"name": "writer", "repositories": {"payments": ["ingest"]}})
    writer = r.json()["token"]
    m2 = marker()
    assert s.ingest("/api/v1/ingest/raw", f"{m2} via api token\n", token=writer, params={"repo": "payments"}).status_code == 200
    assert s.ingest("/api/v1/ingest/raw", f"{m2} x\n", token=writer, params={"repo": s.repo}).status_code == 401
    assert s.ingest("/api/v1/ingest/raw", f"{m2} x\n", token=reader, params={"repo": "payments"}).status_code == 401
    wait_until(lambda: count_in(s, "payments", m2, s.api_token) == 1, timeout=15, what="API-token ingest")

    # Revoking the API token: 401 on the next request (the lookup cache does not keep it alive).
    assert call(s, "DELETE", "/api/v1/tokens/auditor").status_code == 204
    assert call(s, "DELETE", "/api/v1/tokens/auditor").status_code == 404
    r = query(s, "payments", "*", reader)
    assert r.status_code == 401, r.text
    assert call(s, "GET", "/api/v1/whoami", token=reader).status_code == 401

    # Revoking the ingest token: 401 on the next ingest.
    assert call(s, "DELETE", "/api/v1/repositories/payments/ingest-tokens/shipper").status_code == 204
    r = s.ingest("/api/v1/ingest/raw", f"{m} after revoke\n", token=ingest_token)
    assert r.status_code == 401, r.text
    assert call(s, "DELETE", "/api/v1/repositories/payments/ingest-tokens/shipper").status_code == 404

    # Deleting the repository: queries 404, its data is gone from the listing, tokens on it lose it.
    # (Events still buffered by a digest when the repository is deleted are not removed: wait until
    # the three events are in segments, see api/README.md.)
    def flushed_events() -> int:
        listing = call(s, "GET", "/api/v1/repositories").json()["repositories"]
        return next(r["events"] for r in listing if r["name"] == "payments")
    wait_until(lambda: flushed_events() == 3, timeout=30, what="payments events flushed to segments")
    assert call(s, "DELETE", "/api/v1/repositories/payments").status_code == 204
    r = query(s, "payments", "*", s.api_token)
    assert r.status_code == 404, r.text
    assert "payments" not in {r["name"] for r in call(s, "GET", "/api/v1/repositories").json()["repositories"]}
    tokens = {t["name"]: t for t in call(s, "GET", "/api/v1/tokens").json()["tokens"]}
    assert tokens["ops"]["repositories"] == {}, tokens
    assert call(s, "DELETE", "/api/v1/repositories/payments").status_code == 404
    # Created again it is empty: the old events do not come back.
    assert call(s, "POST", "/api/v1/repositories", body={"name": "payments"}).status_code == 201
    assert count_in(s, "payments", m, s.api_token) == 0

    # An unknown token is 401 everywhere, a missing one too.
    assert call(s, "GET", "/api/v1/whoami", token="nope").status_code == 401
    assert requests.get(s.url + "/api/v1/repositories", timeout=TIMEOUT).status_code == 401


def test_state_survives_a_restart(server: SedimentServer):
    s = server
    assert call(s, "POST", "/api/v1/repositories", body={"name": "kept"}).status_code == 201
    ingest = call(s, "POST", "/api/v1/repositories/kept/ingest-tokens", body={"name": "i", "parser": "kv"}).json()
    assert ingest["parser"] == "kv", ingest
    api = call(s, "POST", "/api/v1/tokens", body={"name": "r", "repositories": {"kept": ["read"]}}).json()["token"]
    gone = call(s, "POST", "/api/v1/tokens", body={"name": "gone", "admin": True}).json()["token"]
    assert call(s, "GET", "/api/v1/tokens", token=gone).status_code == 200
    assert call(s, "DELETE", "/api/v1/tokens/gone").status_code == 204
    m = marker()
    # The token's parser (kv) runs on its events.
    assert s.ingest("/api/v1/ingest/raw", f"{m} user=alice amount=7\n", token=ingest["token"]).status_code == 200
    wait_until(lambda: count_in(s, "kept", m, api) == 1, timeout=15, what="kept events")
    rows = query(s, "kept", f'"{m}" | amount = 7 | select([user])', api).json()
    assert rows == [{"user": "alice"}], rows

    s.restart()
    assert call(s, "GET", "/api/v1/whoami", token=api).json()["repositories"] == {"kept": ["read"]}
    assert call(s, "GET", "/api/v1/whoami", token=gone).status_code == 401
    assert count_in(s, "kept", m, api) == 1
    m2 = marker()
    assert s.ingest("/api/v1/ingest/raw", f"{m2} user=bob amount=8\n", token=ingest["token"]).status_code == 200
    wait_until(lambda: count_in(s, "kept", m2, api) == 1, timeout=15, what="ingest after restart")
    listed = call(s, "GET", "/api/v1/repositories/kept/ingest-tokens").json()["tokens"]
    assert [(t["name"], t["parser"]) for t in listed] == [("i", "kv")], listed
    # A start-up token keeps its full rights after the restart.
    assert call(s, "GET", "/api/v1/whoami").json()["admin"] is True


def test_admin_cli(server: SedimentServer):
    s = server
    r = admin_cli(s, "repo", "create", "clirepo")
    assert r.returncode == 0 and "created repository 'clirepo'" in r.stdout, r.stderr
    r = admin_cli(s, "repo", "create", "clirepo")
    assert r.returncode == 1 and "409" in r.stderr, (r.stdout, r.stderr)
    r = admin_cli(s, "repo", "list")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].split()[:2] == ["NAME", "EVENTS"], r.stdout
    assert any(ln.split()[0] == "clirepo" for ln in lines[1:]), r.stdout

    r = admin_cli(s, "ingest-token", "create", "clirepo", "ship", "--parser", "json")
    assert r.returncode == 0, r.stderr
    token = [ln.split(": ", 1)[1] for ln in r.stdout.splitlines() if ln.startswith("token: ")][0]
    assert len(token) == 32, r.stdout
    r = admin_cli(s, "ingest-token", "list", "clirepo")
    assert r.returncode == 0 and any(ln.split()[:2] == ["ship", "json"] for ln in r.stdout.splitlines()), r.stdout

    r = admin_cli(s, "token", "create", "clireader", "--read", "clirepo", "--manage", "clirepo")
    assert r.returncode == 0, r.stderr
    api = [ln.split(": ", 1)[1] for ln in r.stdout.splitlines() if ln.startswith("token: ")][0]
    r = admin_cli(s, "token", "list")
    row = [ln for ln in r.stdout.splitlines() if ln.startswith("clireader ")]
    assert row and "clirepo:read+manage" in row[0] and " no " in row[0], r.stdout
    # The new token through the CLI: it lists its repository, is refused the admin commands.
    r = admin_cli(s, "repo", "list", token=api)
    assert r.returncode == 0 and [ln.split()[0] for ln in r.stdout.splitlines()[1:]] == ["clirepo"], r.stdout
    r = admin_cli(s, "token", "list", token=api)
    assert r.returncode == 1 and "403" in r.stderr and "admin" in r.stderr, r.stderr
    r = admin_cli(s, "--json", "repo", "list", token=api)
    assert json.loads(r.stdout)["repositories"][0]["name"] == "clirepo", r.stdout

    m = marker()
    assert s.ingest("/api/v1/ingest/raw", json.dumps({"msg": m, "n": 1}) + "\n", token=token).status_code == 200
    wait_until(lambda: count_in(s, "clirepo", m, api) == 1, timeout=15, what="CLI-token events")

    assert admin_cli(s, "ingest-token", "revoke", "clirepo", "ship").returncode == 0
    assert s.ingest("/api/v1/ingest/raw", "x\n", token=token).status_code == 401
    assert admin_cli(s, "token", "revoke", "clireader").returncode == 0
    assert admin_cli(s, "repo", "list", token=api).returncode == 1
    r = admin_cli(s, "repo", "delete", "clirepo")
    assert r.returncode == 0 and "deleted repository 'clirepo'" in r.stdout, r.stderr
    assert query(s, "clirepo", "*", s.api_token).status_code == 404
