#include "bucket/s3_internal.h"

#include <curl/curl.h>
#include <openssl/evp.h>

#include <algorithm>
#include <charconv>

#include "common/coding.h"
#include "common/time_parse.h"

namespace sediment::bucket::internal {

namespace {

constexpr char kHex[] = "0123456789ABCDEF";
constexpr char kLowerHex[] = "0123456789abcdef";

bool IsUnreserved(unsigned char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '.' || c == '_' || c == '~';
}

// Finds the next element named `tag` at or after `from`. On success sets the raw content, the
// element's start ('<') and the position just past it.
bool FindElement(std::string_view xml, std::string_view tag, size_t from, std::string_view* content,
                 size_t* start, size_t* end) {
  size_t pos = from;
  while (true) {
    pos = xml.find('<', pos);
    if (pos == std::string_view::npos) return false;
    if (xml.compare(pos + 1, tag.size(), tag) != 0) {
      ++pos;
      continue;
    }
    size_t after = pos + 1 + tag.size();
    if (after >= xml.size()) return false;
    char c = xml[after];
    if (c != '>' && c != '/' && c != ' ' && c != '\t' && c != '\r' && c != '\n') {
      ++pos;
      continue;
    }
    size_t close = xml.find('>', after);
    if (close == std::string_view::npos) return false;
    *start = pos;
    if (xml[close - 1] == '/') {  // <tag/> or <tag attr="..."/>
      *content = std::string_view();
      *end = close + 1;
      return true;
    }
    std::string closing = "</" + std::string(tag) + ">";
    size_t stop = xml.find(closing, close + 1);
    if (stop == std::string_view::npos) return false;
    *content = xml.substr(close + 1, stop - close - 1);
    *end = stop + closing.size();
    return true;
  }
}

std::string Digest(const EVP_MD* md, std::string_view data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  // EVP_Digest only fails on allocation failure or an unavailable algorithm (FIPS builds without
  // MD5); either is a broken process, not an input error.
  if (EVP_Digest(data.data(), data.size(), out, &len, md, nullptr) != 1) std::abort();
  return std::string(reinterpret_cast<const char*>(out), len);
}

}  // namespace

std::string UriEncode(std::string_view s, bool keep_slash) {
  std::string out;
  out.reserve(s.size() * 3 / 2 + 8);
  for (unsigned char c : s) {
    if (IsUnreserved(c) || (keep_slash && c == '/')) {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 0xF]);
    }
  }
  return out;
}

std::string CanonicalQuery(std::vector<std::pair<std::string, std::string>> params) {
  for (auto& [k, v] : params) {
    k = UriEncode(k, false);
    v = UriEncode(v, false);
  }
  std::sort(params.begin(), params.end());
  std::string out;
  for (const auto& [k, v] : params) {
    if (!out.empty()) out.push_back('&');
    out += k;
    out.push_back('=');
    out += v;
  }
  return out;
}

Result<std::string> XmlUnescape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    char c = text[i];
    if (c != '&') {
      out.push_back(c);
      ++i;
      continue;
    }
    size_t semi = text.find(';', i);
    if (semi == std::string_view::npos || semi - i > 12) {
      return Status::Corruption("XML: unterminated entity reference");
    }
    std::string_view ent = text.substr(i + 1, semi - i - 1);
    if (ent == "amp") {
      out.push_back('&');
    } else if (ent == "lt") {
      out.push_back('<');
    } else if (ent == "gt") {
      out.push_back('>');
    } else if (ent == "quot") {
      out.push_back('"');
    } else if (ent == "apos") {
      out.push_back('\'');
    } else if (ent.size() >= 2 && ent[0] == '#') {
      bool hex = ent[1] == 'x' || ent[1] == 'X';
      std::string_view digits = ent.substr(hex ? 2 : 1);
      uint32_t cp = 0;
      auto [p, ec] =
          std::from_chars(digits.data(), digits.data() + digits.size(), cp, hex ? 16 : 10);
      if (digits.empty() || ec != std::errc() || p != digits.data() + digits.size() ||
          cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
        return Status::Corruption("XML: bad character reference &" + std::string(ent) + ";");
      }
      AppendUtf8(cp, &out);
    } else {
      return Status::Corruption("XML: unknown entity &" + std::string(ent) + ";");
    }
    i = semi + 1;
  }
  return out;
}

std::optional<std::string_view> XmlElement(std::string_view xml, std::string_view tag) {
  std::string_view content;
  size_t start = 0, end = 0;
  if (!FindElement(xml, tag, 0, &content, &start, &end)) return std::nullopt;
  return content;
}

std::vector<std::string_view> XmlElements(std::string_view xml, std::string_view tag) {
  std::vector<std::string_view> out;
  std::string_view content;
  size_t pos = 0, start = 0, end = 0;
  while (FindElement(xml, tag, pos, &content, &start, &end)) {
    out.push_back(content);
    pos = end;
  }
  return out;
}

Result<ListPage> ParseListObjectsV2(std::string_view xml) {
  auto root = XmlElement(xml, "ListBucketResult");
  if (!root) return Status::Corruption("ListObjectsV2: no ListBucketResult in the answer");
  ListPage page;
  for (std::string_view contents : XmlElements(*root, "Contents")) {
    auto key = XmlElement(contents, "Key");
    auto size = XmlElement(contents, "Size");
    if (!key || !size) return Status::Corruption("ListObjectsV2: Contents without Key or Size");
    ASSIGN_OR_RETURN(std::string decoded, XmlUnescape(*key));
    uint64_t n = 0;
    auto [p, ec] = std::from_chars(size->data(), size->data() + size->size(), n);
    if (size->empty() || ec != std::errc() || p != size->data() + size->size()) {
      return Status::Corruption("ListObjectsV2: bad Size '" + std::string(*size) + "' for key " +
                                decoded);
    }
    int64_t modified_ms = 0;
    if (auto modified = XmlElement(contents, "LastModified")) {
      auto ms = ParseIso8601Millis(*modified);
      if (!ms || *ms <= 0) {
        return Status::Corruption("ListObjectsV2: bad LastModified '" + std::string(*modified) +
                                  "' for key " + decoded);
      }
      modified_ms = *ms;
    }
    page.objects.push_back({std::move(decoded), n, modified_ms});
  }
  // IsTruncated and NextContinuationToken are looked up among the top-level elements only (the
  // document without its Contents blocks).
  std::string top;
  {
    std::string_view rest = *root, content;
    size_t start = 0, end = 0;
    while (FindElement(rest, "Contents", 0, &content, &start, &end)) {
      top.append(rest.substr(0, start));
      rest = rest.substr(end);
    }
    top.append(rest);
  }
  auto truncated = XmlElement(top, "IsTruncated");
  page.truncated = truncated && *truncated == "true";
  if (auto token = XmlElement(top, "NextContinuationToken")) {
    ASSIGN_OR_RETURN(page.next_token, XmlUnescape(*token));
  }
  if (page.truncated && page.next_token.empty()) {
    return Status::Corruption("ListObjectsV2: IsTruncated without NextContinuationToken");
  }
  return page;
}

S3Error ParseError(std::string_view xml) {
  S3Error e;
  auto root = XmlElement(xml, "Error");
  if (!root) return e;
  if (auto code = XmlElement(*root, "Code")) {
    auto d = XmlUnescape(*code);
    e.code = d.ok() ? *d : std::string(*code);
  }
  if (auto msg = XmlElement(*root, "Message")) {
    auto d = XmlUnescape(*msg);
    e.message = d.ok() ? *d : std::string(*msg);
  }
  return e;
}

bool IsRetryableHttp(long http_status, std::string_view code) {
  if (http_status >= 500 || http_status == 408 || http_status == 429) return true;
  static constexpr std::string_view kCodes[] = {
      "SlowDown",   "RequestTimeout",      "InternalError",        "ServiceUnavailable",
      "Throttling", "ThrottlingException", "RequestThrottled",     "TooManyRequestsException",
      "BadDigest",  "IncompleteBody",      "RequestLimitExceeded",
  };
  return std::find(std::begin(kCodes), std::end(kCodes), code) != std::end(kCodes);
}

bool IsRetryableCurl(int curl_code) {
  switch (static_cast<CURLcode>(curl_code)) {
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_COULDNT_CONNECT:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_WEIRD_SERVER_REPLY:
    case CURLE_AGAIN:
      return true;
    default:
      return false;
  }
}

std::chrono::milliseconds BackoffDelay(int retry, std::chrono::milliseconds initial,
                                       std::chrono::milliseconds max, double unit) {
  int64_t cap = std::max<int64_t>(initial.count(), 0);
  for (int i = 0; i < retry && cap < max.count(); ++i) cap *= 2;
  cap = std::min<int64_t>(cap, max.count());
  unit = std::clamp(unit, 0.0, 1.0);
  return std::chrono::milliseconds(cap / 2 + static_cast<int64_t>(unit * (cap - cap / 2)));
}

Status HttpErrorStatus(long http_status, const S3Error& error, std::string_view context) {
  std::string msg = std::string(context) + ": HTTP " + std::to_string(http_status);
  if (!error.code.empty()) msg += " " + error.code;
  if (!error.message.empty()) msg += ": " + error.message;
  const std::string& code = error.code;
  if (http_status == 404) {
    if (code == "NoSuchBucket") return Status::IOError(msg + " (the bucket does not exist)");
    if (code.empty() || code == "NoSuchKey" || code == "NoSuchUpload" || code == "NotFound") {
      return Status::NotFound(msg);
    }
    return Status::IOError(msg);
  }
  if (code == "BadDigest" || code == "InvalidDigest") return Status::Corruption(msg);
  if (http_status == 413 || code == "EntityTooLarge") return Status::TooLarge(msg);
  if (IsRetryableHttp(http_status, code)) return Status::Unavailable(msg);
  if (code == "BucketAlreadyOwnedByYou") {
    return Status::AlreadyExists(msg).WithSubcode(StatusSubcode::kBucketAlreadyOwned);
  }
  if (http_status == 401) return Status::Unauthenticated(msg);
  if (http_status == 403) return Status::PermissionDenied(msg);
  if (http_status >= 400 && http_status < 500) return Status::InvalidArgument(msg);
  return Status::IOError(msg);
}

std::string Md5(std::string_view data) { return Digest(EVP_md5(), data); }

std::string Sha256Hex(std::string_view data) { return Hex(Digest(EVP_sha256(), data)); }

std::string Hex(std::string_view raw) {
  std::string out;
  out.reserve(raw.size() * 2);
  for (unsigned char c : raw) {
    out.push_back(kLowerHex[c >> 4]);
    out.push_back(kLowerHex[c & 0xF]);
  }
  return out;
}

std::string Base64(std::string_view raw) {
  std::string out(4 * ((raw.size() + 2) / 3) + 1, '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(raw.data()),
                          static_cast<int>(raw.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

std::string_view UnquoteEtag(std::string_view etag) {
  if (etag.size() >= 2 && etag.front() == '"' && etag.back() == '"') {
    return etag.substr(1, etag.size() - 2);
  }
  return etag;
}

bool IsMd5Etag(std::string_view etag) {
  etag = UnquoteEtag(etag);
  return etag.size() == 32 && std::all_of(etag.begin(), etag.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
         });
}

std::string MultipartEtag(const std::vector<std::string>& part_md5s) {
  std::string concat;
  for (const auto& m : part_md5s) concat += m;
  return Hex(Md5(concat)) + "-" + std::to_string(part_md5s.size());
}

}  // namespace sediment::bucket::internal
