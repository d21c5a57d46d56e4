#include "query/wire.h"

#include <lz4.h>
#include <zstd.h>

#include <cstdint>
#include <exception>
#include <limits>
#include <memory>
#include <vector>

#include "common/checksum.h"
#include "common/coding.h"
#include "query/aggregate.h"

namespace sediment::query {
namespace {

constexpr char kMagic[4] = {'S', 'Q', 'M', 'S'};
constexpr char kPartialMagic[4] = {'S', 'Q', 'P', 'R'};
constexpr uint8_t kVersion = 1;
// magic, version, codec, reserved (2), body raw length (8), body stored length (8)
constexpr size_t kHeaderSize = 4 + 1 + 1 + 2 + 8 + 8;
constexpr size_t kTrailerSize = 4;  // CRC32C of every preceding byte
constexpr uint64_t kMaxBodySize = uint64_t{1} << 30;
constexpr uint64_t kFlagTruncated = 1;

Status Bad(const std::string& what) { return Status::Corruption("match set: " + what); }
Status BadPartial(const std::string& what) { return Status::Corruption("partial result: " + what); }

// The stats and warnings that start both bodies (WIRE.md).
void PutStatsAndWarnings(const QueryStats& s, const std::vector<std::string>& warnings,
                         std::string* out) {
  for (uint64_t v : {s.segments_total, s.segments_scanned, s.blocks_total, s.blocks_scanned,
                     s.events_scanned, s.events_matched, s.bytes_scanned}) {
    PutVarint64(out, v);
  }
  PutVarsint64(out, s.elapsed_ms);
  PutVarint64(out, warnings.size());
  for (const std::string& w : warnings) PutLengthPrefixed(out, w);
}

// Reads what PutStatsAndWarnings wrote from the front of *in; `bad` makes the error.
Status GetStatsAndWarnings(std::string_view* in, QueryStats* s, std::vector<std::string>* warnings,
                           Status (*bad)(const std::string&)) {
  for (uint64_t* v :
       {&s->segments_total, &s->segments_scanned, &s->blocks_total, &s->blocks_scanned,
        &s->events_scanned, &s->events_matched, &s->bytes_scanned}) {
    if (!GetVarint64(in, v)) return bad("truncated stats");
  }
  if (!GetVarsint64(in, &s->elapsed_ms)) return bad("truncated stats");
  uint64_t n_warnings;
  if (!GetVarint64(in, &n_warnings) || n_warnings > in->size()) return bad("bad warning count");
  for (uint64_t i = 0; i < n_warnings; ++i) {
    std::string_view w;
    if (!GetLengthPrefixed(in, &w)) return bad("truncated warning " + std::to_string(i));
    warnings->emplace_back(w);
  }
  return Status::OK();
}

void EncodeBody(const MatchSet& set, std::string* out) {
  PutVarint64(out, set.truncated ? kFlagTruncated : 0);
  PutStatsAndWarnings(set.stats, set.warnings, out);
  PutVarint64(out, set.sources.size());
  static const std::vector<PositionedEvent> kEmpty;
  std::vector<Event> events;
  for (const BufferedSource& src : set.sources) {
    PutLengthPrefixed(out, src.datasource.repo);
    PutVarint64(out, src.datasource.tags.size());
    for (const auto& [name, value] : src.datasource.tags) {
      PutLengthPrefixed(out, name);
      PutLengthPrefixed(out, value);
    }
    PutVarsint64(out, src.partition.value);
    const std::vector<PositionedEvent>& pes = src.events ? *src.events : kEmpty;
    PutVarint64(out, pes.size());
    for (const PositionedEvent& pe : pes) {
      PutVarsint64(out, pe.pos.offset.value);
      PutVarint32(out, pe.pos.index);
    }
    // EncodeEvents takes Events; copy them out of their positions (one source at a time).
    events.clear();
    events.reserve(pes.size());
    for (const PositionedEvent& pe : pes) events.push_back(pe.event);
    EncodeEvents(events, out);
  }
}

Status DecodeBody(std::string_view in, MatchSet* set) {
  uint64_t flags;
  if (!GetVarint64(&in, &flags)) return Bad("truncated flags");
  if ((flags & ~kFlagTruncated) != 0) return Bad("unknown flags " + std::to_string(flags));
  set->truncated = (flags & kFlagTruncated) != 0;
  RETURN_IF_ERROR(GetStatsAndWarnings(&in, &set->stats, &set->warnings, &Bad));

  uint64_t n_sources;
  if (!GetVarint64(&in, &n_sources) || n_sources > in.size()) return Bad("bad source count");
  set->sources.reserve(n_sources);
  for (uint64_t si = 0; si < n_sources; ++si) {
    const std::string where = "source " + std::to_string(si);
    BufferedSource src;
    std::string_view repo;
    uint64_t n_tags;
    if (!GetLengthPrefixed(&in, &repo) || !GetVarint64(&in, &n_tags) || n_tags > in.size()) {
      return Bad(where + ": bad datasource");
    }
    src.datasource.repo.assign(repo);
    src.datasource.tags.reserve(n_tags);
    for (uint64_t t = 0; t < n_tags; ++t) {
      std::string_view name, value;
      if (!GetLengthPrefixed(&in, &name) || !GetLengthPrefixed(&in, &value)) {
        return Bad(where + ": truncated tag " + std::to_string(t));
      }
      src.datasource.tags.emplace_back(std::string(name), std::string(value));
    }
    int64_t partition;
    if (!GetVarsint64(&in, &partition) || partition < std::numeric_limits<int32_t>::min() ||
        partition > std::numeric_limits<int32_t>::max()) {
      return Bad(where + ": bad partition");
    }
    src.partition = PartitionId(static_cast<int32_t>(partition));
    uint64_t n_events;
    // Each event takes at least six bytes: two for its position, four in the event block.
    if (!GetVarint64(&in, &n_events) || n_events > in.size() / 6) {
      return Bad(where + ": bad event count");
    }
    std::vector<Position> positions(n_events);
    for (Position& p : positions) {
      if (!GetVarsint64(&in, &p.offset.value) || !GetVarint32(&in, &p.index)) {
        return Bad(where + ": truncated positions");
      }
    }
    // The event block's own count must agree before DecodeEvents reserves for it.
    std::string_view peek = in;
    uint64_t n_block;
    if (!GetVarint64(&peek, &n_block)) return Bad(where + ": truncated events");
    if (n_block != n_events) {
      return Bad(where + ": " + std::to_string(n_block) + " events for " +
                 std::to_string(n_events) + " positions");
    }
    std::vector<Event> events;
    Status st = DecodeEvents(&in, &events);
    if (!st.ok()) return Bad(where + ": " + st.message());
    if (events.size() != n_events) return Bad(where + ": event count mismatch");
    auto pes = std::make_shared<std::vector<PositionedEvent>>(n_events);
    for (uint64_t i = 0; i < n_events; ++i) {
      (*pes)[i].pos = positions[i];
      (*pes)[i].event = std::move(events[i]);
    }
    src.events = std::move(pes);
    set->sources.push_back(std::move(src));
  }
  if (!in.empty()) return Bad(std::to_string(in.size()) + " trailing bytes in body");
  return Status::OK();
}

// A frame (WIRE.md) with `magic` around `body`, compressed with `codec` when that shrinks it.
std::string EncodeFrame(const char* magic, const std::string& body, Codec codec) {
  std::string stored;
  switch (codec) {
    case Codec::kNone:
      break;
    case Codec::kLz4: {
      if (body.size() > static_cast<size_t>(LZ4_MAX_INPUT_SIZE)) {
        codec = Codec::kNone;
        break;
      }
      stored.resize(static_cast<size_t>(LZ4_compressBound(static_cast<int>(body.size()))));
      int n = LZ4_compress_default(body.data(), stored.data(), static_cast<int>(body.size()),
                                   static_cast<int>(stored.size()));
      if (n <= 0) {
        codec = Codec::kNone;
      } else {
        stored.resize(static_cast<size_t>(n));
      }
      break;
    }
    case Codec::kZstd: {
      stored.resize(ZSTD_compressBound(body.size()));
      size_t n = ZSTD_compress(stored.data(), stored.size(), body.data(), body.size(), 1);
      if (ZSTD_isError(n)) {
        codec = Codec::kNone;
      } else {
        stored.resize(n);
      }
      break;
    }
  }
  if (codec != Codec::kNone && stored.size() >= body.size()) codec = Codec::kNone;
  const std::string& payload = codec == Codec::kNone ? body : stored;

  std::string out;
  out.reserve(kHeaderSize + payload.size() + kTrailerSize);
  out.append(magic, 4);
  out.push_back(static_cast<char>(kVersion));
  out.push_back(static_cast<char>(codec));
  out.append(2, '\0');
  PutFixed64(&out, body.size());
  PutFixed64(&out, payload.size());
  out.append(payload);
  PutFixed32(&out, Crc32c(out));
  return out;
}

// Verifies a frame with `magic` and returns its body (decompressed into *storage when needed).
Status DecodeFrame(const char* magic, std::string_view data, std::string* storage,
                   std::string_view* out, Status (*bad)(const std::string&)) {
  auto Bad = bad;
  if (data.size() < kHeaderSize + kTrailerSize) {
    return Bad("too short (" + std::to_string(data.size()) + " bytes)");
  }
  if (data.substr(0, 4) != std::string_view(magic, 4)) return Bad("bad magic");
  const uint8_t version = static_cast<uint8_t>(data[4]);
  if (version != kVersion) return Bad("unsupported version " + std::to_string(version));
  const uint64_t raw_len = DecodeFixed64(data.data() + 8);
  const uint64_t stored_len = DecodeFixed64(data.data() + 16);
  if (stored_len != data.size() - kHeaderSize - kTrailerSize) {
    return Bad("stored length " + std::to_string(stored_len) + " does not match the " +
               std::to_string(data.size()) + "-byte message");
  }
  const size_t crc_at = data.size() - kTrailerSize;
  if (Crc32c(data.substr(0, crc_at)) != DecodeFixed32(data.data() + crc_at)) {
    return Bad("checksum mismatch");
  }
  if (data[6] != 0 || data[7] != 0) return Bad("reserved header bytes are not zero");
  if (raw_len > kMaxBodySize) return Bad("body of " + std::to_string(raw_len) + " bytes too large");
  const std::string_view stored = data.substr(kHeaderSize, stored_len);

  std::string& body = *storage;
  std::string_view& in = *out;
  const auto codec = static_cast<Codec>(data[5]);
  switch (codec) {
    case Codec::kNone:
      if (raw_len != stored_len) return Bad("raw length differs from stored length");
      in = stored;
      break;
    case Codec::kLz4: {
      if (stored_len > static_cast<uint64_t>(std::numeric_limits<int>::max())) {
        return Bad("lz4 body too large");
      }
      body.resize(raw_len);
      int n = LZ4_decompress_safe(stored.data(), body.data(), static_cast<int>(stored.size()),
                                  static_cast<int>(raw_len));
      if (n < 0 || static_cast<uint64_t>(n) != raw_len) return Bad("lz4 body does not decompress");
      in = body;
      break;
    }
    case Codec::kZstd: {
      body.resize(raw_len);
      size_t n = ZSTD_decompress(body.data(), body.size(), stored.data(), stored.size());
      if (ZSTD_isError(n) || n != raw_len) return Bad("zstd body does not decompress");
      in = body;
      break;
    }
    default:
      return Bad("unknown codec " + std::to_string(static_cast<uint8_t>(data[5])));
  }
  return Status::OK();
}

}  // namespace

std::string EncodeMatchSet(const MatchSet& set, Codec codec) {
  std::string body;
  EncodeBody(set, &body);
  return EncodeFrame(kMagic, body, codec);
}

Result<MatchSet> DecodeMatchSet(std::string_view data) {
  std::string storage;
  std::string_view in;
  RETURN_IF_ERROR(DecodeFrame(kMagic, data, &storage, &in, &Bad));
  MatchSet set;
  try {
    RETURN_IF_ERROR(DecodeBody(in, &set));
  } catch (const std::exception& e) {  // allocation failure on hostile counts
    return Bad(std::string("cannot be decoded: ") + e.what());
  }
  return set;
}

std::string EncodePartial(const PartialResult& partial, Codec codec) {
  std::string body;
  PutStatsAndWarnings(partial.stats, partial.warnings, &body);
  if (partial.collector != nullptr) {
    std::string state;
    partial.collector->Encode(&state);
    PutLengthPrefixed(&body, state);
  } else {
    PutLengthPrefixed(&body, partial.state);
  }
  return EncodeFrame(kPartialMagic, body, codec);
}

Result<PartialResult> DecodePartial(std::string_view data) {
  std::string storage;
  std::string_view in;
  RETURN_IF_ERROR(DecodeFrame(kPartialMagic, data, &storage, &in, &BadPartial));
  PartialResult p;
  RETURN_IF_ERROR(GetStatsAndWarnings(&in, &p.stats, &p.warnings, &BadPartial));
  std::string_view state;
  if (!GetLengthPrefixed(&in, &state)) return BadPartial("truncated collector state");
  if (!in.empty()) return BadPartial(std::to_string(in.size()) + " trailing bytes in body");
  p.state.assign(state);
  return p;
}

}  // namespace sediment::query
