// The node's local segment files and the interfaces replication needs from the rest of the node
// (peers' liveness, fetching a file from a peer). See storage/README.md for the contract.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/env.h"
#include "common/status.h"
#include "common/types.h"
#include "global/global.h"
#include "segment/file_name.h"
#include "segment/segment.h"

namespace sediment {

// Checks that `bytes` are exactly the file `segment` describes: size == file_size, the XXH64
// content hash (segment/FORMAT.md) equals content_hash, and the file opens as a segment (header,
// trailer and footer checks of SegmentReader::Open, run on the bytes in memory; nothing is
// written) whose partition, position range and event count are the record's. Blocks are not
// decompressed: a matching content hash already proves they are the bytes the writer produced.
// Corruption otherwise, naming the segment.
Status VerifySegmentBytes(const SegmentRecord& segment, std::string_view bytes);

// The footer summary of segment file bytes held in memory (SegmentReader::Open's header, trailer
// and footer checks; nothing is written). `file_name` names the bytes in errors.
Result<SegmentInfo> ReadSegmentInfo(const std::string& file_name, std::string_view bytes);

// Called before each chunk a verification reads, with the chunk's size; returns false to abort
// (the verification then returns Aborted). Used for throttling (see RateLimiter).
using ReadHook = std::function<bool(uint64_t bytes)>;

// The segment files of this node: <dir>/<file_name>. Thread-safe.
//
// The only code that writes, opens and deletes files in the segment directory (the digest, merges,
// the replicator and queries all go through it). Every file name it is given must satisfy
// IsValidSegmentFileName (segment/file_name.h, which also builds the names sediment writes);
// other names are InvalidArgument (nothing outside the directory is ever touched). Besides
// segment files the directory only holds temporary files of writes in progress,
// `<file_name>.tmp.<N>` and `fetched-<N>.tmp`, which a crash may leave behind (RemoveAllExcept at
// the digest's start removes them).
//
// Pins: a query (or a merge) that reads local files pins them; deleting a pinned file is deferred
// until its last pin is released, so a file swapped out of Global by a merge or removed by
// retention is never pulled from under a running reader.
//
// Recency (for the bucket-storage cache eviction, least recently used first): the store keeps a
// logical access time per file name, raised by Pin, Install and Touch. A file not accessed during
// this process's lifetime (e.g. after a restart) has access time 0, the oldest.
class SegmentStore final : public SegmentOpener {
 public:
  // `env` is borrowed and must outlive the store. The directory is created on first Install.
  SegmentStore(Env* env, std::string dir);

  const std::string& dir() const { return dir_; }
  // <dir>/<file_name>, for log messages. Other libraries never open or build paths themselves
  // (the server still does, see storage/README.md).
  std::string PathOf(const std::string& file_name) const;
  // False also for an invalid name.
  bool Has(const std::string& file_name) const;
  // Names of the *.seg files in dir (no temporary files), sorted. A missing dir is empty.
  Result<std::vector<std::string>> List() const;
  // Size in bytes of a local file. NotFound when missing.
  Result<uint64_t> FileSize(const std::string& file_name) const;

  // Verifies `bytes` (VerifySegmentBytes) and writes them as segment.file_name atomically (unique
  // temp file, fsync, rename, directory fsync); an existing file of that name is replaced (readers
  // that opened it keep reading the old contents) and a deferred deletion of it is cancelled. On
  // error nothing is left behind and an existing file is untouched.
  Status Install(const SegmentRecord& segment, std::string_view bytes);

  // A new segment file being written: Create(name), Write(...), Publish(). Until Publish returns OK
  // nothing of it is visible under its name (Has, List, Open): it is the temporary file
  // `<name>.tmp.<N>`, which a crash leaves behind as garbage. Durability: Write fsyncs the file;
  // Publish renames it to its name (replacing a file of that name, whose deferred deletion is
  // cancelled) and fsyncs the directory, so after Publish returned OK the segment survives a crash.
  // Destroying a handle that was not published removes its temporary file (and, when Publish failed
  // after the rename, the file under its name). One owner at a time; must not outlive the store.
  class NewSegment {
   public:
    ~NewSegment();
    NewSegment(const NewSegment&) = delete;
    NewSegment& operator=(const NewSegment&) = delete;

    const std::string& file_name() const { return name_; }
    // Writes `events` as a segment (WriteSegmentFile: same argument rules) and fsyncs it. Once per
    // handle (FailedPrecondition after that). On error the temporary file is removed.
    Result<SegmentInfo> Write(const Datasource& ds, PartitionId partition,
                              const std::vector<PositionedEvent>& events,
                              const SegmentWriterOptions& options = {});
    // As Write, for events produced a block at a time: `fill` adds them to the writer (position
    // order; SegmentFileWriter), so memory stays about one block. An error from `fill` or the
    // writer is returned and the temporary file removed.
    Result<SegmentInfo> WriteFrom(const Datasource& ds, PartitionId partition,
                                  const SegmentWriterOptions& options,
                                  const std::function<Status(SegmentFileWriter*)>& fill);
    // Publishes the written file (FailedPrecondition before a successful Write, or twice). On error
    // nothing is left under the name or the temporary name.
    Status Publish();

   private:
    friend class SegmentStore;
    NewSegment(SegmentStore* store, std::string name, std::string tmp_path);
    void Discard();

    enum class State { kEmpty, kWritten, kPublished, kDiscarded };
    SegmentStore* store_;
    std::string name_;
    std::string tmp_path_;
    State state_ = State::kEmpty;
  };
  // Starts writing `file_name` (see NewSegment); creates the directory when missing.
  // InvalidArgument for an invalid name.
  Result<std::unique_ptr<NewSegment>> Create(const std::string& file_name);
  // Create, Write and Publish in one call: the file is complete under its name, or absent.
  Result<SegmentInfo> Write(const std::string& file_name, const Datasource& ds,
                            PartitionId partition, const std::vector<PositionedEvent>& events,
                            const SegmentWriterOptions& options = {});

  // Opens the local file (SegmentReader::Open: header, trailer, footer checksum and footer
  // consistency; blocks are checked as they are read). InvalidArgument for an invalid name,
  // NotFound when missing, Corruption for a damaged or truncated file. The reader must not
  // outlive the store; a pinned file stays readable while pinned (see Pin).
  // Opened readers are kept (up to kCachedReaders, least recently opened dropped first) and
  // shared by later Opens of the same name while the file exists, so a query does not read and
  // check every footer again; Install, Publish and every deletion drop the name's reader.
  Result<std::unique_ptr<SegmentReader>> Open(const std::string& file_name) const override;
  static constexpr size_t kCachedReaders = 256;
  // A reader over segment bytes fetched from elsewhere and not installed as a local copy (a merge
  // input held by another node): written to a temporary file `fetched-<N>.tmp` in the directory
  // (not fsynced), removed when the reader is destroyed. Corruption when the bytes do not open as
  // a segment (nothing is left then). The reader must not outlive the store.
  Result<std::unique_ptr<SegmentReader>> OpenCopy(std::string_view bytes);

  // Reads a whole local file (the internal fetch endpoint serves it). NotFound when missing.
  Result<std::string> Read(const std::string& file_name) const;
  // Verifies the local copy of `segment` like VerifySegmentBytes, reading the file in 1 MiB
  // chunks (each announced to `before_read` first, when set). NotFound when the file is missing,
  // Corruption when it is not the segment's exact bytes.
  Status Verify(const SegmentRecord& segment, const ReadHook& before_read = {}) const;

  // Pins `file_names` until the returned handle is destroyed. The handle must not outlive the
  // store. Pinning a missing file is allowed (it only defers a deletion).
  using PinHandle = std::shared_ptr<void>;
  PinHandle Pin(const std::vector<std::string>& file_names);
  bool IsPinned(const std::string& file_name) const;
  // Deletes the file now when unpinned, else when its last pin is released. Missing files are
  // fine; other removal errors are logged. An invalid name is logged and nothing is deleted.
  void DeleteWhenUnpinned(const std::string& file_name);
  // Removes every entry of the directory whose name is not in `keep`: segment files (a pinned one
  // when its last pin is released), temporary files of interrupted writes, anything else. Creates
  // the directory when missing. Returns the names removed; stops at the first removal error.
  Result<std::vector<std::string>> RemoveAllExcept(const std::set<std::string>& keep);
  // True while a deletion of `file_name` waits for its pins.
  bool IsDeletionPending(const std::string& file_name) const;
  // Withdraws a deletion that waits for pins (the file is wanted again). No-op otherwise.
  void CancelDeletion(const std::string& file_name);

  // Marks `file_name` as used now (Pin and Install do this themselves).
  void Touch(const std::string& file_name);
  // Logical time of the last Pin / Install / Touch of `file_name`: larger is more recent, 0 when
  // never accessed during this process's lifetime (or deleted since). Strictly increasing across
  // accesses, so two accessed files never tie.
  uint64_t LastAccess(const std::string& file_name) const;

 private:
  void Unpin(const std::vector<std::string>& file_names);
  Status RemoveNow(const std::string& file_name);  // mu_ held; logs errors too
  std::string NextTempSuffix();
  void TouchLocked(const std::string& file_name);  // mu_ held

  Env* env_;
  std::string dir_;
  mutable std::mutex mu_;
  std::map<std::string, int> pins_;              // file -> live pins
  std::set<std::string> doomed_;                 // pinned files to delete on their last unpin
  std::map<std::string, uint64_t> last_access_;  // file -> logical access time (> 0)
  uint64_t access_clock_ = 0;                    // last logical access time handed out
  uint64_t next_tmp_ = 0;                        // unique temp-file suffixes

  // The reader cache (see Open), under mu_: name -> (reader, its entry in readers_lru_), most
  // recently opened first. `readers_gen_` counts drops, so that an Open that read a file while
  // it was replaced does not cache what it read.
  void DropReaderLocked(const std::string& file_name) const;  // mu_ held
  mutable std::list<std::string> readers_lru_;
  mutable std::unordered_map<std::string, std::pair<std::shared_ptr<const SegmentReader>,
                                                    std::list<std::string>::iterator>>
      readers_;
  mutable uint64_t readers_gen_ = 0;
};

// Fetches a segment file's bytes from a peer that holds it (HTTP in the server, fakes in tests).
// Implementations must be thread-safe. The caller verifies the bytes.
class SegmentFetcher {
 public:
  virtual ~SegmentFetcher() = default;
  virtual Result<std::string> Fetch(NodeId holder, const SegmentRecord& segment) = 0;
};

// Which nodes are up (the cluster membership in the server, fakes in tests). Thread-safe; called
// while Global's state lock is held, so it must not call into Global.
class PeerView {
 public:
  virtual ~PeerView() = default;
  virtual NodeId Self() const = 0;
  // Heard from within the heartbeat timeout (Self() always is).
  virtual bool IsAlive(NodeId node) const = 0;
  // Alive, or silent for less than `grace` (a node that may still come back: its copies are not
  // re-created elsewhere yet).
  virtual bool IsPresent(NodeId node, std::chrono::milliseconds grace) const = 0;
};

}  // namespace sediment
