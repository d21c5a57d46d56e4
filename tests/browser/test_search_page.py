"""The search page in a real browser against a real server with generated data: sign-in, a query
with its histogram and count, a field-value filter, a groupBy table and chart, a deep link, live
mode and the export buttons."""

from __future__ import annotations

import datetime as dt
import json
import time
import urllib.parse
import uuid
from collections import Counter

import pytest
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By

from harness import INGEST_TOKEN, SedimentServer, wait_until
from ui import Ui

REPO = "weblogs"
HOSTS = {"web-1": 60, "web-2": 40, "db-1": 20}  # events per host
STATUSES = ["200", "404", "500"]


def _iso(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc).isoformat(timespec="milliseconds")


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """A server holding 120 events of the last 50 minutes in repository `weblogs`; yields
    (server, events as dicts)."""
    root = tmp_path_factory.mktemp("search")
    s = SedimentServer(root / "data", root / "logs", ingest_tokens=[f"{REPO}:{INGEST_TOKEN}"], flush_age_ms=500)
    s.repo = REPO
    s.start()
    try:
        now = int(time.time() * 1000)
        events = []
        i = 0
        for host, n in HOSTS.items():
            for _ in range(n):
                ts = now - 60_000 - (i * 23_000) % (48 * 60_000)
                status = STATUSES[i % 3]
                events.append({"timestamp": _iso(ts), "ts": ts, "host": host, "status": status,
                               "rawstring": f"{_iso(ts)} {host} GET /item/{i} status={status} seq={i}"})
                i += 1
        body = [{"tags": {"source": "browser-test"},
                 "events": [{"timestamp": e["timestamp"], "attributes": {"host": e["host"], "status": e["status"]},
                             "rawstring": e["rawstring"]} for e in events]}]
        r = s.ingest("/api/v1/ingest/humio-structured", body)
        assert r.status_code == 200, r.text
        wait_until(lambda: s.count("", start="2h") == len(events), timeout=20, what="every event searchable")
        yield s, events
    finally:
        s.stop()


@pytest.fixture(scope="module")
def ui(browser, data):
    s, _ = data
    u = Ui(browser, s.url)
    u.sign_in(s.api_token)
    return u


def test_sign_in_refuses_a_bad_token_and_accepts_the_api_token(browser, data):
    s, _ = data
    u = Ui(browser, s.url)
    u.open("/")
    browser.execute_script("sessionStorage.clear()")
    u.open("/search")
    u.find("signin-token").send_keys("not-a-token")
    u.find("signin-submit").click()
    u.wait(lambda: "not valid" in u.text("signin-error"), what="the refusal")
    assert browser.execute_script("return sessionStorage.getItem('sediment.token')") is None
    box = u.find("signin-token")
    box.clear()
    box.send_keys(s.api_token)
    u.find("signin-submit").click()
    u.find("page-search")
    assert browser.execute_script("return sessionStorage.getItem('sediment.token')") == s.api_token
    # The token lives in the tab's session only: nothing in localStorage or cookies.
    assert browser.execute_script("return localStorage.length") == 0
    assert browser.get_cookies() == []


def test_query_shows_histogram_count_and_newest_first(ui, data, screenshot):
    s, events = data
    ui.open("/search")
    ui.set_repo(REPO)
    ui.set_range("1h")
    ui.run_query("")
    assert ui.event_count() == len(events)
    hist = ui.find("histogram")
    assert hist.find_elements(By.CSS_SELECTOR, "canvas"), "the histogram has no chart"
    assert int(hist.get_attribute("data-total")) == len(events)
    assert int(hist.get_attribute("data-buckets")) >= 50
    rows = ui.all("result-row")
    assert len(rows) == min(200, len(events))
    newest = max(events, key=lambda e: e["ts"])
    assert newest["rawstring"] in rows[0].text
    # A row expands into its fields.
    rows[0].click()
    detail = ui.find("event-detail")
    assert "host" in detail.text and newest["host"] in detail.text
    # The URL now holds the search (a deep link).
    q = urllib.parse.parse_qs(urllib.parse.urlparse(ui.d.current_url).query)
    assert q["repo"] == [REPO] and q["start"] == ["1h"]
    screenshot("search")


def test_field_value_click_adds_a_filter(ui, data):
    s, events = data
    ui.open("/search")
    ui.set_repo(REPO)
    ui.set_range("1h")
    ui.run_query("")
    assert ui.event_count() == len(events)
    link = ui.find("field-host").find_element(By.CSS_SELECTOR, '[data-testid="field-value"][data-value="web-2"]')
    link.click()
    assert ui.event_count() == HOSTS["web-2"]
    assert ui.find("query-input").get_attribute("value") == 'host="web-2"'
    # A second filter narrows further.
    ui.find("field-status").find_element(By.CSS_SELECTOR, '[data-testid="field-value"][data-value="500"]').click()
    want = sum(1 for e in events if e["host"] == "web-2" and e["status"] == "500")
    assert ui.event_count() == want
    assert ui.find("query-input").get_attribute("value") == 'host="web-2"\n| status="500"'


def test_group_by_shows_a_table_with_the_counts_and_a_chart(ui, data, screenshot):
    s, events = data
    ui.open("/search")
    ui.set_repo(REPO)
    ui.set_range("1h")
    ui.run_query("groupBy(host)")
    assert ui.event_count() == len(HOSTS)
    got = {r["host"]: int(r["_count"]) for r in ui.aggregate_rows()}
    assert got == HOSTS
    assert ui.find("aggregate-chart").find_elements(By.CSS_SELECTOR, "canvas")
    assert "hidden" in ui.find("histogram").get_attribute("class")
    screenshot("search-groupby")
    # A timeChart is a table and a time chart too.
    ui.run_query("timeChart(span=10m)")
    assert ui.event_count() >= 5  # buckets of 10 minutes over the hour
    rows = ui.aggregate_rows()
    assert sum(int(r["_count"]) for r in rows) == len(events)
    assert ui.find("aggregate-chart").find_elements(By.CSS_SELECTOR, "canvas")


def test_deep_link_reproduces_a_search(ui, data):
    s, events = data
    # Bounds between event times (all are `now` plus whole seconds), so inclusive or exclusive
    # ends do not matter.
    start = min(e["ts"] for e in events) - 500
    end = sorted(e["ts"] for e in events)[len(events) // 2] + 500  # the older half
    want = sum(1 for e in events if start <= e["ts"] <= end and e["host"] == "db-1")
    assert want > 0
    link = "/search?" + urllib.parse.urlencode({"repo": REPO, "query": "host=db-1", "start": start, "end": end})
    ui.open(link)
    assert ui.event_count() == want
    assert ui.find("query-input").get_attribute("value") == "host=db-1"
    assert ui.find("time-range").get_attribute("value") == "abs"
    # Reloading the page the search left in the address bar gives the same answer.
    ui.open(urllib.parse.urlparse(ui.d.current_url)._replace(scheme="", netloc="").geturl())
    assert ui.event_count() == want


def test_live_mode_shows_a_new_event_within_5_s(ui, data):
    s, _ = data
    mk = f"livemk{uuid.uuid4().hex[:10]}"
    ui.open("/search")
    ui.set_repo(REPO)
    ui.set_range("5m")
    ui.find("live-toggle").click()
    ui.run_query(mk)
    ui.wait(lambda: ui.all("live-count") and ui.all("results-table"), what="the live query running")
    assert ui.find("live-count").text == "0"
    time.sleep(1.0)  # the live query is streaming before the event exists
    r = s.ingest("/api/v1/ingest/raw", f"{mk} arrived after the live query started\n".encode())
    assert r.status_code == 200, r.text
    t0 = time.monotonic()
    ui.wait(lambda: any(mk in row.text for row in ui.all("result-row")), timeout=5.0,
            what="the live event in the table within 5 s")
    assert time.monotonic() - t0 <= 5.0
    assert ui.find("live-count").text == "1"
    # Pause keeps counting but holds the table; resume shows what came.
    ui.find("pause-button").click()
    s.ingest("/api/v1/ingest/raw", f"{mk} second\n".encode())
    ui.wait(lambda: ui.find("live-count").text == "2", timeout=5.0, what="the second live event counted")
    assert len(ui.all("result-row")) == 1
    ui.find("pause-button").click()
    ui.wait(lambda: len(ui.all("result-row")) == 2, what="the held event shown")
    ui.find("cancel-button").click()
    ui.wait(lambda: ui.find("run-button").is_enabled(), what="the live query stopped")
    ui.find("live-toggle").click()


def test_export_offers_the_rows_as_ndjson_and_csv(ui, data):
    s, events = data
    ui.open("/search")
    ui.set_repo(REPO)
    ui.set_range("1h")
    ui.run_query("groupBy(host)")
    assert ui.event_count() == len(HOSTS)
    # Capture the files the buttons hand to the browser (a Blob behind an <a download>).
    ui.d.execute_script("""
      window.__exports = [];
      const orig = URL.createObjectURL;
      URL.createObjectURL = (blob) => { blob.text().then((t) => window.__exports.push(t)); return orig(blob); };
    """)
    ui.find("export-ndjson").click()
    ui.find("export-csv").click()
    texts = ui.wait(lambda: (lambda x: x if len(x) == 2 else None)(ui.d.execute_script("return window.__exports")),
                    what="two exports")
    texts.sort(key=lambda t: not t.startswith("{"))  # NDJSON first, whichever Blob was read first
    nd = [json.loads(line) for line in texts[0].splitlines()]
    assert Counter({r["host"]: int(r["_count"]) for r in nd}) == Counter(HOSTS)
    csv_lines = texts[1].strip().split("\r\n")
    assert set(csv_lines[0].split(",")) == {"host", "_count"} and len(csv_lines) == 1 + len(HOSTS)


def test_dragging_across_the_histogram_zooms_the_range(ui, data):
    s, events = data
    ui.open("/search")
    ui.set_repo(REPO)
    ui.set_range("1h")
    ui.run_query("host=*")  # the generated events only (the live test adds others)
    assert ui.event_count() == len(events)
    over = ui.find("histogram").find_element(By.CSS_SELECTOR, ".u-over")
    w = over.size["width"]
    # From the middle of the plot to its right edge: the newer half of the hour.
    ActionChains(ui.d).move_to_element_with_offset(over, 0, 0).click_and_hold() \
        .move_by_offset(int(w / 2) - 2, 0).release().perform()
    ui.wait(lambda: ui.find("time-range").get_attribute("value") == "abs", what="an absolute range")
    n = ui.event_count()
    q = urllib.parse.parse_qs(urllib.parse.urlparse(ui.d.current_url).query)
    start, end = int(q["start"][0]), int(q["end"][0])
    assert end - start < 40 * 60_000
    want = sum(1 for e in events if start <= e["ts"] <= end)
    assert 0 < n < len(events) and abs(n - want) <= 1, (n, want)
