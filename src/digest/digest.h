// Digest (DESIGN section 6): turns ingest partitions into segment files registered in Global.
//
// For each partition it owns (claimed through Global with a new epoch), a worker thread reads the
// commit log from the partition's replay point, skips every event at or below its datasource's
// flushed_through (replayed events already in segments are never written twice), keeps one
// in-progress buffer per datasource, and flushes a buffer to a segment when it reaches
// flush_bytes or flush_age. A flush writes and fsyncs the file, then submits RegisterSegment with
// the claim epoch; only after Global applied it is the buffer dropped. A rejected registration
// (stale epoch) deletes the file and stops the worker: the partition belongs to someone else.
//
// Thread-safety: all public methods are thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/env.h"
#include "common/status.h"
#include "common/types.h"
#include "global/global.h"
#include "log/commit_log.h"
#include "model/event.h"
#include "segment/segment.h"

namespace sediment {

struct DigestOptions {
  std::string segment_dir;  // where this node's segment files live
  NodeId node{1};
  size_t flush_bytes = 32u << 20;             // per datasource buffer
  std::chrono::milliseconds flush_age{2000};  // oldest buffered event's age
  size_t read_batch_bytes = 8u << 20;
  std::chrono::milliseconds truncate_every{10000};  // DeleteBefore(safe offset) period
  SegmentWriterOptions segment;
};

// Events still in a buffer, for queries. `events` is an immutable copy.
struct BufferedBatch {
  Datasource datasource;
  PartitionId partition;
  std::shared_ptr<const std::vector<PositionedEvent>> events;
};

struct PartitionDigestStatus {
  PartitionId partition;
  Epoch epoch;
  Offset next_offset;   // next offset to read
  Offset replay_point;  // as last registered
  uint64_t buffered_events = 0;
  uint64_t duplicates_dropped = 0;  // second copies of ingest messages (see IngestMessage::id)
  std::string error;                // last error, empty when healthy
};

class Digest {
 public:
  Digest(Env* env, Clock* clock, CommitLog* log, Global* global, DigestOptions options);
  ~Digest();

  // Removes segment files of this node that Global does not know (orphans of a crash between
  // write and registration), claims every partition of `log`, and starts one worker per partition.
  Status Start();
  // Stops the workers (buffers are not flushed: they are replayed from the log on the next start).
  void Stop();

  // A copy of every buffered event. Callers combining it with Global's segments must take this
  // snapshot FIRST and then read Global, keeping only buffered events above flushed_through: that
  // cut counts every event exactly once while flushes happen concurrently.
  std::vector<BufferedBatch> SnapshotBuffers() const;

  std::vector<PartitionDigestStatus> PartitionStatuses() const;

  // Flushes every non-empty buffer now and waits for it (tests, shutdown tooling).
  sediment::Status FlushAll();

 private:
  struct Partition;
  void Run(Partition* p);
  sediment::Status Flush(Partition* p, const std::string& key);
  // After a registration was applied: records flushed_through, drops the flushed events (keeping
  // any that arrived since the segment was written) and raises the replay point.
  void CompleteFlush(Partition* p, const std::string& key, Position max_pos,
                     Offset new_replay_point);
  // Whether Global has a segment of this node with this file name.
  bool IsRegistered(const std::string& file_name) const;
  sediment::Status ProcessRecords(Partition* p, std::vector<LogRecord>& records);
  Offset ReplayPointLocked(const Partition& p) const;
  // Deletes commit-log records below each partition's registered replay point, every
  // truncate_every, on its own thread.
  void TruncateLoop();

  Env* env_;
  Clock* clock_;
  CommitLog* log_;
  Global* global_;
  DigestOptions options_;
  std::vector<std::unique_ptr<Partition>> partitions_;
  std::atomic<bool> stop_{false};
  std::mutex truncate_mu_;
  std::condition_variable truncate_cv_;
  std::thread truncate_thread_;
};

}  // namespace sediment
