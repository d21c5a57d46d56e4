// Pure helpers of S3Bucket (no I/O), exposed for tests: key and query encoding, the little XML
// that S3 answers with, retry classification, backoff, error mapping and digests.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bucket/bucket.h"
#include "common/status.h"

namespace sediment::bucket::internal {

// RFC 3986 percent-encoding as SigV4 and S3 want it: A-Z a-z 0-9 - . _ ~ stay, every other byte
// becomes %XX (upper-case hex); '/' stays when keep_slash (object key paths).
std::string UriEncode(std::string_view s, bool keep_slash);

// A query string whose parameters are encoded with UriEncode and sorted by name (then value), so
// that the URL is already in SigV4's canonical form ("uploads" is written "uploads=").
std::string CanonicalQuery(std::vector<std::pair<std::string, std::string>> params);

// Decodes &amp; &lt; &gt; &quot; &apos; and numeric references (&#NN; &#xHH;, as UTF-8). A
// malformed or unknown reference is an error.
Result<std::string> XmlUnescape(std::string_view text);

// The raw (still escaped) content of the first element named `tag` at any depth, searching from
// the start of `xml`; nullopt when there is none. <tag/> has empty content.
std::optional<std::string_view> XmlElement(std::string_view xml, std::string_view tag);
// The raw contents of every element named `tag`, in document order (not nested in each other).
std::vector<std::string_view> XmlElements(std::string_view xml, std::string_view tag);

// One page of a ListObjectsV2 answer. Keys are entity-decoded and still carry the bucket prefix.
struct ListPage {
  std::vector<ObjectInfo> objects;
  bool truncated = false;
  std::string next_token;  // NextContinuationToken (decoded); non-empty when truncated
};
// Corruption when the document is not a ListBucketResult, a Contents lacks Key or a numeric Size,
// has a LastModified that is not an ISO-8601 time, or IsTruncated is true without a
// NextContinuationToken. A Contents without LastModified has last_modified_ms 0 (unknown).
Result<ListPage> ParseListObjectsV2(std::string_view xml);

// <Error><Code>..</Code><Message>..</Message></Error>; empty fields when absent.
struct S3Error {
  std::string code;
  std::string message;
};
S3Error ParseError(std::string_view xml);

// Whether a request that got this HTTP status and S3 error code is worth repeating: 5xx, 408, 429
// and throttling / timeout / transient codes (SlowDown, RequestTimeout, InternalError,
// ServiceUnavailable, Throttling*, BadDigest, IncompleteBody, ...). Other 4xx are not.
bool IsRetryableHttp(long http_status, std::string_view code);
// Whether a libcurl error (CURLcode value) is a transient transport failure (refused, reset,
// timed out, DNS, TLS handshake, empty or short reply), as opposed to a configuration error.
bool IsRetryableCurl(int curl_code);

// The wait before retry number `retry` (0 for the first retry): with cap = min(max, initial *
// 2^retry), returns cap/2 + unit * cap/2 ("equal jitter"; unit in [0, 1) drawn by the caller).
std::chrono::milliseconds BackoffDelay(int retry, std::chrono::milliseconds initial,
                                       std::chrono::milliseconds max, double unit);

// Maps a final (non-retried or retries exhausted) HTTP error to a Status whose message holds
// `context` (operation and key), the HTTP status, S3's code and message:
// 404 NoSuchKey / NoSuchUpload / empty body -> NotFound; 404 NoSuchBucket -> IOError;
// 401 -> Unauthenticated; 403 -> PermissionDenied; 413 / EntityTooLarge -> TooLarge;
// BadDigest / InvalidDigest -> Corruption; retryable statuses -> Unavailable; other 4xx ->
// InvalidArgument; anything else (3xx redirects to another region, ...) -> IOError.
Status HttpErrorStatus(long http_status, const S3Error& error, std::string_view context);

// Digests. Md5 returns the 16 raw bytes.
std::string Md5(std::string_view data);
std::string Sha256Hex(std::string_view data);
std::string Hex(std::string_view raw);
std::string Base64(std::string_view raw);
// ETag without surrounding quotes (S3 sends "abc..." including the quotes).
std::string_view UnquoteEtag(std::string_view etag);
// True when the (unquoted) ETag is 32 hex digits, i.e. the MD5 of a single-PUT object.
bool IsMd5Etag(std::string_view etag);
// The ETag S3 gives a multipart object: hex(MD5(md5(part 1) || ... || md5(part n))) + "-n".
std::string MultipartEtag(const std::vector<std::string>& part_md5s);

}  // namespace sediment::bucket::internal
