#include "coordinator/planner.h"

namespace sediment::coordinator {
namespace {

bool Excluded(const PlanContext& ctx, const SegmentRecord& seg, NodeId n) {
  return (ctx.excluded != nullptr && ctx.excluded->count({seg.id.value, n.value}) != 0) ||
         (ctx.stalled != nullptr && ctx.stalled->count(n.value) != 0);
}

}  // namespace

PartitionOwners OwnersOf(const GlobalState& state) {
  PartitionOwners owners;
  for (const auto& [p, ps] : state.partitions) {
    if (ps.epoch.value > 0) owners[p] = {ps.owner.value, ps.epoch};
  }
  return owners;
}

int64_t ChooseHolder(const SegmentRecord& seg, const PlanContext& ctx) {
  if (seg.replicas.count(ctx.self) != 0 && !Excluded(ctx, seg, ctx.self) &&
      ctx.holds_file(seg.file_name)) {
    return ctx.self.value;
  }
  std::vector<int64_t> alive;
  for (NodeId n : seg.replicas) {
    if (n == ctx.self || Excluded(ctx, seg, n)) continue;
    if (ctx.serving(n)) alive.push_back(n.value);
  }
  if (alive.empty()) return -1;
  // Spread the segments over their live holders.
  return alive[static_cast<size_t>(seg.id.value) % alive.size()];
}

SegmentPlan PlanSegments(const GlobalState& state, const std::string& repo,
                         const query::TimeRange& range, const PlanContext& ctx) {
  SegmentPlan plan;
  for (const auto& [id, seg] : state.segments) {
    if (seg.datasource.repo != repo || seg.staged()) continue;
    if (seg.max_ts < range.start_ms || seg.min_ts >= range.end_ms) continue;
    const int64_t holder = ChooseHolder(seg, ctx);
    const bool own_copy_failed =
        ctx.excluded != nullptr && ctx.excluded->count({seg.id.value, ctx.self.value}) != 0;
    const bool bucket_tried = ctx.via_bucket != nullptr && ctx.via_bucket->count(seg.id.value) != 0;
    if (holder < 0 && seg.uploaded && ctx.has_bucket && (!own_copy_failed || !bucket_tried)) {
      plan.from_bucket.push_back(seg);
    } else if (holder < 0) {
      plan.unreachable.push_back(seg);
    } else if (holder == ctx.self.value) {
      plan.local.push_back(seg);
    } else {
      plan.remote[holder].push_back(seg);
    }
  }
  return plan;
}

}  // namespace sediment::coordinator
