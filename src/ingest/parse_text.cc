// raw and HEC raw: one event per line.
#include <cstring>
#include <string>

#include "ingest/internal.h"

namespace sediment::ingest::internal {
namespace {

// How many times `b` occurs in `s`. memchr per occurrence: std::count compiled to a byte-at-a-time
// loop that took 90% of ParseLines (20% of the raw ack path's CPU).
size_t CountByte(std::string_view s, char b) {
  size_t n = 0;
  const char* p = s.data();
  const char* const end = p + s.size();
  while (p < end) {
    const void* hit = std::memchr(p, b, static_cast<size_t>(end - p));
    if (hit == nullptr) break;
    ++n;
    p = static_cast<const char*>(hit) + 1;
  }
  return n;
}

}  // namespace

Result<LineBatch> ScanLines(std::string_view body, const ParseOptions& options, bool hec) {
  LineBatch batch;
  batch.datasource.repo = options.repo;
  batch.now_ms = options.now_ms;
  batch.max_message_bytes = options.max_message_bytes;
  if (hec) {
    for (const char* name : {"host", "source", "sourcetype", "channel"}) {
      auto it = options.params.find(name);
      if (it != options.params.end()) batch.fields.push_back(Field{name, it->second});
    }
    auto index = options.params.find("index");
    if (index != options.params.end() && !index->second.empty() && index->second != options.repo) {
      return Status::InvalidArgument("index '" + index->second +
                                     "' does not match the token's repository '" + options.repo +
                                     "'");
    }
  }
  batch.lines.reserve(CountByte(body, '\n') + 1);
  const size_t event_bytes = batch.EventBytes(0);  // what an event has besides its line
  // The next line break at or after `from` (non-decreasing): '\n', or for HEC also '\r'. Each
  // byte is scanned at most once per character (the next '\n' is remembered across '\r's).
  // (find_first_of with a set of breaks ran a memchr over the set for every byte of the body:
  // 12% of the server's CPU while ingesting raw lines.)
  size_t nl = 0;
  bool nl_known = false;
  auto find_break = [&](size_t from) -> size_t {
    if (!nl_known || (nl != std::string_view::npos && nl < from)) {
      nl = body.find('\n', from);
      nl_known = true;
    }
    if (!hec) return nl;
    const size_t until = nl == std::string_view::npos ? body.size() : nl;
    const void* cr = std::memchr(body.data() + from, '\r', until - from);
    return cr != nullptr ? static_cast<size_t>(static_cast<const char*>(cr) - body.data()) : nl;
  };
  size_t pos = 0;
  size_t line_no = 0;
  while (pos < body.size()) {
    size_t end = find_break(pos);
    size_t next;
    if (end == std::string_view::npos) {
      end = body.size();
      next = end;
    } else {
      next = end + 1;
      if (body[end] == '\r' && next < body.size() && body[next] == '\n') ++next;
    }
    std::string_view line = body.substr(pos, end - pos);
    if (!hec && !line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (!line.empty()) {
      if (line.size() > options.max_event_bytes) {
        return CheckRawSize(line.size(), options, "line " + std::to_string(line_no));
      }
      if (const size_t bytes = event_bytes + line.size(); bytes > options.max_event_bytes) {
        return CheckEventBytes(line.size(), bytes, options, "line " + std::to_string(line_no));
      }
      batch.lines.push_back(line);
    }
    ++line_no;
    pos = next;
  }
  return batch;
}

Result<ParseResult> ParseLines(std::string_view body, const ParseOptions& options, bool hec) {
  auto batch = ScanLines(body, options, hec);
  if (!batch.ok()) return batch.status();
  return batch->ToEvents();
}

}  // namespace sediment::ingest::internal
