// KafkaLog: the commit log on a Kafka cluster through librdkafka (DESIGN section 4, `kafka`).
// The contract is CommitLog (log/commit_log.h); this header adds topic setup and configuration.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "log/commit_log.h"

namespace sediment {

struct KafkaOptions {
  // Bootstrap servers, "host:port[,host:port...]".
  std::string brokers;
  std::string topic_prefix = "sediment-";
  int32_t ingest_partitions = 24;
  int16_t replication_factor = 1;
  int16_t min_insync_replicas = 1;
  // Extra librdkafka properties applied to every client (producer, consumers, admin), e.g.
  // security.protocol, sasl.*, ssl.*. The log's durability settings (acks, idempotence,
  // compression, auto commit) are applied after these and cannot be overridden.
  std::map<std::string, std::string> properties;
  // Bound on one Append: the future fails (Unavailable) when Kafka has not acknowledged the
  // record with acks=all within this time (librdkafka message.timeout.ms).
  std::chrono::milliseconds produce_timeout{10000};
  // How long the producer holds a record to batch it with others (librdkafka linger.ms; at most
  // produce_timeout - 1 ms is used). Every ingest request waits for its record's acknowledgement,
  // so the linger adds to each request's latency, and with a few clients sending one request
  // after the other it bounds their throughput; batches still form while earlier produce requests
  // are in flight. 0 sends each record at once (more, smaller produce requests for the broker).
  std::chrono::milliseconds produce_linger{1};
  // Bound on metadata, admin and watermark requests.
  std::chrono::milliseconds admin_timeout{30000};
  // EnsureTopics accepts an existing ingest or global topic whose retention.ms or retention.bytes
  // is not -1 (and logs a warning) instead of refusing it (`--allow-kafka-retention`).
  bool allow_finite_retention = false;
};

// Largest record Append accepts (larger: TooLarge). Topics are created to hold it.
inline constexpr size_t kKafkaMaxRecordBytes = 8u << 20;

std::string KafkaIngestTopic(const KafkaOptions& options);   // <prefix>ingest
std::string KafkaGlobalTopic(const KafkaOptions& options);   // <prefix>global
std::string KafkaChatterTopic(const KafkaOptions& options);  // <prefix>chatter

// Creates the ingest (ingest_partitions), global (1 partition) and chatter (1 partition) topics
// with the configured replication factor and min.insync.replicas, and retention.ms=-1,
// retention.bytes=-1 (Kafka never deletes by age or size: sediment deletes with DeleteRecords, the
// digest below the safe offset, Global below its oldest kept snapshot, membership the chatter
// records beyond the newest 10000), or verifies existing ones. InvalidArgument, with a message that
// says what to change, when the cluster has fewer brokers than the replication factor, a topic has
// fewer partitions than configured, a lower replication factor, or a lower min.insync.replicas.
// FailedPrecondition when the existing ingest or global topic has a finite retention.ms or
// retention.bytes (as DescribeConfigs reports it, a broker default included), unless
// allow_finite_retention (then a warning is logged); the message names the topic, the setting,
// its value, how to change it and --allow-kafka-retention. The chatter topic's retention is not
// checked (heartbeats only; losing old ones loses no event).
// Unavailable when the brokers cannot be reached within admin_timeout. Returns the ingest topic's
// partition count (at least ingest_partitions; more when an existing topic has more): pass it to
// OpenKafkaLog, whose own metadata request may reach a broker that has not yet learnt of a topic
// just created (NotFound).
Result<int32_t> EnsureTopics(const KafkaOptions& options);

// The librdkafka clients that the logs of one process share: one admin handle (metadata,
// watermarks, DeleteRecords) and one consumer handle (every partition of every log opened on them,
// each from its own fetch queue). Each librdkafka handle has its own threads and timers, which
// are most of an idle node's CPU; each log keeps its own producer, so that a fatal idempotence
// error retires only that log's appends. Opaque; destroyed with the last reference (each log
// opened on it holds one). Thread-safe.
class KafkaClients;

// Creates the admin and consumer handles with `options` (InvalidArgument as OpenKafkaLog for
// invalid options or properties librdkafka refuses). Asks nothing of the brokers.
Result<std::shared_ptr<KafkaClients>> OpenKafkaClients(const KafkaOptions& options);

// Opens a CommitLog over one existing topic (full name, e.g. KafkaIngestTopic(options));
// partition_count() is the topic's partition count, asked from the brokers (Unavailable when they
// cannot be reached within admin_timeout, NotFound when the topic does not exist). When
// known_partition_count > 0 the brokers are not asked and that count is used (the caller has
// verified it, e.g. with EnsureTopics), so the log can be opened while the brokers are down.
//
// Append: acks=all, idempotent producer, no Kafka compression; the future resolves with the offset
// Kafka assigned once the in-sync replicas have the record, or Unavailable within produce_timeout.
// Read: one consumer handle per log serving every partition (each from its own fetch queue),
// positioned by `from` only (no consumer group; committed offsets are never used). DeleteBefore:
// Admin DeleteRecords (clamped to EndOffset). Start/EndOffset: low and high watermarks. Destruction
// flushes pending appends for at most min(produce_timeout, 5 s); appends not acknowledged by then
// fail with Unavailable. No call may be in progress during destruction.
//
// The log reads and asks through `clients` (their options are the log's), with a producer of its
// own. One log per topic on the same clients: FailedPrecondition while another log of `topic` is
// open on them.
Result<std::unique_ptr<CommitLog>> OpenKafkaLog(std::shared_ptr<KafkaClients> clients,
                                                const std::string& topic,
                                                int32_t known_partition_count = 0);

// The same on clients of its own (OpenKafkaClients(options)).
Result<std::unique_ptr<CommitLog>> OpenKafkaLog(const KafkaOptions& options,
                                                const std::string& topic,
                                                int32_t known_partition_count = 0);

// How many times, in this process, a KafkaLog Read has waited on its consumer (one
// rd_kafka_consume call each). An idle Read blocks once per max_wait; a Read that spins
// calls it over and over. For tests (the idle-CPU check in kafka_log_test). Thread-safe.
uint64_t KafkaLogReadPolls();

// How many consumer handles KafkaLogs have created in this process: one per KafkaClients, however
// many logs are opened on them and however many of their partitions are read (each handle has its
// own librdkafka threads and timers, the bulk of an idle node's CPU). For tests. Thread-safe.
uint64_t KafkaLogConsumerHandles();

// The producer's settings, applied over the user's properties: acks=all and idempotence (an
// acknowledged record is on every in-sync replica, once), no Kafka compression (records are
// compressed by sediment), produce_linger and produce_timeout. `options` must be valid.
std::vector<std::pair<std::string, std::string>> KafkaProducerSettings(const KafkaOptions& options);

// Parses librdkafka properties in Java properties style: `key=value` lines, `#`/`!` comments,
// blank lines ignored, whitespace around key and value trimmed. InvalidArgument on a line without
// '=' (with its line number).
Result<std::map<std::string, std::string>> ParseKafkaProperties(std::string_view text);

// Properties from environment entries ("NAME=value", as in `environ`):
// SEDIMENT_KAFKA_SASL_MECHANISM becomes sasl.mechanism (prefix dropped, lower-cased, '_' -> '.').
// Names listed in `exclude` (full variable names, e.g. SEDIMENT_KAFKA_BROKERS used for a flag) are
// skipped.
std::map<std::string, std::string> KafkaPropertiesFromEnv(
    char** environ_entries, const std::vector<std::string>& exclude = {});

}  // namespace sediment
