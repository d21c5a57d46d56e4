// Test helpers of the coordinator library: a datasource with numbered events, segment records
// over them, a Global whose state the test sets and a fake local node. For tests only.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "coordinator/coordinator.h"
#include "global/global.h"
#include "query/query.h"

namespace sediment::coordinator::coordinator_testing {

inline const Datasource kDs{"web", {{"#host", "a"}}};
constexpr int32_t kPart = 0;

// Events 0..n-1 of kDs in partition kPart, event i at offset i.
inline std::vector<PositionedEvent> Events(int from, int to) {
  std::vector<PositionedEvent> out;
  for (int i = from; i < to; ++i) {
    PositionedEvent e;
    e.pos = Position{Offset(i), 0};
    e.event.timestamp_ms = 1000 + i;
    e.event.raw = "event " + std::to_string(i);
    out.push_back(e);
  }
  return out;
}

inline query::BufferedSource Source(std::vector<PositionedEvent> events) {
  return query::BufferedSource{kDs, PartitionId(kPart),
                               std::make_shared<const std::vector<PositionedEvent>>(events)};
}

inline SegmentRecord Segment(int64_t id, int from, int to, std::set<NodeId> replicas) {
  SegmentRecord s;
  s.id = SegmentId(id);
  s.datasource = kDs;
  s.partition = PartitionId(kPart);
  s.min_pos = Position{Offset(from), 0};
  s.max_pos = Position{Offset(to - 1), 0};
  s.min_ts = 1000 + from;
  s.max_ts = 1000 + to - 1;
  s.event_count = static_cast<uint64_t>(to - from);
  s.file_name = "seg-" + std::to_string(id) + ".seg";
  s.replicas = std::move(replicas);
  return s;
}

// Global with a state the test sets. WaitApplied installs `pending` (the events this node had not
// applied yet) when asked for an offset it holds.
class FakeGlobal final : public Global {
 public:
  Result<Outcome> Submit(const GlobalEvent&) override { return Status::Internal("not here"); }
  void Read(const std::function<void(const GlobalState&)>& fn) const override {
    std::lock_guard lock(mu_);
    fn(state);
  }
  Status WriteSnapshot() override { return Status::OK(); }
  std::string SnapshotError() const override { return ""; }
  std::pair<Offset, std::string> EncodedState() const override { return {Offset(-1), ""}; }
  Offset Applied() const override {
    std::lock_guard lock(mu_);
    return state.applied_through;
  }
  std::string FollowError() const override { return ""; }
  uint64_t StateReloads() const override { return 0; }
  Offset OldestSnapshot() const override { return Offset(-1); }
  bool WaitApplied(Offset offset, std::chrono::milliseconds) override {
    std::lock_guard lock(mu_);
    ++waits;
    if (pending && pending->applied_through >= offset) {
      state = *pending;
      pending.reset();
    }
    return state.applied_through >= offset;
  }
  Result<Offset> LogEnd() override { return Offset(state.applied_through.value + 1); }
  Status Close() override { return Status::OK(); }
  // The test changes it only while no query runs, or through Mutate.
  void Mutate(const std::function<void(GlobalState&)>& fn) {
    std::lock_guard lock(mu_);
    fn(state);
  }

  GlobalState state;
  std::optional<GlobalState> pending;
  int waits = 0;

 private:
  mutable std::mutex mu_;
};

// A node's view for the coordinator and the leaf: node `self`, with the buffers a test sets and
// no segment files (every source it gives points nowhere). It records the files it was asked to
// find and pin and the segments reported unreadable; `on_buffers` runs at the start of each
// Buffers call (e.g. to hold a request open).
class FakeLocal final : public LocalNode {
 public:
  explicit FakeLocal(NodeId self = NodeId(1)) : self_(self) {}
  NodeId id() const override { return self_; }
  std::vector<query::BufferedSource> Buffers(const std::map<int32_t, Epoch>& want,
                                             std::vector<int64_t>* not_served) override {
    if (on_buffers) on_buffers();
    std::vector<query::BufferedSource> out;
    for (const auto& [p, e] : want) {
      auto it = buffers.find(p);
      if (it == buffers.end() || it->second.first != e) {
        not_served->push_back(p);
        continue;
      }
      out.push_back(Source(it->second.second));
    }
    return out;
  }
  bool HoldsFile(const std::string&) const override { return false; }
  query::SegmentSource SourceOf(const SegmentRecord&) const override { return {}; }
  std::optional<query::SegmentSource> SourceOfFile(const std::string& file,
                                                   SegmentId) const override {
    asked_files.push_back(file);
    return std::nullopt;
  }
  std::shared_ptr<void> Pin(const std::vector<std::string>& files) override {
    pinned = files;
    return nullptr;
  }
  bool HasBucket() const override { return false; }
  Result<Fetched> FetchFromBucket(const SegmentRecord&) override {
    return Status::Unavailable("no bucket");
  }
  void ReportUnreadable(SegmentId id) override { unreadable.push_back(id); }

  std::map<int32_t, std::pair<Epoch, std::vector<PositionedEvent>>> buffers;
  std::function<void()> on_buffers;
  std::vector<SegmentId> unreadable;
  std::vector<std::string> pinned;
  mutable std::vector<std::string> asked_files;

 private:
  const NodeId self_;
};

}  // namespace sediment::coordinator::coordinator_testing
