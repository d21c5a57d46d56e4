#include "ingest/ingest.h"

#include <random>

#include <charconv>
#include <cmath>
#include <exception>
#include <functional>
#include <future>
#include <string>
#include <utility>

#include "common/clock.h"
#include "ingest/internal.h"

namespace sediment::ingest {
namespace internal {

namespace {
// 0001-01-01T00:00:00Z and 9999-12-31T23:59:59.999Z.
constexpr int64_t kMinMillis = -62135596800000;
constexpr int64_t kMaxMillis = 253402300799999;
constexpr double kSecondsBelow = 1e11;

std::optional<int64_t> InRange(int64_t ms) {
  if (ms < kMinMillis || ms > kMaxMillis) return std::nullopt;
  return ms;
}

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
}  // namespace

std::vector<Event>* Builder::Events(std::vector<std::pair<std::string, std::string>> tags) {
  Datasource ds;
  ds.repo = options_.repo;
  ds.tags = std::move(tags);
  ds.Normalize();
  std::string key = ds.Key();
  auto it = by_key_.find(key);
  if (it != by_key_.end()) return &groups_[it->second].events;
  by_key_.emplace(std::move(key), groups_.size());
  groups_.push_back(Group{std::move(ds), {}});
  return &groups_.back().events;
}

ParseResult Builder::Finish() {
  ParseResult result;
  for (Group& g : groups_) {
    std::vector<Event>& events = g.events;
    result.event_count += events.size();
    size_t begin = 0;
    while (begin < events.size()) {
      size_t end = begin;
      size_t bytes = 0;
      while (end < events.size()) {
        size_t sz = events[end].ByteSize();
        if (end > begin && bytes + sz > options_.max_message_bytes) break;
        bytes += sz;
        ++end;
      }
      IngestMessage msg;
      msg.datasource = g.datasource;
      msg.events.reserve(end - begin);
      for (size_t i = begin; i < end; ++i) msg.events.push_back(std::move(events[i]));
      result.messages.push_back(std::move(msg));
      begin = end;
    }
  }
  groups_.clear();
  by_key_.clear();
  return result;
}

Status CheckRawSize(size_t raw_bytes, const ParseOptions& options, const std::string& where) {
  if (raw_bytes <= options.max_event_bytes) return Status::OK();
  return Status::TooLarge(where + ": @rawstring of " + std::to_string(raw_bytes) +
                          " bytes exceeds the event limit of " +
                          std::to_string(options.max_event_bytes) + " bytes");
}

Status CheckEventBytes(size_t raw_bytes, size_t event_bytes, const ParseOptions& options,
                       const std::string& where) {
  RETURN_IF_ERROR(CheckRawSize(raw_bytes, options, where));
  if (event_bytes <= options.max_event_bytes) return Status::OK();
  return Status::TooLarge(where + ": event of " + std::to_string(event_bytes) +
                          " bytes exceeds the event limit of " +
                          std::to_string(options.max_event_bytes) + " bytes");
}

Status CheckEventSize(const Event& event, const ParseOptions& options, const std::string& where) {
  return CheckEventBytes(event.raw.size(), event.ByteSize(), options, where);
}

void DedupFields(std::vector<Field>* fields) {
  std::vector<Field>& f = *fields;
  const size_t n = f.size();
  if (n < 2) return;
  size_t w = 0;
  if (n <= 24) {
    for (size_t i = 0; i < n; ++i) {
      size_t k = 0;
      while (k < w && f[k].name != f[i].name) ++k;
      if (k < w) {
        f[k].value = std::move(f[i].value);
      } else {
        if (w != i) f[w] = std::move(f[i]);
        ++w;
      }
    }
  } else {
    // Views point at names already in their final slot [0, w), which are never moved again.
    std::unordered_map<std::string_view, size_t> seen;
    seen.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      auto it = seen.find(f[i].name);
      if (it != seen.end()) {
        f[it->second].value = std::move(f[i].value);
      } else {
        if (w != i) f[w] = std::move(f[i]);
        seen.emplace(f[w].name, w);
        ++w;
      }
    }
  }
  f.resize(w);
}

std::optional<int64_t> EpochFromInt(int64_t v, EpochUnit unit) {
  bool seconds = unit == EpochUnit::kSeconds || (v > -kSecondsBelow && v < kSecondsBelow);
  if (!seconds) return InRange(v);
  if (v < kMinMillis / 1000 || v > kMaxMillis / 1000) return std::nullopt;
  return InRange(v * 1000);
}

std::optional<int64_t> EpochFromDouble(double v, EpochUnit unit) {
  if (!std::isfinite(v)) return std::nullopt;
  bool seconds = unit == EpochUnit::kSeconds || std::fabs(v) < kSecondsBelow;
  double ms = seconds ? std::round(v * 1000.0) : std::trunc(v);
  if (ms < static_cast<double>(kMinMillis) || ms > static_cast<double>(kMaxMillis)) {
    return std::nullopt;
  }
  return static_cast<int64_t>(ms);
}

std::optional<int64_t> ParseEpochText(std::string_view s, EpochUnit unit) {
  std::string_view t = s;
  bool neg = false;
  if (!t.empty() && (t[0] == '-' || t[0] == '+')) {
    neg = t[0] == '-';
    t.remove_prefix(1);
  }
  size_t i = 0;
  int64_t whole = 0;
  size_t whole_digits = 0;
  while (i < t.size() && IsDigit(t[i])) {
    if (whole_digits >= 16) return std::nullopt;  // beyond year 9999 in any unit
    whole = whole * 10 + (t[i] - '0');
    ++whole_digits;
    ++i;
  }
  int64_t frac_ms = 0;
  size_t frac_digits = 0;
  if (i < t.size() && t[i] == '.') {
    ++i;
    int64_t scale = 100;
    while (i < t.size() && IsDigit(t[i])) {
      frac_ms += (t[i] - '0') * scale;
      scale /= 10;
      ++frac_digits;
      ++i;
    }
    if (frac_digits == 0) return std::nullopt;
  }
  if (whole_digits == 0 && frac_digits == 0) return std::nullopt;
  if (i < t.size()) {
    if (t[i] != 'e' && t[i] != 'E') return std::nullopt;
    double d = 0;
    auto [ptr, ec] = std::from_chars(t.data(), t.data() + t.size(), d);
    if (ec != std::errc() || ptr != t.data() + t.size()) return std::nullopt;
    return EpochFromDouble(neg ? -d : d, unit);
  }
  bool seconds = unit == EpochUnit::kSeconds || whole < static_cast<int64_t>(kSecondsBelow);
  int64_t ms;
  if (seconds) {
    if (whole > kMaxMillis / 1000 + 1) return std::nullopt;
    ms = whole * 1000 + frac_ms;
  } else {
    ms = whole;
  }
  return InRange(neg ? -ms : ms);
}

std::string TagName(std::string_view name) {
  if (!name.empty() && name[0] == '#') return std::string(name);
  std::string out;
  out.reserve(name.size() + 1);
  out.push_back('#');
  out.append(name);
  return out;
}

}  // namespace internal

namespace {
bool IsBlank(std::string_view s) {
  for (char c : s) {
    if (c != ' ' && c != '\t' && c != '\n' && c != '\r') return false;
  }
  return true;
}
}  // namespace

std::optional<Format> FormatForPath(std::string_view path) {
  while (path.size() > 1 && path.back() == '/') path.remove_suffix(1);
  if (path == "/api/v1/ingest/humio-structured") return Format::kHumioStructured;
  if (path == "/api/v1/ingest/humio-unstructured") return Format::kHumioUnstructured;
  if (path == "/api/v1/ingest/raw") return Format::kRaw;
  if (path == "/api/v1/ingest/hec" || path == "/services/collector" ||
      path == "/services/collector/event" || path == "/services/collector/event/1.0") {
    return Format::kHecEvent;
  }
  if (path == "/api/v1/ingest/hec/raw" || path == "/services/collector/raw" ||
      path == "/services/collector/raw/1.0") {
    return Format::kHecRaw;
  }
  if (path == "/api/v1/ingest/otlp/v1/logs" || path == "/v1/logs") return Format::kOtlpLogs;
  if (path == "/api/v1/ingest/elastic-bulk" || path == "/_bulk") return Format::kElasticBulk;
  // POST /{index}/_bulk: one non-empty segment before "/_bulk".
  if (path.size() > 7 && path.substr(path.size() - 6) == "/_bulk" && path[0] == '/' &&
      path.find('/', 1) == path.size() - 6) {
    return Format::kElasticBulk;
  }
  if (path == "/api/v1/ingest/json") return Format::kJson;
  return std::nullopt;
}

const char* FormatName(Format format) {
  switch (format) {
    case Format::kHumioStructured:
      return "humio-structured";
    case Format::kHumioUnstructured:
      return "humio-unstructured";
    case Format::kRaw:
      return "raw";
    case Format::kHecEvent:
      return "hec";
    case Format::kHecRaw:
      return "hec-raw";
    case Format::kOtlpLogs:
      return "otlp-logs";
    case Format::kElasticBulk:
      return "elastic-bulk";
    case Format::kJson:
      return "json";
  }
  return "unknown";
}

Result<ParseResult> ParseRequest(Format format, std::string_view body,
                                 const ParseOptions& options) {
  if (IsBlank(body)) return ParseResult{};
  try {
    switch (format) {
      case Format::kHumioStructured:
        return internal::ParseHumioStructured(body, options);
      case Format::kHumioUnstructured:
        return internal::ParseHumioUnstructured(body, options);
      case Format::kRaw:
        return internal::ParseLines(body, options, /*hec=*/false);
      case Format::kHecEvent:
        return internal::ParseHecEvents(body, options);
      case Format::kHecRaw:
        return internal::ParseLines(body, options, /*hec=*/true);
      case Format::kOtlpLogs:
        return internal::ParseOtlpLogs(body, options);
      case Format::kElasticBulk:
        return internal::ParseElasticBulk(body, options);
      case Format::kJson:
        return internal::ParseLogScaleJson(body, options);
    }
  } catch (const std::bad_alloc&) {
    return Status::TooLarge("out of memory while parsing the request");
  } catch (const std::exception& e) {
    return Status::Internal(std::string("ingest parse failed: ") + e.what());
  }
  return Status::InvalidArgument("unknown ingest format");
}

size_t LineBatch::EventBytes(size_t line_bytes) const {
  return Event::ByteSizeOf(line_bytes, fields);
}

ParseResult LineBatch::ToEvents() const {
  ParseOptions options;
  options.repo = datasource.repo;
  options.max_message_bytes = max_message_bytes;
  internal::Builder builder(options);
  std::vector<Event>* events = builder.Events({});
  events->reserve(lines.size());
  for (std::string_view line : lines) {
    Event& e = events->emplace_back();
    e.timestamp_ms = now_ms;
    e.ingest_ms = now_ms;
    e.raw.assign(line);
    e.fields = fields;
  }
  return builder.Finish();
}

Result<LineBatch> ParseLineBatch(Format format, std::string_view body,
                                 const ParseOptions& options) {
  if (format != Format::kRaw && format != Format::kHecRaw) {
    return Status::InvalidArgument(std::string("ParseLineBatch: ") + FormatName(format) +
                                   " is not a format of lines");
  }
  if (IsBlank(body)) {
    // ParseRequest's answer for a blank body: no events.
    LineBatch batch;
    batch.datasource.repo = options.repo;
    batch.now_ms = options.now_ms;
    batch.max_message_bytes = options.max_message_bytes;
    return batch;
  }
  try {
    return internal::ScanLines(body, options, /*hec=*/format == Format::kHecRaw);
  } catch (const std::bad_alloc&) {
    return Status::TooLarge("out of memory while parsing the request");
  } catch (const std::exception& e) {
    return Status::Internal(std::string("ingest parse failed: ") + e.what());
  }
}

ParseResult GroupEvents(TaggedEvents events, const ParseOptions& options) {
  internal::Builder builder(options);
  for (auto& [tags, event] : events) builder.Events(std::move(tags))->push_back(std::move(event));
  return builder.Finish();
}

uint64_t RandomMessageId() {
  thread_local std::mt19937_64 rng([] {
    std::random_device rd;
    return (static_cast<uint64_t>(rd()) << 32) ^ rd() ^
           static_cast<uint64_t>(SteadyNow().time_since_epoch().count());
  }());
  uint64_t id;
  do {
    id = rng();
  } while (id == 0);
  return id;
}

namespace {

// The partition of each message: its datasource's PartitionFor, or with a sharder one shard per
// datasource for the whole request (every message of a datasource goes to the same partition, so
// the request's events of a datasource keep their order).
std::vector<PartitionId> PartitionsOf(const std::vector<IngestMessage>& messages,
                                      int32_t partitions, DatasourceSharder* sharder) {
  std::vector<PartitionId> out;
  out.reserve(messages.size());
  if (sharder == nullptr || sharder->options().shard_bytes_per_second == 0) {
    for (const IngestMessage& msg : messages)
      out.push_back(msg.datasource.PartitionFor(partitions));
    return out;
  }
  // Datasources in order of first appearance, with the bytes of their events in this request.
  struct Group {
    const Datasource* datasource;
    uint64_t bytes = 0;
    PartitionId partition{0};
  };
  std::vector<Group> groups;
  std::vector<size_t> group_of(messages.size());
  for (size_t i = 0; i < messages.size(); ++i) {
    const IngestMessage& msg = messages[i];
    size_t g = 0;
    while (g < groups.size() && !(*groups[g].datasource == msg.datasource)) ++g;
    if (g == groups.size()) groups.push_back(Group{&msg.datasource});
    for (const Event& e : msg.events) groups[g].bytes += e.ByteSize();
    group_of[i] = g;
  }
  for (Group& g : groups) g.partition = sharder->Pick(*g.datasource, g.bytes, partitions);
  for (size_t i = 0; i < messages.size(); ++i) out.push_back(groups[group_of[i]].partition);
  return out;
}

}  // namespace

namespace {

// Appends record(i) to partition_of[i] for every i, in order, and waits until all are durable or
// `timeout` has passed: OK only when every one is; otherwise the first failing record's error,
// prefixed "message i of n" (records not encoded because one failed to encode count as failed).
Status AppendRecords(CommitLog* log, const std::vector<PartitionId>& partition_of,
                     const std::function<std::string(size_t)>& record,
                     std::chrono::milliseconds timeout,
                     std::chrono::steady_clock::time_point deadline) {
  const size_t n = partition_of.size();
  std::vector<std::future<Result<Offset>>> futures;
  futures.reserve(n);
  Status first;
  for (size_t i = 0; i < n; ++i) {
    try {
      futures.push_back(log->Append(partition_of[i], record(i)));
    } catch (const std::exception& e) {
      first = Status::Internal("message " + std::to_string(i) + ": append failed: " + e.what());
      break;
    }
  }
  for (size_t i = 0; i < futures.size(); ++i) {
    Status st;
    try {
      if (futures[i].wait_until(deadline) != std::future_status::ready) {
        st = Status::Unavailable("the commit log did not acknowledge within " +
                                 std::to_string(timeout.count()) + " ms");
      } else {
        Result<Offset> r = futures[i].get();
        st = r.status();
      }
    } catch (const std::exception& e) {
      st = Status::Internal(std::string("append failed: ") + e.what());
    }
    if (!st.ok() && first.ok()) {
      first = st.WithContext("message " + std::to_string(i) + " of " + std::to_string(n));
    }
  }
  return first;
}

}  // namespace

Status AppendAll(CommitLog* log, std::vector<IngestMessage> messages,
                 std::chrono::milliseconds timeout, DatasourceSharder* sharder) {
  const auto deadline = SteadyNow() + timeout;
  if (messages.empty()) return Status::OK();
  if (log == nullptr) return Status::Internal("AppendAll: no commit log");
  const int32_t partitions = log->partition_count();
  if (partitions <= 0) return Status::Internal("AppendAll: commit log has no partitions");
  return AppendRecords(
      log, PartitionsOf(messages, partitions, sharder),
      [&](size_t i) {
        IngestMessage& msg = messages[i];
        if (msg.id == 0) msg.id = RandomMessageId();
        return EncodeIngestMessage(msg, Codec::kLz4);
      },
      timeout, deadline);
}

Status AppendLines(CommitLog* log, const LineBatch& batch, std::chrono::milliseconds timeout,
                   DatasourceSharder* sharder) {
  const auto deadline = SteadyNow() + timeout;
  if (batch.lines.empty()) return Status::OK();
  if (log == nullptr) return Status::Internal("AppendLines: no commit log");
  const int32_t partitions = log->partition_count();
  if (partitions <= 0) return Status::Internal("AppendLines: commit log has no partitions");
  // The messages, as [begin, end) of the lines: cut where Builder::Finish cuts the events.
  std::vector<std::pair<size_t, size_t>> cuts;
  uint64_t total = 0;
  const size_t event_bytes = batch.EventBytes(0);  // what an event has besides its line
  for (size_t begin = 0; begin < batch.lines.size();) {
    size_t end = begin;
    size_t bytes = 0;
    while (end < batch.lines.size()) {
      const size_t sz = event_bytes + batch.lines[end].size();
      if (end > begin && bytes + sz > batch.max_message_bytes) break;
      bytes += sz;
      ++end;
    }
    cuts.emplace_back(begin, end);
    total += bytes;
    begin = end;
  }
  // One datasource: every message goes where PartitionsOf sends a request's messages of it.
  PartitionId partition = batch.datasource.PartitionFor(partitions);
  if (sharder != nullptr && sharder->options().shard_bytes_per_second != 0) {
    partition = sharder->Pick(batch.datasource, total, partitions);
  }
  const std::span<const std::string_view> lines(batch.lines);
  return AppendRecords(
      log, std::vector<PartitionId>(cuts.size(), partition),
      [&](size_t i) {
        return EncodeIngestLines(
            RandomMessageId(), batch.datasource, batch.now_ms, batch.now_ms, batch.fields,
            lines.subspan(cuts[i].first, cuts[i].second - cuts[i].first), Codec::kLz4);
      },
      timeout, deadline);
}

}  // namespace sediment::ingest
