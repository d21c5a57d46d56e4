#include "bucket/memory_bucket.h"

namespace sediment::bucket {

Status MemoryBucket::CheckAvailable() {
  if (!available_) return Status::Unavailable(Describe() + ": unavailable (fault switch)");
  int n = fail_next_.load();
  while (n > 0) {
    if (fail_next_.compare_exchange_weak(n, n - 1)) {
      return Status::Unavailable(Describe() + ": unavailable (injected failure)");
    }
  }
  return Status::OK();
}

void MemoryBucket::CorruptNextGet(const std::string& key) {
  MutexLock lock(&mu_);
  corrupt_next_.insert(key);
}

Status MemoryBucket::Put(const std::string& key, std::string_view bytes) {
  ++puts_;
  RETURN_IF_ERROR(CheckAvailable());
  if (key.empty()) return Status::InvalidArgument(Describe() + ": empty key");
  const int64_t now_ms = clock_ != nullptr ? clock_->NowMillis() : 0;
  MutexLock lock(&mu_);
  objects_[key] = Object{std::string(bytes), now_ms};
  return Status::OK();
}

Result<std::string> MemoryBucket::Get(const std::string& key) {
  ++gets_;
  RETURN_IF_ERROR(CheckAvailable());
  MutexLock lock(&mu_);
  auto it = objects_.find(key);
  if (it == objects_.end()) return Status::NotFound(Describe() + ": no object " + key);
  std::string bytes = it->second.bytes;
  if (auto c = corrupt_next_.find(key); c != corrupt_next_.end()) {
    corrupt_next_.erase(c);
    if (bytes.empty()) {
      bytes.push_back('\x5a');
    } else {
      bytes[bytes.size() / 2] = static_cast<char>(bytes[bytes.size() / 2] ^ 0x01);
    }
  }
  return bytes;
}

Result<uint64_t> MemoryBucket::Head(const std::string& key) {
  ++heads_;
  RETURN_IF_ERROR(CheckAvailable());
  MutexLock lock(&mu_);
  auto it = objects_.find(key);
  if (it == objects_.end()) return Status::NotFound(Describe() + ": no object " + key);
  return static_cast<uint64_t>(it->second.bytes.size());
}

Result<std::vector<ObjectInfo>> MemoryBucket::List(const std::string& prefix) {
  ++lists_;
  RETURN_IF_ERROR(CheckAvailable());
  MutexLock lock(&mu_);
  std::vector<ObjectInfo> out;
  for (auto it = objects_.lower_bound(prefix);
       it != objects_.end() && it->first.compare(0, prefix.size(), prefix) == 0; ++it) {
    out.push_back({it->first, it->second.bytes.size(), it->second.modified_ms});
  }
  return out;
}

Status MemoryBucket::Delete(const std::string& key) {
  ++deletes_;
  RETURN_IF_ERROR(CheckAvailable());
  MutexLock lock(&mu_);
  objects_.erase(key);
  return Status::OK();
}

size_t MemoryBucket::object_count() const {
  MutexLock lock(&mu_);
  return objects_.size();
}

uint64_t MemoryBucket::total_bytes() const {
  MutexLock lock(&mu_);
  uint64_t total = 0;
  for (const auto& [k, v] : objects_) total += v.bytes.size();
  return total;
}

}  // namespace sediment::bucket
