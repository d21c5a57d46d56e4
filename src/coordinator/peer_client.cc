#include "coordinator/peer_client.h"

#include <simdjson.h>

#include <strings.h>

#include <set>

#include "coordinator/call_pool.h"

namespace sediment::coordinator {
namespace {

class HttpPeerClient final : public PeerClient {
 public:
  HttpPeerClient(std::function<std::string()> cluster_secret, http::PeerTls tls,
                 CallPoolOptions pool)
      : cluster_secret_(std::move(cluster_secret)), tls_(std::move(tls)), pool_(pool) {}

  // Abandons the calls in flight (each ends within 20 ms), refuses the queued ones, joins.
  ~HttpPeerClient() override {
    stopping_.store(true);
    {
      std::lock_guard lock(mu_);
      for (const auto& slot : in_flight_) slot->Abandon();
    }
    pool_.Shutdown();
  }

  void Start(PeerCallKind kind, NodeId node, const std::string& address, const InternalQuery& q,
             const PeerCallOptions& options, std::shared_ptr<PeerSlot> slot) override {
    (void)node;
    http::FetchOptions fetch = tls_.Options();
    fetch.timeout = options.timeout;
    fetch.progress_timeout = options.progress_timeout;
    if (options.progress_timeout.count() > 0) {
      fetch.progress_interval =
          std::max(options.progress_timeout / 5, std::chrono::milliseconds(50));
    }
    const std::string_view path = kind == PeerCallKind::kBuffers ? kBuffersPath : kPartialPath;
    pool_.Submit(
        [this, slot, url = tls_.Url(address, path), body = EncodeInternalQuery(q),
         secret = cluster_secret_(), fetch]() mutable {
          {
            std::lock_guard lock(mu_);
            in_flight_.insert(slot);
          }
          if (stopping_.load()) slot->Abandon();
          fetch.cancel = &slot->abandoned();
          slot->Deliver(http::Fetch(
              "POST", url,
              {{"Authorization", "Bearer " + secret}, {"Content-Type", "application/json"}}, body,
              fetch));
          std::lock_guard lock(mu_);
          in_flight_.erase(slot);
        },
        [slot] { slot->Deliver(Status::Unavailable("too many calls to other nodes in flight")); });
  }

  void Cancel(const std::string& query_id, const std::set<std::string>& addresses) override {
    const std::string secret = cluster_secret_();
    for (const auto& address : addresses) {
      pool_.Submit(
          [this, url = tls_.Url(address, kCancelPath), body = EncodeCancel(query_id), secret] {
            http::FetchOptions fetch = tls_.Options();
            fetch.timeout = std::chrono::seconds(5);
            fetch.cancel = &stopping_;
            (void)http::Fetch(
                "POST", url,
                {{"Authorization", "Bearer " + secret}, {"Content-Type", "application/json"}}, body,
                fetch);
          },
          nullptr);  // a cancel not sent: the peer stops at the query's deadline
    }
  }

 private:
  const std::function<std::string()> cluster_secret_;
  const http::PeerTls tls_;
  std::atomic<bool> stopping_{false};
  std::mutex mu_;
  std::set<std::shared_ptr<PeerSlot>> in_flight_;  // guarded by mu_
  CallPool pool_;  // last: its threads end before the members they use go
};

}  // namespace

std::unique_ptr<PeerClient> NewHttpPeerClient(std::function<std::string()> cluster_secret,
                                              http::PeerTls tls, CallPoolOptions pool) {
  return std::make_unique<HttpPeerClient>(std::move(cluster_secret), std::move(tls), pool);
}

Status PeerFailure(const http::ClientResponse& r) {
  std::string what = r.body.substr(0, 300);
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  std::string_view error;
  if (!parser.parse(r.body).get(doc) && !doc["error"].get(error)) what = std::string(error);
  if (r.status == 408) return Status::DeadlineExceeded(what);
  if (r.status == 413) return Status::ResourceExhausted(what);
  return Status::Unavailable("HTTP " + std::to_string(r.status) + ": " + what);
}

std::string HeaderOf(const http::ClientResponse& r, std::string_view name) {
  for (const auto& [k, v] : r.headers) {
    if (k.size() == name.size() && strncasecmp(k.data(), name.data(), name.size()) == 0) return v;
  }
  return "";
}

}  // namespace sediment::coordinator
