// The commit log (DESIGN section 4): an ordered, durable log of records per partition.
// Implementations: LocalLog (embedded, files under the data dir, local_log.h) and KafkaLog
// (kafka_log.h).
// Thread-safety: every method may be called from any thread concurrently.
#pragma once

#include <chrono>
#include <future>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/types.h"

namespace sediment {

struct LogRecord {
  Offset offset;
  std::string data;
};

// Records a log could not read back (damaged on disk: found at open or by a read). Their offsets
// are skipped by Read and never handed out again; the loss is reported, never silent.
struct LogDamage {
  PartitionId partition;
  Offset first, end;      // offsets [first, end) are lost
  uint64_t bytes = 0;     // unreadable bytes skipped
  std::string file;       // the damaged file (empty: not file based)
  uint64_t file_pos = 0;  // its first damaged byte
  std::string what;       // what was wrong, e.g. "checksum mismatch"
};

// A partition's StartOffset and EndOffset.
struct OffsetBounds {
  Offset start, end;
};

class CommitLog {
 public:
  virtual ~CommitLog() = default;

  virtual int32_t partition_count() const = 0;

  // Appends one record to partition p. The future becomes ready once the record is durable
  // (fsynced on the local log, acks=all on Kafka) with the record's offset, or with an error; after
  // an error the record may or may not be in the log, and it must not be acknowledged to a client.
  // Records appended by one thread to one partition keep their order.
  virtual std::future<Result<Offset>> Append(PartitionId p, std::string record) = 0;

  // Returns durable records of partition p with offset >= from, in offset order, at most about
  // max_bytes (always at least one record). Waits up to max_wait for one and returns an empty
  // vector on timeout. A local log returns at once when a record exists; a remote log (Kafka) may
  // need part of max_wait to fetch, and may answer empty with max_wait 0 even below EndOffset(p):
  // callers that must reach the end compare with EndOffset. NotFound when from < StartOffset(p).
  // Offsets are increasing but not always dense: records lost to damage (Damage()) are skipped,
  // and a read from a lost offset starts at the next readable record.
  virtual Result<std::vector<LogRecord>> Read(PartitionId p, Offset from, size_t max_bytes,
                                              std::chrono::milliseconds max_wait) = 0;

  // Cuts short the waits of partition p's Reads: every Read of p waiting for a record now returns
  // at once with what it has (an empty vector when nothing; not an error, nothing is recorded in
  // Health()); when none is waiting, the next Read of p that would wait returns at once instead
  // (one wake is kept, however many calls made it). So a reader whose owner sets a stop flag and
  // then calls this cannot miss a Read that began waiting just after it last checked the flag:
  // callers may give idle Reads long max_waits and still stop promptly. (A Read that waits for a
  // lock held by another Read of p, as on Kafka, is not waiting for a record yet.) Wrappers
  // forward it. Default: does nothing (Reads then wait out their max_wait).
  virtual void WakeReaders(PartitionId p) {}

  // Allows deletion of every record below `offset` (DESIGN P3: callers pass at most the safe
  // offset). Afterwards StartOffset(p) is at most `offset`; implementations may keep more.
  virtual Status DeleteBefore(PartitionId p, Offset offset) = 0;

  // Offset of the oldest readable record (== EndOffset when the partition is empty).
  virtual Result<Offset> StartOffset(PartitionId p) = 0;
  // Offset the next appended record will get; every record below it is durable.
  virtual Result<Offset> EndOffset(PartitionId p) = 0;

  // StartOffset and EndOffset of every partition (index = partition id), each as its own result:
  // a partition whose offsets could not be read fails alone. Default: StartOffset and EndOffset of
  // each partition in turn; a remote log asks for every partition at once (Kafka: one ListOffsets
  // request per bound and leader instead of four per partition).
  virtual std::vector<Result<OffsetBounds>> AllBounds() {
    std::vector<Result<OffsetBounds>> out;
    out.reserve(static_cast<size_t>(partition_count()));
    for (int32_t i = 0; i < partition_count(); ++i) {
      Result<Offset> start = StartOffset(PartitionId(i));
      Result<Offset> end = EndOffset(PartitionId(i));
      if (!start.ok()) {
        out.emplace_back(start.status());
      } else if (!end.ok()) {
        out.emplace_back(end.status());
      } else {
        out.emplace_back(OffsetBounds{start.value(), end.value()});
      }
    }
    return out;
  }

  // A human-readable health line for the status API ("ok", or what is wrong).
  virtual std::string Health() = 0;

  // Every damaged range found so far and not yet deleted (DeleteBefore past its end drops it).
  // Logs that cannot detect damage return none.
  virtual std::vector<LogDamage> Damage() { return {}; }

  // Offsets below `floor` of partition p were handed out before and are recorded elsewhere (in
  // Global: replay point, flushed_through, truncation point). A log whose end is below `floor`
  // would give them out again to new records (after its tail was lost), so the partition then
  // refuses every append, with a Corruption status naming the range, until the log is reopened;
  // Health() says so. Returns that status, or OK when the end is at or above `floor`. Logs that
  // never reuse offsets (Kafka) return OK.
  virtual Status RefuseBelow(PartitionId p, Offset floor) { return Status::OK(); }
};

}  // namespace sediment
