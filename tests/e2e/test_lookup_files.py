"""Lookup files (issue 17): CSV and JSON files uploaded per repository through
/api/v1/repositories/{repo}/files (LogScale's multipart upload, or a raw body with ?name=), listed,
read back and deleted there; kept in Global, so they survive a crash and restart."""

from __future__ import annotations

import json
import time

import requests

from conftest import API_TOKEN, SedimentServer, commit_log, wait_until

USERS_CSV = 'userid,name\n1,chr\n2,krab\n"4","p,m"\n7,mgr\n'
USERS_JSON = [{"userid": "1", "name": "chr"}, {"userid": "2", "name": "krab"}]
LIMIT = 512 * 1024  # api/lookup_files.h kMaxLookupFileBytes


def files_url(s: SedimentServer, repo: str | None = None, name: str = "") -> str:
    return f"{s.url}/api/v1/repositories/{repo or s.repo}/files" + (f"/{name}" if name else "")


def auth(token: str = API_TOKEN) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def upload(s: SedimentServer, name: str, content: bytes | str, **kw) -> requests.Response:
    return requests.post(files_url(s), files={"file": (name, content)}, headers=auth(), timeout=15, **kw)


def listing(s: SedimentServer) -> list[dict]:
    r = requests.get(files_url(s), headers=auth(), timeout=15)
    assert r.status_code == 200, r.text
    return r.json()


# The files travel in Global events: on Kafka, through the global topic.
IN_GLOBAL = commit_log("lookup files are Global events: stored and replayed through the commit log")


@IN_GLOBAL
def test_upload_list_read_replace_and_delete(server: SedimentServer) -> None:
    s = server
    assert listing(s) == []
    r = upload(s, "users.csv", USERS_CSV)
    assert r.status_code == 200, r.text
    assert r.json() == {"repository": s.repo, "name": "users.csv", "size": len(USERS_CSV)}
    # The raw body with ?name= (here JSON), on the dataspaces path too.
    r = requests.post(f"{s.url}/api/v1/dataspaces/{s.repo}/files", params={"name": "users.json"},
                      data=json.dumps(USERS_JSON), headers={**auth(), "Content-Type": "application/json"},
                      timeout=15)
    assert r.status_code == 200, r.text
    assert listing(s) == [{"name": "users.csv", "size": len(USERS_CSV)},
                          {"name": "users.json", "size": len(json.dumps(USERS_JSON))}]
    r = requests.get(files_url(s, name="users.csv"), headers=auth(), timeout=15)
    assert r.status_code == 200 and r.text == USERS_CSV
    assert r.headers["Content-Type"].startswith("text/csv")
    r = requests.get(files_url(s, name="users.json"), headers=auth(), timeout=15)
    assert r.status_code == 200 and r.json() == USERS_JSON
    # A second upload of the same name replaces the file.
    assert upload(s, "users.csv", "userid,name\n9,new\n").status_code == 200
    assert requests.get(files_url(s, name="users.csv"), headers=auth(), timeout=15).text == "userid,name\n9,new\n"
    r = requests.delete(files_url(s, name="users.csv"), headers=auth(), timeout=15)
    assert r.status_code == 204, r.text
    assert [f["name"] for f in listing(s)] == ["users.json"]
    for method in ("GET", "DELETE"):
        r = requests.request(method, files_url(s, name="users.csv"), headers=auth(), timeout=15)
        assert r.status_code == 404, (method, r.text)
        assert "users.csv" in r.json()["error"]


@IN_GLOBAL
def test_the_largest_file_fits_one_record(server: SedimentServer) -> None:
    """Over the size bound: 413, nothing stored. At the bound: the event fits the commit log's
    record (Kafka's default message limit of 1 MB on the global topic) and reads back whole."""
    s = server
    big = "h\n" + "x" * (LIMIT - 1)
    r = upload(s, "big.csv", big)
    assert r.status_code == 413, r.text
    assert "at most" in r.json()["error"]
    assert listing(s) == []
    r = upload(s, "big.csv", big[:-1])
    assert r.status_code == 200, r.text
    s.restart(hard=True)
    assert requests.get(files_url(s, name="big.csv"), headers=auth(), timeout=15).text == big[:-1]


def test_refusals(server: SedimentServer) -> None:
    s = server
    for name, content in [("users.txt", "a\n"), ("users.csv", ""), ("ids.json", "12"), ("ids.json", "{")]:
        r = upload(s, name, content)
        assert r.status_code == 400, (name, content, r.text)
    r = requests.post(files_url(s), data="a\n", headers=auth(), timeout=15)  # no name
    assert r.status_code == 400 and "name" in r.json()["error"]
    r = requests.post(files_url(s), data="a\n", params={"name": "../x.csv"}, headers=auth(), timeout=15)
    assert r.status_code == 400, r.text
    assert requests.post(files_url(s, repo="nope"), files={"file": ("a.csv", "a\n")}, headers=auth(),
                         timeout=15).status_code == 404
    assert requests.get(files_url(s), timeout=15).status_code == 401
    assert requests.get(files_url(s), headers=auth("wrong"), timeout=15).status_code == 401
    assert listing(s) == []


@IN_GLOBAL
def test_files_survive_a_crash_and_restart(server: SedimentServer) -> None:
    s = server
    assert upload(s, "users.csv", USERS_CSV).status_code == 200
    assert upload(s, "gone.csv", "a\n").status_code == 200
    assert requests.delete(files_url(s, name="gone.csv"), headers=auth(), timeout=15).status_code == 204
    s.restart(hard=True)
    assert listing(s) == [{"name": "users.csv", "size": len(USERS_CSV)}]
    assert requests.get(files_url(s, name="users.csv"), headers=auth(), timeout=15).text == USERS_CSV


def ingest_users_events(s: SedimentServer) -> int:
    """Five events: ids 1, 2, 4 are in USERS_CSV, 5 and 9 are not."""
    now = int(time.time() * 1000)
    events = [{"timestamp": now - 1000 * i, "attributes": {"id": uid, "userid": uid}, "rawstring": f"id={uid}"}
              for i, uid in enumerate(["1", "2", "4", "5", "9"])]
    r = s.ingest("/api/v1/ingest/humio-structured", [{"tags": {"type": "login"}, "events": events}])
    assert r.status_code == 200, r.text
    wait_until(lambda: s.count() == len(events), timeout=20, what="events searchable")
    return len(events)


@IN_GLOBAL
def test_match_enriches_and_filters_with_an_uploaded_file(server: SedimentServer) -> None:
    """match() reads the repository's lookup file (LogScale's documented examples: the lookup API
    page's users.csv, examples-match-id-value-column and examples-match-strict-false)."""
    s = server
    assert upload(s, "users.csv", USERS_CSV).status_code == 200
    ingest_users_events(s)

    def rows(q: str) -> list[tuple]:
        return sorted((r.get("id"), r.get("name")) for r in s.query(q, start=0))

    # Defaults: column = field, every other column added, strict.
    assert rows('match(file="users.csv", field=userid)') == [("1", "chr"), ("2", "krab"), ("4", "p,m")]
    # include=[]: only filters.
    assert rows('match(file="users.csv", column=userid, field=id, include=[])') == [
        ("1", None), ("2", None), ("4", None)]
    # strict=false: every event passes, the matching ones enriched.
    assert rows('match(file="users.csv", field=id, column=userid, strict=false)') == [
        ("1", "chr"), ("2", "krab"), ("4", "p,m"), ("5", None), ("9", None)]
    # Aggregating after match (the stage runs where the data is read).
    assert s.query('match(file="users.csv", field=userid) | groupBy(name)', start=0) is not None
    # A JSON file, replaced by a new upload: the next query sees the new content.
    r = requests.post(files_url(s), params={"name": "users.json"}, data=json.dumps(USERS_JSON),
                      headers=auth(), timeout=15)
    assert r.status_code == 200, r.text
    assert rows('match(file="users.json", field=userid)') == [("1", "chr"), ("2", "krab")]
    assert upload(s, "users.csv", "userid,name\n9,nine\n").status_code == 200
    assert rows('match(file="users.csv", field=userid)') == [("9", "nine")]
    # A missing file or column is a 400 naming it.
    for q, wanted in [('match(file="nope.csv", field=id)', "nope.csv"),
                      ('match(file="users.csv", field=id)', "no column 'id'")]:
        r = s.query_raw(q, start=0)
        assert r.status_code == 400 and wanted in r.json()["error"], (q, r.text)


@IN_GLOBAL
def test_match_glob_and_cidr_modes(server: SedimentServer) -> None:
    """match(mode=glob) and match(mode=cidr) over uploaded files: patterns and subnets in the
    key column, the first matching pattern and the most specific subnet win."""
    s = server
    assert upload(s, "hosts.csv", "host,role\nweb-*,web\n*-db,database\n").status_code == 200
    assert upload(s, "nets.csv", "net,zone\n10.0.0.0/8,corp\n10.1.0.0/16,lab\n2001:db8::/32,v6\n").status_code == 200
    now = int(time.time() * 1000)
    events = [{"timestamp": now - 1000 * i, "attributes": {"host": h, "ip": ip}, "rawstring": f"{h} {ip}"}
              for i, (h, ip) in enumerate([("web-1", "10.1.2.3"), ("orders-db", "10.200.0.1"),
                                           ("cache", "2001:db8::5"), ("web-db", "192.0.2.1")])]
    r = s.ingest("/api/v1/ingest/humio-structured", [{"tags": {"type": "hosts"}, "events": events}])
    assert r.status_code == 200, r.text
    wait_until(lambda: s.count("#type=hosts") == 4, timeout=20, what="events searchable")

    rows = s.query('#type=hosts | match(file="hosts.csv", field=host, mode=glob) | table([host, role])', start=0)
    assert sorted((r["host"], r["role"]) for r in rows) == [
        ("orders-db", "database"), ("web-1", "web"), ("web-db", "web")]
    rows = s.query('#type=hosts | ip =~ match(file="nets.csv", column=net, mode=cidr, strict=false) '
                   '| table([ip, zone])', start=0)
    assert sorted((r["ip"], r.get("zone")) for r in rows) == [
        ("10.1.2.3", "lab"), ("10.200.0.1", "corp"), ("192.0.2.1", None), ("2001:db8::5", "v6")]
    r = s.query_raw('match(file="hosts.csv", field=ip, column=host, mode=cidr)', start=0)
    assert r.status_code == 400 and "is not an IPv4 or IPv6 subnet" in r.json()["error"], r.text
