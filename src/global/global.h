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
  int64_t retention_ms = 0;  // delete segments whose newest event is older; 0 = keep forever
  uint64_t retention_bytes =
      0;  // keep at most this many stored bytes (oldest go first); 0 = no bound
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
  std::string file_name;  // name under every holder's segment directory (unique in the cluster)
  NodeId node;            // node that wrote the file
  // ---- state only (not part of the RegisterSegment / StageMerge encodings) ----
  // Nodes that announced a verified copy (SegmentReplicaAdded). Registration sets {node}.
  std::set<NodeId> replicas;
  // Non-empty: a staged merge output replacing these segments; invisible to queries and ignored
  // by the safe offset until CommitMerge swaps it in.
  std::vector<SegmentId> merge_inputs;
  bool staged() const { return !merge_inputs.empty(); }
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
  // Segment replication factor set for the cluster (0 = default, see EffectiveReplicationFactor).
  uint32_t replication_factor = 0;
  // Nodes that ever started in this cluster (RegisterNode).
  std::set<NodeId> nodes;
};

// R: replication_factor when set, else 2 once at least two nodes registered, else 1.
uint32_t EffectiveReplicationFactor(const GlobalState& state);
// The safe offset of a partition (DESIGN section 8, P3): min(replay point, smallest offset of any
// committed (not staged) segment of the partition with fewer than R announced replicas). The
// commit log may be truncated below it and never above.
Offset SafeOffset(const GlobalState& state, PartitionId partition);

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
// Removes segments (retention, aborted merges); unknown ids are ignored.
struct RemoveSegments {
  std::vector<SegmentId> ids;
};
// Rejected when a secret is already set or the secret is empty.
struct SetClusterSecret {
  std::string secret;
};
// A node's first start in this cluster. Rejected when already known or node <= 0.
struct RegisterNode {
  NodeId node;
};
// A node holds a verified copy of the segment. Rejected: unknown segment, already listed.
struct AddSegmentReplica {
  SegmentId segment;
  NodeId node;
};
// A node no longer holds (or never will again hold) a copy. Rejected: unknown segment, node not
// listed, or fewer than min_remaining replicas would remain (dropping an extra copy passes R, so
// two nodes dropping at once can never take a segment below R; a corrupt copy passes 0).
struct RemoveSegmentReplica {
  SegmentId segment;
  NodeId node;
  uint32_t min_remaining = 0;
};
// Registers `output` (replicas {output.node}) as a staged merge of `inputs`. Rejected unless every
// input exists, is committed (not staged), and has output's datasource and partition, and output's
// position range is exactly the inputs' combined range. Assigns the output's id.
struct StageMerge {
  SegmentRecord output;
  std::vector<SegmentId> inputs;
};
// Swaps a staged merge in, in one step: the inputs are removed and the output becomes visible.
// Rejected unless the output is staged, every input still exists, and the output has at least
// EffectiveReplicationFactor announced replicas (a merge never lowers durability).
struct CommitMerge {
  SegmentId output;
};
// Rejected when factor is 0.
struct SetReplicationFactor {
  uint32_t factor = 0;
};
// Rejected for an unknown repository or a negative age.
struct SetRetention {
  std::string repo;
  int64_t retention_ms = 0;
  uint64_t retention_bytes = 0;
};
// A committed segment rebuilt from the commit log (every replica lost): replaces `old_segment`
// with `rebuilt` (new id, replicas {rebuilt.node}). Rejected unless old_segment exists and is
// committed, rebuilt has the same datasource, partition, position range and event count, and
// rebuilt.epoch is the partition's current claim epoch (only the owner rebuilds).
struct ReplaceSegment {
  SegmentId old_segment;
  SegmentRecord rebuilt;
};

using GlobalEvent =
    std::variant<SetClusterId, CreateRepo, AddIngestToken, AddApiToken, ClaimPartition,
                 RegisterSegment, AdvanceReplayPoint, SetTruncationPoint, RemoveSegments,
                 SetClusterSecret, RegisterNode, AddSegmentReplica, RemoveSegmentReplica,
                 StageMerge, CommitMerge, SetReplicationFactor, SetRetention, ReplaceSegment>;

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
// For RegisterSegment, StageMerge and ReplaceSegment, *assigned (if non-null) receives the new
// segment id.
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
    SegmentId segment_id;  // for RegisterSegment, StageMerge, ReplaceSegment
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
  // Offset of the oldest snapshot kept in snapshot_dir (-1: none). A node can always restart
  // from it, so the log may be truncated below it + 1 as far as this node is concerned.
  virtual Offset OldestSnapshot() const = 0;
  // Waits until every event through `offset` is applied; false on timeout or close.
  virtual bool WaitApplied(Offset offset, std::chrono::milliseconds timeout) = 0;
  // Stops the tailer (after a final snapshot). Idempotent.
  virtual Status Close() = 0;
};

}  // namespace sediment
