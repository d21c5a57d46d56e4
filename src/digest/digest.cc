#include "digest/digest.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <deque>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <unordered_set>

#include "common/thread.h"
#include "digest/event_runs.h"
#include "global/segment_record.h"
#include "segment/file_name.h"

namespace sediment {
namespace {
// Messages remembered per partition for dropping duplicates (a producer's retries land within
// seconds of the original; 100k messages is minutes of traffic at the highest rates).
constexpr size_t kDedupWindow = 100'000;

// Retry delay after a failure: doubles from 100 ms up to 5 s.
int64_t NextBackoffMs(int64_t ms) {
  return std::min<int64_t>(std::max<int64_t>(ms * 2, 100), 5000);
}

// Longest wait of a worker's Read while its partition has buffered events or a replay point to
// register (the loop around the Read flushes and registers).
constexpr std::chrono::milliseconds kBusyReadWait{200};

// Empty reads in a row after which a rebuild gives up until the next check (a remote log may
// answer empty below its end while a leader moves).
constexpr int kRebuildMaxEmptyReads = 50;

// The duplicate-message rule of the worker, shared with rebuilds so that both drop the same
// copies: a message whose id is among the kDedupWindow ids read most recently is a second copy.
// Not thread-safe.
class DedupWindow {
 public:
  // False when `id` is a second copy; id 0 (unknown) is never one. Remembers `id`.
  bool Admit(uint64_t id) {
    if (id == 0) return true;
    if (!ids_.insert(id).second) return false;
    order_.push_back(id);
    if (order_.size() > kDedupWindow) {
      ids_.erase(order_.front());
      order_.pop_front();
    }
    return true;
  }

 private:
  std::unordered_set<uint64_t> ids_;
  std::deque<uint64_t> order_;
};

// "repo{#host=a,k=v}" for logs.
std::string DatasourceName(const Datasource& ds) {
  std::string out = ds.repo + "{";
  for (size_t i = 0; i < ds.tags.size(); ++i) {
    if (i > 0) out += ",";
    out += ds.tags[i].first + "=" + ds.tags[i].second;
  }
  return out + "}";
}

std::chrono::milliseconds TruncateEvery(const DigestOptions& o) {
  return std::max(o.truncate_every, std::chrono::milliseconds(1));
}
std::chrono::milliseconds RebuildCheckEvery(const DigestOptions& o) {
  return std::max(o.rebuild_check_every, std::chrono::milliseconds(1));
}

// The random part of a rebuilt segment's file name.
uint32_t RandomU32() {
  thread_local std::mt19937 rng([] {
    std::random_device rd;
    return std::mt19937(rd());
  }());
  return static_cast<uint32_t>(rng());
}

// Writes and publishes the events of `runs` (oldest first, non-empty) as segment `name`:
// SegmentStore::Write's contract, reading the runs in place instead of one vector.
Result<SegmentInfo> WriteRuns(SegmentStore* store, const std::string& name, const Datasource& ds,
                              PartitionId partition, const std::vector<EventRuns::Run>& runs,
                              const SegmentWriterOptions& options) {
  ASSIGN_OR_RETURN(std::unique_ptr<SegmentStore::NewSegment> segment, store->Create(name));
  ASSIGN_OR_RETURN(SegmentInfo info,
                   segment->WriteFrom(ds, partition, options, [&](SegmentFileWriter* w) {
                     for (const EventRuns::Run& run : runs) RETURN_IF_ERROR(w->AddAll(*run));
                     return Status::OK();
                   }));
  RETURN_IF_ERROR(segment->Publish());
  return info;
}
}  // namespace

struct Digest::Partition {
  PartitionId id;
  Epoch epoch;
  std::thread thread;

  // Held by the worker while it processes a batch or flushes (never while waiting for the log);
  // FlushAll() takes it to flush from another thread.
  std::mutex work_mu;

  // Guards everything below. Mutated only by the holder of work_mu, except that SnapshotBuffers
  // seals the buffers' open runs (EventRuns::Seal); read by snapshots and status.
  mutable std::mutex mu;
  struct Buffer {
    Datasource datasource;
    EventRuns events;
    size_t bytes = 0;
    int64_t first_us = 0;  // monotonic time the oldest event arrived
  };
  std::map<std::string, Buffer> buffers;    // datasource key -> buffer
  std::map<std::string, Position> flushed;  // datasource key -> flushed_through (skip rule)
  // Segments written whose registration outcome is unknown (Submit failed without a verdict),
  // by datasource key. Touched only by the work_mu holder.
  struct PendingFlush {
    SegmentRecord record;
    Offset new_replay_point;
  };
  std::map<std::string, PendingFlush> pending;
  // Ids of the ingest messages read most recently: a copy of one of them at a later offset is a
  // producer retry that the commit log stored twice and is dropped.
  DedupWindow dedup;
  uint64_t duplicates_dropped = 0;
  Offset next_offset;
  Offset registered_replay_point;
  std::string error;
  int64_t last_advance_us = 0;
  uint64_t segments_rebuilt = 0;  // see PartitionDigestStatus
  uint64_t segments_lost = 0;

  // Set once the worker seeded `dedup` (SeedDedup); truncation waits for it.
  std::atomic<bool> seeded{false};

  // Non-zero while the maintenance thread reads the partition for a rebuild: the worker's Reads
  // then wait at most kBusyReadWait. (A log may serve one Read of a partition at a time, as
  // Kafka's does: the worker's 2 s idle Reads would make each of the rebuild's Reads, bounded by
  // 200 ms including that turn, come back empty.)
  std::atomic<int> rebuild_reads{0};

  // Touched only by the maintenance thread.
  Offset deleted_before{0};  // DeleteBefore succeeded up to here under this claim
  std::map<SegmentId, int64_t> unreachable_since_us;  // no live copy since (clock_ monotonic)
  std::set<SegmentId> unrecoverable;                  // reported lost; never tried again
  // Rebuilt files whose ReplaceSegment outcome is unknown: old segment id -> rebuilt record.
  std::map<SegmentId, SegmentRecord> pending_rebuilds;
};

// One assigned partition. `stop` is set by Revoke/Stop; `current` is the Partition digested
// under an applied claim (null while claiming or between claims).
struct Digest::Slot {
  PartitionId id;
  std::atomic<bool> stop{false};
  std::thread thread;
  std::shared_ptr<Partition> current;  // guarded by Digest::slots_mu_
  // Why the claim in progress has not been applied yet; empty while it is merely pending. Guarded
  // by Digest::slots_mu_.
  std::string claim_error;
  std::atomic<bool> done{false};  // the thread has finished
};

Digest::Digest(Clock* clock, CommitLog* log, Global* global, SegmentStore* store,
               DigestOptions options)
    : store_(store),
      clock_(clock),
      log_(log),
      global_(global),
      options_(std::move(options)),
      maintenance_("digest-maint",
                   {.interval = options_.truncate
                                    ? std::min(TruncateEvery(options_), RebuildCheckEvery(options_))
                                    : RebuildCheckEvery(options_)},
                   BackgroundLoop::DelayFromPass{}, [this] { return MaintenancePass(); }) {}

Digest::Digest(Env* env, Clock* clock, CommitLog* log, Global* global, DigestOptions options)
    : Digest(clock, log, global, nullptr, std::move(options)) {
  owned_store_ = std::make_unique<SegmentStore>(env, options_.segment_dir);
  store_ = owned_store_.get();
}

Digest::~Digest() { Stop(); }

sediment::Status Digest::Start() {
  // A file is kept iff Global lists this node as a holder of it (committed or staged). Everything
  // else goes: files whose registration never got applied, copies whose replica was dropped,
  // temp files of interrupted writes or pulls.
  std::set<std::string> known;
  global_->Read([&](const GlobalState& s) {
    for (const auto& [id, seg] : s.segments) {
      if (seg.replicas.count(options_.node) != 0) known.insert(seg.file_name);
    }
  });
  ASSIGN_OR_RETURN(std::vector<std::string> removed, store_->RemoveAllExcept(known));
  for (const auto& name : removed) spdlog::info("digest: removed orphan segment file {}", name);
  next_truncate_ = SteadyNow() + TruncateEvery(options_);
  next_rebuild_ = SteadyNow() + RebuildCheckEvery(options_);
  (void)maintenance_.Start();
  return sediment::Status::OK();
}

void Digest::Assign(const std::vector<PartitionId>& partitions) {
  std::lock_guard lock(slots_mu_);
  if (stop_) return;
  for (PartitionId id : partitions) {
    if (id.value < 0 || id.value >= log_->partition_count()) {
      spdlog::error("digest: cannot assign partition {}: the log has {} partitions", id.value,
                    log_->partition_count());
      continue;
    }
    if (slots_.count(id.value) != 0) continue;
    auto slot = std::make_shared<Slot>();
    slot->id = id;
    slot->thread = std::thread([this, slot] { Supervise(slot); });
    slots_.emplace(id.value, std::move(slot));
  }
  // Join workers of earlier revocations that have finished.
  for (auto it = retired_.begin(); it != retired_.end();) {
    if ((*it)->done) {
      if ((*it)->thread.joinable()) (*it)->thread.join();
      it = retired_.erase(it);
    } else {
      ++it;
    }
  }
}

void Digest::AssignAll() {
  std::vector<PartitionId> all;
  for (int32_t i = 0; i < log_->partition_count(); ++i) all.emplace_back(i);
  Assign(all);
}

void Digest::Revoke(const std::vector<PartitionId>& partitions) {
  std::vector<PartitionId> stopped;
  {
    std::lock_guard lock(slots_mu_);
    for (PartitionId id : partitions) {
      auto it = slots_.find(id.value);
      if (it == slots_.end()) continue;
      it->second->stop = true;
      it->second->current.reset();  // no longer answers queries
      retired_.push_back(std::move(it->second));
      slots_.erase(it);
      stopped.push_back(id);
      spdlog::info("digest: partition {} revoked", id.value);
    }
  }
  slots_cv_.notify_all();
  // After `stop` is set: a worker that checked it before waits in (or enters) a Read that ends.
  for (PartitionId id : stopped) log_->WakeReaders(id);
}

std::vector<PartitionId> Digest::Assigned() const {
  std::lock_guard lock(slots_mu_);
  std::vector<PartitionId> out;
  for (const auto& [id, slot] : slots_) out.emplace_back(id);
  return out;
}

bool Digest::WaitClaimed(std::chrono::milliseconds timeout) const {
  std::unique_lock lock(slots_mu_);
  return slots_cv_.wait_for(lock, timeout, [this] {
    for (const auto& [id, slot] : slots_) {
      if (slot->current == nullptr) return false;
    }
    return true;
  });
}

void Digest::Stop() {
  stop_ = true;
  maintenance_.Stop();
  std::vector<std::shared_ptr<Slot>> all;
  {
    std::lock_guard lock(slots_mu_);
    for (auto& [id, slot] : slots_) {
      slot->stop = true;
      all.push_back(slot);
    }
    for (auto& slot : retired_) all.push_back(slot);
    slots_.clear();
    retired_.clear();
  }
  slots_cv_.notify_all();
  // After `stop` is set: a worker that checked it before waits in (or enters) a Read that ends.
  for (auto& slot : all) log_->WakeReaders(slot->id);
  for (auto& slot : all) {
    if (slot->thread.joinable()) slot->thread.join();
  }
}

bool Digest::Stopping(const Slot* slot) const { return stop_ || slot->stop; }

bool Digest::SleepUnlessStopping(const Slot* slot, std::chrono::milliseconds d) const {
  std::unique_lock lock(slots_mu_);
  return slots_cv_.wait_for(lock, d, [&] { return Stopping(slot); });
}

std::vector<std::shared_ptr<Digest::Partition>> Digest::Current() const {
  std::lock_guard lock(slots_mu_);
  std::vector<std::shared_ptr<Partition>> out;
  for (const auto& [id, slot] : slots_) {
    if (slot->current != nullptr) out.push_back(slot->current);
  }
  return out;
}

void Digest::Supervise(std::shared_ptr<Slot> slot) {
  SetCurrentThreadName("digest-" + std::to_string(slot->id.value));
  if (options_.worker_nice != 0) {
    if (Status st = SetCurrentThreadNice(options_.worker_nice); !st.ok()) {
      spdlog::warn("digest: partition {}: {}", slot->id.value, st.ToString());
    }
  }
  while (!Stopping(slot.get())) {
    auto p = std::make_shared<Partition>();
    p->id = slot->id;
    if (!Claim(slot.get(), p.get())) break;
    {
      std::lock_guard lock(slots_mu_);
      if (!Stopping(slot.get())) slot->current = p;
    }
    slots_cv_.notify_all();
    const bool stopped = Run(slot.get(), p.get());
    {
      std::lock_guard lock(slots_mu_);
      slot->current.reset();
    }
    DropPending(p.get());
    if (stopped || Stopping(slot.get())) break;
    spdlog::warn(
        "digest: partition {} lost its claim (epoch {}); claiming again in {} ms if it "
        "is still assigned here",
        p->id.value, p->epoch.value, options_.reclaim_backoff.count());
    if (SleepUnlessStopping(slot.get(), options_.reclaim_backoff)) break;
  }
  slot->done = true;
}

bool Digest::Claim(Slot* slot, Partition* p) {
  const int32_t i = p->id.value;
  int64_t backoff_ms = 0;
  while (true) {
    if (backoff_ms > 0 && SleepUnlessStopping(slot, std::chrono::milliseconds(backoff_ms))) {
      return false;
    }
    if (Stopping(slot)) return false;
    Epoch current{0};
    global_->Read([&](const GlobalState& s) {
      auto it = s.partitions.find(i);
      if (it != s.partitions.end()) current = it->second.epoch;
    });
    auto claimed = global_->Submit(ClaimPartition{p->id, options_.node, current});
    if (!claimed.ok()) {
      // Rejected: another claim came first; read the new epoch and try again.
      if (claimed.status().code() == StatusCode::kRejected) continue;
      const std::string what = "claiming: " + claimed.status().ToString();
      spdlog::warn("digest: partition {}: {}; retrying", i, what);
      {
        std::lock_guard lock(slots_mu_);
        slot->claim_error = what;
      }
      backoff_ms = NextBackoffMs(backoff_ms);
      continue;
    }
    p->epoch = Epoch(current.value + 1);
    std::lock_guard lock(slots_mu_);
    slot->claim_error.clear();
    break;
  }
  // The claim is applied. Replay starts at the replay point; when the log no longer has it, the
  // first read says so (NotFound) and Run() reports the gap and moves to the log start. (The log's
  // offset queries are not asked here: on Kafka they can block far beyond their timeout while a
  // partition leader is down, and a claim must not wait for them.)
  std::lock_guard lock(p->mu);
  global_->Read([&](const GlobalState& s) {
    const PartitionState& ps = s.partitions.at(i);
    p->registered_replay_point = ps.replay_point;
    for (const auto& [key, pos] : s.flushed_through) {
      if (key.second == i) p->flushed[key.first] = pos;
    }
  });
  p->next_offset = p->registered_replay_point;
  spdlog::info("digest: claimed partition {} (epoch {}), replaying from offset {}", i,
               p->epoch.value, p->next_offset.value);
  return true;
}

void Digest::DropPending(Partition* p) {
  std::lock_guard work(p->work_mu);
  Epoch now{0};
  global_->Read([&](const GlobalState& s) {
    auto it = s.partitions.find(p->id.value);
    if (it != s.partitions.end()) now = it->second.epoch;
  });
  for (const auto& [key, f] : p->pending) {
    if (IsRegistered(f.record.file_name)) continue;
    // A registration that is still in flight may land and be applied while the epoch is ours;
    // once the epoch moved on it can only be rejected, so its file is an orphan.
    if (now == p->epoch) continue;
    spdlog::info("digest: removing {} (its registration can no longer be applied)",
                 f.record.file_name);
    store_->DeleteWhenUnpinned(f.record.file_name);
  }
  p->pending.clear();
}

Offset Digest::ReplayPointLocked(const Partition& p) const {
  Offset rp = p.next_offset;
  for (const auto& [key, buf] : p.buffers) {
    if (!buf.events.empty()) rp = std::min(rp, buf.events.front().pos.offset);
  }
  return rp;
}

sediment::Status Digest::ProcessRecords(Partition* p, std::vector<LogRecord>& records) {
  // Offsets may skip inside and between Reads without any loss (Kafka: offsets taken by
  // transaction control records or aborted transactions under read_committed). A deletion of
  // records the digest still needs shows as NotFound instead (the log start passed the offset to
  // read: Run, NoteLogStartPassed), so a skip here is never reported.
  int64_t now_us = clock_->MonotonicMicros();
  for (auto& rec : records) {
    {
      std::lock_guard lock(p->mu);
      // A record at or below what was already consumed would be buffered twice.
      if (rec.offset < p->next_offset) continue;
    }
    auto msg = DecodeIngestMessage(rec.data);
    if (!msg.ok()) {
      // P6: a corrupt record is reported and skipped; it can never be served.
      spdlog::error("digest: partition {} offset {}: {}", p->id.value, rec.offset.value,
                    msg.status().ToString());
      std::lock_guard lock(p->mu);
      p->error = "corrupt record at offset " + std::to_string(rec.offset.value);
      p->next_offset = Offset(rec.offset.value + 1);
      continue;
    }
    std::string key = msg->datasource.Key();
    std::lock_guard lock(p->mu);
    if (!p->dedup.Admit(msg->id)) {
      spdlog::warn(
          "digest: partition {} offset {}: dropped a second copy of ingest message {:016x} "
          "(a producer retry the commit log stored twice)",
          p->id.value, rec.offset.value, msg->id);
      ++p->duplicates_dropped;
      p->next_offset = Offset(rec.offset.value + 1);
      continue;
    }
    auto fit = p->flushed.find(key);
    Partition::Buffer* buf = nullptr;
    for (uint32_t i = 0; i < msg->events.size(); ++i) {
      Position pos{rec.offset, i};
      if (fit != p->flushed.end() && pos <= fit->second) continue;  // already in a segment
      if (buf == nullptr) {
        buf = &p->buffers[key];
        if (buf->events.empty()) {
          buf->datasource = msg->datasource;
          buf->first_us = now_us;
        }
      }
      buf->bytes += buf->events.Append(PositionedEvent{pos, std::move(msg->events[i])});
    }
    p->next_offset = Offset(rec.offset.value + 1);
  }
  return sediment::Status::OK();
}

bool Digest::IsRegistered(const std::string& file_name) const {
  bool found = false;
  global_->Read([&](const GlobalState& s) {
    for (const auto& [id, seg] : s.segments) {
      if (seg.node == options_.node && seg.file_name == file_name) {
        found = true;
        break;
      }
    }
  });
  return found;
}

void Digest::CompleteFlush(Partition* p, const std::string& key, Position max_pos,
                           Offset new_replay_point) {
  std::lock_guard lock(p->mu);
  p->flushed[key] = max_pos;
  auto it = p->buffers.find(key);
  if (it != p->buffers.end()) {
    // Events that arrived after the segment was written stay buffered.
    EventRuns& events = it->second.events;
    const size_t dropped_bytes = events.DropThrough(max_pos);
    it->second.bytes -= std::min(it->second.bytes, dropped_bytes);
    if (events.empty()) p->buffers.erase(it);
  }
  p->pending.erase(key);
  p->registered_replay_point = std::max(p->registered_replay_point, new_replay_point);
}

sediment::Status Digest::Flush(Partition* p, const std::string& key) {
  // Only the work_mu holder mutates `pending` and adds or removes buffers, so reading them without
  // mu is safe; the runs written are sealed under mu (snapshots seal too) and then immutable.
  auto pending = p->pending.find(key);
  if (pending == p->pending.end()) {
    std::vector<EventRuns::Run> runs;
    Datasource datasource;
    {
      std::lock_guard lock(p->mu);
      Partition::Buffer& buf = p->buffers.at(key);
      if (buf.events.empty()) return sediment::Status::OK();
      runs = buf.events.Seal();
      datasource = buf.datasource;
    }
    const std::string name = FlushedSegmentFileName(p->id, p->epoch, runs.front()->front().pos);
    auto info = WriteRuns(store_, name, datasource, p->id, runs, options_.segment);
    if (!info.ok()) return info.status().WithContext("writing segment " + name);
    Partition::PendingFlush f;
    {
      std::lock_guard lock(p->mu);
      f.new_replay_point = p->next_offset;
      for (const auto& [k, b] : p->buffers) {
        if (k != key && !b.events.empty()) {
          f.new_replay_point = std::min(f.new_replay_point, b.events.front().pos.offset);
        }
      }
    }
    f.record = SegmentRecordFor(*info, name, options_.node, p->epoch);
    pending = p->pending.emplace(key, std::move(f)).first;
  }
  // A registration whose outcome was unknown (the log did not answer) is resubmitted unchanged:
  // the file on disk is exactly what it describes.
  const Partition::PendingFlush f = pending->second;
  const std::string& name = f.record.file_name;
  auto outcome = global_->Submit(RegisterSegment{f.record, f.new_replay_point});
  if (outcome.ok()) {
    CompleteFlush(p, key, f.record.max_pos, f.new_replay_point);
    return sediment::Status::OK();
  }
  if (outcome.status().code() != StatusCode::kRejected) {
    // The registration may or may not be in the log; it stays pending and is retried. The file
    // is kept (the next Start() keeps it if Global lists this node as its holder).
    return outcome.status().WithContext("registering segment " + name);
  }
  // Rejected. Global has applied everything up to our event, including an earlier attempt of
  // ours that the log took after all: if that one registered the file, the flush is done.
  if (IsRegistered(name)) {
    spdlog::info("digest: segment {} was registered by an earlier attempt", name);
    CompleteFlush(p, key, f.record.max_pos, f.new_replay_point);
    return sediment::Status::OK();
  }
  store_->DeleteWhenUnpinned(name);
  p->pending.erase(key);
  return outcome.status().WithContext("registering segment " + name);
}

Digest::SeedIds Digest::IdsBefore(PartitionId part, Offset until,
                                  const std::function<bool()>& stopping) {
  SeedIds out;
  out.from = until;
  const int64_t want = options_.dedup_seed_records;
  if (want <= 0 || until.value <= 0) return out;
  const int64_t deadline_us =
      clock_->MonotonicMicros() +
      std::chrono::duration_cast<std::chrono::microseconds>(options_.dedup_seed_time).count();
  // Backwards from `until` in chunks of 1, 2, 4, ... (at most 4096) records, each read forwards,
  // so that when a bound ends it the ids kept are (within a factor of two) the nearest to `until`:
  // a retry lands close to its original. Reads ask for at most 1 MiB: the log answers up to that
  // much beyond a chunk's end.
  constexpr size_t kMaxReadBytes = 1u << 20;
  int64_t chunk = 1;
  int64_t floor = std::max<int64_t>(0, until.value - want);
  std::vector<std::vector<uint64_t>> chunks;  // newest first
  size_t bytes = 0;
  int64_t hi = until.value;
  while (hi > floor && out.cut.empty()) {
    const int64_t lo = std::max(floor, hi - chunk);
    std::vector<uint64_t>& ids = chunks.emplace_back();
    int64_t from = lo;
    while (from < hi && out.cut.empty()) {
      if (stopping()) {
        out.cut = "stopped";
        break;
      }
      const int64_t left_us = deadline_us - clock_->MonotonicMicros();
      if (left_us <= 0) {
        out.cut = "time bound reached";
        break;
      }
      if (bytes >= options_.dedup_seed_bytes) {
        out.cut = "byte bound reached";
        break;
      }
      auto records = log_->Read(
          part, Offset(from),
          std::min({options_.read_batch_bytes, options_.dedup_seed_bytes - bytes, kMaxReadBytes}),
          std::chrono::milliseconds(std::clamp<int64_t>(left_us / 1000, 1, 200)));
      if (!records.ok()) {
        if (records.status().code() == StatusCode::kNotFound) {
          // Below the log start: truncated records are not there to seed from. (This call is
          // not bounded by dedup_seed_time; the worker's own NotFound path makes it too.)
          auto start = log_->StartOffset(part);
          if (start.ok() && start->value > from) {
            floor = std::max(floor, start->value);
            from = start->value;
            continue;
          }
        }
        out.cut = records.status().ToString();
        break;
      }
      for (const LogRecord& rec : *records) {
        if (rec.offset.value < from) continue;
        if (rec.offset.value >= hi) {
          from = hi;
          break;
        }
        out.from = std::min(out.from, rec.offset);
        from = rec.offset.value + 1;
        bytes += rec.data.size();
        ++out.records;
        auto msg = DecodeIngestMessage(rec.data);
        if (msg.ok() && msg->id != 0) ids.push_back(msg->id);
      }
    }
    hi = lo;
    chunk = std::min<int64_t>(chunk * 2, 4096);
  }
  for (auto it = chunks.rbegin(); it != chunks.rend(); ++it) {
    out.ids.insert(out.ids.end(), it->begin(), it->end());
  }
  return out;
}

void Digest::SeedDedup(const Slot* slot, Partition* p) {
  Offset until;
  {
    std::lock_guard lock(p->mu);
    until = p->next_offset;
  }
  const SeedIds seed = IdsBefore(p->id, until, [&] { return Stopping(slot); });
  {
    std::lock_guard lock(p->mu);
    for (uint64_t id : seed.ids) (void)p->dedup.Admit(id);
  }
  p->seeded = true;
  if (Stopping(slot)) return;
  if (!seed.cut.empty()) {
    spdlog::warn(
        "digest: partition {}: duplicate-message window seeded from {} records at offsets {}..{} "
        "only ({})",
        p->id.value, seed.records, seed.from.value, until.value - 1, seed.cut);
  } else if (seed.records > 0) {
    spdlog::info(
        "digest: partition {}: duplicate-message window seeded from {} records at offsets {}..{}",
        p->id.value, seed.records, seed.from.value, until.value - 1);
  }
}

bool Digest::Run(Slot* slot, Partition* p) {
  // Before the first record: a second copy right above the replay point of a message stored
  // right below it is dropped, as the previous owner's window would have dropped it.
  SeedDedup(slot, p);
  int64_t backoff_ms = 0;
  while (!Stopping(slot)) {
    if (backoff_ms > 0) {
      if (SleepUnlessStopping(slot, std::chrono::milliseconds(backoff_ms))) break;
    }
    Offset from;
    {
      std::lock_guard lock(p->mu);
      from = p->next_offset;
    }
    auto records = log_->Read(p->id, from, options_.read_batch_bytes, ReadWait(*p));
    std::lock_guard work(p->work_mu);
    if (!records.ok()) {
      if (Stopping(slot)) break;  // a revoked worker: the next owner may have truncated
      if (records.status().code() == StatusCode::kNotFound) {
        auto start = log_->StartOffset(p->id);
        if (start.ok() && *start > from) {
          Status noted = NoteLogStartPassed(p, from, *start);
          if (noted.ok()) {
            std::lock_guard lock(p->mu);
            p->next_offset = *start;
            continue;
          }
          if (noted.code() == StatusCode::kRejected) {
            spdlog::warn("digest: partition {}: {}", p->id.value, noted.ToString());
            return false;
          }
          std::lock_guard lock(p->mu);
          p->error = noted.ToString();
          backoff_ms = NextBackoffMs(backoff_ms);
          continue;
        }
      }
      std::lock_guard lock(p->mu);
      p->error = records.status().ToString();
      backoff_ms = NextBackoffMs(backoff_ms);
      continue;
    }
    (void)ProcessRecords(p, *records);

    // Flush what is big or old enough.
    int64_t now_us = clock_->MonotonicMicros();
    std::vector<std::string> due;
    {
      std::lock_guard lock(p->mu);
      for (const auto& [key, buf] : p->buffers) {
        if (buf.bytes >= options_.flush_bytes ||
            now_us - buf.first_us >= options_.flush_age.count() * 1000) {
          due.push_back(key);
        }
      }
    }
    bool failed = false;
    for (const auto& key : due) {
      auto st = Flush(p, key);
      if (!st.ok()) {
        spdlog::error("digest: partition {}: {}", p->id.value, st.ToString());
        std::lock_guard lock(p->mu);
        p->error = st.ToString();
        failed = true;
        if (st.code() == StatusCode::kRejected) return false;
      }
    }
    backoff_ms = failed ? NextBackoffMs(backoff_ms) : 0;
    if (!failed && !due.empty()) {
      std::lock_guard lock(p->mu);
      p->error.clear();
    }

    // With nothing buffered the replay point can move up to the read position.
    Offset rp;
    bool empty;
    {
      std::lock_guard lock(p->mu);
      rp = ReplayPointLocked(*p);
      empty = p->buffers.empty();
    }
    if (empty && rp > p->registered_replay_point && now_us - p->last_advance_us > 1'000'000) {
      p->last_advance_us = now_us;
      auto st = global_->Submit(AdvanceReplayPoint{p->id, p->epoch, rp});
      if (st.ok()) {
        std::lock_guard lock(p->mu);
        p->registered_replay_point = rp;
      } else if (st.status().code() == StatusCode::kRejected) {
        spdlog::warn("digest: partition {}: {}", p->id.value, st.status().ToString());
        return false;
      }
    }
  }
  return true;
}

std::chrono::milliseconds Digest::ReadWait(const Partition& p) const {
  const int64_t now_us = clock_->MonotonicMicros();
  if (p.rebuild_reads.load() > 0) return kBusyReadWait;
  std::lock_guard lock(p.mu);
  if (p.buffers.empty()) {
    // The loop registers a replay point above the registered one (at most once a second).
    if (ReplayPointLocked(p) > p.registered_replay_point) return kBusyReadWait;
    return std::max(options_.idle_read_wait, std::chrono::milliseconds(1));
  }
  int64_t oldest_us = INT64_MAX;
  for (const auto& [key, buf] : p.buffers) oldest_us = std::min(oldest_us, buf.first_us);
  const int64_t due_in_ms = (oldest_us + options_.flush_age.count() * 1000 - now_us + 999) / 1000;
  return std::chrono::milliseconds(std::clamp<int64_t>(due_in_ms, 1, kBusyReadWait.count()));
}

BackgroundLoop::Duration Digest::MaintenancePass() {
  // Apart from the workers: admin calls and rebuild reads can block for their timeout while
  // brokers are down, and digesting must not wait for them.
  const auto now = SteadyNow();
  if (options_.truncate && now >= next_truncate_) {
    Truncate();
    next_truncate_ = SteadyNow() + TruncateEvery(options_);
  }
  if (stop_) return BackgroundLoop::kNoPeriod;
  if (now >= next_rebuild_) {
    CheckRebuilds();
    next_rebuild_ = SteadyNow() + RebuildCheckEvery(options_);
  }
  const auto due = options_.truncate ? std::min(next_truncate_, next_rebuild_) : next_rebuild_;
  return due - SteadyNow();
}

void Digest::Truncate() {
  // P3: never above the safe offset, and only for partitions whose current claim is ours.
  //
  // Record, then delete. SetTruncationPoint carries the claim epoch and is accepted only while
  // that epoch is current and its offset is at most the safe offset at its place in the log;
  // DeleteBefore follows only once it was accepted. An owner that lost its claim (paused, then
  // resumed with a stale view of Global) is rejected before it deleted anything. The other
  // order would delete first, on this node's possibly stale view, with no fence at all. A crash
  // (or a failed DeleteBefore) between the two leaves records below the recorded point in the
  // log: harmless, and deleted by the next period of whoever owns the partition then (below a
  // recorded point is safe to delete whoever does it: the apply rule checked it).
  for (auto& p : Current()) {
    if (stop_) return;
    // Not while the worker reads the records below the replay point back (SeedDedup).
    if (!p->seeded) continue;
    bool ours = false;
    Offset target{0};
    Offset recorded{0};
    global_->Read([&](const GlobalState& s) {
      auto it = s.partitions.find(p->id.value);
      ours = it != s.partitions.end() && it->second.epoch == p->epoch &&
             it->second.owner == options_.node;
      if (!ours) return;
      target = SafeOffset(s, p->id);
      recorded = it->second.truncated_before;
    });
    if (!ours) continue;
    if (target > recorded) {
      auto applied = global_->Submit(SetTruncationPoint{p->id, p->epoch, target});
      if (!applied.ok()) {
        // Rejected: the claim moved on, or the safe offset fell since it was read. Unknown
        // outcome: if it was applied, the next period deletes below it (recorded, below).
        spdlog::warn("digest: recording truncation point {} of partition {}: {}", target.value,
                     p->id.value, applied.status().ToString());
        continue;
      }
    } else {
      target = recorded;  // recorded, maybe not deleted yet (a crash or a failure in between)
    }
    if (target <= p->deleted_before) continue;
    auto st = log_->DeleteBefore(p->id, target);
    if (!st.ok()) {
      spdlog::warn("digest: truncating partition {}: {}", p->id.value, st.ToString());
      continue;
    }
    p->deleted_before = target;
  }
}

void Digest::CheckRebuilds() {
  const auto parts = Current();
  if (parts.empty()) return;
  // Liveness is asked outside Global's lock: first for every registered node, then (below) for
  // nodes that hold a copy without ever having registered.
  auto alive = [this](NodeId n) {
    return n == options_.node || !options_.is_alive || options_.is_alive(n);
  };
  std::set<NodeId> registered;
  global_->Read([&](const GlobalState& s) { registered = s.nodes; });
  std::set<NodeId> live{options_.node};
  for (NodeId n : registered) {
    if (alive(n)) live.insert(n);
  }

  std::set<int32_t> ours;
  std::map<int32_t, std::vector<SegmentRecord>> unreachable;  // partition -> no live copy
  global_->Read([&](const GlobalState& s) {
    for (const auto& p : parts) {
      auto it = s.partitions.find(p->id.value);
      if (it != s.partitions.end() && it->second.epoch == p->epoch &&
          it->second.owner == options_.node) {
        ours.insert(p->id.value);
      }
    }
    if (ours.empty()) return;
    for (const auto& [id, seg] : s.segments) {
      if (seg.staged() || ours.count(seg.partition.value) == 0) continue;
      // In the bucket, or of an earlier commit log (recovered from the bucket): never rebuilt.
      if (seg.uploaded || seg.generation != s.generation) continue;
      bool reachable = false;
      for (NodeId n : seg.replicas) {
        if (live.count(n) != 0) {
          reachable = true;
          break;
        }
      }
      if (!reachable) unreachable[seg.partition.value].push_back(seg);
    }
  });
  for (auto& [part, segs] : unreachable) {
    std::erase_if(segs, [&](const SegmentRecord& seg) {
      for (NodeId n : seg.replicas) {
        if (registered.count(n) == 0 && alive(n)) return true;
      }
      return false;
    });
  }

  const int64_t now_us = clock_->MonotonicMicros();
  for (const auto& p : parts) {
    if (stop_) return;
    ResolvePendingRebuilds(p.get());
    if (ours.count(p->id.value) == 0) {
      p->unreachable_since_us.clear();
      continue;
    }
    const std::vector<SegmentRecord>& segs = unreachable[p->id.value];
    // Only segments unreachable at every check since they were first seen keep their time.
    std::map<SegmentId, int64_t> since;
    for (const auto& seg : segs) {
      auto it = p->unreachable_since_us.find(seg.id);
      since[seg.id] = it == p->unreachable_since_us.end() ? now_us : it->second;
    }
    p->unreachable_since_us.swap(since);
    for (const auto& seg : segs) {
      if (stop_) return;
      if (p->unrecoverable.count(seg.id) != 0 || p->pending_rebuilds.count(seg.id) != 0) continue;
      if (now_us - p->unreachable_since_us.at(seg.id) < options_.rebuild_after.count() * 1000) {
        continue;
      }
      Rebuild(p.get(), seg);
    }
  }
}

sediment::Status Digest::NoteLogStartPassed(Partition* p, Offset from, Offset start) {
  // First an event fenced by our epoch that changes nothing (the registered replay point again):
  // once it is applied, Global has applied everything before it — a newer owner's claim,
  // registrations and truncation point, which the view of a worker that was paused may lack —
  // and its rejection proves that the claim is gone (then the new owner deals with the gap).
  Offset registered;
  {
    std::lock_guard lock(p->mu);
    registered = p->registered_replay_point;
  }
  auto synced = global_->Submit(AdvanceReplayPoint{p->id, p->epoch, registered});
  if (!synced.ok()) {
    return synced.status().WithContext("offset " + std::to_string(from.value) +
                                       " is below the log start " + std::to_string(start.value) +
                                       "; checking the claim before reporting a gap");
  }
  // What sediment deleted itself: the digest truncates only below a safe offset, which is never
  // above the replay point of its time, and the replay point only grows; every offset below the
  // current replay point is in registered segments. Only the part above both is lost.
  Offset truncated{0}, replay{0};
  global_->Read([&](const GlobalState& s) {
    auto it = s.partitions.find(p->id.value);
    if (it == s.partitions.end()) return;
    truncated = it->second.truncated_before;
    replay = it->second.replay_point;
  });
  const Offset first = std::max({from, truncated, replay});
  if (start <= first) {
    spdlog::info(
        "digest: partition {} offset {} was truncated by sediment (truncation point {}, replay "
        "point {}); continuing at {}",
        p->id.value, from.value, truncated.value, replay.value, start.value);
    return sediment::Status::OK();
  }
  const LostOffsetRange range{first, start, clock_->NowMillis()};
  spdlog::error(
      "digest: partition {}: offsets {}..{} ({} records) were deleted from the commit log before "
      "they were digested (log start {}, sediment truncated below {}, replay point {}); their "
      "events are LOST. Kafka retention (retention.ms / retention.bytes of the ingest topic) or "
      "an outside DeleteRecords removed them; continuing at {}",
      p->id.value, first.value, start.value - 1, range.offsets(), start.value, truncated.value,
      replay.value, start.value);
  {
    std::lock_guard lock(p->mu);
    p->error = "offsets " + std::to_string(first.value) + ".." + std::to_string(start.value - 1) +
               " were deleted from the commit log before they were digested (lost)";
  }
  std::lock_guard lock(lost_mu_);
  LostOffsets& lost = lost_[p->id.value];
  lost.ranges.push_back(range);
  if (lost.ranges.size() > LostOffsets::kMaxRangesKept) lost.ranges.erase(lost.ranges.begin());
  ++lost.range_count;
  lost.offsets += static_cast<uint64_t>(range.offsets());
  return sediment::Status::OK();
}

std::map<int32_t, LostOffsets> Digest::LostOffsetsByPartition() const {
  std::lock_guard lock(lost_mu_);
  return lost_;
}

void Digest::MarkLost(Partition* p, const SegmentRecord& seg, const std::string& why) {
  if (!p->unrecoverable.insert(seg.id).second) return;
  spdlog::error(
      "digest: segment {} is lost: {} ({} events of {}, partition {}, offsets {}..{}); every copy "
      "was on dead nodes",
      seg.id.value, why, seg.event_count, DatasourceName(seg.datasource), seg.partition.value,
      seg.min_pos.offset.value, seg.max_pos.offset.value);
  std::lock_guard lock(p->mu);
  ++p->segments_lost;
}

void Digest::Rebuild(Partition* p, const SegmentRecord& seg) {
  // The commit log still holds the segment's range while the safe offset has not passed it.
  auto start = log_->StartOffset(p->id);
  if (!start.ok()) {
    spdlog::warn("digest: rebuilding segment {}: {}; retrying", seg.id.value,
                 start.status().ToString());
    return;
  }
  auto gone = [&](Offset log_start) {
    MarkLost(p, seg,
             "the commit log starts at offset " + std::to_string(log_start.value) +
                 ", after its first event at offset " + std::to_string(seg.min_pos.offset.value));
  };
  if (*start > seg.min_pos.offset) return gone(*start);

  // The worker's Reads are short while this one reads; its idle Read in progress is ended.
  p->rebuild_reads.fetch_add(1);
  struct EndRebuildReads {
    Partition* p;
    ~EndRebuildReads() { p->rebuild_reads.fetch_sub(1); }
  } end_rebuild_reads{p};
  log_->WakeReaders(p->id);

  // Decoded as the worker does: corrupt records skipped, second copies dropped by the same rule,
  // then the datasource's events in the segment's position range.
  const std::string key = seg.datasource.Key();
  std::vector<PositionedEvent> events;
  // Not seeded: the worker's window, seeded below its claim's replay point (at or below
  // min_pos), always held at least the ids this one holds, so the rebuild keeps every event the
  // worker kept, and the count check below catches any copy only the worker dropped.
  DedupWindow dedup;
  Offset from = seg.min_pos.offset;
  int empty_reads = 0;
  while (from <= seg.max_pos.offset) {
    if (stop_) return;
    auto records =
        log_->Read(p->id, from, options_.read_batch_bytes, std::chrono::milliseconds(200));
    if (!records.ok()) {
      if (records.status().code() == StatusCode::kNotFound) {
        auto now_start = log_->StartOffset(p->id);
        if (now_start.ok() && *now_start > seg.min_pos.offset) return gone(*now_start);
      }
      spdlog::warn("digest: rebuilding segment {}: reading partition {} at offset {}: {}; retrying",
                   seg.id.value, p->id.value, from.value, records.status().ToString());
      return;
    }
    if (records->empty()) {
      if (++empty_reads >= kRebuildMaxEmptyReads) {
        spdlog::warn(
            "digest: rebuilding segment {}: partition {} answers nothing at offset {}; "
            "retrying",
            seg.id.value, p->id.value, from.value);
        return;
      }
      continue;
    }
    empty_reads = 0;
    for (auto& rec : *records) {
      if (rec.offset < from) continue;
      if (rec.offset > seg.max_pos.offset) {
        from = Offset(seg.max_pos.offset.value + 1);
        break;
      }
      from = Offset(rec.offset.value + 1);
      auto msg = DecodeIngestMessage(rec.data);
      if (!msg.ok()) continue;  // P6: the worker skipped it too
      if (!dedup.Admit(msg->id)) continue;
      if (msg->datasource.Key() != key) continue;
      for (uint32_t i = 0; i < msg->events.size(); ++i) {
        const Position pos{rec.offset, i};
        if (pos < seg.min_pos || pos > seg.max_pos) continue;
        events.push_back(PositionedEvent{pos, std::move(msg->events[i])});
      }
    }
  }
  // The log range holds exactly the segment's events or the rebuild would change the data.
  if (events.empty() || events.size() != seg.event_count || events.front().pos != seg.min_pos ||
      events.back().pos != seg.max_pos) {
    return MarkLost(p, seg,
                    "the commit log holds " + std::to_string(events.size()) +
                        " events of its datasource in its position range, it had " +
                        std::to_string(seg.event_count) + "; not rebuilt");
  }

  const std::string name = RebuiltSegmentFileName(p->id, p->epoch, seg.min_pos, RandomU32());
  auto info = store_->Write(name, seg.datasource, p->id, events, options_.segment);
  if (!info.ok()) {
    spdlog::warn("digest: rebuilding segment {}: writing {}: {}; retrying", seg.id.value, name,
                 info.status().ToString());
    return;
  }
  SubmitRebuilt(p, seg.id, SegmentRecordFor(*info, name, options_.node, p->epoch));
}

void Digest::SubmitRebuilt(Partition* p, SegmentId old_id, const SegmentRecord& rebuilt) {
  auto outcome = global_->Submit(ReplaceSegment{old_id, rebuilt});
  bool done = outcome.ok();
  if (!outcome.ok() && outcome.status().code() != StatusCode::kRejected) {
    // It may still be applied: the file stays and the same event is submitted again later.
    spdlog::warn("digest: replacing segment {} by rebuilt {}: {}; retrying", old_id.value,
                 rebuilt.file_name, outcome.status().ToString());
    p->pending_rebuilds[old_id] = rebuilt;
    return;
  }
  p->pending_rebuilds.erase(old_id);
  // Rejected: an earlier attempt of ours that the log took after all may have done it.
  if (!done) done = IsRegistered(rebuilt.file_name);
  if (!done) {
    spdlog::warn("digest: replacing segment {} by rebuilt {}: {}; file removed", old_id.value,
                 rebuilt.file_name, outcome.status().ToString());
    store_->DeleteWhenUnpinned(rebuilt.file_name);
    return;
  }
  SegmentId new_id = outcome.ok() ? outcome->segment_id : SegmentId(0);
  spdlog::warn(
      "digest: rebuilt segment {} ({} events of {}) from the commit log: no live node held a copy "
      "(holders dead, or copies removed as corrupt) (now segment {}, file {})",
      old_id.value, rebuilt.event_count, DatasourceName(rebuilt.datasource), new_id.value,
      rebuilt.file_name);
  std::lock_guard lock(p->mu);
  ++p->segments_rebuilt;
}

void Digest::ResolvePendingRebuilds(Partition* p) {
  if (p->pending_rebuilds.empty()) return;
  const auto pending = p->pending_rebuilds;
  for (const auto& [old_id, rebuilt] : pending) {
    if (stop_) return;
    bool old_exists = false;
    global_->Read([&](const GlobalState& s) { old_exists = s.segments.count(old_id) != 0; });
    if (old_exists) {
      SubmitRebuilt(p, old_id, rebuilt);  // the same event again; fenced by the old id and epoch
      continue;
    }
    // The old segment is gone: replaced by our attempt (then it is registered) or removed.
    p->pending_rebuilds.erase(old_id);
    if (IsRegistered(rebuilt.file_name)) {
      spdlog::warn(
          "digest: rebuilt segment {} ({} events of {}) from the commit log: every copy was on "
          "dead nodes (file {})",
          old_id.value, rebuilt.event_count, DatasourceName(rebuilt.datasource), rebuilt.file_name);
      std::lock_guard lock(p->mu);
      ++p->segments_rebuilt;
    } else {
      store_->DeleteWhenUnpinned(rebuilt.file_name);
    }
  }
}

std::vector<BufferedBatch> Digest::SnapshotBuffers(const std::vector<PartitionId>* only) const {
  std::vector<BufferedBatch> out;
  for (const auto& p : Current()) {
    if (only != nullptr && std::find(only->begin(), only->end(), p->id) == only->end()) continue;
    std::lock_guard lock(p->mu);
    for (auto& [key, buf] : p->buffers) {
      if (buf.events.empty()) continue;
      // One batch per run: the runs are shared, not copied.
      for (EventRuns::Run& run : buf.events.Seal()) {
        out.push_back(BufferedBatch{buf.datasource, p->id, p->epoch, std::move(run)});
      }
    }
  }
  return out;
}

std::vector<PartitionDigestStatus> Digest::PartitionStatuses() const {
  std::vector<PartitionDigestStatus> out;
  struct Seen {
    PartitionId id;
    std::shared_ptr<Partition> current;
    std::string claim_error;
  };
  std::vector<Seen> slots;
  {
    std::lock_guard lock(slots_mu_);
    for (const auto& [id, slot] : slots_) {
      slots.push_back(Seen{PartitionId(id), slot->current, slot->claim_error});
    }
  }
  for (const auto& [id, p, claim_error] : slots) {
    if (p == nullptr) {
      // A claim in progress is the normal first moments of an assignment, not a problem; a claim
      // that failed (Global unavailable) is.
      PartitionDigestStatus s;
      s.partition = id;
      s.next_offset = Offset(-1);
      s.replay_point = Offset(-1);
      s.error = claim_error;
      out.push_back(std::move(s));
      continue;
    }
    std::lock_guard lock(p->mu);
    PartitionDigestStatus s;
    s.partition = p->id;
    s.claimed = true;
    s.epoch = p->epoch;
    s.next_offset = p->next_offset;
    s.replay_point = p->registered_replay_point;
    for (const auto& [k, b] : p->buffers) s.buffered_events += b.events.size();
    s.error = p->error;
    s.duplicates_dropped = p->duplicates_dropped;
    s.segments_rebuilt = p->segments_rebuilt;
    s.segments_lost = p->segments_lost;
    out.push_back(std::move(s));
  }
  std::lock_guard lock(lost_mu_);
  for (auto& s : out) {
    auto it = lost_.find(s.partition.value);
    if (it != lost_.end()) s.lost = it->second;
  }
  return out;
}

sediment::Status Digest::FlushAll() {
  for (auto& p : Current()) {
    std::lock_guard work(p->work_mu);
    std::vector<std::string> keys;
    {
      std::lock_guard lock(p->mu);
      for (const auto& [k, b] : p->buffers) keys.push_back(k);
    }
    for (const auto& k : keys) RETURN_IF_ERROR(Flush(p.get(), k));
  }
  return sediment::Status::OK();
}

}  // namespace sediment
