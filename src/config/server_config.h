// ServerConfig: every setting of one node, as the command line (src/cli) fills it and the
// server (src/server) and its HTTP API (src/api) read it. Plain data; defaults are the
// documented ones.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <thread>
#include <vector>

namespace sediment {

// One --ingest-token value: "REPO:TOKEN", or "REPO:TOKEN:PARSER" to give the token's events that
// parser (parsers/README.md). The repository ends at the first ':'; with three parts the parser
// is after the last ':' (so a token given with a parser cannot contain ':'; a token without one
// keeps any ':' after the repository only when no parser is given, i.e. two parts). False when
// the repository or the token is empty.
struct IngestTokenSpec {
  std::string repo;
  std::string token;
  std::string parser;  // empty: none assigned
};
inline bool ParseIngestTokenSpec(const std::string& spec, IngestTokenSpec* out) {
  const size_t first = spec.find(':');
  if (first == std::string::npos || first == 0) return false;
  const size_t last = spec.rfind(':');
  out->repo = spec.substr(0, first);
  if (last == first) {
    out->token = spec.substr(first + 1);
    out->parser.clear();
  } else {
    out->token = spec.substr(first + 1, last - first - 1);
    out->parser = spec.substr(last + 1);
    if (out->parser.empty()) return false;
  }
  return !out->token.empty();
}

struct ServerConfig {
  std::string data_dir = "./sediment-data";
  std::string listen = "127.0.0.1:8080";   // HOST:PORT; port 0 picks a free port
  std::vector<std::string> ingest_tokens;  // "REPO:TOKEN" or "REPO:TOKEN:PARSER"
  std::vector<std::string> api_tokens;
  // Client address ranges (CIDR, common/cidr.h) that may read GET /metrics without an API token.
  std::vector<std::string> metrics_allow;
  // SIGTERM/SIGINT: the node stops accepting, answers the requests in progress, flushes the
  // digest buffers and leaves the cluster within this long (then exits regardless).
  int64_t shutdown_timeout_ms = 30000;
  // Ingest partitions: of the embedded log (fixed when the data dir is created) or of the Kafka
  // ingest topic. 0 = the default: 8 embedded, 24 on Kafka.
  int32_t partitions = 0;
  // Kafka (DESIGN section 4): empty brokers = the embedded log.
  std::string kafka_brokers;
  std::string kafka_topic_prefix = "sediment-";
  int16_t kafka_replication_factor = 1;
  int16_t kafka_min_insync_replicas = 1;
  std::string kafka_properties_file;                    // librdkafka properties, key=value lines
  std::map<std::string, std::string> kafka_properties;  // e.g. from SEDIMENT_KAFKA_* variables
  int64_t kafka_produce_timeout_ms = 10000;  // ingest answers 503 after at most this long
  int64_t kafka_produce_linger_ms = 1;       // producer linger.ms (KafkaOptions::produce_linger)
  // Start even when the existing ingest or global topic has a finite retention (KafkaOptions::
  // allow_finite_retention); without it such a topic makes start-up fail.
  bool allow_kafka_retention = false;
  size_t max_body_bytes = 32u << 20;
  size_t max_event_bytes = 1u << 20;
  // Bounds of one ingested JSON event (ingest/): nesting depth and fields once flattened.
  int max_json_depth = 64;
  int max_fields_per_event = 1000;
  // The HTTP front door (http/README.md): I/O threads, handler threads, connection caps, and
  // deadlines for the header, the body's rate and idle keep-alive connections.
  int http_threads = 2;
  int http_handler_threads = 256;
  int max_connections = 10000;
  int max_connections_per_address = 1000;
  int64_t http_header_timeout_ms = 10000;
  uint64_t http_body_min_bytes_per_second = 1024;
  int64_t http_idle_timeout_ms = 60000;
  // TLS (PEM files): the listener speaks HTTPS when cert and key are set; peers are then called
  // over HTTPS and verified against tls_ca_file (the system's CAs when empty).
  std::string tls_cert_file;
  std::string tls_key_file;
  std::string tls_ca_file;
  int64_t flush_age_ms = 2000;
  size_t flush_bytes = 32u << 20;
  // Nice value of the digest's partition workers (DigestOptions::worker_nice).
  int digest_nice = 5;
  // Datasource autosharding (ingest/sharder.h): a datasource appending more than this many bytes
  // per second per shard gets twice its shards, up to max_datasource_shards ingest partitions.
  // 0 = off: every datasource on its one partition (Datasource::PartitionFor).
  uint64_t datasource_shard_bytes_per_second = 0;  // off (see DESIGN, Autosharding)
  int max_datasource_shards = 8;
  // Embedded log only: a partition's active file is sealed and a new one started at this size.
  uint64_t log_file_bytes = 64ull << 20;
  // Embedded ingest log only: ... and this long after its first record (0 = only by size): a
  // sealed file is deleted once every record in it is below the safe offset.
  int64_t log_file_age_ms = 10000;
  // Threads per query; 0 = one per core of the machine (EffectiveQueryThreads).
  int query_threads = 0;
  // Query limits (api/, coordinator/): a query fails with 408 after this long (0 = no limit) and
  // with 413 when its partial states (groups, kept rows) need more than this many bytes on one
  // node (0 = no bound). Peers get the remaining time and the same bound.
  int64_t query_timeout_ms = 300000;
  uint64_t query_memory_bytes = uint64_t{1} << 30;
  // Query jobs and live queries (coordinator/query_jobs.h): at most this many run at once (429
  // beyond); a job not polled for query_job_expiry_ms is cancelled and forgotten.
  int max_query_jobs = 16;
  // Plain /query requests running at once on this node (429 beyond).
  int max_concurrent_queries = 32;
  int64_t query_job_expiry_ms = 90000;
  // GeoIP databases (MaxMind DB files, src/geoip) that ipLocation()/worldMap(ip=) (city) and
  // asn() (ASN) read; empty = none (those functions then answer 400 naming the flag). Opened once
  // at the start (a file that cannot be opened stops the start) and shared by every query.
  std::string geoip_city_db;
  std::string geoip_asn_db;
  // Cluster (DESIGN sections 6, 9, 11). The address peers and clients use to reach this node;
  // empty = the listen address (which then must not be a wildcard).
  std::string advertise;
  // Authenticates node-to-node requests; must match the cluster's (Global keeps its verifier).
  // Empty = <data_dir>/cluster-secret, which the node that generated the secret wrote.
  std::string cluster_secret;
  // Kafka consumer-group session timeout: how long a silent owner keeps its partitions.
  int64_t digest_session_timeout_ms = 6000;
  // A node whose heartbeat is older than this is shown dead and not sent query work; a query's
  // requests to it still running are abandoned then.
  int64_t heartbeat_timeout_ms = 5000;
  // A query's request to a peer that brings no answer bytes for this long (a frozen process: the
  // peer is asked for progress answers while it works) is abandoned: the coordinator reads other
  // copies, asks a new partition owner, or names what is missing in a warning. 0 = none (only
  // the query's time limit bounds the wait).
  int64_t peer_progress_timeout_ms = 5000;
  // Storage (DESIGN section 8, storage/README.md). Segment replication factor R of the cluster;
  // 0 = keep the cluster's setting (default: 2 once two nodes joined, else 1).
  int32_t replication_factor = 0;
  // A node silent this long is gone: its copies are re-created on other nodes.
  int64_t repair_grace_ms = 30000;
  int64_t replication_interval_ms = 1000;
  uint64_t replication_bytes_per_second = 64u << 20;
  int64_t scrub_interval_ms = 600000;  // 0 = never
  // A file that left Global (merged away, retention, extra copy) is deleted this long after.
  int64_t file_deletion_delay_ms = 30000;
  // How often a partition's owner truncates the commit log to the safe offset.
  int64_t safe_offset_interval_ms = 10000;
  // Merges (merge/README.md).
  uint64_t merge_target_bytes = 128u << 20;
  uint64_t merge_small_bytes = 32u << 20;
  uint64_t merge_fan_in = 16;
  int64_t merge_min_age_ms = 60000;
  int64_t merge_interval_ms = 5000;
  // Retention and global-topic truncation pass.
  int64_t maintenance_interval_ms = 5000;
  // Global writes a snapshot after this many applied events; the global topic is truncated below
  // the oldest snapshot every live node keeps.
  uint64_t global_snapshot_every = 1000;
  // Bucket storage (DESIGN section 8, bucket/README.md): an S3-compatible bucket holds every
  // segment and Global snapshots; local disks are a cache. Empty endpoint = off.
  std::string bucket_endpoint;  // http(s)://HOST:PORT
  std::string bucket_name;
  std::string bucket_region = "us-east-1";
  std::string bucket_prefix;  // key prefix, e.g. "sediment/"
  bool bucket_path_style = true;
  // Empty: AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN.
  std::string bucket_access_key, bucket_secret_key;
  bool bucket_create = false;  // create the bucket at start when it does not exist
  int64_t upload_interval_ms = 1000;
  int64_t bucket_snapshot_interval_ms = 60000;
  uint32_t bucket_snapshots_kept = 3;
  // Bucket GC deletes an unreferenced segment object only once it is at least this old
  // (its LastModified).
  int64_t bucket_gc_grace_ms = 3'600'000;
  // Local segment cache bound (bucket storage only): bytes, or percent of the data dir's file
  // system (the smaller applies); 0 = unbounded.
  uint64_t cache_max_bytes = 0;
  double cache_max_percent = 0;
  // Start a new cluster (empty data dir, empty commit log) from the bucket's newest snapshot.
  bool recover_from_bucket = false;
};

// The threads a query runs on: `query_threads`, or one per core when it is 0.
inline int EffectiveQueryThreads(const ServerConfig& config) {
  if (config.query_threads > 0) return config.query_threads;
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

}  // namespace sediment
