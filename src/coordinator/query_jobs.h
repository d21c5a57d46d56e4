// Query jobs and live queries on top of Coordinator::Run (LogScale's query-job API and `isLive`).
//
// Contract:
// - A job runs on a thread of its own. Create answers its id at once; Poll answers what the job
//   has (done, its result once done, its progress while it runs); Delete cancels and forgets it.
//   A job not polled for `expiry_ms` is cancelled and forgotten too (checked every 250 ms).
// - A live job runs again and again over a sliding window [now - (end - start), now): every
//   second, or twice as long as the previous run took when that is longer (NextLiveRun). It is
//   done once its first run finished (as LogScale's live jobs are once their historical part is
//   searched); each poll answers the latest run's result.
// - At most `max_jobs` jobs and live streams hold a place (a Slot) at once; beyond that Create and
//   TryAcquire fail with ResourceExhausted / kConcurrencyLimit. At most kMaxStoredJobs jobs are
//   kept (polled or not).
// - Thread-safety: every method may be called from any thread. CancelAll refuses new jobs and
//   sets every running job's cancel flag; Stop does that and joins every thread the registry
//   started. Jobs share the registry (shared_ptr): it lives until the last job thread ended.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "coordinator/coordinator.h"
#include "query/query.h"

namespace sediment::coordinator {

struct QueryJobsOptions {
  // Runs one query across the cluster (the node's Coordinator::Run with its repository check).
  std::function<Result<CoordinatedResult>(const std::string& repo, const std::string& query_string,
                                          const query::CompiledQuery& compiled,
                                          const query::TimeRange& range,
                                          const QueryControl& control)>
      run;
  std::function<QueryControl()> limits;  // the configured limits, from now
  Clock* clock = Clock::Real();          // wall time for live windows, monotonic for ages
  int max_jobs = 16;                     // jobs and live streams at once
  int64_t expiry_ms = 90000;             // a job not polled this long is forgotten; 0 = never
};

// The pause before the next run of a live query whose previous run took `took`.
std::chrono::milliseconds NextLiveRun(std::chrono::microseconds took);

// Sleeps `d` in steps of at most 50 ms until `stop()` holds. False when it stopped early.
bool SleepUnless(std::chrono::milliseconds d, const std::function<bool()>& stop);

// What one run of a job produced.
struct JobResult {
  std::vector<query::Row> rows;
  std::vector<std::string> warnings;
  query::QueryStats stats;
  query::TimeRange range;
};

// A job as one Poll saw it.
struct JobView {
  bool done = false, cancelled = false, live = false, is_aggregate = false;
  std::optional<Status> error;  // of the last run
  QueryControl error_control;   // its limits, for the message
  // The result to show: the finished run's (a static job once done, a live job's latest run);
  // null while there is none.
  std::shared_ptr<const JobResult> result;
  // Progress while there is no result: work units (segment tasks and peers) and bytes/events
  // scanned so far, the time since Create and the window searched.
  uint64_t total_work = 1, work_done = 0, processed_bytes = 0, processed_events = 0;
  int64_t time_ms = 0;
  query::TimeRange range;
};

class QueryJobs : public std::enable_shared_from_this<QueryJobs> {
 public:
  static constexpr size_t kMaxStoredJobs = 1000;

  // One of the `max_jobs` places, held by a running job or live stream; released when destroyed.
  // Its cancel flag is set by CancelAll.
  class Slot {
   public:
    Slot(std::shared_ptr<QueryJobs> owner, std::shared_ptr<std::atomic<bool>> cancel)
        : owner_(std::move(owner)), cancel_(std::move(cancel)) {}
    ~Slot() { owner_->Release(cancel_); }
    Slot(const Slot&) = delete;
    Slot& operator=(const Slot&) = delete;
    const std::shared_ptr<std::atomic<bool>>& flag() const { return cancel_; }
    const std::atomic<bool>* cancel() const { return cancel_.get(); }

   private:
    std::shared_ptr<QueryJobs> owner_;
    std::shared_ptr<std::atomic<bool>> cancel_;
  };

  // A registry with its expiry thread running.
  static std::shared_ptr<QueryJobs> Start(QueryJobsOptions options);
  QueryJobs(const QueryJobs&) = delete;
  QueryJobs& operator=(const QueryJobs&) = delete;

  // A place for a live stream; ResourceExhausted (kConcurrencyLimit) when every place is taken,
  // Cancelled once CancelAll ran.
  Result<std::shared_ptr<Slot>> TryAcquire();

  // Starts a job; its id. `range` is the static window; for a live job its length is the sliding
  // window's. ResourceExhausted (kConcurrencyLimit) when no place or no room is left.
  Result<std::string> Create(const std::string& repo, const std::string& query_string,
                             std::shared_ptr<const query::CompiledQuery> compiled,
                             const query::TimeRange& range, bool live);
  // NotFound unless `id` is a job of `repo`. Counts as a poll (for the expiry).
  Result<JobView> Poll(const std::string& repo, const std::string& id);
  // Cancels and forgets the job; NotFound unless `id` is a job of `repo`.
  Status Delete(const std::string& repo, const std::string& id);

  // Places held now by running jobs and live streams (at most `max_jobs`).
  size_t ActiveSlots();

  // Cancels every running job and live stream and refuses new ones.
  void CancelAll();
  // CancelAll, then waits for every thread the registry started.
  void Stop();

 private:
  struct Job;
  explicit QueryJobs(QueryJobsOptions options) : opt_(std::move(options)) {}
  void Release(const std::shared_ptr<std::atomic<bool>>& cancel);
  void Run(const std::shared_ptr<Job>& job);
  // One run of the job's query; false when the job was cancelled meanwhile.
  bool RunOnce(Job& job);
  void ReapLoop();
  // Forgets expired jobs and collects the jobs whose thread ended (mu_ held).
  std::vector<std::shared_ptr<Job>> ExpireAndCollect(int64_t now_us);

  const QueryJobsOptions opt_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;                                    // guarded by mu_
  std::set<std::shared_ptr<std::atomic<bool>>> active_;  // guarded by mu_
  std::map<std::string, std::shared_ptr<Job>> jobs_;     // guarded by mu_
  std::vector<std::shared_ptr<Job>> retired_;            // guarded by mu_; forgotten, may run
  std::thread reaper_;
};

// The events of successive runs of a live filter query that were not sent before. Events are
// known by @id (a row without one by `key_of_row`, e.g. its whole text) and remembered while
// their @timestamp is inside the window. Not thread-safe.
class LiveEventFilter {
 public:
  explicit LiveEventFilter(std::function<std::string(const query::Row&)> key_of_row)
      : key_of_row_(std::move(key_of_row)) {}
  // The rows of `rows` not seen before (in their order); forgets what fell out of the window.
  std::vector<const query::Row*> Fresh(const std::vector<query::Row>& rows, int64_t window_start,
                                       int64_t now_ms);

 private:
  std::function<std::string(const query::Row&)> key_of_row_;
  std::unordered_map<std::string, int64_t> seen_;  // key -> @timestamp
};

}  // namespace sediment::coordinator
