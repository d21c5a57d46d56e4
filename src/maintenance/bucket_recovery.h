// Disaster recovery from the bucket (docs/DESIGN.md section 8, P4): a new cluster (empty data
// dir, empty global log) starts from the newest usable Global snapshot in the bucket plus the
// segment objects uploaded after it.
#pragma once

#include <string>

#include "bucket/bucket.h"
#include "common/env.h"
#include "common/status.h"
#include "log/commit_log.h"

namespace sediment::maintenance {

// Run before Global opens, on every node started with --recover-from-bucket:
// - a global log that holds events already (the recovery happened): nothing to do, false;
// - a snapshot in snapshot_dir: InvalidArgument (recovery needs an empty data dir);
// - else the newest snapshot that decodes (older ones are tried when the newest does not), and
//   the footers of segment objects it does not list, make the recovered state (RecoverState).
//   Its marker (BeginRecovery) is appended to the global log: the node whose marker lands at
//   offset 0 installs the state as its snapshot and answers true; any other node answers false
//   and starts from that node's snapshot (Global's newer_state).
// NotFound when the bucket holds no usable snapshot; bucket and log errors as they come.
// Logs progress and, for each segment that never reached the bucket, what was lost.
Result<bool> RecoverFromBucket(Env* env, CommitLog* global_log, bucket::Bucket* bucket,
                               const std::string& snapshot_dir);

}  // namespace sediment::maintenance
