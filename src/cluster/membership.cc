#include "cluster/membership.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <future>
#include <thread>
#include <utility>

namespace sediment {
namespace {

using namespace std::chrono_literals;

constexpr PartitionId kChatterPartition{0};
// Longest wait of one catch-up Read in Start, and the pause after a failed read.
constexpr std::chrono::milliseconds kReadWait = 100ms;
// Longest wait of one listener Read: a record ends it at once, so it only sets how often an idle
// listener wakes up (about twice a second) and how long Stop waits for the Read in progress.
constexpr std::chrono::milliseconds kListenWait = 500ms;
// Upper bound on the synchronous catch-up in Start.
constexpr std::chrono::milliseconds kCatchupBudget = 2000ms;
constexpr size_t kReadBytes = 1 << 20;
constexpr int64_t kWarnEveryUs = 10'000'000;
constexpr uint64_t kTruncateEvery = 30;

}  // namespace

bool Membership::Limiter::Allow(int64_t now_us, uint64_t* dropped) {
  if (last_us != INT64_MIN && now_us - last_us < kWarnEveryUs) {
    ++suppressed;
    return false;
  }
  last_us = now_us;
  *dropped = suppressed;
  suppressed = 0;
  return true;
}

Membership::Membership(CommitLog* chatter, Clock* clock, MembershipOptions options,
                       std::function<Heartbeat()> self)
    : log_(chatter), clock_(clock), options_(options), self_(std::move(self)) {}

Membership::~Membership() { Stop(); }

Status Membership::Start() {
  MutexLock lifecycle(&lifecycle_mu_);
  {
    MutexLock lock(&mu_);
    if (started_) return Status::Aborted("membership: Start called twice");
  }
  if (log_->partition_count() < 1) {
    return Status::InvalidArgument("membership: chatter log has no partition 0");
  }
  ASSIGN_OR_RETURN(Offset start, log_->StartOffset(kChatterPartition));
  ASSIGN_OR_RETURN(Offset end, log_->EndOffset(kChatterPartition));

  Heartbeat first = self_();
  if (first.node.value <= 0) {
    return Status::InvalidArgument("membership: node id " + std::to_string(first.node.value) +
                                   " is not > 0");
  }
  first.sent_ms = clock_->NowMillis();
  {
    MutexLock lock(&mu_);
    self_id_ = first.node;
    self_started_ms_ = first.started_ms;
    stats_.catchup_end = end;
    stats_.next_offset = std::max(start, Offset(end.value - options_.catchup_records));
  }
  auto appended = log_->Append(kChatterPartition, EncodeHeartbeat(first)).get();
  if (!appended.ok()) {
    return appended.status().WithContext("membership: appending the first heartbeat");
  }
  {
    MutexLock lock(&mu_);
    nodes_[first.node] = Entry{first, clock_->MonotonicMicros()};
    ++stats_.heartbeats_sent;
    started_ = true;
    running_ = true;
  }

  // Catch up on recent history so peers are known when Start returns (best effort).
  const auto deadline = SteadyNow() + kCatchupBudget;
  while (SteadyNow() < deadline) {
    {
      MutexLock lock(&mu_);
      if (stats_.next_offset >= stats_.catchup_end) break;
    }
    if (!ReadStep(kReadWait) && !stopping_) std::this_thread::sleep_for(kReadWait);
  }

  stopping_ = false;
  publisher_ = std::make_unique<BackgroundLoop>(
      "membership-pub",
      BackgroundLoop::Options{.interval = options_.interval,
                              .schedule = BackgroundLoop::Schedule::kFixedRate},
      [this] { PublisherPass(); });
  listener_ = std::make_unique<BackgroundLoop>(
      "membership-read", BackgroundLoop::Options{.first_pass = BackgroundLoop::FirstPass::kAtStart},
      BackgroundLoop::DelayFromPass{}, [this]() -> BackgroundLoop::Duration {
        if (ReadStep(kListenWait)) return BackgroundLoop::Duration::zero();
        return kReadWait;
      });
  (void)publisher_->Start();
  (void)listener_->Start();
  return Status::OK();
}

void Membership::Stop() {
  MutexLock lifecycle(&lifecycle_mu_);
  stopping_ = true;
  if (publisher_ != nullptr) publisher_->Stop();
  if (listener_ != nullptr) listener_->Stop();
  MutexLock lock(&mu_);
  running_ = false;
}

void Membership::PublisherPass() {
  Status s = PublishOnce();
  if (!s.ok()) {
    uint64_t dropped = 0;
    {
      MutexLock lock(&mu_);
      ++stats_.send_failures;
    }
    if (send_limiter_.Allow(clock_->MonotonicMicros(), &dropped)) {
      spdlog::warn("membership: heartbeat not sent: {} ({} similar warnings suppressed)",
                   s.ToString(), dropped);
    }
    return;
  }
  if (++sends_since_truncate_ >= kTruncateEvery) {
    sends_since_truncate_ = 0;
    MaybeTruncate();
  }
}

Status Membership::PublishOnce() {
  Heartbeat hb = self_();
  {
    MutexLock lock(&mu_);
    hb.node = self_id_;
  }
  hb.sent_ms = clock_->NowMillis();
  std::string record = EncodeHeartbeat(hb);
  {
    // The local view of self follows what it announces, whether or not the log takes it.
    MutexLock lock(&mu_);
    nodes_[hb.node] = Entry{std::move(hb), clock_->MonotonicMicros()};
  }
  std::future<Result<Offset>> done = log_->Append(kChatterPartition, std::move(record));
  while (done.wait_for(kReadWait) != std::future_status::ready) {
    if (stopping_) return Status::OK();  // outcome no longer matters
  }
  Result<Offset> r = done.get();
  if (!r.ok()) return r.status();
  MutexLock lock(&mu_);
  ++stats_.heartbeats_sent;
  return Status::OK();
}

void Membership::MaybeTruncate() {
  Status s = [&]() -> Status {
    ASSIGN_OR_RETURN(Offset end, log_->EndOffset(kChatterPartition));
    ASSIGN_OR_RETURN(Offset start, log_->StartOffset(kChatterPartition));
    const Offset target(end.value - options_.retain_records);
    if (target <= start) return Status::OK();
    return log_->DeleteBefore(kChatterPartition, target);
  }();
  uint64_t dropped = 0;
  if (!s.ok() && truncate_limiter_.Allow(clock_->MonotonicMicros(), &dropped)) {
    spdlog::warn("membership: truncating the chatter log failed: {} ({} similar suppressed)",
                 s.ToString(), dropped);
  }
}

bool Membership::ReadStep(std::chrono::milliseconds max_wait) {
  Offset from;
  {
    MutexLock lock(&mu_);
    from = stats_.next_offset;
  }
  auto records = log_->Read(kChatterPartition, from, kReadBytes, max_wait);
  if (!records.ok()) {
    Status s = records.status();
    if (s.code() == StatusCode::kNotFound) {
      // Truncated below us: continue from the oldest record still there.
      auto start = log_->StartOffset(kChatterPartition);
      if (start.ok() && *start > from) {
        MutexLock lock(&mu_);
        stats_.next_offset = *start;
        return true;
      }
      if (!start.ok()) s = start.status();
    }
    uint64_t dropped = 0;
    if (read_limiter_.Allow(clock_->MonotonicMicros(), &dropped)) {
      spdlog::warn(
          "membership: reading the chatter log at offset {} failed: {} ({} similar "
          "suppressed)",
          from.value, s.ToString(), dropped);
    }
    return false;
  }
  for (const LogRecord& rec : *records) Apply(rec);
  return true;
}

void Membership::Apply(const LogRecord& record) {
  auto hb = DecodeHeartbeat(record.data);
  const int64_t now_mono = clock_->MonotonicMicros();
  uint64_t dropped = 0;
  MutexLock lock(&mu_);
  stats_.records_read++;
  stats_.next_offset = std::max(stats_.next_offset, Offset(record.offset.value + 1));
  if (!hb.ok()) {
    stats_.malformed_records++;
    lock.Unlock();
    if (malformed_limiter_.Allow(now_mono, &dropped)) {
      spdlog::warn("membership: skipping chatter record at offset {}: {} ({} similar suppressed)",
                   record.offset.value, hb.status().ToString(), dropped);
    }
    return;
  }
  const bool catchup = record.offset < stats_.catchup_end;
  if (hb->node == self_id_) {
    // The local view of self is authoritative. A live heartbeat with our id from another process
    // means two nodes share an id (copied data directory).
    if (!catchup && hb->started_ms != self_started_ms_) {
      lock.Unlock();
      if (duplicate_limiter_.Allow(now_mono, &dropped)) {
        spdlog::error(
            "membership: another process (address {}, started_ms {}) sends heartbeats "
            "with this node's id {}; node ids must be unique ({} similar suppressed)",
            hb->address, hb->started_ms, hb->node.value, dropped);
      }
    }
    return;
  }
  int64_t seen = now_mono;
  if (catchup) {
    const int64_t age_ms = std::max<int64_t>(0, clock_->NowMillis() - hb->sent_ms);
    seen = now_mono - age_ms * 1000;
  }
  const NodeId node = hb->node;
  nodes_[node] = Entry{std::move(hb).value(), seen};
}

NodeView Membership::View(const Entry& e, int64_t now_mono_us) const {
  NodeView v;
  v.node = e.last.node;
  v.address = e.last.address;
  v.last_heartbeat_ms = e.last.sent_ms;
  const int64_t age_us = std::max<int64_t>(0, now_mono_us - e.seen_mono_us);
  v.age_ms = age_us / 1000;
  const int64_t timeout_us =
      std::chrono::duration_cast<std::chrono::microseconds>(options_.liveness_timeout).count();
  v.alive = (running_ && e.last.node == self_id_) || age_us < timeout_us;
  v.last = e.last;
  return v;
}

NodeId Membership::self_id() const {
  MutexLock lock(&mu_);
  return self_id_;
}

std::vector<NodeView> Membership::Nodes() const {
  const int64_t now = clock_->MonotonicMicros();
  MutexLock lock(&mu_);
  std::vector<NodeView> out;
  out.reserve(nodes_.size());
  for (const auto& [id, e] : nodes_) out.push_back(View(e, now));
  return out;
}

std::optional<NodeView> Membership::Find(NodeId node) const {
  const int64_t now = clock_->MonotonicMicros();
  MutexLock lock(&mu_);
  auto it = nodes_.find(node);
  if (it == nodes_.end()) return std::nullopt;
  return View(it->second, now);
}

bool Membership::IsAlive(NodeId node) const {
  auto v = Find(node);
  return v.has_value() && v->alive;
}

bool Membership::IsServing(NodeId node) const {
  auto v = Find(node);
  return v.has_value() && v->serving();
}

std::vector<NodeView> Membership::AliveNodes() const {
  std::vector<NodeView> out = Nodes();
  std::erase_if(out, [](const NodeView& v) { return !v.alive; });
  return out;
}

MembershipStats Membership::stats() const {
  MutexLock lock(&mu_);
  return stats_;
}

}  // namespace sediment
