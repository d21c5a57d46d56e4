"""The `sediment` CLI: first start without tokens (sandbox bootstrap), `ingest`, `query`, `status`."""

from __future__ import annotations

import json
import re
import subprocess

from conftest import SedimentServer, clean_env, marker, sediment_bin, wait_until


def cli(*args: str, timeout: float = 30, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sediment_bin(), *args], capture_output=True, text=True, timeout=timeout, env=clean_env(),
                          input=stdin)


def read_credentials(s: SedimentServer) -> dict[str, str]:
    creds = {}
    for line in (s.data_dir / "credentials.txt").read_text().splitlines():
        if "=" in line:
            k, v = line.split("=", 1)
            creds[k.strip()] = v.strip()
    return creds


def test_first_start_bootstraps_sandbox_and_cli_roundtrip(server_factory, tmp_path):
    s = server_factory(name="sandbox", tokens=False)
    out = s.log_text()
    assert (s.data_dir / "credentials.txt").exists(), out
    creds = read_credentials(s)
    assert creds.get("repository") == "sandbox", creds
    ingest_token, api_token = creds.get("ingest_token"), creds.get("api_token")
    assert ingest_token and api_token and ingest_token != api_token, creds
    assert ingest_token in out and api_token in out, f"tokens not printed:\n{out}"
    assert re.search(r"curl .*/api/v1/ingest/", out), f"no curl example printed:\n{out}"
    assert "sediment ready" in out, out

    s.ingest_token, s.api_token, s.repo = ingest_token, api_token, "sandbox"

    m = marker()
    lines = [f"{m} cli line {i} end" for i in range(25)]
    f = tmp_path / "input.log"
    f.write_text("\n".join(lines[:20]) + "\n\n")
    r = cli("ingest", "--url", s.url, "--token", ingest_token, "--batch-lines", "7", str(f))
    assert r.returncode == 0, r.stderr
    assert "acknowledged" in r.stderr, r.stderr
    r = cli("ingest", "--url", s.url, "--token", ingest_token, stdin="\n".join(lines[20:]) + "\n")
    assert r.returncode == 0, r.stderr

    wait_until(lambda: s.count(m) == 25, timeout=15, what="CLI-ingested lines visible")

    r = cli("query", "--url", s.url, "--token", api_token, "--repo", "sandbox", "--format", "table", m)
    assert r.returncode == 0, r.stderr
    table = [ln for ln in r.stdout.splitlines() if m in ln]
    assert len(table) == 25, r.stdout
    for line in lines:
        assert sum(ln.endswith(line) for ln in table) == 1, f"{line!r} not exactly once in:\n{r.stdout}"
    assert re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d", table[0]), f"table rows start with the time: {table[0]!r}"

    r = cli("query", "--url", s.url, "--token", api_token, "--repo", "sandbox", "--format", "ndjson", m)
    assert r.returncode == 0, r.stderr
    rows = [json.loads(ln) for ln in r.stdout.splitlines() if ln.strip()]
    assert sorted(row["@rawstring"] for row in rows) == sorted(lines)
    assert all(row["#repo"] == "sandbox" for row in rows)

    r = cli("query", "--url", s.url, "--token", api_token, "--repo", "sandbox", "--format", "json",
            f"{m} | count()")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == [{"_count": "25"}]

    r = cli("query", "--url", s.url, "--token", api_token, "--repo", "sandbox", f"{m} | groupBy(#repo)")
    assert r.returncode == 0, r.stderr
    assert re.search(r"^sandbox\s+25\s*$", r.stdout, re.M), f"aggregate table:\n{r.stdout}"

    r = cli("query", "--url", s.url, "--token", api_token, "--repo", "sandbox", f"{m} | count(")
    assert r.returncode != 0
    assert "position" in r.stderr, r.stderr

    r = cli("query", "--url", s.url, "--token", "wrong", "--repo", "sandbox", m)
    assert r.returncode != 0 and "401" in r.stderr, r.stderr

    r = cli("ingest", "--url", s.url, "--token", "wrong", stdin="x\n")
    assert r.returncode != 0 and "401" in r.stderr, r.stderr

    r = cli("status", "--url", s.url, "--token", "wrong")
    assert r.returncode != 0 and "401" in r.stderr, r.stderr
    r = cli("status", "--url", s.url, "--token", api_token, "--node")
    assert r.returncode == 0, r.stderr
    status = json.loads(r.stdout)
    assert isinstance(status.get("partitions"), list) and status["partitions"], status
    assert "sandbox" in status.get("repositories", []), status
    assert sum(p["logEnd"] for p in status["partitions"]) >= 4  # four acknowledged ingest requests
    assert status["node"] > 0 and status["address"], status

    # The cluster view of a single node: itself alive, owning every partition, no warnings.
    r = cli("status", "--url", s.url, "--token", api_token, "--cluster", "--json")
    assert r.returncode == 0, r.stderr
    view = json.loads(r.stdout)
    assert [n["id"] for n in view["nodes"]] == [status["node"]], view
    assert view["nodes"][0]["alive"] and view["nodes"][0]["self"], view
    assert len(view["partitions"]) == status["ingestPartitions"], view
    assert all(p["owner"] == status["node"] and p["ownerAlive"] for p in view["partitions"]), view
    assert view["replication"]["factor"] == 1, view["replication"]  # one node: one copy
    assert all(p["safeOffset"] <= p["replayPoint"] for p in view["partitions"]), view
    wait_until(lambda: all(p["lag"] == 0 for p in s.get_json("/api/v1/cluster")["partitions"]), timeout=15)
    for args in ([], ["--cluster"]):  # the cluster tables are the default
        r = cli("status", "--url", s.url, "--token", api_token, *args)
        assert r.returncode == 0, r.stderr
        assert "1 of 1 nodes alive" in r.stdout and "PARTITION" in r.stdout, r.stdout
        assert "replication factor 1" in r.stdout and "SAFE" in r.stdout, r.stdout
        assert "EPOCH" in r.stdout and "LAG" in r.stdout and "no warnings" in r.stdout, r.stdout
    r = cli("status", "--url", s.url, "--token", api_token, "--json")
    assert r.returncode == 0, r.stderr
    assert [n["id"] for n in json.loads(r.stdout)["nodes"]] == [status["node"]], r.stdout

    # A restart on the same data dir keeps the tokens and does not create new ones.
    s.restart()
    assert read_credentials(s) == creds
    assert ingest_token not in s.log_text(), "tokens printed again on restart"
    wait_until(lambda: s.count(m) == 25, timeout=15)


def test_status_against_no_server_fails_cleanly(tmp_path):
    from conftest import free_port

    r = cli("status", "--url", f"http://127.0.0.1:{free_port()}", "--token", "t", timeout=30)
    assert r.returncode != 0
    assert r.stderr.strip(), "an error message is printed"


def test_server_refuses_bad_flags(tmp_path):
    r = cli("server", "--data-dir", str(tmp_path / "d"), "--listen", "nonsense", timeout=30)
    assert r.returncode != 0
    assert "listen" in (r.stdout + r.stderr).lower()
    r = cli("server", "--data-dir", str(tmp_path / "d2"), "--listen", "127.0.0.1:0", "--ingest-token", "notoken",
            timeout=30)
    assert r.returncode != 0
    assert "REPO:TOKEN" in (r.stdout + r.stderr)


def test_ingest_progress_on_a_terminal_and_a_summary_otherwise(server, tmp_path):
    """`sediment ingest FILE`: a redrawn progress line (bytes of the total, events/s, ETA) when
    stderr is a terminal; the summary line alone when it is not."""
    import os
    import pty

    m = marker()
    path = tmp_path / "lines.log"
    path.write_text("".join(f"{m} line {i} {'x' * 200}\n" for i in range(20000)))
    args = [sediment_bin(), "ingest", "--url", server.url, "--token", server.ingest_token, "--batch-lines", "200",
            str(path)]
    r = subprocess.run(args, capture_output=True, text=True, timeout=120, env=clean_env())
    assert r.returncode == 0, r.stderr
    assert r.stderr.count("\n") == 1 and "\r" not in r.stderr, r.stderr
    assert re.fullmatch(r"ingested 20000 events, all acknowledged \([0-9.]+ MiB in [0-9.]+ s, [0-9]+ events/s\)\n",
                        r.stderr), r.stderr

    master, slave = pty.openpty()
    try:
        p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=slave, env=clean_env())
        os.close(slave)
        out = b""
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            out += chunk
        assert p.wait(timeout=120) == 0
    finally:
        os.close(master)
    text = out.decode(errors="replace")
    assert "ingested 20000 events, all acknowledged" in text, text
    assert re.search(r"\ringested [0-9.]+ [KM]iB of [0-9.]+ MiB \([0-9]+%\), [0-9]+ events, [0-9]+ events/s", text), text
    assert ", ETA " in text, text
    wait_until(lambda: server.count(m) == 40000, timeout=30)
