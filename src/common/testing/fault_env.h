// FaultEnv: a test-only Env wrapper that simulates crashes and I/O errors. Never linked into the
// server.
//
// Durability model (what survives DropUnsyncedData / SimulateCrash):
// - File contents: for every file written through this Env, the length at its last successful
//   WritableFile::Sync. Bytes appended after it are lost; a file created and never synced becomes
//   empty. Files this Env never wrote are left alone.
// - Renames (including the one inside WriteFileAtomic): durable only once SyncDir(dirname(to))
//   returned OK. An unsynced rename is undone: the file goes back to `from` and the old `to` (its
//   durable contents) comes back, or `to` disappears if it did not exist.
// - Creations: with SetStrictDirSync(true), a file created through this Env whose directory was
//   not synced (SyncDir) after the creation is deleted; otherwise it stays (empty if never synced).
// - Removals, truncations and directory creation are durable at once.
//
// Thread-safety: every method may be called concurrently. A file object returned by this Env is
// single-owner like any WritableFile. A crash is atomic with respect to Append/Sync calls: a Sync
// that returned OK before DropUnsyncedData began is kept; one that had not is lost.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/env.h"
#include "common/mutex.h"

namespace sediment {

class FaultEnv final : public Env {
 public:
  // `base` must outlive this object.
  explicit FaultEnv(Env* base = Env::Default());
  ~FaultEnv() override;

  // ---- Crash simulation ----

  // Power loss: every tracked file is cut back to its synced length, unsynced renames are undone
  // and (strict mode) unsynced creations removed. File objects opened before the call fail every
  // later Append/Sync with IOError (the process that owned them is "dead"); new ones work.
  [[nodiscard]] Status DropUnsyncedData();
  // DropUnsyncedData, then every mutating operation (writes, syncs, creations, renames, removals,
  // truncations) fails with IOError until Restart(). Reads keep working.
  [[nodiscard]] Status SimulateCrash();
  // Ends the crashed state; the files are what DropUnsyncedData left.
  void Restart();
  void SetStrictDirSync(bool strict);

  // ---- Damage ----

  // Removes the last n bytes of `path` (all of it when n >= its size).
  [[nodiscard]] Status TearTail(const std::string& path, uint64_t n);
  // Inverts the bits of the byte at `pos` of `path`.
  [[nodiscard]] Status FlipByte(const std::string& path, uint64_t pos);

  // ---- Injected errors ----

  // The next n Append calls succeed, every later one fails with IOError. n < 0: never fail (the
  // default).
  void FailWritesAfter(int64_t n);
  // While true, WritableFile::Sync and SyncDir fail with IOError (nothing is marked synced).
  void SetSyncFails(bool fail);
  // While true, an Append failed by FailWritesAfter first writes the first half of its data (a
  // short write, as on ENOSPC).
  void SetPartialWriteOnFailure(bool partial);

  // ---- Observation ----

  uint64_t append_count() const { return append_count_.load(); }
  // Successful WritableFile::Sync calls.
  uint64_t sync_count() const { return sync_count_.load(); }
  // Synced length of a tracked file; nullopt when this Env does not track `path`.
  std::optional<uint64_t> SyncedSize(const std::string& path);

  // ---- Env ----

  Result<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override;
  Result<std::unique_ptr<WritableFile>> NewAppendableFile(const std::string& path) override;
  Result<std::unique_ptr<RandomAccessFile>> NewRandomAccessFile(const std::string& path) override;
  Result<std::string> ReadFile(const std::string& path) override;
  // Built from this Env's own operations, so faults and the rename model apply to it.
  Status WriteFileAtomic(const std::string& path, std::string_view data) override;
  bool FileExists(const std::string& path) override;
  Result<std::vector<std::string>> ListDir(const std::string& dir) override;
  Status CreateDirs(const std::string& dir) override;
  Status RemoveFile(const std::string& path) override;
  Status RemoveAll(const std::string& path) override;
  Status RenameFile(const std::string& from, const std::string& to) override;
  Status TruncateFile(const std::string& path, uint64_t size) override;
  Status SyncDir(const std::string& dir) override;
  Result<uint64_t> FileSize(const std::string& path) override;

 private:
  friend class FaultWritableFile;
  struct FileState {
    uint64_t synced = 0;        // guarded by mu_
    bool entry_durable = true;  // guarded by mu_
  };
  struct PendingRename {
    std::string from;
    std::string to;
    std::shared_ptr<FileState> old_to_state;  // null when `to` did not exist
    std::string old_to_contents;
  };

  Result<std::unique_ptr<WritableFile>> OpenWritable(const std::string& path, bool truncate);
  Status CheckNotCrashed() const;
  // Returns the error to inject into this Append, or OK.
  Status NextAppendFault();

  Env* const base_;
  // Shared by every I/O call, exclusive for a crash: makes the crash atomic.
  SharedMutex crash_mu_ ACQUIRED_BEFORE(mu_);
  Mutex mu_;
  std::map<std::string, std::shared_ptr<FileState>> files_ GUARDED_BY(mu_);
  std::vector<PendingRename> renames_ GUARDED_BY(mu_);
  std::atomic<uint64_t> generation_{0};
  std::atomic<bool> crashed_{false};
  std::atomic<bool> strict_dir_sync_{false};
  std::atomic<bool> sync_fails_{false};
  std::atomic<bool> partial_writes_{false};
  Mutex fault_mu_;
  int64_t writes_left_ GUARDED_BY(fault_mu_) = -1;
  std::atomic<uint64_t> append_count_{0};
  std::atomic<uint64_t> sync_count_{0};
};

}  // namespace sediment
