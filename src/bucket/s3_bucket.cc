#include "bucket/s3_bucket.h"

#include <curl/curl.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "bucket/s3_internal.h"

namespace sediment::bucket {

using namespace internal;  // NOLINT: this file is the helpers' only user

namespace {

constexpr uint64_t kMinPartSize = 5ull << 20;
constexpr uint64_t kMaxPartSize = 5ull << 30;
constexpr uint64_t kMaxParts = 10000;
constexpr size_t kMaxKeyBytes = 1024;
constexpr size_t kPoolMax = 16;
// SHA-256 of the empty payload.
constexpr char kEmptySha256[] = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

std::once_flag g_curl_once;
CURLcode g_curl_init = CURLE_OK;

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() &&
         (s.back() == ' ' || s.back() == '\t' || s.back() == '\r' || s.back() == '\n'))
    s.remove_suffix(1);
  return s;
}

double JitterUnit() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return std::uniform_real_distribution<double>(0.0, 1.0)(rng);
}

std::string GetEnv(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

}  // namespace

struct S3Bucket::Request {
  std::string method;    // GET, HEAD, PUT, POST, DELETE
  std::string full_key;  // prefixed key; empty: the bucket itself
  std::vector<std::pair<std::string, std::string>> query;
  std::string_view body;
  std::string content_type;
  std::string content_md5;     // base64, sent when non-empty
  std::string payload_sha256;  // hex; empty means the empty payload
  std::string what;            // "PUT s3://bucket/key" for messages
};

struct S3Bucket::Response {
  long status = 0;
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // lower-case names
  int64_t content_length = -1;

  std::string Header(std::string_view name) const {
    for (const auto& [k, v] : headers) {
      if (k == name) return v;
    }
    return {};
  }
};

// Easy handles with their live connections. Thread-safe.
class S3Bucket::HandlePool {
 public:
  ~HandlePool() {
    for (CURL* h : free_) curl_easy_cleanup(h);
  }
  CURL* Acquire() {
    {
      std::lock_guard lock(mu_);
      if (!free_.empty()) {
        CURL* h = free_.back();
        free_.pop_back();
        return h;
      }
    }
    return curl_easy_init();
  }
  // keep=false drops the handle and its connections (after transport errors).
  void Release(CURL* h, bool keep) {
    if (keep) {
      curl_easy_reset(h);
      std::lock_guard lock(mu_);
      if (free_.size() < kPoolMax) {
        free_.push_back(h);
        return;
      }
    }
    curl_easy_cleanup(h);
  }

 private:
  std::mutex mu_;
  std::vector<CURL*> free_;
};

Result<std::unique_ptr<S3Bucket>> S3Bucket::Open(S3Options o) {
  std::string scheme;
  if (o.endpoint.rfind("http://", 0) == 0) {
    scheme = "http";
  } else if (o.endpoint.rfind("https://", 0) == 0) {
    scheme = "https";
  } else {
    return Status::InvalidArgument("S3 endpoint '" + o.endpoint +
                                   "' must start with http:// or https://");
  }
  std::string rest = o.endpoint.substr(scheme.size() + 3);
  if (!rest.empty() && rest.back() == '/') rest.pop_back();
  if (rest.empty() || rest.find_first_of("/?#@ ") != std::string::npos) {
    return Status::InvalidArgument("S3 endpoint '" + o.endpoint +
                                   "' must be scheme://host[:port] without a path");
  }
  if (o.bucket.empty()) return Status::InvalidArgument("S3 bucket name is empty");
  if (o.bucket.find_first_of("/?#% \t") != std::string::npos) {
    return Status::InvalidArgument("S3 bucket name '" + o.bucket + "' is not valid");
  }
  if (o.region.empty() || o.region.find_first_of(": /") != std::string::npos) {
    return Status::InvalidArgument("S3 region '" + o.region + "' is not valid");
  }
  if (o.part_size < kMinPartSize || o.part_size > kMaxPartSize) {
    return Status::InvalidArgument("S3 part_size " + std::to_string(o.part_size) +
                                   " must be between 5 MiB and 5 GiB");
  }
  if (o.max_attempts < 1) return Status::InvalidArgument("S3 max_attempts must be >= 1");
  if (o.list_page_size < 1 || o.list_page_size > 1000) {
    return Status::InvalidArgument("S3 list_page_size must be in 1..1000");
  }
  if (o.access_key.empty()) {
    o.access_key = GetEnv("AWS_ACCESS_KEY_ID");
    o.secret_key = GetEnv("AWS_SECRET_ACCESS_KEY");
    o.session_token = GetEnv("AWS_SESSION_TOKEN");
    if (o.access_key.empty() || o.secret_key.empty()) {
      return Status::InvalidArgument(
          "S3 credentials missing: set the access and secret key in the options or "
          "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in the environment");
    }
  } else if (o.secret_key.empty()) {
    return Status::InvalidArgument("S3 access key given without a secret key");
  }
  std::call_once(g_curl_once, [] { g_curl_init = curl_global_init(CURL_GLOBAL_DEFAULT); });
  if (g_curl_init != CURLE_OK) {
    return Status::Internal(std::string("curl_global_init failed: ") +
                            curl_easy_strerror(g_curl_init));
  }
  auto b = std::unique_ptr<S3Bucket>(new S3Bucket(std::move(o)));
  b->scheme_ = scheme;
  b->host_ = rest;
  return b;
}

S3Bucket::S3Bucket(S3Options options)
    : options_(std::move(options)), pool_(std::make_unique<HandlePool>()) {}

S3Bucket::~S3Bucket() = default;

std::string S3Bucket::Describe() const {
  return "s3://" + options_.bucket + "/" + options_.prefix + " at " + options_.endpoint;
}

std::string S3Bucket::Url(const std::string& full_key, const std::string& query) const {
  std::string url = scheme_ + "://";
  if (options_.path_style) {
    url += host_ + "/" + UriEncode(options_.bucket, false);
    if (!full_key.empty()) url += "/" + UriEncode(full_key, true);
  } else {
    url += options_.bucket + "." + host_ + "/" + UriEncode(full_key, true);
  }
  if (!query.empty()) url += "?" + query;
  return url;
}

void S3Bucket::Sleep(std::chrono::milliseconds d) const {
  if (options_.sleep) {
    options_.sleep(d);
  } else {
    std::this_thread::sleep_for(d);
  }
}

Result<S3Bucket::Response> S3Bucket::PerformOnce(const Request& req, bool* retryable) {
  *retryable = false;
  CURL* h = pool_->Acquire();
  if (h == nullptr) return Status::Internal(req.what + ": curl_easy_init failed");
  const std::string url = Url(req.full_key, CanonicalQuery(req.query));
  const std::string sigv4 = "aws:amz:" + options_.region + ":s3";
  Response resp;
  char errbuf[CURL_ERROR_SIZE] = {0};

  curl_slist* headers = nullptr;
  auto add_header = [&headers](const std::string& line) {
    headers = curl_slist_append(headers, line.c_str());
  };
  // curl 7.88 signs x-amz-content-sha256 when it is given but does not add it for s3; S3 wants
  // it on every request and it is the payload hash that goes into the signature.
  add_header("x-amz-content-sha256: " +
             (req.payload_sha256.empty() ? std::string(kEmptySha256) : req.payload_sha256));
  // No "Expect:" line to suppress 100-continue: curl 7.88 would list the removed header among
  // the signed ones (an empty "expect" that the server never sees) and every signature fails.
  if (!req.content_md5.empty()) add_header("Content-MD5: " + req.content_md5);
  // A PUT or POST always names its content type: curl would otherwise add (and sign)
  // application/x-www-form-urlencoded, which makes some servers parse the body as a form.
  if (!req.content_type.empty()) {
    add_header("Content-Type: " + req.content_type);
  } else if (req.method == "PUT" || req.method == "POST") {
    add_header("Content-Type: application/octet-stream");
  }
  if (!options_.session_token.empty()) {
    add_header("x-amz-security-token: " + options_.session_token);
  }

  auto write_cb = +[](char* ptr, size_t size, size_t nmemb, void* userdata) -> size_t {
    static_cast<std::string*>(userdata)->append(ptr, size * nmemb);
    return size * nmemb;
  };
  auto header_cb = +[](char* buffer, size_t size, size_t nitems, void* userdata) -> size_t {
    auto* r = static_cast<Response*>(userdata);
    std::string_view line(buffer, size * nitems);
    if (line.rfind("HTTP/", 0) == 0) {
      r->headers.clear();  // a new response (after 100 Continue or a redirect)
    } else if (size_t colon = line.find(':'); colon != std::string_view::npos) {
      r->headers.emplace_back(Lower(Trim(line.substr(0, colon))),
                              std::string(Trim(line.substr(colon + 1))));
    }
    return size * nitems;
  };

  curl_easy_setopt(h, CURLOPT_URL, url.c_str());
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_PATH_AS_IS, 1L);  // keys like "a/../b" stay as they are
  curl_easy_setopt(h, CURLOPT_HTTP_VERSION, static_cast<long>(CURL_HTTP_VERSION_1_1));
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(options_.connect_timeout.count()));
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, static_cast<long>(options_.request_timeout.count()));
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(h, CURLOPT_AWS_SIGV4, sigv4.c_str());
  curl_easy_setopt(h, CURLOPT_USERNAME, options_.access_key.c_str());
  curl_easy_setopt(h, CURLOPT_PASSWORD, options_.secret_key.c_str());
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, write_cb);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &resp.body);
  curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, header_cb);
  curl_easy_setopt(h, CURLOPT_HEADERDATA, &resp);
  if (req.method == "GET") {
    curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
  } else if (req.method == "HEAD") {
    curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
  } else if (req.method == "PUT" || req.method == "POST") {
    // The body goes as "post fields" (not read by CURLOPT_UPLOAD): curl then asks for
    // 100-continue only above 1 MiB, where an upload mode would ask (and wait up to a second
    // on servers that never answer it) for every PUT. The buffer is not copied.
    curl_easy_setopt(h, CURLOPT_POST, 1L);
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(req.body.size()));
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, req.body.data());
    if (req.method == "PUT") curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, "PUT");
  } else {
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, req.method.c_str());
  }

  CURLcode rc = curl_easy_perform(h);
  curl_slist_free_all(headers);
  if (rc != CURLE_OK) {
    pool_->Release(h, false);
    *retryable = IsRetryableCurl(rc);
    std::string msg = req.what + " at " + options_.endpoint + ": " + curl_easy_strerror(rc);
    if (errbuf[0] != '\0') msg += std::string(" (") + errbuf + ")";
    return *retryable ? Status::Unavailable(msg) : Status::IOError(msg);
  }
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &resp.status);
  curl_off_t cl = -1;
  curl_easy_getinfo(h, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &cl);
  resp.content_length = cl;
  pool_->Release(h, true);
  return resp;
}

Result<S3Bucket::Response> S3Bucket::Call(const Request& req,
                                          const std::function<Status(const Response&)>& check) {
  Status last;
  for (int attempt = 0; attempt < options_.max_attempts; ++attempt) {
    if (attempt > 0) {
      ++retries_;
      Sleep(
          BackoffDelay(attempt - 1, options_.initial_backoff, options_.max_backoff, JitterUnit()));
    }
    ++attempts_;
    bool retryable = false;
    auto r = PerformOnce(req, &retryable);
    if (!r.ok()) {
      if (!retryable) return r.status();
      last = r.status();
      continue;
    }
    Response& resp = *r;
    if (resp.status >= 200 && resp.status < 300) {
      if (!check) return std::move(resp);
      Status st = check(resp);
      if (st.ok()) return std::move(resp);
      if (st.code() != StatusCode::kCorruption && st.code() != StatusCode::kUnavailable) return st;
      last = st;
      continue;
    }
    S3Error err = ParseError(resp.body);
    Status st = HttpErrorStatus(resp.status, err, req.what);
    if (!IsRetryableHttp(resp.status, err.code)) return st;
    last = st;
  }
  std::string msg =
      last.message() + " (after " + std::to_string(options_.max_attempts) + " attempts)";
  if (last.code() == StatusCode::kCorruption) return Status::Corruption(msg);
  return Status::Unavailable(msg);
}

namespace {

Status CheckKey(const std::string& key, const std::string& full_key) {
  if (key.empty()) return Status::InvalidArgument("S3: empty object key");
  if (full_key.size() > kMaxKeyBytes) {
    return Status::InvalidArgument("S3: key longer than 1024 bytes with the prefix: " + key);
  }
  return Status::OK();
}

}  // namespace

Status S3Bucket::Put(const std::string& key, std::string_view bytes) {
  const std::string full_key = options_.prefix + key;
  RETURN_IF_ERROR(CheckKey(key, full_key));
  if (bytes.size() > options_.multipart_threshold) return PutMultipart(full_key, bytes);
  const std::string md5 = Md5(bytes);
  Request req;
  req.method = "PUT";
  req.full_key = full_key;
  req.body = bytes;
  req.content_type = "application/octet-stream";
  req.content_md5 = Base64(md5);
  req.payload_sha256 = Sha256Hex(bytes);
  req.what = "PUT s3://" + options_.bucket + "/" + full_key;
  const std::string want = Hex(md5);
  auto r = Call(req, [&](const Response& resp) -> Status {
    std::string etag = resp.Header("etag");
    if (options_.verify_etag && IsMd5Etag(etag) && Lower(UnquoteEtag(etag)) != want) {
      return Status::Corruption(req.what + ": server ETag " + etag + " is not the MD5 " + want +
                                " of the " + std::to_string(bytes.size()) + " bytes sent");
    }
    return Status::OK();
  });
  return r.status();
}

Status S3Bucket::PutMultipart(const std::string& full_key, std::string_view bytes) {
  const std::string where = "s3://" + options_.bucket + "/" + full_key;
  uint64_t part_size = options_.part_size;
  while ((bytes.size() + part_size - 1) / part_size > kMaxParts) part_size *= 2;

  Request create;
  create.method = "POST";
  create.full_key = full_key;
  create.query = {{"uploads", ""}};
  create.content_type = "application/octet-stream";  // the object's content type
  create.what = "CreateMultipartUpload " + where;
  std::string upload_id;
  auto created = Call(create, [&](const Response& resp) -> Status {
    auto id = XmlElement(resp.body, "UploadId");
    if (!id || id->empty()) return Status::Corruption(create.what + ": no UploadId in the answer");
    auto decoded = XmlUnescape(*id);
    if (!decoded.ok()) return decoded.status();
    upload_id = *decoded;
    return Status::OK();
  });
  RETURN_IF_ERROR(created.status());

  auto fail = [&](const Status& st) {
    AbortMultipart(full_key, upload_id);
    return st;
  };
  std::vector<std::string> md5s;
  std::string complete_xml =
      "<CompleteMultipartUpload xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">";
  for (uint64_t off = 0, n = 1; off < bytes.size(); off += part_size, ++n) {
    std::string_view part = bytes.substr(off, std::min<uint64_t>(part_size, bytes.size() - off));
    std::string md5 = Md5(part);
    Request up;
    up.method = "PUT";
    up.full_key = full_key;
    up.query = {{"partNumber", std::to_string(n)}, {"uploadId", upload_id}};
    up.body = part;
    up.content_type = "application/octet-stream";
    up.content_md5 = Base64(md5);
    up.payload_sha256 = Sha256Hex(part);
    up.what = "UploadPart " + std::to_string(n) + " of " + where;
    const std::string want = Hex(md5);
    std::string etag;
    auto r = Call(up, [&](const Response& resp) -> Status {
      etag = resp.Header("etag");
      if (etag.empty()) return Status::Corruption(up.what + ": no ETag in the answer");
      if (options_.verify_etag && IsMd5Etag(etag) && Lower(UnquoteEtag(etag)) != want) {
        return Status::Corruption(up.what + ": server ETag " + etag + " is not the MD5 " + want);
      }
      return Status::OK();
    });
    if (!r.ok()) return fail(r.status());
    md5s.push_back(md5);
    complete_xml +=
        "<Part><PartNumber>" + std::to_string(n) + "</PartNumber><ETag>" + etag + "</ETag></Part>";
  }
  complete_xml += "</CompleteMultipartUpload>";

  const std::string want_etag = MultipartEtag(md5s);
  auto check_final_etag = [&](std::string_view etag, const std::string& what) -> Status {
    std::string_view e = UnquoteEtag(etag);
    if (options_.verify_etag && e.find('-') != std::string_view::npos && Lower(e) != want_etag) {
      return Status::Corruption(what + ": object ETag " + std::string(etag) +
                                " differs from the parts' " + want_etag);
    }
    return Status::OK();
  };
  Request done;
  done.method = "POST";
  done.full_key = full_key;
  done.query = {{"uploadId", upload_id}};
  done.body = complete_xml;
  done.content_type = "application/xml";
  done.content_md5 = Base64(Md5(complete_xml));
  done.payload_sha256 = Sha256Hex(complete_xml);
  done.what = "CompleteMultipartUpload " + where;
  auto r = Call(done, [&](const Response& resp) -> Status {
    // S3 may answer 200 and report a failure in the body.
    S3Error err = ParseError(resp.body);
    if (!err.code.empty()) {
      Status st = HttpErrorStatus(500, err, done.what);
      return IsRetryableHttp(500, err.code) ? Status::Unavailable(st.message()) : st;
    }
    auto etag = XmlElement(resp.body, "ETag");
    if (!etag) return Status::Corruption(done.what + ": no ETag in the answer");
    auto decoded = XmlUnescape(*etag);
    if (!decoded.ok()) return decoded.status();
    return check_final_etag(*decoded, done.what);
  });
  if (r.ok()) return Status::OK();
  if (r.status().code() == StatusCode::kNotFound) {
    // NoSuchUpload: an earlier attempt whose answer was lost may have completed the upload.
    Request head;
    head.method = "HEAD";
    head.full_key = full_key;
    head.what = "HEAD " + where;
    auto h = Call(head);
    if (h.ok() && h->content_length == static_cast<int64_t>(bytes.size()) &&
        check_final_etag(h->Header("etag"), head.what).ok() &&
        UnquoteEtag(h->Header("etag")).find('-') != std::string_view::npos) {
      return Status::OK();
    }
  }
  return fail(r.status());
}

void S3Bucket::AbortMultipart(const std::string& full_key, const std::string& upload_id) {
  Request req;
  req.method = "DELETE";
  req.full_key = full_key;
  req.query = {{"uploadId", upload_id}};
  req.what = "AbortMultipartUpload s3://" + options_.bucket + "/" + full_key;
  // Best effort: an upload left behind costs storage until a lifecycle rule removes it.
  (void)Call(req).status();
}

Result<std::string> S3Bucket::Get(const std::string& key) {
  const std::string full_key = options_.prefix + key;
  RETURN_IF_ERROR(CheckKey(key, full_key));
  Request req;
  req.method = "GET";
  req.full_key = full_key;
  req.what = "GET s3://" + options_.bucket + "/" + full_key;
  ASSIGN_OR_RETURN(
      Response resp, Call(req, [&](const Response& r) -> Status {
        if (r.content_length >= 0 && static_cast<uint64_t>(r.content_length) != r.body.size()) {
          return Status::Corruption(req.what + ": got " + std::to_string(r.body.size()) +
                                    " bytes, Content-Length " + std::to_string(r.content_length));
        }
        std::string etag = r.Header("etag");
        if (options_.verify_etag && IsMd5Etag(etag)) {
          std::string got = Hex(Md5(r.body));
          if (Lower(UnquoteEtag(etag)) != got) {
            return Status::Corruption(req.what + ": MD5 " + got +
                                      " of the bytes received is not the ETag " + etag);
          }
        }
        return Status::OK();
      }));
  return std::move(resp.body);
}

Result<uint64_t> S3Bucket::Head(const std::string& key) {
  const std::string full_key = options_.prefix + key;
  RETURN_IF_ERROR(CheckKey(key, full_key));
  Request req;
  req.method = "HEAD";
  req.full_key = full_key;
  req.what = "HEAD s3://" + options_.bucket + "/" + full_key;
  ASSIGN_OR_RETURN(Response resp, Call(req));
  if (resp.content_length < 0) return Status::IOError(req.what + ": no Content-Length");
  return static_cast<uint64_t>(resp.content_length);
}

Result<std::vector<ObjectInfo>> S3Bucket::List(const std::string& prefix) {
  const std::string full_prefix = options_.prefix + prefix;
  std::vector<ObjectInfo> out;
  std::set<std::string> tokens;
  std::string token;
  while (true) {
    Request req;
    req.method = "GET";
    req.query = {{"list-type", "2"}, {"max-keys", std::to_string(options_.list_page_size)}};
    if (!full_prefix.empty()) req.query.emplace_back("prefix", full_prefix);
    if (!token.empty()) req.query.emplace_back("continuation-token", token);
    req.what = "ListObjectsV2 s3://" + options_.bucket + "/" + full_prefix;
    ASSIGN_OR_RETURN(Response resp, Call(req));
    auto page = ParseListObjectsV2(resp.body);
    if (!page.ok()) return page.status().WithContext(req.what);
    for (auto& obj : page->objects) {
      if (obj.key.compare(0, full_prefix.size(), full_prefix) != 0) {
        return Status::Corruption(req.what + ": listed key " + obj.key +
                                  " lacks the requested prefix");
      }
      obj.key.erase(0, options_.prefix.size());
      out.push_back(std::move(obj));
    }
    if (!page->truncated) break;
    if (!tokens.insert(page->next_token).second) {
      return Status::Corruption(req.what + ": the server repeated a continuation token");
    }
    token = page->next_token;
  }
  std::sort(out.begin(), out.end(),
            [](const ObjectInfo& a, const ObjectInfo& b) { return a.key < b.key; });
  return out;
}

Status S3Bucket::Delete(const std::string& key) {
  const std::string full_key = options_.prefix + key;
  RETURN_IF_ERROR(CheckKey(key, full_key));
  Request req;
  req.method = "DELETE";
  req.full_key = full_key;
  req.what = "DELETE s3://" + options_.bucket + "/" + full_key;
  auto r = Call(req);
  if (!r.ok() && r.status().code() == StatusCode::kNotFound) return Status::OK();
  return r.status();
}

Status S3Bucket::CreateBucketIfMissing() {
  std::string body;
  if (options_.region != "us-east-1") {
    body =
        "<CreateBucketConfiguration xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
        "<LocationConstraint>" +
        options_.region + "</LocationConstraint></CreateBucketConfiguration>";
  }
  Request req;
  req.method = "PUT";
  req.body = body;
  if (!body.empty()) {
    req.content_type = "application/xml";
    req.content_md5 = Base64(Md5(body));
    req.payload_sha256 = Sha256Hex(body);
  }
  req.what = "CreateBucket s3://" + options_.bucket;
  auto r = Call(req);
  if (r.ok()) return Status::OK();
  if (r.status().subcode() == StatusSubcode::kBucketAlreadyOwned) return Status::OK();
  return r.status();
}

}  // namespace sediment::bucket
