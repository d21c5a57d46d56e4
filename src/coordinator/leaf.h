// Leaf: the serving side of the internal query protocol (INTERNAL_API.md): what a node answers
// when a coordinator asks it for the matches in its buffers, a partial state over the segments it
// holds, or to cancel a query it runs for it.
//
// Contract:
// - Buffers: the matching events buffered for the partitions (and claim epochs) asked for; the
//   answer carries this node's Global applied offset read after the buffers (the coordinator's
//   Global must reach it before it cuts) and names the partitions this node does not serve under
//   that epoch.
// - Segments / Partial: matches or a partial state over the asked segments this node holds (its
//   copy in Global, or a file Global no longer lists that is still in the directory during the
//   deletion delay), their files pinned while read. Segments it does not hold are named
//   (kSegmentsNotHeldHeader) and in a warning; segments it could not read are reported to the
//   LocalNode (withdrawn) and named (kUnreadableSegmentsHeader).
// - Every request runs with the time left and memory bound the coordinator sent; while it runs its
//   cancel flag is registered under the query id, and Cancel sets the flags of that id.
// - Thread-safe: requests are served concurrently.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "common/env.h"
#include "coordinator/coordinator.h"
#include "coordinator/internal_query.h"
#include "global/global.h"
#include "http/http_server.h"

namespace sediment::coordinator {

class Leaf {
 public:
  // Borrows everything; all must outlive the Leaf. `geo`: the node's GeoIP databases the queries
  // it is sent compile with (query/geo.h; null: none).
  Leaf(Env* env, Global* global, LocalNode* local, int query_threads,
       std::shared_ptr<const query::GeoDatabases> geo = nullptr);
  Leaf(const Leaf&) = delete;
  Leaf& operator=(const Leaf&) = delete;

  http::Response Buffers(const http::Request& req);
  http::Response Segments(const http::Request& req);
  http::Response Partial(const http::Request& req);
  http::Response Cancel(const http::Request& req);

 private:
  class Running;  // a request's registration under its query id
  struct Held;

  Held HoldSegments(const InternalQuery& q);

  Env* const env_;
  Global* const global_;
  LocalNode* const local_;
  const int query_threads_;
  const std::shared_ptr<const query::GeoDatabases> geo_;
  std::mutex mu_;
  // Cancel flags of the requests running now, by query id. Guarded by mu_.
  std::multimap<std::string, std::shared_ptr<std::atomic<bool>>> running_;
};

}  // namespace sediment::coordinator
