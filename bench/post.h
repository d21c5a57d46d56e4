// `sediment-benchutil post`: a load client for the ingest API, so that a benchmark's client costs
// the machine what a native shipper would (the Python driver's HTTP threads used 0.6-1.0 CPU-s
// per 512 MB, on the same two cores as the server and the broker it is measured against).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace sediment::bench {

// `data` in batches of `batch_lines` lines (the last may be shorter; a final line without '\n' is
// a line), as bench/run_benchmarks.py's split_batches cuts them: views into `data`.
struct LineBatchView {
  std::string_view body;
  uint64_t lines = 0;
};
std::vector<LineBatchView> SplitBatches(std::string_view data, uint64_t batch_lines);

struct PostOptions {
  int port = 0;  // on 127.0.0.1: a load client never leaves loopback
  std::string path = "/api/v1/ingest/raw";
  std::string token;  // sent as "Authorization: Bearer <token>"
  std::string content_type = "text/plain; charset=utf-8";
  std::string in;  // the file whose lines are sent
  uint64_t batch_lines = 1000;
  int clients = 8;
  int max_retries = 5;        // per batch, for 429 and 503 (after 0.1 s, 0.2 s, 0.4 s, ...)
  int timeout_seconds = 120;  // per request: connect, send and answer
};

// Splits `in` into batches (SplitBatches) and POSTs each batch once
// per success over `clients` keep-alive connections, each taking the next unsent batch. A 200
// counts the batch; 429 and 503 are retried; any other answer, a connection error (the request
// may have been taken: it is never resent) or a timeout stops every client and makes the run fail.
// Prints one JSON object on stdout: batches, events (lines), bytes, retries, seconds from the
// first request to the last answer, start_monotonic (CLOCK_MONOTONIC seconds when the first
// request began, comparable with Python's time.monotonic()), and cpu_seconds (this process, while
// sending). Returns the exit code (0 only when every batch got a 200).
int Post(const PostOptions& options);

}  // namespace sediment::bench
