#include "digest/event_runs.h"

#include <algorithm>
#include <numeric>
#include <utility>

namespace sediment {

size_t EventRuns::Append(PositionedEvent e) {
  const size_t bytes = e.event.ByteSize();
  open_.push_back(std::move(e));
  open_bytes_.push_back(bytes);
  ++size_;
  return bytes;
}

const PositionedEvent& EventRuns::front() const {
  return sealed_.empty() ? open_.front() : sealed_.front()->front();
}

std::vector<EventRuns::Run> EventRuns::Seal() {
  if (!open_.empty()) {
    sealed_.push_back(std::make_shared<const std::vector<PositionedEvent>>(std::move(open_)));
    sealed_bytes_.push_back(std::move(open_bytes_));
    open_ = {};
    open_bytes_ = {};
  }
  return sealed_;
}

size_t EventRuns::DropThrough(const Position& through) {
  size_t bytes = 0;
  auto above = [&](const PositionedEvent& e) { return through < e.pos; };
  auto sum = [](const std::vector<size_t>& v, size_t n) {
    return std::accumulate(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(n), size_t{0});
  };
  // Whole sealed runs first.
  size_t whole = 0;
  for (; whole < sealed_.size(); ++whole) {
    const std::vector<PositionedEvent>& run = *sealed_[whole];
    if (above(run.back())) break;
    bytes += sum(sealed_bytes_[whole], run.size());
    size_ -= run.size();
  }
  sealed_.erase(sealed_.begin(), sealed_.begin() + static_cast<std::ptrdiff_t>(whole));
  sealed_bytes_.erase(sealed_bytes_.begin(),
                      sealed_bytes_.begin() + static_cast<std::ptrdiff_t>(whole));
  if (!sealed_.empty()) {
    // The first remaining run may start at or below `through`: keep only its tail.
    const std::vector<PositionedEvent>& run = *sealed_.front();
    auto keep = std::find_if(run.begin(), run.end(), above);
    const size_t cut = static_cast<size_t>(keep - run.begin());
    if (cut != 0) {
      std::vector<size_t>& sizes = sealed_bytes_.front();
      bytes += sum(sizes, cut);
      size_ -= cut;
      sealed_.front() = std::make_shared<const std::vector<PositionedEvent>>(keep, run.end());
      sizes.erase(sizes.begin(), sizes.begin() + static_cast<std::ptrdiff_t>(cut));
    }
    return bytes;
  }
  auto keep = std::find_if(open_.begin(), open_.end(), above);
  const size_t cut = static_cast<size_t>(keep - open_.begin());
  bytes += sum(open_bytes_, cut);
  size_ -= cut;
  open_.erase(open_.begin(), keep);
  open_bytes_.erase(open_bytes_.begin(), open_bytes_.begin() + static_cast<std::ptrdiff_t>(cut));
  return bytes;
}

}  // namespace sediment
