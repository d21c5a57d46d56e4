// Storage wiring of a node (DESIGN section 8): the local segment store, replication and merges
// (src/storage, src/merge) started once membership has heard the peers, the maintenance pass
// (retention, truncation of the global topic), and the storage endpoints: the internal segment
// file fetch, the segment list with replica counts, and per-repository retention.
#include <simdjson.h>
#include <spdlog/spdlog.h>

#include <algorithm>

#include "common/json_writer.h"
#include "common/time_parse.h"
#include "http/http_client.h"
#include "server/server_impl.h"
#include "storage/retention.h"

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
  HttpSegmentFetcher(const Membership* membership, std::function<std::string()> secret)
      : membership_(membership), secret_(std::move(secret)) {}
  Result<std::string> Fetch(NodeId holder, const SegmentRecord& seg) override {
    auto v = membership_->Find(holder);
    if (!v || v->address.empty()) {
      return Status::Unavailable("node " + std::to_string(holder.value) + " has no address");
    }
    auto r = http::Fetch("GET",
                         "http://" + v->address + "/internal/v1/segment-file?name=" + seg.file_name,
                         {{"Authorization", "Bearer " + secret_()}}, "", kFetchTimeout);
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
};

int64_t GetInt(simdjson::dom::element doc, const char* key, int64_t dflt, bool* bad) {
  simdjson::dom::element v;
  if (doc[key].get(v)) return dflt;
  int64_t i = 0;
  uint64_t u = 0;
  if (!v.get(i)) return i;
  if (!v.get(u) && u <= static_cast<uint64_t>(INT64_MAX)) return static_cast<int64_t>(u);
  *bad = true;
  return dflt;
}

}  // namespace

Status Server::Impl::StartStorage() {
  store = std::make_unique<SegmentStore>(env, segment_dir);
  RETURN_IF_ERROR(env->CreateDirs(segment_dir));
  peers = std::make_unique<MembershipPeers>(membership.get(), clock, node);
  fetcher =
      std::make_unique<HttpSegmentFetcher>(membership.get(), [this] { return ClusterSecret(); });
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
  maintenance_thread = std::thread([this] { MaintenanceLoop(); });
  return Status::OK();
}

void Server::Impl::StopStorage() {
  {
    std::lock_guard lock(maintenance_mu);
    maintenance_stop = true;
  }
  maintenance_cv.notify_all();
  if (maintenance_thread.joinable()) maintenance_thread.join();
  if (uploader) uploader->Stop();
  if (merger) merger->Stop();
  if (replicator) replicator->Stop();
}

void Server::Impl::MaintenanceLoop() {
  auto wait = [this](std::chrono::milliseconds d) {
    std::unique_lock lock(maintenance_mu);
    return !maintenance_cv.wait_for(lock, d, [this] { return maintenance_stop; });
  };
  // Placement needs the peers' heartbeats: a node that just started has not heard everyone yet.
  if (kafka() && !wait(std::chrono::milliseconds(config.heartbeat_timeout_ms))) return;
  replicator->Start();
  if (uploader) uploader->Start();
  if (merger) {
    Status st = merger->Start();
    if (!st.ok()) spdlog::error("merges not started: {}", st.ToString());
  }
  // Bucket snapshots are uploaded by this pass: it runs at least that often.
  int64_t every_ms = config.maintenance_interval_ms;
  if (bucket) every_ms = std::min(every_ms, config.bucket_snapshot_interval_ms);
  while (wait(std::chrono::milliseconds(every_ms))) {
    if (!IsMaintenanceLeader()) continue;
    ApplyRetention();
    if (kafka()) TruncateGlobalTopic();
    BucketMaintenance();
  }
}

bool Server::Impl::IsMaintenanceLeader() const {
  if (!kafka()) return true;
  for (const auto& v : membership->AliveNodes()) {
    if (!v.serving()) continue;
    return v.node == node;  // sorted by id: the first serving node leads
  }
  return false;
}

void Server::Impl::ApplyRetention() {
  RetentionPlan plan;
  global->Read([&](const GlobalState& st) { plan = PlanRetention(st, clock->NowMillis()); });
  for (size_t i = 0; i < plan.expired.size(); i += 1000) {
    RemoveSegments ev;
    ev.ids.assign(plan.expired.begin() + i,
                  plan.expired.begin() + std::min(plan.expired.size(), i + 1000));
    auto r = global->Submit(ev);
    if (!r.ok()) {
      spdlog::warn("retention: removing {} segments: {}", ev.ids.size(), r.status().ToString());
      return;
    }
  }
  for (const auto& [repo, counts] : plan.by_repo) {
    spdlog::info(
        "retention: repository '{}': removed {} segments past the age limit and {} over "
        "the size limit",
        repo, counts.by_age, counts.by_size);
  }
}

void Server::Impl::TruncateGlobalTopic() {
  std::vector<Offset> peers_oldest;
  for (const auto& v : membership->AliveNodes()) {
    if (v.node != node) peers_oldest.push_back(v.last.oldest_snapshot);
  }
  const Offset target = GlobalTopicTruncationPoint(global->OldestSnapshot(), peers_oldest);
  if (target.value <= global_truncated_before) return;
  auto st = global_log->DeleteBefore(PartitionId(0), target);
  if (!st.ok()) {
    spdlog::warn("truncating the global topic below {}: {}", target.value, st.ToString());
    return;
  }
  global_truncated_before = target.value;
  spdlog::info("global topic truncated below offset {} (oldest snapshot of every live node)",
               target.value);
}

http::Response Server::Impl::HandleSegmentFile(const http::Request& req) {
  auto it = req.query.find("name");
  if (it == req.query.end() || !ValidSegmentFileName(it->second)) {
    return http::JsonError(400, "name must be a segment file name (<name>.seg)");
  }
  if (!store->Has(it->second)) return http::JsonError(404, "no segment file " + it->second);
  auto data = store->Read(it->second);
  if (!data.ok()) return http::JsonError(HttpStatusFor(data.status()), data.status().message());
  http::Response r;
  r.content_type = "application/octet-stream";
  r.body = std::move(*data);
  return r;
}

http::Response Server::Impl::HandleClusterSegments(const http::Request& req) {
  if (!IsApiCaller(req)) {
    return http::JsonError(401, "missing or unknown API token (Authorization: Bearer <token>)");
  }
  JsonWriter w;
  w.BeginObject();
  global->Read([&](const GlobalState& st) {
    w.Key("factor").Int(EffectiveReplicationFactor(st));
    w.Key("segments").BeginArray();
    for (const auto& [id, seg] : st.segments) {
      w.BeginObject();
      w.Key("id").Int(id.value).Key("repo").String(seg.datasource.repo);
      w.Key("datasource").String(seg.datasource.Key());
      w.Key("partition").Int(seg.partition.value);
      w.Key("minOffset")
          .Int(seg.min_pos.offset.value)
          .Key("maxOffset")
          .Int(seg.max_pos.offset.value);
      w.Key("minTs").Int(seg.min_ts).Key("maxTs").Int(seg.max_ts);
      w.Key("events").Int(static_cast<int64_t>(seg.event_count));
      w.Key("fileSize").Int(static_cast<int64_t>(seg.file_size));
      w.Key("writer").Int(seg.node.value).Key("file").String(seg.file_name);
      int64_t live = 0;
      w.Key("replicas").BeginArray();
      for (NodeId n : seg.replicas) {
        w.Int(n.value);
        if (peers && peers->IsAlive(n)) ++live;
      }
      w.EndArray();
      w.Key("liveReplicas").Int(live);
      w.Key("staged").Bool(seg.staged());
      w.Key("uploaded").Bool(seg.uploaded).Key("generation").Int(seg.generation);
      if (seg.staged()) {
        w.Key("mergeInputs").BeginArray();
        for (SegmentId in : seg.merge_inputs) w.Int(in.value);
        w.EndArray();
      }
      w.EndObject();
    }
    w.EndArray();
  });
  w.EndObject();
  http::Response r;
  r.body = w.Take();
  return r;
}

http::Response Server::Impl::HandleRetention(const http::Request& req, const std::string& repo) {
  if (!IsApiCaller(req)) {
    return http::JsonError(401, "missing or unknown API token (Authorization: Bearer <token>)");
  }
  std::optional<RepoInfo> info;
  global->Read([&](const GlobalState& st) {
    auto it = st.repos.find(repo);
    if (it != st.repos.end()) info = it->second;
  });
  if (!info) return http::JsonError(404, "no repository named '" + repo + "'");
  if (req.method == "PUT") {
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    if (parser.parse(req.body).get(doc) || !doc.is_object()) {
      return http::JsonError(400,
                             "body must be a JSON object {\"retentionMs\": N, "
                             "\"retentionBytes\": N} (0 = no limit)");
    }
    bool bad = false;
    const int64_t ms = GetInt(doc, "retentionMs", info->retention_ms, &bad);
    const int64_t bytes =
        GetInt(doc, "retentionBytes", static_cast<int64_t>(info->retention_bytes), &bad);
    if (bad || ms < 0 || bytes < 0) {
      return http::JsonError(400, "retentionMs and retentionBytes must be non-negative integers");
    }
    auto r = global->Submit(SetRetention{repo, ms, static_cast<uint64_t>(bytes)});
    if (!r.ok()) return http::JsonError(HttpStatusFor(r.status()), r.status().message());
    info->retention_ms = ms;
    info->retention_bytes = static_cast<uint64_t>(bytes);
    spdlog::info("retention of repository '{}': {} ms, {} bytes (0 = no limit)", repo, ms, bytes);
  }
  JsonWriter w;
  w.BeginObject().Key("repository").String(repo);
  w.Key("retentionMs").Int(info->retention_ms);
  w.Key("retentionBytes").Int(static_cast<int64_t>(info->retention_bytes));
  w.EndObject();
  http::Response r;
  r.body = w.Take();
  return r;
}

void Server::Impl::AddStorageRoutes() {
  router.Add("GET", "/api/v1/cluster/segments",
             [this](const http::Request& req, const http::PathParams&) {
               return HandleClusterSegments(req);
             });
  router.Add("GET", "/internal/v1/segment-file",
             InternalOnly([this](const http::Request& req, const http::PathParams&) {
               return HandleSegmentFile(req);
             }));
  for (const char* prefix : {"/api/v1/repositories/", "/api/v1/dataspaces/"}) {
    router.Add("PUT|GET", std::string(prefix) + "{repo}/retention",
               [this](const http::Request& req, const http::PathParams& p) {
                 return HandleRetention(req, p.find("repo")->second);
               });
  }
}

}  // namespace sediment
