#include "segment/file_name.h"

#include <limits>

namespace sediment {
namespace {

constexpr std::string_view kSuffix = ".seg";

std::string Hex8(uint32_t v) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(8, '0');
  for (int i = 7; i >= 0; --i, v >>= 4) out[static_cast<size_t>(i)] = kHex[v & 0xf];
  return out;
}

// Reads a name left to right; every step fails (returns false) without consuming on a mismatch.
class Cursor {
 public:
  explicit Cursor(std::string_view s) : s_(s) {}

  bool Literal(std::string_view lit) {
    if (!s_.starts_with(lit)) return false;
    s_.remove_prefix(lit.size());
    return true;
  }
  // A decimal number as std::to_string writes a non-negative value: "0" or no leading zero,
  // at most `max`.
  bool Number(uint64_t max, uint64_t* out) {
    size_t n = 0;
    while (n < s_.size() && s_[n] >= '0' && s_[n] <= '9') ++n;
    if (n == 0 || (n > 1 && s_[0] == '0') || n > 19) return false;
    uint64_t v = 0;
    for (size_t i = 0; i < n; ++i) v = v * 10 + static_cast<uint64_t>(s_[i] - '0');
    if (v > max) return false;
    s_.remove_prefix(n);
    *out = v;
    return true;
  }
  bool Hex8(uint32_t* out) {
    if (s_.size() < 8) return false;
    uint32_t v = 0;
    for (size_t i = 0; i < 8; ++i) {
      const char c = s_[i];
      uint32_t d = 0;
      if (c >= '0' && c <= '9') {
        d = static_cast<uint32_t>(c - '0');
      } else if (c >= 'a' && c <= 'f') {
        d = static_cast<uint32_t>(c - 'a' + 10);
      } else {
        return false;
      }
      v = (v << 4) | d;
    }
    s_.remove_prefix(8);
    *out = v;
    return true;
  }
  bool AtEnd() const { return s_.empty(); }

 private:
  std::string_view s_;
};

constexpr uint64_t kMaxI32 = static_cast<uint64_t>(std::numeric_limits<int32_t>::max());
constexpr uint64_t kMaxI64 = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
constexpr uint64_t kMaxU32 = std::numeric_limits<uint32_t>::max();

// "p<partition>" then, when `with_epoch`, "-e<epoch>", then "-o<offset>-i<index>".
bool ParseCommon(Cursor* c, bool with_epoch, SegmentFileName* out) {
  uint64_t partition = 0, epoch = 0, offset = 0, index = 0;
  if (!c->Literal("p") || !c->Number(kMaxI32, &partition)) return false;
  if (with_epoch && (!c->Literal("-e") || !c->Number(kMaxI64, &epoch))) return false;
  if (!c->Literal("-o") || !c->Number(kMaxI64, &offset)) return false;
  if (!c->Literal("-i") || !c->Number(kMaxU32, &index)) return false;
  out->partition = PartitionId(static_cast<int32_t>(partition));
  out->epoch = Epoch(static_cast<int64_t>(epoch));
  out->first = Position{Offset(static_cast<int64_t>(offset)), static_cast<uint32_t>(index)};
  return true;
}

bool ParseShapes(std::string_view name, SegmentFileName* out) {
  Cursor c(name);
  if (c.Literal("m-")) {
    out->kind = SegmentFileKind::kMerged;
    uint64_t node = 0;
    if (!ParseCommon(&c, false, out) || !c.Literal("-n") || !c.Number(kMaxI64, &node)) {
      return false;
    }
    out->node = NodeId(static_cast<int64_t>(node));
    return c.Literal("-") && c.Hex8(&out->random) && c.Literal(kSuffix) && c.AtEnd();
  }
  if (c.Literal("r-")) {
    out->kind = SegmentFileKind::kRebuilt;
    return ParseCommon(&c, true, out) && c.Literal("-") && c.Hex8(&out->random) &&
           c.Literal(kSuffix) && c.AtEnd();
  }
  out->kind = SegmentFileKind::kFlushed;
  return ParseCommon(&c, true, out) && c.Literal(kSuffix) && c.AtEnd();
}

bool NameByte(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}

}  // namespace

bool IsValidSegmentFileName(std::string_view name) {
  if (name.size() <= kSuffix.size() || name.size() > kMaxSegmentFileNameBytes) return false;
  if (!name.ends_with(kSuffix) || name.front() == '.') return false;
  if (name.find("..") != std::string_view::npos) return false;
  for (char c : name) {
    if (!NameByte(c)) return false;
  }
  return true;
}

std::string SegmentFileName::Format() const {
  const std::string pos =
      "-o" + std::to_string(first.offset.value) + "-i" + std::to_string(first.index);
  const std::string p = "p" + std::to_string(partition.value);
  switch (kind) {
    case SegmentFileKind::kFlushed:
      return p + "-e" + std::to_string(epoch.value) + pos + std::string(kSuffix);
    case SegmentFileKind::kRebuilt:
      return "r-" + p + "-e" + std::to_string(epoch.value) + pos + "-" + Hex8(random) +
             std::string(kSuffix);
    case SegmentFileKind::kMerged:
      return "m-" + p + pos + "-n" + std::to_string(node.value) + "-" + Hex8(random) +
             std::string(kSuffix);
  }
  return {};
}

std::string FlushedSegmentFileName(PartitionId partition, Epoch epoch, Position first) {
  return SegmentFileName{SegmentFileKind::kFlushed, partition, epoch, first, NodeId(0), 0}.Format();
}

std::string RebuiltSegmentFileName(PartitionId partition, Epoch epoch, Position first,
                                   uint32_t random) {
  return SegmentFileName{SegmentFileKind::kRebuilt, partition, epoch, first, NodeId(0), random}
      .Format();
}

std::string MergedSegmentFileName(PartitionId partition, Position first, NodeId node,
                                  uint32_t random) {
  return SegmentFileName{SegmentFileKind::kMerged, partition, Epoch(0), first, node, random}
      .Format();
}

Result<SegmentFileName> ParseSegmentFileName(std::string_view name) {
  SegmentFileName out;
  if (!IsValidSegmentFileName(name) || !ParseShapes(name, &out)) {
    return Status::InvalidArgument("'" + std::string(name.substr(0, kMaxSegmentFileNameBytes)) +
                                   "' is not a segment file name sediment writes");
  }
  return out;
}

}  // namespace sediment
