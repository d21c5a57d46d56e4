#include "coordinator/query_jobs.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "common/clock.h"
#include "common/random_hex.h"

namespace sediment::coordinator {

namespace {

constexpr auto kLiveInterval = std::chrono::milliseconds(1000);
constexpr auto kReapInterval = std::chrono::milliseconds(250);

Status TooMany(const std::string& message) {
  return Status(StatusCode::kResourceExhausted, message)
      .WithSubcode(StatusSubcode::kConcurrencyLimit);
}

Status NoSuchJob(const std::string& repo, const std::string& id) {
  return Status::NotFound("no query job '" + id + "' in repository '" + repo + "'");
}

}  // namespace

std::chrono::milliseconds NextLiveRun(std::chrono::microseconds took) {
  return std::max<std::chrono::milliseconds>(
      kLiveInterval, std::chrono::duration_cast<std::chrono::milliseconds>(took * 2));
}

bool SleepUnless(std::chrono::milliseconds d, const std::function<bool()>& stop) {
  using Steady = std::chrono::steady_clock;
  const auto until = SteadyNow() + d;
  while (SteadyNow() < until) {
    if (stop()) return false;
    std::this_thread::sleep_for(
        std::min<Steady::duration>(std::chrono::milliseconds(50), until - SteadyNow()));
  }
  return !stop();
}

struct QueryJobs::Job {
  std::string id, repo, query_string;
  std::shared_ptr<const query::CompiledQuery> compiled;
  query::TimeRange range;  // static jobs
  int64_t window_ms = 0;   // live jobs
  bool live = false;
  bool is_aggregate = false;
  int64_t created_us = 0;
  std::shared_ptr<Slot> slot;  // released by the job's thread when its work stopped
  std::shared_ptr<std::atomic<bool>> cancel;
  query::QueryProgress scan;
  std::atomic<uint64_t> peers_total{0}, peers_done{0};
  std::thread thread;
  std::mutex mu;  // guards the fields below
  int64_t last_poll_us = 0;
  bool done = false, cancelled = false, finished = false;
  std::optional<Status> error;
  QueryControl error_control;
  std::shared_ptr<const JobResult> result;
};

std::shared_ptr<QueryJobs> QueryJobs::Start(QueryJobsOptions options) {
  std::shared_ptr<QueryJobs> jobs(new QueryJobs(std::move(options)));
  jobs->reaper_ = std::thread([self = jobs] { self->ReapLoop(); });
  return jobs;
}

Result<std::shared_ptr<QueryJobs::Slot>> QueryJobs::TryAcquire() {
  auto cancel = std::make_shared<std::atomic<bool>>(false);
  std::lock_guard lock(mu_);
  if (stop_) return Status(StatusCode::kCancelled, "the node is stopping");
  if (static_cast<int>(active_.size()) >= opt_.max_jobs) {
    return TooMany("too many query jobs and live queries running (at most " +
                   std::to_string(opt_.max_jobs) + ", --max-query-jobs); try later");
  }
  active_.insert(cancel);
  return std::make_shared<Slot>(shared_from_this(), std::move(cancel));
}

void QueryJobs::Release(const std::shared_ptr<std::atomic<bool>>& cancel) {
  std::lock_guard lock(mu_);
  active_.erase(cancel);
  cv_.notify_all();
}

size_t QueryJobs::ActiveSlots() {
  std::lock_guard lock(mu_);
  return active_.size();
}

void QueryJobs::CancelAll() {
  std::lock_guard lock(mu_);
  stop_ = true;
  for (const auto& c : active_) c->store(true);
  cv_.notify_all();
}

void QueryJobs::Stop() {
  CancelAll();
  if (reaper_.joinable() && reaper_.get_id() != std::this_thread::get_id()) reaper_.join();
  std::vector<std::shared_ptr<Job>> all;
  {
    std::lock_guard lock(mu_);
    for (auto& [id, job] : jobs_) all.push_back(job);
    for (auto& job : retired_) all.push_back(job);
    jobs_.clear();
    retired_.clear();
  }
  for (auto& job : all) {
    if (job->thread.joinable()) job->thread.join();
  }
}

Result<std::string> QueryJobs::Create(const std::string& repo, const std::string& query_string,
                                      std::shared_ptr<const query::CompiledQuery> compiled,
                                      const query::TimeRange& range, bool live) {
  auto slot = TryAcquire();
  if (!slot.ok()) {
    if (slot.status().code() == StatusCode::kCancelled) return slot.status();
    return TooMany("too many query jobs and live queries running (at most " +
                   std::to_string(opt_.max_jobs) +
                   ", --max-query-jobs); delete finished jobs or try later");
  }
  auto job = std::make_shared<Job>();
  job->id = RandomHex(16);
  job->repo = repo;
  job->query_string = query_string;
  job->is_aggregate = query::IsAggregate(*compiled);
  job->compiled = std::move(compiled);
  job->range = range;
  job->window_ms = range.end_ms - range.start_ms;
  job->live = live;
  job->created_us = opt_.clock->MonotonicMicros();
  job->last_poll_us = job->created_us;
  job->cancel = (*slot)->flag();
  job->slot = std::move(*slot);
  std::lock_guard lock(mu_);
  if (jobs_.size() >= kMaxStoredJobs) {
    return TooMany("too many query jobs kept (" + std::to_string(kMaxStoredJobs) +
                   "): delete the ones you polled");
  }
  jobs_[job->id] = job;
  job->thread = std::thread([self = shared_from_this(), job] { self->Run(job); });
  return job->id;
}

Result<JobView> QueryJobs::Poll(const std::string& repo, const std::string& id) {
  std::shared_ptr<Job> job;
  {
    std::lock_guard lock(mu_);
    auto it = jobs_.find(id);
    if (it != jobs_.end() && it->second->repo == repo) job = it->second;
  }
  if (!job) return NoSuchJob(repo, id);
  JobView v;
  v.live = job->live;
  v.is_aggregate = job->is_aggregate;
  std::shared_ptr<const JobResult> result;
  {
    std::lock_guard lock(job->mu);
    job->last_poll_us = opt_.clock->MonotonicMicros();
    result = job->result;
    v.done = job->done;
    v.cancelled = job->cancelled;
    v.error = job->error;
    v.error_control = job->error_control;
  }
  const uint64_t total = job->scan.tasks_total.load() + job->peers_total.load();
  v.total_work = std::max<uint64_t>(total, 1);
  if (result != nullptr && (v.done || job->live)) {
    v.result = std::move(result);
    v.work_done = v.total_work;
    v.processed_bytes = v.result->stats.bytes_scanned;
    v.processed_events = v.result->stats.events_scanned;
    v.time_ms = v.result->stats.elapsed_ms;
    v.range = v.result->range;
  } else {
    v.processed_bytes = job->scan.bytes_scanned.load();
    v.processed_events = job->scan.events_scanned.load();
    v.time_ms = (opt_.clock->MonotonicMicros() - job->created_us) / 1000;
    v.work_done = std::min(total, job->scan.tasks_done.load() + job->peers_done.load());
    const int64_t now = opt_.clock->NowMillis();
    v.range = job->live ? query::TimeRange{now - job->window_ms, now} : job->range;
  }
  return v;
}

Status QueryJobs::Delete(const std::string& repo, const std::string& id) {
  std::lock_guard lock(mu_);
  auto it = jobs_.find(id);
  if (it == jobs_.end() || it->second->repo != repo) return NoSuchJob(repo, id);
  std::shared_ptr<Job> job = it->second;
  jobs_.erase(it);
  job->cancel->store(true);
  retired_.push_back(std::move(job));
  cv_.notify_all();
  return Status::OK();
}

bool QueryJobs::RunOnce(Job& job) {
  query::TimeRange range = job.range;
  if (job.live) {
    const int64_t now = opt_.clock->NowMillis();
    range = query::TimeRange{now - job.window_ms, now};
    job.scan.tasks_total = 0;
    job.scan.tasks_done = 0;
    job.scan.events_scanned = 0;
    job.scan.bytes_scanned = 0;
    job.scan.events_matched = 0;
    job.peers_total = 0;
    job.peers_done = 0;
  }
  QueryControl control = opt_.limits();
  control.cancel = job.cancel.get();
  control.progress = &job.scan;
  control.peers_total = &job.peers_total;
  control.peers_done = &job.peers_done;
  auto run = opt_.run(job.repo, job.query_string, *job.compiled, range, control);
  std::lock_guard lock(job.mu);
  if (job.cancel->load()) {
    job.cancelled = true;
    return false;
  }
  if (!run.ok()) {
    spdlog::warn("query job {} on {}: {}", job.id, job.repo, run.status().ToString());
    job.error = run.status();
    job.error_control = control;
    return true;
  }
  auto result = std::make_shared<JobResult>();
  result->rows = std::move(run->result.rows);
  result->warnings = std::move(run->warnings);
  result->stats = run->result.stats;
  result->range = range;
  job.result = std::move(result);
  job.error.reset();
  // A live job is done once its window up to now has been searched (LogScale's "historical
  // part"; clients such as humiolib poll until done); later runs keep its result current.
  if (job.live) job.done = true;
  return true;
}

void QueryJobs::Run(const std::shared_ptr<Job>& job) {
  if (!job->live) {
    (void)RunOnce(*job);
  } else {
    while (!job->cancel->load()) {
      const int64_t t0 = opt_.clock->MonotonicMicros();
      if (!RunOnce(*job)) break;
      const std::chrono::microseconds took(opt_.clock->MonotonicMicros() - t0);
      if (!SleepUnless(NextLiveRun(took), [&] { return job->cancel->load(); })) break;
    }
  }
  std::shared_ptr<Slot> slot;
  {
    std::lock_guard lock(job->mu);
    if (job->cancel->load()) job->cancelled = true;
    job->done = job->done || !job->live || job->cancelled;
    job->finished = true;
    slot = std::move(job->slot);
  }
  slot.reset();  // the place is free once the work stopped (outside job->mu: Release locks mu_)
}

std::vector<std::shared_ptr<QueryJobs::Job>> QueryJobs::ExpireAndCollect(int64_t now_us) {
  const int64_t expiry_us = opt_.expiry_ms * 1000;
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    Job& job = *it->second;
    bool expired;
    {
      std::lock_guard g(job.mu);
      expired = expiry_us > 0 && now_us - job.last_poll_us > expiry_us;
    }
    if (!expired) {
      ++it;
      continue;
    }
    spdlog::info("query job {} on {} was not polled for {} ms: cancelled", job.id, job.repo,
                 opt_.expiry_ms);
    job.cancel->store(true);
    retired_.push_back(it->second);
    it = jobs_.erase(it);
  }
  // Threads that ended are joined (a finished thread joins at once).
  std::vector<std::shared_ptr<Job>> to_join;
  for (auto it = retired_.begin(); it != retired_.end();) {
    bool finished;
    {
      std::lock_guard g((*it)->mu);
      finished = (*it)->finished;
    }
    if (finished) {
      to_join.push_back(*it);
      it = retired_.erase(it);
    } else {
      ++it;
    }
  }
  for (auto& [id, job] : jobs_) {
    std::lock_guard g(job->mu);
    if (job->finished && job->thread.joinable()) to_join.push_back(job);
  }
  return to_join;
}

void QueryJobs::ReapLoop() {
  std::unique_lock lock(mu_);
  while (!stop_) {
    cv_.wait_for(lock, kReapInterval);
    if (stop_) break;
    std::vector<std::shared_ptr<Job>> to_join = ExpireAndCollect(opt_.clock->MonotonicMicros());
    lock.unlock();
    for (auto& job : to_join) {
      if (job->thread.joinable()) job->thread.join();
    }
    lock.lock();
  }
}

std::vector<const query::Row*> LiveEventFilter::Fresh(const std::vector<query::Row>& rows,
                                                      int64_t window_start, int64_t now_ms) {
  for (auto it = seen_.begin(); it != seen_.end();) {
    it = it->second < window_start ? seen_.erase(it) : std::next(it);
  }
  std::vector<const query::Row*> out;
  for (const auto& row : rows) {
    std::string key;
    int64_t ts = now_ms;
    for (const auto& [name, value] : row) {
      if (name == "@id" && std::holds_alternative<std::string>(value)) {
        key = std::get<std::string>(value);
      } else if (name == "@timestamp" && std::holds_alternative<int64_t>(value)) {
        ts = std::get<int64_t>(value);
      }
    }
    if (key.empty()) key = "row:" + key_of_row_(row);
    if (seen_.emplace(std::move(key), ts).second) out.push_back(&row);
  }
  return out;
}

}  // namespace sediment::coordinator
