#include "server/server.h"

#include <simdjson.h>
#include <spdlog/spdlog.h>

#include <strings.h>
#include <condition_variable>
#include <map>
#include <mutex>
#include <random>
#include <string_view>
#include <thread>

#include "common/clock.h"
#include "common/env.h"
#include "common/json_writer.h"
#include "digest/digest.h"
#include "global/global.h"
#include "http/http_server.h"
#include "ingest/ingest.h"
#include "log/kafka_log.h"
#include "log/local_log.h"
#include "query/query.h"

namespace sediment {
namespace {

constexpr const char* kVersion = "0.1.0";

std::string RandomHex(size_t bytes) {
  std::random_device rd;
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < bytes; ++i) {
    unsigned v = rd() & 0xff;
    out.push_back(kHex[v >> 4]);
    out.push_back(kHex[v & 15]);
  }
  return out;
}

int HttpStatusFor(const Status& st) {
  switch (st.code()) {
    case StatusCode::kInvalidArgument:
      return 400;
    case StatusCode::kUnauthenticated:
      return 401;
    case StatusCode::kPermissionDenied:
      return 403;
    case StatusCode::kNotFound:
      return 404;
    case StatusCode::kTooLarge:
      return 413;
    case StatusCode::kUnavailable:
      return 503;
    default:
      return 500;
  }
}

// Token from "Authorization: Bearer T" (or "Splunk T" when allow_splunk).
std::string TokenFrom(const http::Request& req, bool allow_splunk) {
  std::string_view h = req.Header("Authorization");
  auto strip = [&](std::string_view prefix) -> std::optional<std::string_view> {
    if (h.size() > prefix.size() && strncasecmp(h.data(), prefix.data(), prefix.size()) == 0) {
      std::string_view t = h.substr(prefix.size());
      while (!t.empty() && t.front() == ' ') t.remove_prefix(1);
      return t;
    }
    return std::nullopt;
  };
  if (auto t = strip("Bearer ")) return std::string(*t);
  if (allow_splunk) {
    if (auto t = strip("Splunk ")) return std::string(*t);
  }
  return "";
}

// LogScale serializes every field as a string except @timestamp.
void WriteRowJson(JsonWriter& w, const query::Row& row) {
  w.BeginObject();
  for (const auto& [name, value] : row) {
    w.Key(name);
    if (const auto* s = std::get_if<std::string>(&value)) {
      w.String(*s);
    } else if (const auto* i = std::get_if<int64_t>(&value)) {
      if (name == "@timestamp") {
        w.Int(*i);
      } else {
        w.String(std::to_string(*i));
      }
    } else {
      JsonWriter num;
      num.Double(std::get<double>(value));
      w.String(num.str());
    }
  }
  w.EndObject();
}

bool ParseListen(const std::string& listen, std::string* host, uint16_t* port) {
  auto colon = listen.rfind(':');
  if (colon == std::string::npos) return false;
  *host = listen.substr(0, colon);
  if (host->size() >= 2 && host->front() == '[' && host->back() == ']') {
    *host = host->substr(1, host->size() - 2);
  }
  if (*host == "localhost") *host = "127.0.0.1";
  try {
    int p = std::stoi(listen.substr(colon + 1));
    if (p < 0 || p > 65535) return false;
    *port = static_cast<uint16_t>(p);
  } catch (...) {
    return false;
  }
  return !host->empty();
}

}  // namespace

struct Server::Impl {
  ServerConfig config;
  Env* env = Env::Default();
  Clock* clock = Clock::Real();
  NodeId node{1};
  std::unique_ptr<CommitLog> ingest_log;
  std::unique_ptr<CommitLog> global_log;
  std::unique_ptr<Global> global;
  std::unique_ptr<Digest> digest;
  std::unique_ptr<http::Server> http;
  std::string segment_dir;
  bool stopped = false;

  // Commit-log offsets for the status page, asked by a thread of their own: a remote log's
  // offset queries can block far beyond their timeout while brokers are down, and the status page
  // must answer. A status request asks for a fresh reading and waits for it at most 2 s; after
  // that it shows the last reading (and its age).
  struct LogBounds {
    int64_t start = -1, end = -1;  // -1: unknown
  };
  std::mutex bounds_mu;
  std::condition_variable bounds_cv;
  std::vector<LogBounds> bounds;
  int64_t bounds_at_us = 0;    // monotonic time of the last completed reading
  uint64_t bounds_done = 0;    // readings completed
  uint64_t bounds_wanted = 0;  // readings asked for
  bool bounds_stop = false;
  std::thread bounds_thread;
  void BoundsLoop();
  std::vector<LogBounds> FreshBounds(int64_t* age_ms);

  Status Bootstrap();
  http::Response Handle(const http::Request& req);
  http::Response HandleIngest(const http::Request& req, ingest::Format format, bool hec);
  http::Response HandleQuery(const http::Request& req, const std::string& repo);
  http::Response HandleStatus();
};

Server::Server(ServerConfig config) : impl_(std::make_unique<Impl>()) {
  impl_->config = std::move(config);
}

Server::~Server() { Stop(); }

uint16_t Server::port() const { return impl_->http ? impl_->http->port() : 0; }

Status Server::Start() {
  Impl& s = *impl_;
  std::string host;
  uint16_t port = 0;
  if (!ParseListen(s.config.listen, &host, &port)) {
    return Status::InvalidArgument("--listen must be HOST:PORT, got '" + s.config.listen + "'");
  }
  RETURN_IF_ERROR(s.env->CreateDirs(s.config.data_dir));
  s.segment_dir = JoinPath(s.config.data_dir, "segments");

  if (s.config.kafka_brokers.empty()) {
    LocalLogOptions log_options;
    log_options.partitions = s.config.partitions > 0 ? s.config.partitions : 8;
    auto ingest_log = OpenLocalLog(s.env, JoinPath(s.config.data_dir, "log/ingest"), log_options);
    if (!ingest_log.ok()) return ingest_log.status().WithContext("opening the ingest log");
    s.ingest_log = std::move(ingest_log).value();

    LocalLogOptions global_log_options;
    global_log_options.partitions = 1;
    auto global_log =
        OpenLocalLog(s.env, JoinPath(s.config.data_dir, "log/global"), global_log_options);
    if (!global_log.ok()) return global_log.status().WithContext("opening the global log");
    s.global_log = std::move(global_log).value();
  } else {
    KafkaOptions ko;
    ko.brokers = s.config.kafka_brokers;
    ko.topic_prefix = s.config.kafka_topic_prefix;
    ko.ingest_partitions = s.config.partitions > 0 ? s.config.partitions : 24;
    ko.replication_factor = s.config.kafka_replication_factor;
    ko.min_insync_replicas = s.config.kafka_min_insync_replicas;
    ko.produce_timeout = std::chrono::milliseconds(s.config.kafka_produce_timeout_ms);
    if (!s.config.kafka_properties_file.empty()) {
      auto text = s.env->ReadFile(s.config.kafka_properties_file);
      if (!text.ok()) return text.status().WithContext("reading --kafka-properties-file");
      auto props = ParseKafkaProperties(*text);
      if (!props.ok()) return props.status().WithContext(s.config.kafka_properties_file);
      ko.properties = *props;
    }
    for (const auto& [k, v] : s.config.kafka_properties) ko.properties[k] = v;
    RETURN_IF_ERROR(EnsureTopics(ko).WithContext("preparing the Kafka topics"));
    auto ingest_log = OpenKafkaLog(ko, KafkaIngestTopic(ko));
    if (!ingest_log.ok()) return ingest_log.status().WithContext("opening the Kafka ingest topic");
    s.ingest_log = std::move(ingest_log).value();
    auto global_log = OpenKafkaLog(ko, KafkaGlobalTopic(ko), 1);
    if (!global_log.ok()) return global_log.status().WithContext("opening the Kafka global topic");
    s.global_log = std::move(global_log).value();
    spdlog::info("commit log: Kafka at {} (topics {}*, {} ingest partitions)", ko.brokers,
                 ko.topic_prefix, s.ingest_log->partition_count());
  }

  auto global =
      Global::Open(s.env, s.global_log.get(), JoinPath(s.config.data_dir, "global-snapshots"));
  if (!global.ok()) return global.status().WithContext("loading Global");
  s.global = std::move(global).value();

  RETURN_IF_ERROR(s.Bootstrap());

  DigestOptions digest_options;
  digest_options.segment_dir = s.segment_dir;
  digest_options.node = s.node;
  digest_options.flush_age = std::chrono::milliseconds(s.config.flush_age_ms);
  digest_options.flush_bytes = s.config.flush_bytes;
  s.digest =
      std::make_unique<Digest>(s.env, s.clock, s.ingest_log.get(), s.global.get(), digest_options);
  RETURN_IF_ERROR(s.digest->Start().WithContext("starting the digest"));

  s.bounds_thread = std::thread([this] { impl_->BoundsLoop(); });

  http::ServerOptions http_options;
  http_options.host = host;
  http_options.port = port;
  http_options.max_body_bytes = s.config.max_body_bytes;
  s.http = std::make_unique<http::Server>(
      http_options, [this](const http::Request& r) { return impl_->Handle(r); });
  RETURN_IF_ERROR(s.http->Start());
  return Status::OK();
}

void Server::Stop() {
  Impl& s = *impl_;
  if (s.stopped) return;
  s.stopped = true;
  if (s.http) s.http->Stop();
  {
    std::lock_guard lock(s.bounds_mu);
    s.bounds_stop = true;
  }
  s.bounds_cv.notify_all();
  if (s.bounds_thread.joinable()) s.bounds_thread.join();
  if (s.digest) s.digest->Stop();
  if (s.global) {
    auto st = s.global->Close();
    if (!st.ok()) spdlog::warn("closing Global: {}", st.ToString());
  }
}

void Server::Impl::BoundsLoop() {
  while (true) {
    {
      std::unique_lock lock(bounds_mu);
      bounds_cv.wait_for(lock, std::chrono::seconds(5),
                         [this] { return bounds_stop || bounds_wanted > bounds_done; });
      if (bounds_stop) return;
    }
    // While the log reports trouble only the first partition is asked (one slow call, not one
    // per partition); the others show unknown.
    bool ask = true;
    std::vector<LogBounds> fresh(static_cast<size_t>(ingest_log->partition_count()));
    for (size_t i = 0; i < fresh.size() && ask; ++i) {
      auto start = ingest_log->StartOffset(PartitionId(static_cast<int32_t>(i)));
      auto end = ingest_log->EndOffset(PartitionId(static_cast<int32_t>(i)));
      if (!start.ok() || !end.ok()) {
        ask = false;
        continue;
      }
      fresh[i] = LogBounds{start->value, end->value};
    }
    {
      std::lock_guard lock(bounds_mu);
      bounds = std::move(fresh);
      bounds_at_us = clock->MonotonicMicros();
      ++bounds_done;
    }
    bounds_cv.notify_all();
  }
}

std::vector<Server::Impl::LogBounds> Server::Impl::FreshBounds(int64_t* age_ms) {
  std::unique_lock lock(bounds_mu);
  const uint64_t target = bounds_done + 1;
  bounds_wanted = std::max(bounds_wanted, target);
  bounds_cv.notify_all();
  bounds_cv.wait_for(lock, std::chrono::seconds(2), [&] { return bounds_done >= target; });
  *age_ms = bounds_done == 0 ? -1 : (clock->MonotonicMicros() - bounds_at_us) / 1000;
  return bounds;
}

Status Server::Impl::Bootstrap() {
  bool has_cluster = false;
  bool has_repos = false;
  global->Read([&](const GlobalState& st) {
    has_cluster = !st.cluster_id.empty();
    has_repos = !st.repos.empty();
  });
  if (!has_cluster) {
    auto r = global->Submit(SetClusterId{RandomHex(16)});
    if (!r.ok() && r.status().code() != StatusCode::kRejected) return r.status();
  }
  auto ensure_repo = [&](const std::string& repo) -> Status {
    bool exists = false;
    global->Read([&](const GlobalState& st) { exists = st.repos.count(repo) > 0; });
    if (exists) return Status::OK();
    auto r = global->Submit(CreateRepo{repo});
    if (!r.ok() && r.status().code() != StatusCode::kRejected) return r.status();
    spdlog::info("created repository '{}'", repo);
    return Status::OK();
  };
  auto ensure_ingest_token = [&](const std::string& repo, const std::string& token) -> Status {
    RETURN_IF_ERROR(ensure_repo(repo));
    std::string owner;
    global->Read([&](const GlobalState& st) {
      auto it = st.ingest_tokens.find(token);
      if (it != st.ingest_tokens.end()) owner = it->second;
    });
    if (owner == repo) return Status::OK();
    if (!owner.empty()) {
      return Status::InvalidArgument("ingest token is already used by repository '" + owner + "'");
    }
    auto r = global->Submit(AddIngestToken{repo, token});
    return r.ok() ? Status::OK() : r.status();
  };
  auto ensure_api_token = [&](const std::string& token) -> Status {
    bool exists = false;
    global->Read([&](const GlobalState& st) { exists = st.api_tokens.count(token) > 0; });
    if (exists) return Status::OK();
    auto r = global->Submit(AddApiToken{token});
    return r.ok() || r.status().code() == StatusCode::kRejected ? Status::OK() : r.status();
  };

  for (const auto& spec : config.ingest_tokens) {
    auto colon = spec.find(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == spec.size()) {
      return Status::InvalidArgument("--ingest-token must be REPO:TOKEN, got '" + spec + "'");
    }
    RETURN_IF_ERROR(ensure_ingest_token(spec.substr(0, colon), spec.substr(colon + 1)));
  }
  for (const auto& token : config.api_tokens) RETURN_IF_ERROR(ensure_api_token(token));

  if (!has_repos && config.ingest_tokens.empty() && config.api_tokens.empty()) {
    std::string ingest_token = RandomHex(16);
    std::string api_token = RandomHex(16);
    RETURN_IF_ERROR(ensure_ingest_token("sandbox", ingest_token));
    RETURN_IF_ERROR(ensure_api_token(api_token));
    std::string creds =
        "repository=sandbox\ningest_token=" + ingest_token + "\napi_token=" + api_token + "\n";
    RETURN_IF_ERROR(env->WriteFileAtomic(JoinPath(config.data_dir, "credentials.txt"), creds));
    std::string url = "http://" + config.listen;
    fmt::print(
        "\nCreated repository 'sandbox' with new tokens (also saved in {}/credentials.txt):\n"
        "  ingest token: {}\n  API token:    {}\n\n"
        "Send logs:\n  curl -X POST {}/api/v1/ingest/raw -H 'Authorization: Bearer {}' "
        "--data-binary $'hello sediment\\nsecond line'\n"
        "Search them:\n  curl -X POST {}/api/v1/repositories/sandbox/query -H 'Authorization: "
        "Bearer {}' -H 'Content-Type: application/json' -d '{{\"queryString\": \"hello\", "
        "\"start\": \"1h\"}}'\n\n",
        config.data_dir, ingest_token, api_token, url, ingest_token, url, api_token);
    std::fflush(stdout);
  }
  return Status::OK();
}

http::Response Server::Impl::Handle(const http::Request& req) {
  const std::string& path = req.path;
  static const std::map<std::string, std::pair<ingest::Format, bool>> kIngest = {
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
  auto it = kIngest.find(path);
  if (it != kIngest.end()) {
    if (req.method != "POST") return http::JsonError(405, "use POST for " + path);
    return HandleIngest(req, it->second.first, it->second.second);
  }
  if (path == "/api/v1/status") {
    if (req.method != "GET") return http::JsonError(405, "use GET for " + path);
    return HandleStatus();
  }
  static const std::string kRepoPrefix = "/api/v1/repositories/";
  if (path.rfind(kRepoPrefix, 0) == 0) {
    std::string rest = path.substr(kRepoPrefix.size());
    auto slash = rest.find('/');
    if (slash != std::string::npos && rest.substr(slash) == "/query") {
      if (req.method != "POST") return http::JsonError(405, "use POST for " + path);
      return HandleQuery(req, rest.substr(0, slash));
    }
  }
  if (path == "/" && req.method == "GET") {
    http::Response r;
    r.content_type = "text/plain";
    r.body = std::string("sediment ") + kVersion +
             "\nAPI: POST /api/v1/ingest/{raw,humio-structured,humio-unstructured,hec}, "
             "POST /api/v1/repositories/{repo}/query, GET /api/v1/status\n";
    return r;
  }
  return http::JsonError(404, "no such endpoint: " + req.method + " " + path);
}

http::Response Server::Impl::HandleIngest(const http::Request& req, ingest::Format format,
                                          bool hec) {
  // hec_code: Splunk HEC's error code (2 token required, 4 invalid token, 6 invalid data
  // format, 12 event field required, 9 server busy).
  auto fail = [&](int status, const std::string& message, int hec_code) {
    if (!hec) return http::JsonError(status, message);
    JsonWriter w;
    w.BeginObject().Key("text").String(message).Key("code").Int(hec_code);
    w.Key("error").String(message).EndObject();
    http::Response r;
    r.status = status;
    r.body = w.Take();
    return r;
  };
  std::string token = TokenFrom(req, hec);
  if (token.empty()) {
    return fail(401, "missing ingest token (Authorization: Bearer <token>)", 2);
  }
  std::string repo;
  global->Read([&](const GlobalState& st) {
    auto t = st.ingest_tokens.find(token);
    if (t != st.ingest_tokens.end()) repo = t->second;
  });
  // LogScale answers 401 for an unknown token, Splunk HEC 403 "Invalid token".
  if (repo.empty()) return fail(hec ? 403 : 401, "unknown ingest token", 4);

  ingest::ParseOptions options;
  options.repo = repo;
  options.now_ms = clock->NowMillis();
  options.max_event_bytes = config.max_event_bytes;
  options.params = req.query;
  auto parsed = ingest::ParseRequest(format, req.body, options);
  if (!parsed.ok()) {
    const std::string& m = parsed.status().message();
    int code = m.find("Event field is required") != std::string::npos ? 12 : 6;
    return fail(HttpStatusFor(parsed.status()), m, code);
  }
  // P1 with a bound: a commit log that cannot acknowledge gets the client a 503 in time.
  const auto ack_timeout = std::chrono::milliseconds(
      config.kafka_brokers.empty() ? 30000 : config.kafka_produce_timeout_ms + 1000);
  Status st = ingest::AppendAll(ingest_log.get(), std::move(parsed->messages), ack_timeout);
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

http::Response Server::Impl::HandleQuery(const http::Request& req, const std::string& repo) {
  std::string token = TokenFrom(req, false);
  if (token.empty())
    return http::JsonError(401, "missing API token (Authorization: Bearer <token>)");
  bool authorized = false;
  bool repo_exists = false;
  global->Read([&](const GlobalState& st) {
    authorized = st.api_tokens.count(token) > 0;
    repo_exists = st.repos.count(repo) > 0;
  });
  if (!authorized) return http::JsonError(401, "unknown API token");
  if (!repo_exists) return http::JsonError(404, "no repository named '" + repo + "'");

  std::string query_string, start, end;
  try {
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    auto error = parser.parse(req.body).get(doc);
    if (error)
      return http::JsonError(
          400, std::string("query body is not JSON: ") + simdjson::error_message(error));
    if (!doc.is_object()) return http::JsonError(400, "query body must be a JSON object");
    std::string_view qs;
    if (doc["queryString"].get(qs)) {
      return http::JsonError(400, "query body needs a string field 'queryString'");
    }
    query_string = std::string(qs);
    auto bound = [&](const char* name, std::string* out) -> std::optional<std::string> {
      simdjson::dom::element v;
      if (doc[name].get(v)) return std::nullopt;
      if (v.is_string()) {
        *out = std::string(v.get_string().value());
      } else if (v.is_int64()) {
        *out = std::to_string(v.get_int64().value());
      } else if (v.is_uint64()) {
        *out = std::to_string(v.get_uint64().value());
      } else {
        return std::string("'") + name + "' must be a string or epoch milliseconds";
      }
      return std::nullopt;
    };
    if (auto e = bound("start", &start)) return http::JsonError(400, *e);
    if (auto e = bound("end", &end)) return http::JsonError(400, *e);
    bool live = false;
    if (!doc["isLive"].get(live) && live) {
      return http::JsonError(400, "live queries (isLive: true) are not supported yet");
    }
  } catch (const simdjson::simdjson_error& e) {
    return http::JsonError(400, std::string("query body: ") + e.what());
  }

  auto range = query::ParseTimeRange(start, end, clock->NowMillis());
  if (!range.ok()) return http::JsonError(400, range.status().message());
  auto compiled = query::Compile(query_string);
  if (!compiled.ok()) return http::JsonError(400, compiled.status().message());

  // The cut (DESIGN section 6, query view): buffers first, then Global; buffered events at or
  // below flushed_through are already in a registered segment and are dropped here.
  std::vector<BufferedBatch> buffers = digest->SnapshotBuffers();
  query::ScanInput input;
  std::map<std::pair<std::string, int32_t>, Position> flushed;
  global->Read([&](const GlobalState& st) {
    for (const auto& [id, seg] : st.segments) {
      if (seg.datasource.repo != repo || seg.node != node) continue;
      query::SegmentSource src;
      src.path = JoinPath(segment_dir, seg.file_name);
      src.id = seg.id;
      src.datasource = seg.datasource;
      src.partition = seg.partition;
      src.min_ts = seg.min_ts;
      src.max_ts = seg.max_ts;
      input.segments.push_back(std::move(src));
    }
    flushed = st.flushed_through;
  });
  for (auto& b : buffers) {
    if (b.datasource.repo != repo) continue;
    auto ft = flushed.find({b.datasource.Key(), b.partition.value});
    std::shared_ptr<const std::vector<PositionedEvent>> events = b.events;
    if (ft != flushed.end() && !events->empty() && events->front().pos <= ft->second) {
      auto cut = std::make_shared<std::vector<PositionedEvent>>();
      for (const auto& e : *events) {
        if (e.pos > ft->second) cut->push_back(e);
      }
      events = std::move(cut);
    }
    if (events->empty()) continue;
    input.buffered.push_back(query::BufferedSource{b.datasource, b.partition, events});
  }

  query::ExecOptions exec;
  exec.threads = config.query_threads;
  auto result = query::Execute(env, **compiled, *range, input, exec);
  if (!result.ok())
    return http::JsonError(HttpStatusFor(result.status()), result.status().message());

  http::Response r;
  bool ndjson = req.Header("Accept").find("application/x-ndjson") != std::string_view::npos;
  if (ndjson) {
    r.content_type = "application/x-ndjson";
    for (const auto& row : result->rows) {
      JsonWriter w;
      WriteRowJson(w, row);
      r.body.append(w.str());
      r.body.push_back('\n');
    }
  } else {
    JsonWriter w;
    w.BeginArray();
    for (const auto& row : result->rows) WriteRowJson(w, row);
    w.EndArray();
    r.body = w.Take();
  }
  for (const auto& warning : result->warnings) {
    r.headers.emplace_back("X-Sediment-Warning", warning);
  }
  r.headers.emplace_back("X-Sediment-Events-Scanned", std::to_string(result->stats.events_scanned));
  return r;
}

http::Response Server::Impl::HandleStatus() {
  JsonWriter w;
  w.BeginObject();
  w.Key("status").String("OK").Key("version").String(kVersion);
  std::string health = ingest_log->Health();
  w.Key("commitLog").BeginObject();
  w.Key("type").String(config.kafka_brokers.empty() ? "local" : "kafka");
  if (!config.kafka_brokers.empty()) w.Key("brokers").String(config.kafka_brokers);
  w.Key("health").String(health).EndObject();
  size_t segments = 0;
  uint64_t segment_bytes = 0, events = 0;
  std::vector<std::string> repos;
  std::map<int32_t, PartitionState> pstates;
  global->Read([&](const GlobalState& st) {
    segments = st.segments.size();
    for (const auto& [id, seg] : st.segments) {
      segment_bytes += seg.file_size;
      events += seg.event_count;
    }
    for (const auto& [name, info] : st.repos) repos.push_back(name);
    pstates = st.partitions;
  });
  w.Key("repositories").BeginArray();
  for (const auto& r : repos) w.String(r);
  w.EndArray();
  w.Key("segments").BeginObject().Key("count").Int(static_cast<int64_t>(segments));
  w.Key("bytes").Int(static_cast<int64_t>(segment_bytes));
  w.Key("events").Int(static_cast<int64_t>(events)).EndObject();
  int64_t bounds_age_ms = -1;
  std::vector<LogBounds> log_bounds = FreshBounds(&bounds_age_ms);
  w.Key("logOffsetsAgeMs").Int(bounds_age_ms);
  w.Key("partitions").BeginArray();
  for (const auto& p : digest->PartitionStatuses()) {
    w.BeginObject().Key("partition").Int(p.partition.value).Key("epoch").Int(p.epoch.value);
    LogBounds lb;
    if (static_cast<size_t>(p.partition.value) < log_bounds.size())
      lb = log_bounds[p.partition.value];
    w.Key("logStart").Int(lb.start);
    w.Key("logEnd").Int(lb.end);
    w.Key("nextOffset").Int(p.next_offset.value);
    w.Key("replayPoint").Int(p.replay_point.value);
    auto ps = pstates.find(p.partition.value);
    w.Key("truncatedBefore").Int(ps == pstates.end() ? 0 : ps->second.truncated_before.value);
    w.Key("bufferedEvents").Int(static_cast<int64_t>(p.buffered_events));
    w.Key("duplicateMessagesDropped").Int(static_cast<int64_t>(p.duplicates_dropped));
    w.Key("error").String(p.error).EndObject();
  }
  w.EndArray();
  w.EndObject();
  http::Response r;
  r.body = w.Take();
  return r;
}

}  // namespace sediment
