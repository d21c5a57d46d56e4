// SegmentStore as the only writer, opener and deleter of segment files: Create / Write / Publish,
// Open, OpenCopy, DeleteWhenUnpinned and RemoveAllExcept, through FaultEnv (crashes, torn and
// corrupt files, failing writes and syncs) and with hostile names.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "common/testing/fault_env.h"
#include "segment/file_name.h"
#include "storage/store.h"
#include "storage/test_util.h"

namespace sediment {
namespace {

using storage_testing::TempDir;
using storage_testing::TestDs;

std::vector<PositionedEvent> Events(int64_t first_offset, int n) {
  std::vector<PositionedEvent> out;
  for (int i = 0; i < n; ++i) {
    PositionedEvent pe;
    pe.pos = Position{Offset(first_offset + i), 0};
    pe.event.timestamp_ms = 1'700'000'000'000 + i;
    pe.event.ingest_ms = pe.event.timestamp_ms;
    pe.event.raw = "event " + std::to_string(first_offset + i) + " of the store test";
    out.push_back(std::move(pe));
  }
  return out;
}

class SegmentFilesTest : public ::testing::Test {
 protected:
  SegmentFilesTest() : store_(&fenv_, tmp_.Sub("segments")) {}

  std::vector<std::string> Entries() {
    if (!Env::Default()->FileExists(store_.dir())) return {};
    return Env::Default()->ListDir(store_.dir()).value();
  }
  // Writes and publishes `name` with 50 events; returns its info.
  SegmentInfo Publish(const std::string& name) {
    auto info = store_.Write(name, TestDs(), PartitionId(0), Events(100, 50));
    EXPECT_TRUE(info.ok()) << info.status().ToString();
    return info.ok() ? *info : SegmentInfo{};
  }

  TempDir tmp_;
  FaultEnv fenv_;
  SegmentStore store_;
  const std::string name_ =
      FlushedSegmentFileName(PartitionId(0), Epoch(1), Position{Offset(100), 0});
};

TEST_F(SegmentFilesTest, CreatePublishOpenDelete) {
  auto created = store_.Create(name_);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  auto& segment = **created;
  EXPECT_EQ(segment.file_name(), name_);
  EXPECT_EQ(segment.Publish().code(), StatusCode::kFailedPrecondition);  // nothing written yet
  auto info = segment.Write(TestDs(), PartitionId(0), Events(100, 50));
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(segment.Write(TestDs(), PartitionId(0), Events(100, 50)).status().code(),
            StatusCode::kFailedPrecondition);
  // Written and fsynced, not visible under its name yet.
  EXPECT_FALSE(store_.Has(name_));
  EXPECT_TRUE(store_.List()->empty());
  EXPECT_EQ(store_.Open(name_).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(Entries().size(), 1u);

  ASSERT_TRUE(segment.Publish().ok());
  EXPECT_EQ(segment.Publish().code(), StatusCode::kFailedPrecondition);
  created->reset();  // a published file stays when its handle goes
  EXPECT_EQ(store_.List().value(), std::vector<std::string>{name_});
  EXPECT_EQ(Entries(), std::vector<std::string>{name_});  // no temp file left
  // Also through the interface a library that must not depend on storage takes.
  const SegmentOpener& opener = store_;
  auto reader = opener.Open(name_);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  EXPECT_EQ((*reader)->info().event_count, 50u);
  EXPECT_EQ((*reader)->info().content_hash, info->content_hash);
  EXPECT_TRUE((*reader)->VerifyAll().ok());
  EXPECT_EQ(store_.FileSize(name_).value(), info->file_size);

  store_.DeleteWhenUnpinned(name_);
  EXPECT_FALSE(store_.Has(name_));
  EXPECT_EQ(store_.Open(name_).status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(Entries().empty());
}

TEST_F(SegmentFilesTest, AbandonedHandleLeavesNothing) {
  {
    auto segment = store_.Create(name_).value();
    ASSERT_TRUE(segment->Write(TestDs(), PartitionId(0), Events(100, 5)).ok());
  }
  EXPECT_TRUE(Entries().empty());
  // Invalid events: nothing written at all.
  auto segment = store_.Create(name_).value();
  EXPECT_EQ(segment->Write(TestDs(), PartitionId(0), {}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(segment->Publish().code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(Entries().empty());
}

TEST_F(SegmentFilesTest, CrashBeforePublishLeavesNoVisibleSegment) {
  fenv_.SetStrictDirSync(true);
  auto segment = store_.Create(name_).value();
  ASSERT_TRUE(segment->Write(TestDs(), PartitionId(0), Events(100, 50)).ok());
  ASSERT_TRUE(fenv_.SimulateCrash().ok());
  segment.reset();  // the dead process's handle cannot clean up (removals fail while crashed)
  fenv_.Restart();
  EXPECT_FALSE(store_.Has(name_));
  EXPECT_TRUE(store_.List()->empty());
  EXPECT_EQ(store_.Open(name_).status().code(), StatusCode::kNotFound);
  // Whatever the crash left (the temp file) is garbage the digest's start removes.
  auto removed = store_.RemoveAllExcept({});
  ASSERT_TRUE(removed.ok()) << removed.status().ToString();
  EXPECT_TRUE(Entries().empty());
}

TEST_F(SegmentFilesTest, PublishedSegmentSurvivesACrash) {
  fenv_.SetStrictDirSync(true);
  const SegmentInfo info = Publish(name_);
  ASSERT_TRUE(fenv_.SimulateCrash().ok());
  fenv_.Restart();
  auto reader = store_.Open(name_);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  EXPECT_EQ((*reader)->info().content_hash, info.content_hash);
  EXPECT_TRUE((*reader)->VerifyAll().ok());
}

TEST_F(SegmentFilesTest, FailedWriteOrSyncLeavesNothing) {
  fenv_.FailWritesAfter(0);
  EXPECT_FALSE(store_.Write(name_, TestDs(), PartitionId(0), Events(100, 50)).ok());
  EXPECT_TRUE(Entries().empty());
  fenv_.FailWritesAfter(-1);

  // The file is written but neither it nor the directory can be synced: nothing is published.
  fenv_.SetSyncFails(true);
  EXPECT_EQ(store_.Write(name_, TestDs(), PartitionId(0), Events(100, 50)).status().code(),
            StatusCode::kIOError);
  EXPECT_TRUE(Entries().empty());

  // The rename happened but the directory sync failed: the file is not left under its name.
  fenv_.SetSyncFails(false);
  auto segment = store_.Create(name_).value();
  ASSERT_TRUE(segment->Write(TestDs(), PartitionId(0), Events(100, 50)).ok());
  fenv_.SetSyncFails(true);
  EXPECT_EQ(segment->Publish().code(), StatusCode::kIOError);
  EXPECT_FALSE(store_.Has(name_));
  EXPECT_TRUE(Entries().empty());
}

TEST_F(SegmentFilesTest, TornOrCorruptFileIsRefusedOnOpen) {
  const SegmentInfo info = Publish(name_);
  const std::string path = store_.PathOf(name_);
  const std::string good = Env::Default()->ReadFile(path).value();
  auto restore = [&] { ASSERT_TRUE(Env::Default()->WriteFileAtomic(path, good).ok()); };
  // Torn tails of every length class: the trailer, the footer, into the blocks, all of it.
  for (uint64_t cut : {uint64_t{1}, uint64_t{8}, uint64_t{40}, uint64_t{41}, info.file_size / 2,
                       info.file_size - 1, info.file_size}) {
    ASSERT_TRUE(fenv_.TearTail(path, cut).ok());
    auto reader = store_.Open(name_);
    EXPECT_EQ(reader.status().code(), StatusCode::kCorruption) << "cut " << cut;
    restore();
  }
  // A flipped byte in the footer, found at Open (the footer CRC).
  ASSERT_TRUE(fenv_.FlipByte(path, info.file_size - 50).ok());
  EXPECT_EQ(store_.Open(name_).status().code(), StatusCode::kCorruption);
  restore();
  // A flipped byte in a block opens (blocks are checked when read) but is refused on read.
  ASSERT_TRUE(fenv_.FlipByte(path, 30).ok());
  auto reader = store_.Open(name_);
  if (reader.ok()) {
    DecodedBlock block;
    EXPECT_EQ((*reader)->ReadBlock(0, &block).code(), StatusCode::kCorruption);
    EXPECT_EQ((*reader)->VerifyAll().code(), StatusCode::kCorruption);
  } else {
    EXPECT_EQ(reader.status().code(), StatusCode::kCorruption);
  }
  restore();
  EXPECT_TRUE(store_.Open(name_).ok());
}

// Open shares one reader per file name, and never serves a file that was replaced (Install,
// Publish) or deleted since, through the store or behind its back.
TEST_F(SegmentFilesTest, CachedReadersFollowReplacementAndDeletion) {
  Publish(name_);
  auto a = store_.Open(name_);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ((*a)->info().event_count, 50u);
  // Replaced under the same name by Publish: the next Open reads the new file; the old reader
  // keeps reading what it opened.
  ASSERT_TRUE(store_.Write(name_, TestDs(), PartitionId(0), Events(100, 20)).ok());
  auto b = store_.Open(name_);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ((*b)->info().event_count, 20u);
  DecodedBlock block;
  EXPECT_TRUE((*a)->ReadBlock(0, &block).ok());
  // Replaced by Install.
  const std::string other = tmp_.Sub("other.seg");
  auto other_info = WriteSegment(Env::Default(), other, TestDs(), PartitionId(0), Events(100, 7));
  ASSERT_TRUE(other_info.ok());
  auto bytes = Env::Default()->ReadFile(other);
  ASSERT_TRUE(bytes.ok());
  Status installed =
      store_.Install(SegmentRecordFor(*other_info, name_, NodeId(1), Epoch(0)), *bytes);
  ASSERT_TRUE(installed.ok()) << installed.ToString();
  auto c = store_.Open(name_);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ((*c)->info().event_count, 7u);
  // Deleted by the store, then removed behind its back after a new Publish.
  store_.DeleteWhenUnpinned(name_);
  EXPECT_EQ(store_.Open(name_).status().code(), StatusCode::kNotFound);
  Publish(name_);
  ASSERT_TRUE(store_.Open(name_).ok());
  ASSERT_TRUE(Env::Default()->RemoveFile(store_.PathOf(name_)).ok());
  EXPECT_EQ(store_.Open(name_).status().code(), StatusCode::kNotFound);
  // More files than the cache holds all open and read.
  std::vector<std::string> names;
  for (size_t i = 0; i < SegmentStore::kCachedReaders + 5; ++i) {
    names.push_back(
        FlushedSegmentFileName(PartitionId(1), Epoch(1), Position{Offset(1000 + i), 0}));
    ASSERT_TRUE(store_.Write(names.back(), TestDs(), PartitionId(1), Events(1000 + i, 1)).ok());
  }
  for (int round = 0; round < 2; ++round) {
    for (size_t i = 0; i < names.size(); ++i) {
      auto r = store_.Open(names[i]);
      ASSERT_TRUE(r.ok()) << names[i];
      ASSERT_TRUE((*r)->ReadBlock(0, &block).ok());
      EXPECT_EQ(block.positions[0].offset, Offset(1000 + i));
    }
  }
}

TEST_F(SegmentFilesTest, HostileNamesAreRefusedAndTouchNothing) {
  // A file next to the segment directory that a hostile name would reach.
  const std::string victim = tmp_.Sub("victim.seg");
  ASSERT_TRUE(Env::Default()->WriteFileAtomic(victim, "keep me").ok());
  Publish(name_);
  for (std::string bad : {std::string("../victim.seg"), std::string(".."), std::string(""),
                          std::string("/tmp/x.seg"), std::string("a/b.seg"), std::string("x"),
                          std::string(name_ + ".tmp.0"), std::string(300, 'a') + ".seg"}) {
    EXPECT_EQ(store_.Create(bad).status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(store_.Write(bad, TestDs(), PartitionId(0), Events(1, 1)).status().code(),
              StatusCode::kInvalidArgument)
        << bad;
    EXPECT_EQ(store_.Open(bad).status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(store_.Read(bad).status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(store_.FileSize(bad).status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_FALSE(store_.Has(bad)) << bad;
    store_.DeleteWhenUnpinned(bad);
  }
  EXPECT_EQ(Env::Default()->ReadFile(victim).value(), "keep me");
  EXPECT_EQ(Entries(), std::vector<std::string>{name_});
}

TEST_F(SegmentFilesTest, PublishCancelsAPendingDeletionOfTheSameName) {
  Publish(name_);
  auto pin = store_.Pin({name_});
  store_.DeleteWhenUnpinned(name_);
  EXPECT_TRUE(store_.IsDeletionPending(name_));
  Publish(name_);  // the file is written again: the deletion was meant for the old one
  EXPECT_FALSE(store_.IsDeletionPending(name_));
  pin.reset();
  EXPECT_TRUE(store_.Open(name_).ok());
}

TEST_F(SegmentFilesTest, OpenCopyReadsFetchedBytesAndCleansUp) {
  Publish(name_);
  const std::string bytes = store_.Read(name_).value();
  store_.DeleteWhenUnpinned(name_);
  {
    auto reader = store_.OpenCopy(bytes);
    ASSERT_TRUE(reader.ok()) << reader.status().ToString();
    EXPECT_TRUE((*reader)->VerifyAll().ok());
    EXPECT_EQ((*reader)->info().event_count, 50u);
    EXPECT_EQ(Entries().size(), 1u);  // the temporary copy
    EXPECT_TRUE(store_.List()->empty());
  }
  EXPECT_TRUE(Entries().empty());
  EXPECT_EQ(store_.OpenCopy(bytes.substr(0, bytes.size() / 2)).status().code(),
            StatusCode::kCorruption);
  EXPECT_TRUE(Entries().empty());
}

TEST_F(SegmentFilesTest, RemoveAllExceptKeepsTheListedAndDefersPinned) {
  const std::string kept =
      MergedSegmentFileName(PartitionId(0), Position{Offset(1), 0}, NodeId(1), 0x01234567);
  const std::string pinned = "pinned.seg";
  Publish(kept);
  Publish(name_);
  Publish(pinned);
  ASSERT_TRUE(Env::Default()->WriteFileAtomic(store_.PathOf("x.seg.tmp.9"), "partial").ok());
  auto pin = store_.Pin({pinned});
  auto removed = store_.RemoveAllExcept({kept});
  ASSERT_TRUE(removed.ok()) << removed.status().ToString();
  EXPECT_EQ(std::set<std::string>(removed->begin(), removed->end()),
            (std::set<std::string>{name_, pinned, "x.seg.tmp.9"}));
  EXPECT_EQ(Entries(), (std::vector<std::string>{kept, pinned}));
  EXPECT_TRUE(store_.IsDeletionPending(pinned));
  pin.reset();
  EXPECT_EQ(Entries(), std::vector<std::string>{kept});
}

}  // namespace
}  // namespace sediment
