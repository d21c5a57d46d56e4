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
#include "parsers/parsers.h"

namespace sediment::api {
namespace {

class IngestRoutes : public Node {
 public:
  explicit IngestRoutes(const Node& node) : Node(node) {}
  http::Response HandleIngest(const http::Request& req, ingest::Format format, bool hec) const;
  // Runs the request's events through their parsers (parsers::ApplyParsers), before the append.
  void Parse(const http::Request& req, ingest::Format format, bool hec, const std::string& repo,
             const ingest::ParseOptions& options, ingest::ParseResult* parsed) const;

 private:
  // Compiled custom parsers, shared by every request (parsers::ParserCache is thread-safe).
  std::shared_ptr<parsers::ParserCache> parser_cache_ = std::make_shared<parsers::ParserCache>();
};

void IngestRoutes::Parse(const http::Request& req, ingest::Format format, bool hec,
                         const std::string& repo, const ingest::ParseOptions& options,
                         ingest::ParseResult* parsed) const {
  if (parsed->event_count == 0) return;
  parsers::Selection selection;
  selection.format = format;
  const std::string token = TokenFrom(req, hec);
  for (const std::string& spec : config.ingest_tokens) {
    IngestTokenSpec t;
    if (ParseIngestTokenSpec(spec, &t) && t.repo == repo && t.token == token) {
      selection.token_parser = t.parser;
      break;
    }
  }
  // Names resolved once per request: a built-in, else the repository's custom parser.
  auto resolved = std::make_shared<
      std::map<std::string, std::shared_ptr<const parsers::Parser>, std::less<>>>();
  selection.resolve = [&,
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
  parsers::ApplyParsers(selection, options, parsed);
}

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
  // Parsers run before the append: the commit log holds parsed events.
  Parse(req, format, hec, repo, options, &*parsed);
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
}

}  // namespace sediment::api
