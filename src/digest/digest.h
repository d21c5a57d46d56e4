// Digest (DESIGN section 6): turns ingest partitions into segment files registered in Global.
//
// Ownership: the caller assigns partitions (Assign/AssignAll: the embedded log's single node owns
// everything; on Kafka the consumer group decides) and revokes them (Revoke). For each assigned
// partition a worker first claims it through Global (ClaimPartition, epoch + 1) and digests only
// once the claim is applied. A worker whose claim is lost (a registration rejected because another
// node claimed a newer epoch) drops its buffers and, while the partition is still assigned here,
// claims again after `reclaim_backoff`.
//
// For each partition it owns (claimed through Global with a new epoch), a worker thread reads the
// commit log from the partition's replay point, skips every event at or below its datasource's
// flushed_through (replayed events already in segments are never written twice), keeps one
// in-progress buffer per datasource, and flushes a buffer to a segment when it reaches
// flush_bytes or flush_age. A flush writes and fsyncs the file, then submits RegisterSegment with
// the claim epoch; only after Global applied it is the buffer dropped. A rejected registration
// (stale epoch) deletes the file and stops the worker: the partition belongs to someone else.
//
// A maintenance thread (apart from the workers, so digest throughput never waits for it) does two
// things for the partitions this node owns under an applied, current claim:
// - Truncation (DESIGN P3): at most SafeOffset(state, p), recorded with SetTruncationPoint under
//   the claim epoch first, then DeleteBefore only once Global accepted it (a zombie owner is
//   fenced before it deletes anything).
// - Rebuild (DESIGN P2): a committed segment of the partition with no copy on a live node for
//   `rebuild_after` is rebuilt from the commit log (the safe offset never passed it while it had
//   fewer than R copies) and swapped in with ReplaceSegment; when the log no longer holds it, it
//   is reported lost.
//
// Thread-safety: all public methods are thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/background_loop.h"
#include "common/clock.h"
#include "common/env.h"
#include "common/status.h"
#include "common/types.h"
#include "global/global.h"
#include "log/commit_log.h"
#include "model/event.h"
#include "segment/segment.h"
#include "storage/store.h"

namespace sediment {

struct DigestOptions {
  // Where this node's segment files live; used only by the constructor taking an Env (the one
  // taking a SegmentStore writes into the store's directory).
  std::string segment_dir;
  NodeId node{1};
  size_t flush_bytes = 32u << 20;             // per datasource buffer
  std::chrono::milliseconds flush_age{2000};  // oldest buffered event's age
  size_t read_batch_bytes = 8u << 20;
  // A worker's Read waits at most this long for a record while its partition has nothing buffered
  // and no replay point to register (a record ends the wait at once, so this costs no latency;
  // Stop and Revoke cut it short with CommitLog::WakeReaders). With buffered events it waits at
  // most until the oldest buffer's flush_age passes, and at most 200 ms; so it does while a rebuild
  // reads the partition (a log may serve one Read of a partition at a time).
  std::chrono::milliseconds idle_read_wait{2000};
  std::chrono::milliseconds truncate_every{10000};  // DeleteBefore(safe offset) period
  // Truncate the commit log of owned partitions below SafeOffset(state, p) (DESIGN P3: the replay
  // point, held back by any committed segment with fewer than R announced replicas or, with bucket
  // storage, not yet uploaded). false: the
  // digest never truncates.
  bool truncate = true;
  // Liveness of a node (DESIGN section 9: heard from recently). Called from the maintenance
  // thread, never under a Digest or Global lock; must be thread-safe and cheap. null: every node
  // is alive. This node always counts as alive.
  std::function<bool(NodeId)> is_alive;
  // A committed segment of an owned partition whose every announced replica is on a dead node
  // (or that has none) for this long is rebuilt from the commit log.
  std::chrono::milliseconds rebuild_after{5000};
  // How often the maintenance thread looks for such segments.
  std::chrono::milliseconds rebuild_check_every{1000};
  // Wait before claiming again a partition whose claim was lost while it is still assigned here
  // (gives the consumer group time to tell this node it lost the partition).
  std::chrono::milliseconds reclaim_backoff{3000};
  // After a claim, the duplicate-message window is seeded with the message ids of the records
  // just below the replay point that the log still holds (so a producer retry stored on both
  // sides of it is dropped as the previous owner dropped it): at most this many records, about
  // this many bytes, read within this time (then it digests with what it has). 0 records: none.
  int64_t dedup_seed_records = 10'000;
  size_t dedup_seed_bytes = 64u << 20;
  std::chrono::milliseconds dedup_seed_time{5000};
  SegmentWriterOptions segment;
  // Nice value of the partition workers (each sets its own when it starts; 0 leaves them as
  // started). Above 0, threads answering requests (ingest acknowledgements) get the CPU first
  // when both want it, and the workers catch up from the commit log when load falls; under a
  // sustained overload they still get a share (nice 5: about a quarter of a contended core).
  int worker_nice = 0;
};

// Events still in a buffer, for queries. `events` is an immutable copy.
struct BufferedBatch {
  Datasource datasource;
  PartitionId partition;
  Epoch epoch;  // claim epoch under which the events were read
  std::shared_ptr<const std::vector<PositionedEvent>> events;
};

// Offsets [first, end) of a partition that the commit log no longer held when the digest needed
// them, and that sediment did not delete itself: at or above both the partition's recorded
// truncation point and its replay point (everything below the replay point is in registered
// segments), so the records were deleted by something else (Kafka retention, an operator's
// DeleteRecords) before they reached a segment. Their events are lost.
struct LostOffsetRange {
  Offset first;
  Offset end;               // exclusive
  int64_t detected_ms = 0;  // wall clock (Clock::NowMillis) when the digest found the gap
  int64_t offsets() const { return end.value - first.value; }
};

// What the digest found lost in one partition since this process started (under any claim).
struct LostOffsets {
  static constexpr size_t kMaxRangesKept = 16;
  std::vector<LostOffsetRange> ranges;  // the newest kMaxRangesKept, oldest first
  uint64_t range_count = 0;             // every range found, including those no longer kept
  uint64_t offsets = 0;                 // sum of their sizes
};

struct PartitionDigestStatus {
  PartitionId partition;
  bool claimed = false;  // false while the claim is being made (then offsets are -1)
  Epoch epoch;
  Offset next_offset;   // next offset to read
  Offset replay_point;  // as last registered
  uint64_t buffered_events = 0;
  uint64_t duplicates_dropped = 0;  // second copies of ingest messages (see IngestMessage::id)
  // Segments of the partition rebuilt from the commit log under this claim (every copy was on dead
  // nodes), and segments seen unrecoverable (the log no longer holds their range, or it holds a
  // different number of their events than they had).
  uint64_t segments_rebuilt = 0;
  uint64_t segments_lost = 0;
  // Offsets deleted from the commit log before they were digested (see LostOffsetRange).
  LostOffsets lost;
  std::string error;  // last error, empty when healthy
};

class Digest {
 public:
  // Segment files are written, and deleted, through `store` (borrowed; must outlive the digest),
  // the node's SegmentStore: the file names are segment/file_name.h's flushed and rebuilt shapes.
  Digest(Clock* clock, CommitLog* log, Global* global, SegmentStore* store, DigestOptions options);
  // The same with a SegmentStore of its own on `env` and `options.segment_dir` (its pins and
  // access times are not the node's: prefer the constructor above).
  Digest(Env* env, Clock* clock, CommitLog* log, Global* global, DigestOptions options);
  ~Digest();

  // Keeps exactly the files of the segment directory that some segment (committed or staged)
  // lists with this node among its replicas; removes every other file (orphans of a crash
  // between write and registration, extra copies whose replica was dropped, temp files). Then
  // starts the maintenance thread. Owns no partition yet.
  Status Start();
  // Starts a worker (claim, then digest) for each partition not already assigned. Non-blocking.
  void Assign(const std::vector<PartitionId>& partitions);
  // Every partition of the log (a single node on the embedded log).
  void AssignAll();
  // Tells the partitions' workers to stop; their buffers are dropped (the next owner replays them
  // from the log). Non-blocking; a worker in the middle of a flush finishes it first (a
  // registration it completes is still fenced by its epoch).
  void Revoke(const std::vector<PartitionId>& partitions);
  // Assigned partitions (claimed or still claiming).
  std::vector<PartitionId> Assigned() const;
  // Waits until every assigned partition is claimed and digesting; false on timeout.
  bool WaitClaimed(std::chrono::milliseconds timeout) const;
  // Stops the workers (buffers are not flushed: they are replayed from the log on the next start).
  void Stop();

  // Every buffered event of the partitions this node digests under an applied claim (of `only`
  // when non-null), shared, not copied: one batch per run of a buffer (see EventRuns), so a
  // datasource may come as several batches, in position order. The events of a batch never
  // change; they stay valid while the caller holds the batch. Callers combining it with Global's
  // segments must take this snapshot FIRST and then read Global, keeping only buffered events above
  // flushed_through: that cut counts every event exactly once while flushes happen concurrently.
  std::vector<BufferedBatch> SnapshotBuffers(const std::vector<PartitionId>* only = nullptr) const;

  std::vector<PartitionDigestStatus> PartitionStatuses() const;

  // Lost offsets found since Start, by partition, including partitions no longer assigned here
  // (empty map: none). A non-empty map means acknowledged events were lost: status is degraded.
  std::map<int32_t, LostOffsets> LostOffsetsByPartition() const;

  // Flushes every non-empty buffer now and waits for it (tests, shutdown tooling).
  sediment::Status FlushAll();

 private:
  struct Partition;
  struct Slot;
  // A slot's worker: claim, digest until revoked or the claim is lost, claim again if still
  // assigned.
  void Supervise(std::shared_ptr<Slot> slot);
  // Claims slot's partition and loads its state; false when the slot was stopped first.
  bool Claim(Slot* slot, Partition* p);
  // Digests until stopped (returns true) or the claim is lost (returns false).
  bool Run(Slot* slot, Partition* p);
  // After a worker ended: deletes files of registrations that can no longer be applied.
  void DropPending(Partition* p);
  bool Stopping(const Slot* slot) const;
  bool SleepUnlessStopping(const Slot* slot, std::chrono::milliseconds d) const;
  // The partitions currently digested under an applied claim.
  std::vector<std::shared_ptr<Partition>> Current() const;
  sediment::Status Flush(Partition* p, const std::string& key);
  // After a registration was applied: records flushed_through, drops the flushed events (keeping
  // any that arrived since the segment was written) and raises the replay point.
  void CompleteFlush(Partition* p, const std::string& key, Position max_pos,
                     Offset new_replay_point);
  // Whether Global has a segment written by this node with this file name.
  bool IsRegistered(const std::string& file_name) const;
  sediment::Status ProcessRecords(Partition* p, std::vector<LogRecord>& records);
  // How long the worker's next Read of p may wait (see DigestOptions::idle_read_wait).
  std::chrono::milliseconds ReadWait(const Partition& p) const;
  Offset ReplayPointLocked(const Partition& p) const;
  // One pass of the maintenance loop: Truncate() when truncate_every passed (if truncate),
  // CheckRebuilds() when rebuild_check_every passed; returns the wait until the next is due.
  BackgroundLoop::Duration MaintenancePass();
  // For each owned partition whose worker has seeded its duplicate window: records the
  // truncation point (SafeOffset) with the claim epoch, then, once accepted, deletes the commit
  // log below it.
  void Truncate();
  struct SeedIds {
    std::vector<uint64_t> ids;  // message ids, oldest first (0 = unknown left out)
    uint64_t records = 0;       // records read
    Offset from;                // lowest offset read (`until` when none)
    std::string cut;            // why it stopped before reading all it wanted; empty: it did not
  };
  // Message ids of the records of `p` just below `until`, within the dedup_seed_* bounds; records
  // below the log start are skipped. A bound, a read error or `stopping()` ends it early, keeping
  // what it read (the ids nearest to `until`).
  SeedIds IdsBefore(PartitionId p, Offset until, const std::function<bool()>& stopping);
  // Seeds p's duplicate window from IdsBefore(its replay point) (the worker, after a claim).
  void SeedDedup(const Slot* slot, Partition* p);
  // Finds committed segments of owned partitions with no live copy and rebuilds those that stayed
  // so for rebuild_after.
  void CheckRebuilds();
  // Resolves rebuilds of `p` whose ReplaceSegment outcome was unknown.
  void ResolvePendingRebuilds(Partition* p);
  // Rebuilds `seg` (a committed segment of p) from the commit log and submits ReplaceSegment.
  void Rebuild(Partition* p, const SegmentRecord& seg);
  // Submits a rebuilt record whose file is written; keeps it pending when the outcome is unknown.
  void SubmitRebuilt(Partition* p, SegmentId old_id, const SegmentRecord& rebuilt);
  // The worker of `p` needed offset `from` and the log starts at `start` (> from): records the
  // part of [from, start) that sediment did not truncate itself as lost (error log line), after
  // bringing Global up to date with an event fenced by p's epoch. OK: continue at `start`;
  // Rejected: the claim is lost; other errors: retry later.
  sediment::Status NoteLogStartPassed(Partition* p, Offset from, Offset start);
  // Marks `seg` unrecoverable (logged once, counted in segments_lost).
  void MarkLost(Partition* p, const SegmentRecord& seg, const std::string& why);

  std::unique_ptr<SegmentStore> owned_store_;  // only with the Env constructor
  SegmentStore* store_;
  Clock* clock_;
  CommitLog* log_;
  Global* global_;
  DigestOptions options_;
  mutable std::mutex slots_mu_;
  mutable std::condition_variable slots_cv_;        // a slot's claim state changed
  std::map<int32_t, std::shared_ptr<Slot>> slots_;  // assigned partitions
  std::vector<std::shared_ptr<Slot>> retired_;      // revoked, thread not joined yet
  std::atomic<bool> stop_{false};
  mutable std::mutex lost_mu_;
  std::map<int32_t, LostOffsets> lost_;  // guarded by lost_mu_
  // When the maintenance tasks are due next (real time: the loop's waits are): set by Start, then
  // touched only by the maintenance thread.
  std::chrono::steady_clock::time_point next_truncate_;
  std::chrono::steady_clock::time_point next_rebuild_;
  BackgroundLoop maintenance_;  // runs MaintenancePass; last: stopped first
};

}  // namespace sediment
