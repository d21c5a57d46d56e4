// Scheduled searches and alerts on this node (alerts/README.md): the runner queries through this
// node's coordinator, delivers webhooks over HTTP and runs the alerts of the partitions this
// node's digest holds under their current claim.
#include <spdlog/spdlog.h>

#include "alerts/alerts.h"
#include "coordinator/lookup_files.h"
#include "coordinator/saved_queries.h"
#include "query/lookup.h"
#include "server/server_impl.h"

namespace sediment {

void Server::Impl::StartAlerts() {
  alert_sender = alerts::HttpActionSender(std::chrono::seconds(10));
  alerts::RunnerOptions o;
  o.self = node;
  o.partition_count = ingest_log->partition_count();
  o.owned_epoch = [this](PartitionId p) -> std::optional<Epoch> {
    for (const PartitionDigestStatus& st : digest->PartitionStatuses()) {
      if (st.partition == p && st.claimed) return st.epoch;
    }
    return std::nullopt;
  };
  o.query = [this](const std::string& repo, const std::string& text, int64_t start_ms,
                   int64_t end_ms) -> Result<alerts::QueryOutcome> {
    // Saved query calls resolve against the saved searches as they are when the window runs.
    const coordinator::GlobalSavedQueries saved(global.get(), repo);
    ASSIGN_OR_RETURN(std::string expanded, query::ExpandSavedQueries(text, saved, {}));
    const coordinator::GlobalLookupFiles files(global.get(), repo, geo);
    ASSIGN_OR_RETURN(auto compiled, query::Compile(expanded, &files));
    const coordinator::QueryControl control =
        coordinator::QueryLimitsFromNow(config.query_timeout_ms, config.query_memory_bytes);
    ASSIGN_OR_RETURN(coordinator::CoordinatedResult run,
                     coordinator->Run(repo, expanded, *compiled, {start_ms, end_ms}, control));
    alerts::QueryOutcome out;
    out.rows = std::move(run.result.rows);
    out.warnings = std::move(run.warnings);
    return out;
  };
  o.sender = alert_sender.get();
  alert_runner = std::make_unique<alerts::AlertRunner>(clock, global.get(), std::move(o));
  alert_runner->Start();
}

}  // namespace sediment
