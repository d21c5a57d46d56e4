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

// Node 2's requests can be held open in Buffers until the test releases them.
struct Hold {
  std::mutex mu;
  std::condition_variable cv;
  bool hold = false, entered = false;
  void Enter() {
    std::unique_lock lock(mu);
    entered = true;
    cv.notify_all();
    cv.wait(lock, [&] { return !hold; });
  }
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
    node_.on_buffers = [this] { hold_.Enter(); };
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
  FakeLocal node_{NodeId(2)};
  Hold hold_;
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

  hold_.hold = true;
  InternalQuery q = Query();
  q.partitions = {{PartitionId(0), Epoch(3)}};
  std::thread running([&] { (void)leaf_.Buffers(Request(q)); });
  {
    std::unique_lock lock(hold_.mu);
    hold_.cv.wait(lock, [&] { return hold_.entered; });
  }
  EXPECT_EQ(leaf_.Cancel(cancel).body, R"({"cancelled":1})");
  http::Request other;
  other.body = EncodeCancel("q2");
  EXPECT_EQ(leaf_.Cancel(other).body, R"({"cancelled":0})");
  {
    std::lock_guard lock(hold_.mu);
    hold_.hold = false;
    hold_.cv.notify_all();
  }
  running.join();
  EXPECT_EQ(leaf_.Cancel(cancel).body, R"({"cancelled":0})");  // ended: unregistered
}

}  // namespace
}  // namespace sediment::coordinator
