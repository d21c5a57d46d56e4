#include "cluster/heartbeat.h"

#include <limits>

#include "common/checksum.h"
#include "common/coding.h"

namespace sediment {
namespace {

constexpr std::string_view kMagic = "SDHB";
constexpr uint8_t kVersion = 3;
constexpr uint8_t kMinVersion = 1;
// magic + version + CRC
constexpr size_t kMinSize = 4 + 1 + 4;
// Smallest encoded PartitionProgress: five one-byte varints.
constexpr size_t kMinPartitionBytes = 5;
// Smallest encoded LostOffsetsReport (four one-byte varints) and range (three).
constexpr size_t kMinLostBytes = 4;
constexpr size_t kMinRangeBytes = 3;

Status Bad(const std::string& what) { return Status::Corruption("heartbeat: " + what); }

}  // namespace

std::string EncodeHeartbeat(const Heartbeat& hb) {
  std::string out;
  out.reserve(64 + hb.address.size() + hb.version.size() + hb.partitions.size() * 16);
  out.append(kMagic);
  out.push_back(static_cast<char>(kVersion));
  PutVarsint64(&out, hb.node.value);
  PutLengthPrefixed(&out, hb.address);
  PutVarsint64(&out, hb.sent_ms);
  PutVarsint64(&out, hb.started_ms);
  PutLengthPrefixed(&out, hb.version);
  PutVarsint64(&out, hb.global_applied.value);
  PutVarint64(&out, hb.partitions.size());
  for (const PartitionProgress& p : hb.partitions) {
    PutVarsint64(&out, p.partition.value);
    PutVarsint64(&out, p.epoch.value);
    PutVarsint64(&out, p.next_offset.value);
    PutVarsint64(&out, p.replay_point.value);
    PutVarint64(&out, p.buffered_events);
  }
  PutVarsint64(&out, hb.oldest_snapshot.value);
  const RepairProgress& r = hb.repair;
  for (uint64_t v : {r.pending_segments, r.pending_bytes, r.copied_segments, r.copied_bytes,
                     r.failed, r.corrupt_detected, r.dropped_extra}) {
    PutVarint64(&out, v);
  }
  PutVarint64(&out, hb.lost.size());
  for (const LostOffsetsReport& l : hb.lost) {
    PutVarsint64(&out, l.partition.value);
    PutVarint64(&out, l.range_count);
    PutVarint64(&out, l.offsets);
    const size_t skip = l.ranges.size() > LostOffsetsReport::kMaxRanges
                            ? l.ranges.size() - LostOffsetsReport::kMaxRanges
                            : 0;
    PutVarint64(&out, l.ranges.size() - skip);
    for (size_t i = skip; i < l.ranges.size(); ++i) {
      PutVarsint64(&out, l.ranges[i].first.value);
      PutVarsint64(&out, l.ranges[i].end.value);
      PutVarsint64(&out, l.ranges[i].detected_ms);
    }
  }
  PutFixed32(&out, Crc32c(out));
  return out;
}

Result<Heartbeat> DecodeHeartbeat(std::string_view data) {
  if (data.size() < kMinSize) return Bad("record too short");
  const std::string_view covered = data.substr(0, data.size() - 4);
  if (DecodeFixed32(data.data() + covered.size()) != Crc32c(covered)) {
    return Bad("checksum mismatch");
  }
  if (covered.substr(0, 4) != kMagic) return Bad("bad magic");
  const uint8_t record_version = static_cast<uint8_t>(covered[4]);
  if (record_version < kMinVersion || record_version > kVersion) {
    return Bad("unsupported version " + std::to_string(static_cast<uint8_t>(covered[4])));
  }
  std::string_view in = covered.substr(5);
  Heartbeat hb;
  std::string_view address, version;
  uint64_t count = 0;
  if (!GetVarsint64(&in, &hb.node.value) || !GetLengthPrefixed(&in, &address) ||
      !GetVarsint64(&in, &hb.sent_ms) || !GetVarsint64(&in, &hb.started_ms) ||
      !GetLengthPrefixed(&in, &version) || !GetVarsint64(&in, &hb.global_applied.value) ||
      !GetVarint64(&in, &count)) {
    return Bad("truncated or malformed field");
  }
  if (hb.node.value <= 0) return Bad("node id " + std::to_string(hb.node.value) + " <= 0");
  if (count > in.size() / kMinPartitionBytes) return Bad("partition count exceeds record");
  hb.address = address;
  hb.version = version;
  hb.partitions.reserve(count);
  for (uint64_t i = 0; i < count; ++i) {
    PartitionProgress p;
    int64_t partition = 0;
    if (!GetVarsint64(&in, &partition) || !GetVarsint64(&in, &p.epoch.value) ||
        !GetVarsint64(&in, &p.next_offset.value) || !GetVarsint64(&in, &p.replay_point.value) ||
        !GetVarint64(&in, &p.buffered_events)) {
      return Bad("truncated or malformed partition entry");
    }
    if (partition < 0 || partition > std::numeric_limits<int32_t>::max()) {
      return Bad("partition id out of range");
    }
    p.partition = PartitionId(static_cast<int32_t>(partition));
    hb.partitions.push_back(p);
  }
  if (record_version >= 2) {
    RepairProgress& r = hb.repair;
    bool ok = GetVarsint64(&in, &hb.oldest_snapshot.value);
    for (uint64_t* v : {&r.pending_segments, &r.pending_bytes, &r.copied_segments, &r.copied_bytes,
                        &r.failed, &r.corrupt_detected, &r.dropped_extra}) {
      ok = ok && GetVarint64(&in, v);
    }
    if (!ok) return Bad("truncated or malformed version 2 field");
  }
  if (record_version >= 3) {
    uint64_t lost_count = 0;
    if (!GetVarint64(&in, &lost_count)) return Bad("truncated or malformed lost count");
    if (lost_count > in.size() / kMinLostBytes) return Bad("lost count exceeds record");
    hb.lost.reserve(lost_count);
    for (uint64_t i = 0; i < lost_count; ++i) {
      LostOffsetsReport l;
      int64_t partition = 0;
      uint64_t ranges = 0;
      if (!GetVarsint64(&in, &partition) || !GetVarint64(&in, &l.range_count) ||
          !GetVarint64(&in, &l.offsets) || !GetVarint64(&in, &ranges)) {
        return Bad("truncated or malformed lost offsets entry");
      }
      if (partition < 0 || partition > std::numeric_limits<int32_t>::max()) {
        return Bad("lost offsets partition id out of range");
      }
      if (ranges > LostOffsetsReport::kMaxRanges || ranges > in.size() / kMinRangeBytes) {
        return Bad("lost range count exceeds record");
      }
      l.partition = PartitionId(static_cast<int32_t>(partition));
      l.ranges.resize(ranges);
      for (auto& r : l.ranges) {
        if (!GetVarsint64(&in, &r.first.value) || !GetVarsint64(&in, &r.end.value) ||
            !GetVarsint64(&in, &r.detected_ms)) {
          return Bad("truncated or malformed lost range");
        }
        if (r.end <= r.first) return Bad("empty lost range");
      }
      hb.lost.push_back(std::move(l));
    }
  }
  if (!in.empty()) return Bad("trailing bytes after the last field");
  return hb;
}

}  // namespace sediment
