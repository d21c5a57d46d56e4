#include "digest/event_runs.h"

#include <algorithm>
#include <utility>

namespace sediment {

void EventRuns::Append(PositionedEvent e) {
  open_.push_back(std::move(e));
  ++size_;
}

const PositionedEvent& EventRuns::front() const {
  return sealed_.empty() ? open_.front() : sealed_.front()->front();
}

std::vector<EventRuns::Run> EventRuns::Seal() {
  if (!open_.empty()) {
    sealed_.push_back(std::make_shared<const std::vector<PositionedEvent>>(std::move(open_)));
    open_ = {};
  }
  return sealed_;
}

size_t EventRuns::DropThrough(const Position& through) {
  size_t bytes = 0;
  auto above = [&](const PositionedEvent& e) { return through < e.pos; };
  // Whole sealed runs first.
  size_t whole = 0;
  for (; whole < sealed_.size(); ++whole) {
    const std::vector<PositionedEvent>& run = *sealed_[whole];
    if (above(run.back())) break;
    for (const PositionedEvent& e : run) bytes += e.event.ByteSize();
    size_ -= run.size();
  }
  sealed_.erase(sealed_.begin(), sealed_.begin() + static_cast<std::ptrdiff_t>(whole));
  if (!sealed_.empty()) {
    // The first remaining run may start at or below `through`: keep only its tail.
    const std::vector<PositionedEvent>& run = *sealed_.front();
    auto keep = std::find_if(run.begin(), run.end(), above);
    if (keep != run.begin()) {
      for (auto e = run.begin(); e != keep; ++e) bytes += e->event.ByteSize();
      size_ -= static_cast<size_t>(keep - run.begin());
      sealed_.front() = std::make_shared<const std::vector<PositionedEvent>>(keep, run.end());
    }
    return bytes;
  }
  auto keep = std::find_if(open_.begin(), open_.end(), above);
  for (auto e = open_.begin(); e != keep; ++e) bytes += e->event.ByteSize();
  size_ -= static_cast<size_t>(keep - open_.begin());
  open_.erase(open_.begin(), keep);
  return bytes;
}

}  // namespace sediment
