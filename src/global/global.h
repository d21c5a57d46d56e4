// Global (DESIGN section 5): the cluster metadata, event-sourced on a commit-log partition.
// Every change is a GlobalEvent appended to the log; every node applies events in log order with
// the deterministic rules of Apply(), so all nodes reach the same state. Conditional events
// (epoch checks) are accepted or rejected by the apply rule. Encoding: global/FORMAT.md.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "common/env.h"
#include "common/status.h"
#include "common/types.h"
#include "log/commit_log.h"
#include "model/event.h"

namespace sediment {

struct RepoInfo {
  std::string name;
  int64_t retention_ms = 0;  // 0 = keep forever
  std::set<std::string> ingest_tokens;
};

struct SegmentRecord {
  SegmentId id;           // assigned by the apply rule
  Datasource datasource;  // includes the repo
  PartitionId partition;
  Position min_pos, max_pos;  // inclusive
  int64_t min_ts = 0, max_ts = 0;
  uint64_t event_count = 0;
  uint64_t raw_bytes = 0;
  uint64_t file_size = 0;
  uint64_t content_hash = 0;
  Epoch epoch;            // claim epoch of the writer
  std::string file_name;  // name under the node's segment directory
  NodeId node;            // node holding the file
};

struct PartitionState {
  NodeId owner;
  Epoch epoch;              // current claim epoch; 0 = unclaimed
  Offset replay_point;      // smallest offset not yet fully in registered segments
  Offset truncated_before;  // commit log deleted below this
};

struct GlobalState {
  Offset applied_through{-1};  // log offset of the last applied event (-1: none)
  std::string cluster_id;
  // Authenticates node-to-node requests (DESIGN section 11). Set once by the first node.
  std::string cluster_secret;
  std::map<std::string, RepoInfo> repos;
  std::map<std::string, std::string> ingest_tokens;  // token -> repo
  std::set<std::string> api_tokens;
  std::map<SegmentId, SegmentRecord> segments;
  SegmentId next_segment_id{1};
  // (datasource key, partition) -> last position that is in a registered segment.
  std::map<std::pair<std::string, int32_t>, Position> flushed_through;
  std::map<int32_t, PartitionState> partitions;
};

// ---- Events ----
struct SetClusterId {
  std::string cluster_id;
};  // rejected when already set
struct CreateRepo {
  std::string name;
};  // rejected when it exists
struct AddIngestToken {
  std::string repo;
  std::string token;
};  // rejected: unknown repo / token used
struct AddApiToken {
  std::string token;
};
// Accepted when expected_epoch equals the partition's current epoch; then epoch+1, owner = node.
struct ClaimPartition {
  PartitionId partition;
  NodeId node;
  Epoch expected_epoch;
};
// Accepted when epoch is the partition's current epoch and segment.min_pos is above the
// datasource's flushed_through. Sets flushed_through to segment.max_pos, the replay point to
// new_replay_point (if higher) and assigns the segment id.
struct RegisterSegment {
  SegmentRecord segment;
  Offset new_replay_point;
};
// Accepted when epoch is current; raises the replay point (never lowers it).
struct AdvanceReplayPoint {
  PartitionId partition;
  Epoch epoch;
  Offset replay_point;
};
// Records that the commit log was truncated below `offset` (never lowers it).
struct SetTruncationPoint {
  PartitionId partition;
  Offset offset;
};
// Removes segments (retention, merges); unknown ids are ignored.
struct RemoveSegments {
  std::vector<SegmentId> ids;
};
// Rejected when a secret is already set or the secret is empty.
struct SetClusterSecret {
  std::string secret;
};

using GlobalEvent = std::variant<SetClusterId, CreateRepo, AddIngestToken, AddApiToken,
                                 ClaimPartition, RegisterSegment, AdvanceReplayPoint,
                                 SetTruncationPoint, RemoveSegments, SetClusterSecret>;

std::string EncodeGlobalEvent(const GlobalEvent& ev);
Result<GlobalEvent> DecodeGlobalEvent(std::string_view data);
std::string EncodeGlobalState(const GlobalState& state);
Result<GlobalState> DecodeGlobalState(std::string_view data);

// Name of the event's type ("RegisterSegment"), for logs and errors.
const char* GlobalEventName(const GlobalEvent& ev);

// Name of the snapshot file reflecting the log through `applied_through`:
// "snapshot-<applied_through, 20 digits zero-padded>.bin".
std::string GlobalSnapshotFileName(Offset applied_through);

// The deterministic apply rule: OK and the state changed, or Rejected and the state unchanged.
// For RegisterSegment, *assigned (if non-null) receives the new segment id.
Status ApplyGlobalEvent(GlobalState* state, const GlobalEvent& ev, SegmentId* assigned = nullptr);

struct GlobalOptions {
  // Write a snapshot after this many applied events (and on Close).
  uint64_t snapshot_every = 1000;
  // Truncate the log below the older of the two newest local snapshots. Only safe when this
  // node is the only reader of the log (embedded); a cluster's nodes need the log from the oldest
  // snapshot any of them may start from.
  bool truncate_log = true;
};

// Validates `bytes` as a snapshot (DecodeGlobalState) and writes it into snapshot_dir under its
// canonical name, atomically, so that the next Global::Open starts from it. Returns the offset it
// reflects.
Result<Offset> InstallGlobalSnapshot(Env* env, const std::string& snapshot_dir,
                                     std::string_view bytes);

// Global on a commit log. Thread-safe.
class Global {
 public:
  // `log` partition 0 holds the events (owned by the caller, must outlive Global). Loads the newest
  // snapshot in snapshot_dir, replays the log from the snapshot's offset, then keeps tailing the
  // log in a background thread.
  static Result<std::unique_ptr<Global>> Open(Env* env, CommitLog* log,
                                              const std::string& snapshot_dir,
                                              const GlobalOptions& options = {});
  virtual ~Global() = default;

  struct Outcome {
    Offset offset;         // log offset of the event
    SegmentId segment_id;  // for RegisterSegment
  };
  // Appends ev, waits until it is applied; OK with the outcome, or the apply rule's Rejected
  // status, or the log's error (then it may or may not be applied later).
  virtual Result<Outcome> Submit(const GlobalEvent& ev) = 0;

  // Runs fn with the current state under a shared lock; fn must not call back into Global.
  virtual void Read(const std::function<void(const GlobalState&)>& fn) const = 0;

  // Writes a snapshot now (atomically) and truncates the log below it (if truncate_log).
  virtual Status WriteSnapshot() = 0;
  // The current state, encoded as a snapshot (for a peer that starts without one).
  virtual std::pair<Offset, std::string> EncodedState() const = 0;
  // Offset of the last applied event (-1: none).
  virtual Offset Applied() const = 0;
  // Waits until every event through `offset` is applied; false on timeout or close.
  virtual bool WaitApplied(Offset offset, std::chrono::milliseconds timeout) = 0;
  // Stops the tailer (after a final snapshot). Idempotent.
  virtual Status Close() = 0;
};

}  // namespace sediment
