#include "storage/replicator.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <tuple>

#include "bucket/bucket.h"
#include "segment/segment.h"
#include "storage/placement.h"

namespace sediment {

// Exclusive use of one file name for the duration of an operation (pull + announce, drop,
// verification, deletion), so that a ReportCorrupt from a query thread never interleaves with the
// background pass on the same file. Never held two at a time, so no lock order to respect.
class Replicator::FileLock {
 public:
  FileLock(Replicator* r, std::string file) : r_(r), file_(std::move(file)) {
    std::unique_lock lock(r_->busy_mu_);
    r_->busy_cv_.wait(lock, [&] { return r_->busy_.count(file_) == 0; });
    r_->busy_.insert(file_);
  }
  ~FileLock() {
    {
      std::lock_guard lock(r_->busy_mu_);
      r_->busy_.erase(file_);
    }
    r_->busy_cv_.notify_all();
  }
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  Replicator* r_;
  std::string file_;
};

// What one pass does, computed from one Global::Read.
struct Replicator::Plan {
  uint32_t r = 1;
  bool bucket_mode = false;  // Global's bucket is set
  struct PullItem {
    SegmentRecord seg;
    std::vector<NodeId> sources;  // alive holders other than self, best-ranked first
    size_t present_holders = 0;
  };
  std::vector<PullItem> pulls;
  std::vector<SegmentRecord> drops;
  struct ForgetItem {
    SegmentRecord seg;
    NodeId dead;
    uint32_t min_remaining = 0;
  };
  std::vector<ForgetItem> forgets;
  std::map<std::string, SegmentId> listed_here;  // file name -> segment listing self
  // Bucket mode: file name -> uploaded committed segment listing self (eviction candidates).
  std::map<std::string, SegmentRecord> evictable;
};

namespace {

std::string Name(const SegmentRecord& s) {
  return "segment " + std::to_string(s.id.value) + " (" + s.file_name + ")";
}

std::string NodeName(NodeId n) { return "node " + std::to_string(n.value); }

}  // namespace

Replicator::Replicator(Env* env, Clock* clock, Global* global, SegmentStore* store, PeerView* peers,
                       SegmentFetcher* fetcher, ReplicatorOptions options)
    : env_(env),
      clock_(clock),
      global_(global),
      store_(store),
      peers_(peers),
      fetcher_(fetcher),
      options_(std::move(options)),
      self_(peers->Self()),
      limiter_(clock, options_.max_bytes_per_second,
               options_.sleep ? options_.sleep
                              : RateLimiter::SleepFn(
                                    [this](std::chrono::microseconds d) { return Sleep(d); })),
      loop_("replicator",
            {.interval = options_.interval, .first_pass = BackgroundLoop::FirstPass::kAtStart},
            [this] { LoopPass(); }) {
  progress_.max_bytes_per_second = options_.max_bytes_per_second;
  progress_.cache_max_bytes = options_.cache_max_bytes;
}

Replicator::~Replicator() { Stop(); }

bool Replicator::Sleep(std::chrono::microseconds d) { return loop_.SleepFor(d); }

void Replicator::Start() { (void)loop_.Start(); }

void Replicator::LoopPass() {
  if (!last_scrub_us_) last_scrub_us_ = clock_->MonotonicMicros();  // the first pass
  (void)RunOnce();  // failures are logged and kept in progress()
  const auto scrub_us =
      std::chrono::duration_cast<std::chrono::microseconds>(options_.scrub_every).count();
  if (scrub_us > 0 && !stopping() && clock_->MonotonicMicros() - *last_scrub_us_ >= scrub_us) {
    (void)ScrubOnce();
    last_scrub_us_ = clock_->MonotonicMicros();
  }
}

void Replicator::Stop() { loop_.Stop(); }

Replicator::Progress Replicator::progress() const {
  std::lock_guard lock(mu_);
  return progress_;
}

void Replicator::Warn(const std::string& key, const std::string& msg) {
  std::lock_guard lock(mu_);
  progress_.last_error = msg;
  auto [it, inserted] = warned_.try_emplace(key, msg, progress_.passes);
  it->second.second = progress_.passes;
  if (!inserted && it->second.first == msg) return;
  it->second.first = msg;
  spdlog::warn("storage: {}", msg);
}

Replicator::Plan Replicator::MakePlan() {
  Plan plan;
  global_->Read([&](const GlobalState& s) {
    plan.r = EffectiveReplicationFactor(s);
    plan.bucket_mode = !s.bucket.empty();
    std::vector<NodeId> present{self_};
    NodeId lowest_alive_node = self_;  // forgets the dead copies of uploaded segments no live
                                       // node holds
    for (NodeId n : s.nodes) {
      if (n != self_ && peers_->IsPresent(n, options_.grace)) present.push_back(n);
      if (n < lowest_alive_node && peers_->IsAlive(n)) lowest_alive_node = n;
    }
    // Liveness of holders (which may include nodes never registered), asked once per node.
    std::map<NodeId, std::pair<bool, bool>> cache;  // node -> (present, alive)
    auto status = [&](NodeId n) -> std::pair<bool, bool> {
      if (n == self_) return {true, true};
      auto it = cache.find(n);
      if (it == cache.end()) {
        it = cache
                 .emplace(n,
                          std::make_pair(peers_->IsPresent(n, options_.grace), peers_->IsAlive(n)))
                 .first;
      }
      return it->second;
    };
    for (const auto& [id, seg] : s.segments) {
      const bool holds = seg.replicas.count(self_) != 0;
      if (holds) plan.listed_here.emplace(seg.file_name, id);
      if (plan.bucket_mode && seg.uploaded) {
        // The bucket holds the durable copy: local copies are a cache. No pulls, no drops; dead
        // holders are forgotten after the grace whatever remains, by the lowest live holder (or,
        // with none, the lowest live node), so queries stop being routed to them.
        if (holds && !seg.staged()) plan.evictable.emplace(seg.file_name, seg);
        std::vector<NodeId> dead;
        NodeId forgetter = lowest_alive_node;
        bool have_alive_holder = false;
        for (NodeId h : seg.replicas) {
          auto [is_present, is_alive] = status(h);
          if (!is_present) dead.push_back(h);
          if (is_alive && !have_alive_holder) {
            forgetter = h;  // replicas is ordered by id
            have_alive_holder = true;
          }
        }
        if (forgetter == self_) {
          for (NodeId h : dead) plan.forgets.push_back({seg, h, 0});
        }
        continue;
      }
      const std::vector<NodeId> desired = DesiredHolders(seg, present, plan.r);
      const bool wanted = std::find(desired.begin(), desired.end(), self_) != desired.end();
      size_t present_holders = 0;
      std::vector<NodeId> alive_others, dead;
      NodeId lowest_alive{0};
      bool any_alive = false;
      for (NodeId h : seg.replicas) {
        auto [is_present, is_alive] = status(h);
        if (is_present) ++present_holders;
        if (!is_present) dead.push_back(h);
        if (is_alive && !any_alive) {
          lowest_alive = h;  // replicas is ordered by id
          any_alive = true;
        }
        if (is_alive && h != self_) alive_others.push_back(h);
      }
      if (wanted && !holds) {
        plan.pulls.push_back({seg, RankNodes(id, alive_others), present_holders});
      } else if (holds && !wanted && present_holders - 1 >= plan.r) {
        plan.drops.push_back(seg);
      }
      if (holds && !dead.empty() && present_holders >= plan.r && lowest_alive == self_) {
        for (NodeId h : dead) plan.forgets.push_back({seg, h, plan.r});
      }
    }
  });
  std::sort(plan.pulls.begin(), plan.pulls.end(), [](const auto& a, const auto& b) {
    return std::tie(a.present_holders, a.seg.id) < std::tie(b.present_holders, b.seg.id);
  });
  return plan;
}

Status Replicator::RunOnce() {
  std::lock_guard pass(pass_mu_);
  if (stopping()) return Status::Aborted("replicator stopped");
  return RunOnceLocked();
}

Status Replicator::RunOnceLocked() {
  Status first;
  auto note = [&first](const Status& st) {
    if (!st.ok() && first.ok()) first = st;
  };
  Plan plan = MakePlan();
  // Listed in Global first, directory second: a file written before it was listed (digest,
  // merge) is on disk by the time of the listing, so it is never mistaken for a lost copy.
  auto on_disk = store_->List();
  const int64_t now = clock_->MonotonicMicros();
  {
    std::lock_guard lock(mu_);
    ++progress_.passes;
    progress_.bucket_mode = plan.bucket_mode;
    progress_.pending_segments = plan.pulls.size();
    progress_.pending_bytes = 0;
    for (const auto& p : plan.pulls) progress_.pending_bytes += p.seg.file_size;
    for (const auto& [file, id] : plan.listed_here) {
      seen_listed_.insert(file);
      unlisted_since_.erase(file);
    }
  }
  // Files this process never saw listed here (registered and removed between two passes, e.g. a
  // backfill already past retention, or left from before a restart) are garbage once their
  // events are at or below their datasource's flushed_through: no registration of them can be
  // accepted any more. Files above it may be a flush whose registration is still pending.
  if (on_disk.ok()) {
    for (const auto& file : *on_disk) {
      bool known = false;
      {
        std::lock_guard lock(mu_);
        known = plan.listed_here.count(file) != 0 || seen_listed_.count(file) != 0;
      }
      if (known || !IsSettled(file)) continue;
      std::lock_guard lock(mu_);
      seen_listed_.insert(file);
    }
  }
  {
    std::lock_guard lock(mu_);
    for (const auto& file : seen_listed_) {
      if (plan.listed_here.count(file) == 0) unlisted_since_.emplace(file, now);
    }
  }

  // Copies listed here whose file is gone (disk replaced, deleted by hand, or a corrupt copy
  // whose withdrawal failed): withdraw them so that they are re-created from good copies.
  if (on_disk.ok()) {
    std::set<std::string> files(on_disk->begin(), on_disk->end());
    for (const auto& [file, id] : plan.listed_here) {
      if (stopping()) return Status::Aborted("replicator stopped");
      if (files.count(file) != 0) continue;
      SegmentRecord seg;
      seg.id = id;
      seg.file_name = file;
      note(WithdrawMissing(seg));
    }
  } else {
    Warn("list", "cannot list " + store_->dir() + ": " + on_disk.status().ToString());
    note(on_disk.status());
  }

  for (const auto& f : plan.forgets) {
    if (stopping()) return Status::Aborted("replicator stopped");
    note(ForgetDead(f.seg, f.dead, f.min_remaining));
  }
  for (const auto& seg : plan.drops) {
    if (stopping()) return Status::Aborted("replicator stopped");
    note(DropExtra(seg, plan.r));
  }
  for (const auto& item : plan.pulls) {
    if (stopping()) return Status::Aborted("replicator stopped");
    Status st = Pull(item.seg, item.sources);
    if (st.ok()) {
      std::lock_guard lock(mu_);
      if (progress_.pending_segments > 0) --progress_.pending_segments;
      progress_.pending_bytes -= std::min(progress_.pending_bytes, item.seg.file_size);
    } else if (st.code() == StatusCode::kAborted) {
      return st;
    } else if (!item.sources.empty()) {
      note(st);  // no live source is waiting, not failing (logged once, kept in last_error)
    }
  }
  note(DeleteUnlisted());
  if (stopping()) return Status::Aborted("replicator stopped");
  note(Evict(plan));
  {
    // Forget the warnings this pass did not repeat: a problem that clears and comes back is
    // logged again, one that persists is logged once.
    std::lock_guard lock(mu_);
    for (auto it = warned_.begin(); it != warned_.end();) {
      it = it->second.second < progress_.passes ? warned_.erase(it) : std::next(it);
    }
  }
  return first;
}

Status Replicator::Pull(const SegmentRecord& seg, const std::vector<NodeId>& sources) {
  FileLock file_lock(this, seg.file_name);
  const std::string& key = seg.file_name;
  if (store_->Has(seg.file_name)) {
    // A copy from earlier (dropped or unlisted, deletion not done yet): reuse it when intact.
    store_->CancelDeletion(seg.file_name);
    Status st = store_->Verify(seg, [this](uint64_t n) { return limiter_.Acquire(n); });
    if (st.code() == StatusCode::kAborted) return st;
    if (st.ok()) return Announce(seg, /*fetched=*/false);
    if (st.code() == StatusCode::kCorruption) {
      spdlog::info("storage: local file of {} is not intact ({}); fetching it again", Name(seg),
                   st.ToString());
      store_->DeleteWhenUnpinned(seg.file_name);
    }
  }
  if (sources.empty()) {
    const Status st =
        Status::Unavailable(Name(seg) + ": no live holder to copy from; waiting for one");
    Warn(key, st.message());
    return st;
  }
  Status last;
  for (NodeId src : sources) {
    if (!limiter_.Acquire(seg.file_size)) return Status::Aborted("replicator stopped");
    if (stopping()) return Status::Aborted("replicator stopped");
    auto bytes = fetcher_->Fetch(src, seg);
    Status st = bytes.ok() ? store_->Install(seg, *bytes) : bytes.status();
    if (st.ok()) return Announce(seg, /*fetched=*/true);
    last = st.WithContext("copying " + Name(seg) + " from " + NodeName(src));
    {
      std::lock_guard lock(mu_);
      ++progress_.failed_pulls;
    }
    Warn(key, last.ToString());
  }
  return last;
}

Status Replicator::Announce(const SegmentRecord& seg, bool fetched) {
  auto added = global_->Submit(AddSegmentReplica{seg.id, self_});
  if (added.ok()) {
    spdlog::info("storage: {} {} ({} bytes) and announced the copy",
                 fetched ? "pulled" : "reused the local file of", Name(seg), seg.file_size);
    std::lock_guard lock(mu_);
    if (fetched) {
      ++progress_.copied_segments;
      progress_.copied_bytes += seg.file_size;
    } else {
      ++progress_.reused_segments;
    }
    seen_listed_.insert(seg.file_name);
    unlisted_since_.erase(seg.file_name);
    warned_.erase(seg.file_name);
    return Status::OK();
  }
  if (added.status().code() != StatusCode::kRejected) {
    // Outcome unknown: the file stays; the next pass verifies it and announces again.
    const Status st = added.status().WithContext("announcing " + Name(seg));
    Warn(seg.file_name, st.ToString());
    return st;
  }
  bool exists = false, listed = false;
  global_->Read([&](const GlobalState& s) {
    auto it = s.segments.find(seg.id);
    exists = it != s.segments.end();
    listed = exists && it->second.replicas.count(self_) != 0;
  });
  if (listed) return Status::OK();  // an earlier announcement whose outcome was lost
  if (!exists) {
    spdlog::info("storage: {} was removed from Global while it was copied; deleting the copy",
                 Name(seg));
    store_->DeleteWhenUnpinned(seg.file_name);
    return Status::OK();
  }
  const Status st = added.status().WithContext("announcing " + Name(seg));
  Warn(seg.file_name, st.ToString());
  return st;
}

Status Replicator::DropExtra(const SegmentRecord& seg, uint32_t r) {
  FileLock file_lock(this, seg.file_name);
  auto removed = global_->Submit(RemoveSegmentReplica{seg.id, self_, r});
  if (removed.ok()) {
    spdlog::info("storage: dropped the extra copy of {}; the file goes in {} ms", Name(seg),
                 options_.deletion_delay.count());
    std::lock_guard lock(mu_);
    ++progress_.extra_copies_dropped;
    unlisted_since_.emplace(seg.file_name, clock_->MonotonicMicros());
    return Status::OK();
  }
  if (removed.status().code() == StatusCode::kRejected) {
    // Another holder dropped first (R would not remain) or the segment is gone: nothing to do.
    spdlog::debug("storage: not dropping {}: {}", Name(seg), removed.status().ToString());
    return Status::OK();
  }
  const Status st = removed.status().WithContext("dropping the copy of " + Name(seg));
  Warn("drop " + seg.file_name, st.ToString());
  return st;
}

Status Replicator::ForgetDead(const SegmentRecord& seg, NodeId dead, uint32_t min_remaining) {
  auto removed = global_->Submit(RemoveSegmentReplica{seg.id, dead, min_remaining});
  if (removed.ok()) {
    spdlog::info("storage: forgot the copy of {} on {} (gone longer than {} ms)", Name(seg),
                 NodeName(dead), options_.grace.count());
    std::lock_guard lock(mu_);
    ++progress_.dead_replicas_forgotten;
    return Status::OK();
  }
  if (removed.status().code() == StatusCode::kRejected) {
    spdlog::debug("storage: not forgetting {} on {}: {}", Name(seg), NodeName(dead),
                  removed.status().ToString());
    return Status::OK();
  }
  const Status st =
      removed.status().WithContext("forgetting the copy of " + Name(seg) + " on " + NodeName(dead));
  Warn("forget " + seg.file_name, st.ToString());
  return st;
}

Status Replicator::WithdrawMissing(const SegmentRecord& seg) {
  FileLock file_lock(this, seg.file_name);
  if (store_->Has(seg.file_name)) return Status::OK();  // installed meanwhile
  auto removed = global_->Submit(RemoveSegmentReplica{seg.id, self_, 0});
  if (removed.ok()) {
    spdlog::warn("storage: {} is listed on this node but its file is missing; withdrew the copy",
                 Name(seg));
    std::lock_guard lock(mu_);
    ++progress_.missing_copies;
    seen_listed_.erase(seg.file_name);
    unlisted_since_.erase(seg.file_name);
    return Status::OK();
  }
  if (removed.status().code() == StatusCode::kRejected) return Status::OK();
  const Status st = removed.status().WithContext("withdrawing the missing copy of " + Name(seg));
  Warn("missing " + seg.file_name, st.ToString());
  return st;
}

void Replicator::HandleCorrupt(const SegmentRecord& seg, const Status& why) {
  spdlog::error("storage: local copy of {} at {} is corrupt: {}; dropping it", Name(seg),
                store_->PathOf(seg.file_name), why.ToString());
  auto removed = global_->Submit(RemoveSegmentReplica{seg.id, self_, 0});
  if (!removed.ok() && removed.status().code() != StatusCode::kRejected) {
    // The file goes anyway; RunOnce withdraws the copy once it sees the file missing.
    Warn("corrupt " + seg.file_name,
         "withdrawing the corrupt copy of " + Name(seg) + ": " + removed.status().ToString());
  }
  store_->DeleteWhenUnpinned(seg.file_name);
  std::lock_guard lock(mu_);
  ++progress_.corrupt_copies;
  progress_.last_error = "corrupt copy of " + Name(seg) + ": " + why.ToString();
  seen_listed_.erase(seg.file_name);
  unlisted_since_.erase(seg.file_name);
}

Status Replicator::ScrubOnce() {
  std::lock_guard pass(pass_mu_);
  if (stopping()) return Status::Aborted("replicator stopped");
  return ScrubOnceLocked();
}

Status Replicator::ScrubOnceLocked() {
  std::vector<SegmentRecord> mine;
  global_->Read([&](const GlobalState& s) {
    for (const auto& [id, seg] : s.segments) {
      if (seg.replicas.count(self_) != 0) mine.push_back(seg);
    }
  });
  Status first;
  for (const auto& seg : mine) {
    if (stopping()) return Status::Aborted("replicator stopped");
    FileLock file_lock(this, seg.file_name);
    if (!store_->Has(seg.file_name)) continue;  // RunOnce withdraws missing copies
    Status st = store_->Verify(seg, [this](uint64_t n) { return limiter_.Acquire(n); });
    if (st.code() == StatusCode::kAborted) return st;
    if (st.code() == StatusCode::kCorruption) {
      HandleCorrupt(seg, st);
    } else if (!st.ok()) {
      Warn("scrub " + seg.file_name, "scrubbing " + Name(seg) + ": " + st.ToString());
      if (first.ok()) first = st;
    }
  }
  std::lock_guard lock(mu_);
  ++progress_.scrubs;
  return first;
}

void Replicator::ReportCorrupt(SegmentId segment, const Status& why) {
  std::optional<SegmentRecord> seg;
  global_->Read([&](const GlobalState& s) {
    auto it = s.segments.find(segment);
    if (it != s.segments.end() && it->second.replicas.count(self_) != 0) seg = it->second;
  });
  if (!seg) {
    spdlog::info("storage: corruption reported for segment {} ({}), which is not listed here",
                 segment.value, why.ToString());
    return;
  }
  FileLock file_lock(this, seg->file_name);
  HandleCorrupt(*seg, why);
}

bool Replicator::IsSettled(const std::string& file) {
  auto reader = store_->Open(file);
  if (!reader.ok()) return false;  // being replaced, or unreadable: left alone
  const SegmentInfo& info = (*reader)->info();
  bool settled = false;
  global_->Read([&](const GlobalState& s) {
    auto it = s.flushed_through.find({info.datasource.Key(), info.partition.value});
    settled = it != s.flushed_through.end() && info.min_pos <= it->second;
  });
  return settled;
}

std::set<std::string> Replicator::ListedHere() {
  std::set<std::string> out;
  global_->Read([&](const GlobalState& s) {
    for (const auto& [id, seg] : s.segments) {
      if (seg.replicas.count(self_) != 0) out.insert(seg.file_name);
    }
  });
  return out;
}

Status Replicator::DeleteUnlisted() {
  const int64_t now = clock_->MonotonicMicros();
  const int64_t delay_us =
      std::chrono::duration_cast<std::chrono::microseconds>(options_.deletion_delay).count();
  std::vector<std::string> due;
  {
    std::lock_guard lock(mu_);
    for (const auto& [file, since] : unlisted_since_) {
      if (now - since >= delay_us) due.push_back(file);
    }
  }
  if (due.empty()) return Status::OK();
  const std::set<std::string> listed = ListedHere();  // fresh: this pass may have announced some
  for (const auto& file : due) {
    FileLock file_lock(this, file);
    if (listed.count(file) != 0) {
      std::lock_guard lock(mu_);
      unlisted_since_.erase(file);
      continue;
    }
    const bool had = store_->Has(file);
    if (had) {
      const bool pinned = store_->IsPinned(file);
      store_->DeleteWhenUnpinned(file);
      spdlog::info("storage: deleting {}: no longer listed on this node{}", store_->PathOf(file),
                   pinned ? " (once its readers are done)" : "");
    }
    std::lock_guard lock(mu_);
    if (had) ++progress_.files_deleted;
    seen_listed_.erase(file);
    unlisted_since_.erase(file);
  }
  return Status::OK();
}

Status Replicator::Evict(const Plan& plan) {
  auto files = store_->List();
  if (!files.ok()) return Status::OK();  // reported by this pass already
  std::map<std::string, uint64_t> sizes;
  uint64_t total = 0;
  for (const auto& f : *files) {
    auto size = store_->FileSize(f);
    if (!size.ok()) continue;  // deleted meanwhile
    sizes[f] = *size;
    total += *size;
  }
  const uint64_t bound = options_.cache_max_bytes;
  auto set_local = [&](uint64_t bytes) {
    std::lock_guard lock(mu_);
    progress_.local_bytes = bytes;
  };
  set_local(total);
  if (!plan.bucket_mode || bound == 0 || total <= bound || options_.bucket == nullptr) {
    return Status::OK();
  }
  // Least recently used first; files not accessed since start are the oldest, lower id first.
  std::vector<std::tuple<uint64_t, SegmentId, const SegmentRecord*>> candidates;
  for (const auto& [file, size] : sizes) {
    auto it = plan.evictable.find(file);
    if (it == plan.evictable.end()) continue;
    candidates.emplace_back(store_->LastAccess(file), it->second.id, &it->second);
  }
  std::sort(candidates.begin(), candidates.end(), [](const auto& a, const auto& b) {
    return std::tie(std::get<0>(a), std::get<1>(a)) < std::tie(std::get<0>(b), std::get<1>(b));
  });
  const uint64_t before = total;
  uint64_t count = 0, bytes = 0, deferred = 0;
  Status result;
  for (const auto& [access, id, seg] : candidates) {
    if (total <= bound) break;
    if (stopping()) return Status::Aborted("replicator stopped");
    FileLock file_lock(this, seg->file_name);
    if (!store_->Has(seg->file_name)) continue;  // gone meanwhile
    auto removed = global_->Submit(RemoveSegmentReplica{seg->id, self_, 0});
    if (!removed.ok()) {
      if (removed.status().code() == StatusCode::kRejected) continue;  // left Global / unlisted
      result = removed.status().WithContext("evicting the cached copy of " + Name(*seg));
      Warn("evict " + seg->file_name, result.ToString());
      break;
    }
    const uint64_t size = sizes[seg->file_name];
    store_->DeleteWhenUnpinned(seg->file_name);
    ++count;
    bytes += size;
    // A file still being read is freed when its last reader is done, not now.
    if (store_->Has(seg->file_name)) {
      ++deferred;
    } else {
      total -= std::min(total, size);
    }
    std::lock_guard lock(mu_);
    ++progress_.evicted_segments;
    progress_.evicted_bytes += size;
    seen_listed_.erase(seg->file_name);
    unlisted_since_.erase(seg->file_name);
  }
  set_local(total);
  if (count > 0) {
    spdlog::info(
        "storage: evicted {} cached segment copies ({} bytes{}) from the local disk: {} -> {} "
        "bytes, bound {}",
        count, bytes,
        deferred > 0 ? ", " + std::to_string(deferred) + " once their readers are done" : "",
        before, total, bound);
  }
  if (total > bound && result.ok()) {
    Warn("cache bound",
         "local segment files exceed the cache bound of " + std::to_string(bound) +
             " bytes and nothing more can be evicted (copies not uploaded yet, or still being "
             "read)");
  }
  return result;
}

Result<Replicator::FetchOutcome> Replicator::EnsureLocal(const SegmentRecord& want) {
  FileLock file_lock(this, want.file_name);
  std::optional<SegmentRecord> found;
  global_->Read([&](const GlobalState& s) {
    auto it = s.segments.find(want.id);
    if (it != s.segments.end()) found = it->second;
  });
  if (!found) return Status::NotFound(Name(want) + " is not in Global");
  const SegmentRecord& seg = *found;
  const std::string& file = seg.file_name;
  const bool listed = seg.replicas.count(self_) != 0;
  const bool local = store_->Has(file);
  if (local && listed && !store_->IsDeletionPending(file)) {
    store_->Touch(file);
    return FetchOutcome{};
  }
  if (!seg.uploaded) {
    if (local) {
      store_->Touch(file);
      return FetchOutcome{};
    }
    return Status::NotFound(Name(seg) + " is neither on this node nor in the bucket");
  }
  if (local) {
    // An unlisted copy (evicted or forgotten, deletion pending): kept when intact.
    Status st = store_->Verify(seg);
    if (st.ok()) {
      store_->CancelDeletion(file);
      store_->Touch(file);
      AnnounceCached(seg, /*fetched=*/false);
      return FetchOutcome{};
    }
    if (st.code() != StatusCode::kCorruption && st.code() != StatusCode::kNotFound) return st;
    spdlog::info("storage: local file of {} is not intact ({}); fetching it from the bucket",
                 Name(seg), st.ToString());
  }
  if (options_.bucket == nullptr) {
    return Status::Unavailable(Name(seg) +
                               " must be fetched from the bucket, but this node has "
                               "no bucket client");
  }
  Status last;
  for (int attempt = 0; attempt < 2; ++attempt) {
    auto bytes = options_.bucket->Get(BucketSegmentKey(file));
    Status st = bytes.ok() ? store_->Install(seg, *bytes) : bytes.status();
    if (st.ok()) {
      {
        std::lock_guard lock(mu_);
        ++progress_.bucket_fetches;
        progress_.bucket_fetched_bytes += bytes->size();
      }
      AnnounceCached(seg, /*fetched=*/true);
      return FetchOutcome{true, static_cast<uint64_t>(bytes->size())};
    }
    last = st.WithContext("fetching " + Name(seg) + " from the bucket");
    if (st.code() != StatusCode::kCorruption) break;
    if (attempt == 0) {
      spdlog::warn("storage: {}; fetching it again", last.ToString());
    } else {
      spdlog::error("storage: {}; giving up", last.ToString());
    }
  }
  {
    std::lock_guard lock(mu_);
    ++progress_.failed_bucket_fetches;
  }
  Warn("fetch " + file, last.ToString());
  return last;
}

void Replicator::AnnounceCached(const SegmentRecord& seg, bool fetched) {
  auto added = global_->Submit(AddSegmentReplica{seg.id, self_});
  bool listed = added.ok(), exists = true;
  if (!added.ok()) {
    if (added.status().code() != StatusCode::kRejected) {
      Warn(seg.file_name, added.status().WithContext("announcing " + Name(seg)).ToString());
      return;
    }
    global_->Read([&](const GlobalState& s) {
      auto it = s.segments.find(seg.id);
      exists = it != s.segments.end();
      listed = exists && it->second.replicas.count(self_) != 0;
    });
  }
  if (added.ok()) {
    spdlog::info("storage: {} {} ({} bytes) and announced the copy",
                 fetched ? "fetched from the bucket" : "kept the local file of", Name(seg),
                 seg.file_size);
  }
  std::lock_guard lock(mu_);
  if (listed) {
    seen_listed_.insert(seg.file_name);
    unlisted_since_.erase(seg.file_name);
  } else if (!exists) {
    // Removed from Global meanwhile: deleted after the deletion delay (and its readers).
    seen_listed_.insert(seg.file_name);
    unlisted_since_.emplace(seg.file_name, clock_->MonotonicMicros());
  }
}

}  // namespace sediment
