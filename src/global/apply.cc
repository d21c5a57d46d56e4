// The deterministic apply rule of Global (global.h). Every rejection returns before the first
// mutation, so a Rejected event leaves the state untouched.
#include <algorithm>
#include <cstdio>
#include <optional>
#include <set>

#include "global/global.h"

namespace sediment {
namespace {

std::string Str(Epoch e) { return std::to_string(e.value); }
std::string Str(Offset o) { return std::to_string(o.value); }
std::string Str(const Position& p) {
  return std::to_string(p.offset.value) + "/" + std::to_string(p.index);
}

class Applier {
 public:
  Applier(GlobalState* s, SegmentId* assigned) : s_(s), assigned_(assigned) {}

  Status operator()(const SetClusterId& e) {
    if (e.cluster_id.empty()) return Status::Rejected("SetClusterId: empty cluster id");
    if (!s_->cluster_id.empty()) {
      return Status::Rejected("SetClusterId: cluster id already set to '" + s_->cluster_id + "'");
    }
    s_->cluster_id = e.cluster_id;
    return Status::OK();
  }

  Status operator()(const SetClusterSecret& e) {
    const bool legacy = !e.legacy_secret.empty();
    if (!legacy && e.verifier.empty()) return Status::Rejected("SetClusterSecret: empty secret");
    if (!legacy && !IsTokenHash(e.verifier)) {
      return Status::Rejected("SetClusterSecret: the verifier is not a secret hash");
    }
    if (!s_->cluster_secret_verifier.empty()) {
      return Status::Rejected("SetClusterSecret: already set");
    }
    s_->cluster_secret_verifier = legacy ? LegacyTokenHash(e.legacy_secret) : e.verifier;
    if (legacy) s_->legacy_cluster_secret = e.legacy_secret;
    return Status::OK();
  }

  Status operator()(const CreateRepo& e) {
    if (e.name.empty()) return Status::Rejected("CreateRepo: empty repository name");
    if (s_->repos.count(e.name) != 0) {
      return Status::Rejected("CreateRepo: repository '" + e.name + "' already exists");
    }
    RepoInfo repo;
    repo.name = e.name;
    repo.created_ms = e.created_ms;
    s_->repos.emplace(e.name, std::move(repo));
    return Status::OK();
  }

  Status operator()(const DeleteRepo& e) {
    auto it = s_->repos.find(e.name);
    if (it == s_->repos.end()) {
      return Status::Rejected("DeleteRepo: unknown repository '" + e.name + "'");
    }
    for (const std::string& hash : it->second.ingest_token_hashes) {
      s_->ingest_token_hashes.erase(hash);
    }
    s_->repos.erase(it);
    for (auto& [name, token] : s_->api_tokens) token.repos.erase(e.name);
    for (auto seg = s_->segments.begin(); seg != s_->segments.end();) {
      seg = seg->second.datasource.repo == e.name ? s_->segments.erase(seg) : std::next(seg);
    }
    return Status::OK();
  }

  // Whether `hash` is stored as any token (ingest or API, named or not).
  bool TokenHashStored(const std::string& hash) const {
    if (s_->ingest_token_hashes.count(hash) != 0 || s_->api_token_hashes.count(hash) != 0) {
      return true;
    }
    for (const auto& [name, token] : s_->api_tokens) {
      if (token.token_hash == hash) return true;
    }
    return false;
  }

  Status operator()(const CreateIngestToken& e) {
    auto repo = s_->repos.find(e.repo);
    if (repo == s_->repos.end()) {
      return Status::Rejected("CreateIngestToken: unknown repository '" + e.repo + "'");
    }
    if (!IsValidResourceName(e.name)) {
      return Status::Rejected("CreateIngestToken: invalid token name '" + e.name + "'");
    }
    if (repo->second.ingest_tokens.count(e.name) != 0) {
      return Status::Rejected("CreateIngestToken: repository '" + e.repo +
                              "' already has a token named '" + e.name + "'");
    }
    if (!IsTokenHash(e.token_hash)) return Status::Rejected("CreateIngestToken: not a token hash");
    if (TokenHashStored(e.token_hash)) {
      return Status::Rejected("CreateIngestToken: token already in use");
    }
    // A parser is a custom parser's name or a built-in one's (which may carry arguments:
    // "csv(a,b)"); which exists is the API's to check.
    const bool parser_ok =
        e.parser.size() <= 1024 && std::none_of(e.parser.begin(), e.parser.end(), [](char c) {
          return static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
        });
    if (!parser_ok) {
      return Status::Rejected("CreateIngestToken: invalid parser name '" + e.parser + "'");
    }
    repo->second.ingest_tokens.emplace(e.name,
                                       IngestTokenInfo{e.token_hash, e.parser, e.created_ms});
    repo->second.ingest_token_hashes.insert(e.token_hash);
    s_->ingest_token_hashes.emplace(e.token_hash, e.repo);
    return Status::OK();
  }

  Status operator()(const RevokeIngestToken& e) {
    auto repo = s_->repos.find(e.repo);
    if (repo == s_->repos.end()) {
      return Status::Rejected("RevokeIngestToken: unknown repository '" + e.repo + "'");
    }
    auto it = repo->second.ingest_tokens.find(e.name);
    if (it == repo->second.ingest_tokens.end()) {
      return Status::Rejected("RevokeIngestToken: repository '" + e.repo +
                              "' has no token named '" + e.name + "'");
    }
    repo->second.ingest_token_hashes.erase(it->second.token_hash);
    s_->ingest_token_hashes.erase(it->second.token_hash);
    repo->second.ingest_tokens.erase(it);
    return Status::OK();
  }

  Status operator()(const CreateApiToken& e) {
    if (!IsValidResourceName(e.name)) {
      return Status::Rejected("CreateApiToken: invalid token name '" + e.name + "'");
    }
    if (s_->api_tokens.count(e.name) != 0) {
      return Status::Rejected("CreateApiToken: a token named '" + e.name + "' exists");
    }
    if (!IsTokenHash(e.token_hash)) return Status::Rejected("CreateApiToken: not a token hash");
    if (TokenHashStored(e.token_hash)) {
      return Status::Rejected("CreateApiToken: token already in use");
    }
    for (const auto& [repo, perms] : e.repos) {
      if (perms == 0 || (perms & ~kPermAll) != 0) {
        return Status::Rejected("CreateApiToken: invalid permissions on repository '" + repo + "'");
      }
      if (s_->repos.count(repo) == 0) {
        return Status::Rejected("CreateApiToken: unknown repository '" + repo + "'");
      }
    }
    s_->api_tokens.emplace(e.name, ApiTokenInfo{e.token_hash, e.admin, e.repos, e.created_ms});
    return Status::OK();
  }

  Status operator()(const RevokeApiToken& e) {
    if (s_->api_tokens.erase(e.name) == 0) {
      return Status::Rejected("RevokeApiToken: no token named '" + e.name + "'");
    }
    return Status::OK();
  }

  // The hash a token event stores: the writer's, or (a record from before hashing) the legacy
  // hash of its clear token; empty when the event carries neither.
  static std::string StoredHash(const std::string& token_hash, const std::string& legacy) {
    return legacy.empty() ? token_hash : LegacyTokenHash(legacy);
  }

  Status operator()(const AddIngestToken& e) {
    if (e.token_hash.empty() && e.legacy_token.empty()) {
      return Status::Rejected("AddIngestToken: empty token");
    }
    if (e.legacy_token.empty() && !IsTokenHash(e.token_hash)) {
      return Status::Rejected("AddIngestToken: not a token hash");
    }
    auto repo = s_->repos.find(e.repo);
    if (repo == s_->repos.end()) {
      return Status::Rejected("AddIngestToken: unknown repository '" + e.repo + "'");
    }
    const std::string hash = StoredHash(e.token_hash, e.legacy_token);
    if (s_->ingest_token_hashes.count(hash) != 0 ||
        (!e.legacy_token.empty() && IngestRepoForToken(*s_, e.legacy_token))) {
      return Status::Rejected("AddIngestToken: token already in use");
    }
    repo->second.ingest_token_hashes.insert(hash);
    s_->ingest_token_hashes.emplace(hash, e.repo);
    return Status::OK();
  }

  Status operator()(const AddApiToken& e) {
    if (e.token_hash.empty() && e.legacy_token.empty()) {
      return Status::Rejected("AddApiToken: empty token");
    }
    if (e.legacy_token.empty() && !IsTokenHash(e.token_hash)) {
      return Status::Rejected("AddApiToken: not a token hash");
    }
    const std::string hash = StoredHash(e.token_hash, e.legacy_token);
    if (s_->api_token_hashes.count(hash) != 0 ||
        (!e.legacy_token.empty() && IsApiToken(*s_, e.legacy_token))) {
      return Status::Rejected("AddApiToken: token already exists");
    }
    s_->api_token_hashes.insert(hash);
    return Status::OK();
  }

  Status operator()(const ClaimPartition& e) {
    if (e.partition.value < 0) return Status::Rejected("ClaimPartition: negative partition");
    auto it = s_->partitions.find(e.partition.value);
    const Epoch current = it == s_->partitions.end() ? Epoch(0) : it->second.epoch;
    if (e.expected_epoch != current) {
      return Status::Rejected("ClaimPartition: partition " + std::to_string(e.partition.value) +
                              " is at epoch " + Str(current) + ", claim expected " +
                              Str(e.expected_epoch));
    }
    PartitionState& ps = s_->partitions[e.partition.value];
    ps.epoch = Epoch(current.value + 1);
    ps.owner = e.node;
    return Status::OK();
  }

  Status operator()(const RegisterSegment& e) {
    const SegmentRecord& seg = e.segment;
    const std::string where = "RegisterSegment (partition " + std::to_string(seg.partition.value) +
                              ", file '" + seg.file_name + "')";
    auto pit = s_->partitions.find(seg.partition.value);
    if (pit == s_->partitions.end()) return Status::Rejected(where + ": partition never claimed");
    PartitionState& ps = pit->second;
    if (seg.epoch != ps.epoch) {
      return Status::Rejected(where + ": stale epoch " + Str(seg.epoch) + ", current epoch is " +
                              Str(ps.epoch));
    }
    if (seg.max_pos < seg.min_pos) {
      return Status::Rejected(where + ": min_pos " + Str(seg.min_pos) + " above max_pos " +
                              Str(seg.max_pos));
    }
    auto key = std::make_pair(seg.datasource.Key(), seg.partition.value);
    auto fit = s_->flushed_through.find(key);
    if (fit != s_->flushed_through.end() && seg.min_pos <= fit->second) {
      return Status::Rejected(where + ": min_pos " + Str(seg.min_pos) +
                              " is not above flushed_through " + Str(fit->second) +
                              " (already flushed)");
    }
    AddSegment(seg, {});
    s_->flushed_through[std::move(key)] = seg.max_pos;
    ps.replay_point = std::max(ps.replay_point, e.new_replay_point);
    return Status::OK();
  }

  Status operator()(const AdvanceReplayPoint& e) {
    const std::string where =
        "AdvanceReplayPoint (partition " + std::to_string(e.partition.value) + ")";
    auto pit = s_->partitions.find(e.partition.value);
    if (pit == s_->partitions.end()) return Status::Rejected(where + ": partition never claimed");
    if (e.epoch != pit->second.epoch) {
      return Status::Rejected(where + ": stale epoch " + Str(e.epoch) + ", current epoch is " +
                              Str(pit->second.epoch));
    }
    pit->second.replay_point = std::max(pit->second.replay_point, e.replay_point);
    return Status::OK();
  }

  Status operator()(const SetTruncationPoint& e) {
    const std::string where =
        "SetTruncationPoint (partition " + std::to_string(e.partition.value) + ")";
    auto pit = s_->partitions.find(e.partition.value);
    if (pit == s_->partitions.end()) return Status::Rejected(where + ": unknown partition");
    // Epoch 0 only comes from version-1 records, which were applied without these checks: a
    // node replaying them must reach the state the nodes that wrote them reached.
    if (e.epoch.value != 0) {
      if (e.epoch != pit->second.epoch) {
        return Status::Rejected(where + ": stale epoch " + Str(e.epoch) + ", current epoch is " +
                                Str(pit->second.epoch));
      }
      const Offset safe = SafeOffset(*s_, e.partition);
      if (e.offset > safe) {
        return Status::Rejected(where + ": offset " + Str(e.offset) + " is above the safe offset " +
                                Str(safe));
      }
    }
    pit->second.truncated_before = std::max(pit->second.truncated_before, e.offset);
    return Status::OK();
  }

  Status operator()(const RemoveSegments& e) {
    for (SegmentId id : e.ids) s_->segments.erase(id);
    return Status::OK();
  }

  Status operator()(const RegisterNode& e) {
    if (e.node.value <= 0) return Status::Rejected("RegisterNode: node id must be positive");
    if (!s_->nodes.insert(e.node).second) {
      return Status::Rejected("RegisterNode: node " + std::to_string(e.node.value) +
                              " already registered");
    }
    return Status::OK();
  }

  Status operator()(const AddSegmentReplica& e) {
    auto it = s_->segments.find(e.segment);
    const std::string where = "AddSegmentReplica (segment " + std::to_string(e.segment.value) +
                              ", node " + std::to_string(e.node.value) + ")";
    if (it == s_->segments.end()) return Status::Rejected(where + ": unknown segment");
    if (e.node.value <= 0) return Status::Rejected(where + ": node id must be positive");
    if (!it->second.replicas.insert(e.node).second) {
      return Status::Rejected(where + ": already listed");
    }
    return Status::OK();
  }

  Status operator()(const RemoveSegmentReplica& e) {
    auto it = s_->segments.find(e.segment);
    const std::string where = "RemoveSegmentReplica (segment " + std::to_string(e.segment.value) +
                              ", node " + std::to_string(e.node.value) + ")";
    if (it == s_->segments.end()) return Status::Rejected(where + ": unknown segment");
    auto& replicas = it->second.replicas;
    if (replicas.count(e.node) == 0) return Status::Rejected(where + ": not a holder");
    if (replicas.size() - 1 < e.min_remaining) {
      return Status::Rejected(where + ": only " + std::to_string(replicas.size() - 1) +
                              " replicas would remain, " + std::to_string(e.min_remaining) +
                              " required");
    }
    replicas.erase(e.node);
    return Status::OK();
  }

  Status operator()(const StageMerge& e) {
    const SegmentRecord& out = e.output;
    const std::string where = "StageMerge (file '" + out.file_name + "')";
    if (e.inputs.empty()) return Status::Rejected(where + ": no inputs");
    std::set<SegmentId> seen;
    Position lo, hi;
    uint64_t events = 0;
    uint32_t generation = 0;
    for (SegmentId id : e.inputs) {
      auto it = s_->segments.find(id);
      const std::string in = where + ": input " + std::to_string(id.value);
      if (it == s_->segments.end()) return Status::Rejected(in + " does not exist");
      if (!seen.insert(id).second) return Status::Rejected(in + " listed twice");
      const SegmentRecord& seg = it->second;
      if (seg.staged()) return Status::Rejected(in + " is itself a staged merge");
      if (seg.partition != out.partition || !(seg.datasource == out.datasource)) {
        return Status::Rejected(in + " is of another datasource or partition");
      }
      if (seen.size() > 1 && seg.generation != generation) {
        return Status::Rejected(in + " is of another commit-log generation");
      }
      generation = seg.generation;
      if (seen.size() == 1 || seg.min_pos < lo) lo = seg.min_pos;
      if (seen.size() == 1 || hi < seg.max_pos) hi = seg.max_pos;
      events += seg.event_count;
    }
    if (out.min_pos != lo || out.max_pos != hi) {
      return Status::Rejected(where + ": position range " + Str(out.min_pos) + ".." +
                              Str(out.max_pos) + " is not the inputs' range " + Str(lo) + ".." +
                              Str(hi));
    }
    if (out.event_count != events) {
      return Status::Rejected(where + ": " + std::to_string(out.event_count) +
                              " events, the inputs hold " + std::to_string(events));
    }
    AddSegment(out, e.inputs, generation);
    return Status::OK();
  }

  Status operator()(const CommitMerge& e) {
    const std::string where = "CommitMerge (segment " + std::to_string(e.output.value) + ")";
    auto it = s_->segments.find(e.output);
    if (it == s_->segments.end()) return Status::Rejected(where + ": unknown segment");
    if (!it->second.staged()) return Status::Rejected(where + ": not a staged merge");
    for (SegmentId id : it->second.merge_inputs) {
      if (s_->segments.count(id) == 0) {
        return Status::Rejected(where + ": input " + std::to_string(id.value) + " is gone");
      }
    }
    if (!SegmentDurable(*s_, it->second)) {
      if (!s_->bucket.empty()) return Status::Rejected(where + ": not in the bucket yet");
      return Status::Rejected(where + ": " + std::to_string(it->second.replicas.size()) +
                              " replicas, " + std::to_string(EffectiveReplicationFactor(*s_)) +
                              " required");
    }
    for (SegmentId id : it->second.merge_inputs) s_->segments.erase(id);
    it->second.merge_inputs.clear();
    return Status::OK();
  }

  Status operator()(const SetReplicationFactor& e) {
    if (e.factor == 0) return Status::Rejected("SetReplicationFactor: factor must be at least 1");
    s_->replication_factor = e.factor;
    return Status::OK();
  }

  Status operator()(const SetRetention& e) {
    auto it = s_->repos.find(e.repo);
    if (it == s_->repos.end()) {
      return Status::Rejected("SetRetention: unknown repository '" + e.repo + "'");
    }
    if (e.retention_ms < 0) return Status::Rejected("SetRetention: negative age");
    it->second.retention_ms = e.retention_ms;
    it->second.retention_bytes = e.retention_bytes;
    return Status::OK();
  }

  Status operator()(const PutLookupFile& e) {
    auto it = s_->repos.find(e.repo);
    if (it == s_->repos.end()) {
      return Status::Rejected("PutLookupFile: unknown repository '" + e.repo + "'");
    }
    if (!IsValidLookupFileName(e.name)) {
      return Status::Rejected("PutLookupFile: invalid file name '" + e.name + "'");
    }
    it->second.lookup_files[e.name] = e.content;
    return Status::OK();
  }

  Status operator()(const DeleteLookupFile& e) {
    auto it = s_->repos.find(e.repo);
    if (it == s_->repos.end()) {
      return Status::Rejected("DeleteLookupFile: unknown repository '" + e.repo + "'");
    }
    if (it->second.lookup_files.erase(e.name) == 0) {
      return Status::Rejected("DeleteLookupFile: no file '" + e.name + "' in repository '" +
                              e.repo + "'");
    }
    return Status::OK();
  }

  Status operator()(const PutParser& e) {
    auto it = s_->repos.find(e.repo);
    if (it == s_->repos.end()) {
      return Status::Rejected("PutParser: unknown repository '" + e.repo + "'");
    }
    if (!IsValidParserName(e.name)) {
      return Status::Rejected("PutParser: invalid parser name '" + e.name + "'");
    }
    it->second.parsers[e.name] = e.parser;
    return Status::OK();
  }

  Status operator()(const DeleteParser& e) {
    auto it = s_->repos.find(e.repo);
    if (it == s_->repos.end()) {
      return Status::Rejected("DeleteParser: unknown repository '" + e.repo + "'");
    }
    if (it->second.parsers.erase(e.name) == 0) {
      return Status::Rejected("DeleteParser: no parser '" + e.name + "' in repository '" + e.repo +
                              "'");
    }
    return Status::OK();
  }

  // The repository of a saved-search/alert event, or the rejection naming the event.
  Result<RepoInfo*> AlertRepo(const char* what, const std::string& repo, const std::string& name) {
    auto it = s_->repos.find(repo);
    if (it == s_->repos.end()) {
      return Status::Rejected(std::string(what) + ": unknown repository '" + repo + "'");
    }
    if (!IsValidAlertName(name)) {
      return Status::Rejected(std::string(what) + ": invalid name '" + name + "'");
    }
    return &it->second;
  }

  Status operator()(const PutSavedSearch& e) {
    ASSIGN_OR_RETURN(RepoInfo * repo, AlertRepo("PutSavedSearch", e.repo, e.name));
    if (e.search.query.empty()) return Status::Rejected("PutSavedSearch: empty query");
    repo->saved_searches[e.name] = e.search;
    return Status::OK();
  }

  Status operator()(const DeleteSavedSearch& e) {
    ASSIGN_OR_RETURN(RepoInfo * repo, AlertRepo("DeleteSavedSearch", e.repo, e.name));
    if (repo->saved_searches.erase(e.name) == 0) {
      return Status::Rejected("DeleteSavedSearch: no saved search '" + e.name + "'");
    }
    return Status::OK();
  }

  static int64_t AlignDown(int64_t t, int64_t every) {
    int64_t q = t / every;
    if (t % every != 0 && t < 0) --q;
    return q * every;
  }

  Status operator()(const PutAlert& e) {
    ASSIGN_OR_RETURN(RepoInfo * repo, AlertRepo("PutAlert", e.repo, e.name));
    const AlertDef& d = e.def;
    if (d.query.empty()) return Status::Rejected("PutAlert: empty query");
    if (d.every_ms <= 0 || d.window_ms <= 0 || d.delay_ms < 0) {
      return Status::Rejected("PutAlert: every and window must be positive, delay not negative");
    }
    auto it = repo->alerts.find(e.name);
    if (it == repo->alerts.end()) {
      AlertState a;
      a.def = d;
      a.id = s_->next_alert_id++;
      a.done_through_ms = AlignDown(e.now_ms, d.every_ms);
      repo->alerts.emplace(e.name, std::move(a));
      return Status::OK();
    }
    // A new interval, or an alert enabled again, starts from now (no backlog of old windows).
    if (it->second.def.every_ms != d.every_ms || (!it->second.def.enabled && d.enabled)) {
      it->second.done_through_ms = AlignDown(e.now_ms, d.every_ms);
    }
    it->second.def = d;
    return Status::OK();
  }

  Status operator()(const DeleteAlert& e) {
    ASSIGN_OR_RETURN(RepoInfo * repo, AlertRepo("DeleteAlert", e.repo, e.name));
    if (repo->alerts.erase(e.name) == 0) {
      return Status::Rejected("DeleteAlert: no alert '" + e.name + "'");
    }
    return Status::OK();
  }

  Status operator()(const AlertWindowDone& e) {
    ASSIGN_OR_RETURN(RepoInfo * repo, AlertRepo("AlertWindowDone", e.repo, e.name));
    const std::string where = "AlertWindowDone (alert '" + e.name + "', window ending " +
                              std::to_string(e.firing.window_end_ms) + ")";
    auto it = repo->alerts.find(e.name);
    if (it == repo->alerts.end() || it->second.id != e.alert_id) {
      return Status::Rejected(where + ": no such alert (deleted or replaced)");
    }
    auto pit = s_->partitions.find(e.partition.value);
    if (pit == s_->partitions.end() || pit->second.epoch != e.epoch ||
        pit->second.owner != e.firing.node) {
      return Status::Rejected(where + ": stale claim (epoch " + Str(e.epoch) + " of partition " +
                              std::to_string(e.partition.value) + " is not current)");
    }
    AlertState& a = it->second;
    const int64_t next = a.done_through_ms + a.def.every_ms;
    if (e.firing.window_end_ms != next) {
      return Status::Rejected(where + ": the next window to complete ends at " +
                              std::to_string(next));
    }
    a.done_through_ms = next;
    if (e.firing.outcome != AlertOutcome::kQuiet) {
      a.firings.push_back(e.firing);
      if (a.firings.size() > AlertState::kMaxFirings) a.firings.erase(a.firings.begin());
    }
    return Status::OK();
  }

  Status operator()(const ReplaceSegment& e) {
    const SegmentRecord& seg = e.rebuilt;
    const std::string where = "ReplaceSegment (segment " + std::to_string(e.old_segment.value) +
                              ", file '" + seg.file_name + "')";
    auto it = s_->segments.find(e.old_segment);
    if (it == s_->segments.end()) return Status::Rejected(where + ": unknown segment");
    const SegmentRecord& old = it->second;
    if (old.staged()) return Status::Rejected(where + ": a staged merge is not rebuilt");
    if (old.generation != s_->generation) {
      return Status::Rejected(where + ": the segment is of an earlier commit log");
    }
    if (!(old.datasource == seg.datasource) || old.partition != seg.partition ||
        old.min_pos != seg.min_pos || old.max_pos != seg.max_pos ||
        old.event_count != seg.event_count) {
      return Status::Rejected(where + ": the rebuilt segment does not match the old one");
    }
    auto pit = s_->partitions.find(seg.partition.value);
    if (pit == s_->partitions.end() || pit->second.epoch != seg.epoch) {
      return Status::Rejected(where + ": stale epoch " + Str(seg.epoch));
    }
    s_->segments.erase(it);
    AddSegment(seg, {});
    return Status::OK();
  }

  Status operator()(const SetBucket& e) {
    if (e.location.empty()) return Status::Rejected("SetBucket: empty location");
    if (e.location == s_->bucket) return Status::Rejected("SetBucket: unchanged");
    s_->bucket = e.location;
    return Status::OK();
  }

  Status operator()(const SegmentUploaded& e) {
    const std::string where = "SegmentUploaded (segment " + std::to_string(e.segment.value) + ")";
    auto it = s_->segments.find(e.segment);
    if (it == s_->segments.end()) return Status::Rejected(where + ": unknown segment");
    if (it->second.uploaded) return Status::Rejected(where + ": already uploaded");
    it->second.uploaded = true;
    return Status::OK();
  }

  Status operator()(const BucketObjectsCollected& e) {
    const std::string where = "BucketObjectsCollected (node " + std::to_string(e.node.value) +
                              ", " + std::to_string(e.files.size()) + " objects)";
    if (s_->bucket.empty()) return Status::Rejected(where + ": bucket storage is off");
    if (e.files.empty()) return Status::Rejected(where + ": no objects");
    std::set<std::string_view> listed;
    for (const BucketSegmentFile& f : e.files) {
      if (f.file_name.empty()) return Status::Rejected(where + ": empty file name");
      listed.insert(f.file_name);
    }
    for (const auto& [id, seg] : s_->segments) {
      if (listed.count(seg.file_name) != 0) {
        return Status::Rejected(where + ": '" + seg.file_name + "' is the file of segment " +
                                std::to_string(id.value));
      }
    }
    BucketGcReport& r = s_->bucket_gc;
    ++r.records;
    r.objects += e.files.size();
    for (const BucketSegmentFile& f : e.files) r.bytes += f.size;
    r.last_node = e.node;
    r.last_ms = e.at_ms;
    r.last_files.clear();
    for (size_t i = 0; i < e.files.size() && i < BucketGcReport::kMaxListed; ++i) {
      r.last_files.push_back(e.files[i].file_name);
    }
    return Status::OK();
  }

  Status operator()(const BeginRecovery& e) {
    if (s_->generation >= e.generation) {
      return Status::Rejected("BeginRecovery: the state is already at generation " +
                              std::to_string(s_->generation));
    }
    return Status::Aborted("BeginRecovery: generation " + std::to_string(e.generation) +
                           " starts from a state recovered from the bucket, not from this one");
  }

 private:
  // Stores `seg` under the next segment id (reported through assigned_), its writer as the only
  // replica, not uploaded, of `generation` (default: the current one); non-empty `merge_inputs`
  // make it a staged merge output.
  void AddSegment(const SegmentRecord& seg, std::vector<SegmentId> merge_inputs,
                  std::optional<uint32_t> generation = std::nullopt) {
    const SegmentId id = s_->next_segment_id;
    s_->next_segment_id = SegmentId(id.value + 1);
    SegmentRecord stored = seg;
    stored.id = id;
    stored.replicas = {seg.node};
    stored.merge_inputs = std::move(merge_inputs);
    stored.uploaded = false;
    stored.generation = generation.value_or(s_->generation);
    s_->segments[id] = std::move(stored);
    if (assigned_ != nullptr) *assigned_ = id;
  }

  GlobalState* s_;
  SegmentId* assigned_;
};

}  // namespace

Status ApplyGlobalEvent(GlobalState* state, const GlobalEvent& ev, SegmentId* assigned) {
  return std::visit(Applier(state, assigned), ev);
}

uint32_t EffectiveReplicationFactor(const GlobalState& state) {
  if (state.replication_factor > 0) return state.replication_factor;
  return state.nodes.size() >= 2 ? 2 : 1;
}

bool SegmentDurable(const GlobalState& state, const SegmentRecord& seg) {
  if (!state.bucket.empty()) return seg.uploaded;
  return seg.replicas.size() >= EffectiveReplicationFactor(state);
}

Offset SafeOffset(const GlobalState& state, PartitionId partition) {
  auto pit = state.partitions.find(partition.value);
  if (pit == state.partitions.end()) return Offset(0);
  Offset safe = pit->second.replay_point;
  for (const auto& [id, seg] : state.segments) {
    if (seg.partition != partition || seg.staged() || seg.generation != state.generation ||
        SegmentDurable(state, seg)) {
      continue;
    }
    safe = std::min(safe, seg.min_pos.offset);
  }
  // Below the truncation point the log holds nothing a segment could be rebuilt from.
  return std::max(safe, pit->second.truncated_before);
}

bool IsRecoveryMarker(const GlobalState& state, const GlobalEvent& ev) {
  const auto* marker = std::get_if<BeginRecovery>(&ev);
  return marker != nullptr && marker->generation > state.generation;
}

std::string BucketSegmentKey(const std::string& file_name) {
  return std::string(kBucketSegmentPrefix) + file_name;
}

std::string BucketSnapshotKey(uint32_t generation, Offset applied_through) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "g%010u-%020lld.snap", generation,
                static_cast<long long>(applied_through.value));
  return std::string(kBucketSnapshotPrefix) + buf;
}

bool IsValidLookupFileName(std::string_view name) {
  if (name.empty() || name.size() > kMaxLookupFileNameBytes || name == "." || name == "..") {
    return false;
  }
  for (unsigned char c : name) {
    if (c < 0x20 || c == 0x7f || c == '/' || c == '\\') return false;
  }
  return true;
}

bool IsValidParserName(std::string_view name) {
  if (name.empty() || name.size() > 100 || name == "." || name == "..") return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '_' || c == '.';
    if (!ok) return false;
  }
  return true;
}

bool IsValidResourceName(std::string_view name) {
  return IsValidParserName(name) && name.front() != '.';
}

std::string AlertFiringId(uint64_t alert_id, int64_t window_end_ms) {
  return std::to_string(alert_id) + "-" + std::to_string(window_end_ms);
}

bool IsValidAlertName(std::string_view name) { return IsValidParserName(name); }

const char* GlobalEventName(const GlobalEvent& ev) {
  static constexpr const char* kNames[] = {
      "SetClusterId",
      "CreateRepo",
      "AddIngestToken",
      "AddApiToken",
      "ClaimPartition",
      "RegisterSegment",
      "AdvanceReplayPoint",
      "SetTruncationPoint",
      "RemoveSegments",
      "SetClusterSecret",
      "RegisterNode",
      "AddSegmentReplica",
      "RemoveSegmentReplica",
      "StageMerge",
      "CommitMerge",
      "SetReplicationFactor",
      "SetRetention",
      "ReplaceSegment",
      "SetBucket",
      "SegmentUploaded",
      "BeginRecovery",
      "BucketObjectsCollected",
      "PutLookupFile",
      "DeleteLookupFile",
      "PutParser",
      "DeleteParser",
      "DeleteRepo",
      "CreateIngestToken",
      "RevokeIngestToken",
      "CreateApiToken",
      "RevokeApiToken",
      "PutSavedSearch",
      "DeleteSavedSearch",
      "PutAlert",
      "DeleteAlert",
      "AlertWindowDone",
  };
  static_assert(std::size(kNames) == std::variant_size_v<GlobalEvent>);
  return kNames[ev.index()];
}

Offset LogFloor(const GlobalState& state, PartitionId partition) {
  int64_t floor = 0;
  auto pit = state.partitions.find(partition.value);
  if (pit != state.partitions.end()) {
    floor = std::max(pit->second.replay_point.value, pit->second.truncated_before.value);
  }
  // flushed_through is cleared by a recovery onto a new log, so it is of the current generation.
  for (const auto& [key, pos] : state.flushed_through) {
    if (key.second == partition.value) floor = std::max(floor, pos.offset.value + 1);
  }
  return Offset(floor);
}

}  // namespace sediment
