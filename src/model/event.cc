#include "model/event.h"

#include <cstring>

#include <lz4.h>
#include <zstd.h>

#include <algorithm>
#include <numeric>
#include <stdexcept>

#include "common/checksum.h"
#include "common/coding.h"

namespace sediment {
namespace {
constexpr char kMagic[4] = {'S', 'D', 'I', 'M'};
constexpr uint8_t kVersion = 2;                    // 2 added the message id; 1 is still read
constexpr size_t kHeaderSize = 4 + 1 + 1 + 4 + 4;  // magic, version, codec, raw length, crc
constexpr uint32_t kMaxRawSize = 256u << 20;
}  // namespace

const std::string* Event::Find(std::string_view name) const {
  for (const auto& f : fields) {
    if (f.name == name) return &f.value;
  }
  return nullptr;
}

size_t Event::ByteSizeOf(size_t raw_bytes, const std::vector<Field>& fields) {
  size_t n = 24 + raw_bytes;
  for (const auto& f : fields) n += f.name.size() + f.value.size() + 4;
  return n;
}

void Datasource::Normalize() {
  std::stable_sort(tags.begin(), tags.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::pair<std::string, std::string>> out;
  for (auto& t : tags) {
    if (!out.empty() && out.back().first == t.first) {
      out.back().second = std::move(t.second);
    } else {
      out.push_back(std::move(t));
    }
  }
  tags = std::move(out);
}

std::string Datasource::Key() const {
  std::string k = repo;
  for (const auto& [name, value] : tags) {
    k.push_back('\x1f');
    k.append(name);
    k.push_back('=');
    k.append(value);
  }
  return k;
}

PartitionId Datasource::PartitionFor(int32_t partition_count) const {
  return ShardPartition(Hash64(Key()), 0, partition_count);
}

PartitionId ShardPartition(uint64_t key_hash, int32_t shard, int32_t partition_count) {
  const uint64_t n = static_cast<uint64_t>(partition_count);
  const uint64_t base = key_hash % n;  // shard 0: what PartitionFor always answered
  if (shard <= 0 || n == 1) return PartitionId(static_cast<int32_t>(base));
  // A stride in [1, n) from the hash's high bits, moved up to the next value coprime with n (1 is
  // coprime with every n, so the search ends), makes i -> base + i * stride a permutation mod n.
  uint64_t stride = 1 + ((key_hash >> 32) % (n - 1));
  while (std::gcd(stride, n) != 1) stride = stride % (n - 1) + 1;
  const uint64_t i = static_cast<uint64_t>(shard) % n;
  return PartitionId(static_cast<int32_t>((base + i * stride) % n));
}

void EncodeEvents(const std::vector<Event>& events, std::string* out) {
  PutVarint64(out, events.size());
  for (const auto& e : events) {
    PutVarsint64(out, e.timestamp_ms);
    PutVarsint64(out, e.ingest_ms);
    PutLengthPrefixed(out, e.raw);
    PutVarint64(out, e.fields.size());
    for (const auto& f : e.fields) {
      PutLengthPrefixed(out, f.name);
      PutLengthPrefixed(out, f.value);
    }
  }
}

Status DecodeEvents(std::string_view* in, std::vector<Event>* out) {
  uint64_t n;
  if (!GetVarint64(in, &n) || n > in->size()) return Status::Corruption("bad event count");
  out->reserve(out->size() + n);
  const size_t first = out->size();
  // Built in place; on corruption the events of this call are removed again.
  auto corrupt = [&](std::string what) {
    out->resize(first);
    return Status::Corruption(std::move(what));
  };
  for (uint64_t i = 0; i < n; ++i) {
    Event& e = out->emplace_back();
    std::string_view raw;
    uint64_t nf;
    if (!GetVarsint64(in, &e.timestamp_ms) || !GetVarsint64(in, &e.ingest_ms) ||
        !GetLengthPrefixed(in, &raw) || !GetVarint64(in, &nf) || nf > in->size()) {
      return corrupt("truncated event " + std::to_string(i));
    }
    e.raw.assign(raw);
    e.fields.resize(nf);
    for (Field& f : e.fields) {
      std::string_view name, value;
      if (!GetLengthPrefixed(in, &name) || !GetLengthPrefixed(in, &value)) {
        return corrupt("truncated field in event " + std::to_string(i));
      }
      f.name.assign(name);
      f.value.assign(value);
    }
  }
  return Status::OK();
}

namespace {

// The payload's bytes before the events (id and datasource), and an upper bound of their size.
size_t HeadEstimate(const Datasource& ds) {
  size_t n = 8 + 5 + ds.repo.size() + 10 + 10;
  for (const auto& [name, value] : ds.tags) n += 10 + name.size() + value.size();
  return n;
}
void PutHead(uint64_t id, const Datasource& ds, std::string* payload) {
  PutFixed64(payload, id);
  PutLengthPrefixed(payload, ds.repo);
  PutVarint64(payload, ds.tags.size());
  for (const auto& [name, value] : ds.tags) {
    PutLengthPrefixed(payload, name);
    PutLengthPrefixed(payload, value);
  }
}

// The record of `payload`: the header and the payload compressed with `codec`.
std::string SealRecord(const std::string& payload, Codec codec) {
  // Compressed into a per-thread scratch buffer (it only grows, up to kKeptScratchBytes: no
  // zero-fill of the worst-case bound per message), then copied after the header into a record
  // of exactly its size. Larger messages use a buffer of their own.
  constexpr size_t kKeptScratchBytes = 4u << 20;
  thread_local std::string kept_scratch;
  std::string own_scratch;
  auto scratch_of = [&](size_t bound) -> std::string& {
    std::string& s = bound <= kKeptScratchBytes ? kept_scratch : own_scratch;
    if (s.size() < bound) s.resize(bound);
    return s;
  };
  std::string_view body;
  switch (codec) {
    case Codec::kNone:
      body = payload;
      break;
    case Codec::kLz4: {
      const int bound = LZ4_compressBound(static_cast<int>(payload.size()));
      std::string& scratch = scratch_of(static_cast<size_t>(bound));
      const int n = LZ4_compress_default(payload.data(), scratch.data(),
                                         static_cast<int>(payload.size()), bound);
      if (n <= 0 && !payload.empty()) throw std::runtime_error("lz4 compression failed");
      body = std::string_view(scratch.data(), static_cast<size_t>(std::max(n, 0)));
      break;
    }
    case Codec::kZstd: {
      const size_t bound = ZSTD_compressBound(payload.size());
      std::string& scratch = scratch_of(bound);
      const size_t n = ZSTD_compress(scratch.data(), bound, payload.data(), payload.size(), 1);
      if (ZSTD_isError(n)) throw std::runtime_error("zstd compression failed");
      body = std::string_view(scratch.data(), n);
      break;
    }
  }
  std::string out;
  out.reserve(kHeaderSize + body.size());
  out.append(kMagic, 4);
  out.push_back(static_cast<char>(kVersion));
  out.push_back(static_cast<char>(codec));
  PutFixed32(&out, static_cast<uint32_t>(payload.size()));
  PutFixed32(&out, Crc32c(body));
  out.append(body);
  return out;
}

}  // namespace

std::string EncodeIngestMessage(const IngestMessage& msg, Codec codec) {
  // Sized once: the encoding of an event is at most its ByteSize() + 11 + 6 per field (varints of
  // the timestamps, lengths and counts beyond what ByteSize counts).
  size_t estimate = HeadEstimate(msg.datasource);
  for (const Event& e : msg.events) estimate += e.ByteSize() + 11 + 6 * e.fields.size();
  std::string payload;
  payload.reserve(estimate);
  PutHead(msg.id, msg.datasource, &payload);
  EncodeEvents(msg.events, &payload);
  return SealRecord(payload, codec);
}

std::string EncodeIngestLines(uint64_t id, const Datasource& datasource, int64_t timestamp_ms,
                              int64_t ingest_ms, const std::vector<Field>& fields,
                              std::span<const std::string_view> raws, Codec codec) {
  // The event encoding of EncodeEvents, with what every event shares encoded once.
  std::string shared_head;  // the timestamps
  PutVarsint64(&shared_head, timestamp_ms);
  PutVarsint64(&shared_head, ingest_ms);
  std::string shared_tail;  // the fields
  PutVarint64(&shared_tail, fields.size());
  for (const Field& f : fields) {
    PutLengthPrefixed(&shared_tail, f.name);
    PutLengthPrefixed(&shared_tail, f.value);
  }
  size_t estimate = HeadEstimate(datasource) + 10;
  for (std::string_view raw : raws) {
    estimate += shared_head.size() + 10 + raw.size() + shared_tail.size();
  }
  std::string payload;
  payload.reserve(estimate);
  PutHead(id, datasource, &payload);
  PutVarint64(&payload, raws.size());
  for (std::string_view raw : raws) {
    payload.append(shared_head);
    PutLengthPrefixed(&payload, raw);
    payload.append(shared_tail);
  }
  return SealRecord(payload, codec);
}

Result<IngestMessage> DecodeIngestMessage(std::string_view data) {
  if (data.size() < kHeaderSize ||
      std::string_view(data.data(), 4) != std::string_view(kMagic, 4)) {
    return Status::Corruption("ingest message: bad magic");
  }
  uint8_t version = static_cast<uint8_t>(data[4]);
  if (version != kVersion && version != 1) {
    return Status::Corruption("ingest message: unsupported version " + std::to_string(version));
  }
  auto codec = static_cast<Codec>(data[5]);
  uint32_t raw_len = DecodeFixed32(data.data() + 6);
  uint32_t crc = DecodeFixed32(data.data() + 10);
  std::string_view body = data.substr(kHeaderSize);
  if (Crc32c(body) != crc) return Status::Corruption("ingest message: checksum mismatch");
  if (raw_len > kMaxRawSize) return Status::Corruption("ingest message: payload too large");

  std::string payload;
  switch (codec) {
    case Codec::kNone:
      payload.assign(body);
      break;
    case Codec::kLz4: {
      payload.resize(raw_len);
      int n = LZ4_decompress_safe(body.data(), payload.data(), static_cast<int>(body.size()),
                                  static_cast<int>(raw_len));
      if (n < 0 || static_cast<uint32_t>(n) != raw_len)
        return Status::Corruption("ingest message: lz4 payload does not decompress");
      break;
    }
    case Codec::kZstd: {
      payload.resize(raw_len);
      size_t n = ZSTD_decompress(payload.data(), raw_len, body.data(), body.size());
      if (ZSTD_isError(n) || n != raw_len)
        return Status::Corruption("ingest message: zstd payload does not decompress");
      break;
    }
    default:
      return Status::Corruption("ingest message: unknown codec");
  }
  if (payload.size() != raw_len) return Status::Corruption("ingest message: length mismatch");

  IngestMessage msg;
  std::string_view in = payload;
  if (version >= 2) {
    uint64_t id;
    if (!GetFixed64(&in, &id)) return Status::Corruption("ingest message: bad id");
    msg.id = id;
  }
  std::string_view repo;
  uint64_t ntags;
  if (!GetLengthPrefixed(&in, &repo) || !GetVarint64(&in, &ntags) || ntags > in.size()) {
    return Status::Corruption("ingest message: bad datasource");
  }
  msg.datasource.repo.assign(repo);
  for (uint64_t i = 0; i < ntags; ++i) {
    std::string_view name, value;
    if (!GetLengthPrefixed(&in, &name) || !GetLengthPrefixed(&in, &value)) {
      return Status::Corruption("ingest message: bad tag");
    }
    msg.datasource.tags.emplace_back(std::string(name), std::string(value));
  }
  RETURN_IF_ERROR(DecodeEvents(&in, &msg.events).WithContext("ingest message"));
  if (!in.empty()) return Status::Corruption("ingest message: trailing bytes");
  return msg;
}

}  // namespace sediment
