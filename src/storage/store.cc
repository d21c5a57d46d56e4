#include "storage/store.h"

#include <spdlog/spdlog.h>
#include <xxhash.h>

#include <algorithm>
#include <cstring>

#include "segment/segment.h"

namespace sediment {
namespace {

constexpr uint64_t kChunk = 1 << 20;
constexpr std::string_view kSegSuffix = ".seg";

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

bool IsSegFileName(const std::string& name) {
  return name.size() > kSegSuffix.size() &&
         std::string_view(name).substr(name.size() - kSegSuffix.size()) == kSegSuffix;
}

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
  return env_->FileExists(PathOf(file_name));
}

Result<std::vector<std::string>> SegmentStore::List() const {
  if (!env_->FileExists(dir_)) return std::vector<std::string>{};
  ASSIGN_OR_RETURN(auto names, env_->ListDir(dir_));
  std::vector<std::string> out;
  for (auto& n : names) {
    if (IsSegFileName(n)) out.push_back(std::move(n));
  }
  return out;
}

Result<uint64_t> SegmentStore::FileSize(const std::string& file_name) const {
  const std::string path = PathOf(file_name);
  if (!env_->FileExists(path)) return Status::NotFound("no local file " + path);
  return env_->FileSize(path);
}

Status SegmentStore::Install(const SegmentRecord& segment, std::string_view bytes) {
  if (segment.file_name.empty() || segment.file_name.find('/') != std::string::npos ||
      segment.file_name == "." || segment.file_name == "..") {
    return Status::InvalidArgument(Describe(segment) + ": bad file name");
  }
  RETURN_IF_ERROR(VerifySegmentBytes(segment, bytes));
  RETURN_IF_ERROR(env_->CreateDirs(dir_));
  const std::string path = PathOf(segment.file_name);
  std::string tmp;
  {
    std::lock_guard lock(mu_);
    tmp = path + ".tmp." + std::to_string(next_tmp_++);
  }
  auto write = [&]() -> Status {
    ASSIGN_OR_RETURN(auto f, env_->NewWritableFile(tmp));
    RETURN_IF_ERROR(f->Append(bytes));
    RETURN_IF_ERROR(f->Sync());
    RETURN_IF_ERROR(f->Close());
    {
      // The rename and the cancellation are one step for Unpin: the new file is never deleted by
      // a deletion meant for the old one.
      std::lock_guard lock(mu_);
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

Result<std::string> SegmentStore::Read(const std::string& file_name) const {
  const std::string path = PathOf(file_name);
  if (!env_->FileExists(path)) return Status::NotFound("no local file " + path);
  return env_->ReadFile(path);
}

Status SegmentStore::Verify(const SegmentRecord& segment, const ReadHook& before_read) const {
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
    if (doomed_.erase(f) != 0) RemoveNow(f);
  }
}

void SegmentStore::DeleteWhenUnpinned(const std::string& file_name) {
  std::lock_guard lock(mu_);
  if (pins_.count(file_name) != 0) {
    doomed_.insert(file_name);
    return;
  }
  RemoveNow(file_name);
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

void SegmentStore::RemoveNow(const std::string& file_name) {
  last_access_.erase(file_name);
  const std::string path = PathOf(file_name);
  if (!env_->FileExists(path)) return;
  Status st = env_->RemoveFile(path);
  if (!st.ok()) spdlog::warn("storage: cannot delete {}: {}", path, st.ToString());
}

}  // namespace sediment
