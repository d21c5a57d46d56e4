// The query routes: the public query endpoint (coordinated by coordinator::Coordinator) and the
// internal routes peers answer for a coordinator (coordinator::Leaf, coordinator/INTERNAL_API.md).
// LocalQueryNode adapts this node's digest, segment store and replicator to the coordinator's
// LocalNode.
#include <simdjson.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>

#include "common/json_writer.h"
#include "common/time_parse.h"
#include "query/wire.h"
#include "segment/segment.h"
#include "server/server_impl.h"

namespace sediment {
namespace {

using SteadyClock = std::chrono::steady_clock;
using coordinator::InternalQuery;
using coordinator::JoinIds;

query::SegmentSource SegmentSourceOf(const SegmentRecord& seg, const SegmentStore& store) {
  query::SegmentSource src;
  src.opener = &store;
  src.file_name = seg.file_name;
  src.id = seg.id;
  src.datasource = seg.datasource;
  src.partition = seg.partition;
  src.min_ts = seg.min_ts;
  src.max_ts = seg.max_ts;
  return src;
}

// The partitions of `want` (partition -> claim epoch) that `digest` digests under exactly that
// epoch.
std::set<int32_t> ServedPartitions(const Digest& digest, const std::map<int32_t, Epoch>& want) {
  std::set<int32_t> served;
  for (const auto& st : digest.PartitionStatuses()) {
    auto it = want.find(st.partition.value);
    if (st.claimed && it != want.end() && it->second == st.epoch) served.insert(it->first);
  }
  return served;
}

// The partitions of `want` that are not in `served`.
std::vector<int64_t> MissingPartitions(const std::map<int32_t, Epoch>& want,
                                       const std::set<int32_t>& served) {
  std::vector<int64_t> missing;
  for (const auto& [p, e] : want) {
    if (served.count(p) == 0) missing.push_back(p);
  }
  return missing;
}

// This node as the coordinator sees it. Thread-safe (every part it borrows is).
class LocalQueryNode final : public coordinator::LocalNode {
 public:
  LocalQueryNode(NodeId node, Digest* digest, SegmentStore* store, Replicator* replicator,
                 bool has_bucket)
      : node_(node),
        digest_(digest),
        store_(store),
        replicator_(replicator),
        has_bucket_(has_bucket) {}

  NodeId id() const override { return node_; }
  std::vector<query::BufferedSource> Buffers(const std::map<int32_t, Epoch>& want,
                                             std::vector<int64_t>* not_served) override {
    const std::set<int32_t> served = ServedPartitions(*digest_, want);
    std::vector<PartitionId> only;
    for (int32_t p : served) only.emplace_back(p);
    std::vector<query::BufferedSource> out;
    for (auto& b : digest_->SnapshotBuffers(&only)) {
      auto it = want.find(b.partition.value);
      if (it == want.end() || it->second != b.epoch) continue;
      out.push_back(query::BufferedSource{b.datasource, b.partition, b.events});
    }
    *not_served = MissingPartitions(want, served);
    return out;
  }
  bool HoldsFile(const std::string& file_name) const override { return store_->Has(file_name); }
  query::SegmentSource SourceOf(const SegmentRecord& seg) const override {
    return SegmentSourceOf(seg, *store_);
  }
  std::optional<query::SegmentSource> SourceOfFile(const std::string& file,
                                                   SegmentId id) const override {
    auto reader = store_->Open(file);  // refuses names that are not segment file names
    if (!reader.ok()) return std::nullopt;
    const SegmentInfo& info = (*reader)->info();
    query::SegmentSource src;
    src.opener = store_;
    src.file_name = file;
    src.id = id;
    src.datasource = info.datasource;
    src.partition = info.partition;
    src.min_ts = info.min_ts;
    src.max_ts = info.max_ts;
    return src;
  }

  std::shared_ptr<void> Pin(const std::vector<std::string>& file_names) override {
    return store_->Pin(file_names);
  }
  bool HasBucket() const override { return has_bucket_; }
  Result<Fetched> FetchFromBucket(const SegmentRecord& seg) override {
    ASSIGN_OR_RETURN(Replicator::FetchOutcome got, replicator_->EnsureLocal(seg));
    return Fetched{got.fetched, got.bytes};
  }
  void ReportUnreadable(SegmentId id) override {
    if (replicator_)
      replicator_->ReportCorrupt(id, Status::Corruption("a query could not read it"));
  }

 private:
  const NodeId node_;
  Digest* const digest_;
  SegmentStore* const store_;
  Replicator* const replicator_;  // null: no replication (then no bucket either)
  const bool has_bucket_;
};

}  // namespace

void Server::Impl::StartCoordinator() {
  query_local = std::make_unique<LocalQueryNode>(node, digest.get(), store.get(), replicator.get(),
                                                 bucket != nullptr);
  leaf = std::make_unique<coordinator::Leaf>(env, global.get(), query_local.get(),
                                             EffectiveQueryThreads(config), geo);
  query_peers = coordinator::NewHttpPeerClient([this] { return ClusterSecret(); }, peer_tls);
  coordinator::CoordinatorOptions options;
  options.query_threads = EffectiveQueryThreads(config);
  options.heartbeat_timeout_ms = config.heartbeat_timeout_ms;
  options.peer_progress_timeout = std::chrono::milliseconds(config.peer_progress_timeout_ms);
  options.geo = geo;
  coordinator = std::make_unique<coordinator::Coordinator>(
      env, clock, global.get(), query_local.get(), query_peers.get(),
      [m = membership.get()](NodeId n) -> std::optional<coordinator::PeerInfo> {
        auto view = m->Find(n);
        if (!view) return std::nullopt;
        return coordinator::PeerInfo{view->alive, view->address};
      },
      options);
}

}  // namespace sediment
