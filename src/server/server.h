// The sediment server: wires the commit log, Global, digest, query engine and HTTP API of one node
// (DESIGN section 2). Owns every component it creates.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"

namespace sediment {

struct ServerConfig {
  std::string data_dir = "./sediment-data";
  std::string listen = "127.0.0.1:8080";   // HOST:PORT; port 0 picks a free port
  std::vector<std::string> ingest_tokens;  // "REPO:TOKEN"
  std::vector<std::string> api_tokens;
  int32_t partitions = 8;  // embedded log partitions (fixed at creation)
  size_t max_body_bytes = 32u << 20;
  size_t max_event_bytes = 1u << 20;
  int64_t flush_age_ms = 2000;
  size_t flush_bytes = 32u << 20;
  int query_threads = 2;
};

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
