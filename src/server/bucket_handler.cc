// Bucket storage wiring of a node (DESIGN section 8, P3/P4): opening the S3 bucket, disaster
// recovery from it before Global opens, the upload of Global snapshots and the collection of
// bucket objects no snapshot or state needs (by the maintenance leader), and the bucket's part of
// the status pages.
#include <spdlog/spdlog.h>
#include <sys/statvfs.h>

#include <algorithm>
#include <chrono>
#include <set>

#include "bucket/s3_bucket.h"
#include "common/json_writer.h"
#include "global/segment_record.h"
#include "server/server_impl.h"

namespace sediment {
namespace {

using Steady = std::chrono::steady_clock;

}  // namespace

Status Server::Impl::OpenBucket() {
  if (config.bucket_endpoint.empty()) {
    if (config.recover_from_bucket) {
      return Status::InvalidArgument("--recover-from-bucket needs bucket storage (--bucket-*)");
    }
    if (config.cache_max_bytes > 0 || config.cache_max_percent > 0) {
      return Status::InvalidArgument(
          "--cache-max-bytes / --cache-max-percent need bucket storage (--bucket-endpoint): "
          "without a bucket every local copy is needed");
    }
    return Status::OK();
  }
  bucket::S3Options o;
  o.endpoint = config.bucket_endpoint;
  o.region = config.bucket_region;
  o.bucket = config.bucket_name;
  o.prefix = config.bucket_prefix;
  o.path_style = config.bucket_path_style;
  o.access_key = config.bucket_access_key;
  o.secret_key = config.bucket_secret_key;
  auto b = bucket::S3Bucket::Open(o);
  if (!b.ok()) return b.status().WithContext("bucket storage");
  if (config.bucket_create) {
    RETURN_IF_ERROR((*b)->CreateBucketIfMissing().WithContext("creating the bucket"));
  }
  bucket_location = (*b)->Describe();
  bucket = std::move(b).value();
  spdlog::info("bucket storage: {}", bucket_location);
  return Status::OK();
}

uint64_t Server::Impl::CacheBoundBytes() const {
  uint64_t bound = config.cache_max_bytes;
  if (config.cache_max_percent > 0) {
    struct statvfs fs {};
    if (::statvfs(config.data_dir.c_str(), &fs) == 0) {
      const double total = static_cast<double>(fs.f_blocks) * static_cast<double>(fs.f_frsize);
      const auto pct = static_cast<uint64_t>(total * config.cache_max_percent / 100.0);
      bound = bound == 0 ? pct : std::min(bound, pct);
    } else {
      spdlog::warn("--cache-max-percent: cannot read the size of {}'s file system",
                   config.data_dir);
    }
  }
  return bound;
}

}  // namespace sediment
