// Background merging of small segments (DESIGN section 6 "Flushing"): runs of small, adjacent,
// committed segments of one datasource and partition are rewritten into one large segment, which
// replaces them in one Global event. Contract, crash behaviour and durability: merge/README.md.
//
// Protocol of one merge (the Global apply rules enforce it):
//   1. write the output file locally (fsynced), then Submit(StageMerge{output, inputs}): the
//      output is a *staged* segment, invisible to queries, replicated like any segment;
//   2. once the output has EffectiveReplicationFactor announced replicas, Submit(CommitMerge):
//      the inputs disappear and the output becomes visible in the same applied event;
//   3. local copies of the inputs are deleted once no reader pins them.
// Inputs therefore stay in Global (and durable) until the output is as durable as they were.
//
// Thread-safety: every public method is thread-safe; passes (RunOnce and the background thread)
// are serialized.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "common/background_loop.h"
#include "common/clock.h"
#include "common/env.h"
#include "common/status.h"
#include "common/types.h"
#include "global/global.h"
#include "segment/segment.h"
#include "storage/store.h"

namespace sediment {

struct MergeOptions {
  // Upper bound on the summed file sizes of one merge's inputs. (A merge streams its inputs a
  // block at a time, so its memory does not grow with this.)
  uint64_t target_bytes = 128ull << 20;
  // Only segments whose file is smaller than this are merge candidates; it is also the top of the
  // size classes (merge/README.md "Size classes").
  uint64_t small_bytes = 32ull << 20;
  // Size classes: class c holds files in [small_bytes / fan_in^c, small_bytes / fan_in^(c-1)).
  // A merge is full when it holds fan_in members of its class, so each merge moves its inputs'
  // bytes up at least one class and an event is rewritten about log_fan_in(small_bytes / flushed
  // size) times. At least 2.
  size_t fan_in = 16;
  // In a chunk that is not full (a run that never fills), consecutive segments that are not merge
  // outputs are merged once the oldest of them has been known to this Merger for this long; a
  // merge output waits for a full chunk of its class.
  std::chrono::milliseconds min_age{60000};
  size_t min_inputs = 2;
  size_t max_inputs = 256;
  // Period of the background passes (Start).
  std::chrono::milliseconds interval{5000};
  // A staged output whose writer has not been heard from for this long is abandoned (removed) by
  // the partition's owner. Also how long a written output whose StageMerge outcome is unknown is
  // kept before its file is deleted.
  std::chrono::milliseconds grace{30000};
  SegmentWriterOptions segment;
  // Format 2 input blocks holding at least this many bytes of @rawstring are copied into the
  // output as stored (SegmentFileWriter::AddStoredBlock: no decode, no re-compression); smaller
  // ones are decoded and re-encoded together into full blocks. 0 (the default) means
  // segment.block_raw_bytes / 4: the writer closes a block on an estimate that also counts field
  // names and values, so a full block of parsed events holds about half of block_raw_bytes in raw
  // text. UINT64_MAX re-encodes every block.
  uint64_t copy_block_raw_bytes = 0;
};

struct MergeStats {
  uint64_t merges_staged = 0;         // StageMerge applied
  uint64_t merges_committed = 0;      // CommitMerge applied
  uint64_t merges_aborted = 0;        // staged outputs removed (input gone, output lost, abandoned)
  uint64_t merges_failed = 0;         // attempts given up before staging (corrupt input, I/O, ...)
  uint64_t segments_merged_away = 0;  // inputs removed by this node's commits
  uint64_t bytes_read = 0;        // input file bytes of merges whose inputs were read and verified
  uint64_t bytes_written = 0;     // output file bytes of merges written (published), staged or not
  uint64_t blocks_copied = 0;     // input blocks copied as stored into outputs
  uint64_t blocks_reencoded = 0;  // input blocks decoded and re-encoded
  // CPU time (user + system, of the thread running them) spent in merge attempts: reading and
  // verifying inputs, writing, syncing and publishing outputs, staging; failed attempts included.
  uint64_t cpu_micros = 0;
  std::string last_error;  // most recent failure, empty when none yet
};

// Size class of a file of `file_size` bytes: 0 when file_size >= top (never a candidate), else the
// c >= 1 with top / fan_in^c <= file_size < top / fan_in^(c-1) (integer division; a size below
// every bound gets the class whose bound reached 0); a fan_in below 2 counts as 2.
int MergeSizeClass(uint64_t file_size, uint64_t top, size_t fan_in);

// One candidate of a run, in position order (merge/README.md "Candidates and runs").
struct RunMember {
  uint64_t file_size = 0;
  int64_t first_seen_us = 0;  // monotonic time the Merger first saw it
  bool merged = false;        // an output of a merge: merged again only in a full chunk
};

// The tier planning of one run (merge/README.md "Size classes"): the merges to start now, as
// index ranges [first, second) of `run`, disjoint, in position order. Pure; `options` as the
// Merger normalizes them (fan_in >= 2, min_inputs >= 2, max_inputs >= min_inputs).
std::vector<std::pair<size_t, size_t>> PlanRunMerges(const std::vector<RunMember>& run,
                                                     const MergeOptions& options, int64_t now_us);

class Merger {
 public:
  using Stats = MergeStats;

  // All pointers are borrowed and must outlive the Merger. `store` is this node's segment
  // directory (outputs are written there); `peers->Self()` is this node. `owned_partitions`
  // returns the partitions this node digests (the only ones it plans merges for and cleans
  // abandoned staged outputs of); a partition is merged only when Global also names this node
  // its owner.
  Merger(Env* env, Clock* clock, Global* global, SegmentStore* store, SegmentFetcher* fetcher,
         PeerView* peers, std::function<std::vector<PartitionId>()> owned_partitions,
         MergeOptions options);
  ~Merger();

  Merger(const Merger&) = delete;
  Merger& operator=(const Merger&) = delete;

  // Starts the background thread (one RunOnce every options.interval). Errors: the store's
  // directory cannot be created, or already started.
  Status Start();
  // Stops and joins the background thread; a merge in progress finishes its current step.
  // Idempotent.
  void Stop();

  // One pass: (1) resolves staged merges (commits this node's outputs that reached the
  // replication factor, removes those whose inputs vanished or whose output file is lost, and
  // removes staged outputs of owned partitions whose writer is gone); (2) plans runs of owned
  // partitions; (3) executes every qualifying merge, one at a time. Returns the first error of
  // the pass (the pass still goes on with the other merges); each is also in stats().last_error.
  Status RunOnce();

  Stats stats() const;

 private:
  struct Plan {
    std::vector<SegmentRecord> inputs;  // adjacent, in position order
    uint64_t input_bytes = 0;
    int size_class = 0;  // the biggest (lowest-numbered) class among the inputs
  };
  struct Input;

  Status ResolveStaged();
  std::vector<Plan> MakePlans();
  Status Execute(const Plan& plan);
  // Opens every input of `plan` (pinned by the caller) and checks its footer against its Global
  // record.
  Status OpenInputs(const Plan& plan, std::vector<std::unique_ptr<Input>>* inputs);
  // Adds the inputs' events to `out` in position order, verifying them: full blocks are copied as
  // stored (options_.copy_block_raw_bytes), the others decoded and added a block at a time (so a
  // merge holds about two blocks, whatever its size).
  Status CopyEvents(std::vector<std::unique_ptr<Input>>& inputs, SegmentFileWriter* out);
  // Marks `seg` as failing (left out of planning for a while) and names it in `st`.
  Status InputFailed(const SegmentRecord& seg, const Status& st);
  // Opens one input: the local file, or a copy fetched from a peer and verified (a temporary file
  // of the store that goes with the reader).
  Result<std::unique_ptr<SegmentReader>> OpenInput(const SegmentRecord& seg);
  // Removes staged output `seg` from Global (RemoveSegments) and deletes the local file.
  Status Abort(const SegmentRecord& seg, const std::string& why);
  // Deletes the local copy of `file_name` once unpinned, unless Global still has a segment with
  // that file name.
  void DeleteLocalUnlessReferenced(const std::string& file_name);
  // Outputs written whose StageMerge outcome was unknown: forget those Global knows, delete the
  // files of those older than grace.
  void SweepUnknown();
  void Fail(const Status& st);
  uint32_t RandomU32();  // the random part of output file names

  Env* env_;
  Clock* clock_;
  Global* global_;
  SegmentStore* store_;
  SegmentFetcher* fetcher_;
  PeerView* peers_;
  std::function<std::vector<PartitionId>()> owned_partitions_;
  MergeOptions options_;
  NodeId self_;

  std::mutex run_mu_;                            // serializes passes; guards the members below it
  std::map<SegmentId, int64_t> first_seen_us_;   // candidate -> monotonic time first seen
  std::map<SegmentId, int64_t> excluded_until_;  // failed input -> retry after (monotonic us)
  std::map<std::string, int64_t> unknown_;       // output file -> time its StageMerge failed
  uint64_t rng_state_;

  mutable std::mutex stats_mu_;
  Stats stats_;

  BackgroundLoop loop_;  // runs RunOnce every options_.interval; last: stopped first
};

}  // namespace sediment
