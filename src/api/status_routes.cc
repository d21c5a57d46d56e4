// Status routes: the node's status page (GET /api/v1/status: health and the problems behind it,
// commit-log and digest progress per partition, bucket storage), the cluster view (GET
// /api/v1/cluster: every node, partition owners, replication, merges), the Global snapshot peers
// start from.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>

#include "api/elastic.h"
#include "api/node.h"
#include "api/routes.h"
#include "common/json_writer.h"
#include "common/time_parse.h"
#include "global/segment_record.h"

namespace sediment::api {
namespace {

// Members of one partition's lost-offsets object: "rangeCount", "offsets", "ranges".
void WriteLostOffsets(JsonWriter& w, const LostOffsets& l) {
  w.Key("rangeCount").Int(static_cast<int64_t>(l.range_count));
  w.Key("offsets").Int(static_cast<int64_t>(l.offsets));
  w.Key("ranges").BeginArray();
  for (const auto& r : l.ranges) {
    w.BeginObject().Key("first").Int(r.first.value).Key("end").Int(r.end.value);
    w.Key("offsets").Int(r.offsets()).Key("detectedMs").Int(r.detected_ms).EndObject();
  }
  w.EndArray();
}
// "recordsLost": N, "damage": [{partition, firstOffset, endOffset, records, bytes, file, filePos,
// what}] of a commit log (CommitLog::Damage).
void WriteLogDamage(JsonWriter& w, const std::vector<LogDamage>& damage) {
  int64_t lost = 0;
  for (const LogDamage& d : damage) lost += d.end.value - d.first.value;
  w.Key("recordsLost").Int(lost);
  w.Key("damage").BeginArray();
  for (const LogDamage& d : damage) {
    w.BeginObject().Key("partition").Int(d.partition.value);
    w.Key("firstOffset").Int(d.first.value).Key("endOffset").Int(d.end.value);
    w.Key("records").Int(d.end.value - d.first.value);
    w.Key("bytes").Int(static_cast<int64_t>(d.bytes));
    w.Key("file").String(d.file).Key("filePos").Int(static_cast<int64_t>(d.file_pos));
    w.Key("what").String(d.what).EndObject();
  }
  w.EndArray();
}

class StatusRoutes : public Node {
 public:
  explicit StatusRoutes(const Node& node) : Node(node) {}
  http::Response HandleStatus() const;
  http::Response HandleCluster() const;
  http::Response HandleSnapshot(const http::Request& req) const;
  // What the health routes say: the commit log reports ok and Global follows its log.
  bool Up() const {
    return ingest_log != nullptr && ingest_log->Health() == "ok" && global != nullptr &&
           global->FollowError().empty();
  }

 private:
  struct ClusterView;
  void GatherNodes(ClusterView& v) const;
  void GatherSegments(ClusterView& v) const;
  void GatherLost(ClusterView& v) const;
  void WriteClusterNodes(JsonWriter& w, const ClusterView& v) const;
  void WriteClusterPartitions(JsonWriter& w, ClusterView& v,
                              const std::vector<PartitionBounds>& log_bounds) const;
  void WriteReplication(JsonWriter& w, const ClusterView& v) const;
  void WriteBucketStatus(JsonWriter& w) const;
  void WriteStorageBucketProgress(JsonWriter& w) const;
};

http::Response StatusRoutes::HandleStatus() const {
  JsonWriter w;
  w.BeginObject();
  w.Key("status").String("OK").Key("version").String(kVersion);
  w.Key("node").Int(node.value).Key("address").String(advertise);
  w.Key("globalApplied").Int(global->Applied().value).Key("globalSource").String(global_source);
  const std::string health = ingest_log->Health();
  const std::string global_health = global_log->Health();
  const std::vector<LogDamage> damage = ingest_log->Damage();
  const std::vector<LogDamage> global_damage = global_log->Damage();
  const std::vector<PartitionDigestStatus> digest_statuses = digest->PartitionStatuses();
  // Commit-log offsets deleted before they were digested, by partition (DESIGN P1).
  const std::map<int32_t, LostOffsets> lost = digest->LostOffsetsByPartition();
  uint64_t lost_offsets = 0;
  for (const auto& [part, l] : lost) lost_offsets += l.offsets;
  // "degraded": something was lost or is failing; "problems" says what (details in the objects
  // below).
  std::vector<std::string> problems;
  if (lost_offsets > 0) {
    problems.push_back(std::to_string(lost_offsets) +
                       " commit-log offsets were deleted before they were digested (lostOffsets)");
  }
  if (health != "ok" || !damage.empty()) problems.push_back("commit log: " + health);
  if (global_health != "ok" || !global_damage.empty()) {
    problems.push_back("global log: " + global_health);
  }
  const std::string snapshot_error = global->SnapshotError();
  if (!snapshot_error.empty()) problems.push_back("global snapshot: " + snapshot_error);
  const std::string follow_error = global->FollowError();
  if (!follow_error.empty()) problems.push_back("global state: " + follow_error);
  for (const auto& p : digest_statuses) {
    if (!p.error.empty()) {
      problems.push_back("digest of partition " + std::to_string(p.partition.value) + ": " +
                         p.error);
    }
  }
  w.Key("health").String(problems.empty() ? "ok" : "degraded");
  w.Key("problems").BeginArray();
  for (const auto& problem : problems) w.String(problem);
  w.EndArray();
  w.Key("lostOffsets").BeginObject().Key("offsets").Int(static_cast<int64_t>(lost_offsets));
  w.Key("partitions").BeginArray();
  for (const auto& [part, l] : lost) {
    w.BeginObject().Key("partition").Int(part);
    WriteLostOffsets(w, l);
    w.EndObject();
  }
  w.EndArray().EndObject();
  w.Key("commitLog").BeginObject();
  w.Key("type").String(config.kafka_brokers.empty() ? "local" : "kafka");
  if (!config.kafka_brokers.empty()) w.Key("brokers").String(config.kafka_brokers);
  w.Key("health").String(health);
  WriteLogDamage(w, damage);
  w.EndObject();
  w.Key("globalLog").BeginObject().Key("health").String(global_health);
  w.Key("snapshotError").String(snapshot_error);
  w.Key("followError").String(follow_error);
  w.Key("stateReloads").Int(static_cast<int64_t>(global->StateReloads()));
  WriteLogDamage(w, global_damage);
  w.EndObject();
  size_t segments = 0;
  uint64_t segment_bytes = 0, events = 0;
  std::vector<std::string> repos;
  std::map<int32_t, PartitionState> pstates;
  global->Read([&](const GlobalState& st) {
    segments = st.segments.size();
    for (const auto& [id, seg] : st.segments) {
      segment_bytes += seg.file_size;
      events += seg.event_count;
    }
    for (const auto& [name, info] : st.repos) repos.push_back(name);
    pstates = st.partitions;
  });
  w.Key("repositories").BeginArray();
  for (const auto& r : repos) w.String(r);
  w.EndArray();
  w.Key("segments").BeginObject().Key("count").Int(static_cast<int64_t>(segments));
  w.Key("bytes").Int(static_cast<int64_t>(segment_bytes));
  w.Key("events").Int(static_cast<int64_t>(events)).EndObject();
  WriteBucketStatus(w);
  int64_t bounds_age_ms = -1;
  std::vector<PartitionBounds> log_bounds = ingest_bounds->Fresh(&bounds_age_ms);
  w.Key("logOffsetsAgeMs").Int(bounds_age_ms);
  // Partitions of the ingest log; "partitions" lists those this node digests.
  w.Key("ingestPartitions").Int(ingest_log->partition_count());
  // Datasources this node's ingest spreads over more than one partition (ingest/sharder.h).
  w.Key("shardedDatasources").BeginArray();
  if (sharder != nullptr) {
    for (const ingest::DatasourceShards& d : sharder->ShardedDatasources()) {
      w.BeginObject().Key("repo").String(d.datasource.repo).Key("tags").BeginObject();
      for (const auto& [name, value] : d.datasource.tags) w.Key(name).String(value);
      w.EndObject().Key("shards").Int(d.shards);
      w.Key("bytesPerSecond").Int(static_cast<int64_t>(d.bytes_per_second)).EndObject();
    }
  }
  w.EndArray();
  w.Key("partitions").BeginArray();
  for (const auto& p : digest_statuses) {
    w.BeginObject().Key("partition").Int(p.partition.value).Key("epoch").Int(p.epoch.value);
    w.Key("claimed").Bool(p.claimed);
    PartitionBounds lb;
    if (static_cast<size_t>(p.partition.value) < log_bounds.size())
      lb = log_bounds[p.partition.value];
    w.Key("logStart").Int(lb.start);
    w.Key("logEnd").Int(lb.end);
    w.Key("nextOffset").Int(p.next_offset.value);
    w.Key("replayPoint").Int(p.replay_point.value);
    auto ps = pstates.find(p.partition.value);
    w.Key("truncatedBefore").Int(ps == pstates.end() ? 0 : ps->second.truncated_before.value);
    w.Key("bufferedEvents").Int(static_cast<int64_t>(p.buffered_events));
    w.Key("duplicateMessagesDropped").Int(static_cast<int64_t>(p.duplicates_dropped));
    w.Key("lost").BeginObject();
    WriteLostOffsets(w, p.lost);
    w.EndObject();
    w.Key("error").String(p.error).EndObject();
  }
  w.EndArray();
  w.EndObject();
  http::Response r;
  r.body = w.Take();
  return r;
}

namespace {

// One lost range of a partition's commit log and the nodes that reported it.
struct LostRangeRow {
  int64_t end = 0;
  int64_t detected_ms = 0;
  std::set<int64_t> nodes;
};
using LostRanges = std::map<int64_t, LostRangeRow>;  // first offset -> range

// Offsets covered by a partition's ranges (ranges found by different nodes may overlap).
int64_t CoveredOffsets(const LostRanges& ranges) {
  int64_t n = 0, done = INT64_MIN;
  for (const auto& [first, r] : ranges) {
    n += std::max<int64_t>(0, r.end - std::max(first, done));
    done = std::max(done, r.end);
  }
  return n;
}

}  // namespace

// What the cluster view shows, gathered from membership, Global and the digests' reports.
struct StatusRoutes::ClusterView {
  struct NodeRow {
    std::string address;
    bool alive = false;
    int64_t age_ms = -1;
    uint64_t segments = 0, segment_bytes = 0, events = 0;
    int64_t min_ts = INT64_MAX, max_ts = INT64_MIN;
    int owned = 0;
    const Heartbeat* hb = nullptr;  // into `views`
  };
  std::vector<NodeView> views;
  std::map<int64_t, NodeRow> nodes;
  std::vector<std::string> warnings;
  std::string cluster_id;
  std::map<int32_t, PartitionState> pstates;
  std::map<int32_t, int64_t> safe;
  uint64_t seg_count = 0, seg_bytes = 0, under = 0, under_bytes = 0, no_live = 0, no_copy = 0,
           staged = 0;
  uint32_t factor = 1;
  // Segments without a live copy, by the (dead) nodes holding them.
  std::map<int64_t, NodeRow> stranded;
  // Lost commit-log offsets by partition, as this node's digest and the last heartbeat of every
  // other known node (alive or not) report them; one range reported by several nodes counts once.
  std::map<int32_t, LostRanges> lost;
};

void StatusRoutes::GatherNodes(ClusterView& v) const {
  v.views = membership->Nodes();
  for (const auto& nv : v.views) {
    ClusterView::NodeRow& row = v.nodes[nv.node.value];
    row.address = nv.address;
    row.alive = nv.serving();
    row.age_ms = nv.age_ms;
    row.hb = &nv.last;
    if (nv.alive && nv.address.empty() && nv.node != node) {
      v.warnings.push_back("node " + std::to_string(nv.node.value) +
                           " is starting (not serving yet)");
    }
  }
  v.nodes[node.value].alive = true;
  v.nodes[node.value].address = advertise;
}

void StatusRoutes::GatherSegments(ClusterView& v) const {
  global->Read([&](const GlobalState& st) {
    v.cluster_id = st.cluster_id;
    v.pstates = st.partitions;
    v.factor = EffectiveReplicationFactor(st);
    for (const auto& [p, ps] : st.partitions) v.safe[p] = SafeOffset(st, PartitionId(p)).value;
    for (const auto& [id, seg] : st.segments) {
      bool live = false;
      for (NodeId n : seg.replicas) {
        ClusterView::NodeRow& row = v.nodes[n.value];
        ++row.segments;
        row.segment_bytes += seg.file_size;
        live = live || row.alive;
      }
      if (seg.staged()) {
        ++v.staged;
        continue;
      }
      ++v.seg_count;
      v.seg_bytes += seg.file_size;
      // A segment in the bucket is durable and readable from there (queries fetch it back): it
      // is never under-replicated, lost or unreachable.
      if (seg.uploaded) continue;
      if (seg.replicas.size() < v.factor) {
        ++v.under;
        v.under_bytes += seg.file_size;
      }
      if (seg.replicas.empty()) ++v.no_copy;
      if (live) continue;
      ++v.no_live;
      for (NodeId n : seg.replicas) {
        ClusterView::NodeRow& row = v.stranded[n.value];
        ++row.segments;
        row.events += seg.event_count;
        row.min_ts = std::min(row.min_ts, seg.min_ts);
        row.max_ts = std::max(row.max_ts, seg.max_ts);
      }
    }
  });
  for (const auto& [p, ps] : v.pstates) {
    if (ps.epoch.value > 0) ++v.nodes[ps.owner.value].owned;
  }
  for (const auto& [id, row] : v.stranded) {
    v.warnings.push_back(
        "node " + std::to_string(id) + " is down: " + std::to_string(row.segments) + " segments (" +
        std::to_string(row.events) + " events, " + FormatIso8601Millis(row.min_ts) + " to " +
        FormatIso8601Millis(row.max_ts) +
        ") have no other live copy and cannot be searched until it returns or their owner "
        "rebuilds them from the commit log");
  }
  if (v.no_copy > 0) {
    v.warnings.push_back(std::to_string(v.no_copy) +
                         " segments have no copy at all (corrupt copies removed, or lost)");
  }
}

void StatusRoutes::GatherLost(ClusterView& v) const {
  auto add = [&](int64_t by, int32_t part, int64_t first, int64_t end, int64_t detected_ms) {
    LostRangeRow& row = v.lost[part][first];
    row.end = std::max(row.end, end);
    if (row.detected_ms == 0 || detected_ms < row.detected_ms) row.detected_ms = detected_ms;
    row.nodes.insert(by);
  };
  for (const auto& [part, l] : digest->LostOffsetsByPartition()) {
    for (const auto& r : l.ranges) add(node.value, part, r.first.value, r.end.value, r.detected_ms);
  }
  for (const auto& [id, row] : v.nodes) {
    if (id == node.value || row.hb == nullptr) continue;
    for (const auto& l : row.hb->lost) {
      for (const auto& r : l.ranges) {
        add(id, l.partition.value, r.first.value, r.end.value, r.detected_ms);
      }
    }
  }
  for (const auto& [part, ranges] : v.lost) {
    std::string list;
    for (const auto& [first, r] : ranges) {
      if (!list.empty()) list += ", ";
      list += std::to_string(first) + ".." + std::to_string(r.end - 1);
    }
    v.warnings.push_back("partition " + std::to_string(part) + ": " +
                         std::to_string(CoveredOffsets(ranges)) + " commit-log offsets (" + list +
                         ") were deleted before they were digested: their events are lost (Kafka "
                         "retention of the ingest topic?)");
  }
}

void StatusRoutes::WriteClusterNodes(JsonWriter& w, const ClusterView& v) const {
  w.Key("nodes").BeginArray();
  for (const auto& [id, row] : v.nodes) {
    if (id == 0) continue;
    w.BeginObject().Key("id").Int(id).Key("address").String(row.address);
    w.Key("alive").Bool(row.alive).Key("lastHeartbeatMsAgo").Int(id == node.value ? 0 : row.age_ms);
    w.Key("self").Bool(id == node.value);
    // The sediment version the node runs (its last heartbeat's; "" before one arrived).
    w.Key("version").String(id == node.value    ? std::string(kVersion)
                            : row.hb != nullptr ? row.hb->version
                                                : std::string());
    w.Key("segments").Int(static_cast<int64_t>(row.segments));
    w.Key("segmentBytes").Int(static_cast<int64_t>(row.segment_bytes));
    w.Key("partitionsOwned").Int(row.owned);
    std::optional<RepairProgress> repair;
    if (id == node.value && replicator) {
      const Replicator::Progress pr = replicator->progress();
      repair = RepairProgress{pr.pending_segments,    pr.pending_bytes, pr.copied_segments,
                              pr.copied_bytes,        pr.failed_pulls,  pr.corrupt_copies,
                              pr.extra_copies_dropped};
    } else if (row.hb != nullptr) {
      repair = row.hb->repair;
    }
    w.Key("repair");
    if (!repair) {
      w.Null();
    } else {
      w.BeginObject();
      w.Key("pendingSegments").Int(static_cast<int64_t>(repair->pending_segments));
      w.Key("pendingBytes").Int(static_cast<int64_t>(repair->pending_bytes));
      w.Key("copiedSegments").Int(static_cast<int64_t>(repair->copied_segments));
      w.Key("copiedBytes").Int(static_cast<int64_t>(repair->copied_bytes));
      w.Key("failed").Int(static_cast<int64_t>(repair->failed));
      w.Key("corruptDetected").Int(static_cast<int64_t>(repair->corrupt_detected));
      w.Key("droppedExtra").Int(static_cast<int64_t>(repair->dropped_extra));
      w.EndObject();
    }
    w.EndObject();
  }
  w.EndArray();
}

void StatusRoutes::WriteClusterPartitions(JsonWriter& w, ClusterView& v,
                                          const std::vector<PartitionBounds>& log_bounds) const {
  std::map<int32_t, PartitionDigestStatus> local;
  for (auto& p : digest->PartitionStatuses()) local[p.partition.value] = p;
  w.Key("partitions").BeginArray();
  const int32_t partitions = ingest_log->partition_count();
  for (int32_t p = 0; p < partitions; ++p) {
    PartitionState ps;
    if (auto it = v.pstates.find(p); it != v.pstates.end()) ps = it->second;
    const bool owned = ps.epoch.value > 0;
    const bool owner_alive =
        owned && v.nodes.count(ps.owner.value) != 0 && v.nodes[ps.owner.value].alive;
    int64_t next = -1;
    uint64_t buffered = 0;
    if (owned && ps.owner == node) {
      auto it = local.find(p);
      if (it != local.end() && it->second.claimed && it->second.epoch == ps.epoch) {
        next = it->second.next_offset.value;
        buffered = it->second.buffered_events;
      }
    } else if (owner_alive && v.nodes[ps.owner.value].hb != nullptr) {
      for (const auto& pp : v.nodes[ps.owner.value].hb->partitions) {
        if (pp.partition.value == p && pp.epoch == ps.epoch) {
          next = pp.next_offset.value;
          buffered = pp.buffered_events;
        }
      }
    }
    PartitionBounds lb;
    if (static_cast<size_t>(p) < log_bounds.size()) lb = log_bounds[p];
    const int64_t lag = next >= 0 && lb.end >= 0 ? std::max<int64_t>(0, lb.end - next) : -1;
    w.BeginObject().Key("partition").Int(p).Key("owner").Int(owned ? ps.owner.value : 0);
    w.Key("ownerAlive").Bool(owner_alive).Key("epoch").Int(ps.epoch.value);
    w.Key("replayPoint").Int(ps.replay_point.value);
    w.Key("truncatedBefore").Int(ps.truncated_before.value);
    w.Key("safeOffset").Int(v.safe.count(p) != 0 ? v.safe[p] : 0);
    w.Key("logStart").Int(lb.start).Key("logEnd").Int(lb.end);
    w.Key("nextOffset").Int(next).Key("lag").Int(lag);
    w.Key("bufferedEvents").Int(static_cast<int64_t>(buffered));
    int64_t lost_here = 0;
    w.Key("lostRanges").BeginArray();
    if (auto it = v.lost.find(p); it != v.lost.end()) {
      lost_here = CoveredOffsets(it->second);
      for (const auto& [first, r] : it->second) {
        w.BeginObject().Key("first").Int(first).Key("end").Int(r.end);
        w.Key("offsets").Int(r.end - first).Key("detectedMs").Int(r.detected_ms);
        w.Key("reportedBy").BeginArray();
        for (int64_t n : r.nodes) w.Int(n);
        w.EndArray().EndObject();
      }
    }
    w.EndArray();
    w.Key("lostOffsets").Int(lost_here).EndObject();
    if (!owned) {
      v.warnings.push_back("partition " + std::to_string(p) + " has no owner yet");
    } else if (!owner_alive) {
      v.warnings.push_back("partition " + std::to_string(p) + ": owner node " +
                           std::to_string(ps.owner.value) +
                           " is not alive; another node takes over after the group session "
                           "timeout");
    } else if (next < 0) {
      v.warnings.push_back("partition " + std::to_string(p) + ": owner node " +
                           std::to_string(ps.owner.value) + " is claiming it (epoch " +
                           std::to_string(ps.epoch.value) + ")");
    }
  }
  w.EndArray();
}

void StatusRoutes::WriteReplication(JsonWriter& w, const ClusterView& v) const {
  w.Key("segments").BeginObject().Key("count").Int(static_cast<int64_t>(v.seg_count));
  w.Key("bytes").Int(static_cast<int64_t>(v.seg_bytes));
  w.Key("unreachable").Int(static_cast<int64_t>(v.no_live)).EndObject();
  w.Key("replication").BeginObject().Key("factor").Int(v.factor);
  w.Key("segments").Int(static_cast<int64_t>(v.seg_count));
  w.Key("underReplicated").Int(static_cast<int64_t>(v.under));
  w.Key("underReplicatedBytes").Int(static_cast<int64_t>(v.under_bytes));
  w.Key("withoutLiveCopy").Int(static_cast<int64_t>(v.no_live));
  w.Key("lost").Int(static_cast<int64_t>(v.no_copy));
  w.Key("stagedMerges").Int(static_cast<int64_t>(v.staged));
  if (merger) {
    const MergeStats ms = merger->stats();
    w.Key("merges").BeginObject();
    w.Key("staged").Int(static_cast<int64_t>(ms.merges_staged));
    w.Key("committed").Int(static_cast<int64_t>(ms.merges_committed));
    w.Key("aborted").Int(static_cast<int64_t>(ms.merges_aborted));
    w.Key("failed").Int(static_cast<int64_t>(ms.merges_failed));
    w.Key("segmentsMergedAway").Int(static_cast<int64_t>(ms.segments_merged_away));
    // Cumulative on this node since its start: write amplification = written / bytes ingested.
    w.Key("merge_bytes_read").Int(static_cast<int64_t>(ms.bytes_read));
    w.Key("merge_bytes_written").Int(static_cast<int64_t>(ms.bytes_written));
    // Input blocks copied as stored / decoded and re-encoded (merge/README.md "One merge").
    w.Key("merge_blocks_copied").Int(static_cast<int64_t>(ms.blocks_copied));
    w.Key("merge_blocks_reencoded").Int(static_cast<int64_t>(ms.blocks_reencoded));
    // CPU time of the merge attempts (merge/merge.h MergeStats::cpu_micros).
    w.Key("merge_cpu_micros").Int(static_cast<int64_t>(ms.cpu_micros));
    w.Key("lastError").String(ms.last_error);
    w.EndObject();
  }
  w.EndObject();
}

http::Response StatusRoutes::HandleCluster() const {
  ClusterView v;
  GatherNodes(v);
  GatherSegments(v);
  GatherLost(v);
  uint64_t lost_offsets_total = 0;
  for (const auto& [part, ranges] : v.lost) {
    lost_offsets_total += static_cast<uint64_t>(CoveredOffsets(ranges));
  }
  int64_t bounds_age_ms = -1;
  const std::vector<PartitionBounds> log_bounds = ingest_bounds->Fresh(&bounds_age_ms);

  JsonWriter w;
  w.BeginObject();
  w.Key("clusterId").String(v.cluster_id).Key("self").Int(node.value);
  // "degraded": acknowledged events are known to be lost (lostOffsets > 0).
  w.Key("health").String(v.lost.empty() ? "ok" : "degraded");
  w.Key("lostOffsets").Int(static_cast<int64_t>(lost_offsets_total));
  w.Key("globalApplied").Int(global->Applied().value);
  w.Key("logOffsetsAgeMs").Int(bounds_age_ms);
  WriteClusterNodes(w, v);
  WriteClusterPartitions(w, v, log_bounds);
  WriteReplication(w, v);
  WriteBucketStatus(w);
  if (group) {
    const std::string h = group->Health();
    if (h != "ok") v.warnings.push_back(h);
  }
  w.Key("warnings").BeginArray();
  for (const auto& s : v.warnings) w.String(s);
  w.EndArray();
  w.EndObject();
  http::Response r;
  r.body = w.Take();
  return r;
}

// Cluster members only (the route's InternalGate). The snapshot holds tokens and the cluster
// secret only as salted hashes (global/tokens.h).
http::Response StatusRoutes::HandleSnapshot(const http::Request& req) const {
  auto [offset, bytes] = global->EncodedState();
  http::Response r;
  r.content_type = "application/octet-stream";
  r.body = std::move(bytes);
  r.headers.emplace_back("X-Sediment-Snapshot-Offset", std::to_string(offset.value));
  return r;
}

void StatusRoutes::WriteStorageBucketProgress(JsonWriter& w) const {
  if (uploader) {
    const Uploader::Progress u = uploader->progress();
    w.Key("uploader").BeginObject();
    w.Key("pending").Int(static_cast<int64_t>(u.mine_pending));
    w.Key("uploadedSegments").Int(static_cast<int64_t>(u.uploaded_segments));
    w.Key("uploadedBytes").Int(static_cast<int64_t>(u.uploaded_bytes));
    w.Key("failedUploads").Int(static_cast<int64_t>(u.failed_uploads));
    w.Key("corruptCopies").Int(static_cast<int64_t>(u.corrupt_copies));
    w.Key("inBackoff").Bool(u.in_backoff);
    w.Key("lastUploadMs").Int(u.last_upload_ms);
    w.Key("lastError").String(u.last_error);
    w.EndObject();
  }
  if (replicator) {
    const Replicator::Progress r = replicator->progress();
    w.Key("cache").BeginObject();
    w.Key("localBytes").Int(static_cast<int64_t>(r.local_bytes));
    w.Key("maxBytes").Int(static_cast<int64_t>(r.cache_max_bytes));
    w.Key("evictedSegments").Int(static_cast<int64_t>(r.evicted_segments));
    w.Key("evictedBytes").Int(static_cast<int64_t>(r.evicted_bytes));
    w.Key("fetches").Int(static_cast<int64_t>(r.bucket_fetches));
    w.Key("fetchedBytes").Int(static_cast<int64_t>(r.bucket_fetched_bytes));
    w.Key("failedFetches").Int(static_cast<int64_t>(r.failed_bucket_fetches));
    w.EndObject();
  }
}

void StatusRoutes::WriteBucketStatus(JsonWriter& w) const {
  w.Key("bucket").BeginObject();
  w.Key("enabled").Bool(bucket != nullptr);
  uint64_t uploaded = 0, backlog = 0, backlog_bytes = 0, segments = 0;
  uint32_t generation = 0;
  std::string location;
  RecoveryReport recovery;
  BucketGcReport gc;
  global->Read([&](const GlobalState& st) {
    location = st.bucket;
    generation = st.generation;
    recovery = st.recovery;
    gc = st.bucket_gc;
    for (const auto& [id, seg] : st.segments) {
      ++segments;
      if (seg.uploaded) {
        ++uploaded;
      } else {
        ++backlog;
        backlog_bytes += seg.file_size;
      }
    }
  });
  w.Key("location").String(location);
  w.Key("generation").Int(generation);
  if (!location.empty()) {
    w.Key("segments").Int(static_cast<int64_t>(segments));
    w.Key("uploadedSegments").Int(static_cast<int64_t>(uploaded));
    w.Key("backlogSegments").Int(static_cast<int64_t>(backlog));
    w.Key("backlogBytes").Int(static_cast<int64_t>(backlog_bytes));
  }
  if (bucket) {
    {
      const maintenance::BucketSnapshotStatus snap =
          bucket_snapshots ? bucket_snapshots->Status() : maintenance::BucketSnapshotStatus{};
      w.Key("lastSnapshot").BeginObject();
      w.Key("key").String(snap.key);
      w.Key("generation").Int(snap.generation);
      w.Key("offset").Int(snap.offset);
      w.Key("atMs").Int(snap.uploaded_ms);
      w.Key("uploaded").Int(static_cast<int64_t>(snap.uploaded));
      w.Key("lastError").String(snap.error);
      w.EndObject();
    }
    const BucketCollector::Progress p =
        bucket_collector ? bucket_collector->progress() : BucketCollector::Progress{};
    w.Key("objectsDeleted").Int(static_cast<int64_t>(p.deleted_objects));
    w.Key("gc").BeginObject();
    w.Key("graceMs").Int(config.bucket_gc_grace_ms);
    w.Key("passes").Int(static_cast<int64_t>(p.passes));
    w.Key("skippedBehind").Int(static_cast<int64_t>(p.skipped_behind));
    w.Key("rejectedRecords").Int(static_cast<int64_t>(p.rejected_records));
    w.Key("deletedObjects").Int(static_cast<int64_t>(p.deleted_objects));
    w.Key("deletedBytes").Int(static_cast<int64_t>(p.deleted_bytes));
    w.Key("keptYoung").Int(static_cast<int64_t>(p.last_young));
    w.Key("lastPassMs").Int(p.last_pass_ms);
    w.Key("lastError").String(p.last_error);
    w.Key("recorded").BeginObject();
    w.Key("records").Int(static_cast<int64_t>(gc.records));
    w.Key("objects").Int(static_cast<int64_t>(gc.objects));
    w.Key("bytes").Int(static_cast<int64_t>(gc.bytes));
    w.Key("lastNode").Int(gc.last_node.value);
    w.Key("lastMs").Int(gc.last_ms);
    w.Key("lastFiles").BeginArray();
    for (const std::string& f : gc.last_files) w.String(f);
    w.EndArray();
    w.EndObject();
    w.EndObject();
    WriteStorageBucketProgress(w);
  }
  w.EndObject();
  if (recovery.generation > 0) {
    w.Key("recovery").BeginObject();
    w.Key("generation").Int(recovery.generation);
    w.Key("snapshotKey").String(recovery.snapshot_key);
    w.Key("snapshotOffset").Int(recovery.snapshot_applied_through.value);
    w.Key("keptSegments").Int(static_cast<int64_t>(recovery.kept_segments));
    w.Key("addedSegments").Int(static_cast<int64_t>(recovery.added_segments));
    w.Key("keptEvents").Int(static_cast<int64_t>(recovery.kept_events));
    w.Key("keptBytes").Int(static_cast<int64_t>(recovery.kept_bytes));
    w.Key("lostSegments").Int(static_cast<int64_t>(recovery.lost_segments));
    w.Key("lostEvents").Int(static_cast<int64_t>(recovery.lost_events));
    w.Key("lostBytes").Int(static_cast<int64_t>(recovery.lost_bytes));
    w.Key("lost").BeginArray();
    for (const LostSegment& l : recovery.lost) {
      w.BeginObject().Key("datasource").String(l.datasource);
      w.Key("partition").Int(l.partition.value);
      w.Key("minTs").Int(l.min_ts).Key("maxTs").Int(l.max_ts);
      w.Key("events").Int(static_cast<int64_t>(l.event_count));
      w.Key("rawBytes").Int(static_cast<int64_t>(l.raw_bytes));
      w.Key("file").String(l.file_name).EndObject();
    }
    w.EndArray();
    w.EndObject();
  }
}

}  // namespace

void AddStatusRoutes(http::Router& router, const Node& node) {
  auto self = std::make_shared<const StatusRoutes>(node);
  router.Add(
      "GET", "/api/v1/cluster",
      [self](const http::Request&, const http::PathParams&) { return self->HandleCluster(); },
      node.AdminGate());
  router.Add(
      "GET", "/internal/v1/global/snapshot",
      [self](const http::Request& req, const http::PathParams&) {
        return self->HandleSnapshot(req);
      },
      node.InternalGate());
  router.Add(
      "GET", "/api/v1/status",
      [self](const http::Request&, const http::PathParams&) { return self->HandleStatus(); },
      node.AdminGate());
  // Unauthenticated: up or down only (load balancers, shippers' health checks).
  for (const char* path :
       {"/api/v1/health", "/services/collector/health", "/services/collector/health/1.0"}) {
    router.Add("GET", path, [self](const http::Request& req, const http::PathParams&) {
      return *HealthAnswer(req, self->Up());
    });
  }
}

}  // namespace sediment::api
