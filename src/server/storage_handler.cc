// Storage wiring of a node (DESIGN section 8): the local segment store, replication, uploads and
// merges (src/storage, src/merge), started by the maintenance thread (src/maintenance), and the
// storage endpoints: the internal segment
// file fetch, the segment list with replica counts, and per-repository retention.
#include <simdjson.h>
#include <spdlog/spdlog.h>

#include <algorithm>

#include "common/json_writer.h"
#include "common/time_parse.h"
#include "http/http_client.h"
#include "server/server_impl.h"

namespace sediment {
namespace {

constexpr auto kFetchTimeout = std::chrono::seconds(120);

// Liveness for storage from the chatter heartbeats. A node counts as alive only once it serves
// (its heartbeat carries an address). Until `grace` has passed since this process started, a
// node not heard from yet counts as present: a node that just started has not read every peer's
// heartbeat, and must not start re-creating (and forgetting) their copies.
class MembershipPeers final : public PeerView {
 public:
  MembershipPeers(const Membership* membership, Clock* clock, NodeId self)
      : membership_(membership),
        clock_(clock),
        self_(self),
        started_us_(clock->MonotonicMicros()) {}
  NodeId Self() const override { return self_; }
  bool IsAlive(NodeId n) const override { return n == self_ || membership_->IsServing(n); }
  bool IsPresent(NodeId n, std::chrono::milliseconds grace) const override {
    if (n == self_) return true;
    auto v = membership_->Find(n);
    if (v && v->age_ms < grace.count()) return true;
    return clock_->MonotonicMicros() - started_us_ < grace.count() * 1000;
  }

 private:
  const Membership* membership_;
  Clock* clock_;
  NodeId self_;
  int64_t started_us_;
};

// Fetches a peer's file over GET /internal/v1/segment-file (cluster secret).
class HttpSegmentFetcher final : public SegmentFetcher {
 public:
  HttpSegmentFetcher(const Membership* membership, std::function<std::string()> secret,
                     http::PeerTls tls)
      : membership_(membership), secret_(std::move(secret)), tls_(std::move(tls)) {}
  Result<std::string> Fetch(NodeId holder, const SegmentRecord& seg) override {
    auto v = membership_->Find(holder);
    if (!v || v->address.empty()) {
      return Status::Unavailable("node " + std::to_string(holder.value) + " has no address");
    }
    http::FetchOptions options = tls_.Options();
    options.timeout = kFetchTimeout;
    auto r =
        http::Fetch("GET", tls_.Url(v->address, "/internal/v1/segment-file?name=" + seg.file_name),
                    {{"Authorization", "Bearer " + secret_()}}, "", options);
    if (!r.ok()) return r.status().WithContext("fetching " + seg.file_name);
    if (r->status != 200) {
      return Status::Unavailable("fetching " + seg.file_name + " from node " +
                                 std::to_string(holder.value) + ": HTTP " +
                                 std::to_string(r->status) + ": " + r->body.substr(0, 200));
    }
    return std::move(r->body);
  }

 private:
  const Membership* membership_;
  std::function<std::string()> secret_;
  const http::PeerTls tls_;
};

}  // namespace

Status Server::Impl::StartStorage() {
  peers = std::make_unique<MembershipPeers>(membership.get(), clock, node);
  fetcher = std::make_unique<HttpSegmentFetcher>(
      membership.get(), [this] { return ClusterSecret(); }, peer_tls);
  ReplicatorOptions ro;
  ro.interval = std::chrono::milliseconds(config.replication_interval_ms);
  ro.grace = std::chrono::milliseconds(config.repair_grace_ms);
  ro.max_bytes_per_second = config.replication_bytes_per_second;
  ro.scrub_every = std::chrono::milliseconds(config.scrub_interval_ms);
  ro.deletion_delay = std::chrono::milliseconds(config.file_deletion_delay_ms);
  ro.bucket = bucket.get();
  ro.cache_max_bytes = bucket ? CacheBoundBytes() : 0;
  if (ro.cache_max_bytes > 0) {
    spdlog::info("segment cache: at most {} bytes of local copies of uploaded segments",
                 ro.cache_max_bytes);
  }
  replicator = std::make_unique<Replicator>(env, clock, global.get(), store.get(), peers.get(),
                                            fetcher.get(), ro);
  if (bucket) {
    UploaderOptions uo;
    uo.self = node;
    uo.interval = std::chrono::milliseconds(config.upload_interval_ms);
    uo.grace = ro.grace;
    uo.on_corrupt = [this](SegmentId id, const Status& why) { replicator->ReportCorrupt(id, why); };
    uploader = std::make_unique<Uploader>(env, clock, global.get(), store.get(), bucket.get(),
                                          peers.get(), uo);
    BucketCollectorOptions co;
    co.self = node;
    co.grace = std::chrono::milliseconds(config.bucket_gc_grace_ms);
    bucket_collector =
        std::make_unique<BucketCollector>(clock, global.get(), bucket.get(), std::move(co));
  }
  if (config.merge_small_bytes > 0) {
    MergeOptions mo;
    mo.target_bytes = config.merge_target_bytes;
    mo.small_bytes = config.merge_small_bytes;
    mo.fan_in = static_cast<size_t>(config.merge_fan_in);
    mo.min_age = std::chrono::milliseconds(config.merge_min_age_ms);
    mo.interval = std::chrono::milliseconds(config.merge_interval_ms);
    mo.grace = std::chrono::milliseconds(config.repair_grace_ms);
    merger = std::make_unique<Merger>(
        env, clock, global.get(), store.get(), fetcher.get(), peers.get(),
        [this] {
          std::vector<PartitionId> owned;
          for (const auto& p : digest->PartitionStatuses()) {
            if (p.claimed) owned.push_back(p.partition);
          }
          return owned;
        },
        mo);
  }
  if (bucket) {
    maintenance::BucketSnapshotsOptions bo;
    bo.interval = std::chrono::milliseconds(config.bucket_snapshot_interval_ms);
    bo.kept = config.bucket_snapshots_kept;
    bucket_snapshots = std::make_unique<maintenance::BucketSnapshots>(
        clock, global.get(), bucket.get(), bucket_collector.get(), bo);
  }
  maintenance::MaintenanceParts mp;
  mp.clock = clock;
  mp.global = global.get();
  if (kafka()) {
    mp.membership = membership.get();
    mp.global_log = global_log.get();
  }
  mp.replicator = replicator.get();
  mp.uploader = uploader.get();
  mp.merger = merger.get();
  mp.bucket_snapshots = bucket_snapshots.get();
  maintenance::MaintenanceOptions mo;
  mo.self = node;
  // Placement needs the peers' heartbeats: a node that just started has not heard everyone yet.
  if (kafka()) mo.start_delay = std::chrono::milliseconds(config.heartbeat_timeout_ms);
  // Bucket snapshots are uploaded by this pass: it runs at least that often.
  mo.interval = std::chrono::milliseconds(config.maintenance_interval_ms);
  if (bucket) {
    mo.interval =
        std::min(mo.interval, std::chrono::milliseconds(config.bucket_snapshot_interval_ms));
  }
  maintenance = std::make_unique<maintenance::Maintenance>(mp, mo);
  maintenance->Start();
  return Status::OK();
}

void Server::Impl::StopStorage() {
  if (maintenance) maintenance->Stop();  // stops the uploader, merger and replicator too
}

}  // namespace sediment
