// Cluster membership of the node (heartbeats, peer snapshots, partition-group callbacks), the
// cluster view (GET /api/v1/cluster) and the snapshot endpoint.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <set>

#include "cluster/node_identity.h"
#include "common/json_writer.h"
#include "common/time_parse.h"
#include "http/http_client.h"
#include "server/server_impl.h"

namespace sediment {
namespace {

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

}  // namespace

Status Server::Impl::StartMembership() {
  MembershipOptions mo;
  mo.liveness_timeout = std::chrono::milliseconds(config.heartbeat_timeout_ms);
  mo.interval = std::max<std::chrono::milliseconds>(
      std::chrono::milliseconds(100),
      std::min<std::chrono::milliseconds>(std::chrono::milliseconds(1000),
                                          mo.liveness_timeout / 4));
  membership = std::make_unique<Membership>(chatter_log.get(), clock, mo,
                                            [this] { return SelfHeartbeat(); });
  return membership->Start().WithContext("starting the heartbeat on the chatter log");
}

Heartbeat Server::Impl::SelfHeartbeat() const {
  Heartbeat hb;
  hb.node = node;
  hb.started_ms = started_ms;
  hb.version = kVersion;
  // Until the node serves, peers must not route requests to it: no address.
  if (!ready) return hb;
  hb.address = advertise;
  hb.global_applied = global->Applied();
  for (const auto& p : digest->PartitionStatuses()) {
    if (!p.claimed) continue;
    hb.partitions.push_back(
        PartitionProgress{p.partition, p.epoch, p.next_offset, p.replay_point, p.buffered_events});
  }
  for (const auto& [part, lost] : digest->LostOffsetsByPartition()) {
    LostOffsetsReport l;
    l.partition = PartitionId(part);
    l.range_count = lost.range_count;
    l.offsets = lost.offsets;
    for (const auto& r : lost.ranges) l.ranges.push_back({r.first, r.end, r.detected_ms});
    hb.lost.push_back(std::move(l));
  }
  hb.oldest_snapshot = global->OldestSnapshot();
  if (replicator) {
    const Replicator::Progress pr = replicator->progress();
    hb.repair = RepairProgress{pr.pending_segments,    pr.pending_bytes, pr.copied_segments,
                               pr.copied_bytes,        pr.failed_pulls,  pr.corrupt_copies,
                               pr.extra_copies_dropped};
  }
  return hb;
}

void Server::Impl::FetchPeerSnapshot(const std::string& snapshot_dir) {
  if (HasSnapshot(env, snapshot_dir)) {
    global_source = "local snapshot";
    return;
  }
  std::string why_not;
  auto installed = PeerSnapshot(
      [&](const std::string& bytes) { return InstallGlobalSnapshot(env, snapshot_dir, bytes); },
      &why_not);
  if (!installed.ok()) {
    global_source = "global log replay (" + why_not + ")";
    return;
  }
  global_source = "snapshot from peer node " + std::to_string(installed->first.value) +
                  " at offset " + std::to_string(installed->second.value);
}

Result<std::pair<NodeId, Offset>> Server::Impl::PeerSnapshot(
    const std::function<Result<Offset>(const std::string&)>& use, std::string* why_not) {
  std::vector<NodeView> peers;
  for (auto& v : membership->AliveNodes()) {
    if (v.node != node && !v.address.empty()) peers.push_back(std::move(v));
  }
  if (peers.empty()) {
    *why_not = "no peer alive";
    return Status::Unavailable("global: no peer alive to take a snapshot from");
  }
  std::string credential = config.cluster_secret;
  if (credential.empty() && !config.api_tokens.empty()) credential = config.api_tokens.front();
  if (credential.empty()) {
    spdlog::warn(
        "global: no --cluster-secret or --api-token to authenticate to peers for their snapshot");
    *why_not = "no credential for peers";
    return Status::FailedPrecondition("global: no credential to ask peers for their snapshot");
  }
  // Most advanced peer first.
  std::sort(peers.begin(), peers.end(), [](const NodeView& a, const NodeView& b) {
    return a.last.global_applied > b.last.global_applied;
  });
  for (const auto& peer : peers) {
    auto r = http::Fetch("GET", "http://" + peer.address + "/internal/v1/global/snapshot",
                         {{"Authorization", "Bearer " + credential}}, "", std::chrono::seconds(30));
    if (!r.ok() || r->status != 200) {
      spdlog::warn("global: snapshot from peer node {} at {}: {}", peer.node.value, peer.address,
                   r.ok() ? "HTTP " + std::to_string(r->status) + " " + r->body.substr(0, 200)
                          : r.status().ToString());
      continue;
    }
    auto used = use(r->body);
    if (!used.ok()) {
      spdlog::warn("global: snapshot from peer node {} is unusable: {}", peer.node.value,
                   used.status().ToString());
      continue;
    }
    spdlog::info("global: loaded snapshot from peer node {} at offset {} ({} bytes)",
                 peer.node.value, used->value, r->body.size());
    return std::make_pair(peer.node, *used);
  }
  *why_not = "no peer served a usable snapshot";
  return Status::Unavailable("global: no peer served a usable snapshot");
}

std::string Server::Impl::ClusterSecret() const {
  if (!config.cluster_secret.empty()) return config.cluster_secret;
  std::string secret;
  global->Read([&](const GlobalState& st) { secret = st.cluster_secret; });
  return secret;
}

bool Server::Impl::IsInternalCaller(const http::Request& req) const {
  const std::string secret = ClusterSecret();
  return !secret.empty() && ConstantTimeEquals(TokenFrom(req, false), secret);
}

bool Server::Impl::IsApiCaller(const http::Request& req) const {
  const std::string token = TokenFrom(req, false);
  if (token.empty()) return false;
  bool ok = false;
  global->Read([&](const GlobalState& st) { ok = st.api_tokens.count(token) > 0; });
  return ok;
}

void Server::Impl::OnAssigned(const std::vector<PartitionId>& partitions) {
  std::string list;
  for (auto p : partitions) list += (list.empty() ? "" : ",") + std::to_string(p.value);
  spdlog::info("digest group: assigned partitions [{}]", list);
  digest->Assign(partitions);
}

void Server::Impl::OnRevoked(const std::vector<PartitionId>& partitions, bool lost) {
  std::string list;
  for (auto p : partitions) list += (list.empty() ? "" : ",") + std::to_string(p.value);
  spdlog::info("digest group: {} partitions [{}]", lost ? "lost" : "revoked", list);
  digest->Revoke(partitions);
}

http::Response Server::Impl::HandleSnapshot(const http::Request& req) {
  // The snapshot holds every token: cluster members (secret) or API-token holders only.
  if (!IsInternalCaller(req) && !IsApiCaller(req)) {
    return http::JsonError(401, "the Global snapshot needs the cluster secret or an API token");
  }
  auto [offset, bytes] = global->EncodedState();
  http::Response r;
  r.content_type = "application/octet-stream";
  r.body = std::move(bytes);
  r.headers.emplace_back("X-Sediment-Snapshot-Offset", std::to_string(offset.value));
  return r;
}

http::Response Server::Impl::HandleCluster() {
  struct NodeRow {
    std::string address;
    bool alive = false;
    int64_t age_ms = -1;
    uint64_t segments = 0, segment_bytes = 0, events = 0;
    int64_t min_ts = INT64_MAX, max_ts = INT64_MIN;
    int owned = 0;
    const Heartbeat* hb = nullptr;
  };
  std::vector<NodeView> views = membership->Nodes();
  std::map<int64_t, NodeRow> nodes;
  std::vector<std::string> warnings;
  for (const auto& v : views) {
    NodeRow& row = nodes[v.node.value];
    row.address = v.address;
    row.alive = v.serving();
    row.age_ms = v.age_ms;
    row.hb = &v.last;
    if (v.alive && v.address.empty() && v.node != node) {
      warnings.push_back("node " + std::to_string(v.node.value) + " is starting (not serving yet)");
    }
  }
  nodes[node.value].alive = true;
  nodes[node.value].address = advertise;

  std::string cluster_id;
  std::map<int32_t, PartitionState> pstates;
  std::map<int32_t, int64_t> safe;
  uint64_t seg_count = 0, seg_bytes = 0, under = 0, under_bytes = 0, no_live = 0, no_copy = 0,
           staged = 0;
  uint32_t factor = 1;
  // Segments without a live copy, by the (dead) nodes holding them.
  std::map<int64_t, NodeRow> stranded;
  global->Read([&](const GlobalState& st) {
    cluster_id = st.cluster_id;
    pstates = st.partitions;
    factor = EffectiveReplicationFactor(st);
    for (const auto& [p, ps] : st.partitions) safe[p] = SafeOffset(st, PartitionId(p)).value;
    for (const auto& [id, seg] : st.segments) {
      bool live = false;
      for (NodeId n : seg.replicas) {
        NodeRow& row = nodes[n.value];
        ++row.segments;
        row.segment_bytes += seg.file_size;
        live = live || row.alive;
      }
      if (seg.staged()) {
        ++staged;
        continue;
      }
      ++seg_count;
      seg_bytes += seg.file_size;
      // A segment in the bucket is durable and readable from there (queries fetch it back): it
      // is never under-replicated, lost or unreachable.
      if (seg.uploaded) continue;
      if (seg.replicas.size() < factor) {
        ++under;
        under_bytes += seg.file_size;
      }
      if (seg.replicas.empty()) ++no_copy;
      if (live) continue;
      ++no_live;
      for (NodeId n : seg.replicas) {
        NodeRow& row = stranded[n.value];
        ++row.segments;
        row.events += seg.event_count;
        row.min_ts = std::min(row.min_ts, seg.min_ts);
        row.max_ts = std::max(row.max_ts, seg.max_ts);
      }
    }
  });
  for (const auto& [p, ps] : pstates) {
    if (ps.epoch.value > 0) ++nodes[ps.owner.value].owned;
  }

  const uint64_t unreachable = no_live;
  for (const auto& [id, row] : stranded) {
    warnings.push_back("node " + std::to_string(id) + " is down: " + std::to_string(row.segments) +
                       " segments (" + std::to_string(row.events) + " events, " +
                       FormatIso8601Millis(row.min_ts) + " to " + FormatIso8601Millis(row.max_ts) +
                       ") have no other live copy and cannot be searched until it returns or "
                       "their owner rebuilds them from the commit log");
  }
  if (no_copy > 0) {
    warnings.push_back(std::to_string(no_copy) +
                       " segments have no copy at all (corrupt copies removed, or lost)");
  }

  int64_t bounds_age_ms = -1;
  std::vector<LogBounds> log_bounds = FreshBounds(&bounds_age_ms);
  std::map<int32_t, PartitionDigestStatus> local;
  for (auto& p : digest->PartitionStatuses()) local[p.partition.value] = p;
  // Lost commit-log offsets by partition, as this node's digest and the last heartbeat of every
  // other known node (alive or not) report them; one range reported by several nodes counts once.
  struct LostRangeRow {
    int64_t end = 0;
    int64_t detected_ms = 0;
    std::set<int64_t> nodes;
  };
  std::map<int32_t, std::map<int64_t, LostRangeRow>> lost;  // partition -> first -> range
  auto add_lost = [&](int64_t by, int32_t part, int64_t first, int64_t end, int64_t detected_ms) {
    LostRangeRow& row = lost[part][first];
    row.end = std::max(row.end, end);
    if (row.detected_ms == 0 || detected_ms < row.detected_ms) row.detected_ms = detected_ms;
    row.nodes.insert(by);
  };
  for (const auto& [part, l] : digest->LostOffsetsByPartition()) {
    for (const auto& r : l.ranges) {
      add_lost(node.value, part, r.first.value, r.end.value, r.detected_ms);
    }
  }
  for (const auto& [id, row] : nodes) {
    if (id == node.value || row.hb == nullptr) continue;
    for (const auto& l : row.hb->lost) {
      for (const auto& r : l.ranges) {
        add_lost(id, l.partition.value, r.first.value, r.end.value, r.detected_ms);
      }
    }
  }
  // Offsets covered by a partition's ranges (ranges found by different nodes may overlap).
  auto covered = [](const std::map<int64_t, LostRangeRow>& ranges) {
    int64_t n = 0, done = INT64_MIN;
    for (const auto& [first, r] : ranges) {
      n += std::max<int64_t>(0, r.end - std::max(first, done));
      done = std::max(done, r.end);
    }
    return n;
  };
  uint64_t lost_offsets_total = 0;
  for (const auto& [part, ranges] : lost) {
    const auto n = static_cast<uint64_t>(covered(ranges));
    std::string list;
    for (const auto& [first, r] : ranges) {
      if (!list.empty()) list += ", ";
      list += std::to_string(first) + ".." + std::to_string(r.end - 1);
    }
    lost_offsets_total += n;
    warnings.push_back("partition " + std::to_string(part) + ": " + std::to_string(n) +
                       " commit-log offsets (" + list +
                       ") were deleted before they were digested: their events are lost (Kafka "
                       "retention of the ingest topic?)");
  }

  JsonWriter w;
  w.BeginObject();
  w.Key("clusterId").String(cluster_id).Key("self").Int(node.value);
  // "degraded": acknowledged events are known to be lost (lostOffsets > 0).
  w.Key("health").String(lost.empty() ? "ok" : "degraded");
  w.Key("lostOffsets").Int(static_cast<int64_t>(lost_offsets_total));
  w.Key("globalApplied").Int(global->Applied().value);
  w.Key("logOffsetsAgeMs").Int(bounds_age_ms);
  w.Key("nodes").BeginArray();
  for (const auto& [id, row] : nodes) {
    if (id == 0) continue;
    w.BeginObject().Key("id").Int(id).Key("address").String(row.address);
    w.Key("alive").Bool(row.alive).Key("lastHeartbeatMsAgo").Int(id == node.value ? 0 : row.age_ms);
    w.Key("self").Bool(id == node.value);
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
  w.Key("partitions").BeginArray();
  const int32_t partitions = ingest_log->partition_count();
  for (int32_t p = 0; p < partitions; ++p) {
    PartitionState ps;
    if (auto it = pstates.find(p); it != pstates.end()) ps = it->second;
    const bool owned = ps.epoch.value > 0;
    const bool owner_alive =
        owned && nodes.count(ps.owner.value) != 0 && nodes[ps.owner.value].alive;
    int64_t next = -1;
    uint64_t buffered = 0;
    if (owned && ps.owner == node) {
      auto it = local.find(p);
      if (it != local.end() && it->second.claimed && it->second.epoch == ps.epoch) {
        next = it->second.next_offset.value;
        buffered = it->second.buffered_events;
      }
    } else if (owner_alive && nodes[ps.owner.value].hb != nullptr) {
      for (const auto& pp : nodes[ps.owner.value].hb->partitions) {
        if (pp.partition.value == p && pp.epoch == ps.epoch) {
          next = pp.next_offset.value;
          buffered = pp.buffered_events;
        }
      }
    }
    LogBounds lb;
    if (static_cast<size_t>(p) < log_bounds.size()) lb = log_bounds[p];
    const int64_t lag = next >= 0 && lb.end >= 0 ? std::max<int64_t>(0, lb.end - next) : -1;
    w.BeginObject().Key("partition").Int(p).Key("owner").Int(owned ? ps.owner.value : 0);
    w.Key("ownerAlive").Bool(owner_alive).Key("epoch").Int(ps.epoch.value);
    w.Key("replayPoint").Int(ps.replay_point.value);
    w.Key("truncatedBefore").Int(ps.truncated_before.value);
    w.Key("safeOffset").Int(safe.count(p) != 0 ? safe[p] : 0);
    w.Key("logStart").Int(lb.start).Key("logEnd").Int(lb.end);
    w.Key("nextOffset").Int(next).Key("lag").Int(lag);
    w.Key("bufferedEvents").Int(static_cast<int64_t>(buffered));
    int64_t lost_here = 0;
    w.Key("lostRanges").BeginArray();
    if (auto it = lost.find(p); it != lost.end()) {
      lost_here = covered(it->second);
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
      warnings.push_back("partition " + std::to_string(p) + " has no owner yet");
    } else if (!owner_alive) {
      warnings.push_back("partition " + std::to_string(p) + ": owner node " +
                         std::to_string(ps.owner.value) +
                         " is not alive; another node takes over after the group session timeout");
    } else if (next < 0) {
      warnings.push_back("partition " + std::to_string(p) + ": owner node " +
                         std::to_string(ps.owner.value) + " is claiming it (epoch " +
                         std::to_string(ps.epoch.value) + ")");
    }
  }
  w.EndArray();
  w.Key("segments").BeginObject().Key("count").Int(static_cast<int64_t>(seg_count));
  w.Key("bytes").Int(static_cast<int64_t>(seg_bytes));
  w.Key("unreachable").Int(static_cast<int64_t>(unreachable)).EndObject();
  w.Key("replication").BeginObject().Key("factor").Int(factor);
  w.Key("segments").Int(static_cast<int64_t>(seg_count));
  w.Key("underReplicated").Int(static_cast<int64_t>(under));
  w.Key("underReplicatedBytes").Int(static_cast<int64_t>(under_bytes));
  w.Key("withoutLiveCopy").Int(static_cast<int64_t>(no_live));
  w.Key("lost").Int(static_cast<int64_t>(no_copy));
  w.Key("stagedMerges").Int(static_cast<int64_t>(staged));
  if (merger) {
    const MergeStats ms = merger->stats();
    w.Key("merges").BeginObject();
    w.Key("staged").Int(static_cast<int64_t>(ms.merges_staged));
    w.Key("committed").Int(static_cast<int64_t>(ms.merges_committed));
    w.Key("aborted").Int(static_cast<int64_t>(ms.merges_aborted));
    w.Key("failed").Int(static_cast<int64_t>(ms.merges_failed));
    w.Key("segmentsMergedAway").Int(static_cast<int64_t>(ms.segments_merged_away));
    w.Key("lastError").String(ms.last_error);
    w.EndObject();
  }
  w.EndObject();
  WriteBucketStatus(w);
  if (group) {
    const std::string h = group->Health();
    if (h != "ok") warnings.push_back(h);
  }
  w.Key("warnings").BeginArray();
  for (const auto& s : warnings) w.String(s);
  w.EndArray();
  w.EndObject();
  http::Response r;
  r.body = w.Take();
  return r;
}

void Server::Impl::AddClusterRoutes() {
  router.Add("GET", "/api/v1/cluster",
             [this](const http::Request&, const http::PathParams&) { return HandleCluster(); });
  // Authenticated by HandleSnapshot itself (the cluster secret or an API token).
  router.Add(
      "GET", "/internal/v1/global/snapshot",
      [this](const http::Request& req, const http::PathParams&) { return HandleSnapshot(req); });
}

}  // namespace sediment
