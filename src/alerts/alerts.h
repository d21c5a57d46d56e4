// Scheduled searches and alerts (alerts/README.md): the pure rules (window alignment, firing ids,
// the condition, the body template, the retry schedule), how one action is delivered, and the
// AlertRunner that runs the alerts this node owns.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/background_loop.h"
#include "common/clock.h"
#include "common/status.h"
#include "common/types.h"
#include "global/global.h"
#include "query/query.h"

namespace sediment::alerts {

// A window of an alert: [start_ms, end_ms). Window k of an alert ends at k * every_ms and starts
// window_ms before its end.
struct Window {
  int64_t start_ms = 0;
  int64_t end_ms = 0;
  bool operator==(const Window&) const = default;
};
// The window of `def` that ends at `end_ms` (a multiple of def.every_ms).
Window WindowEndingAt(const AlertDef& def, int64_t end_ms);
// The next window `alert` has to complete: the one ending at done_through_ms + every_ms.
Window NextWindow(const AlertState& alert);
// Whether the wall clock `now_ms` allows running `w`: now_ms >= w.end_ms + def.delay_ms.
bool WindowDue(const AlertDef& def, const Window& w, int64_t now_ms);

// The ingest partition whose claim owns the alert `name` of `repo` (FNV-1a of "repo/name" modulo
// partition_count; partition_count > 0). Every node computes the same partition.
PartitionId AlertPartition(const std::string& repo, const std::string& name,
                           int32_t partition_count);

// Whether `rows` fire `def`: with a threshold, some row has the field and its value (a number,
// or a string that is one) compares true with the threshold by its op; without one, any row.
// InvalidArgument for an unknown op (the API refuses them; kept as a value for the runner).
Result<bool> ConditionHolds(const AlertDef& def, const std::vector<query::Row>& rows);
// The ops ConditionHolds knows.
bool IsThresholdOp(std::string_view op);

// What a firing's templates can say.
struct FiringContext {
  std::string repo;
  std::string alert_name;
  std::string firing_id;
  std::string query;
  Window window;
  std::vector<query::Row> results;
};
// The webhook body when the action has no template (a JSON object with every placeholder).
inline constexpr const char* kDefaultBodyTemplate =
    R"({"alert": "{alert_name}", "repository": "{repo}", "firing_id": "{firing_id}", )"
    R"("query": "{query}", "window_start": {window_start}, "window_end": {window_end}, )"
    R"("result_count": {result_count}, "results": {results}})";
// The log line when the action has no template.
inline constexpr const char* kDefaultLogTemplate =
    "alert {alert_name} of {repo} fired: firing {firing_id}, window [{window_start}, "
    "{window_end}), {result_count} results";
// `tmpl` with the placeholders replaced: {alert_name}, {repo}, {firing_id} and {query} by their
// text escaped for a JSON string (without quotes), {window_start}, {window_end} (epoch ms) and
// {result_count} by numbers, {results} by a JSON array of the result rows (at most
// kMaxResultsInBody, one object per row). Any other text, other braces included, stays as it is.
std::string RenderTemplate(std::string_view tmpl, const FiringContext& ctx);
inline constexpr size_t kMaxResultsInBody = 100;

// How a webhook is retried: attempt n (1-based) that failed is followed, while n < max_attempts,
// by a wait of min(initial_backoff * 2^(n-1), max_backoff).
struct RetryPolicy {
  uint32_t max_attempts = 5;
  std::chrono::milliseconds initial_backoff{500};
  std::chrono::milliseconds max_backoff{8000};
};
std::chrono::milliseconds BackoffAfter(const RetryPolicy& policy, uint32_t failed_attempt);

// Where actions go. Implementations are thread-safe.
class ActionSender {
 public:
  virtual ~ActionSender() = default;
  // POSTs `body` (application/json) to `url` with `headers`: OK on a 2xx answer, else an error
  // naming the status or the transport failure.
  virtual Status PostWebhook(const std::string& url,
                             const std::vector<std::pair<std::string, std::string>>& headers,
                             const std::string& body) = 0;
  // Writes one line to the node's log.
  virtual void LogLine(const std::string& line) = 0;
};
// The real sender: http::Fetch with `timeout` per attempt, and spdlog.
std::unique_ptr<ActionSender> HttpActionSender(std::chrono::milliseconds timeout);

// The result of delivering one firing's actions.
struct Delivery {
  Status status;             // OK, or the last error of the first action that never succeeded
  uint32_t attempts = 0;     // webhook requests made, all actions
  bool interrupted = false;  // `sleep` returned false (stopping): the window must not be marked
};
// Runs every action of `def` for `ctx`: a webhook is tried up to policy.max_attempts times,
// `sleep(BackoffAfter(...))` between attempts (it returns false to give up at once: stopping); a
// log line is written once. The firing id travels in the body (templates) and in the
// X-Sediment-Firing-Id header of every attempt (receivers dedupe on it).
Delivery DeliverActions(const AlertDef& def, const FiringContext& ctx, ActionSender* sender,
                        const RetryPolicy& policy,
                        const std::function<bool(std::chrono::milliseconds)>& sleep);

// Runs a query over [start_ms, end_ms) of `repo`: its rows and warnings (something could not be
// read), or the engine's error.
struct QueryOutcome {
  std::vector<query::Row> rows;
  std::vector<std::string> warnings;
};
using QueryFn = std::function<Result<QueryOutcome>(
    const std::string& repo, const std::string& query, int64_t start_ms, int64_t end_ms)>;

struct RunnerOptions {
  NodeId self;
  int32_t partition_count = 1;
  // The claim epoch under which this node digests `partition` now, nullopt when it does not
  // (the consumer group took it away, or the claim is not applied yet). The runner runs an alert
  // only when Global names this node the owner at that same epoch.
  std::function<std::optional<Epoch>(PartitionId)> owned_epoch;
  QueryFn query;
  ActionSender* sender = nullptr;  // borrowed
  RetryPolicy retry;
  // A window whose query reported warnings (data not readable yet, e.g. just after a failover)
  // is tried again on later passes, until this long after it was due; then it runs with them.
  std::chrono::milliseconds incomplete_grace{30000};
  // Between passes (real time).
  std::chrono::milliseconds tick{250};
  // The most windows of one alert a pass completes (catching up after a stop).
  uint32_t max_windows_per_pass = 100;
};

// What a pass did, for tests and logs.
struct PassStats {
  uint32_t windows_done = 0;  // AlertWindowDone accepted
  uint32_t fired = 0;         // of which fired (kFired or kFailed)
  uint32_t deferred = 0;      // windows left for a later pass (query error, incomplete data)
  uint32_t fenced = 0;        // AlertWindowDone rejected (another owner, or done meanwhile)
};

// Runs the alerts this node owns. Exactly one node runs an alert at a time as far as Global can
// tell: the owner of AlertPartition's current claim; a stale owner's AlertWindowDone is rejected
// (fenced) and it stops that alert. A window is recorded done only after its actions succeeded
// or exhausted their retries, so a crash before that makes the next owner run it again with the
// same firing id (at-least-once, deduplicated by the id; alerts/README.md).
// Thread-safety: RunPass is called by one thread at a time (the runner's loop, or a test).
class AlertRunner {
 public:
  // `clock` and `global` are borrowed and must outlive the runner.
  AlertRunner(Clock* clock, Global* global, RunnerOptions options);
  ~AlertRunner();  // Stop()
  // Starts the background loop (a pass every options.tick).
  void Start();
  // Stops the loop; a delivery waiting between retries gives up (its window stays unfinished).
  void Stop();
  // One pass: every due window of every owned, enabled alert, in order. `sleep` (null: the
  // loop's real-time sleep) waits between webhook retries.
  PassStats RunPass(const std::function<bool(std::chrono::milliseconds)>& sleep = nullptr);

 private:
  struct Job;
  // Runs one window; true when it was recorded done (the caller may go on with the next).
  bool RunWindow(const Job& job, const std::function<bool(std::chrono::milliseconds)>& sleep,
                 PassStats* stats);

  Clock* const clock_;
  Global* const global_;
  const RunnerOptions options_;
  std::unique_ptr<BackgroundLoop> loop_;
};

}  // namespace sediment::alerts
