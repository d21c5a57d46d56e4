// Test helpers of the coordinator library: a datasource with numbered events, segment records
// over them, and a Global whose state the test sets. For tests only.
#pragma once

#include <chrono>
#include <functional>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

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

}  // namespace sediment::coordinator::coordinator_testing
