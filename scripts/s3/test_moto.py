"""Tests of scripts/s3/moto.py against real moto servers on loopback (pytest).

    python3 -m pytest -q scripts/s3/test_moto.py

The first run installs moto into the cache virtualenv (about a minute)."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import socket
import subprocess
import sys
import time
import urllib.error
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent / "moto.py"
_spec = importlib.util.spec_from_file_location("sediment_moto_script", SCRIPT)
moto_script = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(moto_script)


def run(*args: str, env=None, check=True) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, env=env, check=check, timeout=600)


def put(endpoint: str, path: str, body: bytes = b"") -> bytes:
    return moto_script._http("PUT", f"{endpoint}{path}", body)


def get(endpoint: str, path: str) -> bytes:
    return moto_script._http("GET", f"{endpoint}{path}")


def port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


@pytest.fixture(scope="session", autouse=True)
def installed():
    run("install")


@pytest.fixture
def server_dir(tmp_path):
    d = tmp_path / "s3"
    yield d
    run("kill", "--dir", str(d), check=False)


def test_install_does_not_touch_the_network_when_installed():
    env = dict(os.environ, PIP_INDEX_URL="http://127.0.0.1:9/simple", PIP_NO_INDEX="1",
               PIP_FIND_LINKS="/nonexistent")
    started = time.monotonic()
    res = run("install", env=env)
    assert res.stdout.strip().endswith("moto-venv/bin/python")
    assert "installing" not in res.stderr
    assert time.monotonic() - started < 30


def test_start_stop_restart_keeps_objects(server_dir):
    endpoint = run("start", "--dir", str(server_dir)).stdout.strip()
    assert endpoint.startswith("http://127.0.0.1:")
    port = int(endpoint.rsplit(":", 1)[1])
    assert run("start", "--dir", str(server_dir)).stdout.strip() == endpoint  # already running
    assert run("endpoint", "--dir", str(server_dir)).stdout.strip() == endpoint
    pid = int((server_dir / "moto.pid").read_text())

    put(endpoint, "/keep-bucket")
    put(endpoint, "/keep-bucket/a%20b/c%2Bd", b"hello")
    big = os.urandom(6 << 20)
    put(endpoint, "/keep-bucket/big", big)
    # A multipart object: its upload id would not survive a replay of requests.
    init = moto_script._http("POST", f"{endpoint}/keep-bucket/mp?uploads", b"")
    upload_id = moto_script.ET.fromstring(init).find(moto_script._S3_NS + "UploadId").text
    part = os.urandom(5 << 20)
    q = moto_script.urllib.parse.quote(upload_id, safe="")
    moto_script._http("PUT", f"{endpoint}/keep-bucket/mp?partNumber=1&uploadId={q}", part)
    moto_script._http("PUT", f"{endpoint}/keep-bucket/mp?partNumber=2&uploadId={q}", b"tail")
    etags = [hashlib.md5(part).hexdigest(), hashlib.md5(b"tail").hexdigest()]
    complete = "<CompleteMultipartUpload>" + "".join(
        f"<Part><PartNumber>{n}</PartNumber><ETag>\"{e}\"</ETag></Part>"
        for n, e in ((1, etags[0]), (2, etags[1]))) + "</CompleteMultipartUpload>"
    moto_script._http("POST", f"{endpoint}/keep-bucket/mp?uploadId={q}", complete.encode())
    assert get(endpoint, "/keep-bucket/mp") == part + b"tail"

    run("stop", "--dir", str(server_dir))
    assert not port_open(port)
    assert not Path(f"/proc/{pid}").exists() or \
        moto_script._zombie_or_gone(pid)
    assert run("status", "--dir", str(server_dir)).stdout.count('"running": false') == 1

    assert run("start", "--dir", str(server_dir), "--port", str(port)).stdout.strip() == endpoint
    assert get(endpoint, "/keep-bucket/a%20b/c%2Bd") == b"hello"
    assert get(endpoint, "/keep-bucket/big") == big
    assert get(endpoint, "/keep-bucket/mp") == part + b"tail"

    # kill = a crash: what was stored since the last stop is gone, the rest comes back.
    put(endpoint, "/keep-bucket/after-stop", b"lost")
    run("kill", "--dir", str(server_dir))
    run("start", "--dir", str(server_dir), "--port", str(port))
    assert get(endpoint, "/keep-bucket/a%20b/c%2Bd") == b"hello"
    with pytest.raises(urllib.error.HTTPError) as e:
        get(endpoint, "/keep-bucket/after-stop")
    assert e.value.code == 404
    run("stop", "--dir", str(server_dir))
    run("stop", "--dir", str(server_dir))  # again: nothing to do


def test_snapshot_leaves_out_an_object_deleted_while_it_runs(server_dir, tmp_path, monkeypatch):
    # A cluster goes on deleting merged segments while the harness stops moto: the listing can
    # name an object that is gone by the time the snapshot reads it.
    endpoint = run("start", "--dir", str(server_dir), "--ephemeral").stdout.strip()
    put(endpoint, "/snap-bucket")
    for k in ("a", "doomed", "z"):
        put(endpoint, f"/snap-bucket/{k}", k.encode())
    real_http = moto_script._http

    def deleting_after_listing(method, url, *args, **kwargs):
        out = real_http(method, url, *args, **kwargs)
        if method == "GET" and "list-type=2" in url:
            real_http("DELETE", f"{endpoint}/snap-bucket/doomed")
        return out

    monkeypatch.setattr(moto_script, "_http", deleting_after_listing)
    snap = tmp_path / "snap"
    assert moto_script.save_snapshot(endpoint, snap) == 2
    manifest = moto_script.json.loads((snap / "manifest.json").read_text())
    objects = manifest["buckets"][0]["objects"]
    assert [o["key"] for o in objects] == ["a", "z"]
    assert [(snap / o["file"]).read_bytes() for o in objects] == [b"a", b"z"]
    # Any other failure of a read still fails the snapshot, and keeps the previous one.
    def failing_reads(method, url, *args, **kwargs):
        if method == "GET" and url.endswith("/snap-bucket/z"):
            raise urllib.error.HTTPError(url, 500, "Internal Server Error", None, None)
        return real_http(method, url, *args, **kwargs)

    monkeypatch.setattr(moto_script, "_http", failing_reads)
    with pytest.raises(urllib.error.HTTPError):
        moto_script.save_snapshot(endpoint, snap)
    assert moto_script.json.loads((snap / "manifest.json").read_text()) == manifest


def test_ephemeral_restart_starts_empty(server_dir):
    endpoint = run("start", "--dir", str(server_dir), "--ephemeral").stdout.strip()
    port = endpoint.rsplit(":", 1)[1]
    put(endpoint, "/gone-bucket")
    put(endpoint, "/gone-bucket/k", b"v")
    run("stop", "--dir", str(server_dir))
    run("start", "--dir", str(server_dir), "--ephemeral", "--port", port)
    with pytest.raises(urllib.error.HTTPError) as e:
        get(endpoint, "/gone-bucket/k")
    assert e.value.code == 404


def test_verify_signatures_rejects_a_wrong_signature(server_dir):
    endpoint = run("start", "--dir", str(server_dir), "--verify-signatures").stdout.strip()
    creds = run("credentials", "--dir", str(server_dir)).stdout.split()
    assert creds[0].startswith("AWS_ACCESS_KEY_ID=AKIA")
    assert creds[1].startswith("AWS_SECRET_ACCESS_KEY=")
    with pytest.raises(urllib.error.HTTPError) as e:
        put(endpoint, "/some-bucket")  # moto.py's requests carry a dummy signature
    assert e.value.code == 403
    # curl's own SigV4 with the right key passes.
    key, secret = creds[0].split("=", 1)[1], creds[1].split("=", 1)[1]
    res = subprocess.run(
        ["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", "PUT",
         "--aws-sigv4", "aws:amz:us-east-1:s3", "-u", f"{key}:{secret}", "-H",
         "x-amz-content-sha256: "
         "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
         f"{endpoint}/signed-bucket"], stdout=subprocess.PIPE, text=True, timeout=60)
    assert res.stdout == "200"
    with pytest.raises(urllib.error.HTTPError) as e:
        get(endpoint, "/signed-bucket?list-type=2")
    assert e.value.code == 403


def test_start_fails_clearly_on_a_taken_port(server_dir, tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        res = run("start", "--dir", str(server_dir), "--port", str(port), check=False)
    assert res.returncode == 1
    assert "moto.py start:" in res.stderr
    assert not (server_dir / "moto.pid").exists()
