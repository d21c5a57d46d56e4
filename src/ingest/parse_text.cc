// raw and HEC raw: one event per line.
#include <algorithm>
#include <string>

#include "ingest/internal.h"

namespace sediment::ingest::internal {

Result<ParseResult> ParseLines(std::string_view body, const ParseOptions& options, bool hec) {
  std::vector<Field> extra;
  if (hec) {
    for (const char* name : {"host", "source", "sourcetype", "channel"}) {
      auto it = options.params.find(name);
      if (it != options.params.end()) extra.push_back(Field{name, it->second});
    }
    auto index = options.params.find("index");
    if (index != options.params.end() && !index->second.empty() && index->second != options.repo) {
      return Status::InvalidArgument("index '" + index->second +
                                     "' does not match the token's repository '" + options.repo +
                                     "'");
    }
  }
  Builder builder(options);
  std::vector<Event>* events = builder.Events({});
  events->reserve(static_cast<size_t>(std::count(body.begin(), body.end(), '\n')) + 1);
  const char* const breaks = hec ? "\r\n" : "\n";
  size_t pos = 0;
  size_t line_no = 0;
  while (pos < body.size()) {
    size_t end = body.find_first_of(breaks, pos);
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
      Event& e = events->emplace_back();
      e.timestamp_ms = options.now_ms;
      e.ingest_ms = options.now_ms;
      e.raw.assign(line);
      if (!extra.empty()) e.fields = extra;
      if (TooBig(e, options)) return CheckEventSize(e, options, "line " + std::to_string(line_no));
    }
    ++line_no;
    pos = next;
  }
  return builder.Finish();
}

}  // namespace sediment::ingest::internal
