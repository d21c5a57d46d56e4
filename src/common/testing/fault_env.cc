#include "common/testing/fault_env.h"

#include <algorithm>

namespace sediment {

class FaultWritableFile final : public WritableFile {
 public:
  FaultWritableFile(FaultEnv* env, std::string path, std::shared_ptr<FaultEnv::FileState> state,
                    std::unique_ptr<WritableFile> base, uint64_t generation)
      : env_(env),
        path_(std::move(path)),
        state_(std::move(state)),
        base_(std::move(base)),
        generation_(generation) {}

  Status Append(std::string_view data) override {
    ReaderMutexLock crash(&env_->crash_mu_);
    RETURN_IF_ERROR(CheckAlive());
    env_->append_count_++;
    Status fault = env_->NextAppendFault();
    if (!fault.ok()) {
      if (env_->partial_writes_.load() && data.size() > 1) {
        (void)base_->Append(data.substr(0, data.size() / 2));
      }
      return fault;
    }
    return base_->Append(data);
  }

  Status Sync() override {
    ReaderMutexLock crash(&env_->crash_mu_);
    RETURN_IF_ERROR(CheckAlive());
    if (env_->sync_fails_.load())
      return Status::IOError("FaultEnv: injected sync failure " + path_);
    RETURN_IF_ERROR(base_->Sync());
    {
      MutexLock lock(&env_->mu_);
      state_->synced = std::max(state_->synced, base_->Size());
    }
    env_->sync_count_++;
    return Status::OK();
  }

  Status Close() override { return base_->Close(); }
  uint64_t Size() const override { return base_->Size(); }

 private:
  Status CheckAlive() const {
    if (env_->crashed_.load() || env_->generation_.load() != generation_) {
      return Status::IOError("FaultEnv: simulated crash (" + path_ + ")");
    }
    return Status::OK();
  }

  FaultEnv* const env_;
  const std::string path_;
  const std::shared_ptr<FaultEnv::FileState> state_;
  const std::unique_ptr<WritableFile> base_;
  const uint64_t generation_;
};

namespace {

bool IsUnder(const std::string& path, const std::string& dir) {
  if (path == dir) return true;
  std::string prefix = dir;
  if (prefix.empty() || prefix.back() != '/') prefix.push_back('/');
  return path.compare(0, prefix.size(), prefix) == 0;
}

}  // namespace

FaultEnv::FaultEnv(Env* base) : base_(base) {}
FaultEnv::~FaultEnv() = default;

Status FaultEnv::CheckNotCrashed() const {
  if (crashed_.load()) return Status::IOError("FaultEnv: simulated crash");
  return Status::OK();
}

Status FaultEnv::NextAppendFault() {
  MutexLock lock(&fault_mu_);
  if (writes_left_ < 0) return Status::OK();
  if (writes_left_ == 0) return Status::IOError("FaultEnv: injected write failure");
  --writes_left_;
  return Status::OK();
}

Status FaultEnv::DropUnsyncedData() {
  WriterMutexLock crash(&crash_mu_);
  MutexLock lock(&mu_);
  generation_++;
  Status first_error;
  auto note = [&first_error](Status s) {
    if (!s.ok() && first_error.ok()) first_error = std::move(s);
  };
  for (auto it = renames_.rbegin(); it != renames_.rend(); ++it) {
    const PendingRename& r = *it;
    std::shared_ptr<FileState> moved;
    if (auto f = files_.find(r.to); f != files_.end()) {
      moved = f->second;
      files_.erase(f);
    }
    if (base_->FileExists(r.to)) note(base_->RenameFile(r.to, r.from));
    if (moved) files_[r.from] = moved;
    if (r.old_to_state) {
      auto w = base_->NewWritableFile(r.to);
      if (!w.ok()) {
        note(w.status());
        continue;
      }
      note((*w)->Append(r.old_to_contents));
      note((*w)->Sync());
      note((*w)->Close());
      r.old_to_state->synced = r.old_to_contents.size();
      files_[r.to] = r.old_to_state;
    }
  }
  renames_.clear();
  for (auto it = files_.begin(); it != files_.end();) {
    const std::string& path = it->first;
    FileState& st = *it->second;
    if (!base_->FileExists(path)) {
      it = files_.erase(it);
      continue;
    }
    if (strict_dir_sync_.load() && !st.entry_durable) {
      note(base_->RemoveFile(path));
      it = files_.erase(it);
      continue;
    }
    auto size = base_->FileSize(path);
    if (!size.ok()) {
      note(size.status());
    } else if (*size > st.synced) {
      note(base_->TruncateFile(path, st.synced));
    }
    st.entry_durable = true;
    ++it;
  }
  return first_error;
}

Status FaultEnv::SimulateCrash() {
  crashed_ = true;
  return DropUnsyncedData();
}

void FaultEnv::Restart() { crashed_ = false; }
void FaultEnv::SetStrictDirSync(bool strict) { strict_dir_sync_ = strict; }

Status FaultEnv::TearTail(const std::string& path, uint64_t n) {
  ReaderMutexLock crash(&crash_mu_);
  MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(uint64_t size, base_->FileSize(path));
  uint64_t new_size = n >= size ? 0 : size - n;
  RETURN_IF_ERROR(base_->TruncateFile(path, new_size));
  if (auto it = files_.find(path); it != files_.end()) {
    it->second->synced = std::min(it->second->synced, new_size);
  }
  return Status::OK();
}

Status FaultEnv::FlipByte(const std::string& path, uint64_t pos) {
  ReaderMutexLock crash(&crash_mu_);
  MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(std::string data, base_->ReadFile(path));
  if (pos >= data.size()) return Status::InvalidArgument("FlipByte: position past end of " + path);
  data[pos] = static_cast<char>(~static_cast<unsigned char>(data[pos]));
  ASSIGN_OR_RETURN(auto w, base_->NewWritableFile(path));
  RETURN_IF_ERROR(w->Append(data));
  RETURN_IF_ERROR(w->Sync());
  return w->Close();
}

void FaultEnv::FailWritesAfter(int64_t n) {
  MutexLock lock(&fault_mu_);
  writes_left_ = n < 0 ? -1 : n;
}
void FaultEnv::SetSyncFails(bool fail) { sync_fails_ = fail; }
void FaultEnv::SetPartialWriteOnFailure(bool partial) { partial_writes_ = partial; }

std::optional<uint64_t> FaultEnv::SyncedSize(const std::string& path) {
  MutexLock lock(&mu_);
  auto it = files_.find(path);
  if (it == files_.end()) return std::nullopt;
  return it->second->synced;
}

Result<std::unique_ptr<WritableFile>> FaultEnv::OpenWritable(const std::string& path,
                                                             bool truncate) {
  ReaderMutexLock crash(&crash_mu_);
  RETURN_IF_ERROR(CheckNotCrashed());
  bool existed = base_->FileExists(path);
  auto base = truncate ? base_->NewWritableFile(path) : base_->NewAppendableFile(path);
  if (!base.ok()) return base.status();
  std::shared_ptr<FileState> state;
  {
    MutexLock lock(&mu_);
    auto& slot = files_[path];
    if (!slot) {
      slot = std::make_shared<FileState>();
      slot->entry_durable = existed;
      slot->synced = (existed && !truncate) ? (*base)->Size() : 0;
    } else if (truncate) {
      slot->synced = 0;
    }
    state = slot;
  }
  return std::unique_ptr<WritableFile>(new FaultWritableFile(
      this, path, std::move(state), std::move(base).value(), generation_.load()));
}

Result<std::unique_ptr<WritableFile>> FaultEnv::NewWritableFile(const std::string& path) {
  return OpenWritable(path, /*truncate=*/true);
}

Result<std::unique_ptr<WritableFile>> FaultEnv::NewAppendableFile(const std::string& path) {
  return OpenWritable(path, /*truncate=*/false);
}

Result<std::unique_ptr<RandomAccessFile>> FaultEnv::NewRandomAccessFile(const std::string& path) {
  return base_->NewRandomAccessFile(path);
}

Result<std::string> FaultEnv::ReadFile(const std::string& path) { return base_->ReadFile(path); }

Status FaultEnv::WriteFileAtomic(const std::string& path, std::string_view data) {
  return WriteFileAtomicWith(this, path, data);
}

bool FaultEnv::FileExists(const std::string& path) { return base_->FileExists(path); }

Result<std::vector<std::string>> FaultEnv::ListDir(const std::string& dir) {
  return base_->ListDir(dir);
}

Status FaultEnv::CreateDirs(const std::string& dir) {
  ReaderMutexLock crash(&crash_mu_);
  RETURN_IF_ERROR(CheckNotCrashed());
  return base_->CreateDirs(dir);
}

Status FaultEnv::RemoveFile(const std::string& path) {
  ReaderMutexLock crash(&crash_mu_);
  RETURN_IF_ERROR(CheckNotCrashed());
  MutexLock lock(&mu_);
  RETURN_IF_ERROR(base_->RemoveFile(path));
  files_.erase(path);
  return Status::OK();
}

Status FaultEnv::RemoveAll(const std::string& path) {
  ReaderMutexLock crash(&crash_mu_);
  RETURN_IF_ERROR(CheckNotCrashed());
  MutexLock lock(&mu_);
  RETURN_IF_ERROR(base_->RemoveAll(path));
  for (auto it = files_.begin(); it != files_.end();) {
    it = IsUnder(it->first, path) ? files_.erase(it) : std::next(it);
  }
  std::erase_if(renames_, [&](const PendingRename& r) { return IsUnder(r.to, path); });
  return Status::OK();
}

Status FaultEnv::RenameFile(const std::string& from, const std::string& to) {
  ReaderMutexLock crash(&crash_mu_);
  RETURN_IF_ERROR(CheckNotCrashed());
  MutexLock lock(&mu_);
  PendingRename r{from, to, nullptr, {}};
  if (base_->FileExists(to)) {
    ASSIGN_OR_RETURN(r.old_to_contents, base_->ReadFile(to));
    if (auto it = files_.find(to); it != files_.end()) {
      r.old_to_state = it->second;
      if (r.old_to_contents.size() > it->second->synced)
        r.old_to_contents.resize(it->second->synced);
    } else {
      r.old_to_state = std::make_shared<FileState>();
    }
  }
  RETURN_IF_ERROR(base_->RenameFile(from, to));
  std::shared_ptr<FileState> moved;
  if (auto it = files_.find(from); it != files_.end()) {
    moved = it->second;
    files_.erase(it);
  } else {
    moved = std::make_shared<FileState>();
    auto size = base_->FileSize(to);
    moved->synced = size.ok() ? *size : 0;
  }
  files_[to] = std::move(moved);
  renames_.push_back(std::move(r));
  return Status::OK();
}

Status FaultEnv::TruncateFile(const std::string& path, uint64_t size) {
  ReaderMutexLock crash(&crash_mu_);
  RETURN_IF_ERROR(CheckNotCrashed());
  MutexLock lock(&mu_);
  RETURN_IF_ERROR(base_->TruncateFile(path, size));
  if (auto it = files_.find(path); it != files_.end()) {
    it->second->synced = std::min(it->second->synced, size);
  }
  return Status::OK();
}

Status FaultEnv::SyncDir(const std::string& dir) {
  ReaderMutexLock crash(&crash_mu_);
  RETURN_IF_ERROR(CheckNotCrashed());
  if (sync_fails_.load()) return Status::IOError("FaultEnv: injected sync failure on dir " + dir);
  RETURN_IF_ERROR(base_->SyncDir(dir));
  MutexLock lock(&mu_);
  std::string d = dir.empty() ? "." : dir;
  std::erase_if(renames_, [&](const PendingRename& r) { return DirName(r.to) == d; });
  for (auto& [path, state] : files_) {
    if (DirName(path) == d) state->entry_durable = true;
  }
  return Status::OK();
}

Result<uint64_t> FaultEnv::FileSize(const std::string& path) { return base_->FileSize(path); }

}  // namespace sediment
