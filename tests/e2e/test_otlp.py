"""OTLP/HTTP logs end to end with the OpenTelemetry Python SDK: the protobuf exporter
(opentelemetry-exporter-otlp-proto-http, configured by OTEL_EXPORTER_OTLP_* variables as a
deployment would: LogScale's base path, the ingest token in OTEL_EXPORTER_OTLP_HEADERS, gzip) and
the JSON exporter (opentelemetry-exporter-otlp-json-http, at OTLP's default path /v1/logs). Every
record is searchable exactly once with its attributes, severity, scope, resource and trace ids.
Then the answers at the HTTP level: partial success for a record over --max-event-bytes (protobuf
and JSON), 400 for malformed bodies (nothing appended), 415, 401.

The SDK is installed like humiolib (harness.py): a virtualenv under ${SEDIMENT_CACHE:-~/.cache/
sediment}/otel-venv, filled with pip on first use, pinned versions."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import SedimentServer, marker, pip_venv_python, wait_until

# The exporters pin their shared helper packages to one beta each: these three resolve together.
OTEL_PINS = {
    "opentelemetry-sdk": "1.45.2",
    "opentelemetry-exporter-otlp-proto-http": "1.45.1",
    "opentelemetry-exporter-otlp-json-http": "0.66b1",
}
MAX_EVENT_BYTES = 8192


def otel_python() -> tuple[Path | None, str]:
    """(python of a virtualenv holding OTEL_PINS, "") or (None, why it could not be made)."""
    return pip_venv_python("otel-venv", OTEL_PINS)


# Runs in the venv: `sdk.py proto|json URL TOKEN MARKER` sends the records through the SDK's
# pipeline (Python logging through LoggingHandler, a log inside a span, a structured record from
# the Logs API) and prints what it sent; `sdk.py raw-proto URL TOKEN MARKER` posts hand-made
# ExportLogsServiceRequests (opentelemetry-proto's classes) and prints the answers.
SDK_SCRIPT = r'''
import json, logging, os, sys
mode, url, token, mk = sys.argv[1:5]

if mode == "raw-proto":
    import requests
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
        ExportLogsServiceRequest, ExportLogsServiceResponse)
    from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord
    req = ExportLogsServiceRequest()
    sl = req.resource_logs.add().scope_logs.add()
    for i, body in enumerate(["small one", "x" * int(sys.argv[5]), "small two"]):
        r = sl.log_records.add()
        r.time_unix_nano = 1700000000000000000 + i * 1000000
        r.body.string_value = body
        a = r.attributes.add()
        a.key, a.value.string_value = "marker", mk
    h = {"Authorization": "Bearer " + token, "Content-Type": "application/x-protobuf"}
    ok = requests.post(url + "/api/v1/ingest/otlp/v1/logs", data=req.SerializeToString(), headers=h, timeout=30)
    resp = ExportLogsServiceResponse()
    resp.ParseFromString(ok.content)
    print(json.dumps({"status": ok.status_code, "type": ok.headers.get("Content-Type"),
                      "has_partial": resp.HasField("partial_success"),
                      "rejected": resp.partial_success.rejected_log_records,
                      "message": resp.partial_success.error_message}))
    sys.exit(0)

from opentelemetry import trace
from opentelemetry._logs import SeverityNumber
from opentelemetry.sdk._logs import LoggerProvider, LoggingHandler
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider

if mode == "proto":
    # Endpoint, headers and compression come from OTEL_EXPORTER_OTLP_* (set by the test).
    from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
    base = OTLPLogExporter
    kwargs = {}
else:
    from opentelemetry.exporter.otlp.json.http._log_exporter import OTLPLogExporter
    base = OTLPLogExporter
    kwargs = {"endpoint": url + "/v1/logs", "headers": {"Authorization": "Bearer " + token}}

results = []

class Recording(base):
    def export(self, batch):
        r = super().export(batch)
        results.append([len(batch), getattr(r, "name", str(r))])
        return r

provider = LoggerProvider(resource=Resource.create({"service.name": "svc-" + mk, "deployment.environment": "e2e"}))
provider.add_log_record_processor(BatchLogRecordProcessor(Recording(**kwargs), max_export_batch_size=16))
log = logging.getLogger("shop.checkout")
log.propagate = False
log.setLevel(logging.DEBUG)
log.addHandler(LoggingHandler(level=logging.DEBUG, logger_provider=provider))

levels = [logging.DEBUG, logging.INFO, logging.WARNING, logging.ERROR]
for i in range(30):
    log.log(levels[i % 4], "order %d of %s", i, mk, extra={"marker": mk, "order_id": i, "amount": i * 1.25})

tracer = TracerProvider().get_tracer("e2e")
with tracer.start_as_current_span("checkout") as span:
    log.error("payment failed for %s", mk, extra={"marker": mk, "in_span": True})
    ctx = span.get_span_context()

direct = provider.get_logger("direct.scope", "2.0")
direct.emit(body={"msg": "structured " + mk, "n": 3, "tags": ["a", "b"]}, severity_number=SeverityNumber.WARN,
            severity_text="WARN", attributes={"marker": mk, "ok": True, "list": [1, 2]}, event_name="demo.event")

flushed = provider.force_flush(30000)
provider.shutdown()
print(json.dumps({"flushed": flushed, "results": results, "trace_id": format(ctx.trace_id, "032x"),
                  "span_id": format(ctx.span_id, "016x")}))
'''

N_RECORDS = 32  # 30 through logging, 1 in a span, 1 structured


@pytest.fixture(scope="module")
def otel_py() -> Path:
    py, why = otel_python()
    if py is None:
        pytest.fail(f"the OpenTelemetry SDK could not be installed: {why}")
    return py


@pytest.fixture(scope="module")
def srv(module_server_factory) -> SedimentServer:
    return module_server_factory(name="otlp", max_event_bytes=MAX_EVENT_BYTES)


def run_sdk(py: Path, tmp_path: Path, s: SedimentServer, mode: str, mk: str, *extra: str,
            env: dict | None = None) -> dict:
    script = tmp_path / "sdk.py"
    script.write_text(SDK_SCRIPT)
    child_env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    child_env.update(env or {})
    res = subprocess.run([str(py), str(script), mode, s.url, s.ingest_token, mk, *extra], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, timeout=120, env=child_env)
    assert res.returncode == 0, f"SDK script failed:\n{res.stderr[-3000:]}"
    return json.loads(res.stdout.strip().splitlines()[-1])


def events_of(s: SedimentServer, mk: str, n: int) -> list[dict]:
    q = f'attributes.marker="{mk}"'
    wait_until(lambda: len(s.query(q, 0)) >= n, timeout=20, what=f"{n} OTLP events of {mk}")
    time.sleep(0.3)  # anything sent twice would show up by now
    return s.query(q, 0)


def check_sdk_records(s: SedimentServer, mk: str, sent: dict) -> None:
    assert sent["flushed"] is True, sent
    assert sum(n for n, _ in sent["results"]) == N_RECORDS, sent
    assert all(r == "SUCCESS" for _, r in sent["results"]), sent
    rows = events_of(s, mk, N_RECORDS)
    assert len(rows) == N_RECORDS, f"expected every record exactly once: {len(rows)}"
    by_order = {int(r["attributes.order_id"]): r for r in rows if "attributes.order_id" in r}
    assert sorted(by_order) == list(range(30))
    want_level = [("DEBUG", "5"), ("INFO", "9"), ("WARN", "13"), ("ERROR", "17")]
    for i, r in by_order.items():
        assert r["@rawstring"] == f"order {i} of {mk}"
        text, number = want_level[i % 4]
        # Python's level names as severity_text (WARNING), OTel's numbers.
        assert r["severity_text"] in (text, "WARNING"), r
        assert r["severity_number"] == number, r
        assert float(r["attributes.amount"]) == i * 1.25
        assert r["service.name"] == f"svc-{mk}"
        assert r["resource.attributes.service.name"] == f"svc-{mk}"
        assert r["resource.attributes.deployment.environment"] == "e2e"
        assert r["scope.name"] == "shop.checkout"
        assert "trace_id" not in r
        # Event time is the record's, not ingest time.
        assert abs(r["@timestamp"] - int(r["@ingesttimestamp"])) < 60_000
    span_rows = [r for r in rows if r.get("attributes.in_span") == "true"]
    assert len(span_rows) == 1
    assert span_rows[0]["trace_id"] == sent["trace_id"]
    assert span_rows[0]["span_id"] == sent["span_id"]
    assert int(span_rows[0]["flags"]) & 1 == 1  # W3C trace flags: sampled (bit 1 is "random")
    direct = [r for r in rows if r.get("event_name") == "demo.event"]
    assert len(direct) == 1, rows
    d = direct[0]
    assert json.loads(d["@rawstring"]) == {"msg": f"structured {mk}", "n": 3, "tags": ["a", "b"]}
    assert d["body.msg"] == f"structured {mk}" and d["body.tags[1]"] == "b"
    assert d["attributes.ok"] == "true" and d["attributes.list[1]"] == "2"
    assert d["scope.name"] == "direct.scope" and d["scope.version"] == "2.0"
    assert d["severity_text"] == "WARN" and d["severity_number"] == "13"
    # The documented filters work in queries.
    assert s.count(f'service.name="svc-{mk}"') == N_RECORDS
    assert s.count(f'attributes.marker="{mk}" severity_number=17') == 8  # 7 logged errors + 1 in the span
    assert s.count(f'attributes.marker="{mk}" severity_text=/^WARN/') == 8  # 7 warnings + the structured one


def test_protobuf_exporter_from_environment(otel_py, srv, tmp_path):
    mk = marker("otp")
    env = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": srv.url + "/api/v1/ingest/otlp",
        "OTEL_EXPORTER_OTLP_HEADERS": f"Authorization=Bearer%20{srv.ingest_token}",
        "OTEL_EXPORTER_OTLP_COMPRESSION": "gzip",
    }
    sent = run_sdk(otel_py, tmp_path, srv, "proto", mk, env=env)
    check_sdk_records(srv, mk, sent)


def test_json_exporter(otel_py, srv, tmp_path):
    mk = marker("otj")
    sent = run_sdk(otel_py, tmp_path, srv, "json", mk)
    check_sdk_records(srv, mk, sent)


def test_protobuf_partial_success(otel_py, srv, tmp_path):
    mk = marker("otpp")
    got = run_sdk(otel_py, tmp_path, srv, "raw-proto", mk, str(MAX_EVENT_BYTES + 100))
    assert got["status"] == 200 and got["type"] == "application/x-protobuf", got
    assert got["has_partial"] and got["rejected"] == 1, got
    assert "logRecords[1]" in got["message"] and "exceeds the event limit" in got["message"], got
    rows = events_of(srv, mk, 2)
    assert sorted(r["@rawstring"] for r in rows) == ["small one", "small two"]


def json_request(mk: str, bodies: list[str]) -> dict:
    return {"resourceLogs": [{"resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "hand"}}]},
                              "scopeLogs": [{"logRecords": [
                                  {"timeUnixNano": str(1700000000000000000 + i * 1000000), "severityNumber": 9,
                                   "body": {"stringValue": b},
                                   "attributes": [{"key": "marker", "value": {"stringValue": mk}}]}
                                  for i, b in enumerate(bodies)]}]}]}


def test_json_partial_success_and_bad_requests(srv):
    mk = marker("otjp")
    r = srv.ingest("/v1/logs", json_request(mk, ["a", "y" * (MAX_EVENT_BYTES + 1), "b", "c"]))
    assert r.status_code == 200 and r.headers["Content-Type"] == "application/json", r.text
    partial = r.json()["partialSuccess"]
    assert partial["rejectedLogRecords"] == "1" and "logRecords[1]" in partial["errorMessage"], r.text
    assert sorted(x["@rawstring"] for x in events_of(srv, mk, 3)) == ["a", "b", "c"]
    assert srv.ingest("/v1/logs", json_request(mk + "f", ["full"])).json() == {}

    # Malformed bodies: 400 in the request's encoding, nothing appended.
    bad = marker("otbad")
    good = json.dumps(json_request(bad, ["never"]))
    r = srv.ingest("/api/v1/ingest/otlp/v1/logs", good[:-5], headers={"Content-Type": "application/json"})
    assert r.status_code == 400 and "malformed JSON" in r.json()["message"] and r.json()["code"] == 3, r.text
    r = srv.ingest("/api/v1/ingest/otlp/v1/logs", good.replace('"severityNumber": 9', '"severityNumber": "INFO"'),
                   headers={"Content-Type": "application/json"})
    assert r.status_code == 400 and "severityNumber" in r.json()["message"], r.text
    r = srv.ingest("/api/v1/ingest/otlp/v1/logs", b"\x0a\xff\xff\xff\x0fgarbage",
                   headers={"Content-Type": "application/x-protobuf"})
    assert r.status_code == 400 and r.headers["Content-Type"] == "application/x-protobuf", r.text
    assert b"malformed protobuf" in r.content
    r = srv.ingest("/v1/logs", good, headers={"Content-Type": "text/plain"})
    assert r.status_code == 415, r.text
    r = srv.ingest("/v1/logs", good, token=None, headers={"Content-Type": "application/json"})
    assert r.status_code == 401, r.text
    r = srv.ingest("/v1/logs", good, token="wrong", headers={"Content-Type": "application/json"})
    assert r.status_code == 401, r.text
    # The same body, well-formed, goes in: the marker was never appended before.
    assert srv.count(f'attributes.marker="{bad}"') == 0
    assert srv.ingest("/v1/logs", good, headers={"Content-Type": "application/json"}).status_code == 200
    assert len(events_of(srv, bad, 1)) == 1
