#include "ingest/sharder.h"

#include <algorithm>

#include "common/checksum.h"

namespace sediment::ingest {

DatasourceSharder::DatasourceSharder(Clock* clock, ShardingOptions options)
    : clock_(clock), options_([&] {
        options.max_shards = std::max<int32_t>(1, options.max_shards);
        options.window_ms = std::max<int64_t>(1, options.window_ms);
        options.max_datasources = std::max<size_t>(1, options.max_datasources);
        return options;
      }()) {}

PartitionId DatasourceSharder::Pick(const Datasource& datasource, uint64_t bytes,
                                    int32_t partition_count) {
  if (options_.shard_bytes_per_second == 0 || options_.max_shards <= 1 || partition_count <= 1) {
    return datasource.PartitionFor(partition_count);
  }
  std::string key = datasource.Key();
  const int64_t now = NowMs();
  MutexLock lock(&mu_);
  auto it = index_.find(key);
  if (it == index_.end()) {
    Entry e;
    e.hash = Hash64(key);
    e.key = key;
    e.datasource = datasource;
    e.window_start_ms = now;
    e.last_seen_ms = now;
    lru_.push_front(std::move(e));
    index_.emplace(std::move(key), lru_.begin());
    Evict(now);  // never the new entry: it is the most recently used and not idle
  } else {
    lru_.splice(lru_.begin(), lru_, it->second);
  }
  Entry& e = lru_.front();
  if (now - e.last_seen_ms >= options_.forget_after_ms) {
    // Idle long enough to be forgotten: start over as a new datasource would.
    e.shards = 1;
    e.window_start_ms = now;
    e.window_bytes = 0;
    e.last_rate = 0;
    e.low_since_ms = -1;
  }
  e.last_seen_ms = now;
  CloseWindow(e, now, partition_count);
  e.window_bytes += bytes;
  const int32_t shards = std::clamp(e.shards, 1, partition_count);
  const auto shard = static_cast<int32_t>(e.next++ % static_cast<uint64_t>(shards));
  return ShardPartition(e.hash, shard, partition_count);
}

void DatasourceSharder::CloseWindow(Entry& e, int64_t now_ms, int32_t partition_count) const {
  const int64_t elapsed = now_ms - e.window_start_ms;
  if (elapsed < options_.window_ms) return;
  const uint64_t rate = e.window_bytes * 1000 / static_cast<uint64_t>(elapsed);
  const uint64_t threshold = options_.shard_bytes_per_second;
  const int32_t cap = std::max(1, std::min(options_.max_shards, partition_count));
  e.last_rate = rate;
  const auto shards = static_cast<uint64_t>(e.shards);
  if (rate / shards > threshold) {
    e.shards = std::min(cap, e.shards * 2);
    e.low_since_ms = -1;
  } else if (e.shards > 1 && rate / shards < threshold / 4) {
    // The whole window was low: the run of low windows began at its start at the latest.
    if (e.low_since_ms < 0) e.low_since_ms = e.window_start_ms;
    if (now_ms - e.low_since_ms >= options_.shrink_after_ms) {
      e.shards = std::max(1, e.shards / 2);
      e.low_since_ms = now_ms;  // the next halving needs another shrink_after_ms of low windows
    }
  } else {
    e.low_since_ms = -1;
  }
  e.shards = std::min(e.shards, cap);
  e.window_start_ms = now_ms;
  e.window_bytes = 0;
}

void DatasourceSharder::Evict(int64_t now_ms) {
  while (!lru_.empty()) {
    const Entry& last = lru_.back();
    const bool idle = now_ms - last.last_seen_ms >= options_.forget_after_ms;
    if (!idle && lru_.size() <= options_.max_datasources) break;
    index_.erase(last.key);
    lru_.pop_back();
  }
}

int32_t DatasourceSharder::ShardsOf(const Datasource& datasource) const {
  const std::string key = datasource.Key();
  const int64_t now = NowMs();
  MutexLock lock(&mu_);
  auto it = index_.find(key);
  if (it == index_.end() || now - it->second->last_seen_ms >= options_.forget_after_ms) return 1;
  return it->second->shards;
}

std::vector<DatasourceShards> DatasourceSharder::ShardedDatasources() const {
  std::vector<DatasourceShards> out;
  const int64_t now = NowMs();
  {
    MutexLock lock(&mu_);
    for (const Entry& e : lru_) {
      if (e.shards <= 1 || now - e.last_seen_ms >= options_.forget_after_ms) continue;
      out.push_back(DatasourceShards{e.key, e.datasource, e.shards, e.last_rate});
    }
  }
  std::sort(out.begin(), out.end(), [](const DatasourceShards& a, const DatasourceShards& b) {
    return a.shards != b.shards ? a.shards > b.shards : a.key < b.key;
  });
  return out;
}

size_t DatasourceSharder::TrackedCount() const {
  MutexLock lock(&mu_);
  return lru_.size();
}

}  // namespace sediment::ingest
