#include "log/local_log.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "common/checksum.h"
#include "common/clock.h"
#include "common/coding.h"
#include "common/mutex.h"

namespace sediment {
namespace {

// ---- On-disk format (log/FORMAT.md) ----

constexpr uint32_t kFormatVersion = 1;
constexpr char kMetaName[] = "LOG_META";
constexpr char kStartName[] = "START";
constexpr char kMetaMagic[] = "SEDLOGMT";   // 8 bytes, no NUL on disk
constexpr char kStartMagic[] = "SEDLOGST";  // 8 bytes
constexpr size_t kMetaSize = 8 + 4 + 4 + 4;
constexpr size_t kStartSize = 8 + 4 + 8 + 4;
// Record header: u32 crc32c | u32 payload length | u64 offset. The CRC covers bytes 4..end of
// the record (length, offset, payload).
constexpr size_t kHeaderSize = 16;
constexpr uint64_t kMaxRecordBytes = 256ull << 20;

// ---- Tuning ----

// One sparse-index entry per this many bytes of a file.
constexpr uint64_t kIndexInterval = 64 << 10;
// A writer takes at most this much from a partition's queue per write + fsync.
constexpr uint64_t kMaxBatchBytes = 16 << 20;
constexpr uint64_t kScanChunk = 1 << 20;

std::string PartitionDirName(int32_t p) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "p-%05d", p);
  return buf;
}

std::string LogFileName(int64_t base) {
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%020lld.log", static_cast<long long>(base));
  return buf;
}

bool ParseLogFileName(const std::string& name, int64_t* base) {
  if (name.size() != 24 || name.compare(20, 4, ".log") != 0) return false;
  int64_t v = 0;
  for (int i = 0; i < 20; ++i) {
    char c = name[i];
    if (c < '0' || c > '9') return false;
    if (v > (INT64_MAX - (c - '0')) / 10) return false;
    v = v * 10 + (c - '0');
  }
  *base = v;
  return true;
}

void EncodeHeader(char* dst, int64_t offset, std::string_view payload) {
  EncodeFixed32(dst + 4, static_cast<uint32_t>(payload.size()));
  EncodeFixed64(dst + 8, static_cast<uint64_t>(offset));
  uint32_t crc = Crc32c(payload, Crc32c(dst + 4, kHeaderSize - 4));
  EncodeFixed32(dst, crc);
}

struct Header {
  uint32_t crc;
  uint32_t length;
  int64_t offset;
};

Header DecodeHeader(const char* p) {
  return {DecodeFixed32(p), DecodeFixed32(p + 4), static_cast<int64_t>(DecodeFixed64(p + 8))};
}

bool CrcMatches(const char* header, std::string_view payload) {
  return DecodeFixed32(header) == Crc32c(payload, Crc32c(header + 4, kHeaderSize - 4));
}

std::string EncodeMeta(int32_t partitions) {
  std::string out(kMetaMagic, 8);
  PutFixed32(&out, kFormatVersion);
  PutFixed32(&out, static_cast<uint32_t>(partitions));
  PutFixed32(&out, Crc32c(out));
  return out;
}

Result<int32_t> DecodeMeta(const std::string& data, const std::string& path) {
  if (data.size() != kMetaSize || data.compare(0, 8, kMetaMagic, 8) != 0 ||
      DecodeFixed32(data.data() + 16) != Crc32c(data.data(), 16)) {
    return Status::Corruption(path + ": bad log metadata (magic, size or checksum)");
  }
  uint32_t version = DecodeFixed32(data.data() + 8);
  if (version != kFormatVersion) {
    return Status::Corruption(path + ": unsupported log format version " + std::to_string(version));
  }
  return static_cast<int32_t>(DecodeFixed32(data.data() + 12));
}

std::string EncodeStart(int64_t start) {
  std::string out(kStartMagic, 8);
  PutFixed32(&out, kFormatVersion);
  PutFixed64(&out, static_cast<uint64_t>(start));
  PutFixed32(&out, Crc32c(out));
  return out;
}

Result<int64_t> DecodeStart(const std::string& data, const std::string& path) {
  if (data.size() != kStartSize || data.compare(0, 8, kStartMagic, 8) != 0 ||
      DecodeFixed32(data.data() + 20) != Crc32c(data.data(), 20) ||
      DecodeFixed32(data.data() + 8) != kFormatVersion) {
    return Status::Corruption(path + ": bad start-offset file");
  }
  return static_cast<int64_t>(DecodeFixed64(data.data() + 12));
}

struct IndexEntry {
  int64_t offset;
  uint64_t pos;
};

// Adds an index entry for the record at (offset, pos) when due.
void MaybeIndex(std::vector<IndexEntry>* index, int64_t offset, uint64_t pos) {
  if (index->empty() || pos - index->back().pos >= kIndexInterval) index->push_back({offset, pos});
}

// A run of bytes in a log file that holds no readable record; the offsets [first, next) it
// covered are lost (log/FORMAT.md, "Damage"). Readers jump from `pos` to `end_pos`.
struct Hole {
  uint64_t pos = 0;      // first damaged byte
  uint64_t end_pos = 0;  // the next readable record
  int64_t first = 0;     // first lost offset
  int64_t next = 0;      // offset of the record at end_pos
  std::string what;      // what was wrong at pos
};

struct ScanResult {
  uint64_t file_size = 0;
  uint64_t valid_bytes = 0;  // prefix made of whole, well-formed records (and skipped holes)
  int64_t end = 0;           // offset after the last valid record
  std::vector<IndexEntry> index;
  std::vector<Hole> holes;  // damaged records skipped (only with skip_damage)
  std::string problem;      // why the scan stopped before file_size; empty when it did not
};

// Whether `data` (a file's bytes from some position) starts with a whole record whose offset is in
// [min_off, max_off] and whose CRC matches.
bool ReadableRecordAt(std::string_view data, int64_t min_off, int64_t max_off) {
  if (data.size() < kHeaderSize) return false;
  Header h = DecodeHeader(data.data());
  if (h.length > kMaxRecordBytes || h.offset < min_off || h.offset > max_off) return false;
  if (data.size() - kHeaderSize < h.length) return false;
  return CrcMatches(data.data(), data.substr(kHeaderSize, h.length));
}

// After a damaged record at `pos` (expected offset `off`) of a file of `size` bytes: the position
// of the first readable record after it. First the record right behind the damaged one when its
// header still gives a length and that record is `off + 1` (payload damage); else the first
// position past `pos` holding a record with a matching CRC and an offset above `off` that the
// skipped bytes can account for (each lost record took at least a header). nullopt when nothing
// readable follows: the damage is a torn tail.
Result<std::optional<std::pair<uint64_t, int64_t>>> FindNextRecord(const RandomAccessFile& file,
                                                                   uint64_t size, uint64_t pos,
                                                                   int64_t off) {
  std::string rest;
  RETURN_IF_ERROR(file.Read(pos, size - pos, &rest));
  std::string_view v(rest);
  if (v.size() >= kHeaderSize) {
    Header h = DecodeHeader(v.data());
    if (h.offset == off && h.length <= kMaxRecordBytes && kHeaderSize + h.length < v.size()) {
      uint64_t q = kHeaderSize + h.length;
      if (ReadableRecordAt(v.substr(q), off + 1, off + 1)) {
        return std::optional(std::make_pair(pos + q, off + 1));
      }
    }
  }
  for (uint64_t q = 1; q + kHeaderSize <= v.size(); ++q) {
    const int64_t max_off = off + static_cast<int64_t>(q / kHeaderSize);
    if (max_off <= off) continue;
    if (ReadableRecordAt(v.substr(q), off + 1, max_off)) {
      return std::optional(std::make_pair(pos + q, DecodeHeader(v.data() + q).offset));
    }
  }
  return std::optional<std::pair<uint64_t, int64_t>>();
}

// Walks the records of one file. With verify_crc every payload is read and checked; without it
// only the headers (lengths and offsets) are. With skip_damage (requires verify_crc) a damaged
// record followed by readable ones becomes a hole and the scan goes on; only damage that nothing
// readable follows stops it.
Result<ScanResult> ScanFile(Env* env, const std::string& path, int64_t base, bool verify_crc,
                            bool skip_damage) {
  ASSIGN_OR_RETURN(auto file, env->NewRandomAccessFile(path));
  ScanResult r;
  ASSIGN_OR_RETURN(r.file_size, file->Size());
  std::string buf;
  uint64_t buf_pos = 0;
  uint64_t last_len = 0;
  // Makes buf hold [from, from + n), reading at least `want` bytes when it must read.
  auto ensure = [&](uint64_t from, uint64_t n, uint64_t want) -> Status {
    if (from >= buf_pos && from + n <= buf_pos + buf.size()) return Status::OK();
    buf_pos = from;
    uint64_t len = std::min(std::max(n, want), r.file_size - from);
    RETURN_IF_ERROR(file->Read(from, len, &buf));
    if (buf.size() < n) return Status::IOError(path + ": file shrank while scanning");
    return Status::OK();
  };
  uint64_t pos = 0;
  int64_t off = base;
  while (pos < r.file_size) {
    std::string problem;
    uint64_t rec_end = 0;
    if (r.file_size - pos < kHeaderSize) {
      problem = "incomplete record header";
    } else {
      uint64_t want = (verify_crc || last_len < (64 << 10)) ? kScanChunk : kHeaderSize;
      RETURN_IF_ERROR(ensure(pos, kHeaderSize, want));
      const char* hp = buf.data() + (pos - buf_pos);
      Header h = DecodeHeader(hp);
      rec_end = pos + kHeaderSize + h.length;
      if (h.length > kMaxRecordBytes) {
        problem = "record length " + std::to_string(h.length) + " over the limit";
      } else if (h.offset != off) {
        problem = "record offset " + std::to_string(h.offset) + " where " + std::to_string(off) +
                  " was expected";
      } else if (rec_end > r.file_size) {
        problem = "incomplete record";
      } else if (verify_crc) {
        RETURN_IF_ERROR(ensure(pos, kHeaderSize + h.length, kScanChunk));
        hp = buf.data() + (pos - buf_pos);
        if (!CrcMatches(hp, std::string_view(hp + kHeaderSize, h.length))) {
          problem = "checksum mismatch";
        }
      }
      last_len = h.length;
    }
    if (!problem.empty()) {
      if (skip_damage) {
        ASSIGN_OR_RETURN(auto next, FindNextRecord(*file, r.file_size, pos, off));
        if (next) {
          r.holes.push_back({pos, next->first, off, next->second, problem});
          pos = next->first;
          off = next->second;
          continue;
        }
      }
      r.problem = std::move(problem);
      break;
    }
    MaybeIndex(&r.index, off, pos);
    pos = rec_end;
    ++off;
  }
  r.valid_bytes = pos;
  r.end = off;
  return r;
}

// ---- The log ----

struct LogFile {
  int64_t base = 0;
  std::string path;
  std::shared_ptr<RandomAccessFile> reader;  // opened on first read
  uint64_t durable_bytes = 0;                // readers never look past this
  int64_t end = 0;                           // offset after the last durable record
  std::vector<IndexEntry> index;
  std::vector<Hole> holes;  // by position; damaged records readers skip
};

struct PendingAppend {
  std::string data;
  std::promise<Result<Offset>> promise;
};

struct Partition {
  int32_t id = 0;
  std::string dir;

  Mutex mu ACQUIRED_AFTER(delete_mu);
  CondVar data_cv;                                  // signalled when `end` grows or the log closes
  std::map<int64_t, LogFile> files GUARDED_BY(mu);  // by base offset; the last one is active
  int64_t start GUARDED_BY(mu) = 0;
  int64_t end GUARDED_BY(mu) = 0;  // every record below is durable
  bool closed GUARDED_BY(mu) = false;
  // WakeReaders: Reads waiting in data_cv end when wake_gen moved past the value they saw; with
  // none waiting, wake_pending makes the next Read that would wait return at once.
  uint64_t wake_gen GUARDED_BY(mu) = 0;
  int readers_waiting GUARDED_BY(mu) = 0;
  bool wake_pending GUARDED_BY(mu) = false;
  std::string last_error GUARDED_BY(mu);         // cleared by the next durable batch
  std::string open_note GUARDED_BY(mu);          // data loss found at open
  std::vector<LogDamage> damage GUARDED_BY(mu);  // damaged ranges not yet deleted

  Mutex delete_mu;  // serializes DeleteBefore

  // Guarded by the owning Worker's mu.
  std::deque<PendingAppend> pending;
  Status failed;  // non-OK: every append fails until the log is reopened

  // Owned by the writer thread (and by the opener before it starts).
  std::unique_ptr<WritableFile> active;
  int64_t active_base = 0;
  uint64_t active_size = 0;  // durable length of the active file
  // When the active file is due to be rolled by age (options.file_roll_age after the first
  // batch written to it); max(): not due (empty, just rolled, or rolling by age is off).
  std::chrono::steady_clock::time_point roll_at = std::chrono::steady_clock::time_point::max();
  int64_t next_offset = 0;
  std::string write_buf;
};

struct Worker {
  Mutex mu;
  CondVar cv;
  bool stop GUARDED_BY(mu) = false;
  std::vector<Partition*> parts;
  std::thread thread;
};

class LocalLog final : public CommitLog {
 public:
  LocalLog(Env* env, std::string dir, const LocalLogOptions& options)
      : env_(env), dir_(std::move(dir)), options_(options) {
    parts_.reserve(options.partitions);
    for (int32_t p = 0; p < options.partitions; ++p) {
      parts_.push_back(std::make_unique<Partition>());
      parts_.back()->id = p;
      parts_.back()->dir = JoinPath(dir_, PartitionDirName(p));
    }
    int32_t n = options.writer_threads > 0 ? options.writer_threads
                                           : std::min<int32_t>(options.partitions, 4);
    n = std::min(n, options.partitions);
    for (int32_t i = 0; i < n; ++i) workers_.push_back(std::make_unique<Worker>());
    for (int32_t p = 0; p < options.partitions; ++p)
      workers_[p % n]->parts.push_back(parts_[p].get());
  }

  ~LocalLog() override {
    for (auto& w : workers_) {
      MutexLock lock(&w->mu);
      w->stop = true;
      w->cv.NotifyAll();
    }
    for (auto& w : workers_) {
      if (w->thread.joinable()) w->thread.join();
    }
    for (auto& part : parts_) {
      {
        MutexLock lock(&part->mu);
        part->closed = true;
      }
      part->data_cv.NotifyAll();
      if (part->active) {
        Status s = part->active->Close();
        if (!s.ok()) spdlog::warn("local log: closing partition {}: {}", part->id, s.ToString());
      }
    }
  }

  // Opening: recovers partition p from disk; then StartWriters. Not thread-safe: runs before any
  // other thread can see the partition, so it touches the fields guarded by part.mu without it
  // (exempt from the analysis).
  Partition& partition(int32_t p) { return *parts_[p]; }
  Status OpenPartition(Partition& part) NO_THREAD_SAFETY_ANALYSIS;
  void StartWriters() {
    for (auto& w : workers_) w->thread = std::thread([this, w = w.get()] { WriterLoop(*w); });
  }

  int32_t partition_count() const override { return options_.partitions; }
  std::future<Result<Offset>> Append(PartitionId p, std::string record) override;
  Result<std::vector<LogRecord>> Read(PartitionId p, Offset from, size_t max_bytes,
                                      std::chrono::milliseconds max_wait) override;
  void WakeReaders(PartitionId p) override;
  Status DeleteBefore(PartitionId p, Offset offset) override;
  Result<Offset> StartOffset(PartitionId p) override;
  Result<Offset> EndOffset(PartitionId p) override;
  std::string Health() override;
  std::vector<LogDamage> Damage() override;
  Status RefuseBelow(PartitionId p, Offset floor) override;

 private:
  Worker& WorkerOf(int32_t p) { return *workers_[p % workers_.size()]; }
  Status CheckPartition(PartitionId p) const {
    if (p.value < 0 || p.value >= options_.partitions) {
      return Status::InvalidArgument("partition " + std::to_string(p.value) + " out of range [0, " +
                                     std::to_string(options_.partitions) + ")");
    }
    return Status::OK();
  }

  void WriterLoop(Worker& w);
  // Rolls if due, then writes the batch (no sync). Sets *fatal when the partition must stop.
  Status WriteBatch(Partition& part, std::vector<PendingAppend>& batch, bool* fatal);
  // Seals the active file and starts a new one named by the next offset (created, directory
  // fsynced), then removes the sealed files wholly below the start offset. Writer thread only.
  Status Roll(Partition& part, bool* fatal);
  // A roll due by age with no batch to write: Roll when the active file holds records; a
  // failure is logged and kept as the partition's last error (fatal: the partition stops, as for
  // a failed batch) and retried one age later.
  void RollByAge(Worker& w, Partition& part);
  // The earliest age roll due among w's partitions that still accept appends; max() for none.
  // Requires w.mu (reads `failed`); writer thread only (reads `roll_at`).
  std::chrono::steady_clock::time_point NextAgeRoll(Worker& w) REQUIRES(w.mu);
  // Unlinks the files every record of which is below part.start (the active file never is).
  void RemoveFilesBelowStart(Partition& part);
  void Publish(Partition& part, std::vector<PendingAppend>& batch, int64_t first);
  void Fail(Worker& w, Partition& part, std::vector<PendingAppend>& batch, const Status& s,
            bool fatal);
  // Cuts the active file back to its durable length and reopens it.
  Status RestoreActive(Partition& part);
  // Reports lost records [first, next) at bytes [pos, pos + bytes) of `path` (log line at error
  // level, kept for Damage()). The Locked form requires part.mu.
  void RecordDamage(Partition& part, const std::string& path, uint64_t pos, uint64_t bytes,
                    int64_t first, int64_t next, const std::string& what);
  void RecordDamageLocked(Partition& part, const std::string& path, uint64_t pos, uint64_t bytes,
                          int64_t first, int64_t next, const std::string& what) REQUIRES(part.mu);
  // A damaged record found by a read: remembered as a hole of the file (readers skip it) and
  // reported once.
  void NoteReadDamage(Partition& part, int64_t file_base, const Hole& hole);

  Env* const env_;
  const std::string dir_;
  const LocalLogOptions options_;
  std::vector<std::unique_ptr<Partition>> parts_;
  std::vector<std::unique_ptr<Worker>> workers_;
};

Status LocalLog::OpenPartition(Partition& part) {
  const std::string& dir = part.dir;
  if (!env_->FileExists(dir)) {
    RETURN_IF_ERROR(env_->CreateDirs(dir));
    RETURN_IF_ERROR(env_->SyncDir(dir_));
  }
  ASSIGN_OR_RETURN(std::vector<std::string> names, env_->ListDir(dir));
  int64_t start = 0;
  std::vector<int64_t> bases;
  for (const std::string& name : names) {
    int64_t base;
    if (ParseLogFileName(name, &base)) {
      bases.push_back(base);
    } else if (name == kStartName) {
      std::string path = JoinPath(dir, name);
      ASSIGN_OR_RETURN(std::string data, env_->ReadFile(path));
      ASSIGN_OR_RETURN(start, DecodeStart(data, path));
    }
  }
  std::sort(bases.begin(), bases.end());
  auto path_of = [&](int64_t base) { return JoinPath(dir, LogFileName(base)); };

  // Files wholly below the start are garbage left by an interrupted DeleteBefore.
  while (bases.size() >= 2 && bases[1] <= start) {
    Status s = env_->RemoveFile(path_of(bases.front()));
    if (!s.ok()) spdlog::warn("local log: removing {}: {}", path_of(bases.front()), s.ToString());
    bases.erase(bases.begin());
  }

  std::string note;
  for (size_t i = 0; i < bases.size(); ++i) {
    const bool last = i + 1 == bases.size();
    const std::string path = path_of(bases[i]);
    // Sealed files: headers only (payload CRCs are checked on read); any damage found that way
    // is located with a full scan that skips damaged records.
    ASSIGN_OR_RETURN(ScanResult scan,
                     ScanFile(env_, path, bases[i], /*verify_crc=*/last, /*skip_damage=*/last));
    if (!last && !scan.problem.empty()) {
      ASSIGN_OR_RETURN(scan, ScanFile(env_, path, bases[i], true, true));
    }
    for (const Hole& h : scan.holes) {
      RecordDamage(part, path, h.pos, h.end_pos - h.pos, h.first, h.next, h.what);
    }
    if (!scan.problem.empty()) {
      if (last) {
        // Nothing readable follows: a torn tail from a crash, whose records were never
        // acknowledged (their fsync had not returned).
        spdlog::warn("local log: {}: {} at byte {}; dropping the last {} bytes (torn tail)", path,
                     scan.problem, scan.valid_bytes, scan.file_size - scan.valid_bytes);
        RETURN_IF_ERROR(env_->TruncateFile(path, scan.valid_bytes));
      } else {
        // The end of a sealed file is unreadable; the records up to the next file are lost
        // (reported below as the gap between the files). The bytes stay for inspection.
        spdlog::error(
            "local log: {}: {} at byte {}; the last {} bytes of this sealed file are "
            "unreadable",
            path, scan.problem, scan.valid_bytes, scan.file_size - scan.valid_bytes);
      }
    }
    if (i > 0) {
      const LogFile& prev = part.files.rbegin()->second;
      if (prev.end > bases[i]) {
        return Status::Corruption(dir + ": log file " + LogFileName(bases[i]) +
                                  " starts at offset " + std::to_string(bases[i]) +
                                  " inside the previous file, which ends at " +
                                  std::to_string(prev.end));
      }
      if (prev.end < bases[i]) {
        uint64_t size = 0;
        if (auto sz = env_->FileSize(prev.path); sz.ok()) size = *sz;
        RecordDamage(part, prev.path, prev.durable_bytes, size - prev.durable_bytes, prev.end,
                     bases[i],
                     prev.durable_bytes < size ? "unreadable end of a sealed file"
                                               : "records missing between log files");
      }
    }
    LogFile f;
    f.base = bases[i];
    f.path = path;
    f.durable_bytes = scan.valid_bytes;
    f.end = scan.end;
    f.index = std::move(scan.index);
    f.holes = std::move(scan.holes);
    part.files.emplace(f.base, std::move(f));
  }

  if (!part.files.empty() && part.files.begin()->first > start) {
    note = "records [" + std::to_string(start) + ", " + std::to_string(part.files.begin()->first) +
           ") were missing at open";
    spdlog::warn("local log: {}: {}", dir, note);
    start = part.files.begin()->first;
  }
  if (!part.files.empty() && part.files.rbegin()->second.end < start) {
    note = "records [" + std::to_string(part.files.rbegin()->second.end) + ", " +
           std::to_string(start) + ") were missing at open";
    spdlog::warn("local log: {}: {}", dir, note);
    for (auto& [base, f] : part.files) RETURN_IF_ERROR(env_->RemoveFile(f.path));
    part.files.clear();
  }
  if (part.files.empty()) {
    LogFile f;
    f.base = start;
    f.path = path_of(start);
    f.end = start;
    ASSIGN_OR_RETURN(auto created, env_->NewWritableFile(f.path));
    RETURN_IF_ERROR(created->Close());
    RETURN_IF_ERROR(env_->SyncDir(dir));
    part.files.emplace(f.base, std::move(f));
  }

  LogFile& active = part.files.rbegin()->second;
  ASSIGN_OR_RETURN(part.active, env_->NewAppendableFile(active.path));
  if (part.active->Size() != active.durable_bytes) {
    return Status::IOError(active.path + ": size changed while opening");
  }
  part.active_base = active.base;
  part.active_size = active.durable_bytes;
  if (part.active_size > 0 && options_.file_roll_age.count() > 0) {
    part.roll_at = SteadyNow() + options_.file_roll_age;
  }
  part.next_offset = active.end;
  part.start = start;
  part.end = active.end;
  part.open_note = std::move(note);
  return Status::OK();
}

std::future<Result<Offset>> LocalLog::Append(PartitionId p, std::string record) {
  std::promise<Result<Offset>> promise;
  auto future = promise.get_future();
  if (Status s = CheckPartition(p); !s.ok()) {
    promise.set_value(std::move(s));
    return future;
  }
  if (record.size() > kMaxRecordBytes) {
    promise.set_value(Status::TooLarge("log record of " + std::to_string(record.size()) +
                                       " bytes over the limit of " +
                                       std::to_string(kMaxRecordBytes)));
    return future;
  }
  Partition& part = *parts_[p.value];
  Worker& w = WorkerOf(p.value);
  MutexLock lock(&w.mu);
  if (w.stop) {
    promise.set_value(Status::Unavailable("local log is closing"));
  } else if (!part.failed.ok()) {
    promise.set_value(part.failed);
  } else {
    part.pending.push_back({std::move(record), std::move(promise)});
    w.cv.NotifyOne();
  }
  return future;
}

void LocalLog::WriterLoop(Worker& w) {
  const size_t n = w.parts.size();
  std::vector<std::vector<PendingAppend>> batches(n);
  std::vector<Status> statuses(n);
  std::vector<int64_t> firsts(n);
  std::vector<char> fatal(n);
  auto any_pending = [&] {
    for (Partition* part : w.parts) {
      if (!part->pending.empty()) return true;
    }
    return false;
  };
  std::vector<char> age_roll(n);
  MutexLock lock(&w.mu);
  while (true) {
    // Idle: blocks until an append comes or the next age roll is due (never a polling loop).
    while (!w.stop && !any_pending()) {
      const auto at = NextAgeRoll(w);
      if (at == std::chrono::steady_clock::time_point::max()) {
        w.cv.Wait(w.mu);
      } else if (at <= SteadyNow() || !w.cv.WaitUntil(w.mu, at)) {
        break;
      }
    }
    if (w.stop) break;
    if (options_.max_commit_delay.count() > 0 && any_pending()) {
      const auto deadline = SteadyNow() + options_.max_commit_delay;
      while (!w.stop && w.cv.WaitUntil(w.mu, deadline)) {
      }
      if (w.stop) break;
    }
    for (size_t i = 0; i < n; ++i) {
      Partition& part = *w.parts[i];
      uint64_t bytes = 0;
      while (!part.pending.empty() && (batches[i].empty() || bytes < kMaxBatchBytes)) {
        bytes += part.pending.front().data.size();
        batches[i].push_back(std::move(part.pending.front()));
        part.pending.pop_front();
      }
      if (!batches[i].empty() && !part.failed.ok()) {
        for (auto& a : batches[i]) a.promise.set_value(part.failed);
        batches[i].clear();
      }
      // A partition with a batch rolls by age in WriteBatch.
      age_roll[i] = batches[i].empty() && part.failed.ok() && part.roll_at <= SteadyNow();
    }
    lock.Unlock();

    for (size_t i = 0; i < n; ++i) {
      if (age_roll[i]) RollByAge(w, *w.parts[i]);
    }

    // Write every partition's batch, then sync them: the disk sees all writes before the first
    // fsync, and each fsync covers a whole batch.
    for (size_t i = 0; i < n; ++i) {
      if (batches[i].empty()) continue;
      bool f = false;
      firsts[i] = w.parts[i]->next_offset;
      statuses[i] = WriteBatch(*w.parts[i], batches[i], &f);
      fatal[i] = f;
    }
    for (size_t i = 0; i < n; ++i) {
      if (batches[i].empty()) continue;
      Partition& part = *w.parts[i];
      if (statuses[i].ok()) statuses[i] = part.active->Sync();
      if (statuses[i].ok()) {
        Publish(part, batches[i], firsts[i]);
      } else {
        part.next_offset = firsts[i];
        Fail(w, part, batches[i], statuses[i], fatal[i]);
      }
      batches[i].clear();
    }
    lock.Lock();
  }
  for (Partition* part : w.parts) {
    for (auto& a : part->pending) a.promise.set_value(Status::Unavailable("local log closed"));
    part->pending.clear();
  }
}

Status LocalLog::Roll(Partition& part, bool* fatal) {
  const int64_t base = part.next_offset;
  const std::string path = JoinPath(part.dir, LogFileName(base));
  ASSIGN_OR_RETURN(auto file, env_->NewWritableFile(path));
  if (Status s = env_->SyncDir(part.dir); !s.ok()) {
    file.reset();
    // A file left behind would claim offsets the old active file keeps getting.
    if (Status r = env_->RemoveFile(path); !r.ok()) *fatal = true;
    return s;
  }
  if (Status s = part.active->Close(); !s.ok()) {
    spdlog::warn("local log: closing rolled file of partition {}: {}", part.id, s.ToString());
  }
  part.active = std::move(file);
  part.active_base = base;
  part.active_size = 0;
  part.roll_at = std::chrono::steady_clock::time_point::max();
  LogFile f;
  f.base = base;
  f.path = path;
  f.end = base;
  {
    MutexLock lock(&part.mu);
    part.files.emplace(base, std::move(f));
  }
  // The new file is durable in the directory (synced above) before any sealed file goes.
  RemoveFilesBelowStart(part);
  return Status::OK();
}

void LocalLog::RollByAge(Worker& w, Partition& part) {
  if (part.active_size == 0 || !part.active) {
    part.roll_at = std::chrono::steady_clock::time_point::max();
    return;
  }
  bool fatal = false;
  Status s = Roll(part, &fatal);
  if (s.ok()) {
    MutexLock lock(&part.mu);
    part.last_error.clear();
    return;
  }
  part.roll_at = SteadyNow() + options_.file_roll_age;
  spdlog::warn("local log: partition {}: rolling the active file by age failed: {}", part.id,
               s.ToString());
  {
    MutexLock lock(&part.mu);
    part.last_error = s.ToString();
  }
  if (fatal) {
    Status st(s.code(), "partition " + std::to_string(part.id) +
                            " stopped until the log is reopened: " + s.message());
    spdlog::error("local log: {}", st.ToString());
    MutexLock lock(&w.mu);
    part.failed = st;
    for (auto& a : part.pending) a.promise.set_value(st);
    part.pending.clear();
  }
}

std::chrono::steady_clock::time_point LocalLog::NextAgeRoll(Worker& w) {
  auto at = std::chrono::steady_clock::time_point::max();
  for (Partition* part : w.parts) {
    if (part->failed.ok()) at = std::min(at, part->roll_at);
  }
  return at;
}

void LocalLog::RemoveFilesBelowStart(Partition& part) {
  std::vector<std::string> doomed;
  {
    MutexLock lock(&part.mu);
    while (part.files.size() >= 2 && std::next(part.files.begin())->first <= part.start) {
      doomed.push_back(part.files.begin()->second.path);
      part.files.erase(part.files.begin());
    }
  }
  for (const std::string& path : doomed) {
    // A file left behind is removed by the next open.
    if (Status s = env_->RemoveFile(path); !s.ok()) {
      spdlog::warn("local log: removing {}: {}", path, s.ToString());
    }
  }
}

Status LocalLog::WriteBatch(Partition& part, std::vector<PendingAppend>& batch, bool* fatal) {
  if (part.active_size > 0 &&
      (part.active_size >= options_.file_roll_bytes || part.roll_at <= SteadyNow())) {
    RETURN_IF_ERROR(Roll(part, fatal));
  }
  if (part.active_size == 0 && options_.file_roll_age.count() > 0) {
    part.roll_at = SteadyNow() + options_.file_roll_age;
  }
  size_t total = 0;
  for (const auto& a : batch) total += kHeaderSize + a.data.size();
  std::string& buf = part.write_buf;
  buf.resize(total);
  char* p = buf.data();
  int64_t off = part.next_offset;
  for (const auto& a : batch) {
    EncodeHeader(p, off++, a.data);
    std::memcpy(p + kHeaderSize, a.data.data(), a.data.size());
    p += kHeaderSize + a.data.size();
  }
  part.next_offset = off;
  Status s = part.active->Append(buf);
  if (buf.capacity() > 2 * kMaxBatchBytes) std::string().swap(buf);
  return s;
}

void LocalLog::Publish(Partition& part, std::vector<PendingAppend>& batch, int64_t first) {
  {
    MutexLock lock(&part.mu);
    LogFile& f = part.files.rbegin()->second;
    uint64_t pos = f.durable_bytes;
    int64_t off = first;
    for (const auto& a : batch) {
      MaybeIndex(&f.index, off++, pos);
      pos += kHeaderSize + a.data.size();
    }
    f.durable_bytes = pos;
    f.end = off;
    part.end = off;
    part.active_size = pos;
    part.last_error.clear();
  }
  part.data_cv.NotifyAll();
  int64_t off = first;
  for (auto& a : batch) a.promise.set_value(Offset(off++));
}

Status LocalLog::RestoreActive(Partition& part) {
  const std::string path = JoinPath(part.dir, LogFileName(part.active_base));
  (void)part.active->Close();
  part.active.reset();
  RETURN_IF_ERROR(env_->TruncateFile(path, part.active_size));
  ASSIGN_OR_RETURN(part.active, env_->NewAppendableFile(path));
  if (part.active->Size() != part.active_size) {
    return Status::IOError(path + ": size after truncation is " +
                           std::to_string(part.active->Size()) + ", expected " +
                           std::to_string(part.active_size));
  }
  return Status::OK();
}

void LocalLog::Fail(Worker& w, Partition& part, std::vector<PendingAppend>& batch, const Status& s,
                    bool fatal) {
  spdlog::warn("local log: partition {}: batch of {} records failed: {}", part.id, batch.size(),
               s.ToString());
  Status failed;
  if (fatal) {
    failed = s;
  } else if (!part.active) {
    failed = Status::IOError("no active file after an earlier failure");
  } else if (Status r = RestoreActive(part); !r.ok()) {
    failed = r;
  }
  {
    MutexLock lock(&part.mu);
    part.last_error = s.ToString();
  }
  if (!failed.ok()) {
    Status st(s.code(), "partition " + std::to_string(part.id) +
                            " stopped until the log is reopened: " + failed.message());
    spdlog::error("local log: {}", st.ToString());
    MutexLock lock(&w.mu);
    part.failed = st;
    for (auto& a : part.pending) a.promise.set_value(st);
    part.pending.clear();
  }
  // Completed last, so a caller seeing the error also sees the partition's settled state.
  for (auto& a : batch) a.promise.set_value(s);
}

void LocalLog::RecordDamageLocked(Partition& part, const std::string& path, uint64_t pos,
                                  uint64_t bytes, int64_t first, int64_t next,
                                  const std::string& what) {
  LogDamage d;
  d.partition = PartitionId(part.id);
  d.first = Offset(first);
  d.end = Offset(next);
  d.bytes = bytes;
  d.file = path;
  d.file_pos = pos;
  d.what = what;
  spdlog::error(
      "local log: {}: {} at bytes [{}, {}); records [{}, {}) of partition {} are lost and skipped",
      path, what, pos, pos + bytes, first, next, part.id);
  part.damage.push_back(std::move(d));
}

void LocalLog::RecordDamage(Partition& part, const std::string& path, uint64_t pos, uint64_t bytes,
                            int64_t first, int64_t next, const std::string& what) {
  MutexLock lock(&part.mu);
  RecordDamageLocked(part, path, pos, bytes, first, next, what);
}

void LocalLog::NoteReadDamage(Partition& part, int64_t file_base, const Hole& hole) {
  MutexLock lock(&part.mu);
  auto it = part.files.find(file_base);
  if (it == part.files.end()) return;  // deleted meanwhile
  std::vector<Hole>& holes = it->second.holes;
  auto at = std::lower_bound(holes.begin(), holes.end(), hole.pos,
                             [](const Hole& h, uint64_t pos) { return h.pos < pos; });
  if (at != holes.end() && at->pos == hole.pos) return;  // another reader found it first
  holes.insert(at, hole);
  RecordDamageLocked(part, it->second.path, hole.pos, hole.end_pos - hole.pos, hole.first,
                     hole.next, hole.what);
}

Result<std::vector<LogRecord>> LocalLog::Read(PartitionId p, Offset from, size_t max_bytes,
                                              std::chrono::milliseconds max_wait) {
  RETURN_IF_ERROR(CheckPartition(p));
  Partition& part = *parts_[p.value];
  const auto deadline = SteadyNow() + max_wait;
  bool timed_out = false;
  bool woken = false;  // by WakeReaders
  // The first offset wanted: `from`, moved past lost records (holes, gaps between files).
  int64_t want = from.value;
  std::vector<LogRecord> out;
  while (true) {
    std::shared_ptr<RandomAccessFile> reader;
    uint64_t pos = 0;
    uint64_t limit = 0;
    int64_t off = 0;
    int64_t file_base = 0;
    std::string path;
    std::vector<Hole> holes;
    {
      MutexLock lock(&part.mu);
      std::map<int64_t, LogFile>::iterator it;
      while (true) {
        if (part.closed) return Status::Unavailable("local log closed");
        if (want < part.start) {
          return Status::NotFound("offset " + std::to_string(want) + " of partition " +
                                  std::to_string(p.value) + " is below the start offset " +
                                  std::to_string(part.start));
        }
        if (want < part.end) {
          it = part.files.upper_bound(want);
          if (it == part.files.begin()) return Status::Internal("no log file holds offset");
          const LogFile& f = std::prev(it)->second;
          int64_t moved = want;
          for (const Hole& h : f.holes) {
            if (h.first <= moved && moved < h.next) moved = h.next;
          }
          if (moved >= f.end && it != part.files.end()) moved = std::max(moved, it->first);
          if (moved != want) {
            want = moved;
            continue;
          }
          break;
        }
        if (timed_out || woken) return out;
        if (part.wake_pending && SteadyNow() < deadline) {
          part.wake_pending = false;  // a wake made while no Read waited: this one is cut short
          return out;
        }
        const uint64_t gen = part.wake_gen;
        ++part.readers_waiting;
        timed_out = !part.data_cv.WaitUntil(part.mu, deadline);
        --part.readers_waiting;
        woken = part.wake_gen != gen;
      }
      LogFile& f = std::prev(it)->second;
      if (!f.reader) {
        ASSIGN_OR_RETURN(auto opened, env_->NewRandomAccessFile(f.path));
        f.reader = std::move(opened);
      }
      reader = f.reader;
      path = f.path;
      limit = f.durable_bytes;
      file_base = f.base;
      holes = f.holes;
      auto e = std::upper_bound(f.index.begin(), f.index.end(), want,
                                [](int64_t v, const IndexEntry& x) { return v < x.offset; });
      if (e == f.index.begin()) return Status::Internal(path + ": index has no entry");
      --e;
      pos = e->pos;
      off = e->offset;
    }

    // buf holds the file's bytes [buf_pos, buf_pos + buf.size()).
    std::string buf;
    uint64_t buf_pos = pos;
    size_t bytes = 0;
    const uint64_t chunk = std::clamp<uint64_t>(max_bytes + kHeaderSize, 64 << 10, kScanChunk);
    auto corrupt = [&](const std::string& what) {
      return Status::Corruption(path + " at byte " + std::to_string(pos) + ": " + what);
    };
    auto hole = std::lower_bound(holes.begin(), holes.end(), pos,
                                 [](const Hole& h, uint64_t at) { return h.pos < at; });
    // A record whose payload fails its CRC is skipped as lost when its header still fits: the
    // next record follows it with the next offset (or it ends the file's data).
    auto skippable = [&](uint64_t rec_end, int64_t at) -> Result<bool> {
      if (rec_end == limit) return true;
      if (rec_end + kHeaderSize > limit) return false;
      std::string next;
      RETURN_IF_ERROR(reader->Read(rec_end, kHeaderSize, &next));
      if (next.size() != kHeaderSize) return false;
      Header n = DecodeHeader(next.data());
      return n.offset == at + 1 && n.length <= kMaxRecordBytes;
    };
    bool full = false;
    while (pos < limit) {
      if (hole != holes.end() && hole->pos == pos) {
        pos = hole->end_pos;
        off = hole->next;
        ++hole;
        continue;
      }
      if (pos + kHeaderSize > limit) return corrupt("incomplete record header");
      if (pos < buf_pos || pos + kHeaderSize > buf_pos + buf.size()) {
        buf_pos = pos;
        RETURN_IF_ERROR(reader->Read(pos, std::min(chunk, limit - pos), &buf));
        if (buf.size() < kHeaderSize) return corrupt("short read");
      }
      const char* hp = buf.data() + (pos - buf_pos);
      Header h = DecodeHeader(hp);
      if (h.offset != off)
        return corrupt("offset " + std::to_string(h.offset) + " expected " + std::to_string(off));
      const uint64_t rec_end = pos + kHeaderSize + h.length;
      if (h.length > kMaxRecordBytes || rec_end > limit) return corrupt("bad record length");
      if (off < want) {
        pos = rec_end;
        ++off;
        continue;
      }
      if (!out.empty() && bytes + h.length > max_bytes) {
        full = true;
        break;
      }
      LogRecord rec;
      rec.offset = Offset(off);
      bool crc_ok;
      if (rec_end <= buf_pos + buf.size()) {
        std::string_view payload(hp + kHeaderSize, h.length);
        crc_ok = CrcMatches(hp, payload);
        if (crc_ok) rec.data.assign(payload);
      } else {
        char header[kHeaderSize];
        std::memcpy(header, hp, kHeaderSize);
        RETURN_IF_ERROR(reader->Read(pos + kHeaderSize, h.length, &rec.data));
        if (rec.data.size() != h.length) return corrupt("short read");
        crc_ok = CrcMatches(header, rec.data);
      }
      if (!crc_ok) {
        ASSIGN_OR_RETURN(bool skip, skippable(rec_end, off));
        if (!skip) return corrupt("checksum mismatch");
        NoteReadDamage(part, file_base, Hole{pos, rec_end, off, off + 1, "checksum mismatch"});
        pos = rec_end;
        ++off;
        continue;
      }
      bytes += h.length;
      out.push_back(std::move(rec));
      pos = rec_end;
      ++off;
      if (bytes >= max_bytes) {
        full = true;
        break;
      }
    }
    // Nothing readable in this file at or after `want` (lost records at its end): go on from
    // where the walk stopped; the next round skips to the next file or waits for more.
    if (!out.empty() || full || off <= want) return out;
    want = off;
  }
}

void LocalLog::WakeReaders(PartitionId p) {
  if (!CheckPartition(p).ok()) return;
  Partition& part = *parts_[p.value];
  {
    MutexLock lock(&part.mu);
    if (part.readers_waiting > 0) {
      ++part.wake_gen;
    } else {
      part.wake_pending = true;
    }
  }
  part.data_cv.NotifyAll();
}

Status LocalLog::DeleteBefore(PartitionId p, Offset offset) {
  RETURN_IF_ERROR(CheckPartition(p));
  Partition& part = *parts_[p.value];
  MutexLock delete_lock(&part.delete_mu);
  int64_t target;
  {
    MutexLock lock(&part.mu);
    if (part.closed) return Status::Unavailable("local log closed");
    target = std::min(offset.value, part.end);
    if (target <= part.start) return Status::OK();
  }
  RETURN_IF_ERROR(env_->WriteFileAtomic(JoinPath(part.dir, kStartName), EncodeStart(target)));
  {
    MutexLock lock(&part.mu);
    part.start = target;
    std::erase_if(part.damage, [target](const LogDamage& d) { return d.end.value <= target; });
  }
  RemoveFilesBelowStart(part);
  return Status::OK();
}

Result<Offset> LocalLog::StartOffset(PartitionId p) {
  RETURN_IF_ERROR(CheckPartition(p));
  Partition& part = *parts_[p.value];
  MutexLock lock(&part.mu);
  return Offset(part.start);
}

Result<Offset> LocalLog::EndOffset(PartitionId p) {
  RETURN_IF_ERROR(CheckPartition(p));
  Partition& part = *parts_[p.value];
  MutexLock lock(&part.mu);
  return Offset(part.end);
}

std::string LocalLog::Health() {
  std::string problems;
  auto add = [&problems](const std::string& s) {
    if (!problems.empty()) problems += "; ";
    problems += s;
  };
  for (auto& part : parts_) {
    Status failed;
    {
      MutexLock lock(&WorkerOf(part->id).mu);
      failed = part->failed;
    }
    MutexLock lock(&part->mu);
    std::string prefix = "partition " + std::to_string(part->id) + ": ";
    if (!failed.ok()) {
      add(failed.ToString());
    } else if (!part->last_error.empty()) {
      add(prefix + "last append failed: " + part->last_error);
    }
    if (!part->open_note.empty()) add(prefix + part->open_note);
    if (!part->damage.empty()) {
      int64_t lost = 0;
      for (const LogDamage& d : part->damage) lost += d.end.value - d.first.value;
      add(prefix + std::to_string(lost) + " records lost to damage (first at offset " +
          std::to_string(part->damage.front().first.value) + " in " + part->damage.front().file +
          ")");
    }
  }
  return problems.empty() ? "ok" : problems;
}

std::vector<LogDamage> LocalLog::Damage() {
  std::vector<LogDamage> out;
  for (auto& part : parts_) {
    MutexLock lock(&part->mu);
    out.insert(out.end(), part->damage.begin(), part->damage.end());
  }
  return out;
}

Status LocalLog::RefuseBelow(PartitionId p, Offset floor) {
  RETURN_IF_ERROR(CheckPartition(p));
  Partition& part = *parts_[p.value];
  int64_t end;
  {
    MutexLock lock(&part.mu);
    end = part.end;
  }
  if (end >= floor.value) return Status::OK();
  Status refused = Status::Corruption(
      "partition " + std::to_string(p.value) + " of " + dir_ + " ends at offset " +
      std::to_string(end) + " but offsets up to " + std::to_string(floor.value - 1) +
      " were handed out before (recorded in Global): records [" + std::to_string(end) + ", " +
      std::to_string(floor.value) +
      ") are missing from the log, and appending would give their offsets to new records; the "
      "partition refuses appends until the missing log files are restored");
  spdlog::error("local log: {}", refused.message());
  Worker& w = WorkerOf(p.value);
  MutexLock lock(&w.mu);
  if (part.failed.ok()) part.failed = refused;
  return refused;
}

}  // namespace

Result<std::unique_ptr<CommitLog>> OpenLocalLog(Env* env, const std::string& dir,
                                                const LocalLogOptions& options) {
  if (options.partitions < 1 || options.partitions > 100000) {
    return Status::InvalidArgument("local log: partition count " +
                                   std::to_string(options.partitions) + " out of range");
  }
  RETURN_IF_ERROR(env->CreateDirs(dir));
  const std::string meta_path = JoinPath(dir, kMetaName);
  if (env->FileExists(meta_path)) {
    ASSIGN_OR_RETURN(std::string data, env->ReadFile(meta_path));
    ASSIGN_OR_RETURN(int32_t partitions, DecodeMeta(data, meta_path));
    if (partitions != options.partitions) {
      return Status::InvalidArgument("local log " + dir + " has " + std::to_string(partitions) +
                                     " partitions, opened with " +
                                     std::to_string(options.partitions));
    }
  } else {
    ASSIGN_OR_RETURN(std::vector<std::string> names, env->ListDir(dir));
    for (const std::string& name : names) {
      if (name.rfind("p-", 0) == 0) {
        return Status::Corruption("local log " + dir + " has partition directories but no " +
                                  kMetaName);
      }
    }
    RETURN_IF_ERROR(env->WriteFileAtomic(meta_path, EncodeMeta(options.partitions)));
  }
  auto log = std::make_unique<LocalLog>(env, dir, options);
  for (int32_t p = 0; p < options.partitions; ++p) {
    RETURN_IF_ERROR(log->OpenPartition(log->partition(p)).WithContext("local log " + dir));
  }
  log->StartWriters();
  return std::unique_ptr<CommitLog>(std::move(log));
}

}  // namespace sediment
