// The buffered events of one datasource in a digest partition, kept as runs so that a query
// snapshot shares them instead of copying them (issue 16: a copy of every buffered event per
// query cost ~10% of the server's CPU while ingesting under queries, and held the partition lock
// meanwhile).
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "model/event.h"

namespace sediment {

// Events in strictly increasing position order: zero or more sealed runs (immutable once sealed;
// shared with whoever took them, who may keep them after the events were dropped here), then the
// open run that Append extends. Seal() closes the open run without copying an event.
// Not thread-safe: the owner serializes every call (Digest: under Partition::mu).
class EventRuns {
 public:
  using Run = std::shared_ptr<const std::vector<PositionedEvent>>;

  // `e.pos` must be above every position held. Returns the event's Event::ByteSize(), which is
  // kept beside it so that DropThrough need not read the (by then cold) event again.
  size_t Append(PositionedEvent e);
  bool empty() const { return size_ == 0; }
  size_t size() const { return size_; }
  // The oldest event held. Precondition: !empty().
  const PositionedEvent& front() const;
  // Seals the open run (when it has events) and returns every run, oldest first; no event is
  // copied. Twice in a row without an Append in between, the same runs (same pointers).
  std::vector<Run> Seal();
  // Drops the events at or below `through` (a prefix, as positions increase) and returns the sum
  // of their Event::ByteSize(). Whole runs are released (a taker's copy stays valid); a sealed run
  // cut in the middle is replaced by a new run holding copies of its remaining events.
  size_t DropThrough(const Position& through);
  // Sealed runs held (for tests and status).
  size_t sealed_runs() const { return sealed_.size(); }

 private:
  // Event::ByteSize() of each event, parallel to its run: sealed_bytes_[k][i] is that of
  // (*sealed_[k])[i], open_bytes_[i] that of open_[i].
  std::vector<Run> sealed_;
  std::vector<std::vector<size_t>> sealed_bytes_;
  std::vector<PositionedEvent> open_;
  std::vector<size_t> open_bytes_;
  size_t size_ = 0;
};

}  // namespace sediment
