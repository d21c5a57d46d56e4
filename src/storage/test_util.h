// Test-only helpers for the storage tests: temp dirs, real segment files, and a fake membership
// and fetcher for clusters simulated in one process. Never linked into the server.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "common/env.h"
#include "common/testing/temp_dir.h"
#include "global/global.h"
#include "global/segment_record.h"
#include "segment/segment.h"
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

}  // namespace sediment::storage_testing
