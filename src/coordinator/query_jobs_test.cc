#include "coordinator/query_jobs.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace sediment::coordinator {
namespace {

using namespace std::chrono_literals;

// A `run` that answers one row per call (its call number), or blocks until released or
// cancelled when `hold` is set, or fails with `fail` when set.
struct FakeRun {
  std::mutex mu;
  std::condition_variable cv;
  bool hold = false;
  std::optional<Status> fail;
  std::atomic<int> calls{0};
  std::vector<query::TimeRange> ranges;

  Result<CoordinatedResult> operator()(const std::string&, const std::string&,
                                       const query::CompiledQuery&, const query::TimeRange& range,
                                       const QueryControl& control) {
    const int n = ++calls;
    std::unique_lock lock(mu);
    ranges.push_back(range);
    // The cancel flag is an atomic nobody notifies about: look at it every few milliseconds.
    while (!cv.wait_for(lock, 5ms, [&] { return !hold || control.cancel->load(); })) {
    }
    if (control.cancel->load()) return Status(StatusCode::kCancelled, "cancelled");
    if (fail) return *fail;
    CoordinatedResult r;
    r.result.rows.push_back(query::Row{{"n", int64_t{n}}});
    r.warnings.push_back("w" + std::to_string(n));
    return r;
  }
  void Release() {
    std::lock_guard lock(mu);
    hold = false;
    cv.notify_all();
  }
};

struct Fixture {
  std::shared_ptr<FakeRun> run = std::make_shared<FakeRun>();
  ManualClock clock;
  std::shared_ptr<QueryJobs> jobs;
  std::shared_ptr<const query::CompiledQuery> compiled;

  explicit Fixture(int max_jobs = 2, int64_t expiry_ms = 0) {
    QueryJobsOptions o;
    o.run = [run = run](const std::string& repo, const std::string& q,
                        const query::CompiledQuery& c, const query::TimeRange& range,
                        const QueryControl& control) { return (*run)(repo, q, c, range, control); };
    o.limits = [] { return QueryControl{}; };
    o.clock = &clock;
    o.max_jobs = max_jobs;
    o.expiry_ms = expiry_ms;
    jobs = QueryJobs::Start(std::move(o));
    compiled = *query::Compile("x");
  }
  ~Fixture() {
    run->Release();
    jobs->Stop();
  }
  // Polls until `pred` holds (at most 5 s).
  JobView WaitFor(const std::string& id, const std::function<bool(const JobView&)>& pred,
                  const std::string& repo = "r") {
    for (int i = 0; i < 500; ++i) {
      auto v = jobs->Poll(repo, id);
      if (v.ok() && pred(*v)) return *v;
      std::this_thread::sleep_for(10ms);
    }
    ADD_FAILURE() << "condition not reached for job " << id;
    return JobView{};
  }
};

TEST(QueryJobsTest, AJobAnswersItsResultOnceDone) {
  Fixture f;
  auto id = f.jobs->Create("r", "x", f.compiled, query::TimeRange{10, 20}, false);
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  JobView v = f.WaitFor(*id, [](const JobView& v) { return v.done; });
  ASSERT_NE(v.result, nullptr);
  ASSERT_EQ(v.result->rows.size(), 1u);
  EXPECT_EQ(v.result->warnings, std::vector<std::string>{"w1"});
  EXPECT_EQ(v.range.start_ms, 10);
  EXPECT_EQ(v.range.end_ms, 20);
  EXPECT_FALSE(v.cancelled);
  EXPECT_FALSE(v.error.has_value());
}

TEST(QueryJobsTest, AJobOfAnotherRepositoryIsNotFound) {
  Fixture f;
  auto id = f.jobs->Create("r", "x", f.compiled, query::TimeRange{0, 1}, false);
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(f.jobs->Poll("other", *id).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(f.jobs->Delete("other", *id).code(), StatusCode::kNotFound);
  EXPECT_EQ(f.jobs->Poll("r", "nope").status().code(), StatusCode::kNotFound);
}

TEST(QueryJobsTest, ARunningJobShowsNoResultAndDeleteCancelsIt) {
  Fixture f;
  f.run->hold = true;
  auto id = f.jobs->Create("r", "x", f.compiled, query::TimeRange{0, 1}, false);
  ASSERT_TRUE(id.ok());
  auto v = f.jobs->Poll("r", *id);
  ASSERT_TRUE(v.ok());
  EXPECT_FALSE(v->done);
  EXPECT_EQ(v->result, nullptr);
  ASSERT_TRUE(f.jobs->Delete("r", *id).ok());
  EXPECT_EQ(f.jobs->Poll("r", *id).status().code(), StatusCode::kNotFound);
  // The held run saw the cancel and its place is free again: max_jobs (2) new places exist.
  for (int i = 0; i < 200; ++i) {
    auto a = f.jobs->TryAcquire();
    auto b = f.jobs->TryAcquire();
    if (a.ok() && b.ok()) return;
    std::this_thread::sleep_for(10ms);
  }
  FAIL() << "the deleted job's place was never released";
}

TEST(QueryJobsTest, PlacesAreBoundedAndTheRefusalIsAConcurrencyLimit) {
  Fixture f(/*max_jobs=*/1);
  f.run->hold = true;
  auto id = f.jobs->Create("r", "x", f.compiled, query::TimeRange{0, 1}, false);
  ASSERT_TRUE(id.ok());
  auto second = f.jobs->Create("r", "x", f.compiled, query::TimeRange{0, 1}, false);
  EXPECT_EQ(second.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(second.status().subcode(), StatusSubcode::kConcurrencyLimit);
  auto slot = f.jobs->TryAcquire();
  EXPECT_EQ(slot.status().subcode(), StatusSubcode::kConcurrencyLimit);
  f.run->Release();
  f.WaitFor(*id, [](const JobView& v) { return v.done; });
  // Once the job's work stopped its place is free.
  for (int i = 0; i < 200 && !f.jobs->TryAcquire().ok(); ++i) std::this_thread::sleep_for(10ms);
  EXPECT_TRUE(f.jobs->TryAcquire().ok());
}

TEST(QueryJobsTest, AFailedRunIsTheJobsError) {
  Fixture f;
  f.run->fail = Status(StatusCode::kDeadlineExceeded, "too slow");
  auto id = f.jobs->Create("r", "x", f.compiled, query::TimeRange{0, 1}, false);
  ASSERT_TRUE(id.ok());
  JobView v = f.WaitFor(*id, [](const JobView& v) { return v.done; });
  ASSERT_TRUE(v.error.has_value());
  EXPECT_EQ(v.error->code(), StatusCode::kDeadlineExceeded);
}

TEST(QueryJobsTest, ALiveJobIsDoneAfterItsFirstRunAndSearchesASlidingWindow) {
  Fixture f;
  const int64_t now = f.clock.NowMillis();
  auto id = f.jobs->Create("r", "x", f.compiled, query::TimeRange{now - 60000, now}, true);
  ASSERT_TRUE(id.ok());
  JobView v = f.WaitFor(*id, [](const JobView& v) { return v.done; });
  EXPECT_TRUE(v.live);
  ASSERT_NE(v.result, nullptr);
  f.clock.AdvanceMillis(5000);
  // The next run (about a second later) searches the window ending at the new now.
  v = f.WaitFor(*id, [](const JobView& v) { return v.result && v.result->warnings[0] != "w1"; });
  EXPECT_EQ(v.result->range.end_ms, now + 5000);
  EXPECT_EQ(v.result->range.end_ms - v.result->range.start_ms, 60000);
}

TEST(QueryJobsTest, AJobNotPolledExpires) {
  Fixture f(/*max_jobs=*/2, /*expiry_ms=*/1000);
  auto id = f.jobs->Create("r", "x", f.compiled, query::TimeRange{0, 1}, false);
  ASSERT_TRUE(id.ok());
  f.WaitFor(*id, [](const JobView& v) { return v.done; });  // each poll renews it
  f.clock.AdvanceMillis(1500);
  // A poll would renew the job: look only after the reaper (every 250 ms) had two chances.
  std::this_thread::sleep_for(600ms);
  EXPECT_EQ(f.jobs->Poll("r", *id).status().code(), StatusCode::kNotFound);
}

TEST(QueryJobsTest, CancelAllRefusesNewJobsAndStopsRunningOnes) {
  Fixture f;
  f.run->hold = true;
  auto id = f.jobs->Create("r", "x", f.compiled, query::TimeRange{0, 1}, false);
  ASSERT_TRUE(id.ok());
  f.jobs->CancelAll();
  JobView v = f.WaitFor(*id, [](const JobView& v) { return v.done; });
  EXPECT_TRUE(v.cancelled);
  EXPECT_EQ(f.jobs->Create("r", "x", f.compiled, query::TimeRange{0, 1}, false).status().code(),
            StatusCode::kCancelled);
}

TEST(QueryJobsTest, TheLivePauseIsASecondOrTwiceTheRun) {
  EXPECT_EQ(NextLiveRun(std::chrono::microseconds(100)), 1000ms);
  EXPECT_EQ(NextLiveRun(std::chrono::microseconds(2'000'000)), 4000ms);
}

TEST(QueryJobsTest, TheLiveFilterSendsEachEventOnceWhileItIsInTheWindow) {
  LiveEventFilter filter([](const query::Row& r) { return std::to_string(r.size()); });
  std::vector<query::Row> rows = {
      {{"@id", std::string("a")}, {"@timestamp", int64_t{100}}},
      {{"@id", std::string("b")}, {"@timestamp", int64_t{200}}},
  };
  EXPECT_EQ(filter.Fresh(rows, 0, 300).size(), 2u);
  EXPECT_EQ(filter.Fresh(rows, 0, 300).size(), 0u);
  // "a" left the window and is forgotten: seen again, it is new.
  auto again = filter.Fresh(rows, 150, 300);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0], &rows[0]);
}

}  // namespace
}  // namespace sediment::coordinator
