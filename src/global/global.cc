// Global on a commit log: snapshot loading, replay, tailing, Submit and snapshot writing.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <exception>
#include <limits>
#include <mutex>
#include <shared_mutex>
#include <thread>

#include "common/background_loop.h"
#include "common/clock.h"
#include "common/mutex.h"
#include "global/global.h"

namespace sediment {
namespace {

constexpr PartitionId kGlobalPartition(0);
constexpr size_t kReadMaxBytes = 1 << 20;
constexpr std::chrono::milliseconds kTailWait(150);
constexpr std::chrono::milliseconds kRetryDelay(100);
constexpr size_t kKeepSnapshots = 2;
constexpr std::string_view kSnapshotPrefix = "snapshot-";
constexpr std::string_view kSnapshotSuffix = ".bin";
constexpr size_t kOffsetDigits = 20;

// Offset encoded in a snapshot file name, or nullopt when `name` is not a snapshot file.
std::optional<int64_t> ParseSnapshotName(std::string_view name) {
  if (name.size() != kSnapshotPrefix.size() + kOffsetDigits + kSnapshotSuffix.size() ||
      !name.starts_with(kSnapshotPrefix) || !name.ends_with(kSnapshotSuffix)) {
    return std::nullopt;
  }
  std::string_view digits = name.substr(kSnapshotPrefix.size(), kOffsetDigits);
  if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return std::nullopt;
  }
  int64_t v = 0;
  auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
  if (ec != std::errc() || ptr != digits.data() + digits.size()) return std::nullopt;
  return v;
}

class GlobalImpl final : public Global {
 public:
  GlobalImpl(Env* env, CommitLog* log, std::string dir, const GlobalOptions& options)
      : env_(env), log_(log), dir_(std::move(dir)), options_(options) {}
  ~GlobalImpl() override {
    Status st = Close();
    if (!st.ok()) spdlog::warn("global: close: {}", st.ToString());
  }

  // Loads the newest snapshot, replays the log to its end and starts the background threads.
  Status Init();

  Result<Outcome> Submit(const GlobalEvent& ev) override;
  void Read(const std::function<void(const GlobalState&)>& fn) const override {
    std::shared_lock lock(state_mu_);
    fn(state_);
  }
  Status WriteSnapshot() override;
  std::string SnapshotError() const override {
    MutexLock lock(&snapshot_error_mu_);
    return snapshot_error_;
  }
  Status Close() override;
  std::pair<Offset, std::string> EncodedState() const override { return EncodeSnapshot(); }
  Offset OldestSnapshot() const override { return Offset(oldest_snapshot_.load()); }
  Offset Applied() const override {
    MutexLock lock(&mu_);
    return Offset(applied_);
  }
  bool WaitApplied(Offset offset, std::chrono::milliseconds timeout) override {
    const auto deadline = SteadyNow() + timeout;
    MutexLock lock(&mu_);
    while (applied_ < offset.value && !stopping_) {
      if (!cv_.WaitUntil(mu_, deadline)) break;
    }
    return applied_ >= offset.value;
  }
  Result<Offset> LogEnd() override { return log_->EndOffset(kGlobalPartition); }
  std::string FollowError() const override {
    MutexLock lock(&mu_);
    if (!tail_error_.ok()) return tail_error_.ToString();
    return behind_;
  }
  uint64_t StateReloads() const override {
    MutexLock lock(&mu_);
    return reloads_;
  }

 private:
  struct Recorded {
    Status status;
    SegmentId segment_id;
  };

  Status LoadNewestSnapshot();
  Status CatchUp();
  // Applies one record at or after applied_through+1. Called only by Init (before the tailer
  // starts) and then only by the tailer thread.
  void ApplyRecord(const LogRecord& rec);
  void TailLoop();
  // Tailer thread. The log no longer holds offset `next`: loads states from
  // options_.newer_state until one fits (true) or Close (false).
  bool ReloadNewerState(int64_t next, const std::string& why);
  // Tailer thread. Installs the state in `bytes` if it is past this node's and the log holds
  // every event after it.
  Status TryInstallNewerState();
  // The snapshot loop's pass (Notify()ed when pending_snapshot_ is set): writes it unless stopping.
  void SnapshotPass();
  // Encodes the state under the shared lock; {applied_through, bytes}.
  std::pair<Offset, std::string> EncodeSnapshot() const;
  // Writes the snapshot unless a newer one was written, prunes old ones and truncates the log.
  Status WriteSnapshotLocked(Offset applied, const std::string& bytes) REQUIRES(snapshot_mu_);
  // WriteSnapshotLocked, remembering its outcome for SnapshotError().
  Status WriteSnapshotNoted(Offset applied, const std::string& bytes) REQUIRES(snapshot_mu_);
  Status PruneAndTruncateLocked() REQUIRES(snapshot_mu_);
  // Drops outcomes no current or future Submit can ask for.
  void PruneOutcomesLocked() REQUIRES(mu_);
  // True when stopping (at once, or within `d`).
  bool WaitStopping(std::chrono::milliseconds d) EXCLUDES(mu_) {
    const auto deadline = SteadyNow() + d;
    MutexLock lock(&mu_);
    while (!stopping_) {
      if (!cv_.WaitUntil(mu_, deadline)) break;
    }
    return stopping_;
  }

  Env* const env_;
  CommitLog* const log_;
  const std::string dir_;
  const GlobalOptions options_;

  mutable std::shared_mutex state_mu_;
  GlobalState state_;  // exclusive lock to write (ApplyRecord only), shared lock to read

  mutable Mutex mu_;
  CondVar cv_;                            // applied_ advanced, stopping_, tail_error_
  int64_t applied_ GUARDED_BY(mu_) = -1;  // == state_.applied_through
  // Submissions whose Append has not returned yet: the applied_ each saw when it started. Their
  // offsets will be above that value, so outcomes above the minimum must be kept for them.
  std::multiset<int64_t> unknown_starts_ GUARDED_BY(mu_);
  std::set<int64_t> awaited_ GUARDED_BY(mu_);  // offsets of Submits waiting for their outcome
  std::map<int64_t, Recorded> outcomes_ GUARDED_BY(mu_);
  // Fatal tailer failure: the state can no longer follow the log.
  Status tail_error_ GUARDED_BY(mu_);
  // Why the state does not follow the log while a newer one is awaited.
  std::string behind_ GUARDED_BY(mu_);
  uint64_t reloads_ GUARDED_BY(mu_) = 0;
  // Highest applied_through a newer state jumped to: outcomes at or below it may be unknown.
  int64_t reloaded_through_ GUARDED_BY(mu_) = -1;
  bool stopping_ GUARDED_BY(mu_) = false;
  std::optional<std::pair<Offset, std::string>> pending_snapshot_ GUARDED_BY(mu_);

  uint64_t applied_since_snapshot_ = 0;  // applying thread only

  mutable Mutex snapshot_error_mu_;
  std::string snapshot_error_ GUARDED_BY(snapshot_error_mu_);
  Mutex snapshot_mu_;
  int64_t last_snapshot_ GUARDED_BY(snapshot_mu_) = -1;
  std::atomic<int64_t> oldest_snapshot_{-1};

  Mutex close_mu_;
  bool initialized_ GUARDED_BY(close_mu_) = false;
  bool closed_ GUARDED_BY(close_mu_) = false;
  Status close_status_ GUARDED_BY(close_mu_);

  std::thread tailer_;
  // Writes pending_snapshot_ when notified; no timed passes. Last member: stopped first.
  BackgroundLoop snapshotter_{"global-snapshot", {}, [this] { SnapshotPass(); }};
};

Status GlobalImpl::LoadNewestSnapshot() {
  RETURN_IF_ERROR(env_->CreateDirs(dir_).WithContext("global snapshot dir"));
  ASSIGN_OR_RETURN(std::vector<std::string> names, env_->ListDir(dir_));
  std::vector<std::pair<int64_t, std::string>> candidates;
  for (const auto& name : names) {
    if (auto off = ParseSnapshotName(name)) {
      candidates.emplace_back(*off, name);
    } else if (name.ends_with(".tmp") &&
               ParseSnapshotName(std::string_view(name).substr(0, name.size() - 4))) {
      Status st = env_->RemoveFile(JoinPath(dir_, name));  // an interrupted atomic write
      if (!st.ok()) spdlog::warn("global: removing {}: {}", name, st.ToString());
    }
  }
  std::sort(candidates.rbegin(), candidates.rend());
  for (const auto& [off, name] : candidates) {
    const std::string path = JoinPath(dir_, name);
    Result<std::string> data = env_->ReadFile(path);
    if (!data.ok()) {
      spdlog::warn("global: cannot read snapshot {}: {}; trying an older one", path,
                   data.status().ToString());
      continue;
    }
    Result<GlobalState> state = DecodeGlobalState(*data);
    if (!state.ok()) {
      spdlog::warn("global: snapshot {} is unusable: {}; trying an older one", path,
                   state.status().ToString());
      continue;
    }
    if (state->applied_through.value != off) {
      spdlog::warn("global: snapshot {} reflects offset {}, not the one in its name; skipping",
                   path, state->applied_through.value);
      continue;
    }
    state_ = std::move(*state);
    {
      MutexLock lock(&mu_);  // uncontended: before the threads start
      applied_ = off;
    }
    {
      MutexLock lock(&snapshot_mu_);
      last_snapshot_ = off;
    }
    oldest_snapshot_ = candidates.back().first;
    spdlog::info("global: loaded snapshot {} (through offset {})", path, off);
    return Status::OK();
  }
  return Status::OK();
}

Status GlobalImpl::CatchUp() {
  ASSIGN_OR_RETURN(Offset start, log_->StartOffset(kGlobalPartition));
  ASSIGN_OR_RETURN(Offset end, log_->EndOffset(kGlobalPartition));
  const int64_t applied = state_.applied_through.value;
  if (applied >= end.value) {
    return Status::Corruption("global: the state reflects offset " + std::to_string(applied) +
                              " but the global log ends at " + std::to_string(end.value) +
                              " (was the log replaced?)");
  }
  int64_t next = applied + 1;
  if (next < start.value) {
    return Status::Corruption("global: the log starts at offset " + std::to_string(start.value) +
                              " but the state covers only offsets below " + std::to_string(next) +
                              "; events in between are gone and the state cannot be rebuilt")
        .WithSubcode(StatusSubcode::kLogTruncatedPastState);
  }
  // A remote log (Kafka) may answer a read empty until its consumer has fetched, so an empty
  // answer below the end offset means "wait", not "done": replay must reach `end` before the
  // state is used (claims and registrations compare epochs and positions against it).
  const auto deadline = SteadyNow() + std::chrono::seconds(60);
  std::chrono::milliseconds wait{0};
  while (next < end.value) {
    Result<std::vector<LogRecord>> recs =
        log_->Read(kGlobalPartition, Offset(next), kReadMaxBytes, wait);
    if (!recs.ok()) {
      if (recs.status().code() == StatusCode::kNotFound) {
        return Status::Corruption("global: log truncated below offset " + std::to_string(next) +
                                  " during replay: " + recs.status().message());
      }
      return recs.status().WithContext("global: replaying the log");
    }
    if (recs->empty()) {
      if (SteadyNow() > deadline) {
        return Status::Unavailable("global: the log ends at offset " + std::to_string(end.value) +
                                   " but offset " + std::to_string(next) +
                                   " could not be read within 60 s");
      }
      wait = std::chrono::milliseconds(200);
      continue;
    }
    for (const LogRecord& rec : *recs) {
      if (rec.offset > state_.applied_through) {
        Result<GlobalEvent> ev = DecodeGlobalEvent(rec.data);
        if (ev.ok() && IsRecoveryMarker(state_, *ev)) {
          return Status::Aborted(
                     "global: the log begins with a recovery from the bucket at offset " +
                     std::to_string(rec.offset.value) +
                     "; this node must start from the recovering node's snapshot (" +
                     std::string(kRecoveredLogMarker) + ")")
              .WithSubcode(StatusSubcode::kLogBeginsWithRecovery);
        }
      }
      ApplyRecord(rec);
      next = rec.offset.value + 1;
    }
  }
  return Status::OK();
}

void GlobalImpl::ApplyRecord(const LogRecord& rec) {
  if (rec.offset <= state_.applied_through) return;
  Result<GlobalEvent> ev = DecodeGlobalEvent(rec.data);
  Status st;
  SegmentId assigned;
  {
    std::unique_lock lock(state_mu_);
    if (ev.ok()) {
      st = ApplyGlobalEvent(&state_, *ev, &assigned);
    } else {
      st = ev.status().WithContext("global log offset " + std::to_string(rec.offset.value));
    }
    state_.applied_through = rec.offset;
  }
  if (!ev.ok()) spdlog::error("global: skipping undecodable event: {}", st.ToString());
  {
    MutexLock lock(&mu_);
    applied_ = rec.offset.value;
    const int64_t off = rec.offset.value;
    if (awaited_.count(off) != 0 || (!unknown_starts_.empty() && off > *unknown_starts_.begin())) {
      outcomes_[off] = Recorded{std::move(st), assigned};
    }
  }
  cv_.NotifyAll();

  ++applied_since_snapshot_;
  if (options_.snapshot_every > 0 && applied_since_snapshot_ >= options_.snapshot_every) {
    applied_since_snapshot_ = 0;
    auto snap = EncodeSnapshot();
    {
      MutexLock lock(&mu_);
      pending_snapshot_ = std::move(snap);
    }
    snapshotter_.Notify();
  }
}

void GlobalImpl::TailLoop() {
  int64_t next = state_.applied_through.value + 1;
  std::string last_error;
  for (;;) {
    {
      MutexLock lock(&mu_);
      if (stopping_) return;
    }
    Result<std::vector<LogRecord>> recs =
        log_->Read(kGlobalPartition, Offset(next), kReadMaxBytes, kTailWait);
    if (!recs.ok()) {
      if (recs.status().code() == StatusCode::kNotFound && options_.newer_state) {
        if (!ReloadNewerState(next, recs.status().message())) return;
        MutexLock lock(&mu_);
        next = applied_ + 1;
        continue;
      }
      if (recs.status().code() == StatusCode::kNotFound) {
        Status fatal = Status::Corruption(
            "global: the log was truncated below offset " + std::to_string(next) +
            " before this node applied it; the state cannot follow the log (" +
            recs.status().message() + ")");
        spdlog::error("{}", fatal.ToString());
        {
          MutexLock lock(&mu_);
          tail_error_ = std::move(fatal);
        }
        cv_.NotifyAll();
        return;
      }
      if (recs.status().ToString() != last_error) {
        last_error = recs.status().ToString();
        spdlog::warn("global: reading the log: {}; retrying", last_error);
      }
      if (WaitStopping(kRetryDelay)) return;
      continue;
    }
    last_error.clear();
    for (const LogRecord& rec : *recs) {
      ApplyRecord(rec);
      next = std::max(next, rec.offset.value + 1);
    }
  }
}

bool GlobalImpl::ReloadNewerState(int64_t next, const std::string& why) {
  const std::string behind = "the log was truncated below offset " + std::to_string(next) +
                             " before this node applied it (" + why + ")";
  spdlog::warn("global: {}; loading a newer state", behind);
  std::string last_error;
  for (;;) {
    Status st = TryInstallNewerState();
    if (st.ok()) return true;
    if (st.ToString() != last_error) {
      last_error = st.ToString();
      spdlog::warn("global: no newer state loaded yet: {}; retrying every second", last_error);
    }
    {
      MutexLock lock(&mu_);
      behind_ = behind + "; no newer state loaded yet: " + last_error;
    }
    if (WaitStopping(std::chrono::seconds(1))) return false;
  }
}

Status GlobalImpl::TryInstallNewerState() {
  ASSIGN_OR_RETURN(std::string bytes, options_.newer_state());
  ASSIGN_OR_RETURN(GlobalState state, DecodeGlobalState(bytes));
  ASSIGN_OR_RETURN(Offset start, log_->StartOffset(kGlobalPartition));
  const int64_t through = state.applied_through.value;
  int64_t had;
  {
    MutexLock lock(&mu_);
    had = applied_;
  }
  if (through <= had) {
    return Status::Unavailable("the state offered reflects offset " + std::to_string(through) +
                               ", not past this node's " + std::to_string(had));
  }
  if (through + 1 < start.value) {
    return Status::Unavailable("the state offered reflects offset " + std::to_string(through) +
                               " but the log starts at " + std::to_string(start.value));
  }
  {
    std::unique_lock lock(state_mu_);
    state_ = std::move(state);
  }
  {
    MutexLock lock(&mu_);
    applied_ = through;
    reloaded_through_ = through;
    behind_.clear();
    ++reloads_;
    pending_snapshot_ = std::make_pair(Offset(through), std::move(bytes));
  }
  applied_since_snapshot_ = 0;
  cv_.NotifyAll();
  snapshotter_.Notify();
  spdlog::warn("global: loaded a newer state through offset {} (this node had applied {})", through,
               had);
  return Status::OK();
}

void GlobalImpl::SnapshotPass() {
  std::pair<Offset, std::string> snap;
  {
    MutexLock lock(&mu_);
    if (stopping_ || !pending_snapshot_.has_value()) return;  // Close writes the final snapshot
    snap = std::move(*pending_snapshot_);
    pending_snapshot_.reset();
  }
  MutexLock lock(&snapshot_mu_);
  Status st = WriteSnapshotNoted(snap.first, snap.second);
  if (!st.ok()) spdlog::warn("global: automatic snapshot: {}", st.ToString());
}

std::pair<Offset, std::string> GlobalImpl::EncodeSnapshot() const {
  std::shared_lock lock(state_mu_);
  return {state_.applied_through, EncodeGlobalState(state_)};
}

Status GlobalImpl::WriteSnapshotNoted(Offset applied, const std::string& bytes) {
  Status st = WriteSnapshotLocked(applied, bytes);
  MutexLock lock(&snapshot_error_mu_);
  snapshot_error_ = st.ok() ? "" : st.ToString();
  return st;
}

Status GlobalImpl::WriteSnapshotLocked(Offset applied, const std::string& bytes) {
  if (applied.value < 0 || applied.value <= last_snapshot_) return Status::OK();
  const std::string path = JoinPath(dir_, GlobalSnapshotFileName(applied));
  RETURN_IF_ERROR(env_->WriteFileAtomic(path, bytes).WithContext("global: writing " + path));
  last_snapshot_ = applied.value;
  return PruneAndTruncateLocked();
}

Status GlobalImpl::PruneAndTruncateLocked() {
  ASSIGN_OR_RETURN(std::vector<std::string> names, env_->ListDir(dir_));
  std::vector<std::pair<int64_t, std::string>> snaps;
  for (const auto& name : names) {
    if (auto off = ParseSnapshotName(name)) snaps.emplace_back(*off, name);
  }
  std::sort(snaps.begin(), snaps.end());
  while (snaps.size() > kKeepSnapshots) {
    RETURN_IF_ERROR(env_->RemoveFile(JoinPath(dir_, snaps.front().second)));
    snaps.erase(snaps.begin());
  }
  oldest_snapshot_ = snaps.empty() ? -1 : snaps.front().first;
  // Truncate only once kKeepSnapshots snapshots exist, so a corrupt newest snapshot always has an
  // older one plus the log tail to fall back on.
  if (snaps.size() < kKeepSnapshots || !options_.truncate_log) return Status::OK();
  return log_->DeleteBefore(kGlobalPartition, Offset(snaps.front().first + 1))
      .WithContext("global: truncating the log");
}

void GlobalImpl::PruneOutcomesLocked() {
  const int64_t bound =
      unknown_starts_.empty() ? std::numeric_limits<int64_t>::max() : *unknown_starts_.begin();
  for (auto it = outcomes_.begin(); it != outcomes_.end() && it->first <= bound;) {
    it = awaited_.count(it->first) != 0 ? std::next(it) : outcomes_.erase(it);
  }
}

Status GlobalImpl::Init() {
  RETURN_IF_ERROR(LoadNewestSnapshot());
  RETURN_IF_ERROR(CatchUp());
  try {
    (void)snapshotter_.Start();
    tailer_ = std::thread([this] { TailLoop(); });
  } catch (const std::exception& e) {
    return Status::Internal(std::string("global: starting threads: ") + e.what());
  }
  MutexLock lock(&close_mu_);
  initialized_ = true;
  return Status::OK();
}

Result<Global::Outcome> GlobalImpl::Submit(const GlobalEvent& ev) {
  std::string record = EncodeGlobalEvent(ev);
  int64_t start;
  {
    MutexLock lock(&mu_);
    if (stopping_) return Status::Aborted("global: closed");
    if (!tail_error_.ok()) return tail_error_;
    start = applied_;
    unknown_starts_.insert(start);
  }
  Result<Offset> appended = Status::Internal("global: append did not complete");
  try {
    appended = log_->Append(kGlobalPartition, std::move(record)).get();
  } catch (const std::exception& e) {
    appended = Status::Internal(std::string("global: append: ") + e.what());
  }
  MutexLock lock(&mu_);
  unknown_starts_.erase(unknown_starts_.find(start));
  if (!appended.ok()) {
    PruneOutcomesLocked();
    return appended.status().WithContext("global: appending " + std::string(GlobalEventName(ev)));
  }
  const int64_t off = appended->value;
  awaited_.insert(off);
  PruneOutcomesLocked();
  while (applied_ < off && !stopping_ && tail_error_.ok()) cv_.Wait(mu_);
  awaited_.erase(off);
  auto it = outcomes_.find(off);
  if (it == outcomes_.end()) {
    if (off <= reloaded_through_) {
      // The log was truncated below `off` before this node applied it (TryInstallNewerState).
      return Status::Unavailable("global: the outcome of offset " + std::to_string(off) +
                                 " is unknown: a newer state was loaded past it");
    }
    if (applied_ >= off) return Status::Internal("global: outcome of offset lost");
    if (!tail_error_.ok()) return tail_error_;
    return Status::Aborted("global: closed before offset " + std::to_string(off) +
                           " was applied; it may be applied later");
  }
  Recorded rec = std::move(it->second);
  outcomes_.erase(it);
  if (!rec.status.ok()) return rec.status;
  return Outcome{Offset(off), rec.segment_id};
}

Status GlobalImpl::WriteSnapshot() {
  auto [applied, bytes] = EncodeSnapshot();
  MutexLock lock(&snapshot_mu_);
  return WriteSnapshotNoted(applied, bytes);
}

Status GlobalImpl::Close() {
  MutexLock close_lock(&close_mu_);
  if (closed_) return close_status_;
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  cv_.NotifyAll();
  if (tailer_.joinable()) tailer_.join();
  snapshotter_.Stop();
  if (initialized_) close_status_ = WriteSnapshot();
  closed_ = true;
  return close_status_;
}

}  // namespace

std::string GlobalSnapshotFileName(Offset applied_through) {
  std::string digits = std::to_string(applied_through.value);
  if (digits.size() < kOffsetDigits) digits.insert(0, kOffsetDigits - digits.size(), '0');
  return std::string(kSnapshotPrefix) + digits + std::string(kSnapshotSuffix);
}

bool HasGlobalSnapshot(Env* env, const std::string& snapshot_dir) {
  auto names = env->ListDir(snapshot_dir);
  if (!names.ok()) return false;
  for (const auto& n : *names) {
    if (ParseSnapshotName(n)) return true;
  }
  return false;
}

Result<Offset> InstallGlobalSnapshot(Env* env, const std::string& snapshot_dir,
                                     std::string_view bytes) {
  ASSIGN_OR_RETURN(GlobalState state, DecodeGlobalState(bytes));
  if (state.applied_through.value < 0) {
    return Status::InvalidArgument("global: an empty state is not a snapshot");
  }
  RETURN_IF_ERROR(env->CreateDirs(snapshot_dir).WithContext("global snapshot dir"));
  const std::string path = JoinPath(snapshot_dir, GlobalSnapshotFileName(state.applied_through));
  RETURN_IF_ERROR(env->WriteFileAtomic(path, bytes).WithContext("global: writing " + path));
  return state.applied_through;
}

Result<std::unique_ptr<Global>> Global::Open(Env* env, CommitLog* log,
                                             const std::string& snapshot_dir,
                                             const GlobalOptions& options) {
  if (env == nullptr || log == nullptr) return Status::InvalidArgument("global: null env or log");
  auto g = std::make_unique<GlobalImpl>(env, log, snapshot_dir, options);
  RETURN_IF_ERROR(g->Init());
  return std::unique_ptr<Global>(std::move(g));
}

Offset GlobalTopicTruncationPoint(Offset own_oldest, const std::vector<Offset>& peers_oldest) {
  int64_t low = own_oldest.value;
  if (low < 0) return Offset(-1);
  for (Offset o : peers_oldest) {
    if (o.value < 0) return Offset(-1);
    low = std::min(low, o.value);
  }
  return Offset(low + 1);
}

}  // namespace sediment
