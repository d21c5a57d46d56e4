// Query jobs and live queries (LogScale's query-job API and `isLive`), on top of the coordinator
// (Server::Impl::RunQuery, query_handler.cc).
//
// - A query job runs on a thread of its own; POST answers its id at once, GET polls it (`done`,
//   `events` once done, `metaData` with progress while it runs), DELETE cancels and forgets it.
//   A job not polled for --query-job-expiry-ms is cancelled and forgotten too.
// - Live queries (a job or the streaming endpoint with isLive) run again and again over a sliding
//   window [now - (end - start), now): every second, or twice as long as the previous run took
//   when that is longer. The streaming endpoint sends, for a filter query, every event of the
//   window whose @id it has not sent yet (the ids sent are kept while they are inside the window),
//   and for an aggregate query the whole current result whenever it changed. A live job is done
//   once its first run finished (as LogScale's live jobs are once their historical part is
//   searched); each poll answers the latest run's result.
// - At most --max-query-jobs jobs and live streams run at once (429 beyond). Stop cancels them.
#include <simdjson.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <unordered_map>

#include "common/json_writer.h"
#include "server/server_impl.h"

namespace sediment {

namespace {

using SteadyClock = std::chrono::steady_clock;

constexpr auto kLiveInterval = std::chrono::milliseconds(1000);
constexpr size_t kMaxStoredJobs = 1000;
constexpr int64_t kPollAfterRunningMs = 250;

int64_t NowUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             SteadyClock::now().time_since_epoch())
      .count();
}

// Sleeps `d`, in steps, until `stop()` holds. False when it stopped early.
bool SleepUnless(std::chrono::milliseconds d, const std::function<bool()>& stop) {
  const auto until = SteadyClock::now() + d;
  while (SteadyClock::now() < until) {
    if (stop()) return false;
    std::this_thread::sleep_for(
        std::min<SteadyClock::duration>(std::chrono::milliseconds(50), until - SteadyClock::now()));
  }
  return !stop();
}

// The pause before the next run of a live query that took `took`.
std::chrono::milliseconds NextLiveRun(SteadyClock::duration took) {
  return std::max(kLiveInterval, std::chrono::duration_cast<std::chrono::milliseconds>(took * 2));
}

std::string RowJson(const query::Row& row) {
  JsonWriter w;
  WriteRowJson(w, row);
  return w.Take();
}

// The events of successive runs of a live filter query that were not sent before. Events are
// known by @id (a row without one by its whole text) and remembered while their @timestamp is
// inside the window.
class LiveEventFilter {
 public:
  // The rows of `rows` not seen before (in their order); forgets what fell out of the window.
  std::vector<const query::Row*> Fresh(const std::vector<query::Row>& rows, int64_t window_start,
                                       int64_t now_ms) {
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
      if (key.empty()) key = "row:" + RowJson(row);
      if (seen_.emplace(std::move(key), ts).second) out.push_back(&row);
    }
    return out;
  }

 private:
  std::unordered_map<std::string, int64_t> seen_;  // key -> @timestamp
};

}  // namespace

class QueryJobs : public std::enable_shared_from_this<QueryJobs> {
 public:
  // One of the --max-query-jobs places, held by a running job or live stream. Its cancel flag is
  // set by CancelAll.
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

  explicit QueryJobs(QueryJobsEnv env) : env_(std::move(env)) {}

  void Start() {
    reaper_ = std::thread([self = shared_from_this()] { self->ReapLoop(); });
  }

  // Null when every place is taken.
  std::shared_ptr<Slot> TryAcquire() {
    auto cancel = std::make_shared<std::atomic<bool>>(false);
    std::lock_guard lock(mu_);
    if (stop_ || static_cast<int>(active_.size()) >= env_.max_jobs) return nullptr;
    active_.insert(cancel);
    return std::make_shared<Slot>(shared_from_this(), std::move(cancel));
  }

  // Cancels every running job and live stream.
  void CancelAll() {
    std::lock_guard lock(mu_);
    stop_ = true;
    for (const auto& c : active_) c->store(true);
    cv_.notify_all();
  }

  // CancelAll, then waits for every job thread.
  void Stop() {
    CancelAll();
    if (reaper_.joinable()) reaper_.join();
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

  http::Response Create(const std::string& repo, const QueryRequestBody& body);
  http::Response Poll(const std::string& repo, const std::string& id);
  http::Response Delete(const std::string& repo, const std::string& id);

 private:
  struct JobResult {
    std::vector<query::Row> rows;
    std::vector<std::string> warnings;
    query::QueryStats stats;
    query::TimeRange range;
  };
  struct Job {
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
    std::optional<Status> error;  // of the last run
    QueryControl error_control;   // its limits, for the message
    std::shared_ptr<const JobResult> result;
  };

  void Release(const std::shared_ptr<std::atomic<bool>>& cancel) {
    std::lock_guard lock(mu_);
    active_.erase(cancel);
    cv_.notify_all();
  }

  void Run(const std::shared_ptr<Job>& job);
  // One run of the job's query; false when the job was cancelled meanwhile.
  bool RunOnce(Job& job);
  void ReapLoop();

  QueryJobsEnv env_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::set<std::shared_ptr<std::atomic<bool>>> active_;
  std::map<std::string, std::shared_ptr<Job>> jobs_;
  std::vector<std::shared_ptr<Job>> retired_;  // forgotten jobs whose thread may still run
  std::thread reaper_;
};

bool QueryJobs::RunOnce(Job& job) {
  query::TimeRange range = job.range;
  if (job.live) {
    const int64_t now = env_.now_ms();
    range = query::TimeRange{now - job.window_ms, now};
    job.scan.tasks_total = 0;
    job.scan.tasks_done = 0;
    job.scan.events_scanned = 0;
    job.scan.bytes_scanned = 0;
    job.scan.events_matched = 0;
    job.peers_total = 0;
    job.peers_done = 0;
  }
  QueryControl control = env_.limits();
  control.cancel = job.cancel.get();
  control.progress = &job.scan;
  control.peers_total = &job.peers_total;
  control.peers_done = &job.peers_done;
  auto run = env_.run(job.repo, job.query_string, *job.compiled, range, control);
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
      const auto t0 = SteadyClock::now();
      if (!RunOnce(*job)) break;
      if (!SleepUnless(NextLiveRun(SteadyClock::now() - t0), [&] { return job->cancel->load(); })) {
        break;
      }
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

void QueryJobs::ReapLoop() {
  std::unique_lock lock(mu_);
  while (!stop_) {
    cv_.wait_for(lock, std::chrono::milliseconds(250));
    if (stop_) break;
    const int64_t now = NowUs();
    const int64_t expiry_us = env_.expiry_ms * 1000;
    for (auto it = jobs_.begin(); it != jobs_.end();) {
      Job& job = *it->second;
      bool expired;
      {
        std::lock_guard g(job.mu);
        expired = expiry_us > 0 && now - job.last_poll_us > expiry_us;
      }
      if (expired) {
        spdlog::info("query job {} on {} was not polled for {} ms: cancelled", job.id, job.repo,
                     env_.expiry_ms);
        job.cancel->store(true);
        retired_.push_back(it->second);
        it = jobs_.erase(it);
      } else {
        ++it;
      }
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
    lock.unlock();
    for (auto& job : to_join) {
      if (job->thread.joinable()) job->thread.join();
    }
    lock.lock();
  }
}

http::Response QueryJobs::Create(const std::string& repo, const QueryRequestBody& body) {
  auto compiled = query::Compile(body.query_string);
  if (!compiled.ok()) return http::JsonError(400, compiled.status().message());
  const int64_t now = env_.now_ms();
  auto range = query::ParseTimeRange(body.start, body.end, now);
  if (!range.ok()) return http::JsonError(400, range.status().message());
  if (body.live && !body.end.empty() && body.end != "now") {
    return http::JsonError(
        400, "a live query runs up to now: omit 'end' (or give \"now\"), got '" + body.end + "'");
  }
  auto slot = TryAcquire();
  if (!slot) {
    return http::JsonError(429, "too many query jobs and live queries running (at most " +
                                    std::to_string(env_.max_jobs) +
                                    ", --max-query-jobs); delete finished jobs or try later");
  }
  auto job = std::make_shared<Job>();
  job->id = RandomHex(16);
  job->repo = repo;
  job->query_string = body.query_string;
  job->compiled = *compiled;
  job->range = *range;
  job->window_ms = range->end_ms - range->start_ms;
  job->live = body.live;
  job->is_aggregate = query::IsAggregate(**compiled);
  job->created_us = NowUs();
  job->last_poll_us = job->created_us;
  job->cancel = slot->flag();
  job->slot = std::move(slot);
  {
    std::lock_guard lock(mu_);
    if (jobs_.size() >= kMaxStoredJobs) {
      return http::JsonError(429, "too many query jobs kept (" + std::to_string(kMaxStoredJobs) +
                                      "): delete the ones you polled");
    }
    jobs_[job->id] = job;
    job->thread = std::thread([self = shared_from_this(), job] { self->Run(job); });
  }
  JsonWriter w;
  w.BeginObject().Key("id").String(job->id);
  w.Key("hashedQueryOnView")
      .String(std::to_string(std::hash<std::string>{}(repo + '\n' + body.query_string)));
  w.EndObject();
  http::Response r;
  r.body = w.Take();
  return r;
}

http::Response QueryJobs::Poll(const std::string& repo, const std::string& id) {
  std::shared_ptr<Job> job;
  {
    std::lock_guard lock(mu_);
    auto it = jobs_.find(id);
    if (it != jobs_.end() && it->second->repo == repo) job = it->second;
  }
  if (!job) return http::JsonError(404, "no query job '" + id + "' in repository '" + repo + "'");
  std::shared_ptr<const JobResult> result;
  bool done, cancelled;
  std::optional<Status> error;
  QueryControl error_control;
  {
    std::lock_guard lock(job->mu);
    job->last_poll_us = NowUs();
    result = job->result;
    done = job->done;
    cancelled = job->cancelled;
    error = job->error;
    error_control = job->error_control;
  }
  if (error) {
    http::Response r = QueryErrorResponse(*error, error_control);
    r.headers.emplace_back("X-Sediment-Query-Job", id);
    return r;
  }
  const bool have = result != nullptr && (done || job->live);
  JsonWriter w;
  w.BeginObject();
  w.Key("done").Bool(done).Key("cancelled").Bool(cancelled);
  w.Key("events").BeginArray();
  std::vector<std::string> field_order;
  if (have) {
    std::set<std::string> fields;
    for (const auto& row : result->rows) {
      WriteRowJson(w, row);
      for (const auto& [name, value] : row) {
        if (field_order.size() < 1000 && fields.insert(name).second) field_order.push_back(name);
      }
    }
  }
  w.EndArray();
  w.Key("metaData").BeginObject();
  const uint64_t total = job->scan.tasks_total.load() + job->peers_total.load();
  const uint64_t total_work = std::max<uint64_t>(total, 1);
  // The result's figures once there is one, else the progress so far.
  uint64_t event_count = 0, processed_bytes = 0, processed_events = 0, work_done = total_work;
  int64_t time_ms = 0, query_start = 0, query_end = 0;
  if (have) {
    event_count = result->rows.size();
    processed_bytes = result->stats.bytes_scanned;
    processed_events = result->stats.events_scanned;
    time_ms = result->stats.elapsed_ms;
    query_start = result->range.start_ms;
    query_end = result->range.end_ms;
  } else {
    processed_bytes = job->scan.bytes_scanned.load();
    processed_events = job->scan.events_scanned.load();
    time_ms = (NowUs() - job->created_us) / 1000;
    work_done = std::min(total, job->scan.tasks_done.load() + job->peers_done.load());
    const int64_t now = env_.now_ms();
    query_start = job->live ? now - job->window_ms : job->range.start_ms;
    query_end = job->live ? now : job->range.end_ms;
  }
  w.Key("eventCount").Int(static_cast<int64_t>(event_count));
  w.Key("processedBytes").Int(static_cast<int64_t>(processed_bytes));
  w.Key("processedEvents").Int(static_cast<int64_t>(processed_events));
  w.Key("timeMillis").Int(time_ms);
  w.Key("workDone").Int(static_cast<int64_t>(work_done));
  w.Key("totalWork").Int(static_cast<int64_t>(total_work));
  w.Key("queryStart").Int(query_start).Key("queryEnd").Int(query_end);
  w.Key("isAggregate").Bool(job->is_aggregate);
  w.Key("pollAfter").Int(job->live ? 1000 : (done ? 0 : kPollAfterRunningMs));
  w.Key("resultBufferSize").Int(static_cast<int64_t>(query::ExecOptions{}.max_events));
  w.Key("fieldOrder").BeginArray();
  for (const auto& f : field_order) w.String(f);
  w.EndArray();
  w.Key("extraData").BeginObject().Key("hasMoreEvents").String("false").EndObject();
  w.Key("warnings").BeginArray();
  if (have) {
    for (const auto& warning : result->warnings) {
      w.BeginObject()
          .Key("category")
          .String("QueryExecution")
          .Key("classification")
          .String("Warning")
          .Key("code")
          .String("sediment.query.warning")
          .Key("message")
          .String(warning)
          .EndObject();
    }
  }
  w.EndArray();
  w.EndObject();  // metaData
  w.EndObject();
  http::Response r;
  r.body = w.Take();
  return r;
}

http::Response QueryJobs::Delete(const std::string& repo, const std::string& id) {
  std::shared_ptr<Job> job;
  {
    std::lock_guard lock(mu_);
    auto it = jobs_.find(id);
    if (it == jobs_.end() || it->second->repo != repo) {
      return http::JsonError(404, "no query job '" + id + "' in repository '" + repo + "'");
    }
    job = it->second;
    jobs_.erase(it);
    job->cancel->store(true);
    retired_.push_back(job);
    cv_.notify_all();
  }
  http::Response r;
  r.status = 204;
  return r;
}

std::shared_ptr<QueryJobs> StartQueryJobs(QueryJobsEnv env) {
  auto jobs = std::make_shared<QueryJobs>(std::move(env));
  jobs->Start();
  return jobs;
}

void CancelQueryJobs(QueryJobs& jobs) { jobs.CancelAll(); }

void StopQueryJobs(QueryJobs& jobs) { jobs.Stop(); }

http::Response Server::Impl::HandleQueryJobs(const http::Request& req, const std::string& repo,
                                             const std::string& id) {
  if (auto err = CheckQueryAccess(req, repo)) return *err;
  if (!query_jobs) return http::JsonError(503, "query jobs are not available yet");
  if (id.empty()) {
    if (req.method != "POST") return http::JsonError(405, "use POST for " + req.path);
    QueryRequestBody body;
    if (auto err = ParseQueryRequest(req.body, &body)) return *err;
    return query_jobs->Create(repo, body);
  }
  if (req.method == "GET") return query_jobs->Poll(repo, id);
  if (req.method == "DELETE") return query_jobs->Delete(repo, id);
  return http::JsonError(405, "use GET or DELETE for " + req.path);
}

http::Response Server::Impl::StreamLiveQuery(const http::Request& req, const std::string& repo,
                                             const QueryRequestBody& body,
                                             std::shared_ptr<const query::CompiledQuery> compiled) {
  if (!body.end.empty() && body.end != "now") {
    return http::JsonError(
        400, "a live query runs up to now: omit 'end' (or give \"now\"), got '" + body.end + "'");
  }
  auto range = query::ParseTimeRange(body.start, "", clock->NowMillis());
  if (!range.ok()) return http::JsonError(400, range.status().message());
  if (!query_jobs) return http::JsonError(503, "live queries are not available yet");
  auto slot = query_jobs->TryAcquire();
  if (!slot) {
    return http::JsonError(429, "too many query jobs and live queries running (at most " +
                                    std::to_string(config.max_query_jobs) +
                                    ", --max-query-jobs); try later");
  }
  struct Live {
    std::shared_ptr<QueryJobs::Slot> slot;
    std::shared_ptr<const query::CompiledQuery> compiled;
    std::string repo, query_string;
    int64_t window_ms = 0;
    bool aggregate = false, ndjson = false;
    LiveEventFilter filter;
    std::string last_snapshot;  // aggregate: the last result sent
    bool first_item = true;     // JSON array mode: no comma before the first element
  };
  auto live = std::make_shared<Live>();
  live->slot = std::move(slot);
  live->compiled = std::move(compiled);
  live->repo = repo;
  live->query_string = body.query_string;
  live->window_ms = range->end_ms - range->start_ms;
  live->aggregate = query::IsAggregate(*live->compiled);
  live->ndjson = req.Header("Accept").find("application/x-ndjson") != std::string_view::npos;

  // One run over the window now; the text to send for it (empty: nothing new).
  auto run_once = [this, live](std::vector<std::string>* warnings) -> Result<std::string> {
    const int64_t now = clock->NowMillis();
    query::TimeRange window{now - live->window_ms, now};
    QueryControl control = LimitsFromNow();
    control.cancel = live->slot->cancel();
    auto run = RunQuery(live->repo, live->query_string, *live->compiled, window, control);
    if (!run.ok()) return run.status();
    if (warnings) *warnings = run->warnings;
    std::string out;
    auto item = [&](const std::string& json) {
      if (live->ndjson) {
        out += json;
        out.push_back('\n');
      } else {
        if (!live->first_item) out.push_back(',');
        live->first_item = false;
        out += json;
      }
    };
    if (live->aggregate) {
      std::string snapshot = "[";
      for (size_t i = 0; i < run->result.rows.size(); ++i) {
        if (i > 0) snapshot.push_back(',');
        snapshot += RowJson(run->result.rows[i]);
      }
      snapshot.push_back(']');
      if (snapshot != live->last_snapshot) {
        item(snapshot);
        live->last_snapshot = std::move(snapshot);
      }
    } else {
      for (const query::Row* row : live->filter.Fresh(run->result.rows, window.start_ms, now)) {
        item(RowJson(*row));
      }
    }
    return out;
  };

  std::vector<std::string> warnings;
  const auto t0 = SteadyClock::now();
  auto first = run_once(&warnings);
  if (!first.ok()) return QueryErrorResponse(first.status(), LimitsFromNow());
  const auto first_took = SteadyClock::now() - t0;
  http::Response r;
  r.content_type = live->ndjson ? "application/x-ndjson" : "application/json";
  for (const auto& warning : warnings) r.headers.emplace_back("X-Sediment-Warning", warning);
  r.headers.emplace_back("X-Sediment-Live", "1");
  r.stream = [live, run_once, first = std::move(*first), first_took](http::BodyWriter& w) mutable {
    if (!live->ndjson && !w.Write("[")) return false;
    if (!w.Write(first)) return false;
    auto took = first_took;
    auto stop = [&] { return live->slot->cancel()->load() || !w.Connected(); };
    while (SleepUnless(NextLiveRun(took), stop)) {
      const auto t = SteadyClock::now();
      auto next = run_once(nullptr);
      took = SteadyClock::now() - t;
      if (!next.ok()) {
        if (live->slot->cancel()->load()) break;  // the server is stopping
        spdlog::warn("live query '{}' on {} ends: {}", live->query_string, live->repo,
                     next.status().ToString());
        return false;  // the client sees an incomplete response
      }
      if (!w.Write(*next)) return false;
    }
    if (!w.Connected()) return false;
    return live->ndjson || w.Write("]");
  };
  return r;
}

}  // namespace sediment
