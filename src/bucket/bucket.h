// Bucket: an object store (S3 API or a test double) holding segment files and Global snapshots
// (DESIGN section 8). Keys are opaque strings chosen by the caller; the layout of keys is the
// caller's business.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace sediment::bucket {

struct ObjectInfo {
  std::string key;  // relative to the bucket's configured prefix
  uint64_t size = 0;
  // When the object was last written (S3 LastModified, the server's clock), ms since the epoch;
  // 0 = unknown.
  int64_t last_modified_ms = 0;

  bool operator==(const ObjectInfo&) const = default;
};

// Thread-safe: every method may be called from any thread concurrently. Keys are relative to the
// configured prefix. Transient failures (network, 5xx, throttling) come back as Unavailable after
// the implementation's retries; NotFound only means "no such object".
class Bucket {
 public:
  virtual ~Bucket() = default;
  // Stores bytes under key, replacing any previous object. Integrity: the server confirms the
  // bytes (Content-MD5 on every PUT / part; ETag compared). Multipart upload above the
  // implementation's threshold. Unavailable on network / 5xx / throttling after retries, other
  // codes for permanent errors.
  [[nodiscard]] virtual Status Put(const std::string& key, std::string_view bytes) = 0;
  // The object's bytes; NotFound when absent. Integrity: length equals Content-Length, and for a
  // non-multipart ETag (32 hex) the MD5 equals it (else Corruption after retries).
  [[nodiscard]] virtual Result<std::string> Get(const std::string& key) = 0;
  // Size of the object; NotFound when absent.
  [[nodiscard]] virtual Result<uint64_t> Head(const std::string& key) = 0;
  // Every object whose key starts with prefix (all pages followed), sorted by key, with its size
  // and (when the server reports it) its last-modified time.
  [[nodiscard]] virtual Result<std::vector<ObjectInfo>> List(const std::string& prefix) = 0;
  // Removes the object; OK also when absent.
  [[nodiscard]] virtual Status Delete(const std::string& key) = 0;
  // For logs/status: e.g. "s3://name/prefix at http://127.0.0.1:9000".
  virtual std::string Describe() const = 0;
};

}  // namespace sediment::bucket
