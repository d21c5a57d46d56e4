#include "maintenance/maintenance.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "storage/retention.h"

namespace sediment::maintenance {

bool LeadsChores(const std::vector<NodeView>& alive, NodeId self) {
  for (const auto& v : alive) {
    if (v.serving()) return v.node == self;  // sorted by id: the first serving node leads
  }
  return false;
}

void ApplyRetention(Global* global, Clock* clock) {
  RetentionPlan plan;
  global->Read([&](const GlobalState& st) { plan = PlanRetention(st, clock->NowMillis()); });
  for (size_t i = 0; i < plan.expired.size(); i += 1000) {
    RemoveSegments ev;
    ev.ids.assign(plan.expired.begin() + static_cast<std::ptrdiff_t>(i),
                  plan.expired.begin() +
                      static_cast<std::ptrdiff_t>(std::min(plan.expired.size(), i + 1000)));
    auto r = global->Submit(ev);
    if (!r.ok()) {
      spdlog::warn("retention: removing {} segments: {}", ev.ids.size(), r.status().ToString());
      return;
    }
  }
  for (const auto& [repo, counts] : plan.by_repo) {
    spdlog::info(
        "retention: repository '{}': removed {} segments past the age limit, {} over "
        "the size limit and {} of the deleted repository",
        repo, counts.by_age, counts.by_size, counts.deleted);
  }
}

void TruncateGlobalTopic(Global* global, CommitLog* global_log, const Membership& membership,
                         NodeId self, int64_t* truncated_before) {
  std::vector<Offset> peers_oldest;
  for (const auto& v : membership.AliveNodes()) {
    if (v.node != self) peers_oldest.push_back(v.last.oldest_snapshot);
  }
  const Offset target = GlobalTopicTruncationPoint(global->OldestSnapshot(), peers_oldest);
  if (target.value <= *truncated_before) return;
  Status st = global_log->DeleteBefore(PartitionId(0), target);
  if (!st.ok()) {
    spdlog::warn("truncating the global topic below {}: {}", target.value, st.ToString());
    return;
  }
  *truncated_before = target.value;
  spdlog::info("global topic truncated below offset {} (oldest snapshot of every live node)",
               target.value);
}

Maintenance::Maintenance(MaintenanceParts parts, MaintenanceOptions options)
    : parts_(parts), options_(options) {}

Maintenance::~Maintenance() { Stop(); }

void Maintenance::Start() {
  thread_ = std::thread([this] { Loop(); });
}

void Maintenance::Stop() {
  if (stopped_) return;
  stopped_ = true;
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (parts_.uploader != nullptr) parts_.uploader->Stop();
  if (parts_.merger != nullptr) parts_.merger->Stop();
  if (parts_.replicator != nullptr) parts_.replicator->Stop();
}

bool Maintenance::Wait(std::chrono::milliseconds d) {
  std::unique_lock lock(mu_);
  return !cv_.wait_for(lock, d, [this] { return stop_; });
}

bool Maintenance::Leads() const {
  return parts_.membership == nullptr ||
         LeadsChores(parts_.membership->AliveNodes(), options_.self);
}

void Maintenance::Loop() {
  if (options_.start_delay.count() > 0 && !Wait(options_.start_delay)) return;
  if (parts_.replicator != nullptr) parts_.replicator->Start();
  if (parts_.uploader != nullptr) parts_.uploader->Start();
  if (parts_.merger != nullptr) {
    Status st = parts_.merger->Start();
    if (!st.ok()) spdlog::error("merges not started: {}", st.ToString());
  }
  while (Wait(options_.interval)) {
    if (!Leads()) continue;
    ApplyRetention(parts_.global, parts_.clock);
    if (parts_.membership != nullptr && parts_.global_log != nullptr) {
      TruncateGlobalTopic(parts_.global, parts_.global_log, *parts_.membership, options_.self,
                          &global_truncated_before_);
    }
    if (parts_.bucket_snapshots != nullptr) parts_.bucket_snapshots->RunOnce();
  }
}

}  // namespace sediment::maintenance
