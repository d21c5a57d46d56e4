// MemEnv: an Env whose files live in memory, for the fuzz targets (a file per input without disk
// I/O or temp directories). Directories exist implicitly as path prefixes; CreateDirs records
// them so that FileExists and ListDir answer as on disk. Sync is a no-op (nothing to make
// durable). Thread-safe: one mutex around the map (the commit log's writer threads use it).
#pragma once

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/env.h"

namespace sediment::fuzz {

class MemEnv final : public Env {
 public:
  // Puts `data` at `path` (creating or replacing it).
  void Put(const std::string& path, std::string data) {
    std::lock_guard<std::mutex> l(mu_);
    files_[path] = std::make_shared<std::string>(std::move(data));
  }

  Result<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override {
    std::lock_guard<std::mutex> l(mu_);
    auto f = std::make_shared<std::string>();
    files_[path] = f;
    return std::unique_ptr<WritableFile>(new Writable(this, f));
  }
  Result<std::unique_ptr<WritableFile>> NewAppendableFile(const std::string& path) override {
    std::lock_guard<std::mutex> l(mu_);
    auto& f = files_[path];
    if (!f) f = std::make_shared<std::string>();
    return std::unique_ptr<WritableFile>(new Writable(this, f));
  }
  Result<std::unique_ptr<RandomAccessFile>> NewRandomAccessFile(const std::string& path) override {
    std::lock_guard<std::mutex> l(mu_);
    auto it = files_.find(path);
    if (it == files_.end()) return Status::NotFound(path);
    return std::unique_ptr<RandomAccessFile>(new Readable(this, it->second));
  }
  Result<std::string> ReadFile(const std::string& path) override {
    std::lock_guard<std::mutex> l(mu_);
    auto it = files_.find(path);
    if (it == files_.end()) return Status::NotFound(path);
    return *it->second;
  }
  Status WriteFileAtomic(const std::string& path, std::string_view data) override {
    Put(path, std::string(data));
    return Status::OK();
  }
  bool FileExists(const std::string& path) override {
    std::lock_guard<std::mutex> l(mu_);
    return files_.count(path) > 0 || dirs_.count(path) > 0;
  }
  Result<std::vector<std::string>> ListDir(const std::string& dir) override {
    std::lock_guard<std::mutex> l(mu_);
    const std::string prefix = dir + "/";
    std::set<std::string> names;
    auto add = [&](const std::string& p) {
      if (p.size() > prefix.size() && p.compare(0, prefix.size(), prefix) == 0) {
        std::string rest = p.substr(prefix.size());
        names.insert(rest.substr(0, rest.find('/')));
      }
    };
    for (const auto& [p, f] : files_) add(p);
    for (const auto& p : dirs_) add(p);
    if (names.empty() && dirs_.count(dir) == 0) return Status::NotFound(dir);
    return std::vector<std::string>(names.begin(), names.end());
  }
  Status CreateDirs(const std::string& dir) override {
    std::lock_guard<std::mutex> l(mu_);
    dirs_.insert(dir);
    return Status::OK();
  }
  Status RemoveFile(const std::string& path) override {
    std::lock_guard<std::mutex> l(mu_);
    return files_.erase(path) > 0 ? Status::OK() : Status::NotFound(path);
  }
  Status RemoveAll(const std::string& path) override {
    std::lock_guard<std::mutex> l(mu_);
    const std::string prefix = path + "/";
    std::erase_if(files_, [&](const auto& kv) {
      return kv.first == path || kv.first.compare(0, prefix.size(), prefix) == 0;
    });
    std::erase_if(dirs_, [&](const std::string& d) {
      return d == path || d.compare(0, prefix.size(), prefix) == 0;
    });
    return Status::OK();
  }
  Status RenameFile(const std::string& from, const std::string& to) override {
    std::lock_guard<std::mutex> l(mu_);
    auto it = files_.find(from);
    if (it == files_.end()) return Status::NotFound(from);
    auto f = it->second;
    files_.erase(it);
    files_[to] = std::move(f);
    return Status::OK();
  }
  Status TruncateFile(const std::string& path, uint64_t size) override {
    std::lock_guard<std::mutex> l(mu_);
    auto it = files_.find(path);
    if (it == files_.end()) return Status::NotFound(path);
    it->second->resize(static_cast<size_t>(size));
    return Status::OK();
  }
  Status SyncDir(const std::string&) override { return Status::OK(); }
  Result<uint64_t> FileSize(const std::string& path) override {
    std::lock_guard<std::mutex> l(mu_);
    auto it = files_.find(path);
    if (it == files_.end()) return Status::NotFound(path);
    return static_cast<uint64_t>(it->second->size());
  }

 private:
  class Writable final : public WritableFile {
   public:
    Writable(MemEnv* env, std::shared_ptr<std::string> f) : env_(env), f_(std::move(f)) {}
    Status Append(std::string_view data) override {
      std::lock_guard<std::mutex> l(env_->mu_);
      f_->append(data);
      return Status::OK();
    }
    Status Sync() override { return Status::OK(); }
    Status Close() override { return Status::OK(); }
    uint64_t Size() const override {
      std::lock_guard<std::mutex> l(env_->mu_);
      return f_->size();
    }

   private:
    MemEnv* env_;
    std::shared_ptr<std::string> f_;
  };
  class Readable final : public RandomAccessFile {
   public:
    Readable(MemEnv* env, std::shared_ptr<std::string> f) : env_(env), f_(std::move(f)) {}
    Status Read(uint64_t offset, size_t n, std::string* out) const override {
      std::lock_guard<std::mutex> l(env_->mu_);
      out->clear();
      if (offset < f_->size()) {
        out->assign(*f_, static_cast<size_t>(offset),
                    std::min<size_t>(n, f_->size() - static_cast<size_t>(offset)));
      }
      return Status::OK();
    }
    Result<uint64_t> Size() const override {
      std::lock_guard<std::mutex> l(env_->mu_);
      return static_cast<uint64_t>(f_->size());
    }

   private:
    MemEnv* env_;
    std::shared_ptr<std::string> f_;
  };

  std::mutex mu_;
  std::map<std::string, std::shared_ptr<std::string>> files_;
  std::set<std::string> dirs_;
};

}  // namespace sediment::fuzz
