// What the query routes (query_routes.cc) and the query-job routes (job_routes.cc) share.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "api/node.h"
#include "query/query.h"

namespace sediment::api {

// The public query body (LogScale's QueryInput): {queryString, start, end, isLive, arguments};
// other fields (timeZoneOffsetMinutes, ...) are accepted and ignored. `arguments` (an object of
// strings or numbers) gives the query parameters (?name) their values: query_string is then the
// query with its parameters bound (query::BindParameters; a parameter without a value is a 400).
struct QueryRequestBody {
  std::string query_string;
  std::string start, end;  // as given (a number becomes its decimal text); empty = absent
  bool live = false;
};
// The 400 message for a live query calling start()/end(): its time range moves, so no one number
// stands for them.
inline constexpr std::string_view kTimeRangeInLiveQuery =
    "start() and end() cannot be used in a live query (its time range moves): run it as a "
    "static query";

// The 400 message for a live query calling setTimeInterval(): a live query runs up to now.
inline constexpr std::string_view kTimeIntervalInLiveQuery =
    "setTimeInterval() cannot be used in a live query (it runs over a window up to now): run it "
    "as a static query";

// Parses `body`; the 400 response to send when it is not a valid query body. The query text
// comes out with the saved query calls `$name()` expanded from `saved` (null: none) and the
// request's "arguments" bound to its parameters.
std::optional<http::Response> ParseQueryRequest(const std::string& body,
                                                const query::SavedQueries* saved,
                                                QueryRequestBody* out);

// The error response of a query that failed: 408 for its time limit, 413 for its memory bound
// (naming the flag), else http::JsonErrorFor's answer.
http::Response QueryErrorResponse(const Status& st, const coordinator::QueryControl& control);

// POST {repo}/queryjobs, GET|DELETE {repo}/queryjobs/{id} (`id` empty for the first).
http::Response HandleQueryJobs(const Node& n, const http::Request& req, const std::string& repo,
                               const std::string& id);
// A live query on the streaming endpoint: runs again and again over a sliding window and streams
// what is new (coordinator/query_jobs.h has the schedule). `n` must outlive the response's stream.
http::Response StreamLiveQuery(const Node& n, const http::Request& req, const std::string& repo,
                               const QueryRequestBody& body,
                               std::shared_ptr<const query::CompiledQuery> compiled);

}  // namespace sediment::api
