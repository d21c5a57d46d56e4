// Wire encodings of a MatchSet (a node's answer to a coordinator's CollectMatches request) and
// of a PartialResult (its answer to ExecutePartial).
// Byte layout: query/WIRE.md (format version 1): magic, version, codec, lengths, the body
// (optionally lz4/zstd-compressed) and a CRC32C over every preceding byte.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"
#include "model/event.h"
#include "query/query.h"

namespace sediment::query {

// Encodes `set`. Sources with a null `events` pointer are encoded as empty. `codec` compresses
// the body (kNone when the body is too large for lz4 or does not shrink). The decoder rejects
// bodies above 1 GiB uncompressed (WIRE.md), so callers bound the set (max_events).
std::string EncodeMatchSet(const MatchSet& set, Codec codec = Codec::kLz4);

// Decodes and verifies (magic, version, codec, checksum, every length and count). Any mismatch,
// truncation or trailing byte is a Corruption status with a message; never reads out of bounds.
// Every decoded source has a non-null `events`.
Result<MatchSet> DecodeMatchSet(std::string_view data);

// Encodes a partial result (a segment holder's answer to a coordinator; WIRE.md, "Partial
// results"): stats, warnings and the collector state (`partial.collector` encoded when set, else
// `partial.state`). unreadable_segments are not encoded.
std::string EncodePartial(const PartialResult& partial, Codec codec = Codec::kLz4);
// Decodes and verifies as DecodeMatchSet does; the state is returned in `state` (decoded by
// FinishPartials). Corruption ("partial result: ...") on any fault.
Result<PartialResult> DecodePartial(std::string_view data);

}  // namespace sediment::query
