// MemoryBucket: a Bucket in a map, with fault switches, for other libraries' unit tests.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <set>
#include <string>

#include "bucket/bucket.h"
#include "common/clock.h"
#include "common/mutex.h"

namespace sediment::bucket {

// Thread-safe. Objects live as long as the MemoryBucket. Every method, fault switches included,
// may be called concurrently from any thread.
class MemoryBucket final : public Bucket {
 public:
  // With a clock (borrowed, must outlive the bucket), Put records clock->NowMillis() as the
  // object's last_modified_ms, reported by List; without one it is 0 (unknown).
  explicit MemoryBucket(std::string name = "memory", Clock* clock = nullptr)
      : name_(std::move(name)), clock_(clock) {}

  Status Put(const std::string& key, std::string_view bytes) override;
  Result<std::string> Get(const std::string& key) override;
  Result<uint64_t> Head(const std::string& key) override;
  Result<std::vector<ObjectInfo>> List(const std::string& prefix) override;
  Status Delete(const std::string& key) override;
  std::string Describe() const override { return "memory://" + name_; }

  // While false every call (Put, Get, Head, List, Delete) returns Unavailable and changes
  // nothing; the call is still counted.
  void SetAvailable(bool available) { available_ = available; }
  // The next `n` calls (of any kind) return Unavailable, then the bucket works again.
  void FailNextCalls(int n) { fail_next_ = n; }
  // The next successful Get of `key` returns its bytes with the middle byte flipped (an empty
  // object gets one byte appended); the stored object is unchanged. Once per call of this.
  void CorruptNextGet(const std::string& key);

  // Calls made so far, successful or not.
  uint64_t puts() const { return puts_; }
  uint64_t gets() const { return gets_; }
  uint64_t heads() const { return heads_; }
  uint64_t lists() const { return lists_; }
  uint64_t deletes() const { return deletes_; }
  // Objects stored now and their total size.
  size_t object_count() const;
  uint64_t total_bytes() const;

 private:
  // OK when the call may go on; counts nothing.
  Status CheckAvailable();

  struct Object {
    std::string bytes;
    int64_t modified_ms = 0;
  };

  const std::string name_;
  Clock* const clock_;
  std::atomic<bool> available_{true};
  std::atomic<int> fail_next_{0};
  std::atomic<uint64_t> puts_{0}, gets_{0}, heads_{0}, lists_{0}, deletes_{0};
  mutable Mutex mu_;
  std::map<std::string, Object> objects_ GUARDED_BY(mu_);
  std::multiset<std::string> corrupt_next_ GUARDED_BY(mu_);
};

}  // namespace sediment::bucket
