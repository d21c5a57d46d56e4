// The serving side of the internal protocol: requests encoded as a coordinator sends them, answers
// decoded as a coordinator reads them.
#include "coordinator/leaf.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <thread>

#include "coordinator/coordinator_testing.h"
#include "query/wire.h"

namespace sediment::coordinator {
namespace {

using namespace coordinator_testing;

// Node 2: buffers the test sets; segments it "holds" are those whose record lists it (their
// sources point nowhere: the tests ask only for segments it does not hold). Buffers can be made
// to wait until released, to hold a request open.
class LeafNode final : public LocalNode {
 public:
  NodeId id() const override { return NodeId(2); }
  std::vector<query::BufferedSource> Buffers(const std::map<int32_t, Epoch>& want,
                                             std::vector<int64_t>* not_served) override {
    {
      std::unique_lock lock(mu);
      entered = true;
      cv.notify_all();
      cv.wait(lock, [&] { return !hold; });
    }
    std::vector<query::BufferedSource> out;
    for (const auto& [p, e] : want) {
      auto it = buffers.find(p);
      if (it == buffers.end() || it->second.first != e) {
        not_served->push_back(p);
        continue;
      }
      out.push_back(Source(it->second.second));
    }
    return out;
  }
  bool HoldsFile(const std::string&) const override { return false; }
  query::SegmentSource SourceOf(const SegmentRecord&) const override { return {}; }
  std::optional<query::SegmentSource> SourceOfFile(const std::string& file,
                                                   SegmentId) const override {
    asked_files.push_back(file);
    return std::nullopt;
  }
  std::shared_ptr<void> Pin(const std::vector<std::string>& files) override {
    pinned = files;
    return nullptr;
  }
  bool HasBucket() const override { return false; }
  Result<Fetched> FetchFromBucket(const SegmentRecord&) override {
    return Status::Unavailable("no bucket");
  }
  void ReportUnreadable(SegmentId id) override { unreadable.push_back(id); }

  std::map<int32_t, std::pair<Epoch, std::vector<PositionedEvent>>> buffers;
  std::vector<SegmentId> unreadable;
  std::vector<std::string> pinned;
  mutable std::vector<std::string> asked_files;
  std::mutex mu;
  std::condition_variable cv;
  bool hold = false, entered = false;
};

std::string Header(const http::Response& r, std::string_view name) {
  for (const auto& [k, v] : r.headers) {
    if (k == name) return v;
  }
  return "";
}

class LeafTest : public ::testing::Test {
 protected:
  LeafTest() : leaf_(Env::Default(), &global_, &node_, 1) {
    global_.state.applied_through = Offset(42);
  }
  static http::Request Request(const InternalQuery& q) {
    http::Request req;
    req.method = "POST";
    req.body = EncodeInternalQuery(q);
    return req;
  }
  static InternalQuery Query(const std::string& text = "*") {
    InternalQuery q;
    q.repo = "web";
    q.query_string = text;
    q.query_id = "q1";
    q.range = query::TimeRange{0, 1'000'000};
    return q;
  }

  FakeGlobal global_;
  LeafNode node_;
  Leaf leaf_;
};

TEST_F(LeafTest, BuffersAnswersTheMatchesOfTheServedPartitionsAndItsAppliedOffset) {
  node_.buffers[0] = {Epoch(3), Events(0, 5)};
  InternalQuery q = Query();
  q.partitions = {{PartitionId(0), Epoch(3)}, {PartitionId(1), Epoch(1)}};
  http::Response r = leaf_.Buffers(Request(q));
  ASSERT_EQ(r.status, 200) << r.body;
  auto set = query::DecodeMatchSet(r.body);
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  ASSERT_EQ(set->sources.size(), 1u);
  EXPECT_EQ(set->sources[0].events->size(), 5u);
  EXPECT_EQ(Header(r, kGlobalAppliedHeader), "42");
  EXPECT_EQ(Header(r, kMissingPartitionsHeader), "1");
}

TEST_F(LeafTest, BuffersOfAnotherRepositoryAreNotAnswered) {
  node_.buffers[0] = {Epoch(3), Events(0, 5)};
  InternalQuery q = Query();
  q.repo = "other";
  q.partitions = {{PartitionId(0), Epoch(3)}};
  http::Response r = leaf_.Buffers(Request(q));
  ASSERT_EQ(r.status, 200);
  EXPECT_TRUE(query::DecodeMatchSet(r.body)->sources.empty());
}

TEST_F(LeafTest, SegmentsNotHeldAreNamedAndWarnedAbout) {
  // Segment 7 is in Global on node 1 only; segment 8 left Global and its file is not here.
  global_.state.segments[SegmentId(7)] = Segment(7, 0, 5, {NodeId(1)});
  InternalQuery q = Query();
  q.segments = {SegmentId(7), SegmentId(8)};
  q.segment_files = {"seg-7.seg", "seg-8.seg"};
  for (bool partial : {false, true}) {
    node_.asked_files.clear();
    http::Response r = partial ? leaf_.Partial(Request(q)) : leaf_.Segments(Request(q));
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(Header(r, kSegmentsNotHeldHeader), "7,8");
    // Only the file Global no longer lists is looked for in the directory.
    EXPECT_EQ(node_.asked_files, std::vector<std::string>{"seg-8.seg"});
    std::vector<std::string> warnings;
    if (partial) {
      warnings = query::DecodePartial(r.body)->warnings;
    } else {
      warnings = query::DecodeMatchSet(r.body)->warnings;
    }
    ASSERT_EQ(warnings.size(), 1u);
    EXPECT_NE(warnings[0].find("not held by node 2"), std::string::npos) << warnings[0];
  }
  EXPECT_TRUE(node_.pinned.empty());
}

TEST_F(LeafTest, ABadRequestIs400) {
  http::Request req;
  req.body = "not an internal query";
  EXPECT_EQ(leaf_.Buffers(req).status, 400);
  EXPECT_EQ(leaf_.Segments(req).status, 400);
  EXPECT_EQ(leaf_.Partial(req).status, 400);
  EXPECT_EQ(leaf_.Cancel(req).status, 400);
  InternalQuery q = Query("count(");
  EXPECT_EQ(leaf_.Partial(Request(q)).status, 400);
}

TEST_F(LeafTest, CancelReachesTheRequestsOfThatQueryWhileTheyRun) {
  http::Request cancel;
  cancel.body = EncodeCancel("q1");
  EXPECT_EQ(leaf_.Cancel(cancel).body, R"({"cancelled":0})");

  node_.hold = true;
  InternalQuery q = Query();
  q.partitions = {{PartitionId(0), Epoch(3)}};
  std::thread running([&] { (void)leaf_.Buffers(Request(q)); });
  {
    std::unique_lock lock(node_.mu);
    node_.cv.wait(lock, [&] { return node_.entered; });
  }
  EXPECT_EQ(leaf_.Cancel(cancel).body, R"({"cancelled":1})");
  http::Request other;
  other.body = EncodeCancel("q2");
  EXPECT_EQ(leaf_.Cancel(other).body, R"({"cancelled":0})");
  {
    std::lock_guard lock(node_.mu);
    node_.hold = false;
    node_.cv.notify_all();
  }
  running.join();
  EXPECT_EQ(leaf_.Cancel(cancel).body, R"({"cancelled":0})");  // ended: unregistered
}

}  // namespace
}  // namespace sediment::coordinator
