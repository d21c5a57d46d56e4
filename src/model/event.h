// The data model (DESIGN section 3): events, datasources and the ingest message that carries a
// batch of one datasource's events through the commit log.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"
#include "common/types.h"

namespace sediment {

struct Field {
  std::string name;
  std::string value;
  bool operator==(const Field&) const = default;
};

// One log event as ingested. Tags are not here: they belong to the datasource.
struct Event {
  int64_t timestamp_ms = 0;   // @timestamp, ms since epoch UTC
  int64_t ingest_ms = 0;      // @ingesttimestamp
  std::string raw;            // @rawstring
  std::vector<Field> fields;  // parsed fields, in ingest order; names are unique

  // Value of field `name`, or nullptr.
  const std::string* Find(std::string_view name) const;
  // Approximate in-memory / encoded size, for buffer and request limits.
  size_t ByteSize() const { return ByteSizeOf(raw.size(), fields); }
  // ByteSize() of an event whose @rawstring has `raw_bytes` bytes and whose fields are `fields`.
  static size_t ByteSizeOf(size_t raw_bytes, const std::vector<Field>& fields);
  bool operator==(const Event&) const = default;
};

// An event with its commit-log position, as the digest and segments hold it.
struct PositionedEvent {
  Position pos;
  Event event;
  bool operator==(const PositionedEvent&) const = default;
};

// A repository plus a set of tag values. Tag names start with '#'. Tags are kept sorted by name,
// unique, so equal datasources have equal keys.
struct Datasource {
  std::string repo;
  std::vector<std::pair<std::string, std::string>> tags;

  // Sorts and de-duplicates tags (last value of a name wins).
  void Normalize();
  // Canonical key: repo, then name=value for each tag, separated by '\x1f'.
  std::string Key() const;
  // The ingest partition of this datasource among `partition_count` (hash of the key): its shard
  // 0, ShardPartition(Hash64(Key()), 0, partition_count). partition_count > 0.
  PartitionId PartitionFor(int32_t partition_count) const;
  bool operator==(const Datasource&) const = default;
};

// The partition of shard `shard` (>= 0) of the datasource whose key hashes to `key_hash`
// (Hash64(Datasource::Key())), among `partition_count` (> 0). Shard 0 is Datasource::PartitionFor;
// shard i steps from it by a stride derived from the hash and coprime with partition_count, so
// shards 0 .. partition_count-1 are distinct partitions (shard i and i + partition_count are the
// same) and two busy datasources seldom walk the same partitions. A pure function: every node and
// every version computes the same partitions (ingest/sharder.h decides how many shards are used).
PartitionId ShardPartition(uint64_t key_hash, int32_t shard, int32_t partition_count);

// Compression of an ingest message's payload.
enum class Codec : uint8_t { kNone = 0, kLz4 = 1, kZstd = 2 };

// A batch of events of one datasource, from one ingest request. One commit-log record each.
struct IngestMessage {
  // Identifies this batch across commit-log copies: a producer that retries after losing an
  // acknowledgement (Kafka's epoch bump) can append the same message twice, and the digest drops
  // the second copy by this id. Random, assigned by the ingest path; 0 = unknown (format v1).
  uint64_t id = 0;
  Datasource datasource;
  std::vector<Event> events;
};

// Encodes a message in the versioned, checksummed binary format of model/README.md.
std::string EncodeIngestMessage(const IngestMessage& msg, Codec codec = Codec::kLz4);
// The record EncodeIngestMessage gives for the message `id` of `datasource` whose events are one
// per element of `raws`, in order, each with these timestamps and `fields`: byte for byte the
// same, without building the events (the raw ingest path encodes lines straight from the request
// body). The views are only read during the call.
std::string EncodeIngestLines(uint64_t id, const Datasource& datasource, int64_t timestamp_ms,
                              int64_t ingest_ms, const std::vector<Field>& fields,
                              std::span<const std::string_view> raws, Codec codec = Codec::kLz4);
// Decodes and verifies (magic, version, checksum, lengths). Corruption on any mismatch.
Result<IngestMessage> DecodeIngestMessage(std::string_view data);

// Event payload encoding shared by the ingest message and segment blocks: appends the events.
void EncodeEvents(const std::vector<Event>& events, std::string* out);
Status DecodeEvents(std::string_view* in, std::vector<Event>* out);

}  // namespace sediment
