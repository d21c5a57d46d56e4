// CallPool: runs blocking calls (HTTP requests to peers) on a bounded set of threads.
//
// Contract:
// - At most `max_threads` calls run at once, each on a pool thread; threads start when needed and
//   end after `idle` without work. Further calls wait in FIFO order, at most `max_queued` of them;
//   a call beyond that is refused at once (its `refuse` runs on the caller's thread).
// - Shutdown (and the destructor) refuses every queued call, waits for the running ones and joins
//   every thread; the caller makes running calls end (e.g. by abandoning them) before or while it
//   waits. Submit after Shutdown refuses.
// - Thread-safe. A call must not Submit to its own pool and wait for that call.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace sediment::coordinator {

struct CallPoolOptions {
  size_t max_threads = 64;
  size_t max_queued = 4096;
  std::chrono::milliseconds idle{10000};
};

class CallPool {
 public:
  explicit CallPool(CallPoolOptions options = {});
  ~CallPool();
  CallPool(const CallPool&) = delete;
  CallPool& operator=(const CallPool&) = delete;

  // Runs `call` on a pool thread, or `refuse` here when the queue is full or the pool is shut down.
  void Submit(std::function<void()> call, std::function<void()> refuse);
  void Shutdown();

  struct Stats {
    size_t threads = 0, running = 0, queued = 0;
    uint64_t refused = 0;
  };
  Stats stats() const;

 private:
  struct Call {
    std::function<void()> run, refuse;
  };
  void Worker();

  const CallPoolOptions options_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Call> queue_;              // guarded by mu_
  std::vector<std::thread> threads_;    // guarded by mu_ (ended ones are joined lazily)
  std::vector<std::thread::id> ended_;  // guarded by mu_: threads that left Worker
  size_t idle_threads_ = 0;             // guarded by mu_
  size_t running_ = 0;                  // guarded by mu_
  uint64_t refused_ = 0;                // guarded by mu_
  bool shutdown_ = false;               // guarded by mu_
};

}  // namespace sediment::coordinator
