// The server flags, declared once. To add a flag: add the ServerConfig member (server.h), one
// entry in the section's function below, then regenerate the README table
// (`sediment --print-flag-table`, between the flags markers); tests/e2e/test_flags.py fails until
// the README matches.
#include "cli/flags.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdint>
#include <span>
#include <type_traits>
#include <utility>

namespace sediment::cli {
namespace {

using S = FlagSection;
using Check = std::function<void(CLI::Option*)>;

// What a flag may add to its declaration: bounds (a CLI::Range of the given type, checked for the
// command line and the environment alike) and a described default.
struct Extra {
  Check check;
  std::string bounds;
  std::string described;

  Extra Described(std::string text) && {
    described = std::move(text);
    return std::move(*this);
  }
};

// Inclusive bounds; R is the type CLI11 converts the text to for the check (as main.cc had it).
template <typename R>
Extra Bounds(R lo, R hi) {
  return Extra{[lo, hi](CLI::Option* o) { o->check(CLI::Range(lo, hi)); },
               fmt::format("{} to {}", lo, hi), ""};
}

Extra Described(std::string text) { return Extra{}.Described(std::move(text)); }

std::string ToText(const std::string& v) { return v; }
std::string ToText(bool v) { return v ? "true" : "false"; }
std::string ToText(const std::vector<std::string>& v) {
  return fmt::format("{}", fmt::join(v, ","));
}
template <typename T>
requires std::is_arithmetic_v<T> std::string ToText(T v) { return fmt::format("{}", v); }

std::vector<std::string> SplitNames(const std::string& names) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= names.size()) {
    size_t comma = names.find(',', start);
    if (comma == std::string::npos) comma = names.size();
    out.push_back(names.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

template <typename T>
constexpr FlagKind KindOf() {
  if constexpr (std::is_same_v<T, bool>) {
    return FlagKind::kBool;
  } else if constexpr (std::is_same_v<T, std::string>) {
    return FlagKind::kString;
  } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
    return FlagKind::kStringList;
  } else if constexpr (std::is_floating_point_v<T>) {
    return FlagKind::kFloat;
  } else {
    static_assert(std::is_integral_v<T>, "a flag's member is a bool, a number, a string or a list");
    return FlagKind::kInteger;
  }
}

template <typename T>
ServerFlag Base(S section, const std::string& names, std::string env, std::string metavar,
                T ServerConfig::*member, T def, std::string help, Extra extra) {
  ServerFlag f;
  f.section = section;
  f.names = SplitNames(names);
  f.env = std::move(env);
  f.metavar = std::move(metavar);
  f.help = std::move(help);
  f.default_value = ToText(def);
  f.default_described = std::move(extra.described);
  f.bounds = std::move(extra.bounds);
  f.set_default = [member, def](ServerConfig& c) { c.*member = def; };
  f.value_text = [member](const ServerConfig& c) { return ToText(c.*member); };
  f.kind = KindOf<T>();
  if constexpr (std::is_same_v<T, std::vector<std::string>>) {
    f.list_value = [member](const ServerConfig& c) { return c.*member; };
  }
  f.copy = [member](const ServerConfig& from, ServerConfig& to) { to.*member = from.*member; };
  return f;
}

// A flag taking one value. The default is shown in --help (CLI11's capture_default_str) unless
// it is described in prose or empty.
template <typename T>
ServerFlag Value(S section, const std::string& names, std::string env, std::string metavar,
                 T ServerConfig::*member, std::type_identity_t<T> def, std::string help,
                 Extra extra = {}) {
  Check check = extra.check;
  ServerFlag f = Base<T>(section, names, std::move(env), std::move(metavar), member, std::move(def),
                         std::move(help), std::move(extra));
  bool capture = f.default_described.empty() && !f.default_value.empty();
  f.add = [names, env = f.env, member, capture, check](CLI::App& app, ServerConfig& c,
                                                       const std::string& help) {
    CLI::Option* o = app.add_option(names, c.*member, help)->envname(env);
    if (capture) o->capture_default_str();
    if (check) check(o);
    return o;
  };
  return f;
}

// A repeatable flag; each value may also be a comma-separated list (so may the variable's).
ServerFlag List(S section, const std::string& names, std::string env, std::string metavar,
                std::vector<std::string> ServerConfig::*member, std::string help) {
  ServerFlag f = Base<std::vector<std::string>>(section, names, std::move(env), std::move(metavar),
                                                member, {}, std::move(help), {});
  f.repeatable = true;
  f.add = [names, env = f.env, member](CLI::App& app, ServerConfig& c, const std::string& help) {
    return app.add_option(names, c.*member, help)->envname(env)->delimiter(',');
  };
  return f;
}

// A switch (no value; off by default). CLI11 flag syntax: --foo, --foo=false; the variable takes
// true/false/1/0/on/off/yes/no.
ServerFlag Switch(S section, const std::string& names, std::string env, bool ServerConfig::*member,
                  std::string help) {
  ServerFlag f = Base<bool>(section, names, std::move(env), "", member, false, std::move(help), {});
  f.add = [names, env = f.env, member](CLI::App& app, ServerConfig& c, const std::string& help) {
    return app.add_flag(names, c.*member, help)->envname(env);
  };
  return f;
}

// A flag whose value --print-config masks (tokens, keys, secrets).
ServerFlag Secret(ServerFlag f) {
  f.secret = true;
  return f;
}

// ---- the flags, by section ---------------------------------------------------------------------

void NodeFlags(std::vector<ServerFlag>& f) {
  f.push_back(Value(S::kNode, "--data-dir", "SEDIMENT_DATA_DIR", "DIR", &ServerConfig::data_dir,
                    "./sediment-data", "data directory: commit log, Global snapshots, segments"));
  f.push_back(Value(S::kNode, "--listen", "SEDIMENT_LISTEN", "HOST:PORT", &ServerConfig::listen,
                    "127.0.0.1:8080", "HOST:PORT to serve HTTP on"));
  f.push_back(
      Secret(List(S::kNode, "--ingest-token", "SEDIMENT_INGEST_TOKEN", "REPO:TOKEN[:PARSER]",
                  &ServerConfig::ingest_tokens,
                  "ingest token of a repository, repeatable (or comma-separated); creates the "
                  "repository if missing; PARSER: the parser its events get (a built-in such as "
                  "accesslog, or a custom parser of the repository)")));
  f.push_back(
      Secret(List(S::kNode, "--api-token", "SEDIMENT_API_TOKEN", "TOKEN", &ServerConfig::api_tokens,
                  "token for queries and admin, repeatable (or comma-separated)")));
  f.push_back(List(S::kNode, "--metrics-allow", "SEDIMENT_METRICS_ALLOW", "CIDR",
                   &ServerConfig::metrics_allow,
                   "client address range (e.g. 10.0.0.0/8) that may read GET /metrics without an "
                   "API token, repeatable (or comma-separated)"));
  f.push_back(Value(S::kNode, "--max-body-bytes", "SEDIMENT_MAX_BODY_BYTES", "N",
                    &ServerConfig::max_body_bytes, size_t{32} << 20,
                    "largest accepted request body (larger requests get 413)"));
  f.push_back(Value(S::kNode, "--max-event-bytes", "SEDIMENT_MAX_EVENT_BYTES", "N",
                    &ServerConfig::max_event_bytes, size_t{1} << 20,
                    "largest accepted event (larger events get 413)"));
  f.push_back(Value(S::kNode, "--max-json-depth", "SEDIMENT_MAX_JSON_DEPTH", "N",
                    &ServerConfig::max_json_depth, 64,
                    "deepest nesting of objects and arrays in an ingested JSON event (413 beyond)",
                    Bounds(1, 10000)));
  f.push_back(Value(S::kNode, "--max-fields-per-event", "SEDIMENT_MAX_FIELDS_PER_EVENT", "N",
                    &ServerConfig::max_fields_per_event, 1000,
                    "most fields one ingested event may have once flattened (413 beyond)",
                    Bounds(1, 1000000)));
  f.push_back(Value(S::kNode, "--shutdown-timeout-ms", "SEDIMENT_SHUTDOWN_TIMEOUT_MS", "N",
                    &ServerConfig::shutdown_timeout_ms, 30000,
                    "on SIGTERM or SIGINT: stop accepting, answer the requests in progress, flush "
                    "the digest buffers and leave the cluster within this long, then exit (a "
                    "second signal, or this long passing, exits at once)",
                    Bounds(int64_t{1000}, int64_t{3600000})));
}

void HttpFlags(std::vector<ServerFlag>& f) {
  f.push_back(
      Value(S::kHttp, "--http-threads", "SEDIMENT_HTTP_THREADS", "N", &ServerConfig::http_threads,
            2, "I/O threads serving every connection (reads, writes, deadlines)", Bounds(1, 256)));
  f.push_back(Value(S::kHttp, "--http-handler-threads", "SEDIMENT_HTTP_HANDLER_THREADS", "N",
                    &ServerConfig::http_handler_threads, 256,
                    "most requests handled at once (ingest waiting for the commit log, queries); "
                    "further complete requests wait their turn",
                    Bounds(1, 100000)));
  f.push_back(Value(S::kHttp, "--max-connections", "SEDIMENT_MAX_CONNECTIONS", "N",
                    &ServerConfig::max_connections, 10000,
                    "open client connections (503 with Retry-After beyond)", Bounds(1, 1000000)));
  f.push_back(Value(S::kHttp, "--max-connections-per-address",
                    "SEDIMENT_MAX_CONNECTIONS_PER_ADDRESS", "N",
                    &ServerConfig::max_connections_per_address, 1000,
                    "open connections from one client address (503 with Retry-After beyond)",
                    Bounds(1, 1000000)));
  f.push_back(Value(S::kHttp, "--http-header-timeout-ms", "SEDIMENT_HTTP_HEADER_TIMEOUT_MS", "N",
                    &ServerConfig::http_header_timeout_ms, 10000,
                    "a request whose whole header has not arrived this long after its first byte "
                    "is dropped (408)",
                    Bounds(int64_t{100}, int64_t{3600000})));
  f.push_back(Value(S::kHttp, "--http-body-min-bytes-per-second",
                    "SEDIMENT_HTTP_BODY_MIN_BYTES_PER_SECOND", "N",
                    &ServerConfig::http_body_min_bytes_per_second, uint64_t{1024},
                    "a request body arriving slower than this on average (after the first "
                    "header timeout's worth of grace) is dropped (408)"));
  f.push_back(Value(S::kHttp, "--http-idle-timeout-ms", "SEDIMENT_HTTP_IDLE_TIMEOUT_MS", "N",
                    &ServerConfig::http_idle_timeout_ms, 60000,
                    "an idle keep-alive connection is closed after this long; also how long a "
                    "client may read nothing of an answer",
                    Bounds(int64_t{100}, int64_t{86400000})));
  f.push_back(Value(S::kHttp, "--tls-cert", "SEDIMENT_TLS_CERT", "FILE",
                    &ServerConfig::tls_cert_file, "",
                    "PEM certificate chain: the listener speaks HTTPS only (with --tls-key)"));
  f.push_back(Value(S::kHttp, "--tls-key", "SEDIMENT_TLS_KEY", "FILE", &ServerConfig::tls_key_file,
                    "", "PEM private key of --tls-cert"));
  f.push_back(Value(S::kHttp, "--tls-ca", "SEDIMENT_TLS_CA", "FILE", &ServerConfig::tls_ca_file, "",
                    "PEM CA bundle that node-to-node calls verify peers against (peers are "
                    "called over HTTPS when the listener is TLS)"));
}

void CommitLogFlags(std::vector<ServerFlag>& f) {
  f.push_back(Value(S::kCommitLog, "--ingest-partitions,--partitions", "SEDIMENT_INGEST_PARTITIONS",
                    "N", &ServerConfig::partitions, 0,
                    "partitions of the ingest log (embedded: fixed when the data dir is created) "
                    "or of the Kafka ingest topic",
                    Bounds(1, 10000).Described("8 embedded, 24 on Kafka")));
  f.push_back(Value(S::kCommitLog, "--log-file-bytes", "SEDIMENT_LOG_FILE_BYTES", "N",
                    &ServerConfig::log_file_bytes, uint64_t{64} << 20,
                    "embedded commit log: a partition's file is sealed and a new one started at "
                    "this size",
                    Bounds(uint64_t{1}, uint64_t{1} << 40)));
  f.push_back(Value(S::kCommitLog, "--log-file-age-ms", "SEDIMENT_LOG_FILE_AGE_MS", "N",
                    &ServerConfig::log_file_age_ms, 10000,
                    "embedded ingest log: a partition's file is also sealed this long after its "
                    "first record (0 = only by size), so digested records are deleted even when "
                    "no more come",
                    Bounds(int64_t{0}, int64_t{86400000})));
  f.push_back(Value(S::kCommitLog, "--flush-age-ms", "SEDIMENT_FLUSH_AGE_MS", "N",
                    &ServerConfig::flush_age_ms, 2000,
                    "flush a datasource's buffer to a segment after this long (an event is in a "
                    "segment within about this long)"));
  f.push_back(Value(S::kCommitLog, "--flush-bytes", "SEDIMENT_FLUSH_BYTES", "N",
                    &ServerConfig::flush_bytes, size_t{32} << 20,
                    "flush a datasource's buffer to a segment at this size"));
  f.push_back(Value(S::kCommitLog, "--digest-nice", "SEDIMENT_DIGEST_NICE", "N",
                    &ServerConfig::digest_nice, 5,
                    "nice value of the threads that digest the commit log into segments: above "
                    "0, acknowledging ingest gets the CPU first and digesting catches up from the "
                    "log (0: same priority)",
                    Bounds(0, 19)));
  f.push_back(Value(S::kCommitLog, "--datasource-shard-bytes-per-second",
                    "SEDIMENT_DATASOURCE_SHARD_BYTES_PER_SECOND", "N",
                    &ServerConfig::datasource_shard_bytes_per_second, uint64_t{0},
                    "datasource autosharding: a datasource ingesting more than this many bytes of "
                    "events per second per ingest partition it uses is spread over twice as many "
                    "partitions (each request's events of a datasource stay in one partition, in "
                    "order); 0 (the default): off, every datasource on one partition; "
                    "4194304 (4 MiB) is a starting point"));
  f.push_back(Value(S::kCommitLog, "--max-datasource-shards", "SEDIMENT_MAX_DATASOURCE_SHARDS", "N",
                    &ServerConfig::max_datasource_shards, 8,
                    "most ingest partitions one datasource is spread over (never more than the "
                    "log's partitions)",
                    Bounds(1, 1024)));
}

void KafkaFlags(std::vector<ServerFlag>& f) {
  f.push_back(Value(S::kKafka, "--kafka-brokers", "SEDIMENT_KAFKA_BROKERS", "H:P,...",
                    &ServerConfig::kafka_brokers, "",
                    "a Kafka cluster to use as the commit log instead of the embedded one",
                    Described("the embedded log")));
  f.push_back(Value(S::kKafka, "--kafka-topic-prefix", "SEDIMENT_KAFKA_TOPIC_PREFIX", "PREFIX",
                    &ServerConfig::kafka_topic_prefix, "sediment-",
                    "prefix of the topics: `PREFIX`ingest, `PREFIX`global, `PREFIX`chatter"));
  f.push_back(Value(S::kKafka, "--kafka-replication-factor", "SEDIMENT_KAFKA_REPLICATION_FACTOR",
                    "N", &ServerConfig::kafka_replication_factor, 1,
                    "replication factor of the topics sediment creates", Bounds(1, 32)));
  f.push_back(Value(S::kKafka, "--kafka-min-insync-replicas", "SEDIMENT_KAFKA_MIN_INSYNC_REPLICAS",
                    "N", &ServerConfig::kafka_min_insync_replicas, 1,
                    "`min.insync.replicas` of the topics sediment creates", Bounds(1, 32)));
  f.push_back(Value(S::kKafka, "--kafka-properties-file", "SEDIMENT_KAFKA_PROPERTIES_FILE", "FILE",
                    &ServerConfig::kafka_properties_file, "",
                    "librdkafka properties (key=value lines: `security.protocol`, `sasl.*`, "
                    "`ssl.*`); `SEDIMENT_KAFKA_<NAME>` variables add more "
                    "(`SEDIMENT_KAFKA_SASL_MECHANISM` -> `sasl.mechanism`; "
                    "`SEDIMENT_KAFKA_DEBUG=eos` logs the producer's idempotence state changes)"));
  f.push_back(Value(S::kKafka, "--kafka-produce-timeout-ms", "SEDIMENT_KAFKA_PRODUCE_TIMEOUT_MS",
                    "N", &ServerConfig::kafka_produce_timeout_ms, 10000,
                    "ingest answers 503 (with Retry-After) when Kafka has not acknowledged within "
                    "this time"));
  f.push_back(Value(S::kKafka, "--kafka-produce-linger-ms", "SEDIMENT_KAFKA_PRODUCE_LINGER_MS", "N",
                    &ServerConfig::kafka_produce_linger_ms, 1,
                    "how long the producer holds a record to batch it with others (librdkafka "
                    "`linger.ms`): every ingest request waits for its record, so this adds to "
                    "its latency",
                    Bounds(int64_t{0}, int64_t{1000})));
  f.push_back(Switch(S::kKafka, "--allow-kafka-retention", "SEDIMENT_ALLOW_KAFKA_RETENTION",
                     &ServerConfig::allow_kafka_retention,
                     "start even when the existing Kafka ingest or global topic has a finite "
                     "`retention.ms` or `retention.bytes` (a warning is logged; Kafka may then "
                     "delete events before they are in segments, and the status reports such "
                     "losses)"));
}

void QueryFlags(std::vector<ServerFlag>& f) {
  f.push_back(Value(S::kQueries, "--query-threads", "SEDIMENT_QUERY_THREADS", "N",
                    &ServerConfig::query_threads, 0,
                    "threads per query (0: one per core of the machine)", Bounds(0, 1024)));
  f.push_back(Value(S::kQueries, "--query-timeout-ms", "SEDIMENT_QUERY_TIMEOUT_MS", "N",
                    &ServerConfig::query_timeout_ms, 300000,
                    "a query that runs longer fails with 408 (0: no limit)",
                    Bounds(int64_t{0}, int64_t{86400000})));
  f.push_back(Value(S::kQueries, "--query-memory-bytes", "SEDIMENT_QUERY_MEMORY_BYTES", "N",
                    &ServerConfig::query_memory_bytes, uint64_t{1} << 30,
                    "a query whose partial states (groups, kept rows) need more on one node fails "
                    "with 413 (0: no bound)"));
  f.push_back(Value(S::kQueries, "--max-query-jobs", "SEDIMENT_MAX_QUERY_JOBS", "N",
                    &ServerConfig::max_query_jobs, 16,
                    "query jobs and live queries running at once (429 beyond)", Bounds(1, 10000)));
  f.push_back(Value(S::kQueries, "--max-concurrent-queries", "SEDIMENT_MAX_CONCURRENT_QUERIES", "N",
                    &ServerConfig::max_concurrent_queries, 32,
                    "plain /query requests running at once on this node (429 beyond)",
                    Bounds(1, 10000)));
  f.push_back(Value(S::kQueries, "--query-job-expiry-ms", "SEDIMENT_QUERY_JOB_EXPIRY_MS", "N",
                    &ServerConfig::query_job_expiry_ms, 90000,
                    "a query job not polled for this long is cancelled and forgotten (0: never)",
                    Bounds(int64_t{0}, int64_t{86400000})));
  f.push_back(Value(S::kQueries, "--geoip-city-db", "SEDIMENT_GEOIP_CITY_DB", "FILE",
                    &ServerConfig::geoip_city_db, "",
                    "MaxMind DB file (e.g. GeoLite2 City) that ipLocation() and worldMap(ip=) "
                    "read; opened at the start (every node of a cluster needs it)"));
  f.push_back(Value(S::kQueries, "--geoip-asn-db", "SEDIMENT_GEOIP_ASN_DB", "FILE",
                    &ServerConfig::geoip_asn_db, "",
                    "MaxMind DB file (e.g. GeoLite2 ASN) that asn() reads; opened at the start "
                    "(every node of a cluster needs it)"));
}

void ClusterFlags(std::vector<ServerFlag>& f) {
  f.push_back(Value(
      S::kCluster, "--advertise", "SEDIMENT_ADVERTISE", "H:P", &ServerConfig::advertise, "",
      "address other nodes and clients use to reach this node", Described("the listen address")));
  f.push_back(
      Secret(Value(S::kCluster, "--cluster-secret", "SEDIMENT_CLUSTER_SECRET", "S",
                   &ServerConfig::cluster_secret, "",
                   "secret authenticating node-to-node requests; every node of a cluster needs "
                   "it (Global keeps only a salted hash, a node with another refuses to start)",
                   Described("DATA_DIR/cluster-secret, written by the node that generated it"))));
  f.push_back(Value(S::kCluster, "--digest-session-timeout-ms",
                    "SEDIMENT_DIGEST_SESSION_TIMEOUT_MS", "N",
                    &ServerConfig::digest_session_timeout_ms, 6000,
                    "Kafka consumer-group session timeout: a silent node keeps its partitions this "
                    "long, then they move to the others",
                    Bounds(int64_t{1000}, int64_t{1800000})));
  f.push_back(Value(S::kCluster, "--heartbeat-timeout-ms", "SEDIMENT_HEARTBEAT_TIMEOUT_MS", "N",
                    &ServerConfig::heartbeat_timeout_ms, 5000,
                    "a node silent on the chatter topic this long is shown dead and gets no query "
                    "work (requests to it are abandoned)",
                    Bounds(int64_t{200}, int64_t{600000})));
  f.push_back(Value(S::kCluster, "--peer-progress-timeout-ms", "SEDIMENT_PEER_PROGRESS_TIMEOUT_MS",
                    "N", &ServerConfig::peer_progress_timeout_ms, 5000,
                    "a query's request to another node that brings no answer bytes this long (a "
                    "frozen node) is abandoned: other copies, the partition's new owner, or a "
                    "warning naming what is missing (0: none)",
                    Bounds(int64_t{0}, int64_t{3600000})));
}

void ReplicationFlags(std::vector<ServerFlag>& f) {
  f.push_back(Value(S::kStorage, "--replication-factor", "SEDIMENT_REPLICATION_FACTOR", "N",
                    &ServerConfig::replication_factor, 0,
                    "segment copies on different nodes; sets the cluster's value (0: keep it)",
                    Bounds(0, 16).Described("keep the cluster's (it starts as 2 once two nodes "
                                            "joined, else 1)")));
  f.push_back(Value(S::kStorage, "--repair-grace-ms", "SEDIMENT_REPAIR_GRACE_MS", "N",
                    &ServerConfig::repair_grace_ms, 30000,
                    "a node silent this long is gone: its segment copies are re-created elsewhere",
                    Bounds(int64_t{0}, int64_t{86400000})));
  f.push_back(Value(S::kStorage, "--replication-interval-ms", "SEDIMENT_REPLICATION_INTERVAL_MS",
                    "N", &ServerConfig::replication_interval_ms, 1000,
                    "how often a node compares the copies it holds with the ones it should hold",
                    Bounds(int64_t{50}, int64_t{600000})));
  f.push_back(Value(
      S::kStorage, "--replication-bytes-per-second", "SEDIMENT_REPLICATION_BYTES_PER_SECOND", "N",
      &ServerConfig::replication_bytes_per_second, uint64_t{64} << 20,
      "throttle for copying and scrubbing segments", Bounds(uint64_t{1} << 16, uint64_t{1} << 40)));
  f.push_back(Value(S::kStorage, "--scrub-interval-ms", "SEDIMENT_SCRUB_INTERVAL_MS", "N",
                    &ServerConfig::scrub_interval_ms, 600000,
                    "full checksum pass over the local segment copies (0: never)"));
  f.push_back(Value(S::kStorage, "--file-deletion-delay-ms", "SEDIMENT_FILE_DELETION_DELAY_MS", "N",
                    &ServerConfig::file_deletion_delay_ms, 30000,
                    "a segment file that left the metadata (merged away, expired, extra copy) is "
                    "deleted this long after (running queries may still read it)"));
  f.push_back(Value(S::kStorage, "--safe-offset-interval-ms", "SEDIMENT_SAFE_OFFSET_INTERVAL_MS",
                    "N", &ServerConfig::safe_offset_interval_ms, 10000,
                    "how often a partition owner truncates the commit log to the safe offset",
                    Bounds(int64_t{100}, int64_t{3600000})));
}

void MaintenanceFlags(std::vector<ServerFlag>& f) {
  f.push_back(Value(S::kStorage, "--merge-target-bytes", "SEDIMENT_MERGE_TARGET_BYTES", "N",
                    &ServerConfig::merge_target_bytes, uint64_t{128} << 20,
                    "merge small segments of a datasource into segments of about this size (at "
                    "most this many input bytes per merge)"));
  f.push_back(Value(S::kStorage, "--merge-small-bytes", "SEDIMENT_MERGE_SMALL_BYTES", "N",
                    &ServerConfig::merge_small_bytes, uint64_t{32} << 20,
                    "segments below this size are merged, in size classes below it (0: no "
                    "merges)"));
  f.push_back(Value(S::kStorage, "--merge-fan-in", "SEDIMENT_MERGE_FAN_IN", "N",
                    &ServerConfig::merge_fan_in, uint64_t{16},
                    "size classes of merges: a class spans a factor N of file size below "
                    "--merge-small-bytes and N segments of one class are merged into the next "
                    "(an event is rewritten about log_N(small bytes / flushed size) times)",
                    Bounds(uint64_t{2}, uint64_t{256})));
  f.push_back(Value(S::kStorage, "--merge-min-age-ms", "SEDIMENT_MERGE_MIN_AGE_MS", "N",
                    &ServerConfig::merge_min_age_ms, 60000,
                    "merge flushed segments of one size class that did not fill (fewer than "
                    "--merge-fan-in) once the oldest of them is this old (merge outputs wait for "
                    "their class to fill)"));
  f.push_back(Value(S::kStorage, "--merge-interval-ms", "SEDIMENT_MERGE_INTERVAL_MS", "N",
                    &ServerConfig::merge_interval_ms, 5000, "how often merges are planned",
                    Bounds(int64_t{50}, int64_t{3600000})));
  f.push_back(Value(S::kStorage, "--global-snapshot-every", "SEDIMENT_GLOBAL_SNAPSHOT_EVERY", "N",
                    &ServerConfig::global_snapshot_every, 1000,
                    "write a Global snapshot after this many metadata events",
                    Bounds(uint64_t{1}, uint64_t{100000000})));
  f.push_back(Value(S::kStorage, "--maintenance-interval-ms", "SEDIMENT_MAINTENANCE_INTERVAL_MS",
                    "N", &ServerConfig::maintenance_interval_ms, 5000,
                    "how often retention and the global topic's truncation run",
                    Bounds(int64_t{50}, int64_t{3600000})));
}

void BucketFlags(std::vector<ServerFlag>& f) {
  f.push_back(Value(S::kBucket, "--bucket-endpoint", "SEDIMENT_BUCKET_ENDPOINT", "URL",
                    &ServerConfig::bucket_endpoint, "",
                    "S3-compatible endpoint (`http(s)://HOST:PORT`); turns bucket storage on",
                    Described("off")));
  f.push_back(Value(S::kBucket, "--bucket-name", "SEDIMENT_BUCKET_NAME", "NAME",
                    &ServerConfig::bucket_name, "", "bucket name"));
  f.push_back(Value(S::kBucket, "--bucket-region", "SEDIMENT_BUCKET_REGION", "REGION",
                    &ServerConfig::bucket_region, "us-east-1", "bucket region (SigV4)"));
  f.push_back(Value(S::kBucket, "--bucket-prefix", "SEDIMENT_BUCKET_PREFIX", "PREFIX",
                    &ServerConfig::bucket_prefix, "",
                    "key prefix inside the bucket, used as given (end it with `/` for a folder)"));
  f.push_back(Value(S::kBucket, "--bucket-path-style", "SEDIMENT_BUCKET_PATH_STYLE", "BOOL",
                    &ServerConfig::bucket_path_style, true,
                    "path-style URLs (endpoint/bucket/key) instead of virtual-hosted ones"));
  f.push_back(Secret(Value(S::kBucket, "--bucket-access-key", "SEDIMENT_BUCKET_ACCESS_KEY", "KEY",
                           &ServerConfig::bucket_access_key, "", "access key id",
                           Described("`AWS_ACCESS_KEY_ID`"))));
  f.push_back(Secret(Value(S::kBucket, "--bucket-secret-key", "SEDIMENT_BUCKET_SECRET_KEY", "KEY",
                           &ServerConfig::bucket_secret_key, "",
                           "secret access key (the session token comes from `AWS_SESSION_TOKEN`)",
                           Described("`AWS_SECRET_ACCESS_KEY`"))));
  f.push_back(Switch(S::kBucket, "--bucket-create", "SEDIMENT_BUCKET_CREATE",
                     &ServerConfig::bucket_create, "create the bucket when missing"));
  f.push_back(Value(S::kBucket, "--upload-interval-ms", "SEDIMENT_UPLOAD_INTERVAL_MS", "N",
                    &ServerConfig::upload_interval_ms, 1000,
                    "how often segments not in the bucket yet are looked for",
                    Bounds(int64_t{50}, int64_t{3600000})));
}

void BucketMaintenanceFlags(std::vector<ServerFlag>& f) {
  f.push_back(Value(S::kBucket, "--bucket-snapshot-interval-ms",
                    "SEDIMENT_BUCKET_SNAPSHOT_INTERVAL_MS", "N",
                    &ServerConfig::bucket_snapshot_interval_ms, 60000,
                    "how often a Global snapshot is uploaded (when it changed)",
                    Bounds(int64_t{100}, int64_t{86400000})));
  f.push_back(Value(S::kBucket, "--bucket-snapshots-kept", "SEDIMENT_BUCKET_SNAPSHOTS_KEPT", "N",
                    &ServerConfig::bucket_snapshots_kept, 3, "Global snapshots kept in the bucket",
                    Bounds(1u, 1000u)));
  f.push_back(Value(S::kBucket, "--bucket-gc-grace-ms", "SEDIMENT_BUCKET_GC_GRACE_MS", "N",
                    &ServerConfig::bucket_gc_grace_ms, 3'600'000,
                    "bucket garbage collection deletes a segment object no segment references "
                    "only once it is at least this old",
                    Bounds(int64_t{0}, int64_t{365} * 86'400'000)));
  f.push_back(Value(S::kBucket, "--cache-max-bytes", "SEDIMENT_CACHE_MAX_BYTES", "N",
                    &ServerConfig::cache_max_bytes, 0,
                    "bucket storage: evict local segment copies (least recently used first) above "
                    "this many bytes (0: no bound)"));
  f.push_back(Value(S::kBucket, "--cache-max-percent", "SEDIMENT_CACHE_MAX_PERCENT", "PERCENT",
                    &ServerConfig::cache_max_percent, 0,
                    "bucket storage: the same bound as a percentage of the data dir's file system "
                    "(0: none; with --cache-max-bytes the smaller applies)",
                    Bounds(0.0, 100.0)));
  f.push_back(Switch(S::kBucket, "--recover-from-bucket", "SEDIMENT_RECOVER_FROM_BUCKET",
                     &ServerConfig::recover_from_bucket,
                     "disaster recovery: on an empty data dir and an empty commit log, start the "
                     "cluster from the bucket's newest Global snapshot and segments"));
}

std::vector<ServerFlag> BuildFlags() {
  std::vector<ServerFlag> f;
  NodeFlags(f);
  HttpFlags(f);
  CommitLogFlags(f);
  KafkaFlags(f);
  QueryFlags(f);
  ClusterFlags(f);
  ReplicationFlags(f);
  MaintenanceFlags(f);
  BucketFlags(f);
  BucketMaintenanceFlags(f);
  return f;
}

// ---- generated text ----------------------------------------------------------------------------

std::string WithoutBackticks(std::string s) {
  s.erase(std::remove(s.begin(), s.end(), '`'), s.end());
  return s;
}

// A readable size or duration next to a number, by the flag's unit suffix: "33554432 (32 MiB)".
std::string WithUnit(const std::string& name, const std::string& number, bool code) {
  if (number.empty()) return "";
  std::string shown = code ? "`" + number + "`" : number;
  if (number.find_first_not_of("0123456789") != std::string::npos) return shown;
  uint64_t v = std::stoull(number);
  if (v == 0) return shown;
  auto ends_with = [&](std::string_view suffix) {
    return name.size() >= suffix.size() && name.ends_with(suffix);
  };
  struct Unit {
    uint64_t size;
    const char* name;
  };
  static constexpr Unit kBytes[] = {
      {1ull << 40, "TiB"}, {1 << 30, "GiB"}, {1 << 20, "MiB"}, {1 << 10, "KiB"}};
  static constexpr Unit kMillis[] = {
      {86'400'000, "d"}, {3'600'000, "h"}, {60'000, "min"}, {1000, "s"}};
  std::span<const Unit> units;
  if (ends_with("-bytes") || ends_with("-bytes-per-second")) units = kBytes;
  if (ends_with("-ms")) units = kMillis;
  for (const Unit& u : units) {
    if (v % u.size == 0) return fmt::format("{} ({} {})", shown, v / u.size, u.name);
  }
  return shown;
}

std::string MarkdownCell(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '|') out += '\\';
    out += c;
  }
  return out;
}

std::string FlagCell(const ServerFlag& f) {
  std::vector<std::string> names;
  for (const auto& n : f.names) {
    names.push_back("`" + n + (f.metavar.empty() ? "" : " " + f.metavar) + "`");
  }
  return fmt::format("{}", fmt::join(names, ", "));
}

std::string DefaultCell(const ServerFlag& f) {
  if (!f.default_described.empty()) return f.default_described;
  if (f.metavar.empty()) return "off";
  return WithUnit(f.name(), f.default_value, true);
}

std::string BoundsCell(const ServerFlag& f) {
  size_t to = f.bounds.find(" to ");
  if (to == std::string::npos) return f.bounds;
  return WithUnit(f.name(), f.bounds.substr(0, to), false) + " to " +
         WithUnit(f.name(), f.bounds.substr(to + 4), false);
}

}  // namespace

std::string_view SectionTitle(FlagSection section) {
  switch (section) {
    case S::kNode:
      return "Node and ingest limits";
    case S::kHttp:
      return "HTTP front door and TLS";
    case S::kCommitLog:
      return "Commit log and digest";
    case S::kKafka:
      return "Kafka";
    case S::kQueries:
      return "Query limits";
    case S::kCluster:
      return "Cluster";
    case S::kStorage:
      return "Storage: replication, merges, maintenance";
    case S::kBucket:
      return "Bucket storage";
  }
  return "Other";
}

const std::vector<ServerFlag>& ServerFlags() {
  static const std::vector<ServerFlag> flags = BuildFlags();
  return flags;
}

void AddServerFlags(CLI::App& app, ServerConfig& config) {
  for (const ServerFlag& f : ServerFlags()) {
    f.set_default(config);
    std::string help = WithoutBackticks(f.help);
    if (!f.default_described.empty()) {
      help += " (default: " + WithoutBackticks(f.default_described) + ")";
    }
    CLI::Option* o = f.add(app, config, help);
    // The metavar stays CLI11's type name (TEXT, INT): it is part of CLI11's error messages.
    o->group(std::string(SectionTitle(f.section)));
  }
}

std::vector<std::string> ServerFlagEnvNames(std::string_view prefix) {
  std::vector<std::string> out;
  for (const ServerFlag& f : ServerFlags()) {
    if (f.env.starts_with(prefix)) out.push_back(f.env);
  }
  return out;
}

std::string FlagTableMarkdown() {
  std::string out;
  const ServerFlag* previous = nullptr;
  for (const ServerFlag& f : ServerFlags()) {
    if (previous == nullptr || previous->section != f.section) {
      if (previous != nullptr) out += "\n";
      out += fmt::format("**{}**\n\n", SectionTitle(f.section));
      out += "| flag | variable | default | allowed | meaning |\n|---|---|---|---|---|\n";
    }
    out += fmt::format("| {} | `{}` | {} | {} | {} |\n", FlagCell(f), f.env,
                       MarkdownCell(DefaultCell(f)), MarkdownCell(BoundsCell(f)),
                       MarkdownCell(f.help));
    previous = &f;
  }
  return out;
}

}  // namespace sediment::cli
