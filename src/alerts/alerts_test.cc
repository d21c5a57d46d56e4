#include "alerts/alerts.h"

#include <gtest/gtest.h>

#include <map>

#include "common/testing/temp_dir.h"
#include "log/local_log.h"

namespace sediment::alerts {
namespace {

using std::chrono::milliseconds;

AlertDef Def(int64_t every = 5000, int64_t window = 5000) {
  AlertDef d;
  d.query = "status=500 | count()";
  d.every_ms = every;
  d.window_ms = window;
  d.threshold = AlertThreshold{"_count", ">", 3};
  AlertAction hook;
  hook.url = "http://127.0.0.1:9/hook";
  hook.body_template = R"({"id": "{firing_id}", "n": {result_count}})";
  d.actions = {hook};
  return d;
}

query::Row CountRow(int64_t n) { return {{"_count", n}}; }

TEST(AlertRules, WindowsAreAlignedToTheInterval) {
  AlertState a;
  a.def = Def(5000, 60000);
  a.done_through_ms = 1'700'000'000'000;
  EXPECT_EQ(NextWindow(a), (Window{1'700'000'005'000 - 60000, 1'700'000'005'000}));
  EXPECT_EQ(WindowEndingAt(a.def, 20'000), (Window{-40'000, 20'000}));
  a.def.delay_ms = 1500;
  const Window w = NextWindow(a);
  EXPECT_FALSE(WindowDue(a.def, w, w.end_ms + 1499));
  EXPECT_TRUE(WindowDue(a.def, w, w.end_ms + 1500));
}

TEST(AlertRules, FiringIdsAndPartitionsAreDeterministic) {
  EXPECT_EQ(AlertFiringId(7, 15'000), "7-15000");
  EXPECT_EQ(AlertFiringId(7, 15'000), AlertFiringId(7, 15'000));
  EXPECT_NE(AlertFiringId(7, 15'000), AlertFiringId(8, 15'000));
  EXPECT_NE(AlertFiringId(7, 15'000), AlertFiringId(7, 20'000));
  std::set<int32_t> seen;
  for (int i = 0; i < 200; ++i) {
    const PartitionId p = AlertPartition("web", "alert-" + std::to_string(i), 6);
    EXPECT_EQ(p, AlertPartition("web", "alert-" + std::to_string(i), 6));
    ASSERT_GE(p.value, 0);
    ASSERT_LT(p.value, 6);
    seen.insert(p.value);
  }
  EXPECT_EQ(seen.size(), 6u);  // spread over every partition
  // FNV-1a: the same partition on every build and machine (a changed hash would move alerts).
  EXPECT_EQ(AlertPartition("web", "many-500", 1000), AlertPartition("web", "many-500", 1000));
  EXPECT_EQ(AlertPartition("a", "b", 1), PartitionId(0));
}

TEST(AlertRules, Condition) {
  AlertDef d = Def();
  EXPECT_FALSE(*ConditionHolds(d, {}));
  EXPECT_FALSE(*ConditionHolds(d, {CountRow(3)}));
  EXPECT_TRUE(*ConditionHolds(d, {CountRow(4)}));
  EXPECT_TRUE(*ConditionHolds(d, {{{"_count", std::string("4")}}}));  // a numeric string
  EXPECT_FALSE(*ConditionHolds(d, {{{"_count", std::string("many")}}}));
  EXPECT_FALSE(*ConditionHolds(d, {{{"other", int64_t{9}}}}));
  EXPECT_TRUE(*ConditionHolds(d, {CountRow(1), {{"_count", 3.5}}}));  // any row
  d.threshold->op = "<=";
  EXPECT_TRUE(*ConditionHolds(d, {CountRow(3)}));
  d.threshold->op = "~";
  EXPECT_EQ(ConditionHolds(d, {CountRow(3)}).status().code(), StatusCode::kInvalidArgument);
  d.threshold.reset();  // no threshold: any row fires
  EXPECT_FALSE(*ConditionHolds(d, {}));
  EXPECT_TRUE(*ConditionHolds(d, {{{"x", std::string("y")}}}));
}

TEST(AlertRules, TemplatePlaceholders) {
  FiringContext ctx{"web", "a\"b", "3-10000", "x=\"1\"", {5000, 10000}, {CountRow(4)}};
  EXPECT_EQ(RenderTemplate("{alert_name}|{repo}|{firing_id}|{window_start}|{window_end}|"
                           "{result_count}|{results}|{query}|{unknown}|{",
                           ctx),
            R"(a\"b|web|3-10000|5000|10000|1|[{"_count":4}]|x=\"1\"|{unknown}|{)");
  // The default body is JSON naming every field.
  const std::string body = RenderTemplate(kDefaultBodyTemplate, ctx);
  EXPECT_NE(body.find(R"("firing_id": "3-10000")"), std::string::npos) << body;
  EXPECT_NE(body.find(R"("results": [{"_count":4}])"), std::string::npos) << body;
}

TEST(AlertRules, BackoffDoublesUpToItsBound) {
  RetryPolicy p;
  std::vector<int64_t> got;
  for (uint32_t n = 1; n <= 7; ++n) got.push_back(BackoffAfter(p, n).count());
  EXPECT_EQ(got, (std::vector<int64_t>{500, 1000, 2000, 4000, 8000, 8000, 8000}));
}

// Fails the first `fail_first` webhook requests; records every request.
class FakeSender : public ActionSender {
 public:
  struct Sent {
    std::string url, body, firing_id;
  };
  Status PostWebhook(const std::string& url,
                     const std::vector<std::pair<std::string, std::string>>& headers,
                     const std::string& body) override {
    Sent s{url, body, ""};
    for (const auto& [k, v] : headers) {
      if (k == "X-Sediment-Firing-Id") s.firing_id = v;
    }
    sent.push_back(s);
    if (on_send) on_send();
    if (fail_first > 0) {
      --fail_first;
      return Status::Unavailable("HTTP 503");
    }
    return Status::OK();
  }
  void LogLine(const std::string& line) override { lines.push_back(line); }
  int fail_first = 0;
  std::function<void()> on_send;
  std::vector<Sent> sent;
  std::vector<std::string> lines;
};

TEST(AlertDelivery, RetriesWithBackoffOnAFakeClock) {
  ManualClock clock(0);
  FakeSender sender;
  sender.fail_first = 2;
  std::vector<int64_t> waits;
  auto sleep = [&](milliseconds d) {
    waits.push_back(d.count());
    clock.AdvanceMillis(d.count());
    return true;
  };
  AlertDef def = Def();
  AlertAction line;
  line.kind = AlertActionKind::kLogLine;
  def.actions.push_back(line);
  FiringContext ctx{"web", "a", "1-5000", def.query, {0, 5000}, {CountRow(4)}};
  Delivery d = DeliverActions(def, ctx, &sender, RetryPolicy{}, sleep);
  EXPECT_TRUE(d.status.ok());
  EXPECT_EQ(d.attempts, 3u);
  EXPECT_EQ(waits, (std::vector<int64_t>{500, 1000}));
  EXPECT_EQ(clock.NowMillis(), 1500);
  ASSERT_EQ(sender.sent.size(), 3u);
  for (const auto& s : sender.sent) {
    EXPECT_EQ(s.firing_id, "1-5000");
    EXPECT_EQ(s.body, R"({"id": "1-5000", "n": 1})");
  }
  ASSERT_EQ(sender.lines.size(), 1u);
  EXPECT_NE(sender.lines[0].find("firing 1-5000"), std::string::npos);

  // Exhausted: max_attempts requests, the error kept.
  sender.fail_first = 100;
  waits.clear();
  d = DeliverActions(def, ctx, &sender, RetryPolicy{}, sleep);
  EXPECT_EQ(d.status.code(), StatusCode::kUnavailable);
  EXPECT_EQ(d.attempts, 5u);
  EXPECT_FALSE(d.interrupted);
  EXPECT_EQ(waits, (std::vector<int64_t>{500, 1000, 2000, 4000}));

  // Stopping between attempts: interrupted after the first.
  d = DeliverActions(def, ctx, &sender, RetryPolicy{}, [](milliseconds) { return false; });
  EXPECT_TRUE(d.interrupted);
  EXPECT_EQ(d.attempts, 1u);
}

// A real Global on an embedded log, a manual clock, a fake query and a fake sender.
class RunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    LocalLogOptions lo;
    lo.partitions = 1;
    auto log = OpenLocalLog(Env::Default(), dir_.Sub("log"), lo);
    ASSERT_TRUE(log.ok()) << log.status().ToString();
    log_ = std::move(*log);
    auto g = Global::Open(Env::Default(), log_.get(), dir_.Sub("global"));
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    global_ = std::move(*g);
    ASSERT_TRUE(global_->Submit(CreateRepo{"web"}).ok());
    Claim(NodeId(1), Epoch(0));
  }

  void Claim(NodeId node, Epoch expected) {
    ASSERT_TRUE(global_->Submit(ClaimPartition{PartitionId(0), node, expected}).ok());
  }
  Epoch CurrentEpoch() {
    Epoch e;
    global_->Read([&](const GlobalState& st) { e = st.partitions.at(0).epoch; });
    return e;
  }
  AlertState Alert() {
    AlertState a;
    global_->Read([&](const GlobalState& st) { a = st.repos.at("web").alerts.at("a"); });
    return a;
  }

  std::unique_ptr<AlertRunner> Runner(NodeId self) {
    RunnerOptions o;
    o.self = self;
    o.partition_count = 1;
    o.owned_epoch = [this, self](PartitionId) -> std::optional<Epoch> {
      if (!digesting_.count(self.value)) return std::nullopt;
      return CurrentEpoch();
    };
    o.query = [this](const std::string& repo, const std::string& q, int64_t start,
                     int64_t end) -> Result<QueryOutcome> {
      queried_.push_back({start, end});
      QueryOutcome out;
      auto it = counts_.find(end);
      out.rows.push_back(CountRow(it == counts_.end() ? 0 : it->second));
      if (incomplete_) out.warnings.push_back("partition 0 unreadable");
      return out;
    };
    o.sender = &sender_;
    o.incomplete_grace = milliseconds(10000);
    return std::make_unique<AlertRunner>(&clock_, global_.get(), o);
  }
  std::function<bool(milliseconds)> Sleep() {
    return [this](milliseconds d) {
      clock_.AdvanceMillis(d.count());
      return true;
    };
  }

  TempDir dir_;
  std::unique_ptr<CommitLog> log_;
  std::unique_ptr<Global> global_;
  ManualClock clock_{1'700'000'001'000};
  FakeSender sender_;
  std::set<int64_t> digesting_{1, 2};
  std::map<int64_t, int64_t> counts_;  // window end -> count() of 500s
  bool incomplete_ = false;
  std::vector<Window> queried_;
};

TEST_F(RunnerTest, FiresOncePerWindowAboveTheThresholdAndRecordsEveryWindow) {
  ASSERT_TRUE(global_->Submit(PutAlert{"web", "a", Def(), clock_.NowMillis()}).ok());
  const int64_t t0 = 1'700'000'000'000;  // floor(now / 5000) * 5000
  EXPECT_EQ(Alert().done_through_ms, t0);
  counts_ = {{t0 + 5000, 4}, {t0 + 10000, 3}, {t0 + 15000, 9}};
  auto runner = Runner(NodeId(1));
  EXPECT_EQ(runner->RunPass(Sleep()).windows_done, 0u);  // the first window has not ended
  clock_.AdvanceMillis(4000);                            // t0 + 5000: due
  PassStats s = runner->RunPass(Sleep());
  EXPECT_EQ(s.windows_done, 1u);
  EXPECT_EQ(s.fired, 1u);
  ASSERT_EQ(queried_.size(), 1u);
  EXPECT_EQ(queried_[0], (Window{t0, t0 + 5000}));
  // Two windows later one pass catches up, in order; only the one with more than 3 fires.
  clock_.AdvanceMillis(10000);
  s = runner->RunPass(Sleep());
  EXPECT_EQ(s.windows_done, 2u);
  EXPECT_EQ(s.fired, 1u);
  EXPECT_EQ(runner->RunPass(Sleep()).windows_done, 0u);  // nothing runs twice
  std::vector<std::string> ids;
  for (const auto& sent : sender_.sent) ids.push_back(sent.firing_id);
  const uint64_t id = Alert().id;
  EXPECT_EQ(
      ids, (std::vector<std::string>{AlertFiringId(id, t0 + 5000), AlertFiringId(id, t0 + 15000)}));
  const AlertState a = Alert();
  EXPECT_EQ(a.done_through_ms, t0 + 15000);
  ASSERT_EQ(a.firings.size(), 2u);
  EXPECT_EQ(a.firings[1].window_end_ms, t0 + 15000);
  EXPECT_EQ(a.firings[1].result_count, 1u);
  EXPECT_EQ(a.firings[1].node, NodeId(1));
}

TEST_F(RunnerTest, OnlyTheOwnerRunsAndAFailoverResendsTheSameFiringId) {
  ASSERT_TRUE(global_->Submit(PutAlert{"web", "a", Def(), clock_.NowMillis()}).ok());
  const int64_t t0 = 1'700'000'000'000;
  counts_ = {{t0 + 5000, 5}, {t0 + 10000, 6}};
  auto node1 = Runner(NodeId(1));
  auto node2 = Runner(NodeId(2));
  clock_.AdvanceMillis(4000);
  EXPECT_EQ(node2->RunPass(Sleep()).windows_done, 0u);  // not the owner
  EXPECT_TRUE(sender_.sent.empty());
  // Node 1 delivers, and loses its claim before it records the window (the group moved the
  // partition to node 2, which claimed it): its record is fenced.
  sender_.on_send = [this] {
    sender_.on_send = nullptr;
    Claim(NodeId(2), Epoch(1));
  };
  PassStats s = node1->RunPass(Sleep());
  EXPECT_EQ(s.windows_done, 0u);
  EXPECT_EQ(s.fenced, 1u);
  EXPECT_EQ(Alert().done_through_ms, t0);
  // The new owner runs the unfinished window again: the same firing id, then the next window.
  clock_.AdvanceMillis(5000);
  s = node2->RunPass(Sleep());
  EXPECT_EQ(s.windows_done, 2u);
  EXPECT_EQ(node1->RunPass(Sleep()).windows_done, 0u);  // the old owner stays out
  std::vector<std::string> ids;
  for (const auto& sent : sender_.sent) ids.push_back(sent.firing_id);
  const uint64_t id = Alert().id;
  EXPECT_EQ(ids,
            (std::vector<std::string>{AlertFiringId(id, t0 + 5000), AlertFiringId(id, t0 + 5000),
                                      AlertFiringId(id, t0 + 10000)}));
  EXPECT_EQ(Alert().done_through_ms, t0 + 10000);
  EXPECT_EQ(Alert().firings.back().node, NodeId(2));
}

TEST_F(RunnerTest, NodeNotDigestingThePartitionDoesNotRun) {
  ASSERT_TRUE(global_->Submit(PutAlert{"web", "a", Def(), clock_.NowMillis()}).ok());
  digesting_.erase(1);  // Global still names node 1, but its digest no longer holds the claim
  clock_.AdvanceMillis(4000);
  auto node1 = Runner(NodeId(1));
  EXPECT_EQ(node1->RunPass(Sleep()).windows_done, 0u);
  EXPECT_TRUE(queried_.empty());
}

TEST_F(RunnerTest, FailedDeliveryIsRecordedAsFailedAndNotRetriedForever) {
  ASSERT_TRUE(global_->Submit(PutAlert{"web", "a", Def(), clock_.NowMillis()}).ok());
  const int64_t t0 = 1'700'000'000'000;
  counts_ = {{t0 + 5000, 5}};
  sender_.fail_first = 100;
  clock_.AdvanceMillis(4000);
  PassStats s = Runner(NodeId(1))->RunPass(Sleep());
  // The retries' backoff (7.5 s on the manual clock) made the next, quiet, window due as well.
  EXPECT_EQ(s.windows_done, 2u);
  EXPECT_EQ(s.fired, 1u);
  EXPECT_EQ(sender_.sent.size(), 5u);
  const AlertState a = Alert();
  ASSERT_EQ(a.firings.size(), 1u);
  EXPECT_EQ(a.firings[0].outcome, AlertOutcome::kFailed);
  EXPECT_EQ(a.firings[0].attempts, 5u);
  EXPECT_NE(a.firings[0].error.find("503"), std::string::npos);
}

TEST_F(RunnerTest, IncompleteDataWaitsForItsGrace) {
  ASSERT_TRUE(global_->Submit(PutAlert{"web", "a", Def(), clock_.NowMillis()}).ok());
  incomplete_ = true;
  clock_.AdvanceMillis(4000);
  auto runner = Runner(NodeId(1));
  EXPECT_EQ(runner->RunPass(Sleep()).deferred, 1u);
  clock_.AdvanceMillis(9000);
  EXPECT_EQ(runner->RunPass(Sleep()).deferred, 1u);
  clock_.AdvanceMillis(1000);  // 10 s after the window was due: it runs with the warning
  EXPECT_GE(runner->RunPass(Sleep()).windows_done, 1u);
}

TEST_F(RunnerTest, DisabledAndDeletedAlertsDoNotRun) {
  AlertDef d = Def();
  d.enabled = false;
  ASSERT_TRUE(global_->Submit(PutAlert{"web", "a", d, clock_.NowMillis()}).ok());
  clock_.AdvanceMillis(10000);
  auto runner = Runner(NodeId(1));
  EXPECT_EQ(runner->RunPass(Sleep()).windows_done, 0u);
  ASSERT_TRUE(global_->Submit(DeleteAlert{"web", "a"}).ok());
  EXPECT_EQ(runner->RunPass(Sleep()).windows_done, 0u);
  EXPECT_TRUE(queried_.empty());
}

}  // namespace
}  // namespace sediment::alerts
