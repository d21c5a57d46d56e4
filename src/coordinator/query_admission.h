// QueryAdmission: how many plain (non-job, non-live) queries run at once on this node. The
// query route asks for a ticket before it starts a query and holds it until the answer is built;
// beyond the bound the query is refused at once (ResourceExhausted / kConcurrencyLimit: 429)
// rather than queued, so a burst of queries cannot take every handler thread and the memory
// their partial states need. Query jobs and live queries have their own places (QueryJobs).
//
// Thread-safety: every member may be called from any thread. A Ticket may be destroyed on any
// thread; the QueryAdmission must outlive its tickets.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "common/status.h"

namespace sediment::coordinator {

class QueryAdmission {
 public:
  // One admitted query's place; released when destroyed.
  class Ticket {
   public:
    explicit Ticket(QueryAdmission* owner) : owner_(owner) {}
    ~Ticket() { owner_->running_.fetch_sub(1, std::memory_order_acq_rel); }
    Ticket(const Ticket&) = delete;
    Ticket& operator=(const Ticket&) = delete;

   private:
    QueryAdmission* owner_;
  };

  // At most `max_running` (>= 1) tickets exist at once.
  explicit QueryAdmission(int max_running) : max_running_(max_running < 1 ? 1 : max_running) {}

  // A ticket, or ResourceExhausted with subcode kConcurrencyLimit naming the bound and the flag
  // that sets it when max_running tickets are held.
  [[nodiscard]] Result<std::unique_ptr<Ticket>> TryAdmit();

  int running() const { return running_.load(std::memory_order_acquire); }
  int max_running() const { return max_running_; }

 private:
  const int max_running_;
  std::atomic<int> running_{0};
};

}  // namespace sediment::coordinator
