#include "coordinator/peer_client.h"

#include <simdjson.h>

#include <strings.h>

#include <thread>

namespace sediment::coordinator {
namespace {

class HttpPeerClient final : public PeerClient {
 public:
  explicit HttpPeerClient(std::function<std::string()> cluster_secret)
      : cluster_secret_(std::move(cluster_secret)) {}

  void Start(PeerCallKind kind, NodeId node, const std::string& address, const InternalQuery& q,
             const PeerCallOptions& options, std::shared_ptr<PeerSlot> slot) override {
    (void)node;
    http::FetchOptions fetch;
    fetch.timeout = options.timeout;
    fetch.progress_timeout = options.progress_timeout;
    if (options.progress_timeout.count() > 0) {
      fetch.progress_interval =
          std::max(options.progress_timeout / 5, std::chrono::milliseconds(50));
    }
    const std::string_view path = kind == PeerCallKind::kBuffers ? kBuffersPath : kPartialPath;
    std::thread([slot = std::move(slot), url = "http://" + address + std::string(path),
                 body = EncodeInternalQuery(q), secret = cluster_secret_(), fetch]() mutable {
      fetch.cancel = &slot->abandoned();
      slot->Deliver(
          http::Fetch("POST", url,
                      {{"Authorization", "Bearer " + secret}, {"Content-Type", "application/json"}},
                      body, fetch));
    }).detach();
  }

  void Cancel(const std::string& query_id, const std::set<std::string>& addresses) override {
    const std::string secret = cluster_secret_();
    for (const auto& address : addresses) {
      std::thread([url = "http://" + address + std::string(kCancelPath),
                   body = EncodeCancel(query_id), secret] {
        (void)http::Fetch(
            "POST", url,
            {{"Authorization", "Bearer " + secret}, {"Content-Type", "application/json"}}, body,
            std::chrono::seconds(5));
      }).detach();
    }
  }

 private:
  const std::function<std::string()> cluster_secret_;
};

}  // namespace

std::unique_ptr<PeerClient> NewHttpPeerClient(std::function<std::string()> cluster_secret) {
  return std::make_unique<HttpPeerClient>(std::move(cluster_secret));
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
