// Deterministic synthetic log generator for benchmarks and tests.
//
// Contract: the output is a pure function of GenOptions (format, seed, start_ms, rate, needle,
// needle_every) and of the number of lines asked for; it does not depend on the platform, the
// standard library or the buffer sizes used by the caller (own PRNG, no std distributions, no
// locale). Every line ends with '\n' and contains no other '\n'. Not thread-safe: one generator per
// thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace sediment::bench {

enum class LogFormat {
  kApache,  // Apache combined access log
  kJson,    // one JSON object per line: application log (level, service, trace ids, duration)
  kSyslog,  // RFC 5424
};

std::optional<LogFormat> ParseLogFormat(std::string_view name);
const char* LogFormatName(LogFormat format);

// "1000", "64k", "5M", "1G" (binary multiples: k = 1024); an optional trailing "B"/"iB" is allowed.
Result<uint64_t> ParseByteSize(std::string_view text);

struct GenOptions {
  LogFormat format = LogFormat::kApache;
  uint64_t seed = 1;
  // Timestamp of the first line, ms since epoch UTC; lines advance by 1000 / rate ms on average.
  int64_t start_ms = 1704067200000;  // 2024-01-01T00:00:00Z
  double rate = 1000.0;              // lines per second of log time, > 0
  // When non-empty, line numbers (1-based) that are multiples of needle_every carry `needle` once,
  // as a separate token; no other line contains it unless the needle is a common word.
  std::string needle;
  uint64_t needle_every = 0;
};

// Checks ranges: rate > 0, needle without '\n', '"' or '\\', needle_every > 0 iff needle is set.
Status ValidateOptions(const GenOptions& options);

class LogGenerator {
 public:
  // Upper bound of one line's size (needle excluded); WriteLine needs MaxLineBytes() of room.
  static constexpr size_t kMaxLineBytesBase = 2048;

  // `options` must pass ValidateOptions.
  explicit LogGenerator(GenOptions options);

  size_t MaxLineBytes() const { return kMaxLineBytesBase + options_.needle.size(); }

  // Writes the next line (with its '\n') at dst, which has at least MaxLineBytes() bytes of room;
  // returns its length.
  size_t WriteLine(char* dst);
  // Appends the next line to *out.
  void AppendLine(std::string* out);

  uint64_t lines() const { return lines_; }
  uint64_t needles() const { return needles_; }

 private:
  uint64_t Next();
  uint32_t Below(uint32_t n);   // uniform in [0, n)
  uint32_t Skewed(uint32_t n);  // in [0, n), small values much more likely (Zipf-like)
  const std::string& SecondStamp(int64_t second, int kind);

  char* WriteApache(char* p, bool needle, int64_t ms);
  char* WriteJson(char* p, bool needle, int64_t ms);
  char* WriteSyslog(char* p, bool needle, int64_t ms);

  GenOptions options_;
  uint64_t state_[4];
  uint64_t lines_ = 0;
  uint64_t needles_ = 0;
  std::vector<std::string> client_ips_;
  std::vector<std::string> hosts_;
  // Cached formatted second for each timestamp kind (apache / iso).
  int64_t cached_second_[2] = {INT64_MIN, INT64_MIN};
  std::string cached_stamp_[2];
};

}  // namespace sediment::bench
