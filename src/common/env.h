// Env: every disk access of sediment goes through this interface so that tests can inject faults
// (see testing/fault_env.h). Paths are plain strings. Implementations are thread-safe; a single
// file object is not (one owner at a time).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace sediment {

class WritableFile {
 public:
  virtual ~WritableFile() = default;
  // Buffered: after Append returns the bytes may still be lost by a crash until Sync returns OK.
  virtual Status Append(std::string_view data) = 0;
  // Durability point: on OK every byte appended so far survives a crash or power loss.
  virtual Status Sync() = 0;
  virtual Status Close() = 0;
  // Bytes appended so far (synced or not), including what the file held when opened.
  virtual uint64_t Size() const = 0;
};

class RandomAccessFile {
 public:
  virtual ~RandomAccessFile() = default;
  // Reads up to n bytes at offset into *out (replacing its contents). Short only at end of file.
  virtual Status Read(uint64_t offset, size_t n, std::string* out) const = 0;
  virtual Result<uint64_t> Size() const = 0;
};

// Files created through Env::Default() are readable by their owner only (mode 0600 before the
// umask): they hold segments, Global snapshots and credentials.
class Env {
 public:
  virtual ~Env() = default;

  // Creates `path` (truncating any existing file) for appending.
  virtual Result<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) = 0;
  // Opens `path` for appending after its current end; creates it if missing.
  virtual Result<std::unique_ptr<WritableFile>> NewAppendableFile(const std::string& path) = 0;
  virtual Result<std::unique_ptr<RandomAccessFile>> NewRandomAccessFile(
      const std::string& path) = 0;

  virtual Result<std::string> ReadFile(const std::string& path) = 0;
  // Writes `path` so that a crash leaves either the old or the new contents: temp file, fsync,
  // rename, fsync of the directory.
  virtual Status WriteFileAtomic(const std::string& path, std::string_view data) = 0;

  virtual bool FileExists(const std::string& path) = 0;
  // Names (not paths) of the entries of `dir`, sorted.
  virtual Result<std::vector<std::string>> ListDir(const std::string& dir) = 0;
  virtual Status CreateDirs(const std::string& dir) = 0;
  // CreateDirs, and `dir` itself readable by its owner only (0700): set when it is created here,
  // and when it already exists with any permission for group or others (then *tightened is set).
  // The default (test Envs) is CreateDirs and leaves permissions alone.
  virtual Status CreatePrivateDir(const std::string& dir, bool* tightened) {
    *tightened = false;
    return CreateDirs(dir);
  }
  virtual Status RemoveFile(const std::string& path) = 0;
  virtual Status RemoveAll(const std::string& path) = 0;
  virtual Status RenameFile(const std::string& from, const std::string& to) = 0;
  virtual Status TruncateFile(const std::string& path, uint64_t size) = 0;
  // Makes creations, renames and removals inside `dir` durable.
  virtual Status SyncDir(const std::string& dir) = 0;
  virtual Result<uint64_t> FileSize(const std::string& path) = 0;

  // The process-wide POSIX implementation.
  static Env* Default();
};

// Env::WriteFileAtomic done through `env`'s own file operations (temp file, Sync, rename, SyncDir),
// for implementations whose durability tracking must see every step.
Status WriteFileAtomicWith(Env* env, const std::string& path, std::string_view data);

// "a/b" + "c" -> "a/b/c"
std::string JoinPath(std::string_view a, std::string_view b);
std::string DirName(std::string_view path);

}  // namespace sediment
