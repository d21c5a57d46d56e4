// The alert rules and the runner (alerts.h).
#include "alerts/alerts.h"

#include <spdlog/spdlog.h>

#include <charconv>
#include <cmath>
#include <condition_variable>

#include "common/json_writer.h"
#include "http/http_client.h"

namespace sediment::alerts {

Window WindowEndingAt(const AlertDef& def, int64_t end_ms) {
  return Window{end_ms - def.window_ms, end_ms};
}

Window NextWindow(const AlertState& alert) {
  return WindowEndingAt(alert.def, alert.done_through_ms + alert.def.every_ms);
}

bool WindowDue(const AlertDef& def, const Window& w, int64_t now_ms) {
  return now_ms >= w.end_ms + def.delay_ms;
}

PartitionId AlertPartition(const std::string& repo, const std::string& name,
                           int32_t partition_count) {
  uint64_t h = 14695981039346656037ull;  // FNV-1a, 64 bits: stable across builds and machines
  auto mix = [&h](std::string_view s) {
    for (unsigned char c : s) {
      h ^= c;
      h *= 1099511628211ull;
    }
  };
  mix(repo);
  mix("/");
  mix(name);
  const uint64_t n = partition_count > 0 ? static_cast<uint64_t>(partition_count) : 1;
  return PartitionId(static_cast<int32_t>(h % n));
}

bool IsThresholdOp(std::string_view op) {
  return op == ">" || op == ">=" || op == "<" || op == "<=" || op == "==" || op == "!=";
}

namespace {

std::optional<double> AsNumber(const query::Value& v) {
  if (const auto* i = std::get_if<int64_t>(&v)) return static_cast<double>(*i);
  if (const auto* d = std::get_if<double>(&v)) return *d;
  const std::string& s = std::get<std::string>(v);
  double out = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  if (ec != std::errc() || ptr != s.data() + s.size() || s.empty()) return std::nullopt;
  return out;
}

bool Compare(double a, std::string_view op, double b) {
  if (op == ">") return a > b;
  if (op == ">=") return a >= b;
  if (op == "<") return a < b;
  if (op == "<=") return a <= b;
  if (op == "==") return a == b;
  return a != b;  // "!="
}

void WriteValue(JsonWriter& w, const query::Value& v) {
  if (const auto* i = std::get_if<int64_t>(&v)) {
    w.Int(*i);
  } else if (const auto* d = std::get_if<double>(&v)) {
    if (std::isfinite(*d)) {
      w.Double(*d);
    } else {
      w.Null();
    }
  } else {
    w.String(std::get<std::string>(v));
  }
}

std::string JsonEscaped(std::string_view s) {
  std::string quoted;
  AppendJsonString(&quoted, s);
  return quoted.substr(1, quoted.size() - 2);
}

}  // namespace

Result<bool> ConditionHolds(const AlertDef& def, const std::vector<query::Row>& rows) {
  if (!def.threshold) return !rows.empty();
  const AlertThreshold& t = *def.threshold;
  if (!IsThresholdOp(t.op)) {
    return Status::InvalidArgument("unknown threshold operator '" + t.op + "'");
  }
  for (const query::Row& row : rows) {
    for (const auto& [field, value] : row) {
      if (field != t.field) continue;
      std::optional<double> n = AsNumber(value);
      if (n && Compare(*n, t.op, t.value)) return true;
    }
  }
  return false;
}

std::string RenderTemplate(std::string_view tmpl, const FiringContext& ctx) {
  auto results = [&ctx] {
    JsonWriter w;
    w.BeginArray();
    for (size_t i = 0; i < ctx.results.size() && i < kMaxResultsInBody; ++i) {
      w.BeginObject();
      for (const auto& [field, value] : ctx.results[i]) {
        w.Key(field);
        WriteValue(w, value);
      }
      w.EndObject();
    }
    w.EndArray();
    return w.Take();
  };
  const std::pair<std::string_view, std::function<std::string()>> placeholders[] = {
      {"{alert_name}", [&] { return JsonEscaped(ctx.alert_name); }},
      {"{repo}", [&] { return JsonEscaped(ctx.repo); }},
      {"{firing_id}", [&] { return JsonEscaped(ctx.firing_id); }},
      {"{query}", [&] { return JsonEscaped(ctx.query); }},
      {"{window_start}", [&] { return std::to_string(ctx.window.start_ms); }},
      {"{window_end}", [&] { return std::to_string(ctx.window.end_ms); }},
      {"{result_count}", [&] { return std::to_string(ctx.results.size()); }},
      {"{results}", results},
  };
  std::string out;
  size_t i = 0;
  while (i < tmpl.size()) {
    bool replaced = false;
    if (tmpl[i] == '{') {
      for (const auto& [name, value] : placeholders) {
        if (tmpl.substr(i, name.size()) == name) {
          out += value();
          i += name.size();
          replaced = true;
          break;
        }
      }
    }
    if (!replaced) out.push_back(tmpl[i++]);
  }
  return out;
}

std::chrono::milliseconds BackoffAfter(const RetryPolicy& policy, uint32_t failed_attempt) {
  int64_t ms = policy.initial_backoff.count();
  for (uint32_t i = 1; i < failed_attempt && ms < policy.max_backoff.count(); ++i) ms *= 2;
  return std::chrono::milliseconds(std::min<int64_t>(ms, policy.max_backoff.count()));
}

namespace {

class HttpSender final : public ActionSender {
 public:
  explicit HttpSender(std::chrono::milliseconds timeout) : timeout_(timeout) {}
  Status PostWebhook(const std::string& url,
                     const std::vector<std::pair<std::string, std::string>>& headers,
                     const std::string& body) override {
    http::FetchOptions options;
    options.timeout = timeout_;
    auto all = headers;
    all.emplace_back("Content-Type", "application/json");
    auto r = http::Fetch("POST", url, all, body, options);
    if (!r.ok()) return r.status();
    if (r->status < 200 || r->status > 299) {
      return Status::Unavailable("webhook " + url + " answered HTTP " + std::to_string(r->status));
    }
    return Status::OK();
  }
  void LogLine(const std::string& line) override { spdlog::warn("{}", line); }

 private:
  const std::chrono::milliseconds timeout_;
};

}  // namespace

std::unique_ptr<ActionSender> HttpActionSender(std::chrono::milliseconds timeout) {
  return std::make_unique<HttpSender>(timeout);
}

Delivery DeliverActions(const AlertDef& def, const FiringContext& ctx, ActionSender* sender,
                        const RetryPolicy& policy,
                        const std::function<bool(std::chrono::milliseconds)>& sleep) {
  Delivery d;
  d.status = Status::OK();
  for (const AlertAction& action : def.actions) {
    if (action.kind == AlertActionKind::kLogLine) {
      sender->LogLine(RenderTemplate(
          action.body_template.empty() ? kDefaultLogTemplate : action.body_template, ctx));
      continue;
    }
    const std::string body = RenderTemplate(
        action.body_template.empty() ? kDefaultBodyTemplate : action.body_template, ctx);
    auto headers = action.headers;
    headers.emplace_back("X-Sediment-Firing-Id", ctx.firing_id);
    Status last = Status::OK();
    for (uint32_t attempt = 1; attempt <= std::max<uint32_t>(1, policy.max_attempts); ++attempt) {
      ++d.attempts;
      last = sender->PostWebhook(action.url, headers, body);
      if (last.ok()) break;
      spdlog::warn("alert {} of {}: firing {}: webhook attempt {} of {} failed: {}", ctx.alert_name,
                   ctx.repo, ctx.firing_id, attempt, policy.max_attempts, last.ToString());
      if (attempt >= policy.max_attempts) break;
      if (!sleep(BackoffAfter(policy, attempt))) {
        d.interrupted = true;
        d.status = last;
        return d;
      }
    }
    if (!last.ok() && d.status.ok()) d.status = last;
  }
  return d;
}

struct AlertRunner::Job {
  std::string repo, name;
  uint64_t id = 0;
  AlertDef def;
  Window window;
  PartitionId partition;
  Epoch epoch;
};

AlertRunner::AlertRunner(Clock* clock, Global* global, RunnerOptions options)
    : clock_(clock), global_(global), options_(std::move(options)) {}

AlertRunner::~AlertRunner() { Stop(); }

void AlertRunner::Start() {
  if (loop_) return;
  BackgroundLoop::Options o;
  o.interval = options_.tick;
  loop_ = std::make_unique<BackgroundLoop>("alerts", o, [this] { RunPass(); });
  loop_->Start();
}

void AlertRunner::Stop() {
  if (loop_) loop_->Stop();
}

PassStats AlertRunner::RunPass(const std::function<bool(std::chrono::milliseconds)>& sleep_fn) {
  PassStats stats;
  std::function<bool(std::chrono::milliseconds)> sleep = sleep_fn;
  if (!sleep) {
    sleep = [this](std::chrono::milliseconds d) { return loop_ ? loop_->SleepFor(d) : false; };
  }
  // The alerts this node owns now, each with its next window.
  std::vector<Job> jobs;
  global_->Read([&](const GlobalState& st) {
    for (const auto& [repo_name, repo] : st.repos) {
      for (const auto& [name, alert] : repo.alerts) {
        if (!alert.def.enabled) continue;
        const PartitionId p = AlertPartition(repo_name, name, options_.partition_count);
        auto pit = st.partitions.find(p.value);
        if (pit == st.partitions.end() || pit->second.owner != options_.self) continue;
        jobs.push_back(
            Job{repo_name, name, alert.id, alert.def, NextWindow(alert), p, pit->second.epoch});
      }
    }
  });
  for (Job& job : jobs) {
    for (uint32_t n = 0; n < options_.max_windows_per_pass; ++n) {
      if (loop_ && loop_->stopping()) return stats;
      if (!WindowDue(job.def, job.window, clock_->NowMillis())) break;
      // Digesting under the claim Global names: a node the group no longer assigns the
      // partition (or that has not applied its claim) leaves the alert to the new owner.
      std::optional<Epoch> held = options_.owned_epoch(job.partition);
      if (!held || *held != job.epoch) break;
      if (!RunWindow(job, sleep, &stats)) break;
      job.window = WindowEndingAt(job.def, job.window.end_ms + job.def.every_ms);
    }
  }
  return stats;
}

bool AlertRunner::RunWindow(const Job& job,
                            const std::function<bool(std::chrono::milliseconds)>& sleep,
                            PassStats* stats) {
  const std::string firing_id = AlertFiringId(job.id, job.window.end_ms);
  auto result = options_.query(job.repo, job.def.query, job.window.start_ms, job.window.end_ms);
  if (!result.ok()) {
    spdlog::warn("alert {} of {}: window ending {}: the query failed, trying again: {}", job.name,
                 job.repo, job.window.end_ms, result.status().ToString());
    ++stats->deferred;
    return false;
  }
  const int64_t now = clock_->NowMillis();
  if (!result->warnings.empty()) {
    const int64_t due = job.window.end_ms + job.def.delay_ms;
    if (now < due + options_.incomplete_grace.count()) {
      ++stats->deferred;
      return false;
    }
    spdlog::warn("alert {} of {}: window ending {} runs on incomplete data: {}", job.name, job.repo,
                 job.window.end_ms, result->warnings.front());
  }
  auto fire = ConditionHolds(job.def, result->rows);
  if (!fire.ok()) {
    spdlog::error("alert {} of {}: {}", job.name, job.repo, fire.status().ToString());
    ++stats->deferred;
    return false;
  }
  AlertWindowDone done{job.repo, job.name, job.id, job.partition, job.epoch, {}};
  done.firing.window_start_ms = job.window.start_ms;
  done.firing.window_end_ms = job.window.end_ms;
  done.firing.node = options_.self;
  done.firing.result_count = result->rows.size();
  done.firing.outcome = AlertOutcome::kQuiet;
  if (*fire) {
    FiringContext ctx{job.repo,      job.name,   firing_id,
                      job.def.query, job.window, std::move(result->rows)};
    Delivery d = DeliverActions(job.def, ctx, options_.sender, options_.retry, sleep);
    if (d.interrupted) {
      ++stats->deferred;
      return false;  // stopping: the window stays unfinished for the next owner
    }
    done.firing.attempts = d.attempts;
    done.firing.outcome = d.status.ok() ? AlertOutcome::kFired : AlertOutcome::kFailed;
    if (!d.status.ok()) {
      done.firing.error = d.status.message();
      spdlog::error("alert {} of {}: firing {}: the actions failed after {} attempts: {}", job.name,
                    job.repo, firing_id, d.attempts, d.status.ToString());
    } else {
      spdlog::info("alert {} of {}: firing {} delivered ({} results, {} attempts)", job.name,
                   job.repo, firing_id, ctx.results.size(), d.attempts);
    }
  }
  done.firing.at_ms = clock_->NowMillis();
  auto submitted = global_->Submit(done);
  if (!submitted.ok()) {
    if (submitted.status().code() == StatusCode::kRejected) {
      ++stats->fenced;
      spdlog::info("alert {} of {}: window ending {} not recorded: {}", job.name, job.repo,
                   job.window.end_ms, submitted.status().message());
    } else {
      ++stats->deferred;
      spdlog::warn("alert {} of {}: recording window ending {} failed: {}", job.name, job.repo,
                   job.window.end_ms, submitted.status().ToString());
    }
    return false;
  }
  ++stats->windows_done;
  if (done.firing.outcome != AlertOutcome::kQuiet) ++stats->fired;
  return true;
}

}  // namespace sediment::alerts
