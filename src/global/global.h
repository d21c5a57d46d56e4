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
#include "global/tokens.h"
#include "log/commit_log.h"
#include "model/event.h"

namespace sediment {

// A custom parser of a repository: a query-language pipeline run on each event at ingest, and
// the fields it turns into tags (LogScale's tagFields). Stored as the API accepted it.
struct ParserDef {
  std::string script;
  std::vector<std::string> tag_fields;
  bool operator==(const ParserDef&) const = default;
};

// A named ingest token of a repository (CreateIngestToken): only its salted hash is kept, also in
// RepoInfo::ingest_token_hashes and GlobalState::ingest_token_hashes (the lookups' index).
struct IngestTokenInfo {
  std::string token_hash;
  std::string parser;      // the parser its events go through (parsers/README.md); empty: none
  int64_t created_ms = 0;  // the creating node's wall clock
  bool operator==(const IngestTokenInfo&) const = default;
};

// What an API token may do on one repository: a bit set of these.
inline constexpr uint32_t kPermRead = 1;    // query, list and read files/parsers/retention
inline constexpr uint32_t kPermIngest = 2;  // ingest (ingest routes, API token with ?repo=)
inline constexpr uint32_t kPermManage = 4;  // parsers, files, retention, ingest tokens
inline constexpr uint32_t kPermAll = kPermRead | kPermIngest | kPermManage;

// A named API token (CreateApiToken). `admin`: every permission on every repository, and the
// organization-level routes (repositories, API tokens, cluster views). Tokens given by
// --api-token are not named: they are in GlobalState::api_token_hashes and act as admin.
struct ApiTokenInfo {
  std::string token_hash;
  bool admin = false;
  std::map<std::string, uint32_t> repos;  // repository -> kPerm* bits (never 0)
  int64_t created_ms = 0;
  bool operator==(const ApiTokenInfo&) const = default;
};

// A saved search (LogScale's model): a named query of a repository and its time window, stored as
// the API accepted them (the bounds as query::ParseTimeBound reads them; end "" = now).
struct SavedSearch {
  std::string query;
  std::string start;
  std::string end;
  bool operator==(const SavedSearch&) const = default;
};

// What an alert does when it fires (alerts/README.md has the body template's placeholders).
enum class AlertActionKind : uint8_t { kWebhook = 1, kLogLine = 2 };
struct AlertAction {
  AlertActionKind kind = AlertActionKind::kWebhook;
  std::string url;                                           // webhook: http:// or https:// URL
  std::vector<std::pair<std::string, std::string>> headers;  // webhook: extra request headers
  std::string body_template;  // webhook: JSON body; log line: the line ("" = the default)
  bool operator==(const AlertAction&) const = default;
};

// Fire when some result row's `field` compares with `value` by `op` (">", ">=", "<", "<=", "==",
// "!="); without a threshold an alert fires when its result has any row.
struct AlertThreshold {
  std::string field;
  std::string op;
  double value = 0;
  bool operator==(const AlertThreshold&) const = default;
};

// A scheduled search / alert: `query` runs every `every_ms` over the window
// [end - window_ms, end), end a multiple of every_ms, once the wall clock passed end + delay_ms.
struct AlertDef {
  std::string query;
  int64_t every_ms = 0;   // > 0
  int64_t window_ms = 0;  // > 0
  int64_t delay_ms = 0;   // >= 0: how long after a window's end it runs (late events)
  std::optional<AlertThreshold> threshold;
  std::vector<AlertAction> actions;
  bool enabled = true;
  bool operator==(const AlertDef&) const = default;
};

// How a window ended (AlertWindowDone).
enum class AlertOutcome : uint8_t {
  kQuiet = 0,   // the condition did not hold: nothing sent
  kFired = 1,   // every action succeeded
  kFailed = 2,  // an action still failed after its retries (logged; the window is not run again)
};

// A window that fired (or failed to deliver), as recorded by AlertWindowDone.
struct AlertFiring {
  int64_t window_end_ms = 0;  // the window is [end - window_ms of that time, end)
  int64_t window_start_ms = 0;
  AlertOutcome outcome = AlertOutcome::kFired;
  uint64_t result_count = 0;
  uint32_t attempts = 0;  // webhook deliveries tried (all actions)
  NodeId node;            // the node that ran it
  int64_t at_ms = 0;      // its wall clock when it recorded the window
  std::string error;      // kFailed: the last action error
};

struct AlertState {
  AlertDef def;
  // Assigned at creation (GlobalState::next_alert_id), kept by updates: with a window's end it
  // makes the firing id (AlertFiringId).
  uint64_t id = 0;
  // End of the last completed window: the next window to run ends at done_through_ms + every_ms.
  int64_t done_through_ms = 0;
  std::vector<AlertFiring> firings;  // the newest kMaxFirings, oldest first
  static constexpr size_t kMaxFirings = 100;
};

// The firing id of an alert's window: "<alert id>-<window end ms>". The same window always has
// the same id, on every node and after every failover.
std::string AlertFiringId(uint64_t alert_id, int64_t window_end_ms);
// A saved search or alert name: 1 to 100 bytes of ASCII letters, digits, '-', '_' and '.', not
// "." or "..". The apply rule checks it.
bool IsValidAlertName(std::string_view name);

struct RepoInfo {
  std::string name;
  // Wall clock of the node that created it (CreateRepo of event version 4); 0: unknown (created
  // before creation times were recorded).
  int64_t created_ms = 0;
  // Named ingest tokens (CreateIngestToken): name -> token. Tokens from --ingest-token flags are
  // not named: they are only in ingest_token_hashes.
  std::map<std::string, IngestTokenInfo> ingest_tokens;
  int64_t retention_ms = 0;  // delete segments whose newest event is older; 0 = keep forever
  uint64_t retention_bytes =
      0;  // keep at most this many stored bytes (oldest go first); 0 = no bound
  std::set<std::string> ingest_token_hashes;  // of this repository's tokens (global/tokens.h)
  // Lookup files (CSV or JSON tables for match()/readFile(), uploaded through the API): name ->
  // content, as uploaded. Put by PutLookupFile, removed by DeleteLookupFile.
  std::map<std::string, std::string> lookup_files;
  // Custom parsers (parsers/README.md): name -> definition. Put by PutParser, removed by
  // DeleteParser.
  std::map<std::string, ParserDef> parsers;
  // Saved searches and alerts (alerts/README.md): name -> definition. PutSavedSearch /
  // DeleteSavedSearch, PutAlert / DeleteAlert / AlertWindowDone.
  std::map<std::string, SavedSearch> saved_searches;
  std::map<std::string, AlertState> alerts;
};

// The longest lookup file name (bytes).
inline constexpr size_t kMaxLookupFileNameBytes = 255;
// A lookup file name: 1 to kMaxLookupFileNameBytes bytes, not "." or "..", no '/', '\\' or
// control character (bytes below 0x20 and 0x7f). The apply rule and the API check it alike.
bool IsValidLookupFileName(std::string_view name);
// A parser name: 1 to 100 bytes of ASCII letters, digits, '-', '_' and '.', not "." or "..".
// The apply rule checks it; the API also refuses the built-in parsers' names.
bool IsValidParserName(std::string_view name);
// A repository, ingest token or API token name created through the management API: 1 to 100
// bytes of ASCII letters, digits, '-', '_' and '.', not starting with '.'. The apply rule checks
// it for the token events (CreateRepo keeps accepting any non-empty name: repositories named by
// start-up flags and older records).
bool IsValidResourceName(std::string_view name);

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
  // A verified copy is in the bucket (SegmentUploaded), under BucketSegmentKey(file_name).
  bool uploaded = false;
  // Commit-log generation the positions belong to (GlobalState::generation when registered; a
  // merge output keeps its inputs'). Positions of different generations are unrelated.
  uint32_t generation = 0;
  bool staged() const { return !merge_inputs.empty(); }
};

// A segment of the previous commit log that a recovery from the bucket could not bring back.
struct LostSegment {
  std::string datasource;  // Datasource::Key()
  PartitionId partition;
  int64_t min_ts = 0, max_ts = 0;
  uint64_t event_count = 0;
  uint64_t raw_bytes = 0;
  std::string file_name;
};

// What the last recovery from the bucket kept and lost (DESIGN section 8, P4).
struct RecoveryReport {
  uint32_t generation = 0;              // 0: this cluster was never recovered
  Offset snapshot_applied_through{-1};  // the bucket snapshot it started from
  std::string snapshot_key;             // its key in the bucket
  uint64_t kept_segments = 0, kept_events = 0, kept_bytes = 0;
  uint64_t added_segments = 0;  // uploaded after that snapshot, found in the bucket
  uint64_t lost_segments = 0, lost_events = 0, lost_bytes = 0;  // bytes: segment file sizes
  std::vector<LostSegment> lost;  // at most kMaxLostListed, oldest first
  static constexpr size_t kMaxLostListed = 1000;
};

// What the bucket garbage collector recorded (BucketObjectsCollected events), cluster-wide.
struct BucketGcReport {
  uint64_t records = 0;  // accepted BucketObjectsCollected events
  uint64_t objects = 0;  // file names they listed (a name recorded twice counts twice)
  uint64_t bytes = 0;    // the listed objects' sizes
  NodeId last_node;      // collector of the newest record (0: none yet)
  int64_t last_ms = 0;   // its wall-clock time, from the event
  std::vector<std::string> last_files;  // its file names, at most kMaxListed
  static constexpr size_t kMaxListed = 100;
};

struct PartitionState {
  NodeId owner;
  Epoch epoch;          // current claim epoch; 0 = unclaimed
  Offset replay_point;  // smallest offset not yet fully in registered segments
  // The commit log is given up below this: deleted, or about to be (the owner records it with
  // SetTruncationPoint before it calls DeleteBefore). Never lowered; SafeOffset never goes below
  // it.
  Offset truncated_before;
};

struct GlobalState {
  Offset applied_through{-1};  // log offset of the last applied event (-1: none)
  std::string cluster_id;
  // The salted hash (global/tokens.h) of the secret that authenticates node-to-node requests
  // (DESIGN section 11); set once by the first node. The secret itself is never in Global: each
  // node gets it from --cluster-secret or its data dir's cluster-secret file.
  std::string cluster_secret_verifier;
  // Not encoded: the secret in clear when this state was decoded from a snapshot of version 1 to
  // 5, or applied a version-1 SetClusterSecret (written before it was hashed), so that a node
  // upgrading from such a state can keep using it (the server writes it to its cluster-secret
  // file). Empty otherwise.
  std::string legacy_cluster_secret;
  std::map<std::string, RepoInfo> repos;
  // Tokens only as salted hashes (global/tokens.h; look them up with IngestRepoForToken and
  // IsApiToken): hash -> repo, and the API token hashes.
  std::map<std::string, std::string> ingest_token_hashes;
  std::set<std::string> api_token_hashes;  // the --api-token tokens: admin
  // Named API tokens with their permissions (CreateApiToken): name -> token.
  std::map<std::string, ApiTokenInfo> api_tokens;
  std::map<SegmentId, SegmentRecord> segments;
  SegmentId next_segment_id{1};
  // (datasource key, partition) -> last position that is in a registered segment.
  std::map<std::pair<std::string, int32_t>, Position> flushed_through;
  std::map<int32_t, PartitionState> partitions;
  // Segment replication factor set for the cluster (0 = default, see EffectiveReplicationFactor).
  uint32_t replication_factor = 0;
  // Nodes that ever started in this cluster (RegisterNode).
  std::set<NodeId> nodes;
  // Bucket storage location ("s3://bucket/prefix at endpoint"); empty = bucket storage off.
  // With it on, a segment is durable once uploaded (SegmentDurable).
  std::string bucket;
  // Commit-log generation: 0 for the cluster's first commit log, +1 for each recovery from the
  // bucket onto a new one (positions restart there).
  uint32_t generation = 0;
  RecoveryReport recovery;
  BucketGcReport bucket_gc;
  // The id the next created alert gets (AlertState::id).
  uint64_t next_alert_id = 1;
};

// Durable for the safe offset and for merges: in the bucket when bucket storage is on, else on
// at least R nodes.
bool SegmentDurable(const GlobalState& state, const SegmentRecord& seg);
// Bucket keys (relative to the configured prefix) of a segment file and of a Global snapshot.
// Snapshot keys sort by (generation, offset), so the newest is the last in a listing.
std::string BucketSegmentKey(const std::string& file_name);
inline constexpr const char* kBucketSegmentPrefix = "segments/";
inline constexpr const char* kBucketSnapshotPrefix = "global/";
std::string BucketSnapshotKey(uint32_t generation, Offset applied_through);

// R: replication_factor when set, else 2 once at least two nodes registered, else 1.
uint32_t EffectiveReplicationFactor(const GlobalState& state);
// The safe offset of a partition (DESIGN section 8, P3): min(replay point, smallest offset of any
// committed (not staged) segment of the partition's current generation that is not
// SegmentDurable), but never below the partition's truncated_before: the commit log may be
// truncated below it and never above. The floor keeps it from going below a point the log was
// truncated to (within a generation): a segment that loses durability after the log below it was
// given up (a rebuilt segment with one copy, a merge output or segment that lost a replica, a
// raised replication factor, bucket storage turned on) cannot bring the deleted records back, so
// holding the offset below the truncation point would protect nothing. Such a segment still
// holds it where it lies above truncated_before. 0 for a partition never claimed.
Offset SafeOffset(const GlobalState& state, PartitionId partition);

// ---- Events ----
struct SetClusterId {
  std::string cluster_id;
};  // rejected when already set
// Rejected when it exists or the name is empty. created_ms: the creator's wall clock (0: unknown;
// written as event version 4 when set).
struct CreateRepo {
  std::string name;
  int64_t created_ms = 0;
};
// Tokens travel as salted hashes (HashToken, global/tokens.h). `legacy_token` is set only by the
// decoder of a version-1/2 record (written when tokens were stored in clear); the apply rule hashes
// it (LegacyTokenHash). Writers set `token_hash` only.
// Rejected: unknown repo, neither field a token (a hash of the wrong size), the same hash already
// stored, or (legacy records, as they were then) a token already mapped to any repo. A new token's
// clear value is unknown to the rule: the server checks that it is not in use before it submits.
struct AddIngestToken {
  std::string repo;
  std::string token_hash;
  std::string legacy_token;
};
// As AddIngestToken, for the API tokens.
struct AddApiToken {
  std::string token_hash;
  std::string legacy_token;
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
// Records that the owner gives the commit log up below `offset` (it calls DeleteBefore only once
// this is applied). Accepted when `epoch` is the partition's current claim epoch (a zombie owner
// is fenced, as for AdvanceReplayPoint) and `offset` is at most SafeOffset(state, partition) as of
// this event (a view of Global that lagged cannot record more than is safe). Raises
// truncated_before, never lowers it.
// epoch 0: a record of event version 1 (written before the epoch existed, global/FORMAT.md),
// applied as it was then: only the partition must be known. Writers always pass their claim epoch.
struct SetTruncationPoint {
  PartitionId partition;
  Epoch epoch;
  Offset offset;
};
// Removes segments (retention, aborted merges); unknown ids are ignored.
struct RemoveSegments {
  std::vector<SegmentId> ids;
};
// The cluster secret's verifier (HashToken of the secret). `legacy_secret`: only from a version-1
// record, the secret in clear, hashed by the apply rule (LegacyTokenHash) and kept in the state's
// legacy_cluster_secret. Rejected when a verifier is already set or neither field is usable.
struct SetClusterSecret {
  std::string verifier;
  std::string legacy_secret;
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
// input exists, is committed (not staged), has output's datasource and partition and the same
// generation as the others, and output's position range is exactly the inputs' combined range.
// Assigns the output's id; the output takes the inputs' generation.
struct StageMerge {
  SegmentRecord output;
  std::vector<SegmentId> inputs;
};
// Swaps a staged merge in, in one step: the inputs are removed and the output becomes visible.
// Rejected unless the output is staged, every input still exists, and the output is
// SegmentDurable (a merge never lowers durability).
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
// rebuilt.epoch is the partition's current claim epoch (only the owner rebuilds), and old_segment
// is of the current generation (older positions are not in this commit log).
struct ReplaceSegment {
  SegmentId old_segment;
  SegmentRecord rebuilt;
};

// Turns bucket storage on (or records its new location). Rejected when empty or unchanged.
struct SetBucket {
  std::string location;
};
// A verified copy of the segment is in the bucket. Rejected: unknown segment, already uploaded.
struct SegmentUploaded {
  SegmentId segment;
};
// First event of a new commit log whose state was recovered from the bucket (RecoverState). It
// cannot be applied to any other state: rejected when the state's generation is already at or
// above `generation`; otherwise Aborted (a node replaying it from an empty state must start from
// the recovering node's snapshot instead, IsRecoveryMarker).
struct BeginRecovery {
  uint32_t generation = 0;
};

// A segment file found in the bucket.
struct BucketSegmentFile {
  std::string file_name;
  uint64_t size = 0;
};

// The bucket garbage collector of `node` is about to delete the bucket objects of these segment
// files (keys BucketSegmentKey(file_name)); written before the deletion, which happens only once
// the event is accepted. Rejected when bucket storage is off, `files` is empty, a file name is
// empty, or any file name is the file of a segment in the state (committed or staged, of any
// generation): an object a segment still references is never deleted, whatever the collector's
// view of the state was. Accepted: counted in GlobalState::bucket_gc. at_ms is the collector's
// wall clock (for status pages only).
struct BucketObjectsCollected {
  NodeId node;
  int64_t at_ms = 0;
  std::vector<BucketSegmentFile> files;
};

// Stores the lookup file `name` of `repo` with `content`, replacing one of that name. Rejected
// for an unknown repository or a name that is not IsValidLookupFileName. The content's size and
// shape are the API's to check (the rule takes what was accepted).
struct PutLookupFile {
  std::string repo;
  std::string name;
  std::string content;
};
// Removes the lookup file `name` of `repo`. Rejected for an unknown repository or file.
struct DeleteLookupFile {
  std::string repo;
  std::string name;
};

// Stores the custom parser `name` of `repo`, replacing one of that name. Rejected for an unknown
// repository or a name that is not IsValidParserName. The script is the API's to validate.
struct PutParser {
  std::string repo;
  std::string name;
  ParserDef parser;
};
// Removes the custom parser `name` of `repo`. Rejected for an unknown repository or parser.
struct DeleteParser {
  std::string repo;
  std::string name;
};

// Deletes a repository: its settings, lookup files, parsers, saved searches and alerts, every
// ingest token of it (named or from flags), every API token's permissions on it, and every segment
// record of it (committed or staged; their files are then removed as for RemoveSegments). Rejected
// for an unknown repository.
struct DeleteRepo {
  std::string name;
};
// A named ingest token of `repo`. Rejected: unknown repository, a name that is not
// IsValidResourceName or already names a token of the repository, a token_hash that is not a hash
// or is already stored, a parser longer than 1024 bytes or with a control character (which parser
// exists is the API's to check: a custom one's name, or a built-in one's such as "csv(a,b)").
struct CreateIngestToken {
  std::string repo;
  std::string name;
  std::string token_hash;
  std::string parser;
  int64_t created_ms = 0;
};
// Removes the named ingest token `name` of `repo`. Rejected when there is none.
struct RevokeIngestToken {
  std::string repo;
  std::string name;
};
// A named API token. Rejected: a name that is not IsValidResourceName or is taken, a token_hash
// that is not a hash or is already stored, a permission set that is 0 or has bits beyond kPermAll,
// a repository that does not exist.
struct CreateApiToken {
  std::string name;
  std::string token_hash;
  bool admin = false;
  std::map<std::string, uint32_t> repos;
  int64_t created_ms = 0;
};
// Removes the named API token `name`. Rejected when there is none.
struct RevokeApiToken {
  std::string name;
};
// Stores the saved search `name` of `repo`, replacing one of that name. Rejected for an unknown
// repository, a name that is not IsValidAlertName or an empty query.
struct PutSavedSearch {
  std::string repo;
  std::string name;
  SavedSearch search;
};
// Removes a saved search. Rejected for an unknown repository or search.
struct DeleteSavedSearch {
  std::string repo;
  std::string name;
};
// Creates or replaces the alert `name` of `repo`. A new alert gets the id next_alert_id and
// done_through = floor(now_ms / every) * every (its first window is the first to end after its
// creation); a replaced one keeps its id, its firings and (when `every` is unchanged and it is
// not being enabled again) its done_through, else done_through restarts at
// floor(now_ms / every) * every. Rejected: unknown
// repository, invalid name, empty query, every or window <= 0, delay < 0.
struct PutAlert {
  std::string repo;
  std::string name;
  AlertDef def;
  int64_t now_ms = 0;  // the API node's wall clock
};
// Removes an alert. Rejected for an unknown repository or alert.
struct DeleteAlert {
  std::string repo;
  std::string name;
};
// The window of alert `name` (id `alert_id`) ending at window_end_ms is done: the runner that
// holds claim `epoch` of `partition` (alerts::AlertPartition) ran it and its actions. Accepted
// only when the alert exists with that id, partition's current epoch is `epoch` and its owner is
// `node` (a stale runner is fenced), and window_end_ms == done_through_ms + every_ms (windows
// complete in order, each once). Sets done_through_ms; a kFired/kFailed outcome is appended to
// the alert's firings (the oldest beyond kMaxFirings dropped).
struct AlertWindowDone {
  std::string repo;
  std::string name;
  uint64_t alert_id = 0;
  PartitionId partition;
  Epoch epoch;
  AlertFiring firing;  // firing.node is the runner; window_end_ms the window
};

using GlobalEvent =
    std::variant<SetClusterId, CreateRepo, AddIngestToken, AddApiToken, ClaimPartition,
                 RegisterSegment, AdvanceReplayPoint, SetTruncationPoint, RemoveSegments,
                 SetClusterSecret, RegisterNode, AddSegmentReplica, RemoveSegmentReplica,
                 StageMerge, CommitMerge, SetReplicationFactor, SetRetention, ReplaceSegment,
                 SetBucket, SegmentUploaded, BeginRecovery, BucketObjectsCollected, PutLookupFile,
                 DeleteLookupFile, PutParser, DeleteParser, DeleteRepo, CreateIngestToken,
                 RevokeIngestToken, CreateApiToken, RevokeApiToken, PutSavedSearch,
                 DeleteSavedSearch, PutAlert, DeleteAlert, AlertWindowDone>;

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

// Global::Open fails with kAborted and this text in its message when the log holds a BeginRecovery
// its starting state cannot apply: the node must start from a peer's snapshot.
inline constexpr const char* kRecoveredLogMarker = "recovered log";
// True when `ev` is a BeginRecovery that `state` cannot apply (it needs the recovered state).
bool IsRecoveryMarker(const GlobalState& state, const GlobalEvent& ev);

// The lowest offset the commit log of `partition` may still give to a new record: one above every
// offset Global records as handed out (the replay point, the truncation point and every
// flushed_through of the partition, all of the current generation). A log ending below it lost
// acknowledged records and must not reuse their offsets (CommitLog::RefuseBelow).
Offset LogFloor(const GlobalState& state, PartitionId partition);

// The state a cluster recovered from the bucket starts from (DESIGN section 8, P4), a pure
// function of the newest bucket snapshot and the bucket's segment files:
// - committed segments of the snapshot whose file is in the bucket with their size are kept
//   (uploaded, no replicas); the others are dropped and listed in the report as lost; staged
//   merges are dropped (their inputs are committed);
// - `found` holds the records of bucket files the snapshot does not list (uploaded after it, read
//   from their footers by the caller), largest first: each is added unless it overlaps the
//   positions of a kept segment of its datasource, partition and generation that it does not
//   cover entirely; covered kept segments (the inputs of a merge it is the output of) are
//   replaced by it, so neither a merge's inputs nor its output are ever counted twice;
// - generation + 1; every partition unclaimed at epoch + 1 with replay and truncation points 0;
//   flushed_through cleared (the new commit log starts at offset 0); nodes cleared (new
//   machines register); applied_through -1 (the caller sets it to the marker's offset).
// Repositories, tokens, retention, the cluster id and secret, R and the bucket are kept.
GlobalState RecoverState(const GlobalState& snapshot, const std::string& snapshot_key,
                         const std::vector<BucketSegmentFile>& files,
                         std::vector<SegmentRecord> found);

struct GlobalOptions {
  // Write a snapshot after this many applied events (and on Close).
  uint64_t snapshot_every = 1000;
  // Truncate the log below the older of the two newest local snapshots. Only safe when this
  // node is the only reader of the log (embedded); a cluster's nodes need the log from the oldest
  // snapshot any of them may start from.
  bool truncate_log = true;
  // Where the tailer gets a newer state when the log no longer holds the next event it must apply
  // (the log was truncated below it while this node was paused or cut off): an encoded state
  // (EncodeGlobalState; a live peer's snapshot) whose applied_through is past this node's and at
  // or past the log's start minus one. Called on the tailer thread, again every second until one
  // fits; the state is stale meanwhile (FollowError says why). Once installed it is written as a
  // local snapshot and the tailer goes on after it. Submits waiting for an event the jump skipped
  // fail with Unavailable (their outcome is unknown). Empty: the tailer stops and every Submit
  // fails with Corruption (the state cannot follow the log).
  std::function<Result<std::string>()> newer_state = nullptr;
};

// Validates `bytes` as a snapshot (DecodeGlobalState) and writes it into snapshot_dir under its
// canonical name, atomically, so that the next Global::Open starts from it. Returns the offset it
// reflects.
Result<Offset> InstallGlobalSnapshot(Env* env, const std::string& snapshot_dir,
                                     std::string_view bytes);

// Whether snapshot_dir holds a file named as a Global snapshot (false when it cannot be listed).
bool HasGlobalSnapshot(Env* env, const std::string& snapshot_dir);

// Global on a commit log. Thread-safe.
// Where the global topic may be truncated (below the returned offset) so that every live node can
// still restart from one of its own snapshots plus the log after it: one past the oldest snapshot
// kept by this node (`own_oldest`) and by each live peer (`peers_oldest`, from their
// heartbeats). Offset(-1) (do not truncate) when this node or any live peer has no snapshot, or
// reports none (an older version). A node that is down when the topic is truncated past it loads
// a peer's state when it returns.
Offset GlobalTopicTruncationPoint(Offset own_oldest, const std::vector<Offset>& peers_oldest);

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
  // Why the last snapshot (automatic or WriteSnapshot) failed (a full disk, say); empty once one
  // succeeded again. The state stays correct meanwhile: the log holds every event since the last
  // snapshot that was written, and the next snapshot retries.
  virtual std::string SnapshotError() const = 0;
  // The current state, encoded as a snapshot (for a peer that starts without one).
  virtual std::pair<Offset, std::string> EncodedState() const = 0;
  // Offset of the last applied event (-1: none).
  virtual Offset Applied() const = 0;
  // Empty while the state follows the log; else why it does not (the log was truncated below
  // the next event and no newer state could be loaded yet, or the tailer stopped for good).
  virtual std::string FollowError() const = 0;
  // How many times a newer state was loaded because the log was truncated below the next event
  // (GlobalOptions::newer_state).
  virtual uint64_t StateReloads() const = 0;
  // Offset of the oldest snapshot kept in snapshot_dir (-1: none). A node can always restart
  // from it, so the log may be truncated below it + 1 as far as this node is concerned.
  virtual Offset OldestSnapshot() const = 0;
  // Waits until every event through `offset` is applied; false on timeout or close.
  virtual bool WaitApplied(Offset offset, std::chrono::milliseconds timeout) = 0;
  // The global log's end offset, read from the log now: every event appended (durable) before
  // this call is below it. With WaitApplied(end - 1, ...) a caller gets a state that reflects
  // every event appended before it asked (e.g. before it listed the bucket). The log's error
  // when it cannot be read.
  virtual Result<Offset> LogEnd() = 0;
  // Stops the tailer (after a final snapshot). Idempotent.
  virtual Status Close() = 0;
};

}  // namespace sediment
