#include "segment/segment.h"

#include <xxhash.h>
#include <zstd.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <unordered_map>

#include "common/checksum.h"
#include "common/coding.h"
#include "segment/columnar.h"
#include "segment/filter.h"
#include "segment/varint_cursor.h"

namespace sediment {
namespace {

using segment_internal::PutPosition;

// ---- Format constants (FORMAT.md) ----
constexpr uint32_t kFormatVersion1 = 1;
constexpr uint32_t kFormatVersion2 = 2;
// Format 2: column chunks smaller than this are stored uncompressed.
constexpr size_t kMinCompressedChunk = 64;
constexpr char kHeaderMagic[8] = {'S', 'E', 'D', 'I', 'M', 'S', 'E', 'G'};
constexpr char kTrailerMagic[8] = {'S', 'E', 'D', 'I', 'M', 'E', 'N', 'D'};
constexpr size_t kHeaderSize = 16;
constexpr size_t kTrailerSize = 40;
constexpr uint64_t kMaxBlockRawSize = uint64_t{256} << 20;
constexpr uint64_t kMaxFooterSize = uint64_t{1} << 30;
constexpr int kMaxFilterHashes = 8;

struct ZstdCCtxDeleter {
  void operator()(ZSTD_CCtx* c) const { ZSTD_freeCCtx(c); }
};
struct ZstdDCtxDeleter {
  void operator()(ZSTD_DCtx* c) const { ZSTD_freeDCtx(c); }
};
struct XxhDeleter {
  void operator()(XXH64_state_t* s) const { XXH64_freeState(s); }
};

// Per-block metadata stored in the footer beyond BlockInfo.
// Format 2: one column chunk of a block (FORMAT.md "Column entry").
struct ColumnEntry {
  uint64_t id = 0;
  uint8_t codec = 0;  // 0 stored, 1 zstd
  segment_v2::Encoding encoding = segment_v2::kPlain;
  uint32_t stored_size = 0, raw_size = 0;
  uint32_t crc = 0;          // CRC32C of the stored bytes
  int64_t min = 0, max = 0;  // kInt columns
  uint64_t file_offset = 0;  // derived: where the chunk starts
};
constexpr uint8_t kCodecStored = 0;
constexpr uint8_t kCodecZstd = 1;

struct BlockExtra {
  uint32_t crc = 0;            // format 1: CRC32C of the stored block
  uint64_t filter_offset = 0;  // within the filter area
  uint64_t filter_size = 0;
  uint8_t filter_hashes = 0;
  std::vector<ColumnEntry> columns;  // format 2
};

bool GetPosition(std::string_view* in, Position* p) {
  int64_t off;
  uint32_t idx;
  if (!GetVarsint64(in, &off) || !GetVarint32(in, &idx)) return false;
  *p = Position{Offset(off), idx};
  return true;
}

// Per-thread zstd decompression context, shared by readers and by writers copying blocks.
thread_local std::unique_ptr<ZSTD_DCtx, ZstdDCtxDeleter> tls_dctx;

// Decompresses format 2 chunk `z` (codec zstd, `raw_size` bytes of content) into `*out`; false
// when the frame's recorded size differs or it does not decompress to exactly raw_size bytes.
bool DecompressChunk(std::string_view z, uint32_t raw_size, std::string* out) {
  if (!tls_dctx) {
    tls_dctx.reset(ZSTD_createDCtx());
    if (!tls_dctx) return false;
  }
  if (ZSTD_getFrameContentSize(z.data(), z.size()) != raw_size) return false;
  out->resize(raw_size);
  const size_t got =
      ZSTD_decompressDCtx(tls_dctx.get(), out->data(), out->size(), z.data(), z.size());
  return !ZSTD_isError(got) && got == raw_size;
}

// ---- Writer ----

// Appends to the file and feeds the content hash. The hash covers every byte but the last 8.
class HashingSink {
 public:
  HashingSink(WritableFile* f, XXH64_state_t* st) : f_(f), st_(st) {}
  Status Append(std::string_view data, bool hash = true) {
    if (hash) XXH64_update(st_, data.data(), data.size());
    written_ += data.size();
    return f_->Append(data);
  }
  uint64_t written() const { return written_; }

 private:
  WritableFile* f_;
  XXH64_state_t* st_;
  uint64_t written_ = 0;
};

// Builds the uncompressed column layout of one block (FORMAT.md "Block content"). Reusable.
class BlockEncoder {
 public:
  void Encode(const PositionedEvent* ev, size_t n, std::string* out) {
    names_.clear();
    name_list_.clear();
    ts_.clear();
    ingest_.clear();
    pos_.clear();
    raw_len_.clear();
    field_count_.clear();
    name_ids_.clear();
    values_.clear();
    raw_run_.clear();
    value_run_.clear();
    size_t total_fields = 0;
    for (size_t i = 0; i < n; ++i) {
      const Event& e = ev[i].event;
      if (i == 0) {
        PutVarsint64(&ts_, e.timestamp_ms);
        PutVarsint64(&ingest_, e.ingest_ms);
        PutPosition(&pos_, ev[i].pos);
      } else {
        const Event& p = ev[i - 1].event;
        PutVarsint64(&ts_, static_cast<int64_t>(static_cast<uint64_t>(e.timestamp_ms) -
                                                static_cast<uint64_t>(p.timestamp_ms)));
        PutVarsint64(&ingest_, static_cast<int64_t>(static_cast<uint64_t>(e.ingest_ms) -
                                                    static_cast<uint64_t>(p.ingest_ms)));
        const Position a = ev[i - 1].pos, b = ev[i].pos;
        uint64_t d = static_cast<uint64_t>(b.offset.value) - static_cast<uint64_t>(a.offset.value);
        PutVarint64(&pos_, d);
        PutVarint32(&pos_, d == 0 ? b.index - a.index - 1 : b.index);
      }
      PutVarint64(&raw_len_, e.raw.size());
      raw_run_.append(e.raw);
      PutVarint64(&field_count_, e.fields.size());
      total_fields += e.fields.size();
      size_t prev_end = 0;
      for (const Field& f : e.fields) {
        auto [it, inserted] = names_.try_emplace(f.name, static_cast<uint32_t>(name_list_.size()));
        if (inserted) name_list_.push_back(&f.name);
        PutVarint32(&name_ids_, it->second);
        // A value that occurs in the event's raw text is stored as a reference into it, relative
        // to the end of the previous reference (parsed fields usually follow the text's order).
        size_t at = std::string::npos;
        if (!f.value.empty()) {
          at = e.raw.find(f.value, prev_end);
          if (at == std::string::npos) at = e.raw.find(f.value);
        }
        if (at != std::string::npos) {
          const int64_t delta = static_cast<int64_t>(at) - static_cast<int64_t>(prev_end);
          PutVarint64(
              &values_,
              ((static_cast<uint64_t>(delta) << 1) ^ static_cast<uint64_t>(delta >> 63)) + 1);
          prev_end = at + f.value.size();
        } else {
          PutVarint64(&values_, 0);
          value_run_.append(f.value);
        }
        PutVarint64(&values_, f.value.size());
      }
    }
    out->clear();
    PutVarint64(out, n);
    PutVarint64(out, total_fields);
    PutVarint64(out, name_list_.size());
    PutVarint64(out, raw_run_.size());
    PutVarint64(out, value_run_.size());
    for (const std::string* name : name_list_) PutLengthPrefixed(out, *name);
    for (const std::string* col : {&ts_, &ingest_, &pos_, &raw_len_, &field_count_, &name_ids_,
                                   &values_, &raw_run_, &value_run_}) {
      out->append(*col);
    }
  }

 private:
  std::unordered_map<std::string_view, uint32_t> names_;
  std::vector<const std::string*> name_list_;
  std::string ts_, ingest_, pos_, raw_len_, field_count_, name_ids_, values_;
  std::string raw_run_, value_run_;
};

size_t EventEstimate(const Event& e) {
  size_t s = e.raw.size() + 16;
  for (const Field& f : e.fields) s += f.name.size() + f.value.size() + 4;
  return s;
}

Status ValidateOptions(const SegmentWriterOptions& o) {
  if (o.format_version != kFormatVersion1 && o.format_version != kFormatVersion2)
    return Status::InvalidArgument("segment: unknown format version");
  if (o.block_raw_bytes == 0 || o.block_raw_bytes > kMaxBlockRawSize / 2)
    return Status::InvalidArgument("segment: block_raw_bytes out of range");
  if (o.zstd_level < ZSTD_minCLevel() || o.zstd_level > ZSTD_maxCLevel() ||
      o.column_zstd_level < ZSTD_minCLevel() || o.column_zstd_level > ZSTD_maxCLevel())
    return Status::InvalidArgument("segment: zstd level out of range");
  if (o.filter_hashes < 0 || o.filter_hashes > kMaxFilterHashes ||
      !(o.filter_bits_per_gram >= 0 && o.filter_bits_per_gram <= 64))
    return Status::InvalidArgument("segment: filter options out of range");
  return Status::OK();
}

Status ValidateWriteArgs(const std::vector<PositionedEvent>& events,
                         const SegmentWriterOptions& o) {
  if (events.empty()) return Status::InvalidArgument("segment: no events");
  RETURN_IF_ERROR(ValidateOptions(o));
  for (size_t i = 0; i < events.size(); ++i) {
    if (i > 0 && !(events[i - 1].pos < events[i].pos))
      return Status::InvalidArgument("segment: events not strictly ordered by position");
    if (EventEstimate(events[i].event) > kMaxBlockRawSize / 2)
      return Status::InvalidArgument("segment: event too large for a block");
  }
  return Status::OK();
}

std::string EncodeFooter(uint32_t version, const SegmentInfo& info,
                         const std::vector<std::string>& names,
                         const std::vector<BlockInfo>& blocks, const std::vector<BlockExtra>& extra,
                         const std::string& filters) {
  std::string f;
  PutLengthPrefixed(&f, info.datasource.repo);
  PutVarint64(&f, info.datasource.tags.size());
  for (const auto& [k, v] : info.datasource.tags) {
    PutLengthPrefixed(&f, k);
    PutLengthPrefixed(&f, v);
  }
  PutVarsint64(&f, info.partition.value);
  PutPosition(&f, info.min_pos);
  PutPosition(&f, info.max_pos);
  PutVarsint64(&f, info.min_ts);
  PutVarsint64(&f, info.max_ts);
  PutVarint64(&f, info.event_count);
  PutVarint64(&f, info.raw_bytes);
  if (version == kFormatVersion2) {
    PutVarint64(&f, names.size());
    for (const std::string& n : names) PutLengthPrefixed(&f, n);
  }
  PutVarint64(&f, blocks.size());
  for (size_t i = 0; i < blocks.size(); ++i) {
    const BlockInfo& b = blocks[i];
    PutVarint64(&f, b.file_offset);
    PutVarint32(&f, b.stored_size);
    PutVarint32(&f, b.raw_size);
    PutVarint32(&f, b.event_count);
    PutVarsint64(&f, b.min_ts);
    PutVarsint64(&f, b.max_ts);
    PutPosition(&f, b.min_pos);
    PutPosition(&f, b.max_pos);
    if (version == kFormatVersion1) PutFixed32(&f, extra[i].crc);
    PutVarint64(&f, extra[i].filter_offset);
    PutVarint64(&f, extra[i].filter_size);
    f.push_back(static_cast<char>(extra[i].filter_hashes));
    if (version == kFormatVersion2) {
      PutVarint64(&f, b.raw_bytes);
      PutVarint64(&f, extra[i].columns.size());
      for (const ColumnEntry& c : extra[i].columns) {
        PutVarint64(&f, c.id);
        f.push_back(static_cast<char>(c.codec));
        f.push_back(static_cast<char>(c.encoding));
        PutVarint32(&f, c.stored_size);
        PutVarint32(&f, c.raw_size);
        PutFixed32(&f, c.crc);
        if (c.encoding == segment_v2::kInt) {
          PutVarsint64(&f, c.min);
          PutVarsint64(&f, c.max);
        }
      }
    }
  }
  PutVarint64(&f, filters.size());
  f.append(filters);
  return f;
}

// Compresses `in` as one zstd frame (content size recorded) into `*buf`; returns the frame.
Result<std::string_view> Compress(ZSTD_CCtx* cctx, std::string_view in, std::string* buf) {
  buf->resize(ZSTD_compressBound(in.size()));
  const size_t csize = ZSTD_compress2(cctx, buf->data(), buf->size(), in.data(), in.size());
  if (ZSTD_isError(csize))
    return Status::Internal(std::string("segment: zstd: ") + ZSTD_getErrorName(csize));
  if (csize > std::numeric_limits<uint32_t>::max())
    return Status::Internal("segment: block too large");
  return std::string_view(buf->data(), csize);
}

// Writes one segment file a block at a time (see SegmentFileWriter).
class FileWriterImpl final : public SegmentFileWriter {
 public:
  FileWriterImpl(Env* env, std::string path, const Datasource& ds, PartitionId partition,
                 const SegmentWriterOptions& o)
      : env_(env), path_(std::move(path)), o_(o) {
    info_.datasource = ds;
    info_.partition = partition;
    info_.min_ts = std::numeric_limits<int64_t>::max();
    info_.max_ts = std::numeric_limits<int64_t>::min();
  }
  ~FileWriterImpl() override {
    if (!finished_) {
      file_.reset();
      (void)env_->RemoveFile(path_);
    }
  }

  Status Open() {
    ASSIGN_OR_RETURN(file_, env_->NewWritableFile(path_));
    xxh_.reset(XXH64_createState());
    cctx_.reset(ZSTD_createCCtx());
    if (!xxh_ || !cctx_) return Status::Internal("segment: out of memory");
    XXH64_reset(xxh_.get(), 0);
    ZSTD_CCtx_setParameter(cctx_.get(), ZSTD_c_compressionLevel, o_.zstd_level);
    cctx_level_ = o_.zstd_level;
    ZSTD_CCtx_setParameter(cctx_.get(), ZSTD_c_contentSizeFlag, 1);
    ZSTD_CCtx_setParameter(cctx_.get(), ZSTD_c_checksumFlag, 0);
    sink_ = std::make_unique<HashingSink>(file_.get(), xxh_.get());
    std::string header(kHeaderMagic, sizeof(kHeaderMagic));
    PutFixed32(&header, o_.format_version);
    PutFixed32(&header, 0);  // flags, reserved
    return sink_->Append(header);
  }

  Status Add(const PositionedEvent& e) override {
    ASSIGN_OR_RETURN(const size_t estimate, Admit(e));
    pending_.push_back(e);
    ++events_copied_;
    pending_bytes_ += estimate;
    if (pending_bytes_ >= o_.block_raw_bytes) status_ = WritePending();
    return status_;
  }

  Status AddAll(std::span<const PositionedEvent> events) override {
    size_t i = 0;
    // Complete the block being filled the usual way (its first events are copies already).
    while (i < events.size() && !pending_.empty()) RETURN_IF_ERROR(Add(events[i++]));
    if (i == events.size()) return status_;
    // Then blocks are cut from `events` in place, at the same events Add would cut them.
    size_t start = i;
    size_t bytes = 0;
    for (; i < events.size(); ++i) {
      ASSIGN_OR_RETURN(const size_t estimate, Admit(events[i]));
      bytes += estimate;
      if (bytes >= o_.block_raw_bytes) {
        status_ = WriteBlock(events.data() + start, i + 1 - start);
        if (!status_.ok()) return status_;
        start = i + 1;
        bytes = 0;
      }
    }
    pending_.insert(pending_.end(), events.begin() + static_cast<std::ptrdiff_t>(start),
                    events.end());
    pending_bytes_ = bytes;
    events_copied_ += events.size() - start;
    return status_;
  }

  uint64_t events_copied() const override { return events_copied_; }

  Status AddStoredBlock(const StoredBlock& block) override {
    if (!status_.ok()) return status_;
    if (finished_) return Status::FailedPrecondition("segment: already finished");
    status_ = CopyBlock(block);
    return status_;
  }

  Result<SegmentInfo> Finish() override {
    if (!status_.ok()) return status_;
    if (finished_) return Status::FailedPrecondition("segment: already finished");
    if (info_.event_count == 0) return status_ = Status::InvalidArgument("segment: no events");
    if (!pending_.empty()) {
      status_ = WritePending();
      if (!status_.ok()) return status_;
    }
    const uint64_t footer_offset = sink_->written();
    std::string footer =
        EncodeFooter(o_.format_version, info_, names_.names(), blocks_, extra_, filters_);
    RETURN_IF_ERROR(sink_->Append(footer));
    std::string trailer;
    PutFixed64(&trailer, footer_offset);
    PutFixed64(&trailer, footer.size());
    PutFixed32(&trailer, Crc32c(footer));
    PutFixed32(&trailer, o_.format_version);
    trailer.append(kTrailerMagic, sizeof(kTrailerMagic));
    RETURN_IF_ERROR(sink_->Append(trailer));
    info_.content_hash = XXH64_digest(xxh_.get());
    std::string hash;
    PutFixed64(&hash, info_.content_hash);
    RETURN_IF_ERROR(sink_->Append(hash, /*hash=*/false));
    info_.file_size = sink_->written();
    RETURN_IF_ERROR(file_->Sync());
    RETURN_IF_ERROR(file_->Close());
    finished_ = true;
    return info_;
  }

 private:
  // Format 2: compresses `data` as a column chunk (stored when small or incompressible), appends
  // it to block_bytes_ and sets c's codec, sizes and CRC.
  Status AppendChunk(std::string_view data, ColumnEntry* c) {
    std::string_view chunk = data;
    c->codec = kCodecStored;
    if (data.size() >= kMinCompressedChunk) {
      const int level = c->id == segment_v2::kRaw ? o_.zstd_level : o_.column_zstd_level;
      if (level != cctx_level_) {
        // Applies from the next frame on; the context keeps its workspace.
        const size_t rc = ZSTD_CCtx_setParameter(cctx_.get(), ZSTD_c_compressionLevel, level);
        if (ZSTD_isError(rc))
          return Status::Internal(std::string("segment: zstd: ") + ZSTD_getErrorName(rc));
        cctx_level_ = level;
      }
      ASSIGN_OR_RETURN(std::string_view z, Compress(cctx_.get(), data, &compressed_));
      if (z.size() < data.size()) {
        chunk = z;
        c->codec = kCodecZstd;
      }
    }
    c->stored_size = static_cast<uint32_t>(chunk.size());
    c->raw_size = static_cast<uint32_t>(data.size());
    c->crc = Crc32c(chunk);
    block_bytes_.append(chunk);
    return Status::OK();
  }

  // AddStoredBlock: checks `in`, writes the pending events, then appends `in` with its field
  // columns renumbered to this file's name table (layout re-encoded only when an id changes).
  Status CopyBlock(const StoredBlock& in) {
    const BlockInfo& ib = in.info;
    if (o_.format_version != kFormatVersion2)
      return Status::InvalidArgument("segment: stored blocks need a format 2 writer");
    if (ib.event_count == 0 || in.columns.size() < segment_v2::kBuiltinColumns)
      return Status::InvalidArgument("segment: stored block without events or columns");
    if (info_.event_count > 0 && !(info_.max_pos < ib.min_pos))
      return Status::InvalidArgument("segment: events not strictly ordered by position");
    uint64_t stored_total = 0;
    for (size_t k = 0; k < in.columns.size(); ++k) {
      const StoredBlock::Column& c = in.columns[k];
      const bool builtin = k < segment_v2::kBuiltinColumns;
      if ((builtin && (c.id != k || c.encoding != segment_v2::kPlain)) ||
          (!builtin && c.id <= in.columns[k - 1].id) || c.codec > kCodecZstd ||
          (c.codec == kCodecStored && c.stored_size != c.raw_size) ||
          c.encoding > segment_v2::kInt || c.raw_size > kMaxBlockRawSize)
        return Status::InvalidArgument("segment: stored block with malformed columns");
      stored_total += c.stored_size;
    }
    if (stored_total != in.bytes.size())
      return Status::InvalidArgument("segment: stored block sizes disagree with its bytes");
    if (!pending_.empty()) RETURN_IF_ERROR(WritePending());

    // Field columns in this file's id order: (new field index, source column index).
    remap_.clear();
    bool same_ids = true;
    for (size_t k = segment_v2::kBuiltinColumns; k < in.columns.size(); ++k) {
      const uint64_t id = names_.Id(in.columns[k].name);
      same_ids = same_ids && id == in.columns[k].id - segment_v2::kFirstField;
      remap_.emplace_back(id, k);
    }
    std::sort(remap_.begin(), remap_.end());
    for (size_t j = 1; j < remap_.size(); ++j) {
      if (remap_[j].first == remap_[j - 1].first)
        return Status::InvalidArgument("segment: stored block names a field twice");
    }
    chunk_at_.resize(in.columns.size());
    for (size_t k = 0, at = 0; k < in.columns.size(); ++k) {
      chunk_at_[k] = at;
      at += in.columns[k].stored_size;
    }
    auto chunk_of = [&](size_t k) {
      return std::string_view(in.bytes.data() + chunk_at_[k], in.columns[k].stored_size);
    };
    auto entry_of = [&](const StoredBlock::Column& c) {
      ColumnEntry e;
      e.id = c.id;
      e.codec = c.codec;
      e.encoding = static_cast<segment_v2::Encoding>(c.encoding);
      e.stored_size = c.stored_size;
      e.raw_size = c.raw_size;
      e.crc = c.crc;
      e.min = c.min;
      e.max = c.max;
      return e;
    };

    BlockExtra x;
    block_bytes_.clear();
    uint64_t raw_size = 0;
    for (size_t k = 0; k < segment_v2::kBuiltinColumns; ++k) {
      ColumnEntry e = entry_of(in.columns[k]);
      if (k == segment_v2::kLayout && !same_ids) {
        RETURN_IF_ERROR(RemapLayout(in, chunk_of(k)));
        RETURN_IF_ERROR(AppendChunk(layout_, &e));
      } else {
        block_bytes_.append(chunk_of(k));
      }
      raw_size += e.raw_size;
      x.columns.push_back(e);
    }
    for (const auto& [id, k] : remap_) {
      ColumnEntry e = entry_of(in.columns[k]);
      e.id = segment_v2::kFirstField + id;
      block_bytes_.append(chunk_of(k));
      raw_size += e.raw_size;
      x.columns.push_back(e);
    }
    if (raw_size > kMaxBlockRawSize) return Status::InvalidArgument("segment: block too large");
    if (block_bytes_.size() > std::numeric_limits<uint32_t>::max())
      return Status::Internal("segment: block too large");

    BlockInfo b = ib;
    b.file_offset = sink_->written();
    b.stored_size = static_cast<uint32_t>(block_bytes_.size());
    b.raw_size = static_cast<uint32_t>(raw_size);
    if (info_.event_count == 0) info_.min_pos = ib.min_pos;
    info_.max_pos = ib.max_pos;
    info_.event_count += ib.event_count;
    info_.raw_bytes += ib.raw_bytes;
    info_.min_ts = std::min(info_.min_ts, ib.min_ts);
    info_.max_ts = std::max(info_.max_ts, ib.max_ts);
    x.filter_offset = filters_.size();
    if (in.filter_hashes > 0) {
      filters_.append(in.filter);
      x.filter_size = in.filter.size();
      x.filter_hashes = in.filter_hashes;
    }
    RETURN_IF_ERROR(sink_->Append(block_bytes_));
    blocks_.push_back(b);
    extra_.push_back(std::move(x));
    return Status::OK();
  }

  // Rewrites the stored layout chunk `z` of `in` into layout_ with the field ids of remap_.
  Status RemapLayout(const StoredBlock& in, std::string_view z) {
    const StoredBlock::Column& c = in.columns[segment_v2::kLayout];
    const Status bad =
        Status::Corruption("segment: layout chunk of a copied block does not decode");
    if (Crc32c(z) != c.crc) return bad;
    std::string_view data = z;
    if (c.codec == kCodecZstd) {
      if (!DecompressChunk(z, c.raw_size, &layout_in_)) return bad;
      data = layout_in_;
    }
    // Source field index -> new field index, by the source's (increasing) column ids.
    old_ids_.clear();
    new_ids_.assign(remap_.size(), 0);
    for (size_t k = segment_v2::kBuiltinColumns; k < in.columns.size(); ++k)
      old_ids_.push_back(in.columns[k].id - segment_v2::kFirstField);
    for (const auto& [id, k] : remap_) new_ids_[k - segment_v2::kBuiltinColumns] = id;
    segment_internal::Cursor cur{data.data(), data.data() + data.size()};
    layout_.clear();
    for (uint32_t i = 0; i < in.info.event_count; ++i) {
      const uint64_t count = cur.V();
      if (count > cur.left()) return bad;
      PutVarint64(&layout_, count);
      for (uint64_t r = 0; r < count; ++r) {
        const uint64_t old = cur.V();
        auto it = std::lower_bound(old_ids_.begin(), old_ids_.end(), old);
        if (it == old_ids_.end() || *it != old) return bad;
        PutVarint64(&layout_, new_ids_[static_cast<size_t>(it - old_ids_.begin())]);
      }
    }
    if (!cur.ok || cur.p != cur.end) return bad;
    return Status::OK();
  }

  // Encodes, compresses and appends the pending events as one block.
  // The checks of Add for `e` (usable writer, position order, size); on success `e` counts as
  // added (positions, event count) and its raw-size estimate is returned.
  Result<size_t> Admit(const PositionedEvent& e) {
    if (!status_.ok()) return status_;
    if (finished_) return Status::FailedPrecondition("segment: already finished");
    if (info_.event_count > 0 && !(info_.max_pos < e.pos)) {
      return status_ = Status::InvalidArgument("segment: events not strictly ordered by position");
    }
    const size_t estimate = EventEstimate(e.event);
    if (estimate > kMaxBlockRawSize / 2) {
      return status_ = Status::InvalidArgument("segment: event too large for a block");
    }
    if (info_.event_count == 0) info_.min_pos = e.pos;
    info_.max_pos = e.pos;
    ++info_.event_count;
    return estimate;
  }

  Status WritePending() {
    Status st = WriteBlock(pending_.data(), pending_.size());
    pending_.clear();
    pending_bytes_ = 0;
    return st;
  }

  // Writes events [ev, ev + n) (n >= 1, admitted, in position order) as one block.
  Status WriteBlock(const PositionedEvent* ev, size_t n) {
    BlockExtra x;
    std::string_view stored;
    uint64_t raw_size = 0, stored_size = 0;
    if (o_.format_version == kFormatVersion1) {
      encoder_.Encode(ev, n, &content_);
      if (content_.size() > kMaxBlockRawSize)
        return Status::InvalidArgument("segment: block too large");
      ASSIGN_OR_RETURN(stored, Compress(cctx_.get(), content_, &compressed_));
      x.crc = Crc32c(stored);
      raw_size = content_.size();
      stored_size = stored.size();
    } else {
      columnar_.Encode(ev, n, &names_, &columns_, o_.filter_hashes > 0 ? &unreferenced_ : nullptr);
      block_bytes_.clear();
      for (const segment_v2::EncodedColumn& col : columns_) {
        ColumnEntry c;
        c.id = col.id;
        c.encoding = col.encoding;
        c.min = col.min;
        c.max = col.max;
        raw_size += col.data.size();
        RETURN_IF_ERROR(AppendChunk(col.data, &c));
        x.columns.push_back(c);
      }
      if (raw_size > kMaxBlockRawSize) return Status::InvalidArgument("segment: block too large");
      if (block_bytes_.size() > std::numeric_limits<uint32_t>::max())
        return Status::Internal("segment: block too large");
      stored = block_bytes_;
      stored_size = block_bytes_.size();
    }

    BlockInfo b;
    b.file_offset = sink_->written();
    b.stored_size = static_cast<uint32_t>(stored_size);
    b.raw_size = static_cast<uint32_t>(raw_size);
    b.event_count = static_cast<uint32_t>(n);
    b.min_pos = ev[0].pos;
    b.max_pos = ev[n - 1].pos;
    b.min_ts = std::numeric_limits<int64_t>::max();
    b.max_ts = std::numeric_limits<int64_t>::min();
    for (size_t i = 0; i < n; ++i) {
      const Event& e = ev[i].event;
      b.min_ts = std::min(b.min_ts, e.timestamp_ms);
      b.max_ts = std::max(b.max_ts, e.timestamp_ms);
      info_.raw_bytes += e.raw.size();
      if (o_.format_version == kFormatVersion2) b.raw_bytes += e.raw.size();
      if (o_.filter_hashes > 0) {
        filter_.Add(e.raw);
        // Format 2: the values found in the raw string add no gram of their own.
        if (o_.format_version == kFormatVersion1) {
          for (const Field& f : e.fields) filter_.Add(f.value);
        }
      }
    }
    if (o_.filter_hashes > 0 && o_.format_version == kFormatVersion2) {
      for (std::string_view v : unreferenced_) filter_.Add(v);
    }
    info_.min_ts = std::min(info_.min_ts, b.min_ts);
    info_.max_ts = std::max(info_.max_ts, b.max_ts);
    if (o_.filter_hashes > 0) {
      x.filter_offset = filters_.size();
      x.filter_size = filter_.Finish(o_.filter_bits_per_gram, o_.filter_hashes, &filters_);
      x.filter_hashes = static_cast<uint8_t>(o_.filter_hashes);
    }
    RETURN_IF_ERROR(sink_->Append(stored));
    blocks_.push_back(b);
    extra_.push_back(std::move(x));
    return Status::OK();
  }

  Env* const env_;
  const std::string path_;
  const SegmentWriterOptions o_;
  std::unique_ptr<WritableFile> file_;
  std::unique_ptr<XXH64_state_t, XxhDeleter> xxh_;
  std::unique_ptr<ZSTD_CCtx, ZstdCCtxDeleter> cctx_;
  int cctx_level_ = 0;  // the compression level cctx_ is set to
  std::unique_ptr<HashingSink> sink_;
  Status status_;  // the first failure; the writer is unusable after it
  bool finished_ = false;
  SegmentInfo info_;
  std::vector<PositionedEvent> pending_;  // the block being filled
  size_t pending_bytes_ = 0;
  uint64_t events_copied_ = 0;  // events copied into pending_ (see events_copied())
  std::vector<BlockInfo> blocks_;
  std::vector<BlockExtra> extra_;
  std::string filters_, content_, compressed_, block_bytes_;
  BlockEncoder encoder_;
  segment_v2::BlockEncoder columnar_;
  segment_v2::NameTable names_;
  std::vector<segment_v2::EncodedColumn> columns_;
  std::vector<std::string_view> unreferenced_;  // format 2: values the filter adds (Encode)
  segment_filter::FilterBuilder filter_;
  // CopyBlock scratch: field columns by new id, chunk offsets, the layout before and after its
  // ids are renumbered.
  std::vector<std::pair<uint64_t, size_t>> remap_;
  std::vector<size_t> chunk_at_;
  std::vector<uint64_t> old_ids_, new_ids_;
  std::string layout_in_, layout_;
};

Result<SegmentInfo> WriteSegmentTo(Env* env, const std::string& tmp, const Datasource& ds,
                                   PartitionId partition,
                                   const std::vector<PositionedEvent>& events,
                                   const SegmentWriterOptions& o) {
  ASSIGN_OR_RETURN(std::unique_ptr<SegmentFileWriter> w,
                   SegmentFileWriter::Create(env, tmp, ds, partition, o));
  RETURN_IF_ERROR(w->AddAll(events));
  return w->Finish();
}

// ---- Reader ----

using segment_internal::Cursor;

thread_local std::string tls_stored;

class SegmentReaderImpl final : public SegmentReader {
 public:
  SegmentReaderImpl(std::string path, std::unique_ptr<RandomAccessFile> file)
      : path_(std::move(path)), file_(std::move(file)) {}

  Status Load();

  const SegmentInfo& info() const override { return info_; }
  const std::vector<BlockInfo>& blocks() const override { return blocks_; }
  bool BlockMayContainAll(size_t i, const std::vector<std::string>& terms) const override;
  bool BlockMayHaveField(size_t i, std::string_view name) const override;
  Status ReadBlock(size_t i, DecodedBlock* out) const override;
  Status ReadBlockColumns(size_t i, const ColumnSelection& columns,
                          DecodedBlock* out) const override;
  Status ReadStoredBlock(size_t i, StoredBlock* out) const override;
  uint32_t format_version() const override { return version_; }
  Status VerifyAll() const override;

 private:
  Status Corrupt(const std::string& what) const {
    return Status::Corruption("segment " + path_ + ": " + what);
  }
  Status ReadExact(uint64_t offset, size_t n, std::string* out, const char* region) const;
  Status ParseFooter(std::string_view in, uint64_t footer_offset);
  Status ReadBlockInto(size_t i, DecodedBlock* out) const;
  Status DecodeColumns(size_t i, DecodedBlock* out) const;
  Status ReadColumnsV2(size_t i, const ColumnSelection& columns, DecodedBlock* out) const;
  Status ParseColumnDirectory(std::string_view* in, size_t block, uint64_t block_stored,
                              uint64_t block_raw);
  Status CheckDecoded(size_t i, const DecodedBlock& out) const;

  std::string path_;
  std::unique_ptr<RandomAccessFile> file_;
  SegmentInfo info_;
  std::vector<BlockInfo> blocks_;
  std::vector<BlockExtra> extra_;
  std::string filters_;
  uint32_t version_ = 0;
  std::vector<std::string> names_;                           // format 2: field names by id
  std::unordered_map<std::string_view, uint64_t> name_ids_;  // format 2: names_ by name
};

Status SegmentReaderImpl::ReadExact(uint64_t offset, size_t n, std::string* out,
                                    const char* region) const {
  RETURN_IF_ERROR(file_->Read(offset, n, out));
  if (out->size() != n) return Corrupt(std::string("short read of ") + region);
  return Status::OK();
}

Status SegmentReaderImpl::Load() {
  ASSIGN_OR_RETURN(uint64_t size, file_->Size());
  if (size < kHeaderSize + kTrailerSize) return Corrupt("file too short");
  std::string buf;
  RETURN_IF_ERROR(ReadExact(0, kHeaderSize, &buf, "header"));
  if (std::memcmp(buf.data(), kHeaderMagic, 8) != 0) return Corrupt("bad header magic");
  version_ = DecodeFixed32(buf.data() + 8);
  if (version_ != kFormatVersion1 && version_ != kFormatVersion2)
    return Corrupt("unsupported format version in header");
  if (DecodeFixed32(buf.data() + 12) != 0) return Corrupt("unknown header flags");

  RETURN_IF_ERROR(ReadExact(size - kTrailerSize, kTrailerSize, &buf, "trailer"));
  const uint64_t footer_offset = DecodeFixed64(buf.data());
  const uint64_t footer_length = DecodeFixed64(buf.data() + 8);
  const uint32_t footer_crc = DecodeFixed32(buf.data() + 16);
  if (std::memcmp(buf.data() + 24, kTrailerMagic, 8) != 0) return Corrupt("bad trailer magic");
  if (DecodeFixed32(buf.data() + 20) != version_)
    return Corrupt("format version in trailer differs from the header's");
  info_.content_hash = DecodeFixed64(buf.data() + 32);
  info_.file_size = size;
  if (footer_offset < kHeaderSize || footer_offset > size - kTrailerSize ||
      footer_length != size - kTrailerSize - footer_offset || footer_length > kMaxFooterSize)
    return Corrupt("footer location out of range");
  std::string footer;
  RETURN_IF_ERROR(ReadExact(footer_offset, footer_length, &footer, "footer"));
  if (Crc32c(footer) != footer_crc) return Corrupt("footer checksum mismatch");
  return ParseFooter(footer, footer_offset);
}

// Format 2: a block's column entries. Checks ids (built-ins first, fields increasing and named),
// codecs and encodings, and that the chunks tile the block's stored and raw sizes; sets the
// chunks' file offsets relative to the block start (made absolute by ParseFooter).
Status SegmentReaderImpl::ParseColumnDirectory(std::string_view* in, size_t block,
                                               uint64_t block_stored, uint64_t block_raw) {
  const Status bad = Corrupt("block " + std::to_string(block) + " column directory malformed");
  uint64_t count;
  // A column entry takes at least 9 bytes.
  if (!GetVarint64(in, &count) || count < segment_v2::kBuiltinColumns || count > in->size() / 9)
    return bad;
  std::vector<ColumnEntry>& cols = extra_[block].columns;
  cols.resize(count);
  uint64_t stored = 0, raw = 0;
  for (uint64_t k = 0; k < count; ++k) {
    ColumnEntry& c = cols[k];
    uint32_t crc;
    if (!GetVarint64(in, &c.id) || in->size() < 2) return bad;
    c.codec = static_cast<uint8_t>((*in)[0]);
    const uint8_t enc = static_cast<uint8_t>((*in)[1]);
    in->remove_prefix(2);
    if (!GetVarint32(in, &c.stored_size) || !GetVarint32(in, &c.raw_size) || !GetFixed32(in, &crc))
      return bad;
    c.crc = crc;
    if (enc > segment_v2::kInt) return bad;
    c.encoding = static_cast<segment_v2::Encoding>(enc);
    if (c.encoding == segment_v2::kInt) {
      if (!GetVarsint64(in, &c.min) || !GetVarsint64(in, &c.max) || c.min > c.max) return bad;
    }
    if (k < segment_v2::kBuiltinColumns) {
      if (c.id != k || c.encoding != segment_v2::kPlain) return bad;
    } else if (c.id <= cols[k - 1].id || c.id - segment_v2::kFirstField >= names_.size() ||
               c.id < segment_v2::kFirstField) {
      return bad;
    }
    if (c.codec > kCodecZstd || (c.codec == kCodecStored && c.stored_size != c.raw_size) ||
        c.raw_size > kMaxBlockRawSize)
      return bad;
    c.file_offset = stored;
    stored += c.stored_size;
    raw += c.raw_size;
  }
  if (stored != block_stored || raw != block_raw) return bad;
  return Status::OK();
}

Status SegmentReaderImpl::ParseFooter(std::string_view in, uint64_t footer_offset) {
  const Status bad = Corrupt("malformed footer");
  std::string_view s;
  uint64_t n;
  if (!GetLengthPrefixed(&in, &s)) return bad;
  info_.datasource.repo = std::string(s);
  if (!GetVarint64(&in, &n) || n > in.size()) return bad;
  for (uint64_t i = 0; i < n; ++i) {
    std::string_view k, v;
    if (!GetLengthPrefixed(&in, &k) || !GetLengthPrefixed(&in, &v)) return bad;
    info_.datasource.tags.emplace_back(std::string(k), std::string(v));
  }
  int64_t partition;
  if (!GetVarsint64(&in, &partition) || partition < std::numeric_limits<int32_t>::min() ||
      partition > std::numeric_limits<int32_t>::max())
    return bad;
  info_.partition = PartitionId(static_cast<int32_t>(partition));
  if (!GetPosition(&in, &info_.min_pos) || !GetPosition(&in, &info_.max_pos) ||
      !GetVarsint64(&in, &info_.min_ts) || !GetVarsint64(&in, &info_.max_ts) ||
      !GetVarint64(&in, &info_.event_count) || !GetVarint64(&in, &info_.raw_bytes))
    return bad;
  if (version_ == kFormatVersion2) {
    uint64_t count;
    if (!GetVarint64(&in, &count) || count > in.size()) return bad;
    names_.resize(count);
    for (uint64_t k = 0; k < count; ++k) {
      std::string_view name;
      if (!GetLengthPrefixed(&in, &name)) return bad;
      names_[k] = std::string(name);
    }
    for (uint64_t k = 0; k < count; ++k) {
      if (!name_ids_.emplace(names_[k], k).second) return Corrupt("duplicate field name in footer");
    }
  }
  uint64_t block_count;
  // An index entry takes at least 20 bytes.
  if (!GetVarint64(&in, &block_count) || block_count == 0 || block_count > in.size() / 20)
    return bad;
  blocks_.resize(block_count);
  extra_.resize(block_count);
  for (uint64_t i = 0; i < block_count; ++i) {
    BlockInfo& b = blocks_[i];
    BlockExtra& x = extra_[i];
    uint32_t crc = 0;
    if (!GetVarint64(&in, &b.file_offset) || !GetVarint32(&in, &b.stored_size) ||
        !GetVarint32(&in, &b.raw_size) || !GetVarint32(&in, &b.event_count) ||
        !GetVarsint64(&in, &b.min_ts) || !GetVarsint64(&in, &b.max_ts) ||
        !GetPosition(&in, &b.min_pos) || !GetPosition(&in, &b.max_pos) ||
        (version_ == kFormatVersion1 && !GetFixed32(&in, &crc)) ||
        !GetVarint64(&in, &x.filter_offset) || !GetVarint64(&in, &x.filter_size) || in.empty())
      return bad;
    x.crc = crc;
    x.filter_hashes = static_cast<uint8_t>(in[0]);
    in.remove_prefix(1);
    if (version_ == kFormatVersion2) {
      if (!GetVarint64(&in, &b.raw_bytes)) return bad;
      RETURN_IF_ERROR(ParseColumnDirectory(&in, i, b.stored_size, b.raw_size));
    }
  }
  uint64_t filter_area;
  if (!GetVarint64(&in, &filter_area) || filter_area != in.size()) return bad;
  filters_ = std::string(in);

  // Sanity: blocks tile [header, footer) in order, ranges ordered, sizes plausible.
  uint64_t expect_offset = kHeaderSize, events = 0, raw_bytes = 0;
  int64_t min_ts = std::numeric_limits<int64_t>::max();
  int64_t max_ts = std::numeric_limits<int64_t>::min();
  for (uint64_t i = 0; i < block_count; ++i) {
    const BlockInfo& b = blocks_[i];
    const BlockExtra& x = extra_[i];
    const std::string where = "block " + std::to_string(i) + " index entry: ";
    if (b.file_offset != expect_offset || b.stored_size == 0 ||
        b.stored_size > footer_offset - b.file_offset)
      return Corrupt(where + "file range out of order or out of range");
    expect_offset = b.file_offset + b.stored_size;
    if (b.raw_size == 0 || b.raw_size > kMaxBlockRawSize || b.event_count == 0 ||
        b.event_count > b.raw_size)
      return Corrupt(where + "implausible sizes");
    if (b.min_ts > b.max_ts || b.max_pos < b.min_pos ||
        (i > 0 && !(blocks_[i - 1].max_pos < b.min_pos)))
      return Corrupt(where + "ranges out of order");
    if (x.filter_hashes > kMaxFilterHashes || x.filter_offset > filters_.size() ||
        x.filter_size > filters_.size() - x.filter_offset || x.filter_size % 8 != 0 ||
        x.filter_size / 8 >= (uint64_t{1} << 26))
      return Corrupt(where + "filter out of range");
    for (ColumnEntry& c : extra_[i].columns) c.file_offset += b.file_offset;
    if (b.raw_bytes > info_.raw_bytes - raw_bytes || b.raw_bytes > kMaxBlockRawSize)
      return Corrupt(where + "raw bytes out of range");
    raw_bytes += b.raw_bytes;
    events += b.event_count;
    min_ts = std::min(min_ts, b.min_ts);
    max_ts = std::max(max_ts, b.max_ts);
  }
  if (expect_offset != footer_offset) return Corrupt("blocks do not end at the footer");
  if (events != info_.event_count ||
      (version_ == kFormatVersion2 && raw_bytes != info_.raw_bytes) ||
      info_.min_pos != blocks_.front().min_pos || info_.max_pos != blocks_.back().max_pos ||
      info_.min_ts != min_ts || info_.max_ts != max_ts)
    return Corrupt("segment info disagrees with the block index");
  return Status::OK();
}

bool SegmentReaderImpl::BlockMayContainAll(size_t i, const std::vector<std::string>& terms) const {
  if (i >= extra_.size()) return true;
  const BlockExtra& x = extra_[i];
  if (x.filter_hashes == 0) return true;
  std::string_view filter(filters_.data() + x.filter_offset, x.filter_size);
  for (const std::string& t : terms) {
    if (!segment_filter::MayContain(filter, x.filter_hashes, t)) return false;
  }
  return true;
}

bool SegmentReaderImpl::BlockMayHaveField(size_t i, std::string_view name) const {
  if (version_ != kFormatVersion2 || i >= extra_.size()) return true;
  auto it = name_ids_.find(name);
  if (it == name_ids_.end()) return false;
  const uint64_t id = segment_v2::kFirstField + it->second;
  const std::vector<ColumnEntry>& cols = extra_[i].columns;
  auto c = std::lower_bound(cols.begin(), cols.end(), id,
                            [](const ColumnEntry& e, uint64_t x) { return e.id < x; });
  return c != cols.end() && c->id == id;
}

// Empties every column (the buffer is reused by the next decode).
void ClearColumns(DecodedBlock* out) {
  out->timestamps.clear();
  out->ingest_ts.clear();
  out->positions.clear();
  out->raw.clear();
  out->fields.clear();
  out->field_begin.clear();
  out->field_names.clear();
  out->field_names_complete = false;
  out->dict_columns.clear();
  out->event_count = 0;
}

Status SegmentReaderImpl::ReadBlock(size_t i, DecodedBlock* out) const {
  return ReadBlockColumns(i, ColumnSelection{}, out);
}

Status SegmentReaderImpl::ReadBlockColumns(size_t i, const ColumnSelection& columns,
                                           DecodedBlock* out) const {
  // The columns are not cleared up front: resizing vectors that keep their size from the
  // previous block avoids value-initializing every element again. Any failure empties them.
  Status st = version_ == kFormatVersion1 ? ReadBlockInto(i, out) : ReadColumnsV2(i, columns, out);
  if (!st.ok()) ClearColumns(out);
  return st;
}

thread_local std::vector<segment_v2::Chunk> tls_chunks;
thread_local std::vector<uint8_t> tls_wanted;

Status SegmentReaderImpl::ReadColumnsV2(size_t i, const ColumnSelection& selection,
                                        DecodedBlock* out) const {
  if (i >= blocks_.size()) return Status::InvalidArgument("segment: block index out of range");
  const BlockInfo& b = blocks_[i];
  const std::vector<ColumnEntry>& cols = extra_[i].columns;
  const bool full = selection.all || selection.raw;
  const bool order = selection.all || selection.order;
  // Which chunks to read: the built-in time and position columns when `order`, ingest times
  // when asked for, then the layout, @rawstring and every field column for raw strings, else the
  // selected fields.
  std::vector<uint8_t>& wanted = tls_wanted;
  wanted.assign(cols.size(), 0);
  if (full) {
    std::fill(wanted.begin(), wanted.end(), 1);
  } else {
    for (const std::string& name : selection.fields) {
      auto it = name_ids_.find(name);
      if (it == name_ids_.end()) continue;
      const uint64_t id = segment_v2::kFirstField + it->second;
      auto c = std::lower_bound(cols.begin() + segment_v2::kBuiltinColumns, cols.end(), id,
                                [](const ColumnEntry& e, uint64_t x) { return e.id < x; });
      if (c != cols.end() && c->id == id) wanted[static_cast<size_t>(c - cols.begin())] = 1;
    }
  }
  wanted[segment_v2::kIngest] = selection.all || selection.ingest ? 1 : 0;
  wanted[segment_v2::kTimestamps] = wanted[segment_v2::kPositions] = order ? 1 : 0;
  if (!tls_dctx) {
    tls_dctx.reset(ZSTD_createDCtx());
    if (!tls_dctx) return Status::Internal("segment: out of memory");
  }
  if (out->chunks.size() < cols.size()) out->chunks.resize(cols.size());
  std::vector<segment_v2::Chunk>& chunks = tls_chunks;
  chunks.assign(cols.size(), segment_v2::Chunk{});
  std::string& stored = tls_stored;
  for (size_t k = 0; k < cols.size();) {
    chunks[k].id = cols[k].id;
    chunks[k].encoding = cols[k].encoding;
    if (!wanted[k]) {
      ++k;
      continue;
    }
    // One read for a run of adjacent wanted chunks.
    size_t e = k;
    uint64_t bytes = 0;
    while (e < cols.size() && wanted[e]) bytes += cols[e++].stored_size;
    RETURN_IF_ERROR(ReadExact(cols[k].file_offset, bytes, &stored, "block"));
    size_t at = 0;
    for (; k < e; ++k) {
      const ColumnEntry& c = cols[k];
      chunks[k].id = c.id;
      chunks[k].encoding = c.encoding;
      std::string_view z(stored.data() + at, c.stored_size);
      at += c.stored_size;
      if (Crc32c(z) != c.crc) {
        return Corrupt("block " + std::to_string(i) + " column " + std::to_string(c.id) +
                       ": checksum mismatch");
      }
      std::string& buf = out->chunks[k];
      if (c.codec == kCodecStored) {
        buf.assign(z);
      } else {
        if (ZSTD_getFrameContentSize(z.data(), z.size()) != c.raw_size)
          return Corrupt("block " + std::to_string(i) + " column " + std::to_string(c.id) +
                         ": frame size disagrees with the index");
        buf.resize(c.raw_size);
        const size_t got =
            ZSTD_decompressDCtx(tls_dctx.get(), buf.data(), buf.size(), z.data(), z.size());
        if (ZSTD_isError(got) || got != c.raw_size)
          return Corrupt("block " + std::to_string(i) + " column " + std::to_string(c.id) +
                         ": decompression failed");
      }
      chunks[k].data = buf;
      chunks[k].loaded = true;
    }
  }
  int64_t min_ts = 0, max_ts = 0;
  if (!segment_v2::DecodeBlock(b.event_count, chunks, names_, full, order, b.raw_bytes, out,
                               &min_ts, &max_ts))
    return Corrupt("block " + std::to_string(i) + ": inconsistent columns");
  if (!order) return Status::OK();
  // The decoder gives strictly increasing positions and the time bounds: cross-check them with
  // the index without another pass over the events.
  if (out->timestamps.size() != b.event_count || out->positions.size() != b.event_count ||
      out->positions.front() != b.min_pos || out->positions.back() != b.max_pos ||
      min_ts != b.min_ts || max_ts != b.max_ts) {
    return Corrupt("block " + std::to_string(i) + ": inconsistent columns");
  }
  return Status::OK();
}

thread_local DecodedBlock tls_check_block;

Status SegmentReaderImpl::ReadStoredBlock(size_t i, StoredBlock* out) const {
  if (version_ != kFormatVersion2)
    return Status::FailedPrecondition("segment " + path_ + ": stored blocks need format 2");
  if (i >= blocks_.size()) return Status::InvalidArgument("segment: block index out of range");
  const BlockInfo& b = blocks_[i];
  const BlockExtra& x = extra_[i];
  RETURN_IF_ERROR(ReadExact(b.file_offset, b.stored_size, &out->bytes, "block"));
  out->info = b;
  out->columns.resize(x.columns.size());
  std::vector<segment_v2::Chunk>& chunks = tls_chunks;
  chunks.assign(x.columns.size(), segment_v2::Chunk{});
  // Sized once: chunks[] views point into these strings.
  if (tls_check_block.chunks.size() < segment_v2::kBuiltinColumns)
    tls_check_block.chunks.resize(segment_v2::kBuiltinColumns);
  size_t at = 0;
  for (size_t k = 0; k < x.columns.size(); ++k) {
    const ColumnEntry& c = x.columns[k];
    const std::string_view z(out->bytes.data() + at, c.stored_size);
    at += c.stored_size;
    if (Crc32c(z) != c.crc) {
      return Corrupt("block " + std::to_string(i) + " column " + std::to_string(c.id) +
                     ": checksum mismatch");
    }
    StoredBlock::Column& o = out->columns[k];
    o.id = c.id;
    if (c.id >= segment_v2::kFirstField) {
      o.name = names_[c.id - segment_v2::kFirstField];
    } else {
      o.name.clear();
    }
    o.codec = c.codec;
    o.encoding = c.encoding;
    o.stored_size = c.stored_size;
    o.raw_size = c.raw_size;
    o.crc = c.crc;
    o.min = c.min;
    o.max = c.max;
    chunks[k].id = c.id;
    chunks[k].encoding = c.encoding;
    // The timestamps and positions are decoded to check them against the index entry.
    if (k == segment_v2::kTimestamps || k == segment_v2::kPositions) {
      std::string& chunk = tls_check_block.chunks[k];
      if (c.codec == kCodecStored) {
        chunk.assign(z);
      } else if (!DecompressChunk(z, c.raw_size, &chunk)) {
        return Corrupt("block " + std::to_string(i) + " column " + std::to_string(c.id) +
                       ": decompression failed");
      }
      chunks[k].data = chunk;
      chunks[k].loaded = true;
    }
  }
  out->filter.assign(filters_, x.filter_offset, x.filter_size);
  out->filter_hashes = x.filter_hashes;
  int64_t min_ts = 0, max_ts = 0;
  if (!segment_v2::DecodeBlock(b.event_count, chunks, names_, /*full=*/false, /*order=*/true,
                               b.raw_bytes, &tls_check_block, &min_ts, &max_ts))
    return Corrupt("block " + std::to_string(i) + ": inconsistent columns");
  return CheckDecoded(i, tls_check_block);
}

// Cross-checks a decoded block with its (checksummed) index entry.
Status SegmentReaderImpl::CheckDecoded(size_t bi, const DecodedBlock& out) const {
  const BlockInfo& b = blocks_[bi];
  const Status bad = Corrupt("block " + std::to_string(bi) + ": inconsistent columns");
  const size_t n = out.timestamps.size();
  if (n != b.event_count || out.positions.size() != n) return bad;
  if (out.positions.front() != b.min_pos || out.positions.back() != b.max_pos) return bad;
  int64_t min_ts = out.timestamps[0], max_ts = out.timestamps[0];
  for (size_t i = 0; i < n; ++i) {
    if (i > 0 && !(out.positions[i - 1] < out.positions[i])) return bad;
    min_ts = std::min(min_ts, out.timestamps[i]);
    max_ts = std::max(max_ts, out.timestamps[i]);
  }
  if (min_ts != b.min_ts || max_ts != b.max_ts) return bad;
  return Status::OK();
}

Status SegmentReaderImpl::ReadBlockInto(size_t i, DecodedBlock* out) const {
  if (i >= blocks_.size()) return Status::InvalidArgument("segment: block index out of range");
  const BlockInfo& b = blocks_[i];
  const std::string where = "block " + std::to_string(i) + ": ";
  std::string& stored = tls_stored;
  RETURN_IF_ERROR(ReadExact(b.file_offset, b.stored_size, &stored, "block"));
  if (Crc32c(stored) != extra_[i].crc) return Corrupt(where + "checksum mismatch");
  if (!tls_dctx) {
    tls_dctx.reset(ZSTD_createDCtx());
    if (!tls_dctx) return Status::Internal("segment: out of memory");
  }
  if (ZSTD_getFrameContentSize(stored.data(), stored.size()) != b.raw_size)
    return Corrupt(where + "frame size disagrees with the index");
  out->buffer.resize(b.raw_size);
  size_t got = ZSTD_decompressDCtx(tls_dctx.get(), out->buffer.data(), out->buffer.size(),
                                   stored.data(), stored.size());
  if (ZSTD_isError(got) || got != b.raw_size) return Corrupt(where + "decompression failed");
  return DecodeColumns(i, out);
}

Status SegmentReaderImpl::DecodeColumns(size_t bi, DecodedBlock* out) const {
  const BlockInfo& b = blocks_[bi];
  out->dict_columns.clear();
  out->raw_omitted = false;
  const Status bad = Corrupt("block " + std::to_string(bi) + ": inconsistent columns");
  const char* base = out->buffer.data();
  const size_t size = out->buffer.size();
  Cursor c{base, base + size};
  const uint64_t n = c.V(), nf = c.V(), nn = c.V(), raw_run = c.V(), value_run = c.V();
  if (!c.ok || n != b.event_count || nf > size || nn > nf || raw_run > size ||
      value_run > size - raw_run)
    return bad;
  const char* raw_start = base + size - value_run - raw_run;
  const char* value_start = base + size - value_run;
  if (c.p > raw_start) return bad;
  c.end = raw_start;

  out->field_names.resize(nn);
  for (uint64_t k = 0; k < nn; ++k) {
    uint64_t len = c.V();
    if (!c.ok || len > static_cast<uint64_t>(c.end - c.p)) return bad;
    out->field_names[k] = std::string_view(c.p, len);
    c.p += len;
  }

  out->event_count = n;
  out->timestamps.resize(n);
  out->ingest_ts.resize(n);
  out->positions.resize(n);
  out->raw.resize(n);
  out->field_begin.resize(n + 1);
  out->fields.resize(nf);
  for (auto* col : {&out->timestamps, &out->ingest_ts}) {
    uint64_t v = static_cast<uint64_t>(c.S());
    (*col)[0] = static_cast<int64_t>(v);
    for (uint64_t i = 1; i < n; ++i) {
      v += static_cast<uint64_t>(c.S());
      (*col)[i] = static_cast<int64_t>(v);
    }
  }
  {
    int64_t off = c.S();
    uint64_t idx = c.V();
    if (idx > std::numeric_limits<uint32_t>::max()) return bad;
    out->positions[0] = Position{Offset(off), static_cast<uint32_t>(idx)};
    for (uint64_t i = 1; i < n; ++i) {
      uint64_t d = c.V();
      uint64_t x = c.V();
      if (x > std::numeric_limits<uint32_t>::max()) return bad;
      if (d == 0) {
        idx = idx + 1 + x;
      } else {
        if (d > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
            __builtin_add_overflow(off, static_cast<int64_t>(d), &off))
          return bad;
        idx = x;
      }
      if (idx > std::numeric_limits<uint32_t>::max()) return bad;
      out->positions[i] = Position{Offset(off), static_cast<uint32_t>(idx)};
    }
  }
  uint64_t raw_used = 0;
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t len = c.V();
    if (len > raw_run - raw_used) return bad;
    out->raw[i] = std::string_view(raw_start + raw_used, len);
    raw_used += len;
  }
  if (raw_used != raw_run) return bad;
  uint64_t fields_seen = 0;
  for (uint64_t i = 0; i < n; ++i) {
    out->field_begin[i] = static_cast<uint32_t>(fields_seen);
    uint64_t k = c.V();
    if (k > nf - fields_seen) return bad;
    fields_seen += k;
  }
  out->field_begin[n] = static_cast<uint32_t>(fields_seen);
  if (fields_seen != nf) return bad;
  for (uint64_t j = 0; j < nf; ++j) {
    uint64_t id = c.V();
    if (id >= nn) return bad;
    out->fields[j].name = out->field_names[id];
  }
  uint64_t value_used = 0;
  for (uint64_t i = 0; i < n; ++i) {
    const std::string_view raw = out->raw[i];
    uint64_t prev_end = 0;
    for (uint32_t j = out->field_begin[i]; j < out->field_begin[i + 1]; ++j) {
      uint64_t ref = c.V();
      uint64_t len = c.V();
      if (ref == 0) {
        if (len > value_run - value_used) return bad;
        out->fields[j].value = std::string_view(value_start + value_used, len);
        value_used += len;
      } else {
        // ref - 1 is the zig-zag encoded start relative to prev_end (<= raw.size()).
        const uint64_t z = ref - 1;
        const uint64_t mag = z >> 1;
        uint64_t start;
        if (z & 1) {
          if (mag + 1 > prev_end) return bad;
          start = prev_end - (mag + 1);
        } else {
          if (mag > raw.size() - prev_end) return bad;
          start = prev_end + mag;
        }
        if (len > raw.size() - start) return bad;
        out->fields[j].value = raw.substr(start, len);
        prev_end = start + len;
      }
    }
  }
  if (!c.ok || c.p != raw_start || value_used != value_run) return bad;

  out->field_names_complete = true;
  return CheckDecoded(bi, *out);
}

Status SegmentReaderImpl::VerifyAll() const {
  ASSIGN_OR_RETURN(uint64_t size, file_->Size());
  if (size != info_.file_size) return Corrupt("file size changed since open");
  std::unique_ptr<XXH64_state_t, XxhDeleter> xxh(XXH64_createState());
  if (!xxh) return Status::Internal("segment: out of memory");
  XXH64_reset(xxh.get(), 0);
  constexpr size_t kChunk = 1 << 20;
  std::string chunk;
  for (uint64_t at = 0; at < size - 8;) {
    size_t n = static_cast<size_t>(std::min<uint64_t>(kChunk, size - 8 - at));
    RETURN_IF_ERROR(ReadExact(at, n, &chunk, "file"));
    XXH64_update(xxh.get(), chunk.data(), chunk.size());
    at += n;
  }
  if (XXH64_digest(xxh.get()) != info_.content_hash) return Corrupt("content hash mismatch");
  DecodedBlock block;
  for (size_t i = 0; i < blocks_.size(); ++i) RETURN_IF_ERROR(ReadBlock(i, &block));
  return Status::OK();
}

}  // namespace

Result<SegmentInfo> WriteSegment(Env* env, const std::string& path, const Datasource& ds,
                                 PartitionId partition, const std::vector<PositionedEvent>& events,
                                 const SegmentWriterOptions& options) {
  RETURN_IF_ERROR(ValidateWriteArgs(events, options));
  const std::string tmp = path + ".tmp";
  Result<SegmentInfo> info = WriteSegmentTo(env, tmp, ds, partition, events, options);
  if (!info.ok()) {
    (void)env->RemoveFile(tmp);
    return info.status().WithContext("segment " + path);
  }
  Status st = env->RenameFile(tmp, path);
  if (st.ok()) st = env->SyncDir(DirName(path));
  if (!st.ok()) {
    (void)env->RemoveFile(tmp);
    return st.WithContext("segment " + path);
  }
  return info;
}

Result<SegmentInfo> WriteSegmentFile(Env* env, const std::string& path, const Datasource& ds,
                                     PartitionId partition,
                                     const std::vector<PositionedEvent>& events,
                                     const SegmentWriterOptions& options) {
  RETURN_IF_ERROR(ValidateWriteArgs(events, options));
  Result<SegmentInfo> info = WriteSegmentTo(env, path, ds, partition, events, options);
  if (!info.ok()) {
    (void)env->RemoveFile(path);
    return info.status().WithContext("segment " + path);
  }
  return info;
}

Result<std::unique_ptr<SegmentFileWriter>> SegmentFileWriter::Create(
    Env* env, const std::string& path, const Datasource& ds, PartitionId partition,
    const SegmentWriterOptions& options) {
  RETURN_IF_ERROR(ValidateOptions(options));
  auto w = std::make_unique<FileWriterImpl>(env, path, ds, partition, options);
  Status st = w->Open();
  if (!st.ok()) return st.WithContext("segment " + path);
  return std::unique_ptr<SegmentFileWriter>(std::move(w));
}

Result<std::unique_ptr<SegmentReader>> SegmentReader::Open(Env* env, const std::string& path) {
  ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> file, env->NewRandomAccessFile(path));
  auto reader = std::make_unique<SegmentReaderImpl>(path, std::move(file));
  RETURN_IF_ERROR(reader->Load());
  return std::unique_ptr<SegmentReader>(std::move(reader));
}

}  // namespace sediment
