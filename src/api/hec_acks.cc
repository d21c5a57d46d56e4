#include "api/hec_acks.h"

namespace sediment::api {

bool IsHecChannel(std::string_view channel) {
  static constexpr size_t kGroups[] = {8, 4, 4, 4, 12};
  size_t pos = 0;
  for (size_t g = 0; g < 5; ++g) {
    if (g > 0) {
      if (pos >= channel.size() || channel[pos] != '-') return false;
      ++pos;
    }
    for (size_t i = 0; i < kGroups[g]; ++i, ++pos) {
      if (pos >= channel.size()) return false;
      const char c = channel[pos];
      const bool hex = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
      if (!hex) return false;
    }
  }
  return pos == channel.size();
}

uint64_t HecAcks::Issue(std::string_view channel) {
  MutexLock lock(&mu_);
  auto it = channels_.find(std::string(channel));
  if (it == channels_.end()) {
    if (channels_.size() >= max_channels_ && !lru_.empty()) {
      channels_.erase(lru_.back());
      lru_.pop_back();
    }
    lru_.emplace_front(channel);
    it = channels_.emplace(std::string(channel), Channel{0, lru_.begin()}).first;
  } else {
    lru_.splice(lru_.begin(), lru_, it->second.lru);
  }
  return it->second.next++;
}

bool HecAcks::Acknowledged(std::string_view channel, uint64_t id) {
  MutexLock lock(&mu_);
  auto it = channels_.find(std::string(channel));
  if (it == channels_.end()) return false;
  lru_.splice(lru_.begin(), lru_, it->second.lru);
  return id < it->second.next;
}

}  // namespace sediment::api
