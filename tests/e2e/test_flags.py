"""The server's flags come from one registry (src/cli/flags.cc): the README's tables are the text
`sediment --print-flag-table` prints, `sediment server --help` lists every flag under its section,
and bad values exit non-zero naming the flag. No server is started."""

from __future__ import annotations

import difflib
import re
import subprocess
import time
from pathlib import Path

from conftest import clean_env, sediment_bin

README = Path(__file__).resolve().parents[2] / "README.md"
BEGIN, END = "<!-- flags:begin -->\n", "<!-- flags:end -->"


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sediment_bin(), *args], capture_output=True, text=True, timeout=30,
                          env={**clean_env(), **(env or {})})


def generated_table() -> str:
    r = run("--print-flag-table")
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_readme_flag_table_is_the_registry():
    text = README.read_text()
    assert text.count(BEGIN) == 1 and text.count(END) == 1, f"README.md needs one {BEGIN.strip()} ... {END}"
    readme = text[text.index(BEGIN) + len(BEGIN):text.index(END)]
    generated = generated_table()
    diff = "".join(difflib.unified_diff(readme.splitlines(True), generated.splitlines(True), "README.md",
                                        "sediment --print-flag-table"))
    assert readme == generated, (
        "README.md's flag table differs from the flag registry (src/cli/flags.cc); paste the output of "
        f"`sediment --print-flag-table` between the markers:\n{diff}")


def test_help_lists_every_flag_under_its_section():
    table = generated_table()
    sections = re.findall(r"^\*\*(.+)\*\*$", table, re.M)
    flags = re.findall(r"^\| `(--[a-z-]+)", table, re.M)
    assert len(sections) >= 7 and len(flags) >= 50, table
    r = run("server", "--help")
    assert r.returncode == 0, r.stderr
    positions = [r.stdout.find(f"\n{s}:\n") for s in sections]
    assert all(p >= 0 for p in positions) and positions == sorted(positions), (sections, r.stdout)
    for f in flags:
        assert re.search(rf"^  {re.escape(f)}[ ,]", r.stdout, re.M), f"{f} missing from --help:\n{r.stdout}"


def test_bad_values_exit_nonzero_naming_the_flag(tmp_path):
    data = ["--data-dir", str(tmp_path / "data"), "--listen", "127.0.0.1:0"]
    cases = [
        (["--ingest-partitions", "0"], {}, "--ingest-partitions"),
        (["--partitions", "10001"], {}, "--ingest-partitions"),
        (["--query-timeout-ms", "abc"], {}, "--query-timeout-ms"),
        (["--cache-max-percent", "100.5"], {}, "--cache-max-percent"),
        ([], {"SEDIMENT_HEARTBEAT_TIMEOUT_MS": "199"}, "--heartbeat-timeout-ms"),
        ([], {"SEDIMENT_QUERY_THREADS": "many"}, "--query-threads"),
        (["--no-such-flag", "1"], {}, "--no-such-flag"),
    ]
    for args, env, named in cases:
        r = run("server", *data, *args, env=env)
        assert r.returncode != 0, (args, env, r.stdout, r.stderr)
        assert named in r.stderr, (args, env, r.stderr)
        assert not (tmp_path / "data").exists(), "the server started"


def _digest_worker_nice(pid: int) -> dict[str, int]:
    """{thread name: nice value} of the server's digest partition workers (/proc, field 19)."""
    out = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            name = (task / "comm").read_text().strip()
            stat = (task / "stat").read_text()
        except OSError:
            continue  # the thread ended
        if re.fullmatch(r"digest-\d+", name):
            out[name] = int(stat[stat.rindex(")") + 2:].split()[16])
    return out


def _settled_workers(pid: int, partitions: int) -> dict[str, int]:
    deadline = time.monotonic() + 10
    while True:
        workers = _digest_worker_nice(pid)
        if len(workers) == partitions or time.monotonic() > deadline:
            return workers
        time.sleep(0.05)


def test_digest_workers_run_at_the_digest_nice_value(server_factory):
    default = server_factory(extra_args=["--ingest-partitions", "3"])
    assert _settled_workers(default.pid, 3) == {"digest-0": 5, "digest-1": 5, "digest-2": 5}
    tuned = server_factory(extra_args=["--ingest-partitions", "2", "--digest-nice", "0"])
    assert _settled_workers(tuned.pid, 2) == {"digest-0": 0, "digest-1": 0}
