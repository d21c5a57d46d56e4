// The deterministic apply rule of Global (global.h). Every rejection returns before the first
// mutation, so a Rejected event leaves the state untouched.
#include <algorithm>

#include "global/global.h"

namespace sediment {
namespace {

std::string Str(Epoch e) { return std::to_string(e.value); }
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
    if (e.secret.empty()) return Status::Rejected("SetClusterSecret: empty secret");
    if (!s_->cluster_secret.empty()) return Status::Rejected("SetClusterSecret: already set");
    s_->cluster_secret = e.secret;
    return Status::OK();
  }

  Status operator()(const CreateRepo& e) {
    if (e.name.empty()) return Status::Rejected("CreateRepo: empty repository name");
    if (s_->repos.count(e.name) != 0) {
      return Status::Rejected("CreateRepo: repository '" + e.name + "' already exists");
    }
    RepoInfo repo;
    repo.name = e.name;
    s_->repos.emplace(e.name, std::move(repo));
    return Status::OK();
  }

  Status operator()(const AddIngestToken& e) {
    if (e.token.empty()) return Status::Rejected("AddIngestToken: empty token");
    auto repo = s_->repos.find(e.repo);
    if (repo == s_->repos.end()) {
      return Status::Rejected("AddIngestToken: unknown repository '" + e.repo + "'");
    }
    if (s_->ingest_tokens.count(e.token) != 0) {
      return Status::Rejected("AddIngestToken: token already in use");
    }
    repo->second.ingest_tokens.insert(e.token);
    s_->ingest_tokens.emplace(e.token, e.repo);
    return Status::OK();
  }

  Status operator()(const AddApiToken& e) {
    if (e.token.empty()) return Status::Rejected("AddApiToken: empty token");
    if (s_->api_tokens.count(e.token) != 0) {
      return Status::Rejected("AddApiToken: token already exists");
    }
    s_->api_tokens.insert(e.token);
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
    const SegmentId id = s_->next_segment_id;
    s_->next_segment_id = SegmentId(id.value + 1);
    SegmentRecord stored = seg;
    stored.id = id;
    s_->segments[id] = std::move(stored);
    s_->flushed_through[std::move(key)] = seg.max_pos;
    ps.replay_point = std::max(ps.replay_point, e.new_replay_point);
    if (assigned_ != nullptr) *assigned_ = id;
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
    auto pit = s_->partitions.find(e.partition.value);
    if (pit == s_->partitions.end()) {
      return Status::Rejected("SetTruncationPoint: unknown partition " +
                              std::to_string(e.partition.value));
    }
    pit->second.truncated_before = std::max(pit->second.truncated_before, e.offset);
    return Status::OK();
  }

  Status operator()(const RemoveSegments& e) {
    for (SegmentId id : e.ids) s_->segments.erase(id);
    return Status::OK();
  }

 private:
  GlobalState* s_;
  SegmentId* assigned_;
};

}  // namespace

Status ApplyGlobalEvent(GlobalState* state, const GlobalEvent& ev, SegmentId* assigned) {
  return std::visit(Applier(state, assigned), ev);
}

const char* GlobalEventName(const GlobalEvent& ev) {
  static constexpr const char* kNames[] = {
      "SetClusterId",   "CreateRepo",      "AddIngestToken",     "AddApiToken",
      "ClaimPartition", "RegisterSegment", "AdvanceReplayPoint", "SetTruncationPoint",
      "RemoveSegments", "SetClusterSecret"};
  static_assert(std::size(kNames) == std::variant_size_v<GlobalEvent>);
  return kNames[ev.index()];
}

}  // namespace sediment
