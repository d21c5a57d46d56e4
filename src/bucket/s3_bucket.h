// S3Bucket: a Bucket on any S3-compatible server, through libcurl (its built-in AWS SigV4 signing)
// and OpenSSL digests.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "bucket/bucket.h"

namespace sediment::bucket {

struct S3Options {
  std::string endpoint;  // "http://host:port" or "https://host[:port]" (no path)
  std::string region = "us-east-1";
  std::string bucket;
  std::string prefix;      // prepended to every key, e.g. "sediment/"; may be empty
  bool path_style = true;  // http://host/bucket/key; false: http://bucket.host/key
  // Empty access_key: AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN are read.
  std::string access_key, secret_key, session_token;
  uint64_t multipart_threshold = 16ull << 20;  // objects larger than this go multipart
  uint64_t part_size = 8ull << 20;             // >= 5 MiB (S3's minimum for all parts but the last)
  int max_attempts = 5;                        // per request, first try included
  std::chrono::milliseconds initial_backoff{200}, max_backoff{5000};
  std::chrono::milliseconds connect_timeout{5000}, request_timeout{60000};
  int list_page_size = 1000;  // max-keys of each ListObjectsV2 page, 1..1000
  // Compare MD5 ETags with the bytes sent / received. Turn off only for servers whose ETags are
  // not MD5s of the content (S3 with SSE-KMS / SSE-C); Content-MD5 is always sent.
  bool verify_etag = true;
  // How a retry waits; empty means std::this_thread::sleep_for. For tests.
  std::function<void(std::chrono::milliseconds)> sleep;
};

// Thread-safe (see Bucket). Each request uses an easy handle taken from a small pool; handles
// keep their connections alive between requests.
class S3Bucket final : public Bucket {
 public:
  // Validates the options (endpoint scheme and form, bucket name, part sizes, credentials) and
  // initialises libcurl once per process. Touches no network.
  static Result<std::unique_ptr<S3Bucket>> Open(S3Options options);
  ~S3Bucket() override;

  Status Put(const std::string& key, std::string_view bytes) override;
  Result<std::string> Get(const std::string& key) override;
  Result<uint64_t> Head(const std::string& key) override;
  Result<std::vector<ObjectInfo>> List(const std::string& prefix) override;
  Status Delete(const std::string& key) override;
  std::string Describe() const override;

  // Creates the bucket (in options.region) unless this account already owns it.
  [[nodiscard]] Status CreateBucketIfMissing();

  // Counters since Open: HTTP attempts made (each retry counts) and retries among them.
  struct Stats {
    uint64_t attempts = 0;
    uint64_t retries = 0;
  };
  Stats stats() const { return {attempts_.load(), retries_.load()}; }

  const S3Options& options() const { return options_; }

 private:
  struct Request;
  struct Response;
  class HandlePool;

  explicit S3Bucket(S3Options options);

  // Full request URL for an object key (already prefixed) or the bucket itself (empty key).
  std::string Url(const std::string& full_key, const std::string& query) const;
  // One HTTP exchange, no retries. A non-OK Status only for transport failures; *retryable says
  // whether the failure is transient.
  Result<Response> PerformOnce(const Request& req, bool* retryable);
  // The request with retries and backoff. `check` (optional) validates a 2xx answer; a Corruption
  // from it is retried like a transient error and returned when attempts run out.
  Result<Response> Call(const Request& req,
                        const std::function<Status(const Response&)>& check = nullptr);
  Status PutMultipart(const std::string& full_key, std::string_view bytes);
  void AbortMultipart(const std::string& full_key, const std::string& upload_id);
  void Sleep(std::chrono::milliseconds d) const;

  const S3Options options_;
  std::string scheme_, host_;  // from the endpoint: "http", "127.0.0.1:9000"
  std::unique_ptr<HandlePool> pool_;
  std::atomic<uint64_t> attempts_{0}, retries_{0};
};

}  // namespace sediment::bucket
