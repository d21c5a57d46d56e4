#include "storage/retention.h"

#include <algorithm>
#include <tuple>

namespace sediment {

RetentionPlan PlanRetention(const GlobalState& state, int64_t now_ms) {
  RetentionPlan plan;
  std::map<std::string, std::vector<const SegmentRecord*>> by_repo;
  for (const auto& [id, seg] : state.segments) {
    if (!seg.staged()) by_repo[seg.datasource.repo].push_back(&seg);
  }
  for (const auto& [name, segs] : by_repo) {
    if (state.repos.count(name) != 0) continue;
    for (const auto* seg : segs) plan.expired.push_back(seg->id);
    plan.by_repo[name].deleted += segs.size();
  }
  for (const auto& [name, repo] : state.repos) {
    auto it = by_repo.find(name);
    if (it == by_repo.end()) continue;
    std::vector<const SegmentRecord*>& segs = it->second;
    std::sort(segs.begin(), segs.end(), [](const SegmentRecord* a, const SegmentRecord* b) {
      return std::tie(a->max_ts, a->id) < std::tie(b->max_ts, b->id);
    });
    uint64_t total = 0;
    for (const auto* seg : segs) total += seg->file_size;
    for (const auto* seg : segs) {
      const bool too_old = repo.retention_ms > 0 && seg->max_ts < now_ms - repo.retention_ms;
      const bool too_big = repo.retention_bytes > 0 && total > repo.retention_bytes;
      if (!too_old && !too_big) break;  // oldest first: the rest is newer
      plan.expired.push_back(seg->id);
      total -= seg->file_size;
      RetentionPlan::Counts& c = plan.by_repo[name];
      (too_old ? c.by_age : c.by_size) += 1;
    }
  }
  return plan;
}

}  // namespace sediment
