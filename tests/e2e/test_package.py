"""The Debian package (issue 20, item 4; packaging/README.md): cpack builds the .deb from the
existing build dir (no rebuild), its control data, maintainer scripts, conffiles and systemd unit
are checked, it is extracted into a fresh directory root (`dpkg-deb -x`), and the unit's ExecStart
command line (paths moved into that root; run as the current user, on a free loopback port set in
the installed config file) serves ingest and a query; stopped by pid with SIGTERM (exit 0). Neither
systemd nor Docker is needed."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import SedimentServer, marker, sediment_bin, wait_until

INGEST = "pkg-ingest-token-0123456789"
API = "pkg-api-token-0123456789"
# postinst: `install -d ... -m MODE /var/lib/sediment`.
DATA_DIR_MODE = re.compile(r"install -d -o sediment -g sediment -m (\d+) /var/lib/sediment")


def build_dir() -> Path:
    # SEDIMENT_BIN is <build>/src/cli/sediment.
    return Path(sediment_bin()).resolve().parents[2]


def dpkg_field(deb: Path, field: str) -> str:
    return subprocess.run(["dpkg-deb", "-f", str(deb), field], capture_output=True, text=True,
                          check=True).stdout.strip()


def control_file(deb: Path, name: str) -> str:
    return subprocess.run(["dpkg-deb", "--info", str(deb), name], capture_output=True, text=True,
                          check=True).stdout


def unit_settings(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith(("#", ";", "[")) and "=" in line:
            k, v = line.split("=", 1)
            out[k.strip()] = v.strip()
    return out


@pytest.fixture(scope="module")
def deb(tmp_path_factory) -> Path:
    for tool in ("cpack", "dpkg-deb", "dpkg-shlibdeps"):
        if shutil.which(tool) is None:
            pytest.fail(f"{tool} is missing (scripts/install-deps.sh installs it)")
    build = build_dir()
    if not (build / "CPackConfig.cmake").exists():
        pytest.fail(f"{build} has no CPackConfig.cmake: reconfigure it (cmake -S . -B {build})")
    out = tmp_path_factory.mktemp("pkg")
    r = subprocess.run(["cpack", "-G", "DEB", "-B", str(out)], cwd=build, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    debs = list(out.glob("sediment_*.deb"))
    assert len(debs) == 1, (list(out.iterdir()), r.stdout)
    return debs[0]


def test_package_metadata_scripts_conffiles_and_unit(deb, tmp_path):
    assert dpkg_field(deb, "Package") == "sediment"
    depends = dpkg_field(deb, "Depends")
    # From the binary's shared libraries (dpkg-shlibdeps), not a hand-kept list.
    # librdkafka is linked in statically (scripts/librdkafka.sh), so the libraries it needs are
    # dependencies (libsasl2-2: only through it) and Debian's librdkafka1 is not.
    for lib in ("libc6", "libsasl2-2", "libstdc++6", "libzstd1"):
        assert re.search(rf"\b{re.escape(lib)}\b", depends), depends
    assert "librdkafka" not in depends, depends
    assert "passwd" in depends, depends
    assert control_file(deb, "conffiles").split() == ["/etc/sediment/sediment.toml"]
    postinst = control_file(deb, "postinst")
    assert "useradd --system" in postinst and "/var/lib/sediment" in postinst, postinst
    assert "install -d -o sediment -g sediment" in postinst, postinst
    # The server tightens a data dir others can read to 0700 (with a warning at every first
    # start); the package creates it that way.
    assert DATA_DIR_MODE.search(postinst).group(1) == "0700", postinst

    contents = subprocess.run(["dpkg-deb", "-c", str(deb)], capture_output=True, text=True, check=True).stdout
    for path in ("./usr/bin/sediment", "./usr/lib/systemd/system/sediment.service", "./etc/sediment/sediment.toml",
                 "./usr/share/doc/sediment/librdkafka-LICENSES.txt"):
        assert path in contents, contents
    assert "include/" not in contents and "/lib/lib" not in contents, contents  # nothing of third parties

    root = tmp_path / "root"
    subprocess.run(["dpkg-deb", "-x", str(deb), str(root)], check=True)
    unit = unit_settings((root / "usr/lib/systemd/system/sediment.service").read_text())
    assert unit["User"] == "sediment" and unit["Group"] == "sediment", unit
    assert unit["ExecStart"] == "/usr/bin/sediment server --config /etc/sediment/sediment.toml", unit
    assert unit["KillSignal"] == "SIGTERM", unit
    assert int(unit["TimeoutStopSec"]) > 30, unit  # above the default --shutdown-timeout-ms
    assert unit["StateDirectoryMode"] == "0700", unit
    config = (root / "etc/sediment/sediment.toml").read_text()
    assert 'data-dir = "/var/lib/sediment"' in config, config


def test_installed_unit_command_serves_ingest_and_queries(deb, tmp_path):
    root = tmp_path / "root"
    subprocess.run(["dpkg-deb", "-x", str(deb), str(root)], check=True)
    unit = unit_settings((root / "usr/lib/systemd/system/sediment.service").read_text())
    argv = shlex.split(unit["ExecStart"])
    # Absolute paths of the command line move into the root (/usr/bin/sediment, the config).
    argv = [str(root) + a if a.startswith("/") else a for a in argv]
    assert Path(argv[0]).is_file(), argv

    s = SedimentServer(tmp_path / "unused", tmp_path / "logs")
    s.bin = argv[0]
    s.args = argv[1:]
    s.ingest_token, s.api_token = INGEST, API
    # The installed config, with the data dir moved into the root (postinst would create it), the
    # port set free and tokens added: what an operator edits.
    cfg = root / "etc/sediment/sediment.toml"
    text = cfg.read_text()
    text = text.replace('"/var/lib/sediment"', f'"{root}/var/lib/sediment"')
    text = re.sub(r'^listen = ".*"$', f'listen = "127.0.0.1:{s.port}"', text, flags=re.M)
    text += f'\ningest-token = ["e2e:{INGEST}"]\napi-token = ["{API}"]\nflush-age-ms = 300\n'
    cfg.write_text(text)
    # As postinst creates it (owner aside).
    mode = int(DATA_DIR_MODE.search(control_file(deb, "postinst")).group(1), 8)
    (root / "var/lib/sediment").mkdir(parents=True)
    (root / "var/lib/sediment").chmod(mode)
    s.data_dir = root / "var/lib/sediment"
    try:
        s.start()
        m = marker("pkg")
        r = s.ingest("/api/v1/ingest/raw", f"{m} from the package\n{m} second line\n")
        assert r.status_code == 200, r.text
        wait_until(lambda: s.count(m) == 2, timeout=20, what="the ingested events")
        assert any((root / "var/lib/sediment").iterdir())
        assert "readable by other users" not in s.log_text(), s.describe()
    finally:
        rc = s.stop()
        s.cleanup()
    assert rc == 0, s.describe()
