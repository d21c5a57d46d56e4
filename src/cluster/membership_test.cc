#include "cluster/membership.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <thread>

#include "common/checksum.h"
#include "log/local_log.h"

namespace sediment {
namespace {

using namespace std::chrono_literals;

// Delegates to a real log; tests switch failures on and off.
class FlakyLog final : public CommitLog {
 public:
  explicit FlakyLog(CommitLog* base) : base_(base) {}
  std::atomic<bool> fail_appends{false};
  std::atomic<bool> hold_reads{false};  // Read answers empty, as if nothing arrived

  int32_t partition_count() const override { return base_->partition_count(); }
  std::future<Result<Offset>> Append(PartitionId p, std::string record) override {
    if (fail_appends) {
      std::promise<Result<Offset>> done;
      done.set_value(Result<Offset>(Status::IOError("injected append failure")));
      return done.get_future();
    }
    return base_->Append(p, std::move(record));
  }
  Result<std::vector<LogRecord>> Read(PartitionId p, Offset from, size_t max_bytes,
                                      std::chrono::milliseconds max_wait) override {
    if (hold_reads) {
      std::this_thread::sleep_for(std::min<std::chrono::milliseconds>(max_wait, 10ms));
      return std::vector<LogRecord>{};
    }
    return base_->Read(p, from, max_bytes, max_wait);
  }
  void WakeReaders(PartitionId p) override { base_->WakeReaders(p); }
  Status DeleteBefore(PartitionId p, Offset offset) override {
    return base_->DeleteBefore(p, offset);
  }
  Result<Offset> StartOffset(PartitionId p) override { return base_->StartOffset(p); }
  Result<Offset> EndOffset(PartitionId p) override { return base_->EndOffset(p); }
  std::string Health() override { return base_->Health(); }

 private:
  CommitLog* const base_;
};

class MembershipTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (std::filesystem::temp_directory_path() /
            ("membership_test_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name()))
               .string();
    std::filesystem::remove_all(dir_);
    LocalLogOptions opts;
    opts.partitions = 1;
    opts.file_roll_bytes = 256;  // small files, so DeleteBefore can drop something
    auto log = OpenLocalLog(Env::Default(), dir_, opts);
    ASSERT_TRUE(log.ok()) << log.status().ToString();
    log_ = std::move(log).value();
  }
  void TearDown() override {
    log_.reset();
    std::filesystem::remove_all(dir_);
  }

  // A heartbeat builder for node `id`; it reads the clock for started_ms only once.
  static std::function<Heartbeat()> Self(int64_t id, Clock* clock) {
    const int64_t started = clock->NowMillis();
    return [id, started] {
      Heartbeat hb;
      hb.node = NodeId(id);
      hb.address = "127.0.0.1:" + std::to_string(9000 + id);
      hb.started_ms = started;
      hb.version = "test";
      hb.global_applied = Offset(id * 10);
      hb.partitions.push_back(
          {PartitionId(static_cast<int32_t>(id)), Epoch(2), Offset(5), Offset(4), 3});
      hb.sent_ms = -1;  // Membership stamps it
      return hb;
    };
  }

  static MembershipOptions Fast(std::chrono::milliseconds timeout = 300ms) {
    MembershipOptions o;
    o.interval = 20ms;
    o.liveness_timeout = timeout;
    return o;
  }

  void AppendRaw(std::string data) {
    auto r = log_->Append(PartitionId(0), std::move(data)).get();
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
  void AppendHeartbeat(int64_t id, int64_t sent_ms, bool with_address = true) {
    Heartbeat hb;
    hb.node = NodeId(id);
    if (with_address) hb.address = "peer-" + std::to_string(id);
    hb.sent_ms = sent_ms;
    AppendRaw(EncodeHeartbeat(hb));
  }
  Offset End() {
    auto e = log_->EndOffset(PartitionId(0));
    EXPECT_TRUE(e.ok());
    return e.ok() ? *e : Offset(0);
  }
  // Waits until `m` has processed every record below the current end of the log.
  void WaitCaughtUp(const Membership& m) {
    const Offset end = End();
    EXPECT_TRUE(WaitFor([&] { return m.stats().next_offset >= end; }));
  }

  static bool WaitFor(const std::function<bool()>& pred, std::chrono::milliseconds limit = 10s) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < deadline) {
      if (pred()) return true;
      std::this_thread::sleep_for(5ms);
    }
    return pred();
  }

  std::string dir_;
  std::unique_ptr<CommitLog> log_;
};

std::vector<int64_t> Ids(const std::vector<NodeView>& v) {
  std::vector<int64_t> out;
  for (const auto& n : v) out.push_back(n.node.value);
  return out;
}

TEST_F(MembershipTest, TwoNodesSeeEachOtherThenStoppedOneDies) {
  Clock* clock = Clock::Real();
  Membership a(log_.get(), clock, Fast(), Self(2, clock));
  Membership b(log_.get(), clock, Fast(), Self(1, clock));
  ASSERT_TRUE(a.Start().ok());
  ASSERT_TRUE(b.Start().ok());
  EXPECT_EQ(a.self_id(), NodeId(2));
  EXPECT_EQ(b.self_id(), NodeId(1));

  ASSERT_TRUE(WaitFor([&] { return a.IsAlive(NodeId(1)) && b.IsAlive(NodeId(2)); }));
  EXPECT_EQ(Ids(a.Nodes()), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(Ids(b.AliveNodes()), (std::vector<int64_t>{1, 2}));
  auto seen = a.Find(NodeId(1));
  ASSERT_TRUE(seen.has_value());
  EXPECT_EQ(seen->address, "127.0.0.1:9001");
  EXPECT_EQ(seen->last.address, seen->address);
  EXPECT_EQ(seen->last.global_applied, Offset(10));
  ASSERT_EQ(seen->last.partitions.size(), 1u);
  EXPECT_EQ(seen->last.partitions[0].partition, PartitionId(1));
  EXPECT_EQ(seen->last.partitions[0].buffered_events, 3u);
  EXPECT_GT(seen->last_heartbeat_ms, 0);  // stamped by Membership, not the builder's -1
  EXPECT_EQ(seen->last_heartbeat_ms, seen->last.sent_ms);
  EXPECT_FALSE(a.Find(NodeId(3)).has_value());
  EXPECT_FALSE(a.IsAlive(NodeId(3)));

  b.Stop();
  b.Stop();  // idempotent
  ASSERT_TRUE(WaitFor([&] { return !a.IsAlive(NodeId(1)); }));
  auto dead = a.Find(NodeId(1));
  ASSERT_TRUE(dead.has_value());
  EXPECT_FALSE(dead->alive);
  EXPECT_GE(dead->age_ms, 300);
  EXPECT_TRUE(a.IsAlive(NodeId(2)));
  EXPECT_EQ(Ids(a.AliveNodes()), (std::vector<int64_t>{2}));
  EXPECT_EQ(Ids(a.Nodes()), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(a.stats().malformed_records, 0u);
  EXPECT_GE(a.stats().heartbeats_sent, 2u);
}

TEST_F(MembershipTest, LivenessFollowsTheClockExactly) {
  ManualClock clock;
  Membership a(log_.get(), &clock, Fast(), Self(1, &clock));
  Membership b(log_.get(), &clock, Fast(), Self(2, &clock));
  ASSERT_TRUE(a.Start().ok());
  ASSERT_TRUE(b.Start().ok());
  ASSERT_TRUE(WaitFor([&] { return a.IsAlive(NodeId(2)) && b.IsAlive(NodeId(1)); }));
  EXPECT_EQ(a.Find(NodeId(2))->last_heartbeat_ms, clock.NowMillis());

  // While b runs, its next heartbeat brings it back after a jump past the timeout.
  clock.AdvanceMillis(1000);
  EXPECT_FALSE(a.IsAlive(NodeId(2)));
  EXPECT_TRUE(a.IsAlive(NodeId(1)));  // self is always alive while running
  ASSERT_TRUE(WaitFor([&] { return a.IsAlive(NodeId(2)); }));

  b.Stop();
  WaitCaughtUp(a);
  ASSERT_TRUE(a.IsAlive(NodeId(2)));  // the clock has not moved since the last one was read
  const int64_t age = a.Find(NodeId(2))->age_ms;
  clock.AdvanceMillis(299 - age);
  EXPECT_TRUE(a.IsAlive(NodeId(2)));
  EXPECT_EQ(a.Find(NodeId(2))->age_ms, 299);
  clock.AdvanceMillis(1);
  EXPECT_FALSE(a.IsAlive(NodeId(2)));
  EXPECT_EQ(a.Find(NodeId(2))->age_ms, 300);
  EXPECT_TRUE(a.IsAlive(NodeId(1)));

  // A stopped node no longer vouches for itself.
  a.Stop();
  clock.AdvanceMillis(300);
  EXPECT_FALSE(a.IsAlive(NodeId(1)));
  EXPECT_TRUE(a.AliveNodes().empty());
}

TEST_F(MembershipTest, StartupCatchupCountsBySentTime) {
  ManualClock clock;
  const int64_t now = clock.NowMillis();
  AppendHeartbeat(50, now);  // outside the catch-up window below
  AppendHeartbeat(77, now - 60'000);
  AppendHeartbeat(78, now - 1'000);
  AppendHeartbeat(79, now + 10'000);  // sender's clock ahead: counts as just sent
  MembershipOptions opts = Fast(5000ms);
  opts.catchup_records = 3;
  Membership a(log_.get(), &clock, opts, Self(1, &clock));
  ASSERT_TRUE(a.Start().ok());
  // Start reads the window before returning.
  EXPECT_EQ(a.stats().catchup_end, Offset(4));
  EXPECT_GE(a.stats().next_offset, Offset(4));
  EXPECT_EQ(Ids(a.Nodes()), (std::vector<int64_t>{1, 77, 78, 79}));

  auto old = a.Find(NodeId(77));
  ASSERT_TRUE(old.has_value());
  EXPECT_FALSE(old->alive);
  EXPECT_EQ(old->age_ms, 60'000);
  EXPECT_EQ(old->last_heartbeat_ms, now - 60'000);
  EXPECT_EQ(old->address, "peer-77");
  auto recent = a.Find(NodeId(78));
  ASSERT_TRUE(recent.has_value());
  EXPECT_TRUE(recent->alive);
  EXPECT_EQ(recent->age_ms, 1'000);
  EXPECT_EQ(a.Find(NodeId(79))->age_ms, 0);
  EXPECT_EQ(Ids(a.AliveNodes()), (std::vector<int64_t>{1, 78, 79}));

  clock.AdvanceMillis(3'999);
  EXPECT_TRUE(a.IsAlive(NodeId(78)));
  clock.AdvanceMillis(1);
  EXPECT_FALSE(a.IsAlive(NodeId(78)));
  EXPECT_TRUE(a.IsAlive(NodeId(79)));

  // A heartbeat read live counts from its receive time, whatever its sent_ms says.
  AppendHeartbeat(77, now - 60'000);
  ASSERT_TRUE(WaitFor([&] { return a.IsAlive(NodeId(77)); }));
}

// A node heartbeats before it is ready, without an address: alive, but not serving anything yet.
TEST_F(MembershipTest, AliveWithoutAnAddressIsNotServing) {
  ManualClock clock;
  const int64_t now = clock.NowMillis();
  AppendHeartbeat(5, now, /*with_address=*/false);
  AppendHeartbeat(6, now);
  AppendHeartbeat(7, now - 60'000);
  Membership a(log_.get(), &clock, Fast(5000ms), Self(1, &clock));
  ASSERT_TRUE(a.Start().ok());
  EXPECT_TRUE(a.IsAlive(NodeId(5)));
  EXPECT_FALSE(a.IsServing(NodeId(5)));
  EXPECT_FALSE(a.Find(NodeId(5))->serving());
  EXPECT_TRUE(a.IsServing(NodeId(6)));
  EXPECT_FALSE(a.IsServing(NodeId(7)));   // has an address, but dead
  EXPECT_FALSE(a.IsServing(NodeId(99)));  // unknown
  AppendHeartbeat(5, now);                // ready now
  ASSERT_TRUE(WaitFor([&] { return a.IsServing(NodeId(5)); }));
}

TEST_F(MembershipTest, MalformedRecordsAreCountedAndSkipped) {
  ManualClock clock;
  std::string valid = EncodeHeartbeat([] {
    Heartbeat hb;
    hb.node = NodeId(90);
    return hb;
  }());
  std::string flipped = valid;
  flipped[6] ^= 0x10;
  AppendRaw("garbage");  // read during the catch-up
  Membership a(log_.get(), &clock, Fast(), Self(1, &clock));
  ASSERT_TRUE(a.Start().ok());
  EXPECT_EQ(a.stats().malformed_records, 1u);
  AppendRaw(valid.substr(0, valid.size() - 1));
  AppendRaw(flipped);
  AppendRaw("");
  AppendRaw(valid);
  ASSERT_TRUE(WaitFor([&] { return a.IsAlive(NodeId(90)); }));
  WaitCaughtUp(a);
  EXPECT_EQ(a.stats().malformed_records, 4u);
  EXPECT_GE(a.stats().records_read, 6u);
  EXPECT_EQ(Ids(a.Nodes()), (std::vector<int64_t>{1, 90}));
}

TEST_F(MembershipTest, AppendFailuresAreNotFatal) {
  FlakyLog flaky(log_.get());
  ManualClock clock;
  Membership a(&flaky, &clock, Fast(), Self(1, &clock));
  flaky.fail_appends = true;
  Status s = a.Start();
  EXPECT_EQ(s.code(), StatusCode::kIOError) << s.ToString();
  EXPECT_TRUE(a.Nodes().empty());
  EXPECT_FALSE(a.IsAlive(NodeId(1)));

  flaky.fail_appends = false;
  ASSERT_TRUE(a.Start().ok());  // a failed Start may be retried
  EXPECT_EQ(a.Start().code(), StatusCode::kAborted);
  flaky.fail_appends = true;
  ASSERT_TRUE(WaitFor([&] { return a.stats().send_failures >= 3; }));
  clock.AdvanceMillis(10'000);
  EXPECT_TRUE(a.IsAlive(NodeId(1)));  // alive while running, even if the log refuses
  const uint64_t sent = a.stats().heartbeats_sent;
  flaky.fail_appends = false;
  ASSERT_TRUE(WaitFor([&] { return a.stats().heartbeats_sent > sent; }));
  a.Stop();
}

TEST_F(MembershipTest, RejectsInvalidSelf) {
  Membership a(log_.get(), Clock::Real(), Fast(), [] { return Heartbeat{}; });
  EXPECT_EQ(a.Start().code(), StatusCode::kInvalidArgument);
  a.Stop();                     // harmless without a successful Start
  EXPECT_EQ(End(), Offset(0));  // nothing was appended
}

TEST_F(MembershipTest, ForeignHeartbeatWithOwnIdDoesNotChangeSelf) {
  ManualClock clock;
  Membership a(log_.get(), &clock, Fast(), Self(1, &clock));
  ASSERT_TRUE(a.Start().ok());
  Heartbeat imposter;
  imposter.node = NodeId(1);
  imposter.address = "imposter:1";
  imposter.started_ms = 5;
  AppendRaw(EncodeHeartbeat(imposter));
  WaitCaughtUp(a);
  EXPECT_EQ(a.Find(NodeId(1))->address, "127.0.0.1:9001");
  EXPECT_EQ(Ids(a.Nodes()), (std::vector<int64_t>{1}));
}

TEST_F(MembershipTest, PublisherTruncatesTheChatterLog) {
  MembershipOptions opts = Fast();
  opts.interval = 2ms;
  opts.retain_records = 5;
  Membership a(log_.get(), Clock::Real(), opts, Self(1, Clock::Real()));
  ASSERT_TRUE(a.Start().ok());
  ASSERT_TRUE(WaitFor([&] {
    auto start = log_->StartOffset(PartitionId(0));
    return start.ok() && start->value > 0;
  }));
  a.Stop();
  auto start = log_->StartOffset(PartitionId(0));
  ASSERT_TRUE(start.ok());
  // Truncation only ever removes records at least retain_records behind the end at that time.
  EXPECT_LE(start->value, End().value - 5);
}

TEST_F(MembershipTest, ListenerSkipsAheadWhenTruncatedBelowIt) {
  FlakyLog flaky(log_.get());
  ManualClock clock;
  Membership a(&flaky, &clock, Fast(), Self(1, &clock));
  ASSERT_TRUE(a.Start().ok());
  WaitCaughtUp(a);
  flaky.hold_reads = true;
  const Offset behind = a.stats().next_offset;
  for (int i = 0; i < 20; ++i) AppendHeartbeat(60, clock.NowMillis());
  ASSERT_TRUE(log_->DeleteBefore(PartitionId(0), End()).ok());
  ASSERT_GT(log_->StartOffset(PartitionId(0))->value, behind.value);
  AppendHeartbeat(61, clock.NowMillis());
  flaky.hold_reads = false;
  ASSERT_TRUE(WaitFor([&] { return a.IsAlive(NodeId(61)); }));
  EXPECT_EQ(a.stats().malformed_records, 0u);
}

TEST_F(MembershipTest, ConcurrentReadersAndStop) {
  Clock* clock = Clock::Real();
  Membership a(log_.get(), clock, Fast(), Self(1, clock));
  Membership b(log_.get(), clock, Fast(), Self(2, clock));
  ASSERT_TRUE(a.Start().ok());
  ASSERT_TRUE(b.Start().ok());
  std::atomic<bool> done{false};
  std::vector<std::thread> readers;
  for (int t = 0; t < 3; ++t) {
    readers.emplace_back([&] {
      while (!done) {
        for (const NodeView& v : a.Nodes()) EXPECT_GT(v.node.value, 0);
        (void)a.AliveNodes();
        (void)a.IsAlive(NodeId(2));
        (void)a.stats();
      }
    });
  }
  ASSERT_TRUE(WaitFor([&] { return a.IsAlive(NodeId(2)); }));
  std::thread stopper([&] { a.Stop(); });
  a.Stop();
  stopper.join();
  done = true;
  for (auto& t : readers) t.join();
  b.Stop();
}

}  // namespace
}  // namespace sediment
