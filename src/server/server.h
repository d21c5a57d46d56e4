// The sediment server: wires the commit log, Global, digest, query engine and HTTP API of one node
// (DESIGN section 2). Owns every component it creates.
#pragma once

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
  uint16_t port() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sediment
