// Ingest routes: LogScale's structured, unstructured and raw formats and Splunk HEC. An ingest
// token names the repository; the request is answered 200 only once every event in it is durable
// in the commit log (P1), 503 with Retry-After when the log cannot say so in time.
#include <spdlog/spdlog.h>

#include <chrono>

#include "api/node.h"
#include "api/routes.h"
#include "common/json_writer.h"
#include "http/status_code.h"
#include "ingest/ingest.h"
#include "ingest/otlp.h"

namespace sediment::api {
namespace {

class IngestRoutes : public Node {
 public:
  explicit IngestRoutes(const Node& node) : Node(node) {}
  http::Response HandleIngest(const http::Request& req, ingest::Format format, bool hec) const;
  // OTLP/HTTP logs: answers in the request's encoding (ingest/otlp.h).
  http::Response HandleOtlpLogs(const http::Request& req) const;
};

http::Response IngestRoutes::HandleIngest(const http::Request& req, ingest::Format format,
                                          bool hec) const {
  // hec_code: Splunk HEC's error code (2 token required, 4 invalid token, 6 invalid data
  // format, 12 event field required, 9 server busy).
  auto fail = [&](int status, const std::string& message, int hec_code) {
    return hec ? HecError(status, message, hec_code) : http::JsonError(status, message);
  };
  // The route's IngestGate admitted the token (a cached lookup here).
  const std::string repo = IngestRepo(req, hec);
  if (repo.empty()) return fail(hec ? 403 : 401, "unknown ingest token", 4);

  ingest::ParseOptions options;
  options.repo = repo;
  options.now_ms = clock->NowMillis();
  options.max_event_bytes = config.max_event_bytes;
  options.max_json_depth = config.max_json_depth;
  options.max_fields_per_event = static_cast<size_t>(config.max_fields_per_event);
  options.params = req.query;
  auto parsed = ingest::ParseRequest(format, req.body, options);
  if (!parsed.ok()) {
    const std::string& m = parsed.status().message();
    const int code = parsed.status().subcode() == StatusSubcode::kEventFieldRequired ? 12 : 6;
    return fail(http::StatusCodeFor(parsed.status()), m, code);
  }
  // P1 with a bound: a commit log that cannot acknowledge gets the client a 503 in time.
  const auto ack_timeout = std::chrono::milliseconds(
      config.kafka_brokers.empty() ? 30000 : config.kafka_produce_timeout_ms + 1000);
  Status st = ingest::AppendAll(ingest_log, std::move(parsed->messages), ack_timeout);
  if (!st.ok()) {
    spdlog::warn("ingest: append failed: {}", st.ToString());
    http::Response r = fail(503, "events were not stored durably, retry: " + st.message(), 9);
    r.headers.emplace_back("Retry-After", "1");
    return r;
  }
  http::Response r;
  if (hec) {
    r.body = R"({"text":"Success","code":0})";
  } else {
    r.body = "{}";
  }
  return r;
}

http::Response IngestRoutes::HandleOtlpLogs(const http::Request& req) const {
  const std::string content_type(req.Header("Content-Type"));
  const std::optional<ingest::OtlpEncoding> encoding = ingest::OtlpEncodingFor(content_type);
  if (!encoding) {
    return http::JsonError(415,
                           "unsupported Content-Type '" + content_type +
                               "': OTLP/HTTP sends application/x-protobuf or application/json");
  }
  auto answer = [&](int status, std::string body) {
    http::Response r;
    r.status = status;
    r.content_type = ingest::OtlpContentType(*encoding);
    r.body = std::move(body);
    return r;
  };
  auto fail = [&](int status, const std::string& message) {
    return answer(status, ingest::OtlpErrorBody(*encoding, status, message));
  };
  const std::string repo = IngestRepo(req, false);
  if (repo.empty()) return fail(401, "unknown ingest token");

  ingest::ParseOptions options;
  options.repo = repo;
  options.now_ms = clock->NowMillis();
  options.max_event_bytes = config.max_event_bytes;
  options.max_json_depth = config.max_json_depth;
  options.max_fields_per_event = static_cast<size_t>(config.max_fields_per_event);
  options.content_type = content_type;
  auto parsed = ingest::ParseRequest(ingest::Format::kOtlpLogs, req.body, options);
  if (!parsed.ok()) {
    return fail(http::StatusCodeFor(parsed.status()), parsed.status().message());
  }
  ingest::ParseResult result;
  result.event_count = parsed->event_count;
  result.rejected_count = parsed->rejected_count;
  result.rejected_message = std::move(parsed->rejected_message);
  const auto ack_timeout = std::chrono::milliseconds(
      config.kafka_brokers.empty() ? 30000 : config.kafka_produce_timeout_ms + 1000);
  Status st = ingest::AppendAll(ingest_log, std::move(parsed->messages), ack_timeout);
  if (!st.ok()) {
    spdlog::warn("ingest: OTLP append failed: {}", st.ToString());
    http::Response r = fail(503, "events were not stored durably, retry: " + st.message());
    r.headers.emplace_back("Retry-After", "1");
    return r;
  }
  return answer(200, ingest::OtlpLogsResponse(*encoding, result));
}

}  // namespace

void AddIngestRoutes(http::Router& router, const Node& node) {
  auto self = std::make_shared<const IngestRoutes>(node);
  static const std::pair<const char*, std::pair<ingest::Format, bool>> kIngest[] = {
      {"/api/v1/ingest/humio-structured", {ingest::Format::kHumioStructured, false}},
      {"/api/v1/ingest/humio-unstructured", {ingest::Format::kHumioUnstructured, false}},
      {"/api/v1/ingest/raw", {ingest::Format::kRaw, false}},
      {"/api/v1/ingest/hec", {ingest::Format::kHecEvent, true}},
      {"/api/v1/ingest/hec/raw", {ingest::Format::kHecRaw, true}},
      {"/services/collector", {ingest::Format::kHecEvent, true}},
      {"/services/collector/event", {ingest::Format::kHecEvent, true}},
      {"/services/collector/event/1.0", {ingest::Format::kHecEvent, true}},
      {"/services/collector/raw", {ingest::Format::kHecRaw, true}},
      {"/services/collector/raw/1.0", {ingest::Format::kHecRaw, true}},
  };
  for (const auto& [path, how] : kIngest) {
    router.Add(
        "POST", path,
        [self, format = how.first, hec = how.second](const http::Request& req,
                                                     const http::PathParams&) {
          return self->HandleIngest(req, format, hec);
        },
        node.IngestGate(how.second));
  }
  // OTLP/HTTP logs: LogScale's path (an exporter's endpoint `.../api/v1/ingest/otlp` plus the
  // signal path) and OTLP's default path.
  for (const char* path : {"/api/v1/ingest/otlp/v1/logs", "/v1/logs"}) {
    router.Add(
        "POST", path,
        [self](const http::Request& req, const http::PathParams&) {
          return self->HandleOtlpLogs(req);
        },
        node.IngestGate(false));
  }
}

}  // namespace sediment::api
