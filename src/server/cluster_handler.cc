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
namespace {}  // namespace

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
  hb.version = api::kVersion;
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
  if (HasGlobalSnapshot(env, snapshot_dir)) {
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
  // Peers serve their snapshot to cluster members only (the cluster secret).
  const std::string credential = config.cluster_secret;
  if (credential.empty()) {
    spdlog::warn("global: no --cluster-secret to authenticate to peers for their snapshot");
    *why_not = "no cluster secret for peers";
    return Status::FailedPrecondition("global: no cluster secret to ask peers for their snapshot");
  }
  // Most advanced peer first.
  std::sort(peers.begin(), peers.end(), [](const NodeView& a, const NodeView& b) {
    return a.last.global_applied > b.last.global_applied;
  });
  for (const auto& peer : peers) {
    http::FetchOptions options = peer_tls.Options();
    options.timeout = std::chrono::seconds(30);
    auto r = http::Fetch("GET", peer_tls.Url(peer.address, "/internal/v1/global/snapshot"),
                         {{"Authorization", "Bearer " + credential}}, "", options);
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

}  // namespace sediment
