#include "storage/store.h"

#include <spdlog/spdlog.h>
#include <xxhash.h>

#include <algorithm>
#include <cstring>

#include "segment/segment.h"

namespace sediment {
namespace {

constexpr uint64_t kChunk = 1 << 20;

std::string Describe(const SegmentRecord& s) {
  return "segment " + std::to_string(s.id.value) + " ('" + s.file_name + "')";
}

// A read-only Env that serves one file from memory, so SegmentReader::Open can check bytes that
// are not on disk. Every other operation fails.
class BytesEnv final : public Env {
 public:
  BytesEnv(std::string path, std::string_view bytes) : path_(std::move(path)), bytes_(bytes) {}

  Result<std::unique_ptr<WritableFile>> NewWritableFile(const std::string&) override {
    return No();
  }
  Result<std::unique_ptr<WritableFile>> NewAppendableFile(const std::string&) override {
    return No();
  }
  Result<std::unique_ptr<RandomAccessFile>> NewRandomAccessFile(const std::string& path) override {
    if (path != path_) return Status::NotFound(path);
    return std::unique_ptr<RandomAccessFile>(new File(bytes_));
  }
  Result<std::string> ReadFile(const std::string& path) override {
    if (path != path_) return Status::NotFound(path);
    return std::string(bytes_);
  }
  Status WriteFileAtomic(const std::string&, std::string_view) override { return No(); }
  bool FileExists(const std::string& path) override { return path == path_; }
  Result<std::vector<std::string>> ListDir(const std::string&) override { return No(); }
  Status CreateDirs(const std::string&) override { return No(); }
  Status RemoveFile(const std::string&) override { return No(); }
  Status RemoveAll(const std::string&) override { return No(); }
  Status RenameFile(const std::string&, const std::string&) override { return No(); }
  Status TruncateFile(const std::string&, uint64_t) override { return No(); }
  Status SyncDir(const std::string&) override { return No(); }
  Result<uint64_t> FileSize(const std::string& path) override {
    if (path != path_) return Status::NotFound(path);
    return uint64_t{bytes_.size()};
  }

 private:
  class File final : public RandomAccessFile {
   public:
    explicit File(std::string_view bytes) : bytes_(bytes) {}
    Status Read(uint64_t offset, size_t n, std::string* out) const override {
      if (offset >= bytes_.size()) {
        out->clear();
      } else {
        out->assign(bytes_.substr(offset, n));
      }
      return Status::OK();
    }
    Result<uint64_t> Size() const override { return uint64_t{bytes_.size()}; }

   private:
    std::string_view bytes_;
  };
  static Status No() { return Status::Internal("in-memory verification env is read-only"); }

  std::string path_;
  std::string_view bytes_;
};

// The footer's identity fields must be the record's.
Status CheckInfo(const SegmentRecord& s, const SegmentInfo& info) {
  if (info.content_hash != s.content_hash) {
    return Status::Corruption(Describe(s) + ": trailer content hash differs from Global's");
  }
  if (info.partition != s.partition || info.min_pos != s.min_pos || info.max_pos != s.max_pos ||
      info.event_count != s.event_count) {
    return Status::Corruption(Describe(s) +
                              ": footer's partition, positions or event count differ from "
                              "Global's record");
  }
  return Status::OK();
}

Status BadName(const std::string& file_name) {
  return Status::InvalidArgument("'" + file_name.substr(0, kMaxSegmentFileNameBytes) +
                                 "' is not a valid segment file name");
}

// A reader that forwards every call to another (shared) reader.
class ForwardingReader : public SegmentReader {
 public:
  explicit ForwardingReader(std::shared_ptr<const SegmentReader> reader)
      : reader_(std::move(reader)) {}
  const SegmentInfo& info() const override { return reader_->info(); }
  const std::vector<BlockInfo>& blocks() const override { return reader_->blocks(); }
  bool BlockMayContainAll(size_t i, const std::vector<std::string>& terms) const override {
    return reader_->BlockMayContainAll(i, terms);
  }
  bool BlockMayHaveField(size_t i, std::string_view name) const override {
    return reader_->BlockMayHaveField(i, name);
  }
  Status ReadBlock(size_t i, DecodedBlock* out) const override {
    return reader_->ReadBlock(i, out);
  }
  Status ReadBlockColumns(size_t i, const ColumnSelection& columns,
                          DecodedBlock* out) const override {
    return reader_->ReadBlockColumns(i, columns, out);
  }
  Status ReadStoredBlock(size_t i, StoredBlock* out) const override {
    return reader_->ReadStoredBlock(i, out);
  }
  uint32_t format_version() const override { return reader_->format_version(); }
  Status VerifyAll() const override { return reader_->VerifyAll(); }

 protected:
  std::shared_ptr<const SegmentReader> reader_;
};

// A reader of a temporary copy (SegmentStore::OpenCopy) that removes the file when destroyed.
class CopyReader final : public ForwardingReader {
 public:
  CopyReader(Env* env, std::string path, std::unique_ptr<SegmentReader> reader)
      : ForwardingReader(std::move(reader)), env_(env), path_(std::move(path)) {}
  ~CopyReader() override {
    reader_.reset();  // closes the file before it is deleted
    Status st = env_->RemoveFile(path_);
    if (!st.ok()) spdlog::warn("storage: cannot delete {}: {}", path_, st.ToString());
  }

 private:
  Env* env_;
  std::string path_;
};

}  // namespace

Status VerifySegmentBytes(const SegmentRecord& segment, std::string_view bytes) {
  if (bytes.size() != segment.file_size) {
    return Status::Corruption(Describe(segment) + ": " + std::to_string(bytes.size()) +
                              " bytes, Global says " + std::to_string(segment.file_size));
  }
  if (bytes.size() < 8) return Status::Corruption(Describe(segment) + ": too short");
  const uint64_t h = XXH64(bytes.data(), bytes.size() - 8, 0);
  if (h != segment.content_hash) {
    return Status::Corruption(Describe(segment) + ": content hash mismatch");
  }
  auto info = ReadSegmentInfo(segment.file_name, bytes);
  if (!info.ok()) return info.status().WithContext(Describe(segment));
  return CheckInfo(segment, *info);
}

Result<SegmentInfo> ReadSegmentInfo(const std::string& file_name, std::string_view bytes) {
  const std::string path = "<fetched " + file_name + ">";
  BytesEnv env(path, bytes);
  ASSIGN_OR_RETURN(auto reader, SegmentReader::Open(&env, path));
  return reader->info();
}

SegmentStore::SegmentStore(Env* env, std::string dir) : env_(env), dir_(std::move(dir)) {}

std::string SegmentStore::PathOf(const std::string& file_name) const {
  return JoinPath(dir_, file_name);
}

bool SegmentStore::Has(const std::string& file_name) const {
  return IsValidSegmentFileName(file_name) && env_->FileExists(PathOf(file_name));
}

std::string SegmentStore::NextTempSuffix() {
  std::lock_guard lock(mu_);
  return std::to_string(next_tmp_++);
}

Result<std::vector<std::string>> SegmentStore::List() const {
  if (!env_->FileExists(dir_)) return std::vector<std::string>{};
  ASSIGN_OR_RETURN(auto names, env_->ListDir(dir_));
  std::vector<std::string> out;
  for (auto& n : names) {
    if (IsValidSegmentFileName(n)) out.push_back(std::move(n));
  }
  return out;
}

Result<uint64_t> SegmentStore::FileSize(const std::string& file_name) const {
  if (!IsValidSegmentFileName(file_name)) return BadName(file_name);
  const std::string path = PathOf(file_name);
  if (!env_->FileExists(path)) return Status::NotFound("no local file " + path);
  return env_->FileSize(path);
}

Status SegmentStore::Install(const SegmentRecord& segment, std::string_view bytes) {
  if (!IsValidSegmentFileName(segment.file_name)) {
    return Status::InvalidArgument(Describe(segment) + ": bad file name");
  }
  RETURN_IF_ERROR(VerifySegmentBytes(segment, bytes));
  RETURN_IF_ERROR(env_->CreateDirs(dir_));
  const std::string path = PathOf(segment.file_name);
  const std::string tmp = path + ".tmp." + NextTempSuffix();
  auto write = [&]() -> Status {
    ASSIGN_OR_RETURN(auto f, env_->NewWritableFile(tmp));
    RETURN_IF_ERROR(f->Append(bytes));
    RETURN_IF_ERROR(f->Sync());
    RETURN_IF_ERROR(f->Close());
    {
      // The rename and the cancellation are one step for Unpin: the new file is never deleted by
      // a deletion meant for the old one.
      std::lock_guard lock(mu_);
      DropReaderLocked(segment.file_name);
      RETURN_IF_ERROR(env_->RenameFile(tmp, path));
      doomed_.erase(segment.file_name);
      TouchLocked(segment.file_name);
    }
    return env_->SyncDir(dir_);
  };
  Status st = write();
  if (!st.ok()) {
    if (env_->FileExists(tmp)) (void)env_->RemoveFile(tmp);
    return st.WithContext("installing " + Describe(segment));
  }
  return Status::OK();
}

SegmentStore::NewSegment::NewSegment(SegmentStore* store, std::string name, std::string tmp_path)
    : store_(store), name_(std::move(name)), tmp_path_(std::move(tmp_path)) {}

SegmentStore::NewSegment::~NewSegment() {
  if (state_ != State::kPublished) Discard();
}

void SegmentStore::NewSegment::Discard() {
  Env* env = store_->env_;
  if (env->FileExists(tmp_path_)) {
    Status st = env->RemoveFile(tmp_path_);
    if (!st.ok()) spdlog::warn("storage: cannot delete {}: {}", tmp_path_, st.ToString());
  }
  state_ = State::kDiscarded;
}

Result<SegmentInfo> SegmentStore::NewSegment::Write(const Datasource& ds, PartitionId partition,
                                                    const std::vector<PositionedEvent>& events,
                                                    const SegmentWriterOptions& options) {
  if (state_ != State::kEmpty) {
    return Status::FailedPrecondition("segment " + name_ + " was already written");
  }
  auto info = WriteSegmentFile(store_->env_, tmp_path_, ds, partition, events, options);
  if (!info.ok()) {
    Discard();
    return info.status();
  }
  state_ = State::kWritten;
  return info;
}

Result<SegmentInfo> SegmentStore::NewSegment::WriteFrom(
    const Datasource& ds, PartitionId partition, const SegmentWriterOptions& options,
    const std::function<Status(SegmentFileWriter*)>& fill) {
  if (state_ != State::kEmpty) {
    return Status::FailedPrecondition("segment " + name_ + " was already written");
  }
  Result<SegmentInfo> info = [&]() -> Result<SegmentInfo> {
    ASSIGN_OR_RETURN(std::unique_ptr<SegmentFileWriter> w,
                     SegmentFileWriter::Create(store_->env_, tmp_path_, ds, partition, options));
    RETURN_IF_ERROR(fill(w.get()));
    return w->Finish();
  }();
  if (!info.ok()) {
    Discard();
    return info.status();
  }
  state_ = State::kWritten;
  return info;
}

Status SegmentStore::NewSegment::Publish() {
  if (state_ != State::kWritten) {
    return Status::FailedPrecondition("segment " + name_ + " is not written or already published");
  }
  Env* env = store_->env_;
  const std::string path = store_->PathOf(name_);
  Status st;
  {
    // The rename and the cancellation are one step for Unpin: the new file is never deleted by a
    // deletion meant for an old file of the same name.
    std::lock_guard lock(store_->mu_);
    store_->DropReaderLocked(name_);
    st = env->RenameFile(tmp_path_, path);
    if (st.ok()) store_->doomed_.erase(name_);
  }
  if (!st.ok()) {
    Discard();
    return st.WithContext("publishing segment " + path);
  }
  st = env->SyncDir(store_->dir_);
  if (!st.ok()) {
    // Visible but not durable: removed, so that nobody registers a file a crash could take away.
    (void)env->RemoveFile(path);
    state_ = State::kDiscarded;
    return st.WithContext("publishing segment " + path);
  }
  state_ = State::kPublished;
  return Status::OK();
}

Result<std::unique_ptr<SegmentStore::NewSegment>> SegmentStore::Create(
    const std::string& file_name) {
  if (!IsValidSegmentFileName(file_name)) return BadName(file_name);
  RETURN_IF_ERROR(env_->CreateDirs(dir_));
  return std::unique_ptr<NewSegment>(
      new NewSegment(this, file_name, PathOf(file_name) + ".tmp." + NextTempSuffix()));
}

Result<SegmentInfo> SegmentStore::Write(const std::string& file_name, const Datasource& ds,
                                        PartitionId partition,
                                        const std::vector<PositionedEvent>& events,
                                        const SegmentWriterOptions& options) {
  ASSIGN_OR_RETURN(std::unique_ptr<NewSegment> segment, Create(file_name));
  ASSIGN_OR_RETURN(SegmentInfo info, segment->Write(ds, partition, events, options));
  RETURN_IF_ERROR(segment->Publish());
  return info;
}

Result<std::unique_ptr<SegmentReader>> SegmentStore::Open(const std::string& file_name) const {
  if (!IsValidSegmentFileName(file_name)) return BadName(file_name);
  const std::string path = PathOf(file_name);
  const bool exists = env_->FileExists(path);
  uint64_t gen;
  {
    std::lock_guard lock(mu_);
    auto it = readers_.find(file_name);
    if (it != readers_.end()) {
      if (exists) {
        readers_lru_.splice(readers_lru_.begin(), readers_lru_, it->second.second);
        return std::unique_ptr<SegmentReader>(new ForwardingReader(it->second.first));
      }
      DropReaderLocked(file_name);  // removed behind the store's back
    }
    gen = readers_gen_;
  }
  if (!exists) return Status::NotFound("no local file " + path);
  ASSIGN_OR_RETURN(std::unique_ptr<SegmentReader> opened, SegmentReader::Open(env_, path));
  std::shared_ptr<const SegmentReader> reader(std::move(opened));
  std::lock_guard lock(mu_);
  if (gen == readers_gen_ && readers_.count(file_name) == 0) {
    readers_lru_.push_front(file_name);
    readers_.emplace(file_name, std::make_pair(reader, readers_lru_.begin()));
    if (readers_.size() > kCachedReaders) {
      readers_.erase(readers_lru_.back());
      readers_lru_.pop_back();
    }
  }
  return std::unique_ptr<SegmentReader>(new ForwardingReader(std::move(reader)));
}

void SegmentStore::DropReaderLocked(const std::string& file_name) const {
  ++readers_gen_;
  auto it = readers_.find(file_name);
  if (it == readers_.end()) return;
  readers_lru_.erase(it->second.second);
  readers_.erase(it);
}

Result<std::unique_ptr<SegmentReader>> SegmentStore::OpenCopy(std::string_view bytes) {
  RETURN_IF_ERROR(env_->CreateDirs(dir_));
  const std::string path = JoinPath(dir_, "fetched-" + NextTempSuffix() + ".tmp");
  auto open = [&]() -> Result<std::unique_ptr<SegmentReader>> {
    ASSIGN_OR_RETURN(auto file, env_->NewWritableFile(path));
    RETURN_IF_ERROR(file->Append(bytes));
    RETURN_IF_ERROR(file->Close());
    return SegmentReader::Open(env_, path);
  };
  auto reader = open();
  if (!reader.ok()) {
    if (env_->FileExists(path)) (void)env_->RemoveFile(path);
    return reader.status();
  }
  return std::unique_ptr<SegmentReader>(new CopyReader(env_, path, std::move(*reader)));
}

Result<std::string> SegmentStore::Read(const std::string& file_name) const {
  if (!IsValidSegmentFileName(file_name)) return BadName(file_name);
  const std::string path = PathOf(file_name);
  if (!env_->FileExists(path)) return Status::NotFound("no local file " + path);
  return env_->ReadFile(path);
}

Status SegmentStore::Verify(const SegmentRecord& segment, const ReadHook& before_read) const {
  if (!IsValidSegmentFileName(segment.file_name)) return BadName(segment.file_name);
  const std::string path = PathOf(segment.file_name);
  if (!env_->FileExists(path)) return Status::NotFound("no local file " + path);
  ASSIGN_OR_RETURN(auto file, env_->NewRandomAccessFile(path));
  ASSIGN_OR_RETURN(uint64_t size, file->Size());
  if (size != segment.file_size) {
    return Status::Corruption(Describe(segment) + ": local file has " + std::to_string(size) +
                              " bytes, Global says " + std::to_string(segment.file_size));
  }
  if (size < 8) return Status::Corruption(Describe(segment) + ": too short");
  XXH64_state_t* state = XXH64_createState();
  if (state == nullptr) return Status::Internal("out of memory");
  std::unique_ptr<XXH64_state_t, XXH_errorcode (*)(XXH64_state_t*)> guard(state, XXH64_freeState);
  XXH64_reset(state, 0);
  std::string chunk;
  for (uint64_t at = 0; at < size - 8;) {
    const uint64_t n = std::min(kChunk, size - 8 - at);
    if (before_read && !before_read(n)) {
      return Status::Aborted("verification of " + Describe(segment) + " stopped");
    }
    RETURN_IF_ERROR(file->Read(at, n, &chunk));
    if (chunk.size() != n) {
      return Status::Corruption(Describe(segment) + ": short read at " + std::to_string(at));
    }
    XXH64_update(state, chunk.data(), chunk.size());
    at += n;
  }
  if (XXH64_digest(state) != segment.content_hash) {
    return Status::Corruption(Describe(segment) + ": content hash mismatch in " + path);
  }
  auto reader = SegmentReader::Open(env_, path);
  if (!reader.ok()) return reader.status().WithContext(Describe(segment));
  return CheckInfo(segment, (*reader)->info());
}

SegmentStore::PinHandle SegmentStore::Pin(const std::vector<std::string>& file_names) {
  {
    std::lock_guard lock(mu_);
    for (const auto& f : file_names) {
      ++pins_[f];
      TouchLocked(f);
    }
  }
  auto* names = new std::vector<std::string>(file_names);
  return PinHandle(static_cast<void*>(names), [this](void* p) {
    std::unique_ptr<std::vector<std::string>> owned(static_cast<std::vector<std::string>*>(p));
    Unpin(*owned);
  });
}

bool SegmentStore::IsPinned(const std::string& file_name) const {
  std::lock_guard lock(mu_);
  return pins_.count(file_name) != 0;
}

void SegmentStore::Unpin(const std::vector<std::string>& file_names) {
  std::lock_guard lock(mu_);
  for (const auto& f : file_names) {
    auto it = pins_.find(f);
    if (it == pins_.end()) continue;
    if (--it->second > 0) continue;
    pins_.erase(it);
    if (doomed_.erase(f) != 0) (void)RemoveNow(f);
  }
}

void SegmentStore::DeleteWhenUnpinned(const std::string& file_name) {
  if (!IsValidSegmentFileName(file_name)) {
    spdlog::warn("storage: not deleting '{}': not a valid segment file name", file_name);
    return;
  }
  std::lock_guard lock(mu_);
  if (pins_.count(file_name) != 0) {
    doomed_.insert(file_name);
    return;
  }
  (void)RemoveNow(file_name);
}

Result<std::vector<std::string>> SegmentStore::RemoveAllExcept(const std::set<std::string>& keep) {
  RETURN_IF_ERROR(env_->CreateDirs(dir_));
  ASSIGN_OR_RETURN(std::vector<std::string> names, env_->ListDir(dir_));
  std::vector<std::string> removed;
  std::lock_guard lock(mu_);
  for (std::string& name : names) {
    if (keep.count(name) != 0) continue;
    if (pins_.count(name) != 0) {
      doomed_.insert(name);
    } else {
      RETURN_IF_ERROR(RemoveNow(name));
    }
    removed.push_back(std::move(name));
  }
  return removed;
}

bool SegmentStore::IsDeletionPending(const std::string& file_name) const {
  std::lock_guard lock(mu_);
  return doomed_.count(file_name) != 0;
}

void SegmentStore::CancelDeletion(const std::string& file_name) {
  std::lock_guard lock(mu_);
  doomed_.erase(file_name);
}

void SegmentStore::Touch(const std::string& file_name) {
  std::lock_guard lock(mu_);
  TouchLocked(file_name);
}

void SegmentStore::TouchLocked(const std::string& file_name) {
  last_access_[file_name] = ++access_clock_;
}

uint64_t SegmentStore::LastAccess(const std::string& file_name) const {
  std::lock_guard lock(mu_);
  auto it = last_access_.find(file_name);
  return it == last_access_.end() ? 0 : it->second;
}

Status SegmentStore::RemoveNow(const std::string& file_name) {
  last_access_.erase(file_name);
  DropReaderLocked(file_name);
  const std::string path = PathOf(file_name);
  if (!env_->FileExists(path)) return Status::OK();
  Status st = env_->RemoveFile(path);
  if (!st.ok()) spdlog::warn("storage: cannot delete {}: {}", path, st.ToString());
  return st;
}

}  // namespace sediment
