// Ingest routes: LogScale's structured, unstructured, raw and JSON formats, Splunk HEC (with
// channels and indexer acknowledgement) and Elastic bulk. An ingest
// token names the repository; the request is answered 200 only once every event in it is durable
// in the commit log (P1), 503 with Retry-After when the log cannot say so in time.
#include <spdlog/spdlog.h>

#include <simdjson.h>

#include <chrono>
#include <map>
#include <memory>

#include "api/elastic.h"
#include "api/hec_acks.h"
#include "api/node.h"
#include "api/routes.h"
#include "common/json_writer.h"
#include "http/status_code.h"
#include "ingest/ingest.h"
#include "ingest/otlp.h"
#include "parsers/parsers.h"

namespace sediment::api {
namespace {

class IngestRoutes : public Node {
 public:
  explicit IngestRoutes(const Node& node) : Node(node) {
    for (const std::string& spec : config.ingest_tokens) {
      IngestTokenSpec t;
      if (ParseIngestTokenSpec(spec, &t) && !t.parser.empty()) {
        token_parsers_.emplace(std::make_pair(t.repo, t.token), t.parser);
      }
    }
  }
  // OTLP/HTTP logs: answers in the request's encoding (ingest/otlp.h).
  http::Response HandleOtlpLogs(const http::Request& req) const;
  // `params`: the route's path parameters ({index} of POST /{index}/_bulk).
  http::Response HandleIngest(const http::Request& req, ingest::Format format, bool hec,
                              const http::PathParams* params = nullptr) const;
  // The parse options every format shares: the repository, ingest time and the configured bounds.
  ingest::ParseOptions BaseOptions(const std::string& repo) const {
    ingest::ParseOptions options;
    options.repo = repo;
    options.now_ms = clock->NowMillis();
    options.max_event_bytes = config.max_event_bytes;
    options.max_json_depth = config.max_json_depth;
    options.max_fields_per_event = static_cast<size_t>(config.max_fields_per_event);
    return options;
  }
  // P1 with a bound: a commit log that cannot acknowledge in this time gets the client a 503.
  std::chrono::milliseconds AckTimeout() const {
    return std::chrono::milliseconds(
        config.kafka_brokers.empty() ? 30000 : config.kafka_produce_timeout_ms + 1000);
  }
  // ingest::AppendAll, observed in sediment_commit_log_append_seconds.
  Status TimedAppend(std::vector<IngestMessage> messages) const {
    const auto t0 = SteadyNow();
    Status st = ingest::AppendAll(ingest_log, std::move(messages), AckTimeout(), sharder);
    metrics->commit_log_append_seconds.Observe(
        std::chrono::duration<double>(SteadyNow() - t0).count());
    return st;
  }
  // ingest::AppendLines, observed the same way.
  Status TimedAppendLines(const ingest::LineBatch& batch) const {
    const auto t0 = SteadyNow();
    Status st = ingest::AppendLines(ingest_log, batch, AckTimeout(), sharder);
    metrics->commit_log_append_seconds.Observe(
        std::chrono::duration<double>(SteadyNow() - t0).count());
    return st;
  }
  // A request answered 200: its events and body bytes, for its repository.
  void CountIngested(const std::string& repo, uint64_t events, size_t body_bytes) const {
    metrics->ingested_events.With({repo}).Inc(events);
    metrics->ingested_bytes.With({repo}).Inc(body_bytes);
  }
  // POST /services/collector/ack: {"acks": [ids]} -> {"acks": {"id": bool}} of the channel.
  http::Response HandleHecAck(const http::Request& req) const;

  // The ack ids issued to HEC requests that named a data channel.
  std::shared_ptr<HecAcks> hec_acks = std::make_shared<HecAcks>();
  // The parsers of the request's events (parsers::ParserFor): the token's, the repository's.
  // Valid while `repo` is.
  parsers::Selection SelectionFor(const http::Request& req, ingest::Format format, bool hec,
                                  const std::string& repo) const;

 private:
  // (repository, ingest token) -> the token's parser (--ingest-token REPO:TOKEN:PARSER), read
  // once from the configuration. Tokens created at run time have theirs in Global.
  std::map<std::pair<std::string, std::string>, std::string> token_parsers_;
  // Compiled custom parsers, shared by every request (parsers::ParserCache is thread-safe).
  std::shared_ptr<parsers::ParserCache> parser_cache_ = std::make_shared<parsers::ParserCache>();
};

// The HEC data channel of a request (X-Splunk-Request-Channel, else the channel query parameter);
// empty: none.
std::string HecChannel(const http::Request& req) {
  std::string_view h = req.Header("X-Splunk-Request-Channel");
  if (!h.empty()) return std::string(h);
  auto it = req.query.find("channel");
  return it == req.query.end() ? std::string() : it->second;
}

parsers::Selection IngestRoutes::SelectionFor(const http::Request& req, ingest::Format format,
                                              bool hec, const std::string& repo) const {
  parsers::Selection selection;
  selection.format = format;
  // The token the route admitted: Elastic clients send theirs in Basic, ApiKey or Bearer.
  const std::vector<std::string> candidates = format == ingest::Format::kElasticBulk
                                                  ? ElasticTokens(req)
                                                  : std::vector<std::string>{TokenFrom(req, hec)};
  for (const std::string& token : candidates) {
    if (auto it = token_parsers_.find(std::make_pair(repo, token)); it != token_parsers_.end()) {
      selection.token_parser = it->second;
      break;
    }
    if (tokens == nullptr) continue;
    // A token created at run time carries its parser in Global (CreateIngestToken).
    if (auto m = tokens->Ingest(token); m && m->repo == repo) {
      selection.token_parser = m->parser;
      break;
    }
  }
  // Names resolved once per request: a built-in, else the repository's custom parser.
  auto resolved = std::make_shared<
      std::map<std::string, std::shared_ptr<const parsers::Parser>, std::less<>>>();
  selection.resolve = [this, &repo,
                       resolved](std::string_view name) -> std::shared_ptr<const parsers::Parser> {
    auto it = resolved->find(name);
    if (it != resolved->end()) return it->second;
    std::shared_ptr<const parsers::Parser> p = parsers::Builtin(name);
    if (p == nullptr) {
      std::optional<ParserDef> def;
      global->Read([&](const GlobalState& st) {
        auto r = st.repos.find(repo);
        if (r == st.repos.end()) return;
        auto d = r->second.parsers.find(std::string(name));
        if (d != r->second.parsers.end()) def = d->second;
      });
      if (def) {
        auto c = parser_cache_->Get(repo, std::string(name), def->script, def->tag_fields);
        if (c.ok()) {
          p = *c;
        } else {
          spdlog::warn("ingest: parser '{}' of repository '{}' does not compile: {}", name, repo,
                       c.status().ToString());
        }
      }
    }
    resolved->emplace(std::string(name), p);
    return p;
  };
  return selection;
}

http::Response IngestRoutes::HandleIngest(const http::Request& req, ingest::Format format, bool hec,
                                          const http::PathParams* params) const {
  const bool elastic = format == ingest::Format::kElasticBulk;
  const auto started = SteadyNow();
  // hec_code: Splunk HEC's error code (2 token required, 4 invalid token, 5 no data, 6 invalid
  // data format, 9 server busy, 11 invalid data channel, 12 event field required, 13 event field
  // blank). Elastic: the whole request refused in Elastic's error shape.
  auto fail = [&](int status, const std::string& message, int hec_code) {
    if (elastic) {
      const char* type = status == 400   ? "illegal_argument_exception"
                         : status == 413 ? "content_too_long_exception"
                         : status == 503 ? "unavailable_shards_exception"
                                         : "exception";
      return ElasticError(status, type, message);
    }
    return hec ? HecError(status, message, hec_code) : http::JsonError(status, message);
  };
  // The route's gate admitted the token (a cached lookup here).
  const std::string repo = elastic ? ElasticIngestRepo(req) : IngestRepo(req, hec);
  if (repo.empty()) return fail(hec ? 403 : 401, "unknown ingest token", 4);
  std::string channel;
  if (hec) {
    channel = HecChannel(req);
    if (!channel.empty() && !IsHecChannel(channel)) {
      return fail(400, "Invalid data channel", 11);
    }
    // Splunk refuses a request without events (LogScale's formats answer 200 for it).
    if (req.body.find_first_not_of(" \t\r\n") == std::string::npos) {
      return fail(400, "No data", 5);
    }
  }

  ingest::ParseOptions options = BaseOptions(repo);
  options.params = req.query;
  if (hec && !channel.empty()) options.params["channel"] = channel;
  if (params != nullptr) {
    if (auto it = params->find("index"); it != params->end()) options.bulk_index = it->second;
  }
  auto refused = [&](const Status& status) {
    const StatusSubcode sub = status.subcode();
    const int code = sub == StatusSubcode::kEventFieldRequired ? 12
                     : sub == StatusSubcode::kEventFieldBlank  ? 13
                                                               : 6;
    return fail(http::StatusCodeFor(status), status.message(), code);
  };
  // Parsers run before the append: the commit log holds parsed events.
  const parsers::Selection selection = SelectionFor(req, format, hec, repo);
  ingest::ParseResult parsed;
  Status st;
  if (format == ingest::Format::kRaw || format == ingest::Format::kHecRaw) {
    // Lines that their parser keeps as they are go to the log without being built as events.
    auto batch = ingest::ParseLineBatch(format, req.body, options);
    if (!batch.ok()) return refused(batch.status());
    if (parsers::KeepsLinesAsIs(selection, *batch)) {
      parsed.event_count = batch->lines.size();
      st = TimedAppendLines(*batch);
    } else {
      parsed = batch->ToEvents();
      parsers::ApplyParsers(selection, options, &parsed);
      st = TimedAppend(std::move(parsed.messages));
    }
  } else {
    auto result = ingest::ParseRequest(format, req.body, options);
    if (!result.ok()) return refused(result.status());
    parsed = std::move(result).value();
    if (elastic && parsed.items.empty()) {
      return ElasticError(400, "action_request_validation_exception",
                          "Validation Failed: 1: no requests added;");
    }
    if (parsed.event_count > 0) parsers::ApplyParsers(selection, options, &parsed);
    st = TimedAppend(std::move(parsed.messages));
  }
  if (!st.ok()) {
    spdlog::warn("ingest: append failed: {}", st.ToString());
    http::Response r = fail(503, "events were not stored durably, retry: " + st.message(), 9);
    r.headers.emplace_back("Retry-After", "1");
    return r;
  }
  CountIngested(repo, parsed.event_count, req.body.size());
  http::Response r;
  if (elastic) {
    const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(SteadyNow() - started);
    return ElasticBulkAnswer(req, parsed.items, took.count());
  }
  if (hec && !channel.empty()) {
    // Every event is durable: the ack id is acknowledged from now on.
    r.body =
        R"({"text":"Success","code":0,"ackId":)" + std::to_string(hec_acks->Issue(channel)) + "}";
  } else if (hec) {
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

  ingest::ParseOptions options = BaseOptions(repo);
  options.content_type = content_type;
  auto parsed = ingest::ParseRequest(ingest::Format::kOtlpLogs, req.body, options);
  if (!parsed.ok()) {
    return fail(http::StatusCodeFor(parsed.status()), parsed.status().message());
  }
  if (parsed->event_count > 0) {
    parsers::ApplyParsers(SelectionFor(req, ingest::Format::kOtlpLogs, false, repo), options,
                          &*parsed);
  }
  ingest::ParseResult result;
  result.event_count = parsed->event_count;
  result.rejected_count = parsed->rejected_count;
  result.rejected_message = std::move(parsed->rejected_message);
  Status st = TimedAppend(std::move(parsed->messages));
  if (!st.ok()) {
    spdlog::warn("ingest: OTLP append failed: {}", st.ToString());
    http::Response r = fail(503, "events were not stored durably, retry: " + st.message());
    r.headers.emplace_back("Retry-After", "1");
    return r;
  }
  CountIngested(repo, result.event_count, req.body.size());
  return answer(200, ingest::OtlpLogsResponse(*encoding, result));
}

http::Response IngestRoutes::HandleHecAck(const http::Request& req) const {
  const std::string channel = HecChannel(req);
  if (channel.empty()) return HecError(400, "Data channel is missing", 10);
  if (!IsHecChannel(channel)) return HecError(400, "Invalid data channel", 11);
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  simdjson::dom::array ids;
  if (parser.parse(req.body).get(root) || root["acks"].get_array().get(ids)) {
    return HecError(400, "Invalid data format", 6);
  }
  JsonWriter w;
  w.BeginObject().Key("acks").BeginObject();
  for (simdjson::dom::element id : ids) {
    uint64_t n = 0;
    if (id.get_uint64().get(n)) return HecError(400, "Invalid data format", 6);
    w.Key(std::to_string(n)).Bool(hec_acks->Acknowledged(channel, n));
  }
  w.EndObject().EndObject();
  http::Response r;
  r.body = w.Take();
  return r;
}

// Adds an ingest route whose every answer, its gate's refusals included, is counted in
// sediment_ingest_requests_total{endpoint=pattern, status}.
void AddCounted(http::Router& router, const Node& node, std::string_view methods,
                const std::string& pattern, http::RouteHandler handler, http::RouteGate gate) {
  auto count = [family = &node.metrics->ingest_requests, pattern,
                ok = &node.metrics->ingest_requests.With({pattern, "200"}),
                keep = node.metrics](int status) {
    if (status == 200) {
      ok->Inc();
    } else {
      family->With({pattern, std::to_string(status)}).Inc();
    }
  };
  router.Add(
      methods, pattern,
      [count, handler = std::move(handler)](const http::Request& req,
                                            const http::PathParams& params) {
        http::Response r = handler(req, params);
        count(r.status);
        return r;
      },
      [count, gate = std::move(gate)](const http::Request& req, const http::PathParams& params)
          -> std::optional<http::Response> {
        std::optional<http::Response> refused = gate(req, params);
        if (refused) count(refused->status);
        return refused;
      });
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
      {"/api/v1/ingest/json", {ingest::Format::kJson, false}},
  };
  for (const auto& [path, how] : kIngest) {
    AddCounted(
        router, node, "POST", path,
        [self, format = how.first, hec = how.second](const http::Request& req,
                                                     const http::PathParams&) {
          return self->HandleIngest(req, format, hec);
        },
        node.IngestGate(how.second));
  }
  // OTLP/HTTP logs: LogScale's path (an exporter's endpoint `.../api/v1/ingest/otlp` plus the
  // signal path) and OTLP's default path.
  for (const char* path : {"/api/v1/ingest/otlp/v1/logs", "/v1/logs"}) {
    AddCounted(
        router, node, "POST", path,
        [self](const http::Request& req, const http::PathParams&) {
          return self->HandleOtlpLogs(req);
        },
        node.IngestGate(false));
  }
  for (const char* path : {"/services/collector/ack", "/services/collector/ack/1.0"}) {
    AddCounted(
        router, node, "POST", path,
        [self](const http::Request& req, const http::PathParams&) {
          return self->HandleHecAck(req);
        },
        node.IngestGate(true));
  }
  // Elastic bulk (parse_elastic_bulk.cc); the answers are shaped in elastic_routes.cc.
  for (const char* path : {"/api/v1/ingest/elastic-bulk", "/_bulk", "/{index}/_bulk"}) {
    AddCounted(
        router, node, "POST|PUT", path,
        [self](const http::Request& req, const http::PathParams& params) {
          return self->HandleIngest(req, ingest::Format::kElasticBulk, false, &params);
        },
        node.ElasticGate());
  }
}

}  // namespace sediment::api
