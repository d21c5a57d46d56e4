// The node's stable identity: a NodeId kept in `<data_dir>/node-id` (format in cluster/FORMAT.md).
#pragma once

#include <string>
#include <string_view>

#include "common/env.h"
#include "common/status.h"
#include "common/types.h"

namespace sediment {

// Name of the id file inside the data directory.
inline constexpr const char* kNodeIdFileName = "node-id";
// Node ids created here are in [1, kMaxNodeId].
inline constexpr int64_t kMaxNodeId = 2147483647;  // 2^31 - 1

// Returns the id stored in `<data_dir>/node-id`. When the file is missing, creates `data_dir` if
// needed, picks a random id in [1, kMaxNodeId], writes the file durably with Env::WriteFileAtomic
// and returns the id; a failed write returns the error and leaves no `node-id` behind. A file that
// does not parse (bad line, checksum, range, unknown version) is Corruption naming the file and
// the fix (delete it to get a new id). Not safe against two processes sharing `data_dir` at once
// (the server holds the data directory exclusively).
Result<NodeId> LoadOrCreateNodeId(Env* env, const std::string& data_dir);

// The file contents for `id`: "sediment-node-id v1 <id> <crc32c as 8 lowercase hex digits>\n".
std::string EncodeNodeIdFile(NodeId id);
// Parses contents written by EncodeNodeIdFile (the trailing newline is optional). Corruption on
// anything else.
Result<NodeId> DecodeNodeIdFile(std::string_view contents);

}  // namespace sediment
