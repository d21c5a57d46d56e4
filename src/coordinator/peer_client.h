// How a coordinator calls the other nodes of a query (coordinator/INTERNAL_API.md): the
// PeerClient interface, the slot a call's answer lands in, and the HTTP implementation.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>

#include "common/status.h"
#include "common/types.h"
#include "coordinator/call_pool.h"
#include "coordinator/internal_query.h"
#include "http/http_client.h"

namespace sediment::coordinator {

// Wakes a coordinator waiting for any of its peer calls. Shared by the coordinator and the
// threads that deliver answers.
struct PeerWaiter {
  std::mutex mu;
  std::condition_variable cv;
};

// Where one call's answer lands. Thread-safe: a client's thread delivers, the coordinator reads.
class PeerSlot {
 public:
  explicit PeerSlot(std::shared_ptr<PeerWaiter> waiter) : waiter_(std::move(waiter)) {}

  // The answer (an HTTP response, or why there is none). The first delivery wins; a call the
  // coordinator abandoned keeps the reason it was given. Any thread; must not be called with the
  // waiter's mutex held.
  void Deliver(Result<http::ClientResponse> answer) {
    std::lock_guard lock(waiter_->mu);
    if (!value_) value_.emplace(std::move(answer));
    waiter_->cv.notify_all();
  }
  // Set once the coordinator no longer wants the answer: the client should stop the call soon.
  const std::atomic<bool>& abandoned() const { return abandoned_; }

  // The coordinator's side; the waiter's mutex must be held.
  bool ReadyLocked() const { return value_.has_value(); }
  void AbandonLocked(Status why) {
    abandoned_.store(true);
    if (!value_) value_.emplace(std::move(why));
  }
  Result<http::ClientResponse> TakeLocked() { return std::move(*value_); }
  void Abandon() { abandoned_.store(true); }
  PeerWaiter& waiter() { return *waiter_; }

 private:
  std::shared_ptr<PeerWaiter> waiter_;
  std::atomic<bool> abandoned_{false};
  std::optional<Result<http::ClientResponse>> value_;  // guarded by waiter_->mu
};

enum class PeerCallKind {
  kBuffers,  // buffered events of partitions the peer owns: a query::MatchSet
  kPartial,  // the query's partial state over segments the peer holds: a query::PartialResult
};

struct PeerCallOptions {
  // Bound on the whole call (the peer stops at the query's deadline itself; this only bounds a
  // peer that hangs).
  std::chrono::milliseconds timeout{600000};
  // The longest wait for the next byte of the answer (zero = none); the peer is asked for a
  // "102 Processing" answer every fifth of it while it works.
  std::chrono::milliseconds progress_timeout{0};
};

// Sends a coordinator's calls. Implementations are thread-safe.
class PeerClient {
 public:
  virtual ~PeerClient() = default;
  // Starts one call to `node` at `address`; its answer goes into `slot` (from any thread, possibly
  // before Start returns). Never blocks on the peer.
  virtual void Start(PeerCallKind kind, NodeId node, const std::string& address,
                     const InternalQuery& q, const PeerCallOptions& options,
                     std::shared_ptr<PeerSlot> slot) = 0;
  // Asks the peers at `addresses` to stop their parts of query `query_id` (fire and forget).
  virtual void Cancel(const std::string& query_id, const std::set<std::string>& addresses) = 0;
};

// The PeerClient over HTTP: POSTs to the internal routes with the cluster secret (read at each
// call) as bearer token, over HTTPS or HTTP as `tls` says (http::PeerTls), on the threads of a
// CallPool (`pool`: at most max_threads calls at once, the rest queued; a call beyond the queue is
// answered Unavailable at once). An abandoned call closes its connection within 20 ms. Destroying
// the client abandons the calls in flight and waits for them; queued calls are answered
// Unavailable.
std::unique_ptr<PeerClient> NewHttpPeerClient(std::function<std::string()> cluster_secret,
                                              http::PeerTls tls, CallPoolOptions pool = {});

// A peer's failure from its HTTP answer: its limits keep their codes (DeadlineExceeded for 408,
// ResourceExhausted for 413: the whole query fails), anything else is Unavailable (the data it
// was asked for is missing).
Status PeerFailure(const http::ClientResponse& r);
// The value of header `name` (case-insensitive) of `r`, empty when absent.
std::string HeaderOf(const http::ClientResponse& r, std::string_view name);

}  // namespace sediment::coordinator
