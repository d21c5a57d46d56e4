// The sediment server: wires the commit log, Global, digest, query engine and HTTP API of one node
// (DESIGN section 2). Owns every component it creates.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>

#include "common/status.h"
#include "config/server_config.h"

namespace sediment {

class Server {
 public:
  explicit Server(ServerConfig config);
  ~Server();
  // Opens the data dir, recovers, bootstraps tokens, starts the digest and the HTTP listener.
  // When it returns OK the node answers requests ("ready").
  Status Start();
  // Stops HTTP, digest and Global in that order. Idempotent.
  void Stop();
  // The graceful stop (SIGTERM): ends live queries and query jobs,
  // stops accepting and answers the requests in progress (http::Server::StopGracefully; until
  // 2/3 of `bound` at most), flushes the digest buffers to segments (so the partitions' next
  // owner replays nothing), then Stop() (which leaves the consumer group first). Every ingest
  // request answered 200 is in the commit log whatever happens here; the caller bounds the whole
  // (main.cc exits when `bound` passes).
  void Shutdown(std::chrono::milliseconds bound);
  uint16_t port() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sediment
