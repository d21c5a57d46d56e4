"""`sediment server --config FILE` (issue 20, item 3): a server started with only --config serves
ingest and queries; `--print-config` masks secrets and its output loads back into the same
effective configuration; flags and variables win over the file; bad files are refused with the key
and the line named. Unit tests of the mapping: src/cli/config_file_flags_test.cc."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from conftest import SedimentServer, clean_env, marker, sediment_bin, wait_until

INGEST = "cfg-ingest-token-0123456789"
API = "cfg-api-token-0123456789"
SECRET = "cfg-cluster-secret-0123456789abcdef"


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sediment_bin(), *args], capture_output=True, text=True, timeout=30,
                          env={**clean_env(), **(env or {})})


def config_server(tmp_path: Path, config: Path, extra_env: dict[str, str] | None = None) -> SedimentServer:
    """A harness server whose command line is `server --config FILE` only (its port and data dir
    come from the file, which the caller wrote with s.port)."""
    s = SedimentServer(tmp_path / "data", tmp_path / "logs", extra_env=extra_env)
    s.args = ["server", "--config", str(config)]
    s.ingest_token, s.api_token = INGEST, API
    return s


def write_config(path: Path, s: SedimentServer, tmp_path: Path) -> None:
    path.write_text(f"""# test config
data_dir = "{tmp_path / 'data'}"
listen = "127.0.0.1:{s.port}"
ingest-token = ["e2e:{INGEST}"]
api-token = ["{API}"]
cluster-secret = "{SECRET}"
flush-age-ms = 300
max_json_depth = 32
""")


def test_server_from_config_file_only_and_print_config_round_trip(tmp_path):
    cfg = tmp_path / "sediment.toml"
    s = config_server(tmp_path, cfg)
    write_config(cfg, s, tmp_path)
    try:
        s.start()
        m = marker("cfg")
        r = s.ingest("/api/v1/ingest/raw", f"{m} one\n{m} two\n")
        assert r.status_code == 200, r.text
        wait_until(lambda: s.count(m) == 2, timeout=20, what="events queryable")
    finally:
        assert s.stop() == 0, s.describe()

    printed = run("server", "--config", str(cfg), "--print-config")
    assert printed.returncode == 0, printed.stderr
    text = printed.stdout
    for secret in (INGEST, API, SECRET):
        assert secret not in text, f"{secret} not masked:\n{text}"
    assert "# api-token = <masked: 1 value>" in text, text
    assert "# cluster-secret = <masked: 1 value>" in text, text
    assert f'listen = "127.0.0.1:{s.port}"' in text, text
    assert "max-json-depth = 32" in text, text
    assert "flush-age-ms = 300" in text, text
    assert "# max-body-bytes = 33554432  (default)" in text, text

    # Loaded back (the secrets given as variables, as the masked lines say), the same config.
    again = tmp_path / "printed.toml"
    again.write_text(text)
    secrets_env = {"SEDIMENT_INGEST_TOKEN": f"e2e:{INGEST}", "SEDIMENT_API_TOKEN": API,
                   "SEDIMENT_CLUSTER_SECRET": SECRET}
    reprinted = run("server", "--config", str(again), "--print-config", env=secrets_env)
    assert reprinted.returncode == 0, reprinted.stderr
    assert reprinted.stdout == text

    # And the node runs from it: the same data, the same tokens.
    s2 = config_server(tmp_path, again, extra_env=secrets_env)
    s2.port = s.port
    try:
        s2.start()
        wait_until(lambda: s2.count(m) == 2, timeout=20, what="events after the restart")
    finally:
        assert s2.stop() == 0, s2.describe()


def test_flag_and_variable_win_over_the_file(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text('listen = "127.0.0.1:1111"\nquery-threads = 3\nmax-connections = 77\n')
    out = run("server", "--config", str(cfg), "--print-config", "--listen", "127.0.0.1:2222",
              env={"SEDIMENT_QUERY_THREADS": "5"})
    assert out.returncode == 0, out.stderr
    assert 'listen = "127.0.0.1:2222"' in out.stdout
    assert "query-threads = 5" in out.stdout
    assert "max-connections = 77" in out.stdout
    # The path may come from SEDIMENT_CONFIG too.
    out = run("server", "--print-config", env={"SEDIMENT_CONFIG": str(cfg)})
    assert out.returncode == 0 and 'listen = "127.0.0.1:1111"' in out.stdout, out


@pytest.mark.parametrize("text,expect", [
    ('listen = "127.0.0.1:0"\nmax-jsn-depth = 3\n', ":2:1: unknown key 'max-jsn-depth'"),
    ('max-json-depth = "deep"\n', ":1:1: key 'max-json-depth' must be an integer, not a string"),
    ('max-json-depth = 0\n', ":1:1: key 'max-json-depth': --max-json-depth: Value 0 not in range"),
    ('[kafka]\nbrokers = "x"\n', "key 'kafka' is a table"),
    ('listen = \n', ":1:"),
])
def test_bad_files_are_refused_naming_key_and_line(tmp_path, text, expect):
    cfg = tmp_path / "bad.toml"
    cfg.write_text(text)
    for extra in ([], ["--print-config"]):
        out = run("server", "--config", str(cfg), *extra)
        assert out.returncode == 2, out
        assert expect in out.stderr, out.stderr
        assert out.stderr.startswith("error: " + str(cfg) + ":"), out.stderr


def test_missing_file_is_refused(tmp_path):
    out = run("server", "--config", str(tmp_path / "none.toml"))
    assert out.returncode == 2
    assert "cannot read the config file" in out.stderr and "none.toml" in out.stderr
