// Test-only helpers for the storage tests: temp dirs, real segment files, a fake membership and
// fetcher, and a base fixture for clusters simulated in one process. Never linked into the server.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/env.h"
#include "common/testing/temp_dir.h"
#include "global/global.h"
#include "global/segment_record.h"
#include "log/local_log.h"
#include "segment/segment.h"
#include "storage/replicator.h"
#include "storage/store.h"

namespace sediment::storage_testing {

using sediment::TempDir;

inline Datasource TestDs(const std::string& host = "web-1") {
  Datasource ds;
  ds.repo = "repo";
  ds.tags = {{"#host", host}};
  return ds;
}

// Writes a segment of `events` events at offsets [first_offset, first_offset + events) of
// partition 0 to dir/file_name and returns its record (id unset, replicas {node}). `pad` bytes of
// incompressible-ish text per event make the file bigger.
inline SegmentRecord WriteTestSegment(Env* env, const std::string& dir,
                                      const std::string& file_name, int64_t first_offset,
                                      int events, NodeId node, size_t pad = 0) {
  EXPECT_TRUE(env->CreateDirs(dir).ok());
  std::vector<PositionedEvent> evs;
  uint64_t x = static_cast<uint64_t>(first_offset) * 0x9E3779B97F4A7C15ull + 1;
  for (int i = 0; i < events; ++i) {
    PositionedEvent pe;
    pe.pos = Position{Offset(first_offset + i), 0};
    pe.event.timestamp_ms = 1'700'000'000'000 + first_offset + i;
    pe.event.ingest_ms = pe.event.timestamp_ms;
    pe.event.raw = file_name + " event " + std::to_string(first_offset + i) + " ";
    for (size_t k = 0; k < pad; ++k) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      pe.event.raw.push_back(static_cast<char>('a' + x % 26));
    }
    evs.push_back(std::move(pe));
  }
  auto info = WriteSegment(env, JoinPath(dir, file_name), TestDs(), PartitionId(0), evs);
  EXPECT_TRUE(info.ok()) << info.status().ToString();
  if (!info.ok()) return SegmentRecord{};
  SegmentRecord r = SegmentRecordFor(*info, file_name, node, Epoch(0));
  r.replicas = {node};
  return r;
}

enum class Liveness { kAlive, kSilent, kGone };  // silent: within grace, not heard recently

// The cluster's membership as the test sets it; every node sees the same table.
class Membership {
 public:
  void Set(NodeId n, Liveness l) {
    std::lock_guard lock(mu_);
    state_[n] = l;
  }
  Liveness Get(NodeId n) const {
    std::lock_guard lock(mu_);
    auto it = state_.find(n);
    return it == state_.end() ? Liveness::kGone : it->second;
  }

 private:
  mutable std::mutex mu_;
  std::map<NodeId, Liveness> state_;
};

class FakePeers final : public PeerView {
 public:
  FakePeers(NodeId self, Membership* m) : self_(self), m_(m) {}
  NodeId Self() const override { return self_; }
  bool IsAlive(NodeId n) const override { return n == self_ || m_->Get(n) == Liveness::kAlive; }
  bool IsPresent(NodeId n, std::chrono::milliseconds) const override {
    return n == self_ || m_->Get(n) != Liveness::kGone;
  }

 private:
  NodeId self_;
  Membership* m_;
};

// Serves a holder's file from its store; fails for nodes that are not alive.
class FakeFetcher final : public SegmentFetcher {
 public:
  explicit FakeFetcher(Membership* m) : m_(m) {}
  void Add(NodeId n, SegmentStore* s) { stores_[n] = s; }
  Result<std::string> Fetch(NodeId holder, const SegmentRecord& seg) override {
    ++fetches;
    if (on_fetch) on_fetch(holder, seg);
    if (m_->Get(holder) != Liveness::kAlive) return Status::Unavailable("peer down");
    if (fail_from.count(holder) != 0) return Status::IOError("injected fetch failure");
    auto it = stores_.find(holder);
    if (it == stores_.end()) return Status::NotFound("no such node");
    auto bytes = it->second->Read(seg.file_name);
    if (bytes.ok()) {
      fetched_bytes += bytes->size();
      if (corrupt && !bytes->empty()) (*bytes)[bytes->size() / 2] ^= 0x20;
    }
    return bytes;
  }

  std::atomic<int> fetches{0};
  std::atomic<uint64_t> fetched_bytes{0};
  std::atomic<bool> corrupt{false};
  std::set<NodeId> fail_from;  // set before the pass
  std::function<void(NodeId, const SegmentRecord&)> on_fetch;

 private:
  Membership* m_;
  std::map<NodeId, SegmentStore*> stores_;
};

// One simulated storage node: its segment directory, its view of the membership and its
// Replicator. Fixtures whose nodes have more parts derive their node type from it.
struct StorageNode {
  NodeId id;
  std::unique_ptr<SegmentStore> store;
  std::unique_ptr<FakePeers> peers;
  std::unique_ptr<Replicator> rep;
};

// Base fixture for storage nodes simulated in one process: one Global over an embedded LocalLog
// (one partition, claimed by node 1), a ManualClock, one Membership all nodes see, and a
// FakeFetcher serving every node's store. NodeT is StorageNode or derives from it (default
// constructible). Nodes live in `nodes_` (a std::map: a node's address is stable) until TearDown,
// which destroys them before closing Global. The helpers run on the test thread; Global and the
// nodes' parts may be used from other threads as they allow.
template <typename NodeT = StorageNode>
class StorageClusterTest : public ::testing::Test {
 protected:
  using Node = NodeT;

  void SetUp() override {
    LocalLogOptions lo;
    lo.partitions = 1;
    log_ = OpenLocalLog(env_, tmp_.Sub("global-log"), lo).value();
    global_ = Global::Open(env_, log_.get(), tmp_.Sub("snap")).value();
    ASSERT_TRUE(global_->Submit(ClaimPartition{PartitionId(0), NodeId(1), Epoch(0)}).ok());
  }
  void TearDown() override {
    nodes_.clear();
    (void)global_->Close();
  }

  // Replicator options for tests: 5 ms interval, 30 s grace and deletion delay, no throttle, no
  // scrubbing, no bucket; throttle sleeps advance clock_ (rounded up to ms) and add to slept_us_.
  ReplicatorOptions RepOptions() {
    ReplicatorOptions o;
    o.interval = std::chrono::milliseconds(5);
    o.grace = std::chrono::seconds(30);
    o.deletion_delay = std::chrono::seconds(30);
    o.max_bytes_per_second = 0;
    o.scrub_every = std::chrono::milliseconds(0);
    o.sleep = [this](std::chrono::microseconds d) {
      slept_us_ += d.count();
      clock_.AdvanceMillis((d.count() + 999) / 1000);
      return true;
    };
    return o;
  }

  // Registers node `id` in Global, marks it alive, and gives it a store in its own directory, a
  // FakePeers, a place in fetcher_ and a Replicator with `opts`. Node ids are not reused.
  Node& AddStorageNode(NodeId id, const ReplicatorOptions& opts) {
    auto r = global_->Submit(RegisterNode{id});
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    members_.Set(id, Liveness::kAlive);
    Node& node = nodes_[id];
    node.id = id;
    node.store = std::make_unique<SegmentStore>(env_, tmp_.Sub("node" + std::to_string(id.value)));
    node.peers = std::make_unique<FakePeers>(id, &members_);
    fetcher_.Add(id, node.store.get());
    node.rep = std::make_unique<Replicator>(env_, &clock_, global_.get(), node.store.get(),
                                            node.peers.get(), &fetcher_, opts);
    return node;
  }
  Node& N(int64_t id) { return nodes_.at(NodeId(id)); }

  // Node `writer` writes a segment into its own directory and registers it (replicas {writer}).
  SegmentId AddSegment(int64_t writer = 1, size_t pad = 0, int events = 20) {
    const std::string name = "seg-" + std::to_string(next_offset_) + ".seg";
    SegmentRecord rec = WriteTestSegment(env_, N(writer).store->dir(), name, next_offset_, events,
                                         NodeId(writer), pad);
    rec.epoch = Epoch(1);
    next_offset_ += events;
    auto r = global_->Submit(RegisterSegment{rec, Offset(next_offset_)});
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? r->segment_id : SegmentId(0);
  }
  // Copies `id` from `from` to `to` and announces it (a replica made by hand).
  void CopyTo(SegmentId id, int64_t from, int64_t to) {
    SegmentRecord seg = Record(id);
    ASSERT_TRUE(N(to).store->Install(seg, N(from).store->Read(seg.file_name).value()).ok());
    ASSERT_TRUE(global_->Submit(AddSegmentReplica{id, NodeId(to)}).ok());
  }

  // Global's record of the segment; a default record if it is not (or no longer) there.
  SegmentRecord Record(SegmentId id) {
    SegmentRecord out;
    global_->Read([&](const GlobalState& s) {
      auto it = s.segments.find(id);
      if (it != s.segments.end()) out = it->second;
    });
    return out;
  }
  std::set<NodeId> Replicas(SegmentId id) { return Record(id).replicas; }

  // One Replicator::RunOnce on every alive node, in node order; OK expected from each.
  void ReplicateRound() {
    for (auto& [id, node] : nodes_) {
      if (members_.Get(id) != Liveness::kAlive) continue;
      Status st = node.rep->RunOnce();
      EXPECT_TRUE(st.ok()) << "node " << id.value << ": " << st.ToString();
    }
  }

  Env* env_ = Env::Default();
  TempDir tmp_;
  ManualClock clock_;
  std::atomic<int64_t> slept_us_{0};
  Membership members_;
  FakeFetcher fetcher_{&members_};
  std::unique_ptr<CommitLog> log_;
  std::unique_ptr<Global> global_;
  std::map<NodeId, Node> nodes_;
  int64_t next_offset_ = 0;
};

}  // namespace sediment::storage_testing
