#include "coordinator/query_admission.h"

#include <string>

namespace sediment::coordinator {

Result<std::unique_ptr<QueryAdmission::Ticket>> QueryAdmission::TryAdmit() {
  int now = running_.load(std::memory_order_acquire);
  while (true) {
    if (now >= max_running_) {
      return Status(StatusCode::kResourceExhausted,
                    std::to_string(max_running_) +
                        " queries are running on this node, the most it runs at once "
                        "(--max-concurrent-queries); retry shortly")
          .WithSubcode(StatusSubcode::kConcurrencyLimit);
    }
    if (running_.compare_exchange_weak(now, now + 1, std::memory_order_acq_rel)) break;
  }
  return std::make_unique<Ticket>(this);
}

}  // namespace sediment::coordinator
