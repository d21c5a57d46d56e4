"""ipLocation(), asn() and worldMap() over GeoIP databases the operator supplies (issue 17):
MaxMind DB files written here with the mmdb-writer package (a few IPv4 and IPv6 networks with
known locations and autonomous systems), given to `sediment server` with --geoip-city-db and
--geoip-asn-db (or the config file's keys of the same names). Without a database the functions
answer 400 naming the flag; a file that is not a MaxMind DB stops the start, naming the file."""

from __future__ import annotations

import json
from pathlib import Path

from mmdb_writer import MMDBWriter
from netaddr import IPSet

from conftest import SedimentServer, marker, wait_until

RAW = "/api/v1/ingest/raw"

# network -> the GeoIP2 City record of it
CITY = {
    "81.2.69.0/24": {"country": {"iso_code": "GB"}, "city": {"names": {"en": "London", "de": "London"}},
                     "location": {"latitude": 51.5142, "longitude": -0.0931}},
    "2001:db8:1::/48": {"country": {"iso_code": "DE"}, "city": {"names": {"en": "Berlin"}},
                        "location": {"latitude": 52.52, "longitude": 13.405}},
    # Country and location only (no city).
    "8.8.8.0/24": {"country": {"iso_code": "US"}, "location": {"latitude": 37.751, "longitude": -97.822}},
    # Only the registered country: the country comes from it; no location.
    "1.2.3.0/24": {"registered_country": {"iso_code": "AU"}},
}
# network -> the GeoLite2 ASN record of it (396982 needs 32 bits)
ASN = {
    "81.2.69.0/24": {"autonomous_system_number": 20712, "autonomous_system_organization": "Andrews & Arnold Ltd"},
    "2001:db8:1::/48": {"autonomous_system_number": 396982, "autonomous_system_organization": "GOOGLE-CLOUD"},
    "8.8.8.0/24": {"autonomous_system_number": 15169, "autonomous_system_organization": "GOOGLE"},
}


def write_mmdb(path: Path, database_type: str, records: dict[str, dict]) -> Path:
    w = MMDBWriter(ip_version=6, ipv4_compatible=True, database_type=database_type)
    for net, rec in records.items():
        w.insert_network(IPSet([net]), rec)
    w.to_db_file(str(path))
    return path


def geohash(lat: float, lon: float, precision: int) -> str:
    """The standard geohash, written independently of the server's."""
    alphabet = "0123456789bcdefghjkmnpqrstuvwxyz"
    lo = [-90.0, -180.0]
    hi = [90.0, 180.0]
    bits = []
    for i in range(precision * 5):
        axis = 1 if i % 2 == 0 else 0  # longitude first
        x = lon if axis else lat
        mid = (lo[axis] + hi[axis]) / 2
        if x > mid:
            bits.append(1)
            lo[axis] = mid
        else:
            bits.append(0)
            hi[axis] = mid
    return "".join(alphabet[int("".join(map(str, bits[i:i + 5])), 2)] for i in range(0, len(bits), 5))


def cell_center(h: str) -> tuple[float, float]:
    alphabet = "0123456789bcdefghjkmnpqrstuvwxyz"
    lo = [-90.0, -180.0]
    hi = [90.0, 180.0]
    i = 0
    for ch in h:
        v = alphabet.index(ch)
        for b in range(4, -1, -1):
            axis = 1 if i % 2 == 0 else 0
            mid = (lo[axis] + hi[axis]) / 2
            if (v >> b) & 1:
                lo[axis] = mid
            else:
                hi[axis] = mid
            i += 1
    return (lo[0] + hi[0]) / 2, (lo[1] + hi[1]) / 2


def ingest(s: SedimentServer, m: str, events: list[dict]) -> None:
    r = s.ingest(RAW, "\n".join(json.dumps({"m": m, **e}) for e in events))
    assert r.status_code == 200, r.text
    wait_until(lambda: s.count(m) == len(events), timeout=30, what=f"{len(events)} events searchable")


def geo_server(server_factory, tmp_path: Path) -> SedimentServer:
    city = write_mmdb(tmp_path / "city.mmdb", "GeoLite2-City", CITY)
    asn = write_mmdb(tmp_path / "asn.mmdb", "GeoLite2-ASN", ASN)
    return server_factory(extra_args=["--geoip-city-db", str(city), "--geoip-asn-db", str(asn)])


EVENTS = [
    {"ip": "81.2.69.160"},
    {"ip": "2001:db8:1::77"},
    {"ip": "8.8.8.8"},
    {"ip": "1.2.3.4"},
    {"ip": "10.0.0.1"},  # in no network of the databases
    {"ip": "not an address"},
    {"other": "81.2.69.1"},  # no ip field
]


def test_ip_location_and_asn(server_factory, tmp_path):
    s = geo_server(server_factory, tmp_path)
    m = marker("geo")
    ingest(s, m, EVENTS)
    rows = s.query(f"{m} | parseJson() | ipLocation() | asn() | sort(@timestamp, order=asc, limit=20) "
                   f"| select([ip, ip.country, ip.city, ip.lat, ip.lon, ip.asn, ip.org])", start=0)
    by_ip = {r.get("ip", ""): {k: v for k, v in r.items() if k != "ip"} for r in rows}
    assert by_ip == {
        "81.2.69.160": {"ip.country": "GB", "ip.city": "London", "ip.lat": "51.5142", "ip.lon": "-0.0931",
                        "ip.asn": "20712", "ip.org": "Andrews & Arnold Ltd"},
        "2001:db8:1::77": {"ip.country": "DE", "ip.city": "Berlin", "ip.lat": "52.52", "ip.lon": "13.405",
                           "ip.asn": "396982", "ip.org": "GOOGLE-CLOUD"},
        "8.8.8.8": {"ip.country": "US", "ip.lat": "37.751", "ip.lon": "-97.822", "ip.asn": "15169",
                    "ip.org": "GOOGLE"},
        "1.2.3.4": {"ip.country": "AU"},
        "10.0.0.1": {},
        "not an address": {},
        "": {},
    }, rows
    # field= and as= (the prefix defaults to the field's name).
    rows = s.query(f"{m} | parseJson() | ip = \"8.8.8.8\" | addr := ip "
                   f"| ipLocation(addr) | asn(field=addr, as=net) | select([addr.country, addr.city, net.asn, net.org])",
                   start=0)
    assert rows == [{"addr.country": "US", "net.asn": "15169", "net.org": "GOOGLE"}], rows
    # The location is usable downstream, e.g. grouped.
    rows = s.query(f"{m} | parseJson() | ipLocation() | groupBy(ip.country)", start=0)
    assert rows == [{"ip.country": c, "_count": "1"} for c in ("AU", "DE", "GB", "US")], rows


def test_world_map_buckets_by_geohash(server_factory, tmp_path):
    s = geo_server(server_factory, tmp_path)
    m = marker("wm")
    events = [
        {"ip": "81.2.69.160", "lat": 51.5142, "lon": -0.0931, "ms": 10},
        {"ip": "81.2.69.161", "lat": 51.51, "lon": -0.09, "ms": 30},
        {"ip": "2001:db8:1::77", "lat": 52.52, "lon": 13.405, "ms": 5},
        {"ip": "8.8.8.8", "lat": 37.751, "lon": -97.822, "ms": 7},
        {"ip": "1.2.3.4"},  # no location: left out
        {"ip": "10.0.0.1", "lat": 95, "lon": 0},  # unknown address, latitude out of range
    ]
    ingest(s, m, events)

    def expected(points: list[tuple[float, float, float]], precision: int, metric: str) -> list[dict]:
        cells: dict[str, list[float]] = {}
        for lat, lon, v in points:
            cells.setdefault(geohash(lat, lon, precision), []).append(v)
        out = []
        for h in sorted(cells):
            clat, clon = cell_center(h)
            vals = cells[h]
            mag = str(len(vals)) if metric == "_count" else repr(sum(vals) / len(vals)).removesuffix(".0")
            out.append({"_geohash": h, metric: mag, "lat": clat, "lon": clon})
        return out

    def answer(q: str) -> list[dict]:
        rows = s.query(q, start=0)
        return [{**r, "lat": float(r["lat"]), "lon": float(r["lon"])} for r in rows]

    by_ip = [(51.5142, -0.0931, 10), (51.5142, -0.0931, 30), (52.52, 13.405, 5), (37.751, -97.822, 7)]
    got = answer(f"{m} | parseJson() | worldMap(ip=ip)")
    assert got == expected(by_ip, 4, "_count"), got
    assert len(got) == 3  # the two London addresses share a cell
    got = answer(f"{m} | parseJson() | worldMap(ip=ip, precision=2, magnitude=avg(ms))")
    assert got == expected(by_ip, 2, "_avg"), got
    by_coords = [(51.5142, -0.0931, 10), (51.51, -0.09, 30), (52.52, 13.405, 5), (37.751, -97.822, 7)]
    got = answer(f"{m} | parseJson() | worldMap(lat=lat, lon=lon, precision=7)")
    assert got == expected(by_coords, 7, "_count"), got
    assert len(got) == 4  # 7 characters tell the two London points apart


def test_without_databases_the_functions_answer_400_naming_the_flag(server):
    s = server
    for q, flag in (("ipLocation()", "--geoip-city-db"), ("asn(field=src)", "--geoip-asn-db"),
                    ("worldMap(ip=src)", "--geoip-city-db")):
        r = s.query_raw(q)
        assert r.status_code == 400, (q, r.status_code, r.text)
        assert flag in r.text and "needs a GeoIP" in r.text, (q, r.text)
    # worldMap over coordinates needs no database.
    m = marker("nodb")
    ingest(s, m, [{"lat": 51.5142, "lon": -0.0931}])
    rows = s.query(f"{m} | parseJson() | worldMap(lat=lat, lon=lon)", start=0)
    assert [r["_geohash"] for r in rows] == [geohash(51.5142, -0.0931, 4)]
    # Parameters are checked.
    for q in ("worldMap()", "worldMap(lat=a)", "worldMap(ip=x, lat=a, lon=b)", "worldMap(lat=a, lon=b, precision=13)"):
        assert s.query_raw(q).status_code == 400, q


def test_a_bad_database_file_stops_the_start_naming_it(server_factory, tmp_path):
    bad = tmp_path / "not-a-db.mmdb"
    bad.write_text("this is not a MaxMind DB\n")
    s = server_factory(start=False, extra_args=["--geoip-city-db", str(bad)])
    rc, out, _ = s.start_expect_exit()
    assert rc != 0 and f"--geoip-city-db: cannot open the GeoIP city database '{bad}'" in out, out
    missing = tmp_path / "missing.mmdb"
    s = server_factory(name="missing", start=False, extra_args=["--geoip-asn-db", str(missing)])
    rc, out, _ = s.start_expect_exit()
    assert rc != 0 and f"--geoip-asn-db: cannot open the GeoIP ASN database '{missing}'" in out, out


def test_the_config_file_sets_the_databases(server_factory, tmp_path):
    city = write_mmdb(tmp_path / "city.mmdb", "GeoLite2-City", CITY)
    asn = write_mmdb(tmp_path / "asn.mmdb", "GeoLite2-ASN", ASN)
    cfg = tmp_path / "sediment.toml"
    cfg.write_text(f'geoip-city-db = "{city}"\ngeoip-asn-db = "{asn}"\n')
    s = server_factory(extra_args=["--config", str(cfg)])
    m = marker("cfg")
    ingest(s, m, [{"ip": "81.2.69.160"}])
    rows = s.query(f"{m} | parseJson() | ipLocation() | asn() | select([ip.city, ip.asn])", start=0)
    assert rows == [{"ip.city": "London", "ip.asn": "20712"}], rows
