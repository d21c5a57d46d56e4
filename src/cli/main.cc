// The sediment binary: `sediment server|ingest|query|status`. Flags of `server` can also be set
// through SEDIMENT_<NAME> environment variables (e.g. SEDIMENT_DATA_DIR).
#include <simdjson.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include <strings.h>
#include <unistd.h>
#include <algorithm>

#include <csignal>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>

#include "common/json_writer.h"
#include "common/time_parse.h"
#include "http/http_client.h"
#include "log/kafka_log.h"
#include "server/server.h"

namespace {

using sediment::Status;

int RunServer(const sediment::ServerConfig& config) {
  // Block the termination signals in every thread; the main thread waits for them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  sediment::Server server(config);
  Status st = server.Start();
  if (!st.ok()) {
    spdlog::critical("sediment cannot start: {}", st.ToString());
    return 1;
  }
  std::string host = config.listen.substr(0, config.listen.rfind(':'));
  spdlog::info("sediment ready: listening on http://{}:{} (data dir {})", host, server.port(),
               config.data_dir);
  int sig = 0;
  sigwait(&signals, &sig);
  spdlog::info("received signal {}, shutting down", sig);
  server.Stop();
  spdlog::info("stopped");
  return 0;
}

std::vector<std::pair<std::string, std::string>> AuthHeaders(const std::string& token,
                                                             const std::string& content_type) {
  std::vector<std::pair<std::string, std::string>> h;
  if (!token.empty()) h.emplace_back("Authorization", "Bearer " + token);
  if (!content_type.empty()) h.emplace_back("Content-Type", content_type);
  return h;
}

int Fail(const std::string& what) {
  std::fprintf(stderr, "error: %s\n", what.c_str());
  return 1;
}

int RunIngest(const std::string& url, const std::string& token, std::vector<std::string> files,
              size_t batch_lines) {
  if (files.empty()) files.push_back("-");
  size_t total = 0;
  std::string batch;
  size_t lines = 0;
  auto send = [&]() -> bool {
    if (lines == 0) return true;
    auto r = sediment::http::Fetch("POST", url + "/api/v1/ingest/raw",
                                   AuthHeaders(token, "text/plain"), batch);
    if (!r.ok()) {
      Fail(r.status().ToString());
      return false;
    }
    if (r->status != 200) {
      Fail("server answered " + std::to_string(r->status) + ": " + r->body);
      return false;
    }
    total += lines;
    std::fprintf(stderr, "\ringested %zu events", total);
    batch.clear();
    lines = 0;
    return true;
  };
  for (const auto& f : files) {
    std::ifstream file;
    std::istream* in = &std::cin;
    if (f != "-") {
      file.open(f);
      if (!file) return Fail("cannot open " + f);
      in = &file;
    }
    std::string line;
    while (std::getline(*in, line)) {
      if (line.empty()) continue;
      batch.append(line).push_back('\n');
      if (++lines >= batch_lines && !send()) return 1;
    }
  }
  if (!send()) return 1;
  std::fprintf(stderr, "\ringested %zu events, all acknowledged\n", total);
  return 0;
}

int RunQuery(const std::string& url, const std::string& token, const std::string& repo,
             const std::string& query, const std::string& start, const std::string& end,
             const std::string& format) {
  sediment::JsonWriter w;
  w.BeginObject().Key("queryString").String(query).Key("start").String(start);
  if (!end.empty()) w.Key("end").String(end);
  w.Key("isLive").Bool(false).EndObject();
  auto headers = AuthHeaders(token, "application/json");
  if (format == "ndjson") headers.emplace_back("Accept", "application/x-ndjson");
  auto r = sediment::http::Fetch("POST", url + "/api/v1/repositories/" + repo + "/query", headers,
                                 w.str());
  if (!r.ok()) return Fail(r.status().ToString());
  for (const auto& [k, v] : r->headers) {
    if (strcasecmp(k.c_str(), "X-Sediment-Warning") == 0) {
      std::fprintf(stderr, "warning: %s\n", v.c_str());
    }
  }
  if (r->status != 200)
    return Fail("server answered " + std::to_string(r->status) + ": " + r->body);
  if (format == "ndjson" || format == "json") {
    std::fwrite(r->body.data(), 1, r->body.size(), stdout);
    if (format == "json") std::fputc('\n', stdout);
    return 0;
  }
  // Terminal table: events as "time  rawstring", aggregates as aligned columns.
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.parse(r->body).get(doc) || !doc.is_array())
    return Fail("unexpected answer: " + r->body);
  std::vector<std::string> columns;
  std::vector<std::map<std::string, std::string>> rows;
  bool events = false;
  for (simdjson::dom::element row : doc.get_array()) {
    if (!row.is_object()) continue;
    std::map<std::string, std::string> cells;
    for (auto field : row.get_object()) {
      std::string key(field.key);
      std::string value;
      if (field.value.is_string()) {
        value = std::string(field.value.get_string().value());
      } else if (field.value.is_int64()) {
        int64_t v = field.value.get_int64().value();
        value = key == "@timestamp" ? sediment::FormatIso8601Millis(v) : std::to_string(v);
      } else {
        value = simdjson::to_string(field.value);
      }
      if (key == "@rawstring") events = true;
      if (std::find(columns.begin(), columns.end(), key) == columns.end()) columns.push_back(key);
      cells[key] = std::move(value);
    }
    rows.push_back(std::move(cells));
  }
  if (events) {
    for (auto& row : rows)
      std::printf("%s  %s\n", row["@timestamp"].c_str(), row["@rawstring"].c_str());
  } else {
    std::vector<size_t> width;
    for (const auto& c : columns) {
      size_t wd = c.size();
      for (auto& row : rows) wd = std::max(wd, row[c].size());
      width.push_back(std::min<size_t>(wd, 80));
    }
    for (size_t i = 0; i < columns.size(); ++i)
      std::printf("%-*s  ", static_cast<int>(width[i]), columns[i].c_str());
    std::printf("\n");
    for (size_t i = 0; i < columns.size(); ++i)
      std::printf("%s  ", std::string(width[i], '-').c_str());
    std::printf("\n");
    for (auto& row : rows) {
      for (size_t i = 0; i < columns.size(); ++i)
        std::printf("%-*s  ", static_cast<int>(width[i]), row[columns[i]].c_str());
      std::printf("\n");
    }
  }
  std::fprintf(stderr, "%zu %s\n", rows.size(), events ? "events" : "rows");
  return 0;
}

// The cluster view (GET /api/v1/cluster) as tables: nodes, partitions, warnings.
int PrintCluster(const std::string& body) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.parse(body).get(doc)) return Fail("the cluster view is not JSON: " + body);
  auto str = [](simdjson::dom::element e, const char* k) {
    std::string_view v;
    return e[k].get(v) ? std::string() : std::string(v);
  };
  auto num = [](simdjson::dom::element e, const char* k) {
    int64_t v = 0;
    return e[k].get(v) ? int64_t{-1} : v;
  };
  auto flag = [](simdjson::dom::element e, const char* k) {
    bool v = false;
    return !e[k].get(v) && v;
  };
  simdjson::dom::array nodes, partitions, warnings;
  if (doc["nodes"].get(nodes) || doc["partitions"].get(partitions) ||
      doc["warnings"].get(warnings)) {
    return Fail("the cluster view lacks nodes/partitions/warnings: " + body);
  }
  size_t alive = 0, total = 0;
  for (auto n : nodes) {
    ++total;
    alive += flag(n, "alive") ? 1 : 0;
  }
  std::printf("cluster %s: %zu of %zu nodes alive; this node %lld; Global applied through %lld\n\n",
              str(doc, "clusterId").c_str(), alive, total, static_cast<long long>(num(doc, "self")),
              static_cast<long long>(num(doc, "globalApplied")));
  if (str(doc, "health") == "degraded") {
    std::printf(
        "HEALTH DEGRADED: %lld commit-log offsets were deleted before they were digested "
        "(events lost; see lostRanges and the warnings)\n\n",
        static_cast<long long>(num(doc, "lostOffsets")));
  }
  simdjson::dom::element repl;
  if (!doc["replication"].get(repl)) {
    std::printf(
        "segments: %lld, replication factor %lld; %lld under-replicated (%lld bytes), "
        "%lld without a live copy, %lld with no copy, %lld staged merges\n\n",
        static_cast<long long>(num(repl, "segments")), static_cast<long long>(num(repl, "factor")),
        static_cast<long long>(num(repl, "underReplicated")),
        static_cast<long long>(num(repl, "underReplicatedBytes")),
        static_cast<long long>(num(repl, "withoutLiveCopy")),
        static_cast<long long>(num(repl, "lost")),
        static_cast<long long>(num(repl, "stagedMerges")));
  }
  std::printf("%-12s %-22s %-6s %-10s %-10s %-9s %-12s %s\n", "NODE", "ADDRESS", "ALIVE",
              "HEARTBEAT", "PARTITIONS", "COPIES", "BYTES", "REPAIR (pending/copied/corrupt)");
  for (auto n : nodes) {
    std::string id = std::to_string(num(n, "id")) + (flag(n, "self") ? "*" : "");
    std::string hb = flag(n, "alive") || num(n, "lastHeartbeatMsAgo") >= 0
                         ? std::to_string(num(n, "lastHeartbeatMsAgo")) + " ms"
                         : "never";
    std::string repair = "-";
    simdjson::dom::element r;
    if (!n["repair"].get(r) && r.is_object()) {
      repair = std::to_string(num(r, "pendingSegments")) + "/" +
               std::to_string(num(r, "copiedSegments")) + "/" +
               std::to_string(num(r, "corruptDetected"));
    }
    std::printf("%-12s %-22s %-6s %-10s %-10lld %-9lld %-12lld %s\n", id.c_str(),
                str(n, "address").c_str(), flag(n, "alive") ? "yes" : "NO", hb.c_str(),
                static_cast<long long>(num(n, "partitionsOwned")),
                static_cast<long long>(num(n, "segments")),
                static_cast<long long>(num(n, "segmentBytes")), repair.c_str());
  }
  std::printf("\n%-9s %-12s %-6s %-7s %-10s %-10s %-10s %-10s %-8s %s\n", "PARTITION", "OWNER",
              "EPOCH", "ALIVE", "REPLAY", "SAFE", "LOG START", "LOG END", "LAG", "BUFFERED");
  auto opt = [](int64_t v) { return v < 0 ? std::string("?") : std::to_string(v); };
  for (auto p : partitions) {
    std::printf("%-9lld %-12s %-6lld %-7s %-10lld %-10lld %-10s %-10s %-8s %lld\n",
                static_cast<long long>(num(p, "partition")),
                num(p, "owner") > 0 ? std::to_string(num(p, "owner")).c_str() : "-",
                static_cast<long long>(num(p, "epoch")), flag(p, "ownerAlive") ? "yes" : "NO",
                static_cast<long long>(num(p, "replayPoint")),
                static_cast<long long>(num(p, "safeOffset")), opt(num(p, "logStart")).c_str(),
                opt(num(p, "logEnd")).c_str(), opt(num(p, "lag")).c_str(),
                static_cast<long long>(num(p, "bufferedEvents")));
  }
  size_t nw = 0;
  for (auto w : warnings) {
    std::string_view text;
    if (w.get(text)) continue;
    if (nw++ == 0) std::printf("\nwarnings:\n");
    std::printf("  - %.*s\n", static_cast<int>(text.size()), text.data());
  }
  if (nw == 0) std::printf("\nno warnings\n");
  return 0;
}

int RunStatus(const std::string& url, bool cluster, bool json) {
  auto r =
      sediment::http::Fetch("GET", url + (cluster ? "/api/v1/cluster" : "/api/v1/status"), {}, "");
  if (!r.ok()) return Fail(r.status().ToString());
  if (r->status != 200)
    return Fail("server answered " + std::to_string(r->status) + ": " + r->body);
  if (cluster && !json) return PrintCluster(r->body);
  std::printf("%s\n", r->body.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"sediment: a durable, fast log management server"};
  app.require_subcommand(1);

  sediment::ServerConfig config;
  auto* server = app.add_subcommand("server", "run a sediment node");
  server->add_option("--data-dir", config.data_dir, "data directory")
      ->envname("SEDIMENT_DATA_DIR")
      ->capture_default_str();
  server->add_option("--listen", config.listen, "HOST:PORT to serve HTTP on")
      ->envname("SEDIMENT_LISTEN")
      ->capture_default_str();
  server
      ->add_option("--ingest-token", config.ingest_tokens,
                   "REPO:TOKEN, repeatable; creates the repository if missing")
      ->envname("SEDIMENT_INGEST_TOKEN")
      ->delimiter(',');
  server->add_option("--api-token", config.api_tokens, "token for queries and admin, repeatable")
      ->envname("SEDIMENT_API_TOKEN")
      ->delimiter(',');
  server
      ->add_option("--ingest-partitions,--partitions", config.partitions,
                   "ingest partitions (default 8 on the embedded log, fixed when the data dir is "
                   "created; 24 on Kafka)")
      ->envname("SEDIMENT_INGEST_PARTITIONS")
      ->check(CLI::Range(1, 10000));
  server
      ->add_option("--kafka-brokers", config.kafka_brokers,
                   "host:port,... of a Kafka cluster to use as the commit log (default: the "
                   "embedded log)")
      ->envname("SEDIMENT_KAFKA_BROKERS");
  server->add_option("--kafka-topic-prefix", config.kafka_topic_prefix, "prefix of the topics")
      ->envname("SEDIMENT_KAFKA_TOPIC_PREFIX")
      ->capture_default_str();
  server
      ->add_option("--kafka-replication-factor", config.kafka_replication_factor,
                   "replication factor of the topics sediment creates")
      ->envname("SEDIMENT_KAFKA_REPLICATION_FACTOR")
      ->capture_default_str()
      ->check(CLI::Range(1, 32));
  server
      ->add_option("--kafka-min-insync-replicas", config.kafka_min_insync_replicas,
                   "min.insync.replicas of the topics sediment creates")
      ->envname("SEDIMENT_KAFKA_MIN_INSYNC_REPLICAS")
      ->capture_default_str()
      ->check(CLI::Range(1, 32));
  server
      ->add_option("--kafka-properties-file", config.kafka_properties_file,
                   "librdkafka properties (key=value lines: security.protocol, sasl.*, ssl.*); "
                   "SEDIMENT_KAFKA_<NAME> variables add more (SEDIMENT_KAFKA_SASL_MECHANISM -> "
                   "sasl.mechanism)")
      ->envname("SEDIMENT_KAFKA_PROPERTIES_FILE");
  server
      ->add_option("--kafka-produce-timeout-ms", config.kafka_produce_timeout_ms,
                   "ingest answers 503 when Kafka has not acknowledged within this time")
      ->envname("SEDIMENT_KAFKA_PRODUCE_TIMEOUT_MS")
      ->capture_default_str();
  server
      ->add_flag("--allow-kafka-retention", config.allow_kafka_retention,
                 "start even when the existing Kafka ingest or global topic has a finite "
                 "retention.ms or retention.bytes (Kafka may then delete events before they are in "
                 "segments; the digest reports such losses in the status)")
      ->envname("SEDIMENT_ALLOW_KAFKA_RETENTION");
  server->add_option("--max-body-bytes", config.max_body_bytes, "largest accepted request body")
      ->envname("SEDIMENT_MAX_BODY_BYTES")
      ->capture_default_str();
  server->add_option("--max-event-bytes", config.max_event_bytes, "largest accepted event")
      ->envname("SEDIMENT_MAX_EVENT_BYTES")
      ->capture_default_str();
  server
      ->add_option("--flush-age-ms", config.flush_age_ms,
                   "flush a datasource's buffer to a segment after this many ms")
      ->envname("SEDIMENT_FLUSH_AGE_MS")
      ->capture_default_str();
  server->add_option("--flush-bytes", config.flush_bytes, "flush a buffer at this size")
      ->envname("SEDIMENT_FLUSH_BYTES")
      ->capture_default_str();
  server
      ->add_option("--log-file-bytes", config.log_file_bytes,
                   "embedded commit log: start a new file once a partition's file reaches this "
                   "size")
      ->envname("SEDIMENT_LOG_FILE_BYTES")
      ->capture_default_str()
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 40));
  server->add_option("--query-threads", config.query_threads, "threads per query")
      ->envname("SEDIMENT_QUERY_THREADS")
      ->capture_default_str();
  server
      ->add_option("--query-timeout-ms", config.query_timeout_ms,
                   "a query that runs longer fails with 408 (0: no limit)")
      ->envname("SEDIMENT_QUERY_TIMEOUT_MS")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{86400000}));
  server
      ->add_option("--query-memory-bytes", config.query_memory_bytes,
                   "a query whose partial states (groups, kept rows) need more on one node fails "
                   "with 413 (0: no bound)")
      ->envname("SEDIMENT_QUERY_MEMORY_BYTES")
      ->capture_default_str();
  server
      ->add_option("--max-query-jobs", config.max_query_jobs,
                   "query jobs and live queries running at once (429 beyond)")
      ->envname("SEDIMENT_MAX_QUERY_JOBS")
      ->capture_default_str()
      ->check(CLI::Range(1, 10000));
  server
      ->add_option("--query-job-expiry-ms", config.query_job_expiry_ms,
                   "a query job not polled for this long is cancelled and forgotten (0: never)")
      ->envname("SEDIMENT_QUERY_JOB_EXPIRY_MS")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{86400000}));
  server
      ->add_option("--advertise", config.advertise,
                   "HOST:PORT other nodes and clients use to reach this node (default: the "
                   "listen address)")
      ->envname("SEDIMENT_ADVERTISE");
  server
      ->add_option("--cluster-secret", config.cluster_secret,
                   "secret for node-to-node requests (default: one the cluster generates and "
                   "keeps in its metadata)")
      ->envname("SEDIMENT_CLUSTER_SECRET");
  server
      ->add_option("--digest-session-timeout-ms", config.digest_session_timeout_ms,
                   "Kafka consumer-group session timeout: a silent node keeps its partitions "
                   "this long")
      ->envname("SEDIMENT_DIGEST_SESSION_TIMEOUT_MS")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1000}, int64_t{1800000}));
  server
      ->add_option("--heartbeat-timeout-ms", config.heartbeat_timeout_ms,
                   "a node silent on the chatter topic this long is shown dead")
      ->envname("SEDIMENT_HEARTBEAT_TIMEOUT_MS")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{200}, int64_t{600000}));
  server
      ->add_option("--peer-progress-timeout-ms", config.peer_progress_timeout_ms,
                   "a query's request to another node that brings no answer bytes this long is "
                   "abandoned and its data read elsewhere or named in a warning (0: none)")
      ->envname("SEDIMENT_PEER_PROGRESS_TIMEOUT_MS")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{3600000}));

  server
      ->add_option("--replication-factor", config.replication_factor,
                   "segment copies on different nodes (sets the cluster's value; default: keep "
                   "it, which starts as 2 once two nodes joined, else 1)")
      ->envname("SEDIMENT_REPLICATION_FACTOR")
      ->check(CLI::Range(0, 16));
  server
      ->add_option("--repair-grace-ms", config.repair_grace_ms,
                   "a node silent this long is gone: its segment copies are re-created elsewhere")
      ->envname("SEDIMENT_REPAIR_GRACE_MS")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{86400000}));
  server
      ->add_option("--replication-interval-ms", config.replication_interval_ms,
                   "how often a node compares the copies it holds with the ones it should hold")
      ->envname("SEDIMENT_REPLICATION_INTERVAL_MS")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{50}, int64_t{600000}));
  server
      ->add_option("--replication-bytes-per-second", config.replication_bytes_per_second,
                   "throttle for copying and scrubbing segments")
      ->envname("SEDIMENT_REPLICATION_BYTES_PER_SECOND")
      ->capture_default_str()
      ->check(CLI::Range(uint64_t{1} << 16, uint64_t{1} << 40));
  server
      ->add_option("--scrub-interval-ms", config.scrub_interval_ms,
                   "full checksum pass over the local segment copies (0: never)")
      ->envname("SEDIMENT_SCRUB_INTERVAL_MS")
      ->capture_default_str();
  server
      ->add_option("--file-deletion-delay-ms", config.file_deletion_delay_ms,
                   "a segment file that left the metadata is deleted this long after (running "
                   "queries may still read it)")
      ->envname("SEDIMENT_FILE_DELETION_DELAY_MS")
      ->capture_default_str();
  server
      ->add_option("--safe-offset-interval-ms", config.safe_offset_interval_ms,
                   "how often a partition owner truncates the commit log to the safe offset")
      ->envname("SEDIMENT_SAFE_OFFSET_INTERVAL_MS")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{100}, int64_t{3600000}));
  server
      ->add_option("--merge-target-bytes", config.merge_target_bytes,
                   "merge small segments of a datasource into segments of about this size")
      ->envname("SEDIMENT_MERGE_TARGET_BYTES")
      ->capture_default_str();
  server
      ->add_option("--merge-small-bytes", config.merge_small_bytes,
                   "segments below this size are merged (0: no merges)")
      ->envname("SEDIMENT_MERGE_SMALL_BYTES")
      ->capture_default_str();
  server
      ->add_option("--merge-min-age-ms", config.merge_min_age_ms,
                   "merge a run of small segments once its oldest is this old (or the run "
                   "reaches the target size)")
      ->envname("SEDIMENT_MERGE_MIN_AGE_MS")
      ->capture_default_str();
  server
      ->add_option("--merge-interval-ms", config.merge_interval_ms, "how often merges are planned")
      ->envname("SEDIMENT_MERGE_INTERVAL_MS")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{50}, int64_t{3600000}));
  server
      ->add_option("--global-snapshot-every", config.global_snapshot_every,
                   "write a Global snapshot after this many metadata events")
      ->envname("SEDIMENT_GLOBAL_SNAPSHOT_EVERY")
      ->capture_default_str()
      ->check(CLI::Range(uint64_t{1}, uint64_t{100000000}));
  server
      ->add_option("--maintenance-interval-ms", config.maintenance_interval_ms,
                   "how often retention and the global topic's truncation run")
      ->envname("SEDIMENT_MAINTENANCE_INTERVAL_MS")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{50}, int64_t{3600000}));

  server
      ->add_option("--bucket-endpoint", config.bucket_endpoint,
                   "S3-compatible endpoint (http(s)://HOST:PORT); turns bucket storage on")
      ->envname("SEDIMENT_BUCKET_ENDPOINT");
  server->add_option("--bucket-name", config.bucket_name, "bucket name")
      ->envname("SEDIMENT_BUCKET_NAME");
  server->add_option("--bucket-region", config.bucket_region, "bucket region (SigV4)")
      ->envname("SEDIMENT_BUCKET_REGION")
      ->capture_default_str();
  server
      ->add_option("--bucket-prefix", config.bucket_prefix,
                   "key prefix inside the bucket, used as given (end it with '/' for a folder)")
      ->envname("SEDIMENT_BUCKET_PREFIX");
  server
      ->add_option("--bucket-path-style", config.bucket_path_style,
                   "path-style URLs (endpoint/bucket/key) instead of virtual-hosted ones")
      ->envname("SEDIMENT_BUCKET_PATH_STYLE")
      ->capture_default_str();
  server
      ->add_option("--bucket-access-key", config.bucket_access_key,
                   "access key id (default: AWS_ACCESS_KEY_ID)")
      ->envname("SEDIMENT_BUCKET_ACCESS_KEY");
  server
      ->add_option("--bucket-secret-key", config.bucket_secret_key,
                   "secret access key (default: AWS_SECRET_ACCESS_KEY)")
      ->envname("SEDIMENT_BUCKET_SECRET_KEY");
  server->add_flag("--bucket-create", config.bucket_create, "create the bucket when missing")
      ->envname("SEDIMENT_BUCKET_CREATE");
  server
      ->add_option("--upload-interval-ms", config.upload_interval_ms,
                   "how often segments not in the bucket yet are looked for")
      ->envname("SEDIMENT_UPLOAD_INTERVAL_MS")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{50}, int64_t{3600000}));
  server
      ->add_option("--bucket-snapshot-interval-ms", config.bucket_snapshot_interval_ms,
                   "how often a Global snapshot is uploaded (when it changed)")
      ->envname("SEDIMENT_BUCKET_SNAPSHOT_INTERVAL_MS")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{100}, int64_t{86400000}));
  server
      ->add_option("--bucket-snapshots-kept", config.bucket_snapshots_kept,
                   "Global snapshots kept in the bucket")
      ->envname("SEDIMENT_BUCKET_SNAPSHOTS_KEPT")
      ->capture_default_str()
      ->check(CLI::Range(1u, 1000u));
  server
      ->add_option("--bucket-gc-grace-ms", config.bucket_gc_grace_ms,
                   "bucket garbage collection deletes a segment object no segment references "
                   "only once it is at least this old")
      ->envname("SEDIMENT_BUCKET_GC_GRACE_MS")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{365} * 86'400'000));
  server
      ->add_option("--cache-max-bytes", config.cache_max_bytes,
                   "bucket storage: evict local segment copies (least recently used first) above "
                   "this many bytes (0: no bound)")
      ->envname("SEDIMENT_CACHE_MAX_BYTES")
      ->capture_default_str();
  server
      ->add_option("--cache-max-percent", config.cache_max_percent,
                   "bucket storage: the same bound as a percentage of the data dir's file system "
                   "(0: none; with --cache-max-bytes the smaller applies)")
      ->envname("SEDIMENT_CACHE_MAX_PERCENT")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 100.0));
  server
      ->add_flag("--recover-from-bucket", config.recover_from_bucket,
                 "disaster recovery: on an empty data dir and an empty commit log, start the "
                 "cluster from the bucket's newest Global snapshot and segments")
      ->envname("SEDIMENT_RECOVER_FROM_BUCKET");

  std::string url = "http://127.0.0.1:8080";
  std::string token;
  auto* ingest =
      app.add_subcommand("ingest", "send log lines (files or stdin) to /api/v1/ingest/raw");
  std::vector<std::string> files;
  size_t batch_lines = 1000;
  ingest->add_option("--url", url, "server URL")->envname("SEDIMENT_URL")->capture_default_str();
  ingest->add_option("--token", token, "ingest token")
      ->envname("SEDIMENT_INGEST_TOKEN")
      ->required();
  ingest->add_option("--batch-lines", batch_lines, "lines per request")->capture_default_str();
  ingest->add_option("files", files, "files to send ('-' or none: stdin)");

  auto* query = app.add_subcommand("query", "run a query and print the result");
  std::string repo = "sandbox", query_string, start = "24h", end, format = "table";
  query->add_option("--url", url, "server URL")->envname("SEDIMENT_URL")->capture_default_str();
  query->add_option("--token", token, "API token")->envname("SEDIMENT_API_TOKEN")->required();
  query->add_option("--repo", repo, "repository")->capture_default_str();
  query->add_option("--start", start, "start: relative (15m, 24h, 7d), epoch ms or ISO-8601")
      ->capture_default_str();
  query->add_option("--end", end, "end (default now)");
  query->add_option("--format", format, "table, json or ndjson")
      ->check(CLI::IsMember({"table", "json", "ndjson"}))
      ->capture_default_str();
  query->add_option("query", query_string, "LogScale query, e.g. 'error | count()'")->required();

  auto* status =
      app.add_subcommand("status",
                         "print the node's status (JSON), or with --cluster the cluster's nodes, "
                         "partitions and warnings");
  status->add_option("--url", url, "server URL")->envname("SEDIMENT_URL")->capture_default_str();
  bool status_cluster = false, status_json = false;
  status->add_flag("--cluster", status_cluster, "the cluster view (GET /api/v1/cluster) as tables");
  status->add_flag("--json", status_json, "with --cluster: the raw JSON");

  CLI11_PARSE(app, argc, argv);
  if (server->parsed()) {
    config.kafka_properties = sediment::KafkaPropertiesFromEnv(
        environ, {"SEDIMENT_KAFKA_BROKERS", "SEDIMENT_KAFKA_TOPIC_PREFIX",
                  "SEDIMENT_KAFKA_REPLICATION_FACTOR", "SEDIMENT_KAFKA_MIN_INSYNC_REPLICAS",
                  "SEDIMENT_KAFKA_PROPERTIES_FILE", "SEDIMENT_KAFKA_PRODUCE_TIMEOUT_MS"});
    return RunServer(config);
  }
  if (ingest->parsed()) return RunIngest(url, token, files, batch_lines);
  if (query->parsed()) return RunQuery(url, token, repo, query_string, start, end, format);
  if (status->parsed()) return RunStatus(url, status_cluster, status_json);
  return 1;
}
