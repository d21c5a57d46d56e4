// Which segments each repository's retention removes: a pure function of one Global state and the
// time (the maintenance leader submits the answer as RemoveSegments).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "global/global.h"

namespace sediment {

struct RetentionPlan {
  std::vector<SegmentId> expired;  // oldest first within each repository
  struct Counts {
    uint64_t by_age = 0;   // max_ts older than now - retention_ms
    uint64_t by_size = 0;  // the repository's segment bytes over retention_bytes
    uint64_t deleted = 0;  // the repository no longer exists (DeleteRepo)
  };
  std::map<std::string, Counts> by_repo;
};

// Committed segments of each repository in order of (max_ts, id): a segment expires when its
// newest event is older than `now_ms - retention_ms`, or while the repository's committed segment
// bytes exceed `retention_bytes` (oldest removed first). The first segment that is neither stops
// the repository's walk: everything after it is newer. 0 = no limit. Staged merge outputs are
// not counted (their inputs are). Committed segments of a repository that does not exist (deleted:
// registered by a digest that was still flushing its events when DeleteRepo was applied, which
// removed every segment it knew of) all expire.
RetentionPlan PlanRetention(const GlobalState& state, int64_t now_ms);

}  // namespace sediment
