// The coordinator against a fake cluster: a Global state the test sets, peers that answer from
// in-memory data through the real wire encodings (or fail as a test says), and a local node.
#include "coordinator/coordinator.h"

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <mutex>
#include <set>

#include "coordinator/coordinator_testing.h"
#include "query/lookup.h"
#include "query/wire.h"

namespace sediment::coordinator {
namespace {

using namespace coordinator_testing;

// What one peer holds and how it answers.
struct FakePeer {
  std::map<int32_t, std::pair<Epoch, std::vector<PositionedEvent>>> buffers;
  std::map<int64_t, std::vector<PositionedEvent>> segments;  // segment id -> its events
  int64_t global_applied = 0;  // X-Sediment-Global-Applied of its buffers answers
  // Answers Unavailable (connection refused) to every call.
  bool unreachable = false;
  // Answers with this HTTP status and an error body to every call (0: answers normally).
  int http_error = 0;
  // Runs when a buffers call reaches it (before it answers).
  std::function<void()> on_buffers;
};

struct CallLog {
  PeerCallKind kind;
  int64_t node;
  InternalQuery q;
};

class FakePeers final : public PeerClient {
 public:
  FakePeers() : env_(Env::Default()) {}

  void Start(PeerCallKind kind, NodeId node, const std::string& address, const InternalQuery& q,
             const PeerCallOptions&, std::shared_ptr<PeerSlot> slot) override {
    FakePeer* peer = nullptr;
    {
      std::lock_guard lock(mu_);
      calls.push_back(CallLog{kind, node.value, q});
      auto it = peers.find(node.value);
      if (it != peers.end() && address == "node-" + std::to_string(node.value)) {
        peer = &it->second;
      }
    }
    if (peer == nullptr || peer->unreachable) {
      slot->Deliver(Status::Unavailable("connection refused"));
      return;
    }
    if (kind == PeerCallKind::kBuffers && peer->on_buffers) peer->on_buffers();
    if (peer->http_error != 0) {
      http::ClientResponse r;
      r.status = peer->http_error;
      r.body = R"({"error":"injected failure"})";
      slot->Deliver(std::move(r));
      return;
    }
    // As the leaf does: with the coordinator's defineTable()/join() tables.
    auto compiled = query::Compile(q.query_string, nullptr, &q.tables);
    ASSERT_TRUE(compiled.ok()) << compiled.status().ToString();
    http::ClientResponse r;
    r.status = 200;
    query::ScanInput input;
    if (kind == PeerCallKind::kBuffers) {
      for (const auto& [p, e] : q.partitions) {
        auto it = peer->buffers.find(p.value);
        if (it != peer->buffers.end() && it->second.first == e) {
          input.buffered.push_back(Source(it->second.second));
        }
      }
      auto set = query::CollectMatches(env_, **compiled, q.range, input);
      ASSERT_TRUE(set.ok());
      r.body = query::EncodeMatchSet(*set);
      r.headers.emplace_back(std::string(kGlobalAppliedHeader),
                             std::to_string(peer->global_applied));
    } else {
      std::vector<int64_t> not_held;
      for (SegmentId id : q.segments) {
        auto it = peer->segments.find(id.value);
        if (it == peer->segments.end()) {
          not_held.push_back(id.value);
          continue;
        }
        input.buffered.push_back(Source(it->second));
      }
      auto partial = query::ExecutePartial(env_, **compiled, q.range, input);
      ASSERT_TRUE(partial.ok());
      r.body = query::EncodePartial(*partial);
      if (!not_held.empty()) {
        r.headers.emplace_back(std::string(kSegmentsNotHeldHeader), JoinIds(not_held));
      }
    }
    slot->Deliver(std::move(r));
  }

  void Cancel(const std::string& query_id, const std::set<std::string>& addresses) override {
    std::lock_guard lock(mu_);
    for (const auto& a : addresses) cancels.emplace_back(query_id, a);
  }

  std::vector<CallLog> CallsTo(int64_t node, PeerCallKind kind) {
    std::lock_guard lock(mu_);
    std::vector<CallLog> out;
    for (const auto& c : calls) {
      if (c.node == node && c.kind == kind) out.push_back(c);
    }
    return out;
  }

  std::map<int64_t, FakePeer> peers;
  std::vector<CallLog> calls;
  std::vector<std::pair<std::string, std::string>> cancels;

 private:
  Env* env_;
  std::mutex mu_;
};

class CoordinatorTest : public ::testing::Test {
 protected:
  CoordinatorTest() {
    global_.state.applied_through = Offset(10);  // ahead of every peer unless a test says not
    alive_ = {1, 2, 3};
    coordinator_ = std::make_unique<Coordinator>(
        Env::Default(), Clock::Real(), &global_, &local_, &peers_,
        [this](NodeId n) -> std::optional<PeerInfo> {
          std::lock_guard lock(alive_mu_);
          if (n.value < 1 || n.value > 3) return std::nullopt;
          return PeerInfo{alive_.count(n.value) != 0, "node-" + std::to_string(n.value)};
        },
        CoordinatorOptions{});
  }

  void Own(int32_t partition, int64_t node, int64_t epoch) {
    global_.Mutate([&](GlobalState& st) {
      st.partitions[partition] = PartitionState{NodeId(node), Epoch(epoch), Offset(0), Offset(0)};
    });
  }
  void Register(const SegmentRecord& seg) {
    global_.Mutate([&](GlobalState& st) {
      st.segments[seg.id] = seg;
      Position& ft = st.flushed_through[{kDs.Key(), kPart}];
      ft = std::max(ft, seg.max_pos);
    });
  }
  void SetAlive(std::set<int64_t> alive) {
    std::lock_guard lock(alive_mu_);
    alive_ = std::move(alive);
  }

  // Runs `q` over everything; the coordinated result.
  Result<CoordinatedResult> Run(const std::string& q, QueryControl control = {}) {
    auto compiled = query::Compile(q);
    EXPECT_TRUE(compiled.ok());
    return coordinator_->Run("web", q, **compiled, query::TimeRange{0, 1'000'000}, control);
  }
  // The events a query for every event returns, by @rawstring, with multiplicity.
  std::map<std::string, int> Seen(std::vector<std::string>* warnings = nullptr) {
    auto r = Run("*");
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    std::map<std::string, int> seen;
    if (!r.ok()) return seen;
    for (const auto& row : r->result.rows) {
      for (const auto& [k, v] : row) {
        if (k == "@rawstring") seen[std::get<std::string>(v)]++;
      }
    }
    if (warnings) *warnings = r->warnings;
    return seen;
  }
  static std::map<std::string, int> Once(int from, int to) {
    std::map<std::string, int> out;
    for (int i = from; i < to; ++i) out["event " + std::to_string(i)] = 1;
    return out;
  }

  FakeGlobal global_;
  FakeLocal local_;
  FakePeers peers_;
  std::mutex alive_mu_;
  std::set<int64_t> alive_;
  std::unique_ptr<Coordinator> coordinator_;
};

// The owner's buffer still holds events a segment registered after its snapshot: they are counted
// from the segment only (the cut at flushed_through).
TEST_F(CoordinatorTest, EventsFlushedSinceTheOwnersSnapshotAreCountedOnce) {
  Own(kPart, 2, 1);
  peers_.peers[2].buffers[kPart] = {Epoch(1), Events(0, 10)};
  Register(Segment(1, 0, 6, {NodeId(3)}));
  peers_.peers[3].segments[1] = Events(0, 6);
  std::vector<std::string> warnings;
  EXPECT_EQ(Seen(&warnings), Once(0, 10));
  EXPECT_TRUE(warnings.empty()) << warnings[0];
}

// The owner flushed and dropped events from its buffer before it answered; this node's Global
// has not applied that registration yet. The owner's Global offset makes the coordinator wait
// for it, so the events come from the new segment instead of from nowhere.
TEST_F(CoordinatorTest, WaitsForTheOwnersGlobalBeforeReadingSegments) {
  Own(kPart, 2, 1);
  global_.Mutate([](GlobalState& st) { st.applied_through = Offset(5); });
  peers_.peers[2].buffers[kPart] = {Epoch(1), Events(6, 10)};
  peers_.peers[2].global_applied = 8;
  GlobalState ahead = global_.state;
  ahead.applied_through = Offset(8);
  SegmentRecord seg = Segment(1, 0, 6, {NodeId(3)});
  ahead.segments[seg.id] = seg;
  ahead.flushed_through[{kDs.Key(), kPart}] = seg.max_pos;
  global_.pending = ahead;
  peers_.peers[3].segments[1] = Events(0, 6);
  EXPECT_EQ(Seen(), Once(0, 10));
  EXPECT_EQ(global_.waits, 1);
}

// The owner does not answer; meanwhile another node claimed the partition (a takeover). The new
// owner is asked under its epoch, and nothing is missing.
TEST_F(CoordinatorTest, AsksTheNewOwnerAfterATakeover) {
  Own(kPart, 2, 1);
  peers_.peers[2].buffers[kPart] = {Epoch(1), Events(0, 4)};
  peers_.peers[2].http_error = 503;
  peers_.peers[3].buffers[kPart] = {Epoch(2), Events(0, 4)};
  // The takeover lands while the call to node 2 fails.
  peers_.peers[2].on_buffers = [this] { Own(kPart, 3, 2); };
  std::vector<std::string> warnings;
  EXPECT_EQ(Seen(&warnings), Once(0, 4));
  EXPECT_TRUE(warnings.empty()) << warnings[0];
  auto asked = peers_.CallsTo(3, PeerCallKind::kBuffers);
  ASSERT_EQ(asked.size(), 1u);
  ASSERT_EQ(asked[0].q.partitions.size(), 1u);
  EXPECT_EQ(asked[0].q.partitions[0].second, Epoch(2));
}

// The owner is down and nobody took over: the partition's buffered events are named missing.
TEST_F(CoordinatorTest, AnOwnerThatIsDownIsNamedInAWarning) {
  Own(kPart, 2, 1);
  peers_.peers[2].buffers[kPart] = {Epoch(1), Events(0, 4)};
  SetAlive({1, 3});
  std::vector<std::string> warnings;
  EXPECT_TRUE(Seen(&warnings).empty());
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("partitions 0: owner node 2 is down"), std::string::npos)
      << warnings[0];
  EXPECT_TRUE(peers_.CallsTo(2, PeerCallKind::kBuffers).empty());
}

// A holder whose connection fails: its segments are read from the other copy in a second
// attempt, counted once, and the failed node is sent a cancel.
TEST_F(CoordinatorTest, ADeadHoldersSegmentsAreReadFromAnotherCopy) {
  // Live holders [2, 3]; segment 1 goes to index 1 % 2 = node 3 first.
  Register(Segment(1, 0, 6, {NodeId(2), NodeId(3)}));
  peers_.peers[2].segments[1] = Events(0, 6);
  peers_.peers[3].segments[1] = Events(0, 6);
  peers_.peers[3].unreachable = true;
  std::vector<std::string> warnings;
  EXPECT_EQ(Seen(&warnings), Once(0, 6));
  EXPECT_TRUE(warnings.empty()) << warnings[0];
  EXPECT_EQ(peers_.CallsTo(3, PeerCallKind::kPartial).size(), 1u);
  EXPECT_EQ(peers_.CallsTo(2, PeerCallKind::kPartial).size(), 1u);
  ASSERT_EQ(peers_.cancels.size(), 1u);
  EXPECT_EQ(peers_.cancels[0].second, "node-3");
}

// A holder that answers with an error (not a limit): the same, without declaring it stalled.
TEST_F(CoordinatorTest, AHolderThatFailsIsReadFromAnotherCopy) {
  Register(Segment(1, 0, 6, {NodeId(2), NodeId(3)}));
  peers_.peers[2].segments[1] = Events(0, 6);
  peers_.peers[3].segments[1] = Events(0, 6);
  peers_.peers[3].http_error = 500;
  EXPECT_EQ(Seen(), Once(0, 6));
  EXPECT_TRUE(peers_.cancels.empty());
}

// A holder whose Global no longer lists its copy answers without it and names it not held: the
// coordinator reads the other copy instead of answering without those events.
TEST_F(CoordinatorTest, SegmentsAHolderNoLongerHasAreReadElsewhere) {
  Register(Segment(1, 0, 6, {NodeId(2), NodeId(3)}));
  peers_.peers[2].segments[1] = Events(0, 6);
  peers_.peers[3].segments.clear();  // node 3 answers, but holds nothing any more
  std::vector<std::string> warnings;
  EXPECT_EQ(Seen(&warnings), Once(0, 6));
  EXPECT_TRUE(warnings.empty()) << warnings[0];
  EXPECT_EQ(peers_.CallsTo(3, PeerCallKind::kPartial).size(), 1u);
  EXPECT_EQ(peers_.CallsTo(2, PeerCallKind::kPartial).size(), 1u);
}

// No live holder and no bucket: the segment is named in a warning; the rest is answered.
TEST_F(CoordinatorTest, SegmentsWithNoLiveHolderAreNamed) {
  Own(kPart, 1, 1);
  local_.buffers[kPart] = {Epoch(1), Events(0, 10)};
  Register(Segment(7, 0, 6, {NodeId(3)}));
  SetAlive({1, 2});
  std::vector<std::string> warnings;
  EXPECT_EQ(Seen(&warnings), Once(6, 10));
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("1 segments (ids 7; 6 events"), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[0].find("could not be searched"), std::string::npos) << warnings[0];
}

// A peer that reached the query's time limit fails the query with that limit, and every peer
// asked is told to cancel.
TEST_F(CoordinatorTest, APeersLimitFailsTheQueryAndCancelsThePeers) {
  Own(kPart, 2, 1);
  peers_.peers[2].buffers[kPart] = {Epoch(1), Events(0, 4)};
  peers_.peers[2].http_error = 408;
  auto r = Run("count()");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(r.status().message().find("node 2"), std::string::npos) << r.status().ToString();
  ASSERT_EQ(peers_.cancels.size(), 1u);
  EXPECT_EQ(peers_.cancels[0].second, "node-2");
}

// Aggregates merge the partial states of every node: local buffers, a peer's buffers and a
// holder's segments.
TEST_F(CoordinatorTest, AggregatesMergeEveryNodesPart) {
  global_.Mutate([](GlobalState& st) {
    st.partitions[0] = PartitionState{NodeId(1), Epoch(1), Offset(0), Offset(0)};
    st.partitions[1] = PartitionState{NodeId(2), Epoch(4), Offset(0), Offset(0)};
  });
  local_.buffers[0] = {Epoch(1), Events(100, 103)};
  auto other = Events(200, 205);
  peers_.peers[2].buffers[1] = {Epoch(4), other};
  Register(Segment(1, 0, 6, {NodeId(3)}));
  peers_.peers[3].segments[1] = Events(0, 6);
  auto r = Run("count()");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->result.rows.size(), 1u);
  ASSERT_EQ(r->result.rows[0].size(), 1u);
  EXPECT_EQ(std::get<int64_t>(r->result.rows[0][0].second), 3 + 5 + 6);
}

// Events [from, to) with fields: client c<i % 5>; every 7th a login (kind=login, user u<i>), the
// others kind=access.
std::vector<PositionedEvent> TaggedEvents(int from, int to) {
  std::vector<PositionedEvent> out = Events(from, to);
  for (PositionedEvent& e : out) {
    const int i = static_cast<int>(e.pos.offset.value);
    e.event.fields.push_back({"client", "c" + std::to_string(i % 5)});
    if (i % 7 == 0) {
      e.event.fields.push_back({"kind", "login"});
      e.event.fields.push_back({"user", "u" + std::to_string(i)});
    } else {
      e.event.fields.push_back({"kind", "access"});
    }
  }
  return out;
}

// defineTable()/join() over data spread on three nodes (local buffers, a peer's buffers, a
// holder's segment): the subquery runs first over all of it, and its table goes with the query to
// every node, so the answer is the one of a loop over all the events.
TEST_F(CoordinatorTest, TablesOfSubqueriesAreBoundOnEveryNode) {
  global_.Mutate([](GlobalState& st) {
    st.partitions[0] = PartitionState{NodeId(1), Epoch(1), Offset(0), Offset(0)};
    st.partitions[1] = PartitionState{NodeId(2), Epoch(4), Offset(0), Offset(0)};
  });
  std::vector<PositionedEvent> all;
  auto add = [&all](std::vector<PositionedEvent> v) {
    all.insert(all.end(), v.begin(), v.end());
    return v;
  };
  local_.buffers[0] = {Epoch(1), add(TaggedEvents(100, 111))};
  peers_.peers[2].buffers[1] = {Epoch(4), add(TaggedEvents(201, 213))};
  Register(Segment(1, 0, 13, {NodeId(3)}));
  peers_.peers[3].segments[1] = add(TaggedEvents(0, 13));

  // By a loop: logins per client, and the access events of clients with a login.
  std::map<std::string, int64_t> logins;
  for (const PositionedEvent& e : all) {
    if (*e.event.Find("kind") == "login") ++logins[*e.event.Find("client")];
  }
  ASSERT_GE(logins.size(), 2u);
  ASSERT_LT(logins.size(), 5u);  // some clients have none: join drops their events
  int64_t joined = 0, weighted = 0;
  for (const PositionedEvent& e : all) {
    auto it = logins.find(*e.event.Find("client"));
    if (*e.event.Find("kind") != "access" || it == logins.end()) continue;
    ++joined;
    weighted += it->second;
  }

  auto r = Run("kind=access | join({kind=login | groupBy(client)}, field=client) | count()");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->result.rows.size(), 1u);
  EXPECT_EQ(std::get<int64_t>(r->result.rows[0][0].second), joined);

  peers_.calls.clear();
  r =
      Run("defineTable(name=t, query={kind=login | groupBy(client, function=count(as=n))}, "
          "include=[client, n]) | kind=access | match(table=t, field=client) | sum(n)");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->result.rows.size(), 1u);
  EXPECT_EQ(std::get<int64_t>(r->result.rows[0][0].second), weighted);
  // The subquery ran on the holder too, and the main query reached it with the table.
  auto calls = peers_.CallsTo(3, PeerCallKind::kPartial);
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_TRUE(calls[0].q.tables.empty());
  EXPECT_EQ(calls[0].q.query_string, "kind=login | groupBy(client, function=count(as=n))");
  ASSERT_EQ(calls[1].q.tables.count("t"), 1u);
  EXPECT_EQ(calls[1].q.tables.at("t").columns, (std::vector<std::string>{"client", "n"}));
  EXPECT_EQ(calls[1].q.tables.at("t").rows.size(), logins.size());

  // A subquery over its bound: a clear error.
  r = Run("kind=access | join({kind=access}, field=client, limit=2) | count()");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace sediment::coordinator
