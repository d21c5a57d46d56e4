#!/usr/bin/env python3
"""Installs, starts and stops a local S3-compatible server (moto's server mode) on loopback, for
sediment's bucket tests and for trying sediment's bucket storage.

Command line (state lives in DIR; every command is safe to repeat):

    moto.py install                          # virtualenv with moto[server]==MOTO_VERSION
    moto.py start    --dir DIR [--port P] [--ephemeral] [--verify-signatures]
                                             # prints http://127.0.0.1:PORT when it serves
    moto.py credentials --dir DIR            # AWS_ACCESS_KEY_ID=.. / AWS_SECRET_ACCESS_KEY=..
    moto.py stop     --dir DIR               # snapshot, then SIGTERM (SIGKILL) the pid, waits
    moto.py kill     --dir DIR               # stop without a snapshot (a crash)
    moto.py endpoint --dir DIR               # prints the endpoint of the running server
    moto.py status   --dir DIR               # JSON

The virtualenv is ${SEDIMENT_CACHE:-~/.cache/sediment}/moto-venv. `install` first asks the venv's
python which moto is installed (and whether the server extras are there) and touches no network
when the pinned version is there.

moto keeps buckets and objects in memory and (in 5.2.5) has no state file. So that a stopped and
restarted server keeps its objects, `stop` first saves every bucket and object to DIR/moto-data
and `start` uploads them into the new server before it reports the endpoint (see "snapshots"
below). `kill` skips the snapshot: what was stored since the last `stop` is lost, as in a crash.
`start --ephemeral` starts a server whose `stop` saves nothing and which restores nothing.

moto accepts any credentials and checks no signature by default. `start --verify-signatures`
turns its IAM authentication on: moto.py creates an IAM user allowed s3:* with an access key
(DIR/credentials.json, printed by `credentials`) and moto then recomputes the SigV4 signature
of every request (with botocore) and answers 403 SignatureDoesNotMatch on a mismatch. Such a
server is ephemeral (a restart makes a new key).

Library use (pytest):

    # scripts/s3 on sys.path; this file's module name shadows the real moto package there,
    # which only the venv's python has.
    from moto import MotoServer
    with MotoServer(tmp_path / "s3") as s3:   # __exit__ stops the server by pid
        endpoint = s3.start()       # "http://127.0.0.1:PORT"
        s3.stop(); s3.start()       # same port again

Processes are only ever signalled by the pid recorded in DIR/moto.pid, and only after
/proc/<pid>/cmdline shows they still run moto's server on the recorded port.
Python 3 standard library only.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import socket
import subprocess
import sys
import shutil
import time
import urllib.error
import urllib.parse
import urllib.request
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import List, Optional

MOTO_VERSION = os.environ.get("SEDIMENT_MOTO_VERSION", "5.2.5")
HOST = "127.0.0.1"
PID_FILE = "moto.pid"
STATE_FILE = "moto.json"
LOG_FILE = "moto.log"
SNAPSHOT_DIR = "moto-data"
CREDENTIALS_FILE = "credentials.json"


class MotoError(RuntimeError):
    """An install/start/stop failed; the message says why and carries the log tail."""


def cache_dir() -> Path:
    base = os.environ.get("SEDIMENT_CACHE")
    return Path(base) if base else Path.home() / ".cache" / "sediment"


def venv_dir() -> Path:
    return cache_dir() / "moto-venv"


def venv_python() -> Path:
    return venv_dir() / "bin" / "python"


def _log_tail(path: Path, lines: int = 30) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 32 * 1024))
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return f"(no {path.name})"
    tail = text.splitlines()[-lines:]
    return "\n".join(tail) if tail else f"({path.name} is empty)"


# ----- install -------------------------------------------------------------------------------

# Package metadata only (importing moto.server would cost more than a second per start).
_PROBE = ("import importlib.metadata as m; [m.version(p) for p in ('flask', 'flask-cors', "
          "'werkzeug')]; print(m.version('moto'))")


def installed_version() -> Optional[str]:
    """moto's version in the venv when moto and its server extras are installed there (by
    their package metadata), else None."""
    py = venv_python()
    if not py.exists():
        return None
    try:
        # -I: neither the working directory (which may hold this very file, moto.py) nor
        # PYTHON* variables take part.
        res = subprocess.run([str(py), "-I", "-c", _PROBE], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return res.stdout.strip() if res.returncode == 0 else None


def install(quiet: bool = False) -> Path:
    """Makes sure the venv has moto[server]==MOTO_VERSION; returns the venv's python.
    No network when it is already there."""
    if installed_version() == MOTO_VERSION:
        return venv_python()
    vdir = venv_dir()
    vdir.parent.mkdir(parents=True, exist_ok=True)
    log = vdir.parent / "moto-install.log"
    started = time.monotonic()
    if not quiet:
        print(f"installing moto[server]=={MOTO_VERSION} into {vdir} ...", file=sys.stderr)
    with open(log, "w") as out:
        # A venv whose base python is gone (or a half-made one) is rebuilt from scratch.
        if not venv_python().exists() or subprocess.run(
                [str(venv_python()), "-c", "import pip"], stdout=out, stderr=out).returncode != 0:
            res = subprocess.run([sys.executable, "-m", "venv", "--clear", str(vdir)],
                                 stdout=out, stderr=out)
            if res.returncode != 0:
                raise MotoError(f"python -m venv failed (see {log}):\n{_log_tail(log)}")
        res = subprocess.run(
            [str(venv_python()), "-m", "pip", "install", "--disable-pip-version-check",
             f"moto[server]=={MOTO_VERSION}"], stdout=out, stderr=out, cwd=vdir)
    if res.returncode != 0:
        raise MotoError(f"pip install moto[server]=={MOTO_VERSION} failed (see {log}):\n"
                        f"{_log_tail(log)}")
    got = installed_version()
    if got != MOTO_VERSION:
        raise MotoError(f"after install the venv reports moto {got!r}, wanted {MOTO_VERSION}")
    if not quiet:
        print(f"installed moto {got} in {time.monotonic() - started:.1f} s", file=sys.stderr)
    return venv_python()


# ----- ports and processes -------------------------------------------------------------------

def _ephemeral_range() -> range:
    try:
        lo, hi = open("/proc/sys/net/ipv4/ip_local_port_range").read().split()
        return range(int(lo), int(hi) + 1)
    except (OSError, ValueError):
        return range(32768, 61000)


def free_port() -> int:
    """A loopback port free now and outside the kernel's ephemeral range, so that a stopped
    server's port is not taken by some outgoing connection before it restarts."""
    eph = _ephemeral_range()
    low, high = (10000, eph.start - 1) if eph.start > 12000 else (eph.stop, 65535)
    rng = random.SystemRandom()
    for _ in range(5000):
        port = rng.randint(low, high)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind((HOST, port))
            except OSError:
                continue
            return port
    raise MotoError("could not find a free loopback port")


def _cmdline(pid: int) -> List[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return [a.decode("utf-8", "replace") for a in f.read().split(b"\0") if a]
    except OSError:
        return []


def _is_our_server(pid: int, port: int) -> bool:
    args = _cmdline(pid)
    return "moto.server" in args and str(port) in args


def _zombie_or_gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except OSError:
        return True


def _port_open(port: int) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=1.0):
            return True
    except OSError:
        return False


def _answers(endpoint: str, timeout: float = 2.0) -> bool:
    try:
        with urllib.request.urlopen(f"{endpoint}/moto-api/data.json", timeout=timeout) as r:
            return r.status == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


# ----- the server ----------------------------------------------------------------------------

class MotoServer:
    """moto's server for one DIR: DIR/moto.pid (pid), DIR/moto.json (port, endpoint, persist),
    DIR/moto.log (server output, appended across restarts), DIR/moto-data (the snapshot, when
    persistent). Not thread-safe; one MotoServer object (or one CLI command) per DIR at a time."""

    def __init__(self, dir, port: Optional[int] = None, persist: bool = True,
                 verify_signatures: bool = False):
        self.dir = Path(dir).resolve()
        self.port = port
        self.verify_signatures = verify_signatures
        self.persist = persist and not verify_signatures

    def __enter__(self) -> "MotoServer":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def log_path(self) -> Path:
        return self.dir / LOG_FILE

    def _state(self) -> dict:
        try:
            return json.loads((self.dir / STATE_FILE).read_text())
        except (OSError, ValueError):
            return {}

    def _pid(self) -> Optional[int]:
        try:
            return int((self.dir / PID_FILE).read_text().strip())
        except (OSError, ValueError):
            return None

    def running_pid(self) -> Optional[int]:
        """The recorded pid when that process still runs our server, else None."""
        pid, port = self._pid(), self._state().get("port")
        if pid is None or port is None or _zombie_or_gone(pid):
            return None
        return pid if _is_our_server(pid, port) else None

    def credentials(self) -> dict:
        """{"access_key": .., "secret_key": ..} of a --verify-signatures server; other servers
        take any credentials, so this returns {"access_key": "test", "secret_key": "test"}."""
        try:
            return json.loads((self.dir / CREDENTIALS_FILE).read_text())
        except FileNotFoundError:
            return {"access_key": "test", "secret_key": "test"}

    def endpoint(self) -> str:
        port = self._state().get("port")
        if port is None:
            raise MotoError(f"no moto server recorded in {self.dir}")
        return f"http://{HOST}:{port}"

    def status(self) -> dict:
        st = self._state()
        pid = self.running_pid()
        return {"dir": str(self.dir), "pid": pid, "running": pid is not None,
                "port": st.get("port"), "endpoint": st.get("endpoint"),
                "persist": st.get("persist", False),
                "answers": bool(pid and st.get("endpoint") and _answers(st["endpoint"]))}

    def start(self, timeout: float = 60.0) -> str:
        """Starts the server (installing moto when needed) and returns its endpoint once it
        answers and, when persistent, holds the snapshot's buckets and objects again. When a
        server recorded in DIR still runs, returns its endpoint (a --port that differs from the
        running one is an error)."""
        self.dir.mkdir(parents=True, exist_ok=True)
        st = self._state()
        pid = self.running_pid()
        if pid is not None:
            if self.port is not None and self.port != st["port"]:
                raise MotoError(f"a moto server already runs in {self.dir} on port {st['port']}")
            return st["endpoint"]
        python = install(quiet=True)
        # A restart in the same DIR keeps its port, so clients configured with the endpoint
        # reach the restarted server (an outage, not a move).
        port = self.port if self.port is not None else st.get("port") or free_port()
        endpoint = f"http://{HOST}:{port}"
        if _port_open(port):
            # Someone else serves there: waiting for "an answer" would find theirs.
            raise MotoError(f"port {port} on {HOST} is already in use")
        env = dict(os.environ)
        if self.verify_signatures:
            # The first requests (the IAM set-up below) go unauthenticated, all later ones not.
            env["INITIAL_NO_AUTH_ACTION_COUNT"] = str(len(_IAM_SETUP))
        else:
            env.pop("INITIAL_NO_AUTH_ACTION_COUNT", None)
        (self.dir / CREDENTIALS_FILE).unlink(missing_ok=True)
        with open(self.log_path, "ab") as log:
            log.write(f"--- moto.py start {time.strftime('%Y-%m-%d %H:%M:%S')} port {port}"
                      f"{' persist' if self.persist else ''}"
                      f"{' verify-signatures' if self.verify_signatures else ''}\n".encode())
            log.flush()
            proc = subprocess.Popen(
                [str(python), "-I", "-m", "moto.server", "-H", HOST, "-p", str(port)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env,
                cwd=self.dir, start_new_session=True)
        (self.dir / PID_FILE).write_text(f"{proc.pid}\n")
        state = {"port": port, "endpoint": endpoint, "persist": self.persist,
                 "verify_signatures": self.verify_signatures, "pid": proc.pid}
        tmp = self.dir / (STATE_FILE + ".tmp")
        tmp.write_text(json.dumps(state, indent=2) + "\n")
        os.replace(tmp, self.dir / STATE_FILE)
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                (self.dir / PID_FILE).unlink(missing_ok=True)
                raise MotoError(f"moto server exited with {proc.returncode} while starting on "
                                f"port {port}; {self.log_path}:\n{_log_tail(self.log_path)}")
            if _answers(endpoint):
                break
            if time.monotonic() > deadline:
                self.stop(snapshot=False)
                raise MotoError(f"moto server did not answer on {endpoint} within {timeout:.0f} s;"
                                f" {self.log_path}:\n{_log_tail(self.log_path)}")
            time.sleep(0.1)
        if self.verify_signatures:
            try:
                creds = _create_iam_credentials(endpoint)
            except (OSError, ValueError, urllib.error.URLError) as e:
                self.stop(snapshot=False)
                raise MotoError(f"creating IAM credentials on {endpoint} failed: {e}")
            tmp = self.dir / (CREDENTIALS_FILE + ".tmp")
            tmp.write_text(json.dumps(creds, indent=2) + "\n")
            os.replace(tmp, self.dir / CREDENTIALS_FILE)
        if self.persist:
            try:
                restore_snapshot(endpoint, self.dir / SNAPSHOT_DIR)
            except (OSError, ValueError, urllib.error.URLError) as e:
                self.stop(snapshot=False)
                raise MotoError(f"restoring {self.dir / SNAPSHOT_DIR} into {endpoint} failed: {e}")
        return endpoint

    def stop(self, timeout: float = 15.0, snapshot: Optional[bool] = None) -> None:
        """With persistence (the state's, unless `snapshot` says otherwise) first saves every
        bucket and object to DIR/moto-data; then SIGTERM to the recorded pid (SIGKILL after
        `timeout`) and waits until it is gone. Raises when the snapshot fails (the server is
        then left running)."""
        pid = self.running_pid()
        if pid is not None:
            st = self._state()
            if snapshot if snapshot is not None else st.get("persist", False):
                try:
                    save_snapshot(st["endpoint"], self.dir / SNAPSHOT_DIR)
                except (OSError, ValueError, urllib.error.URLError) as e:
                    raise MotoError(f"saving the snapshot of {st['endpoint']} failed ({e}); the "
                                    f"server still runs (pid {pid}); 'kill' stops it unsaved")
            for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 10.0)):
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    break
                deadline = time.monotonic() + wait
                while time.monotonic() < deadline and not _zombie_or_gone(pid):
                    try:  # our own child (library use): reap it
                        if os.waitpid(pid, os.WNOHANG)[0] == pid:
                            break
                    except ChildProcessError:
                        pass
                    time.sleep(0.05)
                if _zombie_or_gone(pid):
                    break
            else:
                raise MotoError(f"moto server pid {pid} did not exit")
        (self.dir / PID_FILE).unlink(missing_ok=True)

    def kill(self) -> None:
        """Stops the server without saving a snapshot (a crash: the objects stored since the
        last snapshot are lost)."""
        self.stop(snapshot=False)


# ----- snapshots (persistence across restarts) -----------------------------------------------
#
# moto 5.2.5 keeps everything in memory and has no state file. Its request recorder
# (MOTO_ENABLE_RECORDING) cannot bring multipart objects back: replayed UploadPart requests
# name the old upload id, and a new server draws new ones from os.urandom. So a persistent
# server is snapshotted over the S3 API itself: `stop` downloads every object of every bucket,
# `start` creates the buckets and uploads the objects again (as single PUTs: a restored
# multipart object has a plain MD5 ETag). moto does not check signatures unless told to, but it
# treats a request without an Authorization header as anonymous (403 on private objects), so
# these requests carry a well-formed SigV4 header with a dummy signature.

_S3_NS = "{http://s3.amazonaws.com/doc/2006-03-01/}"


def _http(method: str, url: str, body: Optional[bytes] = None, region: str = "us-east-1",
          timeout: float = 120.0) -> bytes:
    req = urllib.request.Request(url, data=body, method=method)
    now = time.gmtime()
    req.add_header("X-Amz-Date", time.strftime("%Y%m%dT%H%M%SZ", now))
    req.add_header("Authorization",
                   f"AWS4-HMAC-SHA256 Credential=moto-snapshot/{time.strftime('%Y%m%d', now)}/"
                   f"{region}/s3/aws4_request, SignedHeaders=host;x-amz-date, Signature={'0' * 64}")
    if body is not None:
        req.add_header("Content-Type", "application/octet-stream")
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.read()


def _find_text(el, name: str) -> Optional[str]:
    child = el.find(_S3_NS + name)
    if child is None:
        child = el.find(name)
    return None if child is None else (child.text or "")


def _findall(el, name: str) -> list:
    return el.findall(_S3_NS + name) + el.findall(name)


def _quote_key(key: str) -> str:
    return urllib.parse.quote(key, safe="/~")


def save_snapshot(endpoint: str, snap: Path) -> int:
    """Writes every bucket and object of the server to `snap` (replacing the previous snapshot
    only once the new one is complete). Returns the number of objects. Clients may go on writing
    while it runs: an object deleted between the listing and its read is left out, as it is gone
    from the server too."""
    work = snap.with_name(snap.name + ".new")
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    manifest = {"version": 1, "buckets": []}
    count = 0
    root = ET.fromstring(_http("GET", f"{endpoint}/"))
    for b in list(root.iter(_S3_NS + "Bucket")) + list(root.iter("Bucket")):
        name = _find_text(b, "Name")
        loc = ET.fromstring(_http("GET", f"{endpoint}/{name}?location"))
        region = (loc.text or "").strip() or None
        objects = []
        token = None
        while True:
            url = f"{endpoint}/{name}?list-type=2"
            if token:
                url += "&continuation-token=" + urllib.parse.quote(token, safe="")
            page = ET.fromstring(_http("GET", url, region=region or "us-east-1"))
            for c in _findall(page, "Contents"):
                key = _find_text(c, "Key")
                try:
                    data = _http("GET", f"{endpoint}/{name}/{_quote_key(key)}",
                                 region=region or "us-east-1")
                except urllib.error.HTTPError as e:
                    # The server is live while it is saved: a client may delete an object
                    # between the listing and its GET. It is gone on the server too.
                    if e.code == 404:
                        continue
                    raise
                fname = f"{count:08d}.bin"
                (work / fname).write_bytes(data)
                objects.append({"key": key, "file": fname, "size": len(data)})
                count += 1
            if _find_text(page, "IsTruncated") != "true":
                break
            token = _find_text(page, "NextContinuationToken")
        manifest["buckets"].append({"name": name, "region": region, "objects": objects})
    (work / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    old = snap.with_name(snap.name + ".old")
    shutil.rmtree(old, ignore_errors=True)
    if snap.exists():
        os.replace(snap, old)
    os.replace(work, snap)
    shutil.rmtree(old, ignore_errors=True)
    return count


def restore_snapshot(endpoint: str, snap: Path) -> int:
    """Creates the snapshot's buckets and uploads its objects. Returns the number of objects
    (0 when there is no snapshot)."""
    try:
        manifest = json.loads((snap / "manifest.json").read_text())
    except FileNotFoundError:
        return 0
    count = 0
    for b in manifest["buckets"]:
        body = None
        if b.get("region") and b["region"] != "us-east-1":
            body = ("<CreateBucketConfiguration><LocationConstraint>"
                    f"{b['region']}</LocationConstraint></CreateBucketConfiguration>").encode()
        region = b.get("region") or "us-east-1"
        _http("PUT", f"{endpoint}/{b['name']}", body if body is not None else b"", region)
        for o in b["objects"]:
            _http("PUT", f"{endpoint}/{b['name']}/{_quote_key(o['key'])}",
                  (snap / o["file"]).read_bytes(), region)
            count += 1
    return count


# ----- IAM set-up for --verify-signatures ---------------------------------------------------

_S3_ALL_POLICY = json.dumps({"Version": "2012-10-17", "Statement": [
    {"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]})
_IAM_SETUP = [
    {"Action": "CreateUser", "UserName": "sediment"},
    {"Action": "PutUserPolicy", "UserName": "sediment", "PolicyName": "s3-all",
     "PolicyDocument": _S3_ALL_POLICY},
    {"Action": "CreateAccessKey", "UserName": "sediment"},
]


def _create_iam_credentials(endpoint: str) -> dict:
    """Runs _IAM_SETUP (moto lets exactly these through unauthenticated) and returns the new
    access key."""
    answer = b""
    for params in _IAM_SETUP:
        body = urllib.parse.urlencode(dict(params, Version="2010-05-08")).encode()
        req = urllib.request.Request(f"{endpoint}/", data=body, method="POST")
        req.add_header("Content-Type", "application/x-www-form-urlencoded; charset=utf-8")
        now = time.gmtime()
        req.add_header("X-Amz-Date", time.strftime("%Y%m%dT%H%M%SZ", now))
        # moto routes by the credential scope's service; the signature is not checked yet.
        req.add_header("Authorization",
                       f"AWS4-HMAC-SHA256 Credential=setup/{time.strftime('%Y%m%d', now)}/"
                       f"us-east-1/iam/aws4_request, SignedHeaders=host;x-amz-date, "
                       f"Signature={'0' * 64}")
        with urllib.request.urlopen(req, timeout=30) as r:
            answer = r.read()
    root = ET.fromstring(answer)
    ns = "{https://iam.amazonaws.com/doc/2010-05-08/}"
    key = root.find(f".//{ns}AccessKeyId")
    secret = root.find(f".//{ns}SecretAccessKey")
    if key is None or secret is None or not key.text or not secret.text:
        raise ValueError("CreateAccessKey answered without a key")
    return {"access_key": key.text, "secret_key": secret.text}


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("install", help="create/update the moto virtualenv")
    p = sub.add_parser("start", help="start moto's server, print its endpoint")
    p.add_argument("--dir", required=True)
    p.add_argument("--port", type=int)
    p.add_argument("--ephemeral", action="store_true",
                   help="no snapshot: a restarted server starts empty")
    p.add_argument("--verify-signatures", action="store_true",
                   help="IAM auth on: only the key from 'credentials' works, signatures checked")
    for name in ("stop", "kill", "endpoint", "status", "credentials"):
        sub.add_parser(name).add_argument("--dir", required=True)
    args = ap.parse_args(argv)
    try:
        if args.cmd == "install":
            print(install())
        elif args.cmd == "start":
            print(MotoServer(args.dir, port=args.port, persist=not args.ephemeral,
                             verify_signatures=args.verify_signatures).start(), flush=True)
        elif args.cmd == "stop":
            MotoServer(args.dir).stop()
        elif args.cmd == "kill":
            MotoServer(args.dir).kill()
        elif args.cmd == "credentials":
            creds = MotoServer(args.dir).credentials()
            print(f"AWS_ACCESS_KEY_ID={creds['access_key']}")
            print(f"AWS_SECRET_ACCESS_KEY={creds['secret_key']}")
        elif args.cmd == "endpoint":
            print(MotoServer(args.dir).endpoint())
        elif args.cmd == "status":
            print(json.dumps(MotoServer(args.dir).status(), indent=2))
    except MotoError as e:
        print(f"moto.py {args.cmd}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
